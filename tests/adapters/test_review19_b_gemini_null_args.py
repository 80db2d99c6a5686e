"""gemini-generate: ``"args": null`` is read as no args, as a missing ``args`` is (review round 19, b F2).

``FunctionCall.args`` is an optional google.protobuf.Struct: in proto3 JSON ``null`` on a message field means
"not set", google-genai reads both as ``args=None``, and its automatic function calling runs such a call
with ``{}`` ("Treat None as an empty dictionary for execution", _extra_utils.py). callbound read a missing
``args`` as ``{}`` (the Vertex no-argument call ``{"functionCall": {"name": "read_theme"}}``,
fixtures/gemini/ai__google-stream-no-args-tool-call.chunks.txt) but ``null`` as an arguments error, so the
same no-argument call was refused or run depending on how the field was left out. Payloads synthetic.
"""

from __future__ import annotations

import json
from typing import Any

from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn

API = "gemini-generate"


def _body(fc: dict[str, Any]) -> dict[str, Any]:
    return {
        "responseId": "r1",
        "candidates": [
            {"content": {"role": "model", "parts": [{"functionCall": fc}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7},
    }


def _assert_no_args(turn: ModelTurn) -> None:
    assert turn.finish is Finish.TOOL_PROPOSALS
    [call] = turn.calls
    assert (call.name, call.arguments, call.arguments_error) == ("read_theme", {}, None)


def test_null_args_read_as_missing_args() -> None:
    null = get(API).parse_response(_body({"name": "read_theme", "args": None}))
    missing = get(API).parse_response(_body({"name": "read_theme"}))
    _assert_no_args(null)
    _assert_no_args(missing)
    # the content goes back as received (D8): proto3 JSON reads the null as "not set"
    assert null.continuation[0]["parts"][0]["functionCall"] == {"name": "read_theme", "args": None}


def test_streamed_null_args_read_as_missing_args() -> None:
    feed = StreamFeed(get(API).stream_assembler())
    feed.feed(f"data: {json.dumps(_body({'name': 'read_theme', 'args': None}))}\r\n\r\n".encode())
    feed.close()
    _assert_no_args(feed.finish())


def test_args_of_another_type_are_still_an_arguments_error() -> None:
    for bad in ([], "x", 3):
        turn = get(API).parse_response(_body({"name": "read_theme", "args": bad}))
        assert turn.calls[0].arguments is None and turn.calls[0].arguments_error
