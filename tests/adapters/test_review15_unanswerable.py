"""Review 15 (r5, finding 4): a tool turn whose own continuation cannot be sent back must not run.

The turn's content goes back unchanged with the results (D8), and the adapter's ``check_request`` says
what the provider refuses there. A turn it would refuse ran its handlers first, and the run then died on
the next request (ScriptedRequestError; live, the provider's 400): a side effect for a turn that can
never be answered. Now such a turn fails before any dispatch, as a Responses ``function_call`` without
``call_id`` already did (FAILED(MISSING_CALL_ID), docs/stop-reasons.md ``completed+nocallid``):

1. Anthropic ``tool_use`` without a usable id (missing, ``""``, null, a list, a number), plain or
   streamed: D7 ("Synthetic ids are never sent back to a provider that did not send ids") and issue 3
   §3 ("Anthropic: every tool_use id answered exactly once"): the tool_result would carry
   ``"tool_use_id": ""``. API_FAILURE(missing_call_id), as Responses.
2. Anthropic ``thinking`` block without a string ``signature`` (``redacted_thinking`` without ``data``):
   "a thinking block lost its signature". API_FAILURE(malformed_response), error_code
   ``thinking_signature_missing`` / ``redacted_thinking_data_missing``; a paused turn too, since it is
   resent unchanged. A signature ``""`` is a string, accepted by the check, and still runs.
3. Chat calls in a message whose ``role`` is not ``assistant`` (or has none): only an assistant
   message's tool_calls can be answered. API_FAILURE(malformed_response), error_code
   ``message_role_not_assistant``. Id-less Chat calls still run, answered with ``tool_call_id: ""``
   (tests/adapters/test_review14_chat*), unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.core.machine import classify_turn
from callbound.core.types import Finish, ModelTurn
from callbound.testing import ScriptedModel
from tests.adapters import streaming

ANTHROPIC = get("anthropic-messages")
CHAT = get("openai-chat")
MISSING = object()  # no "id" key at all
BAD_IDS = [MISSING, "", None, [], 7]
BAD_ID_NAMES = ["missing", "empty", "null", "list", "number"]


class Args(BaseModel):
    pass


def _run(api: str, first: Any, final: dict[str, Any]) -> tuple[cb.Outcome, list[str], ScriptedModel]:
    """One run with request checks on; the handler's call ids, in the order it ran."""
    ran: list[str] = []

    def handler(args: Args, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(ctx.call_id)
        return {"r": 1}

    spec = cb.ToolSpec(name="f", description="t", params=Args, handler=handler, schema_version="v1")
    model = ScriptedModel(api, [first, final])
    out = cb.Runner(model=model, registry=cb.Registry([spec])).run_sync(input="go", tenant="t", subject="s")
    return out, ran, model


def _fails_closed(turn: ModelTurn, reason: str, code: str, error_code: str | None = None) -> None:
    assert turn.finish is Finish.API_FAILURE
    assert turn.reason == reason
    assert turn.failure is not None and not turn.failure.retryable
    assert turn.failure.error_code == error_code
    assert not turn.executable
    verdict = classify_turn(turn)
    assert (verdict.target.value, verdict.reason, verdict.retryable) == ("FAILED", code, False)


# ---- Anthropic ------------------------------------------------------------------------------------

A_FINAL = {
    "id": "msg_f", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "done"}],
    "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1},
}  # fmt: skip


def _message(content: list[dict[str, Any]], stop: str = "tool_use") -> dict[str, Any]:
    return {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": content,
        "stop_reason": stop, "usage": {"input_tokens": 1, "output_tokens": 1},
    }  # fmt: skip


def _tool_use(idv: Any = "toolu_1") -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_use", "name": "f", "input": {}}
    if idv is not MISSING:
        block["id"] = idv
    return block


