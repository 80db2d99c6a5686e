"""Regression review of b489961 (round 15, r9): what a turn carries back, and failures that keep their
retry.

1. A lone surrogate in text that goes back with the results (D8: the assistant output is carried back as
   received) passed ``readable_turn``, which judged names only: the write paid, then no later request
   could be encoded (the SDKs' httpx and HttpModel write UTF-8), read as a lost connection, retried, and
   FAILED(CONNECTION_ERROR). A turn whose calls run or that pauses now fails before any handler runs.
2. A 429 or 503 whose error type or code holds a surrogate was made a fatal malformed response; D26 retries
   it whatever its body holds. Failures keep what they are, their naming strings escaped.
3. HttpModel still sends a body holding one (defence in depth), as the JSON escape it came as.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from pydantic import BaseModel

import callbound as cb
from callbound.core.model import RequestMeta
from callbound.testing import ApiError, ScriptedModel
from callbound.transports.http import HttpModel

S = "\ud800"


class Pay(BaseModel):
    amount: int


def _tool_turn(api: str) -> dict[str, Any]:
    if api == "openai-chat":
        msg = {
            "role": "assistant",
            "content": "paying now " + S,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "pay", "arguments": '{"amount": 5}'},
                }
            ],
        }
        return {
            "id": "c1",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls"}],
        }
    if api == "anthropic-messages":
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "text", "text": "paying now " + S},
                {"type": "tool_use", "id": "toolu_1", "name": "pay", "input": {"amount": 5}},
            ],
            "stop_reason": "tool_use",
        }
    if api == "openai-responses":
        return {
            "id": "resp_1",
            "status": "completed",
            "output": [
                {
                    "type": "message",
                    "id": "m1",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "pay " + S}],
                },
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": "pay",
                    "arguments": '{"amount": 5}',
                },
            ],
        }
    parts = [
        {"text": "paying"},
        {"functionCall": {"name": "pay", "args": {"amount": 5}}, "thoughtSignature": "sig" + S},
    ]
    return {
        "responseId": "g1",
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
    }


def _runner(api: str, script: list[Any], paid: list[int]) -> tuple[cb.Runner, ScriptedModel]:
    def pay(args: Pay, ctx: cb.CallContext) -> dict[str, Any]:
        paid.append(args.amount)
        return {"paid": args.amount}

    spec = cb.ToolSpec(
        name="pay", description="pay", params=Pay, handler=pay, schema_version="v1", risk="write"
    )
    model = ScriptedModel(api, script)
    return cb.Runner(model=model, registry=cb.Registry([spec])), model


def test_a_tool_turn_carrying_back_a_lone_surrogate_fails_before_its_handler_pays() -> None:
    for api in ("openai-chat", "anthropic-messages", "openai-responses", "gemini-generate"):
        paid: list[int] = []
        runner, model = _runner(api, [_tool_turn(api)], paid)
        out = runner.run_sync("go", tenant="t", subject="s")
        assert (api, out.state.value, out.reason, paid) == (api, "FAILED", "MALFORMED_RESPONSE", [])
        assert len(model.requests) == 1


def test_a_429_whose_error_code_holds_a_surrogate_is_still_retried() -> None:
    final = {"id": "c2", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}  # fmt: skip
    error = {"error": {"type": "rate" + S, "code": "slow_down" + S, "message": "later"}}
    paid: list[int] = []
    runner, model = _runner(
        "openai-chat", [ApiError(429, json.dumps(error), {"retry-after": "0"}), final], paid
    )
    out = runner.run_sync("go", tenant="t", subject="s")
    assert (out.state.value, len(model.requests)) == ("COMPLETED", 2)


def test_http_model_sends_a_lone_surrogate_as_its_json_escape() -> None:
    sent: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        body = {"id": "c1", "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}  # fmt: skip
        return httpx.Response(200, json=body)

    model = HttpModel(
        "openai-chat", api_key="k", base_url="http://p.test", transport=httpx.MockTransport(handler)
    )
    body = {"model": "m", "messages": [{"role": "user", "content": "caf\u00e9 " + S}]}
    turn = asyncio.run(model.complete(body, stream=False, meta=RequestMeta("op", 0, None)))
    assert turn.text == "ok"
    assert json.loads(sent[0]) == body
    assert b"\\ud800" in sent[0]
