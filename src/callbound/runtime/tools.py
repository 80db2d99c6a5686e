"""Running one handler: timeouts, worker threads for sync handlers, and what an outcome means.

A handler's outcome is one of: ``ok`` (value), ``error`` (it raised), ``not_applied`` (it raised
``NotApplied``: the effect definitely did not happen), ``timeout``. For sync handlers a timeout does
not stop the thread; an async handler is cancelled, but may catch the cancellation and go on.
``still_running`` says whether either was still alive after the grace period, in which case nothing
may reconcile yet (D16).

A handler that never started (``started`` False) did nothing: its job was still queued for a thread
when its time was up, or the turn had no free slot for it in time. Such a job is withdrawn, never
started later. A write's handler that never started is ``not_applied`` (ledger FAILED, D16); anything
else (a read, a reconcile hook, whose not running tells nothing about an effect) is a ``timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ..core.canonical import canonical_bytes
from ..core.errors import CanonicalizationError, NotApplied
from ..core.registry import CallContext, discard_awaitable, is_async_callable
from .slots import Slot, current_turn, resolve
from .slots import turn_slots as turn_slots  # where execute.py and the tests import it from
from .threads import HandlerThreads, Ticket, check_executor_args


class ToolError(Exception):
    """Raise from a handler to send ``message`` to the model as the error text. For write tools it
    still means "outcome unknown" unless you raise ``NotApplied`` instead."""


@dataclass(frozen=True, slots=True)
class HandlerOutcome:
    kind: str  # "ok" | "error" | "not_applied" | "timeout"
    value: Any = None
    message: str | None = None  # model-safe text
    still_running: bool = False
    started: bool = True  # False: the handler never ran (nothing of it happened, nothing will)


def json_result(value: Any) -> tuple[Any, int]:
    """A handler's return value as JSON data, and the size of its canonical JSON (D11); raises where it
    is not JSON. Pydantic models are dumped in JSON mode wherever they are in it (``[Order(...)]``,
    ``{"refunds": [Refund(...)]}``), as tuples become lists wherever they are; nothing else is converted
    (a ``Decimal`` outside a model stays not JSON). Only a model returned whole used to be dumped: a list
    of models read as "not JSON", a write's result lost with it (review round 18, c F1)."""
    data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    try:
        return data, len(canonical_bytes(data))
    except CanonicalizationError:
        data = _models_dumped(data)  # walked only here, off the common path; unchanged, fails again
        return data, len(canonical_bytes(data))


