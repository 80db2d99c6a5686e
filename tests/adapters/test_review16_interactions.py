"""Gemini Interactions, checked against google-genai 3.6.1's types (review round 16). Payloads synthetic.

- A rate limit reported without an HTTP status (an SSE ``error`` event, a ``failed`` interaction) is
  retried as the same code at HTTP 429 is (D26): Google's Interactions error codes list
  ``rate_limit_exceeded`` as 429, "wait and retry"; google-genai's retry tests send ``too_many_requests``.
- A ``model_output`` step may carry an ``error`` (``ModelOutputStep.error``, a google.rpc.Status whose int
  code is a google.rpc.Code). A ``failed`` interaction whose only details are there is read by that code
  (14 UNAVAILABLE is retried); a ``completed`` one with such a step is a fault, never COMPLETED (D1).
- ``interaction.status_update`` carries usage (``InteractionStatusUpdate.usage``): read as a running
  total, so a stream whose terminal event has none still reports it (D27).
- A unary response may echo the request's input as its first step (Google's May-2026 migration guide):
  the echoed ``user_input`` / ``function_result`` steps are not replayed, or the next request would hold
  the user's input twice (D8).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.machine import classify_turn
from callbound.core.types import Finish, ModelTurn, RawFailure
from callbound.testing import ScriptedModel

API = "gemini-interactions"
CREATED = {"event_type": "interaction.created", "interaction": {"id": "v1_e", "status": "in_progress"}}
DONE = {
    "id": "v1_ok",
    "status": "completed",
    "steps": [{"type": "model_output", "content": [{"type": "text", "text": "Done."}]}],
    "usage": {"total_input_tokens": 5, "total_output_tokens": 2, "total_tokens": 7},
}


def _sse(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['event_type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _streamed(*events: dict[str, Any]) -> ModelTurn:
    feed = StreamFeed(get(API).stream_assembler())
    feed.feed(_sse(*events))
    feed.close()
    return feed.finish()


def _registry() -> cb.Registry:
    class Q(BaseModel):
        city: str

    return cb.Registry(
        [
            cb.ToolSpec(
                name="get_weather",
                description="Weather for a city",
                params=Q,
                handler=lambda a, c: {"t": 3},
                schema_version="v1",
                risk="read",
                timeout_ms=500,
            )
        ]
    )


@pytest.mark.parametrize("code", ["rate_limit_exceeded", "too_many_requests", "RESOURCE_EXHAUSTED"])
def test_a_rate_limit_without_an_http_status_is_retried_as_a_429_is(code: str) -> None:
    err = {"code": code, "message": "Resource exhausted. Please try again later."}
    for turn in (
        _streamed(CREATED, {"event_type": "error", "error": err}),
        get(API).parse_response({"id": "v1_f", "status": "failed", "errors": [err]}),
        get(API).map_error(RawFailure("http", 429, json.dumps({"error": err}), {})),
    ):
        assert turn.finish is Finish.API_FAILURE
        assert turn.failure is not None and turn.failure.retryable is True, turn
        assert turn.reason == "rate_limited"
        assert classify_turn(turn).reason == "RATE_LIMITED"


def test_a_quota_code_in_a_failed_interaction_is_not_retried() -> None:
    err = {"code": "quota_exceeded", "message": "daily quota"}
    turn = get(API).parse_response({"id": "v1_f", "status": "failed", "errors": [err]})
    assert turn.failure is not None and turn.failure.retryable is False
    assert (turn.raw_stop_reason, turn.reason) == ("quota_exceeded", "quota_exceeded")


def test_a_streamed_rate_limit_is_retried_end_to_end() -> None:
    err = {"code": "rate_limit_exceeded", "message": "Please try again later."}
    model = ScriptedModel(API, [_sse(CREATED, {"event_type": "error", "error": err}), DONE], model="gemini-x")
    runner = cb.Runner(model=model, registry=_registry(), budgets=cb.Budgets(max_model_turns=4))
    out = runner.run_sync("hi", tenant="t", subject="s")
    assert (out.state.value, out.text, len(model.requests)) == ("COMPLETED", "Done.", 2)


def _step(error: dict[str, Any], text: str | None = None) -> dict[str, Any]:
    content = [{"type": "text", "text": text}] if text is not None else []
    return {"type": "model_output", "content": content, "error": error}


@pytest.mark.parametrize(
    ("rpc", "name", "retryable"),
    [
        (14, "unavailable", True),
        (4, "deadline_exceeded", True),
        (13, "internal", True),
        (8, "resource_exhausted", True),
        (3, "invalid_argument", False),
        (7, "permission_denied", False),
    ],
)
def test_a_failed_interaction_reads_the_rpc_code_of_its_model_output_error(
    rpc: int, name: str, retryable: bool
) -> None:
    body = {"id": "v1_f", "status": "failed", "steps": [_step({"code": rpc, "message": "x"})]}
    turn = get(API).parse_response(body)
    assert turn.finish is Finish.API_FAILURE and turn.raw_stop_reason == "failed"
    assert turn.failure is not None and turn.failure.retryable is retryable
    # 14 is google.rpc UNAVAILABLE, not an HTTP status: read by name
    assert turn.failure.error_code == name


def test_errors_at_the_top_keep_their_http_reading() -> None:
    body = {"id": "v1_f", "status": "failed", "errors": [{"code": 503, "message": "x"}]}
    turn = get(API).parse_response(body)
    assert turn.failure is not None and turn.failure.retryable is True
    body = {"id": "v1_f", "status": "failed", "errors": [{"code": 400, "message": "x"}]}
    turn = get(API).parse_response(body)
    assert turn.failure is not None and turn.failure.retryable is False


@pytest.mark.parametrize("text", [None, "partial answer"])
def test_a_completed_interaction_with_an_error_step_is_never_completed(text: str | None) -> None:
    body = {
        "id": "v1_c",
        "status": "completed",
        "steps": [_step({"code": 14, "message": "unavailable"}, text)],
    }
    turn = get(API).parse_response(body)
    assert turn.finish is Finish.API_FAILURE
    assert classify_turn(turn).target.value != "COMPLETED"
    assert turn.failure is not None and turn.failure.retryable is True


def test_a_completed_error_step_is_retried_end_to_end() -> None:
    bad = {"id": "v1_c", "status": "completed", "steps": [_step({"code": 14, "message": "unavailable"})]}
    model = ScriptedModel(API, [bad, DONE], model="gemini-x")
    runner = cb.Runner(model=model, registry=_registry(), budgets=cb.Budgets(max_model_turns=4))
    out = runner.run_sync("hi", tenant="t", subject="s")
    assert (out.state.value, out.text, len(model.requests)) == ("COMPLETED", "Done.", 2)


def test_usage_on_a_status_update_counts_when_the_terminal_event_has_none() -> None:
    usage = {"total_input_tokens": 11, "total_output_tokens": 4, "total_tokens": 15}
    turn = _streamed(
        CREATED,
        {"event_type": "step.start", "index": 0, "step": {"type": "model_output", "content": []}},
        {"event_type": "step.delta", "index": 0, "delta": {"type": "text", "text": "Hello"}},
        {"event_type": "step.stop", "index": 0},
        {
            "event_type": "interaction.status_update",
            "interaction_id": "v1_e",
            "status": "completed",
            "usage": usage,
        },
        {"event_type": "interaction.completed", "interaction": {"id": "v1_e", "status": "completed"}},
    )
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "Hello")
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (11, 4)


def test_an_echoed_input_step_is_not_replayed() -> None:
    echo = {"type": "user_input", "content": [{"type": "text", "text": "Weather in Oslo?"}]}
    call = {"type": "function_call", "id": "fc_1", "name": "get_weather", "arguments": {"city": "Oslo"}}
    first = {"id": "v1_1", "status": "requires_action", "steps": [echo, call]}
    model = ScriptedModel(API, [first, DONE], model="gemini-x")
    runner = cb.Runner(model=model, registry=_registry(), budgets=cb.Budgets(max_model_turns=4))
    out = runner.run_sync("Weather in Oslo?", tenant="t", subject="s")
    assert out.state.value == "COMPLETED"
    second = model.requests[1]
    kinds = [step.get("type") for step in second["input"]]
    assert kinds.count("user_input") == 1, kinds
    assert kinds == ["user_input", "function_call", "function_result"]
    # the call keeps its id and runs once
    assert [s["call_id"] for s in second["input"] if s.get("type") == "function_result"] == ["fc_1"]
