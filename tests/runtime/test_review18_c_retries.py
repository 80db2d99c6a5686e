"""Review round 18, c F5: a model request may be retried as often as ``Budgets.max_retries`` says (D26),
however many that is, without an OverflowError out of ``run`` (D4).

The backoff's exponential step was ``base * 2 ** (attempt - 1)``; ``2 ** 1024`` has no float, so retry
1025 of a provider that kept failing raised OverflowError ("int too large to convert to float") out of
``run``, the operation left in RETRY. The step is capped (at 30 s) long before; the exponent now is too."""

from __future__ import annotations

import random

import callbound as cb
from callbound.runtime.retry import backoff_wanted
from callbound.testing import ApiError

from .helpers import final, get_order_tool, make


async def test_more_than_a_thousand_retries_end_as_the_budget_says() -> None:
    h = make(
        [ApiError(500)] * 1030 + [final("r1", "Back.")],
        [get_order_tool()],
        budgets=cb.Budgets(max_retries=2000, deadline_s=1e9),
    )
    out = await h.run()  # was: OverflowError at request 1025
    assert (out.state, out.text) == (cb.State.COMPLETED, "Back.")
    assert len(h.model.requests) == 1031


def test_the_backoff_of_a_late_retry_stays_within_its_cap() -> None:
    rng = random.Random(7)
    for attempt in (1, 64, 1024, 1025, 10**6):
        assert 0 <= backoff_wanted(attempt, None, rng=rng) <= 30.0
    assert backoff_wanted(10**6, 45.0, rng=rng) == 45.0  # Retry-After still wins
