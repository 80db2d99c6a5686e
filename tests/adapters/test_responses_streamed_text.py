"""Responses streams whose message text comes only in output_text deltas.

OpenAI's done items (and terminal snapshot) carry each message's text whole, and callbound takes it from
there (WIRE.md 1.6). Some OpenAI-compatible servers send a done item and a snapshot without content: the
shape mirrors a public recording of one (an ``output_item.done`` of ``{"id", "type": "message"}`` only, a
``response.completed`` without status, id or output). The answer must not be lost as an empty final text,
and the item sent back must be a message the API can read (role and content), as a plain body's is.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn

MSG = "msg_1"


def _turn(events: list[dict[str, Any]], *, bytewise: bool = False) -> ModelTurn:
    raw = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
    feed = StreamFeed(get("openai-responses").stream_assembler())
    for chunk in [raw[i : i + 1] for i in range(len(raw))] if bytewise else [raw]:
        feed.feed(chunk)
    feed.close()
    return feed.finish()


def _deltas(*texts: str, item_id: str = MSG, **where: Any) -> list[dict[str, Any]]:
    return [{"type": "response.output_text.delta", "item_id": item_id, **where, "delta": t} for t in texts]


def _compatible(*texts: str) -> list[dict[str, Any]]:
    return [
        {"type": "response.created", "response": {"id": "resp_1", "model": "compat-1"}},
        {"type": "response.output_item.added", "output_index": 0, "item": {"id": MSG, "type": "message"}},
        *_deltas(*texts),
        {"type": "response.output_item.done", "output_index": 0, "item": {"id": MSG, "type": "message"}},
        {"type": "response.completed", "response": {"usage": {"input_tokens": 28, "output_tokens": 21}}},
    ]


@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])
def test_text_only_in_deltas_is_the_answer(bytewise: bool) -> None:
    turn = _turn(_compatible("Code", " in", " silence,\n", "Bugs."), bytewise=bytewise)
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "Code in silence,\nBugs.")
    assert turn.response_id == "resp_1"
    (item,) = turn.continuation
    assert item == {
        "id": MSG,
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Code in silence,\nBugs.", "annotations": []}],
    }


def test_a_character_split_into_surrogate_halves_over_two_deltas_is_rejoined() -> None:
    # "😀" (U+1F600) as two escaped surrogate halves, each in its own delta, as JSON text allows
    raw_events = _compatible("a", "b")
    lines = [json.dumps(e) for e in raw_events]
    lines[2] = lines[2].replace('"delta": "a"', '"delta": "\\ud83d"')
    lines[3] = lines[3].replace('"delta": "b"', '"delta": "\\ude00"')
    feed = StreamFeed(get("openai-responses").stream_assembler())
    feed.feed("".join(f"data: {line}\n\n" for line in lines).encode())
    feed.close()
    turn = feed.finish()
    assert turn.text == "\U0001f600"
    json.dumps(list(turn.continuation), ensure_ascii=False).encode()  # encodable: no lone surrogate


def test_the_done_item_text_wins_over_the_deltas() -> None:
    events = _compatible("partial")
    done = {"id": MSG, "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "Final.", "annotations": []}]}  # fmt: skip
    events[3] = {"type": "response.output_item.done", "output_index": 0, "item": done}
    turn = _turn(events)
    assert turn.text == "Final."
    assert turn.continuation == (done,)


def test_the_snapshot_text_wins_when_no_done_item_came() -> None:
    events = _compatible("partial")
    snap = {"id": MSG, "type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": "From the snapshot.", "annotations": []}]}  # fmt: skip
    del events[3]
    events[-1] = {
        "type": "response.completed",
        "response": {"id": "resp_1", "status": "completed", "output": [snap]},
    }
    assert _turn(events).text == "From the snapshot."


def test_output_text_done_replaces_its_deltas() -> None:
    events = _compatible("Hel", "lo")
    events.insert(
        4, {"type": "response.output_text.done", "item_id": MSG, "content_index": 0, "text": "Hello!"}
    )
    assert _turn(events).text == "Hello!"


def test_two_parts_keep_their_order() -> None:
    events = _compatible()
    events[2:2] = [
        *_deltas("second", content_index=1, output_index=0),
        *_deltas("first", content_index=0, output_index=0),
    ]
    turn = _turn(events)
    (item,) = turn.continuation
    assert [p["text"] for p in item["content"]] == ["first", "second"]


def test_a_message_without_text_and_without_deltas_is_left_as_it_came() -> None:
    turn = _turn(_compatible())
    assert turn.text == ""
    assert turn.continuation == ({"id": MSG, "type": "message"},)