def _sse(events: list[dict[str, Any]]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def _stream(blocks: list[dict[str, Any]], stop: str = "tool_use") -> str:
    """The blocks streamed whole from their content_block_start, as a tool_use without arguments is."""
    start = {**_message([]), "stop_reason": None}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(blocks):
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    events += [
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"},
    ]
    return _sse(events)


@pytest.mark.parametrize("idv", BAD_IDS, ids=BAD_ID_NAMES)
def test_anthropic_tool_use_without_id_fails_as_responses_missing_call_id(idv: Any) -> None:
    # D7, issue 3 §3: the synthetic id never goes back, so the call could never be answered.
    turn = ANTHROPIC.parse_response(_message([{"type": "text", "text": "Checking."}, _tool_use(idv)]))
    _fails_closed(turn, "missing_call_id", "MISSING_CALL_ID")
    assert turn.raw_stop_reason == "tool_use"
    assert turn.calls[0].synthetic_id  # kept for display


@pytest.mark.parametrize("idv", BAD_IDS, ids=BAD_ID_NAMES)
def test_anthropic_streamed_tool_use_without_id_fails_too(idv: Any) -> None:
    turn, _ = streaming.fed(ANTHROPIC, _stream([_tool_use(idv)]).encode())
    _fails_closed(turn, "missing_call_id", "MISSING_CALL_ID")


def test_one_anthropic_call_without_id_fails_the_whole_turn() -> None:
    turn = ANTHROPIC.parse_response(_message([_tool_use("toolu_1"), _tool_use(None)]))
    assert [c.synthetic_id for c in turn.calls] == [False, True]
    _fails_closed(turn, "missing_call_id", "MISSING_CALL_ID")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("idv", BAD_IDS, ids=BAD_ID_NAMES)
def test_anthropic_run_without_id_runs_no_handler(idv: Any, stream: bool) -> None:
    first = _stream([_tool_use(idv)]) if stream else _message([_tool_use(idv)])
    out, ran, model = _run("anthropic-messages", first, A_FINAL)
    assert (out.state.value, out.reason) == ("FAILED", "MISSING_CALL_ID")
    assert ran == [] and len(model.requests) == 1  # no handler, and no request the API would refuse


THINKING_LOST = [
    ({"type": "thinking", "thinking": "hmm"}, "thinking_signature_missing"),
    ({"type": "thinking", "thinking": "hmm", "signature": None}, "thinking_signature_missing"),
    ({"type": "redacted_thinking"}, "redacted_thinking_data_missing"),
    ({"type": "redacted_thinking", "data": 5}, "redacted_thinking_data_missing"),
]


@pytest.mark.parametrize(("thinking", "code"), THINKING_LOST)
def test_anthropic_thinking_without_signature_fails_before_the_calls_run(
    thinking: dict[str, Any], code: str
) -> None:
    # check_request refuses the continuation ("a thinking block lost its signature"), so the turn is
    # known to be unanswerable now.
    turn = ANTHROPIC.parse_response(_message([thinking, _tool_use()]))
    _fails_closed(turn, "malformed_response", "MALFORMED_RESPONSE", code)
    out, ran, model = _run("anthropic-messages", _message([thinking, _tool_use()]), A_FINAL)
    assert (out.state.value, out.reason) == ("FAILED", "MALFORMED_RESPONSE")
    assert ran == [] and len(model.requests) == 1


def test_anthropic_streamed_thinking_without_signature_fails() -> None:
    turn, _ = streaming.fed(
        ANTHROPIC, _stream([{"type": "thinking", "thinking": "hmm"}, _tool_use()]).encode()
    )
    _fails_closed(turn, "malformed_response", "MALFORMED_RESPONSE", "thinking_signature_missing")


def test_a_paused_turn_without_signature_fails_instead_of_being_resent() -> None:
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}}
    turn = ANTHROPIC.parse_response(_message([{"type": "thinking", "thinking": "hmm"}, search], "pause_turn"))
    _fails_closed(turn, "malformed_response", "MALFORMED_RESPONSE", "thinking_signature_missing")
    assert turn.raw_stop_reason == "pause_turn"


def test_a_final_turn_without_signature_is_still_final() -> None:
    # Nothing of a final turn is sent back: nothing to refuse.
    turn = ANTHROPIC.parse_response(
        _message([{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "hi"}], "end_turn")
    )
    assert turn.finish is Finish.FINAL_TEXT


