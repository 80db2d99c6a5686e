"""The transition table takes a state by its name too, and anything else is an illegal move, never
another exception (issue 2 §2: State values compare equal to their names); review round 20 (a)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbound.core.errors import IllegalTransition
from callbound.core.machine import Machine
from callbound.core.states import TERMINAL, TRANSITIONS, State, check_transition

AT = datetime(2030, 1, 1, tzinfo=UTC)
states = st.sampled_from(list(State))
named = states.flatmap(lambda s: st.sampled_from([s, s.value]))


@given(source=named, target=named)
def test_names_and_states_are_the_same_moves(source: State | str, target: State | str) -> None:
    legal = State(target) in TRANSITIONS[State(source)]
    if legal:
        check_transition(source, target)
    else:
        with pytest.raises(IllegalTransition) as info:
            check_transition(source, target, "why")
        assert (info.value.source, info.value.target, info.value.cause) == (
            State(source).value,
            State(target).value,
            "why",
        )


@pytest.mark.parametrize("other", ["BOGUS", "completed", "", None, 3, ["COMPLETED"], {"s": 1}])
def test_anything_that_names_no_state_is_an_illegal_transition(other: Any) -> None:
    # 'BOGUS' as the source raised KeyError, as the target AttributeError ('str' has no 'value'),
    # a list TypeError (unhashable)
    with pytest.raises(IllegalTransition):
        check_transition(State.MODEL_REQUESTED, other)
    with pytest.raises(IllegalTransition):
        check_transition(other, State.COMPLETED)


@pytest.mark.parametrize("terminal", sorted(TERMINAL))
def test_a_terminal_state_named_by_its_string_has_no_exit(terminal: State) -> None:
    with pytest.raises(IllegalTransition):
        check_transition(terminal.value, "MODEL_REQUESTED")


def test_a_machine_moved_by_a_state_name_keeps_the_state() -> None:
    # It set the str as the state, then raised AttributeError before recording the move.
    m = Machine()
    t = m.move("VALIDATING", AT, "proposals")
    assert m.state is State.VALIDATING
    assert t.state == "VALIDATING" and m.history == [t]
    with pytest.raises(IllegalTransition):
        m.move("COMPLETED", AT, "not from here")
    assert m.state is State.VALIDATING and m.history == [t]
    with pytest.raises(IllegalTransition):
        m.move("DONE", AT, "no such state")
    assert m.state is State.VALIDATING
