"""Review 13 (g2): the client classes check their arguments when made, and a stream the deadline cuts
keeps the usage it reported.

1. ``HttpModel``, ``OpenAIModel`` / ``AnthropicModel`` (``StainlessModel``) and ``GeminiModel`` took
   ``caps={...}`` or ``timeout_s="30"``: every request was then sent (and paid for) and failed as a
   retried connection error, FAILED(CONNECTION_ERROR). They now run make_client's own checks.
2. The deadline (``within_deadline``) cut a stream after Anthropic's ``message_start`` had reported its
   input tokens: the timeout turn had ``Usage(None, None)``, while the same stream cut by the
   connection kept them (D27: the running usage counts however the stream ended).

The stream shapes are Anthropic Messages events as WIRE.md 3.4 gives them (message_start carries the
input tokens); the bodies here are synthetic.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

import callbound as cb
from callbound import transports
from callbound.adapters import get as get_adapter
from callbound.adapters.base import StreamCaps
from callbound.core.errors import UsageError
from callbound.core.model import RequestMeta
from callbound.core.types import Finish
from callbound.transports import feed_stream, make_client, within_deadline
from callbound.transports.http import HttpModel

KEY = "test-key"

# ---- 1. argument checks when a client is made ----------------------------------------------------------

BAD_CAPS: list[Any] = [{"max_call_bytes": 4096}, 4096, "64MiB", StreamCaps]
BAD_TIMEOUTS: list[Any] = ["30", -1, 0, math.nan, math.inf, True]


def _openai(**kw: Any) -> Any:
    from callbound.transports.openai import OpenAIModel

    return OpenAIModel("openai-responses", api_key=KEY, **kw)


def _anthropic(**kw: Any) -> Any:
    from callbound.transports.anthropic import AnthropicModel

    return AnthropicModel(api_key=KEY, **kw)


def _gemini(**kw: Any) -> Any:
    from callbound.transports.gemini import GeminiModel

    return GeminiModel("gemini-generate", api_key=KEY, model="gemini-x", **kw)


def _http(**kw: Any) -> Any:
    return HttpModel("openai-responses", api_key=KEY, **kw)


MAKERS: dict[str, Callable[..., Any]] = {
    "HttpModel": _http,
    "OpenAIModel": _openai,
    "AnthropicModel": _anthropic,
    "GeminiModel": _gemini,
}


def _maker(name: str) -> Callable[..., Any]:
    sdk = {"OpenAIModel": "openai", "AnthropicModel": "anthropic", "GeminiModel": "google.genai"}.get(name)
    if sdk is not None:
        pytest.importorskip(sdk)
    return MAKERS[name]


@pytest.mark.parametrize("name", list(MAKERS))
@pytest.mark.parametrize("caps", BAD_CAPS, ids=repr)
def test_a_client_class_refuses_caps_that_are_no_streamcaps(name: str, caps: Any) -> None:
    with pytest.raises(UsageError, match=rf"{name}\(caps=\.\.\.\) takes a StreamCaps"):
        _maker(name)(caps=caps)


@pytest.mark.parametrize("name", list(MAKERS))
@pytest.mark.parametrize("timeout_s", BAD_TIMEOUTS, ids=repr)
def test_a_client_class_refuses_a_timeout_that_is_no_positive_number(name: str, timeout_s: Any) -> None:
    with pytest.raises(UsageError, match=rf"{name}\(timeout_s=\.\.\.\) takes seconds"):
        _maker(name)(timeout_s=timeout_s)


@pytest.mark.parametrize("name", list(MAKERS))
def test_a_client_class_refuses_a_base_url_that_is_no_string(name: str) -> None:
    maker = _maker(name)
    with pytest.raises(UsageError, match=rf"{name}\(base_url=\.\.\.\) takes a string"):
        maker(base_url=5)


@pytest.mark.parametrize("name", list(MAKERS))
def test_a_client_class_takes_good_arguments(name: str) -> None:
    caps = StreamCaps(max_body_bytes=1 << 20)
    for timeout_s in (None, 30, 0.5):
        client = _maker(name)(caps=caps, timeout_s=timeout_s)
        assert client.caps is caps and client.timeout_s == timeout_s
    assert _maker(name)().caps is None


def test_make_client_still_names_itself() -> None:
    with pytest.raises(UsageError, match=r"make_client\(timeout_s=\.\.\.\)"):
        make_client("openai-responses", transport="http", api_key=KEY, timeout_s="30")


def test_no_request_goes_out_for_a_client_with_bad_caps() -> None:
    """The repro (/tmp/s13/h10/repro_client_args.py): before, 4 requests were sent and the operation
    ended FAILED(CONNECTION_ERROR)."""
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    with pytest.raises(UsageError):
        HttpModel(
            "openai-responses",
            api_key=KEY,
            base_url="http://p.test",
            caps={"max_call_bytes": 4096},  # type: ignore[arg-type]
            transport=httpx.MockTransport(handler),
        )
    assert sent == []


# ---- 2. the deadline keeps the usage of the stream it cuts ---------------------------------------------

INPUT_TOKENS = 50_000
MESSAGE_START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 1},
    },
}
FIRST = f"event: message_start\ndata: {json.dumps(MESSAGE_START)}\n\n".encode()
REST = [
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}},
    {"type": "message_stop"},
]
WHOLE = FIRST + b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in REST)
BODY = {
    "model": "claude-x",
    "max_tokens": 64,
    "stream": True,
    "messages": [{"role": "user", "content": "hi"}],
}


class Stalls(httpx.AsyncByteStream):
    """message_start, then nothing for far longer than the deadline."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield FIRST
        await asyncio.sleep(30)

    async def aclose(self) -> None:
        pass