ACCEPTED_THINKING = [
    {"type": "thinking", "thinking": "hmm", "signature": ""},
    {"type": "thinking", "thinking": "hmm", "signature": "EqQBCkYIBxgC"},
    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("thinking", ACCEPTED_THINKING, ids=["empty-signature", "signature", "redacted"])
def test_thinking_blocks_the_check_accepts_still_run(thinking: dict[str, Any], stream: bool) -> None:
    first = _stream([thinking, _tool_use()]) if stream else _message([thinking, _tool_use()])
    out, ran, model = _run("anthropic-messages", first, A_FINAL)
    assert out.state.value == "COMPLETED" and ran == ["toolu_1"] and len(model.requests) == 2
    assert thinking in model.requests[1]["messages"][1]["content"]  # carried back unchanged (D8)


# ---- OpenAI Chat ----------------------------------------------------------------------------------

C_FINAL = {
    "id": "c2", "object": "chat.completion",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}],
}  # fmt: skip


def _completion(role: Any, call_id: Any = "call_1", finish: str = "tool_calls") -> dict[str, Any]:
    call: dict[str, Any] = {"type": "function", "function": {"name": "f", "arguments": "{}"}}
    if call_id is not MISSING:
        call["id"] = call_id
    message: dict[str, Any] = {"content": None, "tool_calls": [call]}
    if role is not MISSING:
        message["role"] = role
    return {
        "id": "c1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


def _chat_stream(role: str) -> str:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    chunks = [
        {"id": "c1", "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"role": role, "content": None, "tool_calls": [call]}, "finish_reason": None}]},
        {"id": "c1", "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]  # fmt: skip
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


@pytest.mark.parametrize("finish", ["tool_calls", "stop"])
@pytest.mark.parametrize("role", ["x", "user", "tool", ""], ids=["x", "user", "tool", "empty"])
def test_chat_calls_outside_an_assistant_message_do_not_run(role: Any, finish: str) -> None:
    turn = CHAT.parse_response(_completion(role, finish=finish))
    _fails_closed(turn, "malformed_response", "MALFORMED_RESPONSE", "message_role_not_assistant")
    assert turn.raw_stop_reason == finish
    out, ran, model = _run("openai-chat", _completion(role, finish=finish), C_FINAL)
    assert (out.state.value, out.reason) == ("FAILED", "MALFORMED_RESPONSE")
    assert ran == [] and len(model.requests) == 1


@pytest.mark.parametrize("role", [None, MISSING], ids=["null", "missing"])
def test_chat_calls_in_a_message_without_a_role_run_as_in_a_stream(role: Any) -> None:
    """Some compatible servers leave the role out; the stream assembler reads it as "assistant", and the
    plain body now does too, the role filled in on the message sent back (regression review, r7)."""
    turn = CHAT.parse_response(_completion(role))
    assert turn.finish is Finish.TOOL_PROPOSALS and turn.continuation[0]["role"] == "assistant"
    out, ran, model = _run("openai-chat", _completion(role), C_FINAL)
    assert (out.state.value, len(ran)) == ("COMPLETED", 1)
    assert model.requests[1]["messages"][-2]["role"] == "assistant"


def test_chat_streamed_calls_outside_an_assistant_message_do_not_run() -> None:
    turn, _ = streaming.fed(CHAT, _chat_stream("x").encode())
    _fails_closed(turn, "malformed_response", "MALFORMED_RESPONSE", "message_role_not_assistant")
    out, ran, _ = _run("openai-chat", _chat_stream("x"), C_FINAL)
    assert (out.state.value, out.reason, ran) == ("FAILED", "MALFORMED_RESPONSE", [])


@pytest.mark.parametrize("call_id", BAD_IDS, ids=BAD_ID_NAMES)
def test_chat_calls_without_id_still_run_and_are_answered_with_an_empty_id(call_id: Any) -> None:
    # Deliberate (review 14, D7): a Chat call without an id is answered with tool_call_id "", which the
    # check accepts; only the role decides here.
    out, ran, model = _run("openai-chat", _completion("assistant", call_id), C_FINAL)
    assert out.state.value == "COMPLETED" and ran == ["c1:0"]
    assert model.requests[1]["messages"][-1]["tool_call_id"] == ""
    streamed, _ = streaming.fed(CHAT, _chat_stream("assistant").encode())
    assert streamed.finish is Finish.TOOL_PROPOSALS
