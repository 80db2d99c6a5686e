"""``callbound parse``: read a plain body, raw SSE or JSON-lines and print the normalised turn."""

from __future__ import annotations

import re
from typing import Any

from ..adapters import get as get_adapter
from ..adapters.base import StreamCaps
from ..adapters.sse import DONE, looks_like_stream
from ..adapters.stream import StreamFeed
from ..core.errors import ProtocolViolation, UsageError
from ..core.types import ModelTurn

# Line breaks as the stream reader splits lines (CRLF, CR, LF): the same lines it reads.
_LINES = re.compile(r"\r\n|\r|\n")


def turn_json(turn: ModelTurn) -> dict[str, Any]:
    return {
        "api": turn.api,
        "response_id": turn.response_id,
        "finish": turn.finish.value,
        "raw_stop_reason": turn.raw_stop_reason,
        "reason": turn.reason,
        "text": turn.text,
        "refusal": turn.refusal,
        "calls": [
            {
                "call_id": c.call_id,
                "name": c.name,
                # D28: arguments are null whenever arguments_error is set
                "arguments": None if c.arguments_error is not None else c.arguments,
                "arguments_error": c.arguments_error,
            }
            for c in turn.calls
        ],
        "usage": {"input_tokens": turn.usage.input_tokens, "output_tokens": turn.usage.output_tokens},
    }


def _has_end_marker(text: str) -> bool:
    """A line of the input is Chat's end marker, as the reader would read it (stripped)."""
    return any(line.strip() == DONE for line in _LINES.split(text))


def parse_input(api: str, data: bytes) -> dict[str, Any]:
    adapter = get_adapter(api)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"input is not UTF-8 text (byte {exc.start})") from exc
    if not text.strip():
        raise UsageError("input is empty")
    kind = looks_like_stream(text)
    if kind == "json":
        try:
            return turn_json(adapter.parse_response(data))
        except ProtocolViolation as exc:
            raise UsageError(f"cannot read the body: {exc}") from exc
    # The default caps, as a transport applies them: the turn shown is the turn a run would get.
    stream = StreamFeed(adapter.stream_assembler(), max_event=StreamCaps().max_body_bytes)
    try:
        stream.feed(data)
        if kind == "jsonl" and api == "openai-chat" and not _has_end_marker(text):
            # JSON-lines hold the JSON payloads only, and Chat's end marker is not JSON, so a recording in
            # that form never carries it: supply it. A stream without a finish_reason is still no success
            # (the adapter reads an end with no finish as an unknown stop). Only a line that is the
            # marker counts: model text may well contain the characters "[DONE]".
            stream.feed(b"\n[DONE]\n")
        stream.close()
    except ProtocolViolation as exc:
        raise UsageError(f"cannot read the stream: {exc}") from exc
    if stream.events == 0:
        raise UsageError("no stream events found in the input")
    return turn_json(stream.finish())
