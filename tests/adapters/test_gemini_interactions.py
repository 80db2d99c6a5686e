"""The gemini-interactions adapter: status mapping, both schema generations, streams and continuation."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callbound.adapters import get
from callbound.adapters.base import StreamCaps, body_bytes
from callbound.adapters.gemini_interactions import ADAPTER, GeminiInteractionsAdapter
from callbound.adapters.gemini_interactions_stream import _ARGUMENTS_DATA
from callbound.adapters.sse import iter_payloads
from callbound.core.errors import ProtocolViolation, UsageError
from callbound.core.registry import ToolDeclaration
from callbound.core.types import (
    ArgumentsProgress,
    CallReady,
    CallStarted,
    Finish,
    ModelTurn,
    Progress,
    RawFailure,
    ToolCall,
    error_result,
    ok_result,
)
from tests.adapters import streaming
from tests.recordings import read_bytes

DATA = Path(__file__).parent / "data" / "gemini_interactions"
INTERLEAVED = DATA / "synthetic-steps-interleaved-calls.chunks.txt"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_stream(chunks: list[bytes], caps: StreamCaps | None = None) -> tuple[ModelTurn, list[Progress]]:
    assembler = ADAPTER.stream_assembler(caps)
    progress: list[Progress] = []
    for payload in iter_payloads(chunks):
        progress.extend(assembler.feed(payload))
    return assembler.finish(sha(b"".join(chunks))), progress


def sse(*events: dict[str, Any]) -> bytes:
    """SSE framing with ``event:`` lines, which the adapter ignores in favour of ``event_type``."""
    return b"".join(
        f"event: {e.get('event_type')}\ndata: {json.dumps(e, ensure_ascii=False)}\n\n".encode()
        for e in events
    )


THOUGHT = {"type": "thought", "signature": "CtkBsig"}
CALL = {"type": "function_call", "id": "zggxzq8r", "name": "getWeather", "arguments": {"city": "Oslo"}}
OUTPUT = {"type": "model_output", "content": [{"type": "text", "text": "It is 3 C."}]}


def interaction(status: Any, *steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": "v1_abc",
        "object": "interaction",
        "model": "gemini-x",
        "status": status,
        "steps": list(steps),
        **extra,
    }


def test_get_returns_the_module_adapter() -> None:
    assert get("gemini-interactions") is ADAPTER
    assert (ADAPTER.api, ADAPTER.provider) == ("gemini-interactions", "google")


# ---- one test per status row -----------------------------------------------------------------------


def test_requires_action_with_calls_is_tool_proposals() -> None:
    turn = ADAPTER.parse_response(interaction("requires_action", THOUGHT, CALL))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (
        Finish.TOOL_PROPOSALS,
        "requires_action",
        None,
    )
    assert [(c.call_id, c.name, c.arguments, c.output_index) for c in turn.calls] == [
        ("zggxzq8r", "getWeather", {"city": "Oslo"}, 1)
    ]


def test_requires_action_without_calls_is_unknown() -> None:
    turn = ADAPTER.parse_response(interaction("requires_action", THOUGHT))
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "unknown_stop_reason")


def test_completed_with_calls_is_tool_proposals() -> None:
    # WIRE.md 5.4: `completed` also occurs with pending function calls.
    turn = ADAPTER.parse_response(interaction("completed", CALL))
    assert (turn.finish, turn.raw_stop_reason) == (Finish.TOOL_PROPOSALS, "completed")


def test_completed_without_calls_is_final_text() -> None:
    turn = ADAPTER.parse_response(interaction("completed", THOUGHT, OUTPUT))
    assert (turn.finish, turn.raw_stop_reason, turn.reason, turn.text) == (
        Finish.FINAL_TEXT,
        "completed",
        None,
        "It is 3 C.",
    )


@pytest.mark.parametrize(
    ("details", "reason"),
    [
        (None, "incomplete"),
        ({"reason": "max_output_tokens"}, "max_tokens"),
        ({"reason": "MAX_TOKENS"}, "max_tokens"),
        ({"reason": "content too long"}, "content_too_long"),
    ],
)
def test_incomplete_is_truncated(details: dict[str, Any] | None, reason: str) -> None:
    extra = {"incomplete_details": details} if details else {}
    turn = ADAPTER.parse_response(interaction("incomplete", OUTPUT, **extra))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.TRUNCATED, "incomplete", reason)
    assert not turn.executable


@pytest.mark.parametrize(
    ("errors", "raw", "retryable"),
    [
        ([{"code": "internal", "message": "boom"}], "internal", True),
        ([{"code": "invalid_argument", "message": "bad"}], "invalid_argument", False),
        ([], "failed", False),
    ],
)
def test_failed_is_api_failure(errors: list[dict[str, Any]], raw: str, retryable: bool) -> None:
    turn = ADAPTER.parse_response(interaction("failed", errors=errors))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.API_FAILURE, raw, "api_error")
    assert turn.failure is not None and turn.failure.retryable is retryable


def test_failed_with_calls_never_executes() -> None:
    turn = ADAPTER.parse_response(interaction("failed", CALL))
    assert turn.finish is Finish.API_FAILURE and not turn.executable and len(turn.calls) == 1


def test_cancelled_is_fatal_failure() -> None:
    turn = ADAPTER.parse_response(interaction("cancelled", CALL))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.API_FAILURE, "cancelled", "cancelled")
    assert turn.failure is not None and not turn.failure.retryable


# budget_exceeded and requires_continuation are length stops, TRUNCATED (review 9, D1; see
# test_stop_reasons_review9.py); these are not terminal or unknown.
@pytest.mark.parametrize("status", ["in_progress", "queued", "idle", "brand_new", None])
def test_other_statuses_are_unknown_stop_reason(status: str | None) -> None:
    turn = ADAPTER.parse_response(interaction(status, OUTPUT))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (
        Finish.API_FAILURE,
        status,
        "unknown_stop_reason",
    )
    assert turn.failure is not None and not turn.failure.retryable


def test_missing_id_is_synthetic_and_call_ids_too() -> None:
    raw = json.dumps(
        {"status": "requires_action", "steps": [{"type": "function_call", "name": "f", "arguments": {}}]}
    )
    turn = ADAPTER.parse_response(raw.encode())
    assert turn.response_id == "cb:" + sha(raw.encode())[:16]
    assert (turn.calls[0].call_id, turn.calls[0].synthetic_id) == (f"{turn.response_id}:0", True)


def test_duplicate_keys_in_arguments_are_rejected() -> None:
    raw = (
        b'{"id":"v1","status":"requires_action","steps":[{"type":"function_call","id":"c1","name":"f",'
        b'"arguments":{"a":1,"a":2}}]}'
    )
    call = ADAPTER.parse_response(raw).calls[0]
    assert call.arguments is None and "duplicate" in str(call.arguments_error)


def test_usage_counts_tool_use_and_thought_tokens() -> None:
    usage = {
        "total_input_tokens": 50,
        "total_cached_tokens": 20,  # part of total_input_tokens (D27)
        "total_tool_use_tokens": 4,
        "total_output_tokens": 15,
        "total_reasoning_tokens": 41,  # the pre-2025-12 name of total_thought_tokens
    }
    turn = ADAPTER.parse_response(interaction("completed", OUTPUT, usage=usage))
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (54, 56)
    assert ADAPTER.parse_response(interaction("completed", OUTPUT)).usage.input_tokens is None


def test_error_body_without_status() -> None:
    turn = ADAPTER.parse_response({"error": {"code": "not_found", "message": "no such model"}})
    assert (turn.finish, turn.raw_stop_reason) == (Finish.API_FAILURE, "not_found")
    assert turn.failure is not None and turn.failure.kind == "error_body" and not turn.failure.retryable


# ---- recordings --------------------------------------------------------------------------------------

# file → (finish, raw stop reason, response id prefix, calls, usage, text prefix, continuation kinds)
RECORDINGS: dict[
    str, tuple[Finish, str, str, list[tuple[str, str, dict[str, Any]]], tuple[int, int], str, list[str]]
] = {
    "ai__steps__tool-call-step1.json": (
        Finish.TOOL_PROPOSALS,
        "requires_action",
        "v1_ChdUMnNIYXVxU0lJX",
        [("zggxzq8r", "getWeather", {"location": "San Francisco"})],
        (53, 15 + 41),
        "",
        ["thought", "function_call"],
    ),
    "ai__steps__tool-call-step2.json": (
        Finish.FINAL_TEXT,
        "completed",
        "v1_ChdVR3NIYXVhR091S",
        [],
        (95, 16),
        "The weather in San Francisco is sunny",
        ["thought", "model_output"],
    ),
    "ai__steps__tool-call-step2.chunks.txt": (
        Finish.FINAL_TEXT,
        "completed",
        "v1_ChZWR3NIYW9wMXJLY",
        [],
        (161, 19),
        "The weather in San Francisco right now is sunny with a temperature of 27 degrees Celsius.",
        ["thought", "model_output"],
    ),
    "ai__steps__basic.chunks.txt": (
        Finish.FINAL_TEXT,
        "completed",
        "v1_ChdUR3NIYXVyQkFlY",
        [],
        (7, 26 + 115),
        "I'm doing great, thank you for asking!",
        ["thought", "model_output"],
    ),
    "ai__steps__multi-turn-stateful-turn2.json": (
        Finish.FINAL_TEXT,
        "completed",
        "v1_ChdWV3NIYXNYZEc5S",
        [],
        (12, 43 + 464),
        "The most famous landmark in Barcelona",
        ["thought", "model_output"],
    ),
    "ai__steps__multi-turn-stateless-turn2.json": (
        Finish.FINAL_TEXT,
        "completed",
        "cb:",  # store:false: the interaction has no id (D7 synthetic)
        [],
        (56, 54 + 446),
        "The most famous landmark in **Barcelona**",
        ["thought", "model_output"],
    ),
    "ai__legacy-outputs__tool-call-step1.chunks.txt": (
        Finish.TOOL_PROPOSALS,
        "requires_action",
        "v1_ChdzT240YVlHeElfV",
        [("odkxni2w", "getWeather", {"location": "San Francisco"})],
        (54, 15 + 67),
        "",
        ["model"],
    ),
    "ai__legacy-outputs__tool-call-step2.chunks.txt": (
        Finish.FINAL_TEXT,
        "completed",
        "v1_ChdzdW40YWFHNkNOT",
        [],
        (164, 19),
        "The weather in San Francisco right now is sunny with a temperature of 16 degrees Celsius.",
        ["model"],
    ),
    "ai__legacy-outputs__tool-call-step2.json": (
        Finish.FINAL_TEXT,
        "completed",
        "v1_ChdsT240YVpfbUdZe",
        [],
        (97, 19),
        "The weather in San Francisco right now is sunny",
        ["model"],
    ),
}


def parse_recording(name: str) -> tuple[ModelTurn, list[Progress] | None]:
    data = read_bytes(f"gemini-interactions/{name}")
    if name.endswith(".chunks.txt"):
        return run_stream([data])
    return ADAPTER.parse_response(data), None


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_recordings(name: str) -> None:
    finish, raw, rid, calls, usage, text, kinds = RECORDINGS[name]
    turn, progress = parse_recording(name)
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (finish, raw, None)
    assert turn.response_id.startswith(rid)
    assert [(c.call_id, c.name, c.arguments) for c in turn.calls] == calls
    assert all(not c.synthetic_id and c.arguments_error is None for c in turn.calls)
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == usage
    assert turn.text.startswith(text)
    assert [i.get("type") or i.get("role") for i in turn.continuation] == kinds
    if progress is not None:
        assert [p.call_id for p in progress if isinstance(p, CallStarted)] == [c[0] for c in calls]
        assert [p.call_id for p in progress if isinstance(p, CallReady)] == [c[0] for c in calls]


def test_plain_body_continuation_is_the_steps_unchanged() -> None:
    data = read_bytes("gemini-interactions/ai__steps__tool-call-step1.json")
    turn = ADAPTER.parse_response(data)
    assert list(turn.continuation) == json.loads(data)["steps"]


def test_streamed_steps_equal_the_plain_body_shape() -> None:
    # The same answer recorded both ways: the stream rebuilds the steps the plain body holds.
    streamed, _ = parse_recording("ai__steps__tool-call-step2.chunks.txt")
    assert list(streamed.continuation) == [
        {"type": "thought", "signature": "CiRlMjQ4MzBhNy01Y2Q2LTQyZmUtOTk4Yi1lZTUzOWU3MmI5YzM="},
        {
            "type": "model_output",
            "content": [
                {
                    "type": "text",
                    "text": "The weather in San Francisco right now is sunny with a temperature of 27 degrees Celsius.",
                }
            ],
        },
    ]


def test_legacy_stream_rebuilds_outputs() -> None:
    """A legacy whole ``function_call`` delta counts its arguments as compact JSON, as ``capped``
    measures them in a plain body (review 3; with default separators' spaces before)."""
    turn, progress = parse_recording("ai__legacy-outputs__tool-call-step1.chunks.txt")
    [model] = turn.continuation
    assert model["role"] == "model"
    thought, call = model["content"]
    assert thought["type"] == "thought" and thought["signature"].startswith("CiQBDDnWxwaJgUfW")
    assert call == {
        "id": "odkxni2w",
        "type": "function_call",
        "name": "getWeather",
        "arguments": {"location": "San Francisco"},
    }
    # Legacy content.start carries only the id: the call is announced once its name arrives.
    assert progress == [
        CallStarted("odkxni2w", "getWeather"),
        ArgumentsProgress("odkxni2w", len(b'{"location":"San Francisco"}')),
        CallReady("odkxni2w"),
    ]


# ---- continuation: results, requests and check_request ---------------------------------------------


def step1() -> ModelTurn:
    return ADAPTER.parse_response(read_bytes("gemini-interactions/ai__steps__tool-call-step1.json"))


def test_stateless_replay_request_matches_the_recorded_exchange() -> None:
    # tool-call-step2 was answered after vercel-ai sent: user_input, thought (signature), function_call,
    # then a user_input step holding the function_result. Our default request has that structure except
    # for the result, a top-level function_result step by default (WIRE.md 5.5: the form of Google's
    # samples and of google-genai; review 9), as Google's client-state sample sends it.
    turn = step1()
    [call] = turn.calls
    items = (
        ADAPTER.initial_items("What is the weather in San Francisco right now?", [])
        + ADAPTER.turn_items(turn)
        + ADAPTER.result_items(turn, [(call, ok_result({"temperature": 8}))])
    )
    body = ADAPTER.build_request(
        items=items, tools=[], settings={"model": "gemini-2.5-flash"}, instructions=None, stream=False
    )
    assert [i["type"] for i in body["input"]] == ["user_input", "thought", "function_call", "function_result"]
    assert body["input"][1:3] == list(turn.continuation)  # thought signature carried back unchanged
    assert body["input"][3:] == [
        {
            "type": "function_result",
            "call_id": "zggxzq8r",
            "name": "getWeather",
            "result": '{"data":{"temperature":8},"ok":true}',
            "is_error": False,
        }
    ]
    assert "previous_interaction_id" not in body and body["model"] == "gemini-2.5-flash"
    ADAPTER.check_request(body, previous=turn)


def test_stateful_request_sends_only_the_results() -> None:
    turn = step1()
    [call] = turn.calls
    new = ADAPTER.result_items(turn, [(call, error_result("TIMEOUT", "late"))])
    body = ADAPTER.build_request(
        items=[],
        tools=[],
        settings={"continuation": "previous_response_id"},
        instructions="be brief",
        stream=True,
        previous_response_id=turn.response_id,
        new_items=new,
    )
    assert body["previous_interaction_id"] == turn.response_id
    assert body["input"] == new and new[0]["is_error"] is True  # a top-level step (WIRE.md 5.5)
    assert body["system_instruction"] == "be brief" and body["stream"] is True
    ADAPTER.check_request(body, previous=turn)
    with pytest.raises(ProtocolViolation):  # the call is not answered
        ADAPTER.check_request({**body, "input": []}, previous=turn)


def test_synthetic_interaction_id_is_never_chained() -> None:
    body = ADAPTER.build_request(
        items=[{"type": "user_input", "content": []}],
        tools=[],
        settings={},
        instructions=None,
        stream=False,
        previous_response_id="cb:0123456789abcdef",
        new_items=[],
    )
    assert "previous_interaction_id" not in body and body["input"] == [{"type": "user_input", "content": []}]


def test_result_placement_step() -> None:
    adapter = GeminiInteractionsAdapter(result_placement="step")
    turn = step1()
    items = adapter.result_items(turn, [(turn.calls[0], ok_result(1))])
    assert [i["type"] for i in items] == ["function_result"]
    body = adapter.build_request(
        items=adapter.turn_items(turn) + items, tools=[], settings={}, instructions=None, stream=False
    )
    adapter.check_request(body, previous=turn)
    with pytest.raises(UsageError):
        GeminiInteractionsAdapter(result_placement="inline")


def test_legacy_turn_gets_a_legacy_answer() -> None:
    turn, _ = parse_recording("ai__legacy-outputs__tool-call-step1.chunks.txt")
    [call] = turn.calls
    items = ADAPTER.turn_items(turn) + ADAPTER.result_items(turn, [(call, ok_result("sunny"))])
    assert [i["role"] for i in items] == ["model", "user"]
    assert items[1]["content"][0]["call_id"] == "odkxni2w"
    ADAPTER.check_request({"input": items}, previous=turn)


def test_results_of_synthetic_ids_carry_no_call_id() -> None:
    raw = b'{"status":"requires_action","steps":[{"type":"function_call","name":"f","arguments":{}}]}'
    turn = ADAPTER.parse_response(raw)
    [block] = ADAPTER.result_items(turn, [(turn.calls[0], ok_result(1))])
    assert "call_id" not in block and block["name"] == "f"


def two_calls() -> ModelTurn:
    calls = [{**CALL, "id": "a1"}, {**CALL, "id": "b2", "arguments": {"city": "Rome"}}]
    return ADAPTER.parse_response(interaction("requires_action", THOUGHT, *calls))


def replay(turn: ModelTurn, results: list[tuple[ToolCall, dict[str, Any]]]) -> dict[str, Any]:
    items = (
        ADAPTER.initial_items("Weather?", []) + ADAPTER.turn_items(turn) + ADAPTER.result_items(turn, results)
    )
    return ADAPTER.build_request(items=items, tools=[], settings={}, instructions=None, stream=False)


@pytest.mark.parametrize(
    "how", ["unanswered", "twice", "unknown", "thought-dropped", "signature-changed", "bad-result"]
)
def test_check_request_rejects(how: str) -> None:
    turn = two_calls()
    body = json.loads(json.dumps(replay(turn, [(c, ok_result(1)) for c in turn.calls])))
    # the results are the last steps of the input, each a top-level function_result (WIRE.md 5.5)
    results = [s for s in body["input"] if s["type"] == "function_result"]
    if how == "unanswered":
        body["input"].pop()
    elif how == "twice":
        body["input"].append(results[0])
    elif how == "unknown":
        results[0]["call_id"] = "zzz"
    elif how == "thought-dropped":
        body["input"].pop(1)
    elif how == "signature-changed":
        body["input"][1]["signature"] = "other"
    elif how == "bad-result":
        results[0]["result"] = 3
    with pytest.raises(ProtocolViolation):
        ADAPTER.check_request(body, previous=turn)


def test_check_request_accepts_interleaved_call_turn() -> None:
    turn, _ = run_stream([INTERLEAVED.read_bytes()])
    ADAPTER.check_request(replay(turn, [(c, ok_result(c.call_id)) for c in turn.calls]), previous=turn)


def test_duplicate_call_id_is_answered_once() -> None:
    calls = [{**CALL, "id": "dup"}, {**CALL, "id": "dup"}]
    turn = ADAPTER.parse_response(interaction("requires_action", *calls))
    assert [c.call_id for c in turn.calls] == ["dup", "dup"]  # dispatch fails both closed (D7)
    ADAPTER.check_request(
        replay(turn, [(turn.calls[0], error_result("DUPLICATE_CALL_ID", "none ran"))]), previous=turn
    )


# ---- tools and settings ----------------------------------------------------------------------------


def test_render_tools_inlines_refs() -> None:
    params = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"City": {"type": "string"}},
        "type": "object",
        "properties": {"city": {"$ref": "#/$defs/City"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    assert ADAPTER.render_tools([ToolDeclaration("getWeather", "Weather", params)]) == [
        {
            "type": "function",
            "name": "getWeather",
            "description": "Weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        }
    ]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("required", "any"),
        ("none", "none"),
        ({"name": "getWeather"}, {"allowed_tools": {"mode": "any", "tools": ["getWeather"]}}),
    ],
)
def test_tool_choice(choice: Any, wire: Any) -> None:
    body = ADAPTER.build_request(
        items=[],
        tools=[],
        settings={"tool_choice": choice, "temperature": 0, "max_output_tokens": 9, "store": False},
        instructions=None,
        stream=False,
    )
    assert body["generation_config"] == {"temperature": 0, "max_output_tokens": 9, "tool_choice": wire}
    assert body["store"] is False and "stream" not in body
    with pytest.raises(UsageError):
        ADAPTER.build_request(
            items=[], tools=[], settings={"tool_choice": "validated"}, instructions=None, stream=False
        )


def test_extra_is_deep_merged_last() -> None:
    extra = {"generation_config": {"thinking_level": "low"}, "service_tier": "flex"}
    body = ADAPTER.build_request(
        items=[], tools=[], settings={"temperature": 1, "extra": extra}, instructions=None, stream=False
    )
    assert body["generation_config"] == {"temperature": 1, "thinking_level": "low"}
    assert body["service_tier"] == "flex"


# ---- map_error ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "payload", "raw", "retryable", "reason"),
    [
        (400, {"error": {"code": "invalid_request", "message": "bad"}}, "400", False, "api_error"),
        (503, {"error": {"code": 503, "status": "UNAVAILABLE", "message": "busy"}}, "503", True, "api_error"),
        (429, {"error": {"code": "resource_exhausted", "message": "slow down"}}, "429", True, "rate_limited"),
        (429, {"error": {"code": "quota_exceeded", "message": "no more"}}, "429", False, "quota_exceeded"),
        (404, None, "404", False, "api_error"),
    ],
)
def test_map_error_http(status: int, payload: Any, raw: str, retryable: bool, reason: str) -> None:
    body = None if payload is None else json.dumps(payload).encode()
    turn = ADAPTER.map_error(RawFailure("http", status, body))
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.API_FAILURE, raw, reason)
    assert turn.failure is not None and turn.failure.retryable is retryable


