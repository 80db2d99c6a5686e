"""Who is driving an operation: lease owners for direct drives (``Runner.run`` / ``resume``, D21).

A drive holds the operation's lease (the same columns workers claim) under an owner name that says
which process holds it: ``drive:<host>:<pid>:<process start>:<random>``. Another process on the same
host can then tell a driver that was killed from one that is still running, and take the operation
over at once instead of waiting for the lease to expire; a holder on another host, or a worker, is
taken as alive until its lease expires. Two drives never run one operation at the same time, so a
write left RUNNING is reconciled only when its driver is gone (D16).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import threading
from collections.abc import AsyncIterator
from functools import cache
from typing import TYPE_CHECKING, Any

from ..core.errors import OperationBusy, StoreError
from ..core.states import TERMINAL, State

if TYPE_CHECKING:
    from .outcome import Outcome
    from .runner import Runner

log = logging.getLogger("callbound.lease")

_PREFIX = "drive:"


@cache
def _host() -> str:
    # ':' separates the fields of an owner name
    return socket.gethostname().replace(":", "_") or "localhost"


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks since boot) of a process, from /proc (Linux); the start time
    tells a live process from a later one that reused its pid. None where /proc is not there."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: fields resume after the last ')'
    fields = stat[stat.rfind(b")") + 2 :].split()
    return (fields[0].decode(), fields[19].decode()) if len(fields) > 19 else None


def _start_ticks(pid: int) -> str | None:
    st = _proc_stat(pid)
    return None if st is None else st[1]


def new_owner() -> str:
    """A fresh owner name for one drive of this process."""
    pid = os.getpid()
    return f"{_PREFIX}{_host()}:{pid}:{_start_ticks(pid) or '-'}:{secrets.token_hex(8)}"


def owner_is_gone(owner: str | None) -> bool:
    """True only when ``owner`` is a drive of a process on this host that no longer runs. Anything
    else (a worker, another host, a name this cannot read, a process that may be alive) is False:
    its lease must expire first."""
    if not owner or not owner.startswith(_PREFIX):
        return False
    parts = owner[len(_PREFIX) :].split(":")
    if len(parts) != 4 or parts[0] != _host() or not parts[1].isdigit():
        return False
    pid, started = int(parts[1]), parts[2]
    if pid == os.getpid():
        return False  # this process: another drive of it is running now
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # exists, owned by another user: look at /proc
    except OSError:
        return False
    st = _proc_stat(pid)
    if st is None:
        return False
    state, now_started = st
    if state in ("Z", "X"):
        return True  # killed, not yet reaped by its parent: it runs nothing any more
    # the pid runs, but it is a different process from the one that took the lease (pid reused)
    return started != "-" and now_started != started


@contextlib.asynccontextmanager
async def driving(store: Any, operation_id: str, lease_s: float) -> AsyncIterator[int | None]:
    """Hold the operation's lease while the block drives it: take it (or take it over from a drive
    of this host whose process is gone), renew it every third of ``lease_s``, give it up at the end.
    Yields the new fencing token, which every commit of the drive then carries; None for a store
    without leases (nothing to hold). Raises ``OperationBusy`` while anyone else holds it."""
    hold = getattr(store, "hold", None)
    if hold is None:
        yield None
        return
    owner = new_owner()
    fence = hold(operation_id, owner, lease_s)
    if fence is None:
        holder = store.lease_holder(operation_id)
        if holder is not None and owner_is_gone(holder):
            log.warning("operation %s: its driver %s is gone; taking it over", operation_id, holder)
            fence = hold(operation_id, owner, lease_s, replacing=holder)
        if fence is None:
            if store.load_operation(operation_id) is None:
                yield None  # no such operation: the caller reports that
                return
            raise OperationBusy(operation_id, store.lease_holder(operation_id))
    heartbeat = asyncio.create_task(_renew(store, operation_id, owner, fence, lease_s))
    try:
        yield fence
    finally:
        heartbeat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await heartbeat
        give_up(store, operation_id, owner, fence, lease_s)


def give_up(store: Any, operation_id: str, owner: str, fence: int, lease_s: float) -> None:
    """Release the lease at the end of a drive or a worker's run, unless a handler of the operation
    still runs in this process: a sync handler whose run was cancelled (a server's request timeout, a
    client gone) goes on in its thread, an async write's work handed to a thread for its grace period
    (tools.linger_for).
    Released, the operation (EXECUTING, its write STARTED) was claimed by a worker or resumed at once,
    reconciled while the payment was in flight, and paid again (D16: never reconcile while the
    original may still run). A daemon thread renews the lease until those handlers end, then
    releases it; a process that exits takes them with it, and the lease expires as after a crash."""
    from .tools import lingering  # tools → threads; lease is imported by the runner before either

    alive = lingering(operation_id)
    if not alive:
        with contextlib.suppress(StoreError):
            store.release(operation_id, fence)
        return
    log.warning(
        "operation %s: %d handler(s) of it still running in this process (or in their grace period) "
        "after its run ended; renewing its lease every %.3g s until they end, then releasing it",
        operation_id,
        len(alive),
        lease_s / 3,
    )
    threading.Thread(
        target=_hold_until_done,
        args=(store, operation_id, owner, fence, lease_s, alive),
        name=f"callbound-lease-{operation_id}",
        daemon=True,
    ).start()


def _hold_until_done(
    store: Any, operation_id: str, owner: str, fence: int, lease_s: float, alive: list[threading.Event]
) -> None:
    for done in alive:
        while not done.wait(lease_s / 3):
            try:
                if not store.renew(operation_id, owner, fence, lease_s):
                    log.warning(
                        "operation %s: lease lost while a handler still runs (taken over, or expired "
                        "and claimed); no longer renewing it",
                        operation_id,
                    )
                    return
            except StoreError as exc:
                log.warning("operation %s: cannot renew the lease (will try again): %s", operation_id, exc)
    with contextlib.suppress(StoreError):
        if store.release(operation_id, fence):
            log.info("operation %s: its lingering handler(s) ended; lease released", operation_id)


async def _renew(store: Any, operation_id: str, owner: str, fence: int, lease_s: float) -> None:
    while True:
        await asyncio.sleep(lease_s / 3)
        try:
            if not store.renew(operation_id, owner, fence, lease_s):
                # taken over (cancelled, or our lease expired while the loop was blocked): the next
                # commit of this drive fails with StaleLease
                log.warning("operation %s: lease lost to another holder", operation_id)
                return
        except StoreError as exc:
            log.warning("operation %s: cannot renew the lease: %s", operation_id, exc)


async def until_paused_or_ended(store: Any, operation_id: str, poll_s: float = 0.05) -> bool:
    """Wait while another driver (a worker that claimed the operation first) works on it. True once it
    is WAITING_APPROVAL or has ended; False once nobody holds its lease any more while it is neither
    (its driver died, and its lease expired): the caller takes it over rather than wait for ever."""
    while True:
        stored = store.load_operation(operation_id)
        state = stored.head.get("state") if stored is not None else None
        if state in TERMINAL or state == State.WAITING_APPROVAL:
            return True
        if store.lease_holder(operation_id) is None:
            return False
        await asyncio.sleep(poll_s)


async def outcome_after_claim(runner: Runner, operation_id: str) -> Outcome:
    """``Runner.run``'s Outcome for a new operation a worker claimed before the run took its lease: the
    worker's result once it has paused or ended it; if the worker dies first (its lease expires with the
    operation neither), the run takes it over, as another worker would (D21), instead of waiting for
    ever (review round 18, d's note)."""
    while not await until_paused_or_ended(runner.store, operation_id):
        try:
            async with driving(runner.store, operation_id, runner.lease_s) as fence:
                return await runner.resume_leased(operation_id, fence=fence)
        except OperationBusy:
            continue  # another driver took it first: wait on that one
    return runner.outcome(operation_id)
