"""Interactions errors: a server deadline is retried; an error body framed as SSE keeps its code (D26).

- Google's Interactions streaming documentation shows the error event a stream ends with when the
  server's deadline runs out: ``{"error": {"message": "Deadline expired before operation could
  complete.", "code": "gateway_timeout"}, "event_type": "error"}``. It is a timeout, retried as an HTTP
  504 with the same body is (D26); it was fatal.
- A streaming request can be refused before any event with an HTTP error whose body is itself one SSE
  ``error`` event (a public probe of the Interactions API: HTTP 429, ``event: error`` with code
  ``quota_exceeded``). Only JSON bodies were read, so the quota code was lost and the refusal retried
  as a plain 429; a quota code is not retried (D26), whatever the framing, on every API.
Texts are synthetic.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn, RawFailure

API = "gemini-interactions"


def _streamed(*events: dict[str, Any]) -> ModelTurn:
    feed = StreamFeed(get(API).stream_assembler())
    feed.feed("".join(f"event: {e['event_type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode())
    feed.close()
    return feed.finish()


DEADLINE = {"message": "Deadline expired before operation could complete.", "code": "gateway_timeout"}


def test_a_server_deadline_error_event_is_retried() -> None:
    start = {"event_type": "interaction.start", "interaction": {"id": "v1_i1", "status": "in_progress"}}
    turn = _streamed(start, {"error": DEADLINE, "event_type": "error"})
    assert (turn.finish, turn.raw_stop_reason) == (Finish.API_FAILURE, "gateway_timeout")
    assert turn.failure is not None and turn.failure.retryable is True
    http = get(API).map_error(RawFailure("http", 504, json.dumps({"error": DEADLINE}), {}))
    assert http.failure is not None and http.failure.retryable is True


QUOTA = {
    "message": "Quota exceeded for metric: requests per model per day. Please retry in 8h26m6.7s",
    "code": "quota_exceeded",
}


@pytest.mark.parametrize(
    "body",
    [
        "event: error\ndata: " + json.dumps({"error": QUOTA, "event_type": "error"}) + "\n\n",
        "data: " + json.dumps({"error": QUOTA}) + "\r\n\r\n",
        ("event: error\ndata: " + json.dumps({"error": QUOTA}) + "\n\n").encode(),
    ],
    ids=["event line", "data only, CRLF", "bytes"],
)
def test_an_sse_framed_error_body_keeps_its_quota_code(body: str | bytes) -> None:
    turn = get(API).map_error(RawFailure("http", 429, body, {"content-type": "text/event-stream"}))
    assert (turn.finish, turn.reason, turn.raw_stop_reason) == (Finish.API_FAILURE, "quota_exceeded", "429")
    assert turn.failure is not None and turn.failure.retryable is False
    as_json = get(API).map_error(RawFailure("http", 429, json.dumps({"error": QUOTA}), {}))
    assert (as_json.reason, as_json.failure and as_json.failure.retryable) == ("quota_exceeded", False)


OPENAI_QUOTA = {
    "type": "insufficient_quota",
    "code": "insufficient_quota",
    "message": "You exceeded your quota.",
}
GEMINI_TOO_LONG = {
    "code": 400,
    "message": "The input token count (1100010) exceeds the maximum number of tokens allowed (1048575).",
    "status": "INVALID_ARGUMENT",
}
ANTHROPIC_TOO_LONG = {
    "type": "invalid_request_error",
    "message": "prompt is too long: 200021 tokens > 200000 maximum",
}


@pytest.mark.parametrize(
    ("api", "status", "error", "reason"),
    [
        ("openai-responses", 429, OPENAI_QUOTA, "quota_exceeded"),
        ("openai-chat", 429, OPENAI_QUOTA, "quota_exceeded"),
        ("anthropic-messages", 400, ANTHROPIC_TOO_LONG, "context_window_exceeded"),
        ("gemini-generate", 400, GEMINI_TOO_LONG, "context_window_exceeded"),
    ],
)
def test_every_api_reads_an_sse_framed_error_body(
    api: str, status: int, error: dict[str, Any], reason: str
) -> None:
    body = "event: error\ndata: " + json.dumps({"type": "error", "error": error}) + "\n\n"
    turn = get(api).map_error(RawFailure("http", status, body, {}))
    assert turn.reason == reason
    assert turn.failure is not None and turn.failure.retryable is False


@pytest.mark.parametrize(
    "body",
    [
        "data: {not json\n\n",
        "event: error\n\n",
        "data: [DONE]\n\n",
        "<html>502 Bad Gateway</html>",
        b"\xff\xfe",
    ],
)
def test_unreadable_bodies_still_classify_by_status(body: str | bytes) -> None:
    turn = get(API).map_error(RawFailure("http", 429, body, {}))
    assert (turn.reason, turn.failure and turn.failure.retryable) == ("rate_limited", True)
