"""D13 (2) for the identical reads of one turn, which run concurrently (D15).

A read's run is counted (reserved) when it starts and given back when it does not succeed, so five
identical proposals of one turn cannot all pass the check before any of them has finished. A duplicate
proposed beside a run still going waits for that run to end and is then decided against completed
successful runs only: D13 (2) counts *successful* runs. Refused against the reservation instead, it was
told NO_PROGRESS with zero successful runs when the reserving run failed, and its key counted as "told"
for D13 (3), which then stopped the operation at the model's next, legitimate proposal (review round 14).
"""

from __future__ import annotations

import asyncio

from ..core.guards import identical_allowed
from .operation import Operation


class TurnRuns:
    """The reserved runs of one turn's reads that have not ended, by identical-call key."""

    __slots__ = ("_ended", "running")

    def __init__(self) -> None:
        self.running: dict[str, int] = {}
        self._ended = asyncio.Event()  # set (and replaced) whenever a reserved run ends

    def start(self, key: str) -> None:
        self.running[key] = self.running.get(key, 0) + 1

    def end(self, key: str) -> None:
        self.running[key] -= 1
        ended, self._ended = self._ended, asyncio.Event()
        ended.set()

    async def settle(self, op: Operation, key: str) -> None:
        """Return once ``key`` may run, or no run of it is still going: then the repeat guard decides on
        completed runs alone. A run of it that fails gives its reservation back and lets this one run."""
        while self.running.get(key) and not identical_allowed(op.budgets, op.spent, key):
            await self._ended.wait()
