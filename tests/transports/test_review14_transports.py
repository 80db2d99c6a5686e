"""Review 14: the live clients against redirects, undecodable bodies, aiohttp, a missing model name
and keys no HTTP header can carry.

1. The SDK clients (``OpenAIModel``, ``AnthropicModel``, ``GeminiModel`` plain) followed redirects: a
   307 sent the body (and for google-genai ``x-goog-api-key``, which httpx strips only as
   ``Authorization``) to the origin in ``Location``; a 302 became a GET whose 200 was taken as the
   model's turn, tool calls included. Like ``HttpModel`` they now follow none: a 3xx is a fatal
   API_FAILURE and the other origin hears nothing.
2. ``GeminiModel`` (plain) parsed google-genai's decoded ``Response.text`` re-encoded: invalid UTF-8
   became a FINAL_TEXT with U+FFFD and ``raw_sha256`` was not the digest of the bytes received (D7,
   D8). It now parses the bytes received.
3. aiohttp's ``ClientError`` (google-genai sends over aiohttp when it is installed) was not among
   ``transport_errors()``: ``ClientPayloadError`` / ``ServerDisconnectedError`` escaped ``complete``
   instead of becoming a retryable connection failure (D4, D30).
4. ``OpenAIModel("openai-chat")`` / ``AnthropicModel`` without a model name: the SDK raised TypeError
   before sending, retried 3 times as a connection error. Now a ``UsageError`` naming the model.
5. A key with a trailing newline, a non-ASCII or a control character was accepted, every request then
   failed locally (retried, FAILED(CONNECTION_ERROR)) and third-party DEBUG logs printed it. Now a
   ``UsageError`` saying what is wrong and where, never echoing the key.

Bodies are synthetic: the Gemini ``candidates`` shape of WIRE.md 4.x (as ``_gemini_text`` in
test_loopback builds it) and the tool-call scenarios of test_loopback (recordings named there).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound import transports
from callbound.core.errors import UsageError
from callbound.core.ids import SequentialIds
from callbound.core.model import RequestMeta
from callbound.core.types import Finish
from callbound.testing import FakeClock
from callbound.transports import api_key_for, check_client_args, make_client, transport_errors
from tests.transports.test_loopback import KEY, SCENARIOS, make_model, registry

# ---- a scripted origin that records every method ------------------------------------------------------


@dataclass
class Answer:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Heard:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Origin:
    """An HTTP server on 127.0.0.1 answering each request, GET or POST, with the next scripted answer
    (test_loopback's server answers POST only, so a redirect turned into a GET went unseen)."""

    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.heard: list[Heard] = []
        origin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                origin.heard.append(Heard(self.command, self.path, headers, body))
                answer = origin.answers.pop(0) if origin.answers else Answer(599, b'{"error": {}}')
                self.close_connection = True
                self.send_response(answer.status)
                headers = {"content-type": "application/json", **answer.headers}
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(answer.body)))
                self.send_header("connection", "close")
                self.end_headers()
                self.wfile.write(answer.body)

            do_GET = do_POST = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.root = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def origins() -> Iterator[tuple[Origin, Origin]]:
    provider, other = Origin(), Origin()
    try:
        yield provider, other
    finally:
        provider.close()
        other.close()


async def _one(model: Any, settings: dict[str, Any]) -> Any:
    adapter = model.adapter
    body = adapter.build_request(
        items=adapter.initial_items("hi", []), tools=[], settings=settings, instructions=None, stream=False
    )
    return await model.complete(body, stream=False, meta=RequestMeta("op_t", 0, None, timeout_s=10.0))


SDK_APIS = ["openai-responses", "openai-chat", "anthropic-messages", "gemini-generate"]

# ---- 1. redirects are not followed ---------------------------------------------------------------------


@pytest.mark.parametrize("status", [307, 302])
@pytest.mark.parametrize("api", SDK_APIS)
async def test_an_sdk_client_follows_no_redirect(
    origins: tuple[Origin, Origin], api: str, status: int
) -> None:
    provider, other = origins
    sc = SCENARIOS[(api, False)]()
    model = make_model("sdk", api, provider.root, sc.model)
    provider.answers = [Answer(status, b"", {"location": f"{other.root}/collect"})]
    other.answers = [Answer(200, sc.first.body)]  # a tool call: it must never be taken as the turn
    turn = await _one(model, {"model": sc.model})
    assert other.heard == []  # no body, no key, not even a GET reached the other origin
    assert len(provider.heard) == 1
    assert turn.finish is Finish.API_FAILURE
    assert turn.calls == ()
    assert turn.failure is not None and turn.failure.status == status
    assert not turn.failure.retryable


