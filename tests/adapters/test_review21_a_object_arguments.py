"""Argument values that are no JSON object (review round 21, a).

Anthropic ``tool_use.input``, Gemini ``functionCall.args`` and Interactions ``function_call.arguments``
are objects in every request (anthropic-sdk-python ``ToolUseBlockParam.input: Dict[str, object]``,
python-genai ``FunctionCall.args: dict``, ``FunctionCallStepParam.arguments: Dict[str, Any]``). A response
holding a string (``"{\\"order_id\\": \\"A1\\"}"``, JSON spelled out in a string), a list or a number
there was read two ways:

- a string was parsed as argument text on Anthropic and Interactions, so the call ran with arguments the
  provider never sent as an object, where the same value streamed (a ``"..."`` literal in partial_json)
  is an arguments error (D5: nothing coerced); a list was "no arguments were sent";
- the block, part or step went back unchanged (D8), which the API refuses (400): the turn's other calls
  had run by then (a write included), and the run ended FAILED with their results never sent.

Now each is an arguments error (INVALID_ARGUMENTS, the call never runs) and goes back as input that never
parsed, ``{"INVALID_JSON": "<the value's JSON text>"}`` (finite.py), as a non-finite number already did;
Anthropic's ``tool_use`` with no ``input`` at all (required) fails before any call runs. The request guard
(``check_request``, D24) refuses a non-object argument value. Payloads synthetic.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.core.errors import ProtocolViolation
from callbound.core.types import Finish
from callbound.testing import ScriptedModel
from tests.adapters import streaming

ODD = ['{"order_id": "A1"}', ["A1"], 7]  # JSON in a string, a list, a number
WRITTEN = {
    "anthropic-messages": lambda v: {"input": v},
    "gemini-generate": lambda v: {"args": v},
    "gemini-interactions": lambda v: {"arguments": v},
}


def _anthropic(*blocks: dict[str, Any], rid: str = "msg_1", stop: str = "tool_use") -> dict[str, Any]:
    return {"id": rid, "type": "message", "role": "assistant", "model": "claude-x", "content": list(blocks),
            "stop_reason": stop, "usage": {"input_tokens": 5, "output_tokens": 3}}  # fmt: skip


def _tool_use(cid: str, value: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": "get_order", "input": value}


def _gemini(*calls: dict[str, Any]) -> dict[str, Any]:
    parts = [{"functionCall": c} for c in calls]
    return {
        "responseId": "r1",
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
    }


def _interaction(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"id": "int_1", "status": "requires_action", "steps": list(steps)}


def _body(api: str, value: Any) -> dict[str, Any]:
    if api == "anthropic-messages":
        return _anthropic(_tool_use("toolu_1", value))
    if api == "gemini-generate":
        return _gemini({"id": "c1", "name": "get_order", "args": value})
    return _interaction({"type": "function_call", "id": "c1", "name": "get_order", "arguments": value})


def _sent_back(api: str, turn: Any) -> Any:
    item = turn.continuation[0]
    if api == "anthropic-messages":
        return item["content"][0]["input"]
    if api == "gemini-generate":
        return item["parts"][0]["functionCall"]["args"]
    return item["arguments"]


@pytest.mark.parametrize("api", sorted(WRITTEN))
@pytest.mark.parametrize("value", ODD, ids=["json_in_a_string", "list", "number"])
def test_a_non_object_argument_value_is_refused_and_goes_back_as_an_object(api: str, value: Any) -> None:
    turn = get(api).parse_response(json.dumps(_body(api, value)).encode())
    assert turn.finish is Finish.TOOL_PROPOSALS  # the turn stands; this call is answered INVALID_ARGUMENTS
    [call] = turn.calls
    assert call.arguments is None  # was {"order_id": "A1"} for the string on Anthropic and Interactions
    assert call.arguments_error == f"arguments must be a JSON object, got {type(value).__name__}"
    assert call.arguments_raw == json.dumps(value, separators=(",", ":"))
    # was: the value itself, which the API refuses in the next request
    assert _sent_back(api, turn) == {"INVALID_JSON": json.dumps(value, separators=(",", ":"))}


def test_anthropic_input_given_whole_in_a_stream_reads_as_the_plain_body() -> None:
    # A block whose input arrives whole at content_block_start (no input_json_delta): the same turn.
    adapter = get("anthropic-messages")
    plain = adapter.parse_response(json.dumps(_anthropic(_tool_use("toolu_1", ODD[0]))).encode())
    events = [
        {"type": "message_start", "message": {**_anthropic(rid="msg_1", stop=None), "content": []}},  # type: ignore[arg-type]
        {"type": "content_block_start", "index": 0, "content_block": _tool_use("toolu_1", ODD[0])},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    ]
    raw = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    streamed, _ = streaming.fed(adapter, raw)
    assert streamed.finish is plain.finish is Finish.TOOL_PROPOSALS
    assert streamed.calls[0].arguments is None  # was {"order_id": "A1"}, plain and streamed alike
    assert [(c.arguments, c.arguments_error) for c in streamed.calls] == [
        (c.arguments, c.arguments_error) for c in plain.calls
    ]
    assert streamed.continuation[0]["content"] == plain.continuation[0]["content"]


def test_anthropic_tool_use_without_input_fails_before_any_call_runs() -> None:
    # input is required in the block sent back: the continuation would be refused after the calls ran
    block = {"type": "tool_use", "id": "toolu_2", "name": "get_order"}
    turn = get("anthropic-messages").parse_response(
        json.dumps(_anthropic(_tool_use("toolu_1", {"order_id": "A1"}), block)).encode()
    )
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "malformed_response")
    assert turn.failure is not None and turn.failure.error_code == "tool_use_input_not_an_object"
    assert not turn.failure.retryable


@pytest.mark.parametrize("api", sorted(WRITTEN))
def test_the_request_guard_refuses_a_non_object_argument_value(api: str) -> None:
    adapter = get(api)
    turn = adapter.parse_response(json.dumps(_body(api, {"order_id": "A1"})).encode())
    [call] = turn.calls
    results = adapter.result_items(turn, [(call, {"ok": True, "data": {}})])
    items = [*adapter.initial_items("Order A1?", []), *adapter.turn_items(turn), *results]
    body = adapter.build_request(
        items=items, tools=[], settings={"model": "m"}, instructions=None, stream=False
    )
    adapter.check_request(body, previous=turn)  # an object: fine
    text = json.dumps(body).replace('{"order_id": "A1"}', json.dumps(json.dumps({"order_id": "A1"})), 1)
    with pytest.raises(ProtocolViolation, match="must be a JSON object"):
        adapter.check_request(json.loads(text), previous=None)


class Order(BaseModel):
    order_id: str


@pytest.mark.parametrize("api", sorted(WRITTEN))
def test_a_parallel_call_runs_and_its_result_reaches_the_model(api: str) -> None:
    # One good call and one whose arguments are a string: the good one runs, the other is
    # INVALID_ARGUMENTS, and the follow-up request (checked by ScriptedModel, D24) carries both answers.
    # Before: the string one ran too (Anthropic, Interactions) or its part went back as a string (Gemini),
    # a request the API refuses after the good call ran.
    ran: list[str] = []

    def get_order(args: Order, ctx: cb.CallContext) -> dict[str, str]:
        ran.append(args.order_id)
        return {"status": "shipped"}

    good, odd = {"order_id": "A1"}, json.dumps({"order_id": "B2"})
    if api == "anthropic-messages":
        first = _anthropic(_tool_use("toolu_1", good), _tool_use("toolu_2", odd))
        answer = _anthropic({"type": "text", "text": "A1 shipped."}, rid="msg_2", stop="end_turn")
    elif api == "gemini-generate":
        first = _gemini(
            {"id": "c1", "name": "get_order", "args": good}, {"id": "c2", "name": "get_order", "args": odd}
        )
        answer = {"responseId": "r2", "candidates": [{"content": {"role": "model", "parts": [{"text": "A1 shipped."}]},
                                                      "finishReason": "STOP"}]}  # fmt: skip
    else:
        first = _interaction(
            {"type": "function_call", "id": "c1", "name": "get_order", "arguments": good},
            {"type": "function_call", "id": "c2", "name": "get_order", "arguments": odd},
        )
        answer = {"id": "int_2", "status": "completed",
                  "steps": [{"type": "model_output", "content": [{"type": "text", "text": "A1 shipped."}]}]}  # fmt: skip
    model = ScriptedModel(api, [first, answer])
    registry = cb.Registry([cb.ToolSpec(name="get_order", description="Look up an order", params=Order,
                                        handler=get_order, schema_version="v1", risk="read", timeout_ms=500)])  # fmt: skip
    out = cb.Runner(model=model, registry=registry).run_sync(input="Orders?", tenant="t", subject="u")
    assert (out.state, out.text) == (cb.State.COMPLETED, "A1 shipped.")
    assert ran == ["A1"]  # was ["A1", "B2"] on Anthropic and Interactions
    sent = json.dumps(model.requests[1])
    assert "INVALID_ARGUMENTS" in sent and '"INVALID_JSON"' in sent
