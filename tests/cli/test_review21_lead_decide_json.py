"""``approvals approve|deny --json`` print the decision as one JSON object, so a script can act on it
without parsing the text: the approval as ``approvals list --json`` shows it, whether this command
recorded it, the operation's state, whether resuming acts on it, and the resume command (or null)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from callbound.cli.app import app


def _paused(runner: CliRunner, url: str) -> str:
    paused = runner.invoke(app, ["demo", "refund", "--json", "--store", url])
    assert paused.exit_code == 0, paused.output
    return str(json.loads(paused.output)["pending_approvals"][0]["approval_id"])


def _decide(runner: CliRunner, url: str, *args: str) -> dict[str, Any]:
    r = runner.invoke(app, ["approvals", *args, "--approver", "alice", "--json", "--store", url])
    assert r.exit_code == 0, r.output
    parsed: dict[str, Any] = json.loads(r.stdout)
    return parsed


def test_approve_json_is_the_decision_and_the_next_command(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cb.db'}"
    runner = CliRunner()
    approval_id = _paused(runner, url)
    first = _decide(runner, url, "approve", approval_id)
    listed = runner.invoke(app, ["approvals", "list", "--all", "--json", "--store", url])
    (stored,) = json.loads(listed.output)
    assert first["approval"] == stored
    assert first["approval"]["status"] == "approved" and first["recorded_now"] is True
    assert first["operation_state"] == "WAITING_APPROVAL" and first["takes_effect"] is True
    command = shlex.split(first["resume"])
    assert command[:3] == ["callbound", "resume", stored["operation_id"]] and url in command
    again = _decide(runner, url, "approve", approval_id)
    assert again["recorded_now"] is False and again["approval"] == stored
    resumed = runner.invoke(app, command[1:])
    assert resumed.exit_code == 0, resumed.output
    after = _decide(runner, url, "approve", approval_id)
    assert after["operation_state"] == "COMPLETED"
    assert after["takes_effect"] is False and after["resume"] is None


def test_deny_json_says_denied_with_its_reason(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cb.db'}"
    runner = CliRunner()
    approval_id = _paused(runner, url)
    denied = _decide(runner, url, "deny", approval_id, "--reason", "not this one")
    assert denied["approval"]["status"] == "denied" and denied["approval"]["reason"] == "not this one"
    assert denied["recorded_now"] is True and denied["takes_effect"] is True and denied["resume"]


def test_a_late_approval_in_json_warns_on_stderr_and_does_not_take_effect(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys
    import time

    from tests.cli.test_approve_warning import APP, ROOT

    (tmp_path / "stopapp.py").write_text(APP)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'src'}"}
    store = f"sqlite:///{tmp_path / 'cb.db'}"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "callbound.cli", *args],
            cwd=tmp_path,
            env=env,
            text=True,
            capture_output=True,
            timeout=120,
        )

    run = cli("run", "--app", "stopapp:make", "--store", store, "--json", "refund A1")
    assert run.returncode == 0, run.stderr
    approval_id = json.loads(run.stdout)["pending_approvals"][0]["approval_id"]
    time.sleep(1.2)  # past the approval's one-second lifetime
    approve = cli("approvals", "approve", approval_id, "--approver", "alice", "--json", "--store", store)
    assert approve.returncode == 0, approve.stderr
    assert "STOPPED(APPROVAL_EXPIRED)" in approve.stderr
    decided = json.loads(approve.stdout)
    assert decided["approval"]["status"] == "approved" and decided["takes_effect"] is False
    assert decided["operation_state"] == "WAITING_APPROVAL" and decided["resume"]
