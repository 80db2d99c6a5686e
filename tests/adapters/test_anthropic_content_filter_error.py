"""Anthropic's "Output blocked by content filtering policy" is a provider policy stop: REFUSAL (D1).

Anthropic answers with ``invalid_request_error`` "Output blocked by content filtering policy", as an HTTP
400 or as a stream's ``error`` event (bodies as received, quoted in anthropics/claude-code issues 18542
and 58367; the stream framing here is synthetic). It read as FAILED(API_ERROR); the same block on Azure
OpenAI (HTTP 400 content_filter) is REFUSED(CONTENT_FILTER), and so is this one now. Not retried.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import callbound as cb
from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, RawFailure
from callbound.testing import ApiError, FakeClock, ScriptedModel

API = "anthropic-messages"
BLOCKED = {
    "type": "error",
    "error": {
        "details": None,
        "type": "invalid_request_error",
        "message": "Output blocked by content filtering policy",
    },
    "request_id": "req_1",
}


def test_the_http_answer_is_a_refusal() -> None:
    turn = get(API).map_error(RawFailure("http", 400, json.dumps(BLOCKED), {}))
    assert (turn.finish, turn.reason, turn.raw_stop_reason) == (Finish.REFUSAL, "content_filter", "400")
    assert turn.failure is not None and turn.failure.retryable is False


def test_the_stream_error_event_is_a_refusal_and_runs_no_call() -> None:
    start = {
        "type": "message_start",
        "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": [],
                    "stop_reason": None, "usage": {"input_tokens": 12, "output_tokens": 1}},
    }  # fmt: skip
    events: list[dict[str, Any]] = [
        start,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Here is"}},
        BLOCKED,
    ]
    feed = StreamFeed(get(API).stream_assembler())
    feed.feed("".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode())
    feed.close()
    turn = feed.finish()
    assert (turn.finish, turn.reason, turn.calls) == (Finish.REFUSAL, "content_filter", ())
    assert turn.usage.input_tokens == 12


@pytest.mark.parametrize("status", [429, 500])
def test_other_statuses_keep_their_reading(status: int) -> None:
    turn = get(API).map_error(RawFailure("http", status, json.dumps(BLOCKED), {}))
    assert turn.finish is Finish.API_FAILURE and turn.failure is not None and turn.failure.retryable


def test_a_run_ends_refused_after_one_request() -> None:
    model = ScriptedModel(API, [ApiError(400, BLOCKED)])
    runner = cb.Runner(
        model=model, registry=cb.Registry([]), clock=FakeClock(), settings={"model": "claude-x"}
    )
    out = runner.run_sync("a prompt", tenant="t", subject="s")
    assert (out.state, out.reason) == (cb.State.REFUSED, "CONTENT_FILTER")
    assert len(model.requests) == 1