def test_map_error_retry_info_and_header() -> None:
    payload = read_bytes("gemini/ai__google-429-retry-info.json")  # google.rpc shape, as Google APIs send
    turn = ADAPTER.map_error(RawFailure("http", 429, payload))
    assert turn.failure is not None and turn.failure.retry_after_s == 34.4 and turn.failure.retryable
    turn = ADAPTER.map_error(RawFailure("http", 429, payload, {"retry-after-ms": "1500"}))
    assert turn.failure is not None and turn.failure.retry_after_s == 1.5


@pytest.mark.parametrize("kind", ["connection", "timeout", "stream_cut"])
def test_map_error_transport_failures_are_retryable(kind: str) -> None:
    turn = ADAPTER.map_error(RawFailure(kind))
    assert turn.failure is not None and turn.failure.retryable
    assert turn.finish is (Finish.TRUNCATED if kind == "stream_cut" else Finish.API_FAILURE)


# ---- streaming edges -------------------------------------------------------------------------------

CREATED = {
    "interaction": {"id": "v1_s", "status": "in_progress", "model": "gemini-x"},
    "event_type": "interaction.created",
}


def completed(status: str = "requires_action", **extra: Any) -> dict[str, Any]:
    return {"interaction": {"id": "v1_s", "status": status, **extra}, "event_type": "interaction.completed"}


