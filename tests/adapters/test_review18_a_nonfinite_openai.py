"""Review 18 (a, F2): OpenAI-shaped call arguments sent as an object holding 1e400, NaN or Infinity.

Compatible servers may send a Chat call's ``function.arguments`` (or the legacy ``function_call``'s) as
an object instead of text, which callbound reads and echoes as sent (openai_chat docstring); a
Responses ``function_call`` read from such a server may carry one too. An object holding ``1e400``
(valid JSON) or ``NaN`` reads as a Python inf/nan: D5 refuses the call, but the message went back
unchanged, so the turn could not be stored (``StoreError``, escaping ``run`` as if the store were down)
and the next request would have held a bare ``Infinity``. As for Anthropic (review 14) and Gemini
(a F1), such arguments now go back as ``{"INVALID_JSON": "<text>"}`` and the call gets the text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

import callbound as cb
from callbound import stores
from callbound.adapters import get
from callbound.core.types import Finish
from callbound.testing import FakeClock
from callbound.transports.http import HttpModel
from tests.adapters import streaming

CHAT = get("openai-chat")
RESPONSES = get("openai-responses")
NON_FINITE = ['{"city": "Oslo", "n": 1e400}', '{"city": "Oslo", "n": NaN}']


def _strict(raw: str) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(f"{token} is not JSON")

    return json.loads(raw, parse_constant=refuse)


def _chat_body(args: str, legacy: bool = False) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if legacy:
        message["function_call"] = {"name": "get_weather", "arguments": "@"}
    else:
        ok = {
            "id": "call_0",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
        }
        bad = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "@"}}
        message["tool_calls"] = [ok, bad]
    finish = "function_call" if legacy else "tool_calls"
    body = {"id": "chatcmpl-1", "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    return json.dumps(body).replace('"@"', args).encode()


@pytest.mark.parametrize("args", NON_FINITE)
def test_chat_object_arguments_with_a_non_finite_number_go_back_wrapped(args: str) -> None:
    turn = CHAT.parse_response(_chat_body(args))
    assert turn.finish is Finish.TOOL_PROPOSALS
    ok, bad = turn.calls
    assert ok.arguments == {"city": "Rome"}
    assert bad.arguments is None and bad.arguments_error and isinstance(bad.arguments_raw, str)
    [message] = CHAT.turn_items(turn)
    first, second = message["tool_calls"]
    assert first["function"]["arguments"] == '{"city":"Rome"}'  # the others as received (D8)
    assert second["id"] == "call_1" and second["function"]["arguments"] == {"INVALID_JSON": bad.arguments_raw}
    results = CHAT.result_items(turn, [(ok, {"ok": True}), (bad, {"ok": False})])
    body = CHAT.build_request(
        items=[{"role": "user", "content": "go"}, message, *results],
        tools=[],
        settings={},
        instructions=None,
        stream=False,
    )
    _strict(json.dumps(body))
    CHAT.check_request(body, turn)


@pytest.mark.parametrize("args", NON_FINITE)
def test_chat_legacy_function_call_object_arguments_go_back_wrapped(args: str) -> None:
    turn = CHAT.parse_response(_chat_body(args, legacy=True))
    [call] = turn.calls
    assert call.arguments is None and call.arguments_error
    [message] = CHAT.turn_items(turn)
    assert message["function_call"]["arguments"] == {"INVALID_JSON": call.arguments_raw}
    _strict(json.dumps(message))


def test_chat_streamed_object_arguments_with_a_non_finite_number_go_back_wrapped() -> None:
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": "@"},
    }
    chunks = [
        {"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    raw = (
        "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).replace('"@"', NON_FINITE[0])
        + "data: [DONE]\n\n"
    )
    turn, _ = streaming.fed(CHAT, raw.encode())
    assert turn.finish is Finish.TOOL_PROPOSALS
    [made] = turn.calls
    assert made.arguments is None and made.arguments_error
    [message] = CHAT.turn_items(turn)
    assert set(message["tool_calls"][0]["function"]["arguments"]) == {"INVALID_JSON"}
    _strict(json.dumps(message))


def test_chat_finite_object_arguments_and_the_callers_body_are_unchanged() -> None:
    body = json.loads(_chat_body('{"city": "Oslo"}'))
    turn = CHAT.parse_response(body)
    assert turn.continuation[0] is body["choices"][0]["message"]  # as received (D8)
    assert turn.calls[1].arguments == {"city": "Oslo"}
    inf = json.loads(_chat_body(NON_FINITE[0]))
    CHAT.parse_response(inf)
    assert inf["choices"][0]["message"]["tool_calls"][1]["function"]["arguments"]["n"] == float("inf")


@pytest.mark.parametrize("args", NON_FINITE)
def test_responses_object_arguments_with_a_non_finite_number_go_back_wrapped(args: str) -> None:
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": "@",
    }
    body = json.dumps({"id": "resp_1", "status": "completed", "output": [item]}).replace('"@"', args)
    turn = RESPONSES.parse_response(body)
    assert turn.finish is Finish.TOOL_PROPOSALS
    [call] = turn.calls
    assert call.arguments is None and call.arguments_error and isinstance(call.arguments_raw, str)
    [sent] = RESPONSES.turn_items(turn)
    assert sent == {**item, "arguments": {"INVALID_JSON": call.arguments_raw}}
    _strict(json.dumps(sent))


class Weather(BaseModel):
    city: str


def test_a_chat_run_with_non_finite_object_arguments_completes(tmp_path: Path) -> None:
    seen: list[Any] = []
    final = {
        "id": "chatcmpl-2",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    }

    def handler(request: httpx.Request) -> httpx.Response:
        try:
            seen.append(_strict(request.content.decode()))
        except ValueError as exc:  # what a server answers to a body that is no JSON
            return httpx.Response(400, json={"error": {"message": str(exc), "type": "invalid_request_error"}})
        content = _chat_body(NON_FINITE[0]) if len(seen) == 1 else json.dumps(final).encode()
        return httpx.Response(200, content=content, headers={"content-type": "application/json"})

    ran: list[str] = []

    def weather(args: Weather, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.city)
        return {"t": 3}

    spec = cb.ToolSpec(
        name="get_weather", description="w", params=Weather, handler=weather, schema_version="v1"
    )
    model = HttpModel(
        "openai-chat", base_url="http://test", api_key="k", transport=httpx.MockTransport(handler)
    )
    store = stores.open(f"sqlite:///{tmp_path}/cb.db")  # the turn and its calls must be storable
    runner = cb.Runner(
        model=model, registry=cb.Registry([spec]), store=store, settings={"model": "m"}, clock=FakeClock()
    )
    out = runner.run_sync("go", tenant="t", subject="s")
    assert out.state.value == "COMPLETED", out.reason
    assert ran == ["Rome"] and len(seen) == 2
    tools = [m for m in seen[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["call_0", "call_1"]
    assert "INVALID_ARGUMENTS" in tools[1]["content"]
