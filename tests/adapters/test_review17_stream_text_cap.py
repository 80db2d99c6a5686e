"""Review round 17, r4 F2: a streamed response's text is held to ``StreamCaps.max_body_bytes``.

Before, 100 MB of text deltas, properly ended, finished as a final answer holding 99 MB of text, while
the same text in one plain body was cut at ``max_body_bytes``. Now every assembler counts the text it
holds besides tool arguments (answer text, refusal, reasoning and thought summaries) across events and,
past ``max_body_bytes``, stops buffering and ends TRUNCATED(response_too_large) with no calls, the turn
a plain body over the cap gives. Streams are read as a transport reads them (``streaming.fed``: bytes
through ``StreamFeed``, fast paths included). Each API: a stream over a 64 KiB cap is cut, the same
stream under it completes with its whole text.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.base import StreamCaps
from callbound.core.types import Finish, ModelTurn
from tests.adapters import streaming

CAPS = StreamCaps(max_body_bytes=64 * 1024)
PIECE = "y" * 16_000
OVER = 13  # ~208 KB of text
UNDER = 4  # 64 000 bytes: just under the 65 536 of the cap


def sse(*events: dict[str, Any] | str, named: bool = False) -> bytes:
    """Compact events, as the APIs send them (so the fast paths see the shapes they take)."""
    out = []
    for event in events:
        data = event if isinstance(event, str) else json.dumps(event, separators=(",", ":"))
        name = event["type"] if named and isinstance(event, dict) else None
        out.append((f"event: {name}\n" if name else "") + f"data: {data}\n\n")
    return "".join(out).encode()


def assert_cut(turn: ModelTurn) -> None:
    assert (turn.finish, turn.reason, turn.calls) == (Finish.TRUNCATED, "response_too_large", ())
    assert turn.failure is not None
    assert (turn.failure.kind, turn.failure.error_code, turn.failure.retryable) == (
        "byte_cap",
        "max_body_bytes",
        False,
    )


# --- OpenAI Chat Completions -------------------------------------------------------------------


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _chat(field: str, n: int, call: bool = False) -> bytes:
    events: list[dict[str, Any] | str] = [_chunk({"role": "assistant"})]
    events += [_chunk({field: PIECE}) for _ in range(n)]
    if call:
        fn = {"name": "f", "arguments": "{}"}
        events.append(
            _chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": fn}]})
        )
    events += [_chunk({}, "tool_calls" if call else "stop"), "[DONE]"]
    return sse(*events)


@pytest.mark.parametrize("field", ["content", "refusal", "reasoning_content"])
def test_chat_text_past_the_body_cap_is_cut(field: str) -> None:
    turn, _ = streaming.fed(get("openai-chat"), _chat(field, OVER, call=True), CAPS)
    assert_cut(turn)


def test_chat_reasoning_details_past_the_body_cap_are_cut() -> None:
    detail = {"type": "reasoning.text", "index": 0, "text": PIECE}
    events: list[dict[str, Any] | str] = [_chunk({"reasoning_details": [detail]}) for _ in range(OVER)]
    turn, _ = streaming.fed(get("openai-chat"), sse(*events, _chunk({}, "stop"), "[DONE]"), CAPS)
    assert_cut(turn)


def test_chat_content_parts_past_the_body_cap_are_cut() -> None:
    part = [{"type": "text", "text": PIECE}]
    events: list[dict[str, Any] | str] = [_chunk({"content": part}) for _ in range(OVER)]
    turn, _ = streaming.fed(get("openai-chat"), sse(*events, _chunk({}, "stop"), "[DONE]"), CAPS)
    assert_cut(turn)


def test_chat_text_under_the_body_cap_completes() -> None:
    turn, _ = streaming.fed(get("openai-chat"), _chat("content", UNDER), CAPS)
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, PIECE * UNDER)


# --- Anthropic Messages ------------------------------------------------------------------------


def _anthropic(kind: str, n: int, call: bool = False) -> bytes:
    field = {"text": "text", "thinking": "thinking"}[kind]
    usage = {"input_tokens": 5, "output_tokens": 1}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": []}
    events: list[dict[str, Any] | str] = [
        {"type": "message_start", "message": {**message, "stop_reason": None, "usage": usage}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": kind, field: ""}},
    ]
    delta = {"type": f"{kind}_delta", field: PIECE}
    events += [{"type": "content_block_delta", "index": 0, "delta": delta} for _ in range(n)]
    events.append({"type": "content_block_stop", "index": 0})
    if call:
        block = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
        events += [
            {"type": "content_block_start", "index": 1, "content_block": block},
            {"type": "content_block_stop", "index": 1},
        ]
    stop = "tool_use" if call else "end_turn"
    events += [
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    return sse(*events, named=True)


@pytest.mark.parametrize("kind", ["text", "thinking"])
def test_anthropic_text_past_the_body_cap_is_cut(kind: str) -> None:
    turn, _ = streaming.fed(get("anthropic-messages"), _anthropic(kind, OVER, call=True), CAPS)
    assert_cut(turn)
    assert turn.usage.input_tokens == 5  # the usage read so far still counts (D27)


def test_anthropic_text_under_the_body_cap_completes() -> None:
    turn, _ = streaming.fed(get("anthropic-messages"), _anthropic("text", UNDER), CAPS)
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, PIECE * UNDER)


# --- OpenAI Responses --------------------------------------------------------------------------


def _responses(kind: str, n: int) -> bytes:
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}
    delta = {"output_index": 0, "content_index": 0, "item_id": "msg_1", "delta": PIECE}
    part = {"type": "output_text", "text": PIECE * n, "annotations": []}
    if kind == "refusal":
        part = {"type": "refusal", "refusal": PIECE * n}
    done = {**item, "status": "completed", "content": [part]}
    resp = {"id": "resp_1", "object": "response", "model": "m", "status": "completed", "output": [done]}
    return sse(
        {"type": "response.created", "response": {"id": "resp_1", "model": "m", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        *({"type": f"response.{kind}.delta", **delta} for _ in range(n)),
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": resp},
    )


@pytest.mark.parametrize("kind", ["output_text", "refusal"])
def test_responses_text_past_the_body_cap_is_cut(kind: str) -> None:
    turn, _ = streaming.fed(get("openai-responses"), _responses(kind, OVER), CAPS)
    assert_cut(turn)


def test_responses_text_under_the_body_cap_completes() -> None:
    turn, _ = streaming.fed(get("openai-responses"), _responses("output_text", UNDER), CAPS)
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, PIECE * UNDER)


# --- Gemini generateContent --------------------------------------------------------------------


def _gemini(thought: bool, n: int) -> bytes:
    part: dict[str, Any] = {"text": PIECE, **({"thought": True} if thought else {})}

    def chunk(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
        cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            cand["finishReason"] = finish
        return {"candidates": [cand], "modelVersion": "m", "responseId": "r1"}

    return sse(*(chunk([part]) for _ in range(n)), chunk([{"text": ""}], "STOP"))


@pytest.mark.parametrize("thought", [False, True])
def test_gemini_text_past_the_body_cap_is_cut(thought: bool) -> None:
    turn, _ = streaming.fed(get("gemini-generate"), _gemini(thought, OVER), CAPS)
    assert_cut(turn)


def test_gemini_text_under_the_body_cap_completes() -> None:
    turn, _ = streaming.fed(get("gemini-generate"), _gemini(False, UNDER), CAPS)
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, PIECE * UNDER)


# --- Gemini Interactions -----------------------------------------------------------------------


def _interactions(thought: bool, n: int) -> bytes:
    if thought:
        step: dict[str, Any] = {"type": "thought"}
        delta: dict[str, Any] = {"type": "thought_summary", "content": {"type": "text", "text": PIECE}}
    else:
        step, delta = {"type": "model_output", "content": []}, {"type": "text", "text": PIECE}
    return sse(
        {"event_type": "interaction.created", "interaction": {"id": "v1_e", "status": "in_progress"}},
        {"event_type": "step.start", "index": 0, "step": step},
        *({"event_type": "step.delta", "index": 0, "delta": delta} for _ in range(n)),
        {"event_type": "step.stop", "index": 0},
        {"event_type": "interaction.completed", "interaction": {"id": "v1_e", "status": "completed"}},
    )


@pytest.mark.parametrize("thought", [False, True])
def test_interactions_text_past_the_body_cap_is_cut(thought: bool) -> None:
    turn, _ = streaming.fed(get("gemini-interactions"), _interactions(thought, OVER), CAPS)
    assert_cut(turn)


def test_interactions_text_under_the_body_cap_completes() -> None:
    turn, _ = streaming.fed(get("gemini-interactions"), _interactions(False, UNDER), CAPS)
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, PIECE * UNDER)