def _stalling(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Stalls())


def _assert_timeout_with_usage(turn: Any) -> None:
    assert turn.finish is Finish.API_FAILURE
    assert turn.failure is not None and turn.failure.kind == "timeout" and turn.failure.retryable
    assert turn.usage.input_tokens == INPUT_TOKENS
    assert turn.usage.output_tokens == 1


async def test_httpmodel_stream_cut_by_the_deadline_keeps_its_usage() -> None:
    model = HttpModel("anthropic-messages", api_key=KEY, transport=httpx.MockTransport(_stalling))
    turn = await model.complete(BODY, stream=True, meta=RequestMeta("op_1", 0, None, timeout_s=0.2))
    _assert_timeout_with_usage(turn)
    assert transports._IN_FLIGHT.get() is None  # the registry lives only while within_deadline runs


async def test_sdk_stream_cut_by_the_deadline_keeps_its_usage() -> None:
    anthropic = pytest.importorskip("anthropic")
    # The SDK's own HTTP package: httpx, or httpx2 in newer releases (which refuse httpx objects).
    from anthropic import _base_client

    from callbound.transports.anthropic import AnthropicModel

    h: Any = getattr(_base_client, "httpx2", None) or httpx

    class SdkStalls(h.AsyncByteStream):  # type: ignore[misc]
        __aiter__ = Stalls.__aiter__
        aclose = Stalls.aclose

    def stalling(request: Any) -> Any:
        return h.Response(200, headers={"content-type": "text/event-stream"}, stream=SdkStalls())

    sdk_client = anthropic.AsyncAnthropic(
        api_key=KEY, base_url="http://p.test", http_client=h.AsyncClient(transport=h.MockTransport(stalling))
    )
    model = AnthropicModel(client=sdk_client)
    turn = await model.complete(BODY, stream=True, meta=RequestMeta("op_1", 0, None, timeout_s=0.2))
    _assert_timeout_with_usage(turn)


async def test_a_run_counts_the_tokens_of_a_stream_the_deadline_cut() -> None:
    """The repro (/tmp/s13/h12/r_deadline_stream_usage.py): before, STOPPED(DEADLINE) with
    Usage(None, None) and 0 input tokens spent."""
    model = HttpModel("anthropic-messages", api_key=KEY, transport=httpx.MockTransport(_stalling))
    runner = cb.Runner(
        model=model,
        registry=cb.Registry([]),
        settings={"model": "claude-x", "stream": True},
        budgets=cb.Budgets(deadline_s=0.3, max_retries=0),
    )
    outcome = await runner.run("hi", tenant="t", subject="s")
    assert outcome.usage.input_tokens == INPUT_TOKENS
    assert outcome.spent["input_tokens"] == INPUT_TOKENS


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def test_a_stream_read_whole_before_the_deadline_is_finished_once() -> None:
    """The deadline may fall after the stream was read (while the response closes): the turn the
    stream made gives the usage; its assembler is not finished a second time."""
    adapter = get_adapter("anthropic-messages")

    async def request() -> Any:
        turn = await feed_stream(adapter, _chunks(WHOLE), model="claude-x", on_progress=None)
        assert turn.finish is Finish.FINAL_TEXT
        await asyncio.sleep(30)
        return turn

    turn = await within_deadline(adapter, request(), 0.1, model="claude-x")
    assert turn.failure is not None and turn.failure.kind == "timeout"
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (INPUT_TOKENS, 7)


async def test_a_timeout_without_a_stream_has_no_usage() -> None:
    adapter = get_adapter("anthropic-messages")
    turn = await within_deadline(adapter, asyncio.sleep(30), 0.05, model="claude-x")  # type: ignore[arg-type]
    assert turn.failure is not None and turn.failure.kind == "timeout"
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (None, None)


async def test_a_cancellation_that_is_not_the_deadlines_goes_on() -> None:
    adapter = get_adapter("anthropic-messages")
    started = asyncio.Event()

    async def request() -> Any:
        started.set()
        return await feed_stream(adapter, _stall_after_first(), model="claude-x", on_progress=None)

    task = asyncio.create_task(within_deadline(adapter, request(), 30.0, model="claude-x"))
    await started.wait()
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert transports._IN_FLIGHT.get() is None


async def _stall_after_first() -> AsyncIterator[bytes]:
    yield FIRST
    await asyncio.sleep(30)


async def test_a_stream_within_the_deadline_is_unchanged() -> None:
    def whole(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=WHOLE)

    model = HttpModel("anthropic-messages", api_key=KEY, transport=httpx.MockTransport(whole))
    turn = await model.complete(BODY, stream=True, meta=RequestMeta("op_1", 0, None, timeout_s=5.0))
    assert turn.finish is Finish.FINAL_TEXT and turn.failure is None
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (INPUT_TOKENS, 7)
