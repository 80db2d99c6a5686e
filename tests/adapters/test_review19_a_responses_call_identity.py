"""Review round 19, a F1: a Responses stream whose output_item.done names another call than its
output_item.added item (another call_id, or another tool) cannot be read whole.

CallStarted named the added item's call; the done item's ran: a user interface showed one call
prepared and ready while another ran, and its result answered an id progress never named.
openai-python's own accumulator (``ResponseStreamState``, ``_output_identity``) refuses such a stream:
"Completed output item identity changed.". So does callbound now: API_FAILURE(malformed_response),
``failure.error_code`` ``conflicting_call``, not retried, and no CallReady for the call, as for a done
item and a terminal snapshot that name different calls for one item (openai-python's final response is
the snapshot's, callbound's turn the done item's). An item id that changes is still the same call (a
gateway that rotates ids, ``test_responses_reused_index``). Ids and arguments are synthetic.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.core.types import CallReady, CallStarted, Finish, ModelTurn, Progress

from .streaming import fed

ARGS = '{"city":"Oslo"}'


def _item(
    call_id: str | None, *, name: str = "get_weather", item_id: str = "fc_1", **kw: Any
) -> dict[str, Any]:
    item = {"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": ARGS,
            "status": "completed", **kw}  # fmt: skip
    if call_id is None:
        del item["call_id"]
    return item


def _events(
    added: dict[str, Any], done: dict[str, Any], snapshot: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    added = {**added, "arguments": "", "status": "in_progress"}
    usage = {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12}
    return [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": ARGS},
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": ARGS},
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed",
         "response": {"id": "resp_1", "status": "completed", "output": snapshot, "usage": usage}},
    ]  # fmt: skip


def _read(events: list[dict[str, Any]]) -> tuple[ModelTurn, list[Progress]]:
    raw = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    return fed(get("openai-responses"), raw)


def _conflicting(turn: ModelTurn) -> None:
    assert turn.finish is Finish.API_FAILURE
    assert turn.reason == "malformed_response"
    assert turn.failure is not None and turn.failure.error_code == "conflicting_call"
    assert turn.failure.retryable is False
    assert not turn.executable
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (5, 7)  # still paid for (D27)


@pytest.mark.parametrize("empty_snapshot", [False, True])
def test_a_done_item_with_another_call_id_runs_no_call(empty_snapshot: bool) -> None:
    done = _item("call_B")
    turn, progress = _read(_events(_item("call_A"), done, [] if empty_snapshot else [done]))
    _conflicting(turn)
    assert not any(isinstance(p, CallReady) for p in progress)
    assert [p for p in progress if isinstance(p, CallStarted)] == [CallStarted("call_A", "get_weather")]


def test_a_done_item_naming_another_tool_runs_no_call() -> None:
    done = _item("call_A", name="delete_account")
    turn, progress = _read(_events(_item("call_A"), done, [done]))
    _conflicting(turn)
    assert not any(isinstance(p, CallReady) for p in progress)


def test_an_added_item_without_call_id_and_a_done_item_with_one_runs_no_call() -> None:
    """Progress named the call by its D7 id (resp_1:0); the turn would answer call_B."""
    done = _item("call_B")
    turn, progress = _read(_events(_item(None), done, [done]))
    _conflicting(turn)
    assert [p.call_id for p in progress if isinstance(p, CallStarted)] == ["resp_1:0"]
    assert not any(isinstance(p, CallReady) for p in progress)


def test_a_snapshot_naming_another_call_id_for_the_item_runs_no_call() -> None:
    turn, _ = _read(_events(_item("call_A"), _item("call_A"), [_item("call_C")]))
    _conflicting(turn)


def test_a_snapshot_naming_another_tool_for_the_item_runs_no_call() -> None:
    turn, _ = _read(_events(_item("call_A"), _item("call_A"), [_item("call_A", name="delete_account")]))
    _conflicting(turn)


def test_the_same_call_throughout_runs() -> None:
    """The control: added, done and snapshot agree; a rotated item id is still the same call."""
    for done in (_item("call_A"), _item("call_A", item_id="fc_rotated")):
        turn, progress = _read(_events(_item("call_A"), done, [done]))
        assert turn.finish is Finish.TOOL_PROPOSALS
        assert [(c.call_id, c.name, c.arguments) for c in turn.calls] == [
            ("call_A", "get_weather", {"city": "Oslo"})
        ]
        assert [p for p in progress if isinstance(p, CallReady)] == [CallReady("call_A")]


def test_an_added_item_without_a_name_takes_the_done_items() -> None:
    """CallStarted showed no name (""): the done item's name is news, not another tool."""
    done = _item("call_A")
    turn, _ = _read(_events(_item("call_A", name=""), done, [done]))
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [c.name for c in turn.calls] == ["get_weather"]
