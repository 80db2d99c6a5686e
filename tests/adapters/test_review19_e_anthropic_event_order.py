"""Anthropic stream: events out of order or an index reused (review round 19, e F1).

A content block index names one block of the message (WIRE.md 3.4: "route deltas by index"). A second
``content_block_start`` for an index already started replaced the block held there: a tool_use that
``CallStarted``/``CallReady`` had announced vanished from the turn without a word while the other call
ran (or, replaced by a text block, the turn read "tool_use with no call"). anthropic-sdk-python's
accumulator cannot read such a stream either (it appends the second block and sends the index's deltas
to the first); it refuses a stream whose first event is not ``message_start`` ("Unexpected event
order") and ignores a second one, which callbound read as a new message (its id, usage and content
blocks replacing the first's). Each is now ``API_FAILURE(malformed_response)``, not retried, its
``failure.error_code`` naming what was wrong, and no call of the turn runs. Checked on the decoded path
and the fast path (compact deltas), whole and byte by byte, and through a run. Ids are synthetic.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import CallReady, CallStarted, Finish, ModelTurn, Progress
from callbound.testing import FakeClock, ScriptedModel, Stream

API = "anthropic-messages"
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": [],
           "stop_reason": None, "usage": {"input_tokens": 9, "output_tokens": 1}}  # fmt: skip
START = {"type": "message_start", "message": MESSAGE}


def tool(index: int, call_id: str, city: str) -> list[dict[str, Any]]:
    block = {"type": "tool_use", "id": call_id, "name": "get_weather", "input": {}}
    return [
        {"type": "content_block_start", "index": index, "content_block": block},
        {"type": "content_block_delta", "index": index,
         "delta": {"type": "input_json_delta", "partial_json": json.dumps({"city": city})}},
        {"type": "content_block_stop", "index": index},
    ]  # fmt: skip


def text(index: int, value: str) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": value}},
        {"type": "content_block_stop", "index": index},
    ]


def end(stop: str = "tool_use") -> list[dict[str, Any]]:
    delta = {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 20}}
    return [delta, {"type": "message_stop"}]


def raw(events: list[dict[str, Any]], compact: bool = True) -> bytes:
    dump = (lambda e: json.dumps(e, separators=(",", ":"))) if compact else json.dumps
    return "".join(f"event: {e['type']}\ndata: {dump(e)}\n\n" for e in events).encode()


def readings(events: list[dict[str, Any]]) -> list[tuple[ModelTurn, list[Progress]]]:
    out = []
    for compact in (True, False):
        data = raw(events, compact)
        for chunks in ([data], [data[i : i + 1] for i in range(len(data))]):
            progress: list[Progress] = []
            feed = StreamFeed(get(API).stream_assembler(), progress.append)
            for chunk in chunks:
                feed.feed(chunk)
            feed.close()
            out.append((feed.finish(), progress))
    return out


def assert_malformed(events: list[dict[str, Any]], code: str) -> None:
    for turn, _ in readings(events):
        assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "malformed_response")
        assert turn.failure is not None and not turn.failure.retryable
        assert turn.failure.error_code == code
        assert not turn.executable


def test_a_second_tool_use_at_a_started_index_drops_no_call_silently() -> None:
    events = [START, *tool(0, "toolu_a", "Oslo"), *tool(0, "toolu_b", "Rome"), *end()]
    assert_malformed(events, "block_index_reused")
    for _, progress in readings(events):
        # what progress said stays true: toolu_a was announced ready; the turn fails, nothing runs
        assert CallReady("toolu_a") in progress


def test_a_text_block_at_the_index_of_a_call_does_not_make_the_call_vanish() -> None:
    # Before: API_FAILURE(missing_tool_calls), as if the model had proposed no call.
    assert_malformed([START, *tool(0, "toolu_a", "Oslo"), *text(0, "done"), *end()], "block_index_reused")


def test_a_reused_text_index_fails_a_final_answer_too() -> None:
    assert_malformed([START, *text(0, "Hel"), *text(0, "lo"), *end("end_turn")], "block_index_reused")


def test_a_stream_without_message_start_is_malformed() -> None:
    assert_malformed([*tool(0, "toolu_a", "Oslo"), *end()], "message_start_missing")


def test_a_second_message_start_is_malformed() -> None:
    again = {"type": "message_start", "message": {**MESSAGE, "id": "msg_2", "content": [
        {"type": "tool_use", "id": "toolu_x", "name": "get_weather", "input": {"city": "Paris"}}]}}  # fmt: skip
    assert_malformed([START, *tool(0, "toolu_a", "Oslo"), again, *end()], "message_start_repeated")


NOISE = [{"type": "ping"}, {"type": "content_block_stop", "index": 7}, {"type": "brand_new"}]


@pytest.mark.parametrize(
    "events",
    [
        [START, *tool(0, "toolu_a", "Oslo"), *tool(1, "toolu_b", "Rome"), *end()],
        # a ping, an unknown event and a stop for an index never started change nothing
        [START, *NOISE, *tool(0, "toolu_a", "Oslo"), *tool(1, "toolu_b", "Rome"), *end()],
    ],
)
def test_well_ordered_streams_still_run(events: list[dict[str, Any]]) -> None:
    for turn, progress in readings(events):
        assert turn.finish is Finish.TOOL_PROPOSALS
        assert [(c.call_id, c.arguments) for c in turn.calls] == [
            ("toolu_a", {"city": "Oslo"}),
            ("toolu_b", {"city": "Rome"}),
        ]
        assert [p for p in progress if isinstance(p, CallStarted | CallReady)] == [
            CallStarted("toolu_a", "get_weather"),
            CallReady("toolu_a"),
            CallStarted("toolu_b", "get_weather"),
            CallReady("toolu_b"),
        ]


class City(BaseModel):
    city: str


def test_a_run_runs_no_call_of_a_stream_with_a_reused_index() -> None:
    ran: list[str] = []

    def handler(args: City, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.city)
        return {"ok": True}

    spec = cb.ToolSpec(name="get_weather", description="d", params=City, handler=handler, schema_version="1")
    stream = Stream(raw([START, *tool(0, "toolu_a", "Oslo"), *tool(0, "toolu_b", "Rome"), *end()]))
    runner = cb.Runner(
        model=ScriptedModel(API, [stream]),
        registry=cb.Registry([spec]),
        clock=FakeClock(),
        settings={"stream": True},
    )
    out = runner.run_sync("go", tenant="t", subject="s")
    assert out.state.value == "FAILED"
    assert ran == []
