"""Review round 15 (r1, F1 and F2): the deadline inside a turn (D14: ``deadline`` bounds active time).

F1: a mixed turn whose read uses up the deadline, with an irreversible call that needs approval, went
to WAITING_APPROVAL and asked a human for a call that could never run (the approval then led to
STOPPED(DEADLINE)). It stops DEADLINE at once, its approval withdrawn, as a read and a write did.
F2: once one read of a turn used up the deadline, the turn's later reads (waiting for a slot, D15)
still started their handlers, with a ``CallContext.deadline`` already past. No read handler starts
then: the read stays unrun and the operation stops DEADLINE, as a write that finds the deadline spent.
The injected clock (D23) moves only inside handlers here; with the real clock the turn's slots stop
the later reads too (kept).
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest

import callbound as cb
from callbound.runtime.tools import ToolExecutor
from callbound.testing import FakeClock

from .helpers import (
    Counter,
    OrderArgs,
    calls,
    fc,
    final,
    get_order_tool,
    make,
    refund_tool,
    states,
    write_tool,
)


def _budgets(kind: str, clock: FakeClock, **kw: Any) -> cb.Budgets:
    """300 s of active time, or a not_after 100 s away: the slow read (400 s) passes either."""
    if kind == "deadline":
        return cb.Budgets(deadline_s=300, **kw)
    return cb.Budgets(not_after=clock.now() + timedelta(seconds=100), **kw)


def _slow_read(clock: FakeClock, started: list[str], *, is_async: bool = False) -> cb.ToolSpec:
    """get_order: order "slow" moves the injected clock 400 s on; every start is recorded."""

    def body(args: OrderArgs) -> dict[str, Any]:
        started.append(args.order_id)
        if args.order_id == "slow":
            clock.advance(400)
        return {"order_id": args.order_id}

    async def run_async(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        await asyncio.sleep(0)
        return body(args)

    def run_sync(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        return body(args)

    return get_order_tool(handler=run_async if is_async else run_sync, timeout_ms=10**9)


# ---- F1: no WAITING_APPROVAL once the turn used up the deadline -----------------------------------


@pytest.mark.parametrize("kind", ["deadline", "not_after"])
async def test_f1_a_read_that_spends_the_deadline_stops_a_turn_waiting_for_approval_at_once(
    kind: str,
) -> None:
    clock = FakeClock()
    started: list[str] = []
    refunds: list[Any] = []
    tools = [_slow_read(clock, started), refund_tool(handler=lambda a, c: refunds.append(a))]
    script = [
        calls(
            "r1",
            fc("c1", "get_order", {"order_id": "slow"}),
            fc("c2", "refund", {"order_id": "A1", "amount": 5.0}),
        ),
        final("r2"),
    ]
    h = make(script, tools, budgets=_budgets(kind, clock), clock=clock)
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "DEADLINE")
    assert cb.State.WAITING_APPROVAL not in states(out)  # nobody was asked to approve
    assert out.pending_approvals == ()
    approvals = h.store.list_approvals(tenant="acme", status=None)
    assert approvals and all(a.status != "pending" for a in approvals)  # withdrawn (runner._stop)
    assert started == ["slow"] and refunds == []
    assert (out.escalation or {})["call_ids"] == ["c2"]  # the call that does not run


async def test_f1_a_turn_within_its_deadline_still_waits_for_approval() -> None:
    clock = FakeClock()
    started: list[str] = []
    tools = [_slow_read(clock, started), refund_tool()]
    script = [
        calls(
            "r1",
            fc("c1", "get_order", {"order_id": "A0"}),
            fc("c2", "refund", {"order_id": "A1", "amount": 5.0}),
        )
    ]
    h = make(script, tools, budgets=cb.Budgets(deadline_s=300), clock=clock)
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL and len(out.pending_approvals) == 1


# ---- F2: no read handler starts once the deadline is spent ---------------------------------------


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("kind", ["deadline", "not_after"])
async def test_f2_no_read_starts_after_another_read_of_its_turn_spent_the_deadline(
    kind: str, is_async: bool
) -> None:
    clock = FakeClock()
    started: list[str] = []
    notes = Counter()
    tools = [_slow_read(clock, started, is_async=is_async), write_tool(notes)]
    script = [
        calls(
            "r1",
            fc("c1", "get_order", {"order_id": "slow"}),
            fc("c2", "get_order", {"order_id": "A2"}),
            fc("c3", "get_order", {"order_id": "A3"}),
            fc("c4", "set_note", {"order_id": "A4"}),
        ),
        final("r2"),
    ]
    # max_parallel=1: c2 and c3 wait for the slot c1 holds while it spends the deadline
    h = make(script, tools, budgets=_budgets(kind, clock, max_parallel=1), clock=clock)
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "DEADLINE")
    assert started == ["slow"] and notes.n == 0
    # as a write that finds the deadline spent (executing._stop_before_handlers): named, never run
    assert (out.escalation or {})["call_ids"] == ["c2", "c3", "c4"]
    assert len(h.model.requests) == 1  # no result of an unrun call went to the model
    if kind == "deadline":
        assert out.spent["active_s"] == 400.0


async def test_f2_a_read_that_waits_for_a_slot_within_the_deadline_still_runs() -> None:
    clock = FakeClock()
    started: list[str] = []

    def get_order(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        started.append(args.order_id)
        clock.advance(100)  # three of these fit in 300 s
        return {"order_id": args.order_id}

    script = [calls("r1", *(fc(f"c{i}", "get_order", {"order_id": f"A{i}"}) for i in range(3))), final("r2")]
    tools = [get_order_tool(handler=get_order, timeout_ms=10**9)]
    h = make(script, tools, budgets=cb.Budgets(deadline_s=301, max_parallel=1), clock=clock)
    out = await h.run()
    assert out.state == cb.State.COMPLETED and started == ["A0", "A1", "A2"]


async def test_f2_with_the_real_clock_the_turns_slots_still_stop_the_later_reads() -> None:
    """Kept as it was: the turn's remaining deadline bounds its slots, so a read that would start after
    it is told it did not start, and the operation stops DEADLINE before the next model request."""
    started: list[str] = []

    def get_order(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        started.append(args.order_id)
        time.sleep(0.1)
        return {"order_id": args.order_id}

    script = [calls("r1", *(fc(f"c{i}", "get_order", {"order_id": f"A{i}"}) for i in range(4))), final("r2")]
    runner = cb.Runner(
        model=make(script, []).model,
        registry=cb.Registry([get_order_tool(handler=get_order, timeout_ms=5000)]),
        budgets=cb.Budgets(deadline_s=0.15, max_parallel=1),
        executor=ToolExecutor(grace_s=0.05),
    )
    out = await runner.run("hi", tenant="acme", subject="user-1")
    assert (out.state, out.reason) == (cb.State.STOPPED, "DEADLINE")
    assert started == ["A0", "A1"]


async def test_f1_the_deadline_spent_between_an_approval_and_its_call_still_runs_nothing() -> None:
    """The check on entering EXECUTING after an approval (D14) holds where the deadline can still be
    spent there: time the resume itself takes, here an authorization hook re-checked on resume (D17)."""
    clock = FakeClock()
    refunds = Counter()
    resuming: list[bool] = []

    def authorize(spec: cb.ToolSpec, args: Any, ctx: Any) -> bool:
        if resuming and resuming.pop():
            clock.advance(301)  # once, on resume: more than the 300 s of active time
        return True

    script = [calls("r1", fc("c1", "refund", {"order_id": "A1", "amount": 5.0})), final("r2")]
    policy = cb.Policy(authorize=authorize)
    h = make(script, [refund_tool(refunds)], budgets=cb.Budgets(deadline_s=300), clock=clock, policy=policy)
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    (p,) = out.pending_approvals
    resuming.append(True)
    out = await h.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert (out.state, out.reason) == (cb.State.STOPPED, "DEADLINE")
    assert not resuming and refunds.n == 0 and len(h.model.requests) == 1


async def test_f2_reads_side_by_side_after_the_deadline_stay_planned_whatever_the_thread_timing() -> None:
    """Regression review of 871a0f9 (r7): with the time spent, a read's timeout is cut to 0, and a sync
    job could be withdrawn by its timer before the gate in its thread ran: sealed TIMEOUT ("did not start
    within 0s") and left out of the escalation. Now the gate is asked on the loop first, and a job
    withdrawn unstarted once the time ran out stays PLANNED too (D14). Repeated: it was a race.

    With max_parallel=2 a second read may start in the same instant as the slow one, before the clock
    moves (D14 allows it), so which reads run depends on the threads (review round 16: the test asked for
    the slow one alone and failed under load). What must hold whatever the timing: no handler starts once
    the deadline has passed, the operation stops DEADLINE, and every call is either named as unrun or
    handled, never both, never lost as a TIMEOUT."""
    for _ in range(20):
        clock = FakeClock()
        late: list[str] = []  # handlers that started after the clock passed the deadline

        def handler(
            args: Any, ctx: cb.CallContext, late: list[str] = late, clock: FakeClock = clock
        ) -> dict[str, Any]:
            if clock.monotonic() >= 300:
                late.append(args.order_id)
            if args.order_id == "slow":
                clock.advance(400)
            return {"o": args.order_id}

        script = [
            calls(
                "r1",
                fc("c1", "get_order", {"order_id": "slow"}),
                fc("c2", "get_order", {"order_id": "A2"}),
                fc("c3", "get_order", {"order_id": "A2"}),
                fc("c4", "get_order", {"order_id": "A3"}),
            ),
            final("r2"),
        ]
        tool = get_order_tool(handler=handler, timeout_ms=10**9)
        h = make(script, [tool], budgets=cb.Budgets(deadline_s=300, max_parallel=2), clock=clock)
        out = await h.run()
        assert (out.state, out.reason, late) == (cb.State.STOPPED, "DEADLINE", [])
        esc = out.escalation or {}
        unrun = list(esc["call_ids"])
        if "handled" in esc:  # stopped inside the turn: the calls split into unrun and handled
            handled = [entry["call_id"] for entry in esc["handled"]]
            assert "c1" in handled and not set(unrun) & set(handled)
            assert sorted(unrun + handled) == ["c1", "c2", "c3", "c4"]
            assert all(entry["effect"] != "unknown" for entry in esc["handled"])
        else:  # every read started before the clock moved: the turn ended, the stop came before request 2
            assert unrun == ["c1", "c2", "c3", "c4"] and esc.get("state_before") == "MODEL_REQUESTED"
        assert len(h.model.requests) == 1


async def test_a_deadline_stop_in_a_turn_names_the_unrun_calls_tools_and_the_handled_ones_effects() -> None:
    """docs/stop-reasons.md, every escalation record names the turn: response_id, call_ids, tools, and
    effects for calls handled (issue 2 §5). A write that used up the deadline beside a call waiting for
    approval: the stop named only the waiting call's id; the applied write, whose result never reaches
    the model, was not named at all (regression review of 871a0f9, r7)."""
    clock = FakeClock()
    notes = Counter()

    def set_note(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        notes.calls.append(args.order_id)
        clock.advance(400)
        return {"noted": args.order_id}

    script = [
        calls(
            "r1",
            fc("c1", "set_note", {"order_id": "A1"}),
            fc("c2", "refund", {"order_id": "A1", "amount": 5.0}),
        ),
        final("r2"),
    ]
    h = make(
        script,
        [write_tool(notes, handler=set_note), refund_tool()],
        budgets=cb.Budgets(deadline_s=300),
        clock=clock,
    )
    out = await h.run()
    assert (out.state, out.reason, notes.n) == (cb.State.STOPPED, "DEADLINE", 1)
    esc = out.escalation or {}
    assert (esc["response_id"], esc["call_ids"], esc["tools"]) == ("r1", ["c2"], ["refund"])
    assert esc["handled"] == [{"call_id": "c1", "tool": "set_note", "effect": "applied"}]
    assert out.pending_approvals == ()
