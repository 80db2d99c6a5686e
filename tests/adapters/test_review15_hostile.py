"""Review 15 (r5, findings 1-2): hostile provider strings.

1. A lone surrogate (the JSON escape ``\\ud800`` with no partner) in a string that names the turn (a
   response id, a call id or name, a stop reason or status, an error type or code) made the audit chain's
   RFC 8785 hashing raise CanonicalizationError out of run_sync / resume_sync after the paid request
   (README: run/resume return an Outcome for everything the model did; D4, D20). The operation stayed
   MODEL_REQUESTED, so every resume paid for the same response again, and a Worker died on it. Now the
   runner reads such a turn as a response that cannot be read whole: API_FAILURE(malformed_response),
   not retried (as the adapters' other malformed responses, docs/stop-reasons.md), error_code
   ``lone_surrogate``, FAILED(MALFORMED_RESPONSE) with no handler run. Only the finished turn is judged:
   text deltas may split a surrogate pair across events, which still joins; a lone surrogate in text is
   kept as read.
2. A list or object where the provider sends a name raised builtins.TypeError (unhashable) in set
   lookups: Chat stream ``finish_reason``, Responses stream event ``type``, Responses output item
   ``type`` (and the ids the same code looked up). A run took it for a connection error (retried,
   FAILED(CONNECTION_ERROR)); ``callbound parse`` printed a traceback. Now a non-string stop reason reads
   as the unknown one it is, FAILED(UNKNOWN_STOP_REASON), as the Chat plain body already did (D1), and a
   non-string type as an unknown type.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

import callbound as cb
from callbound import stores
from callbound.adapters import get
from callbound.core.errors import ProtocolViolation
from callbound.core.types import Failure, Finish, ModelTurn, Provenance, ToolCall, Usage
from callbound.runtime.app import App
from callbound.runtime.verify import verify_operation
from callbound.runtime.worker import Worker
from callbound.testing import ApiError, ScriptedModel, Stream
from tests.adapters import streaming

S = "\ud800"  # a lone surrogate: json.dumps writes it as the escape \ud800, as a hostile provider would


class Args(BaseModel):
    model_config = ConfigDict(extra="allow")


def _body(value: dict[str, Any]) -> bytes:
    return json.dumps(value).encode()  # ensure_ascii: the surrogate goes on the wire as its escape


def _sse(*events: dict[str, Any] | str, named: bool = False) -> str:
    out = []
    for ev in events:
        data = ev if isinstance(ev, str) else json.dumps(ev)
        head = f"event: {ev['type']}\n" if named and isinstance(ev, dict) else ""
        out.append(f"{head}data: {data}\n\n")
    return "".join(out)


def _chat(*, rid: str = "c1", call_id: str = "call_1", name: str = "f", finish: str = "tool_calls") -> bytes:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}],
    }
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return _body({"id": rid, "object": "chat.completion", "choices": [choice]})


def _chat_chunks(*, rid: str = "c1", name: str = "f") -> str:
    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {"id": rid, "object": "chat.completion.chunk", "choices": [choice]}

    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": name, "arguments": "{}"}}
    return _sse(chunk({"role": "assistant", "tool_calls": [call]}, None), chunk({}, "tool_calls"), "[DONE]")


def _responses(*, rid: str = "r1", call_id: str = "call_1", kind: str = "function_call") -> bytes:
    item = {"type": kind, "id": "fc_1", "call_id": call_id, "name": "f", "arguments": "{}"}
    return _body({"id": rid, "status": "completed", "output": [item]})


def _responses_stream(rid: str) -> str:
    msg = {
        "type": "message", "id": "m1", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "hi", "annotations": []}],
    }  # fmt: skip
    return _sse(
        {"type": "response.created", "response": {"id": "r1", "status": "in_progress", "output": []}},
        {"type": "response.completed", "response": {"id": rid, "status": "completed", "output": [msg]}},
    )


def _anthropic(*, tid: str = "toolu_1", stop: str = "tool_use") -> bytes:
    block = {"type": "tool_use", "id": tid, "name": "f", "input": {}}
    usage = {"input_tokens": 1, "output_tokens": 1}
    return _body(
        {"id": "msg_1", "type": "message", "role": "assistant", "content": [block], "stop_reason": stop,
         "usage": usage}
    )  # fmt: skip


def _anthropic_stream(name: str) -> str:
    start = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "stop_reason": None,
             "usage": {"input_tokens": 1, "output_tokens": 1}}  # fmt: skip
    block = {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}
    return _sse(
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "input_json_delta", "partial_json": "{}"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
        named=True,
    )  # fmt: skip


def _gemini(*, name: str = "f", finish: str = "STOP", rid: str = "g1") -> bytes:
    part = {"functionCall": {"name": name, "args": {}}}
    cand = {"content": {"role": "model", "parts": [part]}, "finishReason": finish}
    return _body({"candidates": [cand], "responseId": rid})


def _gemini_stream(finish: str) -> str:
    cand = {"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": finish}
    return _sse({"candidates": [cand], "responseId": "g1"})


def _interactions(*, status: str = "requires_action", step_id: str = "c1") -> bytes:
    step = {"id": step_id, "type": "function_call", "name": "f", "arguments": {}}
    return _body({"id": "v1_X", "status": status, "steps": [step], "object": "interaction"})


def _interactions_stream(status: str) -> str:
    return _sse(
        {"interaction": {"id": "v1_X", "status": "in_progress"}, "event_type": "interaction.created"},
        {"interaction": {"id": "v1_X", "status": status}, "event_type": "interaction.completed"},
    )


# What the audit hashes of a turn (response id, call ids and names, raw stop reason, error fields), with
# a lone surrogate: every API, plain and streamed, error bodies too.
HOSTILE: dict[str, tuple[str, Any]] = {
    "chat-call-id": ("openai-chat", _chat(call_id="call_" + S)),
    "chat-call-name": ("openai-chat", _chat(name="f" + S)),
    "chat-response-id": ("openai-chat", _chat(rid="c" + S)),
    "chat-finish-reason": ("openai-chat", _chat(finish="stop" + S)),
    "chat-stream-id": ("openai-chat", Stream(_chat_chunks(rid="c" + S))),
    "chat-stream-name": ("openai-chat", Stream(_chat_chunks(name="f" + S))),
    "responses-call-id": ("openai-responses", _responses(call_id="call_" + S)),
    "responses-item-type": ("openai-responses", _responses(kind="x_call" + S)),
    "responses-stream-id": ("openai-responses", Stream(_responses_stream("r" + S))),
    "responses-error-type": (
        "openai-responses",
        ApiError(400, _body({"error": {"type": "invalid" + S, "code": "bad" + S, "message": "m"}})),
    ),
    "anthropic-tool-id": ("anthropic-messages", _anthropic(tid="toolu_" + S)),
    "anthropic-stop-reason": ("anthropic-messages", _anthropic(stop="tool_use" + S)),
    "anthropic-stream-name": ("anthropic-messages", Stream(_anthropic_stream("f" + S))),
    "gemini-call-name": ("gemini-generate", _gemini(name="f" + S)),
    "gemini-response-id": ("gemini-generate", _gemini(rid="g" + S)),
    "gemini-stream-finish": ("gemini-generate", Stream(_gemini_stream("STOP" + S))),
    "gemini-error-status": (
        "gemini-generate",
        ApiError(400, _body({"error": {"code": 400, "status": "INVALID" + S, "message": "m"}})),
    ),
    "interactions-step-id": ("gemini-interactions", _interactions(step_id="c" + S)),
    "interactions-status": ("gemini-interactions", _interactions(status="completed" + S)),
    "interactions-stream-status": ("gemini-interactions", Stream(_interactions_stream("done" + S))),
}


def _registry(ran: list[str]) -> cb.Registry:
    def handler(args: Args, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(ctx.call_id)
        return {}

    return cb.Registry(
        [cb.ToolSpec(name="f", description="t", params=Args, handler=handler, schema_version="v1")]
    )


# Failures, truncations and refusals keep what they are, their naming strings escaped (a stop reason with
# a surrogate is an unknown one; the 400s here stay API_ERROR): a 429 is still retried (D26).
KEPT = {
    "chat-finish-reason": "UNKNOWN_STOP_REASON",
    "responses-item-type": "UNEXPECTED_TOOL_CALL",
    "responses-error-type": "API_ERROR",
    "anthropic-stop-reason": "UNKNOWN_STOP_REASON",
    "gemini-stream-finish": "UNKNOWN_STOP_REASON",
    "gemini-error-status": "API_ERROR",
    "interactions-status": "UNKNOWN_STOP_REASON",
    "interactions-stream-status": "UNKNOWN_STOP_REASON",
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_turn_named_by_a_lone_surrogate_is_a_malformed_response(case: str) -> None:
    """Finding 1: an Outcome, not CanonicalizationError; one paid request, no handler, not retried."""
    api, first = HOSTILE[case]
    ran: list[str] = []
    store = stores.open("memory:")
    model = ScriptedModel(api, [first, first, first])
    out = cb.Runner(model=model, registry=_registry(ran), store=store).run_sync(
        input="go", tenant="t", subject="s"
    )
    assert (out.state.value, out.reason) == ("FAILED", KEPT.get(case, "MALFORMED_RESPONSE"))
    assert ran == []
    assert len(model.requests) == 1  # not retried: the same response would come back
    assert store.list_operations(limit=1)[0]["state"] == "FAILED"  # nothing left to pay for again
    assert verify_operation(store, out.operation_id) == []  # the chain holds the failed turn


def test_the_reviewers_resume_loop_is_gone() -> None:
    """r5's repro: the stored operation was MODEL_REQUESTED and each resume paid and raised again."""
    api, first = HOSTILE["chat-call-id"]
    store = stores.open("memory:")
    model = ScriptedModel(api, [first, first, first])
    runner = cb.Runner(model=model, registry=_registry([]), store=store)
    out = runner.run_sync(input="go", tenant="t", subject="s")
    with pytest.raises(cb.UsageError):  # finished: nothing to resume, and no model request made
        runner.resume_sync(out.operation_id, [])
    assert len(model.requests) == 1


