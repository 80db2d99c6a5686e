"""Streaming rules an acceptance pass found broken (issue 3 §4, §5): byte caps on arguments that arrive
whole inside a stream, and Chat recordings in JSON-lines form read by ``callbound parse``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.base import StreamCaps
from callbound.cli.parse import parse_input
from callbound.core.types import Finish
from tests.adapters import streaming

CAPS = StreamCaps(max_call_bytes=1024, max_response_bytes=4096)
BIG = {"text": "x" * 2000}  # 2 KB of arguments against a 1 KiB call cap


def sse(*events: dict[str, Any], named: bool = False) -> bytes:
    out = []
    for ev in events:
        head = f"event: {ev.get('type', ev.get('event_type'))}\n" if named else ""
        out.append(f"{head}data: {json.dumps(ev)}\n\n")
    return "".join(out).encode()


def _anthropic(start_input: dict[str, Any], *, in_message_start: bool) -> bytes:
    block = {"type": "tool_use", "id": "toolu_1", "name": "note", "input": start_input}
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [block] if in_message_start else [],
        "stop_reason": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": message}]
    if not in_message_start:
        events += [
            {"type": "content_block_start", "index": 0, "content_block": block},
            {"type": "content_block_stop", "index": 0},
        ]
    events += [
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    return sse(*events, named=True)


def test_anthropic_input_whole_in_content_block_start_is_capped() -> None:
    turn, _ = streaming.fed(get("anthropic-messages"), _anthropic(BIG, in_message_start=False), CAPS)
    assert (turn.finish, turn.reason, turn.calls) == (Finish.TRUNCATED, "arguments_too_large", ())


def test_anthropic_input_whole_in_message_start_is_capped() -> None:
    turn, _ = streaming.fed(get("anthropic-messages"), _anthropic(BIG, in_message_start=True), CAPS)
    assert (turn.finish, turn.reason, turn.calls) == (Finish.TRUNCATED, "arguments_too_large", ())


def test_anthropic_input_under_the_cap_still_runs() -> None:
    turn, _ = streaming.fed(
        get("anthropic-messages"), _anthropic({"text": "ok"}, in_message_start=False), CAPS
    )
    assert turn.finish is Finish.TOOL_PROPOSALS and turn.calls[0].arguments == {"text": "ok"}


def test_interactions_arguments_whole_in_step_start_are_capped() -> None:
    iid = "v1_acceptance"
    raw = sse(
        {"interaction": {"id": iid, "status": "in_progress"}, "event_type": "interaction.created"},
        {
            "index": 0,
            "step": {"id": "c1", "type": "function_call", "name": "note", "arguments": BIG},
            "event_type": "step.start",
        },
        {"index": 0, "event_type": "step.stop"},
        {"interaction": {"id": iid, "status": "requires_action"}, "event_type": "interaction.completed"},
    )
    turn, _ = streaming.fed(get("gemini-interactions"), raw, CAPS)
    assert (turn.finish, turn.reason, turn.calls) == (Finish.TRUNCATED, "arguments_too_large", ())


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-x",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def test_parse_reads_a_complete_chat_recording_in_json_lines_form() -> None:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    lines = [_chat_chunk({"role": "assistant", "tool_calls": [call]}), _chat_chunk({}, "tool_calls")]
    out = parse_input("openai-chat", "\n".join(json.dumps(x) for x in lines).encode())
    assert out["finish"] == "TOOL_PROPOSALS"
    # no finish_reason: the supplied end marker never makes it a success (D1)
    cut = parse_input("openai-chat", json.dumps(lines[0]).encode() + b"\n")
    assert cut["finish"] not in ("TOOL_PROPOSALS", "FINAL_TEXT")


# ---- a finished stream is used at its terminal event, however long the connection stays open -----


def _finished_streams() -> list[tuple[str, bytes]]:
    chat_call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    chat = (
        b"".join(
            f"data: {json.dumps(c)}\n\n".encode()
            for c in (
                _chat_chunk({"role": "assistant", "tool_calls": [chat_call]}),
                _chat_chunk({}, "tool_calls"),
            )
        )
        + b"data: [DONE]\n\n"
    )
    fc = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "f",
        "arguments": "{}",
        "status": "completed",
    }
    responses = sse(
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**fc, "arguments": "", "status": "in_progress"},
        },
        {"type": "response.output_item.done", "output_index": 0, "item": fc},
        {"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": [fc]}},
        named=True,
    )
    return [
        ("openai-chat", chat),
        ("openai-responses", responses),
        ("anthropic-messages", _anthropic({"a": 1}, in_message_start=False)),
    ]


@pytest.mark.parametrize(("api", "raw"), _finished_streams(), ids=lambda v: v if isinstance(v, str) else "")
async def test_a_stream_left_open_after_its_terminal_event_is_used_at_once(api: str, raw: bytes) -> None:
    from callbound.transports import feed_stream

    async def chunks() -> AsyncIterator[bytes]:
        yield raw
        await asyncio.sleep(3600)  # the server keeps the connection open and sends nothing more
        yield b""

    turn = await asyncio.wait_for(feed_stream(get(api), chunks(), model=None, on_progress=None), timeout=5)
    assert turn.finish is Finish.TOOL_PROPOSALS, turn
