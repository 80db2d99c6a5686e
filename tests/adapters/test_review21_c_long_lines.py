"""A comment or other non-data SSE line longer than ``StreamCaps.max_body_bytes`` ends the stream the
same way whether its bytes came in one chunk or in several (review round 21, c).

The reader dropped such a line when it came whole and raised ``EventTooLarge`` (so
TRUNCATED(response_too_large)) when a chunk ended inside it: where the network split the bytes
decided the turn. Now a line of any field counts against the limit the same way: alone for a
comment, ``event:``, ``id:``, ``retry:`` or any other line, with its event's data for a ``data:``
line. A line exactly at the limit is read, one character over stops the reader, at every cut.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
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


LIMIT = 40
BEFORE = '{"n":1}'
AFTER = '{"n":2}'


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize("field", [":", ": keep-alive ", "event: ", "id: ", "retry: ", "junk "])
@pytest.mark.parametrize("over", [0, 1], ids=["at-limit", "one-over"])
def test_a_long_non_data_line_decides_the_same_at_every_cut(field: str, over: int, eol: str) -> None:
    line = field + "x" * (LIMIT + over - len(field))
    assert len(line) == LIMIT + over
    raw = f"data: {BEFORE}{eol}{eol}{line}{eol}data: {AFTER}{eol}{eol}".encode()
    # event: x... names the event that follows (the line is at the limit, so it is read)
    after_name = line[len("event: ") :] if field == "event: " else None
    expected = ([(None, BEFORE)], True) if over else ([(None, BEFORE), (after_name, AFTER)], False)
    for cut in range(len(raw) + 1):
        assert _read(LIMIT, _cuts(raw, [cut])) == expected, cut
    assert _read(LIMIT, [raw[i : i + 1] for i in range(len(raw))]) == expected


@pytest.mark.parametrize("over", [0, 1], ids=["at-limit", "one-over"])
def test_a_long_comment_in_a_stream_is_one_turn_however_chunked(over: int) -> None:
    """Through the transports' feed: a comment one character over the cap is
    TRUNCATED(response_too_large) at every cut, not a completed call when it happened to come whole."""
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "note",
        "arguments": '{"a":1}',
        "status": "completed",
    }
    events = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {
            "type": "response.completed",
            "response": {"id": "resp_1", "status": "completed", "output": [item], "usage": None},
        },
    ]
    datas = [json.dumps(e) for e in events]
    cap = max(len(d) for d in datas)
    comment = ":" + "p" * (cap - 1 + over)
    raw = (f"data: {datas[0]}\n\n{comment}\n" + "".join(f"data: {d}\n\n" for d in datas[1:])).encode()
    caps = StreamCaps(max_body_bytes=cap)
    adapter = get("openai-responses")
    for cut in range(0, len(raw) + 1, 5):
        feed = StreamFeed(adapter.stream_assembler(caps), max_event=caps.max_body_bytes)
        for chunk in _cuts(raw, [cut]):
            feed.feed(chunk)
        feed.close()
        turn = feed.finish()
        if over:
            assert (turn.finish, turn.reason, turn.calls) == (Finish.TRUNCATED, "response_too_large", ()), cut
        else:
            assert turn.finish is Finish.TOOL_PROPOSALS, cut


_LINE = st.one_of(
    st.tuples(st.just("data"), st.integers(0, 60)),
    st.tuples(st.just("nospace"), st.integers(0, 60)),
    st.tuples(st.just("event"), st.integers(0, 60)),
    st.tuples(st.just("comment"), st.integers(0, 90)),
    st.tuples(st.just("id"), st.integers(0, 60)),
    st.tuples(st.just("junk"), st.integers(0, 90)),
    st.tuples(st.just("blank"), st.just(0)),
)


def _text(kind: str, n: int) -> str:
    return {
        "data": f"data: {'d' * n}",
        "nospace": f"data:{'n' * n}",
        "event": f"event: {'e' * n}",
        "comment": f":{'c' * n}",
        "id": f"id: {'9' * n}",
        "junk": "j" * n,
        "blank": "",
    }[kind]


@settings(max_examples=400, deadline=None)
@given(
    lines=st.lists(_LINE, min_size=1, max_size=14),
    eol=st.sampled_from(["\n", "\r\n", "\r"]),
    limit=st.integers(0, 80),
    points=st.lists(st.integers(0, 1200), max_size=25),
)
def test_how_the_bytes_are_chunked_never_decides_a_cap_for_any_line(
    lines: list[tuple[str, int]], eol: str, limit: int, points: list[int]
) -> None:
    """Any cut of any SSE text reads the same events and trips (or not) at the same place as the
    whole text in one chunk, lines of every field longer than the limit included (round 20's
    version of this property had to leave those out)."""
    raw = ("data: {}" + eol + eol + eol.join(_text(k, n) for k, n in lines) + eol + eol).encode()
    assert _read(limit, _cuts(raw, points)) == _read(limit, [raw])
