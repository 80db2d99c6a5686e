"""Gemini Interactions stream assembly: a repeated done event (review round 18, b).

A second ``step.stop`` (legacy ``content.stop``) for a call step already stopped is no new done event:
``CallReady`` is said once per call, as on every other API (Anthropic ``content_block_stop``, Responses
``output_item.done``). A ``step.start`` for the index opens the step again, and its stop is then a
done event of its own. Checked on the decoded path and the fast path, whole and byte by byte.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import CallReady, ModelTurn, Progress

API = "gemini-interactions"
CREATED = {"interaction": {"id": "v1_o", "status": "in_progress"}, "event_type": "interaction.created"}
START = {
    "index": 0,
    "step": {"id": "c1", "type": "function_call", "name": "get_weather", "arguments": {}},
    "event_type": "step.start",
}
STOP = {"index": 0, "event_type": "step.stop"}
USAGE = {"total_input_tokens": 5, "total_output_tokens": 3, "total_tokens": 8}


def _args(index: int, text: str) -> dict[str, Any]:
    # key order as the API sends it: this compact form takes the fast path
    return {
        "index": index,
        "delta": {"arguments": text, "type": "arguments_delta"},
        "event_type": "step.delta",
    }


def _completed(status: str) -> dict[str, Any]:
    return {
        "interaction": {"id": "v1_o", "status": status, "usage": USAGE},
        "event_type": "interaction.completed",
    }


def _sse(events: list[dict[str, Any]], *, compact: bool) -> bytes:
    def data(e: dict[str, Any]) -> str:
        return json.dumps(e, separators=(",", ":")) if compact else json.dumps(e)

    return "".join(f"event: {e['event_type']}\ndata: {data(e)}\n\n" for e in events).encode()


def _fed(raw: bytes, *, bytewise: bool) -> tuple[ModelTurn, list[Progress]]:
    progress: list[Progress] = []
    feed = StreamFeed(get(API).stream_assembler(), progress.append)
    for chunk in [raw[i : i + 1] for i in range(len(raw))] if bytewise else [raw]:
        feed.feed(chunk)
    feed.close()
    return feed.finish(), progress


def _readings(events: list[dict[str, Any]]) -> list[tuple[ModelTurn, list[Progress]]]:
    return [
        _fed(_sse(events, compact=compact), bytewise=bytewise)
        for compact in (True, False)
        for bytewise in (False, True)
    ]


@pytest.mark.parametrize("legacy", [False, True])
def test_a_repeated_stop_says_call_ready_once(legacy: bool) -> None:
    if legacy:
        start = {"index": 0, "content": {"id": "c1", "type": "function_call"}, "event_type": "content.start"}
        whole = {"type": "function_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}}
        body = [start, {"index": 0, "delta": whole, "event_type": "content.delta"}]
        stop = {"index": 0, "event_type": "content.stop"}
        created = {"interaction": {"id": "v1_o", "status": "in_progress"}, "event_type": "interaction.start"}
        end = {**_completed("requires_action"), "event_type": "interaction.complete"}
    else:
        body, stop, created, end = (
            [START, _args(0, '{"city":"Oslo"}')],
            STOP,
            CREATED,
            _completed("requires_action"),
        )
    for turn, progress in _readings([created, *body, stop, stop, end]):
        assert [(c.call_id, c.arguments) for c in turn.calls] == [("c1", {"city": "Oslo"})]
        assert [p for p in progress if isinstance(p, CallReady)] == [CallReady("c1")]


def test_a_step_started_again_is_ready_again() -> None:
    # A step.start for the index opens the step again (its own done event follows): not a repeat.
    events = [CREATED, START, _args(0, '{"city":"Oslo"}'), STOP, START, _args(0, '{"city":"Rome"}'), STOP]
    for turn, progress in _readings([*events, _completed("requires_action")]):
        assert [(c.call_id, c.arguments) for c in turn.calls] == [("c1", {"city": "Rome"})]
        assert [p for p in progress if isinstance(p, CallReady)] == [CallReady("c1"), CallReady("c1")]
