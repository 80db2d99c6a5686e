"""One incremental reader for server-sent events and JSON-lines streams, shared by all adapters.

- SSE: ``event:``/``data:``/``id:``/``retry:`` fields, comments (``:``), LF, CRLF or CR line ends
  (and only those: U+2028, NEL and the other characters ``str.splitlines`` treats as line ends are
  data), multi-line ``data``; a blank line dispatches. ``event:`` lines are optional: adapters
  dispatch on the payload's own type field. A leading byte-order mark is dropped.
- JSON-lines: one JSON payload per line (some recordings store streams so).
- ``[DONE]`` is passed through as the string ``"[DONE]"``.
- An event whose data is empty (``data:`` alone) is an event, as the SSE standard says; it carries no
  payload, and the payload readers skip it (``has_payload``: ``iter_payloads`` and
  ``callbound.adapters.stream``).
- End of input (D33): a final event whose data is complete is dispatched even without its blank
  line; a line cut off mid-way (no line end, and its data is not complete JSON) is never dispatched,
  and neither is an event whose last data line was cut off, nor a cut multi-byte character.
- Payloads are parsed like bodies (``loads_body``): a duplicated key is marked, not merged away, so
  object-style arguments in stream events are rejected like those in plain bodies (D5).

Work is linear in the input: each chunk is scanned once; a partial line is kept as a list of pieces
and joined once, when its line end arrives. Streams are mostly LF-framed one- or two-line events, so a
chunk without CR is split on blank lines and such events are read whole (``_read_blocks``); every other
line goes through the per-line reader, which defines the semantics.

Bounded (``max_event``): the text held for an event not yet complete may not grow past ``max_event``
characters; past it the reader raises ``EventTooLarge`` and is done. What an event holds is its data
values (not the ``data:`` before each), a data line not yet ended included. A data line is measured
the same whether it came whole or in pieces, so an event exactly at the limit is read and one character
over is not, however the bytes were split into chunks (review round 20). Any other field or comment
adds nothing to its event but is a line of its own, held to the limit alone: one longer than the
limit stops the reader (``EventTooLarge``) whether it came whole or in pieces, since which of the two
happened is up to the network (it used to be dropped when whole, review round 21, c). The lines of an SSE stream that
are no field, kept to find a raw error object at its end (``_raw_error``), hold at most ``max_event``
characters together; lines past that are dropped. Before a failure (``EventTooLarge``, bytes that are not UTF-8) the events complete before the
bad point are still read (``read_into``), so where the chunks were split never decides them. Only input larger than the limit is checked event by event, so the common path pays one
length check per chunk.

Events are handed on as ``Frame`` tuples (event name, data): ``SSEEvent`` objects are built only by the
public ``feed``/``close``, since a frozen dataclass per event would cost more than reading it. With a
recogniser (``feed_events``, used by ``callbound.adapters.stream``) an event whose whole text it matches
is handed on as that match, so an adapter can read its most frequent event without the JSON parser.
"""

from __future__ import annotations

import codecs
import json
import json.decoder
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from ..core.arguments import loads_body
from ..core.errors import EventTooLarge, ProtocolViolation

DONE = "[DONE]"

_LINE_END = re.compile(r"\r\n|\r|\n")
_NON_DATA_FIELDS = ("event:", "id:", "retry:", ":")


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str | None
    data: str


Frame = tuple[str | None, str]  # (event name, data) of one dispatched event
# What ``feed_events`` hands on: a frame, or the match a recogniser made on an event's whole text.
RawEvent = Frame | re.Match[str]
Recogniser = Callable[[str], re.Match[str] | None]


def simple_event(data_pattern: str) -> re.Pattern[str]:
    """A pattern whose ``fullmatch`` is a recogniser for ``SSEReader.feed_events``: it matches the
    text of an event block ``data: D`` or ``event: N\ndata: D`` (lines without the blank line that
    ends it) whose data D matches ``data_pattern``. ``data_pattern`` must never match a line end
    (otherwise several data lines could pass for one), and must only match payloads whose meaning the
    event name N cannot change (``decode_frame`` adds it as "_event" to a payload without "type"; an
    adapter that reads its own type field first never looks at it). Its groups keep their numbers."""
    return re.compile(r"(?:event: [^\n]*\n)?data: (?:" + data_pattern + ")")