def call_events(index: int, cid: str, *fragments: str) -> list[dict[str, Any]]:
    start = {"type": "function_call", "id": cid, "signature": "", "name": "f", "arguments": {}}
    return [
        {"index": index, "step": start, "event_type": "step.start"},
        *(
            {"index": index, "delta": {"type": "arguments_delta", "arguments": f}, "event_type": "step.delta"}
            for f in fragments
        ),
        {"index": index, "event_type": "step.stop"},
    ]


def test_interleaved_parallel_calls_are_assembled_by_index() -> None:
    turn, progress = run_stream([INTERLEAVED.read_bytes()])
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [(c.call_id, c.arguments, c.output_index) for c in turn.calls] == [
        ("call_oslo", {"location": "Oslo – Bjørvika"}, 1),
        ("call_rome", {"location": "Rome", "unit": "C"}, 2),
    ]
    # The strict parser read the text as sent (D5); the continuation carries the object.
    assert turn.calls[0].arguments_raw == '{"location":"Oslo – Bjørvika"}'
    assert turn.continuation[1] == {
        "id": "call_oslo",
        "signature": "",  # tolerated as recorded (WIRE.md 5.6); sent back as received
        "type": "function_call",
        "name": "getWeather",
        "arguments": {"location": "Oslo – Bjørvika"},
    }
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (65, 75)
    by_call: dict[str, list[int]] = {}
    for p in progress:
        if isinstance(p, ArgumentsProgress):
            by_call.setdefault(p.call_id, []).append(p.bytes)
    assert by_call == {"call_oslo": [7, 33], "call_rome": [15, 30]}


