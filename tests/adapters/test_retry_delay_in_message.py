"""The wait an OpenAI rate-limit message states is honoured where no Retry-After header says it (D26).

OpenAI words a rate limit "... Please try again in 11.054s." (a Responses stream's ``response.failed``,
as in the fixture of openai/codex codex-api/src/sse/responses.rs). A stream's failure event has no
headers, so with only backoff (0.5, 1, 2 s at most) the three retries were spent within a few seconds and
the run failed though the provider had said when to come back. The stated wait counts as Retry-After
does: a header still wins, and the deadline still bounds the wait (D14).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import callbound as cb
from callbound.adapters import get
from callbound.adapters.failures import (
    retry_after_in,
)
from callbound.adapters.stream import StreamFeed
from callbound.core.types import RawFailure
from callbound.testing import ApiError, FakeClock, ScriptedModel

MESSAGE = (
    "Rate limit reached for gpt-5 in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, "
    "Requested 2000. Please try again in 11.054s. Visit https://platform.openai.com/account/rate-limits."
)
ERROR = {"type": "tokens", "code": "rate_limit_exceeded", "message": MESSAGE}


@pytest.mark.parametrize(
    ("message", "seconds"),
    [
        ("Please try again in 11.054s.", 11.054),
        ("Please try again in 6ms.", 0.006),
        ("Please try again in 1m30s.", 90.0),
        ("Please try again in 20m0.5s.", 1200.5),
        ("Please try again in 2h1m.", 7260.0),
        ("Please try again later.", None),
        ("", None),
    ],
)
def test_the_stated_wait(message: str, seconds: float | None) -> None:
    assert retry_after_in({}, message) == seconds


def test_a_header_wins() -> None:
    assert retry_after_in({"Retry-After": "3"}, MESSAGE) == 3.0


def _failed_stream() -> list[dict[str, Any]]:
    failed = {
        "id": "resp_1",
        "status": "failed",
        "error": {"code": "rate_limit_exceeded", "message": MESSAGE},
        "output": [],
    }
    return [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
        {"type": "response.failed", "response": failed},
    ]


def test_every_form_carries_the_wait() -> None:
    feed = StreamFeed(get("openai-responses").stream_assembler())
    feed.feed("".join(f"data: {json.dumps(e)}\n\n" for e in _failed_stream()).encode())
    feed.close()
    streamed = feed.finish()
    event = StreamFeed(get("openai-responses").stream_assembler())
    event.feed(f"data: {json.dumps({'type': 'error', 'error': ERROR})}\n\n".encode())
    event.close()
    chat = StreamFeed(get("openai-chat").stream_assembler())
    chat.feed(f"data: {json.dumps({'error': ERROR})}\n\n".encode())
    chat.close()
    http = get("openai-chat").map_error(RawFailure("http", 429, json.dumps({"error": ERROR}), {}))
    for turn in (streamed, event.finish(), chat.finish(), http):
        assert turn.failure is not None and turn.failure.retryable
        assert turn.failure.retry_after_s == 11.054


def test_the_run_waits_as_told_and_then_succeeds() -> None:
    final = {
        "id": "resp_2",
        "object": "response",
        "status": "completed",
        "output": [{"type": "message", "id": "m", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}],
        "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7},
    }  # fmt: skip
    clock = FakeClock()
    start = clock.now()
    model = ScriptedModel("openai-responses", [_failed_stream(), _failed_stream(), final])
    runner = cb.Runner(model=model, registry=cb.Registry([]), clock=clock, settings={"model": "gpt-5"})
    out = runner.run_sync("hello", tenant="t", subject="s")
    assert out.state is cb.State.COMPLETED
    assert (clock.now() - start).total_seconds() >= 2 * 11.054


def test_a_wait_past_the_deadline_stops_at_once() -> None:
    body = {"error": {**ERROR, "message": "Rate limit reached. Please try again in 20m0s."}}
    model = ScriptedModel("openai-chat", [ApiError(429, body)])
    runner = cb.Runner(
        model=model,
        registry=cb.Registry([]),
        clock=FakeClock(),
        settings={"model": "m"},
        budgets=cb.Budgets(deadline_s=60),
    )
    out = runner.run_sync("hello", tenant="t", subject="s")
    assert (out.state, out.reason, len(model.requests)) == (cb.State.STOPPED, "DEADLINE", 1)
