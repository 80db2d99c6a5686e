"""Anthropic Messages adapter: stop mapping, recordings, streaming edges, results and request checks."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callbound.adapters import get
from callbound.adapters.anthropic_messages import _DELTA_DATA, ADAPTER
from callbound.adapters.base import StreamCaps, body_bytes, result_text
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

DATA = Path(__file__).parent / "data" / "anthropic"
FIX = "anthropic/"


# ---- helpers ----------------------------------------------------------------------------------------


def message(content: list[dict[str, Any]], stop: str | None, **extra: Any) -> dict[str, Any]:
    usage = {
        "input_tokens": 100,
        "cache_creation_input_tokens": 20,
        "cache_read_input_tokens": 30,
        "output_tokens": 7,
    }
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": content,
            "stop_reason": stop, "stop_sequence": None, "usage": usage, **extra}  # fmt: skip


def tool_use(tid: str, name: str = "get_weather", inp: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": {"city": "Oslo"} if inp is None else inp}


TEXT: dict[str, Any] = {"type": "text", "text": "Let me check."}
THINKING: dict[str, Any] = {"type": "thinking", "thinking": "Need weather.", "signature": "EqQ-sig"}


def sse(*events: dict[str, Any]) -> bytes:
    out = [f"event: {e.get('type')}\ndata: {json.dumps(e, ensure_ascii=False)}\n\n" for e in events]
    return "".join(out).encode("utf-8")


def start(msg_id: str = "msg_S", usage: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"id": msg_id, "type": "message", "role": "assistant", "model": "claude-x", "content": [],
           "stop_reason": None, "stop_sequence": None, "usage": usage or {"input_tokens": 300, "output_tokens": 1}}  # fmt: skip
    return {"type": "message_start", "message": msg}


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": {"type": kind, **fields}}


def json_delta(index: int, partial: str) -> dict[str, Any]:
    return delta(index, "input_json_delta", partial_json=partial)


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def end(stop: str = "tool_use", usage: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [{"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
             "usage": usage or {"output_tokens": 60}}, {"type": "message_stop"}]  # fmt: skip


def tool_stream(tid: str, index: int, *parts: str, name: str = "get_weather") -> list[dict[str, Any]]:
    return [block_start(index, {"type": "tool_use", "id": tid, "name": name, "input": {}}),
            *(json_delta(index, p) for p in parts), block_stop(index)]  # fmt: skip


def run_stream(chunks: Iterable[bytes], caps: StreamCaps | None = None) -> tuple[ModelTurn, list[Progress]]:
    chunks = list(chunks)
    asm = ADAPTER.stream_assembler(caps)
    progress: list[Progress] = []
    for payload in iter_payloads(chunks):
        progress += asm.feed(payload)
    return asm.finish(hashlib.sha256(b"".join(chunks)).hexdigest()), progress


def summary(turn: ModelTurn) -> tuple[Any, ...]:
    calls = [(c.call_id, c.name, c.arguments_raw, c.arguments, c.arguments_error) for c in turn.calls]
    return (turn.finish, turn.raw_stop_reason, turn.reason, turn.response_id, calls, turn.text, turn.usage,
            turn.continuation)  # fmt: skip


def calls_of(turn: ModelTurn) -> list[tuple[str, str, Any]]:
    return [(c.call_id, c.name, c.arguments) for c in turn.calls]


# ---- registry ---------------------------------------------------------------------------------------


def test_registry_resolves_the_module_adapter() -> None:
    adapter = get("anthropic-messages")
    assert adapter is ADAPTER
    assert (adapter.api, adapter.provider) == ("anthropic-messages", "anthropic")


# ---- stop mapping (D1, D31), one test per row -------------------------------------------------------


@pytest.mark.parametrize("stop", ["end_turn", "stop_sequence"])
def test_end_turn_and_stop_sequence_are_final_text(stop: str) -> None:
    turn = ADAPTER.parse_response(message([TEXT], stop))
    assert (turn.finish, turn.raw_stop_reason, turn.reason, turn.text) == (
        Finish.FINAL_TEXT,
        stop,
        None,
        "Let me check.",
    )
    assert turn.failure is None and turn.calls == ()


def test_tool_use_is_tool_proposals() -> None:
    turn = ADAPTER.parse_response(
        message([THINKING, TEXT, tool_use("toolu_1"), tool_use("toolu_2", inp={})], "tool_use")
    )
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.TOOL_PROPOSALS, "tool_use", None)
    assert [(c.call_id, c.output_index, c.arguments) for c in turn.calls] == [
        ("toolu_1", 2, {"city": "Oslo"}),
        ("toolu_2", 3, {}),
    ]
    assert all(c.provider == "anthropic" and c.api == "anthropic-messages" for c in turn.calls)
    assert turn.continuation == (
        {"role": "assistant", "content": [THINKING, TEXT, tool_use("toolu_1"), tool_use("toolu_2", inp={})]},
    )


def test_tool_use_without_blocks_is_not_success() -> None:
    turn = ADAPTER.parse_response(message([TEXT], "tool_use"))
    assert turn.finish is Finish.API_FAILURE and turn.failure is not None and not turn.failure.retryable


def test_max_tokens_is_truncated() -> None:
    turn = ADAPTER.parse_response(message([TEXT], "max_tokens"))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.TRUNCATED, "max_tokens", "max_tokens")


def test_context_window_exceeded_is_truncated() -> None:
    """One name for one condition: the same reason as OpenAI's context_length_exceeded error."""
    turn = ADAPTER.parse_response(message([TEXT], "model_context_window_exceeded"))
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "context_window_exceeded")
    assert turn.raw_stop_reason == "model_context_window_exceeded"