# The body of a JSON string (between its quotes) as the JSON parser accepts it: characters other than
# quote, backslash and raw control characters, and valid escapes. Written unrolled, which re runs
# faster. A data pattern built with it matches valid JSON only, so an event it matches cannot fail to
# parse. Bodies with a backslash are decoded by ``scan_string``.
JSON_STRING = r'[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*'
# A JSON integer of at most 18 digits, which int() reads as the JSON parser does (longer ones: the slow
# way, where the parser's own limits apply).
JSON_INT = r"-?(?:0|[1-9][0-9]{0,17})"
# The string decoder the JSON parser itself uses (C where available), so an escaped value decodes to
# the same code points, lone surrogates included: scan_string(text, start) with ``start`` just after
# the opening quote gives (value, end). typeshed does not list it.
scan_string: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


def string_value(found: re.Match[str], group: int) -> str:
    """The value of the JSON string whose body (``JSON_STRING``) ``group`` matched."""
    body: str = found[group]
    return scan_string(found.string, found.start(group))[0] if "\\" in body else body


class SSEReader:
    """Feed bytes as they arrive; get complete events back."""

    __slots__ = (
        "_data",
        "_data_len",
        "_decoder",
        "_event",
        "_held",
        "_max",
        "_mode",
        "_parts",
        "_pending_cr",
        "_started",
        "_stray",
        "_stray_room",
    )

    def __init__(self, max_event: int | None = None) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._max = max_event
        # Characters held for the event being read: its data lines so far and the pieces of a line not
        # yet ended. Kept exactly only while that matters (see _check).
        self._held = 0
        self._parts: list[str] = []  # pieces of the current partial line
        self._data: list[str] = []
        self._data_len = 0  # characters of _data's values, while max_event is set
        self._event: str | None = None
        self._mode: str | None = None  # "sse" | "jsonl", decided on the first non-blank line
        self._pending_cr = False
        self._started = False
        # Lines of an SSE stream that are no SSE field: kept (bounded) only to find a raw JSON error
        # object written into the stream (see close_frames). Bounded in lines and, with a limit, in
        # characters too: _stray_room is what may still be kept (max_event in all), so garbage lines
        # each just under the limit cannot make the reader hold 256 times it (StreamCaps.max_body_bytes
        # bounds what callbound holds of a response). A line past the room is dropped, as one past
        # _STRAY_LINES is: an error object that large is no more read than an event that large.
        self._stray: list[str] = []
        self._stray_room = max_event

    def feed(self, chunk: bytes | str) -> list[SSEEvent]:
        return [SSEEvent(name, data) for name, data in self.feed_frames(chunk)]

    def close(self) -> list[SSEEvent]:
        """End of input. Dispatch a last event whose data is complete (D33)."""
        return [SSEEvent(name, data) for name, data in self.close_frames()]

    def feed_frames(self, chunk: bytes | str) -> list[Frame]:
        """``feed``, with each event as an (event name, data) tuple."""
        # Without a recogniser every item is a frame.
        return cast(list[Frame], self.feed_events(chunk, None))

    def feed_events(self, chunk: bytes | str, recognise: Recogniser | None) -> list[RawEvent]:
        """``feed_frames``, but an event whose whole text ``recognise`` matches is handed on as that
        match instead of a frame, and is not split into lines at all (the common case, made cheap:
        see ``simple_event`` for what a recogniser may match). Only LF-framed events with nothing
        carried over from an earlier chunk are offered to it."""
        out: list[RawEvent] = []
        self.read_into(chunk, recognise, out)
        return out

    def read_into(self, chunk: bytes | str, recognise: Recogniser | None, out: list[RawEvent]) -> None:
        """``feed_events``, appending to ``out``. When the chunk holds bytes that are not UTF-8, or an
        event that grows past ``max_event``, the events complete before that point are in ``out``
        when ``ProtocolViolation`` (``EventTooLarge``) is raised, as if the chunk had ended there:
        how the bytes were split into chunks never changes which events are read before a failure."""
        if isinstance(chunk, bytes):
            buffered = self._decoder.getstate()[0]
            try:
                text = self._decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                # The bytes before the first bad one are whole characters (exc.start counts from the
                # bytes held back from the previous chunk): read them, then fail.
                good = (buffered + chunk)[: exc.start].decode("utf-8")
                self._decoder.reset()  # the held bytes are in good now: never decoded twice
                if good:
                    self._read_text(good, recognise, out)
                raise ProtocolViolation(f"stream is not UTF-8: {exc}") from exc
        else:
            text = chunk
        if text:
            self._read_text(text, recognise, out)

    def _read_text(self, text: str, recognise: Recogniser | None, out: list[RawEvent]) -> None:
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._pending_cr:
            self._pending_cr = False
            if text.startswith("\n"):
                text = text[1:]  # the LF of a CRLF split across chunks
        last = max(text.rfind("\n"), text.rfind("\r"))
        if last < 0:
            if text:
                self._parts.append(text)
                if self._max is not None:
                    self._held += len(text)
                    # _held counts the line in hand whole, with the event's data: what is held may be less
                    if self._held > self._max:
                        line_len = self._held - self._data_len
                        held = _held_with(_line_start(self._parts), line_len, self._data_len, self._mode)
                        if held > self._max:
                            raise EventTooLarge(self._max)
            return
        head, tail = text[: last + 1], text[last + 1 :]
        stop = self._check(head, tail) if self._max is not None else None
        if stop is not None:
            # Some event grows past the limit at head[stop:]: the whole lines before it are read first.
            if stop == 0:
                raise EventTooLarge(cast(int, self._max))
            head, tail = head[:stop], ""
        if self._parts:
            self._parts.append(head)
            head = "".join(self._parts)
            self._parts = []
        if tail:
            self._parts.append(tail)
        # A CR that ends the chunk may be the first half of a CRLF whose LF comes in the next chunk.
        self._pending_cr = not tail and head.endswith("\r")
        if self._mode == "sse" and "\r" not in head:
            self._read_blocks(head, recognise, out)
        else:
            self._read_lines(head, out)
        if stop is not None:
            raise EventTooLarge(cast(int, self._max))
        if self._max is not None:
            self._data_len = sum(len(d) for d in self._data) if self._data else 0
            self._held = len(tail) + self._data_len

    def _check(self, head: str, tail: str) -> int | None:
        """Where in ``head`` (whole lines) reading must stop because some event would hold more than the
        limit from there on, or ``len(head)`` when the event left open plus ``tail`` (a line not yet
        ended) would; None when neither happens. What an event holds is its data values (a JSON-lines
        payload: its line); other fields are not kept. The text is measured line by line only when,
        with what is held already, it could go over."""
        limit = cast(int, self._max)
        if self._held + len(head) + len(tail) <= limit:
            return None  # what is held never exceeds the characters read (_held_with)
        partial = "".join(self._parts)  # the start of head's first line
        size = self._held - len(partial)  # the open event's data values
        mode = self._mode
        text = partial + head
        start = 0  # where the current line starts in text
        for end in _LINE_END.finditer(text):
            line = text[start : end.start()]
            if mode is None and line.strip():  # decided as _line decides it
                mode = "jsonl" if line.strip().startswith(("{", "[")) else "sse"
            if mode == "jsonl":
                size = len(line)
            elif not line:
                size = 0
            elif line.startswith("data:"):
                size += _line_cost(line)
            elif len(line) > limit:
                # any other field or comment counts alone, as while it is not yet ended (_held_with):
                # one longer than the limit stops the reader however its bytes came (review round 21, c)
                return max(0, start - len(partial))
            if size > limit:
                return max(0, start - len(partial))
            start = end.end()
        if _held_with(tail, len(tail), size, mode) > limit:
            return len(head)
        return None

    def _read_lines(self, text: str, out: list[RawEvent]) -> None:
        """Whole lines (``text`` ends with a line end), one at a time."""
        lines = _LINE_END.split(text)
        lines.pop()  # the empty string after the last line end
        for line in lines:
            self._line(line, out)

    def _read_blocks(self, text: str, recognise: Recogniser | None, out: list[RawEvent]) -> None:
        """Whole LF-ended lines in SSE mode, the same as ``_read_lines`` but a block at a time.

        Splitting on "\n\n" keeps the line sequence: each block but the last is its lines followed by
        one blank line (dispatch); the last block holds the lines of an event not yet ended. Only the
        first block can continue an event begun before (its lines are read one by one); every other
        block starts clean, so a block ``data: X`` or ``event: N\ndata: X`` is dispatched as (None, X)
        or (N, X) directly, which is exactly what its lines and blank line would do. Any other block
        (``data:`` without a space, several data lines, comments, ``id:``, extra blank lines) is read
        by lines.
        """
        blocks = text.split("\n\n")
        rest = blocks.pop()
        if blocks and (self._data or self._event is not None):
            self._read_block_lines(blocks[0], out)
            del blocks[0]
        for block in blocks:
            if recognise is not None:
                found = recognise(block)
                if found is not None:
                    out.append(found)
                    continue
            if block.startswith("data: "):
                if "\n" not in block:
                    out.append((None, block[6:]))
                    continue
            else:
                # One partition call tells the two-line shape apart (fewer calls than find()s).
                first, sep, data = block.partition("\ndata: ")
                if sep and "\n" not in data and "\n" not in first and first.startswith("event: "):
                    out.append((first[7:], data))
                    continue
            self._read_block_lines(block, out)
        if rest:
            self._read_lines(rest, out)

    def _read_block_lines(self, block: str, out: list[RawEvent]) -> None:
        for line in block.split("\n"):
            self._line(line, out)
        self._line("", out)

    def close_frames(self) -> list[Frame]:
        """``close``, with each event as an (event name, data) tuple (never a recogniser's match)."""
        cut_character = False
        try:
            tail = self._decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            tail, cut_character = "", True
        rest = "".join(self._parts) + tail
        self._parts = []
        out: list[RawEvent] = []
        if self._mode == "sse" and rest and not rest.startswith(("data:", *_NON_DATA_FIELDS)):
            # the last line of a raw error object, with no line end after it (_raw_error)
            self._keep_stray(rest)
        if rest or cut_character:
            if not cut_character and self._line_is_complete(rest):
                self._line(rest, out)
            elif self._mode != "jsonl" and not (rest.startswith(_NON_DATA_FIELDS) and not cut_character):
                # A cut data line (or a cut character): the event it belonged to is incomplete.
                self._data = []
        if self._data:
            data = "\n".join(self._data)
            if _complete_json(data):
                out.append((self._event, data))
        self._data = []
        self._event = None
        error = _raw_error(self._stray)
        if error is not None:
            out.append((None, error))
        self._stray = []
        return cast(list[Frame], out)  # _line only makes frames

    def _line_is_complete(self, line: str) -> bool:
        if self._mode == "jsonl" or (self._mode is None and line.lstrip().startswith(("{", "["))):
            return _complete_json(line)
        if line.startswith("data:"):
            value = line[5:].removeprefix(" ")
            return _complete_json("\n".join([*self._data, value]))
        return False

    def _line(self, line: str, out: list[RawEvent]) -> None:
        if self._mode is None:
            stripped = line.strip()
            if not stripped:
                return
            jsonl = stripped.startswith(("{", "[")) and not stripped.startswith(DONE)
            self._mode = "jsonl" if jsonl else "sse"
        if self._mode == "jsonl":
            if line.strip():
                out.append((None, line.strip()))
            return
        if not line:
            if self._data:
                out.append((self._event, "\n".join(self._data)))
            self._data = []
            self._event = None
            return
        if line.startswith(":"):
            return  # comment / keep-alive
        field, sep, value = line.partition(":")
        if sep:
            value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field not in ("id", "retry"):
            self._keep_stray(line)
        # id:, retry: and unknown fields carry nothing an adapter needs, but a raw error object may
        # hide among the unknown ones (close_frames)

    def _keep_stray(self, line: str) -> None:
        if len(self._stray) >= _STRAY_LINES:
            return
        if self._stray_room is not None:
            if len(line) > self._stray_room:
                # A line is missing from what is kept now, so no later line can complete an object:
                # none is kept after this.
                self._stray_room = 0
                return
            self._stray_room -= len(line)
        self._stray.append(line)


