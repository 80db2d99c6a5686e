"""The state enum and THE transition table (core/states.py)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbound.core.errors import CallboundError, IllegalTransition
from callbound.core.states import INITIAL, TERMINAL, TRANSITIONS, State, check_transition, mermaid_diagram

S = State

ALL_STATES = [
    "MODEL_REQUESTED",
    "VALIDATING",
    "WAITING_APPROVAL",
    "EXECUTING",
    "RESULTS_READY",
    "COMPLETED",
    "REFUSED",
    "INCOMPLETE",
    "FAILED",
    "RETRY",
    "STOPPED",
]

# The moves the design needs (ARCHITECTURE "One turn, as data", D2, D3, D4, D13-D16, D26).
REQUIRED_EDGES = {
    (S.MODEL_REQUESTED, S.COMPLETED),  # FINAL_TEXT
    (S.MODEL_REQUESTED, S.VALIDATING),  # TOOL_PROPOSALS
    (S.MODEL_REQUESTED, S.REFUSED),  # REFUSAL
    (S.MODEL_REQUESTED, S.INCOMPLETE),  # TRUNCATED
    (S.MODEL_REQUESTED, S.RETRY),  # retryable API failure / cut stream
    (S.MODEL_REQUESTED, S.FAILED),  # fatal API failure / unknown stop reason
    (S.MODEL_REQUESTED, S.MODEL_REQUESTED),  # CONTINUE
    (S.MODEL_REQUESTED, S.STOPPED),  # guard tripped
    (S.RETRY, S.MODEL_REQUESTED),
    (S.RETRY, S.FAILED),
    (S.RETRY, S.INCOMPLETE),  # cut stream, retries exhausted (D26)
    (S.VALIDATING, S.EXECUTING),
    (S.VALIDATING, S.WAITING_APPROVAL),
    (S.VALIDATING, S.RESULTS_READY),  # every call rejected
    (S.VALIDATING, S.STOPPED),  # MAX_TOOL_CALLS (D15)
    (S.EXECUTING, S.RESULTS_READY),
    (S.EXECUTING, S.WAITING_APPROVAL),  # mixed turn (D3)
    (S.EXECUTING, S.STOPPED),  # OUTCOME_UNKNOWN (D16)
    (S.WAITING_APPROVAL, S.EXECUTING),
    (S.WAITING_APPROVAL, S.RESULTS_READY),
    (S.RESULTS_READY, S.MODEL_REQUESTED),
    (S.RESULTS_READY, S.FAILED),  # CorrelationError / BindingMismatch (D4)
    (S.RESULTS_READY, S.STOPPED),  # NO_PROGRESS (D13)
}

# Moves that would defeat a safety rule and must never be in the table.
FORBIDDEN_EDGES = {
    (S.VALIDATING, S.COMPLETED),  # proposals are not a completion
    (S.EXECUTING, S.COMPLETED),
    (S.RESULTS_READY, S.COMPLETED),  # results must go back to the model first
    (S.WAITING_APPROVAL, S.COMPLETED),
    (S.RETRY, S.COMPLETED),
    (S.MODEL_REQUESTED, S.EXECUTING),  # nothing runs without validation
    (S.MODEL_REQUESTED, S.RESULTS_READY),
    (S.RETRY, S.EXECUTING),
    (S.WAITING_APPROVAL, S.MODEL_REQUESTED),  # every call of a turn needs an envelope first (D3)
    (S.EXECUTING, S.MODEL_REQUESTED),
    (S.VALIDATING, S.MODEL_REQUESTED),
}


def test_state_names_and_values() -> None:
    assert [s.value for s in State] == ALL_STATES
    for name in ALL_STATES:
        state = State[name]
        assert state == name  # values compare equal to their names as strings
        assert name == state
        assert str(state) == name
        assert State(name) is state
        assert hash(state) == hash(name)
        assert {name: 1}[state] == 1


def test_table_covers_every_state_exactly() -> None:
    assert set(TRANSITIONS) == set(State)
    for source, targets in TRANSITIONS.items():
        assert isinstance(targets, frozenset)
        assert targets <= set(State), source


def test_terminal_states_have_no_exits() -> None:
    assert {S.COMPLETED, S.REFUSED, S.INCOMPLETE, S.FAILED, S.STOPPED} == TERMINAL
    for state in TERMINAL:
        assert TRANSITIONS[state] == frozenset()
        for target in State:
            with pytest.raises(IllegalTransition):
                check_transition(state, target)


def test_non_terminal_states_can_reach_a_terminal_state() -> None:
    for start in set(State) - TERMINAL:
        seen, frontier = {start}, [start]
        while frontier:
            for nxt in TRANSITIONS[frontier.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        assert seen & TERMINAL, start
        # A guard trip or cancellation can end the operation from anywhere, and so can a failure.
        assert S.STOPPED in TRANSITIONS[start], start
        assert S.FAILED in TRANSITIONS[start], start


def test_every_state_is_reachable_from_initial() -> None:
    assert INITIAL is S.MODEL_REQUESTED
    seen: set[State] = {INITIAL}
    frontier: list[State] = [INITIAL]
    while frontier:
        for nxt in TRANSITIONS[frontier.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    assert seen == set(State)


@pytest.mark.parametrize(("source", "target"), sorted(REQUIRED_EDGES))
def test_required_moves_are_allowed(source: State, target: State) -> None:
    assert target in TRANSITIONS[source]
    check_transition(source, target)  # does not raise


@pytest.mark.parametrize(("source", "target"), sorted(FORBIDDEN_EDGES))
def test_unsafe_moves_are_illegal(source: State, target: State) -> None:
    assert target not in TRANSITIONS[source]
    with pytest.raises(IllegalTransition) as info:
        check_transition(source, target, "because")
    assert info.value.source == source.value
    assert info.value.target == target.value
    assert info.value.cause == "because"
    assert f"{source.value} -> {target.value}" in str(info.value)


def test_only_completed_path_is_from_model_requested() -> None:
    sources = {s for s, targets in TRANSITIONS.items() if S.COMPLETED in targets}
    assert sources == {S.MODEL_REQUESTED}


def test_check_transition_agrees_with_table_for_every_pair() -> None:
    for source, target in itertools.product(State, State):
        if target in TRANSITIONS[source]:
            check_transition(source, target)
        else:
            with pytest.raises(IllegalTransition):
                check_transition(source, target)


@given(st.sampled_from(list(State)), st.sampled_from(list(State)))
def test_illegal_transition_is_a_callbound_error(source: State, target: State) -> None:
    try:
        check_transition(source, target)
    except IllegalTransition as exc:
        assert isinstance(exc, CallboundError)
        assert target not in TRANSITIONS[source]
    else:
        assert target in TRANSITIONS[source]


def test_mermaid_diagram_is_generated_from_the_table() -> None:
    diagram = mermaid_diagram()
    lines = diagram.splitlines()
    assert lines[0] == "stateDiagram-v2"
    assert f"    [*] --> {INITIAL.value}" in lines
    edges = {tuple(line.strip().split(" --> ")) for line in lines[1:]}
    expected = {(s.value, t.value) for s, targets in TRANSITIONS.items() for t in targets}
    expected |= {("[*]", INITIAL.value)} | {(s.value, "[*]") for s in TERMINAL}
    assert edges == expected
    assert diagram.endswith("\n")
