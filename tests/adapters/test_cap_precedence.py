"""Byte caps apply only to a turn whose calls would run (D1, D31).

A refusal wins over everything else in its turn (D31), a failed response keeps its failure (and stays
retryable where its status says so, D26), and a length stop keeps its reason: an oversized call in such
a turn does not turn it into TRUNCATED(arguments_too_large). A turn of runnable calls over a cap is still
TRUNCATED with no call (the control case). The Responses stream's check of its terminal snapshot follows
the same rule as the plain body (``base.capped``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.adapters.base import StreamCaps, capped
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish
from callbound.testing import FakeClock, ScriptedModel, Stream

CAPS = StreamCaps(max_call_bytes=50)
BIG = {"location": "x" * 100}  # 115 bytes of arguments: over CAPS.max_call_bytes
BIG_TEXT = json.dumps(BIG, separators=(",", ":"))


def _chat(finish_reason: str) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": "getWeather", "arguments": BIG_TEXT}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
    }


def _anthropic(stop_reason: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "stop_reason": stop_reason,
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "getWeather", "input": BIG}],
        "usage": {"input_tokens": 3, "output_tokens": 4},
    }


def _gemini(finish_reason: str) -> dict[str, Any]:
    part = {"functionCall": {"name": "getWeather", "args": BIG}}
    return {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": finish_reason}],
        "modelVersion": "gemini-x",
        "responseId": "r1",
    }


def _interactions(status: str) -> dict[str, Any]:
    step = {"type": "function_call", "id": "f1", "name": "getWeather", "arguments": BIG}
    return {"id": "v1_1", "object": "interaction", "status": status, "model": "gemini-x", "steps": [step]}


_REFUSAL_MESSAGE = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "refusal", "refusal": "I can't help with that."}],
}


def _responses(status: str, *, refusal: bool = False, **extra: Any) -> dict[str, Any]:
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "getWeather",
        "arguments": BIG_TEXT,
        "status": "completed",
    }
    output = [_REFUSAL_MESSAGE, call] if refusal else [call]
    usage = {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12}
    return {"id": "resp_1", "object": "response", "status": status, "model": "gpt-x", "output": output,
            "usage": usage, **extra}  # fmt: skip


_FAILED = {"code": "server_error", "message": "The server had an error."}

# (api, body, expected finish, expected reason) of turns whose calls never run
NOT_RUNNABLE = [
    pytest.param("openai-chat", _chat("content_filter"), Finish.REFUSAL, "content_filter", id="chat-refusal"),
    pytest.param("openai-chat", _chat("length"), Finish.TRUNCATED, "max_tokens", id="chat-length"),
    pytest.param(
        "anthropic-messages", _anthropic("refusal"), Finish.REFUSAL, "refusal", id="anthropic-refusal"
    ),
    pytest.param(
        "anthropic-messages",
        _anthropic("max_tokens"),
        Finish.TRUNCATED,
        "max_tokens",
        id="anthropic-max-tokens",
    ),
    pytest.param("gemini-generate", _gemini("SAFETY"), Finish.REFUSAL, "safety", id="gemini-safety"),
    pytest.param(
        "gemini-generate",
        _gemini("MALFORMED_FUNCTION_CALL"),
        Finish.API_FAILURE,
        "malformed_function_call",
        id="gemini-malformed",
    ),
    pytest.param(
        "gemini-interactions",
        _interactions("incomplete"),
        Finish.TRUNCATED,
        "incomplete",
        id="interactions-incomplete",
    ),
    pytest.param(
        "gemini-interactions",
        _interactions("failed"),
        Finish.API_FAILURE,
        "api_error",
        id="interactions-failed",
    ),
    pytest.param(
        "openai-responses",
        _responses("completed", refusal=True),
        Finish.REFUSAL,
        "refusal",
        id="responses-refusal",
    ),
    pytest.param(
        "openai-responses",
        _responses("failed", error=_FAILED),
        Finish.API_FAILURE,
        "api_error",
        id="responses-failed",
    ),
    pytest.param(
        "openai-responses",
        _responses("incomplete", incomplete_details={"reason": "max_output_tokens"}),
        Finish.TRUNCATED,
        "max_tokens",
        id="responses-incomplete",
    ),
]

RUNNABLE = [
    pytest.param("openai-chat", _chat("tool_calls"), id="chat"),
    pytest.param("anthropic-messages", _anthropic("tool_use"), id="anthropic"),
    pytest.param("gemini-generate", _gemini("STOP"), id="gemini"),
    pytest.param("gemini-interactions", _interactions("requires_action"), id="interactions"),
    pytest.param("openai-responses", _responses("completed"), id="responses"),
]


@pytest.mark.parametrize(("api", "body", "finish", "reason"), NOT_RUNNABLE)
def test_a_turn_whose_calls_never_run_keeps_its_finish_over_a_cap(
    api: str, body: dict[str, Any], finish: Finish, reason: str
) -> None:
    plain = get(api).parse_response(json.dumps(body))
    assert (plain.finish, plain.reason) == (finish, reason)
    assert capped(plain, CAPS) == plain


@pytest.mark.parametrize(("api", "body"), RUNNABLE)
def test_runnable_calls_over_a_cap_are_truncated(api: str, body: dict[str, Any]) -> None:
    plain = get(api).parse_response(json.dumps(body))
    assert plain.finish is Finish.TOOL_PROPOSALS
    turn = capped(plain, CAPS)
    assert (turn.finish, turn.reason, turn.calls) == (Finish.TRUNCATED, "arguments_too_large", ())
    assert turn.failure is not None and turn.failure.error_code == "max_call_bytes"


def _responses_stream(body: dict[str, Any]) -> bytes:
    """A stream whose only items are in its terminal snapshot (no item or argument events)."""
    terminal = {"completed": "response.completed", "failed": "response.failed"}.get(body["status"])
    created = {"id": body["id"], "status": "in_progress", "output": []}
    events = [
        {"type": "response.created", "response": created},
        {"type": terminal or "response.incomplete", "response": body},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(_responses("completed", refusal=True), id="refusal"),
        pytest.param(_responses("failed", error=_FAILED), id="failed"),
        pytest.param(
            _responses("incomplete", incomplete_details={"reason": "max_output_tokens"}), id="incomplete"
        ),
        pytest.param(_responses("completed"), id="runnable"),
    ],
)
def test_responses_terminal_snapshot_is_capped_as_the_plain_body_is(body: dict[str, Any]) -> None:
    feed = StreamFeed(get("openai-responses").stream_assembler(CAPS), max_event=CAPS.max_body_bytes)
    feed.feed(_responses_stream(body))
    feed.close()
    streamed = feed.finish()
    plain = capped(get("openai-responses").parse_response(json.dumps(body)), CAPS)
    for field in ("finish", "reason", "raw_stop_reason", "failure", "refusal", "usage", "response_id"):
        assert getattr(streamed, field) == getattr(plain, field), field
    assert [c.call_id for c in streamed.calls] == [c.call_id for c in plain.calls]


class _Weather(BaseModel):
    location: str


def _registry() -> cb.Registry:
    def handler(args: _Weather, ctx: cb.CallContext) -> dict[str, Any]:
        raise AssertionError("a call of a refused or failed turn must never run")

    spec = cb.ToolSpec(
        name="getWeather", description="d", params=_Weather, handler=handler, schema_version="1", risk="read"
    )
    return cb.Registry([spec])


def test_a_refusal_with_an_oversized_call_ends_refused_in_a_run() -> None:
    """D31 in a run: the operation is REFUSED (not INCOMPLETE(ARGUMENTS_TOO_LARGE)), and nothing runs."""
    model = ScriptedModel("anthropic-messages", [_anthropic("refusal")], caps=CAPS)
    out = cb.Runner(model=model, registry=_registry(), clock=FakeClock()).run_sync(
        "hi", tenant="t", subject="s"
    )
    assert out.state == "REFUSED"


def test_a_retryable_failure_with_an_oversized_call_is_retried() -> None:
    """Gemini MALFORMED_FUNCTION_CALL is retryable (D1, D26): an oversized call in it does not make it a
    byte-cap trip, which is never retried; the retry's answer completes the operation."""
    final = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Sunny."}]}, "finishReason": "STOP"}],
        "modelVersion": "gemini-x",
        "responseId": "r2",
    }
    model = ScriptedModel("gemini-generate", [_gemini("MALFORMED_FUNCTION_CALL"), final], caps=CAPS)
    runner = cb.Runner(model=model, registry=_registry(), clock=FakeClock())
    out = runner.run_sync("hi", tenant="t", subject="s")
    assert (out.state, out.text) == ("COMPLETED", "Sunny.")


def test_a_streamed_refusal_with_an_oversized_call_in_its_snapshot_ends_refused() -> None:
    stream = _responses_stream(_responses("completed", refusal=True))
    model = ScriptedModel("openai-responses", [Stream(stream)], caps=CAPS)
    runner = cb.Runner(model=model, registry=_registry(), clock=FakeClock(), settings={"stream": True})
    assert runner.run_sync("hi", tenant="t", subject="s").state == "REFUSED"
