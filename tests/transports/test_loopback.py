"""Live transports against a loopback server, without internet.

A stdlib HTTP server on 127.0.0.1 (random port) replays recorded responses, plain JSON and SSE
streams, one per request in order, and records every request. Each official SDK (openai, anthropic,
google-genai) and raw httpx are pointed at it through their base URL, and callbound's Runner drives a
whole tool loop to COMPLETED. The tests check what reached the server: exactly the body the adapter
built, on the right path with the right auth headers, the tool results answering the right call ids
in request 2, and one request per Runner attempt (SDK retries are off, D26). Failures: HTTP 429 with
Retry-After then success, a 400 that ends FAILED keeping the provider's error type and code, and a
stream cut mid-way that the Runner retries. A ``FakeClock`` makes every backoff instant.

Scripts come from the shared recordings (``tests/recordings.py``) where a recording fits a tool call
followed by a final answer, and are synthetic otherwise (named ``synthetic`` below).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

import callbound as cb
from callbound.adapters.base import StreamCaps
from callbound.core.ids import SequentialIds
from callbound.core.model import ProgressCallback, RequestMeta
from callbound.core.types import ModelTurn
from callbound.testing import FakeClock
from tests.recordings import load_cassette, read_bytes, response_body

KEY = "test-key-not-secret"

# ---- the loopback server ---------------------------------------------------------------------------


@dataclass
class Reply:
    """One scripted answer. ``sse`` sends ``body`` as a chunked event stream in small pieces;
    ``cut_after`` drops the connection after that many bytes of it (no terminating chunk);
    ``delay_s`` waits before answering."""

    body: bytes
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    sse: bool = False
    cut_after: int | None = None
    delay_s: float = 0.0


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that stops reading on purpose (a byte cap, a cut stream) drops the connection.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class Loopback:
    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        loop = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                with loop.lock:
                    loop.seen.append(
                        Seen("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    reply = loop.replies.pop(0) if loop.replies else None
                if reply is None:
                    reply = Reply(b'{"error": {"message": "loopback script exhausted"}}', status=599)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                self.close_connection = True
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.send_header("connection", "close")
                if not reply.sse:
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                    return
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                data = reply.body if reply.cut_after is None else reply.body[: reply.cut_after]
                for i in range(0, len(data), 97):  # odd piece size: events split across chunks
                    piece = data[i : i + 97]
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    self.wfile.flush()
                if reply.cut_after is None:
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)  # the connection drops mid-stream

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.root = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.daemon = True
        self.thread.start()

    def script(self, *replies: Reply) -> None:
        with self.lock:
            self.replies = list(replies)
            self.seen = []

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server() -> Iterator[Loopback]:
    loop = Loopback()
    try:
        yield loop
    finally:
        loop.close()


# ---- tools -----------------------------------------------------------------------------------------


def _params(cls_name: str, fields: dict[str, type]) -> type[BaseModel]:
    namespace: dict[str, Any] = {"__annotations__": fields, "model_config": ConfigDict(extra="forbid")}
    return type(cls_name, (BaseModel,), namespace)


TOOLS: dict[str, type[BaseModel]] = {
    "get_capital": _params("GetCapital", {"country": str}),
    "retrieve_entity_info": _params("RetrieveEntityInfo", {"name": str}),
    "get_weather": _params("GetWeatherSnake", {"location": str}),
    "weather": _params("Weather", {"location": str}),
    "getWeather": _params("GetWeatherCamel", {"location": str}),
    "get_country": _params("GetCountry", {}),
    "get_order": _params("GetOrder", {"order_id": str}),
}


def registry(names: list[str]) -> cb.Registry:
    def handler(args: BaseModel, ctx: cb.CallContext) -> dict[str, Any]:
        return {"args": args.model_dump(), "answer": "ok"}

    return cb.Registry(
        [
            cb.ToolSpec(
                name=n,
                description=f"test tool {n}",
                params=TOOLS[n],
                handler=handler,
                schema_version=f"{n}-v1",
                risk="read",
                timeout_ms=2_000,
            )
            for n in names
        ]
    )


# ---- scripts: (first, second) replies for a tool call then a final answer ------------------------


def _sse(events: list[Any], *, named: bool = True, crlf: bool = False) -> bytes:
    end = "\r\n" if crlf else "\n"
    out = []
    for ev in events:
        if ev == "[DONE]":
            out.append(f"data: [DONE]{end}{end}")
            continue
        name = ev.get("type") or ev.get("event_type")
        head = f"event: {name}{end}" if named and name else ""
        out.append(f"{head}data: {json.dumps(ev, separators=(',', ':'))}{end}{end}")
    return "".join(out).encode()


def _lines_to_sse(raw: bytes, *, named: bool = False) -> bytes:
    """A ``.chunks.txt`` recording (one JSON payload per line) framed as SSE again."""
    events = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
    return _sse(events, named=named)


def _json(body: Any) -> bytes:
    return json.dumps(body).encode()


@dataclass
class Scenario:
    api: str
    model: str
    tools: list[str]
    first: Reply
    second: Reply
    call_ids: list[str]  # the ids request 2 must answer (for Gemini without ids: the call names)
    final_text: str
    source: str


def responses_plain() -> Scenario:
    cassette = load_cassette(
        "openai-responses/pydantic-ai__test_openai_responses_model_simple_response_with_tool_call.yaml"
    )
    first, second = (_json(response_body(i)) for i in cassette)
    return Scenario(
        "openai-responses",
        "gpt-4o",
        ["get_capital"],
        Reply(first),
        Reply(second),
        ["call_YfwRsW8sUxDKipwyhWTzOXCA"],
        "Potato City",
        "recording",
    )


def responses_stream() -> Scenario:
    cassette = load_cassette("openai-responses/pydantic-ai__test_openai_responses_stream.yaml")
    first, second = (str(response_body(i)).encode() for i in cassette)
    return Scenario(
        "openai-responses",
        "gpt-4o",
        ["get_capital"],
        Reply(first, sse=True),
        Reply(second, sse=True),
        ["call_kL0PCQV7M2WMoVX8V8OtYSAL"],
        "Paris",
        "recording",
    )


_CHAT_ARGS = json.dumps({"order_id": "A1"})


def chat_plain() -> Scenario:  # synthetic
    call = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_chat_1",
                            "type": "function",
                            "function": {"name": "get_order", "arguments": _CHAT_ARGS},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    text = {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "created": 2,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Order A1 shipped."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35},
    }
    return Scenario(
        "openai-chat",
        "gpt-test",
        ["get_order"],
        Reply(_json(call)),
        Reply(_json(text)),
        ["call_chat_1"],
        "Order A1 shipped.",
        "synthetic",
    )


def chat_stream() -> Scenario:  # synthetic
    def chunk(n: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-s{n}",
            "object": "chat.completion.chunk",
            "created": n,
            "model": "gpt-test",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def usage(n: int) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-s{n}",
            "object": "chat.completion.chunk",
            "created": n,
            "model": "gpt-test",
            "choices": [],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    head = {
        "index": 0,
        "id": "call_chat_s1",
        "type": "function",
        "function": {"name": "get_order", "arguments": ""},
    }
    first: list[Any] = [chunk(1, {"role": "assistant", "content": None, "tool_calls": [head]})]
    for i in range(0, len(_CHAT_ARGS), 5):
        piece = {"index": 0, "function": {"arguments": _CHAT_ARGS[i : i + 5]}}
        first.append(chunk(1, {"tool_calls": [piece]}))
    first += [chunk(1, {}, "tool_calls"), usage(1), "[DONE]"]
    second: list[Any] = [chunk(2, {"role": "assistant", "content": ""})]
    second += [chunk(2, {"content": t}) for t in ("Order A1 ", "shipped.")]
    second += [chunk(2, {}, "stop"), usage(2), "[DONE]"]
    return Scenario(
        "openai-chat",
        "gpt-test",
        ["get_order"],
        Reply(_sse(first, named=False), sse=True),
        Reply(_sse(second, named=False), sse=True),
        ["call_chat_s1"],
        "Order A1 shipped.",
        "synthetic",
    )


def anthropic_plain() -> Scenario:
    cassette = load_cassette("anthropic/pydantic-ai__test_multiple_parallel_tool_calls.yaml")
    first, second = (_json(response_body(i)) for i in cassette)
    ids = [b["id"] for b in json.loads(first)["content"] if b["type"] == "tool_use"]
    return Scenario(
        "anthropic-messages",
        "claude-haiku-4-5",
        ["retrieve_entity_info"],
        Reply(first),
        Reply(second),
        ids,
        "Daisy is the youngest",
        "recording",
    )


def anthropic_stream() -> Scenario:
    first = read_bytes("anthropic/anthropic-sdk-python__tool_use_response.txt")
    message: dict[str, Any] = {
        "id": "msg_final_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 400, "output_tokens": 1},
    }
    second = _sse(  # synthetic final answer
        [
            {"type": "message_start", "message": message},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "ping"},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "It is sunny "},
            },
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "in Paris."}},
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 9},
            },
            {"type": "message_stop"},
        ]
    )
    return Scenario(
        "anthropic-messages",
        "claude-sonnet-4-20250514",
        ["get_weather"],
        Reply(first, sse=True),
        Reply(second, sse=True),
        ["toolu_01NRLabsLyVHZPKxbKvkfSMn"],
        "It is sunny in Paris.",
        "recording + synthetic final",
    )


def _gemini_text(text: str) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 7, "totalTokenCount": 47},
        "modelVersion": "gemini-test",
        "responseId": "final-gemini-1",
    }


def gemini_plain() -> Scenario:
    first = read_bytes("gemini/ai__google-tool-call.json")
    return Scenario(
        "gemini-generate",
        "gemini-3-pro-preview",
        ["weather"],
        Reply(first),
        Reply(_json(_gemini_text("It is sunny in San Francisco."))),  # synthetic final answer
        ["weather"],
        "It is sunny in San Francisco.",
        "recording + synthetic final",
    )


def gemini_stream() -> Scenario:
    cassette = load_cassette("gemini/pydantic-ai__test_google_streaming_tool_call_thought_signature.yaml")
    first, second = (str(response_body(i)).encode() for i in cassette)
    return Scenario(
        "gemini-generate",
        "gemini-3-pro-preview",
        ["get_country"],
        Reply(first, sse=True),
        Reply(second, sse=True),
        ["get_country"],
        "The capital of Mexico",
        "recording",
    )


def interactions_plain() -> Scenario:
    first = read_bytes("gemini-interactions/ai__steps__tool-call-step1.json")
    second = read_bytes("gemini-interactions/ai__steps__tool-call-step2.json")
    return Scenario(
        "gemini-interactions",
        "gemini-2.5-flash",
        ["getWeather"],
        Reply(first),
        Reply(second),
        ["zggxzq8r"],
        "sunny with a temperature of 8 degrees",
        "recording",
    )


def interactions_stream() -> Scenario:
    iid = "v1_synthetic_interaction_1"
    args = json.dumps({"location": "San Francisco"})
    first = _sse(  # synthetic: a streamed function_call step with arguments_delta fragments
        [
            {
                "event_type": "interaction.created",
                "interaction": {"id": iid, "status": "in_progress", "object": "interaction", "model": "m"},
            },
            {"event_type": "interaction.status_update", "interaction_id": iid, "status": "in_progress"},
            {
                "event_type": "step.start",
                "index": 0,
                "step": {"type": "function_call", "id": "call_int_s1", "name": "getWeather", "arguments": {}},
            },
            {
                "event_type": "step.delta",
                "index": 0,
                "delta": {"type": "arguments_delta", "arguments": args[:12]},
            },
            {
                "event_type": "step.delta",
                "index": 0,
                "delta": {"type": "arguments_delta", "arguments": args[12:]},
            },
            {"event_type": "step.stop", "index": 0},
            {
                "event_type": "interaction.completed",
                "interaction": {
                    "id": iid,
                    "status": "requires_action",
                    "object": "interaction",
                    "model": "m",
                    "usage": {"total_input_tokens": 50, "total_output_tokens": 10, "total_tokens": 60},
                },
            },
        ]
    )
    second = _lines_to_sse(
        read_bytes("gemini-interactions/ai__steps__tool-call-step2.chunks.txt"), named=True
    )
    return Scenario(
        "gemini-interactions",
        "gemini-2.5-flash",
        ["getWeather"],
        Reply(first, sse=True),
        Reply(second, sse=True),
        ["call_int_s1"],
        "sunny with a temperature of 27 degrees",
        "synthetic + recording final",
    )


SCENARIOS: dict[tuple[str, bool], Callable[[], Scenario]] = {
    ("openai-responses", False): responses_plain,
    ("openai-responses", True): responses_stream,
    ("openai-chat", False): chat_plain,
    ("openai-chat", True): chat_stream,
    ("anthropic-messages", False): anthropic_plain,
    ("anthropic-messages", True): anthropic_stream,
    ("gemini-generate", False): gemini_plain,
    ("gemini-generate", True): gemini_stream,
    ("gemini-interactions", False): interactions_plain,
    ("gemini-interactions", True): interactions_stream,
}

# ---- clients -----------------------------------------------------------------------------------


def make_model(transport: str, api: str, root: str, model: str, **kw: Any) -> Any:
    if transport == "http":
        from callbound.transports.http import HttpModel

        return HttpModel(api, base_url=root, api_key=KEY, model=model, **kw)
    if api.startswith("openai-"):
        pytest.importorskip("openai", reason="the openai SDK (extra 'openai') is not installed")
        from callbound.transports.openai import OpenAIModel

        return OpenAIModel(api, base_url=f"{root}/v1", api_key=KEY, model=model, **kw)
    if api == "anthropic-messages":
        pytest.importorskip("anthropic", reason="the anthropic SDK (extra 'anthropic') is not installed")
        from callbound.transports.anthropic import AnthropicModel

        return AnthropicModel(api, base_url=root, api_key=KEY, model=model, **kw)
    pytest.importorskip("google.genai", reason="google-genai (extra 'gemini') is not installed")
    from callbound.transports.gemini import GeminiModel

    return GeminiModel(api, base_url=root, api_key=KEY, model=model, **kw)


class Recording:
    """Wraps a live client: records the body the adapter built for every request and checks it
    against the provider's rules, like ScriptedModel does (D24)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.api: str = inner.api
        self.bodies: list[dict[str, Any]] = []
        self.turns: list[ModelTurn] = []

    @property
    def adapter(self) -> Any:
        return self.inner.adapter

    async def complete(
        self,
        body: dict[str, Any],
        *,
        stream: bool,
        meta: RequestMeta,
        on_progress: ProgressCallback | None = None,
    ) -> ModelTurn:
        self.bodies.append(json.loads(json.dumps(body)))
        self.adapter.check_request(body, meta.previous)
        turn: ModelTurn = await self.inner.complete(body, stream=stream, meta=meta, on_progress=on_progress)
        self.turns.append(turn)
        return turn