@pytest.mark.parametrize("indices", [(0, 1), (1, 2), (3, 4), (0, 2), (2, 7)])
@pytest.mark.parametrize("stop", [True, False], ids=["step.stop", "no-step.stop"])
def test_each_call_is_parsed_from_its_own_arguments_whatever_the_step_indices(
    indices: tuple[int, int], stop: bool
) -> None:
    # The argument text is kept by step index; calls are numbered by position among the steps.
    a, b = (
        call_events(i, cid, text)
        for i, cid, text in zip(indices, ("cA", "cB"), ('{"amount":5}', '{"amount":500}'), strict=True)
    )
    if not stop:  # a step may end without step.stop: its text is joined at the end
        a, b = a[:-1], b[:-1]
    turn, _ = run_stream([sse(CREATED, *a, *b, completed())])
    assert [(c.call_id, c.arguments, c.arguments_raw, c.output_index) for c in turn.calls] == [
        ("cA", {"amount": 5}, '{"amount":5}', 0),
        ("cB", {"amount": 500}, '{"amount":500}', 1),
    ]
    assert [step["arguments"] for step in turn.continuation] == [{"amount": 5}, {"amount": 500}]


@pytest.mark.parametrize("bad_first", [True, False])
def test_arguments_errors_stay_with_their_call_when_indices_have_gaps(bad_first: bool) -> None:
    # Duplicate keys are caught only in the text as sent (D5): another call's text must never stand in.
    bad = ("bad", '{"a": 1, "a": 2}')
    good = ("good", '{"a": 3}')
    first, second = (bad, good) if bad_first else (good, bad)
    events = [CREATED, *call_events(1, *first), *call_events(6, *second), completed()]
    turn, _ = run_stream([sse(*events)])
    calls = {c.call_id: c for c in turn.calls}
    assert [c.call_id for c in turn.calls] == [first[0], second[0]]
    assert calls["bad"].arguments is None and "duplicate" in str(calls["bad"].arguments_error)
    assert (calls["good"].arguments, calls["good"].arguments_error) == ({"a": 3}, None)


