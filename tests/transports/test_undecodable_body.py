"""A body whose bytes do not match its content-encoding (``content-encoding: gzip`` on bytes that are
not gzip, as a misconfigured proxy sends them) is a failed request, never an exception (D4): a plain
body fails like a broken connection, a stream like a cut one, and an error body that cannot be read
leaves the status alone to classify; the Runner retries each (D26). Every transport is driven against
the loopback server of ``test_loopback``; a stream that turns undecodable mid-way goes through
``httpx.MockTransport``."""

from __future__ import annotations

import json
import zlib
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from callbound.core.model import RequestMeta
from callbound.core.types import Finish
from callbound.transports import transport_errors
from callbound.transports.http import HttpModel
from tests.transports.test_loopback import (
    CASES,
    KEY,
    SCENARIOS,
    Loopback,
    Recording,
    Reply,
    make_model,
    runner_for,
)

NOT_GZIP = b"this is not gzip at all"
GZIP = {"content-encoding": "gzip"}


@pytest.fixture
def loop() -> Iterator[Loopback]:
    server = Loopback()
    try:
        yield server
    finally:
        server.close()


@pytest.mark.parametrize(("transport", "api", "stream"), CASES)
async def test_an_undecodable_2xx_body_fails_like_a_broken_connection_and_is_retried(
    loop: Loopback, transport: str, api: str, stream: bool
) -> None:
    sc = SCENARIOS[(api, stream)]()
    model = Recording(make_model(transport, api, loop.root, sc.model))
    loop.script(Reply(NOT_GZIP, headers=GZIP, sse=stream), sc.first, sc.second)

    outcome = await runner_for(model, sc, stream).run("Please help.", tenant="acme", subject="u")

    assert outcome.state == "COMPLETED", (outcome.reason, outcome.history)
    assert len(loop.seen) == 3
    assert len(model.turns) == 3, "the client returned a turn for the undecodable body, it did not raise"
    first = model.turns[0]
    assert first.failure is not None and first.failure.retryable
    if stream:
        assert first.finish is Finish.TRUNCATED and first.reason == "stream_interrupted"
    else:
        assert first.finish is Finish.API_FAILURE and first.failure.kind == "connection"


@pytest.mark.parametrize(("transport", "api", "stream"), CASES)
async def test_an_undecodable_error_body_is_classified_without_it(
    loop: Loopback, transport: str, api: str, stream: bool
) -> None:
    sc = SCENARIOS[(api, stream)]()
    model = Recording(make_model(transport, api, loop.root, sc.model))
    loop.script(Reply(NOT_GZIP, status=500, headers=GZIP), sc.first, sc.second)

    outcome = await runner_for(model, sc, stream).run("Please help.", tenant="acme", subject="u")

    assert outcome.state == "COMPLETED", (outcome.reason, outcome.history)
    assert len(model.turns) == 3, "the client returned a turn for the undecodable body, it did not raise"
    first = model.turns[0]
    assert first.finish is Finish.API_FAILURE
    assert first.failure is not None and first.failure.retryable
    if isinstance(model.inner, HttpModel):  # httpx keeps the status; SDKs raise before handing it over
        assert first.failure.kind == "http" and first.failure.status == 500
    else:
        assert first.failure.kind in ("http", "connection")


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, *chunks: bytes) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


def _chat_sse(*events: object) -> bytes:
    return b"".join(
        b"data: " + (e if isinstance(e, str) else json.dumps(e)).encode() + b"\n\n" for e in events
    )


async def test_a_stream_that_turns_undecodable_mid_way_is_a_cut_stream() -> None:
    head = _chat_sse(
        {"id": "c1", "model": "gpt-x", "choices": [{"index": 0, "delta": {"content": "do"}}]},
    )
    gzip = zlib.compressobj(wbits=zlib.MAX_WBITS | 16)
    valid = gzip.compress(head) + gzip.flush(zlib.Z_SYNC_FLUSH)  # decodes on its own

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream", **GZIP}
        return httpx.Response(200, headers=headers, stream=_Chunks(valid, b"\xff" * 64))

    model = HttpModel(
        "openai-chat", base_url="http://fake", api_key=KEY, transport=httpx.MockTransport(handler)
    )
    body = {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    turn = await model.complete(body, stream=True, meta=RequestMeta("op_gz", 0, None, timeout_s=5.0))

    assert turn.finish is Finish.TRUNCATED and turn.reason == "stream_interrupted"
    assert turn.failure is not None and turn.failure.retryable


def test_transport_errors_name_the_decoding_errors_of_both_httpx_packages() -> None:
    names = {(cls.__module__.split(".")[0], cls.__name__) for cls in transport_errors()}
    assert ("httpx", "DecodingError") in names
    httpx2 = pytest.importorskip("httpx2")
    assert httpx2.DecodingError in transport_errors()
