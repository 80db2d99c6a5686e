"""Review of the transport rules of issue 3 §7 and D26/D30 not pinned elsewhere: the Interactions
revision header on every transport that serves it, and a 5xx with Retry-After reaching the adapter as
one request (SDK retries off) classified retryable with its delay."""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.core.model import RequestMeta
from callbound.core.types import Finish
from callbound.transports.http import INTERACTIONS_API_REVISION
from tests.docs.stop_reason_bodies import BUILDERS
from tests.transports.test_loopback import Loopback, Reply, make_model, server

__all__ = ["server"]  # the fixture, imported for pytest

META = RequestMeta("op-1", 0, None, 30.0)


def _request(api: str) -> dict[str, Any]:
    adapter = get(api)
    return adapter.build_request(
        items=adapter.initial_items("hi", []),
        tools=[],
        settings={"model": "m-1"},
        instructions=None,
        stream=False,
    )


@pytest.mark.parametrize("transport", ["http", "sdk"])
async def test_interactions_requests_pin_the_api_revision(server: Loopback, transport: str) -> None:
    """WIRE 5.0: the same endpoint answers in another schema without ``Api-Revision``; both transports
    that serve gemini-interactions must send it."""
    api = "gemini-interactions"
    server.script(Reply(json.dumps(BUILDERS[api]("completed")).encode()))
    model = make_model(transport, api, server.root, "m-1")
    turn = await model.complete(_request(api), stream=False, meta=META)
    assert turn.finish is Finish.FINAL_TEXT, (turn.reason, turn.failure)
    assert server.seen[0].headers.get("api-revision") == INTERACTIONS_API_REVISION == "2026-05-20"


CLIENTS = [
    ("sdk", "openai-responses"),
    ("sdk", "openai-chat"),
    ("sdk", "anthropic-messages"),
    ("sdk", "gemini-generate"),
    ("http", "openai-responses"),
    ("http", "anthropic-messages"),
    ("http", "gemini-generate"),
    ("http", "gemini-interactions"),
]


@pytest.mark.parametrize(("transport", "api"), CLIENTS)
async def test_a_503_is_one_request_and_a_retryable_failure_with_its_delay(
    server: Loopback, transport: str, api: str
) -> None:
    """D26: SDK retries are off (one request reaches the server), the status goes to the adapter as a
    neutral failure (D30), classified retryable with the Retry-After delay and the status as raw stop
    reason (D32)."""
    server.script(Reply(b'{"error": {"message": "busy"}}', status=503, headers={"retry-after": "4"}))
    model = make_model(transport, api, server.root, "m-1")
    turn = await model.complete(_request(api), stream=False, meta=META)
    assert len(server.seen) == 1, "the client must not retry on its own"
    assert turn.finish is Finish.API_FAILURE and turn.raw_stop_reason == "503"
    assert turn.failure is not None and turn.failure.retryable and turn.failure.retry_after_s == 4.0
