"""Every stop reason, finish reason and status the installed SDKs list reads the same streamed as plain
(review round 22, d).

Review 20 (b) checks each SDK value against its row of docs/stop-reasons.md on a plain body. A stream
reaches the finish through another module (``*_stream.py``, the assembler), so a value mapped in one and
forgotten in the other would end a streamed turn in a fallback by accident. Here the same body is sent
as the API streams it (the events the SDK types name, in their order) and read through ``StreamFeed``:
finish, raw stop reason, reason, calls, text and refusal must be the plain body's, for each value with
and without calls. Values a stream cannot end on (a Responses ``queued``, ``in_progress`` or
``cancelled`` status: no terminal event carries them) are left out. Skipped, saying so, when an SDK is
not installed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.core.types import ModelTurn
from tests.adapters import streaming
from tests.docs.stop_reason_bodies import BUILDERS

sdk = pytest.importorskip(
    "tests.adapters.test_review20_b_sdk_stop_reasons",
    reason="the openai, anthropic and google-genai SDKs (the extras) are needed to list their values",
)


def _sse(events: list[Any]) -> bytes:
    return "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events).encode()


def _responses(body: dict[str, Any]) -> bytes | None:
    if body["status"] not in ("completed", "incomplete", "failed"):
        return None  # no terminal event carries it
    events: list[Any] = [
        {"type": "response.created", "response": {**body, "status": "in_progress", "output": []}}
    ]
    for i, item in enumerate(body["output"]):
        events.append({"type": "response.output_item.added", "output_index": i, "item": item})
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
    events.append({"type": f"response.{body['status']}", "response": body})
    return _sse(events)


def _chat(body: dict[str, Any]) -> bytes:
    choice = body["choices"][0]
    msg = choice["message"]
    base = {"id": body["id"], "object": "chat.completion.chunk", "model": body["model"]}
    delta: dict[str, Any] = {"role": "assistant", "content": msg.get("content")}
    if msg.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(msg["tool_calls"])]
    if msg.get("refusal"):
        delta["refusal"] = msg["refusal"]
    events: list[Any] = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
        {**base, "choices": [], "usage": body["usage"]},
        "[DONE]",
    ]
    return _sse(events)


def _anthropic(body: dict[str, Any]) -> bytes:
    start = {**body, "content": [], "stop_reason": None}
    events: list[Any] = [{"type": "message_start", "message": start}]
    for i, block in enumerate(body["content"]):
        if block["type"] == "text":
            events.append(
                {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}
            )
            delta: dict[str, Any] = {"type": "text_delta", "text": block["text"]}
        else:
            events.append(
                {"type": "content_block_start", "index": i, "content_block": {**block, "input": {}}}
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append({"type": "content_block_delta", "index": i, "delta": delta})
        events.append({"type": "content_block_stop", "index": i})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": body["stop_reason"]},
            "usage": {"output_tokens": 3},
        }
    )
    events.append({"type": "message_stop"})
    return _sse(events)


def _gemini(body: dict[str, Any]) -> bytes:
    return _sse([body])  # a streamGenerateContent chunk is a GenerateContentResponse


def _interactions(body: dict[str, Any]) -> bytes:
    events: list[Any] = [
        {"event_type": "interaction.created", "interaction": {"id": body["id"], "status": "in_progress"}}
    ]
    for i, step in enumerate(body["steps"]):
        if step["type"] == "function_call":
            events.append({"event_type": "step.start", "index": i, "step": {**step, "arguments": {}}})
            delta = {"type": "arguments_delta", "arguments": json.dumps(step["arguments"])}
        else:
            events.append(
                {"event_type": "step.start", "index": i, "step": {"type": step["type"], "content": []}}
            )
            delta = {"type": "text", "text": step["content"][0]["text"]}
        events.append({"event_type": "step.delta", "index": i, "delta": delta})
        events.append({"event_type": "step.stop", "index": i})
    final = {k: v for k, v in body.items() if k != "steps"}
    events.append({"event_type": "interaction.completed", "interaction": final})
    return _sse(events)


STREAMERS = {
    "openai-responses": _responses,
    "openai-chat": _chat,
    "anthropic-messages": _anthropic,
    "gemini-generate": _gemini,
    "gemini-interactions": _interactions,
}


def _essence(turn: ModelTurn) -> dict[str, Any]:
    return {
        "finish": turn.finish,
        "raw_stop_reason": turn.raw_stop_reason,
        "reason": turn.reason,
        "retryable": turn.failure.retryable if turn.failure else None,
        "calls": [(c.call_id, c.name, c.arguments, c.arguments_error) for c in turn.calls],
        "text": turn.text,
        "refusal": turn.refusal,
    }


beta = pytest.importorskip("anthropic.types.beta.beta_stop_reason")
# the beta Messages API adds compaction (pause_after_compaction), which the adapter reads too
BETA = [v for v in sdk.literals(beta.BetaStopReason) if v not in sdk.SDK_VALUES["anthropic-messages"]]
CASES = [*sdk.CASES, *[("anthropic-messages", v) for v in BETA]]


def test_the_beta_stop_reasons_have_their_rows() -> None:
    assert BETA == ["compaction"], "a new beta stop reason: give it its row in docs/stop-reasons.md"
    for value in BETA:
        sdk.test_every_sdk_value_has_its_row("anthropic-messages", value)
        for variant in ("", "+calls"):
            sdk.test_only_explicit_completions_complete_or_propose_calls("anthropic-messages", value, variant)


@pytest.mark.parametrize(("api", "value"), CASES, ids=[f"{a}:{v}" for a, v in CASES])
@pytest.mark.parametrize("variant", ["", "+calls"])
def test_every_sdk_value_reads_the_same_streamed(api: str, value: str, variant: str) -> None:
    body = BUILDERS[api](value + variant)
    raw = STREAMERS[api](body)
    if raw is None:
        pytest.skip(f"{api} {value!r}: no stream ends on it")
    adapter = get(api)
    plain = adapter.parse_response(json.dumps(body).encode())
    streamed, _ = streaming.fed(adapter, raw)
    assert _essence(streamed) == _essence(plain)


@pytest.mark.parametrize("block", sdk.BLOCKED)
def test_every_blocked_prompt_reads_the_same_streamed(block: str) -> None:
    body = BUILDERS["gemini-generate"](f"{block}+blocked")
    adapter = get("gemini-generate")
    plain = adapter.parse_response(json.dumps(body).encode())
    streamed, _ = streaming.fed(adapter, _gemini(body))
    assert _essence(streamed) == _essence(plain)
