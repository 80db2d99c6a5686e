"""`callbound run --app module:factory` (D21): the user's own App, saved with its reference so approve and
resume rebuild the same runner; without --app, --api and --model are required (exit 2, D28)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
APP = "tests.durability.worker_app:make_app"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CALLBOUND_TEST_PAYMENTS": str(cwd / "payments.db")}
    return subprocess.run(
        [sys.executable, "-m", "callbound.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        input="",
        env=env,
        timeout=120,
    )


def test_run_with_an_app_pauses_then_approve_and_resume_complete_it(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'cb.db'}"
    r = cli("run", "Refund my order", "--app", APP, "--json", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    waiting = json.loads(r.stdout[r.stdout.index("{") :])
    assert waiting["state"] == "WAITING_APPROVAL"
    (approval,) = waiting["pending_approvals"]
    op = waiting["operation_id"]
    r = cli(
        "approvals", "approve", approval["approval_id"], "--approver", "alice", "--store", store, cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    r = cli("resume", op, "--json", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout[r.stdout.index("{") :])["state"] == "COMPLETED"
    assert cli("audit", "verify", "--store", store, cwd=tmp_path).returncode == 0


def test_run_without_app_needs_api_and_model(tmp_path: Path) -> None:
    r = cli("run", "x", "--store", f"sqlite:///{tmp_path / 'cb.db'}", cwd=tmp_path)
    assert r.returncode == 2
    assert "--api and --model" in r.stderr


def test_run_with_an_app_that_cannot_be_loaded_is_a_usage_error(tmp_path: Path) -> None:
    r = cli(
        "run", "x", "--app", "no_such_module:make", "--store", f"sqlite:///{tmp_path / 'cb.db'}", cwd=tmp_path
    )
    assert r.returncode == 2
    assert "no_such_module" in r.stderr


def test_a_hung_sync_handler_does_not_keep_the_command_from_exiting(tmp_path: Path) -> None:
    """The read handler sleeps 60 s against its 5 s timeout. The operation goes on without it (the
    call ends as a timeout); the command then exits after the handler's grace period with a warning,
    instead of waiting for the thread (which a thread pool joined at interpreter exit did)."""
    import time

    store = f"sqlite:///{tmp_path / 'cb.db'}"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "CALLBOUND_TEST_PAYMENTS": str(tmp_path / "payments.db"),
        "CALLBOUND_TEST_SLOW_READ": "60",
    }
    started = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "callbound.cli", "run", "Refund", "--app", APP, "--json", "--store", store],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=55,
    )
    elapsed = time.monotonic() - started
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout[r.stdout.index("{") :])["state"] == "WAITING_APPROVAL"
    assert "still running; exiting without waiting" in " ".join(r.stderr.split())
    assert elapsed < 40, elapsed
