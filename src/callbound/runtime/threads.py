"""Daemon worker threads for sync handlers.

A sync handler that hangs cannot be stopped; its call times out and the operation goes on (D16).
``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter exits, so one hung
handler kept a finished ``callbound run`` (or any script) from ever exiting. These threads are
daemons: the process exits when its work is done, and ``drain`` lets a caller (the CLI) give handlers
still running a bounded time to finish first and say what it left behind.

Threads are started on demand up to ``max_threads`` and reused, as the stdlib pool does: a finished
thread marks itself idle, and a submit that finds an idle thread starts none.

A job waits in a queue while every thread is busy (hung handlers that timed out keep theirs). Its
caller may ``withdraw`` it: a job withdrawn before a thread took it never runs. That is how a write
queued behind hung handlers is known not to have happened, instead of starting after its operation
gave up on it.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ..core.errors import UsageError

Job = Callable[[], None]
_R = TypeVar("_R")

_QUEUED, _STARTED, _WITHDRAWN = 0, 1, 2


# The longest grace a timed-out handler is waited for: one day, as the longest lease (checks.MAX_LEASE_S).
_MAX_GRACE_S = 86_400.0


def check_executor_args(max_threads: Any, grace_s: Any) -> None:
    """``ToolExecutor``'s arguments. ``max_threads=0`` raised a bare ValueError (not callbound's
    UsageError), ``True`` or ``2.5`` was taken as a count, and a ``grace_s`` that is NaN, infinite or
    past what ``time.sleep`` takes was accepted, then raised ValueError or OverflowError in a cancelled
    run's lease hold; a string, a TypeError at the first timeout. A UsageError now, when the executor
    is built (review round 19, c F2)."""
    if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
        raise UsageError(
            f"ToolExecutor(max_threads=...) must be an integer >= 1 (the most sync handlers run at once), "
            f"not {max_threads!r}"
        )
    if (
        isinstance(grace_s, bool)
        or not isinstance(grace_s, int | float)
        or not 0 <= grace_s <= _MAX_GRACE_S  # also refuses NaN
    ):
        raise UsageError(
            f"ToolExecutor(grace_s=...) must be a number of seconds from 0 to {_MAX_GRACE_S:g}, not {grace_s!r}"
        )


class Ticket:
    """A submitted job. The pool's lock decides, once, whether it starts or is withdrawn."""

    __slots__ = ("_job", "_pool", "_state")

    def __init__(self, pool: HandlerThreads, job: Job) -> None:
        self._pool = pool
        self._job: Job | None = job
        self._state = _QUEUED

    def withdraw(self) -> bool:
        """Take the job back if no thread has started it: True means it never runs. False: it has
        started (or was withdrawn already, which also means it never runs)."""
        return self._pool._withdraw(self)


class HandlerThreads:
    def __init__(self, max_threads: int, name: str) -> None:
        if max_threads < 1:
            raise ValueError("max_threads must be at least 1")
        self._max = max_threads
        self._name = name
        self._jobs: queue.SimpleQueue[Ticket | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._running = 0  # jobs submitted and not finished (queued or running), withdrawn ones not
        self._closed = False

    @property
    def running(self) -> int:
        """Jobs submitted and not yet finished nor withdrawn."""
        with self._lock:
            return self._running

    def submit(self, job: Job) -> Ticket:
        """Run ``job`` on a worker thread unless it is withdrawn first. ``job`` must not raise (the
        runtime's jobs catch everything and hand it to the event loop)."""
        ticket = Ticket(self, job)
        with self._lock:
            if self._closed:
                raise RuntimeError("handler threads are shut down")
            self._running += 1
        self._jobs.put(ticket)
        if self._idle.acquire(blocking=False):
            return ticket  # an idle thread takes it
        with self._lock:
            if len(self._threads) < self._max:
                t = threading.Thread(
                    target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True
                )
                self._threads.append(t)
                t.start()
        return ticket

    def _withdraw(self, ticket: Ticket) -> bool:
        with self._done:
            if ticket._state != _QUEUED:
                return False
            ticket._state, ticket._job = _WITHDRAWN, None  # the queue keeps the ticket, not the job
            self._running -= 1
            self._done.notify_all()
            return True

    def _work(self) -> None:
        while True:
            ticket = self._jobs.get()
            if ticket is None:
                return
            with self._lock:  # start it, or find it withdrawn: never both
                job = ticket._job
                if job is not None:
                    ticket._state, ticket._job = _STARTED, None
            if job is not None:
                try:
                    job()
                finally:
                    with self._done:
                        self._running -= 1
                        self._done.notify_all()
            self._idle.release()

    def drain(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for every submitted job to finish; returns how many have not."""
        deadline = time.monotonic() + max(timeout_s, 0.0)
        with self._done:
            while self._running:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._done.wait(left)
            return self._running

    def shutdown(self) -> None:
        """Stop taking jobs; idle threads end, busy ones end after their job. Does not wait."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            n = len(self._threads)
        for _ in range(n):
            self._jobs.put(None)


class DaemonExecutor(ThreadPoolExecutor):
    """An executor on daemon ``HandlerThreads``, for the event loop that ``run_blocking`` owns: work
    an async handler hands to a thread (``asyncio.to_thread`` around a blocking client) and that hangs
    past its call's timeout must not keep ``run_sync`` from returning, nor the process from exiting.
    The stdlib pool joins its threads, at loop close and at interpreter exit, for as long as they run;
    ``run_blocking`` instead waits a bounded time (``drain``). A ``ThreadPoolExecutor`` only because
    asyncio's ``set_default_executor`` takes no other kind: every method that runs work is replaced,
    so the base class never starts a thread of its own."""

    def __init__(self, max_threads: int, name: str) -> None:
        super().__init__(max_workers=max_threads, thread_name_prefix=name)
        self._pool = HandlerThreads(max_threads, name)

    def submit(self, fn: Callable[..., _R], /, *args: Any, **kwargs: Any) -> Future[_R]:
        future: Future[_R] = Future()

        def job() -> None:
            if not future.set_running_or_notify_cancel():
                return  # cancelled while queued: it never runs
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the awaiting side, as the stdlib pool does
                future.set_exception(exc)
            else:
                future.set_result(result)

        self._pool.submit(job)
        return future

    def drain(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for the submitted work; how much is still running."""
        return self._pool.drain(timeout_s)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking work. ``wait`` waits for running work without bound, as the stdlib's does;
        ``run_blocking`` calls ``drain`` with its grace instead, then this without waiting."""
        self._pool.shutdown()
        while wait and self._pool.drain(3600.0):
            pass
