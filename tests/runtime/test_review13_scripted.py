"""Review 13 (g2): ScriptedModel plays a response as a live transport would (D24).

1. ``caps=`` that is no ``StreamCaps`` is a ``UsageError`` when the model is made (it failed every
   request as a retried connection error, FAILED(CONNECTION_ERROR)).
2. A stream event that is not JSON, or a byte that is not UTF-8, before the terminal event is a cut
   stream, TRUNCATED(stream_interrupted) and retried, as in ``transports.feed_stream``; it escaped
   ``complete()`` as ``ProtocolViolation`` (a "connection error").
3. ``max_body_bytes`` measures an event of a list of events as the SSE reader measures the same event
   as raw SSE: characters of its JSON text, "é" one character (``json.dumps``' default ascii escapes
   counted it as 6).

The event shapes are Anthropic Messages stream events (WIRE.md 3.4); the bodies are synthetic.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters.base import StreamCaps
from callbound.core.errors import UsageError
from callbound.core.model import RequestMeta
from callbound.core.types import Finish
from callbound.testing import FakeClock, ScriptedModel, Stream
from callbound.transports.http import HttpModel

API = "anthropic-messages"


def _start(input_tokens: int = 5) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "claude",
            "stop_reason": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1},
        },
    }


def _events(text: str) -> list[Any]:
    return [
        _start(),
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]


def _sse(events: list[Any]) -> str:
    return "".join(
        f"event: {e['type']}\ndata: {json.dumps(e, ensure_ascii=False, separators=(',', ':'))}\n\n"
        for e in events
    )


def _meta() -> RequestMeta:
    return RequestMeta("op_1", 0, None)


# ---- 1. caps checked when the model is made -------------------------------------------------------------


@pytest.mark.parametrize("caps", [{"max_call_bytes": 4096}, 4096, "64MiB"], ids=repr)
def test_scripted_model_refuses_caps_that_are_no_streamcaps(caps: Any) -> None:
    with pytest.raises(UsageError, match=r"ScriptedModel\(caps=\.\.\.\) takes a StreamCaps"):
        ScriptedModel(API, [], caps=caps)


def test_scripted_model_takes_streamcaps_or_none() -> None:
    caps = StreamCaps(max_body_bytes=1024)
    assert ScriptedModel(API, [], caps=caps).caps is caps
    assert ScriptedModel(API, []).caps is None


# ---- 2. bad bytes before the terminal event: a cut stream, not an exception ----------------------------

GOOD = _events("Hi")[:3]  # message_start, block start, one delta: no terminal event yet
NOT_JSON = (_sse(GOOD) + "event: content_block_delta\ndata: {garbage\n\n").encode()
NOT_UTF8 = _sse(GOOD).encode() + b"event: content_block_delta\ndata: {\xff}\n\n"


@pytest.mark.parametrize("raw", [NOT_JSON, NOT_UTF8], ids=["not-json", "not-utf8"])
@pytest.mark.parametrize("chunk_size", [7, 4096])
async def test_bad_bytes_before_the_terminal_event_cut_the_stream(raw: bytes, chunk_size: int) -> None:
    model = ScriptedModel(API, [Stream(raw, chunk_size=chunk_size)], check_requests=False)
    turn = await model.complete({"model": "claude"}, stream=True, meta=_meta())
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "stream_interrupted")
    assert turn.usage.input_tokens == 5  # what came before the bad event still counts (D27)


async def test_bad_bytes_after_the_terminal_event_change_nothing() -> None:
    raw = _sse(_events("Hi")).encode() + b"data: {garbage\n\n\xff"
    turn = await ScriptedModel(API, [Stream(raw)], check_requests=False).complete(
        {"model": "claude"}, stream=True, meta=_meta()
    )
    assert turn.finish is Finish.FINAL_TEXT and turn.text == "Hi"


class A(BaseModel):
    x: int


def _run(model: Any) -> cb.Outcome:
    registry = cb.Registry(
        [
            cb.ToolSpec(
                name="f", description="d", params=A, handler=lambda a, c: 1, schema_version="1", risk="read"
            )
        ]
    )
    runner = cb.Runner(
        model=model,
        registry=registry,
        clock=FakeClock(),
        settings={"model": "claude", "stream": True},
        budgets=cb.Budgets(max_retries=1),
    )
    return runner.run_sync(input="x", tenant="t", subject="s")


@pytest.mark.parametrize("raw", [NOT_JSON, NOT_UTF8], ids=["not-json", "not-utf8"])
def test_a_run_ends_as_it_does_over_a_live_transport(raw: bytes) -> None:
    """The repro (/tmp/s13/h10/repro_scripted_bad_event.py): before, ScriptedModel ended
    FAILED(CONNECTION_ERROR) where HttpModel ended INCOMPLETE(STREAM_INTERRUPTED)."""
    scripted = _run(ScriptedModel(API, [Stream(raw)] * 2))
    live = _run(
        HttpModel(
            API,
            api_key="k",
            base_url="http://p.test",
            transport=httpx.MockTransport(
                lambda r: httpx.Response(200, headers={"content-type": "text/event-stream"}, content=raw)
            ),
        )
    )
    assert (
        (scripted.state, scripted.reason) == (live.state, live.reason) == ("INCOMPLETE", "STREAM_INTERRUPTED")
    )


# ---- 3. one unit for an event of a list and of raw SSE -------------------------------------------------


def _play(item: Any, cap: int) -> tuple[Finish, str | None]:
    turn = ScriptedModel(API, [], caps=StreamCaps(max_body_bytes=cap))._play(item, None, None)
    return turn.finish, turn.reason


def _largest_data(events: list[Any]) -> str:
    return max((json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in events), key=len)


@pytest.mark.parametrize("text", ["é" * 1000, "日本語" * 300, "plain ascii " * 80])
def test_a_list_of_events_and_the_same_sse_trip_at_the_same_size(text: str) -> None:
    events = _events(text)
    size = len(_largest_data(events))
    # The stream's text in all is held to the same cap in UTF-8 bytes (review round 17, r4 F2): a cap
    # that one event fits (counted in characters) is still too small for 2,000 bytes of "é".
    fits = max(size, len(text.encode()))
    for cap in (size - 1, size, size + 1, fits):
        assert _play(events, cap) == _play(Stream(_sse(events)), cap), cap
    assert _play(events, fits) == (Finish.FINAL_TEXT, None)
    assert _play(events, size - 1) == (Finish.TRUNCATED, "response_too_large")


def test_an_escaped_character_is_not_counted_six_times() -> None:
    """The repro (/tmp/s13/h10/repro_body_cap_units.py): an event of exactly the cap, UTF-8 bytes, was
    TRUNCATED(response_too_large) as a list and FINAL_TEXT as raw SSE."""
    events = _events("é" * 1000)
    nbytes = len(_largest_data(events).encode())
    assert _play(events, nbytes) == _play(Stream(_sse(events)), nbytes) == (Finish.FINAL_TEXT, None)
