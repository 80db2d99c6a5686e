"""One incremental reader for server-sent events and JSON-lines streams, shared by all adapters.

- SSE: ``event:``/``data:``/``id:``/``retry:`` fields, comments (``:``), LF, CRLF or CR line ends
  (and only those: U+2028, NEL and the other characters ``str.splitlines`` treats as line ends are
  data), multi-line ``data``; a blank line dispatches. ``event:`` lines are optional: adapters
  dispatch on the payload's own type field. A leading byte-order mark is dropped.
- JSON-lines: one JSON payload per line (some recordings store streams so).
- ``[DONE]`` is passed through as the string ``"[DONE]"``.
- End of input (D33): a final event whose data is complete is dispatched even without its blank
  line; a line cut off mid-way (no line end, and its data is not complete JSON) is never dispatched,
  and neither is an event whose last data line was cut off, nor a cut multi-byte character.
- Payloads are parsed like bodies (``loads_body``): a duplicated key is marked, not merged away, so
  object-style arguments in stream events are rejected like those in plain bodies (D5).

Work is linear in the input: each chunk is scanned once; a partial line is kept as a list of pieces
and joined once, when its line end arrives.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..core.arguments import loads_body
from ..core.errors import ProtocolViolation

DONE = "[DONE]"

_LINE_END = re.compile(r"\r\n|\r|\n")
_NON_DATA_FIELDS = ("event:", "id:", "retry:", ":")


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str | None
    data: str


class SSEReader:
    """Feed bytes as they arrive; get complete events back."""

    __slots__ = ("_data", "_decoder", "_event", "_mode", "_parts", "_pending_cr", "_started")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._parts: list[str] = []  # pieces of the current partial line
        self._data: list[str] = []
        self._event: str | None = None
        self._mode: str | None = None  # "sse" | "jsonl", decided on the first non-blank line
        self._pending_cr = False
        self._started = False

    def feed(self, chunk: bytes | str) -> list[SSEEvent]:
        if isinstance(chunk, bytes):
            try:
                text = self._decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                raise ProtocolViolation(f"stream is not UTF-8: {exc}") from exc
        else:
            text = chunk
        if not text:
            return []
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
            return []
        head, tail = text[: last + 1], text[last + 1 :]
        if self._parts:
            self._parts.append(head)
            head = "".join(self._parts)
            self._parts = []
        if tail:
            self._parts.append(tail)
        # A CR that ends the chunk may be the first half of a CRLF whose LF comes in the next chunk.
        self._pending_cr = not tail and head.endswith("\r")
        out: list[SSEEvent] = []
        lines = _LINE_END.split(head)
        lines.pop()  # the empty string after the last line end
        for line in lines:
            self._line(line, out)
        return out

    def close(self) -> list[SSEEvent]:
        """End of input. Dispatch a last event whose data is complete (D33)."""
        cut_character = False
        try:
            tail = self._decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            tail, cut_character = "", True
        rest = "".join(self._parts) + tail
        self._parts = []
        out: list[SSEEvent] = []
        if rest or cut_character:
            if not cut_character and self._line_is_complete(rest):
                self._line(rest, out)
            elif self._mode != "jsonl" and not (rest.startswith(_NON_DATA_FIELDS) and not cut_character):
                # A cut data line (or a cut character): the event it belonged to is incomplete.
                self._data = []
        if self._data:
            data = "\n".join(self._data)
            if _complete_json(data):
                out.append(SSEEvent(self._event, data))
        self._data = []
        self._event = None
        return out

    def _line_is_complete(self, line: str) -> bool:
        if self._mode == "jsonl" or (self._mode is None and line.lstrip().startswith(("{", "["))):
            return _complete_json(line)
        if line.startswith("data:"):
            value = line[5:].removeprefix(" ")
            return _complete_json("\n".join([*self._data, value]))
        return False

    def _line(self, line: str, out: list[SSEEvent]) -> None:
        if self._mode is None:
            stripped = line.strip()
            if not stripped:
                return
            jsonl = stripped.startswith(("{", "[")) and not stripped.startswith(DONE)
            self._mode = "jsonl" if jsonl else "sse"
        if self._mode == "jsonl":
            if line.strip():
                out.append(SSEEvent(None, line.strip()))
            return
        if not line:
            if self._data:
                out.append(SSEEvent(self._event, "\n".join(self._data)))
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
        # id:, retry: and unknown fields carry nothing an adapter needs


def _complete_json(data: str) -> bool:
    if data.strip() == DONE:
        return True
    try:
        json.loads(data)
    except (ValueError, RecursionError):
        return False
    return True


def decode_event(ev: SSEEvent) -> dict[str, Any] | str:
    """The payload of one event: a dict, or ``"[DONE]"``. Raises ``ProtocolViolation`` for non-JSON."""
    data = ev.data.strip()
    if data == DONE:
        return DONE
    try:
        value = loads_body(data)
    except (ValueError, RecursionError) as exc:
        raise ProtocolViolation(f"stream event is not JSON: {data[:80]!r}") from exc
    if not isinstance(value, dict):
        raise ProtocolViolation(f"stream event is not a JSON object: {data[:80]!r}")
    if ev.event and "type" not in value and ev.event not in ("message",):
        # Some servers only name the event on the event: line; keep it where adapters look.
        value.setdefault("_event", ev.event)
    return value


def iter_payloads(chunks: Iterable[bytes | str]) -> Iterator[dict[str, Any] | str]:
    """Decode a whole stream (SSE or JSON-lines), yielding payloads in order."""
    reader = SSEReader()
    for chunk in chunks:
        for ev in reader.feed(chunk):
            yield decode_event(ev)
    for ev in reader.close():
        yield decode_event(ev)


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
