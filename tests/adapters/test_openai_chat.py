"""OpenAI Chat Completions adapter: stop mapping, recordings, streaming edges, results and request checks."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callbound.adapters import get
from callbound.adapters.base import StreamCaps, body_bytes, result_text
from callbound.adapters.openai_chat import ADAPTER
from callbound.adapters.sse import SSEReader, decode_event, iter_payloads
from callbound.core.errors import ProtocolViolation
from callbound.core.registry import ToolDeclaration
from callbound.core.types import (
    ArgumentsProgress,
    CallReady,
    CallStarted,
    Finish,
    ModelTurn,
    Progress,
    RawFailure,
    error_result,
    ok_result,
)
from tests.adapters import streaming
from tests.recordings import load_cassette, read_bytes, request_body, response_body, status_code

DATA = Path(__file__).parent / "data" / "openai_chat"
CHAT = "openai-chat"


# ---- helpers ----------------------------------------------------------------------------------------


def body(
    message: dict[str, Any] | None, finish: str | None, *, rid: str | None = "chatcmpl-1"
) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if message is not None:
        choice["message"] = {"role": "assistant", "content": None, "refusal": None, **message}
    out: dict[str, Any] = {"object": "chat.completion", "model": "gpt-x", "choices": [choice]}
    if rid is not None:
        out["id"] = rid
    out["usage"] = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    return out


def tool_call(cid: str, name: str, args: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **top: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {
        "id": "chatcmpl-S",
        "object": "chat.completion.chunk",
        "model": "gpt-x",
        "choices": choices,
        **top,
    }


def frag(index: int, args: str, cid: str | None = None, name: str | None = None) -> dict[str, Any]:
    f: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if cid is not None:
        f.update({"id": cid, "type": "function"})
        f["function"]["name"] = name
    return chunk({"tool_calls": [f]})


def sse(*events: dict[str, Any] | str) -> bytes:
    parts = [f"data: {e if isinstance(e, str) else json.dumps(e, ensure_ascii=False)}\n\n" for e in events]
    return "".join(parts).encode("utf-8")


def run_stream(chunks: Iterable[bytes], caps: StreamCaps | None = None) -> tuple[ModelTurn, list[Progress]]:
    chunks = list(chunks)
    asm = ADAPTER.stream_assembler(caps)
    progress: list[Progress] = []
    for payload in iter_payloads(chunks):
        progress += asm.feed(payload)
    return asm.finish(hashlib.sha256(b"".join(chunks)).hexdigest()), progress


def summary(turn: ModelTurn) -> tuple[Any, ...]:
    calls = [(c.call_id, c.name, c.arguments_raw, c.arguments, c.arguments_error) for c in turn.calls]
    return (turn.finish, turn.raw_stop_reason, turn.reason, turn.response_id, calls, turn.text, turn.refusal,
            turn.usage, turn.continuation)  # fmt: skip


TWO_CALLS: list[dict[str, Any] | str] = [
    chunk({"role": "assistant", "content": None}),
    frag(0, "", "call_1", "get_weather"),
    frag(0, '{"city":"Oslo"}'),
    frag(1, "", "call_2", "get_weather"),
    frag(1, '{"city":"Rome"}'),
    chunk({}, "tool_calls"),
    chunk(None, usage={"prompt_tokens": 80, "completion_tokens": 40, "total_tokens": 120}),
    "[DONE]",
]


# ---- registry ---------------------------------------------------------------------------------------


def test_registry_resolves_the_module_adapter() -> None:
    adapter = get(CHAT)
    assert adapter is ADAPTER
    assert (adapter.api, adapter.provider) == ("openai-chat", "openai")
    assert adapter.revision.startswith("openai-chat/")


# ---- finish mapping (D1, D31), one test per row -----------------------------------------------------


def test_stop_without_calls_is_final_text() -> None:
    turn = ADAPTER.parse_response(body({"content": "Hello"}, "stop"))
    assert (turn.finish, turn.raw_stop_reason, turn.reason, turn.text) == (
        Finish.FINAL_TEXT,
        "stop",
        None,
        "Hello",
    )
    assert turn.calls == () and turn.failure is None
    assert turn.usage.input_tokens == 10 and turn.usage.output_tokens == 5


def test_stop_with_complete_calls_is_tool_proposals() -> None:
    # A forced tool_choice ends with finish_reason "stop" while tool_calls are present.
    turn = ADAPTER.parse_response(body({"tool_calls": [tool_call("call_1", "f", '{"a":1}')]}, "stop"))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.TOOL_PROPOSALS, "stop", None)
    assert [(c.call_id, c.name, c.arguments) for c in turn.calls] == [("call_1", "f", {"a": 1})]


def test_tool_calls_is_tool_proposals() -> None:
    calls = [tool_call("call_1", "get_weather", '{"city":"Oslo"}'), tool_call("call_2", "get_weather", "{}")]
    turn = ADAPTER.parse_response(body({"tool_calls": calls}, "tool_calls"))
    assert turn.finish is Finish.TOOL_PROPOSALS and turn.executable
    assert [(c.call_id, c.output_index, c.arguments) for c in turn.calls] == [
        ("call_1", 0, {"city": "Oslo"}),
        ("call_2", 1, {}),
    ]
    assert all(c.provider == "openai" and c.api == CHAT and c.response_id == "chatcmpl-1" for c in turn.calls)


def test_legacy_function_call_gets_a_synthetic_id() -> None:
    turn = ADAPTER.parse_response(
        body({"function_call": {"name": "f", "arguments": '{"x":2}'}}, "function_call")
    )
    assert (turn.finish, turn.raw_stop_reason) == (Finish.TOOL_PROPOSALS, "function_call")
    (call,) = turn.calls
    assert (call.call_id, call.synthetic_id, call.name, call.arguments) == (
        "chatcmpl-1:0",
        True,
        "f",
        {"x": 2},
    )


def test_function_call_finish_without_calls_never_reads_as_final() -> None:
    for finish in ("function_call", "tool_calls"):
        turn = ADAPTER.parse_response(body({"content": "hi"}, finish))
        assert turn.finish is Finish.API_FAILURE and turn.raw_stop_reason == finish
        assert turn.failure is not None and not turn.failure.retryable


def test_length_is_truncated_max_tokens() -> None:
    turn = ADAPTER.parse_response(body({"tool_calls": [tool_call("c", "f", '{"a": "unfini')]}, "length"))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.TRUNCATED, "length", "max_tokens")
    assert not turn.executable and turn.calls[0].arguments_error is not None


def test_content_filter_is_refusal() -> None:
    turn = ADAPTER.parse_response(body({"content": ""}, "content_filter"))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (
        Finish.REFUSAL,
        "content_filter",
        "content_filter",
    )


def test_refusal_field_wins_over_stop_and_calls() -> None:
    turn = ADAPTER.parse_response(body({"refusal": "I can't help with that."}, "stop"))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.REFUSAL, "stop", "refusal")
    assert turn.refusal == "I can't help with that."
    mixed = body({"refusal": "No.", "tool_calls": [tool_call("c", "f", "{}")]}, "tool_calls")
    turn = ADAPTER.parse_response(mixed)
    assert turn.finish is Finish.REFUSAL and not turn.executable


@pytest.mark.parametrize("finish", ["weird_new_reason", None])
def test_unknown_or_missing_finish_reason_is_unknown_stop_reason(finish: str | None) -> None:
    turn = ADAPTER.parse_response(body({"content": "x"}, finish))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (
        Finish.API_FAILURE,
        finish,
        "unknown_stop_reason",
    )
    assert turn.failure is not None and not turn.failure.retryable


def test_missing_response_id_is_synthetic_from_the_raw_bytes() -> None:
    raw = json.dumps(body({"tool_calls": [tool_call("", "f", "{}")]}, "tool_calls", rid=None)).encode()
    turn = ADAPTER.parse_response(raw)
    expected = "cb:" + hashlib.sha256(raw).hexdigest()[:16]
    assert turn.response_id == expected and turn.raw_sha256 == hashlib.sha256(raw).hexdigest()
    # An empty call id (OpenAI-compatible servers) becomes response_id:output_index (D7)...
    assert turn.calls[0].call_id == f"{expected}:0" and turn.calls[0].synthetic_id
    # ...and is never sent back: the tool message echoes what the provider sent.
    (item,) = ADAPTER.result_items(turn, [(turn.calls[0], ok_result(1))])
    assert item["tool_call_id"] == ""


def test_missing_usage_is_none_not_zero() -> None:
    data = body({"content": "x"}, "stop")
    del data["usage"]
    turn = ADAPTER.parse_response(data)
    assert turn.usage.input_tokens is None and turn.usage.output_tokens is None


def test_duplicate_call_ids_are_kept_for_the_dispatcher() -> None:
    calls = [tool_call("call_1", "f", '{"a":1}'), tool_call("call_1", "f", '{"a":2}')]
    turn = ADAPTER.parse_response(body({"tool_calls": calls}, "tool_calls"))
    assert [(c.call_id, c.arguments) for c in turn.calls] == [("call_1", {"a": 1}), ("call_1", {"a": 2})]


def test_bad_arguments_are_reported_not_repaired() -> None:
    raws = ['{"a":1,"a":2}', '{"a":NaN}', '{"n":9007199254740993}', "[1]", "{oops"]
    turn = ADAPTER.parse_response(
        body({"tool_calls": [tool_call(f"c{i}", "f", r) for i, r in enumerate(raws)]}, "tool_calls")
    )
    assert turn.finish is Finish.TOOL_PROPOSALS
    for call, raw in zip(turn.calls, raws, strict=True):
        assert call.arguments is None and call.arguments_error and call.arguments_raw == raw


# ---- error bodies and map_error (D26, D30, D32) -----------------------------------------------------


def test_error_body_without_status_uses_the_code() -> None:
    err = {"error": {"message": "You exceeded your quota", "type": "insufficient_quota", "param": None,
                     "code": "insufficient_quota"}}  # fmt: skip
    turn = ADAPTER.parse_response(err)
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (
        Finish.API_FAILURE,
        "insufficient_quota",
        "quota_exceeded",
    )
    assert turn.failure is not None and not turn.failure.retryable and turn.failure.status is None
    server = ADAPTER.parse_response(
        {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}}
    )
    assert (
        server.raw_stop_reason == "server_error" and server.failure is not None and server.failure.retryable
    )


def test_recorded_http_400_error() -> None:
    (inter,) = load_cassette("openai-chat/pydantic-ai__test_openai_o1_mini_system_role[developer].yaml")
    failure = RawFailure("http", status_code(inter), json.dumps(response_body(inter)).encode())
    turn = ADAPTER.map_error(failure, model="o1-mini")
    assert (turn.finish, turn.raw_stop_reason) == (Finish.API_FAILURE, "400")
    assert turn.failure is not None
    assert (turn.failure.retryable, turn.failure.status, turn.failure.error_type, turn.failure.error_code) == (
        False, 400, "invalid_request_error", "unsupported_value")  # fmt: skip
    assert turn.response_id.startswith("cb:") and turn.calls == () and turn.provenance.model == "o1-mini"


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(400, False), (401, False), (403, False), (404, False), (422, False), (408, True), (409, True),
     (429, True), (500, True), (502, True), (503, True), (529, True)],
)  # fmt: skip
def test_http_status_classification(status: int, retryable: bool) -> None:
    err = {"error": {"message": "m", "type": "t", "param": None, "code": None}}
    turn = ADAPTER.map_error(RawFailure("http", status, json.dumps(err)))
    assert turn.raw_stop_reason == str(status) and turn.failure is not None
    assert turn.failure.retryable is retryable and turn.failure.kind == "http"


def test_quota_429_is_not_retryable_and_retry_after_is_honoured() -> None:
    quota = {
        "error": {
            "message": "quota",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
    turn = ADAPTER.map_error(RawFailure("http", 429, json.dumps(quota)))
    assert turn.failure is not None and not turn.failure.retryable and turn.reason == "quota_exceeded"
    limited = {
        "error": {"message": "slow down", "type": "requests", "param": None, "code": "rate_limit_exceeded"}
    }
    turn = ADAPTER.map_error(RawFailure("http", 429, json.dumps(limited), {"Retry-After": "7"}))
    assert turn.failure is not None and turn.failure.retryable and turn.failure.retry_after_s == 7.0
    assert turn.reason == "rate_limited"


def test_transport_failures() -> None:
    html = ADAPTER.map_error(RawFailure("http", 502, b"<html>bad gateway</html>"))
    assert html.raw_stop_reason == "502" and html.failure is not None and html.failure.retryable
    for kind in ("connection", "timeout"):
        turn = ADAPTER.map_error(RawFailure(kind))
        assert turn.finish is Finish.API_FAILURE and turn.failure is not None and turn.failure.retryable
    cut = ADAPTER.map_error(RawFailure("stream_cut"))
    assert (cut.finish, cut.reason) == (Finish.TRUNCATED, "stream_interrupted")
    assert cut.failure is not None and cut.failure.retryable


# ---- recordings -------------------------------------------------------------------------------------


def test_recorded_parallel_calls_stream() -> None:
    raw = read_bytes("openai-chat/openai-python__f82268f2fefd__parse_multiple_pydantic_tools.sse.bin")
    turn, progress = run_stream([raw])
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.TOOL_PROPOSALS, "tool_calls", None)
    assert turn.response_id == "chatcmpl-ABfwAwrNePHUgBBezonVC6MX3zd63"
    assert turn.provenance.model == "gpt-4o-2024-08-06"
    assert [(c.call_id, c.name, c.arguments) for c in turn.calls] == [
        (
            "call_JMW1whyEaYG438VE1OIflxA2",
            "GetWeatherArgs",
            {"city": "Edinburgh", "country": "GB", "units": "c"},
        ),
        ("call_DNYTawLBoN8fj3KN6qU9N1Ou", "get_stock_price", {"ticker": "AAPL", "exchange": "NASDAQ"}),
    ]
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (149, 60)
    assert progress[0] == CallStarted("call_JMW1whyEaYG438VE1OIflxA2", "GetWeatherArgs")
    assert progress[-2:] == [
        CallReady("call_JMW1whyEaYG438VE1OIflxA2"),
        CallReady("call_DNYTawLBoN8fj3KN6qU9N1Ou"),
    ]
    sizes = [
        p.bytes for p in progress if isinstance(p, ArgumentsProgress) and p.call_id.startswith("call_JMW")
    ]
    assert sizes == sorted(sizes) and sizes[-1] == len(turn.calls[0].arguments_raw or "")


def test_recorded_strict_tool_stream() -> None:
    raw = read_bytes("openai-chat/openai-python__a247c49c5fcd__parse_strict_tools.sse.bin")
    turn, _ = run_stream([raw])
    assert turn.finish is Finish.TOOL_PROPOSALS and turn.raw_stop_reason == "tool_calls"
    assert [(c.call_id, c.name, c.arguments_raw) for c in turn.calls] == [
        ("call_CTf1nWJLqSeRgDqaCG27xZ74", "get_weather", '{"city":"San Francisco","state":"CA"}')
    ]
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (48, 19)


def test_recorded_refusal_stream() -> None:
    raw = read_bytes("openai-chat/openai-python__173417d55340__parse_pydantic_model_refusal.sse.bin")
    turn, _ = run_stream([raw])
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.REFUSAL, "stop", "refusal")
    assert turn.refusal == "I'm sorry, I can't assist with that request." and turn.calls == ()
    assert turn.continuation == ({"role": "assistant", "content": None, "refusal": turn.refusal},)


def test_recorded_tool_output_round_trip() -> None:
    first, second = load_cassette("openai-chat/pydantic-ai__test_openai_tool_output.yaml")
    turn = ADAPTER.parse_response(response_body(first))
    assert (turn.finish, turn.raw_stop_reason) == (Finish.TOOL_PROPOSALS, "tool_calls")
    assert [(c.call_id, c.name, c.arguments) for c in turn.calls] == [
        ("call_iXFttys57ap0o16JSlC8yhYo", "get_user_country", {})
    ]
    assert turn.response_id == "chatcmpl-BSXk0dWkG4hfPt0lph4oFO35iT73I"
    assert turn.continuation == (response_body(first)["choices"][0]["message"],)  # type: ignore[index]

    sent = request_body(second)
    ADAPTER.check_request(sent, turn)
    ours = ADAPTER.initial_items("What is the largest city in the user country?", [])
    ours += ADAPTER.turn_items(turn)
    ours += ADAPTER.result_items(turn, [(turn.calls[0], ok_result("Mexico"))])
    assert [m["role"] for m in ours] == [m["role"] for m in sent["messages"]]
    assert ours[1]["tool_calls"] == sent["messages"][1]["tool_calls"]
    assert ours[2]["tool_call_id"] == sent["messages"][2]["tool_call_id"]
    assert ours[2]["content"] == result_text(ok_result("Mexico"))
    ADAPTER.check_request({"messages": ours}, turn)

    final = ADAPTER.parse_response(response_body(second))
    assert final.finish is Finish.TOOL_PROPOSALS
    assert [(c.name, c.arguments) for c in final.calls] == [
        ("final_result", {"city": "Mexico City", "country": "Mexico"})
    ]


def test_recorded_stream_round_trip_rebuilds_the_exact_request() -> None:
    first, second = load_cassette("openai-chat/pydantic-ai__test_run_stream_sync_streams_real_model.yaml")
    turn, _ = run_stream([str(response_body(first)).encode()])
    assert (turn.finish, turn.raw_stop_reason) == (Finish.TOOL_PROPOSALS, "tool_calls")
    (call,) = turn.calls
    assert (call.call_id, call.name, call.arguments) == (
        "call_ZR5UUuTt3pf61kjwAJIYdVMj",
        "get_capital",
        {"country": "UK"},
    )

    sent = request_body(second)
    decl = ToolDeclaration("get_capital", "", sent["tools"][0]["function"]["parameters"])
    items = ADAPTER.initial_items("What is the capital of the UK? Use the tool, then answer.", [])
    items += ADAPTER.turn_items(turn)
    items += ADAPTER.result_items(turn, [(call, ok_result("London"))])
    ours = ADAPTER.build_request(items=items, tools=ADAPTER.render_tools([decl]),
                                 settings={"model": "gpt-4o-mini", "tool_choice": "auto"}, instructions=None,
                                 stream=True)  # fmt: skip
    # Everything but the tool result text (ours is canonical JSON of model_result) matches the recording.
    assert ours["messages"][2].pop("content") == '{"data":"London","ok":true}'
    sent["messages"][2].pop("content")
    assert ours == sent
    assert request_body(first)["stream_options"] == {"include_usage": True}

    final, _ = run_stream([str(response_body(second)).encode()])
    assert (final.finish, final.text, final.usage.input_tokens) == (
        Finish.FINAL_TEXT,
        "The capital of the UK is London.",
        78,
    )


# ---- streaming edges --------------------------------------------------------------------------------


def test_stream_progress_events_and_usage() -> None:
    turn, progress = run_stream([sse(*TWO_CALLS)])
    assert [(c.call_id, c.arguments) for c in turn.calls] == [
        ("call_1", {"city": "Oslo"}),
        ("call_2", {"city": "Rome"}),
    ]
    assert progress == [
        CallStarted("call_1", "get_weather"), ArgumentsProgress("call_1", 0), ArgumentsProgress("call_1", 15),
        CallStarted("call_2", "get_weather"), ArgumentsProgress("call_2", 0), ArgumentsProgress("call_2", 15),
        CallReady("call_1"), CallReady("call_2"),
    ]  # fmt: skip
    assert turn.usage.input_tokens == 80


def test_stream_empty_argument_string() -> None:
    turn, _ = run_stream([sse(frag(0, "", "call_e", "ping"), chunk({}, "tool_calls"), "[DONE]")])
    (call,) = turn.calls
    assert (call.arguments_raw, call.arguments, call.arguments_error) == ("", {}, None)
    assert turn.usage.input_tokens is None  # no usage chunk: unknown, not zero (D27)


def test_multibyte_character_split_across_deltas_and_byte_chunks() -> None:
    # "😀" arrives as a JSON surrogate-pair escape split across two deltas, and "ü" is split between
    # two byte chunks in the middle of its UTF-8 encoding.
    raw = sse(frag(0, '{"city": "Zü', "call_u", "f"), frag(0, 'rich \\ud83d'), frag(0, '\\ude00"}'),
              chunk({}, "tool_calls"), "[DONE]")  # fmt: skip
    cut = raw.index("ü".encode()) + 1
    reader = SSEReader()
    events = [decode_event(e) for e in reader.feed(raw[:cut])]
    events += [decode_event(e) for e in reader.feed(raw[cut:])]
    events += [decode_event(e) for e in reader.close()]
    asm = ADAPTER.stream_assembler()
    for e in events:
        asm.feed(e)
    turn = asm.finish(hashlib.sha256(raw).hexdigest())
    assert turn.calls[0].arguments == {"city": "Zürich 😀"}


def ascii_sse(*events: dict[str, Any] | str) -> bytes:
    """Like ``sse`` but compact and with every non-ASCII character JSON-escaped, as the API writes
    it: a lone surrogate in a delta goes on the wire as its ``\\uXXXX`` escape."""
    return sse(*(e if isinstance(e, str) else json.dumps(e, separators=(",", ":")) for e in events))


def next_request(turn: ModelTurn) -> bytes:
    """The bytes of a request that carries the turn back (D8); raises if they cannot be encoded."""
    items = [{"role": "user", "content": "hi"}, *ADAPTER.turn_items(turn)]
    req = ADAPTER.build_request(
        items=items, tools=[], settings={"model": "m"}, instructions=None, stream=True
    )
    return body_bytes(req)


def fed(raw: bytes) -> ModelTurn:
    return streaming.fed(ADAPTER, raw)[0]


def test_text_character_split_across_two_deltas_as_surrogate_halves() -> None:
    # "😀" arrives as two JSON-escaped UTF-16 halves in two content deltas, then a tool call follows.
    raw = ascii_sse(
        chunk({"role": "assistant", "content": "Looking up \ud83d"}),
        chunk({"content": "\ude00 now"}),
        frag(0, '{"order_id":"A1"}', "call_1", "get_order"),
        chunk({}, "tool_calls"),
        "[DONE]",
    )
    assert raw.isascii()
    for turn in (run_stream([raw])[0], fed(raw)):
        assert turn.finish is Finish.TOOL_PROPOSALS
        assert turn.text == "Looking up 😀 now"
        assert turn.continuation[0]["content"] == "Looking up 😀 now"
        assert "Looking up 😀 now".encode() in next_request(turn)


def test_refusal_character_split_across_two_deltas_as_surrogate_halves() -> None:
    raw = ascii_sse(
        chunk({"role": "assistant", "content": None, "refusal": ""}),
        chunk({"refusal": "No \ud83d"}),
        chunk({"refusal": "\ude00."}),
        chunk({}, "stop"),
        "[DONE]",
    )
    for turn in (run_stream([raw])[0], fed(raw)):
        assert (turn.finish, turn.refusal) == (Finish.REFUSAL, "No 😀.")
        assert turn.continuation[0]["refusal"] == "No 😀."
        next_request(turn)


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(min_size=0, max_size=30), cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=8)
)
def test_any_utf16_split_of_the_text_gives_the_same_text(text: str, cuts: list[int]) -> None:
    # Cut the text between any two UTF-16 code units, as the API may split its deltas.
    units = text.encode("utf-16-le")
    points = sorted({2 * (c % (len(units) // 2 + 1)) for c in cuts})
    pieces = [
        units[a:b].decode("utf-16-le", "surrogatepass")
        for a, b in zip([0, *points], [*points, len(units)], strict=True)
    ]
    raw = ascii_sse(*(chunk({"content": p}) for p in pieces), chunk({}, "stop"), "[DONE]")
    turn, _ = run_stream([raw])
    assert turn.text == text
    next_request(turn)


def test_interleaved_parallel_calls_from_file() -> None:
    raw = (DATA / "interleaved_parallel.sse").read_bytes()
    turn, progress = run_stream([raw])
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [(c.call_id, c.output_index, c.arguments) for c in turn.calls] == [
        ("call_a", 0, {"city": "Zürich"}),
        ("call_b", 1, {"city": "Kraków 🌧"}),
    ]
    assert [p.call_id for p in progress if isinstance(p, ArgumentsProgress)] == ["call_a", "call_b"] * 3


@pytest.mark.parametrize(
    "events",
    [TWO_CALLS[:-1], [e for e in TWO_CALLS if not (isinstance(e, dict) and e["choices"] and
                                                    e["choices"][0]["finish_reason"])], TWO_CALLS[:3]],
    ids=["no-done", "done-without-finish-reason", "cut-mid-arguments"],
)  # fmt: skip
def test_missing_terminal_is_a_cut_stream(events: list[Any]) -> None:
    turn, _ = run_stream([sse(*events)])
    assert (turn.finish, turn.reason, turn.raw_stop_reason) == (Finish.TRUNCATED, "stream_interrupted", None)
    assert turn.calls == () and turn.failure is not None and turn.failure.retryable
    assert turn.response_id == "chatcmpl-S"


def test_error_object_mid_stream_is_api_failure() -> None:
    err = {
        "error": {"message": "The server had an error", "type": "server_error", "param": None, "code": None}
    }
    turn, _ = run_stream([sse(*TWO_CALLS[:3], err)])
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (
        Finish.API_FAILURE,
        "server_error",
        "api_error",
    )
    assert turn.failure is not None and turn.failure.kind == "error_event" and turn.failure.retryable
    assert turn.calls == ()
    bad = {
        "error": {"message": "bad", "type": "invalid_request_error", "param": None, "code": "invalid_value"}
    }
    turn, _ = run_stream([sse(*TWO_CALLS[:3], bad, "[DONE]")])
    assert turn.raw_stop_reason == "invalid_value" and turn.failure is not None and not turn.failure.retryable


def test_duplicate_call_id_in_stream_keeps_both_calls() -> None:
    raw = sse(
        frag(0, '{"a":1}', "call_d", "f"),
        frag(1, '{"a":2}', "call_d", "f"),
        chunk({}, "tool_calls"),
        "[DONE]",
    )
    turn, _ = run_stream([raw])
    assert [(c.call_id, c.output_index, c.arguments) for c in turn.calls] == [
        ("call_d", 0, {"a": 1}),
        ("call_d", 1, {"a": 2}),
    ]


def test_per_call_byte_cap() -> None:
    asm = ADAPTER.stream_assembler(StreamCaps(max_call_bytes=10, max_response_bytes=100))
    for event in iter_payloads([sse(frag(0, '{"a":', "c", "f"), frag(0, '"0123456789"}'))]):
        asm.feed(event)
    assert asm.aborted
    assert asm.feed(chunk({}, "tool_calls")) == [] and asm.feed("[DONE]") == []
    turn = asm.finish("0" * 64)
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "arguments_too_large")
    assert turn.failure is not None and not turn.failure.retryable and turn.calls == ()


def test_per_response_byte_cap_is_cumulative() -> None:
    caps = StreamCaps(max_call_bytes=10, max_response_bytes=15)
    turn, _ = run_stream(
        [sse(frag(0, '{"a":12}', "c1", "f"), frag(1, '{"b":34}', "c2", "f"), *TWO_CALLS[5:])], caps
    )
    assert turn.reason == "arguments_too_large"
    ok, _ = run_stream([sse(frag(0, '{"a":12}', "c1", "f"), *TWO_CALLS[5:])], caps)
    assert ok.finish is Finish.TOOL_PROPOSALS


def test_legacy_function_call_stream() -> None:
    raw = sse(chunk({"role": "assistant", "function_call": {"name": "f", "arguments": ""}}),
              chunk({"function_call": {"arguments": '{"x": 1}'}}), chunk({}, "function_call"), "[DONE]")  # fmt: skip
    turn, _ = run_stream([raw])
    assert turn.finish is Finish.TOOL_PROPOSALS and turn.calls[0].synthetic_id
    assert turn.continuation[0]["function_call"] == {"name": "f", "arguments": '{"x": 1}'}
    (item,) = ADAPTER.result_items(turn, [(turn.calls[0], ok_result(3))])
    assert item == {"role": "function", "name": "f", "content": '{"data":3,"ok":true}'}


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_random_byte_splits_give_the_same_turn(cuts: list[int]) -> None:
    raw = (DATA / "interleaved_parallel.sse").read_bytes()
    points = sorted({c % (len(raw) + 1) for c in cuts})
    pieces = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    assert summary(run_stream(pieces)[0]) == summary(run_stream([raw])[0])


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(min_size=0, max_size=30), cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8)
)
def test_random_argument_fragmentation_gives_the_same_arguments(text: str, cuts: list[int]) -> None:
    args = json.dumps({"q": text}, ensure_ascii=False)
    points = sorted({c % (len(args) + 1) for c in cuts})
    pieces = [args[a:b] for a, b in zip([0, *points], [*points, len(args)], strict=True)]
    events: list[dict[str, Any] | str] = [
        frag(0, pieces[0], "call_h", "f"),
        *(frag(0, p) for p in pieces[1:]),
        chunk({}, "tool_calls"),
        "[DONE]",
    ]
    turn, progress = run_stream([sse(*events)])
    assert turn.calls[0].arguments == {"q": text} and turn.calls[0].arguments_raw == args
    assert [p for p in progress if isinstance(p, ArgumentsProgress)][-1].bytes == len(args.encode())


# ---- request side -----------------------------------------------------------------------------------


def test_render_tools_uses_openai_strict() -> None:
    schema = {
        "type": "object",
        "properties": {
            "order": {"$ref": "#/$defs/Order"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["order"],
        "$defs": {"Order": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
    }
    (tool,) = ADAPTER.render_tools([ToolDeclaration("get_order", "Look up", schema)])
    assert tool["type"] == "function" and tool["function"]["strict"] is True
    params = tool["function"]["parameters"]
    assert params["required"] == ["order", "note"] and params["additionalProperties"] is False
    assert params["properties"]["order"]["properties"]["id"] == {"type": "string"} and "$defs" not in params
    loose = {"type": "object", "properties": {"n": {"type": "integer"}}}
    (tool,) = ADAPTER.render_tools([ToolDeclaration("count", "", loose)])
    assert tool["function"]["strict"] is False


def test_build_request_settings_mapping() -> None:
    items = ADAPTER.initial_items("hi", [{"role": "user", "content": "earlier"}])
    req = ADAPTER.build_request(
        items=items, tools=[{"type": "function", "function": {"name": "f"}}],
        settings={"model": "gpt-x", "temperature": 0.2, "max_output_tokens": 99, "tool_choice": {"name": "f"},
                  "extra": {"parallel_tool_calls": False, "temperature": 0.5}},
        instructions="Be brief.", stream=False,
    )  # fmt: skip
    assert req["messages"][0] == {"role": "system", "content": "Be brief."}
    assert req["messages"][1:] == [{"role": "user", "content": "earlier"}, {"role": "user", "content": "hi"}]
    assert req["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert (req["max_completion_tokens"], req["temperature"], req["parallel_tool_calls"]) == (99, 0.5, False)
    assert "stream" not in req and "stream_options" not in req and "max_tokens" not in req
    for choice in ("auto", "required", "none"):
        req = ADAPTER.build_request(
            items=[], tools=[], settings={"tool_choice": choice}, instructions=None, stream=True
        )
        assert req["tool_choice"] == choice and req["stream"] is True
        assert req["stream_options"] == {"include_usage": True} and "messages" in req


def test_result_items_carry_canonical_model_results_in_order() -> None:
    calls = [tool_call("call_1", "f", "{}"), tool_call("call_2", "g", "{}")]
    turn = ADAPTER.parse_response(body({"tool_calls": calls}, "tool_calls"))
    results = [(turn.calls[1], error_result("DENIED", "no")), (turn.calls[0], ok_result({"b": 1, "a": 2}))]
    items = ADAPTER.result_items(turn, results)
    assert items == [
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": '{"error":{"code":"DENIED","message":"no"},"ok":false}',
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"data":{"a":2,"b":1},"ok":true}'},
    ]
    assert ADAPTER.turn_items(turn) == [turn.continuation[0]]


def _assistant_with(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [tool_call(i, "f", "{}") for i in ids]}


def _tool(cid: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": "{}"}


def test_check_request_accepts_answered_calls() -> None:
    msgs = [{"role": "user", "content": "q"}, _assistant_with("a", "b"), _tool("b"), _tool("a"),
            {"role": "assistant", "content": "done"}, {"role": "user", "content": "more"}]  # fmt: skip
    ADAPTER.check_request({"messages": msgs})
    # A repeated id is answered once (D7: one DUPLICATE_CALL_ID result for it).
    ADAPTER.check_request({"messages": [_assistant_with("d", "d"), _tool("d")]})


@pytest.mark.parametrize(
    ("messages", "why"),
    [
        ([_assistant_with("a", "b"), _tool("a")], "answers b"),
        ([_assistant_with("a"), {"role": "user", "content": "x"}, _tool("a")], "answers a"),
        ([_assistant_with("a"), _tool("a"), _tool("zzz")], "unknown tool_call_id 'zzz'"),
        ([_tool("a")], "unknown"),
        ([_assistant_with("a"), _tool("a"), _tool("a")], "twice"),
        ([_assistant_with("a"), {"role": "tool", "tool_call_id": "a", "content": {"x": 1}}], "content"),
    ],
    ids=["missing", "interrupted", "unknown-id", "orphan", "twice", "bad-content"],
)
def test_check_request_rejects(messages: list[dict[str, Any]], why: str) -> None:
    with pytest.raises(ProtocolViolation, match=why):
        ADAPTER.check_request({"messages": messages})
    with pytest.raises(ProtocolViolation):
        ADAPTER.check_request({"input": []})


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses"])
def test_a_429_saying_billing_is_not_active_is_a_quota_failure_not_retried(api: str) -> None:
    """D26: 429 is retryable except for quota and billing codes; OpenAI sends billing_not_active with
    429 when the account has no active billing, which no retry can fix."""
    from callbound.adapters import get

    body = {"error": {"message": "Your account is not active, please check your billing details.",
                      "type": "billing_not_active", "param": None, "code": "billing_not_active"}}  # fmt: skip
    turn = get(api).map_error(RawFailure("http", 429, json.dumps(body).encode(), {}))
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "quota_exceeded")
    assert turn.failure is not None and not turn.failure.retryable and turn.failure.status == 429
