"""The SDK clients stop reading a body at its cap, as HttpModel does (review round 17, r4 F1; D1's byte
cap, D26, D30).

The OpenAI and Anthropic SDKs read an error body whole before raising, and GeminiModel's response hook
read every body whole: a 200 MB body was read (+1.2 GB RSS). Here a server on 127.0.0.1 sends a 32 MB
body and counts what it got out before the client hung up: each client must hang up early (the server
cannot finish) and give the turn HttpModel gives for the same reply: the status alone for an error body
over ``ERROR_BODY_LIMIT`` (lowered to 64 KiB here), TRUNCATED(response_too_large) for a 2xx body over
``StreamCaps.max_body_bytes`` (64 KiB here).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from callbound.adapters.base import StreamCaps
from callbound.core.model import RequestMeta
from callbound.core.types import ModelTurn
from tests.transports.test_loopback import SCENARIOS, make_model

BODY = 32 << 20
CAP = 64 << 10
PIECE = 64 << 10


class BigBody:
    """Answers every POST with ``status`` and a JSON-looking body of ``BODY`` bytes, written in 64 KiB
    pieces; ``sent`` counts the bytes written, ``finished`` says whether all of them were."""

    def __init__(self) -> None:
        self.status = 500
        self.sent = 0
        self.finished = False
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
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(BODY))
                self.send_header("connection", "close")
                self.end_headers()
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, PIECE)
                head = b'{"error": {"message": "'
                try:
                    self.wfile.write(head)
                    outer.sent += len(head)
                    filler = b"x" * PIECE
                    while outer.sent + PIECE <= BODY:
                        self.wfile.write(filler)
                        outer.sent += PIECE
                    self.wfile.write(b"x" * (BODY - outer.sent))
                    outer.sent = BODY
                    self.wfile.flush()
                    outer.finished = True
                except OSError:
                    pass  # the client hung up: what we wanted

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.root = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.daemon = True
        self.thread.start()

    def reset(self, status: int) -> None:
        self.status, self.sent, self.finished, self.requests = status, 0, False, 0

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def big() -> Iterator[BigBody]:
    server = BigBody()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(autouse=True)
def small_error_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("callbound.transports.bodycap.ERROR_BODY_LIMIT", CAP)
    monkeypatch.setattr("callbound.transports.http.ERROR_BODY_LIMIT", CAP)


async def _one_turn(transport: str, api: str, root: str) -> ModelTurn:
    sc = SCENARIOS[(api, False)]()
    model = make_model(transport, api, root, sc.model, caps=StreamCaps(max_body_bytes=CAP))
    adapter = model.adapter
    body = adapter.build_request(
        items=adapter.initial_items("hi", []),
        tools=[],
        settings={"model": sc.model},
        instructions=None,
        stream=False,
    )
    turn: ModelTurn = await model.complete(body, stream=False, meta=RequestMeta("op", 0, None, timeout_s=60))
    return turn


SDK_APIS = ["openai-responses", "openai-chat", "anthropic-messages", "gemini-generate"]


@pytest.mark.parametrize("api", SDK_APIS)
async def test_an_sdk_client_stops_reading_an_error_body_at_the_limit(big: BigBody, api: str) -> None:
    big.reset(500)
    turn = await _one_turn("sdk", api, big.root)
    assert big.requests == 1
    assert not big.finished and big.sent < BODY // 2, big.sent  # hung up long before the end
    assert turn.failure is not None and (turn.failure.kind, turn.failure.status) == ("http", 500)

    big.reset(500)
    expected = await _one_turn("http", api, big.root)
    assert not big.finished
    assert (turn.finish, turn.reason, turn.failure) == (expected.finish, expected.reason, expected.failure)


async def test_gemini_sdk_stops_reading_a_2xx_body_at_the_body_cap(big: BigBody) -> None:
    big.reset(200)
    turn = await _one_turn("sdk", "gemini-generate", big.root)
    assert big.requests == 1
    assert not big.finished and big.sent < BODY // 2, big.sent
    assert turn.failure is not None
    assert (turn.failure.kind, turn.failure.error_code) == ("byte_cap", "max_body_bytes")
    assert (turn.finish.value, turn.reason) == ("TRUNCATED", "response_too_large")

    big.reset(200)
    expected = await _one_turn("http", "gemini-generate", big.root)
    assert (turn.finish, turn.reason, turn.failure) == (expected.finish, expected.reason, expected.failure)


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages"])
async def test_a_2xx_body_over_the_cap_is_not_read_by_the_stainless_clients(big: BigBody, api: str) -> None:
    big.reset(200)
    turn = await _one_turn("sdk", api, big.root)
    assert not big.finished and big.sent < BODY // 2, big.sent
    assert (turn.finish.value, turn.reason) == ("TRUNCATED", "response_too_large")