def test_a_worker_finishes_the_operation_instead_of_dying() -> None:
    """Finding 1: Worker.handle catches only UsageError/StoreError; the turn no longer raises."""
    api, first = HOSTILE["chat-call-id"]
    store = stores.open("memory:")
    reg = _registry([])
    op = App(reg, ScriptedModel(api, [])).runner(store).submit("go", "t", "s")
    model = ScriptedModel(api, [first])
    worker = Worker(App(reg, model), store, lease_s=5, poll_s=0.01)
    stats = asyncio.run(worker.run(max_operations=1, idle_exit_s=0.5))
    assert stats.errors == 0 and stats.outcomes == {op: "FAILED"}
    assert len(model.requests) == 1


def test_a_surrogate_pair_split_across_text_deltas_still_joins() -> None:
    """The check is on the finished turn, never per event: a character outside the BMP whose escaped
    halves arrive in two deltas is one character (join_fragments), and the run completes."""

    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {"id": "c1", "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip

    raw = _sse(
        chunk({"role": "assistant", "content": "a\ud83d"}, None),
        chunk({"content": "\ude00b"}, None),
        chunk({}, "stop"),
        "[DONE]",
    )
    out = cb.Runner(model=ScriptedModel("openai-chat", [Stream(raw)]), registry=_registry([])).run_sync(
        input="go", tenant="t", subject="s"
    )
    assert (out.state.value, out.text) == ("COMPLETED", "a\U0001f600b")


@pytest.mark.parametrize("url", ["memory:", "sqlite"])
def test_a_lone_surrogate_in_final_text_is_kept_as_read(url: str, tmp_path: Path) -> None:
    """Text is not a name the audit hashes: the answer completes with the text as sent, stored and
    read back (the stores write JSON escaped)."""
    store = stores.open(f"sqlite:///{tmp_path}/cb.db" if url == "sqlite" else url)
    body = _body({"id": "c1", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "a" + S + "b"}, "finish_reason": "stop"}
    ]})  # fmt: skip
    out = cb.Runner(model=ScriptedModel("openai-chat", [body]), registry=_registry([]), store=store).run_sync(
        input="go", tenant="t", subject="s"
    )
    assert (out.state.value, out.text) == ("COMPLETED", "a" + S + "b")


