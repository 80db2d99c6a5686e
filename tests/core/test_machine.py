"""The per-operation machine and classify_turn: only an explicit completion is success (D1, D2)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbound.core.errors import IllegalTransition, UsageError
from callbound.core.machine import Machine, TurnVerdict, classify_turn
from callbound.core.states import INITIAL, TERMINAL, TRANSITIONS, State, check_transition
from callbound.core.types import Failure, Finish, ModelTurn, Provenance, ToolCall, Transition, Usage

T0 = datetime(2025, 1, 1, tzinfo=UTC)
PROV = Provenance("prov", "api", "model", "rev-1")


def call(call_id: str = "c1", arguments: dict[str, object] | None = None) -> ToolCall:
    args = {"order_id": "A1"} if arguments is None else arguments
    return ToolCall("prov", "api", "r1", call_id, "get_order", '{"order_id": "A1"}', args, None, 0)


def turn(
    finish: Finish,
    *,
    calls: tuple[ToolCall, ...] = (),
    reason: str | None = None,
    raw: str | None = "raw",
    failure: Failure | None = None,
) -> ModelTurn:
    return ModelTurn(
        api="api",
        response_id="r1",
        finish=finish,
        raw_stop_reason=raw,
        reason=reason,
        calls=calls,
        text="",
        refusal=None,
        usage=Usage(),
        continuation=(),
        provenance=PROV,
        raw_sha256="0" * 64,
        failure=failure,
    )


# --- classify_turn -------------------------------------------------------------------------------


def test_final_text_completes() -> None:
    assert classify_turn(turn(Finish.FINAL_TEXT)) == TurnVerdict(State.COMPLETED, None)


def test_tool_proposals_go_to_validation() -> None:
    t = turn(Finish.TOOL_PROPOSALS, calls=(call(),))
    assert classify_turn(t) == TurnVerdict(State.VALIDATING, None)
    assert t.executable


def test_tool_proposals_without_calls_fail() -> None:
    verdict = classify_turn(turn(Finish.TOOL_PROPOSALS))
    assert verdict.target is State.FAILED
    assert verdict.reason == "UNKNOWN_STOP_REASON"
    assert not verdict.retryable


def test_continue_asks_again() -> None:
    assert classify_turn(turn(Finish.CONTINUE, reason="pause_turn")).target is State.MODEL_REQUESTED


@pytest.mark.parametrize(
    ("reason", "code"), [(None, "REFUSAL"), ("content_filter", "CONTENT_FILTER"), ("safety", "SAFETY")]
)
def test_refusal_is_refused(reason: str | None, code: str) -> None:
    assert classify_turn(turn(Finish.REFUSAL, reason=reason)) == TurnVerdict(State.REFUSED, code)


@pytest.mark.parametrize(
    ("reason", "code"),
    [
        ("max_tokens", "MAX_TOKENS"),
        ("context_window_exceeded", "CONTEXT_WINDOW_EXCEEDED"),
        (None, "TRUNCATED"),
    ],
)
def test_truncated_is_incomplete(reason: str | None, code: str) -> None:
    assert classify_turn(turn(Finish.TRUNCATED, reason=reason)) == TurnVerdict(State.INCOMPLETE, code)


def test_cut_stream_is_retried() -> None:
    verdict = classify_turn(turn(Finish.TRUNCATED, reason="stream_interrupted", raw=None))
    assert verdict == TurnVerdict(State.RETRY, "STREAM_INTERRUPTED", retryable=True)


def test_server_error_retryable_goes_to_retry() -> None:
    t = turn(Finish.API_FAILURE, reason="server_error", raw="503", failure=Failure("http", True, status=503))
    assert classify_turn(t) == TurnVerdict(State.RETRY, "SERVER_ERROR", retryable=True)


@pytest.mark.parametrize(
    "failure", [None, Failure("http", False, status=400), Failure("error_body", False, error_type="x")]
)
def test_fatal_api_failure_fails(failure: Failure | None) -> None:
    verdict = classify_turn(turn(Finish.API_FAILURE, reason="invalid_request", failure=failure))
    assert verdict == TurnVerdict(State.FAILED, "INVALID_REQUEST")


@pytest.mark.parametrize("retryable", [False, True])
def test_unknown_stop_reason_fails_and_is_never_retried(retryable: bool) -> None:
    # D1: anything not listed is API_FAILURE, not retryable, reason UNKNOWN_STOP_REASON.
    t = turn(
        Finish.API_FAILURE,
        reason="unknown_stop_reason",
        raw="some_new_reason",
        failure=Failure("status", retryable),
        calls=(call(),),
    )
    verdict = classify_turn(t)
    assert verdict.target is State.FAILED
    assert verdict.reason == "UNKNOWN_STOP_REASON"
    assert not verdict.retryable
    assert not t.executable


@pytest.mark.parametrize("finish", [Finish.TRUNCATED, Finish.REFUSAL, Finish.API_FAILURE])
def test_calls_in_non_proposal_turns_are_never_executable(finish: Finish) -> None:
    # The arguments parsed fine; it does not matter.
    t = turn(finish, calls=(call("c1"), call("c2")), reason="max_tokens")
    assert t.calls[0].arguments == {"order_id": "A1"}
    assert t.calls[0].arguments_error is None
    assert not t.executable
    assert classify_turn(t).target is not State.COMPLETED
    assert classify_turn(t).target is not State.VALIDATING


reasons = (
    st.none()
    | st.sampled_from(
        [
            "max_tokens",
            "content_filter",
            "stream_interrupted",
            "unknown_stop_reason",
            "server_error",
            "pause_turn",
            "refusal",
            "api_error",
            "arguments_too_large",
        ]
    )
    | st.from_regex(r"[a-z][a-z_]{0,15}", fullmatch=True)
)
failures = st.none() | st.builds(
    Failure,
    kind=st.sampled_from(
        ["http", "error_event", "error_body", "connection", "timeout", "stream_cut", "status"]
    ),
    retryable=st.booleans(),
    status=st.none() | st.integers(100, 599),
)


@given(
    finish=st.sampled_from(list(Finish)),
    reason=reasons,
    raw=st.none() | st.text(max_size=12),
    n_calls=st.integers(0, 3),
    failure=failures,
)
def test_classify_turn_property(
    finish: Finish, reason: str | None, raw: str | None, n_calls: int, failure: Failure | None
) -> None:
    t = turn(
        finish, calls=tuple(call(f"c{i}") for i in range(n_calls)), reason=reason, raw=raw, failure=failure
    )
    verdict = classify_turn(t)

    # Whatever the turn, the verdict is a legal move from MODEL_REQUESTED.
    check_transition(State.MODEL_REQUESTED, verdict.target)
    # Only an explicit completion is success, and a completion has no calls (D1).
    assert (verdict.target is State.COMPLETED) == (finish is Finish.FINAL_TEXT and n_calls == 0)
    # Calls run only from a proposal turn that has calls.
    assert t.executable == (finish is Finish.TOOL_PROPOSALS)
    assert (verdict.target is State.VALIDATING) == (finish is Finish.TOOL_PROPOSALS and n_calls > 0)
    assert verdict.retryable == (verdict.target is State.RETRY)
    if verdict.reason is not None:
        assert verdict.reason == verdict.reason.upper()

    if finish is Finish.REFUSAL:
        assert verdict.target is State.REFUSED
    elif finish is Finish.TRUNCATED:
        expected = State.RETRY if reason == "stream_interrupted" else State.INCOMPLETE
        assert verdict.target is expected
    elif finish is Finish.API_FAILURE:
        assert verdict.target in {State.RETRY, State.FAILED}
        if reason == "unknown_stop_reason" or failure is None or not failure.retryable:
            assert verdict.target is State.FAILED
        else:
            assert verdict.target is State.RETRY
        if reason == "unknown_stop_reason":
            assert verdict.reason == "UNKNOWN_STOP_REASON"
    elif finish is Finish.TOOL_PROPOSALS and n_calls == 0:
        assert verdict == TurnVerdict(State.FAILED, "UNKNOWN_STOP_REASON")
    elif finish is Finish.CONTINUE:
        assert verdict.target is State.MODEL_REQUESTED


# --- Machine -------------------------------------------------------------------------------------


def test_new_machine_starts_in_model_requested_with_empty_history() -> None:
    m = Machine()
    assert m.state is INITIAL is State.MODEL_REQUESTED
    assert m.history == []
    assert not m.terminal


def test_start_records_the_initial_state_once() -> None:
    m = Machine()
    t = m.start(T0)
    assert t == Transition("MODEL_REQUESTED", T0, "created", {})
    assert m.history == [t]
    with pytest.raises(UsageError):
        m.start(T0)
    assert m.history == [t]


def test_moves_keep_history_of_state_time_and_cause() -> None:
    m = Machine()
    m.start(T0)
    path = [
        (State.VALIDATING, "tool_proposals"),
        (State.EXECUTING, "planned"),
        (State.RESULTS_READY, "results"),
        (State.MODEL_REQUESTED, "results_sent"),
        (State.COMPLETED, "final_text"),
    ]
    for i, (target, cause) in enumerate(path, start=1):
        t = m.move(target, T0 + timedelta(seconds=i), cause, turn=i)
        assert t == Transition(target.value, T0 + timedelta(seconds=i), cause, {"turn": i})
        assert m.state is target
    assert [(h.state, h.at, h.cause) for h in m.history[1:]] == [
        (target.value, T0 + timedelta(seconds=i), cause) for i, (target, cause) in enumerate(path, start=1)
    ]
    assert m.terminal
    assert m.history[-1].to_dict() == {
        "state": "COMPLETED",
        "at": (T0 + timedelta(seconds=5)).isoformat(),
        "cause": "final_text",
        "details": {"turn": 5},
    }


def test_illegal_move_raises_and_changes_nothing() -> None:
    m = Machine()
    m.start(T0)
    m.move(State.VALIDATING, T0, "proposals")
    before = list(m.history)
    with pytest.raises(IllegalTransition) as info:
        m.move(State.COMPLETED, T0, "sneaky")
    assert (info.value.source, info.value.target, info.value.cause) == ("VALIDATING", "COMPLETED", "sneaky")
    assert m.state is State.VALIDATING
    assert m.history == before


@pytest.mark.parametrize("terminal", sorted(TERMINAL))
def test_terminal_machine_cannot_move(terminal: State) -> None:
    m = Machine(state=terminal)
    assert m.terminal
    for target in State:
        with pytest.raises(IllegalTransition):
            m.move(target, T0, "after the end")
    assert m.state is terminal
    assert m.history == []


@given(st.lists(st.sampled_from(list(State)), max_size=30))
def test_random_walk_follows_the_table(targets: list[State]) -> None:
    m = Machine()
    m.start(T0)
    expected_history = 1
    for target in targets:
        source = m.state
        if target in TRANSITIONS[source]:
            m.move(target, T0, "walk")
            expected_history += 1
            assert m.state is target
        else:
            with pytest.raises(IllegalTransition):
                m.move(target, T0, "walk")
            assert m.state is source
        assert len(m.history) == expected_history
        assert m.history[-1].state == m.state
        assert m.terminal == (m.state in TERMINAL)


# --- the value types the machine consumes ----------------------------------------------------------


def test_types_are_frozen() -> None:
    t = turn(Finish.FINAL_TEXT)
    with pytest.raises(AttributeError):
        t.finish = Finish.TOOL_PROPOSALS  # type: ignore[misc]
    with pytest.raises(AttributeError):
        call().arguments = {}  # type: ignore[misc]


def test_finish_values_are_their_names() -> None:
    assert [f.value for f in Finish] == [
        "FINAL_TEXT",
        "TOOL_PROPOSALS",
        "REFUSAL",
        "TRUNCATED",
        "API_FAILURE",
        "CONTINUE",
    ]
    assert Finish.REFUSAL == "REFUSAL"


def test_usage_sums_and_keeps_unknown_as_none() -> None:
    from decimal import Decimal

    assert Usage() + Usage() == Usage(None, None, None)  # missing usage is null, never 0 (D27)
    # a count one side lacks is unknown in the sum, not the other side's count (review round 17, r2 F3)
    assert Usage(10, None) + Usage(5, 3) == Usage(15, None, None)
    assert Usage(1, 2, Decimal("0.10")) + Usage(1, 2, Decimal("0.05")) == Usage(2, 4, Decimal("0.15"))
    u = Usage(7, None, Decimal("1.25"))
    assert u.to_dict() == {"input_tokens": 7, "output_tokens": None, "cost": "1.25"}
    assert Usage.from_dict(u.to_dict()) == u
