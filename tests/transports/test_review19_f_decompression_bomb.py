"""A body sent with ``Content-Encoding: gzip`` is held to its cap in DECODED bytes, on every transport
(review round 19, f F1; D1's byte cap, D26, D30).

The SDK clients' response hook counted a body's bytes as they arrived, before gzip was undone, so a
1 MiB gzip error body (under ``ERROR_BODY_LIMIT``) that expands to 1 GiB was read whole by the SDK
(``response.content``), and GeminiModel's hook read a 2xx one the same way; HttpModel decoded a whole
received chunk at once (64 KiB of gzip is 64 MiB). Here a server on 127.0.0.1 sends about 64 KiB of
gzip that expands to 64 MiB, and the test measures the Python memory the request peaked at
(``tracemalloc``): it must stay near the cap, and the turn must be the one the docs give an over-large
body: the status alone for an error body (docs/reference.md), TRUNCATED(response_too_large) for a 2xx
body or stream (docs/stop-reasons.md), never an exception.
"""

from __future__ import annotations

import gzip
import threading
import tracemalloc
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from callbound.adapters.base import StreamCaps
from callbound.core.model import RequestMeta
from callbound.core.types import ModelTurn
from tests.transports.test_loopback import SCENARIOS, make_model

EXPANDED = 64 << 20
CAP = 64 << 10
PEAK = 8 << 20  # what a request may hold at its peak: well under the 64 MiB the bomb expands to


def _bomb(head: bytes, encoding: str = "gzip") -> bytes:
    """``head`` and then ``x`` up to ``EXPANDED`` bytes, compressed (about 64 KiB)."""
    if encoding == "gzip":
        packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    else:
        packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS)
    parts = [packer.compress(head)]
    filler = b"x" * (1 << 20)
    for _ in range(EXPANDED >> 20):
        parts.append(packer.compress(filler))
    parts.append(packer.flush())
    return b"".join(parts)


GZIP_ERROR = _bomb(b'{"error": {"type": "server_error", "message": "')
GZIP_PLAIN = _bomb(b'{"id": "x", "text": "')
GZIP_STREAM = _bomb(b'data: {"type": "x", "text": "')


class Bomb:
    """Answers every POST with ``status``, ``content-encoding`` and ``body``."""

    def __init__(self) -> None:
        self.status = 500
        self.body = GZIP_ERROR
        self.encoding = "gzip"
        self.content_type = "application/json"
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                outer.requests += 1
                self.close_connection = True
                self.send_response(outer.status)
                self.send_header("content-type", outer.content_type)
                self.send_header("content-encoding", outer.encoding)
                self.send_header("content-length", str(len(outer.body)))
                self.send_header("connection", "close")
                self.end_headers()
                try:
                    self.wfile.write(outer.body)
                    self.wfile.flush()
                except OSError:
                    pass  # the client hung up

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.root = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.daemon = True
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def bomb() -> Iterator[Bomb]:
    server = Bomb()
    try:
        yield server
    finally:
        server.close()