def test_pause_turn_is_continue() -> None:
    server = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}
    turn = ADAPTER.parse_response(message([TEXT, server], "pause_turn"))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.CONTINUE, "pause_turn", None)
    assert turn.calls == () and turn.continuation[0]["content"][1] == server


def test_refusal_wins_over_tool_use() -> None:
    details = {"type": "refusal", "category": "cyber", "explanation": "Blocked."}
    turn = ADAPTER.parse_response(message([TEXT, tool_use("toolu_1")], "refusal", stop_details=details))
    assert (turn.finish, turn.raw_stop_reason, turn.reason, turn.refusal) == (
        Finish.REFUSAL,
        "refusal",
        "refusal",
        "Blocked.",
    )
    assert not turn.executable


@pytest.mark.parametrize("stop", ["brand_new_reason", None])
def test_unknown_or_missing_stop_reason(stop: str | None) -> None:
    turn = ADAPTER.parse_response(message([TEXT], stop))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (
        Finish.API_FAILURE,
        stop,
        "unknown_stop_reason",
    )
    assert turn.failure is not None and not turn.failure.retryable


def test_usage_counts_cached_prompt_tokens_and_missing_is_none() -> None:
    turn = ADAPTER.parse_response(message([TEXT], "end_turn"))
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (150, 7)
    bare = message([TEXT], "end_turn")
    del bare["usage"]
    assert ADAPTER.parse_response(bare).usage.input_tokens is None


def test_missing_ids_are_synthetic() -> None:
    data = message([{"type": "tool_use", "name": "f", "input": {}}], "tool_use")
    del data["id"]
    raw = json.dumps(data).encode()
    turn = ADAPTER.parse_response(raw)
    rid = "cb:" + hashlib.sha256(raw).hexdigest()[:16]
    assert turn.response_id == rid and turn.calls[0].call_id == f"{rid}:0" and turn.calls[0].synthetic_id


@pytest.mark.parametrize(
    ("input_json", "why"),
    [
        ('{"a": 1, "a": 2}', "duplicate key"),
        ('{"a": NaN}', "not a JSON number"),
        ('{"n": 9007199254740993}', "outside"),
    ],
)
def test_object_input_goes_through_strict_argument_checks(input_json: str, why: str) -> None:
    raw = json.dumps(message([tool_use("toolu_x", inp={})], "tool_use")).replace(
        '"input": {}', f'"input": {input_json}'
    )
    turn = ADAPTER.parse_response(raw.encode())
    (call,) = turn.calls
    assert call.arguments is None and call.arguments_error is not None and why in call.arguments_error


def test_duplicate_tool_use_ids_are_kept_for_the_dispatcher() -> None:
    turn = ADAPTER.parse_response(
        message([tool_use("toolu_d"), tool_use("toolu_d", inp={"city": "Rome"})], "tool_use")
    )
    assert [(c.call_id, c.arguments) for c in turn.calls] == [
        ("toolu_d", {"city": "Oslo"}),
        ("toolu_d", {"city": "Rome"}),
    ]


# ---- errors (D26, D30, D32) -------------------------------------------------------------------------


def test_recorded_http_400_error() -> None:
    (inter,) = load_cassette(
        FIX + "pydantic-ai__test_anthropic_explicit_effort_xhigh_unsupported_model_errors.yaml"
    )
    turn = ADAPTER.map_error(RawFailure("http", status_code(inter), json.dumps(response_body(inter))))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.API_FAILURE, "400", "api_error")
    assert turn.failure is not None and (turn.failure.retryable, turn.failure.error_type) == (
        False,
        "invalid_request_error",
    )
    # The same body without a status (a parse of a saved body) is named by its error type.
    body_turn = ADAPTER.parse_response(response_body(inter))
    assert body_turn.raw_stop_reason == "invalid_request_error" and body_turn.failure is not None


@pytest.mark.parametrize(
    ("status", "etype", "retryable"),
    [(400, "invalid_request_error", False), (401, "authentication_error", False), (403, "permission_error", False),
     (404, "not_found_error", False), (413, "request_too_large", False), (429, "rate_limit_error", True),
     (500, "api_error", True), (504, "timeout_error", True), (529, "overloaded_error", True)],
)  # fmt: skip
def test_http_status_classification(status: int, etype: str, retryable: bool) -> None:
    err = {"type": "error", "error": {"type": etype, "message": "m"}, "request_id": "req_1"}
    turn = ADAPTER.map_error(RawFailure("http", status, json.dumps(err).encode(), {"retry-after": "3"}))
    assert turn.raw_stop_reason == str(status) and turn.failure is not None
    assert (turn.failure.retryable, turn.failure.error_type, turn.failure.retry_after_s) == (
        retryable,
        etype,
        3.0,
    )