def test_unparseable_streamed_arguments_stay_raw() -> None:
    events = [CREATED, *call_events(0, "c1", '{"a": 1,', ' "a": 2}'), completed()]
    turn, _ = run_stream([sse(*events)])
    assert turn.finish is Finish.TOOL_PROPOSALS  # dispatch rejects the call with its error
    assert turn.calls[0].arguments is None and "duplicate" in str(turn.calls[0].arguments_error)
    assert turn.calls[0].arguments_raw == '{"a": 1, "a": 2}'  # the raw text stays on the call (D5)
    # The step goes back with an object, which FunctionCallStepParam requires (D8; review 9).
    assert turn.continuation[0]["arguments"] == {"a": 2}


def test_missing_terminal_is_a_cut_stream() -> None:
    turn, _ = run_stream([sse(CREATED, *call_events(0, "c1", '{"a": 1}'))])
    assert (turn.finish, turn.reason, turn.calls, turn.response_id) == (
        Finish.TRUNCATED,
        "stream_interrupted",
        (),
        "v1_s",
    )
    assert turn.failure is not None and turn.failure.retryable


def test_done_sentinel_is_not_a_terminal() -> None:
    turn, _ = run_stream([sse(CREATED, *call_events(0, "c1", "{}")) + b"data: [DONE]\n\n"])
    assert turn.reason == "stream_interrupted"


