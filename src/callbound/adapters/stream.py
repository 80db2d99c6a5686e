"""The one path from streamed response bytes to a ``ModelTurn``: SSE reader → payloads → assembler.

Transports, ``callbound parse`` and ``ScriptedModel`` all read streams through ``StreamFeed``, and so
does the streaming benchmark, so what is measured is what runs.

Fast path. Most events of a long stream are argument fragments of one fixed shape. An assembler may
name that shape (``fast_events``, a ``simple_event`` pattern) and take raw events itself
(``feed_events``): the reader then hands it the pattern's match for each event whose text matches,
without splitting it into lines or building a frame, and the assembler reads the fragment from the
match without building the payload dict. Every other event arrives as an (event name, data) frame.
An assembler's ``feed_events`` must behave exactly as the module function ``feed_events``, which
decodes every event and calls ``feed``: same turn, same progress events in the same order, same
exception at the same event.

The terminal event (issue 3 §4, D1). Once an assembler is ``complete``, nothing after it changes the
turn: its ``feed`` ignores every later event, ``feed_events`` stops decoding them (a later event that
is not JSON raises nothing), and ``StreamFeed`` reads no further bytes. A live transport stops reading
at the first chunk boundary after the terminal event; ``callbound parse`` and ``ScriptedModel`` read
on: both get the same turn, however the bytes were split into chunks.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from ..core.errors import EventTooLarge, ProtocolViolation
from ..core.model import ProgressCallback
from ..core.types import ModelTurn
from .base import StreamAssembler, response_too_large
from .sse import Frame, RawEvent, Recogniser, SSEReader, decode_frame, has_payload


@runtime_checkable
class FastAssembler(StreamAssembler, Protocol):
    """A stream assembler with a fast path (see the module docstring)."""

    fast_events: re.Pattern[str]  # made by sse.simple_event

    def feed_events(self, events: Sequence[RawEvent], on_progress: ProgressCallback | None) -> None: ...


def frame_of(event: RawEvent) -> Frame:
    """The (event name, data) frame of a raw event. A match covers the whole text of a
    ``data: D`` or ``event: N\\ndata: D`` block (``simple_event``)."""
    if isinstance(event, tuple):
        return event
    text = event.string
    if text.startswith("data: "):
        return None, text[6:]
    line_end = text.index("\n")
    return text[7:line_end], text[line_end + 7 :]


def decode_raw(event: RawEvent) -> dict[str, Any] | str:
    """The payload of a raw event, as ``decode_frame`` makes it."""
    return decode_frame(*frame_of(event))


def kind_of(event: dict[str, Any], key: str = "type") -> Any:
    """An event payload's type: its own ``key`` member, else the SSE event name (``decode_frame``'s
    "_event"), else "error" for a bare error object, which a gateway writes as a ``data:`` line and a
    server as raw JSON after its stream began (``sse._raw_error``): an error event on every API, as
    openai-python reads any data object with a top-level error (review round 18, b F4)."""
    kind = event.get(key) or event.get("_event")
    if kind is None and isinstance(event.get("error"), dict):
        return "error"
    return kind


def feed_one(assembler: StreamAssembler, event: RawEvent, on_progress: ProgressCallback | None) -> None:
    """Decode one event and feed it, as ``feed_events`` does: where a fast path does not apply, an
    assembler's ``feed_events`` hands the event to this."""
    progress = assembler.feed(decode_raw(event))
    if on_progress is not None:
        for item in progress:
            on_progress(item)


def feed_events(
    assembler: StreamAssembler, events: Sequence[RawEvent], on_progress: ProgressCallback | None
) -> None:
    """Decode each event and feed it: the reference every ``feed_events`` method must match.

    An event that is not JSON raises ``ProtocolViolation`` after the events before it were fed. Once
    the assembler is ``complete`` the rest is not even decoded (see the module docstring)."""
    for event in events:
        if getattr(assembler, "complete", False):
            return
        progress = assembler.feed(decode_raw(event))
        if on_progress is not None:
            for item in progress:
                on_progress(item)


