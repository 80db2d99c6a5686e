"""Chat Completions calls of another type than ``function`` (``custom`` tools, free-form input).

Shape from a real gpt-5 response recorded by a public test suite (a ``tool_calls`` entry
``{"id", "type": "custom", "custom": {"name", "input"}}``, finish_reason ``tool_calls``); the bodies here
are synthetic. callbound renders function tools only, so such a turn is API_FAILURE(unexpected_tool_call),
not retried, none of its calls runs (as a Responses ``custom_tool_call``, docs/stop-reasons.md), and
the call keeps its own name in the record instead of a made-up one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish
from callbound.testing import FakeClock, ScriptedModel, Stream


def _chunk(delta: dict[str, Any], fin: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-x",
        "choices": [{"index": 0, "delta": delta, "finish_reason": fin}],
    }


def _stream(*, with_function: bool) -> bytes:
    evs: list[Any] = [_chunk({"role": "assistant", "content": None})]
    if with_function:
        start = {
            "index": 0,
            "id": "call_0",
            "type": "function",
            "function": {"name": "get_order", "arguments": ""},
        }
        evs += [
            _chunk({"tool_calls": [start]}),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"order_id":"A1"}'}}]}),
        ]
    custom = {"index": 1, "id": "call_1", "type": "custom", "custom": {"name": "math_exp", "input": ""}}
    evs += [
        _chunk({"tool_calls": [custom]}),
        _chunk({"tool_calls": [{"index": 1, "custom": {"input": "4 + 4"}}]}),
        _chunk({}, "tool_calls"),
        "[DONE]",
    ]
    return "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in evs).encode()


def _body(*, with_function: bool) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []
    if with_function:
        function = {"name": "get_order", "arguments": '{"order_id":"A1"}'}
        calls.append({"id": "call_0", "type": "function", "function": function})
    calls.append({"id": "call_1", "type": "custom", "custom": {"name": "math_exp", "input": "4 + 4"}})
    message = {"role": "assistant", "content": None, "tool_calls": calls, "refusal": None}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-x",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }


@pytest.mark.parametrize("with_function", [False, True], ids=["alone", "beside-a-function-call"])
@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_a_custom_call_is_unexpected_and_keeps_its_name(with_function: bool, streamed: bool) -> None:
    if streamed:
        feed = StreamFeed(get("openai-chat").stream_assembler())
        feed.feed(_stream(with_function=with_function))
        feed.close()
        turn = feed.finish()
    else:
        turn = get("openai-chat").parse_response(json.dumps(_body(with_function=with_function)))
    assert (turn.finish, turn.reason, turn.raw_stop_reason) == (
        Finish.API_FAILURE,
        "unexpected_tool_call",
        "tool_calls",
    )
    assert turn.failure is not None and not turn.failure.retryable
    assert turn.calls[-1].call_id == "call_1" and turn.calls[-1].name == "math_exp"


def test_a_function_call_labelled_with_another_type_is_still_read_as_one() -> None:
    """A compatible server's odd ``type`` beside a usable ``function`` does not make the call foreign."""
    body = _body(with_function=True)
    body["choices"][0]["message"]["tool_calls"] = body["choices"][0]["message"]["tool_calls"][:1]
    body["choices"][0]["message"]["tool_calls"][0]["type"] = "tool"
    turn = get("openai-chat").parse_response(json.dumps(body))
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert turn.calls[0].name == "get_order"


class _Order(BaseModel):
    order_id: str


def test_in_a_run_nothing_runs_and_the_operation_fails() -> None:
    def handler(args: _Order, ctx: cb.CallContext) -> dict[str, Any]:
        raise AssertionError("no call of a turn with a custom call may run")

    spec = cb.ToolSpec(
        name="get_order", description="d", params=_Order, handler=handler, schema_version="1", risk="read"
    )
    model = ScriptedModel("openai-chat", [Stream(_stream(with_function=True))])
    runner = cb.Runner(
        model=model, registry=cb.Registry([spec]), clock=FakeClock(), settings={"stream": True}
    )
    out = runner.run_sync("hi", tenant="t", subject="s")
    assert (out.state, out.reason) == ("FAILED", "UNEXPECTED_TOOL_CALL")
