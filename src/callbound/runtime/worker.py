"""``callbound worker``: claim runnable operations from a shared store and drive them (D21).

A worker takes one operation at a time under a lease with a fencing token. A heartbeat renews the
lease while the operation runs; a worker that dies simply stops renewing, the lease expires by the
database's clock, and another worker takes the operation over. Every commit carries the fencing
token, so a worker that lost its lease (paused, partitioned) fails its next write with
``StaleLease`` instead of overwriting the new owner's progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import StaleLease, StoreError, UsageError
from ..core.states import TERMINAL
from ..stores.base import LeaseStore
from .app import App

log = logging.getLogger("callbound.worker")


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
        app_ref: dict[str, Any] | None = None,
        worker_id: str | None = None,
        lease_s: float = 30.0,
        poll_s: float = 0.2,
    ) -> None:
        if lease_s <= 0 or poll_s <= 0:
            raise UsageError("lease_s and poll_s must be positive")
        for method in ("claim", "renew", "release"):
            if not hasattr(store, method):
                raise UsageError(f"{type(store).__name__} does not support worker leases")
        self.app = app
        self.store = store
        self.runner = app.runner(store, ref=app_ref)
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.stats = WorkerStats()
        self._stopping = False

    def stop(self) -> None:
        self._stopping = True

    async def run(
        self, *, max_operations: int | None = None, idle_exit_s: float | None = None
    ) -> WorkerStats:
        """Work until stopped, ``max_operations`` are handled, or nothing was claimable for
        ``idle_exit_s`` seconds."""
        idle = 0.0
        while not self._stopping:
            if max_operations is not None and self.stats.claimed >= max_operations:
                break
            claim = self.store.claim(self.worker_id, self.lease_s)
            if claim is None:
                if idle_exit_s is not None and idle >= idle_exit_s:
                    break
                await asyncio.sleep(self.poll_s)
                idle += self.poll_s
                continue
            idle = 0.0
            await self.handle(*claim)
        return self.stats

    async def handle(self, operation_id: str, fence: int) -> None:
        self.stats.claimed += 1
        heartbeat = asyncio.create_task(self._heartbeat(operation_id, fence))
        try:
            outcome = await self.runner.resume_leased(operation_id)  # the claim is the lease
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
            self.stats.errors += 1
            log.error("worker %s could not run %s: %s", self.worker_id, operation_id, exc)
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            with contextlib.suppress(StoreError):
                self.store.release(operation_id, fence)

    async def _heartbeat(self, operation_id: str, fence: int) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                if not self.store.renew(operation_id, self.worker_id, fence, self.lease_s):
                    log.warning("worker %s: lease on %s was taken over", self.worker_id, operation_id)
                    return
            except StoreError as exc:
                log.warning("worker %s: cannot renew the lease on %s: %s", self.worker_id, operation_id, exc)