def test_spend_limit_429_is_not_retryable() -> None:
    err = {"type": "error", "error": {"type": "rate_limit_error", "message": "cap",
                                      "details": {"error_code": "enforced_spend_limit_reached"}}}  # fmt: skip
    turn = ADAPTER.map_error(RawFailure("http", 429, json.dumps(err)))
    assert turn.failure is not None and not turn.failure.retryable and turn.reason == "quota_exceeded"
    assert turn.failure.error_code == "enforced_spend_limit_reached"


def test_transport_failures() -> None:
    for kind in ("connection", "timeout"):
        turn = ADAPTER.map_error(RawFailure(kind))
        assert turn.finish is Finish.API_FAILURE and turn.failure is not None and turn.failure.retryable
    cut = ADAPTER.map_error(RawFailure("stream_cut"))
    assert (cut.finish, cut.reason) == (Finish.TRUNCATED, "stream_interrupted")


# ---- recordings: plain bodies and round trips -------------------------------------------------------


def test_recorded_json_tool_body() -> None:
    turn = ADAPTER.parse_response(read_bytes(FIX + "ai__anthropic-json-tool.1.json"))
    assert (turn.finish, turn.raw_stop_reason, turn.response_id) == (
        Finish.TOOL_PROPOSALS,
        "tool_use",
        "msg_0191iYfpERYfS27xLsdW2nbb",
    )
    ((cid, name, args),) = calls_of(turn)
    assert (cid, name) == ("toolu_01Q9ExVZnzZj7E2QQYHYtNUa", "json")
    assert [e["location"] for e in args["elements"]] == ["San Francisco", "London", "Paris", "Berlin"]
    assert args["elements"][0]["temperature"] == -5
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (1151, 87)


def test_recorded_tool_without_arguments() -> None:
    turn = ADAPTER.parse_response(read_bytes(FIX + "ai__anthropic-tool-no-args.json"))
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert calls_of(turn) == [("toolu_01LRmxn9vGM1d2DZSDBowdZ1", "updateIssueList", {})]
    assert turn.text.startswith("<thinking>")  # text that merely looks like thinking stays text


def _normalised_results(message: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(b["type"], b.get("tool_use_id"), b.get("is_error")) for b in message["content"]]


def test_recorded_tool_with_thinking_round_trip() -> None:
    first, second = load_cassette(FIX + "pydantic-ai__test_anthropic_tool_with_thinking.yaml")
    turn = ADAPTER.parse_response(response_body(first))
    assert (turn.finish, turn.raw_stop_reason) == (Finish.TOOL_PROPOSALS, "tool_use")
    assert calls_of(turn) == [("toolu_01YGzqpRE16Vricda3Aqcejo", "get_user_country", {})]

    sent = request_body(second)
    prior = request_body(first)["messages"]
    items = ADAPTER.initial_items(None, prior) + ADAPTER.turn_items(turn)
    items += ADAPTER.result_items(turn, [(turn.calls[0], ok_result("Mexico"))])
    # The assistant message, thinking block and signature included, is exactly what was sent.
    assert items[1] == sent["messages"][1]
    assert items[1]["content"][0]["type"] == "thinking" and items[1]["content"][0]["signature"].startswith(
        "EqEE"
    )
    assert _normalised_results(items[2]) == _normalised_results(sent["messages"][2])
    assert items[2]["content"][0]["content"] == result_text(ok_result("Mexico"))

    decl = ToolDeclaration("get_user_country", "", request_body(first)["tools"][0]["input_schema"])
    ours = ADAPTER.build_request(items=items, tools=ADAPTER.render_tools([decl]),
                                 settings={"model": "claude-sonnet-4-0", "tool_choice": "auto",
                                           "extra": {"thinking": {"budget_tokens": 3000, "type": "enabled"},
                                                     "stream": False}},
                                 instructions=None, stream=False)  # fmt: skip
    ours["messages"][2]["content"][0]["content"] = sent["messages"][2]["content"][0]["content"]
    assert ours == sent
    ADAPTER.check_request(sent, turn)
    ADAPTER.check_request(ours, turn)

    final = ADAPTER.parse_response(response_body(second))
    assert final.finish is Finish.FINAL_TEXT and "Mexico City" in final.text


def test_recorded_parallel_calls_round_trip() -> None:
    first, second = load_cassette(FIX + "pydantic-ai__test_multiple_parallel_tool_calls.yaml")
    turn = ADAPTER.parse_response(response_body(first))
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [(c.call_id, c.arguments["name"]) for c in turn.calls if c.arguments] == [
        ("toolu_0167cfEnoQaPviGdVXA95zcu", "Alice"),
        ("toolu_01EEe2V5HD1Ac4rKiUR4HD2T", "Bob"),
        ("toolu_01XFyAjstT3966qvRynZyVPo", "Charlie"),
        ("toolu_013mnQZbgtK2oe3Mo3XKJsx3", "Daisy"),
    ]
    assert {c.name for c in turn.calls} == {"retrieve_entity_info"}
    sent = request_body(second)
    items = ADAPTER.turn_items(turn) + ADAPTER.result_items(
        turn, [(c, ok_result(c.call_id)) for c in turn.calls]
    )
    assert items[0] == sent["messages"][1]
    (results,) = items[1:]
    assert _normalised_results(results) == _normalised_results(sent["messages"][2])
    ADAPTER.check_request(sent, turn)
    ADAPTER.check_request({"messages": [sent["messages"][0], *items]}, turn)
    assert ADAPTER.parse_response(response_body(second)).finish is Finish.FINAL_TEXT


