"""Issue 2 §5: every trip ends STOPPED with a reason code, the final answer's turn included.

Token and cost budgets were checked after a turn that proposed calls, not after a final answer: a last
turn of 50 output tokens under max_output_tokens=10, or one costing 2.00 under max_cost=0.01, ended
COMPLETED with no reason. Now such an operation ends STOPPED(MAX_OUTPUT_TOKENS / MAX_INPUT_TOKENS /
MAX_COST) with its escalation; the answer's text is kept in the outcome (it came, but over budget).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

import callbound as cb
from callbound.runtime.verify import verify_store

from .helpers import MODEL, final, make


@pytest.mark.parametrize(
    ("budgets", "tokens", "reason"),
    [
        ({"max_output_tokens": 10}, (5, 50), "MAX_OUTPUT_TOKENS"),
        ({"max_input_tokens": 100}, (500, 5), "MAX_INPUT_TOKENS"),
        ({"max_cost": Decimal("0.01")}, (1_000_000, 0), "MAX_COST"),
    ],
)
async def test_a_final_answer_over_a_budget_is_stopped_not_completed(
    budgets: dict[str, Any], tokens: tuple[int, int], reason: str
) -> None:
    prices = {MODEL: cb.Price(input_per_mtok=Decimal("2.00"), output_per_mtok=Decimal("8.00"))}
    h = make([final("resp_1", "Refunded.", tokens=tokens)], [], budgets=cb.Budgets(**budgets), prices=prices)
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, reason)
    assert out.text == "Refunded."
    assert out.escalation is not None and out.escalation["reason"] == reason
    # and the stored operation verifies: the text it keeps is the turn's that ended it (D20)
    assert verify_store(h.store) == []


async def test_a_final_answer_within_its_budgets_completes() -> None:
    h = make([final("resp_1", "Refunded.", tokens=(100, 10))], [], budgets=cb.Budgets(max_output_tokens=10))
    out = await h.run()
    assert (out.state, out.reason, out.text) == (cb.State.COMPLETED, None, "Refunded.")
