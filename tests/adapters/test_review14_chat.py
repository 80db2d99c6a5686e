"""Review 14: OpenAI Chat Completions from compatible servers.

1. ``finish_reason: ""`` (Ollama issue 4357, SGLang issue 3912) or ``"null"`` (KoboldCpp) on middle
   chunks is no finish_reason: the real one that follows decides the turn. A plain body whose
   finish_reason is ``""`` stays no success (D1: only an explicit completion is one).
2. Tool calls without ids (``"id": ""`` or no id key: Gemini's OpenAI-compatible endpoint, WIRE.md 2.6)
   are answered with ``tool_call_id: ""`` (D7: never a made-up id), and ``check_request`` accepts one
   such answer per id-less call while still refusing a missing, extra or unknown answer. A call
   streamed without an id key is rebuilt without one, as the plain body holds it.
3. Mistral's ``finish_reason: "model_length"`` (context window reached) is
   TRUNCATED(context_window_exceeded) → INCOMPLETE, as Anthropic's ``model_context_window_exceeded``.
4. Two whole calls sent at index 0 without ids stay two calls; the same call sent twice is not two.

Every body is a small synthetic one written for the test; the comment above each test names the
recording, issue or documentation whose shape it mirrors.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

import callbound as cb
from callbound.adapters import get
from callbound.core.errors import ProtocolViolation
from callbound.core.types import CallReady, Finish, ModelTurn, ok_result
from callbound.testing import FakeClock, ScriptedModel, Stream
from tests.adapters.streaming import fed

CHAT = get("openai-chat")


class Lookup(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int


def run(*responses: Any) -> tuple[cb.Outcome, list[int], list[dict[str, Any]]]:
    """A run through ScriptedModel with its request checks on (D24)."""
    ran: list[int] = []

    def handler(args: Lookup, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.a)
        return {"got": args.a}

    spec = cb.ToolSpec(name="f", description="f", params=Lookup, handler=handler, schema_version="1")
    model = ScriptedModel("openai-chat", list(responses))
    runner = cb.Runner(model=model, registry=cb.Registry([spec]), clock=FakeClock())
    return runner.run_sync("go", tenant="t", subject="s"), ran, model.requests


def sse(*events: dict[str, Any]) -> bytes:
    out = "".join(f"data: {json.dumps(e, separators=(',', ':'))}\n\n" for e in events)
    return (out + "data: [DONE]\n\n").encode()


def chunk(delta: dict[str, Any], finish: Any = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-693",
        "object": "chat.completion.chunk",
        "model": "mistral:latest",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def body(message: dict[str, Any], finish: str, rid: str = "r1") -> dict[str, Any]:
    msg = {"role": "assistant", "content": None, **message}
    return {"id": rid, "model": "m", "choices": [{"index": 0, "message": msg, "finish_reason": finish}]}


FINAL = body({"content": "done"}, "stop", "r2")


def call(cid: str | None, a: int, index: int | None = None, name: str = "f") -> dict[str, Any]:
    out: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": json.dumps({"a": a})}}
    if cid is not None:
        out["id"] = cid
    if index is not None:
        out["index"] = index
    return out


# ----------------------------------------------------------------- 1. "" and "null" are no finish_reason


# Ollama issue 4357 (finish_reason "" on every chunk before the last "stop"), SGLang issue 3912, and
# KoboldCpp's string "null".
@pytest.mark.parametrize("blank", ["", "null"])
def test_blank_finish_reason_on_middle_chunks_does_not_hide_the_real_stop(blank: str) -> None:
    raw = sse(
        chunk({"role": "assistant", "content": " Hello"}, blank),
        chunk({"content": " there"}, blank),
        chunk({"content": ""}, "stop"),
    )
    turn, _ = fed(CHAT, raw)
    assert (turn.finish, turn.raw_stop_reason, turn.reason, turn.text) == (
        Finish.FINAL_TEXT,
        "stop",
        None,
        " Hello there",
    )


@pytest.mark.parametrize("blank", ["", "null"])
def test_blank_finish_reason_before_tool_calls_lets_the_calls_run(blank: str) -> None:
    raw = sse(
        chunk({"role": "assistant", "content": ""}, blank),
        chunk({"tool_calls": [call("call_1", 1, index=0)]}, blank),
        chunk({}, "tool_calls"),
    )
    turn, progress = fed(CHAT, raw)
    assert (turn.finish, turn.raw_stop_reason) == (Finish.TOOL_PROPOSALS, "tool_calls")
    assert [p.call_id for p in progress if isinstance(p, CallReady)] == ["call_1"]
    out, ran, _ = run(Stream(raw), FINAL)
    assert (out.state.value, ran) == ("COMPLETED", [1])


@pytest.mark.parametrize("blank", ["", "null"])
def test_a_stream_whose_only_finish_reasons_are_blank_reads_as_the_plain_body(blank: str) -> None:
    # No real finish_reason came before [DONE] (qualcomm/GenieX issue 1243 sends "" on every chunk, the
    # last included): never a completion (D1), and, as the same body plain, not a cut to be sent and
    # paid for again (regression review, round 14).
    turn, _ = fed(CHAT, sse(chunk({"role": "assistant", "content": "hi"}, blank), chunk({}, blank)))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (
        Finish.API_FAILURE,
        blank,
        "unknown_stop_reason",
    )
    assert turn.failure is not None and not turn.failure.retryable


def test_a_stream_cut_after_blank_finish_reasons_is_still_cut() -> None:
    cut = sse(chunk({"role": "assistant", "content": "hi"}, "")).removesuffix(b"data: [DONE]\n\n")
    turn, _ = fed(CHAT, cut)
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "stream_interrupted")


def test_content_filter_after_a_blank_finish_reason_still_wins() -> None:
    turn, _ = fed(CHAT, sse(chunk({"content": "x"}, ""), chunk({}, "stop"), chunk({}, "content_filter")))
    assert (turn.finish, turn.reason) == (Finish.REFUSAL, "content_filter")


@pytest.mark.parametrize("blank", ["", "null"])
def test_plain_body_with_a_blank_finish_reason_is_no_success(blank: str) -> None:
    # D1: only an explicit completion is success; a plain body has no later chunk to wait for.
    turn = CHAT.parse_response(body({"content": "hi"}, blank))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (
        Finish.API_FAILURE,
        blank,
        "unknown_stop_reason",
    )


# ------------------------------------------------------------------------ 2. tool calls without ids


# Gemini's OpenAI-compatible endpoint returns "id": "" (WIRE.md 2.6; pydantic-ai
# tests/models/cassettes/test_openai/test_compatible_api_with_tool_calls_without_id.yaml).
def test_two_calls_with_empty_ids_run_and_are_answered_with_empty_ids() -> None:
    out, ran, requests = run(body({"tool_calls": [call("", 1), call("", 2)]}, "tool_calls"), FINAL)
    assert (out.state.value, sorted(ran)) == ("COMPLETED", [1, 2])  # reads run concurrently (D15)
    tools = [m for m in requests[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["", ""]  # D7: what the provider sent, nothing made up
    # told apart by position only: the answers come in the order of the calls
    assert [json.loads(m["content"])["data"] for m in tools] == [{"got": 1}, {"got": 2}]


def test_a_call_with_no_id_key_runs_and_is_answered_with_an_empty_id() -> None:
    out, ran, requests = run(body({"tool_calls": [call(None, 1)]}, "tool_calls"), FINAL)
    assert (out.state.value, ran) == ("COMPLETED", [1])
    assert requests[1]["messages"][-1]["tool_call_id"] == ""
    assert "id" not in requests[1]["messages"][-2]["tool_calls"][0]  # D8: echoed as received


def test_id_less_calls_beside_a_real_id_are_answered() -> None:
    out, ran, _ = run(
        body({"tool_calls": [call("call_9", 1), call("", 2), call(None, 3)]}, "tool_calls"), FINAL
    )
    assert (out.state.value, sorted(ran)) == ("COMPLETED", [1, 2, 3])


def check(tool_calls: list[dict[str, Any]], answers: list[Any]) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": tool_calls},
        *({"role": "tool", "tool_call_id": cid, "content": "{}"} for cid in answers),
        {"role": "user", "content": "next"},
    ]
    CHAT.check_request({"messages": messages})


def test_check_request_accepts_one_empty_answer_per_id_less_call() -> None:
    check([call("", 1), call(None, 2)], ["", ""])
    check([call("", 1), call("call_2", 2)], ["call_2", ""])


@pytest.mark.parametrize(
    ("tool_calls", "answers", "says"),
    [
        ([call("", 1), call("", 2)], [""], "no tool message answers a call without an id"),
        ([call(None, 1)], [], "no tool message answers a call without an id"),
        ([call("", 1)], ["", ""], "'' is answered twice"),
        ([call("call_1", 1)], [""], "unknown tool_call_id ''"),
        ([call("", 1)], ["call_1"], "unknown tool_call_id 'call_1'"),
        ([call("", 1)], [None], "unknown tool_call_id None"),
        ([call("call_1", 1), call("", 2)], ["", ""], "'' is answered twice"),
        ([call("call_1", 1), call("", 2)], [""], "no tool message answers call_1"),
    ],
)
def test_check_request_still_refuses_a_missing_extra_or_unknown_answer(
    tool_calls: list[dict[str, Any]], answers: list[Any], says: str
) -> None:
    with pytest.raises(ProtocolViolation, match=says):
        check(tool_calls, answers)


def stream_of(*frags: dict[str, Any]) -> bytes:
    return sse(chunk({"role": "assistant", "tool_calls": list(frags)}), chunk({}, "tool_calls"))


def test_a_call_streamed_without_an_id_is_rebuilt_as_the_plain_body_holds_it() -> None:
    # The plain body echoes an id-less call with no id key (D8); the stream rebuilt it with "id": "".
    turn, _ = fed(CHAT, stream_of(call(None, 1, index=0)))
    sent = turn.continuation[0]["tool_calls"][0]
    assert "id" not in sent
    plain = CHAT.parse_response(body({"tool_calls": [{k: v for k, v in sent.items()}]}, "tool_calls"))
    assert [(c.name, c.arguments) for c in plain.calls] == [(c.name, c.arguments) for c in turn.calls]
    # "id": "" sent is kept as sent, and a real id on a later fragment still wins over it
    turn, _ = fed(CHAT, stream_of(call("", 1, index=0)))
    assert turn.continuation[0]["tool_calls"][0]["id"] == ""
    late = {"index": 0, "id": "call_7", "function": {"arguments": ""}}
    turn, _ = fed(CHAT, stream_of({"index": 0, "id": "", "function": {"name": "f", "arguments": "{}"}}, late))
    assert turn.continuation[0]["tool_calls"][0]["id"] == "call_7"
    assert turn.calls[0].call_id == "call_7"


def test_a_streamed_id_less_call_runs_through_the_runner() -> None:
    out, ran, requests = run(Stream(stream_of(call(None, 4, index=0))), FINAL)
    assert (out.state.value, ran) == ("COMPLETED", [4])
    assert requests[1]["messages"][-1]["tool_call_id"] == ""


# ------------------------------------------------------------------------------- 3. model_length


# Mistral's finish_reason enum (stop, length, model_length, error, tool_calls); the shape of a live
# voxtral-small-latest answer that filled its 32768-token window (prompt 32424 + completion 344).
def model_length_body() -> dict[str, Any]:
    out = body({"content": "The transcript continues"}, "model_length")
    out["usage"] = {"prompt_tokens": 32424, "completion_tokens": 344, "total_tokens": 32768}
    return out


def test_model_length_is_truncated_context_window_exceeded() -> None:
    turn = CHAT.parse_response(model_length_body())
    assert (turn.finish, turn.raw_stop_reason, turn.reason, turn.failure) == (
        Finish.TRUNCATED,
        "model_length",
        "context_window_exceeded",
        None,
    )
    out, ran, _ = run(model_length_body())
    assert (out.state.value, out.reason, ran) == ("INCOMPLETE", "CONTEXT_WINDOW_EXCEEDED", [])


def test_model_length_streamed_reads_the_same() -> None:
    turn, _ = fed(CHAT, sse(chunk({"role": "assistant", "content": "The"}), chunk({}, "model_length")))
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "context_window_exceeded")


def test_model_length_with_complete_calls_runs_none_of_them() -> None:
    out, ran, _ = run(body({"tool_calls": [call("call_1", 1)]}, "model_length"))
    assert (out.state.value, ran) == ("INCOMPLETE", [])


# ------------------------------------------------------------ 4. whole id-less calls reusing index 0


def named(name: str, arguments: Any, cid: str | None = "") -> dict[str, Any]:
    out: dict[str, Any] = {"index": 0, "type": "function", "function": {"name": name, "arguments": arguments}}
    if cid is not None:
        out["id"] = cid
    return out


def two_chunks(first: dict[str, Any], second: dict[str, Any]) -> bytes:
    return sse(
        chunk({"role": "assistant", "tool_calls": [first]}),
        chunk({"tool_calls": [second]}),
        chunk({}, "tool_calls"),
    )


def summary(turn: ModelTurn) -> list[tuple[str, str, Any, str | None]]:
    return [(c.call_id, c.name, c.arguments, c.arguments_error) for c in turn.calls]


# Ollama issue 15457 (every parallel call whole at index 0), with the ids Gemini-compatible servers
# leave empty: two whole calls, as a plain body with the same two calls holds them.
@pytest.mark.parametrize("cid", ["", None])
def test_two_whole_id_less_calls_at_index_0_stay_two(cid: str | None) -> None:
    raw = two_chunks(named("get_weather", '{"city":"Oslo"}', cid), named("get_time", '{"tz":"CET"}', cid))
    turn, progress = fed(CHAT, raw)
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert summary(turn) == [
        ("chatcmpl-693:0", "get_weather", {"city": "Oslo"}, None),
        ("chatcmpl-693:1", "get_time", {"tz": "CET"}, None),
    ]
    assert [p.call_id for p in progress if isinstance(p, CallReady)] == ["chatcmpl-693:0", "chatcmpl-693:1"]
    plain = CHAT.parse_response(
        body({"tool_calls": turn.continuation[0]["tool_calls"]}, "tool_calls", "chatcmpl-693")
    )
    assert summary(plain) == summary(turn)


def test_same_tool_twice_with_other_arguments_at_index_0_stays_two() -> None:
    turn, _ = fed(CHAT, two_chunks(named("f", {"a": 1}), named("f", '{"a": 2}')))
    assert [(c.name, c.arguments) for c in turn.calls] == [("f", {"a": 1}), ("f", {"a": 2})]


def test_the_same_whole_call_sent_twice_is_not_two_calls() -> None:
    # A server that repeats the call it already sent: never two runs (the text joined twice does
    # not parse, fail closed; an object sent again is kept once).
    turn, _ = fed(CHAT, two_chunks(named("f", '{"a":1}'), named("f", '{"a": 1}')))
    assert len(turn.calls) == 1 and turn.calls[0].arguments_error is not None
    turn, _ = fed(CHAT, two_chunks(named("f", {"a": 1}), named("f", {"a": 1})))
    assert [(c.name, c.arguments) for c in turn.calls] == [("f", {"a": 1})]


@pytest.mark.parametrize("second", [named("f", ""), named("f", '{"a"'), named("g", "  ")])
def test_a_name_repeated_with_no_whole_arguments_opens_no_call(second: dict[str, Any]) -> None:
    # Some proxies repeat the name on later fragments of one call: only a whole call is another one.
    turn, _ = fed(CHAT, two_chunks(named("f", '{"a":1}'), second))
    assert len(turn.calls) == 1


def test_a_partial_first_call_is_continued_not_split() -> None:
    turn, _ = fed(
        CHAT, two_chunks(named("f", '{"a":'), {"index": 0, "function": {"name": "f", "arguments": "1}"}})
    )
    assert [(c.name, c.arguments) for c in turn.calls] == [("f", {"a": 1})]


def test_two_whole_id_less_calls_at_index_0_run_and_are_answered() -> None:
    raw = two_chunks(named("f", '{"a":1}'), named("f", '{"a":2}'))
    out, ran, requests = run(Stream(raw), FINAL)
    assert (out.state.value, sorted(ran)) == ("COMPLETED", [1, 2])
    assert [m["tool_call_id"] for m in requests[1]["messages"] if m["role"] == "tool"] == ["", ""]


def test_results_answer_id_less_calls_in_order() -> None:
    turn = CHAT.parse_response(body({"tool_calls": [call("", 1), call(None, 2)]}, "tool_calls"))
    items = CHAT.result_items(turn, [(c, ok_result({"n": i})) for i, c in enumerate(turn.calls)])
    assert [(i["tool_call_id"], json.loads(i["content"])["data"]) for i in items] == [
        ("", {"n": 0}),
        ("", {"n": 1}),
    ]


def test_a_growing_snapshot_of_one_id_less_call_is_not_a_second_call() -> None:
    # A server streaming one call as whole snapshots that grow ({"to":"bob"}, then {"to":"bob",
    # "amount":10}): two calls would run the first with half its arguments. Joined, it fails closed
    # (regression review, round 14).
    turn, _ = fed(CHAT, two_chunks(named("pay", '{"to":"bob"}'), named("pay", '{"to":"bob","amount":10}')))
    assert len(turn.calls) == 1 and turn.calls[0].arguments_error is not None  # refused, never run (D5)
