"""Acceptance review 9 (g18): an async handler that catches ``CancelledError`` and keeps running.

The handler was awaited in place under ``asyncio.timeout``: on timeout it was cancelled, swallowed the
cancellation and went on, and the loop waited for it (3.1 s for a 100 ms ``timeout_ms``, past a 1 s
deadline); one that never returns hung the loop. Now an async handler runs as its own task: on timeout
it is cancelled and waited for at most the executor's grace period, as a sync handler's thread is
(D16). Still running after that, its call is a timeout with ``still_running`` (a write's ledger entry
stays UNKNOWN with ``handler_alive``, nothing reconciles it). The task is kept referenced until it
ends, its late exception retrieved, and it keeps its turn's handler slot meanwhile (D15). D14: the
handler no longer holds the operation past its timeout and grace.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import time
from datetime import UTC, datetime
from typing import Any

import pytest

import callbound as cb
from callbound.core.idempotency import LedgerStatus
from callbound.core.registry import CallContext
from callbound.runtime.tools import ToolExecutor, turn_slots
from callbound.stores.memory import MemoryStore

from .helpers import calls, error_code, fc, final, get_order_tool, last_outputs, make, write_tool

CTX = CallContext("op-1", "acme", "user-1", "call_1", "t", None, datetime(2026, 1, 1, tzinfo=UTC))
REQUEST = contextvars.ContextVar("REQUEST", default="unset")
A1 = {"order_id": "A1"}
STUBBORN_S = 3.0  # how long the handlers below hold out at most (so the unfixed code fails, not hangs)


class Stubborn:
    """An async handler that swallows every cancellation until released (or ``STUBBORN_S`` passed),
    then returns, or raises ``then_raise``."""

    def __init__(self, then_raise: BaseException | None = None) -> None:
        self.release = asyncio.Event()
        self.cancels = 0
        self.started = 0
        self.finished = asyncio.Event()
        self.then_raise = then_raise

    async def __call__(self, args: Any, ctx: CallContext) -> dict[str, Any]:
        self.started += 1
        end = time.monotonic() + STUBBORN_S
        try:
            while not self.release.is_set() and time.monotonic() < end:
                try:
                    await asyncio.wait_for(self.release.wait(), max(0.0, end - time.monotonic()))
                except asyncio.CancelledError:
                    self.cancels += 1  # ignored: cleanup that does not give up
                except TimeoutError:
                    pass
        finally:
            self.finished.set()
        if self.then_raise is not None:
            raise self.then_raise
        return {"late": True}


async def test_d16_an_async_handler_swallowing_cancel_is_bounded_by_timeout_and_grace() -> None:
    """g18: timeout 100 ms, grace 200 ms: the call ends after about 0.3 s, reported still running."""
    handler = Stubborn()
    ex = ToolExecutor(grace_s=0.2)
    try:
        t0 = time.monotonic()
        out = await ex.run(handler, {}, CTX, 0.1)
        took = time.monotonic() - t0
        assert (out.kind, out.still_running, out.started) == ("timeout", True, True)
        assert "0.1" in (out.message or "")
        assert took < 1.0, took
        assert handler.cancels == 1 and not handler.finished.is_set()
    finally:
        handler.release.set()
        ex.shutdown()
    await asyncio.wait_for(handler.finished.wait(), 2)


async def test_d16_a_handler_that_swallows_cancel_but_ends_within_the_grace_is_not_still_running() -> None:
    """Like a sync handler's thread that ends within its grace: a timeout, nothing left running, and
    what it returned late counts for nothing (D16)."""

    async def handler(args: Any, ctx: CallContext) -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)  # short cleanup that ignores the cancel
        return "late"

    ex = ToolExecutor(grace_s=1.0)
    t0 = time.monotonic()
    out = await ex.run(handler, {}, CTX, 0.05)
    assert (out.kind, out.still_running, out.value) == ("timeout", False, None)
    assert time.monotonic() - t0 < 0.8  # waited for the task, not the whole grace period


async def test_an_abandoned_handlers_late_exception_is_retrieved_and_the_task_kept_alive() -> None:
    """No "Task exception was never retrieved" when the abandoned task fails later, and the task is
    referenced until it ends (the loop keeps only weak references to tasks)."""
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    handler = Stubborn(then_raise=RuntimeError("late failure"))
    ex = ToolExecutor(grace_s=0.05)
    try:
        out = await ex.run(handler, {}, CTX, 0.05)
        assert out.kind == "timeout" and out.still_running
        gc.collect()  # an unreferenced task would be collected here, mid-flight
        assert not handler.finished.is_set()
        handler.release.set()
        await asyncio.wait_for(handler.finished.wait(), 2)
        for _ in range(5):
            await asyncio.sleep(0)
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    assert [c for c in reported if "never retrieved" in str(c.get("message"))] == []
    assert reported == []


async def test_d15_an_abandoned_async_handler_keeps_its_turn_slot_until_it_ends() -> None:
    """As a sync handler's thread does: a handler past its timeout still counts against max_parallel;
    the next call waits its own timeout and is not started."""
    handler = Stubborn()
    ran: list[str] = []

    async def second(args: Any, ctx: CallContext) -> str:
        ran.append("second")
        return "ok"

    ex = ToolExecutor(grace_s=0.05)
    try:
        with turn_slots(1, 10.0):
            first = await ex.run(handler, {}, CTX, 0.05)
            out = await ex.run(second, {}, CTX, 0.1)
            assert first.kind == "timeout" and first.still_running
            assert (out.kind, out.started) == ("timeout", False) and ran == []
            handler.release.set()
            await asyncio.wait_for(handler.finished.wait(), 2)
            await asyncio.sleep(0)
            out = await ex.run(second, {}, CTX, 1.0)
            assert (out.kind, out.value) == ("ok", "ok") and ran == ["second"]
    finally:
        handler.release.set()


async def test_d16_a_write_whose_async_handler_outlives_its_grace_stays_unknown_and_handler_alive() -> None:
    """Through the runner, exactly like a sync handler's thread that outlived its grace: ledger UNKNOWN
    with handler_alive, no reconcile while the task may still apply the effect, STOPPED(OUTCOME_UNKNOWN)."""
    handler = Stubborn()
    reconciled: list[str] = []

    def reconcile(key: str, ctx: cb.CallContext) -> Any:
        reconciled.append(key)
        raise cb.NotApplied("nothing downstream")

    store = MemoryStore()
    tool = write_tool(
        handler=handler, reconcile=reconcile, timeout_ms=100, intent_key=lambda a, c: f"note-{a.order_id}"
    )
    h = make(
        [calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")], [tool], store=store, grace_s=0.1
    )
    try:
        t0 = time.monotonic()
        out = await h.run()
        took = time.monotonic() - t0
        assert (out.state, out.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
        assert took < 1.5, took
        entry = store.ledger_get("acme", "ik_note-A1")
        assert entry is not None and entry.status is LedgerStatus.UNKNOWN and entry.handler_alive
        assert reconciled == []
    finally:
        handler.release.set()
    await asyncio.wait_for(handler.finished.wait(), 2)


async def test_d14_a_read_whose_async_handler_swallows_cancel_is_a_timeout_within_the_deadline() -> None:
    """g18 for a read: TIMEOUT to the model after timeout + grace, the operation goes on (D14)."""
    handler = Stubborn()
    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")],
        [get_order_tool(handler=handler, timeout_ms=100)],
        grace_s=0.1,
    )
    try:
        t0 = time.monotonic()
        out = await h.run()
        assert time.monotonic() - t0 < 1.5
        assert out.state == cb.State.COMPLETED
        assert error_code(last_outputs(h.model)["call_1"]) == "TIMEOUT"
    finally:
        handler.release.set()
    await asyncio.wait_for(handler.finished.wait(), 2)


# ---- what did not change -------------------------------------------------------------------------


async def test_an_async_handler_still_sees_the_callers_context() -> None:
    seen: list[str] = []

    async def handler(args: Any, ctx: CallContext) -> str:
        seen.append(REQUEST.get())
        return "ok"

    REQUEST.set("req-9")
    out = await ToolExecutor().run(handler, {}, CTX, 1.0)
    assert out.kind == "ok" and seen == ["req-9"]


async def test_cancelling_the_run_cancels_a_running_async_handler() -> None:
    """A cancellation of the run is the caller's: it reaches the handler and is raised, not reported."""
    entered = asyncio.Event()
    cancelled = asyncio.Event()

    async def handler(args: Any, ctx: CallContext) -> str:
        entered.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    task = asyncio.create_task(ToolExecutor(grace_s=0.5).run(handler, {}, CTX, 5.0))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()


@pytest.mark.parametrize("raised", [ValueError("x"), cb.NotApplied("declined")])
async def test_async_outcomes_are_unchanged(raised: Exception) -> None:
    async def handler(args: Any, ctx: CallContext) -> str:
        raise raised

    out = await ToolExecutor().run(handler, {}, CTX, 1.0)
    assert out.kind == ("not_applied" if isinstance(raised, cb.NotApplied) else "error")
