"""How a command's process ends: a worker stopping on a signal, a drive stopped by Ctrl-C, and sync
handler threads still running when a command is done.

Ctrl-C during ``run``/``resume``/``demo`` (review round 16, r2 F5): the command says where the
operation was left and prints the ``callbound resume`` that continues it (exit 130); handlers it
interrupted get their grace period, and a second Ctrl-C exits at once, without a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Any

import typer
from rich.console import Console
from rich.text import Text

from ..core.errors import CallboundError
from ..core.states import TERMINAL
from ..runtime.tools import executors_with_running_handlers

# The operations whose drive Ctrl-C stopped in this process (let_tool_handlers_finish words its warning
# for them: no handler "timed out" there), and the executors of the handlers it interrupted, held here:
# the registry of executors is weak, and the command's runner is gone by the time the process exits.
_interrupted: list[str] = []
_held: list[Any] = []


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


def interrupted(err: Console, store: Any, operation_id: str, flag: str) -> typer.Exit:
    """Ctrl-C stopped the drive of ``operation_id``: say how it was left and what continues it.
    ``flag`` is the ``--store`` part of the commands to print. The store is what a new process
    would read: the drive left it consistent, at the state of its last commit."""
    _interrupted.append(operation_id)
    running = executors_with_running_handlers()
    _held.extend(running)
    try:
        stored = store.load_operation(operation_id)
        state = None if stored is None else str(stored.head.get("state"))
    except CallboundError:  # unreadable now (locked): the resume command is still the way on
        state = "?"
    if state is None:
        said = f"operation {operation_id} was not saved yet; nothing ran: run the command again"
    elif state in TERMINAL:
        said = f"operation {operation_id} had already ended {state}"
    else:
        shown = "" if state == "?" else f" ({state})"
        said = (
            f"operation {operation_id} is saved{shown} and can go on from where it stopped: "
            f"callbound resume {operation_id}{flag}"
        )
        if running:
            said += (
                " (a tool call it was running is resolved by that resume: a write is reconciled, or the "
                "operation stops OUTCOME_UNKNOWN when its tool has no reconcile)"
            )
    err.print(Text.assemble(("interrupted:", "yellow"), f" {said}"), highlight=False)
    return typer.Exit(130)


def store_failed(
    exc: Exception, store: Any, operation_id: str, flag: str, again: str | None, app: str = ""
) -> str:
    """The one error line for a store that failed while a command drove ``operation_id`` (locked past
    its busy timeout, a server gone): the store's message, then where the operation was left and the
    resume that continues it, as after a Ctrl-C. The store's own advice, "retry", read as running the
    command again: for ``run`` and ``demo`` (``again``) that starts another operation, and a write the
    first one had applied (a refund) was made a second time under a new intent (review round 18, d F3).
    OperationBusy and unreadable rows say what to do themselves; they are returned as they are. ``app``
    is the ``--app`` part of that resume (``resume --app``: an operation saved without its application
    needs it again, review round 19, d F6)."""
    from ..core.errors import OperationBusy
    from ..stores.rows import UnreadableRow

    said = str(exc)
    if isinstance(exc, UnreadableRow) and exc.where.startswith("approval "):
        # the operation cannot go on while its approval row does not load; a cancel still ends it
        # (review round 22, c)
        return (
            f"{said}: restore the row from a backup to go on with operation {operation_id}, or end it "
            f"without a decision: callbound ops cancel {operation_id}{flag}"
        )
    if isinstance(exc, OperationBusy | UnreadableRow):
        return said
    resume = f"callbound resume {operation_id}{app}{flag}"
    try:
        stored = store.load_operation(operation_id)
    except CallboundError:
        return (
            f"{said}; operation {operation_id} may have been saved: once the store answers, look with "
            f"callbound ops show {operation_id}{flag} and continue it with {resume}"
        )
    if stored is None:
        return f"{said}; operation {operation_id} was not saved and no tool ran" + (
            f": run {again} again" if again else ""
        )
    state = str(stored.head.get("state"))
    if state in TERMINAL:
        return said
    instead = f" (running {again} again would start another operation)" if again else ""
    return (
        f"{said}; operation {operation_id} is saved ({state}) as of its last commit: once the store "
        f"answers, continue it with {resume}{instead}"
    )


def let_tool_handlers_finish(err: Console) -> None:
    """A sync handler that timed out may still run in its (daemon) thread. Give it its grace period
    to finish, then exit without it rather than hang: its call already ended as a timeout. A write
    whose handler outlived its grace is an unknown outcome nobody may reconcile (its thread could still
    land the effect): its operation stopped OUTCOME_UNKNOWN, and a human settles it (D16).
    After a Ctrl-C the handlers still running are the ones it interrupted; a second Ctrl-C ends the
    wait (``main`` catches it)."""
    running = [
        ex
        for ex in {id(ex): ex for ex in [*_held, *executors_with_running_handlers()]}.values()
        if ex.running
    ]
    if running and _interrupted:
        err.print(
            f"waiting up to {max(ex.grace_s for ex in running):g} s for the interrupted tool handler(s) to "
            "return (Ctrl-C again to exit now)",
            highlight=False,
        )
    left = sum(ex.drain(ex.grace_s) for ex in running)
    if left and _interrupted:
        err.print(
            Text.assemble(
                ("warning:", "yellow"),
                f" {left} interrupted tool handler(s) still running; exiting without them. Whatever they "
                "do now is not recorded: the resume printed above resolves each write they ran",
            ),
            highlight=False,
        )
    elif left:
        err.print(
            Text.assemble(
                ("warning:", "yellow"),
                f" {left} tool handler(s) that timed out are still running; exiting without waiting for "
                "them (their calls ended as timeouts; a write among them is an unknown outcome: check it, then "
                "record it with `callbound ledger settle`)",
            ),
            highlight=False,
        )