class StreamFeed:
    """Feed raw chunks as they arrive, ``close`` at the end of input, then ``finish``.

    ``feed`` and ``close`` raise ``ProtocolViolation`` for input that is not UTF-8 or an event that
    is not JSON; the events before it have been fed. Once the assembler is ``complete`` (its terminal
    event came) no further byte is read, so nothing after the terminal event can fail or change the
    turn (see the module docstring). ``finish`` hands the assembler the SHA-256 of
    every byte fed (D7). ``events`` counts the events fed.

    An event whose data is empty or blank (a relay's ``data:`` keep-alive) carries no payload and is
    skipped, as a comment is (``sse.has_payload``).

    ``max_event`` (``StreamCaps.max_body_bytes`` in the transports): an event that grows past it
    before it is complete stops the feed (``aborted``; later chunks are ignored) and ``finish`` says
    TRUNCATED(response_too_large) with no calls, so a server cannot make callbound buffer one endless
    event or line."""

    __slots__ = (
        "_digest",
        "_feed_events",
        "_on_progress",
        "_reader",
        "_recognise",
        "assembler",
        "events",
        "too_large",
    )

    def __init__(
        self,
        assembler: StreamAssembler,
        on_progress: ProgressCallback | None = None,
        *,
        max_event: int | None = None,
    ) -> None:
        self.assembler = assembler
        self.events = 0
        self.too_large = False
        self._on_progress = on_progress
        self._reader = SSEReader(max_event)
        self._digest = hashlib.sha256()
        self._recognise: Recogniser | None = None
        self._feed_events: Callable[[Sequence[RawEvent], ProgressCallback | None], None] = self._reference
        if isinstance(assembler, FastAssembler):
            self._recognise = assembler.fast_events.fullmatch
            self._feed_events = assembler.feed_events

    @property
    def aborted(self) -> bool:
        """A byte cap tripped: the caller may stop reading (``finish`` says TRUNCATED)."""
        return self.too_large or self.assembler.aborted

    @property
    def complete(self) -> bool:
        """The assembler saw its API's terminal event (Gemini's terminal is the end of the stream, so
        its assembler has no such property: reading goes on until the stream ends)."""
        return bool(getattr(self.assembler, "complete", False))

    def feed(self, chunk: bytes) -> None:
        if self.too_large:
            return
        self._digest.update(chunk)
        if self.complete:
            return  # the terminal event came: nothing after it is read
        events: list[RawEvent] = []
        try:
            self._reader.read_into(chunk, self._recognise, events)
        except EventTooLarge:
            self._dispatch(events)  # the events before the one too large, as if the chunk ended there
            self.too_large = not self.complete
            return
        except ProtocolViolation:
            self._dispatch(events)
            if self.complete:
                return  # bad bytes after the terminal event: a reader that stopped there never saw them
            raise
        self._dispatch(events)

    def close(self) -> None:
        """End of input: a last event whose data is complete still counts (D33)."""
        if not self.too_large and not self.complete:
            self._dispatch(self._reader.close_frames())

    def finish(self) -> ModelTurn:
        turn = self.assembler.finish(self._digest.hexdigest())
        return response_too_large(turn) if self.too_large else turn

    def _dispatch(self, events: Sequence[RawEvent]) -> None:
        # an event without a payload (a relay's ``data:`` keep-alive, sse.has_payload) is skipped; a
        # recogniser's match always has one
        events = [e for e in events if not isinstance(e, tuple) or has_payload(e[1])]
        if events:
            self._feed_events(events, self._on_progress)
            self.events += len(events)

    def _reference(self, events: Sequence[RawEvent], on_progress: ProgressCallback | None) -> None:
        feed_events(self.assembler, events, on_progress)


__all__ = ["FastAssembler", "StreamFeed", "decode_raw", "feed_events", "feed_one", "frame_of", "kind_of"]
