"""A Gemini finishReason sent as the enum's number is kept, and read the same plain and streamed (D1).

Vertex answers requests made with ``$alt=json;enum-encoding=int`` (its Python SDK's default) with
numbers: ``"finishReason": 1`` (shape from real Vertex streams recorded by public test suites:
Arize-ai/openinference test_gemini_token_counts_streaming.yaml, opentelemetry-python-contrib vertexai
test_stream_tool_events.yaml). callbound's own transports ask for names, so a number is a reason it does
not know: API_FAILURE(unknown_stop_reason), not retried, with the raw value kept as its digits. Before,
the plain body dropped the raw value and a stream took the finishing chunk for no finishReason at all:
TRUNCATED(stream_interrupted), retried, its text lost. Texts are synthetic.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn

ADAPTER = get("gemini-generate")


def _chunk(text: str, finish: Any = None) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
    if finish is not None:
        cand["finishReason"] = finish
    body: dict[str, Any] = {"candidates": [cand], "modelVersion": "gemini-x", "responseId": "r1"}
    if finish is not None:
        body["usageMetadata"] = {"promptTokenCount": 11, "candidatesTokenCount": 16, "totalTokenCount": 27}
    return body


def _streamed(*chunks: dict[str, Any]) -> ModelTurn:
    feed = StreamFeed(ADAPTER.stream_assembler())
    feed.feed("".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks).encode())
    feed.close()
    return feed.finish()


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_a_numbered_finish_reason_is_kept_and_unknown(streamed: bool) -> None:
    turn = (
        _streamed(_chunk("I told my "), _chunk("wife", 1))
        if streamed
        else ADAPTER.parse_response(_chunk("I told my wife", 1))
    )
    assert (turn.finish, turn.reason, turn.raw_stop_reason) == (
        Finish.API_FAILURE,
        "unknown_stop_reason",
        "1",
    )
    assert turn.failure is not None and turn.failure.retryable is False
    assert turn.text == "I told my wife"
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (11, 16)


@pytest.mark.parametrize("odd", [True, 1.0, [1], {"n": 1}])
def test_other_types_are_still_no_finish_reason(odd: Any) -> None:
    turn = _streamed(_chunk("half", odd))
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "stream_interrupted")


def test_names_still_read_as_before() -> None:
    assert _streamed(_chunk("a"), _chunk("b", "STOP")).finish is Finish.FINAL_TEXT