def test_error_event_mid_stream() -> None:
    error = {"event_type": "error", "error": {"code": "unavailable", "message": "try later"}}
    turn, _ = run_stream([sse(CREATED, *call_events(0, "c1", '{"a"'), error)])
    assert (turn.finish, turn.raw_stop_reason, turn.response_id) == (
        Finish.API_FAILURE,
        "unavailable",
        "v1_s",
    )
    assert turn.failure is not None and turn.failure.kind == "error_event" and turn.failure.retryable


def test_store_false_stream_has_a_synthetic_id() -> None:
    created = {"interaction": {"id": "", "status": "in_progress"}, "event_type": "interaction.created"}
    end = {"interaction": {"id": "", "status": "requires_action"}, "event_type": "interaction.completed"}
    data = sse(created, *call_events(0, "c1", "{}"), end)
    turn, _ = run_stream([data])
    assert turn.response_id == "cb:" + sha(data)[:16] and turn.calls[0].call_id == "c1"


def test_duplicate_call_id_in_stream() -> None:
    data = sse(CREATED, *call_events(0, "dup", "{}"), *call_events(1, "dup", "{}"), completed())
    turn, _ = run_stream([data])
    assert [c.call_id for c in turn.calls] == ["dup", "dup"]


def compact_sse(*events: dict[str, Any]) -> bytes:
    """Compact and ASCII-escaped, as the API writes it: arguments deltas built by ``arguments_delta``
    take StreamFeed's fast path."""
    return b"".join(
        f"event: {e.get('event_type')}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n".encode()
        for e in events
    )