def _models_dumped(value: Any) -> Any:
    """``value`` with every pydantic model inside its dicts, lists and tuples dumped in JSON mode; the
    same object where it holds none."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        items = {k: _models_dumped(v) for k, v in value.items()}
        return items if any(items[k] is not v for k, v in value.items()) else value
    if isinstance(value, list | tuple):
        seq = [_models_dumped(v) for v in value]
        return seq if any(a is not b for a, b in zip(seq, value, strict=True)) else value
    return value


def _safe_message(exc: BaseException) -> str:
    if isinstance(exc, ToolError | NotApplied) and exc.args:
        try:
            text = str(exc.args[0])
        except Exception:  # an object whose __str__ raises: the kind of failure, as for any other
            return f"the tool failed ({type(exc).__name__})"
        # The text goes to the model and is hashed into the binding and the audit chain, which need
        # valid Unicode (D6). A lone surrogate (a file name or a downstream message decoded with
        # surrogateescape) raised CanonicalizationError out of run(): a read re-ran its handler on
        # every resume, a write's NotApplied ended STOPPED(OUTCOME_UNKNOWN). Written as its escape
        # ("\udce9") instead, so the model still gets HANDLER_ERROR with the text (D4).
        return _encodable(text)[:500]
    # No message text, traceback or internals: only the kind of failure.
    return f"the tool failed ({type(exc).__name__})"


def _encodable(text: str) -> str:
    """``text`` with each lone surrogate written as its backslash escape; unchanged when it has none."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class ToolExecutor:
    """Owns the threads for sync handlers, so a hung handler cannot starve the event loop's default
    pool, nor keep the process from exiting (daemon threads; ``drain`` waits for them, bounded)."""

    def __init__(self, max_threads: int = 16, grace_s: float = 2.0) -> None:
        check_executor_args(max_threads, grace_s)
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
        turn = current_turn.get()
        if turn is None:
            return await self._run(handler, args, ctx, timeout_s, None)
        slot = await turn.acquire(timeout_s)
        if slot is None:
            why = "the turn's other calls held every handler slot"
            return turn.not_started(handler, _not_started(timeout_s, why))
        # The handler itself runs outside the turn: a call it makes through an executor is not one
        # of this turn's calls and must not wait for this turn's slots (the one it runs in included).
        token = current_turn.set(None)
        try:
            outcome = await self._run(handler, args, ctx, turn.cap(timeout_s), slot)
        finally:
            current_turn.reset(token)
            slot.release()  # this call's hold; a thread still running keeps its own
        return outcome if outcome.started else turn.not_started(handler, outcome)

    async def _run(
        self, handler: Callable[..., Any], args: Any, ctx: CallContext, timeout_s: float, slot: Slot | None
    ) -> HandlerOutcome:
        if is_async_callable(handler):
            return await self._run_async(handler, args, ctx, timeout_s, slot)
        return await self._run_sync(handler, args, ctx, timeout_s, slot)

    async def _run_async(
        self, handler: Callable[..., Any], args: Any, ctx: CallContext, timeout_s: float, slot: Slot | None
    ) -> HandlerOutcome:
        # Its own task, not awaited in place under asyncio.timeout: a handler that catches the
        # CancelledError and goes on (cleanup that sleeps, a loop that retries) held the call, and the
        # deadline, for as long as it liked (g18). Now it is cancelled on timeout and waited for at most
        # the grace period, like a sync handler's thread (D16). The task copies this context.
        loop = asyncio.get_running_loop()
        task = loop.create_task(_invoke(handler, args, ctx), name="callbound-tool")
        hold = _TaskHold(slot, loop.create_future())
        _handler_tasks.add(task)
        task.add_done_callback(hold.settled)
        # one future and one timer (asyncio.wait adds a future, callbacks and a set each time: ~5 µs)
        timer = loop.call_later(max(timeout_s, 0.0), resolve, hold.ended)
        try:
            await hold.ended
        except asyncio.CancelledError:
            # The run itself is cancelled: so is the handler, as when it ran in place. Its cleanup gets
            # the grace period, not more; the run's cancellation is not the tool's outcome to report.
            # One that catches the cancellation and goes on (finishing a payment in flight) holds the
            # operation's lease until it ends, as a sync handler's thread does (D16, lease.give_up):
            # registered before the wait, which a second cancellation may cut short.
            task.cancel()
            _linger_task(ctx.operation_id, task)
            await asyncio.wait({task}, timeout=self.grace_s)
            raise
        finally:
            timer.cancel()
        if not task.done():
            if slot is not None:
                slot.overdue()
            task.cancel()
            # Ended within the grace: nothing of it still runs; what it returned counts for nothing.
            # Still running after it: nothing may reconcile yet (D16). It stays referenced in
            # _handler_tasks, and keeps its turn slot, until it ends. The run cancelled during this
            # wait: the task may still be paying, so it holds the lease as above (review 14, h13).
            try:
                finished, _ = await asyncio.wait({task}, timeout=self.grace_s)
            except asyncio.CancelledError:
                _linger_task(ctx.operation_id, task)
                raise
            return HandlerOutcome(
                "timeout",
                message=f"the tool did not answer within {timeout_s:.3g}s",
                still_running=not finished,
            )
        hold.release()
        if task.cancelled():
            # Never cancelled by us (it was done in time): something the handler awaited was cancelled.
            # A failure of the tool (for a write, an unknown outcome), not an exit from the loop (D4).
            return HandlerOutcome("error", message=_safe_message(asyncio.CancelledError()))
        exc = task.exception()
        if exc is None:
            return _returned(task.result())
        if isinstance(exc, NotApplied):
            return HandlerOutcome("not_applied", message=_safe_message(exc))
        if isinstance(exc, Exception):
            return HandlerOutcome(
                "error", message=_safe_message(SystemExit() if isinstance(exc, _Exited) else exc)
            )
        raise exc  # KeyboardInterrupt, other BaseExceptions: not the tool's outcome

    async def _run_sync(
        self, handler: Callable[..., Any], args: Any, ctx: CallContext, timeout_s: float, slot: Slot | None
    ) -> HandlerOutcome:
        loop = asyncio.get_running_loop()
        call = _ThreadCall(loop, slot)
        run_in_context = contextvars.copy_context().run

        done = threading.Event()

        def work() -> None:
            try:
                result: tuple[Any, BaseException | None] = (run_in_context(handler, args, ctx), None)
            except BaseException as exc:  # handed to the event loop, which decides what it means
                result = (None, exc)
            done.set()
            # RuntimeError: the event loop closed while the handler ran, so nobody is waiting
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(call.finished, result)

        # One future, resolved from the thread by call_soon_threadsafe or by the timer, whichever
        # comes first. run_in_executor + asyncio.shield + asyncio.timeout did the same with three
        # chained futures and a task wake-up each, about 12 µs more per call here (bench: thread hop).
        # The timeout counts from here, queueing for a thread included: D14 and D16 bound the call,
        # not the handler's own running time. A job still queued when it is up is withdrawn.
        call.hold_slot()
        try:
            ticket = call.ticket = self._pool.submit(work)
        except BaseException:
            call.release_slot()
            raise
        timer = loop.call_later(max(timeout_s, 0.0), call.expire)
        try:
            value, exc = await call.waiter
        except asyncio.CancelledError:
            # The run is cancelled: a job not started yet must not start after its operation let go
            # of it (a write with nobody to record its outcome). One that started goes on in its
            # thread: the operation's lease must outlive it (lease.give_up), or another process
            # reconciles a write still in flight, hears "not applied", and pays again (D16).
            if ticket.withdraw():
                call.release_slot()
            else:
                _linger(ctx.operation_id, done)
            raise
        finally:
            timer.cancel()
        if value is _NOT_STARTED:
            return _not_started(timeout_s, "every handler thread was busy")
        if value is _TIMED_OUT:
            # The thread keeps running (it cannot be stopped); give it a grace period to finish
            # before anyone reconciles (D16). What it returns now counts for nothing.
            assert call.late is not None
            try:
                ended, _ = await asyncio.wait({call.late}, timeout=self.grace_s)
            except asyncio.CancelledError:
                if not done.is_set():  # the run cancelled in the grace wait: as a cancel above (D16)
                    _linger(ctx.operation_id, done)
                raise
            return HandlerOutcome(
                "timeout", message=f"the tool did not answer within {timeout_s:.3g}s", still_running=not ended
            )
        if exc is None:
            return _returned(value)
        if isinstance(exc, NotApplied):
            return HandlerOutcome("not_applied", message=_safe_message(exc))
        if isinstance(exc, Exception | asyncio.CancelledError | SystemExit):
            # a CancelledError from a thread is the handler's own (its own event loop, a future it
            # waited on): this run was not cancelled; so is a SystemExit (sys.exit() in code it calls)
            return HandlerOutcome("error", message=_safe_message(exc))
        raise exc  # KeyboardInterrupt: not the tool's outcome to report


