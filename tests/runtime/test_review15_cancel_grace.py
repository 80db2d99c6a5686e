"""D16/D18/D21, review round 15 (r8, finding 1): a run cancelled during an async write holds the lease for
the grace period.

An async write handler that hands its blocking payment to a thread (``await asyncio.to_thread(pay)``):
cancelling the run cancels the handler's task at once, but not the thread, which goes on paying. Nothing
lingered, so ``lease.give_up`` released the lease; a resume at once reconciled the STARTED write, heard
"not applied", and paid again (two payments under one key). The same when the run was cancelled while
callbound waited out the grace period after such a write timed out (docs/durability.md: "after an async
write times out, callbound waits the grace period again before asking reconcile"). Now the lease is held
for that grace period in both cases, as the timeout path gives it before anyone may reconcile.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.runtime import tools
from callbound.runtime.clock import SystemClock
from callbound.stores.sqlite import SQLiteStore

from .helpers import OrderArgs, calls, fc, final, get_order_tool, make, write_tool

GRACE_S = 0.8


def script() -> list[dict[str, Any]]:
    return [calls("r1", fc("c1", "set_note", {"order_id": "A1"})), final("r2")]


class Payments:
    """A payment service behind a blocking client, and its lookup by key for reconcile."""

    def __init__(self, takes_s: float) -> None:
        self.takes_s = takes_s
        self.paid: list[str] = []
        self.inside = threading.Event()
        self._lock = threading.Lock()

    def blocking_pay(self, key: str) -> None:
        self.inside.set()
        time.sleep(self.takes_s)  # the request is on the wire; nothing stops this thread
        with self._lock:
            self.paid.append(key)

    async def handler(self, args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        assert ctx.idempotency_key is not None
        await asyncio.to_thread(self.blocking_pay, ctx.idempotency_key)
        return {"noted": args.order_id}

    def reconcile(self, key: str, ctx: cb.CallContext) -> dict[str, Any]:
        with self._lock:
            if key in self.paid:
                return {"noted": "A1"}
        raise cb.NotApplied("no payment with this key")

    def tool(self, timeout_ms: int) -> cb.ToolSpec:
        return write_tool(handler=self.handler, reconcile=self.reconcile, timeout_ms=timeout_ms)


async def _held_then_resumed(path: Path, pay: Payments, timeout_ms: int, cancelled_at: float) -> float:
    """Resume from another Runner at once (refused: the lease is held), then once the lease is free.
    Returns how long after the cancellation the lease was held."""
    store = SQLiteStore(path)
    other = make(script(), [pay.tool(timeout_ms)], store=store, clock=SystemClock(), grace_s=GRACE_S)  # type: ignore[arg-type]
    with pytest.raises(cb.OperationBusy):  # before the fix: resumed, reconciled "not applied", paid again
        await other.runner.resume("op_1")
    assert pay.paid == []  # the payment was still in flight when that resume was refused
    deadline = time.monotonic() + 10
    while store.lease_holder("op_1") is not None and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    held_s = time.monotonic() - cancelled_at
    out = await other.runner.resume("op_1")
    assert out.state == cb.State.COMPLETED, (out.state, out.reason)
    await asyncio.sleep(0.1)
    assert len(pay.paid) == 1  # reconciled as applied, never paid again (D18: exactly-once)
    store.close()
    return held_s


@pytest.mark.parametrize("how", ["task.cancel", "wait_for"])
async def test_a_run_cancelled_while_an_async_write_pays_in_a_thread_holds_the_lease_for_the_grace(
    tmp_path: Path, how: str
) -> None:
    """r8 finding 1 (1): the to_thread future is cancelled, the handler task ends at once, the thread
    still pays. D16: never reconcile while the original may still run."""
    pay = Payments(takes_s=0.4)  # lands inside the grace period
    path = tmp_path / "cb.db"
    store = SQLiteStore(path)
    h = make(script(), [pay.tool(20_000)], store=store, clock=SystemClock(), grace_s=GRACE_S)  # type: ignore[arg-type]
    run = h.runner.run("note A1", tenant="acme", subject="u1", operation_id="op_1")
    if how == "wait_for":
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(run, timeout=0.15)
        assert pay.inside.is_set()  # cancelled while the payment was in flight
    else:
        task = asyncio.create_task(run)
        while not pay.inside.is_set():
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    cancelled_at = time.monotonic()
    held_s = await _held_then_resumed(path, pay, 20_000, cancelled_at)
    assert held_s >= GRACE_S - 0.05  # the grace a timeout gives before reconcile, not less
    store.close()


async def test_a_run_cancelled_in_the_grace_wait_before_reconcile_holds_the_lease(tmp_path: Path) -> None:
    """r8 finding 1 (2): the async write timed out (100 ms); its task ended at once, its thread did not,
    and callbound waits the grace period before reconcile asks (execute._run_write). The run is cancelled
    in that wait: the lease is held for the rest of it."""
    pay = Payments(takes_s=0.5)  # lands at 0.5 s, inside the grace that ends at about 0.9 s
    path = tmp_path / "cb.db"
    store = SQLiteStore(path)
    h = make(script(), [pay.tool(100)], store=store, clock=SystemClock(), grace_s=GRACE_S)  # type: ignore[arg-type]
    started = time.monotonic()
    task = asyncio.create_task(h.runner.run("note A1", tenant="acme", subject="u1", operation_id="op_1"))
    await asyncio.sleep(0.3)  # past the timeout, inside the grace wait
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    held_s = await _held_then_resumed(path, pay, 100, started)
    assert held_s >= 0.1 + GRACE_S - 0.05  # until the end of the grace the timeout began
    store.close()


async def test_a_cancelled_async_read_does_not_hold_the_lease(tmp_path: Path) -> None:
    """A read has no effect to wait for: its cancelled run lets the lease go at once."""
    inside = asyncio.Event()

    async def lookup(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        inside.set()
        await asyncio.to_thread(time.sleep, 0.3)
        return {"order_id": args.order_id}

    store = SQLiteStore(tmp_path / "cb.db")
    h = make([calls("r1", fc("c1", "get_order", {"order_id": "A1"})), final("r2")],
             [get_order_tool(handler=lookup)], store=store, grace_s=GRACE_S)  # type: ignore[arg-type]  # fmt: skip
    task = asyncio.create_task(h.runner.run("look", tenant="acme", subject="u1", operation_id="op_1"))
    await asyncio.wait_for(inside.wait(), 10)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert store.lease_holder("op_1") is None
    assert tools.lingering("op_1") == []
    store.close()


async def test_the_grace_follows_a_handler_task_that_goes_on_after_the_cancellation() -> None:
    """linger_for: a handler task that caught the cancellation and still runs holds the lease until it
    ends (review round 14); the grace for work it handed to a thread runs from then, not from the
    cancellation, as after a timeout (D16)."""
    let_go = asyncio.Event()

    async def finishing() -> None:
        await let_go.wait()

    task = asyncio.create_task(finishing())
    await asyncio.sleep(0)
    tools._linger_task("op_chain", task)
    tools.linger_for("op_chain", 0.2)
    await asyncio.sleep(0.3)
    assert len(tools.lingering("op_chain")) == 2  # the task still runs: its grace has not begun
    let_go.set()
    await task
    assert len(tools.lingering("op_chain")) == 1  # the task ended; its grace runs
    await asyncio.sleep(0.3)
    assert tools.lingering("op_chain") == []
