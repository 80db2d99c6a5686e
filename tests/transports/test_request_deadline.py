"""The remaining active deadline bounds a whole request, connect through the last byte (D14, D26).

Per-phase timeouts (connect, each read, write) restart with every byte read, so a server that keeps
the connection busy, with SSE comment pings before the events or a plain body trickling in a few
bytes at a time, never trips them. A local server here does exactly that for several seconds; every
transport, plain and streamed, must give up at the remaining deadline (0.5 s) and return the failure
turn a timeout maps to, never raise (D4).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

import callbound as cb
from callbound.core.ids import SequentialIds
from callbound.core.model import RequestMeta
from callbound.core.types import Finish
from callbound.transports.http import HttpModel
from tests.transports.test_loopback import CASES, KEY, SCENARIOS, Recording, make_model, registry

DEADLINE_S = 0.5
TRICKLE_S = 10.0  # how long the server keeps sending before its answer is complete
# What a request may take past its deadline: a loaded two-core machine (pytest -n 2 beside other
# work) took more than 1 s to set up an SDK client's first request. Still far below TRICKLE_S, so a
# transport that waits for the whole answer instead of the deadline fails.
SLACK_S = 3.0
PIECES = 40


class Trickle:
    """Answers every POST with ``body`` (status 200), spread over ``trickle_s`` seconds: an event
    stream gets ``: ping`` comments first and then the whole body; a plain body comes a few bytes at a
    time. The connection is never idle long enough for a per-phase timeout."""

    def __init__(self) -> None:
        self.body = b""
        self.sse = False
        self.trickle_s = TRICKLE_S
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
                self.send_response(200)
                self.send_header("content-type", "text/event-stream" if outer.sse else "application/json")
                self.send_header("transfer-encoding", "chunked")
                self.send_header("connection", "close")
                self.end_headers()
                body = outer.body
                if outer.sse:
                    pieces = [b": ping\n\n"] * PIECES + [body]
                else:
                    size = max(1, -(-len(body) // PIECES))
                    pieces = [body[i : i + size] for i in range(0, len(body), size)]
                try:
                    for piece in pieces:
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                        self.wfile.flush()
                        time.sleep(outer.trickle_s / len(pieces))
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except OSError:  # the client gave up
                    pass

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
def trickle() -> Iterator[Trickle]:
    server = Trickle()
    try:
        yield server
    finally:
        server.close()


@pytest.mark.parametrize(("transport", "api", "stream"), CASES)
async def test_a_trickling_response_is_cut_at_the_remaining_deadline(
    trickle: Trickle, transport: str, api: str, stream: bool
) -> None:
    sc = SCENARIOS[(api, stream)]()
    model = make_model(transport, api, trickle.root, sc.model)
    trickle.body, trickle.sse = sc.first.body, stream
    body = model.adapter.build_request(
        items=model.adapter.initial_items("hi", []),
        tools=[],
        settings={"model": sc.model},
        instructions=None,
        stream=stream,
    )

    started = time.monotonic()
    turn = await model.complete(body, stream=stream, meta=RequestMeta("op_d", 0, None, timeout_s=DEADLINE_S))
    elapsed = time.monotonic() - started

    assert elapsed < DEADLINE_S + SLACK_S, f"the request took {elapsed:.1f}s with a {DEADLINE_S}s deadline"
    assert turn.finish is Finish.API_FAILURE
    assert turn.failure is not None and turn.failure.kind == "timeout" and turn.failure.retryable
    assert trickle.requests == 1, "no SDK retry after the deadline"


async def test_the_runner_stops_a_trickling_stream_at_its_deadline(trickle: Trickle) -> None:
    sc = SCENARIOS[("anthropic-messages", True)]()
    trickle.body, trickle.sse = sc.first.body, True
    model = Recording(HttpModel("anthropic-messages", base_url=trickle.root, api_key=KEY, model=sc.model))
    runner = cb.Runner(
        model=model,
        registry=registry(sc.tools),
        budgets=cb.Budgets(deadline_s=DEADLINE_S),
        settings={"model": sc.model, "stream": True},
        ids=SequentialIds(),
    )

    started = time.monotonic()
    outcome = await runner.run("Please help.", tenant="acme", subject="u")
    elapsed = time.monotonic() - started

    assert elapsed < DEADLINE_S + SLACK_S, f"the operation took {elapsed:.1f}s with a {DEADLINE_S}s deadline"
    assert outcome.state != "COMPLETED", outcome.history
    assert model.turns[0].failure is not None and model.turns[0].failure.kind == "timeout"


async def test_per_phase_timeouts_still_apply_within_a_longer_deadline() -> None:
    """A configured ``timeout_s`` still caps each phase, far inside the remaining deadline."""
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(dict(request.extensions["timeout"]))
        return httpx.Response(200, json={"error": "unused"})

    model = HttpModel(
        "openai-chat",
        base_url="http://fake",
        api_key=KEY,
        timeout_s=0.25,
        transport=httpx.MockTransport(handler),
    )
    body = {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]}
    await model.complete(body, stream=False, meta=RequestMeta("op_p", 0, None, timeout_s=30.0))
    assert seen == [{"connect": 0.25, "read": 0.25, "write": 0.25, "pool": 0.25}]


async def test_a_trickle_that_ends_within_the_deadline_completes(trickle: Trickle) -> None:
    sc = SCENARIOS[("openai-chat", True)]()
    trickle.body, trickle.sse, trickle.trickle_s = sc.first.body, True, 0.3
    model = HttpModel("openai-chat", base_url=trickle.root, api_key=KEY, model=sc.model)
    body = model.adapter.build_request(
        items=model.adapter.initial_items("hi", []),
        tools=[],
        settings={"model": sc.model},
        instructions=None,
        stream=True,
    )
    turn = await model.complete(body, stream=True, meta=RequestMeta("op_ok", 0, None, timeout_s=5.0))
    assert turn.failure is None and turn.finish is Finish.TOOL_PROPOSALS