# Sync handlers whose run was cancelled while their threads went on, by operation: see lingering().
_lingering_lock = threading.Lock()
_lingering: dict[str, list[threading.Event]] = {}


def _linger(operation_id: str, done: threading.Event) -> None:
    with _lingering_lock:
        _lingering.setdefault(operation_id, []).append(done)


def _linger_task(operation_id: str, task: asyncio.Task[Any]) -> None:
    """``_linger`` for an async handler's task: its event is set when the task ends, or when its event
    loop closes without it (``abandon_tasks``: it can never run again)."""
    if task.done():
        return
    done = threading.Event()
    _task_done[task] = done
    task.add_done_callback(lambda t: _task_done.pop(t, done).set())
    _linger(operation_id, done)


def linger_for(operation_id: str, grace_s: float) -> None:
    """Hold the operation's lease (lease.give_up) for ``grace_s`` after every handler of it still
    lingering in this process has ended. For an async write whose run was cancelled: cancelling its
    task does not stop work it handed to a thread (``asyncio.to_thread`` around a blocking client),
    which may still pay. After a timeout, callbound waits the grace period before reconcile asks
    (execute._run_write); a cancelled run gave none, the lease went at once, and a resume reconciled
    the payment in flight, heard "not applied", and paid again (D16, D18; review round 15, r8).
    Only cancelled runs get here: one daemon thread each, nothing on the normal path."""
    done = threading.Event()
    with _lingering_lock:
        before = [e for e in _lingering.get(operation_id, ()) if not e.is_set()]
        _lingering.setdefault(operation_id, []).append(done)

    def hold() -> None:
        for handler_done in before:  # a task that caught the cancellation goes on: the grace follows it
            handler_done.wait()
        time.sleep(max(grace_s, 0.0))
        done.set()

    threading.Thread(target=hold, name=f"callbound-grace-{operation_id}", daemon=True).start()


def lingering(operation_id: str) -> list[threading.Event]:
    """The handler threads of ``operation_id`` in this process that outlived a cancelled run and still
    run (each event is set when its handler returns), and the grace periods still running of its
    cancelled async writes (``linger_for``)."""
    with _lingering_lock:
        alive = [e for e in _lingering.pop(operation_id, []) if not e.is_set()]
        if alive:
            _lingering[operation_id] = alive
        return list(alive)


def _returned(value: Any) -> HandlerOutcome:
    """A handler's (or reconcile hook's) return value as its outcome. An awaitable is no answer: a sync
    function that calls an async client without awaiting it (``reconcile=lambda k, c: client.lookup(k)``)
    returned a coroutine that never ran, and "ok" recorded the refund as applied and the reconcile as
    done (D16: reconciled, not guessed). An error instead: for a write, an unknown outcome; never
    ``not_applied``, which from a reconcile hook would let the write run again."""
    if discard_awaitable(value):
        return HandlerOutcome(
            "error", message="the tool returned an awaitable it did not wait for (declare it async def)"
        )
    return HandlerOutcome("ok", value=value)


