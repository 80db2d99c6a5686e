"""Responses streams: done items other than calls and messages count against max_body_bytes (review
round 19, h's finding after e F2).

A reasoning, hosted-tool or image item arrives whole in ``response.output_item.done`` (its deltas are not
held), so each was bounded only by the per-event cap and any number of them piled up; Anthropic's and
Gemini's pieces given whole count since e F2. Now each counts as ``held_len`` measures it and the stream
stops there: ``TRUNCATED(response_too_large)``, error code ``max_body_bytes``, nothing runs. The same
stream under a cap it fits reads as before. Read whole and byte by byte. Data is synthetic."""

from __future__ import annotations

import json
from typing import Any

from callbound.adapters import get
from callbound.adapters.base import StreamCaps
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn

SUMMARY = "s" * 1000  # each item is well under the cap; ten of them are not


def events(items: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}
    ]
    done: list[dict[str, Any]] = []
    for i in range(items):
        item = {"type": "reasoning", "id": f"rs_{i}", "summary": [{"type": "summary_text", "text": SUMMARY}]}
        out.append({"type": "response.output_item.done", "output_index": i, "item": item})
        done.append(item)
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_order",
            "arguments": '{"order_id": "A1"}', "status": "completed"}  # fmt: skip
    out.append({"type": "response.output_item.done", "output_index": items, "item": call})
    snapshot = {"id": "resp_1", "status": "completed", "output": [*done, call]}
    out.append({"type": "response.completed", "response": snapshot})
    return out


def read(evs: list[dict[str, Any]], caps: StreamCaps) -> list[ModelTurn]:
    data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in evs).encode()
    turns = []
    for chunks in ([data], [data[i : i + 7] for i in range(0, len(data), 7)]):
        feed = StreamFeed(get("openai-responses").stream_assembler(caps))
        for chunk in chunks:
            feed.feed(chunk)
        feed.close()
        turns.append(feed.finish())
    return turns


def test_whole_items_together_over_the_cap_cut_the_stream() -> None:
    # each event is under the cap (the snapshot is not sent to this reader: it comes after the trip)
    for turn in read(events(10), StreamCaps(max_body_bytes=8000)):
        assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "response_too_large")
        assert turn.failure is not None and turn.failure.error_code == "max_body_bytes"
        assert not turn.calls


def test_the_same_items_under_a_cap_they_fit_read_as_before() -> None:
    for turn in read(events(10), StreamCaps(max_body_bytes=64_000)):
        assert turn.finish is Finish.TOOL_PROPOSALS
        assert [c.call_id for c in turn.calls] == ["call_1"]
