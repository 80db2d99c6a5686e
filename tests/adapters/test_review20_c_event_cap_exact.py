"""``StreamCaps.max_body_bytes`` on one stream event holds exactly at the limit, however the bytes are
chunked (review round 20, c).

The reader counted a line not yet ended whole, its ``data: `` included, but an ended line by its value:
an event whose data was exactly the limit was read when its line came in one chunk and refused
(EventTooLarge, so TRUNCATED(response_too_large)) when a chunk ended inside it. Now a line holds the
same however it was split (``sse._held_with``): exactly at the limit is read, one character over is
not, at every cut.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from callbound.adapters import get
from callbound.adapters.base import StreamCaps
from callbound.adapters.sse import RawEvent, SSEReader
from callbound.adapters.stream import StreamFeed
from callbound.core.errors import EventTooLarge
from callbound.core.types import Finish


def _read(limit: int | None, chunks: list[bytes]) -> tuple[list[RawEvent], bool]:
    """The events read and whether the reader stopped with EventTooLarge."""
    reader = SSEReader(limit)
    out: list[RawEvent] = []
    try:
        for chunk in chunks:
            reader.read_into(chunk, None, out)
    except EventTooLarge:
        return out, True
    out.extend(reader.close_frames())
    return out, False


def _cuts(raw: bytes, points: list[int]) -> list[bytes]:
    marks = sorted({p for p in points if 0 < p < len(raw)})
    return [raw[a:b] for a, b in zip([0, *marks], [*marks, len(raw)], strict=True)]


@pytest.mark.parametrize("space", [True, False], ids=["data-space", "data-nospace"])
@pytest.mark.parametrize("over", [0, 1], ids=["at-limit", "one-over"])
def test_an_event_exactly_at_the_limit_is_read_at_every_cut_and_one_over_never(
    space: bool, over: int
) -> None:
    value = json.dumps({"type": "x", "text": "é" * 3 + "a" * 40})
    raw = f"event: x\ndata:{' ' if space else ''}{value}\n\n".encode()
    limit = len(value) - over
    for cut in range(len(raw) + 1):
        events, too_large = _read(limit, _cuts(raw, [cut]))
        assert too_large is bool(over), cut
        assert events == ([] if over else [("x", value)]), cut


def test_byte_by_byte_at_the_limit_is_read() -> None:
    value = json.dumps({"type": "x", "pad": "p" * 70})
    raw = f"data: {value}\n\n".encode()
    events, too_large = _read(len(value), [raw[i : i + 1] for i in range(len(raw))])
    assert (events, too_large) == ([(None, value)], False)


_LINE = st.one_of(
    st.tuples(st.just("data"), st.integers(0, 60)),
    st.tuples(st.just("nospace"), st.integers(0, 60)),
    st.tuples(st.just("event"), st.integers(0, 20)),
    st.tuples(st.just("comment"), st.integers(0, 30)),
    st.tuples(st.just("id"), st.integers(0, 10)),
    st.tuples(st.just("blank"), st.just(0)),
)


def _text(kind: str, n: int) -> str:
    return {
        "data": f"data: {'d' * n}",
        "nospace": f"data:{'n' * n}",
        "event": f"event: {'e' * n}",
        "comment": f":{'c' * n}",
        "id": f"id: {'9' * n}",
        "blank": "",
    }[kind]


@settings(max_examples=400, deadline=None)
@given(
    lines=st.lists(_LINE, min_size=1, max_size=14),
    eol=st.sampled_from(["\n", "\r\n", "\r"]),
    limit=st.integers(0, 80),
    points=st.lists(st.integers(0, 1200), max_size=25),
)
def test_how_the_bytes_are_chunked_never_decides_a_cap(
    lines: list[tuple[str, int]], eol: str, limit: int, points: list[int]
) -> None:
    """Any cut of any SSE text reads the same events and trips (or not) at the same place as the
    whole text in one chunk. (A field or comment line longer than the limit by itself is the one
    exception, documented in ``sse``: come whole it is dropped, in pieces it stops the reader.)"""
    assume(all(len(_text(k, n)) <= limit for k, n in lines if k not in ("data", "nospace")))
    raw = ("data: {}" + eol + eol + eol.join(_text(k, n) for k, n in lines) + eol + eol).encode()
    assert _read(limit, _cuts(raw, points)) == _read(limit, [raw])


_CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "note", "status": "completed"}


def _responses(arguments: str) -> tuple[bytes, int]:
    """A Responses stream with one call, and the size of its largest event's data."""
    item = {**_CALL, "arguments": arguments}
    payloads = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {
            "type": "response.completed",
            "response": {"id": "resp_1", "status": "completed", "output": [item], "usage": None},
        },
    ]
    datas = [json.dumps(p) for p in payloads]
    return "".join(f"data: {d}\n\n" for d in datas).encode(), max(len(d) for d in datas)


@pytest.mark.parametrize("over", [0, 1], ids=["at-limit", "one-over"])
def test_a_stream_whose_largest_event_is_the_cap_runs_its_call_at_every_cut(over: int) -> None:
    raw, biggest = _responses(json.dumps({"text": "ü" * 20}))
    caps = StreamCaps(max_body_bytes=biggest - over)
    adapter = get("openai-responses")
    for cut in range(0, len(raw), 7):
        feed = StreamFeed(adapter.stream_assembler(caps), max_event=caps.max_body_bytes)
        for chunk in _cuts(raw, [cut]):
            feed.feed(chunk)
        feed.close()
        turn = feed.finish()
        if over:
            assert (turn.finish, turn.reason, turn.calls) == (Finish.TRUNCATED, "response_too_large", ()), cut
        else:
            assert turn.finish is Finish.TOOL_PROPOSALS, cut
            assert turn.calls[0].arguments == {"text": "ü" * 20}, cut