_TIMED_OUT = object()
_NOT_STARTED = object()

# Async handlers' tasks until they end: the event loop keeps only weak references to tasks, and an
# abandoned one (timed out, still running after its grace) must not be collected mid-flight.
_handler_tasks: set[asyncio.Task[Any]] = set()
# The lingering event of each async handler task that outlived its cancelled run (see _linger_task).
_task_done: dict[asyncio.Task[Any], threading.Event] = {}


def abandon_tasks(tasks: set[asyncio.Task[Any]]) -> None:
    """Let go of tasks whose event loop is closing without them (``run_blocking``): they can never end
    now, so they leave ``_handler_tasks`` (no reference kept for the process's life) and their
    collection is not reported as a lost pending task (their calls already ended as timeouts, and a
    warning named them once)."""
    for task in tasks:
        _handler_tasks.discard(task)
        done = _task_done.pop(task, None)
        if done is not None:
            done.set()  # it will never run again: a lease held for it can go (lease.give_up)
        task._log_destroy_pending = False  # type: ignore[attr-defined]  # asyncio.Task's own switch


async def _invoke(handler: Callable[..., Any], args: Any, ctx: CallContext) -> Any:
    try:
        return await handler(args, ctx)  # the call itself inside the task: what it raises is the task's
    except SystemExit as exc:
        # sys.exit() in code the tool calls (a wrapped CLI) is its failure, as in a thread: left to the
        # task, asyncio stopped the event loop with it and run() raised it (issue 2 §3, D4, D16)
        raise _Exited from exc


class _Exited(Exception):
    """A handler's SystemExit, carried out of its task as an ordinary failure."""


class _TaskHold:
    """An async handler's task's own hold on its turn slot, given back once, when the task ends (or
    when its result is taken): a task past its timeout keeps counting against max_parallel (D15).
    ``ended`` is resolved when the task ends (or by the caller's timer)."""

    __slots__ = ("ended", "slot")

    def __init__(self, slot: Slot | None, ended: asyncio.Future[None]) -> None:
        self.slot = slot
        self.ended = ended
        if slot is not None:
            slot.hold()

    def release(self) -> None:
        slot, self.slot = self.slot, None
        if slot is not None:
            slot.release()

    def settled(self, task: asyncio.Task[Any]) -> None:
        self.release()
        resolve(self.ended)
        _handler_tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a late failure of an abandoned handler is not logged as lost


def _not_started(timeout_s: float, why: str) -> HandlerOutcome:
    return HandlerOutcome(
        "timeout",
        message=f"the tool did not start within {timeout_s:.3g}s ({why}); it was not run",
        started=False,
    )


# Every executor of this process, for a command-line entry point to wait on before it exits.
_executors: weakref.WeakSet[ToolExecutor] = weakref.WeakSet()


def executors_with_running_handlers() -> list[ToolExecutor]:
    return [ex for ex in list(_executors) if ex.running]


class _ThreadCall:
    """Where a sync handler's thread and its timer meet, on the event loop's thread (so no locks):
    the first to arrive resolves ``waiter``; after a timeout the thread's late result goes to ``late``.
    A timer that finds the job still queued withdraws it: the waiter gets ``_NOT_STARTED``."""

    __slots__ = ("late", "loop", "slot", "ticket", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, slot: Slot | None) -> None:
        self.loop = loop
        self.slot = slot
        self.ticket: Ticket | None = None
        self.waiter: asyncio.Future[tuple[Any, BaseException | None]] = loop.create_future()
        self.late: asyncio.Future[tuple[Any, BaseException | None]] | None = None

    def hold_slot(self) -> None:
        # The thread's own hold on the turn's slot, given back when the job ends or is withdrawn, not
        # when the caller stops waiting: a hung handler keeps counting against max_parallel (D15).
        if self.slot is not None:
            self.slot.hold()

    def release_slot(self) -> None:
        slot, self.slot = self.slot, None
        if slot is not None:
            slot.release()

    def finished(self, result: tuple[Any, BaseException | None]) -> None:
        self.release_slot()
        if not self.waiter.done():
            self.waiter.set_result(result)
        elif self.late is not None and not self.late.done():
            self.late.set_result(result)

    def expire(self) -> None:
        if self.waiter.done():
            return
        if self.ticket is not None and self.ticket.withdraw():
            self.release_slot()  # it will never run
            self.waiter.set_result((_NOT_STARTED, None))
            return
        if self.slot is not None:
            self.slot.overdue()
        self.late = self.loop.create_future()
        self.waiter.set_result((_TIMED_OUT, None))


async def call_maybe_async(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a user hook (reconcile, approver checks) that may be sync or async."""
    result = fn(*args)
    if inspect.isawaitable(result):
        return await result
    return result
