"""The per-operation state machine (pure): current state, history, and the turn → state mapping."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .errors import UsageError
from .states import INITIAL, TERMINAL, State, check_transition
from .types import Finish, ModelTurn, Transition


@dataclass(slots=True)
class Machine:
    state: State = INITIAL
    history: list[Transition] = field(default_factory=list)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    def move(self, target: State | str, at: datetime, cause: str, **details: Any) -> Transition:
        """Move through the table or raise ``IllegalTransition``; record (state, time, cause). A state
        may be named by its string: it is kept as the ``State`` (a str left the machine in a state that
        is no State, and failed before recording the move)."""
        check_transition(self.state, target, cause)
        if type(target) is not State:
            target = State(target)
        self.state = target
        t = Transition(
            target._value_, at, cause, details
        )  # _value_: a plain attribute; .value is a slow descriptor
        self.history.append(t)
        return t

    def start(self, at: datetime, cause: str = "created") -> Transition:
        if self.history:
            raise UsageError("operation already started")
        t = Transition(self.state.value, at, cause, {})
        self.history.append(t)
        return t


@dataclass(frozen=True, slots=True)
class TurnVerdict:
    target: State
    reason: str | None  # UPPER_SNAKE Outcome reason (D1)
    retryable: bool = False


def reason_code(turn: ModelTurn, default: str) -> str:
    return (turn.reason or default).upper()


def classify_turn(turn: ModelTurn) -> TurnVerdict:
    """Where a model turn sends the operation. Only an explicit completion is success.

    Retryable failures and cut streams say RETRY; the runner decides whether retries remain.
    """
    f = turn.finish
    if f is Finish.FINAL_TEXT:
        if turn.calls:  # D1: a completion has no calls; from a custom client, success would drop them
            return TurnVerdict(State.FAILED, "UNKNOWN_STOP_REASON")
        return TurnVerdict(State.COMPLETED, None)
    if f is Finish.TOOL_PROPOSALS:
        if not turn.calls:  # an adapter bug must not look like success
            return TurnVerdict(State.FAILED, "UNKNOWN_STOP_REASON")
        return TurnVerdict(State.VALIDATING, None)
    if f is Finish.CONTINUE:
        return TurnVerdict(State.MODEL_REQUESTED, None)
    if f is Finish.REFUSAL:
        return TurnVerdict(State.REFUSED, reason_code(turn, "refusal"))
    if f is Finish.TRUNCATED:
        if turn.reason == "stream_interrupted":
            return TurnVerdict(State.RETRY, "STREAM_INTERRUPTED", retryable=True)
        return TurnVerdict(State.INCOMPLETE, reason_code(turn, "truncated"))
    # API_FAILURE
    # Fix: an unknown stop reason was retried when the adapter's Failure said retryable; D1 says it is
    # never retryable and always ends FAILED(UNKNOWN_STOP_REASON).
    if turn.reason == "unknown_stop_reason":
        return TurnVerdict(State.FAILED, "UNKNOWN_STOP_REASON")
    if turn.failure is not None and turn.failure.retryable:
        return TurnVerdict(State.RETRY, reason_code(turn, "api_error"), retryable=True)
    return TurnVerdict(State.FAILED, reason_code(turn, "api_error"))
