"""An OpenAI Responses error reads the same with or without an HTTP status (D1, D26, D32).

OpenAI reports an input too long for the model either as an HTTP 400 body or, once the stream has
started, as an ``error`` event (code ``context_length_exceeded``) followed by ``response.failed``
(a Responses stream recorded from OpenAI and published in a public client's test fixtures:
response.created, response.in_progress, error, response.failed with ``output: []`` and ``usage: null``).
D1 lists "context window exceeded" under TRUNCATED, so every form of it is
TRUNCATED(context_window_exceeded), not retried, and the run ends INCOMPLETE(CONTEXT_WINDOW_EXCEEDED),
as the HTTP 400 already did. A status-less ``rate_limit_exceeded`` is named as an HTTP 429 is. Ids and
texts are synthetic.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import callbound as cb
from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn, RawFailure
from callbound.testing import FakeClock, ScriptedModel

API = "openai-responses"
ADAPTER = get(API)
MESSAGE = "Your input exceeds the context window of this model. Please adjust your input and try again."
NESTED = {
    "type": "invalid_request_error",
    "code": "context_length_exceeded",
    "message": MESSAGE,
    "param": "input",
}


def _failed(error: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": "failed",
        "error": error,
        "output": [],
        "usage": None,
    }


def _started() -> list[dict[str, Any]]:
    start = {"id": "resp_1", "status": "in_progress", "error": None, "output": [], "usage": None}
    return [
        {"type": "response.created", "response": start, "sequence_number": 0},
        {"type": "response.in_progress", "response": start, "sequence_number": 1},
    ]


def _stream(events: list[dict[str, Any]]) -> ModelTurn:
    feed = StreamFeed(ADAPTER.stream_assembler())
    feed.feed("".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode())
    feed.close()
    return feed.finish()


EVENT_NESTED = {"type": "error", "error": NESTED, "sequence_number": 2}
EVENT_FLAT = {"type": "error", "code": "context_length_exceeded", "message": MESSAGE, "param": "input"}
FAILED_EVENT = {
    "type": "response.failed",
    "response": _failed({"code": "context_length_exceeded", "message": MESSAGE}),
    "sequence_number": 3,
}

FORMS = {
    "recorded stream: error event, then response.failed": lambda: _stream(
        [*_started(), EVENT_NESTED, FAILED_EVENT]
    ),
    "stream: flat error event only": lambda: _stream([*_started(), EVENT_FLAT]),
    "stream: response.failed only": lambda: _stream([*_started(), FAILED_EVENT]),
    "stream: error event, then a failed snapshot without its error": lambda: _stream(
        [*_started(), EVENT_NESTED, {"type": "response.failed", "response": _failed(None)}]
    ),
    "plain failed body (a background response read back)": lambda: ADAPTER.parse_response(
        _failed({"code": "context_length_exceeded", "message": MESSAGE})
    ),
    "plain failed body, said only by its message": lambda: ADAPTER.parse_response(
        _failed(
            {"code": "invalid_prompt", "message": "This model's maximum context length is 128000 tokens."}
        )
    ),
    "HTTP 400 body": lambda: ADAPTER.map_error(RawFailure("http", 400, json.dumps({"error": NESTED}), {})),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_context_window_exceeded_is_truncated_in_every_form(form: str) -> None:
    turn = FORMS[form]()
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "context_window_exceeded")
    assert turn.failure is not None and turn.failure.retryable is False
    assert turn.calls == ()


def test_the_recorded_stream_ends_the_run_incomplete_after_one_request() -> None:
    events: list[Any] = [*_started(), EVENT_NESTED, FAILED_EVENT]
    model = ScriptedModel(API, [events])
    runner = cb.Runner(model=model, registry=cb.Registry([]), clock=FakeClock())
    outcome = runner.run_sync("a very long prompt", tenant="t", subject="s")
    assert (outcome.state, outcome.reason) == (cb.State.INCOMPLETE, "CONTEXT_WINDOW_EXCEEDED")
    assert len(model.requests) == 1


def test_other_failures_keep_their_reading() -> None:
    server = ADAPTER.parse_response(_failed({"code": "server_error", "message": "The server had an error."}))
    assert (server.finish, server.reason, server.failure and server.failure.retryable) == (
        Finish.API_FAILURE,
        "api_error",
        True,
    )
    quota = _stream(
        [
            *_started(),
            {"type": "error", "error": {"type": "insufficient_quota", "code": "insufficient_quota"}},
        ]
    )
    assert (quota.finish, quota.reason, quota.failure and quota.failure.retryable) == (
        Finish.API_FAILURE,
        "quota_exceeded",
        False,
    )


@pytest.mark.parametrize("api", ["openai-responses", "openai-chat"])
def test_a_status_less_rate_limit_is_named_as_a_429_is(api: str) -> None:
    error = {
        "type": "tokens",
        "code": "rate_limit_exceeded",
        "message": "Rate limit reached. Please try again.",
    }
    if api == "openai-responses":
        turn = _stream([*_started(), {"type": "error", "error": error}])
    else:
        feed = StreamFeed(get(api).stream_assembler())
        feed.feed(f"data: {json.dumps({'error': error})}\n\n".encode())
        feed.close()
        turn = feed.finish()
    http = get(api).map_error(RawFailure("http", 429, json.dumps({"error": error}), {}))
    assert (turn.finish, turn.reason, turn.failure and turn.failure.retryable) == (
        Finish.API_FAILURE,
        "rate_limited",
        True,
    )
    assert http.reason == turn.reason
