"""Running one handler: timeouts, worker threads for sync handlers, and what an outcome means.

A handler's outcome is one of: ``ok`` (value), ``error`` (it raised), ``not_applied`` (it raised
``NotApplied``: the effect definitely did not happen), ``timeout``. For sync handlers a timeout does
not stop the thread; ``still_running`` says whether it was still alive after the grace period, in
which case nothing may reconcile yet (D16).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ..core.errors import NotApplied
from ..core.registry import CallContext, is_async_callable
from .threads import HandlerThreads


class ToolError(Exception):
    """Raise from a handler to send ``message`` to the model as the error text. For write tools it
    still means "outcome unknown" unless you raise ``NotApplied`` instead."""


@dataclass(frozen=True, slots=True)
class HandlerOutcome:
    kind: str  # "ok" | "error" | "not_applied" | "timeout"
    value: Any = None
    message: str | None = None  # model-safe text
    still_running: bool = False


def to_jsonable(value: Any) -> Any:
    """Handler return values become JSON data; pydantic models are dumped in JSON mode."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def _safe_message(exc: BaseException) -> str:
    if isinstance(exc, ToolError | NotApplied) and exc.args:
        return str(exc.args[0])[:500]
    # No message text, traceback or internals: only the kind of failure.
    return f"the tool failed ({type(exc).__name__})"


class ToolExecutor:
    """Owns the threads for sync handlers, so a hung handler cannot starve the event loop's default
    pool, nor keep the process from exiting (daemon threads; ``drain`` waits for them, bounded)."""

    def __init__(self, max_threads: int = 16, grace_s: float = 2.0) -> None:
        self._pool = HandlerThreads(max_threads, "callbound-tool")
        self.grace_s = grace_s
        _executors.add(self)

    @property
    def running(self) -> int:
        """Sync handlers submitted and not finished, timed-out ones still running included."""
        return self._pool.running

    def drain(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for sync handlers still running; returns how many still are."""
        return self._pool.drain(timeout_s)

    def shutdown(self) -> None:
        self._pool.shutdown()

    async def run(
        self, handler: Callable[..., Any], args: Any, ctx: CallContext, timeout_s: float
    ) -> HandlerOutcome:
        if is_async_callable(handler):
            return await self._run_async(handler, args, ctx, timeout_s)
        return await self._run_sync(handler, args, ctx, timeout_s)

    async def _run_async(
        self, handler: Callable[..., Any], args: Any, ctx: CallContext, timeout_s: float
    ) -> HandlerOutcome:
        try:
            # asyncio.timeout cancels the handler in place (no extra task, unlike wait_for).
            async with asyncio.timeout(max(timeout_s, 0.0)):
                value = await handler(args, ctx)
        except TimeoutError:
            # The handler was cancelled and has finished: nothing of it is still running.
            return HandlerOutcome("timeout", message=f"the tool did not answer within {timeout_s:.3g}s")
        except NotApplied as exc:
            return HandlerOutcome("not_applied", message=_safe_message(exc))
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the run itself is being cancelled: not the tool's outcome to report
            # Something the handler awaited was cancelled, not this run: a failure of the tool (for a
            # write, an unknown outcome), never an exception that ends the loop (D4).
            return HandlerOutcome("error", message=_safe_message(exc))
        except Exception as exc:
            return HandlerOutcome("error", message=_safe_message(exc))
        return HandlerOutcome("ok", value=value)

    async def _run_sync(
        self, handler: Callable[..., Any], args: Any, ctx: CallContext, timeout_s: float
    ) -> HandlerOutcome:
        loop = asyncio.get_running_loop()
        call = _ThreadCall(loop)
        run_in_context = contextvars.copy_context().run

        def work() -> None:
            try:
                result: tuple[Any, BaseException | None] = (run_in_context(handler, args, ctx), None)
            except BaseException as exc:  # handed to the event loop, which decides what it means
                result = (None, exc)
            # RuntimeError: the event loop closed while the handler ran, so nobody is waiting
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(call.finished, result)

        # One future, resolved from the thread by call_soon_threadsafe or by the timer, whichever
        # comes first. run_in_executor + asyncio.shield + asyncio.timeout did the same with three
        # chained futures and a task wake-up each, about 12 µs more per call here (bench: thread hop).
        self._pool.submit(work)
        timer = loop.call_later(max(timeout_s, 0.0), call.expire)
        try:
            value, exc = await call.waiter
        finally:
            timer.cancel()
        if value is _TIMED_OUT:
            # The thread keeps running (it cannot be stopped); give it a grace period to finish
            # before anyone reconciles (D16). What it returns now counts for nothing.
            assert call.late is not None
            done, _ = await asyncio.wait({call.late}, timeout=self.grace_s)
            return HandlerOutcome(
                "timeout", message=f"the tool did not answer within {timeout_s:.3g}s", still_running=not done
            )
        if exc is None:
            return HandlerOutcome("ok", value=value)
        if isinstance(exc, NotApplied):
            return HandlerOutcome("not_applied", message=_safe_message(exc))
        if isinstance(exc, Exception | asyncio.CancelledError):
            # a CancelledError from a thread is the handler's own (its own event loop, a future it
            # waited on): this run was not cancelled
            return HandlerOutcome("error", message=_safe_message(exc))
        raise exc  # KeyboardInterrupt, SystemExit: not the tool's outcome to report


_TIMED_OUT = object()

# Every executor of this process, for a command-line entry point to wait on before it exits.
_executors: weakref.WeakSet[ToolExecutor] = weakref.WeakSet()


def executors_with_running_handlers() -> list[ToolExecutor]:
    return [ex for ex in list(_executors) if ex.running]


class _ThreadCall:
    """Where a sync handler's thread and its timer meet, on the event loop's thread (so no locks):
    the first to arrive resolves ``waiter``; after a timeout the thread's late result goes to ``late``."""

    __slots__ = ("late", "loop", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiter: asyncio.Future[tuple[Any, BaseException | None]] = loop.create_future()
        self.late: asyncio.Future[tuple[Any, BaseException | None]] | None = None

    def finished(self, result: tuple[Any, BaseException | None]) -> None:
        if not self.waiter.done():
            self.waiter.set_result(result)
        elif self.late is not None and not self.late.done():
            self.late.set_result(result)

    def expire(self) -> None:
        if not self.waiter.done():
            self.late = self.loop.create_future()
            self.waiter.set_result((_TIMED_OUT, None))


async def call_maybe_async(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a user hook (reconcile, approver checks) that may be sync or async."""
    result = fn(*args)
    if inspect.isawaitable(result):
        return await result
    return result
