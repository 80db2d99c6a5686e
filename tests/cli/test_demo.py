"""The demo's six scenarios end in the states D28 gives, through the real console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from callbound.demo.payments import FakePayments
from callbound.demo.refund import SCENARIOS

CLI = [sys.executable, "-m", "callbound.cli"]


def run_cli(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [*CLI, *args], cwd=cwd, capture_output=True, text=True, input=stdin or "", env=env, timeout=120
    )


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_reaches_documented_state(scenario: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'demo.db'}"
    r = run_cli(
        "demo", "refund", "--scenario", scenario, "--approve", "--json", "--store", store, cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    state, reason = SCENARIOS[scenario]
    assert data["state"] == state
    if reason:
        assert data["reason"] == reason
    expected_refunds = 1 if scenario in ("happy", "submit-timeout") else 0
    assert data["refunds_for_intent"] == expected_refunds


def test_non_interactive_demo_saves_waiting_then_approve_and_resume_from_other_processes(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'demo.db'}"
    r = run_cli("demo", "refund", "--json", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    waiting = json.loads(r.stdout)
    assert waiting["state"] == "WAITING_APPROVAL"
    approval_id = waiting["pending_approvals"][0]["approval_id"]
    op = waiting["operation_id"]

    listed = run_cli("approvals", "list", "--json", "--store", store, cwd=tmp_path)
    assert approval_id in listed.stdout

    r = run_cli("approvals", "approve", approval_id, "--approver", "alice", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # single use: the same decision again is a no-op reporting the original
    r = run_cli("approvals", "approve", approval_id, "--approver", "alice", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # a different decision is refused
    r = run_cli("approvals", "deny", approval_id, "--approver", "bob", "--store", store, cwd=tmp_path)
    assert r.returncode == 2

    r = run_cli("resume", op, "--json", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["state"] == "COMPLETED"
    assert FakePayments(str(tmp_path / "demo-payments.db")).count() == 1

    r = run_cli("resume", op, "--store", store, cwd=tmp_path)
    assert r.returncode == 2  # a finished operation cannot be resumed (D2)

    r = run_cli("audit", "verify", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    shown = run_cli("ops", "show", op, "--store", store, cwd=tmp_path)
    assert "WAITING_APPROVAL" in shown.stdout and approval_id in shown.stdout


def test_self_approval_is_refused(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'demo.db'}"
    waiting = json.loads(run_cli("demo", "refund", "--json", "--store", store, cwd=tmp_path).stdout)
    approval_id = waiting["pending_approvals"][0]["approval_id"]
    r = run_cli(
        "approvals", "approve", approval_id, "--approver", "customer-1", "--store", store, cwd=tmp_path
    )
    assert r.returncode == 2
    assert "own call" in r.stderr


def test_deny_tells_the_model_and_nothing_is_refunded(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'demo.db'}"
    r = run_cli("demo", "refund", "--deny", "--json", "--store", store, cwd=tmp_path)
    data = json.loads(r.stdout)
    assert data["state"] == "COMPLETED"  # the scripted model still answers; the refund never ran
    assert data["refunds_for_intent"] == 0
    # and it answers what the denial said, not that the refund was submitted (a reviewer's finding)
    assert data["text"] == "The refund was not approved, so no refund was made."


def test_each_demo_in_one_store_is_its_own_refund(tmp_path: Path) -> None:
    """A second demo in the same store used to replay the first run's refund (its intent was the
    draft dr_A1, the same in every run): a plain run never paused, approval-expired reported a replayed
    refund. Each run now creates its own draft; a run still submits its refund once."""
    store = f"sqlite:///{tmp_path / 'demo.db'}"
    first = json.loads(
        run_cli("demo", "refund", "--approve", "--json", "--store", store, cwd=tmp_path).stdout
    )
    assert (first["state"], first["refunds_for_intent"]) == ("COMPLETED", 1)
    expired = run_cli(
        "demo", "refund", "--scenario", "approval-expired", "--json", "--store", store, cwd=tmp_path
    )
    data = json.loads(expired.stdout)
    assert (data["state"], data["refunds_for_intent"]) == ("COMPLETED", 0)
    assert "expired" in data["text"]
    again = run_cli("demo", "refund", "--json", "--store", store, cwd=tmp_path, stdin="")
    assert json.loads(again.stdout)["state"] == "WAITING_APPROVAL"


def test_stream_demo_shows_progress(tmp_path: Path) -> None:
    r = run_cli("demo", "refund", "--stream", "--approve", "--store", "memory:", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "model is preparing call get_order" in r.stdout
    assert "bytes)" in r.stdout


def test_memory_store_demo_does_not_promise_another_shell_and_leaves_nothing(tmp_path: Path) -> None:
    """An in-memory operation dies with the process: no approve/resume commands for "any shell", and
    no temporary payments directory left behind."""
    env_tmp = tmp_path / "tmp"
    env_tmp.mkdir()
    r = subprocess.run(
        [*CLI, "demo", "refund", "--store", "memory:"],
        cwd=tmp_path,
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TMPDIR": str(env_tmp)},
    )
    assert r.returncode == 0, r.stderr
    assert "in-memory store" in r.stdout and "callbound resume" not in r.stdout
    assert list(env_tmp.iterdir()) == []


def test_a_relative_store_saves_an_absolute_payments_path_so_resume_from_elsewhere_pays_once(
    tmp_path: Path,
) -> None:
    """The payments file's path is saved with the operation; resumed from another directory (with the
    store named absolutely) it must be the same file, not a new one beside the new cwd."""
    first = tmp_path / "first"
    other = tmp_path / "other"
    first.mkdir()
    other.mkdir()
    r = run_cli("demo", "refund", "--json", "--store", "sqlite:demo.db", cwd=first)
    assert r.returncode == 0, r.stderr
    waiting = json.loads(r.stdout)
    approval_id = waiting["pending_approvals"][0]["approval_id"]
    store = f"sqlite:///{first / 'demo.db'}"
    r = run_cli("approvals", "approve", approval_id, "--approver", "alice", "--store", store, cwd=other)
    assert r.returncode == 0, r.stderr
    r = run_cli("resume", waiting["operation_id"], "--json", "--store", store, cwd=other)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["state"] == "COMPLETED"
    assert FakePayments(str(first / "demo-payments.db")).count() == 1
    assert not (other / "demo-payments.db").exists()


def test_approving_an_expired_approval_says_it_cannot_take_effect(tmp_path: Path) -> None:
    """D17: a decision after expires_at is recorded, but `approvals approve` must not read as if the
    refund will now go ahead: it warns that the call will not run; resume tells the model
    APPROVAL_EXPIRED and nothing is refunded. A day passing is simulated by moving the stored expiry
    into the past."""
    import sqlite3

    store = f"sqlite:///{tmp_path / 'demo.db'}"
    r = run_cli("demo", "refund", "--json", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    waiting = json.loads(r.stdout)
    approval_id = waiting["pending_approvals"][0]["approval_id"]
    conn = sqlite3.connect(tmp_path / "demo.db")
    (text,) = conn.execute("SELECT data FROM approvals WHERE approval_id = ?", (approval_id,)).fetchone()
    data = json.loads(text)
    data["expires_at"] = "2001-01-01T00:00:00+00:00"
    conn.execute(
        "UPDATE approvals SET data = ?, expires_us = 978307200000000 WHERE approval_id = ?",
        (json.dumps(data), approval_id),
    )
    conn.commit()
    conn.close()
    r = run_cli("approvals", "approve", approval_id, "--approver", "alice", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "had expired at 2001-01-01" in r.stderr and "will not run" in " ".join(r.stderr.split())
    assert "after it expired" in r.stdout
    r = run_cli("resume", waiting["operation_id"], "--json", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["state"] == "COMPLETED"
    assert FakePayments(str(tmp_path / "demo-payments.db")).count() == 0
