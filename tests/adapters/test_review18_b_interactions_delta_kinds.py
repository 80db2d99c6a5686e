"""Gemini Interactions stream: a delta goes only into the kind of step it belongs to (review round 18, b).

google-genai's delta types each belong to one kind of step: ``text`` to a ``model_output`` (legacy:
a ``text`` content), ``arguments_delta`` to a ``function_call``, and a built-in tool's delta carries its
step's own type (``google_search_call``, ``mcp_server_tool_call``, ...). The assembler merged any delta
it did not know into whatever step its index named, and put text deltas into any step: a
``mcp_server_tool_call`` delta for a function_call step renamed the call (it then ran a tool other than
the one CallStarted announced) and gave it that delta's members, and a text delta gave a function_call
step a ``content`` list: members the API never sends on such a step, replayed in the next request (D8)
and refused there. An ``arguments_delta`` for a step that is no call raised ArgumentsProgress for it.
Checked on the decoded path and the fast path, whole and byte by byte.
"""

from __future__ import annotations

import json
from typing import Any

from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import ArgumentsProgress, CallReady, CallStarted, Finish, ModelTurn, Progress

API = "gemini-interactions"
CREATED = {"interaction": {"id": "v1_k", "status": "in_progress"}, "event_type": "interaction.created"}
CALL = {"id": "c1", "type": "function_call", "name": "get_weather", "arguments": {}}


def _start(index: int, step: dict[str, Any]) -> dict[str, Any]:
    return {"index": index, "step": step, "event_type": "step.start"}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"index": index, "delta": delta, "event_type": "step.delta"}


def _args(index: int, text: str) -> dict[str, Any]:
    return _delta(index, {"arguments": text, "type": "arguments_delta"})  # the fast path's shape


def _stop(index: int) -> dict[str, Any]:
    return {"index": index, "event_type": "step.stop"}


def _end(status: str) -> dict[str, Any]:
    usage = {"total_input_tokens": 5, "total_output_tokens": 3, "total_tokens": 8}
    return {
        "interaction": {"id": "v1_k", "status": status, "usage": usage},
        "event_type": "interaction.completed",
    }


def _readings(events: list[dict[str, Any]]) -> list[tuple[ModelTurn, list[Progress]]]:
    out = []
    for compact in (True, False):
        dump = (lambda e: json.dumps(e, separators=(",", ":"))) if compact else json.dumps
        raw = "".join(f"event: {e['event_type']}\ndata: {dump(e)}\n\n" for e in events).encode()
        for chunks in ([raw], [raw[i : i + 1] for i in range(len(raw))]):
            progress: list[Progress] = []
            feed = StreamFeed(get(API).stream_assembler(), progress.append)
            for chunk in chunks:
                feed.feed(chunk)
            feed.close()
            out.append((feed.finish(), progress))
    return out


def test_a_built_in_tool_delta_does_not_rename_a_function_call() -> None:
    mcp = {"type": "mcp_server_tool_call", "name": "delete_all", "server_name": "ops", "arguments": {"x": 1}}
    events = [
        CREATED,
        _start(0, CALL),
        _args(0, '{"city":"Oslo"}'),
        _delta(0, mcp),
        _stop(0),
        _end("requires_action"),
    ]
    for turn, progress in _readings(events):
        assert turn.finish is Finish.TOOL_PROPOSALS
        assert [(c.name, c.arguments) for c in turn.calls] == [("get_weather", {"city": "Oslo"})]
        assert turn.continuation == ({**CALL, "arguments": {"city": "Oslo"}},)
        assert progress == [CallStarted("c1", "get_weather"), ArgumentsProgress("c1", 15), CallReady("c1")]


def test_a_text_delta_gives_a_function_call_no_content() -> None:
    events = [
        CREATED,
        _start(0, CALL),
        _delta(0, {"type": "text", "text": "stray"}),
        _args(0, '{"city":"Oslo"}'),
        _stop(0),
        _end("requires_action"),
    ]
    for turn, _ in _readings(events):
        assert [(c.name, c.arguments) for c in turn.calls] == [("get_weather", {"city": "Oslo"})]
        assert turn.continuation == ({**CALL, "arguments": {"city": "Oslo"}},)


def test_an_arguments_delta_for_a_step_that_is_no_call_is_dropped() -> None:
    events = [
        CREATED,
        _start(0, {"type": "model_output"}),
        _delta(0, {"type": "text", "text": "Sunny."}),
        _args(0, '{"city":"Oslo"}'),
        _stop(0),
        _end("completed"),
    ]
    for turn, progress in _readings(events):
        assert (turn.finish, turn.text, progress) == (Finish.FINAL_TEXT, "Sunny.", [])
        assert turn.continuation == (
            {"type": "model_output", "content": [{"type": "text", "text": "Sunny."}]},
        )


def test_a_built_in_tool_delta_still_fills_its_own_step() -> None:
    search = {"type": "google_search_call", "id": "s1"}
    delta = {"type": "google_search_call", "arguments": {"queries": ["weather Oslo"]}}
    events = [CREATED, _start(0, search), _delta(0, delta), _stop(0), _end("completed")]
    for turn, _ in _readings(events):
        assert turn.continuation[0] == {**search, "arguments": {"queries": ["weather Oslo"]}}
