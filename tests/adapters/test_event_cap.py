"""``StreamCaps.max_body_bytes``: callbound never holds more than that of one response at once.

A plain body over it is not read further, and a stream event (or a line not yet ended) that grows past
it stops the stream. Either way the turn is TRUNCATED(response_too_large) with no calls, the
operation ends INCOMPLETE(RESPONSE_TOO_LARGE), and the request is not retried: a server that sends one
endless line or event cannot make callbound buffer it all. Events and bodies within the cap read
exactly as before.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.adapters.base import DEFAULT_MAX_BODY_BYTES, StreamCaps
from callbound.adapters.sse import SSEReader
from callbound.adapters.stream import StreamFeed
from callbound.core.errors import EventTooLarge, ProtocolViolation, UsageError
from callbound.core.types import Finish
from callbound.testing import FakeClock, ScriptedModel, Stream
from callbound.transports import feed_stream
from tests.docs.stop_reason_bodies import BUILDERS
from tests.runtime.test_every_api_loop import CALLS, FINAL

APIS = list(BUILDERS)


def _frames(reader: SSEReader, chunks: list[bytes]) -> list[tuple[str | None, str]]:
    out = []
    for chunk in chunks:
        out.extend(reader.feed_frames(chunk))
    out.extend(reader.close_frames())
    return out


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


# ---- the caps themselves ---------------------------------------------------------------------------


def test_default_body_cap_leaves_room_for_the_argument_caps() -> None:
    caps = StreamCaps()
    assert caps.max_body_bytes == DEFAULT_MAX_BODY_BYTES == 64 << 20
    assert caps.max_body_bytes >= 4 * caps.max_response_bytes


@pytest.mark.parametrize("field", ["max_call_bytes", "max_response_bytes", "max_body_bytes"])
@pytest.mark.parametrize("bad", [-1, 1.5, "1024", True, None])
def test_a_cap_that_is_not_a_byte_count_is_refused(field: str, bad: Any) -> None:
    with pytest.raises(UsageError, match=f"StreamCaps.{field}"):
        StreamCaps(**{field: bad})


# ---- the reader -------------------------------------------------------------------------------------

_EVENT = st.tuples(st.booleans(), st.integers(0, 120))  # (named, length of the payload's padding)


def _event(named: bool, pad: int) -> tuple[str, bytes]:
    data = json.dumps({"type": "t", "pad": "x" * pad})
    head = "event: t\n" if named else ""
    return data, f"{head}data: {data}\n\n".encode()


@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(_EVENT, min_size=1, max_size=12),
    limit=st.integers(0, 200),
    cuts=st.lists(st.integers(0, 3000), max_size=20),
)
def test_sse_events_raise_exactly_when_one_outgrows_the_limit(
    events: list[tuple[bool, int]], limit: int, cuts: list[int]
) -> None:
    """Over the limit by its data always raises, however the bytes are cut; within it by the data
    plus the ``data: `` a line not yet ended still carries, never, and the events are the same as
    without a limit."""
    built = [_event(named, pad) for named, pad in events]
    raw = b"".join(b for _, b in built)
    chunks = _cut(raw, cuts)
    biggest = max(len(d) for d, _ in built)
    if biggest > limit:
        with pytest.raises(EventTooLarge) as err:
            _frames(SSEReader(limit), chunks)
        assert err.value.limit == limit and isinstance(err.value, ProtocolViolation)
    elif biggest + len("data: ") <= limit:
        assert _frames(SSEReader(limit), chunks) == _frames(SSEReader(), chunks)


@settings(max_examples=200, deadline=None)
@given(
    pads=st.lists(st.integers(0, 120), min_size=1, max_size=12),
    limit=st.integers(0, 200),
    cuts=st.lists(st.integers(0, 3000), max_size=20),
)
def test_json_lines_payloads_raise_exactly_when_one_outgrows_the_limit(
    pads: list[int], limit: int, cuts: list[int]
) -> None:
    lines = [json.dumps({"pad": "x" * p}) for p in pads]
    chunks = _cut("".join(f"{line}\n" for line in lines).encode(), cuts)
    if max(len(line) for line in lines) > limit:
        with pytest.raises(EventTooLarge):
            _frames(SSEReader(limit), chunks)
    else:
        assert _frames(SSEReader(limit), chunks) == _frames(SSEReader(), chunks)


def test_many_data_lines_of_one_event_count_together() -> None:
    reader = SSEReader(100)
    reader.feed_frames(b"data: " + b"1" * 60 + b"\n")
    with pytest.raises(EventTooLarge):
        reader.feed_frames(b"data: " + b"2" * 60 + b"\n")


def test_an_endless_line_stops_the_reader_once_it_passes_the_limit() -> None:
    reader = SSEReader(10_000)
    fed = 0
    with pytest.raises(EventTooLarge):
        for _ in range(1_000):
            reader.feed_frames(b"data: " if fed == 0 else b"x" * 1024)
            fed += 1
    assert fed == 10  # 6 + 9 x 1024 characters held; the 10th piece went over


# ---- StreamFeed and the transports' stream path ------------------------------------------------------

_FC = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}"}


def _responses_events(*payloads: dict[str, Any]) -> bytes:
    return b"".join(f"event: {p['type']}\ndata: {json.dumps(p)}\n\n".encode() for p in payloads)


def test_an_oversized_event_after_a_complete_call_drops_the_call() -> None:
    """The call was complete, but the stream never reached its terminal event within the cap."""
    done = _responses_events(
        {"type": "response.output_item.added", "output_index": 0, "item": {**_FC, "arguments": ""}},
        {"type": "response.output_item.done", "output_index": 0, "item": {**_FC, "status": "completed"}},
    )
    big = _responses_events({"type": "response.output_text.delta", "delta": "y" * 5_000})
    feed = StreamFeed(get("openai-responses").stream_assembler(), max_event=4_096)
    feed.feed(done)
    assert not feed.aborted
    feed.feed(big)
    assert feed.aborted and feed.too_large
    feed.feed(b"event: x\ndata: {}\n\n")  # ignored from here on
    feed.close()
    turn = feed.finish()
    assert (turn.finish, turn.reason, turn.calls, turn.continuation) == (
        Finish.TRUNCATED,
        "response_too_large",
        (),
        (),
    )
    assert turn.failure is not None and turn.failure.kind == "byte_cap" and not turn.failure.retryable


async def test_feed_stream_stops_reading_an_endless_event() -> None:
    pulled = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal pulled
        pulled += 1
        yield b'data: {"type":"response.created","pad":"'
        while True:
            pulled += 1
            yield b"z" * 65_536

    caps = StreamCaps(max_body_bytes=1 << 20)
    turn = await asyncio.wait_for(
        feed_stream(get("openai-responses"), endless(), model=None, on_progress=None, caps=caps), timeout=10
    )
    assert turn.reason == "response_too_large"
    # the head (40 characters) and 16 pieces of 64 KiB: the 16th takes the line past 1 MiB
    assert pulled == 17


# ---- through the Runner: every API, streamed and plain -----------------------------------------------


class GetOrder(BaseModel):
    order_id: str


def _runner(model: ScriptedModel, ran: list[str]) -> cb.Runner:
    def get_order(args: GetOrder, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.order_id)
        return {"order_id": args.order_id}

    spec = cb.ToolSpec(
        name="get_order", description="d", params=GetOrder, handler=get_order, schema_version="1", risk="read"
    )
    return cb.Runner(model=model, registry=cb.Registry([spec]), clock=FakeClock(), settings={"stream": True})


@pytest.mark.parametrize("api", APIS)
def test_a_stream_with_an_oversized_event_ends_incomplete_and_is_not_retried(api: str) -> None:
    big = "data: " + json.dumps({"type": "padding", "pad": "p" * 3_000}) + "\n\n"
    model = ScriptedModel(api, [Stream(big, chunk_size=500)], caps=StreamCaps(max_body_bytes=2_048))
    ran: list[str] = []
    out = _runner(model, ran).run_sync("where is A1?", tenant="t", subject="s")
    assert (out.state, out.reason) == ("INCOMPLETE", "RESPONSE_TOO_LARGE")
    assert len(model.requests) == 1 and ran == []


@pytest.mark.parametrize("api", APIS)
def test_a_plain_body_over_the_cap_ends_incomplete_and_one_within_it_runs(api: str) -> None:
    body = json.dumps(BUILDERS[api](CALLS[api])).encode()
    final = json.dumps(BUILDERS[api](FINAL[api])).encode()
    ran: list[str] = []
    over = ScriptedModel(api, [body, final], caps=StreamCaps(max_body_bytes=len(body) - 1))
    out = _runner(over, ran).run_sync("where is A1?", tenant="t", subject="s")
    assert (out.state, out.reason) == ("INCOMPLETE", "RESPONSE_TOO_LARGE")
    assert len(over.requests) == 1 and ran == []
    at = ScriptedModel(api, [body, final], caps=StreamCaps(max_body_bytes=max(len(body), len(final))))
    assert _runner(at, ran).run_sync("where is A1?", tenant="t", subject="s").state == "COMPLETED"
    assert len(ran) == 1
