"""Review 9: ``callbound parse`` shows the turn a run would get (issue 3 §5: exit 0 for any turn it could
read, D28), also for a stream with an event that is not JSON. A live run reads such a stream as far as
it can (``transports.feed_stream``): junk after the terminal event leaves the turn as it was, junk
before it cuts the stream there (TRUNCATED(stream_interrupted), issue 3 §4). Input in which nothing at
all can be read is still exit 2.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from callbound.adapters import get
from callbound.cli.parse import parse_input
from callbound.core.errors import UsageError
from callbound.transports import feed_stream

CLI = [sys.executable, "-m", "callbound.cli", "parse"]


def parse(api: str, data: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, "--api", api, "-"], input=data, capture_output=True, timeout=60)


def sse(*events: dict[str, Any] | str) -> bytes:
    return b"".join(
        f"data: {e if isinstance(e, str) else json.dumps(e, separators=(',', ':'))}\n\n".encode()
        for e in events
    )


CHUNK = {"id": "c", "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}
STOP = {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
RESP_DONE = {
    "type": "response.completed",
    "response": {
        "id": "resp_1",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "m",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "hi", "annotations": []}],
            }
        ],
    },
}
CREATED = {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}

CASES: dict[str, tuple[str, bytes, str, str | None]] = {
    "chat-junk-after-done": ("openai-chat", sse(CHUNK, STOP, "[DONE]", "{broken"), "FINAL_TEXT", None),
    "chat-junk-mid-stream": (
        "openai-chat",
        sse(CHUNK, "{broken", STOP, "[DONE]"),
        "TRUNCATED",
        "stream_interrupted",
    ),
    "chat-junk-before-finish-in-one-line": (
        "openai-chat",
        sse(CHUNK) + b"data: [1, 2\n\n" + sse(STOP, "[DONE]"),
        "TRUNCATED",
        "stream_interrupted",
    ),
    "responses-junk-after-terminal": ("openai-responses", sse(RESP_DONE, "{junk"), "FINAL_TEXT", None),
    "responses-junk-before-terminal": (
        "openai-responses",
        sse(CREATED, "{junk", RESP_DONE),
        "TRUNCATED",
        "stream_interrupted",
    ),
}


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    yield data


def live(api: str, data: bytes) -> Any:
    return asyncio.run(feed_stream(get(api), _chunks(data), model=None, on_progress=None))


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_stream_with_junk_is_shown_as_the_turn_a_run_gets(case: str) -> None:
    """Issue 3 §5: exit 0 and the turn a run would get (transports.feed_stream reads the same bytes)."""
    api, data, finish, reason = CASES[case]
    r = parse(api, data)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["finish"], out["reason"]) == (finish, reason)
    turn = live(api, data)
    assert (turn.finish.value, turn.reason, turn.text) == (out["finish"], out["reason"], out["text"])
    assert out == parse_input(api, data)


def test_jsonl_with_junk_gets_no_end_marker_supplied() -> None:
    """A JSON-lines Chat recording gets its [DONE] supplied only when it could be read to its end: junk
    in it cuts the stream there, as it does a live one."""
    lines = [json.dumps(CHUNK), "{broken", json.dumps(STOP)]
    out = parse_input("openai-chat", "\n".join(lines).encode() + b"\n")
    assert (out["finish"], out["reason"]) == ("TRUNCATED", "stream_interrupted")
    whole = parse_input("openai-chat", "\n".join([lines[0], lines[2]]).encode() + b"\n")
    assert (whole["finish"], whole["reason"], whole["text"]) == ("FINAL_TEXT", None, "hi")


def test_a_chat_stream_without_finish_reason_is_a_cut_stream() -> None:
    """What the corrected comment in parse_input says: [DONE] without any finish_reason is no success,
    and it reads as a stream cut before its end (TRUNCATED(stream_interrupted)), as in a run."""
    data = sse(CHUNK, "[DONE]")
    out = parse_input("openai-chat", data)
    assert (out["finish"], out["reason"]) == ("TRUNCATED", "stream_interrupted")
    assert live("openai-chat", data).reason == "stream_interrupted"


@pytest.mark.parametrize("data", [b"data: {broken\n\n", b"data: {broken\n\ndata: {}\n\n"])
def test_a_stream_whose_first_event_is_junk_is_unreadable(data: bytes) -> None:
    """Nothing could be read: still D28's exit 2 with one line."""
    with pytest.raises(UsageError, match="cannot read the stream"):
        parse_input("openai-chat", data)
    r = parse("openai-chat", data)
    assert r.returncode == 2 and r.stdout == b""
    assert len(r.stderr.decode().strip().splitlines()) == 1