def test_recorded_redacted_thinking_is_carried_back_unchanged() -> None:
    first, second = load_cassette(FIX + "pydantic-ai__test_anthropic_model_thinking_part_redacted.yaml")
    turn = ADAPTER.parse_response(response_body(first))
    assert (turn.finish, turn.raw_stop_reason) == (Finish.FINAL_TEXT, "end_turn")
    sent = request_body(second)
    assert ADAPTER.turn_items(turn) == [sent["messages"][1]]
    assert sent["messages"][1]["content"][0]["type"] == "redacted_thinking"
    ADAPTER.check_request(sent, turn)
    dropped = copy.deepcopy(sent)
    del dropped["messages"][1]["content"][0]
    with pytest.raises(ProtocolViolation, match="thinking"):
        ADAPTER.check_request(dropped, turn)
    assert ADAPTER.parse_response(response_body(second)).finish is Finish.FINAL_TEXT


def test_recorded_pause_turn_resends_content_without_a_new_user_message() -> None:
    first, second = load_cassette(FIX + "pydantic-ai__test_pause_turn_web_search_vcr.yaml")
    turn = ADAPTER.parse_response(response_body(first))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.CONTINUE, "pause_turn", None)
    assert turn.calls == ()  # 11 server_tool_use blocks, none of them a client call (D31)
    kinds = [b["type"] for b in turn.continuation[0]["content"]]
    assert kinds.count("server_tool_use") == 11 and kinds[-1] == "server_tool_use"
    sent = request_body(second)
    assert sent["messages"] == [request_body(first)["messages"][0], *ADAPTER.turn_items(turn)]
    ADAPTER.check_request(sent, turn)
    final = ADAPTER.parse_response(response_body(second))
    assert final.finish is Finish.FINAL_TEXT and final.calls == ()
    assert final.continuation[0]["content"][0]["type"] == "web_search_tool_result"


# ---- recordings: streams ----------------------------------------------------------------------------


def test_recorded_tool_use_stream() -> None:
    turn, progress = run_stream([read_bytes(FIX + "anthropic-sdk-python__tool_use_response.txt")])
    assert (turn.finish, turn.raw_stop_reason, turn.response_id) == (
        Finish.TOOL_PROPOSALS,
        "tool_use",
        "msg_019Q1hrJbZG26Fb9BQhrkHEr",
    )
    assert calls_of(turn) == [("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", {"location": "Paris"})]
    assert turn.text == "I'll check the current weather in Paris for you."
    assert turn.continuation[0]["content"][1] == {"type": "tool_use", "id": "toolu_01NRLabsLyVHZPKxbKvkfSMn",
                                                  "name": "get_weather", "caller": {"type": "direct"},
                                                  "input": {"location": "Paris"}}  # fmt: skip
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (377, 65)
    assert progress[0] == CallStarted("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather")
    assert progress[-1] == CallReady("toolu_01NRLabsLyVHZPKxbKvkfSMn")
    assert [p.bytes for p in progress if isinstance(p, ArgumentsProgress)] == [0, 8, 15, 17, 21]


def test_recorded_basic_text_stream() -> None:
    turn, _ = run_stream([read_bytes(FIX + "anthropic-sdk-python__basic_response.txt")])
    assert (turn.finish, turn.raw_stop_reason, turn.text) == (Finish.FINAL_TEXT, "end_turn", "Hello there!")
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (11, 6)  # message_delta replaced, not added


@pytest.mark.parametrize(
    ("name", "explanation", "text"),
    [("anthropic-sdk-python__refusal_response.txt", "This request was refused due to policy.", ""),
     ("ai__anthropic-refusal.chunks.txt", "This request triggered restrictions on violative cyber content and was "
      "blocked under Anthropic's Usage Policy.", ""),
     ("anthropic-sdk-python__fable-fallback__stream-a-refusal.sse", "", "Hi")],
)  # fmt: skip
def test_recorded_refusal_streams(name: str, explanation: str, text: str) -> None:
    turn, _ = run_stream([read_bytes(FIX + name)])
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.REFUSAL, "refusal", "refusal")
    assert (turn.refusal, turn.text, turn.calls) == (explanation, text, ())


def test_recorded_fable_refusal_keeps_thinking_and_cumulative_usage() -> None:
    turn, _ = run_stream([read_bytes(FIX + "anthropic-sdk-python__fable-fallback__stream-a-refusal.sse")])
    thinking = turn.continuation[0]["content"][0]
    assert thinking["type"] == "thinking" and thinking["thinking"].startswith("Simple educational question")
    assert thinking["signature"] == "c3ludGhldGljLXNpZ25hdHVyZS1maXh0dXJlLWEtbm90LWEtcmVhbC1zaWduYXR1cmU="
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (28, 106)


