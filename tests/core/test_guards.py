"""Loop guards: budgets and their pure checks (D11-D15)."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbound.core.errors import UsageError
from callbound.core.guards import (
    CONTINUE,
    Budgets,
    Continue,
    Spent,
    Stop,
    check_before_model_request,
    check_running,
    check_tool_calls,
    identical_allowed,
    identical_key,
    record_turn_results,
    result_cap,
)

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def reason(verdict: Continue | Stop) -> str | None:
    return verdict.reason if isinstance(verdict, Stop) else None


# --- Budgets -------------------------------------------------------------------------------------


def test_default_budgets_are_exactly_d12() -> None:
    b = Budgets()
    assert b.max_model_turns == 16
    assert b.max_tool_calls == 64
    assert b.deadline_s == 300
    assert b.max_parallel == 4
    assert b.max_identical_calls == 2
    assert b.max_no_progress_turns == 3
    assert b.max_result_bytes == 64 * 1024 == 65536
    assert b.max_retries == 3
    assert b.max_input_tokens is None
    assert b.max_output_tokens is None
    assert b.max_cost is None
    assert b.not_after is None


@pytest.mark.parametrize(
    "kw",
    [
        {"max_model_turns": -1},
        {"max_tool_calls": -1},
        {"deadline_s": -0.5},
        {"deadline_s": math.nan},
        {"deadline_s": math.inf},
        {"max_parallel": 0},
        {"max_identical_calls": 0},
        {"max_no_progress_turns": 0},
        {"max_no_progress_turns": -1},
        {"max_result_bytes": -1},
        {"max_retries": -1},
        {"max_input_tokens": -1},
        {"max_output_tokens": -5},
        {"max_cost": Decimal("-0.01")},
        {"max_cost": -1},
        {"max_cost": Decimal("NaN")},
        {"max_cost": math.inf},
        {"max_model_turns": None},
        {"max_model_turns": "16"},
        {"deadline_s": "300"},
        {"max_input_tokens": "100"},
        {"max_cost": "cheap"},
        {"not_after": datetime(2025, 1, 1)},  # naive: cannot compare with the clock's aware UTC time
        {"not_after": "2025-01-01T00:00:00+00:00"},
    ],
    ids=repr,
)
def test_invalid_budgets_are_usage_errors(kw: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        Budgets(**kw)


def test_valid_edge_budgets() -> None:
    # The least values (a limit of 0 would stop or refuse everything at once; see
    # tests/core/test_validation_review.py); only max_retries may be 0 (no retries, D26).
    b = Budgets(
        max_model_turns=1,
        max_tool_calls=1,
        deadline_s=0.001,
        max_retries=0,
        max_cost=Decimal("0.0001"),
        max_input_tokens=1,
        max_result_bytes=1,
    )
    assert b.max_cost == Decimal("0.0001") and b.max_retries == 0
    assert isinstance(Budgets(max_cost=0.1).max_cost, Decimal)  # type: ignore[arg-type]
    assert Budgets(max_cost=0.1).max_cost == Decimal("0.1")  # type: ignore[arg-type]  # via str()
    assert Budgets(max_cost="2.50").max_cost == Decimal("2.50")  # type: ignore[arg-type]
    assert Budgets(deadline_s=1).deadline_s == 1


def test_budgets_round_trip() -> None:
    b = Budgets(
        max_model_turns=3,
        max_cost=Decimal("1.25"),
        max_input_tokens=1000,
        not_after=NOW,
        deadline_s=12.5,
    )
    d = b.to_dict()
    assert d["max_cost"] == "1.25" and d["not_after"] == NOW.isoformat()
    assert Budgets.from_dict(d) == b
    assert Budgets.from_dict(Budgets().to_dict()) == Budgets()


def test_spent_round_trip_keeps_the_counters() -> None:
    s = Spent(
        model_turns=2,
        tool_calls=5,
        input_tokens=10,
        output_tokens=20,
        cost=Decimal("0.5"),
        active_s=3.5,
        no_progress_turns=1,
        no_progress_warned=True,
    )
    assert Spent.from_dict(s.to_dict()) == s
    # ``identical`` and ``seen_results`` are not in the row: the runtime rebuilds them from the
    # appended result rows, so saving them here too would count them twice.
    assert "identical" not in s.to_dict() and "seen_results" not in s.to_dict()


# --- model turns, deadline, tokens, cost -----------------------------------------------------------


def test_max_turns() -> None:
    b = Budgets(max_model_turns=2)
    assert check_before_model_request(b, Spent(model_turns=1), NOW) == CONTINUE
    stop = check_before_model_request(b, Spent(model_turns=2), NOW)
    assert reason(stop) == "MAX_TURNS"
    assert reason(check_before_model_request(b, Spent(model_turns=7), NOW)) == "MAX_TURNS"
    # Turns are a pre-request check only.
    assert check_running(b, Spent(model_turns=7), NOW) == CONTINUE


def test_active_time_deadline() -> None:
    b = Budgets(deadline_s=10)
    assert check_running(b, Spent(active_s=9.999), NOW) == CONTINUE
    assert reason(check_running(b, Spent(active_s=10), NOW)) == "DEADLINE"
    assert reason(check_before_model_request(b, Spent(active_s=11), NOW)) == "DEADLINE"


def test_not_after_deadline() -> None:
    b = Budgets(not_after=NOW)
    assert check_running(b, Spent(), NOW - timedelta(microseconds=1)) == CONTINUE
    assert reason(check_running(b, Spent(), NOW)) == "DEADLINE"
    assert reason(check_before_model_request(b, Spent(), NOW + timedelta(days=1))) == "DEADLINE"


@pytest.mark.parametrize(
    ("budget", "spent", "code"),
    [
        ({"max_input_tokens": 100}, {"input_tokens": 101}, "MAX_INPUT_TOKENS"),
        ({"max_output_tokens": 50}, {"output_tokens": 51}, "MAX_OUTPUT_TOKENS"),
        ({"max_cost": Decimal("1.00")}, {"cost": Decimal("1.01")}, "MAX_COST"),
        ({"max_input_tokens": 1}, {"input_tokens": 2}, "MAX_INPUT_TOKENS"),
    ],
)
def test_token_and_cost_budgets(budget: dict[str, Any], spent: dict[str, Any], code: str) -> None:
    b = Budgets(**budget)
    assert reason(check_running(b, Spent(**spent), NOW)) == code
    assert reason(check_before_model_request(b, Spent(**spent), NOW)) == code
    under = {k: v - (Decimal("0.02") if isinstance(v, Decimal) else 1) for k, v in spent.items()}
    assert check_running(b, Spent(**under), NOW) == CONTINUE


def test_tokens_and_cost_unlimited_unless_set() -> None:
    s = Spent(input_tokens=10**12, output_tokens=10**12, cost=Decimal(10**9))
    assert check_before_model_request(Budgets(), s, NOW) == CONTINUE


@given(
    turns=st.integers(0, 40),
    active=st.floats(0, 1000, allow_nan=False),
    inp=st.integers(0, 10_000),
    max_inp=st.none() | st.integers(1, 10_000),
)
def test_checks_stop_iff_a_limit_is_exceeded(
    turns: int, active: float, inp: int, max_inp: int | None
) -> None:
    b = Budgets(max_input_tokens=max_inp)
    s = Spent(model_turns=turns, active_s=active, input_tokens=inp)
    over = turns >= b.max_model_turns or active >= b.deadline_s or (max_inp is not None and inp > max_inp)
    assert isinstance(check_before_model_request(b, s, NOW), Stop) == over


# --- tool calls (D15) and identical calls (D13) --------------------------------------------------


def test_turn_that_would_exceed_max_tool_calls_stops() -> None:
    b = Budgets(max_tool_calls=5)
    assert check_tool_calls(b, Spent(tool_calls=3), 2) == CONTINUE
    stop = check_tool_calls(b, Spent(tool_calls=3), 3)
    assert reason(stop) == "MAX_TOOL_CALLS"
    assert reason(check_tool_calls(b, Spent(), 6)) == "MAX_TOOL_CALLS"
    assert check_tool_calls(b, Spent(), 5) == CONTINUE


@given(used=st.integers(0, 100), proposed=st.integers(0, 100), limit=st.integers(1, 100))
def test_tool_call_budget_property(used: int, proposed: int, limit: int) -> None:
    verdict = check_tool_calls(Budgets(max_tool_calls=limit), Spent(tool_calls=used), proposed)
    assert isinstance(verdict, Stop) == (used + proposed > limit)


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_identical_calls_allowed_max_times_then_refused(limit: int) -> None:
    b = Budgets(max_identical_calls=limit)
    s = Spent()
    key = identical_key("refund", "refund-v1", '{"amount":40,"order_id":"A1"}')
    other = identical_key("refund", "refund-v1", '{"amount":41,"order_id":"A1"}')
    for _ in range(limit):
        assert identical_allowed(b, s, key)
        s.identical[key] = s.identical.get(key, 0) + 1
    assert not identical_allowed(b, s, key)
    assert identical_allowed(b, s, other)


def test_identical_key_separates_tool_schema_and_arguments() -> None:
    keys = {
        identical_key("a", "v1", "{}"),
        identical_key("b", "v1", "{}"),
        identical_key("a", "v2", "{}"),
        identical_key("a", "v1", '{"x":1}'),
        identical_key("av", "1", "{}"),
    }
    assert len(keys) == 5


# --- no progress (D13 step 3) --------------------------------------------------------------------


def test_no_progress_after_max_turns_of_seen_results() -> None:
    b = Budgets(max_no_progress_turns=3)
    s = Spent()
    assert record_turn_results(b, s, ["h1"], ()) == CONTINUE  # new
    assert record_turn_results(b, s, ["h1"], ()) == CONTINUE  # 1 seen turn
    assert record_turn_results(b, s, ["h1"], ()) == CONTINUE  # 2
    assert reason(record_turn_results(b, s, ["h1"], ())) == "NO_PROGRESS"  # 3 in a row


def test_a_new_hash_resets_the_streak() -> None:
    b = Budgets(max_no_progress_turns=2)
    s = Spent()
    record_turn_results(b, s, ["h1"], ())
    assert record_turn_results(b, s, ["h1"], ()) == CONTINUE
    assert s.no_progress_turns == 1
    assert record_turn_results(b, s, ["h1", "h2"], ()) == CONTINUE  # h2 is new
    assert s.no_progress_turns == 0
    assert record_turn_results(b, s, ["h2"], ()) == CONTINUE
    assert reason(record_turn_results(b, s, ["h1"], ())) == "NO_PROGRESS"


def test_empty_turn_is_not_a_repeat() -> None:
    b = Budgets(max_no_progress_turns=1)
    s = Spent()
    assert record_turn_results(b, s, [], ()) == CONTINUE
    assert record_turn_results(b, s, [], ()) == CONTINUE


def test_repeat_after_a_no_progress_warning_stops() -> None:
    b = Budgets(max_no_progress_turns=10)
    s = Spent()
    assert record_turn_results(b, s, ["a"], ("k",)) == CONTINUE  # first NO_PROGRESS envelope: a warning
    assert s.no_progress_warned
    assert record_turn_results(b, s, ["b"], ()) == CONTINUE
    assert reason(record_turn_results(b, s, ["c"], ("k",))) == "NO_PROGRESS"


def test_d13_a_first_refusal_of_another_call_is_a_warning_not_a_stop() -> None:
    """D13 (3): only repeating the call the model was told makes no progress stops the operation."""
    b = Budgets(max_no_progress_turns=10)
    s = Spent()
    assert record_turn_results(b, s, ["a"], ("A",)) == CONTINUE  # A refused: a warning
    assert record_turn_results(b, s, ["b"], ()) == CONTINUE
    assert record_turn_results(b, s, ["c"], ("B",)) == CONTINUE  # B refused for the first time
    assert s.no_progress_keys == {"A", "B"}
    assert reason(record_turn_results(b, s, ["d"], ("B",))) == "NO_PROGRESS"  # B again


def test_d13_warned_keys_survive_the_saved_row_and_old_rows_keep_the_flag() -> None:
    b = Budgets(max_no_progress_turns=10)
    s = Spent()
    record_turn_results(b, s, ["a"], ("A",))
    again = Spent.from_dict(s.to_dict())
    assert again.no_progress_keys == {"A"}
    assert reason(record_turn_results(b, again, ["x"], ("A",))) == "NO_PROGRESS"
    old = s.to_dict()
    del old["no_progress_warned_keys"]  # a head saved before the keys were kept
    legacy = Spent.from_dict(old)
    assert reason(record_turn_results(b, legacy, ["y"], ("Z",))) == "NO_PROGRESS"


turn_strategy = st.tuples(st.lists(st.sampled_from("abcde"), max_size=3), st.booleans())


@given(limit=st.integers(1, 4), turns=st.lists(turn_strategy, max_size=25))
def test_no_progress_counter_property(limit: int, turns: list[tuple[list[str], bool]]) -> None:
    b = Budgets(max_no_progress_turns=limit)
    s = Spent()
    repeat_flags: list[bool] = []  # per turn: non-empty and every hash seen in an earlier turn
    for i, (hashes, warned_now) in enumerate(turns):
        earlier = {h for hs, _ in turns[:i] for h in hs}
        repeat_flags.append(bool(hashes) and set(hashes) <= earlier)
        warned_before = any(w for _, w in turns[:i])
        streak_full = len(repeat_flags) >= limit and all(repeat_flags[-limit:])
        expect_stop = (warned_now and warned_before) or streak_full

        verdict = record_turn_results(b, s, hashes, ("k",) if warned_now else ())
        assert isinstance(verdict, Stop) == expect_stop, (i, turns[: i + 1])
        if isinstance(verdict, Stop):
            assert verdict.reason == "NO_PROGRESS"
            break
        # The counter is the length of the current run of repeat turns.
        run = 0
        for flag in reversed(repeat_flags):
            if not flag:
                break
            run += 1
        assert s.no_progress_turns == run


# --- result cap (D11) ----------------------------------------------------------------------------


@given(budget=st.integers(1, 10**7), spec=st.none() | st.integers(1, 10**7))
def test_result_cap_is_the_smaller_of_spec_and_budget(budget: int, spec: int | None) -> None:
    b = Budgets(max_result_bytes=budget)
    assert result_cap(b, spec) == (budget if spec is None else min(spec, budget))


def test_budgets_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Budgets().max_model_turns = 100  # type: ignore[misc]


@pytest.mark.parametrize(
    ("choice", "forcing"),
    [
        ("required", True),
        ("any", True),
        ({"name": "refund"}, True),
        ({"type": "any"}, True),
        ({"type": "tool", "name": "refund"}, True),
        ("auto", False),
        ("none", False),
        ({"type": "auto"}, False),
        (None, False),
    ],
)
def test_forced_tool_choice_is_dropped_once_tools_have_run(choice: Any, forcing: bool) -> None:
    from callbound.core.guards import settings_for_request

    settings = {"model": "m", "tool_choice": choice}
    assert settings_for_request(settings, 0) is settings  # first request: as configured
    after = settings_for_request(settings, 1)
    assert ("tool_choice" not in after) is forcing
    assert after["model"] == "m"
    assert settings_for_request({**settings, "reset_tool_choice": False}, 3)["tool_choice"] == choice
