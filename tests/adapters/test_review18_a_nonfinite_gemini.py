"""Review 18 (a, F1): Gemini call arguments holding a number JSON cannot carry.

A ``functionCall.args`` (gemini-generate) or ``function_call`` step ``arguments`` (gemini-interactions)
holding ``1e400`` (valid JSON a model may write) or ``NaN`` / ``Infinity`` reads as a Python inf/nan.
D5 refuses the call (INVALID_ARGUMENTS), but the content went back unchanged (D8): the turn could not be
stored (``StoreError``: "Out of range float values are not JSON compliant", escaping ``run`` as if the
store were unreachable), and the next request would have held a bare ``Infinity``, which is no JSON.
Anthropic's tool_use input had the same fault and was fixed in review 14 (``finite.py``); these two
adapters now send such arguments back as ``{"INVALID_JSON": "<text>"}`` and give the call the text.

Bodies are synthetic, in the shapes of the recorded fixtures (gemini/ai__google-tool-call.json,
gemini-interactions/ai__steps__tool-call-step1.json).
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

GEMINI = get("gemini-generate")
INTERACTIONS = get("gemini-interactions")

NON_FINITE = [
    '{"city": "Oslo", "n": 1e400}',
    '{"city": "Oslo", "n": NaN}',
    '{"city": "Oslo", "d": [-Infinity]}',
]


def _strict(raw: str) -> Any:
    """JSON as a strict server reads it: NaN, Infinity and -Infinity are no JSON tokens."""

    def refuse(token: str) -> Any:
        raise ValueError(f"{token} is not JSON")

    return json.loads(raw, parse_constant=refuse)


def _gemini_body(args: str, signature: bool = True) -> bytes:
    part: dict[str, Any] = {"functionCall": {"id": "c1", "name": "get_weather", "args": "@"}}
    if signature:
        part["thoughtSignature"] = "EskgCsYgAb4+sig"
    body = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "Let me look."}, part]}, "finishReason": "STOP"}
        ],
        "responseId": "r1",
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 4, "totalTokenCount": 7},
    }
    return json.dumps(body).replace('"@"', args).encode()


def _interaction_body(args: str) -> bytes:
    body = {
        "id": "i1",
        "status": "requires_action",
        "steps": [
            {"type": "thought", "signature": "CtkBsig"},
            {"type": "function_call", "id": "c1", "name": "get_weather", "arguments": "@"},
        ],
        "usage": {"total_input_tokens": 3, "total_output_tokens": 4},
    }
    return json.dumps(body).replace('"@"', args).encode()


def _interaction_stream(args: str) -> bytes:
    events = [
        {"event_type": "interaction.created", "interaction": {"id": "i1", "status": "in_progress"}},
        {
            "event_type": "step.start",
            "index": 0,
            "step": {"type": "function_call", "id": "c1", "name": "get_weather", "arguments": {}},
        },
        {"event_type": "step.delta", "index": 0, "delta": {"type": "arguments_delta", "arguments": args}},
        {"event_type": "step.stop", "index": 0},
        {"event_type": "interaction.completed", "interaction": {"id": "i1", "status": "requires_action"}},
    ]
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()


@pytest.mark.parametrize("args", NON_FINITE)
def test_gemini_plain_non_finite_args_go_back_wrapped_and_the_call_is_refused(args: str) -> None:
    turn = GEMINI.parse_response(_gemini_body(args))
    assert turn.finish is Finish.TOOL_PROPOSALS
    [call] = turn.calls
    assert call.arguments is None and call.arguments_error  # D5: never runs
    assert isinstance(call.arguments_raw, str)  # text a store can hold
    [content] = GEMINI.turn_items(turn)
    text_part, part = content["parts"]
    assert text_part == {"text": "Let me look."}
    assert part["functionCall"] == {
        "id": "c1",
        "name": "get_weather",
        "args": {"INVALID_JSON": call.arguments_raw},
    }
    assert part["thoughtSignature"] == "EskgCsYgAb4+sig"  # the signature stays on its part (D8)
    _strict(json.dumps(content))  # the next request is JSON
    results = GEMINI.result_items(turn, [(call, {"ok": False, "error": {"code": "INVALID_ARGUMENTS"}})])
    body = GEMINI.build_request(
        items=[{"role": "user", "parts": [{"text": "go"}]}, content, *results],
        tools=[],
        settings={},
        instructions=None,
        stream=False,
    )
    GEMINI.check_request(body, turn)


@pytest.mark.parametrize("args", NON_FINITE)
def test_gemini_streamed_non_finite_args_go_back_wrapped(args: str) -> None:
    chunk = _gemini_body(args).decode()
    turn, _ = streaming.fed(GEMINI, f"data: {chunk}\r\n\r\n".encode())
    assert turn.finish is Finish.TOOL_PROPOSALS
    [call] = turn.calls
    assert call.arguments is None and call.arguments_error
    [content] = GEMINI.turn_items(turn)
    assert set(content["parts"][1]["functionCall"]["args"]) == {"INVALID_JSON"}
    _strict(json.dumps(content))


def test_gemini_finite_args_and_the_callers_body_are_unchanged() -> None:
    body = json.loads(_gemini_body('{"city": "Oslo", "n": 1.5e300}'))
    turn = GEMINI.parse_response(body)
    assert turn.continuation[0] is body["candidates"][0]["content"]  # as received (D8)
    inf = json.loads(_gemini_body('{"n": 1e400}'))
    GEMINI.parse_response(inf)
    assert inf["candidates"][0]["content"]["parts"][1]["functionCall"]["args"] == {"n": float("inf")}


@pytest.mark.parametrize("args", NON_FINITE)
def test_interactions_plain_non_finite_arguments_go_back_wrapped(args: str) -> None:
    turn = INTERACTIONS.parse_response(_interaction_body(args))
    assert turn.finish is Finish.TOOL_PROPOSALS
    [call] = turn.calls
    assert call.arguments is None and call.arguments_error
    assert isinstance(call.arguments_raw, str)
    thought, step = INTERACTIONS.turn_items(turn)
    assert thought == {"type": "thought", "signature": "CtkBsig"}
    assert step == {
        "type": "function_call",
        "id": "c1",
        "name": "get_weather",
        "arguments": {"INVALID_JSON": call.arguments_raw},
    }
    results = INTERACTIONS.result_items(turn, [(call, {"ok": False, "error": {"code": "INVALID_ARGUMENTS"}})])
    items = [{"type": "user_input", "content": [{"type": "text", "text": "go"}]}, thought, step, *results]
    body = INTERACTIONS.build_request(items=items, tools=[], settings={}, instructions=None, stream=False)
    _strict(json.dumps(body))
    INTERACTIONS.check_request(body, turn)


@pytest.mark.parametrize("args", NON_FINITE)
def test_interactions_streamed_non_finite_arguments_go_back_as_the_text_sent(args: str) -> None:
    turn, _ = streaming.fed(INTERACTIONS, _interaction_stream(args))
    assert turn.finish is Finish.TOOL_PROPOSALS
    [call] = turn.calls
    assert call.arguments is None and call.arguments_error
    [step] = INTERACTIONS.turn_items(turn)
    assert step["arguments"] == {"INVALID_JSON": args}
    _strict(json.dumps(step))


class Weather(BaseModel):
    city: str


def _final(api: str) -> bytes:
    if api == "gemini-generate":
        body: dict[str, Any] = {
            "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
            "responseId": "r2",
        }
    else:
        body = {
            "id": "i2",
            "status": "completed",
            "steps": [{"type": "model_output", "content": [{"type": "text", "text": "ok"}]}],
        }
    return json.dumps(body).encode()


@pytest.mark.parametrize("api", ["gemini-generate", "gemini-interactions"])
def test_a_run_with_non_finite_arguments_completes(api: str, tmp_path: Path) -> None:
    seen: list[Any] = []
    first = _gemini_body(NON_FINITE[0]) if api == "gemini-generate" else _interaction_body(NON_FINITE[0])

    def handler(request: httpx.Request) -> httpx.Response:
        try:
            seen.append(_strict(request.content.decode()))
        except ValueError as exc:  # what the API answers to a body that is no JSON
            error = {
                "code": 400,
                "message": f"Invalid JSON payload received. {exc}",
                "status": "INVALID_ARGUMENT",
            }
            return httpx.Response(400, json={"error": error})
        content = first if len(seen) == 1 else _final(api)
        return httpx.Response(200, content=content, headers={"content-type": "application/json"})

    ran: list[str] = []

    def weather(args: Weather, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.city)
        return {"t": 3}

    spec = cb.ToolSpec(
        name="get_weather", description="w", params=Weather, handler=weather, schema_version="v1"
    )
    model = HttpModel(
        api, base_url="http://test", api_key="k", model="gemini-x", transport=httpx.MockTransport(handler)
    )
    store = stores.open(f"sqlite:///{tmp_path}/cb.db")  # the turn and its calls must be storable
    runner = cb.Runner(
        model=model,
        registry=cb.Registry([spec]),
        store=store,
        settings={"model": "gemini-x"},
        clock=FakeClock(),
    )
    out = runner.run_sync("go", tenant="t", subject="s")
    assert out.state.value == "COMPLETED", out.reason
    assert ran == [] and len(seen) == 2
    sent = json.dumps(seen[1])
    assert "INVALID_JSON" in sent and "INVALID_ARGUMENTS" in sent