def test_recorded_thinking_stream() -> None:
    (inter,) = load_cassette(FIX + "pydantic-ai__test_anthropic_model_thinking_part_stream.yaml")
    raw = str(response_body(inter)).encode()
    turn, _ = run_stream([raw])
    assert (turn.finish, turn.raw_stop_reason, turn.response_id) == (
        Finish.FINAL_TEXT,
        "end_turn",
        "msg_01ALwQ87pTS7hH1PjSdC9wJD",
    )
    thinking, text = turn.continuation[0]["content"]
    expected_thinking = "".join(
        e["delta"]["thinking"] for e in iter_payloads([raw]) if isinstance(e, dict) and e.get("type") == "content_block_delta"
        and e["delta"]["type"] == "thinking_delta"
    )  # fmt: skip
    assert list(thinking) == ["type", "thinking", "signature"] and thinking["thinking"] == expected_thinking
    assert thinking["thinking"].startswith("This is a straightforward question") and thinking[
        "signature"
    ].startswith("EvMC")
    assert (
        text["type"] == "text"
        and text["text"] == turn.text
        and turn.text.startswith("Here are the basic steps")
    )
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (43, 282)


def test_recorded_redacted_thinking_stream() -> None:
    (inter,) = load_cassette(FIX + "pydantic-ai__test_anthropic_model_thinking_part_redacted_stream.yaml")
    turn, _ = run_stream([str(response_body(inter)).encode()])
    assert (turn.finish, turn.response_id) == (Finish.FINAL_TEXT, "msg_018XZkwvj9asBiffg3fXt88s")
    blocks = turn.continuation[0]["content"]
    assert [b["type"] for b in blocks] == ["redacted_thinking", "redacted_thinking", "text"]
    assert blocks[0]["data"].startswith("EqkECkYIBxgCKkA8") and blocks[1]["data"].startswith(
        "EtgBCkYIBxgCKkDQ"
    )
    assert set(blocks[0]) == {"type", "data"}
    assert turn.text.startswith("I notice that you've sent what") and turn.text.endswith(
        "legitimate task or question?"
    )


# ---- streaming edges --------------------------------------------------------------------------------


def test_stream_rebuilds_blocks_and_reports_progress() -> None:
    events = [start(), block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
              delta(0, "thinking_delta", thinking="Need "), delta(0, "thinking_delta", thinking="weather."),
              delta(0, "signature_delta", signature="EqQ-sig"), block_stop(0),
              *tool_stream("toolu_1", 1, "", '{"city": ', '"Oslo"}'), *end()]  # fmt: skip
    turn, progress = run_stream([sse(*events)])
    assert turn.continuation == ({"role": "assistant", "content": [THINKING, tool_use("toolu_1")]},)
    assert progress == [CallStarted("toolu_1", "get_weather"), ArgumentsProgress("toolu_1", 0),
                        ArgumentsProgress("toolu_1", 9), ArgumentsProgress("toolu_1", 16), CallReady("toolu_1")]  # fmt: skip
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (300, 60)


def test_stream_empty_partial_json_is_an_empty_object() -> None:
    turn, _ = run_stream([sse(start(), *tool_stream("toolu_e", 0, ""), *end())])
    (call,) = turn.calls
    assert (call.arguments, call.arguments_error) == ({}, None)
    assert turn.continuation[0]["content"][0]["input"] == {}


def test_stream_server_tool_use_is_not_a_call() -> None:
    server = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    events = [
        start(),
        block_start(0, server),
        json_delta(0, '{"query": "x"}'),
        block_stop(0),
        *end("pause_turn"),
    ]
    turn, progress = run_stream([sse(*events)])
    assert (turn.finish, turn.calls, progress) == (Finish.CONTINUE, (), [])
    assert turn.continuation[0]["content"][0]["input"] == {"query": "x"}


def test_multibyte_character_split_across_deltas_and_byte_chunks() -> None:
    # "😀" as a JSON surrogate-pair escape split across two partial_json deltas; "ü" split mid-UTF-8.
    events = [start(), *tool_stream("toolu_u", 0, '{"city": "Zü', "rich \\ud83d", '\\ude00"}'), *end()]
    raw = sse(*events)
    cut = raw.index("ü".encode()) + 1
    reader = SSEReader()
    payloads = [decode_event(e) for part in (raw[:cut], raw[cut:]) for e in reader.feed(part)]
    payloads += [decode_event(e) for e in reader.close()]
    asm = ADAPTER.stream_assembler()
    for p in payloads:
        asm.feed(p)
    turn = asm.finish(hashlib.sha256(raw).hexdigest())
    assert turn.calls[0].arguments == {"city": "Zürich 😀"}


def ascii_sse(*events: dict[str, Any]) -> bytes:
    """Compact and with every non-ASCII character JSON-escaped, as the API writes it: a lone surrogate
    in a delta goes on the wire as its ``\\uXXXX`` escape, and deltas match the fast path's shape."""
    return "".join(
        f"event: {e.get('type')}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n" for e in events
    ).encode()


