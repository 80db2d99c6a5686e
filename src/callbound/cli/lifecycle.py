"""How a command's process ends: a worker stopping on a signal, and sync handler threads still running
when a command is done."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Any

from rich.console import Console
from rich.text import Text

from ..runtime.tools import executors_with_running_handlers


async def serve(worker: Any, err: Console, max_operations: int | None, idle_exit: float | None) -> Any:
    """Run the worker; SIGTERM or Ctrl-C stops it after the operation in hand (its lease released,
    the summary printed, exit 0), as a process manager expects. A second signal stops it at once
    (the default action): its operation's lease then expires and another worker takes it over."""
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        if worker.stopping:
            for s in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(s)
            signal.raise_signal(sig)
            return
        err.print(
            f"worker {worker.worker_id}: {sig.name}, stopping after the current operation "
            "(signal again to stop now)",
            highlight=False,
        )
        worker.stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # no signals off the main thread
            loop.add_signal_handler(sig, on_signal, sig)
    return await worker.run(max_operations=max_operations, idle_exit_s=idle_exit)


def let_tool_handlers_finish(err: Console) -> None:
    """A sync handler that timed out may still run in its (daemon) thread. Give it its grace period
    to finish, then exit without it rather than hang: its call already ended as a timeout. A write
    whose handler outlived its grace is an unknown outcome nobody may reconcile (its thread could still
    land the effect): its operation stopped OUTCOME_UNKNOWN, and a human settles it (D16)."""
    left = sum(ex.drain(ex.grace_s) for ex in executors_with_running_handlers())
    if left:
        err.print(
            Text.assemble(
                ("warning:", "yellow"),
                f" {left} tool handler(s) that timed out are still running; exiting without waiting for "
                "them (their calls ended as timeouts; a write among them is an unknown outcome: check it, then "
                "record it with `callbound ledger settle`)",
            ),
            highlight=False,
        )