@pytest.mark.parametrize(("module", "cls"), [("openai", "OpenAIModel"), ("anthropic", "AnthropicModel")])
async def test_a_stainless_client_is_built_on_the_sdk_defaults_without_redirects(
    module: str, cls: str
) -> None:
    sdk = pytest.importorskip(module)
    transport = __import__(f"callbound.transports.{module}", fromlist=[cls])
    model = getattr(transport, cls)(api_key=KEY, model="m")
    client, owned = model._client(7.5)
    try:
        assert owned
        assert isinstance(client._client, sdk.DefaultAsyncHttpxClient)  # the SDK's limits and keep-alive
        assert client._client.follow_redirects is False
        assert client.max_retries == 0  # D26
        assert client.timeout == 7.5
    finally:
        await client.close()


# ---- 2. GeminiModel parses the bytes received ----------------------------------------------------------


def _gemini_body(text: str) -> bytes:
    body = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
        "responseId": "r-14",
    }
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


async def test_gemini_sdk_refuses_a_body_that_is_not_utf8_like_httpx(origins: tuple[Origin, Origin]) -> None:
    provider, _ = origins
    bad = _gemini_body("hello").replace(b"hello", b"hel\xff\xfeo")
    for transport in ("http", "sdk"):
        model = make_model(transport, "gemini-generate", provider.root, "gemini-x")
        provider.answers = [Answer(200, bad)]
        turn = await _one(model, {"model": "gemini-x"})
        assert turn.finish is Finish.API_FAILURE, transport  # no text invented from undecodable bytes
        assert "\ufffd" not in (turn.text or "")
        assert turn.raw_sha256 == hashlib.sha256(bad).hexdigest(), transport


async def test_gemini_sdk_digests_and_parses_the_bytes_not_the_charset_decoded_text(
    origins: tuple[Origin, Origin],
) -> None:
    # The header names a charset the bytes are not in: Response.text decoded them as Latin-1.
    provider, _ = origins
    raw = _gemini_body("café ☕")
    model = make_model("sdk", "gemini-generate", provider.root, "gemini-x")
    provider.answers = [Answer(200, raw, {"content-type": "application/json; charset=iso-8859-1"})]
    turn = await _one(model, {"model": "gemini-x"})
    assert turn.finish is Finish.FINAL_TEXT
    assert turn.text == "café ☕"
    assert turn.raw_sha256 == hashlib.sha256(raw).hexdigest()  # D7: the bytes as received
    assert turn.provenance.sdk_version.startswith("google-genai/")


async def test_gemini_sdk_error_body_that_is_not_utf8_keeps_its_status(
    origins: tuple[Origin, Origin],
) -> None:
    # google-genai decodes an error body as JSON before raising APIError: UnicodeDecodeError escaped.
    provider, _ = origins
    model = make_model("sdk", "gemini-generate", provider.root, "gemini-x")
    provider.answers = [Answer(400, b'{"error": {"message": "bad \xff"}}')]
    turn = await _one(model, {"model": "gemini-x"})
    assert turn.finish is Finish.API_FAILURE
    assert turn.failure is not None and turn.failure.status == 400


# ---- 3. aiohttp's errors are connection failures -------------------------------------------------------


def _fake_aiohttp() -> types.ModuleType:
    fake = types.ModuleType("aiohttp")

    class ClientError(Exception):
        pass

    class ServerDisconnectedError(ClientError):
        pass

    fake.ClientError = ClientError  # type: ignore[attr-defined]
    fake.ServerDisconnectedError = ServerDisconnectedError  # type: ignore[attr-defined]
    return fake


def test_transport_errors_hold_aiohttp_client_error_once_aiohttp_is_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = _fake_aiohttp()
    monkeypatch.setitem(sys.modules, "aiohttp", fake)
    assert fake.ClientError in transport_errors()
    monkeypatch.delitem(sys.modules, "aiohttp")
    assert not any(
        cls.__module__.startswith("aiohttp") or cls.__name__ == "ClientError" for cls in transport_errors()
    )


async def test_an_aiohttp_error_out_of_google_genai_is_a_connection_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("google.genai")
    from google.genai import models as genai_models

    fake = _fake_aiohttp()
    monkeypatch.setitem(sys.modules, "aiohttp", fake)

    async def disconnected(self: Any, **kwargs: Any) -> Any:
        raise fake.ServerDisconnectedError("Server disconnected")

    monkeypatch.setattr(genai_models.AsyncModels, "generate_content", disconnected)
    model = make_model("sdk", "gemini-generate", "http://127.0.0.1:9", "gemini-x")
    turn = await _one(model, {"model": "gemini-x"})
    assert turn.finish is Finish.API_FAILURE
    assert turn.failure is not None and turn.failure.kind == "connection" and turn.failure.retryable


async def test_a_real_aiohttp_cut_body_is_a_connection_failure(origins: tuple[Origin, Origin]) -> None:
    pytest.importorskip("aiohttp")  # google-genai would send over it; GeminiModel keeps it on httpx
    provider, _ = origins
    model = make_model("sdk", "gemini-generate", provider.root, "gemini-x")
    provider.answers = [Answer(200, b"not gzip", {"content-encoding": "gzip"})]
    turn = await _one(model, {"model": "gemini-x"})
    assert turn.failure is not None and turn.failure.kind == "connection" and turn.failure.retryable


