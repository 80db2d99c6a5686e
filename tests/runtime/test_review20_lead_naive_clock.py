"""D23: every clock's now() is timezone-aware. A custom clock returning a naive datetime was accepted,
stamped an approval's expiry naive, and resume_sync then raised TypeError (naive against aware) out of
the runner. Runner(clock=...) now refuses it when built, with a UsageError that says what to return."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import callbound as cb
from callbound.core.errors import UsageError
from callbound.stores.memory import MemoryStore


class _Clock:
    def __init__(self, now: Any) -> None:
        self._now = now

    def now(self) -> Any:
        return self._now

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _runner(clock: Any) -> cb.Runner:
    from callbound.testing import ScriptedModel

    return cb.Runner(
        model=ScriptedModel("openai-responses", []),
        registry=cb.Registry([]),
        store=MemoryStore(),
        clock=clock,
    )


@pytest.mark.parametrize("now", [datetime(2026, 1, 1), datetime.now(), "2026-01-01T00:00:00Z", None, 0.0])
def test_a_clock_without_an_aware_now_is_refused_when_the_runner_is_built(now: Any) -> None:
    with pytest.raises(UsageError, match=r"now\(\) must return a timezone-aware datetime"):
        _runner(_Clock(now))


@pytest.mark.parametrize(
    "now",
    [datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=2)))],
)
def test_an_aware_clock_is_accepted(now: datetime) -> None:
    assert _runner(_Clock(now)).clock.now() == now
