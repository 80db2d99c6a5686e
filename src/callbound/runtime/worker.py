"""``callbound worker``: claim runnable operations from a shared store and drive them (D21).

A worker takes one operation at a time under a lease with a fencing token. A heartbeat renews the
lease while the operation runs; a worker that dies simply stops renewing, the lease expires by the
database's clock, and another worker takes the operation over. Every commit carries the fencing
token, so a worker that lost its lease (paused, partitioned) fails its next write with
``StaleLease`` instead of overwriting the new owner's progress.

Each operation runs with the application saved in its head (``{"ref": ..., "args": ...}``), not
necessarily the worker's own ``--app``: the registry and model must be the ones it was created with.
An operation whose drive fails keeps its lease until the lease expires, so it is retried after
``lease_s`` rather than re-claimed at once by this or another worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..core.canonical import canonical_json
from ..core.errors import CallboundError, StaleLease, StoreError, UsageError
from ..core.states import TERMINAL, State
from ..stores.base import LeaseStore, StoredOperation
from .app import App, load_app
from .checks import MAX_LEASE_S, app_reference
from .lease import give_up
from .runner import Runner
from .tools import lingering

log = logging.getLogger("callbound.worker")

# Runners built for operations saved with another application, kept per (ref, canonical args) so a
# worker does not rebuild them per operation; bounded so many distinct args cannot grow it forever.
_MAX_CACHED_RUNNERS = 32

AppKey = tuple[str, str]


def check_options(
    lease_s: float, poll_s: float, max_operations: int | None = None, idle_exit_s: float | None = None
) -> None:
    """``UsageError`` for an option ``Worker`` or ``Worker.run`` refuses. ``callbound worker`` calls it
    before it opens the store: a bad option must not leave a new store behind (review round 14, h9)."""
    for name, value in (("lease_s", lease_s), ("poll_s", poll_s)):
        # nan slipped through "<= 0": SQLite stored its expiry as NULL, a free lease, and a second
        # worker drove the operation while the first was in its write (paid twice); inf never expires
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
            raise UsageError(f"{name} must be a positive, finite number of seconds, not {value!r}")
    for name, value in (("lease_s", lease_s), ("poll_s", poll_s)):
        if value > MAX_LEASE_S:  # a poll of 1e308 s: an idle worker slept forever
            raise UsageError(f"{name} must be at most {MAX_LEASE_S:g} seconds (one day), not {value!r}")
    if idle_exit_s is not None and (
        isinstance(idle_exit_s, bool)
        or not isinstance(idle_exit_s, int | float)
        or not 0 <= idle_exit_s < math.inf
    ):
        raise UsageError(f"idle_exit_s must be a number of seconds >= 0, not {idle_exit_s!r}")  # nan: never
    if max_operations is not None and (
        isinstance(max_operations, bool) or not isinstance(max_operations, int) or max_operations < 0
    ):
        raise UsageError(f"max_operations must be an int >= 0, not {max_operations!r}")


def _check_app_and_store(app: object, store: object) -> None:
    """``Worker(factory, store)`` (the factory, not the App it returns), ``Worker(None, store)`` or a
    store URL raised AttributeError from ``app.runner`` (review round 16, F10)."""
    if not isinstance(app, App):
        hint = ""
        if isinstance(app, str):
            hint = f": load it, Worker(load_app({app!r}), store, app_ref={app!r}) (callbound.runtime.app)"
        elif callable(app):
            hint = f": call the factory, Worker({getattr(app, '__name__', 'factory')}(), store)"
        raise UsageError(
            "Worker(app, store) takes the callbound.runtime.app.App your factory returns, not "
            f"{type(app).__name__}{hint}"
        )
    if isinstance(store, str | bytes | os.PathLike):
        raise UsageError(
            f"Worker(app, store) takes a Store object, not a URL or path ({store!r}): open one with "
            "callbound.stores.open(url), e.g. callbound.stores.open('sqlite:///callbound.db')"
        )


def _app_key(ref: str, args: dict[str, Any]) -> AppKey:
    return ref, canonical_json(args)


@dataclass
class WorkerStats:
    claimed: int = 0
    finished: int = 0
    paused: int = 0
    lost_lease: int = 0
    errors: int = 0
    outcomes: dict[str, str] = field(default_factory=dict)


class Worker:
    def __init__(
        self,
        app: App,
        store: LeaseStore,
        *,
        app_ref: dict[str, Any] | str | None = None,
        worker_id: str | None = None,
        lease_s: float = 30.0,
        poll_s: float = 0.2,
    ) -> None:
        check_options(lease_s, poll_s)
        _check_app_and_store(app, store)
        for method in ("claim", "renew", "release"):
            if not hasattr(store, method):
                raise UsageError(f"{type(store).__name__} does not support worker leases")
        self.app = app
        self.store = store
        self.runner = app.runner(store, ref=app_ref)
        # the reference as the runner saves it (runtime/checks.py): a plain "module:factory" string is
        # {"ref": "module:factory", "args": {}}, a malformed one a UsageError
        own = self.runner.app
        self._own_key: AppKey | None = _app_key(own["ref"], own["args"]) if own else None
        self._runners: OrderedDict[AppKey, Runner] = OrderedDict()
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.stats = WorkerStats()
        self._stopping = False

    def stop(self) -> None:
        """Stop claiming; ``run`` returns once the operation in hand is paused or ended."""
        self._stopping = True

    @property
    def stopping(self) -> bool:
        return self._stopping

    async def run(
        self, *, max_operations: int | None = None, idle_exit_s: float | None = None
    ) -> WorkerStats:
        """Work until stopped, ``max_operations`` are handled, or nothing was claimable for
        ``idle_exit_s`` seconds. A claim whose drive only failed counts as idle time: a store
        holding nothing but failing operations is idle."""
        check_options(self.lease_s, self.poll_s, max_operations, idle_exit_s)
        # a process manager's log shows the worker up (and `callbound worker` has its signal handlers
        # in place by now: a SIGTERM from here on stops it after the operation in hand)
        log.info("worker %s: started (lease %g s, poll %g s)", self.worker_id, self.lease_s, self.poll_s)
        idle_since = time.monotonic()
        failures = 0
        while not self._stopping:
            if max_operations is not None and self.stats.claimed >= max_operations:
                break
            try:
                claim = self.store.claim(self.worker_id, self.lease_s)
            except StoreError as exc:
                # The database went away (a restart, a failover, an idle timeout): the store reconnects
                # on its next call, so the worker claims again after a wait instead of exiting with
                # the queue unserved (D21). The wait doubles, up to the lease, while the claims fail.
                failures = min(failures + 1, 16)
                self.stats.errors += 1
                delay = min(self.poll_s * 2**failures, self.lease_s)
                log.warning("worker %s could not claim (again in %.1f s): %s", self.worker_id, delay, exc)
                if idle_exit_s is not None and time.monotonic() - idle_since >= idle_exit_s:
                    break
                await asyncio.sleep(delay)
                continue
            failures = 0
            if claim is not None and await self.handle(*claim):
                idle_since = time.monotonic()
                continue
            if idle_exit_s is not None and time.monotonic() - idle_since >= idle_exit_s:
                break
            if claim is None:
                await asyncio.sleep(self.poll_s)
        return self.stats

    async def handle(self, operation_id: str, fence: int) -> bool:
        """Drive one claimed operation. Returns False when the drive failed; the lease is then kept
        until it expires, which is the retry delay (releasing it let the next claim, which takes the
        oldest runnable operation, pick the same failing one again at once)."""
        self.stats.claimed += 1
        heartbeat = asyncio.create_task(self._heartbeat(operation_id, fence))
        failed = stalled = False
        try:
            before = self.store.load_operation(operation_id)
            runner = self.runner_for(operation_id, before)
            # the claim is the lease; its token proves it is still ours when the operation is read
            outcome = await runner.resume_leased(operation_id, fence=fence)
            stalled = self._woken_for_nothing(operation_id, before, outcome.state)
            state = outcome.state.value
            self.stats.outcomes[operation_id] = state
            if outcome.state in TERMINAL:
                self.stats.finished += 1
            else:
                self.stats.paused += 1
            log.info("worker %s: %s -> %s", self.worker_id, operation_id, state)
        except StaleLease:
            self.stats.lost_lease += 1
            log.warning(
                "worker %s lost the lease on %s; another worker owns it now", self.worker_id, operation_id
            )
        except (UsageError, StoreError) as exc:
            failed = True
            self.stats.errors += 1
            log.error(
                "worker %s could not run %s (retried after its lease expires): %s",
                self.worker_id,
                operation_id,
                exc,
            )
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            if lingering(operation_id):  # a handler outlived a cancelled drive: hold until it ends
                give_up(self.store, operation_id, self.worker_id, fence, self.lease_s)
            elif not failed and not stalled:
                with contextlib.suppress(StoreError):
                    self.store.release(operation_id, fence)
        return not failed and not stalled

    def _woken_for_nothing(self, operation_id: str, before: StoredOperation | None, after: State) -> bool:
        """A paused operation claimed as woken (an approval decided or expired, by the database's clock)
        that the runner, by its own clock, left waiting with nothing written: the two clocks disagree
        (another host's clock, or a test clock). Released, it was claimed again at once, in a loop that
        also kept ``idle_exit`` from firing; kept, its lease holds it until it expires, as a failed
        drive's does, and the claim counts as idle time."""
        if (
            before is None
            or before.head.get("state") != State.WAITING_APPROVAL
            or after is not State.WAITING_APPROVAL
        ):
            return False
        now = self.store.load_operation(operation_id)
        if now is None or len(now.journal) != len(before.journal):
            return False
        log.warning(
            "worker %s: %s was claimed as woken, but by the application's clock no approval of it is decided "
            "or expired: the database's clock and the application's disagree; it is tried again when its "
            "lease expires",
            self.worker_id,
            operation_id,
        )
        return True

    def runner_for(self, operation_id: str, stored: StoredOperation | None = None) -> Runner:
        """The runner of the application ``operation_id`` was saved with; the worker's own when it
        saved none or the same one. Raises ``UsageError`` when that application cannot be built."""
        stored = stored or self.store.load_operation(operation_id)
        if stored is None:
            raise UsageError(f"no operation {operation_id!r} in this store")
        saved = stored.head.get("app")
        if not saved:
            return self.runner
        try:  # read as the runner saves it: a plain "module:factory" (an older build's) included
            normal = app_reference(saved)
            assert normal is not None
            ref, args = normal["ref"], normal["args"]
            key = _app_key(ref, args)
        except CallboundError as exc:
            raise UsageError(f"operation {operation_id} has a malformed saved application: {exc}") from exc
        if key == self._own_key:
            return self.runner
        runner = self._runners.get(key)
        if runner is not None:
            self._runners.move_to_end(key)
            return runner
        app = load_app(ref, args)
        try:
            runner = app.runner(self.store, ref={"ref": ref, "args": args})
        except UsageError:
            raise
        except Exception as exc:  # a bad App (e.g. runner_options) fails this operation, not the worker
            raise UsageError(f"cannot build a runner for {ref!r}: {type(exc).__name__}: {exc}") from exc
        self._runners[key] = runner
        if len(self._runners) > _MAX_CACHED_RUNNERS:
            self._runners.popitem(last=False)
        return runner

    async def _heartbeat(self, operation_id: str, fence: int) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                if not self.store.renew(operation_id, self.worker_id, fence, self.lease_s):
                    log.warning("worker %s: lease on %s was taken over", self.worker_id, operation_id)
                    return
            except StoreError as exc:
                log.warning("worker %s: cannot renew the lease on %s: %s", self.worker_id, operation_id, exc)