# ---- 4. a missing model name on an SDK that requires one -----------------------------------------------


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages"])
async def test_a_missing_model_is_a_usage_error_not_a_retried_connection_failure(
    origins: tuple[Origin, Origin], api: str
) -> None:
    provider, _ = origins
    model = make_model("sdk", api, provider.root, None)  # type: ignore[arg-type]
    clock = FakeClock()
    runner = cb.Runner(
        model=model,
        registry=registry(SCENARIOS[(api, False)]().tools),
        clock=clock,
        settings={},
        ids=SequentialIds(),
    )
    with pytest.raises(UsageError, match="needs a model name"):
        await runner.run("hi", tenant="acme", subject="u")
    assert provider.heard == []
    assert clock.slept == []  # nothing retried


async def test_responses_without_a_model_is_still_sent_the_sdk_does_not_require_it(
    origins: tuple[Origin, Origin],
) -> None:
    provider, _ = origins
    model = make_model("sdk", "openai-responses", provider.root, None)  # type: ignore[arg-type]
    provider.answers = [
        Answer(400, b'{"error": {"message": "model required", "type": "invalid_request_error"}}')
    ]
    turn = await _one(model, {})
    assert len(provider.heard) == 1
    assert turn.failure is not None and turn.failure.status == 400


# ---- 5. keys no HTTP header can carry ------------------------------------------------------------------

SECRET = "sk-proj-SECRET123"
BAD_KEYS = {
    "newline": (SECRET + "\n", "ends with a newline"),
    "crlf": (SECRET + "\r\n", "ends with a newline"),
    "non-ascii": ("sk-proj-SECRÉT123", "non-ASCII character at position 13 of 17"),
    "control": ("sk-proj-\x00SECRET123", "control character (U+0000) at position 9"),
    "tab": ("sk-proj\tSECRET123", "control character (U+0009)"),
    "space": (" " + SECRET, "starts or ends with whitespace"),
}


@pytest.mark.parametrize("name", list(BAD_KEYS))
def test_check_key_names_the_fault_never_the_key(name: str) -> None:
    key, why = BAD_KEYS[name]
    with pytest.raises(UsageError, match="no HTTP header can carry") as info:
        transports.check_key(key, "X(api_key=...)")
    assert why in str(info.value)
    assert "SECRET" not in str(info.value) and "SECRÉT" not in str(info.value)
    with pytest.raises(UsageError):
        check_client_args("HttpModel", "openai-chat", api_key=key)


def test_ordinary_keys_pass() -> None:
    for key in (SECRET, "AIzaSyA-b_c.d~e/f+g=", "sk-ant-api03-x" * 8):
        transports.check_key(key, "k")
        check_client_args("HttpModel", "openai-chat", api_key=key)


@pytest.mark.parametrize("transport", ["http", "sdk"])
@pytest.mark.parametrize("name", ["newline", "non-ascii"])
def test_make_client_refuses_a_bad_key(
    transport: str, name: str, caplog: pytest.LogCaptureFixture, origins: tuple[Origin, Origin]
) -> None:
    key = BAD_KEYS[name][0]
    caplog.set_level(logging.DEBUG)
    with pytest.raises(UsageError, match=r"make_client\(api_key=...\)"):
        make_client("openai-chat", transport=transport, base_url=origins[0].root, api_key=key, model="m")
    assert "SECRET" not in caplog.text and "SECRÉT" not in caplog.text
    assert origins[0].heard == []


def test_a_bad_key_in_the_environment_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET + "\n")
    with pytest.raises(UsageError, match="environment variable OPENAI_API_KEY ends with a newline") as info:
        api_key_for("openai-chat")
    assert "SECRET" not in str(info.value)
    with pytest.raises(UsageError, match="OPENAI_API_KEY"):
        make_client("openai-chat", transport="http", model="m")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "AIza\u00e9")
    with pytest.raises(UsageError, match="GOOGLE_API_KEY holds a non-ASCII"):
        api_key_for("gemini-generate")


async def test_a_client_made_before_the_key_was_set_refuses_it_at_its_first_request(
    monkeypatch: pytest.MonkeyPatch, origins: tuple[Origin, Origin]
) -> None:
    # require_key=False (an app rebuilt only to record a decision) reads the key at the first request.
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    clients = [
        make_client("anthropic-messages", transport=t, base_url=origins[0].root, model="m", require_key=False)
        for t in ("http", "sdk")
    ]
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET + "\n")
    for client in clients:
        with pytest.raises(UsageError, match="ANTHROPIC_API_KEY ends with a newline"):
            await _one(client, {"model": "m", "max_tokens": 16})
    assert origins[0].heard == []


def test_cli_run_with_a_bad_key_exits_2_without_printing_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    r = subprocess.run(
        [sys.executable, "-m", "callbound.cli", "run", "--api", "openai-chat", "--model", "m", "hi"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "OPENAI_API_KEY": SECRET + "\n", "COLUMNS": "200"},
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert "OPENAI_API_KEY ends with a newline" in r.stderr
    assert "SECRET" not in r.stderr + r.stdout
