"""Gemini Interactions stream assembly: a repeated done event (review round 18, b).

A second ``step.stop`` (legacy ``content.stop``) for a call step already stopped is no new done event:
``CallReady`` is said once per call, as on every other API (Anthropic ``content_block_stop``, Responses
``output_item.done``). A ``step.start`` for the index opens the step again, and its stop is then a
done event of its own. Checked on the decoded path and the fast path, whole and byte by byte.
"""

from __future__ import annotations

import pytest

from callbound.core.types import CallReady

from .interactions_sse import CREATED, START, STOP, args_delta, completed, readings


@pytest.mark.parametrize("legacy", [False, True])
def test_a_repeated_stop_says_call_ready_once(legacy: bool) -> None:
    if legacy:
        start = {"index": 0, "content": {"id": "c1", "type": "function_call"}, "event_type": "content.start"}
        whole = {"type": "function_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}}
        body = [start, {"index": 0, "delta": whole, "event_type": "content.delta"}]
        stop = {"index": 0, "event_type": "content.stop"}
        created = {"interaction": {"id": "v1_o", "status": "in_progress"}, "event_type": "interaction.start"}
        end = {**completed("requires_action"), "event_type": "interaction.complete"}
    else:
        body, stop, created, end = (
            [START, args_delta(0, '{"city":"Oslo"}')],
            STOP,
            CREATED,
            completed("requires_action"),
        )
    for turn, progress in readings([created, *body, stop, stop, end]):
        assert [(c.call_id, c.arguments) for c in turn.calls] == [("c1", {"city": "Oslo"})]
        assert [p for p in progress if isinstance(p, CallReady)] == [CallReady("c1")]


def test_a_step_started_again_is_ready_again() -> None:
    # A step.start for the index opens the step again (its own done event follows): not a repeat.
    events = [
        CREATED,
        START,
        args_delta(0, '{"city":"Oslo"}'),
        STOP,
        START,
        args_delta(0, '{"city":"Rome"}'),
        STOP,
    ]
    for turn, progress in readings([*events, completed("requires_action")]):
        assert [(c.call_id, c.arguments) for c in turn.calls] == [("c1", {"city": "Rome"})]
        assert [p for p in progress if isinstance(p, CallReady)] == [CallReady("c1"), CallReady("c1")]
