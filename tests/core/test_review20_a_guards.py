"""Loop guards at their edges (issue 2 §5, D12-D15), review round 20 (a)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbound.core.errors import UsageError
from callbound.core.guards import (
    Budgets,
    Spent,
    Stop,
    check_before_model_request,
    check_running,
    check_spend,
    check_tool_calls,
    identical_allowed,
    remaining_s,
)

NOW = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("value", [10**309, 10**400, -(10**400)])
def test_a_deadline_no_float_can_hold_is_a_usage_error(value: int) -> None:
    # It passed the check (an int compares with inf exactly) and raised OverflowError out of run()
    # where the time left is computed as a float (D4: only UsageError and StoreError escape).
    with pytest.raises(UsageError, match="deadline_s"):
        Budgets(deadline_s=value)


@pytest.mark.parametrize("value", [10**400, 10**309])
def test_a_saved_deadline_no_float_can_hold_is_a_usage_error(value: int) -> None:
    data = Budgets().to_dict() | {"deadline_s": value}
    with pytest.raises(UsageError, match="deadline_s"):
        Budgets.from_dict(data)


def test_the_largest_int_deadline_a_float_holds_is_kept_and_runs() -> None:
    b = Budgets(deadline_s=10**308)
    assert b.deadline_s == 10**308
    assert remaining_s(b, Spent(), NOW) == float(10**308)
    assert not isinstance(check_running(b, Spent(active_s=1e300), NOW), Stop)


@given(limit=st.integers(1, 10**6), used=st.integers(0, 10**6 + 2))
def test_model_turns_stop_exactly_when_the_limit_is_used(limit: int, used: int) -> None:
    verdict = check_before_model_request(Budgets(max_model_turns=limit), Spent(model_turns=used))
    assert isinstance(verdict, Stop) == (used >= limit)
    if used >= limit:
        assert verdict.reason == "MAX_TURNS"  # type: ignore[union-attr]


@given(limit=st.integers(1, 50), used=st.integers(0, 60), proposed=st.integers(0, 60))
def test_tool_calls_at_the_limit_run_and_one_more_stops(limit: int, used: int, proposed: int) -> None:
    verdict = check_tool_calls(Budgets(max_tool_calls=limit), Spent(tool_calls=used), proposed)
    assert isinstance(verdict, Stop) == (used + proposed > limit)


@given(limit=st.integers(1, 10**9), spent=st.integers(0, 10**9 + 2))
def test_token_limits_are_inclusive(limit: int, spent: int) -> None:
    for field, code in (("input_tokens", "MAX_INPUT_TOKENS"), ("output_tokens", "MAX_OUTPUT_TOKENS")):
        b = Budgets(**{f"max_{field}": limit})  # type: ignore[arg-type]
        verdict = check_spend(b, Spent(**{field: spent}))  # type: ignore[arg-type]
        assert isinstance(verdict, Stop) == (spent > limit)
        if spent > limit:
            assert verdict.reason == code  # type: ignore[union-attr]


@given(limit=st.integers(1, 5), runs=st.integers(0, 7))
def test_identical_call_number_limit_plus_one_is_refused(limit: int, runs: int) -> None:
    s = Spent(identical={"k": runs})
    assert identical_allowed(Budgets(max_identical_calls=limit), s, "k") == (runs < limit)
    assert identical_allowed(Budgets(max_identical_calls=limit), s, "other")


@pytest.mark.parametrize(
    "kw",
    [
        {"max_model_turns": True},
        {"max_tool_calls": 1.0},
        {"max_result_bytes": 0},
        {"max_retries": -1},
        {"max_input_tokens": False},
        {"deadline_s": True},
        {"deadline_s": -math.inf},
        {"max_cost": True},
        {"max_cost": "inf"},
        {"max_cost": "-0.01"},
    ],
)
def test_bools_negatives_and_non_finite_values_are_refused(kw: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        Budgets(**kw)  # type: ignore[arg-type]