def fed(raw: bytes) -> tuple[ModelTurn, list[Progress]]:
    return streaming.fed(ADAPTER, raw)


def next_request(turn: ModelTurn) -> bytes:
    """The bytes of a request that carries the turn back (D8); raises if they cannot be encoded."""
    items = [{"role": "user", "content": "hi"}, *ADAPTER.turn_items(turn)]
    req = ADAPTER.build_request(
        items=items, tools=[], settings={"model": "m"}, instructions=None, stream=True
    )
    return body_bytes(req)


def test_text_and_thinking_characters_split_across_deltas_as_surrogate_halves() -> None:
    # "😀" arrives as its two JSON-escaped UTF-16 halves in two deltas of a thinking block, of a text
    # block, and between a text block's start snapshot and its first delta; a tool call follows.
    events = [start(), block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
              delta(0, "thinking_delta", thinking="Hm \ud83d"), delta(0, "thinking_delta", thinking="\ude00."),
              delta(0, "signature_delta", signature="EqQ-sig"), block_stop(0),
              block_start(1, {"type": "text", "text": ""}),
              delta(1, "text_delta", text="Checking \ud83d"), delta(1, "text_delta", text="\ude00 now."),
              block_stop(1), block_start(2, {"type": "text", "text": " Ok \ud83d"}),
              delta(2, "text_delta", text="\ude00"), block_stop(2),
              *tool_stream("toolu_1", 3, '{"city": "Oslo"}'), *end()]  # fmt: skip
    raw = ascii_sse(*events)
    assert raw.isascii()
    deltas = [e for e in events if e["type"] == "content_block_delta"]
    assert all(_DELTA_DATA.fullmatch(json.dumps(e, separators=(",", ":"))) for e in deltas)  # fast path
    thinking = {"type": "thinking", "thinking": "Hm 😀.", "signature": "EqQ-sig"}
    texts = [{"type": "text", "text": "Checking 😀 now."}, {"type": "text", "text": " Ok 😀"}]
    (reference, reference_progress), (fast, fast_progress) = run_stream([raw]), fed(raw)
    assert summary(fast) == summary(reference) and fast_progress == reference_progress
    for turn in (reference, fast):
        assert turn.finish is Finish.TOOL_PROPOSALS
        assert turn.text == "Checking 😀 now. Ok 😀"
        assert turn.continuation[0]["content"] == [thinking, *texts, tool_use("toolu_1")]
        assert "Checking 😀 now.".encode() in next_request(turn)