def test_a_lone_surrogate_in_arguments_refuses_that_call() -> None:
    """Arguments stay per call: INVALID_ARGUMENTS to the model (r1), the turn itself is readable."""
    ran: list[str] = []
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": json.dumps({"x": S})}}
    ]}  # fmt: skip
    first = _body({"id": "c1", "object": "chat.completion",
                   "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]})  # fmt: skip
    final = _body({"id": "c2", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}
    ]})  # fmt: skip
    model = ScriptedModel("openai-chat", [first, final])
    out = cb.Runner(model=model, registry=_registry(ran)).run_sync(input="go", tenant="t", subject="s")
    assert out.state.value == "COMPLETED" and ran == []
    assert "INVALID_ARGUMENTS" in json.dumps(model.requests[1])


# ---- readable_turn --------------------------------------------------------------------------------


def _turn(**changes: Any) -> ModelTurn:
    call = ToolCall("openai", "openai-chat", "c1", "call_1", "f", "{}", {}, None, 0)
    base: dict[str, Any] = dict(
        api="openai-chat", response_id="c1", finish=Finish.TOOL_PROPOSALS, raw_stop_reason="tool_calls",
        reason=None, calls=(call,), text="t", refusal=None, usage=Usage(3, 4),
        continuation=({"role": "assistant"},), provenance=Provenance("openai", "openai-chat", "m", "r"),
        raw_sha256="ab" * 32,
    )  # fmt: skip
    base.update(changes)
    return ModelTurn(**base)


