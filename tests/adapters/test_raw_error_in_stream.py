"""A JSON error object written into a stream as is, without ``data:``, is read (D26, D32).

Gemini writes the error of a request that fails after its stream has begun as the plain JSON error
body, over several lines, after the events (googleapis/python-genai ``_api_client.py`` collects such
lines, "when API returns an error message, it comes line by line"; googleapis/js-genai issue 461). Those
lines are no SSE field, so they were dropped: the stream read as cut, TRUNCATED(stream_interrupted) and
retried, a fatal 400 included, its status and code lost. The object is now handed on as the stream's last
event. Error texts are from public issue threads (google-gemini/gemini-cli 7392, 5807); the first chunk is
synthetic.
"""

from __future__ import annotations

import json
import random

import pytest

from callbound.adapters import get
from callbound.adapters.sse import SSEReader
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn

API = "gemini-generate"
FIRST = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "Let me"}]}, "index": 0}],
    "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 2, "totalTokenCount": 11},
    "modelVersion": "gemini-x",
    "responseId": "r1",
}
E503 = {
    "error": {
        "code": 503,
        "message": "The model is overloaded. Please try again later.",
        "status": "UNAVAILABLE",
    }
}
E400 = {
    "error": {
        "code": 400,
        "message": "Please ensure that function response turn comes immediately after a function call turn.",
        "status": "INVALID_ARGUMENT",
    }
}


def _raw(error: object, newline: str = "\r\n", *, final_newline: bool = True) -> bytes:
    body = json.dumps(error, indent=2).replace("\n", newline)
    text = f"data: {json.dumps(FIRST)}{newline}{newline}{body}" + (newline if final_newline else "")
    return text.encode()


def _read(raw: bytes, sizes: list[int] | None = None) -> ModelTurn:
    feed = StreamFeed(get(API).stream_assembler())
    if sizes is None:
        feed.feed(raw)
    else:
        at = 0
        for size in sizes:
            feed.feed(raw[at : at + size])
            at += size
        feed.feed(raw[at:])
    feed.close()
    return feed.finish()


@pytest.mark.parametrize("newline", ["\r\n", "\n"])
@pytest.mark.parametrize("final_newline", [True, False], ids=["ended", "no final line end"])
def test_a_raw_error_keeps_its_status_and_retryability(newline: str, final_newline: bool) -> None:
    fatal = _read(_raw(E400, newline, final_newline=final_newline))
    assert (fatal.finish, fatal.raw_stop_reason, fatal.failure and fatal.failure.retryable) == (
        Finish.API_FAILURE,
        "INVALID_ARGUMENT",
        False,
    )
    busy = _read(_raw(E503, newline, final_newline=final_newline))
    assert (busy.finish, busy.raw_stop_reason, busy.failure and busy.failure.retryable) == (
        Finish.API_FAILURE,
        "UNAVAILABLE",
        True,
    )
    assert busy.usage.input_tokens == 9


def test_chunking_never_changes_it() -> None:
    raw = _raw(E400)
    whole = _read(raw)
    rng = random.Random(7)
    for _ in range(20):
        sizes = [rng.randint(1, 40) for _ in range(len(raw) // 10)]
        assert _read(raw, sizes) == whole
    assert _read(raw, [1] * len(raw)) == whole


def test_an_array_wrapped_error_is_read_too() -> None:
    turn = _read(_raw([E400]))
    assert (turn.raw_stop_reason, turn.failure and turn.failure.retryable) == ("INVALID_ARGUMENT", False)


@pytest.mark.parametrize(
    "stray",
    ['{\n  "note": 1\n}\n', '{\n  "error": \n', "hello world\n", '[{"error": {"code": 500}}, {"x": 1}]\n'],
    ids=["no error member", "cut", "text", "two elements"],
)
def test_other_stray_lines_are_still_ignored(stray: str) -> None:
    reader = SSEReader()
    events = reader.feed(f"data: {json.dumps(FIRST)}\n\n{stray}".encode()) + reader.close()
    assert [e.data for e in events] == [json.dumps(FIRST)]


def test_a_cut_stream_without_an_error_is_still_cut() -> None:
    turn = _read(f"data: {json.dumps(FIRST)}\r\n\r\n".encode())
    assert (turn.finish, turn.reason) == (Finish.TRUNCATED, "stream_interrupted")
