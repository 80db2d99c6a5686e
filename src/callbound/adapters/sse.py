"""One incremental reader for server-sent events and JSON-lines streams, shared by all adapters.

- SSE: ``event:``/``data:``/``id:``/``retry:`` fields, comments (``:``), LF, CRLF or CR line ends,
  multi-line ``data``; a blank line dispatches. ``event:`` lines are optional: adapters dispatch on the
  payload's own type field.
- JSON-lines: one JSON payload per line (some recordings store streams so).
- ``[DONE]`` is passed through as the string ``"[DONE]"``.
- End of input (D33): a final event whose data is complete is dispatched even without its blank
  line; a line cut off mid-way (no line end, and its data is not complete JSON) is never dispatched.

Work is linear in the input: chunks are split once, and a partial line is carried over only once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..core.errors import ProtocolViolation

DONE = "[DONE]"


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str | None
    data: str


class SSEReader:
    """Feed bytes as they arrive; get complete events back."""

    __slots__ = ("_buf", "_data", "_decoder", "_event", "_mode", "_pending_cr")

    def __init__(self) -> None:
        import codecs

        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._buf = ""
        self._data: list[str] = []
        self._event: str | None = None
        self._mode: str | None = None  # "sse" | "jsonl", decided on the first non-blank line
        self._pending_cr = False

    def feed(self, chunk: bytes | str) -> list[SSEEvent]:
        text = self._decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
        if not text:
            return []
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF split across chunks
        self._pending_cr = False
        text = self._buf + text
        lines = text.splitlines(keepends=True)
        out: list[SSEEvent] = []
        self._buf = ""
        if lines and not lines[-1].endswith(("\n", "\r")):
            self._buf = lines.pop()
        if lines and lines[-1].endswith("\r"):
            self._pending_cr = True
        for line in lines:
            self._line(line.rstrip("\r\n"), out)
        return out

    def close(self) -> list[SSEEvent]:
        """End of input. Dispatch a last event whose data is complete (D33)."""
        tail = self._decoder.decode(b"", final=True)
        out: list[SSEEvent] = []
        rest = self._buf + tail
        self._buf = ""
        if rest:
            candidate = rest.rstrip("\r\n")
            if self._line_is_complete(candidate):
                self._line(candidate, out)
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
            self._mode = "jsonl" if stripped.startswith(("{", "[")) and not stripped.startswith("[DONE]") else "sse"
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
    except ValueError:
        return False
    return True


def decode_event(ev: SSEEvent) -> dict[str, Any] | str:
    """The payload of one event: a dict, or ``"[DONE]"``. Raises ``ProtocolViolation`` for non-JSON."""
    data = ev.data.strip()
    if data == DONE:
        return DONE
    try:
        value = json.loads(data)
    except ValueError as exc:
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
    stripped = text.lstrip()
    if stripped.startswith(("event:", "data:", ":", "id:")):
        return "sse"
    if stripped.startswith("{"):
        first, _, rest = stripped.partition("\n")
        try:
            json.loads(stripped)
            return "json"
        except ValueError:
            pass
        if rest.strip():
            return "jsonl"
        return "json"
    return "sse"
