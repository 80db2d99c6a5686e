"""Crash safety, proven with SIGKILL (issue: durability §5; D18, D22).

For each named crash point and each durable store, the refund flow runs in subprocesses; the process
kills itself at the point; a fresh process resumes. Every cell must end COMPLETED with exactly one
refund row downstream, the approval kept, and the audit chain and bindings verified. A negative
control runs with the ledger bypassed and must see the double refund.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from callbound.demo.payments import FakePayments
from callbound.runtime.verify import verify_store
from callbound.stores import open_store

from .conftest import store_urls

CRASH_POINTS = [
    "after_ledger_started:submit_refund",
    "after_effect_before_result_commit:submit_refund",
    "after_result_commit",
    "waiting_approval",
    "after_approval_before_execution",
    "mid_stream",
]

PHASES = ["run", "approve", "resume"]


def phase(
    store_url: str,
    payments: str,
    op_id: str,
    name: str,
    crash_at: str | None,
    stream: bool,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CALLBOUND_CRASH_AT"}
    if crash_at:
        env["CALLBOUND_CRASH_AT"] = crash_at
    env.update(extra_env or {})
    args = [sys.executable, "-m", "tests.durability.crash_driver", store_url, payments, op_id, name]
    if stream:
        args.append("--stream")
    return subprocess.run(
        args, capture_output=True, text=True, env=env, timeout=120, cwd=Path(__file__).resolve().parents[2]
    )


def drive(store_url: str, payments: str, op_id: str, crash_at: str | None, stream: bool) -> tuple[int, str]:
    """Run the three phases; the first process to reach the crash point dies; each phase that died is
    run again by a fresh process without the crash. Returns (number of kills, final state)."""
    kills = 0
    armed = crash_at
    final = ""
    for name in PHASES:
        r = phase(store_url, payments, op_id, name, armed, stream)
        if r.returncode == -signal.SIGKILL:
            kills += 1
            armed = None
            if name == "run":
                r = phase(store_url, payments, op_id, "resume", None, stream)
            else:
                r = phase(store_url, payments, op_id, name, None, stream)
        assert r.returncode == 0, f"{name} failed: {r.stderr[-2000:]}"
        final = json.loads(r.stdout.strip().splitlines()[-1])["state"]
    return kills, final


@pytest.mark.slow
@pytest.mark.parametrize("crash_at", CRASH_POINTS)
@pytest.mark.parametrize("store_kind", ["sqlite", "postgres"])
def test_crash_point_leaves_exactly_one_refund(crash_at: str, store_kind: str, tmp_path: Path) -> None:
    store_url = store_urls(store_kind, tmp_path)
    payments = str(tmp_path / "payments.db")
    op_id = f"op_crash_{abs(hash((crash_at, store_kind, str(tmp_path)))):x}"
    kills, final = drive(store_url, payments, op_id, crash_at, stream=crash_at == "mid_stream")
    assert kills == 1, "the crash point was never reached"
    assert final == "COMPLETED"
    rows = FakePayments(payments).rows()
    assert len(rows) == 1, rows
    store = open_store(store_url)
    try:
        approvals = store.list_approvals(operation_id=op_id, status=None)
        assert [a.status for a in approvals] == ["approved"]
        assert verify_store(store, op_id) == []
    finally:
        store.close()


@pytest.mark.slow
def test_negative_control_without_the_ledger_refunds_twice(tmp_path: Path) -> None:
    """With the ledger bypassed, the same crash leads to a second refund: the harness can see one."""
    store_url = store_urls("sqlite", tmp_path)
    payments = str(tmp_path / "payments.db")
    op_id = "op_negative_control"
    env = {"CALLBOUND_UNSAFE_NO_LEDGER": "1"}
    phase(store_url, payments, op_id, "run", None, False, env)
    phase(store_url, payments, op_id, "approve", None, False, env)
    r = phase(
        store_url, payments, op_id, "resume", "after_effect_before_result_commit:submit_refund", False, env
    )
    assert r.returncode == -signal.SIGKILL
    r = phase(store_url, payments, op_id, "resume", None, False, env)
    assert r.returncode == 0, r.stderr
    assert len(FakePayments(payments).rows()) == 2
