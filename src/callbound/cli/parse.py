"""``callbound parse``: read a plain body, raw SSE or JSON-lines and print the normalised turn."""

from __future__ import annotations

import re
from typing import Any

from ..adapters import get as get_adapter
from ..adapters.base import Adapter, StreamCaps
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
    supply_done = kind == "jsonl" and api == "openai-chat" and not _has_end_marker(text)
    stream, error = _read_stream(adapter, data, supply_done)
    if error is not None and stream.events == 0:
        # ``events`` counts whole batches, and the bad event was in the only one: whether any event came
        # before it shows only when the input is read one line (at most one event) at a time.
        stream, error = _read_stream(adapter, data, supply_done, by_line=True)
    if stream.events == 0:
        raise UsageError(
            f"cannot read the stream: {error}" if error else "no stream events found in the input"
        )
    return turn_json(stream.finish())


def _read_stream(
    adapter: Adapter, data: bytes, supply_done: bool, *, by_line: bool = False
) -> tuple[StreamFeed, ProtocolViolation | None]:
    """Feed ``data`` as a run reads a stream (``transports.feed_stream``): an event that is not JSON ends
    the stream there, and the turn is what came before it (a cut stream: TRUNCATED(stream_interrupted)
    unless the terminal event came first, issue 3 §4), so ``parse`` exits 0 on every stream a run reads.
    Returns the feed and the ``ProtocolViolation`` that ended it, if any."""
    stream = StreamFeed(adapter.stream_assembler(), max_event=StreamCaps().max_body_bytes)
    try:
        for chunk in data.splitlines(keepends=True) if by_line else (data,):
            stream.feed(chunk)
        if supply_done:
            # JSON-lines hold the JSON payloads only, and Chat's end marker is not JSON, so a recording in
            # that form never carries it: supply it, but only after a stream that was read to its end. A
            # stream without a finish_reason is still no success: the adapter reads it as cut before its
            # end (TRUNCATED(stream_interrupted)). Only a line that is the marker counts: model text may
            # well contain the characters "[DONE]".
            stream.feed(b"\n[DONE]\n")
        stream.close()
    except ProtocolViolation as exc:
        return stream, exc  # not closed: like a run, nothing after the bad event is read
    return stream, None
