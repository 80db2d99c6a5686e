"""Interactions stream: another call started at a call step's index (review round 19, e F3).

A ``step.start`` for an index opens the step again (review round 18, b F2), which is right for the same
call. For another one it replaced the call step held there: the first call, announced by
``CallStarted``/``CallReady``, vanished from the turn without a word while the second ran, and the
second got ``ArgumentsProgress``/``CallReady`` with no ``CallStarted``. Such a stream is now
``API_FAILURE(malformed_response)``, ``failure.error_code`` ``step_index_reused``, not retried, and none
of its calls runs; the same call (type, id, name) started again still reads as before. Checked on the
decoded path and the fast path, whole and byte by byte. Ids are synthetic.
"""

from __future__ import annotations

from typing import Any

import pytest

from callbound.core.types import CallReady, Finish

from .interactions_sse import CREATED, START, STOP, args_delta, completed, readings


def start(**step: Any) -> dict[str, Any]:
    return {**START, "step": {**START["step"], **step}}


@pytest.mark.parametrize(
    "again",
    [
        start(id="c2"),
        start(name="delete_files"),
        {"index": 0, "step": {"type": "model_output", "content": []}, "event_type": "step.start"},
    ],
)
def test_another_step_at_a_call_index_is_malformed(again: dict[str, Any]) -> None:
    events = [
        CREATED,
        START,
        args_delta(0, '{"city":"Oslo"}'),
        STOP,
        again,
        args_delta(0, '{"city":"Rome"}'),
        STOP,
    ]
    for turn, progress in readings([*events, completed("requires_action")]):
        assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "malformed_response")
        assert turn.failure is not None and not turn.failure.retryable
        assert turn.failure.error_code == "step_index_reused"
        assert not turn.executable
        assert [p for p in progress if isinstance(p, CallReady)] == [CallReady("c1")]


def test_the_same_call_started_again_still_reads() -> None:
    events = [
        CREATED,
        START,
        args_delta(0, '{"city":"Oslo"}'),
        STOP,
        START,
        args_delta(0, '{"city":"Rome"}'),
        STOP,
    ]
    for turn, _ in readings([*events, completed("requires_action")]):
        assert turn.finish is Finish.TOOL_PROPOSALS
        assert [(c.call_id, c.arguments) for c in turn.calls] == [("c1", {"city": "Rome"})]