def test_readable_turn_leaves_a_clean_turn_alone() -> None:
    from callbound.adapters.base import readable_turn  # here: the module collects without the fix too

    turn = _turn(text="a" + S)  # text is not checked
    assert readable_turn(turn) is turn


def test_readable_turn_keeps_what_it_can_show() -> None:
    from callbound.adapters.base import readable_turn

    bad_call = ToolCall("openai", "openai-chat", "c1", "call_" + S, "f", "{}", {}, None, 0)
    failure = Failure("http", True, 503, "type" + S, "code")
    turn = readable_turn(
        _turn(response_id="c" + S, raw_stop_reason="x" + S, calls=(bad_call,), failure=failure)
    )
    assert turn.finish is Finish.API_FAILURE and turn.reason == "malformed_response"
    assert turn.response_id == "cb:" + "ab" * 8  # D7's synthetic id
    assert turn.raw_stop_reason == "x\\ud800"  # what came, escaped
    assert turn.calls == () and turn.continuation == ()  # nothing runs, nothing is resent
    assert (turn.text, turn.usage) == ("t", Usage(3, 4))  # D27: the paid usage still counts
    assert turn.failure == Failure("status", False, 503, "type\\ud800", "lone_surrogate")


# ---- finding 2: a list or object where a name goes ------------------------------------------------


def _chat_finish(reason: Any, then: Any = None) -> bytes:
    def chunk(delta: dict[str, Any], finish: Any) -> dict[str, Any]:
        return {"id": "c1", "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip

    events: list[Any] = [chunk({"role": "assistant", "content": "hi"}, reason)]
    if then is not None:
        events.append(chunk({}, then))
    return _sse(*events, "[DONE]").encode()


@pytest.mark.parametrize("reason", [{}, [], {"a": 1}, ["stop"], 5, True])
def test_a_chat_stream_finish_reason_that_is_no_text_is_unknown(reason: Any) -> None:
    turn, _ = streaming.fed(get("openai-chat"), _chat_finish(reason))
    assert (turn.finish, turn.reason, turn.raw_stop_reason) == (
        Finish.API_FAILURE,
        "unknown_stop_reason",
        None,
    )
    model = ScriptedModel("openai-chat", [_chat_finish(reason).decode()] * 4)
    out = cb.Runner(model=model, registry=_registry([])).run_sync(input="go", tenant="t", subject="s")
    assert (out.state.value, out.reason, len(model.requests)) == ("FAILED", "UNKNOWN_STOP_REASON", 1)


@pytest.mark.parametrize("blank", [{}, [], 0])
def test_an_empty_finish_reason_is_no_finish_as_the_sdk_reads_it(blank: Any) -> None:
    """As "" and "null" (NO_FINISH): a middle chunk's empty value hides no real "stop" after it."""
    turn, _ = streaming.fed(get("openai-chat"), _chat_finish(blank, then="stop"))
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "hi")


@pytest.mark.parametrize("kind", [["a"], {"a": 1}, {}, []])
def test_a_responses_stream_event_type_that_is_no_text_is_an_unknown_event(kind: Any) -> None:
    created = {"type": "response.created", "response": {"id": "r1", "status": "in_progress", "output": []}}
    done = {"type": "response.completed", "response": {"id": "r1", "status": "completed", "output": []}}
    raw = _sse(created, {"type": kind, "output_index": 0}, done).encode()
    turn, _ = streaming.fed(get("openai-responses"), raw)
    assert (turn.finish, turn.response_id) == (Finish.FINAL_TEXT, "r1")


