"""Review round 18, c F4: a deadline too far off for a ``datetime`` runs the tools, never an
OverflowError out of ``run`` or ``resume`` (D4, D14).

``Budgets(deadline_s=...)`` takes any finite number of seconds > 0, and one meant as "no limit"
(``1e12``, ``1e300``) is one. ``CallContext.deadline`` is the moment that active time runs out, and
``now + timedelta(seconds=1e12)`` is past year 9999: OverflowError ("date value out of range", or "Python
int too large to convert to C int") escaped ``run`` after the paid model turn, and for an approved
refund out of ``resume``, its handler never called. The deadline a handler is told is now the latest
moment a ``datetime`` holds when the true one lies beyond it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import callbound as cb

from .helpers import Counter, OrderArgs, calls, fc, final, get_order_tool, make, refund_tool

LATEST = datetime.max.replace(tzinfo=UTC)


@pytest.mark.parametrize("deadline_s", [1e12, 1e300])
async def test_a_read_runs_under_a_deadline_past_year_9999(deadline_s: float) -> None:
    told: list[datetime] = []

    def get_order(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        told.append(ctx.deadline)
        return {"order_id": args.order_id}

    h = make(
        [calls("r1", fc("c1", "get_order", {"order_id": "A1"})), final("r2")],
        [get_order_tool(handler=get_order)],
        budgets=cb.Budgets(deadline_s=deadline_s),
    )
    out = await h.run()  # was: OverflowError
    assert out.state == cb.State.COMPLETED
    assert told == [LATEST]


async def test_an_approved_refund_runs_under_a_deadline_past_year_9999() -> None:
    refunds = Counter()
    h = make(
        [calls("r1", fc("c1", "refund", {"order_id": "A1", "amount": 40})), final("r2")],
        [refund_tool(refunds)],
        budgets=cb.Budgets(deadline_s=1e12),
    )
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    (pending,) = out.pending_approvals
    out = await h.runner.resume(
        out.operation_id, [cb.Decision.approve(pending.approval_id, approver="alice")]
    )
    assert out.state == cb.State.COMPLETED
    assert refunds.n == 1


async def test_a_near_deadline_is_still_told_exactly() -> None:
    told: list[datetime] = []

    def get_order(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        told.append(ctx.deadline)
        return {"order_id": args.order_id}

    h = make(
        [calls("r1", fc("c1", "get_order", {"order_id": "A1"})), final("r2")],
        [get_order_tool(handler=get_order)],
        budgets=cb.Budgets(deadline_s=120),
    )
    start = h.clock.now()
    assert (await h.run()).state == cb.State.COMPLETED
    assert [(d - start).total_seconds() for d in told] == [120.0]
