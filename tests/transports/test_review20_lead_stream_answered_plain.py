"""A stream request answered with a plain JSON body is read as that body (review round 20, lead;
found by f).

A gateway or server that ignores ``stream: true`` answers with the whole response as
``application/json``. Read through the SSE reader, it held no event: TRUNCATED(stream_interrupted),
retried and paid for again until the operation ended INCOMPLETE, though the answer was complete. Now
every transport (HttpModel and the SDK clients) reads such a body as a plain response: the same turn
as the same body answering a plain request. A real event stream is read as before."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from callbound.core.model import RequestMeta
from callbound.core.types import ModelTurn
from tests.transports.test_loopback import SCENARIOS, Loopback, Reply, make_model

APIS = ["openai-responses", "openai-chat", "anthropic-messages", "gemini-generate", "gemini-interactions"]
SDK_STREAMS = {"openai-responses", "openai-chat", "anthropic-messages"}  # GeminiModel streams over HTTP


@pytest.fixture(scope="module")
def server() -> Iterator[Loopback]:
    loop = Loopback()
    try:
        yield loop
    finally:
        loop.close()


async def _turn(server: Loopback, transport: str, api: str, *, stream: bool, reply: Reply) -> ModelTurn:
    model = SCENARIOS[(api, False)]().model
    client = make_model(transport, api, server.root, model)
    adapter = client.adapter
    body = adapter.build_request(
        items=adapter.initial_items("hi", []),
        tools=[],
        settings={"model": model},
        instructions=None,
        stream=stream,
    )
    server.script(reply)
    turn: ModelTurn = await client.complete(
        body, stream=stream, meta=RequestMeta("op", 0, None, timeout_s=10)
    )
    return turn


def _view(turn: ModelTurn) -> dict[str, Any]:
    return {
        "finish": turn.finish.value,
        "reason": turn.reason,
        "raw_stop_reason": turn.raw_stop_reason,
        "failure": turn.failure,
        "response_id": turn.response_id,
        "calls": [(c.call_id, c.name, c.arguments) for c in turn.calls],
        "text": turn.text,
    }


def _params() -> list[Any]:
    return [
        pytest.param(transport, api, id=f"{transport}-{api}")
        for api in APIS
        for transport in ("http", "sdk")
        if transport == "http" or api in SDK_STREAMS
    ]


@pytest.mark.parametrize(("transport", "api"), _params())
async def test_a_plain_answer_to_a_stream_request_is_the_plain_turn(
    server: Loopback, transport: str, api: str
) -> None:
    plain = SCENARIOS[(api, False)]().first
    assert not plain.sse
    as_plain = await _turn(server, transport, api, stream=False, reply=plain)
    as_stream = await _turn(server, transport, api, stream=True, reply=plain)
    assert as_stream.reason != "stream_interrupted"
    assert _view(as_stream) == _view(as_plain)
    assert as_stream.calls, "the scenario's first answer proposes calls"


@pytest.mark.parametrize(("transport", "api"), _params())
async def test_an_event_stream_is_still_read_as_one(server: Loopback, transport: str, api: str) -> None:
    sc = SCENARIOS[(api, True)]()
    assert sc.first.sse
    turn = await _turn(server, transport, api, stream=True, reply=sc.first)
    assert turn.failure is None and turn.calls


@pytest.mark.parametrize(("transport", "api"), _params())
async def test_an_error_object_answering_a_stream_request_is_read_as_an_error(
    server: Loopback, transport: str, api: str
) -> None:
    """A 200 whose JSON body is an error object (a proxy's): classified like an error body, never taken
    for a cut stream and paid for again."""
    reply = Reply(b'{"error": {"message": "upstream overloaded", "type": "server_error", "code": 500}}')
    turn = await _turn(server, transport, api, stream=True, reply=reply)
    assert turn.reason != "stream_interrupted"
    assert turn.failure is not None


@pytest.mark.parametrize(("transport", "api"), _params())
async def test_an_event_stream_sent_as_json_is_still_read_as_a_stream(
    server: Loopback, transport: str, api: str
) -> None:
    """A server that labels its event stream application/json (a misconfigured gateway): the body is not
    the provider's JSON, so it is read as the stream it is, the same turn as under text/event-stream."""
    sc = SCENARIOS[(api, True)]()
    as_sse = await _turn(server, transport, api, stream=True, reply=sc.first)
    mislabelled = Reply(sc.first.body)  # sse=False: sent whole, as application/json
    as_json = await _turn(server, transport, api, stream=True, reply=mislabelled)
    assert as_json.failure is None and as_json.calls
    assert _view(as_json) == _view(as_sse)
