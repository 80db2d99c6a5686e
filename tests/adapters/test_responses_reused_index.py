"""A Responses stream that reuses an output_index for a second item.

A compatible server's emitter (Ollama's Responses converter, before its fix) numbered the function calls
of each chunk from 0 again, so two calls streamed in two chunks both carry ``output_index: 0``; its
terminal snapshot lists both. The events then overwrite one call with the other: read by index, the
first call was lost (not run, not sent back) though the model made it. The snapshot decides instead, as
the same response read as a plain body; with no snapshot to decide, no call runs (the turn is unfinished).
The events here follow that emitter; ids and arguments are synthetic.
"""

from __future__ import annotations

import json
from typing import Any

from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn


def _call(item_id: str, call_id: str, city: str) -> dict[str, Any]:
    arguments = json.dumps({"city": city}, separators=(",", ":"))
    return {"id": item_id, "type": "function_call", "status": "completed", "call_id": call_id,
            "name": "get_weather", "arguments": arguments}  # fmt: skip


CALLS = [_call("fc_1", "call_a", "Paris"), _call("fc_2", "call_b", "Oslo")]


def _events(snapshot: list[dict[str, Any]]) -> list[dict[str, Any]]:
    evs: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}
    ]
    for done in CALLS:  # each call in its own chunk, both at output_index 0
        added = {**done, "status": "in_progress", "arguments": ""}
        evs += [
            {"type": "response.output_item.added", "output_index": 0, "item": added},
            {
                "type": "response.function_call_arguments.delta",
                "item_id": done["id"],
                "output_index": 0,
                "delta": done["arguments"],
            },
            {
                "type": "response.function_call_arguments.done",
                "item_id": done["id"],
                "output_index": 0,
                "arguments": done["arguments"],
            },
            {"type": "response.output_item.done", "output_index": 0, "item": done},
        ]
    usage = {"input_tokens": 10, "output_tokens": 20, "total_tokens": 30}
    terminal = {"id": "resp_1", "status": "completed", "output": snapshot, "usage": usage}
    evs.append({"type": "response.completed", "response": terminal})
    return evs


def _turn(events: list[dict[str, Any]]) -> ModelTurn:
    raw = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    feed = StreamFeed(get("openai-responses").stream_assembler())
    feed.feed(raw)
    feed.close()
    return feed.finish()


def test_both_calls_come_from_the_snapshot_in_its_order() -> None:
    turn = _turn(_events(CALLS))
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [(c.call_id, c.arguments) for c in turn.calls] == [
        ("call_a", {"city": "Paris"}),
        ("call_b", {"city": "Oslo"}),
    ]
    assert [item["id"] for item in turn.continuation] == ["fc_1", "fc_2"]
    plain = get("openai-responses").parse_response(
        json.dumps({**_events(CALLS)[-1]["response"], "object": "response"})
    )
    assert [c.call_id for c in plain.calls] == [c.call_id for c in turn.calls]
    assert turn.continuation == plain.continuation


def test_without_a_snapshot_no_call_runs() -> None:
    turn = _turn(_events([]))
    assert turn.finish is Finish.TRUNCATED
    assert turn.reason == "call_incomplete"


def test_a_stream_that_rotates_ids_at_one_index_is_not_a_reuse() -> None:
    """Each index announced once, its done item under another id (a gateway that rotates ids): the done
    item is that index's item, as before; the snapshot, empty here, is not needed."""
    added = {**CALLS[0], "id": "rotated-1", "status": "in_progress", "arguments": ""}
    evs = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        {"type": "response.output_item.done", "output_index": 0, "item": CALLS[0]},
        {"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": []}},
    ]
    turn = _turn(evs)
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [c.call_id for c in turn.calls] == ["call_a"]
