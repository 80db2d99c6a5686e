"""Streams: everything held counts against the byte caps, not only text (review round 19, e F2).

``StreamCaps.max_body_bytes`` bounds what a stream holds besides call arguments, as it bounds a plain body
(review round 17, r4 F2), but only text deltas were counted. Whole pieces each under the per-event cap
piled up without limit: Anthropic ``citations_delta`` citations and blocks that arrive whole in
``content_block_start`` (``redacted_thinking`` data, a server tool's result); Gemini parts other than
text (``inlineData``, ``executableCode``) and a part's ``thoughtSignature``; Interactions media deltas,
``thought_signature`` deltas and ``step.start`` snapshots. An argument object given whole at the start
(an Anthropic tool_use ``input``, an Interactions function_call ``arguments``) was counted only once the
stream ended. Each now counts as it comes (compact JSON), and the stream stops there:
``TRUNCATED(response_too_large)`` / ``TRUNCATED(arguments_too_large)``, no call. The same streams under
the default caps read as before. Each is read whole and byte by byte. Data is synthetic.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.base import StreamCaps
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn

CAP = 4000
BIG = "A" * 1000  # each piece is well under the cap; ten of them are not


def read(api: str, events: list[dict[str, Any]], caps: StreamCaps) -> list[ModelTurn]:
    name = "event_type" if api == "gemini-interactions" else "type"
    data = "".join(
        (f"event: {e[name]}\n" if name in e else "") + f"data: {json.dumps(e)}\n\n" for e in events
    ).encode()
    turns = []
    for chunks in ([data], [data[i : i + 7] for i in range(0, len(data), 7)]):
        feed = StreamFeed(get(api).stream_assembler(caps))
        for chunk in chunks:
            feed.feed(chunk)
        feed.close()
        turns.append(feed.finish())
    return turns


# ------------------------------------------------------------------------------------------ Anthropic

MSG = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": [],
       "stop_reason": None, "usage": {"input_tokens": 9, "output_tokens": 1}}  # fmt: skip


def anthropic(middle: list[dict[str, Any]], stop: str = "end_turn") -> list[dict[str, Any]]:
    end = {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 20}}
    return [{"type": "message_start", "message": MSG}, *middle, end, {"type": "message_stop"}]


def citations() -> list[dict[str, Any]]:
    cite = {"type": "char_location", "cited_text": BIG, "document_index": 0, "start_char_index": 0,
            "end_char_index": 1000, "document_title": None}  # fmt: skip
    text = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "citations_delta", "citation": cite},
    }
    return anthropic([text, *[delta] * 10, {"type": "content_block_stop", "index": 0}])


def redacted() -> list[dict[str, Any]]:
    block = {"type": "redacted_thinking", "data": BIG}
    return anthropic(
        [
            e
            for i in range(10)
            for e in (
                {"type": "content_block_start", "index": i, "content_block": block},
                {"type": "content_block_stop", "index": i},
            )
        ]
    )


def whole_inputs() -> list[dict[str, Any]]:
    events = []
    for i in range(10):
        block = {"type": "tool_use", "id": f"toolu_{i}", "name": "f", "input": {"p": BIG}}
        events += [
            {"type": "content_block_start", "index": i, "content_block": block},
            {"type": "content_block_stop", "index": i},
        ]
    return anthropic(events, "tool_use")


# -------------------------------------------------------------------------------------- Gemini generate


def chunk(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if finish:
        cand["finishReason"] = finish
    return {"candidates": [cand], "responseId": "r1"}


def gemini(part: dict[str, Any]) -> list[dict[str, Any]]:
    return [*[chunk([part])] * 10, chunk([{"text": ""}], "STOP")]


# ---------------------------------------------------------------------------------------- Interactions

CREATED = {"interaction": {"id": "v1_x", "status": "in_progress"}, "event_type": "interaction.created"}


def completed(status: str) -> dict[str, Any]:
    usage = {"total_input_tokens": 1, "total_output_tokens": 2}
    return {
        "interaction": {"id": "v1_x", "status": status, "usage": usage},
        "event_type": "interaction.completed",
    }


def images() -> list[dict[str, Any]]:
    start = {"index": 0, "step": {"type": "model_output", "content": []}, "event_type": "step.start"}
    image = {
        "index": 0,
        "delta": {"type": "image", "data": BIG, "mime_type": "image/png"},
        "event_type": "step.delta",
    }
    return [CREATED, start, *[image] * 10, {"index": 0, "event_type": "step.stop"}, completed("completed")]


def signatures() -> list[dict[str, Any]]:
    events = [CREATED]
    for i in range(10):
        events += [
            {"index": i, "step": {"type": "thought"}, "event_type": "step.start"},
            {
                "index": i,
                "delta": {"type": "thought_signature", "signature": BIG},
                "event_type": "step.delta",
            },
            {"index": i, "event_type": "step.stop"},
        ]
    return [*events, completed("completed")]


def whole_arguments() -> list[dict[str, Any]]:
    events = [CREATED]
    for i in range(10):
        step = {"type": "function_call", "id": f"c{i}", "name": "f", "arguments": {"p": BIG}}
        events += [
            {"index": i, "step": step, "event_type": "step.start"},
            {"index": i, "event_type": "step.stop"},
        ]
    return [*events, completed("requires_action")]


BODY = StreamCaps(max_body_bytes=CAP)
ARGS = StreamCaps(max_response_bytes=CAP)

CASES = {
    "anthropic citations": ("anthropic-messages", citations(), BODY, Finish.FINAL_TEXT),
    "anthropic redacted thinking": ("anthropic-messages", redacted(), BODY, Finish.FINAL_TEXT),
    "anthropic whole tool inputs": ("anthropic-messages", whole_inputs(), ARGS, Finish.TOOL_PROPOSALS),
    "gemini inlineData": (
        "gemini-generate",
        gemini({"inlineData": {"mimeType": "image/png", "data": BIG}}),
        BODY,
        Finish.FINAL_TEXT,
    ),
    "gemini executableCode": (
        "gemini-generate",
        gemini({"executableCode": {"language": "PYTHON", "code": BIG}, "thoughtSignature": "s"}),
        BODY,
        None,  # code that awaits its result: read as a cut stream under the default caps
    ),
    "gemini call signatures": (
        "gemini-generate",
        gemini({"functionCall": {"name": "f", "args": {}}, "thoughtSignature": BIG}),
        BODY,
        Finish.TOOL_PROPOSALS,
    ),
    "interactions images": ("gemini-interactions", images(), BODY, Finish.FINAL_TEXT),
    "interactions signatures": ("gemini-interactions", signatures(), BODY, Finish.FINAL_TEXT),
    "interactions whole arguments": ("gemini-interactions", whole_arguments(), ARGS, Finish.TOOL_PROPOSALS),
}


@pytest.mark.parametrize("case", CASES)
def test_pieces_held_count_against_the_caps_as_they_come(case: str) -> None:
    api, events, caps, _ = CASES[case]
    for turn in read(api, events, caps):
        expected = "response_too_large" if caps is BODY else "arguments_too_large"
        assert (turn.finish, turn.reason) == (Finish.TRUNCATED, expected)
        assert turn.failure is not None and not turn.failure.retryable
        assert turn.failure.error_code == ("max_body_bytes" if caps is BODY else "max_response_bytes")
        assert not turn.calls


@pytest.mark.parametrize("case", CASES)
def test_the_same_streams_read_as_before_under_the_default_caps(case: str) -> None:
    api, events, _, finish = CASES[case]
    for turn in read(api, events, StreamCaps()):
        if finish is None:
            assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "stream_interrupted")
        else:
            assert turn.finish is finish
            assert turn.failure is None


def test_a_stream_stops_buffering_at_the_piece_that_goes_over() -> None:
    # The cap trips inside the stream, not at its end: the feed reports aborted, so a transport stops
    # reading there (what is not read is not held).
    for api, events, caps in [
        ("anthropic-messages", citations()[:-3], BODY),
        ("gemini-generate", gemini({"inlineData": {"mimeType": "image/png", "data": BIG}})[:-1], BODY),
        ("gemini-interactions", images()[:-2], BODY),
        ("anthropic-messages", whole_inputs()[:-2], ARGS),
        ("gemini-interactions", whole_arguments()[:-1], ARGS),
    ]:
        feed = StreamFeed(get(api).stream_assembler(caps))
        feed.feed("".join(f"data: {json.dumps(e)}\n\n" for e in events).encode())
        assert feed.aborted, api