@pytest.mark.parametrize("stop", [True, False], ids=["content_block_stop", "max_tokens-cut"])
def test_split_surrogate_halves_are_paired_when_the_block_never_stops(stop: bool) -> None:
    # A max_tokens cut may skip content_block_stop: the block is joined at the end, the same way.
    events = [start(), block_start(0, {"type": "text", "text": ""}), delta(0, "text_delta", text="a\ud83d"),
              delta(0, "text_delta", text="\ude00b"), *([block_stop(0)] if stop else []),
              *end("end_turn" if stop else "max_tokens")]  # fmt: skip
    raw = ascii_sse(*events)
    for turn in (run_stream([raw])[0], fed(raw)[0]):
        assert turn.text == "a😀b"
        next_request(turn)


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=30), cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=8))
def test_any_utf16_split_of_text_and_thinking_gives_the_same_text(text: str, cuts: list[int]) -> None:
    # Cut between any two UTF-16 code units, as the API may split its deltas.
    units = text.encode("utf-16-le")
    points = sorted({2 * (c % (len(units) // 2 + 1)) for c in cuts})
    pieces = [
        units[a:b].decode("utf-16-le", "surrogatepass")
        for a, b in zip([0, *points], [*points, len(units)], strict=True)
    ]
    events = [start(), block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
              *(delta(0, "thinking_delta", thinking=p) for p in pieces), delta(0, "signature_delta", signature="s"),
              block_stop(0), block_start(1, {"type": "text", "text": ""}),
              *(delta(1, "text_delta", text=p) for p in pieces), block_stop(1), *end("end_turn")]  # fmt: skip
    raw = ascii_sse(*events)
    for turn in (run_stream([raw])[0], fed(raw)[0]):
        assert turn.text == text
        assert turn.continuation[0]["content"][0]["thinking"] == text
        next_request(turn)


def test_interleaved_blocks_route_by_index() -> None:
    events = [start(), block_start(0, {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}}),
              block_start(1, {"type": "tool_use", "id": "toolu_b", "name": "g", "input": {}}),
              json_delta(1, '{"b"'), json_delta(0, '{"a"'), json_delta(0, ": 1}"), json_delta(1, ": 2}"),
              block_stop(1), block_stop(0), *end()]  # fmt: skip
    turn, progress = run_stream([sse(*events)])
    assert calls_of(turn) == [("toolu_a", "f", {"a": 1}), ("toolu_b", "g", {"b": 2})]
    assert [p for p in progress if isinstance(p, CallReady)] == [CallReady("toolu_b"), CallReady("toolu_a")]


def test_max_tokens_cut_inside_tool_use_from_file() -> None:
    turn, progress = run_stream([(DATA / "max_tokens_mid_tool_use.sse").read_bytes()])
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.TRUNCATED, "max_tokens", "max_tokens")
    (call,) = turn.calls
    assert call.arguments is None and call.arguments_error is not None
    assert call.arguments_raw == '{"path": "a.txt", "text": "lorem ipsum'
    assert not any(isinstance(p, CallReady) for p in progress)  # no content_block_stop was sent
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (60, 32)


def test_missing_message_stop_is_a_cut_stream() -> None:
    events = [start(), *tool_stream("toolu_1", 0, '{"city": "Oslo"}'), *end()[:1]]
    turn, _ = run_stream([sse(*events)])
    assert (turn.finish, turn.reason, turn.response_id, turn.calls) == (
        Finish.TRUNCATED,
        "stream_interrupted",
        "msg_S",
        (),
    )
    assert turn.failure is not None and turn.failure.retryable


@pytest.mark.parametrize(
    ("etype", "retryable"), [("overloaded_error", True), ("invalid_request_error", False)]
)
def test_error_event_mid_stream(etype: str, retryable: bool) -> None:
    err = {"type": "error", "error": {"type": etype, "message": "Overloaded"}}
    turn, _ = run_stream([sse(start(), *tool_stream("toolu_1", 0, '{"city"'), err)])
    assert (turn.finish, turn.raw_stop_reason) == (Finish.API_FAILURE, etype)
    assert turn.failure is not None and (turn.failure.kind, turn.failure.retryable) == (
        "error_event",
        retryable,
    )
    assert turn.response_id == "msg_S" and turn.calls == ()


def test_duplicate_ids_in_stream_keep_both_calls() -> None:
    events = [start(), *tool_stream("toolu_d", 0, '{"a": 1}'), *tool_stream("toolu_d", 1, '{"a": 2}'), *end()]
    turn, _ = run_stream([sse(*events)])
    assert [(c.call_id, c.arguments) for c in turn.calls] == [("toolu_d", {"a": 1}), ("toolu_d", {"a": 2})]


def test_duplicate_keys_in_streamed_input_are_rejected() -> None:
    turn, _ = run_stream([sse(start(), *tool_stream("toolu_k", 0, '{"a": 1, ', '"a": 2}'), *end())])
    assert turn.calls[0].arguments is None and "duplicate key" in (turn.calls[0].arguments_error or "")


def test_byte_caps() -> None:
    asm = ADAPTER.stream_assembler(StreamCaps(max_call_bytes=8, max_response_bytes=100))
    for p in iter_payloads([sse(start(), *tool_stream("toolu_1", 0, '{"city": ', '"Oslo"}'))]):
        asm.feed(p)
    assert asm.aborted and asm.feed({"type": "message_stop"}) == []
    turn = asm.finish("0" * 64)
    assert (turn.finish, turn.reason, turn.calls) == (Finish.TRUNCATED, "arguments_too_large", ())
    # The response cap is cumulative over calls: two 10-byte inputs need 20 bytes.
    events = [
        start(),
        *tool_stream("toolu_1", 0, '{"a": 123}'),
        *tool_stream("toolu_2", 1, '{"b": 456}'),
        *end(),
    ]
    assert (
        run_stream([sse(*events)], StreamCaps(max_call_bytes=10, max_response_bytes=19))[0].reason
        == "arguments_too_large"
    )
    assert (
        run_stream([sse(*events)], StreamCaps(max_call_bytes=10, max_response_bytes=20))[0].finish
        is Finish.TOOL_PROPOSALS
    )


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_random_byte_splits_give_the_same_turn(cuts: list[int]) -> None:
    events = [start(), block_start(0, {"type": "text", "text": ""}), delta(0, "text_delta", text="Grüße 🌍"),
              block_stop(0), *tool_stream("toolu_r", 1, "", '{"city": "Kraków"', ', "n": 3}'), *end()]  # fmt: skip
    raw = sse(*events)
    points = sorted({c % (len(raw) + 1) for c in cuts})
    pieces = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    whole = run_stream([raw])[0]
    assert summary(run_stream(pieces)[0]) == summary(whole)
    assert calls_of(whole) == [("toolu_r", "get_weather", {"city": "Kraków", "n": 3})]


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=30), cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8))
def test_random_partial_json_fragmentation(text: str, cuts: list[int]) -> None:
    args = json.dumps({"q": text}, ensure_ascii=False)
    points = sorted({c % (len(args) + 1) for c in cuts})
    pieces = [args[a:b] for a, b in zip([0, *points], [*points, len(args)], strict=True)]
    turn, _ = run_stream([sse(start(), *tool_stream("toolu_h", 0, *pieces), *end())])
    assert turn.calls[0].arguments == {"q": text}
    assert turn.continuation[0]["content"][0]["input"] == {"q": text}


# ---- request side -----------------------------------------------------------------------------------


