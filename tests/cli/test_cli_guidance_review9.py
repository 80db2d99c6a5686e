"""The commands the CLI tells a user to run next work when they are run as printed (D28: the CLI prints
the commands that approve and resume; D21: an operation created in code has no saved application, so
every command that rebuilds its runner needs ``--app``)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
APP = "tests.durability.worker_app:make_app"


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "CALLBOUND_TEST_PAYMENTS": str(tmp_path / "payments.db")}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "callbound.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        input="",
        env=_env(cwd),
        timeout=120,
    )


def _paused_in_code(tmp_path: Path, store: str) -> tuple[str, str]:
    """An operation started in code with no saved application, paused for approval: (op, approval)."""
    code = (
        "import json, callbound.stores\n"
        "from tests.durability.worker_app import make_app\n"
        f"st = callbound.stores.open({store!r})\n"
        "o = make_app().runner(st).run_sync(input='refund', tenant='acme', subject='bob')\n"
        "print(json.dumps([o.state, o.operation_id, o.pending_approvals[0].approval_id]))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=_env(tmp_path)
    )
    assert r.returncode == 0, r.stderr
    state, op, approval = json.loads(r.stdout.strip().splitlines()[-1])
    assert state == "WAITING_APPROVAL"
    return op, approval


def _hint(stdout: str) -> list[str]:
    (line,) = [x for x in stdout.splitlines() if x.startswith("resume with: ")]
    words = shlex.split(line.removeprefix("resume with: "))
    assert words[0] == "callbound"
    return words[1:]


def test_approve_with_app_hints_a_resume_that_names_the_app_and_works(tmp_path: Path) -> None:
    """D21: the operation has no saved application, so `resume` needs the --app the approve was given;
    the hint used to leave it out, and following it failed with "has no saved application"."""
    store = f"sqlite:///{tmp_path / 'cb.db'}"
    op, approval = _paused_in_code(tmp_path, store)
    r = cli(
        "approvals", "approve", approval, "--approver", "alice", "--app", APP, "--store", store, cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    hint = _hint(r.stdout)
    assert hint[:2] == ["resume", op] and "--app" in hint and APP in hint
    r = cli(*hint, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout[r.stdout.index("{") :])["state"] == "COMPLETED"


def test_approve_of_an_operation_with_a_saved_app_hints_a_resume_without_app(tmp_path: Path) -> None:
    """D21: the saved application is used; the hint need not (and does not) repeat it."""
    store = f"sqlite:///{tmp_path / 'cb.db'}"
    r = cli("run", "refund", "--app", APP, "--json", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    waiting = json.loads(r.stdout[r.stdout.index("{") :])
    approval = waiting["pending_approvals"][0]["approval_id"]
    r = cli("approvals", "approve", approval, "--approver", "alice", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    hint = _hint(r.stdout)
    assert "--app" not in hint
    r = cli(*hint, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout[r.stdout.index("{") :])["state"] == "COMPLETED"


def test_run_with_a_memory_store_does_not_offer_options_run_lacks(tmp_path: Path) -> None:
    """D28: `run` has no --approve/--deny; with memory: the paused operation is gone when the process
    exits, and the message says so and names a durable --store instead."""
    r = cli("run", "refund", "--app", APP, "--store", "memory:", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "--approve" not in r.stdout and "--deny" not in r.stdout
    assert "lost" in r.stdout and "--store sqlite:///callbound.db" in r.stdout
    assert "callbound resume" not in r.stdout
    # what it names is an option run takes
    assert "No such option" not in cli("run", "--help", cwd=tmp_path).stdout
    assert "--store" in cli("run", "--help", cwd=tmp_path).stdout


def test_demo_with_a_memory_store_still_offers_approve_and_deny(tmp_path: Path) -> None:
    """D28: the demo does decide with --approve/--deny, so its message keeps them."""
    r = cli("demo", "refund", "--store", "memory:", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "--approve or --deny" in r.stdout
    assert "callbound resume" not in r.stdout


def test_enter_at_the_demo_prompt_denies_as_the_readme_says(tmp_path: Path) -> None:
    """D28: in a terminal the demo asks; the README said "no answer at the prompt" saves the operation,
    but Enter is an answer: the prompt's default, No, which denies. Only end of input or Ctrl-C saves
    it (tests/cli/test_cli_promises_review.py checks end of input)."""
    import pty
    import re

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "no answer at the prompt" not in readme
    assert re.search(r"`n` or Enter\s+denies", readme)
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "callbound.cli",
                "demo",
                "refund",
                "--store",
                f"sqlite:///{tmp_path / 'd.db'}",
            ],
            cwd=tmp_path,
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        os.close(slave)
        os.write(master, b"\r")  # Enter
        out, err = p.communicate(timeout=60)
    finally:
        os.close(master)
    assert "Approve this call? [y/N]" in out
    assert p.returncode == 0, err
    assert "COMPLETED" in out and "refunds recorded downstream for this intent: 0" in out
    assert "callbound resume" not in out