# A stream may end with a JSON error object written as is, without ``data:``, often over several lines:
# Gemini does so when a request fails after its stream has begun (googleapis/python-genai
# _api_client.py collects such lines "when API returns an error message, it comes line by line";
# googleapis/js-genai issue 461). Its lines are no SSE field; read whole at the end of the stream, an
# object with an ``error`` member (or a one-element array of one) is handed on as one more event, so
# the failure keeps its status and code (D32) and a fatal one is not retried as a cut stream (D26).
_STRAY_LINES = 256


def _line_cost(line: str) -> int:
    """What an SSE data line (ended or not) adds to its event, in characters: its value, not the
    ``data:`` or ``data: `` before it; a start of ``data: `` adds nothing yet."""
    if line.startswith("data:"):
        return len(line) - (6 if line.startswith("data: ") else 5)
    return 0 if "data: ".startswith(line) else len(line)


def _held_with(start: str, line_len: int, data_len: int, mode: str | None) -> int:
    """What an event holds while a line of ``line_len`` characters beginning with ``start`` (at least
    its first 6, where it has them) is not yet ended, ``data_len`` being the event's data values so far:
    as ``_check`` counts the same line ended. A data line (or a start of ``data: ``) adds its value to
    the data; a JSON-lines line is its own event; any other field or comment is counted alone, as an
    ended one is not counted at all (a stray line is kept within its own bound, ``_keep_stray``)."""
    if mode == "jsonl":
        return line_len
    if start.startswith("data:") or "data: ".startswith(start):
        return data_len + line_len - (len(start) - _line_cost(start))
    return line_len


