"""Review 9: nothing after a stream's terminal event changes the turn, however the bytes were chunked.

Issue 3 §4 and D1 (only an explicit completion is success; a stream's terminal event ends the turn),
and the assemblers' own ``complete`` docstrings: "The terminal event came: nothing after it changes
the turn, so a reader may stop". A live transport stops reading at the first chunk boundary after the
terminal event; ``callbound parse`` and ``ScriptedModel`` read on. The same bytes must give the same
turn either way: fed whole, one event per chunk, byte by byte, read "live" (stopping once
``complete``), or fed as decoded payloads (``ScriptedModel``'s event lists).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.errors import ProtocolViolation
from callbound.core.types import Finish, ModelTurn

ANTHROPIC = "anthropic-messages"
CHAT = "openai-chat"
GENERATE = "gemini-generate"
INTERACTIONS = "gemini-interactions"
RESPONSES = "openai-responses"

Event = dict[str, Any] | str


def event_bytes(events: list[Event]) -> list[bytes]:
    """One SSE event per item: compact JSON, as the APIs send it (so the fast paths are taken)."""
    out = []
    for e in events:
        data = e if isinstance(e, str) else json.dumps(e, separators=(",", ":"))
        out.append(f"data: {data}\n\n".encode())
    return out


def shape(turn: ModelTurn) -> tuple[Any, ...]:
    """Everything of a turn but the digest of the bytes read (a live reader reads fewer)."""
    return (
        turn.finish,
        turn.raw_stop_reason,
        turn.reason,
        turn.response_id,
        [(c.call_id, c.name, c.arguments_raw, c.arguments, c.arguments_error) for c in turn.calls],
        turn.text,
        turn.refusal,
        turn.usage,
        turn.continuation,
        turn.failure,
    )


def read_chunks(api: str, chunks: list[bytes], *, live: bool = False) -> ModelTurn:
    feed = StreamFeed(get(api).stream_assembler())
    for chunk in chunks:
        feed.feed(chunk)
        if live and (feed.complete or feed.aborted):
            return feed.finish()  # the transport's break: the rest is never read
    feed.close()
    return feed.finish()


def readings(api: str, events: list[Event], tail: bytes = b"") -> dict[str, tuple[Any, ...]]:
    """The turn of the same stream read every way a reader may read it."""
    parts = event_bytes(events)
    parts[-1] += tail
    raw = b"".join(parts)
    out = {
        "whole": shape(read_chunks(api, [raw])),
        "per event": shape(read_chunks(api, parts)),
        "per byte": shape(read_chunks(api, [raw[i : i + 1] for i in range(len(raw))])),
        "live per event": shape(read_chunks(api, parts, live=True)),
        "live per byte": shape(read_chunks(api, [raw[i : i + 1] for i in range(len(raw))], live=True)),
        "live whole": shape(read_chunks(api, [raw], live=True)),
    }
    if not tail:
        asm = get(api).stream_assembler()
        for event in events:  # ScriptedModel's list of payloads: feed() one by one, never stopping
            asm.feed(event)
        out["payloads"] = shape(asm.finish("0" * 64))
    return out


def same_everywhere(api: str, events: list[Event], tail: bytes = b"") -> tuple[Any, ...]:
    seen = readings(api, events, tail)
    first = seen["live per event"]
    for how, value in seen.items():
        assert value == first, f"{api}: read {how!r} gives another turn"
    return first


# ---- Responses --------------------------------------------------------------------------------------

MSG = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "done", "annotations": []}],
}
FC = {
    "type": "function_call",
    "id": "fc_X",
    "call_id": "call_X",
    "name": "f",
    "arguments": '{"a":7}',
    "status": "completed",
}
R_CREATED = {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}
R_TEXT = [
    {"type": "response.output_item.added", "output_index": 0, "item": MSG},
    {"type": "response.output_item.done", "output_index": 0, "item": MSG},
]
R_COMPLETED = {
    "type": "response.completed",
    "response": {
        "id": "resp_1",
        "status": "completed",
        "output": [MSG],
        "usage": {"input_tokens": 5, "output_tokens": 3},
    },
}
R_FAILED = {
    "type": "response.failed",
    "response": {"id": "resp_1", "status": "failed", "output": [], "error": {"code": "server_error"}},
}
R_CALL = [
    {"type": "response.output_item.added", "output_index": 1, "item": {**FC, "arguments": ""}},
    {
        "type": "response.function_call_arguments.delta",
        "output_index": 1,
        "item_id": "fc_X",
        "delta": '{"a":7}',
    },
    {"type": "response.output_item.done", "output_index": 1, "item": FC},
]
R_ERROR = {"type": "error", "code": "server_error", "message": "boom"}


def test_responses_failed_then_completed_stays_failed() -> None:
    turn = same_everywhere(RESPONSES, [R_CREATED, *R_TEXT, R_FAILED, R_COMPLETED])
    assert turn[0] is Finish.API_FAILURE


def test_responses_call_item_after_completed_never_runs() -> None:
    turn = same_everywhere(RESPONSES, [R_CREATED, *R_TEXT, R_COMPLETED, *R_CALL])
    assert turn[0] is Finish.FINAL_TEXT and turn[4] == []


def test_responses_error_event_after_completed_changes_nothing() -> None:
    turn = same_everywhere(RESPONSES, [R_CREATED, *R_TEXT, R_COMPLETED, R_ERROR])
    assert turn[0] is Finish.FINAL_TEXT and turn[7].input_tokens == 5


def test_responses_second_terminal_with_a_call_is_ignored() -> None:
    second = {"type": "response.completed", "response": {**R_COMPLETED["response"], "output": [MSG, FC]}}
    turn = same_everywhere(RESPONSES, [R_CREATED, *R_TEXT, R_COMPLETED, second])
    assert turn[0] is Finish.FINAL_TEXT and turn[4] == []


# ---- Anthropic --------------------------------------------------------------------------------------

A_START = {
    "type": "message_start",
    "message": {
        "id": "msg_S",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 300, "output_tokens": 1},
    },
}
A_TEXT = [
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Checking."}},
    {"type": "content_block_stop", "index": 0},
]
A_TOOL = [
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "toolu_S", "name": "f", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '{"a":1}'},
    },
    {"type": "content_block_stop", "index": 1},
]


def a_delta(stop: str, output_tokens: int = 60) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop},
        "usage": {"output_tokens": output_tokens},
    }


A_STOP = {"type": "message_stop"}


def test_anthropic_message_delta_after_message_stop_is_ignored() -> None:
    events = [A_START, *A_TEXT, a_delta("max_tokens"), A_STOP, a_delta("end_turn", 99)]
    turn = same_everywhere(ANTHROPIC, events)
    assert turn[0] is Finish.TRUNCATED and turn[1] == "max_tokens" and turn[7].output_tokens == 60


def test_anthropic_tool_use_after_message_stop_never_runs() -> None:
    events = [A_START, *A_TEXT, a_delta("end_turn"), A_STOP, *A_TOOL, a_delta("tool_use"), A_STOP]
    turn = same_everywhere(ANTHROPIC, events)
    assert turn[0] is Finish.FINAL_TEXT and turn[4] == []


def test_anthropic_error_after_message_stop_changes_nothing() -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    turn = same_everywhere(ANTHROPIC, [A_START, *A_TEXT, a_delta("end_turn"), A_STOP, error])
    assert turn[0] is Finish.FINAL_TEXT


# ---- Gemini Interactions ----------------------------------------------------------------------------

I_CREATED = {"event_type": "interaction.created", "interaction": {"id": "v1_X", "status": "in_progress"}}
I_TEXT = [
    {"event_type": "step.start", "index": 0, "step": {"type": "model_output", "content": []}},
    {"event_type": "step.delta", "index": 0, "delta": {"type": "text", "text": "hi"}},
    {"event_type": "step.stop", "index": 0},
]
I_CALL = [
    {
        "event_type": "step.start",
        "index": 1,
        "step": {"type": "function_call", "id": "c1", "name": "f", "arguments": {}},
    },
    {"event_type": "step.delta", "index": 1, "delta": {"arguments": '{"a":1}', "type": "arguments_delta"}},
    {"event_type": "step.stop", "index": 1},
]
USAGE = {"total_input_tokens": 5, "total_output_tokens": 3}


def i_done(status: str) -> dict[str, Any]:
    return {
        "event_type": "interaction.completed",
        "interaction": {"id": "v1_X", "status": status, "usage": USAGE},
    }


def test_interactions_failed_then_completed_stays_failed() -> None:
    turn = same_everywhere(INTERACTIONS, [I_CREATED, *I_TEXT, i_done("failed"), i_done("completed")])
    assert turn[0] is Finish.API_FAILURE


def test_interactions_call_after_completed_never_runs() -> None:
    events = [I_CREATED, *I_TEXT, i_done("completed"), *I_CALL, i_done("requires_action")]
    turn = same_everywhere(INTERACTIONS, events)
    assert turn[0] is Finish.FINAL_TEXT and turn[4] == []


def test_interactions_error_after_completed_changes_nothing() -> None:
    error = {"event_type": "error", "error": {"code": "internal", "message": "x"}}
    turn = same_everywhere(INTERACTIONS, [I_CREATED, *I_TEXT, i_done("completed"), error])
    assert turn[0] is Finish.FINAL_TEXT


# ---- Chat (already ignored everything after [DONE]) and Gemini generate (no terminal event) -------


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


C_CALL = chunk(
    {
        "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
        ]
    }
)
C_ARGS = chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":1}'}}]})


def test_chat_nothing_after_done_counts() -> None:
    events: list[Event] = [
        chunk({"role": "assistant", "content": "hi"}),
        chunk({}, "stop"),
        "[DONE]",
        C_CALL,
        C_ARGS,
    ]
    events += [chunk({}, "tool_calls"), "[DONE]"]
    turn = same_everywhere(CHAT, events)
    assert turn[0] is Finish.FINAL_TEXT and turn[4] == []


def test_gemini_generate_reads_to_the_end_the_same_way_however_chunked() -> None:
    usage = {"promptTokenCount": 7, "candidatesTokenCount": 2, "totalTokenCount": 9}
    events: list[Event] = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "he"}]}}], "responseId": "g1"},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "llo"}]}, "finishReason": "STOP"}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}}], "usageMetadata": usage},
    ]
    turn = same_everywhere(GENERATE, events)
    assert turn[0] is Finish.FINAL_TEXT and turn[5] == "hello" and turn[7].input_tokens == 7


# ---- garbage after the terminal event ---------------------------------------------------------------

TERMINATED: list[tuple[str, list[Event]]] = [
    (RESPONSES, [R_CREATED, *R_TEXT, R_COMPLETED]),
    (ANTHROPIC, [A_START, *A_TEXT, a_delta("end_turn"), A_STOP]),
    (INTERACTIONS, [I_CREATED, *I_TEXT, i_done("completed")]),
    (CHAT, [chunk({"role": "assistant", "content": "hi"}), chunk({}, "stop"), "[DONE]"]),
]


@pytest.mark.parametrize(("api", "events"), TERMINATED, ids=[api for api, _ in TERMINATED])
@pytest.mark.parametrize(
    "tail",
    [b"data: {not json\n\n", b"data: \xff\xfe\n\n", b"\xc3"],
    ids=["non-JSON event", "invalid UTF-8", "cut character"],
)
def test_garbage_after_the_terminal_event_is_never_read(api: str, events: list[Event], tail: bytes) -> None:
    """Bytes after the terminal event cannot fail a finished turn: the reader that stops there never
    sees them, so no reader may (StreamFeed raises ``ProtocolViolation`` only for what comes before)."""
    turn = same_everywhere(api, events, tail)
    assert turn[0] is Finish.FINAL_TEXT


@pytest.mark.parametrize(("api", "events"), TERMINATED, ids=[api for api, _ in TERMINATED])
def test_an_event_too_large_after_the_terminal_event_is_never_read(api: str, events: list[Event]) -> None:
    """An endless event after the terminal one trips no byte cap (StreamCaps.max_body_bytes): a reader
    stopping at the terminal event never holds it, so neither may one that got both in one chunk."""
    parts = event_bytes(events)
    limit = max(len(p) for p in parts)
    huge = b"data: " + b"x" * (2 * limit)
    turns = []
    for chunks in ([b"".join(parts) + huge], [*parts, huge]):
        feed = StreamFeed(get(api).stream_assembler(), max_event=limit)
        for c in chunks:
            feed.feed(c)
        feed.close()
        turns.append(feed.finish())
    assert shape(turns[0]) == shape(turns[1])
    assert turns[0].finish is Finish.FINAL_TEXT and not feed.too_large


# ---- a failure mid-stream: the events before it are read however the bytes were chunked ------------

GEMINI_TEXT: list[Event] = [
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "he"}]}}], "responseId": "g1"},
    {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "llo"}]}}],
        "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 2},
    },
]


def test_an_event_too_large_mid_stream_trips_the_cap_after_the_events_before_it() -> None:
    """StreamCaps.max_body_bytes: TRUNCATED(response_too_large), with what was read before the event
    that grew too large (its usage counts, D27), whether that event shared a chunk with them or not."""
    parts = event_bytes(GEMINI_TEXT)
    limit = max(len(p) for p in parts)
    huge = b"data: " + b"x" * (2 * limit)
    raw = b"".join(parts) + huge
    shapes = []
    for chunks in ([raw], [*parts, huge], [raw[i : i + 1] for i in range(len(raw))]):
        feed = StreamFeed(get(GENERATE).stream_assembler(), max_event=limit)
        for c in chunks:
            feed.feed(c)
        feed.close()
        turn = feed.finish()
        assert feed.too_large and (turn.finish, turn.reason) == (Finish.TRUNCATED, "response_too_large")
        shapes.append(shape(turn))
    assert shapes[0] == shapes[1] == shapes[2]
    assert shapes[0][7].input_tokens == 7


def test_bytes_that_are_not_utf8_mid_stream_fail_after_the_events_before_them() -> None:
    """StreamFeed's contract: ``ProtocolViolation`` for input that is not UTF-8, "the events before it
    have been fed", also when they came in the same chunk as the bad bytes."""
    parts = event_bytes(GEMINI_TEXT)
    raw = b"".join(parts) + b"data: \xff\n\n"
    fed = []
    for chunks in ([raw], [*parts, b"data: \xff\n\n"], [raw[i : i + 1] for i in range(len(raw))]):
        feed = StreamFeed(get(GENERATE).stream_assembler())
        with pytest.raises(ProtocolViolation):
            for c in chunks:
                feed.feed(c)
        fed.append(feed.events)
    assert fed == [2, 2, 2]
