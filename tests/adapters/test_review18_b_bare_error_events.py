"""A bare error object inside a stream is an error event on every API (review round 18, b).

An ``{"error": {...}}`` payload with no event type of its own reaches an assembler in two ways: a
gateway writes it as a ``data:`` line (openai-python's stream reader raises on any SSE data object with
a truthy top-level ``error``: WIRE.md 1.6), or a server writes the JSON error object into the stream as
is after the stream began, which the shared SSE reader hands on as one more event at the end (sse.py
``_raw_error``; Google's front end does so). The Chat and Gemini generateContent assemblers read it as
the error it is; the Responses, Anthropic and Interactions assemblers ignored it, so the stream read as
one cut before its terminal event: TRUNCATED(stream_interrupted), retried (D26) even when the error is
fatal, and the provider's type and code were lost (D32). Now it is the same API_FAILURE an ``error``
event with its type gives (issue 3 §4: an error event after HTTP 200 → API_FAILURE).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.core.types import Finish, ModelTurn
from tests.adapters import streaming

STARTS: dict[str, dict[str, Any]] = {
    "openai-responses": {
        "type": "response.created",
        "response": {"id": "resp_1", "status": "in_progress", "output": []},
    },
    "anthropic-messages": {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 7, "output_tokens": 1},
        },
    },
    "gemini-interactions": {
        "event_type": "interaction.created",
        "interaction": {"id": "v1_e", "status": "in_progress"},
    },
}
# One fatal and one retryable error per API, in that API's own error shape.
ERRORS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "openai-responses": (
        {
            "message": "You exceeded your current quota.",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        },
        {
            "message": "The server had an error.",
            "type": "server_error",
            "param": None,
            "code": "server_error",
        },
    ),
    "anthropic-messages": (
        {"type": "invalid_request_error", "message": "tools.0.name: String should match pattern"},
        {"type": "overloaded_error", "message": "Overloaded"},
    ),
    "gemini-interactions": (
        {"code": 400, "message": "Request contains an invalid argument.", "status": "INVALID_ARGUMENT"},
        {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"},
    ),
}
APIS = list(STARTS)


def _line(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


def _typed(api: str, error: dict[str, Any]) -> dict[str, Any]:
    """The same error as the API's own typed error event (the reference reading)."""
    if api == "gemini-interactions":
        return {"event_type": "error", "error": error}
    return {"type": "error", "error": error}


def _turn(api: str, raw: bytes) -> ModelTurn:
    turn, _ = streaming.fed(get(api), raw)
    return turn


def _reading(turn: ModelTurn) -> tuple[Any, ...]:
    failure = turn.failure
    assert failure is not None
    return (turn.finish, turn.reason, turn.raw_stop_reason, failure.kind, failure.retryable,
            failure.error_type, failure.error_code)  # fmt: skip


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("fatal", [True, False])
def test_a_bare_error_object_on_a_data_line_is_an_error_event(api: str, fatal: bool) -> None:
    error = ERRORS[api][0 if fatal else 1]
    turn = _turn(api, _line(STARTS[api]) + _line({"error": error}))
    reference = _turn(api, _line(STARTS[api]) + _line(_typed(api, error)))
    assert turn.finish is Finish.API_FAILURE
    assert turn.failure is not None and turn.failure.kind == "error_event"
    assert turn.failure.retryable is not fatal
    assert _reading(turn) == _reading(reference)
    assert turn.calls == ()


@pytest.mark.parametrize("api", APIS)
def test_a_raw_error_object_at_the_end_of_the_stream_is_an_error_event(api: str) -> None:
    # written into the stream as is, over several lines, without data: (sse.py _raw_error)
    error = ERRORS[api][0]
    raw = _line(STARTS[api]) + json.dumps({"error": error}, indent=2).encode() + b"\n"
    turn = _turn(api, raw)
    assert turn.finish is Finish.API_FAILURE
    assert turn.failure is not None and turn.failure.retryable is False  # fatal: never retried as a cut
    assert _reading(turn) == _reading(_turn(api, _line(STARTS[api]) + _line(_typed(api, error))))


@pytest.mark.parametrize("api", APIS)
def test_a_stream_without_any_error_is_still_cut(api: str) -> None:
    turn = _turn(api, _line(STARTS[api]))
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "stream_interrupted")
    assert turn.failure is not None and turn.failure.retryable is True
