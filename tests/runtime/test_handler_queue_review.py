"""Handlers that never started (acceptance review 2): a job still queued for a worker thread when its
time is up is withdrawn and never starts; a write's handler that never started is "not applied"
(ledger FAILED), never an unknown outcome (D16); a reconcile hook that never started tells nothing.
At most ``max_parallel`` handlers of one turn run at once, sync handlers that timed out and whose
threads still run included (D15).

Hung handlers wait on a ``threading.Event``, set at the end of each test; executors have 1-2 threads.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

import callbound as cb
from callbound.core.idempotency import LedgerStatus
from callbound.core.registry import CallContext
from callbound.runtime.threads import HandlerThreads
from callbound.runtime.tools import ToolExecutor, turn_slots

from .helpers import OrderArgs, calls, error_code, fc, final, get_order_tool, last_outputs, make, write_tool

CTX = CallContext("op-1", "acme", "user-1", "call_1", "t", None, datetime(2026, 1, 1, tzinfo=UTC))


class Hang:
    """A sync handler body that blocks until released, and records who ran and when."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.started: list[str] = []
        self.finished: list[str] = []
        self.active = 0
        self.peak = 0

    def __call__(self, name: str) -> None:
        with self.lock:
            self.started.append(name)
            self.active += 1
            self.peak = max(self.peak, self.active)
        self.release.wait(10)
        with self.lock:
            self.active -= 1
            self.finished.append(name)


@pytest.fixture
def hang() -> Iterator[Hang]:
    h = Hang()
    yield h
    h.release.set()  # never leave a thread blocked behind a failed assertion


@pytest.fixture
async def executor() -> AsyncIterator[ToolExecutor]:
    ex = ToolExecutor(max_threads=1, grace_s=0.05)
    yield ex
    ex.shutdown()


# ---- the pool: a withdrawn job never runs ---------------------------------------------------------


def test_a_job_withdrawn_while_queued_never_runs_and_a_started_one_cannot_be_withdrawn() -> None:
    pool = HandlerThreads(1, "q")
    busy, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def hung() -> None:
        busy.set()
        release.wait(10)
        ran.append("first")

    try:
        first = pool.submit(hung)
        assert busy.wait(5)
        queued = pool.submit(lambda: ran.append("queued"))
        pool.submit(lambda: ran.append("after"))
        assert pool.running == 3
        assert not first.withdraw()  # started: it runs to its end
        assert queued.withdraw() and not queued.withdraw()
        assert pool.running == 2  # a withdrawn job is not waited for
        release.set()
        assert pool.drain(5) == 0
        assert ran == ["first", "after"]  # the thread skipped the withdrawn job and took the next
    finally:
        release.set()
        pool.shutdown()


# ---- the executor: a queued sync handler whose time is up is reported not started ---------------


async def test_a_sync_handler_still_queued_at_its_timeout_is_not_started_and_never_starts_later(
    hang: Hang, executor: ToolExecutor
) -> None:
    late: list[str] = []
    first = await executor.run(lambda a, c: hang("hung"), None, CTX, 0.02)
    assert first.kind == "timeout" and first.still_running and first.started

    out = await executor.run(lambda a, c: late.append("ran"), None, CTX, 0.05)
    assert (out.kind, out.started, out.still_running) == ("timeout", False, False)
    assert "did not start" in (out.message or "") and "not run" in (out.message or "")
    assert executor.running == 1  # only the hung handler: the withdrawn job is not waited for

    hang.release.set()
    assert executor.drain(5) == 0
    assert late == []


async def test_a_cancelled_run_withdraws_its_queued_job(hang: Hang, executor: ToolExecutor) -> None:
    late: list[str] = []
    await executor.run(lambda a, c: hang("hung"), None, CTX, 0.02)
    task = asyncio.create_task(executor.run(lambda a, c: late.append("ran"), None, CTX, 5))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    hang.release.set()
    assert executor.drain(5) == 0
    assert late == []


