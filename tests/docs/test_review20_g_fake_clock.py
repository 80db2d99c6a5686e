"""Review round 20, g: FakeClock keeps D23's contract of every clock, "now() (timezone-aware UTC)".
``FakeClock(current=datetime(2026, 1, 1))`` (naive) was kept as given: an operation run under it
stamped its approval's expiry naive, and resuming it raised TypeError ("can't subtract offset-naive
and offset-aware datetimes") out of resume_sync, which D4 allows only UsageError and StoreError to
leave; a str ``current`` raised AttributeError out of run. Now FakeClock(...) refuses them with a
UsageError, keeps an aware one in UTC, and moves only forward (docs/reference.md says so)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.stores.memory import MemoryStore
from callbound.testing import FakeClock, ScriptedModel


class _Refund(BaseModel):
    order_id: str


CALL = {
    "id": "r1",
    "status": "completed",
    "output": [
        {
            "type": "function_call",
            "id": "fc",
            "call_id": "c1",
            "name": "refund",
            "arguments": '{"order_id": "A1"}',
        }
    ],
}
ANSWER = {
    "id": "r2",
    "status": "completed",
    "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}
    ],
}
REGISTRY = cb.Registry(
    [
        cb.ToolSpec(
            name="refund",
            description="Refund an order",
            params=_Refund,
            handler=lambda args, ctx: {"refund_id": "rf_1"},
            schema_version="v1",
            risk="irreversible",
        )
    ]
)


@pytest.mark.parametrize("current", [datetime(2026, 1, 1), "2026-01-01", None, 0])
def test_a_current_that_is_no_aware_datetime_is_a_usage_error(current: Any) -> None:
    with pytest.raises(cb.UsageError, match="timezone-aware datetime"):
        FakeClock(current=current)


def test_an_aware_current_is_kept_in_utc_and_an_operation_resumes_under_it() -> None:
    clock = FakeClock(current=datetime(2026, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=2))))
    assert clock.now() == datetime(2026, 1, 1, tzinfo=UTC) and clock.now().tzinfo is UTC
    store = MemoryStore()
    runner = cb.Runner(
        model=ScriptedModel("openai-responses", [CALL, ANSWER]), registry=REGISTRY, clock=clock, store=store
    )
    outcome = runner.run_sync(input="Refund A1", tenant="acme", subject="user-1")
    (pending,) = outcome.pending_approvals
    assert pending.expires_at == datetime(2026, 1, 2, tzinfo=UTC)
    # resumed by a runner on the system clock (another process, say), as the naive case was
    other = cb.Runner(model=ScriptedModel("openai-responses", [CALL, ANSWER]), registry=REGISTRY, store=store)
    decision = cb.Decision.approve(pending.approval_id, approver="alice")
    assert other.resume_sync(outcome.operation_id, [decision]).state == "COMPLETED"


@pytest.mark.parametrize("seconds", [-1, float("nan"), float("inf"), True, "5"])
def test_advance_goes_forward_by_finite_seconds_only(seconds: Any) -> None:
    clock = FakeClock()
    with pytest.raises(cb.UsageError, match="advance"):
        clock.advance(seconds)
    assert (clock.now(), clock.monotonic()) == (datetime(2026, 1, 1, tzinfo=UTC), 0.0)


def test_advance_and_sleep_move_it_forward() -> None:
    clock = FakeClock()
    clock.advance(90)
    asyncio.run(clock.sleep(30))
    asyncio.run(clock.sleep(-5))  # as asyncio.sleep: no time passes, nothing goes back
    assert clock.now() == datetime(2026, 1, 1, 0, 2, tzinfo=UTC)
    assert (clock.monotonic(), clock.slept) == (120.0, [30, -5])


@pytest.mark.parametrize("mono", [float("nan"), "0", None])
def test_mono_is_a_finite_number(mono: Any) -> None:
    with pytest.raises(cb.UsageError, match="mono"):
        FakeClock(mono=mono)
