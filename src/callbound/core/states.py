"""Operation states and THE transition table. No other module may decide which moves are legal."""

from __future__ import annotations

from enum import StrEnum

from .errors import IllegalTransition


class State(StrEnum):
    """Operation states. Values compare equal to their names as strings."""

    MODEL_REQUESTED = "MODEL_REQUESTED"
    VALIDATING = "VALIDATING"
    WAITING_APPROVAL = "WAITING_APPROVAL"
    EXECUTING = "EXECUTING"
    RESULTS_READY = "RESULTS_READY"
    COMPLETED = "COMPLETED"
    REFUSED = "REFUSED"
    INCOMPLETE = "INCOMPLETE"
    FAILED = "FAILED"
    RETRY = "RETRY"
    STOPPED = "STOPPED"


S = State

# source -> allowed targets. Each line says why the move exists.
TRANSITIONS: dict[State, frozenset[State]] = {
    S.MODEL_REQUESTED: frozenset(
        {
            S.COMPLETED,  # FINAL_TEXT: an explicit completion
            S.VALIDATING,  # TOOL_PROPOSALS
            S.REFUSED,  # REFUSAL
            S.INCOMPLETE,  # TRUNCATED (max tokens, context window, byte cap)
            S.RETRY,  # retryable API failure or a cut stream (D26)
            S.FAILED,  # fatal API failure, unknown stop reason
            S.MODEL_REQUESTED,  # CONTINUE (pause_turn): ask again with the output resent
            S.STOPPED,  # a guard tripped (turns, tokens, cost, deadline) or cancelled
        }
    ),
    S.RETRY: frozenset(
        {
            S.MODEL_REQUESTED,  # backoff elapsed, ask again
            S.FAILED,  # retries exhausted for an API failure
            S.INCOMPLETE,  # retries exhausted for a cut stream (D26)
            S.STOPPED,  # deadline or cancellation during backoff
        }
    ),
    S.VALIDATING: frozenset(
        {
            S.EXECUTING,  # at least one call runs (or replays from the ledger)
            S.WAITING_APPROVAL,  # every runnable call needs a human first
            S.RESULTS_READY,  # every call was rejected: error envelopes only
            S.STOPPED,  # max_tool_calls (D15), no progress (D13), cancelled
            S.FAILED,  # integrity failure
        }
    ),
    S.EXECUTING: frozenset(
        {
            S.RESULTS_READY,  # every call of the turn has an envelope
            S.WAITING_APPROVAL,  # mixed turn: the rest waits for approvals (D3)
            S.STOPPED,  # OUTCOME_UNKNOWN (D16), deadline
            S.FAILED,  # integrity failure
        }
    ),
    S.WAITING_APPROVAL: frozenset(
        {
            S.EXECUTING,  # decisions recorded; approved calls run
            S.RESULTS_READY,  # all denied / expired / stale: error envelopes only
            S.STOPPED,  # cancelled, not_after passed, expiry policy "stop"
            S.FAILED,  # integrity failure
        }
    ),
    S.RESULTS_READY: frozenset(
        {
            S.MODEL_REQUESTED,  # results go back to the model
            S.STOPPED,  # a guard tripped before the next request
            S.FAILED,  # CorrelationError / BindingMismatch (D4)
        }
    ),
    S.COMPLETED: frozenset(),
    S.REFUSED: frozenset(),
    S.INCOMPLETE: frozenset(),
    S.FAILED: frozenset(),
    S.STOPPED: frozenset(),
}

TERMINAL: frozenset[State] = frozenset(s for s, targets in TRANSITIONS.items() if not targets)
INITIAL: State = S.MODEL_REQUESTED


def check_transition(source: State | str, target: State | str, cause: str = "") -> None:
    """Raise ``IllegalTransition`` unless the table allows ``source -> target``. A state's name is
    that state (``State`` values compare equal to their names); anything else names no state, so no
    move to or from it is legal. Either raised AttributeError or KeyError instead."""
    try:
        allowed = target in TRANSITIONS[source]  # type: ignore[index]
    except (KeyError, TypeError):  # no such state, or not even hashable
        allowed = False
    if not allowed:
        raise IllegalTransition(str(source), str(target), cause)


def mermaid_diagram() -> str:
    """The state diagram for the docs, generated from the table so it cannot drift."""
    lines = ["stateDiagram-v2", f"    [*] --> {INITIAL.value}"]
    for source, targets in TRANSITIONS.items():
        for target in sorted(targets, key=lambda s: s.value):
            lines.append(f"    {source.value} --> {target.value}")
    for state in sorted(TERMINAL, key=lambda s: s.value):
        lines.append(f"    {state.value} --> [*]")
    return "\n".join(lines) + "\n"