def arguments_delta(index: int, fragment: str) -> dict[str, Any]:
    # key order of the API's own events (WIRE.md 5.6), which the fast path matches
    delta = {"arguments": fragment, "type": "arguments_delta"}
    return {"index": index, "delta": delta, "event_type": "step.delta"}


def fed(raw: bytes) -> tuple[ModelTurn, list[Progress]]:
    return streaming.fed(ADAPTER, raw)


@pytest.mark.parametrize(
    "steps",
    [
        [(2, "call"), (5, "call")],
        [(0, "call"), (1, "call")],
        [(0, "thought"), (3, "call"), (4, "real"), (9, "call")],
        [(1, "call"), (2, "output"), (7, "call")],
    ],
)
@pytest.mark.parametrize("rid", ["v1_s", ""], ids=["id", "store-false"])
def test_progress_names_a_call_without_id_as_the_turn_does(steps: list[tuple[int, str]], rid: str) -> None:
    # D7: a call without an id is "{response id}:{position among the steps}" in the turn; progress
    # events must name it alike, whatever the step indices, so a listener can match them to the turn.
    events: list[dict[str, Any]] = [
        {"interaction": {"id": rid, "status": "in_progress"}, "event_type": "interaction.created"}
    ]
    for index, kind in steps:
        step: dict[str, Any] = {"type": "function_call", "name": "f", "arguments": {}}
        if kind == "thought":
            step = {"type": "thought"}
        elif kind == "output":
            step = {"type": "model_output", "content": [{"type": "text", "text": "so"}]}
        elif kind == "real":
            step["id"] = "c_real"
        events.append({"index": index, "step": step, "event_type": "step.start"})
        if step["type"] == "function_call":
            events += [arguments_delta(index, '{"n":'), arguments_delta(index, f"{index}}}")]
        events.append({"index": index, "event_type": "step.stop"})
    events.append(
        {"interaction": {"id": rid, "status": "requires_action"}, "event_type": "interaction.completed"}
    )
    raw = compact_sse(*events)
    assert _ARGUMENTS_DATA.fullmatch(json.dumps(arguments_delta(0, "{}"), separators=(",", ":")))
    (turn, progress), (fast, fast_progress) = run_stream([raw]), fed(raw)
    assert (fast, fast_progress) == (turn, progress)
    calls = [i for i, kind in steps if kind in ("call", "real")]
    assert [c.arguments for c in turn.calls] == [{"n": i} for i in calls]
    ids = [c.call_id for c in turn.calls]
    positions = [pos for pos, (_, kind) in enumerate(steps) if kind in ("call", "real")]
    assert ids == [
        "c_real" if kind == "real" else f"{turn.response_id}:{pos}"
        for pos, (_, kind) in enumerate(steps)
        if kind in ("call", "real")
    ]
    assert [c.output_index for c in turn.calls] == positions
    # Without a response id (store:false) the synthetic id is known only at the end: progress names
    # the call "#" + its position, the suffix of the turn's id.
    named = ids if rid else [i if i == "c_real" else "#" + i.rsplit(":", 1)[1] for i in ids]
    assert [p.call_id for p in progress if isinstance(p, CallStarted)] == named
    assert [p.call_id for p in progress if isinstance(p, CallReady)] == named
    assert [p.call_id for p in progress if isinstance(p, ArgumentsProgress)] == [
        n for n in named for _ in "12"
    ]


def test_text_character_split_across_two_deltas_as_surrogate_halves() -> None:
    # "😀" as its two JSON-escaped UTF-16 halves in two text deltas, also right after a snapshot that
    # ends with the first half: the turn's text and the continuation hold it whole, so the next
    # request can be encoded (D4).
    events = [
        CREATED,
        {"index": 0, "step": {"type": "model_output"}, "event_type": "step.start"},
        {"index": 0, "delta": {"type": "text", "text": "hi \ud83d"}, "event_type": "step.delta"},
        {"index": 0, "delta": {"type": "text", "text": "\ude00"}, "event_type": "step.delta"},
        {"index": 0, "event_type": "step.stop"},
        {
            "index": 1,
            "step": {"type": "model_output", "content": [{"type": "text", "text": " ok \ud83d"}]},
            "event_type": "step.start",
        },
        {"index": 1, "delta": {"type": "text", "text": "\ude00"}, "event_type": "step.delta"},
        {"index": 1, "event_type": "step.stop"},
        completed("completed"),
    ]
    raw = compact_sse(*events)
    assert raw.isascii()
    for turn in (run_stream([raw])[0], fed(raw)[0]):
        assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "hi 😀 ok 😀")
        assert [step["content"] for step in turn.continuation] == [
            [{"type": "text", "text": "hi 😀"}],
            [{"type": "text", "text": " ok 😀"}],
        ]
        request = ADAPTER.build_request(
            items=[*ADAPTER.initial_items("hi", []), *ADAPTER.turn_items(turn)],
            tools=[],
            settings={"model": "m"},
            instructions=None,
            stream=True,
        )
        assert "hi 😀".encode() in body_bytes(request)


