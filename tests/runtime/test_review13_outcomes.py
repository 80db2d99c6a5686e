"""Unknown outcomes (D16), review round 13: an awaitable returned by a sync handler or reconcile hook is no
answer (a sync wrapper around an async client call returned a coroutine that never ran, and "ok" recorded
the refund as applied, or the reconcile as done)."""

from __future__ import annotations

import functools
from typing import Any

import pytest

import callbound as cb

from .helpers import Counter, OrderArgs, calls, error_code, fc, final, last_outputs, make, write_tool


def not_async_aware(fn: Any) -> Any:
    """A logging or metrics decorator that is not async-aware: the wrapped async function's coroutine
    is returned unawaited by a plain function."""

    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return inner


def script() -> list[dict[str, Any]]:
    return [calls("r1", fc("c1", "set_note", {"order_id": "A1"})), final("r2")]


async def test_a_write_handler_returning_a_coroutine_is_an_unknown_outcome_never_applied() -> None:
    ran = Counter()

    async def set_note(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        ran.calls.append(args.order_id)
        return {"noted": args.order_id}

    h = make(script(), [write_tool(handler=not_async_aware(set_note))])
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")  # nobody can tell: no reconcile
    assert ran.calls == []  # the coroutine never ran, and was not recorded as done
    (entry,) = h.store.ledger_list(tenant="acme")
    assert entry.status.value == "UNKNOWN"


async def test_a_reconcile_hook_returning_a_coroutine_tells_nothing() -> None:
    looked: list[str] = []

    def fails(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        raise ConnectionError("reset after the request was sent")  # the outcome is unknown

    async def lookup(key: str, ctx: cb.CallContext) -> dict[str, Any]:
        looked.append(key)
        return {"noted": "A1"}

    h = make(script(), [write_tool(handler=fails, reconcile=not_async_aware(lookup))])
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    assert looked == []
    (entry,) = h.store.ledger_list(tenant="acme")
    assert entry.status.value == "UNKNOWN"


async def test_a_read_returning_a_coroutine_is_a_handler_error() -> None:
    async def lookup(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        return {"order_id": args.order_id}

    from .helpers import get_order_tool

    h = make([calls("r1", fc("c1", "get_order", {"order_id": "A1"})), final("r2")],
             [get_order_tool(handler=not_async_aware(lookup))])  # fmt: skip
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    result = last_outputs(h.model)["c1"]
    assert error_code(result) == "HANDLER_ERROR" and "async def" in result["error"]["message"]


async def test_a_cancelled_run_holds_the_lease_until_its_write_handler_ends(tmp_path: Any) -> None:
    """D16: a server cancels `await runner.run()` (its request timed out) while a sync write handler is
    inside its payment call; the thread goes on. The lease was released at once, and a worker or a
    resume in another process reconciled the STARTED write while it was in flight and paid again."""
    import asyncio
    import contextlib
    import threading
    import time

    from callbound.stores.sqlite import SQLiteStore

    from .helpers import rebuild

    inside, let_go = threading.Event(), threading.Event()
    paid: list[str] = []

    def pay(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        inside.set()
        let_go.wait(10)
        paid.append(ctx.idempotency_key or "")
        return {"noted": args.order_id}

    def reconcile(key: str, ctx: cb.CallContext) -> dict[str, Any]:
        if key in paid:
            return {"noted": "A1"}
        raise cb.NotApplied("no such payment")

    store = SQLiteStore(tmp_path / "cb.db")
    tool = write_tool(handler=pay, reconcile=reconcile, timeout_ms=20_000)
    h = make(script(), [tool], store=store)  # type: ignore[arg-type]
    task = asyncio.create_task(h.runner.run("note A1", tenant="acme", subject="u1", operation_id="op_1"))
    while not inside.is_set():
        await asyncio.sleep(0.01)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert store.lease_holder("op_1") is not None  # still held for the handler in flight
    other = rebuild(h, [write_tool(handler=pay, reconcile=reconcile, timeout_ms=20_000)], script=script())
    try:
        await other.runner.resume("op_1")
        raise AssertionError("resumed while the first handler was still paying")
    except cb.OperationBusy:
        pass
    let_go.set()
    deadline = time.monotonic() + 10
    while store.lease_holder("op_1") is not None and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert store.lease_holder("op_1") is None  # released once the handler ended
    out = await other.runner.resume("op_1")
    assert out.state == cb.State.COMPLETED
    assert len(paid) == 1  # reconciled as applied, never paid again
    store.close()


async def test_a_cancelled_run_holds_the_lease_until_its_async_write_handler_ends(tmp_path: Any) -> None:
    """D16, the async twin of the test above (review round 14): an async write handler that catches the
    run's cancellation and finishes the payment it had in flight (or shields it) outlives the grace
    period. The lease was released at once, a resume reconciled the STARTED write while the payment
    was in flight, heard "not applied", and paid again."""
    import asyncio
    import contextlib
    import time

    from callbound.stores.sqlite import SQLiteStore

    from .helpers import rebuild

    inside, let_go = asyncio.Event(), asyncio.Event()
    paid: list[str] = []

    async def pay(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        inside.set()
        try:
            await let_go.wait()
        except asyncio.CancelledError:
            await let_go.wait()  # the request is on the wire: finish it before giving up
            paid.append(ctx.idempotency_key or "")
            raise
        paid.append(ctx.idempotency_key or "")
        return {"noted": args.order_id}

    def reconcile(key: str, ctx: cb.CallContext) -> dict[str, Any]:
        if key in paid:
            return {"noted": "A1"}
        raise cb.NotApplied("no such payment")

    def tool() -> Any:
        return write_tool(handler=pay, reconcile=reconcile, timeout_ms=20_000)

    store = SQLiteStore(tmp_path / "cb.db")
    h = make(script(), [tool()], store=store, grace_s=0.05)  # type: ignore[arg-type]
    task = asyncio.create_task(h.runner.run("note A1", tenant="acme", subject="u1", operation_id="op_1"))
    await asyncio.wait_for(inside.wait(), 10)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert store.lease_holder("op_1") is not None  # still held for the handler in flight
    other = rebuild(h, [tool()], script=script())
    try:
        await other.runner.resume("op_1")
        raise AssertionError("resumed while the first handler was still paying")
    except cb.OperationBusy:
        pass
    let_go.set()
    deadline = time.monotonic() + 10
    while store.lease_holder("op_1") is not None and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert store.lease_holder("op_1") is None  # released once the handler ended
    out = await other.runner.resume("op_1")
    assert out.state == cb.State.COMPLETED
    assert len(paid) == 1  # reconciled as applied, never paid again
    store.close()


def test_a_refused_claim_does_not_take_an_earlier_writes_outcome_with_it(tmp_path: Any) -> None:
    """D16/D18: a turn of two writes; the first succeeds, the second reconciles an intent an ended
    operation left UNKNOWN, and while its lookup runs another operation takes that intent. The store
    refused the commit holding the refused claim whole, the first write's SUCCEEDED with it: the reload
    read that write as STARTED (a crash), and ended OUTCOME_UNKNOWN naming a write that had succeeded."""
    import json

    from pydantic import BaseModel

    from callbound.runtime.tools import ToolExecutor
    from callbound.runtime.verify import verify_store
    from callbound.stores.sqlite import SQLiteStore
    from callbound.testing import ScriptedModel

    class Order(BaseModel):
        order_id: str

    db = tmp_path / "cb.db"
    notes: list[str] = []
    refunds: list[str] = []
    failing = {"now": True}

    def set_note(args: Order, ctx: cb.CallContext) -> dict[str, Any]:
        notes.append(args.order_id)
        return {"noted": args.order_id}

    def refund(args: Order, ctx: cb.CallContext) -> dict[str, Any]:
        if failing["now"]:
            raise ConnectionError("reset after the request was sent")  # the outcome is unknown
        refunds.append(ctx.idempotency_key or "")
        return {"refund_id": "rf_" + args.order_id}

    def reconcile(key: str, ctx: cb.CallContext) -> dict[str, Any]:
        if failing["now"]:
            raise LookupError("the payment provider cannot tell")  # operation A stops OUTCOME_UNKNOWN
        if ctx.operation_id == "op_B":
            # while B's lookup runs, operation C takes the intent over (another process)
            run("op_C", [calls("c1", fc("k1", "refund", {"order_id": "A1"})), final("c2")])
        if key in refunds:
            return {"refund_id": "rf_A1"}
        raise cb.NotApplied("no such refund")

    def spec(name: str, handler: Any, **kw: Any) -> cb.ToolSpec:
        return cb.ToolSpec(name=name, description=name, params=Order, handler=handler, schema_version="v1",
                           risk="write", timeout_ms=5000, **kw)  # fmt: skip

    tools = [
        spec("set_note", set_note),
        spec("refund", refund, reconcile=reconcile, intent_key=lambda a, c: f"refund:{a.order_id}"),
    ]

    def call(cid: str, name: str, order: str) -> dict[str, Any]:
        return {"type": "function_call", "id": f"fc_{cid}", "call_id": cid, "name": name,
                "arguments": json.dumps({"order_id": order}), "status": "completed"}  # fmt: skip

    def run(op_id: str, script: list[dict[str, Any]]) -> cb.Outcome:
        runner = cb.Runner(model=ScriptedModel("openai-responses", script), registry=cb.Registry(tools),
                           store=SQLiteStore(db), settings={"model": "m"}, executor=ToolExecutor(grace_s=0.3))  # fmt: skip
        return runner.run_sync("go", tenant="acme", subject="u1", operation_id=op_id)

    out_a = run("op_A", [calls("a1", fc("k1", "refund", {"order_id": "A1"})), final("a2")])
    assert (out_a.state, out_a.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    failing["now"] = False
    turn = {**calls("b1"), "output": [call("k1", "set_note", "B1"), call("k2", "refund", "A1")]}
    out_b = run("op_B", [turn, final("b2")])
    assert out_b.state == cb.State.COMPLETED, (out_b.state, out_b.reason, out_b.escalation)
    assert notes == ["B1"] and len(refunds) == 1
    store = SQLiteStore(db)
    statuses = {e.key: e.status.value for e in store.ledger_list(tenant="acme", status=None, limit=10)}
    assert set(statuses.values()) == {"SUCCEEDED"}, statuses
    assert verify_store(store) == []
    store.close()


def test_an_abandoned_async_handler_no_longer_holds_the_lease() -> None:
    """A lingering async handler whose event loop closes without it (``run_blocking``) can never run
    again: the lease held for it goes (without this, a daemon thread renewed it for the process's life)."""
    import asyncio

    from callbound.runtime import tools

    async def forever() -> None:
        await asyncio.Event().wait()

    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(forever())
        loop.run_until_complete(asyncio.sleep(0))
        tools._linger_task("op_abandoned", task)
        assert tools.lingering("op_abandoned")  # held while the task may still run
        tools.abandon_tasks({task})
        assert tools.lingering("op_abandoned") == []
    finally:
        loop.close()


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_run_cancelled_in_the_grace_wait_after_a_timeout_holds_the_lease(
    tmp_path: Any, kind: str
) -> None:
    """D16, review round 14 (h13): the write timed out and the run waits out the grace period for the
    handler, which is still paying; the run is cancelled during that wait (a server's request timeout).
    Nothing held the lease: a resume at once reconciled the STARTED write while it was in flight, heard
    "not applied", and paid again. The handler now holds the lease, as when the run is cancelled before
    the timeout."""
    import asyncio
    import time

    from callbound.runtime.clock import SystemClock
    from callbound.stores.sqlite import SQLiteStore

    paid: list[str] = []

    async def pay_async(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await asyncio.sleep(0.6)  # the payment already sent is finished before giving up
        paid.append(ctx.operation_id)
        return {"noted": args.order_id}

    def pay_sync(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        time.sleep(0.6)  # a blocking payment client: its thread cannot be stopped
        paid.append(ctx.operation_id)
        return {"noted": args.order_id}

    def reconcile(key: str, ctx: cb.CallContext) -> dict[str, Any]:
        if paid:
            return {"noted": "A1"}
        raise cb.NotApplied("no such payment downstream (yet)")

    def tool() -> Any:
        handler = pay_async if kind == "async" else pay_sync
        return write_tool(handler=handler, reconcile=reconcile, timeout_ms=100)

    path = tmp_path / "cb.db"
    h = make(script(), [tool()], store=SQLiteStore(path), clock=SystemClock(), grace_s=1.0)  # type: ignore[arg-type]
    task = asyncio.create_task(h.runner.run("note A1", tenant="acme", subject="u1", operation_id="op_1"))
    await asyncio.sleep(0.3)  # past the 0.1 s timeout, inside the 1 s grace wait
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    other = make(script(), [tool()], store=SQLiteStore(path), clock=SystemClock(), grace_s=1.0)  # type: ignore[arg-type]
    with pytest.raises(cb.OperationBusy):
        await other.runner.resume("op_1")
    deadline = time.monotonic() + 10
    while other.store.lease_holder("op_1") is not None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    out = await other.runner.resume("op_1")
    assert out.state == cb.State.COMPLETED
    assert paid == ["op_1"]  # reconciled as applied, never paid again
