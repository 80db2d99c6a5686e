"""A ``Retry-After`` HTTP date is measured on the runner's clock (review round 22, e).

Found as an outside evaluator checks D26 ("honouring Retry-After") with the clock D23 makes injectable:
``ApiError(429, headers={"retry-after": "<HTTP date>"})`` under a ``FakeClock``. The adapter measured
the date on the wall clock, so a date 30 s after the fake clock's time, long past on the wall clock,
was a wait of 0: the retry came after the jitter alone, and a date past the deadline did not stop the
operation (docs/stop-reasons.md: a retry whose wait would end past the deadline is STOPPED(DEADLINE)).
The runner now hands its clock's time to the model client (``RequestMeta.now``), and ScriptedModel
measures the date from it, on every API.
"""

from __future__ import annotations

from datetime import timedelta
from email.utils import format_datetime

import pytest

import callbound as cb
from callbound.testing import ApiError, FakeClock, ScriptedModel
from tests.docs.stop_reason_bodies import BUILDERS

FINAL = {
    "openai-responses": "completed",
    "openai-chat": "stop",
    "anthropic-messages": "end_turn",
    "gemini-generate": "STOP",
    "gemini-interactions": "completed",
}


def run(api: str, after_s: float, budgets: cb.Budgets | None = None) -> tuple[cb.Outcome, FakeClock]:
    clock = FakeClock()
    date = format_datetime(clock.now() + timedelta(seconds=after_s), usegmt=True)
    model = ScriptedModel(api, [ApiError(429, {}, {"Retry-After": date}), BUILDERS[api](FINAL[api])])
    runner = cb.Runner(model=model, registry=cb.Registry([]), clock=clock, budgets=budgets)
    return runner.run_sync("x", tenant="t", subject="s"), clock


@pytest.mark.parametrize("api", list(FINAL))
def test_the_retry_waits_until_the_date_on_the_runners_clock(api: str) -> None:
    outcome, clock = run(api, 30)
    assert outcome.state == "COMPLETED", outcome
    assert clock.slept == [30.0]


@pytest.mark.parametrize("api", list(FINAL))
def test_a_date_past_the_deadline_stops_the_operation_without_waiting(api: str) -> None:
    outcome, clock = run(api, 1000, cb.Budgets(deadline_s=300))
    assert (outcome.state, outcome.reason) == ("STOPPED", "DEADLINE"), outcome
    assert clock.slept == []


def test_a_date_already_past_waits_the_backoff_only() -> None:
    outcome, clock = run("openai-chat", -60)
    assert outcome.state == "COMPLETED", outcome
    assert len(clock.slept) == 1 and clock.slept[0] < 2