def _line_start(parts: list[str]) -> str:
    """The first characters (at least 6 where there are) of a line held in pieces, without joining
    all of them: enough for ``_line_cost`` to tell its prefix."""
    start = ""
    for part in parts:
        start += part
        if len(start) >= 6:
            break
    return start


def _raw_error(lines: list[str]) -> str | None:
    if not lines:
        return None
    text = "\n".join(lines).strip()
    if not text.startswith(("{", "[")):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    first = value[0] if isinstance(value, list) and len(value) == 1 else value
    if isinstance(first, dict) and isinstance(first.get("error"), dict):
        return json.dumps(first)
    return None


def _complete_json(data: str) -> bool:
    if data.strip() == DONE:
        return True
    try:
        json.loads(data)
    except (ValueError, RecursionError):
        return False
    return True


# JSON's whitespace: data made of it alone (``data:`` or ``data: `` then a blank line) is no payload.
_JSON_SPACE = " \t\n\r"


def has_payload(data: str) -> bool:
    """False for an event whose data is empty or JSON whitespace only: relays and gateways keep a long
    stream open with ``data:`` and a blank line, as others do with a comment. Such an event is skipped,
    as the anthropic SDK skips an event without data (its ``_streaming.py``), not read as an event
    that is not JSON: that ended the stream there, TRUNCATED(stream_interrupted), so a long answer was
    retried and paid for again until INCOMPLETE (review round 21, c). No JSON payload is blank."""
    return bool(data.strip(_JSON_SPACE))


