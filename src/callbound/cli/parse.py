"""``callbound parse``: read a plain body, raw SSE or JSON-lines and print the normalised turn.

The turn shown is the turn a run would get from the same bytes, with the default ``StreamCaps``:

- SSE, or JSON-lines of two or more lines: a stream, read as a run reads one (``StreamFeed``). A stream
  cut before its terminal event is TRUNCATED(stream_interrupted), as in a run.
- One JSON value: a plain body (``transports.plain_turn``: the body and argument caps apply), unless
  it is one of the API's stream events and no body of the API has its shape. Then it is a stream cut
  after that event (a JSON-lines recording of one line), or a whole stream when the event is the
  terminal one. Told apart by shape: Responses events have a ``type`` ``response.*`` or ``error``
  (a body has no ``type``); Chat chunks are ``chat.completion.chunk`` objects (or have ``delta`` in
  their choices); Anthropic's ``message_start`` ... ``message_stop`` and ``ping`` (its ``error`` event
  has an error body's shape, and is read as one); Interactions events name their ``event_type``.
  Gemini generateContent cannot be told apart: a ``streamGenerateContent`` chunk is a
  ``GenerateContentResponse``, as the plain body is (a run knows which from its request), so one such
  object is always read as a plain body; a cut stream of one chunk shows as that body's turn, not as
  the run's TRUNCATED(stream_interrupted). Give two or more chunks, or the SSE form, to read a stream.
- Input with no body or event to read exits 2 with one line: empty input, bytes that are not UTF-8,
  one value that is not JSON, a stream whose first event is not JSON or that holds no complete event
  at all. A run reading such a stream gets TRUNCATED(stream_interrupted), a stream cut before its
  first event, and the message says so: parse shows no turn made of nothing. A first event over
  ``max_body_bytes`` is no such input: its turn is TRUNCATED(response_too_large), as in a run.

A turn whose response id, stop reason, error type or code, or a call's id or name holds a lone surrogate
(a ``\\ud800`` escape with no partner) is shown as a run gets it: API_FAILURE(malformed_response),
``error_code`` ``lone_surrogate``. Text with one is shown as read, the surrogate written as its escape.

Besides the turn's fields, ``error_code`` is printed when the turn failed with one: the provider's
error code, or, for a byte cap (TRUNCATED(arguments_too_large / response_too_large)), the
``StreamCaps`` setting that tripped: ``max_call_bytes``, ``max_response_bytes`` or ``max_body_bytes``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ..adapters import get as get_adapter
from ..adapters.base import Adapter, StreamCaps, readable_turn
from ..adapters.sse import DONE, looks_like_stream
from ..adapters.stream import StreamFeed
from ..core.errors import ProtocolViolation, UsageError
from ..core.types import ModelTurn
from ..runtime.storable import storable_turn
from ..transports import plain_turn

# Line breaks as the stream reader splits lines (CRLF, CR, LF): the same lines it reads.
_LINES = re.compile(r"\r\n|\r|\n")

_ANTHROPIC_EVENTS = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
    }
)


def _responses_event(value: dict[str, Any]) -> bool:
    kind = value.get("type")
    return isinstance(kind, str) and (kind.startswith("response.") or kind == "error")


def _anthropic_event(value: dict[str, Any]) -> bool:
    kind = value.get("type")
    return isinstance(kind, str) and kind in _ANTHROPIC_EVENTS


def _chat_chunk(value: dict[str, Any]) -> bool:
    if "object" in value:
        return bool(value["object"] == "chat.completion.chunk")
    choices = value.get("choices")
    return isinstance(choices, list) and any(isinstance(c, dict) and "delta" in c for c in choices)


# Whether one JSON object is a stream event of the API that no plain body of it looks like (see the
# module docstring). Gemini generateContent has none: its chunks and bodies have one shape.
_STREAM_EVENT: dict[str, Callable[[dict[str, Any]], bool]] = {
    "openai-responses": _responses_event,
    "openai-chat": _chat_chunk,
    "anthropic-messages": _anthropic_event,
    "gemini-interactions": lambda value: isinstance(value.get("event_type"), str),
}


def turn_json(turn: ModelTurn) -> dict[str, Any]:
    # As a run receives it (``Runner._request_model``): a turn named by strings that are not Unicode (a
    # lone surrogate escape in an id or stop reason) is API_FAILURE(malformed_response) there too, and so
    # is one that would be resent holding a number JSON cannot carry (non_finite_number).
    turn = storable_turn(readable_turn(turn))
    out = {
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
    if turn.failure is not None and turn.failure.error_code is not None:
        # the provider's error code, or the StreamCaps setting a byte cap trip names
        out["error_code"] = turn.failure.error_code
    return out


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
    if kind == "json" and _one_stream_event(api, text):
        kind = "jsonl"  # a JSON-lines recording of one line: a stream (see the module docstring)
    if kind == "json":
        try:
            return turn_json(plain_turn(adapter, data, None, None))
        except ProtocolViolation as exc:
            raise UsageError(f"cannot read the body: {exc}") from exc
    # The default caps, as a transport applies them: the turn shown is the turn a run would get.
    supply_done = kind == "jsonl" and api == "openai-chat" and not _has_end_marker(text)
    stream, error = _read_stream(adapter, data, supply_done)
    if error is not None and stream.events == 0:
        # ``events`` counts whole batches, and the bad event was in the only one: whether any event came
        # before it shows only when the input is read one line (at most one event) at a time.
        stream, error = _read_stream(adapter, data, supply_done, by_line=True)
    if stream.events == 0 and not stream.too_large:  # a first event over the cap: TRUNCATED, as a run
        raise UsageError(
            f"cannot read the stream: {error}"
            if error
            else "no stream events found in the input (none complete: a run reading it as a stream "
            "would get TRUNCATED(stream_interrupted), a stream cut before its first event)"
        )
    return turn_json(stream.finish())


def _one_stream_event(api: str, text: str) -> bool:
    """``text`` (one JSON value) is one stream event of ``api``, on one line as JSON-lines hold it.
    Raises ``UsageError`` for one written over several lines, which no stream reader (nor a run) reads
    as an event."""
    is_event = _STREAM_EVENT.get(api)
    if is_event is None:
        return False
    stripped = text.lstrip("\ufeff \t\r\n").rstrip()
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return False
    if not isinstance(value, dict) or not is_event(value):
        return False
    if _LINES.search(stripped):
        raise UsageError(
            f"the input is one {api} stream event over several lines; "
            "JSON-lines hold one event a line, and SSE one per data: field"
        )
    return True


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