def runner_for(model: Any, sc: Scenario, stream: bool, clock: FakeClock | None = None) -> cb.Runner:
    return cb.Runner(
        model=model,
        registry=registry(sc.tools),
        clock=clock or FakeClock(),
        settings={"model": sc.model, "stream": stream},
        ids=SequentialIds(),
    )


PATHS = {
    "openai-responses": "/v1/responses",
    "openai-chat": "/v1/chat/completions",
    "anthropic-messages": "/v1/messages",
    "gemini-interactions": "/v1beta/interactions",
}


def expected_path(api: str, model: str, stream: bool) -> str:
    if api == "gemini-generate":
        return f"/v1beta/models/{model}:" + ("streamGenerateContent?alt=sse" if stream else "generateContent")
    return PATHS[api]


def answered_ids(api: str, body: dict[str, Any]) -> list[str]:
    """The call ids (Gemini: names of calls without ids) that a request's tool results answer."""
    if api == "openai-responses":
        return [i["call_id"] for i in body["input"] if i.get("type") == "function_call_output"]
    if api == "openai-chat":
        return [m["tool_call_id"] for m in body["messages"] if m.get("role") == "tool"]
    if api == "anthropic-messages":
        return [
            b["tool_use_id"]
            for m in body["messages"]
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
    if api == "gemini-generate":
        return [
            p["functionResponse"].get("id") or p["functionResponse"]["name"]
            for c in body["contents"]
            for p in c.get("parts", [])
            if "functionResponse" in p
        ]
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "function_result":
                found.append(node["call_id"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(body["input"])
    return found


def check_auth(api: str, seen: Seen) -> None:
    h = seen.headers
    if api.startswith("openai-"):
        assert h["authorization"] == f"Bearer {KEY}"
    elif api == "anthropic-messages":
        # both transports send HttpModel's headers (review round 17, r4 F3: anthropic 2.x sent the key
        # as a bearer token, and its own API version)
        assert h.get("x-api-key") == KEY and "authorization" not in h
        assert h["anthropic-version"] == "2023-06-01"
    else:
        assert h["x-goog-api-key"] == KEY


CASES = [
    pytest.param("sdk", "openai-responses", False, id="openai-sdk-responses-plain"),
    pytest.param("sdk", "openai-responses", True, id="openai-sdk-responses-stream"),
    pytest.param("sdk", "openai-chat", False, id="openai-sdk-chat-plain"),
    pytest.param("sdk", "openai-chat", True, id="openai-sdk-chat-stream"),
    pytest.param("sdk", "anthropic-messages", False, id="anthropic-sdk-plain"),
    pytest.param("sdk", "anthropic-messages", True, id="anthropic-sdk-stream"),
    pytest.param("sdk", "gemini-generate", False, id="genai-sdk-plain"),
    pytest.param("sdk", "gemini-generate", True, id="genai-stream-over-httpx"),
    *[
        pytest.param("http", api, stream, id=f"httpx-{api}-{'stream' if stream else 'plain'}")
        for api, stream in SCENARIOS
    ],
]


@pytest.mark.parametrize(("transport", "api", "stream"), CASES)
async def test_whole_tool_loop_completes(server: Loopback, transport: str, api: str, stream: bool) -> None:
    sc = SCENARIOS[(api, stream)]()
    model = Recording(make_model(transport, api, server.root, sc.model))
    server.script(sc.first, sc.second)
    progress: list[Any] = []
    runner = runner_for(model, sc, stream)
    runner.on_progress = lambda op, ev: progress.append(ev)

    outcome = await runner.run("Please help.", tenant="acme", subject="user-1")

    assert outcome.state == "COMPLETED", (outcome.reason, outcome.history)
    assert outcome.text is not None and sc.final_text in outcome.text
    assert len(server.seen) == 2, "one request per model turn: no SDK retries, no extra calls"
    for seen, built in zip(server.seen, model.bodies, strict=True):
        assert seen.path == expected_path(api, sc.model, stream)
        received = seen.json()
        if (transport, api, stream) == ("sdk", "gemini-generate", False) and "generationConfig" not in built:
            # google-genai always adds an empty generationConfig; its only change to the body.
            assert received.pop("generationConfig") == {}
        assert received == built, "the server must receive exactly the body the adapter built"
        check_auth(api, seen)
    assert answered_ids(api, server.seen[1].json()) == sc.call_ids
    assert "RETRY" not in [t.state for t in outcome.history]
    first = model.turns[0]
    assert first.finish.value == "TOOL_PROPOSALS"
    assert first.provenance.sdk_version is not None
    expected_client = {
        ("sdk", "openai"): "openai/",
        ("sdk", "anthropic"): "anthropic/",
        ("sdk", "gemini"): "google-genai/" if not stream else "httpx/",
    }.get((transport, api.split("-")[0]), "httpx/")
    assert first.provenance.sdk_version.startswith(expected_client)
    if stream and api in ("openai-responses", "openai-chat", "anthropic-messages"):
        assert progress, "streamed calls report progress while they arrive"


# ---- failures --------------------------------------------------------------------------------------

FAILURE_CLIENTS = [
    pytest.param("sdk", "openai-responses", id="openai-sdk"),
    pytest.param("sdk", "anthropic-messages", id="anthropic-sdk"),
    pytest.param("sdk", "gemini-generate", id="genai-sdk"),
    pytest.param("http", "openai-chat", id="httpx-chat"),
    pytest.param("http", "gemini-interactions", id="httpx-interactions"),
]

RATE_LIMITED: dict[str, dict[str, Any]] = {
    "openai-responses": {
        "error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}
    },
    "openai-chat": {
        "error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}
    },
    "anthropic-messages": {"type": "error", "error": {"type": "rate_limit_error", "message": "Rate limited"}},
    "gemini-generate": {
        "error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}
    },
    "gemini-interactions": {"error": {"code": "resource_exhausted", "message": "Resource exhausted"}},
}


@pytest.mark.parametrize(("transport", "api"), FAILURE_CLIENTS)
async def test_429_with_retry_after_is_retried_by_the_runner(
    server: Loopback, transport: str, api: str
) -> None:
    sc = SCENARIOS[(api, False)]()
    model = Recording(make_model(transport, api, server.root, sc.model))
    server.script(
        Reply(_json(RATE_LIMITED[api]), status=429, headers={"retry-after": "7"}), sc.first, sc.second
    )
    clock = FakeClock()

    outcome = await runner_for(model, sc, False, clock).run("Please help.", tenant="acme", subject="u")

    assert outcome.state == "COMPLETED", (outcome.reason, outcome.history)
    assert len(server.seen) == 3, "exactly one request per Runner attempt (SDK retries off)"
    assert [t.state for t in outcome.history].count("RETRY") == 1
    assert any(s >= 7 for s in clock.slept), f"Retry-After honoured on the fake clock: {clock.slept}"
    assert model.turns[0].failure is not None and model.turns[0].failure.status == 429
    assert server.seen[0].json() == server.seen[1].json(), "the retry sends the same request"


BAD_REQUEST: dict[str, dict[str, Any]] = {
    "openai-chat": {
        "error": {
            "message": "Unsupported value: 'messages[0].role' does not support 'developer'.",
            "type": "invalid_request_error",
            "param": "messages[0].role",
            "code": "unsupported_value",
        }
    },
    "gemini-generate": {
        "error": {"code": 400, "message": "Invalid JSON payload received.", "status": "INVALID_ARGUMENT"}
    },
    "gemini-interactions": {"error": {"code": "invalid_request", "message": "Invalid request."}},
}


def bad_request(api: str) -> tuple[bytes, str | None, str | None]:
    """(body, expected error type, expected error code)."""
    if api == "openai-responses":
        cassette = load_cassette("openai-responses/pydantic-ai__test_openai_responses_model_http_error.yaml")
        return _json(response_body(cassette[0])), "invalid_request_error", "decimal_below_min_value"
    if api == "anthropic-messages":
        cassette = load_cassette(
            "anthropic/pydantic-ai__test_anthropic_explicit_effort_xhigh_unsupported_model_errors.yaml"
        )
        return _json(response_body(cassette[0])), "invalid_request_error", None
    body = BAD_REQUEST[api]
    err = body["error"]
    if api == "openai-chat":
        return _json(body), err["type"], err["code"]
    if api == "gemini-generate":
        return _json(body), None, "INVALID_ARGUMENT"
    return _json(body), None, "invalid_request"


@pytest.mark.parametrize(("transport", "api"), FAILURE_CLIENTS)
async def test_400_fails_and_keeps_the_provider_error(server: Loopback, transport: str, api: str) -> None:
    sc = SCENARIOS[(api, False)]()
    model = Recording(make_model(transport, api, server.root, sc.model))
    body, etype, code = bad_request(api)
    server.script(Reply(body, status=400))

    outcome = await runner_for(model, sc, False).run("Please help.", tenant="acme", subject="u")

    assert outcome.state == "FAILED"
    assert len(server.seen) == 1, "a 400 is fatal: no retry anywhere"
    failure = model.turns[0].failure
    assert failure is not None and failure.status == 400 and not failure.retryable
    assert model.turns[0].raw_stop_reason == "400"
    kept = {failure.error_type, failure.error_code}
    for value in (etype, code):
        if value is not None:
            assert value in kept, (value, failure)
    details = outcome.history[-1].details
    assert details.get("status") == 400


STREAM_CLIENTS = [
    pytest.param("sdk", "openai-responses", id="openai-sdk-responses"),
    pytest.param("sdk", "openai-chat", id="openai-sdk-chat"),
    pytest.param("sdk", "anthropic-messages", id="anthropic-sdk"),
    pytest.param("http", "openai-responses", id="httpx-responses"),
    pytest.param("http", "gemini-generate", id="httpx-gemini"),
    pytest.param("http", "gemini-interactions", id="httpx-interactions"),
]


@pytest.mark.parametrize(("transport", "api"), STREAM_CLIENTS)
async def test_stream_cut_mid_way_is_retried(server: Loopback, transport: str, api: str) -> None:
    sc = SCENARIOS[(api, True)]()
    model = Recording(make_model(transport, api, server.root, sc.model))
    cut = Reply(sc.first.body, sse=True, cut_after=len(sc.first.body) // 2)
    server.script(cut, sc.first, sc.second)

    outcome = await runner_for(model, sc, True).run("Please help.", tenant="acme", subject="u")

    assert outcome.state == "COMPLETED", (outcome.reason, outcome.history)
    assert len(server.seen) == 3
    broken = model.turns[0]
    assert broken.finish.value == "TRUNCATED" and broken.reason == "stream_interrupted"
    assert broken.failure is not None and broken.failure.retryable
    assert [t.state for t in outcome.history].count("RETRY") == 1


@pytest.mark.parametrize(("transport", "api"), STREAM_CLIENTS)
async def test_http_error_on_a_stream_request_is_classified(
    server: Loopback, transport: str, api: str
) -> None:
    sc = SCENARIOS[(api, True)]()
    model = Recording(make_model(transport, api, server.root, sc.model))
    server.script(
        Reply(_json(RATE_LIMITED[api]), status=429, headers={"retry-after": "1"}), sc.first, sc.second
    )

    outcome = await runner_for(model, sc, True).run("Please help.", tenant="acme", subject="u")

    assert outcome.state == "COMPLETED", (outcome.reason, outcome.history)
    assert len(server.seen) == 3
    failure = model.turns[0].failure
    assert failure is not None and failure.status == 429 and failure.retryable
    assert failure.retry_after_s == 1.0
    assert failure.error_type is not None or failure.error_code is not None, "the error body was read"


TIMEOUT_CLIENTS = [
    pytest.param("http", "openai-chat", id="httpx"),
    pytest.param("sdk", "openai-chat", id="openai-sdk"),
    pytest.param("sdk", "anthropic-messages", id="anthropic-sdk"),
    pytest.param("sdk", "gemini-generate", id="genai-sdk"),
]


@pytest.mark.parametrize(("transport", "api"), TIMEOUT_CLIENTS)
async def test_request_timeout_is_the_remaining_deadline(server: Loopback, transport: str, api: str) -> None:
    sc = SCENARIOS[(api, False)]()
    model = make_model(transport, api, server.root, sc.model)
    body = model.adapter.build_request(
        items=model.adapter.initial_items("hi", []),
        tools=[],
        settings={"model": sc.model},
        instructions=None,
        stream=False,
    )
    server.script(Reply(sc.first.body, delay_s=2.0))
    started = time.monotonic()
    turn = await model.complete(body, stream=False, meta=RequestMeta("op_t", 0, None, timeout_s=0.3))
    assert time.monotonic() - started < 1.5, "the remaining deadline bounds the request"
    assert turn.failure is not None and turn.failure.kind == "timeout" and turn.failure.retryable
    # at most one: on a loaded machine a client may spend the 0.3 s before its request is sent
    assert len(server.seen) <= 1, "no SDK retry after a timeout"


async def test_connection_refused_is_retried_then_fails() -> None:
    from callbound.transports.http import HttpModel

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sc = chat_plain()
    model = Recording(HttpModel("openai-chat", base_url=f"http://127.0.0.1:{port}", api_key=KEY))
    outcome = await runner_for(model, sc, False).run("hi", tenant="acme", subject="u")
    assert outcome.state == "FAILED"
    assert all(t.failure is not None and t.failure.kind == "connection" for t in model.turns)
    assert len(model.turns) == 1 + cb.Budgets().max_retries


async def test_timeout_is_the_remaining_deadline_and_is_retried(server: Loopback) -> None:
    sc = chat_plain()
    from callbound.transports.http import HttpModel

    model = Recording(HttpModel("openai-chat", base_url=server.root, api_key=KEY, timeout_s=0.2))
    server.script(Reply(sc.first.body, delay_s=1.0), sc.first, sc.second)
    outcome = await runner_for(model, sc, False).run("hi", tenant="acme", subject="u")
    assert outcome.state == "COMPLETED"
    assert model.turns[0].failure is not None and model.turns[0].failure.kind == "timeout"


# ---- the helpers, the missing-key check and the CLI --------------------------------------------------


def test_missing_key_names_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from callbound.transports import make_client, missing_key

    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert missing_key("openai-responses") == "OPENAI_API_KEY"
    assert missing_key("anthropic-messages") == "ANTHROPIC_API_KEY"
    assert missing_key("gemini-generate") == "GOOGLE_API_KEY or GEMINI_API_KEY"
    with pytest.raises(cb.UsageError, match="OPENAI_API_KEY"):
        make_client("openai-chat", transport="http", model="m")
    monkeypatch.setenv("GOOGLE_API_KEY", "x")
    assert missing_key("gemini-interactions") is None
    with pytest.raises(cb.UsageError, match="transport"):
        make_client("gemini-interactions", transport="carrier-pigeon")
    with pytest.raises(cb.UsageError, match="model"):
        make_client("gemini-generate", transport="http")


def test_make_client_builds_each_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    from callbound.transports import make_client
    from callbound.transports.http import HttpModel

    monkeypatch.setenv("OPENAI_API_KEY", "k")
    client = make_client("openai-responses", transport="http", model="m", base_url="http://127.0.0.1:9")
    assert isinstance(client, HttpModel) and client.adapter.api == "openai-responses"
    pytest.importorskip("openai")
    from callbound.transports.openai import OpenAIModel

    sdk_client = make_client("openai-chat", model="m")
    assert isinstance(sdk_client, OpenAIModel) and sdk_client.api == "openai-chat"


@pytest.mark.parametrize("transport", ["http", "sdk"])
@pytest.mark.parametrize("api", ["openai-responses", "openai-chat", "anthropic-messages"])
@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
async def test_one_base_url_reaches_the_same_path_on_both_transports(
    server: Loopback, transport: str, api: str, suffix: str
) -> None:
    """``--base-url`` is the server root for every client; the OpenAI SDK, which wants ``/v1`` in its
    URL, posted to /responses where httpx posted to /v1/responses (a reviewer's finding)."""
    from callbound.transports import make_client

    if transport == "sdk":
        pytest.importorskip("openai" if api.startswith("openai") else "anthropic")
    sc = SCENARIOS[(api, False)]()
    client = make_client(api, transport=transport, model=sc.model, base_url=server.root + suffix, api_key=KEY)
    server.script(sc.first, sc.second)
    outcome = await runner_for(client, sc, False).run("Please help.", tenant="acme", subject="user-1")
    assert outcome.state == "COMPLETED"
    assert {seen.path for seen in server.seen} == {PATHS[api]}


def test_import_callbound_loads_no_sdk_and_no_httpx() -> None:
    code = (
        "import sys, callbound, callbound.transports, callbound.cli.app\n"
        "bad = [m for m in ('openai', 'anthropic', 'google.genai', 'httpx', 'httpx2') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_cli_run_without_key_names_the_variable_and_exits_2(tmp_path: Path) -> None:
    env = {k: v for k, v in __import__("os").environ.items() if not k.endswith("_API_KEY")}
    r = subprocess.run(
        [sys.executable, "-m", "callbound.cli", "run", "--api", "anthropic-messages", "--model", "m", "hi"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "COLUMNS": "200"},
        timeout=60,
    )
    assert r.returncode == 2
    assert "ANTHROPIC_API_KEY" in r.stderr


def _call(name: str = "get_order", arguments: dict[str, Any] | None = None) -> Reply:
    """A completed Responses body proposing one function call (``get_order(A1)`` unless told)."""
    body = {
        "id": "resp_live_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-test",
        "output": [
            {
                "type": "function_call",
                "id": "fc_live_1",
                "call_id": "call_live_1",
                "name": name,
                "arguments": json.dumps(arguments if arguments is not None else {"order_id": "A1"}),
                "status": "completed",
            }
        ],
        "usage": {"input_tokens": 20, "output_tokens": 5},
    }
    return Reply(_json(body))


def _final(text: str) -> Reply:
    body = {
        "id": "resp_live_2",
        "object": "response",
        "status": "completed",
        "model": "gpt-test",
        "output": [
            {
                "type": "message",
                "id": "msg_live_2",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 40, "output_tokens": 7},
    }
    return Reply(_json(body))


@pytest.mark.parametrize("transport", ["http", "sdk"])
def test_cli_run_against_the_loopback_server(server: Loopback, tmp_path: Path, transport: str) -> None:
    if transport == "sdk":
        pytest.importorskip("openai")
    server.script(_call(), _final("Order A1 was delivered."))
    store = f"sqlite:///{tmp_path / 'live.db'}"
    base = server.root if transport == "http" else f"{server.root}/v1"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "callbound.cli",
            "run",
            "--api",
            "openai-responses",
            "--model",
            "gpt-test",
            "--transport",
            transport,
            "--base-url",
            base,
            "--store",
            store,
            "--json",
            "Where is order A1?",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**__import__("os").environ, "OPENAI_API_KEY": KEY, "COLUMNS": "200"},
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["state"] == "COMPLETED"
    assert data["text"] == "Order A1 was delivered."
    assert len(server.seen) == 2
    tools = {t["name"] for t in server.seen[0].json()["tools"]}
    assert tools == {"get_order", "create_refund_draft", "submit_refund"}
    outputs = [i for i in server.seen[1].json()["input"] if i.get("type") == "function_call_output"]
    assert [o["call_id"] for o in outputs] == ["call_live_1"]


@pytest.mark.parametrize(
    ("transport", "api"),
    [
        pytest.param("sdk", "openai-responses", id="openai-sdk"),
        pytest.param("sdk", "anthropic-messages", id="anthropic-sdk"),
        pytest.param("sdk", "gemini-generate", id="genai-sdk"),
        pytest.param("http", "openai-chat", id="httpx-chat"),
        pytest.param("http", "gemini-interactions", id="httpx-interactions"),
    ],
)
async def test_a_plain_body_gets_the_stream_byte_caps(server: Loopback, transport: str, api: str) -> None:
    """The caps a stream of the same response would trip apply to a plain body too: the call over
    them never runs and the operation ends INCOMPLETE(ARGUMENTS_TOO_LARGE), asking nothing more."""
    sc = SCENARIOS[(api, False)]()
    model = make_model(transport, api, server.root, sc.model, caps=StreamCaps(max_call_bytes=4))
    server.script(sc.first, sc.second)
    outcome = await runner_for(model, sc, False).run("Please help.", tenant="acme", subject="user-1")
    assert (outcome.state, outcome.reason) == ("INCOMPLETE", "ARGUMENTS_TOO_LARGE")
    assert len(server.seen) == 1