async def _turn(transport: str, api: str, root: str, *, stream: bool) -> tuple[ModelTurn, int]:
    """One request, and the most Python memory it held at once (bytes)."""
    sc = SCENARIOS[(api, stream)]()
    model = make_model(transport, api, root, sc.model, caps=StreamCaps(max_body_bytes=CAP))
    adapter = model.adapter
    body = adapter.build_request(
        items=adapter.initial_items("hi", []),
        tools=[],
        settings={"model": sc.model},
        instructions=None,
        stream=stream,
    )
    tracemalloc.start()
    try:
        turn: ModelTurn = await model.complete(
            body, stream=stream, meta=RequestMeta("op", 0, None, timeout_s=60)
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return turn, peak


def test_the_bombs_expand_as_meant() -> None:
    assert len(GZIP_ERROR) < 96 << 10
    assert len(gzip.decompress(GZIP_ERROR)) > EXPANDED


ALL = [
    ("http", "openai-responses"),
    ("http", "openai-chat"),
    ("http", "anthropic-messages"),
    ("http", "gemini-generate"),
    ("http", "gemini-interactions"),
    ("sdk", "openai-responses"),
    ("sdk", "openai-chat"),
    ("sdk", "anthropic-messages"),
    ("sdk", "gemini-generate"),
]


@pytest.mark.parametrize(("transport", "api"), ALL)
async def test_a_gzip_error_body_is_capped_decoded(bomb: Bomb, transport: str, api: str) -> None:
    bomb.status, bomb.body = 500, GZIP_ERROR
    turn, peak = await _turn(transport, api, bomb.root, stream=False)
    assert bomb.requests == 1
    assert peak < PEAK, peak
    # over ERROR_BODY_LIMIT the body is dropped: the failure is its status (500: retried) alone
    assert turn.failure is not None and (turn.failure.kind, turn.failure.status) == ("http", 500)
    assert turn.failure.retryable is True
    assert "x" * 100 not in str(turn.failure)


@pytest.mark.parametrize(("transport", "api"), ALL)
async def test_a_gzip_2xx_body_over_the_cap_is_truncated(bomb: Bomb, transport: str, api: str) -> None:
    bomb.status, bomb.body = 200, GZIP_PLAIN
    turn, peak = await _turn(transport, api, bomb.root, stream=False)
    assert peak < PEAK, peak
    assert turn.failure is not None
    assert (turn.failure.kind, turn.failure.error_code) == ("byte_cap", "max_body_bytes")
    assert (turn.finish.value, turn.reason) == ("TRUNCATED", "response_too_large")


def test_a_deflate_body_counts_decoded_too() -> None:
    """The hook's own decoding matches httpx's: zlib-framed and raw deflate alike."""
    from callbound.transports.bodycap import _undo, _Zlib

    data = b"y" * (3 << 20)
    framed = zlib.compress(data, 9)
    raw = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    bare = raw.compress(data) + raw.flush()
    for packed in (framed, bare):
        sizes = [len(piece) for piece in _undo([_Zlib(gzip=False)], 0, packed)]
        assert sum(sizes) == len(data) and max(sizes) <= 1 << 16
    # gzip inside gzip (content-encoding: gzip, gzip) is undone twice
    twice = gzip.compress(gzip.compress(data))
    assert sum(len(p) for p in _undo([_Zlib(gzip=True), _Zlib(gzip=True)], 0, twice)) == len(data)


STREAMS = [
    ("http", "openai-responses"),
    ("http", "anthropic-messages"),
    ("http", "gemini-generate"),
    ("sdk", "openai-chat"),
    ("sdk", "anthropic-messages"),
]


@pytest.mark.parametrize(("transport", "api"), STREAMS)
async def test_a_gzip_stream_over_the_cap_is_truncated(bomb: Bomb, transport: str, api: str) -> None:
    bomb.status, bomb.body, bomb.content_type = 200, GZIP_STREAM, "text/event-stream"
    turn, peak = await _turn(transport, api, bomb.root, stream=True)
    assert peak < PEAK, peak
    assert turn.failure is not None
    assert turn.failure.error_code == "max_body_bytes"
    assert (turn.finish.value, turn.reason) == ("TRUNCATED", "response_too_large")


def test_an_encoding_the_library_decodes_counts_by_its_decoder_either_way() -> None:
    """br or zstd are undone by the library's own decoder: httpx's returns bytes, httpx2's yields
    pieces; both count (an iterator was taken for bytes, and the count fell back to raw bytes)."""
    from callbound.transports.bodycap import _undo, _Whole

    class Whole:
        def decode(self, data: bytes) -> bytes:
            return data * 4

    class Pieces:
        def decode(self, data: bytes) -> Iterator[bytes]:
            yield data * 2
            yield data * 2

    for decoder in (Whole(), Pieces()):
        assert sum(len(p) for p in _undo([_Whole(decoder)], 0, b"abc")) == 12


# ---- what fits the cap reads as before --------------------------------------------------------------


@pytest.mark.parametrize(("transport", "api"), ALL)
async def test_a_small_gzip_error_body_keeps_the_provider_error(bomb: Bomb, transport: str, api: str) -> None:
    from tests.transports.test_loopback import bad_request

    body, etype, code = bad_request(api)
    bomb.status, bomb.body = 400, gzip.compress(body)
    turn, _ = await _turn(transport, api, bomb.root, stream=False)
    failure = turn.failure
    assert failure is not None and (failure.status, failure.retryable) == (400, False)
    for value in (etype, code):
        if value is not None:
            assert value in {failure.error_type, failure.error_code}, (value, failure)


@pytest.mark.parametrize(("transport", "api"), ALL)
@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_compressed_2xx_body_under_the_cap_is_the_same_turn(
    bomb: Bomb, transport: str, api: str, encoding: str
) -> None:
    stream = False
    plain = SCENARIOS[(api, stream)]().first.body
    bomb.status, bomb.encoding = 200, "identity"
    bomb.body = plain
    expected, _ = await _turn(transport, api, bomb.root, stream=stream)
    bomb.encoding = encoding
    bomb.body = gzip.compress(plain) if encoding == "gzip" else zlib.compress(plain)
    turn, _ = await _turn(transport, api, bomb.root, stream=stream)
    assert expected.failure is None and turn.failure is None
    assert (turn.finish, turn.calls, turn.raw_sha256) == (
        expected.finish,
        expected.calls,
        expected.raw_sha256,
    )


@pytest.mark.parametrize(("transport", "api"), STREAMS)
async def test_a_gzip_stream_under_the_cap_is_the_same_turn(bomb: Bomb, transport: str, api: str) -> None:
    events = SCENARIOS[(api, True)]().first.body
    bomb.status, bomb.encoding, bomb.content_type = 200, "identity", "text/event-stream"
    bomb.body = events
    expected, _ = await _turn(transport, api, bomb.root, stream=True)
    bomb.encoding, bomb.body = "gzip", gzip.compress(events)
    turn, _ = await _turn(transport, api, bomb.root, stream=True)
    assert expected.failure is None and turn.failure is None
    assert (turn.finish, turn.calls, turn.raw_sha256) == (
        expected.finish,
        expected.calls,
        expected.raw_sha256,
    )
