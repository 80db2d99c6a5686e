"""The command line against what README.md, docs/durability.md and D28 promise: exit codes, error
messages for bad input, withdrawn approvals, workers. Every command runs as a subprocess, as a user
would run it."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

import callbound as cb
from callbound.demo.refund import make_app
from callbound.stores import open as open_store

CLI = [sys.executable, "-m", "callbound.cli"]


def cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, columns: str | None = "200"
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        full["COLUMNS"] = columns
    full.update(env or {})
    return subprocess.run(
        [*CLI, *args], cwd=cwd, capture_output=True, text=True, input="", env=full, timeout=120
    )


def no_traceback(r: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr


def waiting_demo(tmp_path: Path) -> tuple[str, str, str]:
    """A demo operation saved WAITING_APPROVAL (no terminal, no --approve): store, op id, approval id."""
    store = f"sqlite:///{tmp_path / 'demo.db'}"
    r = cli("demo", "refund", "--json", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["state"] == "WAITING_APPROVAL"
    return store, data["operation_id"], data["pending_approvals"][0]["approval_id"]


# --- behaviour that matches the docs (regression guards for what no other CLI test covers) ---


def test_cancel_withdraws_the_pending_approval_and_list_all_shows_it(tmp_path: Path) -> None:
    """durability.md: an operation that ends while approvals are pending marks them `withdrawn`: not
    listed as pending, shown by `approvals list --all`, and deciding one is refused (exit 2)."""
    store, op, approval_id = waiting_demo(tmp_path)
    r = cli("ops", "cancel", op, "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "STOPPED (CANCELLED)" in r.stdout

    pending = cli("approvals", "list", "--json", "--store", store, cwd=tmp_path)
    assert pending.returncode == 0 and json.loads(pending.stdout) == []
    everything = json.loads(
        cli("approvals", "list", "--all", "--json", "--store", store, cwd=tmp_path).stdout
    )
    assert [(a["approval_id"], a["status"]) for a in everything] == [(approval_id, "withdrawn")]
    assert everything[0]["reason"] == "the operation ended STOPPED(CANCELLED)"

    r = cli("approvals", "approve", approval_id, "--approver", "alice", "--store", store, cwd=tmp_path)
    assert r.returncode == 2 and "withdrawn" in r.stderr
    no_traceback(r)
    for args in (["ops", "cancel", op], ["resume", op]):  # already ended: usage errors, not crashes
        r = cli(*args, "--store", store, cwd=tmp_path)
        assert r.returncode == 2, (args, r.stderr)
        no_traceback(r)
    shown = json.loads(cli("ops", "show", op, "--json", "--store", store, cwd=tmp_path).stdout)
    assert (shown["head"]["state"], shown["head"]["reason"]) == ("STOPPED", "CANCELLED")
    assert cli("audit", "verify", op, "--store", store, cwd=tmp_path).returncode == 0


def test_unknown_ids_and_the_wrong_tenant_are_usage_errors(tmp_path: Path) -> None:
    store, _, approval_id = waiting_demo(tmp_path)
    cases = [
        (["ops", "show", "op_nope"], "no operation 'op_nope'"),
        (["ops", "cancel", "op_nope"], "no operation 'op_nope'"),
        (["resume", "op_nope"], "no operation 'op_nope'"),
        (["audit", "verify", "op_nope"], "no operation 'op_nope'"),
        (["approvals", "approve", "apr_nope", "--approver", "alice"], "no approval 'apr_nope'"),
        (["approvals", "deny", "apr_nope", "--approver", "alice"], "no approval 'apr_nope'"),
        # durability.md: an approver of another tenant gets UnknownApproval
        (["approvals", "approve", approval_id, "--approver", "alice", "--tenant", "other"], "tenant"),
    ]
    for args, message in cases:
        r = cli(*args, "--store", store, cwd=tmp_path)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert message in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    # nothing above decided anything
    listed = json.loads(cli("approvals", "list", "--json", "--store", store, cwd=tmp_path).stdout)
    assert [(a["approval_id"], a["status"]) for a in listed] == [(approval_id, "pending")]


@pytest.mark.parametrize(
    "args",
    [
        ["ops", "list"],
        ["ops", "show", "op_x"],
        ["ops", "cancel", "op_x"],
        ["approvals", "list"],
        ["approvals", "approve", "apr_x", "--approver", "alice"],
        ["resume", "op_x"],
        ["audit", "verify"],
        ["demo", "refund", "--approve"],
        ["worker", "--app", "callbound.demo.refund:make_app", "--idle-exit", "0.1"],
    ],
)
@pytest.mark.parametrize(
    "url", ["bogus://x", "callbound.db", "memory:foo", "sqlite:////nonexistent-dir/x.db"]
)
def test_a_bad_store_url_is_a_one_line_usage_error(args: list[str], url: str, tmp_path: Path) -> None:
    r = cli(*args, "--store", url, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith("error:") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("nomodule_callbound_review:make", "cannot import"),
        ("callbound.demo.refund", "module:factory"),
        ("callbound.demo.refund:nope", "callable factory"),
        ("os:getcwd", "expected callbound.runtime.app.App"),
        ("json:dumps", "TypeError"),
    ],
)
def test_a_bad_app_is_a_usage_error_for_worker_and_resume(ref: str, message: str, tmp_path: Path) -> None:
    store, op, _ = waiting_demo(tmp_path)
    for args in (["worker", "--app", ref, "--idle-exit", "0.1"], ["resume", op, "--app", ref]):
        r = cli(*args, "--store", store, cwd=tmp_path)
        assert r.returncode == 2, (args, r.stderr)
        assert message in r.stderr, (args, r.stderr)
        no_traceback(r)


def test_worker_drives_a_queued_operation_pauses_and_finishes_after_a_cli_approval(tmp_path: Path) -> None:
    """README: `callbound worker --app module:factory --store URL` claims queued operations; it
    exits on its own with --idle-exit and prints its counts."""
    url = f"sqlite:///{tmp_path / 'w.db'}"
    args = {"scenario": "happy", "payments": str(tmp_path / "w-payments.db"), "stream": False}
    store = open_store(url)
    runner = make_app(**args).runner(store, ref={"ref": "callbound.demo.refund:make_app", "args": args})
    op = runner.submit("Refund order A1", tenant="acme", subject="customer-1")
    worker = ["worker", "--app", "callbound.demo.refund:make_app", "--store", url, "--idle-exit", "0.5"]

    r = cli(*worker, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "claimed 1, finished 0, paused 1" in r.stdout
    approval = json.loads(cli("approvals", "list", "--json", "--store", url, cwd=tmp_path).stdout)[0]
    r = cli(
        "approvals", "approve", approval["approval_id"], "--approver", "alice", "--store", url, cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    r = cli(*worker, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "claimed 1, finished 1" in r.stdout
    shown = json.loads(cli("ops", "show", op, "--json", "--store", url, cwd=tmp_path).stdout)
    assert shown["head"]["state"] == "COMPLETED"
    assert cli("audit", "verify", "--store", url, cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("api", ["openai-responses", "anthropic-messages", "gemini-generate"])
def test_run_without_a_key_names_the_variable_with_json_too(api: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    r = subprocess.run(
        [*CLI, "run", "--api", api, "--model", "m", "--json", "Refund order A1", "--store", "memory:"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 2
    assert r.stdout == ""
    assert "environment variable" in r.stderr and "_API_KEY" in r.stderr


# --- mismatches: the code contradicts the docs or D28 ---


def test_eof_at_the_demo_prompt_is_not_exit_1_and_says_how_to_continue(tmp_path: Path) -> None:
    master, slave = pty.openpty()  # stdin is a terminal: the demo prompts (D28)
    try:
        p = subprocess.Popen(
            [*CLI, "demo", "refund", "--store", f"sqlite:///{tmp_path / 'demo.db'}"],
            cwd=tmp_path,
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        os.close(slave)
        os.write(master, b"\x04")  # Ctrl-D: end of input at the prompt
        out, err = p.communicate(timeout=60)
    finally:
        os.close(master)
    assert "Approve this call?" in out
    assert p.returncode != 1, err
    assert "callbound resume op_" in out


@pytest.mark.parametrize("command", ["approve", "deny", "cancel"])
def test_an_operation_saved_without_an_app_can_be_decided_and_cancelled(command: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'code.db'}"
    demo = make_app(scenario="happy", payments=str(tmp_path / "p.db"))
    runner = cb.Runner(
        model=demo.model,
        registry=demo.registry,
        policy=demo.policy,
        budgets=demo.budgets,
        store=open_store(url),
    )
    outcome = runner.run_sync(input="Refund order A1", tenant="acme", subject="customer-1")
    assert outcome.state == "WAITING_APPROVAL"
    approval_id = outcome.pending_approvals[0].approval_id
    app = ["--app", "callbound.demo.refund:make_app", "--store", url]
    if command == "cancel":
        r = cli("ops", "cancel", outcome.operation_id, *app, cwd=tmp_path)
    else:
        r = cli("approvals", command, approval_id, "--approver", "alice", *app, cwd=tmp_path)
    assert r.returncode == 0, r.stderr


def test_list_commands_print_whole_ids_at_the_default_width(tmp_path: Path) -> None:
    store, op, approval_id = waiting_demo(tmp_path)
    approvals = cli("approvals", "list", "--store", store, cwd=tmp_path, columns=None)
    ops = cli("ops", "list", "--store", store, cwd=tmp_path, columns=None)
    assert approvals.returncode == 0 and ops.returncode == 0
    assert approval_id in approvals.stdout, approvals.stdout
    assert op in ops.stdout, ops.stdout


@pytest.mark.parametrize("state", ["BOGUS", "completed"])
def test_ops_list_rejects_an_unknown_state(state: str, tmp_path: Path) -> None:
    store, _, _ = waiting_demo(tmp_path)
    r = cli("ops", "list", "--state", state, "--json", "--store", store, cwd=tmp_path)
    assert r.returncode == 2, r.stdout


def test_ops_list_negative_limit_is_refused_or_empty(tmp_path: Path) -> None:
    store, _, _ = waiting_demo(tmp_path)
    r = cli("ops", "list", "--limit", "-1", "--json", "--store", store, cwd=tmp_path)
    assert r.returncode == 2 or json.loads(r.stdout) == [], r.stdout