@pytest.mark.parametrize("caps", [StreamCaps(max_call_bytes=8), StreamCaps(max_response_bytes=12)])
def test_byte_cap(caps: StreamCaps) -> None:
    data = sse(
        CREATED, *call_events(0, "a", '{"s":', '"1234"}'), *call_events(1, "b", '{"s":1}'), completed()
    )
    assembler = ADAPTER.stream_assembler(caps)
    for payload in iter_payloads([data]):
        assembler.feed(payload)
    assert assembler.aborted
    turn = assembler.finish(sha(data))
    assert (turn.finish, turn.reason, turn.calls) == (Finish.TRUNCATED, "arguments_too_large", ())


def test_thought_summary_and_text_snapshot() -> None:
    events = [
        CREATED,
        {"index": 0, "step": {"type": "thought"}, "event_type": "step.start"},
        {
            "index": 0,
            "delta": {"type": "thought_summary", "content": {"type": "text", "text": "hm"}},
            "event_type": "step.delta",
        },
        {"index": 0, "delta": {"type": "thought_signature", "signature": "c2ln"}, "event_type": "step.delta"},
        {"index": 0, "event_type": "step.stop"},
        {
            "index": 1,
            "step": {"type": "model_output", "content": [{"type": "text", "text": "Hel"}]},
            "event_type": "step.start",
        },
        {"index": 1, "delta": {"type": "text", "text": "lo"}, "event_type": "step.delta"},
        {"index": 1, "event_type": "step.stop"},
        completed("completed"),
    ]
    turn, _ = run_stream([sse(*events)])
    assert turn.text == "Hello" and turn.finish is Finish.FINAL_TEXT
    assert list(turn.continuation) == [
        {"type": "thought", "summary": [{"type": "text", "text": "hm"}], "signature": "c2ln"},
        {"type": "model_output", "content": [{"type": "text", "text": "Hello"}]},
    ]


@settings(max_examples=60, deadline=None)
@given(
    args=st.dictionaries(
        st.text(min_size=1, max_size=5),
        st.one_of(st.integers(-1000, 1000), st.text(max_size=8), st.booleans()),
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8),
)
def test_any_fragmentation_of_arguments_gives_the_same_turn(args: dict[str, Any], cuts: list[int]) -> None:
    text = json.dumps(args, ensure_ascii=False)
    points = sorted({c % (len(text) + 1) for c in cuts})
    fragments = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    assembler = ADAPTER.stream_assembler()
    for payload in iter_payloads([sse(CREATED, *call_events(0, "c1", *fragments), completed())]):
        assembler.feed(payload)
    turn = assembler.finish("0" * 64)
    assert turn.calls[0].arguments == args and turn.calls[0].arguments_raw == text
    assert turn.continuation[0]["arguments"] == args


@settings(max_examples=30, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=100_000), max_size=10))
def test_random_byte_split_points_give_the_same_turn(cuts: list[int]) -> None:
    data = INTERLEAVED.read_bytes()
    whole = run_stream([data])
    points = sorted({c % (len(data) + 1) for c in cuts})
    assert run_stream([data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]) == whole


# ---- malformed shapes: never an exception (D4), never a completion (D1; review round 16, F6) ----------


@pytest.mark.parametrize("steps", [5, "steps", {"type": "model_output"}, True])
def test_steps_that_are_not_a_list_are_a_malformed_response(steps: Any) -> None:
    raw = json.dumps({**interaction("completed"), "steps": steps}).encode()
    turn = ADAPTER.parse_response(raw)
    assert (turn.finish, turn.reason, turn.text, turn.calls) == (
        Finish.API_FAILURE,
        "malformed_response",
        "",
        (),
    )
    assert turn.failure is not None and turn.failure.error_code == "steps_not_a_list"
    waiting = ADAPTER.parse_response(json.dumps({**interaction("requires_action"), "steps": steps}))
    assert (waiting.finish, waiting.reason) == (Finish.API_FAILURE, "malformed_response")


@pytest.mark.parametrize("content", [5, "It is 3 C.", {"type": "text", "text": "It is 3 C."}])
def test_model_output_content_that_is_not_a_list_is_a_malformed_response(content: Any) -> None:
    odd = {"type": "model_output", "content": content}
    turn = ADAPTER.parse_response(json.dumps(interaction("completed", odd, OUTPUT)).encode())
    assert (turn.finish, turn.reason, turn.text) == (Finish.API_FAILURE, "malformed_response", "It is 3 C.")
    assert turn.failure is not None and turn.failure.error_code == "content_not_a_list"
    with_call = ADAPTER.parse_response(interaction("requires_action", odd, CALL))
    assert (with_call.finish, with_call.reason) == (Finish.API_FAILURE, "malformed_response")
    assert not with_call.executable


def test_model_output_content_null_holds_no_text() -> None:
    odd = {"type": "model_output", "content": None}
    turn = ADAPTER.parse_response(json.dumps(interaction("completed", odd, OUTPUT)).encode())
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "It is 3 C.")
    assert turn.continuation == (odd, OUTPUT), "the steps go back unchanged"
    with_call = ADAPTER.parse_response(interaction("requires_action", odd, CALL))
    assert with_call.finish is Finish.TOOL_PROPOSALS
    assert [c.call_id for c in with_call.calls] == ["zggxzq8r"]