def test_render_tools_inlines_refs() -> None:
    schema = {"type": "object", "properties": {"o": {"$ref": "#/$defs/O"}}, "required": ["o"],
              "$defs": {"O": {"type": "object", "properties": {"id": {"type": "string"}}}}}  # fmt: skip
    (tool,) = ADAPTER.render_tools([ToolDeclaration("get", "Get it", schema)])
    assert tool == {"name": "get", "description": "Get it", "input_schema": {
        "type": "object", "properties": {"o": {"type": "object", "properties": {"id": {"type": "string"}}}},
        "required": ["o"]}}  # fmt: skip


def test_build_request_settings_mapping() -> None:
    items = ADAPTER.initial_items("hi", [])
    req = ADAPTER.build_request(items=items, tools=[], settings={}, instructions=None, stream=False)
    assert req == {"max_tokens": 4096, "messages": [{"role": "user", "content": "hi"}]}
    req = ADAPTER.build_request(
        items=items, tools=[{"name": "f"}], instructions="Be brief.", stream=True,
        settings={"model": "claude-x", "max_output_tokens": 512, "temperature": 0.1,
                  "extra": {"tool_choice": {"type": "any", "disable_parallel_tool_use": True}}},
    )  # fmt: skip
    assert (req["model"], req["max_tokens"], req["temperature"], req["system"]) == (
        "claude-x",
        512,
        0.1,
        "Be brief.",
    )
    assert req["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True} and req["stream"] is True
    expected = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"},
                "named": {"type": "tool", "name": "f"}}  # fmt: skip
    for key, want in expected.items():
        choice = {"name": "f"} if key == "named" else key
        req = ADAPTER.build_request(
            items=[], tools=[], settings={"tool_choice": choice}, instructions=None, stream=False
        )
        assert req["tool_choice"] == want


def test_result_items_are_one_user_message_in_call_order() -> None:
    turn = ADAPTER.parse_response(message([TEXT, tool_use("toolu_1"), tool_use("toolu_2")], "tool_use"))
    items = ADAPTER.result_items(
        turn, [(turn.calls[0], ok_result(3)), (turn.calls[1], error_result("TIMEOUT", "slow"))]
    )
    assert items == [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"data":3,"ok":true}', "is_error": False},
        {"type": "tool_result", "tool_use_id": "toolu_2",
         "content": '{"error":{"code":"TIMEOUT","message":"slow"},"ok":false}', "is_error": True},
    ]}]  # fmt: skip
    assert ADAPTER.result_items(turn, []) == []


def _req(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "claude-x", "max_tokens": 10, "messages": list(messages)}


USER: dict[str, Any] = {"role": "user", "content": "q"}
ASSISTANT: dict[str, Any] = {
    "role": "assistant",
    "content": [THINKING, TEXT, tool_use("toolu_1"), tool_use("toolu_2")],
}


def _results(*ids: str, text_first: bool = False) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": i, "content": "{}"} for i in ids]
    note = {"type": "text", "text": "Answer briefly."}
    return {"role": "user", "content": [note, *blocks] if text_first else [*blocks, note]}


def test_check_request_accepts_results_then_text() -> None:
    previous = ADAPTER.parse_response(message(ASSISTANT["content"], "tool_use"))
    ADAPTER.check_request(_req(USER, ASSISTANT, _results("toolu_2", "toolu_1")), previous)
    ADAPTER.check_request(
        _req(USER, {"role": "assistant", "content": [tool_use("d"), tool_use("d")]}, _results("d"))
    )


@pytest.mark.parametrize(
    ("messages", "why"),
    [
        ((USER, ASSISTANT, _results("toolu_1")), "no tool_result for"),
        ((USER, ASSISTANT, _results("toolu_1", "toolu_2", text_first=True)), "must come before"),
        ((USER, ASSISTANT, _results("toolu_1", "toolu_2", "toolu_9")), "unknown tool_use_id 'toolu_9'"),
        ((USER, ASSISTANT, _results("toolu_1", "toolu_1", "toolu_2")), "twice"),
        ((USER, ASSISTANT), "never answered"),
        ((USER, ASSISTANT, {"role": "assistant", "content": "x"}), "need tool_result first"),
        ((USER, ASSISTANT, {"role": "user", "content": "plain text"}), "no tool_result for"),
        ((_results("toolu_1"),), "unknown"),
        ((USER, {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}, TEXT]}), "signature"),
    ],
    ids=["missing", "text-first", "unknown-id", "twice", "unanswered", "not-user", "string-content", "orphan",
         "no-signature"],
)  # fmt: skip
def test_check_request_rejects(messages: tuple[dict[str, Any], ...], why: str) -> None:
    with pytest.raises(ProtocolViolation, match=why):
        ADAPTER.check_request(_req(*messages))


def test_check_request_rejects_changed_thinking() -> None:
    previous = ADAPTER.parse_response(message(ASSISTANT["content"], "tool_use"))
    changed = copy.deepcopy(ASSISTANT)
    changed["content"][0]["signature"] = "forged"
    with pytest.raises(ProtocolViolation, match="thinking"):
        ADAPTER.check_request(_req(USER, changed, _results("toolu_1", "toolu_2")), previous)
    with pytest.raises(ProtocolViolation):
        ADAPTER.check_request({"input": []})
