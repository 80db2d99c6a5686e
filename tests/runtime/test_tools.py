"""ToolExecutor: what a handler's run means (ok, error, not_applied, timeout) for sync handlers in worker
threads and async handlers as their own tasks (D16)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from callbound.core.errors import NotApplied
from callbound.core.registry import CallContext
from callbound.runtime.tools import ToolError, ToolExecutor

CTX = CallContext("op-1", "acme", "user-1", "call_1", "t", None, datetime(2026, 1, 1, tzinfo=UTC))
REQUEST = contextvars.ContextVar("REQUEST", default="unset")


class Abort(BaseException):
    """Not an Exception: not the tool's outcome to report."""


async def run(handler: Any, timeout_s: float = 2.0, grace_s: float = 0.5) -> Any:
    ex = ToolExecutor(grace_s=grace_s)
    try:
        return await ex.run(handler, {"x": 1}, CTX, timeout_s)
    finally:
        ex.shutdown()


async def test_sync_handler_runs_in_a_worker_thread_with_the_callers_context() -> None:
    seen: dict[str, Any] = {}

    def handler(args: Any, ctx: CallContext) -> dict[str, Any]:
        seen["thread"] = threading.current_thread()
        seen["request"] = REQUEST.get()
        return {"got": args["x"], "call": ctx.call_id}

    REQUEST.set("req-7")
    out = await run(handler)
    assert (out.kind, out.value) == ("ok", {"got": 1, "call": "call_1"})
    assert seen["thread"] is not threading.main_thread() and seen["request"] == "req-7"


@pytest.mark.parametrize("is_async", [False, True])
async def test_errors_and_not_applied(is_async: bool) -> None:
    def sync_raise(exc: BaseException) -> Any:
        def handler(args: Any, ctx: CallContext) -> Any:
            raise exc

        async def ahandler(args: Any, ctx: CallContext) -> Any:
            raise exc

        return ahandler if is_async else handler

    out = await run(sync_raise(ToolError("order not found")))
    assert (out.kind, out.message) == ("error", "order not found")
    out = await run(sync_raise(RuntimeError("secret internals")))
    assert (
        out.kind == "error" and "secret" not in (out.message or "") and "RuntimeError" in (out.message or "")
    )
    out = await run(sync_raise(NotApplied("card declined")))
    assert (out.kind, out.message) == ("not_applied", "card declined")
    with pytest.raises(Abort):
        await run(sync_raise(Abort()))


async def test_sync_timeout_that_finishes_within_the_grace_period() -> None:
    def handler(args: Any, ctx: CallContext) -> str:
        time.sleep(0.2)
        return "late"

    t0 = time.monotonic()
    out = await run(handler, timeout_s=0.05, grace_s=2.0)
    assert out.kind == "timeout" and out.value is None and not out.still_running
    assert "0.05" in (out.message or "")
    assert time.monotonic() - t0 < 1.5  # waited for the thread, not the whole grace period


async def test_sync_timeout_still_running_after_the_grace_period() -> None:
    release = threading.Event()

    def handler(args: Any, ctx: CallContext) -> str:
        release.wait(5)
        return "much later"

    out = await run(handler, timeout_s=0.02, grace_s=0.05)
    release.set()
    assert out.kind == "timeout" and out.still_running


async def test_async_timeout_cancels_the_handler() -> None:
    cancelled = asyncio.Event()

    async def handler(args: Any, ctx: CallContext) -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    out = await run(handler, timeout_s=0.02)
    assert out.kind == "timeout" and not out.still_running and cancelled.is_set()


def test_a_thread_that_outlives_its_event_loop_finishes_and_frees_the_pool() -> None:
    """The loop may close (asyncio.run returns after a timeout) while a sync handler still runs; the
    thread still finishes and the pool takes the next call."""
    release = threading.Event()
    returned = threading.Event()

    def handler(args: Any, ctx: CallContext) -> str:
        release.wait(5)
        returned.set()
        return "done"

    ex = ToolExecutor(max_threads=1, grace_s=0.01)
    try:
        out = asyncio.run(ex.run(handler, {}, CTX, 0.01))
        assert out.kind == "timeout" and out.still_running
        assert ex.running == 1
        release.set()
        assert ex.drain(5) == 0 and returned.is_set()
        out = asyncio.run(ex.run(lambda args, ctx: "next", {}, CTX, 5))  # the one thread is free again
        assert out.kind == "ok" and out.value == "next"
    finally:
        ex.shutdown()


def test_handler_threads_are_daemons_bounded_reused_and_drained() -> None:
    from callbound.runtime.threads import HandlerThreads

    pool = HandlerThreads(2, "t")
    release = threading.Event()
    seen: list[str] = []
    lock = threading.Lock()

    def job() -> None:
        release.wait(5)
        with lock:
            seen.append(threading.current_thread().name)

    for _ in range(5):
        pool.submit(job)
    assert pool.running == 5
    assert pool.drain(0.05) == 5  # bounded: returns while they still wait
    names = {t.name for t in threading.enumerate() if t.name.startswith("t_")}
    assert names == {"t_0", "t_1"}  # never more than max_threads
    assert all(t.daemon for t in threading.enumerate() if t.name in names)
    release.set()
    assert pool.drain(5) == 0 and len(seen) == 5 and set(seen) <= names
    pool.submit(lambda: seen.append("again"))  # an idle thread takes it; none is started
    assert pool.drain(5) == 0 and seen[-1] == "again"
    assert {t.name for t in threading.enumerate() if t.name.startswith("t_")} == names
    pool.shutdown()
    with pytest.raises(RuntimeError):
        pool.submit(lambda: None)