def decode_event(ev: SSEEvent) -> dict[str, Any] | str:
    """The payload of one event: a dict, or ``"[DONE]"``. Raises ``ProtocolViolation`` for non-JSON."""
    return decode_frame(ev.event, ev.data)


def decode_frame(event: str | None, data: str) -> dict[str, Any] | str:
    """``decode_event`` for an (event name, data) frame."""
    data = data.strip()
    if data == DONE:
        return DONE
    try:
        value = loads_body(data)
    except (ValueError, RecursionError) as exc:
        raise ProtocolViolation(f"stream event is not JSON: {data[:80]!r}") from exc
    if not isinstance(value, dict):
        raise ProtocolViolation(f"stream event is not a JSON object: {data[:80]!r}")
    if event and "type" not in value and event not in ("message",):
        # Some servers only name the event on the event: line; keep it where adapters look.
        value.setdefault("_event", event)
    return value


def iter_payloads(chunks: Iterable[bytes | str]) -> Iterator[dict[str, Any] | str]:
    """Decode a whole stream (SSE or JSON-lines), yielding payloads in order (an event without one,
    ``has_payload``, is skipped)."""
    reader = SSEReader()
    for chunk in chunks:
        frames: list[RawEvent] = []
        failure: ProtocolViolation | None = None
        try:
            reader.read_into(chunk, None, frames)
        except ProtocolViolation as exc:
            failure = exc  # the events before the bad bytes still come first
        for name, data in cast(list[Frame], frames):
            if has_payload(data):
                yield decode_frame(name, data)
        if failure is not None:
            raise failure
    for name, data in reader.close_frames():
        if has_payload(data):
            yield decode_frame(name, data)


def looks_like_stream(text: str) -> str:
    """Classify input for ``callbound parse``: "json" (one body), "sse" or "jsonl"."""
    stripped = text.lstrip("\ufeff \t\r\n")
    if stripped.startswith(("event:", "data:", ":", "id:", "retry:")):
        return "sse"
    if stripped.startswith(("{", "[")):
        try:
            json.loads(stripped)
            return "json"
        except (ValueError, RecursionError):
            pass
        if stripped.startswith("{") and _LINE_END.search(stripped.rstrip()):
            return "jsonl"
        return "json"
    return "sse"
