"""Unknown outcomes (D16), review round 13: an awaitable returned by a sync handler or reconcile hook is no
answer (a sync wrapper around an async client call returned a coroutine that never ran, and "ok" recorded
the refund as applied, or the reconcile as done)."""

from __future__ import annotations

import functools
from typing import Any

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
