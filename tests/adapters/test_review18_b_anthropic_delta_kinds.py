"""Anthropic stream: a delta of a kind its block does not take is dropped (review round 18, b).

anthropic-sdk-python's accumulator applies each delta only to its own kind of block: ``text_delta`` to a
text block, ``thinking_delta`` and ``signature_delta`` to a thinking block, ``input_json_delta`` to a
tool_use / server_tool_use block, ``compaction_delta`` to a compaction block; any other pairing changes
nothing. callbound applied every delta to whatever block its index named, so a ``text_delta`` for a
tool_use block gave that block a ``text`` member and an ``input_json_delta`` for a text block gave it an
``input``: members the plain API never returns, replayed in the next request (D8), which the API
rejects as extra inputs. Checked on the decoded path and the fast path (compact deltas), whole and
byte by byte; a delta of the right kind is still read.
"""

from __future__ import annotations

import json
from typing import Any

from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import ArgumentsProgress, Finish, ModelTurn, Progress

API = "anthropic-messages"
START = {
    "type": "message_start",
    "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": [],
                "stop_reason": None, "usage": {"input_tokens": 9, "output_tokens": 1}},
}  # fmt: skip
TOOL = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}


def _delta(index: int, kind: str, field: str, value: str) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": {"type": kind, field: value}}


def _stream(*middle: dict[str, Any], stop: str = "tool_use") -> list[dict[str, Any]]:
    end = {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 20}}
    return [START, *middle, end, {"type": "message_stop"}]


def _readings(events: list[dict[str, Any]]) -> list[tuple[ModelTurn, list[Progress]]]:
    out = []
    for compact in (True, False):
        raw = "".join(
            f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':')) if compact else json.dumps(e)}\n\n"
            for e in events
        ).encode()
        for chunks in ([raw], [raw[i : i + 1] for i in range(len(raw))]):
            progress: list[Progress] = []
            feed = StreamFeed(get(API).stream_assembler(), progress.append)
            for chunk in chunks:
                feed.feed(chunk)
            feed.close()
            out.append((feed.finish(), progress))
    return out


def test_a_text_delta_for_a_tool_use_block_adds_no_text_to_it() -> None:
    events = _stream(
        {"type": "content_block_start", "index": 0, "content_block": TOOL},
        _delta(0, "input_json_delta", "partial_json", '{"city":"Oslo"}'),
        _delta(0, "text_delta", "text", "stray"),
        _delta(0, "thinking_delta", "thinking", "stray"),
        _delta(0, "signature_delta", "signature", "stray"),
        {"type": "content_block_stop", "index": 0},
    )
    for turn, progress in _readings(events):
        assert turn.finish is Finish.TOOL_PROPOSALS
        assert [(c.call_id, c.arguments) for c in turn.calls] == [("toolu_1", {"city": "Oslo"})]
        assert turn.continuation[0]["content"] == [{**TOOL, "input": {"city": "Oslo"}}]
        assert [p for p in progress if isinstance(p, ArgumentsProgress)] == [ArgumentsProgress("toolu_1", 15)]


def test_an_input_delta_for_a_text_block_adds_no_input_to_it() -> None:
    events = _stream(
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        _delta(0, "text_delta", "text", "Sunny."),
        _delta(0, "input_json_delta", "partial_json", '{"city":"Oslo"}'),
        _delta(0, "signature_delta", "signature", "stray"),
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        _delta(1, "thinking_delta", "thinking", "Hmm."),
        _delta(1, "text_delta", "text", "stray"),
        _delta(1, "signature_delta", "signature", "c2ln"),
        {"type": "content_block_stop", "index": 1},
        stop="end_turn",
    )  # fmt: skip
    for turn, _ in _readings(events):
        assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "Sunny.")
        assert turn.continuation[0]["content"] == [
            {"type": "text", "text": "Sunny."},
            {"type": "thinking", "thinking": "Hmm.", "signature": "c2ln"},
        ]
