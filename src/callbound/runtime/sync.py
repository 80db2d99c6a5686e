"""``run_blocking``: the thin synchronous facade of the async runtime (``run_sync``, ``resume_sync`` and the
worker command). ``asyncio.run``, except at the end: nothing left behind by handlers that outlived
their timeout may keep it from returning (D14, D16)."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from ..core.errors import UsageError
from .threads import DaemonExecutor
from .tools import abandon_tasks

log = logging.getLogger("callbound.runtime")

_T = TypeVar("_T")


def run_blocking(coro: Coroutine[Any, Any, _T], grace_s: float) -> _T:
    """Run ``coro`` on a new event loop and close it within ``grace_s`` of its end. At the end:
    - tasks still there (async handlers abandoned after their timeout and grace, whose calls already
      ended as timeouts) are cancelled and waited for, not for as long as they swallow cancellations;
    - work such handlers handed to a thread (``asyncio.to_thread``; the loop's default executor is a
      pool of daemon threads here) is waited for, not for as long as it hangs: the stdlib pool would
      join a hung thread at loop close, and ``run_sync`` would never return;
    then the loop closes without them, and says how many it left."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise UsageError(
            "run_sync/resume_sync cannot be called from a running event loop; await run()/resume()"
        )
    runner = asyncio.Runner()  # its run(): a new loop, the context, Ctrl-C cancels the main task
    loop = runner.get_loop()
    # the stdlib default's size (ThreadPoolExecutor: min(32, CPUs + 4))
    threads = DaemonExecutor(min(32, (os.cpu_count() or 1) + 4), "callbound-to-thread")
    loop.set_default_executor(threads)
    try:
        return runner.run(coro)
    finally:  # Runner.close() would wait for every task and thread: closed here instead
        deadline = time.monotonic() + max(grace_s, 0.0)
        try:
            if left := asyncio.all_tasks(loop):
                for task in left:
                    task.cancel()
                _, stuck = loop.run_until_complete(asyncio.wait(left, timeout=grace_s))
                if stuck:
                    log.warning("%d task(s) ignoring cancellation abandoned with the loop", len(stuck))
                    abandon_tasks(stuck)
            loop.run_until_complete(loop.shutdown_asyncgens())
            if hung := threads.drain(deadline - time.monotonic()):
                log.warning("%d thread job(s) still running left behind with the loop", hung)
            threads.shutdown(wait=False)
        finally:
            asyncio.set_event_loop(None)
            loop.close()
