"""D35: reconcile past the deadline. A write whose outcome is unknown (D16) is reconciled even when the
operation's active deadline or its ``not_after`` is spent, the deadline's own cut of the handler
included, under the tool's own timeout alone (a sync handler's thread still gets its grace first). The
operation then stops as the deadline says, STOPPED(DEADLINE), with the reconciled outcome in the ledger
and in the escalation record; a reconcile that still cannot tell ends STOPPED(OUTCOME_UNKNOWN).

Before D35 the hook got the time left, 0 s, so every one of these ended OUTCOME_UNKNOWN with the hook
never asked (review round 22, b)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest

import callbound as cb
from callbound.core.errors import NotApplied
from callbound.runtime.clock import SystemClock
from callbound.testing import FakeClock

from .helpers import OrderArgs, calls, fc, final, make, rebuild, write_tool

Kind = str  # "sync" | "async"


def script() -> list[dict[str, Any]]:
    return [calls("r1", fc("c1", "set_note", {"order_id": "A1"})), final("r2")]


class Downstream:
    """The payments service: the handler applies the note, then its connection drops (unknown outcome)."""

    def __init__(self) -> None:
        self.applied: dict[str, str] = {}
        self.asked: list[str] = []
        self.hook_deadlines: list[Any] = []

    def apply(self, key: str | None) -> None:
        assert key is not None
        self.applied[key] = "A1"


def handler_for(kind: Kind, down: Downstream, before_fail: Any) -> Any:
    """A write handler that applies the effect, runs ``before_fail`` (spends the time), then fails."""
    if kind == "sync":

        def sync_handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
            down.apply(ctx.idempotency_key)
            before_fail()
            raise ConnectionError("reset after the request was sent")

        return sync_handler

    async def async_handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        down.apply(ctx.idempotency_key)
        before_fail()
        raise ConnectionError("reset after the request was sent")

    return async_handler


def reconcile_for(kind: Kind, down: Downstream, answer: str, hang_s: float = 0.05) -> Any:
    """A reconcile hook answering ``applied`` (the result), ``not_applied`` (NotApplied) or ``none``
    after ``hang_s`` (a lookup takes time: before D35 a 0 s timeout cut it every time, not by a race)."""

    def decide(key: str, ctx: cb.CallContext) -> dict[str, Any] | None:
        down.asked.append(key)
        down.hook_deadlines.append(ctx.deadline)
        if answer == "applied":
            assert key in down.applied
            return {"noted": down.applied[key]}
        if answer == "not_applied":
            raise NotApplied("no such note")
        return None

    if kind == "sync":

        def sync_hook(key: str, ctx: cb.CallContext) -> dict[str, Any] | None:
            if hang_s:
                time.sleep(hang_s)
            return decide(key, ctx)

        return sync_hook

    async def async_hook(key: str, ctx: cb.CallContext) -> dict[str, Any] | None:
        if hang_s:
            await asyncio.sleep(hang_s)
        return decide(key, ctx)

    return async_hook


def only_entry(h: Any) -> Any:
    (entry,) = h.store.ledger_list(tenant="acme")
    return entry


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize(
    ("answer", "status", "effect"),
    [("applied", "SUCCEEDED", "reconciled"), ("not_applied", "FAILED", "not_applied")],
)
async def test_a_write_that_spends_the_deadline_is_reconciled_then_stops_deadline(
    kind: Kind, answer: str, status: str, effect: str
) -> None:
    """D35: the handler used up the active deadline and failed; the hook is still asked, under the
    tool's own timeout, and the operation stops DEADLINE with what it found."""
    down = Downstream()
    clock = FakeClock()

    def spend() -> None:
        clock.advance(10.0)  # the active deadline is spent while the handler runs

    tool = write_tool(handler=handler_for(kind, down, spend), reconcile=reconcile_for(kind, down, answer))
    h = make(script(), [tool], budgets=cb.Budgets(deadline_s=5.0), clock=clock)
    out = await h.run()
    assert down.asked, "D35: reconcile runs although the deadline is spent"
    assert (out.state, out.reason) == (cb.State.STOPPED, "DEADLINE")
    assert only_entry(h).status.value == status
    assert out.escalation is not None
    assert out.escalation["reason"] == "DEADLINE"
    assert out.escalation["call_ids"] == ["c1"] and out.escalation["effects"] == [effect]
    assert len(h.model.requests) == 1  # the deadline stops it before the model is asked again
    # the hook's own context does not say its time is up before its timeout is
    (deadline,) = down.hook_deadlines
    assert deadline >= h.clock.now() + timedelta(seconds=1.9)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_reconcile_that_cannot_tell_past_the_deadline_still_ends_outcome_unknown(kind: Kind) -> None:
    """D35: asked and no answer (None): OUTCOME_UNKNOWN as before, the key left UNKNOWN."""
    down = Downstream()
    clock = FakeClock()
    tool = write_tool(
        handler=handler_for(kind, down, lambda: clock.advance(10.0)),
        reconcile=reconcile_for(kind, down, "none"),
    )
    h = make(script(), [tool], budgets=cb.Budgets(deadline_s=5.0), clock=clock)
    out = await h.run()
    assert len(down.asked) == 1
    assert (out.state, out.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    assert only_entry(h).status.value == "UNKNOWN"


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_reconcile_past_the_deadline_gets_the_tools_timeout_not_more(kind: Kind) -> None:
    """D35: the hook's bound is the tool's own timeout. One that answers within it (0.2 s of a 1 s
    timeout, with the deadline spent) is heard; one that hangs past it is cut there: OUTCOME_UNKNOWN."""
    down = Downstream()
    clock = FakeClock()
    spend = lambda: clock.advance(10.0)  # noqa: E731
    slow = write_tool(
        handler=handler_for(kind, down, spend),
        reconcile=reconcile_for(kind, down, "applied", hang_s=0.2),
        timeout_ms=1000,
    )
    h = make(script(), [slow], budgets=cb.Budgets(deadline_s=5.0), clock=clock, grace_s=0.1)
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "DEADLINE")
    assert only_entry(h).status.value == "SUCCEEDED"

    down = Downstream()
    hung = write_tool(
        handler=handler_for(kind, down, spend),
        reconcile=reconcile_for(kind, down, "applied", hang_s=3.0),
        timeout_ms=300,
    )
    h = make(script(), [hung], budgets=cb.Budgets(deadline_s=5.0), clock=clock, grace_s=0.1)
    started = time.monotonic()
    out = await h.run()
    took = time.monotonic() - started
    assert (out.state, out.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    assert 0.25 <= took < 2.0  # cut at the tool's 0.3 s (and a thread's 0.1 s grace), not at 0 s nor 3 s
    assert only_entry(h).status.value == "UNKNOWN"


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_write_cut_by_the_deadline_itself_is_reconciled(kind: Kind) -> None:
    """D35: the deadline is what cut the handler (its timeout was the time left, well under the tool's
    own). After the grace a cut handler gets (D16), the hook runs, finds the effect, and the
    operation stops DEADLINE with the write recorded as applied."""
    down = Downstream()

    if kind == "sync":

        def pay(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
            down.apply(ctx.idempotency_key)
            time.sleep(0.6)  # past the deadline: cut at it
            return {"noted": args.order_id}

        handler: Any = pay
    else:

        async def apay(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
            down.apply(ctx.idempotency_key)
            await asyncio.sleep(0.6)
            return {"noted": args.order_id}

        handler = apay

    tool = write_tool(handler=handler, reconcile=reconcile_for(kind, down, "applied"), timeout_ms=5000)
    h = make(script(), [tool], budgets=cb.Budgets(deadline_s=0.3), clock=SystemClock(), grace_s=0.5)
    out = await h.run()
    assert len(down.asked) == 1
    assert (out.state, out.reason) == (cb.State.STOPPED, "DEADLINE")
    assert only_entry(h).status.value == "SUCCEEDED"
    assert out.escalation is not None and out.escalation["effects"] == ["reconciled"]


async def test_a_sync_handler_still_running_after_its_grace_is_not_reconciled_past_the_deadline() -> None:
    """D35 keeps D16's grace rule: the thread the deadline cut is still running after its grace, so
    the hook is not asked (it could find nothing yet): OUTCOME_UNKNOWN, handler_alive."""
    down = Downstream()

    def pay(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        time.sleep(1.2)
        down.apply(ctx.idempotency_key)
        return {"noted": args.order_id}

    tool = write_tool(handler=pay, reconcile=reconcile_for("sync", down, "applied"), timeout_ms=5000)
    h = make(script(), [tool], budgets=cb.Budgets(deadline_s=0.2), clock=SystemClock(), grace_s=0.2)
    out = await h.run()
    assert down.asked == []
    assert (out.state, out.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    entry = only_entry(h)
    assert entry.status.value == "UNKNOWN" and entry.handler_alive
    h.runner.executor.drain(3.0)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_not_after_passed_in_the_handler_is_reconciled_then_stops_deadline(kind: Kind) -> None:
    """D35 for the absolute ``not_after`` as for the active deadline."""
    down = Downstream()
    clock = FakeClock()
    budgets = cb.Budgets(not_after=clock.now() + timedelta(seconds=60))
    tool = write_tool(
        handler=handler_for(kind, down, lambda: clock.advance(120.0)),
        reconcile=reconcile_for(kind, down, "applied"),
    )
    h = make(script(), [tool], budgets=budgets, clock=clock)
    out = await h.run()
    assert len(down.asked) == 1
    assert (out.state, out.reason) == (cb.State.STOPPED, "DEADLINE")
    assert out.escalation is not None and "not_after" in out.escalation["detail"]
    assert out.escalation["effects"] == ["reconciled"]
    assert only_entry(h).status.value == "SUCCEEDED"


async def test_a_crashed_write_resumed_past_not_after_is_reconciled_not_left_unknown() -> None:
    """D35 on takeover: a process died inside the write (ledger STARTED); the resume comes after
    ``not_after``. The STARTED entry is reconciled under the tool's timeout (it found the effect), and
    the operation stops DEADLINE instead of OUTCOME_UNKNOWN."""
    down = Downstream()
    clock = FakeClock()
    budgets = cb.Budgets(not_after=clock.now() + timedelta(seconds=60))

    def dies(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        down.apply(ctx.idempotency_key)
        raise KeyboardInterrupt  # the process goes away between the effect and its commit

    first = make(script(), [write_tool(handler=dies)], budgets=budgets, clock=clock)
    with pytest.raises(KeyboardInterrupt):
        await first.run()
    started = only_entry(first)
    assert started.status.value == "STARTED"
    clock.advance(120.0)  # not_after passes before anyone resumes
    again = rebuild(first, [write_tool(handler=dies, reconcile=reconcile_for("sync", down, "applied"))])
    out = await again.runner.resume(started.operation_id)
    assert len(down.asked) == 1
    assert (out.state, out.reason) == (cb.State.STOPPED, "DEADLINE")
    assert only_entry(again).status.value == "SUCCEEDED"
    assert len(down.applied) == 1


async def test_a_crashed_write_found_not_applied_past_not_after_does_not_run_again() -> None:
    """D35 with "not applied" on takeover: the hook is asked past ``not_after`` and says the effect
    never happened; the write is not run again (no handler starts once the time is spent, D14), the
    ledger says FAILED, so a later operation may run the intent, and the stop is DEADLINE."""
    down = Downstream()
    clock = FakeClock()
    budgets = cb.Budgets(not_after=clock.now() + timedelta(seconds=60))
    ran: list[str] = []

    def dies(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        raise KeyboardInterrupt  # the process goes away before the effect

    first = make(script(), [write_tool(handler=dies)], budgets=budgets, clock=clock)
    with pytest.raises(KeyboardInterrupt):
        await first.run()
    started = only_entry(first)
    clock.advance(120.0)

    def pay(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.order_id)
        return {"noted": args.order_id}

    again = rebuild(first, [write_tool(handler=pay, reconcile=reconcile_for("sync", down, "not_applied"))])
    out = await again.runner.resume(started.operation_id)
    assert len(down.asked) == 1 and ran == []
    assert (out.state, out.reason) == (cb.State.STOPPED, "DEADLINE")
    assert only_entry(again).status.value == "FAILED"
    assert out.escalation is not None and out.escalation["call_ids"] == ["c1"]
