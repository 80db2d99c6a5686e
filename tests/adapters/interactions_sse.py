"""Gemini Interactions SSE built for the stream-assembly tests of review round 18: one function_call
step (index 0), its events in the API's key order (compact, they take the assembler's fast path), and
the assembled turn with its progress, read whole and byte by byte, decoded and fast paths."""

from __future__ import annotations

import json
from typing import Any

from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import ModelTurn, Progress

API = "gemini-interactions"
CREATED = {"interaction": {"id": "v1_o", "status": "in_progress"}, "event_type": "interaction.created"}
START = {
    "index": 0,
    "step": {"id": "c1", "type": "function_call", "name": "get_weather", "arguments": {}},
    "event_type": "step.start",
}
STOP = {"index": 0, "event_type": "step.stop"}
USAGE = {"total_input_tokens": 5, "total_output_tokens": 3, "total_tokens": 8}


def args_delta(index: int, text: str) -> dict[str, Any]:
    # key order as the API sends it: this compact form takes the fast path
    return {
        "index": index,
        "delta": {"arguments": text, "type": "arguments_delta"},
        "event_type": "step.delta",
    }


def completed(status: str) -> dict[str, Any]:
    return {
        "interaction": {"id": "v1_o", "status": status, "usage": USAGE},
        "event_type": "interaction.completed",
    }


def sse(events: list[dict[str, Any]], *, compact: bool) -> bytes:
    def data(e: dict[str, Any]) -> str:
        return json.dumps(e, separators=(",", ":")) if compact else json.dumps(e)

    return "".join(f"event: {e['event_type']}\ndata: {data(e)}\n\n" for e in events).encode()


def fed(raw: bytes, *, bytewise: bool) -> tuple[ModelTurn, list[Progress]]:
    progress: list[Progress] = []
    feed = StreamFeed(get(API).stream_assembler(), progress.append)
    for chunk in [raw[i : i + 1] for i in range(len(raw))] if bytewise else [raw]:
        feed.feed(chunk)
    feed.close()
    return feed.finish(), progress


def readings(events: list[dict[str, Any]]) -> list[tuple[ModelTurn, list[Progress]]]:
    return [
        fed(sse(events, compact=compact), bytewise=bytewise)
        for compact in (True, False)
        for bytewise in (False, True)
    ]
