"""Provider JSON that parses but holds a value of an unexpected type where a list belongs (a number for
``choices``, ``parts``, ``content``, ``violations``) never raises out of an adapter (D4). Where it is a
turn's content or call container (Chat ``tool_calls``, Gemini ``parts``, an Interactions model_output's
``content``) the turn is API_FAILURE(malformed_response), as the plain body is (review round 16, F6:
never an empty completion, never a call lost while its siblings run); elsewhere (``choices``,
``violations``, a thought's ``summary``) it is tolerated as holding nothing, or makes the call's arguments
unusable. Streams are read the way the transports read them (``StreamFeed``, fast paths included)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.core.types import CallStarted, Finish, RawFailure
from tests.adapters import streaming

ODD = [5, -1, 1.5, True, "s", {"a": 1}]


def sse(*events: dict[str, Any] | str) -> bytes:
    return b"".join(
        b"data: " + (e if isinstance(e, str) else json.dumps(e)).encode() + b"\n\n" for e in events
    )


# ---- openai-chat -----------------------------------------------------------------------------------


def _chunk(**fields: Any) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-x", **fields}


def _choice(delta: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
    return [{"index": 0, "delta": delta, "finish_reason": finish}]


@pytest.mark.parametrize("odd", ODD)
def test_chat_chunk_whose_choices_is_not_a_list_holds_no_choice(odd: Any) -> None:
    raw = sse(
        _chunk(choices=_choice({"role": "assistant", "content": "do"})),
        _chunk(choices=odd),
        _chunk(choices=_choice({"content": "ne"}, "stop")),
        "[DONE]",
    )
    turn, _ = streaming.fed(get("openai-chat"), raw)
    assert turn.finish is Finish.FINAL_TEXT and turn.text == "done"


def test_chat_stream_of_only_odd_choices_ends_as_a_cut_stream() -> None:
    turn, _ = streaming.fed(get("openai-chat"), sse(_chunk(choices=5), "[DONE]"))
    assert turn.finish is Finish.TRUNCATED and turn.reason == "stream_interrupted"
    assert turn.failure is not None and turn.failure.retryable


@pytest.mark.parametrize("odd", ODD)
def test_chat_delta_whose_tool_calls_is_not_a_list_fails_the_turn(odd: Any) -> None:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    raw = sse(
        _chunk(choices=_choice({"role": "assistant", "tool_calls": [call]})),
        _chunk(choices=_choice({"tool_calls": odd})),
        _chunk(choices=_choice({}, "tool_calls")),
        "[DONE]",
    )
    turn, progress = streaming.fed(get("openai-chat"), raw)
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "malformed_response")
    assert turn.failure is not None and turn.failure.error_code == "tool_calls_not_a_list"
    assert [(c.call_id, c.name, c.arguments) for c in turn.calls] == [("call_1", "f", {})]
    assert [p for p in progress if isinstance(p, CallStarted)] == [CallStarted("call_1", "f")]


# ---- gemini-generate -------------------------------------------------------------------------------


def _gemini(parts: Any, finish: str | None = None) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if finish is not None:
        cand["finishReason"] = finish
    return {"candidates": [cand], "responseId": "g1", "modelVersion": "gemini-x"}


@pytest.mark.parametrize("odd", ODD)
def test_gemini_chunk_whose_parts_is_not_a_list_fails_the_turn(odd: Any) -> None:
    raw = sse(_gemini([{"text": "do"}]), _gemini(odd), _gemini([{"text": "ne"}], "STOP"))
    turn, _ = streaming.fed(get("gemini-generate"), raw)
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "malformed_response")
    assert turn.failure is not None and turn.failure.error_code == "parts_not_a_list"
    assert turn.text == "done"


def test_gemini_stream_with_odd_parts_reads_as_the_same_plain_body() -> None:
    adapter = get("gemini-generate")
    streamed, _ = streaming.fed(adapter, sse(_gemini(5, "STOP")))
    plain = adapter.parse_response(json.dumps(_gemini(5, "STOP")).encode())
    assert streamed.finish is plain.finish is Finish.API_FAILURE
    assert streamed.failure is not None and plain.failure is not None
    assert streamed.failure.error_code == plain.failure.error_code == "parts_not_a_list"
    assert streamed.text == plain.text == ""


@pytest.mark.parametrize("odd", [5, 1.5, True, "s", {"jsonPath": "$.a", "stringValue": "x"}])
def test_gemini_partial_args_that_is_not_a_list_makes_the_arguments_unusable(odd: Any) -> None:
    opening = {"functionCall": {"name": "f", "willContinue": True}}
    piece = {"functionCall": {"partialArgs": odd, "willContinue": True}}
    closing = {"functionCall": {}}
    raw = sse(_gemini([opening]), _gemini([piece]), _gemini([closing], "STOP"))
    turn, _ = streaming.fed(get("gemini-generate"), raw)
    assert [c.name for c in turn.calls] == ["f"]
    assert turn.calls[0].arguments is None
    assert turn.calls[0].arguments_error == "partialArgs is not a list"


def _quota_body(violations: Any) -> dict[str, Any]:
    return {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "quota",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": violations},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"},
            ],
        }
    }


@pytest.mark.parametrize("api", ["gemini-generate", "gemini-interactions"])
@pytest.mark.parametrize("odd", ODD)
def test_gemini_quota_failure_whose_violations_is_not_a_list_names_no_quota(api: str, odd: Any) -> None:
    adapter = get(api)
    raw = json.dumps(_quota_body(odd)).encode()
    turn = adapter.map_error(RawFailure("http", 429, raw, {}))
    assert turn.finish is Finish.API_FAILURE and turn.reason == "rate_limited"
    assert turn.failure is not None and turn.failure.retryable and turn.failure.status == 429
    assert turn.failure.retry_after_s == 3.0, "the rest of the details is still read"


def test_gemini_quota_failure_with_a_list_still_names_the_quota() -> None:
    body = _quota_body([{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}])
    turn = get("gemini-generate").map_error(RawFailure("http", 429, json.dumps(body).encode(), {}))
    assert turn.reason == "quota_exceeded" and turn.failure is not None and not turn.failure.retryable
    assert turn.failure.error_code == "GenerateRequestsPerDayPerProjectPerModel-FreeTier"


def test_gemini_stream_error_event_with_odd_violations_is_an_error_turn() -> None:
    turn, _ = streaming.fed(get("gemini-generate"), sse(_quota_body(5)))
    assert turn.finish is Finish.API_FAILURE and turn.failure is not None
    assert turn.failure.kind == "error_event"


# ---- gemini-interactions ---------------------------------------------------------------------------

CREATED = {"event_type": "interaction.created", "interaction": {"id": "v1_S", "status": "in_progress"}}
COMPLETED = {"event_type": "interaction.completed", "interaction": {"id": "v1_S", "status": "completed"}}


def _start(index: int, step: dict[str, Any]) -> dict[str, Any]:
    return {"event_type": "step.start", "index": index, "step": step}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"event_type": "step.delta", "index": index, "delta": delta}


def _stop(index: int) -> dict[str, Any]:
    return {"event_type": "step.stop", "index": index}


@pytest.mark.parametrize("odd", ODD)
def test_interactions_model_output_whose_content_is_not_a_list_fails_the_turn(odd: Any) -> None:
    raw = sse(CREATED, _start(0, {"type": "model_output", "content": odd}), _stop(0), COMPLETED)
    turn, _ = streaming.fed(get("gemini-interactions"), raw)
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "malformed_response")
    assert turn.failure is not None and turn.failure.error_code == "content_not_a_list"
    assert turn.text == ""
    assert list(turn.continuation) == [{"type": "model_output", "content": []}]


@pytest.mark.parametrize("odd", ODD)
def test_interactions_text_deltas_after_odd_content_make_the_content(odd: Any) -> None:
    raw = sse(
        CREATED,
        _start(0, {"type": "model_output", "content": odd}),
        _delta(0, {"type": "text", "text": "do"}),
        _delta(0, {"type": "text", "text": "ne"}),
        _stop(0),
        COMPLETED,
    )
    turn, _ = streaming.fed(get("gemini-interactions"), raw)
    assert turn.finish is Finish.API_FAILURE and turn.text == "done"  # the snapshot was malformed
    assert list(turn.continuation) == [
        {"type": "model_output", "content": [{"type": "text", "text": "done"}]}
    ]


@pytest.mark.parametrize("odd", ODD)
def test_interactions_media_delta_after_odd_content_starts_the_list(odd: Any) -> None:
    image = {"type": "image", "data": "aGk=", "mime_type": "image/png"}
    raw = sse(
        CREATED, _start(0, {"type": "model_output", "content": odd}), _delta(0, image), _stop(0), COMPLETED
    )
    turn, _ = streaming.fed(get("gemini-interactions"), raw)
    assert turn.finish is Finish.API_FAILURE  # the snapshot was malformed
    assert list(turn.continuation) == [{"type": "model_output", "content": [image]}]


@pytest.mark.parametrize("odd", ODD)
def test_interactions_summary_delta_after_odd_summary_starts_the_list(odd: Any) -> None:
    summary = {"type": "text", "text": "hm"}
    raw = sse(
        CREATED,
        _start(0, {"type": "thought", "summary": odd}),
        _delta(0, {"type": "thought_summary", "content": summary}),
        _stop(0),
        _start(1, {"type": "model_output", "content": [{"type": "text", "text": "ok"}]}),
        _stop(1),
        COMPLETED,
    )
    turn, _ = streaming.fed(get("gemini-interactions"), raw)
    assert turn.finish is Finish.FINAL_TEXT and turn.text == "ok"
    assert turn.continuation[0] == {"type": "thought", "summary": [summary]}


def test_interactions_odd_content_of_another_step_type_is_passed_on() -> None:
    """Only a model_output's content is read as blocks; another step keeps what it carried."""
    step = {"type": "code_execution_result", "call_id": "x", "content": "stdout"}
    raw = sse(CREATED, _start(0, step), _stop(0), COMPLETED)
    turn, _ = streaming.fed(get("gemini-interactions"), raw)
    assert list(turn.continuation) == [step]