@pytest.mark.parametrize("kind", [{}, [], ["message"]])
def test_a_responses_output_item_type_that_is_no_text_is_an_unknown_type(kind: Any) -> None:
    resp = get("openai-responses")
    plain = resp.parse_response(
        _body({"id": "r1", "status": "completed", "output": [{"type": kind, "id": "x"}]})
    )
    assert plain.finish is Finish.FINAL_TEXT  # as an item of a type callbound does not know, without call_id
    waiting = _body({"id": "r1", "status": "completed", "output": [{"type": kind, "call_id": "c1"}]})
    turn = resp.parse_response(waiting)  # one with a call_id to answer: a client action of a newer API
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "unexpected_tool_call")


@pytest.mark.parametrize("bad", [{}, ["c1"]])
def test_responses_client_actions_with_ids_that_are_no_text(bad: Any) -> None:
    """The ids _pending_client_action pairs (call_id with its _output, an MCP request with its mcp_call)
    were set members too: no TypeError, and an id that is no text answers nothing (fail closed)."""
    resp = get("openai-responses")
    for output in (
        [{"type": "custom_tool_call", "call_id": bad}, {"type": "custom_tool_call_output", "call_id": bad}],
        [{"type": "mcp_approval_request", "id": bad}, {"type": "mcp_call", "approval_request_id": bad}],
    ):
        turn = resp.parse_response(_body({"id": "r1", "status": "completed", "output": output}))
        assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "unexpected_tool_call")


def test_a_responses_snapshot_item_id_that_is_no_text() -> None:
    """The terminal snapshot's items, matched to streamed ones by id (``_final_output``)."""
    msg = {"type": "message", "id": {}, "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": "hi", "annotations": []}]}  # fmt: skip
    raw = _sse(
        {"type": "response.created", "response": {"id": "r1", "status": "in_progress", "output": []}},
        {"type": "response.completed", "response": {"id": "r1", "status": "completed", "output": [msg]}},
    ).encode()
    turn, _ = streaming.fed(get("openai-responses"), raw)
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "hi")


@pytest.mark.parametrize("bad", [{}, ["c1"]])
def test_check_request_reads_call_ids_that_are_no_text(bad: Any) -> None:
    """ScriptedModel's request checks (D24) on prior messages (D25): ProtocolViolation, not TypeError."""
    resp = get("openai-responses")
    for items in (
        [{"type": "function_call", "call_id": bad, "name": "f", "arguments": "{}"}],
        [{"type": "function_call_output", "call_id": bad, "output": "x"}],
    ):
        with pytest.raises(ProtocolViolation):
            resp.check_request({"input": items})
    gemini = get("gemini-generate")
    previous = gemini.parse_response(_gemini())  # a call without id: D7's synthetic id
    assert previous.calls[0].synthetic_id
    contents = [
        {"role": "user", "parts": [{"text": "go"}]},
        previous.continuation[0],
        {"role": "user", "parts": [{"functionResponse": {"id": bad, "name": "f", "response": {}}}]},
    ]
    gemini.check_request({"contents": contents}, previous)  # an id that is no text is no synthetic id


def test_no_adapter_raises_type_error_on_the_reviewers_inputs(caplog: pytest.LogCaptureFixture) -> None:
    """r5's repro_unhashable.py: each input, through a run, ends on the first request."""
    caplog.set_level(logging.CRITICAL)
    cases = [
        ("openai-chat", _chat_finish({}).decode(), "UNKNOWN_STOP_REASON"),
        ("openai-responses", _sse(
            {"type": "response.created", "response": {"id": "r1", "status": "in_progress", "output": []}},
            {"type": ["a"], "output_index": 0},
            {"type": "response.completed", "response": {"id": "r1", "status": "completed", "output": []}},
        ), None),
        ("openai-responses", _body({"id": "r1", "status": "completed", "output": [{"type": {}, "id": "x"}]}), None),
    ]  # fmt: skip
    for api, raw, reason in cases:
        model = ScriptedModel(api, [raw] * 4)
        out = cb.Runner(model=model, registry=_registry([])).run_sync(input="go", tenant="t", subject="s")
        assert (out.reason, len(model.requests)) == (reason, 1)
