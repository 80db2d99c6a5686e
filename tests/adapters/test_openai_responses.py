"""OpenAI Responses adapter: stop reasons (D1, D31, D32), errors (D26, D30), recordings (D27), continuation
(D8), streaming assembly and progress, check_request (D24)."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callbound.adapters import get
from callbound.adapters.base import StreamCaps, body_bytes
from callbound.adapters.openai_responses import ADAPTER
from callbound.adapters.sse import iter_payloads
from callbound.core.errors import ProtocolViolation
from callbound.core.machine import classify_turn
from callbound.core.states import State
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
from tests.recordings import fixtures_dir, load_cassette, read_bytes, request_body, response_body, status_code

DATA = Path(__file__).parent / "data" / "openai_responses"
REC = "openai-responses/"


# ---- builders -------------------------------------------------------------------------------------


def fc(call_id: str, name: str, arguments: str, item_id: str | None = None, **extra: Any) -> dict[str, Any]:
    item = {"type": "function_call", "id": item_id or "fc_" + call_id, "call_id": call_id, "name": name}
    return {**item, "arguments": arguments, "status": "completed", **extra}


def msg(*parts: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": list(parts),
    }


def text(t: str) -> dict[str, Any]:
    return {"type": "output_text", "text": t, "annotations": []}


def refusal(t: str) -> dict[str, Any]:
    return {"type": "refusal", "refusal": t}


def body(
    status: Any = "completed", output: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    resp: dict[str, Any] = {"id": "resp_1", "object": "response", "model": "gpt-test", "output": output or []}
    if status is not None:
        resp["status"] = status
    resp["usage"] = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    return {**resp, **extra}


def sse(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def assemble(chunks: list[bytes], caps: StreamCaps | None = None) -> tuple[ModelTurn, list[Progress], Any]:
    asm = ADAPTER.stream_assembler(caps)
    progress: list[Progress] = []
    for payload in iter_payloads(chunks):
        progress.extend(asm.feed(payload))
    return asm.finish(hashlib.sha256(b"".join(chunks)).hexdigest()), progress, asm


def json_body(interaction: dict[str, Any]) -> dict[str, Any]:
    resp = response_body(interaction)
    assert isinstance(resp, dict)
    return resp


def stream_body(interaction: dict[str, Any]) -> bytes:
    resp = response_body(interaction)
    assert isinstance(resp, str)
    return resp.encode("utf-8")


def dict_payloads(raw: bytes) -> list[dict[str, Any]]:
    return [p for p in iter_payloads([raw]) if isinstance(p, dict)]


def data(name: str) -> bytes:
    return (DATA / name).read_bytes()


def created(rid: str = "resp_s") -> dict[str, Any]:
    return {"type": "response.created", "response": {"id": rid, "status": "in_progress", "output": []}}


def added(idx: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.added", "output_index": idx, "item": item}


def delta(idx: int | None, item_id: str, d: str) -> dict[str, Any]:
    ev: dict[str, Any] = {"type": "response.function_call_arguments.delta", "item_id": item_id, "delta": d}
    if idx is not None:
        ev["output_index"] = idx
    return ev


def done(idx: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.done", "output_index": idx, "item": item}


def completed(
    rid: str = "resp_s", output: list[dict[str, Any]] | None = None, status: str = "completed"
) -> dict[str, Any]:
    kind = {
        "completed": "response.completed",
        "incomplete": "response.incomplete",
        "failed": "response.failed",
    }
    resp = {
        "id": rid,
        "status": status,
        "output": output or [],
        "usage": {"input_tokens": 3, "output_tokens": 4},
    }
    return {"type": kind[status], "response": resp}


def started_fc(call_id: str, name: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_" + call_id,
        "call_id": call_id,
        "name": name,
        "arguments": "",
        "status": "in_progress",
    }


# ---- stop-reason rows (D1) ------------------------------------------------------------------------


def test_registered_under_its_api_name() -> None:
    assert get("openai-responses") is ADAPTER


def test_completed_with_function_calls_is_tool_proposals() -> None:
    turn = ADAPTER.parse_response(
        body(output=[msg(text("Let me check.")), fc("call_a", "get_weather", '{"city":"Oslo"}')])
    )
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert turn.executable
    assert turn.raw_stop_reason == "completed"
    assert turn.reason is None
    assert turn.failure is None
    assert turn.text == "Let me check."
    assert [(c.call_id, c.name, c.arguments, c.output_index) for c in turn.calls] == [
        ("call_a", "get_weather", {"city": "Oslo"}, 1)
    ]


def test_completed_without_calls_is_final_text() -> None:
    turn = ADAPTER.parse_response(body(output=[msg(text("Hello "), text("world"))]))
    assert turn.finish is Finish.FINAL_TEXT
    assert turn.text == "Hello world"
    assert turn.reason is None
    assert turn.calls == ()


def test_refusal_wins_over_calls_and_text() -> None:
    output = [
        msg(text("Sure, "), refusal("I can't help with that.")),
        fc("call_a", "refund", '{"order":"A1"}'),
    ]
    turn = ADAPTER.parse_response(body(output=output))
    assert turn.finish is Finish.REFUSAL
    assert not turn.executable
    assert turn.refusal == "I can't help with that."
    assert turn.reason == "refusal"
    assert turn.raw_stop_reason == "completed"


def test_incomplete_max_output_tokens_is_truncated() -> None:
    output = [fc("call_a", "lookup", '{"q":"unfinis', status="incomplete")]
    turn = ADAPTER.parse_response(
        body("incomplete", output, incomplete_details={"reason": "max_output_tokens"})
    )
    assert turn.finish is Finish.TRUNCATED
    assert turn.reason == "max_tokens"
    assert turn.raw_stop_reason == "max_output_tokens"
    assert not turn.executable
    assert turn.calls[0].arguments is None and turn.calls[0].arguments_error


def test_incomplete_content_filter_is_refusal() -> None:
    turn = ADAPTER.parse_response(
        body("incomplete", [msg(text("partial"))], incomplete_details={"reason": "content_filter"})
    )
    assert turn.finish is Finish.REFUSAL
    assert turn.reason == "content_filter"
    assert turn.raw_stop_reason == "content_filter"


def test_incomplete_with_unknown_reason_is_api_failure() -> None:
    turn = ADAPTER.parse_response(body("incomplete", [], incomplete_details={"reason": "something_new"}))
    assert turn.finish is Finish.API_FAILURE
    assert turn.reason == "unknown_stop_reason"
    assert turn.failure is not None and not turn.failure.retryable


@pytest.mark.parametrize(
    ("error", "retryable", "raw"),
    [
        ({"code": "server_error", "message": "boom"}, True, "server_error"),
        ({"code": "invalid_prompt", "message": "no"}, False, "invalid_prompt"),
        ({"code": "vector_store_timeout", "message": "no"}, False, "vector_store_timeout"),
        ({"code": "insufficient_quota", "message": "pay"}, False, "insufficient_quota"),
        (None, False, "failed"),
    ],
)
def test_failed_uses_the_error_code(error: dict[str, Any] | None, retryable: bool, raw: str) -> None:
    turn = ADAPTER.parse_response(body("failed", [], error=error))
    assert turn.finish is Finish.API_FAILURE
    assert turn.raw_stop_reason == raw  # D32: the provider's code
    assert turn.failure is not None
    assert turn.failure.retryable is retryable
    assert turn.failure.error_code == (error or {}).get("code")


def test_cancelled_is_fatal_api_failure() -> None:
    turn = ADAPTER.parse_response(body("cancelled", [fc("call_a", "x", "{}")]))
    assert turn.finish is Finish.API_FAILURE
    assert turn.raw_stop_reason == "cancelled"
    assert turn.failure is not None and not turn.failure.retryable
    assert not turn.executable


@pytest.mark.parametrize("status", ["queued", "in_progress", "paused_for_approval", None, 7])
def test_non_terminal_or_unknown_status_is_never_final_text(status: Any) -> None:
    # even with text and a complete call present, an unknown status must not pass as progress
    turn = ADAPTER.parse_response(body(status, [msg(text("hi")), fc("call_a", "x", "{}")]))
    assert turn.finish is Finish.API_FAILURE
    assert turn.reason == "unknown_stop_reason"
    assert turn.raw_stop_reason == (status if isinstance(status, str) else None)
    assert turn.failure is not None and not turn.failure.retryable


def test_error_body_is_api_failure() -> None:
    raw = json.dumps({"error": {"message": "bad", "type": "server_error", "param": None, "code": None}})
    turn = ADAPTER.parse_response(raw, model="gpt-test")
    assert turn.finish is Finish.API_FAILURE
    assert turn.raw_stop_reason == "server_error"
    assert turn.failure is not None
    assert turn.failure.kind == "error_body"
    assert turn.failure.retryable
    assert turn.provenance.model == "gpt-test"
    assert turn.response_id == "cb:" + hashlib.sha256(raw.encode()).hexdigest()[:16]


def test_missing_response_id_is_synthetic_from_the_raw_bytes() -> None:
    raw = json.dumps(body(output=[fc("call_a", "x", "{}")], id=None)).encode()
    turn = ADAPTER.parse_response(raw)
    assert turn.response_id == "cb:" + hashlib.sha256(raw).hexdigest()[:16]
    assert turn.raw_sha256 == hashlib.sha256(raw).hexdigest()
    assert turn.calls[0].response_id == turn.response_id


def test_missing_call_id_is_synthetic_and_marked() -> None:
    item = {"type": "function_call", "id": "fc_x", "name": "x", "arguments": "{}"}
    turn = ADAPTER.parse_response(body(output=[msg(text("a")), item]))
    call = turn.calls[0]
    assert call.call_id == "resp_1:1"
    assert call.synthetic_id is True


def no_call_id(name: str = "get_order", arguments: str = '{"order_id":"A1"}', **extra: Any) -> dict[str, Any]:
    """A function_call item the API sent without its call_id (or with an empty one)."""
    item = {"type": "function_call", "id": "fc_nocid", "name": name, "arguments": arguments}
    return {**item, "status": "completed", **extra}


@pytest.mark.parametrize("item", [no_call_id(), no_call_id(call_id=""), no_call_id(call_id=None)])
def test_a_call_without_call_id_cannot_be_answered_so_the_turn_fails(item: dict[str, Any]) -> None:
    # D7: the synthetic id may not go back as function_call_output.call_id, and the API pairs an
    # output with its call by call_id alone, so no call of this turn may run.
    turn = ADAPTER.parse_response(body(output=[msg(text("Checking.")), item]))
    assert turn.finish is Finish.API_FAILURE
    assert (turn.raw_stop_reason, turn.reason) == ("completed", "missing_call_id")
    assert turn.failure is not None and not turn.failure.retryable
    assert not turn.executable
    assert turn.calls[0].synthetic_id  # kept for display
    verdict = classify_turn(turn)
    assert (verdict.target, verdict.reason, verdict.retryable) == (State.FAILED, "MISSING_CALL_ID", False)


def test_one_call_without_call_id_fails_the_whole_turn() -> None:
    # Its function_call could not even be replayed (D8) beside the answered ones.
    turn = ADAPTER.parse_response(body(output=[fc("call_a", "get_order", '{"order_id":"A1"}'), no_call_id()]))
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "missing_call_id")
    assert [c.synthetic_id for c in turn.calls] == [False, True]
    assert not turn.executable


def test_refusal_and_truncation_still_win_over_a_call_without_call_id() -> None:
    refused = ADAPTER.parse_response(body(output=[msg(refusal("I can't help with that.")), no_call_id()]))
    assert (refused.finish, refused.reason) == (Finish.REFUSAL, "refusal")  # D31
    cut = ADAPTER.parse_response(
        body(
            "incomplete",
            [no_call_id(arguments='{"order_')],
            incomplete_details={"reason": "max_output_tokens"},
        )
    )
    assert (cut.finish, cut.reason) == (Finish.TRUNCATED, "max_tokens")


def test_usage_counts_and_missing_usage_is_null() -> None:
    usage = {
        "input_tokens": 120,
        "input_tokens_details": {"cached_tokens": 100},
        "output_tokens": 50,
        "output_tokens_details": {"reasoning_tokens": 40},
    }
    turn = ADAPTER.parse_response(body(output=[msg(text("x"))], usage=usage))
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (120, 50)  # D27: not 20 / 10 / 90
    turn = ADAPTER.parse_response(body(output=[msg(text("x"))], usage=None))
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (None, None)
    turn = ADAPTER.parse_response(
        body(output=[msg(text("x"))], usage={"input_tokens": True, "output_tokens": "5"})
    )
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (None, None)


def test_bad_arguments_are_reported_not_repaired() -> None:
    output = [
        fc("call_a", "x", '{"amount":1,"amount":1000}'),
        fc("call_b", "x", '{"n": NaN}'),
        fc("call_c", "x", '{"n": 9007199254740993}'),
        fc("call_d", "x", "[1]"),
        fc("call_e", "x", ""),
    ]
    turn = ADAPTER.parse_response(body(output=output))
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [c.arguments is None for c in turn.calls] == [True, True, True, True, False]
    assert turn.calls[4].arguments == {}
    assert all(c.arguments_error for c in turn.calls[:4])


def test_duplicate_call_id_keeps_both_calls() -> None:
    # D7: the core fails closed on a repeated id; the adapter must not drop or merge either call.
    output = [fc("call_dup", "x", '{"a":1}', "fc_1"), fc("call_dup", "x", '{"a":2}', "fc_2")]
    turn = ADAPTER.parse_response(body(output=output))
    assert [(c.call_id, c.arguments, c.output_index) for c in turn.calls] == [
        ("call_dup", {"a": 1}, 0),
        ("call_dup", {"a": 2}, 1),
    ]


def test_hosted_tool_items_travel_but_are_not_calls() -> None:
    web: dict[str, Any] = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    rs: dict[str, Any] = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
    output = [rs, web, msg(text("found it"))]
    turn = ADAPTER.parse_response(body(output=output))
    assert turn.finish is Finish.FINAL_TEXT
    assert turn.calls == ()
    assert list(turn.continuation) == output


def test_non_object_body_is_a_protocol_violation() -> None:
    with pytest.raises(ProtocolViolation):
        ADAPTER.parse_response(b"[1, 2]")
    with pytest.raises(ProtocolViolation):
        ADAPTER.parse_response(b"event: response.created\ndata: {}\n\n")


# ---- map_error (D26, D30, D32) --------------------------------------------------------------------


def http(status: int, err: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> ModelTurn:
    raw = json.dumps({"error": err}).encode() if err is not None else b"<html>bad gateway</html>"
    return ADAPTER.map_error(RawFailure("http", status, raw, headers or {}), model="gpt-test")


def test_http_400_is_fatal() -> None:
    turn = http(400, {"message": "bad", "type": "invalid_request_error", "param": "x", "code": "bad_x"})
    assert turn.finish is Finish.API_FAILURE
    assert turn.raw_stop_reason == "400"
    assert turn.failure is not None
    assert (turn.failure.kind, turn.failure.retryable, turn.failure.status) == ("http", False, 400)
    assert (turn.failure.error_type, turn.failure.error_code) == ("invalid_request_error", "bad_x")
    assert turn.provenance.model == "gpt-test"


@pytest.mark.parametrize(
    ("headers", "after"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({}, None),
    ],
)
def test_http_429_is_retryable_and_honours_retry_after(headers: dict[str, str], after: float | None) -> None:
    turn = http(429, {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}, headers)
    assert turn.failure is not None
    assert turn.failure.retryable
    assert turn.failure.retry_after_s == after
    assert turn.raw_stop_reason == "429"
    assert turn.reason == "rate_limited"


def test_http_429_insufficient_quota_is_fatal() -> None:
    err = json.loads(read_bytes(REC + "ai__openai-error.1.json"))["error"]
    turn = http(429, err, {"retry-after": "1"})
    assert turn.failure is not None
    assert not turn.failure.retryable
    assert turn.raw_stop_reason == "429"
    assert turn.failure.error_code == "insufficient_quota"
    assert turn.reason == "quota_exceeded"


@pytest.mark.parametrize("status", [408, 409, 500, 502, 503, 504, 529])
def test_server_side_statuses_are_retryable(status: int) -> None:
    turn = http(status, {"message": "x", "type": "server_error", "code": None})
    assert turn.failure is not None and turn.failure.retryable
    assert turn.raw_stop_reason == str(status)


@pytest.mark.parametrize("status", [401, 403, 404, 413, 422])
def test_other_4xx_are_fatal(status: int) -> None:
    turn = http(status, {"message": "x", "type": "invalid_request_error", "code": None})
    assert turn.failure is not None and not turn.failure.retryable


def test_http_error_with_non_json_body() -> None:
    turn = http(502)
    assert turn.finish is Finish.API_FAILURE
    assert turn.failure is not None and turn.failure.retryable
    assert turn.raw_stop_reason == "502"
    assert turn.raw_sha256 == hashlib.sha256(b"<html>bad gateway</html>").hexdigest()


@pytest.mark.parametrize("kind", ["connection", "timeout"])
def test_connection_and_timeout_are_retryable(kind: str) -> None:
    turn = ADAPTER.map_error(RawFailure(kind))
    assert turn.finish is Finish.API_FAILURE
    assert turn.failure is not None
    assert (turn.failure.kind, turn.failure.retryable) == (kind, True)


def test_stream_cut_failure_is_truncated() -> None:
    turn = ADAPTER.map_error(RawFailure("stream_cut"), model="gpt-test")
    assert turn.finish is Finish.TRUNCATED
    assert turn.reason == "stream_interrupted"
    assert turn.failure is not None and turn.failure.retryable
    assert turn.calls == ()


# ---- every recording ------------------------------------------------------------------------------

EXPECTED: dict[str, list[dict[str, Any]]] = {
    "ai__openai-reasoning-encrypted-content.1.json": [
        {
            "finish": Finish.FINAL_TEXT,
            "id": "resp_0f35ed53160b395301693cc957829881909359e7f80cdd20b5",
            "calls": [],
            "usage": (865, 163),
            "text": "12 + 7 = 19\n19 × 3 = 57\n57 × 10 = 570\n\nFinal result: 570",
            "items": ["reasoning", "message"],
        }
    ],
    "pydantic-ai__test_background_mode_streaming_vcr.yaml": [
        {
            "finish": Finish.FINAL_TEXT,
            "id": "resp_0da443d9ee8333600069950a0635d88196b2d9243b08e8cc01",
            "calls": [],
            "usage": (15, 9),
            "text": "2 + 2 equals 4.",
            "items": ["message"],
        }
    ],
    "pydantic-ai__test_openai_previous_response_id_seed_auto_chains_through_retries.yaml": [
        {
            "finish": Finish.FINAL_TEXT,
            "id": "resp_0435eb6c2aa8e9eb0069e15ffdbb848195ab503209f100317f",
            "calls": [],
            "usage": (40, 3),
            "text": "Hello",
            "items": ["message"],
        },
        {
            "finish": Finish.TOOL_PROPOSALS,
            "id": "resp_0435eb6c2aa8e9eb0069e15ffeb3fc81959cd2d1e915a8c7ea",
            "calls": [("call_P1vN20XNjvNyIm0VshHYzmSA", "get_weather", {"city": "New York"})],
            "usage": (56, 16),
            "text": "",
            "items": ["function_call"],
        },
        {
            "finish": Finish.TOOL_PROPOSALS,
            "id": "resp_0435eb6c2aa8e9eb0069e1600000608195818a61245c018620",
            "calls": [("call_N2BikjqNxghwNIwHl2XKfb0F", "get_weather", {"city": "NYC"})],
            "usage": (110, 16),
            "text": "",
            "items": ["function_call"],
        },
        {
            "finish": Finish.FINAL_TEXT,
            "id": "resp_0435eb6c2aa8e9eb0069e160015f14819589a941eb8f14e5a5",
            "calls": [],
            "usage": (139, 14),
            "text": "The weather in New York is sunny and 72°F.",
            "items": ["message"],
        },
    ],
    "pydantic-ai__test_openai_responses_model_retry.yaml": [
        {
            "finish": Finish.TOOL_PROPOSALS,
            "id": "resp_67e547c48c9481918c5c4394464ce0c60ae6111e84dd5c08",
            "calls": [
                ("call_LWVp74L5HaH2KNvgVz9PJsrj", "get_location", {"loc_name": "Londos"}),
                ("call_YnRAWeTyxI91m5uNa5bxXwVO", "get_location", {"loc_name": "London"}),
            ],
            "usage": (0, 0),
            "text": "",
            "items": ["function_call", "function_call"],
        },
        {
            "finish": Finish.FINAL_TEXT,
            "id": "resp_67e547c5a2f08191802a1f43620f348503a2086afed73b47",
            "calls": [],
            "usage": (335, 44),
            "text": None,
            "items": ["message"],
        },
    ],
    "pydantic-ai__test_openai_responses_model_simple_response_with_tool_call.yaml": [
        {
            "finish": Finish.TOOL_PROPOSALS,
            "id": "resp_04907f5d3de791830068fbaa19bb908195a91378279dba0f14",
            "calls": [("call_YfwRsW8sUxDKipwyhWTzOXCA", "get_capital", {"country": "PotatoLand"})],
            "usage": (40, 18),
            "text": "",
            "items": ["function_call"],
        },
        {
            "finish": Finish.FINAL_TEXT,
            "id": "resp_0e9950da9eac6a780068fbaa1bc030819da585a6f85ddad1e6",
            "calls": [],
            "usage": (67, 11),
            "text": "The capital of PotatoLand is Potato City.",
            "items": ["message"],
        },
    ],
    "pydantic-ai__test_openai_responses_requires_function_call_status_none.yaml": [
        {
            "finish": Finish.TOOL_PROPOSALS,
            "id": "resp_01d311e2633707df0068fbabfb646481a2ac6e226bbbb42ca6",
            "calls": [("call_cp3x6W9eeyMIryJUNhgMaP5w", "get_meaning_of_life", {})],
            "usage": (40, 148),
            "text": "",
            "items": ["reasoning", "function_call"],
        },
        {
            "finish": Finish.FINAL_TEXT,
            "id": "resp_01d311e2633707df0068fbac042e3081a2a3839798d93d7bad",
            "calls": [],
            "usage": (257, 5),
            "text": "42",
            "items": ["message"],
        },
    ],
    "pydantic-ai__test_openai_responses_stream.yaml": [
        {
            "finish": Finish.TOOL_PROPOSALS,
            "id": "resp_67e554a155508191900ee113293c4c830794405d35281ae2",
            "calls": [("call_kL0PCQV7M2WMoVX8V8OtYSAL", "get_capital", {"country": "France"})],
            "usage": (255, 16),
            "text": "",
            "items": ["function_call"],
        },
        {
            "finish": Finish.FINAL_TEXT,
            "id": "resp_67e554a21aa88191b65876ac5e5bbe0406c52f0e511c76ed",
            "calls": [],
            "usage": (278, 9),
            "text": "The capital of France is Paris.",
            "items": ["message"],
        },
    ],
    "pydantic-ai__test_openai_responses_streaming_usage.yaml": [
        {
            "finish": Finish.TOOL_PROPOSALS,
            "id": "resp_0050471a34b36ae60068c97b94a480819587a9d70cf2979b33",
            "calls": [("call_CWXgs68YprAjp6t0371hiPOI", "final_result", {"result": 6666})],
            "usage": (53, 469),
            "text": "",
            "items": ["reasoning", "function_call"],
        },
    ],
    "pydantic-ai__test_openai_responses_thinking_with_tool_calls.yaml": [
        {
            "finish": Finish.TOOL_PROPOSALS,
            "id": "resp_68c42d28772c819684459966ee2201ed0e8bc41441c948f6",
            "calls": [("call_gL7JE6GDeGGsFubqO2XGytyO", "update_plan", None)],
            "usage": (124, 1926),
            "text": "",
            "items": ["reasoning", "function_call"],
        },
        {
            "finish": Finish.FINAL_TEXT,
            "id": "resp_68c42d3fd6a08196bce23d6be960ff8a0e8bc41441c948f6",
            "calls": [],
            "usage": (2087, 124),
            "text": None,
            "items": ["message"],
        },
    ],
}
ERRORS = {"ai__openai-error.1.json", "pydantic-ai__test_openai_responses_model_http_error.yaml"}


def recorded_turn(interaction: dict[str, Any]) -> tuple[ModelTurn, list[Progress]]:
    resp = response_body(interaction)
    if isinstance(resp, str):
        turn, progress, _ = assemble([resp.encode("utf-8")])
        return turn, progress
    return ADAPTER.parse_response(resp), []


def test_every_recording_has_expectations() -> None:
    names = set(os.listdir(fixtures_dir() / "openai-responses"))
    assert names == set(EXPECTED) | ERRORS


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recording(name: str) -> None:
    if name.endswith(".json"):
        turns = [ADAPTER.parse_response(read_bytes(REC + name))]
    else:
        turns = [recorded_turn(it)[0] for it in load_cassette(REC + name)]
    assert len(turns) == len(EXPECTED[name])
    for turn, want in zip(turns, EXPECTED[name], strict=True):
        assert turn.finish is want["finish"]
        assert turn.reason is None
        assert turn.raw_stop_reason == "completed"
        assert turn.response_id == want["id"]
        assert [(c.call_id, c.name) for c in turn.calls] == [(c[0], c[1]) for c in want["calls"]]
        for call, (_, _, args) in zip(turn.calls, want["calls"], strict=True):
            assert call.arguments_error is None
            assert call.response_id == want["id"]
            assert not call.synthetic_id
            if args is not None:
                assert call.arguments == args
        assert (turn.usage.input_tokens, turn.usage.output_tokens) == want["usage"]
        if want["text"] is not None:
            assert turn.text == want["text"]
        assert [i["type"] for i in turn.continuation] == want["items"]


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if n.endswith(".yaml")))
def test_recorded_requests_pass_check_request(name: str) -> None:
    # Every request the server accepted answers the turn before it correctly (D24 must not cry wolf).
    interactions = load_cassette(REC + name)
    ADAPTER.check_request(request_body(interactions[0]))
    for before, after in itertools.pairwise(interactions):
        if name == "pydantic-ai__test_openai_responses_stream.yaml":
            # That client rewrote the call's call_id to its fc_ item id (consistently, so the server
            # matched call and output); callbound replays the call unchanged, and its check says so.
            with pytest.raises(ProtocolViolation, match="'call_kL0PCQV7M2WMoVX8V8OtYSAL' of the turn"):
                ADAPTER.check_request(request_body(after), recorded_turn(before)[0])
            ADAPTER.check_request(request_body(after))
            continue
        ADAPTER.check_request(request_body(after), recorded_turn(before)[0])


def test_recorded_long_arguments_parse_exactly() -> None:
    it = load_cassette(REC + "pydantic-ai__test_openai_responses_thinking_with_tool_calls.yaml")[0]
    turn = ADAPTER.parse_response(response_body(it))
    raw = next(i for i in json_body(it)["output"] if i["type"] == "function_call")["arguments"]
    assert turn.calls[0].arguments == json.loads(raw)
    assert turn.calls[0].arguments_raw == raw
    args = turn.calls[0].arguments
    assert args is not None
    assert args["plan"].startswith("Plan:\n1) Determine")


def test_recorded_streams_announce_progress_in_order() -> None:
    it = load_cassette(REC + "pydantic-ai__test_openai_responses_stream.yaml")[0]
    _, progress = recorded_turn(it)
    cid = "call_kL0PCQV7M2WMoVX8V8OtYSAL"
    assert progress[0] == CallStarted(cid, "get_capital")
    assert progress[-1] == CallReady(cid)
    sizes = [p.bytes for p in progress[1:-1] if isinstance(p, ArgumentsProgress)]
    assert sizes == [2, 9, 12, 18, 20]  # cumulative bytes of {" country ":" France "}
    assert sizes[-1] == len(b'{"country":"France"}')


def test_recorded_http_error() -> None:
    it = load_cassette(REC + "pydantic-ai__test_openai_responses_model_http_error.yaml")[0]
    assert status_code(it) == 400
    raw = json.dumps(response_body(it)).encode()
    turn = ADAPTER.map_error(RawFailure("http", status_code(it), raw, {}))
    assert turn.finish is Finish.API_FAILURE
    assert turn.raw_stop_reason == "400"
    assert turn.failure is not None
    assert not turn.failure.retryable
    assert (turn.failure.error_type, turn.failure.error_code) == (
        "invalid_request_error",
        "decimal_below_min_value",
    )


def test_recorded_error_body() -> None:
    turn = ADAPTER.parse_response(read_bytes(REC + "ai__openai-error.1.json"))
    assert turn.finish is Finish.API_FAILURE
    assert turn.raw_stop_reason == "insufficient_quota"  # D32: no status, so the code
    assert turn.failure is not None
    assert (turn.failure.kind, turn.failure.retryable) == ("error_body", False)
    assert turn.response_id.startswith("cb:")


def test_recorded_stream_takes_encrypted_content_from_output_item_done() -> None:
    it = load_cassette(REC + "pydantic-ai__test_openai_responses_streaming_usage.yaml")[0]
    events = dict_payloads(stream_body(it))
    rs_added = next(
        e["item"]
        for e in events
        if e.get("type") == "response.output_item.added" and e["item"]["type"] == "reasoning"
    )
    rs_done = next(
        e["item"]
        for e in events
        if e.get("type") == "response.output_item.done" and e["item"]["type"] == "reasoning"
    )
    assert rs_added["encrypted_content"] != rs_done["encrypted_content"]  # the recording's point
    turn, _ = recorded_turn(it)
    carried = [i for i in ADAPTER.turn_items(turn) if i["type"] == "reasoning"]
    assert carried == [rs_done]


# ---- continuation (D8) ----------------------------------------------------------------------------


def structure(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "calls": [i["call_id"] for i in items if i.get("type") == "function_call"],
        "call_names": [i["name"] for i in items if i.get("type") == "function_call"],
        "call_arguments": [json.loads(i["arguments"]) for i in items if i.get("type") == "function_call"],
        "outputs": sorted(i["call_id"] for i in items if i.get("type") == "function_call_output"),
        "reasoning": [
            (i.get("id"), i.get("encrypted_content")) for i in items if i.get("type") == "reasoning"
        ],
    }


def answer_all(turn: ModelTurn) -> list[tuple[ToolCall, dict[str, Any]]]:
    return [
        (c, ok_result({"n": k})) if k % 2 == 0 else (c, error_result("BAD", "no"))
        for k, c in enumerate(turn.calls)
    ]


STATELESS = [
    "pydantic-ai__test_openai_responses_model_simple_response_with_tool_call.yaml",
    "pydantic-ai__test_openai_responses_model_retry.yaml",
    "pydantic-ai__test_openai_responses_requires_function_call_status_none.yaml",
    "pydantic-ai__test_openai_responses_thinking_with_tool_calls.yaml",
]


@pytest.mark.parametrize("name", STATELESS)
def test_stateless_continuation_matches_the_recorded_next_request(name: str) -> None:
    first, second = load_cassette(REC + name)[:2]
    turn = ADAPTER.parse_response(response_body(first))
    assert turn.finish is Finish.TOOL_PROPOSALS
    sent_before = request_body(first)["input"]
    recorded_next = request_body(second)
    recorded_new = recorded_next["input"][len(sent_before) :]
    assert recorded_next["input"][: len(sent_before)] == sent_before

    ours_new = ADAPTER.turn_items(turn) + ADAPTER.result_items(turn, answer_all(turn))
    assert structure(ours_new) == structure(recorded_new)
    # keyed by call_id, never by the fc_ item id; one output per call, in the order given
    outputs = [i for i in ours_new if i["type"] == "function_call_output"]
    assert [o["call_id"] for o in outputs] == [c.call_id for c in turn.calls]
    assert all(not o["call_id"].startswith("fc_") for o in outputs)
    for o, (_, result) in zip(outputs, answer_all(turn), strict=True):
        assert json.loads(o["output"]) == result
    # the output items of the turn are carried unchanged (D8)
    assert ADAPTER.turn_items(turn) == json_body(first)["output"]

    items = ADAPTER.initial_items(None, sent_before) + ours_new
    request = ADAPTER.build_request(
        items=items,
        tools=recorded_next.get("tools", []),
        settings={"model": "gpt-x"},
        instructions=None,
        stream=False,
    )
    assert "previous_response_id" not in request
    ADAPTER.check_request(request, turn)
    ADAPTER.check_request(recorded_next, turn)  # what the server accepted passes our check too


def test_reasoning_items_keep_encrypted_content_in_the_continuation() -> None:
    name = "pydantic-ai__test_openai_responses_thinking_with_tool_calls.yaml"
    first, second = load_cassette(REC + name)[:2]
    turn = ADAPTER.parse_response(response_body(first))
    ours = [i for i in ADAPTER.turn_items(turn) if i["type"] == "reasoning"]
    recorded = [i for i in request_body(second)["input"] if i.get("type") == "reasoning"]
    assert len(ours) == len(recorded) == 1
    assert ours[0]["encrypted_content"] == recorded[0]["encrypted_content"]
    assert ours[0]["encrypted_content"].startswith("gAAAA")
    assert ours[0]["summary"] == recorded[0]["summary"]


@pytest.mark.parametrize("index", [1, 2])
def test_previous_response_id_continuation_sends_only_the_outputs(index: int) -> None:
    interactions = load_cassette(
        REC + "pydantic-ai__test_openai_previous_response_id_seed_auto_chains_through_retries.yaml"
    )
    turn = ADAPTER.parse_response(response_body(interactions[index]))
    recorded_next = request_body(interactions[index + 1])
    assert recorded_next["previous_response_id"] == turn.response_id

    new_items = ADAPTER.result_items(turn, answer_all(turn))
    request = ADAPTER.build_request(
        items=[{"role": "user", "content": "never sent"}, *ADAPTER.turn_items(turn), *new_items],
        tools=recorded_next["tools"],
        settings={"model": "gpt-4.1"},
        instructions=None,
        stream=False,
        previous_response_id=turn.response_id,
        new_items=new_items,
    )
    assert request["previous_response_id"] == recorded_next["previous_response_id"]
    assert [i["type"] for i in request["input"]] == [i["type"] for i in recorded_next["input"]]
    assert structure(request["input"]) == structure(recorded_next["input"])
    ADAPTER.check_request(request, turn)
    ADAPTER.check_request(recorded_next, turn)


def test_store_false_replays_the_transcript_instead_of_chaining() -> None:
    """Nothing is stored with store: false, so previous_response_id would be refused (WIRE 1.5):
    the request carries the whole transcript, like every stateless request."""
    items = [
        {"role": "user", "content": "hi"},
        {"type": "function_call_output", "call_id": "c1", "output": "{}"},
    ]
    request = ADAPTER.build_request(
        items=items,
        tools=[],
        settings={"model": "gpt-4.1", "store": False, "continuation": "previous_response_id"},
        instructions=None,
        stream=False,
        previous_response_id="resp_1",
        new_items=items[1:],
    )
    assert "previous_response_id" not in request
    assert request["input"] == items and request["store"] is False


def test_streamed_recording_continuation_uses_call_id() -> None:
    # This 2025-03 recording's client sent the fc_ item id as call_id (in both the replayed call and
    # its output, so the server matched them). callbound sends the real call_id.
    first, second = load_cassette(REC + "pydantic-ai__test_openai_responses_stream.yaml")[:2]
    turn, _ = recorded_turn(first)
    recorded = [i for i in request_body(second)["input"] if i.get("type") == "function_call_output"]
    assert recorded[0]["call_id"].startswith("fc_")
    ours = ADAPTER.result_items(turn, answer_all(turn))
    assert [o["call_id"] for o in ours] == ["call_kL0PCQV7M2WMoVX8V8OtYSAL"]
    body_ = ADAPTER.build_request(
        items=[*request_body(first)["input"], *ADAPTER.turn_items(turn), *ours],
        tools=[],
        settings={},
        instructions=None,
        stream=True,
    )
    assert body_["stream"] is True
    ADAPTER.check_request(body_, turn)


def test_build_request_settings() -> None:
    req = ADAPTER.build_request(
        items=[{"role": "user", "content": "hi"}],
        tools=[{"type": "function", "name": "x"}],
        settings={
            "model": "m",
            "tool_choice": {"name": "x"},
            "temperature": 0,
            "max_output_tokens": 5,
            "store": False,
            "extra": {"service_tier": "flex"},
        },
        instructions="be brief",
        stream=False,
    )
    assert req == {
        "model": "m",
        "instructions": "be brief",
        "input": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "name": "x"}],
        "tool_choice": {"type": "function", "name": "x"},
        "temperature": 0,
        "max_output_tokens": 5,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "service_tier": "flex",
    }


# ---- streaming edges ------------------------------------------------------------------------------


def test_stream_no_arg_call_has_empty_arguments() -> None:
    turn, progress, _ = assemble([data("no_args_call.sse")])
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [(c.call_id, c.arguments, c.arguments_error) for c in turn.calls] == [("call_noarg", {}, None)]
    assert progress == [CallStarted("call_noarg", "get_meaning_of_life"), CallReady("call_noarg")]


def test_stream_multibyte_characters_split_across_byte_chunks() -> None:
    raw = data("reasoning_then_call.sse")
    cuts = [i for i in range(len(raw)) if raw[i] >= 0x80 and raw[i - 1] >= 0x80]  # inside a character
    assert cuts, "the fixture must hold multi-byte characters"
    chunks, start = [], 0
    for cut in cuts:
        chunks.append(raw[start:cut])
        start = cut
    chunks.append(raw[start:])
    turn, progress, _ = assemble(chunks)
    assert turn.calls[0].arguments == {"city": "Zürich ☃ 😀"}
    sizes = [p.bytes for p in progress if isinstance(p, ArgumentsProgress)]
    assert sizes == [len(b'{"city":"Z'), len('{"city":"Zürich ☃ 😀"}'.encode())]
    assert turn == assemble([raw])[0]


def test_stream_character_split_across_two_deltas_as_surrogate_halves() -> None:
    # A non-BMP character whose two UTF-16 halves arrive, JSON-escaped, in two deltas.
    item = started_fc("call_u", "say")
    events = [
        created(),
        added(0, item),
        delta(0, "fc_call_u", '{"s":"a'),
        delta(0, "fc_call_u", "\ud83d"),
        delta(0, "fc_call_u", '\ude00b"}'),
    ]
    final = {**item, "status": "completed"}
    final.pop("arguments")  # a done item without arguments: the deltas are all there is
    turn, progress, _ = assemble([sse(*events, done(0, final), completed())])
    assert turn.calls[0].arguments == {"s": "a😀b"}
    assert [p.bytes for p in progress if isinstance(p, ArgumentsProgress)] == [7, 9, 14]
    assert len('{"s":"a😀b"}'.encode()) == 14
    # and when the done item has its arguments, they are taken as they are
    with_args = {**item, "status": "completed", "arguments": '{"s":"a😀b"}'}
    turn, _, _ = assemble([sse(*events, done(0, with_args), completed())])
    assert turn.calls[0].arguments == {"s": "a😀b"}


def test_stream_character_split_across_deltas_and_byte_chunks() -> None:
    # 😀 arrives as two escaped UTF-16 halves in two deltas; é and ü arrive as raw UTF-8 and every
    # chunk boundary below falls inside one of their byte sequences.
    raw = data("split_character_deltas.sse")
    cuts = [i for i in range(1, len(raw)) if raw[i] >= 0x80 and raw[i - 1] >= 0x80]
    assert len(cuts) == 2
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    turn, progress, _ = assemble(chunks)
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert turn.calls[0].arguments == {"s": "é😀ü"}
    assert turn.calls[0].arguments_raw == '{"s":"é😀ü"}'
    assert [p.bytes for p in progress if isinstance(p, ArgumentsProgress)] == [8, 10, 16]
    assert len('{"s":"é😀ü"}'.encode()) == 16
    assert (turn, progress) == assemble([raw])[:2]


def test_stream_interleaved_parallel_calls() -> None:
    turn, progress, _ = assemble([data("parallel_interleaved.sse")])
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert turn.response_id == "resp_par1"
    assert [(c.call_id, c.name, c.arguments, c.output_index) for c in turn.calls] == [
        ("call_par_a", "get_weather", {"city": "Oslo"}, 0),
        ("call_par_b", "get_time", {"zone": "CET"}, 1),
    ]
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (50, 30)
    assert turn.provenance.model == "gpt-test"
    assert progress == [
        CallStarted("call_par_a", "get_weather"),
        CallStarted("call_par_b", "get_time"),
        ArgumentsProgress("call_par_a", 8),
        ArgumentsProgress("call_par_b", 8),
        ArgumentsProgress("call_par_a", 15),
        ArgumentsProgress("call_par_b", 14),
        CallReady("call_par_b"),
        CallReady("call_par_a"),
    ]


def test_stream_deltas_routed_by_item_id_when_output_index_is_missing() -> None:
    a, b = started_fc("call_a", "fa"), started_fc("call_b", "fb")
    events = [
        created(),
        added(0, a),
        added(1, b),
        delta(None, "fc_call_b", '{"y":'),
        delta(None, "fc_call_a", '{"x":'),
        delta(None, "fc_call_b", "2}"),
        delta(None, "fc_call_a", "1}"),
        done(0, {k: v for k, v in a.items() if k != "arguments"}),
        done(1, {k: v for k, v in b.items() if k != "arguments"}),
        completed(),
    ]
    turn, _, _ = assemble([sse(*events)])
    assert [(c.call_id, c.arguments) for c in turn.calls] == [("call_a", {"x": 1}), ("call_b", {"y": 2})]


def test_stream_missing_terminal_event_is_truncated_without_calls() -> None:
    turn, progress, _ = assemble([data("cut_before_terminal.sse")])
    assert turn.finish is Finish.TRUNCATED
    assert turn.reason == "stream_interrupted"
    assert turn.calls == ()
    assert turn.response_id == "resp_cut1"
    assert turn.failure is not None and turn.failure.retryable
    assert progress[-1] == CallReady("call_cut1")  # progress never claims execution


def test_stream_nested_error_event_without_terminal() -> None:
    turn, _, _ = assemble([data("error_event_nested.sse")])
    assert turn.finish is Finish.API_FAILURE
    assert turn.raw_stop_reason == "insufficient_quota"
    assert turn.response_id == "resp_err1"
    assert turn.failure is not None
    assert (turn.failure.kind, turn.failure.retryable) == ("error_event", False)
    assert (turn.failure.error_type, turn.failure.error_code) == ("insufficient_quota", "insufficient_quota")


def test_stream_nested_error_event_then_failed() -> None:
    turn, _, _ = assemble([data("error_event_nested_then_failed.sse")])
    assert turn.finish is Finish.API_FAILURE
    assert turn.raw_stop_reason == "insufficient_quota"
    assert turn.failure is not None and not turn.failure.retryable


def test_stream_flat_error_event_mid_call() -> None:
    turn, _, _ = assemble([data("error_event_flat.sse")])
    assert turn.finish is Finish.API_FAILURE
    assert turn.calls == ()
    assert turn.raw_stop_reason == "server_error"
    assert turn.failure is not None
    assert turn.failure.retryable
    # in the flat shape "type" names the event, not the error
    assert (turn.failure.error_type, turn.failure.error_code) == (None, "server_error")


def test_stream_failed_without_error_takes_the_error_event() -> None:
    events = [
        created(),
        {"type": "error", "code": "server_error", "message": "x"},
        completed(status="failed"),
    ]
    turn, _, _ = assemble([sse(*events)])
    assert turn.raw_stop_reason == "server_error"
    assert turn.failure is not None and turn.failure.retryable


def test_stream_refusal_wins_over_a_call() -> None:
    turn, _, _ = assemble([data("refusal_stream.sse")])
    assert turn.finish is Finish.REFUSAL
    assert turn.refusal == "I can't help with that."
    assert not turn.executable


def _stream_without_call_id(added_item: dict[str, Any], done_item: dict[str, Any]) -> bytes:
    events = [
        created(),
        added(0, added_item),
        delta(0, "fc_nocid", '{"order_id":'),
        delta(0, "fc_nocid", '"A1"}'),
        done(0, done_item),
        completed(),
    ]
    # compact, as the API writes it, so StreamFeed reads the argument deltas on its fast path
    frames = (f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n" for e in events)
    return "".join(frames).encode()


@pytest.mark.parametrize(
    "added_item",
    [
        {**no_call_id(arguments=""), "status": "in_progress"},
        # the added copy had a call_id, but the done item (the one replayed, D8) has none
        {**no_call_id(arguments=""), "status": "in_progress", "call_id": "call_early"},
    ],
)
def test_stream_call_without_call_id_fails_as_the_plain_body_does(added_item: dict[str, Any]) -> None:
    raw = _stream_without_call_id(added_item, no_call_id())
    plain = ADAPTER.parse_response(body(output=[no_call_id()], id="resp_s"))
    for turn in (assemble([raw])[0], streaming.fed(ADAPTER, raw)[0]):
        assert (turn.finish, turn.raw_stop_reason, turn.reason) == (
            Finish.API_FAILURE,
            "completed",
            "missing_call_id",
        )
        assert turn.failure == plain.failure
        assert not turn.executable
        calls = [(c.call_id, c.synthetic_id, c.arguments) for c in turn.calls]
        assert calls == [(c.call_id, c.synthetic_id, c.arguments) for c in plain.calls]
        assert calls == [("resp_s:0", True, {"order_id": "A1"})]


def test_stream_text_and_refusal_with_split_surrogate_deltas_come_whole_from_the_done_item() -> None:
    # Text and refusal deltas are not joined: the done item carries each string whole, so a non-BMP
    # character whose escaped halves arrive in two deltas cannot leave lone surrogates behind.
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}
    parts = [text("hi 😀"), refusal("no 😀")]
    events = [
        created(),
        added(0, item),
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
         "delta": "hi \ud83d"},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
         "delta": "\ude00"},
        {"type": "response.refusal.delta", "item_id": "msg_1", "output_index": 0, "content_index": 1,
         "delta": "no \ud83d"},
        {"type": "response.refusal.delta", "item_id": "msg_1", "output_index": 0, "content_index": 1,
         "delta": "\ude00"},
        done(0, {**item, "status": "completed", "content": parts}),
        completed(),
    ]  # fmt: skip
    raw = sse(*events)
    assert raw.isascii()
    turn, _, _ = assemble([raw])
    assert (turn.text, turn.refusal) == ("hi 😀", "no 😀")
    request = ADAPTER.build_request(
        items=[{"role": "user", "content": "hi"}, *ADAPTER.turn_items(turn)],
        tools=[],
        settings={},
        instructions=None,
        stream=True,
    )
    body_bytes(request)  # the next request can be sent


def test_stream_incomplete_terminal() -> None:
    item = started_fc("call_t", "x")
    events = [
        created(),
        added(0, item),
        delta(0, "fc_call_t", '{"a":'),
        done(0, {**item, "arguments": '{"a":', "status": "incomplete"}),
    ]
    term = completed(status="incomplete")
    term["response"]["incomplete_details"] = {"reason": "max_output_tokens"}
    turn, _, _ = assemble([sse(*events, term)])
    assert turn.finish is Finish.TRUNCATED
    assert turn.reason == "max_tokens"
    assert not turn.executable


def test_stream_duplicate_call_id_keeps_both_calls() -> None:
    a = {**started_fc("call_dup", "x"), "id": "fc_1"}
    b = {**started_fc("call_dup", "x"), "id": "fc_2"}
    events = [
        created(),
        added(0, a),
        added(1, b),
        done(0, {**a, "arguments": '{"n":1}', "status": "completed"}),
        done(1, {**b, "arguments": '{"n":2}', "status": "completed"}),
        completed(),
    ]
    turn, _, _ = assemble([sse(*events)])
    assert [(c.call_id, c.arguments) for c in turn.calls] == [("call_dup", {"n": 1}), ("call_dup", {"n": 2})]


def _big_call_stream(sizes: list[int], via_deltas: bool = True) -> bytes:
    events: list[dict[str, Any]] = [created()]
    for idx, size in enumerate(sizes):
        item = started_fc(f"call_{idx}", "x")
        args = '{"v":"' + "a" * (size - 8) + '"}'
        assert len(args) == size
        events.append(added(idx, item))
        if via_deltas:
            events.extend(delta(idx, item["id"], args[i : i + 4]) for i in range(0, len(args), 4))
        events.append(done(idx, {**item, "arguments": args, "status": "completed"}))
    events.append(completed())
    return sse(*events)


@pytest.mark.parametrize("via_deltas", [True, False])
def test_stream_per_call_byte_cap(via_deltas: bool) -> None:
    turn, _, asm = assemble(
        [_big_call_stream([30], via_deltas)], StreamCaps(max_call_bytes=20, max_response_bytes=1000)
    )
    assert asm.aborted
    assert turn.finish is Finish.TRUNCATED
    assert turn.reason == "arguments_too_large"
    assert turn.calls == ()
    assert turn.failure is not None and not turn.failure.retryable


@pytest.mark.parametrize("via_deltas", [True, False])
def test_stream_per_response_byte_cap(via_deltas: bool) -> None:
    turn, _, asm = assemble(
        [_big_call_stream([20, 20, 20], via_deltas)], StreamCaps(max_call_bytes=25, max_response_bytes=50)
    )
    assert asm.aborted
    assert turn.finish is Finish.TRUNCATED
    assert turn.reason == "arguments_too_large"


def test_stream_byte_caps_not_tripped_at_the_limit() -> None:
    turn, _, asm = assemble(
        [_big_call_stream([20, 20], True)], StreamCaps(max_call_bytes=20, max_response_bytes=40)
    )
    assert not asm.aborted
    assert turn.finish is Finish.TOOL_PROPOSALS


def test_stream_byte_cap_applies_to_terminal_snapshot_items() -> None:
    item = {**started_fc("call_big", "x"), "arguments": '{"v":"' + "a" * 100 + '"}', "status": "completed"}
    turn, _, _ = assemble([sse(created(), completed(output=[item]))], StreamCaps(max_call_bytes=50))
    assert turn.finish is Finish.TRUNCATED
    assert turn.reason == "arguments_too_large"


def test_stream_terminal_snapshot_with_empty_output_uses_done_items() -> None:
    turn, _, _ = assemble([data("reasoning_then_call.sse")])
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [i["type"] for i in turn.continuation] == ["reasoning", "function_call"]
    assert turn.continuation[0]["encrypted_content"] == "gAAA-final-copy"  # from done, never added
    assert turn.provenance.model == "gpt-test-reasoning"
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (30, 200)


def test_stream_items_missing_from_done_are_taken_from_the_snapshot() -> None:
    msg_item = msg(text("Calling."))
    call = fc("call_s", "x", '{"k":1}')
    events = [
        created(),
        added(1, started_fc("call_s", "x")),
        done(1, call),
        completed(output=[msg_item, call]),
    ]
    turn, _, _ = assemble([sse(*events)])
    assert list(turn.continuation) == [msg_item, call]
    assert turn.text == "Calling."


def test_stream_call_never_done_nor_in_snapshot_never_runs() -> None:
    """Issue 3 §4: "Arguments are parsed only after the provider's done event for that call". A call
    with no output_item.done, no function_call_arguments.done and no place in the terminal snapshot
    never got that event, even when its deltas happen to parse: the turn is TRUNCATED(call_incomplete),
    as the same response read as a plain body (its item still in_progress) is. The call is kept, built
    from its deltas, for display and the record only."""
    item = started_fc("call_nd", "x")
    events = [
        created(),
        added(0, item),
        delta(0, "fc_call_nd", '{"k":'),
        delta(0, "fc_call_nd", "2}"),
        completed(),
    ]
    turn, _, _ = assemble([sse(*events)])
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "call_incomplete")
    assert [(c.call_id, c.arguments) for c in turn.calls] == [("call_nd", {"k": 2})]
    cut = [created(), added(0, item), delta(0, "fc_call_nd", '{"k":'), completed()]
    turn, _, _ = assemble([sse(*cut)])
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "call_incomplete")
    assert turn.calls[0].arguments is None and turn.calls[0].arguments_error


def test_stream_done_sentinel_and_unknown_events_are_ignored() -> None:
    raw = (
        data("no_args_call.sse")
        + b'event: response.web_search_call.searching\ndata: {"type":"response.web_search_call.searching"}\n\ndata: [DONE]\n\n'
    )
    turn, _, _ = assemble([raw])
    assert turn.finish is Finish.TOOL_PROPOSALS


def test_progress_never_precedes_its_data() -> None:
    raw = data("parallel_interleaved.sse")
    asm = ADAPTER.stream_assembler()
    seen_bytes: dict[str, int] = {}
    item_calls: dict[str, str] = {}  # fc_ item id -> call_id, from the added events
    started: set[str] = set()
    ready: set[str] = set()
    for event in iter_payloads([raw]):
        assert isinstance(event, dict)
        item = event.get("item") or {}
        if event["type"] == "response.output_item.added":
            item_calls[item["id"]] = item["call_id"]
        for p in asm.feed(event):
            if isinstance(p, CallStarted):
                assert event["type"] == "response.output_item.added"
                assert p.call_id == item["call_id"] and p.name == item["name"]
                assert p.call_id not in started
                started.add(p.call_id)
            elif isinstance(p, ArgumentsProgress):
                assert event["type"] == "response.function_call_arguments.delta"
                assert p.call_id in started and p.call_id not in ready
                assert item_calls[event["item_id"]] == p.call_id
                seen_bytes[p.call_id] = seen_bytes.get(p.call_id, 0) + len(event["delta"].encode())
                assert p.bytes == seen_bytes[p.call_id]
            else:
                assert event["type"] == "response.output_item.done"
                assert p.call_id == item["call_id"] and p.call_id in started
                ready.add(p.call_id)
    assert started == ready == {"call_par_a", "call_par_b"}


def test_progress_for_a_call_seen_only_at_done() -> None:
    call = fc("call_late", "x", '{"a":1}')
    events = [created(), delta(0, "fc_call_late", '{"a":1}'), done(0, call), completed()]
    _, progress, _ = assemble([sse(*events)])
    # a delta for a call not yet announced announces nothing; done announces start then ready
    assert progress == [CallStarted("call_late", "x"), CallReady("call_late")]


# ---- any split of the stream's bytes gives the same turn ------------------------------------------

_STREAMS = [
    "split_character_deltas.sse",
    "parallel_interleaved.sse",
    "reasoning_then_call.sse",
    "refusal_stream.sse",
    "error_event_flat.sse",
    "cut_before_terminal.sse",
    "no_args_call.sse",
]


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(_STREAMS), cuts=st.lists(st.integers(min_value=1, max_value=3000), max_size=25))
def test_any_byte_split_gives_the_identical_turn(name: str, cuts: list[int]) -> None:
    raw = data(name)
    points = sorted({c for c in cuts if c < len(raw)})
    chunks = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    whole, whole_progress, _ = assemble([raw])
    split, split_progress, _ = assemble(chunks)
    assert split == whole
    assert split_progress == whole_progress


@settings(max_examples=50, deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=20000), max_size=30))
def test_any_byte_split_of_a_real_recording(cuts: list[int]) -> None:
    it = load_cassette(REC + "pydantic-ai__test_openai_responses_streaming_usage.yaml")[0]
    raw = stream_body(it)
    points = sorted({c for c in cuts if c < len(raw)})
    chunks = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    assert assemble(chunks)[0] == assemble([raw])[0]


# ---- check_request (D24) --------------------------------------------------------------------------


def proposal(*calls: tuple[str, str]) -> ModelTurn:
    """A TOOL_PROPOSALS turn with the given (call_id, fc item id) pairs."""
    return ADAPTER.parse_response(
        body(output=[fc(cid, "x", "{}", item_id) for cid, item_id in calls], id="resp_prev")
    )


def out(call_id: str, output: Any = '{"ok":true}') -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def stateless(turn: ModelTurn, outputs: list[dict[str, Any]]) -> dict[str, Any]:
    items = [{"role": "user", "content": "go"}, *ADAPTER.turn_items(turn), *outputs]
    return ADAPTER.build_request(items=items, tools=[], settings={}, instructions=None, stream=False)


def chained(turn: ModelTurn, outputs: list[dict[str, Any]]) -> dict[str, Any]:
    return ADAPTER.build_request(
        items=[],
        tools=[],
        settings={},
        instructions=None,
        stream=False,
        previous_response_id=turn.response_id,
        new_items=outputs,
    )


def test_check_request_accepts_correct_requests() -> None:
    turn = proposal(("call_1", "fc_1"), ("call_2", "fc_2"))
    ADAPTER.check_request(
        stateless(turn, [out("call_2"), out("call_1", [{"type": "input_text", "text": "x"}])]), turn
    )
    ADAPTER.check_request(chained(turn, [out("call_1"), out("call_2")]), turn)
    ADAPTER.check_request({"input": "hello"})
    ADAPTER.check_request({"input": [{"role": "user", "content": "hi"}]})


@pytest.mark.parametrize("build", [stateless, chained])
def test_check_request_rejects_a_missing_output(build: Any) -> None:
    turn = proposal(("call_1", "fc_1"), ("call_2", "fc_2"))
    with pytest.raises(ProtocolViolation, match="'call_2' is answered 0 times"):
        ADAPTER.check_request(build(turn, [out("call_1")]), turn)


@pytest.mark.parametrize("build", [stateless, chained])
def test_check_request_rejects_a_duplicate_output(build: Any) -> None:
    turn = proposal(("call_1", "fc_1"))
    with pytest.raises(ProtocolViolation, match="answered 2 times"):
        ADAPTER.check_request(build(turn, [out("call_1"), out("call_1")]), turn)


@pytest.mark.parametrize("build", [stateless, chained])
def test_check_request_rejects_an_output_for_an_unknown_call(build: Any) -> None:
    turn = proposal(("call_1", "fc_1"))
    with pytest.raises(ProtocolViolation, match="unknown call_id 'call_9'"):
        ADAPTER.check_request(build(turn, [out("call_1"), out("call_9")]), turn)


@pytest.mark.parametrize("build", [stateless, chained])
def test_check_request_rejects_an_output_keyed_by_the_item_id(build: Any) -> None:
    turn = proposal(("call_1", "fc_1"))
    with pytest.raises(ProtocolViolation, match="item id 'fc_1'; use the call_id 'call_1'"):
        ADAPTER.check_request(build(turn, [out("fc_1")]), turn)


def test_check_request_rejects_a_stateless_request_that_drops_the_turn() -> None:
    turn = proposal(("call_1", "fc_1"))
    request = ADAPTER.build_request(
        items=[{"role": "user", "content": "go"}], tools=[], settings={}, instructions=None, stream=False
    )
    ADAPTER.check_request(request)  # fine as a first request
    with pytest.raises(ProtocolViolation, match="'call_1' of the turn being answered"):
        ADAPTER.check_request(request, turn)


def test_check_request_rejects_an_output_before_its_call() -> None:
    turn = proposal(("call_1", "fc_1"))
    items = [out("call_1"), *ADAPTER.turn_items(turn)]
    with pytest.raises(ProtocolViolation, match="before its call"):
        ADAPTER.check_request({"input": items}, turn)


def test_check_request_rejects_a_chain_to_another_response() -> None:
    turn = proposal(("call_1", "fc_1"))
    request = chained(turn, [out("call_1")])
    request["previous_response_id"] = "resp_other"
    with pytest.raises(ProtocolViolation, match="previous_response_id"):
        ADAPTER.check_request(request, turn)


def test_check_request_rejects_bad_output_payloads_and_shapes() -> None:
    turn = proposal(("call_1", "fc_1"))
    with pytest.raises(ProtocolViolation, match="output must be"):
        ADAPTER.check_request(stateless(turn, [out("call_1", {"ok": True})]), turn)
    with pytest.raises(ProtocolViolation, match="input list"):
        ADAPTER.check_request({"input": {"role": "user"}}, turn)
    with pytest.raises(ProtocolViolation, match="needs its call_id"):
        ADAPTER.check_request({"input": [{"type": "function_call", "name": "x", "arguments": "{}"}]})


# ---- an output_index that is no position -------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, -3, True, "0"])
@pytest.mark.parametrize("snapshot", [[], [msg(text("hi"))]], ids=["empty-snapshot", "snapshot"])
def test_events_at_an_output_index_that_is_no_position_are_ignored(bad: Any, snapshot: list[Any]) -> None:
    # A negative index would read the snapshot from its end (an IndexError, or its last item twice).
    call = started_fc("call_1", "f")
    events = [
        created(),
        added(bad, call),
        delta(bad, "fc_call_1", "{}"),
        done(bad, {**call, "arguments": "{}", "status": "completed"}),
        completed(output=snapshot),
    ]
    raw = sse(*events)
    for turn, progress in (assemble([raw])[:2], streaming.fed(ADAPTER, raw)):  # feed and the fast path
        assert turn.finish is Finish.FINAL_TEXT, turn
        assert turn.calls == () and progress == []
        assert turn.text == ("hi" if snapshot else "")


def test_a_delta_with_a_negative_index_is_placed_by_its_item_id() -> None:
    call = started_fc("call_1", "f")
    events = [
        created(),
        added(0, call),
        delta(-1, "fc_call_1", '{"a":1}'),
        # the done item says completed, as the API's does: one that says in_progress never runs
        done(0, {**{k: v for k, v in call.items() if k != "arguments"}, "status": "completed"}),
        completed(),
    ]
    raw = sse(*events)
    for turn, progress in (assemble([raw])[:2], streaming.fed(ADAPTER, raw)):  # feed and the fast path
        assert turn.finish is Finish.TOOL_PROPOSALS
        assert [(c.call_id, c.arguments) for c in turn.calls] == [("call_1", {"a": 1})]
        assert ArgumentsProgress("call_1", 7) in progress