async def test_in_a_turn_only_a_write_handler_that_never_started_is_not_applied(
    hang: Hang, executor: ToolExecutor
) -> None:
    def write(args: Any, ctx: CallContext) -> None:
        raise AssertionError("must not run")

    def reconcile(key: str, ctx: CallContext) -> None:
        raise AssertionError("must not run")

    await executor.run(lambda a, c: hang("hung"), None, CTX, 0.02)  # the one thread hangs
    with turn_slots(4, 10.0, effects=[write]):
        wrote = await executor.run(write, None, CTX, 0.03)
        checked = await executor.run(reconcile, "ik_1", CTX, 0.03)
    assert (wrote.kind, wrote.started) == ("not_applied", False)
    assert "not applied" in (wrote.message or "")
    # a reconcile hook that could not run says nothing about the effect: not evidence it did not happen
    assert (checked.kind, checked.started) == ("timeout", False)


# ---- the runner: a write queued behind hung handlers ----------------------------------------------


def _keys(out: cb.Outcome) -> list[str]:
    return [k for t in out.history for k in t.details.get("idempotency_keys", [])]


async def test_a_write_queued_behind_hung_handlers_is_not_applied_and_never_runs_later(hang: Hang) -> None:
    refunds: list[str] = []

    def get_order(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        hang(args.order_id)
        return {"order_id": args.order_id}

    def refund(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        refunds.append(args.order_id)
        return {"refund_id": f"rf_{args.order_id}"}

    script = [
        calls("r1", fc("c1", "get_order", {"order_id": "A1"})),
        calls("r2", fc("w1", "refund", {"order_id": "A1"})),
        final("r3"),
    ]
    tools = [
        get_order_tool(handler=get_order, timeout_ms=20),
        write_tool(name="refund", handler=refund, schema_version="refund-v1", timeout_ms=50),
    ]
    h = make(script, tools)
    h.runner.executor = ToolExecutor(max_threads=1, grace_s=0.05)  # its one thread is taken by the read
    try:
        out = await h.run()
        assert out.state == cb.State.COMPLETED and out.reason is None  # not STOPPED(OUTCOME_UNKNOWN)
        result = last_outputs(h.model)["w1"]
        assert error_code(result) == "HANDLER_ERROR"
        assert "not run" in result["error"]["message"] and "not applied" in result["error"]["message"]
        (key,) = _keys(out)
        entry = h.store.ledger_get("acme", key)
        assert entry is not None and entry.status is LedgerStatus.FAILED  # definitely not applied (D16)
        assert not entry.handler_alive
        hang.release.set()
        assert h.runner.executor.drain(5) == 0
        assert refunds == []  # withdrawn: it never starts, not even once a thread is free
    finally:
        hang.release.set()
        h.runner.executor.shutdown()


async def test_a_reconcile_hook_that_could_not_start_leaves_the_outcome_unknown(hang: Hang) -> None:
    checked: list[str] = []

    def get_order(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        hang(args.order_id)
        return {"order_id": args.order_id}

    async def refund(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        await asyncio.sleep(5)  # an async handler times out without a thread; reconcile needs one
        return {"refund_id": "never"}

    def reconcile(key: str, ctx: cb.CallContext) -> None:
        checked.append(key)

    script = [
        calls("r1", fc("c1", "get_order", {"order_id": "A1"})),
        calls("r2", fc("w1", "refund", {"order_id": "A1"})),
        final("r3"),
    ]
    tools = [
        get_order_tool(handler=get_order, timeout_ms=20),
        write_tool(
            name="refund", handler=refund, reconcile=reconcile, schema_version="refund-v1", timeout_ms=30
        ),
    ]
    h = make(script, tools)
    h.runner.executor = ToolExecutor(max_threads=1, grace_s=0.05)
    try:
        out = await h.run()
        assert out.state == cb.State.STOPPED and out.reason == "OUTCOME_UNKNOWN"
        (key,) = _keys(out)
        entry = h.store.ledger_get("acme", key)
        assert entry is not None and entry.status is LedgerStatus.UNKNOWN  # never FAILED on no evidence
        hang.release.set()
        assert h.runner.executor.drain(5) == 0
        assert checked == []  # the reconcile hook was withdrawn, not run after the operation stopped
    finally:
        hang.release.set()
        h.runner.executor.shutdown()


# ---- the runner: max_parallel counts handlers still running after their timeout -------------------


def _reads(n: int) -> dict[str, Any]:
    return calls("r1", *(fc(f"c{i}", "get_order", {"order_id": f"A{i}"}) for i in range(n)))


async def test_max_parallel_counts_timed_out_threads_and_a_call_without_a_slot_never_starts(
    hang: Hang,
) -> None:
    def get_order(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        hang(args.order_id)
        return {"order_id": args.order_id}

    tools = [get_order_tool(handler=get_order, timeout_ms=40)]
    h = make([_reads(4), final("r2")], tools, budgets=cb.Budgets(max_parallel=1))
    h.runner.executor = ToolExecutor(max_threads=4, grace_s=0.02)  # threads to spare: the turn limits
    try:
        out = await h.run()
        assert out.state == cb.State.COMPLETED
        results = last_outputs(h.model)
        assert [error_code(results[f"c{i}"]) for i in range(4)] == ["TIMEOUT"] * 4
        assert "did not answer" in results["c0"]["error"]["message"]
        for i in range(1, 4):
            assert "did not start" in results[f"c{i}"]["error"]["message"]
        hang.release.set()
        assert h.runner.executor.drain(5) == 0
        assert hang.peak == 1 and hang.started == ["A0"]  # the others never started, not even later
    finally:
        hang.release.set()
        h.runner.executor.shutdown()


async def test_a_call_waiting_for_a_slot_starts_when_the_timed_out_thread_ends(hang: Hang) -> None:
    events: list[str] = []

    def get_order(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        events.append(f"{args.order_id} start")
        if args.order_id == "A0":
            hang.release.wait(10)  # times out at 0.3 s; its thread ends when released at 0.4 s
        events.append(f"{args.order_id} end")
        return {"order_id": args.order_id}

    tools = [get_order_tool(handler=get_order, timeout_ms=300)]
    h = make([_reads(2), final("r2")], tools, budgets=cb.Budgets(max_parallel=1))
    h.runner.executor = ToolExecutor(max_threads=2, grace_s=0.01)

    async def release_later() -> None:
        await asyncio.sleep(0.4)  # after A0's timeout, before A1's own 0.3 s of waiting is up
        waited = list(events)
        hang.release.set()
        assert waited == ["A0 start"]  # A1 waited for the slot A0's running thread still held

    try:
        releaser = asyncio.create_task(release_later())
        out = await h.run()
        await releaser
        assert out.state == cb.State.COMPLETED
        results = last_outputs(h.model)
        assert error_code(results["c0"]) == "TIMEOUT" and results["c1"]["ok"]
        assert events == ["A0 start", "A0 end", "A1 start", "A1 end"]
    finally:
        hang.release.set()
        h.runner.executor.shutdown()


async def test_waiting_behind_handlers_within_their_time_does_not_use_up_a_calls_timeout() -> None:
    """D15 as before: the turn's reads take turns, each with its full timeout (4 x 0.1 s > 0.25 s)."""

    def get_order(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        time.sleep(0.1)
        return {"order_id": args.order_id}

    tools = [get_order_tool(handler=get_order, timeout_ms=250)]
    h = make([_reads(4), final("r2")], tools, budgets=cb.Budgets(max_parallel=1))
    h.runner.executor = ToolExecutor(max_threads=2, grace_s=0.05)
    try:
        out = await h.run()
        assert out.state == cb.State.COMPLETED
        assert all(r["ok"] for r in last_outputs(h.model).values())
    finally:
        h.runner.executor.shutdown()


# ---- the turn's slots: the deadline bounds them; handlers do not run inside the turn's slots -------


async def test_no_handler_of_a_turn_outlasts_or_starts_after_the_turns_remaining_deadline(
    executor: ToolExecutor,
) -> None:
    ran: list[str] = []

    async def slow(args: Any, ctx: CallContext) -> None:
        await asyncio.sleep(5)

    with turn_slots(1, 0.1):
        t0 = time.monotonic()
        out = await executor.run(slow, None, CTX, 5.0)
        assert out.kind == "timeout" and out.started and time.monotonic() - t0 < 1.0
        after = await executor.run(lambda a, c: ran.append("ran"), None, CTX, 5.0)
    assert (after.kind, after.started) == ("timeout", False)
    assert executor.drain(5) == 0 and ran == []


async def test_a_handler_is_not_one_of_its_turns_calls(executor: ToolExecutor) -> None:
    """An async handler that runs something through an executor does not wait for the slot it holds."""

    async def outer(args: Any, ctx: CallContext) -> Any:
        inner = await executor.run(lambda a, c: "inner", None, CTX, 1.0)
        return inner.value

    with turn_slots(1, 10.0):
        out = await executor.run(outer, None, CTX, 2.0)
    assert (out.kind, out.value) == ("ok", "inner")
