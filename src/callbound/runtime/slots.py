"""The turn's handler slots (D15): at most ``max_parallel`` handlers of one turn run at once, a sync
handler that timed out keeping its slot until its thread ends, and no slot given once the operation's
remaining active time at the start of the turn (D14) is spent. ``ToolExecutor.run`` (tools.py) takes a
slot for every handler run inside ``turn_slots``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable, Collection, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .tools import HandlerOutcome


class TurnSlots:
    """At most ``limit`` handlers of one turn run at once, counting sync handlers that timed out and
    whose threads still run: such a handler keeps its slot until its thread ends.

    A call waits for a slot as long as the slots are held by handlers still within their own timeouts
    (bounded by those timeouts: the turn's calls take turns, each with its full timeout, as D15 had
    them). While every slot is held by a handler past its timeout, which may never end, the waiting
    call's own timeout runs; when it is up, the call is not run. No slot is given once the operation's
    remaining active time at the start of the turn (D14) is spent, and no handler's timeout outlasts it.
    """

    def __init__(self, limit: int, remaining_s: float, effects: Collection[Callable[..., Any]]) -> None:
        self._loop = asyncio.get_running_loop()
        self._limit = max(1, limit)
        self._deadline = self._loop.time() + max(remaining_s, 0.0)
        self._effects = frozenset(id(h) for h in effects)  # by identity: handlers need not be hashable
        self._busy = 0  # slots held
        self._live = 0  # slots held by handlers still within their timeouts
        self._waiters: list[asyncio.Future[None]] = []

    def cap(self, timeout_s: float) -> float:
        return min(timeout_s, max(0.0, self._deadline - self._loop.time()))

    def not_started(self, handler: Callable[..., Any], outcome: HandlerOutcome) -> HandlerOutcome:
        if id(handler) not in self._effects:
            return outcome
        message = f"{outcome.message}, so it was not applied; it may be tried again"
        return replace(outcome, kind="not_applied", message=message)

    async def acquire(self, timeout_s: float) -> Slot | None:
        """A slot, or None if none could be had in time (the call must not run)."""
        loop = self._loop
        budget = max(timeout_s, 0.0)
        while True:
            now = loop.time()
            if now >= self._deadline:
                return None
            if self._busy < self._limit:
                self._busy += 1
                self._live += 1
                return Slot(self)
            stalled = self._live == 0
            if stalled and budget <= 0:
                return None
            wait = self._deadline - now
            wake: asyncio.Future[None] = loop.create_future()
            self._waiters.append(wake)
            timer = loop.call_later(min(wait, budget) if stalled else wait, resolve, wake)
            try:
                await wake
            finally:
                timer.cancel()
                if wake in self._waiters:
                    self._waiters.remove(wake)
            if stalled:
                budget -= loop.time() - now

    def _one_overdue(self) -> None:
        self._live -= 1
        self._changed()

    def _one_free(self, was_overdue: bool) -> None:
        self._busy -= 1
        if not was_overdue:
            self._live -= 1
        self._changed()

    def _changed(self) -> None:
        for wake in self._waiters:  # each rechecks; the first to run takes a free slot
            resolve(wake)


class Slot:
    """One held slot: free when every hold on it is given back (the call's, and its thread's)."""

    __slots__ = ("_holds", "_overdue", "_turn")

    def __init__(self, turn: TurnSlots) -> None:
        self._turn = turn
        self._holds = 1
        self._overdue = False

    def hold(self) -> None:
        self._holds += 1

    def overdue(self) -> None:
        """Its handler is past its timeout: waiting calls' own timeouts start to run."""
        if not self._overdue and self._holds:
            self._overdue = True
            self._turn._one_overdue()

    def release(self) -> None:
        self._holds -= 1
        if self._holds == 0:
            self._turn._one_free(self._overdue)


def resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


current_turn: contextvars.ContextVar[TurnSlots | None] = contextvars.ContextVar(
    "callbound_turn_slots", default=None
)


@contextlib.contextmanager
def turn_slots(
    max_parallel: int, remaining_s: float, effects: Collection[Callable[..., Any]] = ()
) -> Iterator[TurnSlots]:
    """Every ``ToolExecutor.run`` inside (tasks started inside included) runs under these slots.
    ``effects``: the write handlers whose never starting means their effect did not happen."""
    slots = TurnSlots(max_parallel, remaining_s, effects)
    token = current_turn.set(slots)
    try:
        yield slots
    finally:
        current_turn.reset(token)


@contextlib.contextmanager
def outside_turn() -> Iterator[None]:
    """Every ``ToolExecutor.run`` inside takes no slot of the turn and is not cut to the turn's time: a
    reconcile hook, bounded by its tool's own timeout alone (D35), asked once the deadline may be spent."""
    token = current_turn.set(None)
    try:
        yield
    finally:
        current_turn.reset(token)
