"""Review round 19, a F3: a Responses call that the terminal event finishes is ready there.

A call whose ``response.output_item.done`` never comes is finished by its
``function_call_arguments.done`` or by the terminal snapshot holding it (a compatible server's
stream; ``openai_responses_stream``): the turn runs it. CallReady came only with an output_item.done,
so for such a call it never came: a user interface showed the call still being prepared while it ran
(docs/reference.md: CallReady comes "before anything runs"). It now comes with the terminal event when
the response completed and the call is finished, as Chat's come with ``[DONE]``; not when the
response is incomplete or failed, nor for a call still unfinished. A snapshot naming another call id
for such a call than its added item is ``conflicting_call`` (F1). Ids and arguments are synthetic.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.core.types import CallReady, Finish, ModelTurn, Progress

from .streaming import fed

ARGS = '{"city":"Oslo"}'
ADDED = {"type": "function_call", "id": "fc_1", "call_id": "call_A", "name": "get_weather", "arguments": "",
         "status": "in_progress"}  # fmt: skip


def _read(
    snapshot: list[dict[str, Any]], *, args_done: bool = True, terminal: str = "completed"
) -> tuple[ModelTurn, list[Progress]]:
    response: dict[str, Any] = {"id": "resp_1", "status": terminal, "output": snapshot,
                                "usage": {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12}}  # fmt: skip
    if terminal == "incomplete":
        response["incomplete_details"] = {"reason": "max_output_tokens"}
    events = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": ADDED},
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 0,
            "delta": ARGS,
        },
    ]
    if args_done:
        events.append(
            {
                "type": "response.function_call_arguments.done",
                "item_id": "fc_1",
                "output_index": 0,
                "arguments": ARGS,
            }
        )
    events.append({"type": f"response.{terminal}", "response": response})
    raw = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
    return fed(get("openai-responses"), raw)


@pytest.mark.parametrize(
    ("snapshot", "args_done"),
    [
        ([], True),  # finished by function_call_arguments.done
        ([{**ADDED, "arguments": ARGS, "status": "completed"}], False),  # finished by the snapshot
        ([{**ADDED, "arguments": ARGS, "status": "completed"}], True),
    ],
)
def test_a_call_the_terminal_event_finishes_is_ready_before_it_runs(
    snapshot: list[dict[str, Any]], args_done: bool
) -> None:
    turn, progress = _read(snapshot, args_done=args_done)
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [(c.call_id, c.arguments) for c in turn.calls] == [("call_A", {"city": "Oslo"})]
    assert [p for p in progress if isinstance(p, CallReady)] == [CallReady("call_A")]
    assert progress[-1] == CallReady("call_A")


def test_a_call_never_finished_is_not_ready() -> None:
    turn, progress = _read([], args_done=False)
    assert turn.finish is Finish.TRUNCATED and turn.reason == "call_incomplete"
    assert not any(isinstance(p, CallReady) for p in progress)


def test_a_call_the_snapshot_says_is_unfinished_is_not_ready() -> None:
    turn, progress = _read([{**ADDED, "arguments": ARGS}], args_done=False)
    assert not turn.executable
    assert not any(isinstance(p, CallReady) for p in progress)


def test_an_incomplete_response_readies_no_call() -> None:
    turn, progress = _read([], terminal="incomplete")
    assert turn.finish is Finish.TRUNCATED and not turn.executable
    assert not any(isinstance(p, CallReady) for p in progress)


def test_a_snapshot_naming_another_call_id_runs_no_call_and_readies_none() -> None:
    turn, progress = _read(
        [{**ADDED, "call_id": "call_B", "arguments": ARGS, "status": "completed"}], args_done=False
    )
    assert turn.finish is Finish.API_FAILURE
    assert turn.failure is not None and turn.failure.error_code == "conflicting_call"
    assert not any(isinstance(p, CallReady) for p in progress)
