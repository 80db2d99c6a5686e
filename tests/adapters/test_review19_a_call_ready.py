"""Review round 19, a F2: CallReady only where the provider said the call's arguments are complete.

docs/reference.md: ``CallReady(call_id)`` comes "once the provider says the call's arguments are
complete (its own done event; openai-chat, which has none, at the stream's end)". It also came for a
Chat call whose stream ended with ``finish_reason: "length"`` (or ``content_filter``): the output was
cut, its arguments are not complete, and the turn (TRUNCATED, REFUSAL) runs none of them; and for a
Responses ``output_item.done`` whose item says ``status: "incomplete"``, which the turn reads as
TRUNCATED(call_incomplete). A user interface showed such a call "ready" though it never ran. Ids and
arguments are synthetic.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.core.types import CallReady, CallStarted, Finish, ModelTurn, Progress

from .streaming import fed


def _sse(events: list[Any]) -> bytes:
    return "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events).encode()


def _chat(finish_reason: str) -> tuple[ModelTurn, list[Progress]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-x",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip

    call = {
        "index": 0,
        "id": "call_A",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    events: list[Any] = [
        chunk({"role": "assistant", "tool_calls": [call]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]}),
        chunk({}, finish_reason),
        "[DONE]",
    ]
    return fed(get("openai-chat"), _sse(events))


@pytest.mark.parametrize(
    ("finish_reason", "finish"), [("length", Finish.TRUNCATED), ("content_filter", Finish.REFUSAL)]
)
def test_a_chat_call_cut_by_the_finish_reason_is_never_ready(finish_reason: str, finish: Finish) -> None:
    turn, progress = _chat(finish_reason)
    assert turn.finish is finish and not turn.executable
    assert CallStarted("call_A", "get_weather") in progress
    assert not any(isinstance(p, CallReady) for p in progress)


@pytest.mark.parametrize("finish_reason", ["tool_calls", "stop"])
def test_a_chat_call_the_model_ended_is_ready_at_done(finish_reason: str) -> None:
    turn, progress = _chat(finish_reason)
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert progress[-1] == CallReady("call_A")


def _responses(status: str, terminal: str) -> tuple[ModelTurn, list[Progress]]:
    args = '{"city":"Oslo"}'
    added = {"type": "function_call", "id": "fc_1", "call_id": "call_A", "name": "get_weather", "arguments": "",
             "status": "in_progress"}  # fmt: skip
    done = {**added, "arguments": args, "status": status}
    response = {"id": "resp_1", "status": terminal.split(".")[1], "output": [done],
                "usage": {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12}}  # fmt: skip
    if terminal == "response.incomplete":
        response["incomplete_details"] = {"reason": "max_output_tokens"}
    events = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 0,
            "delta": args,
        },
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": terminal, "response": response},
    ]
    return fed(get("openai-responses"), _sse(events))


@pytest.mark.parametrize("terminal", ["response.completed", "response.incomplete"])
def test_a_responses_done_item_that_says_incomplete_is_never_ready(terminal: str) -> None:
    turn, progress = _responses("incomplete", terminal)
    assert turn.finish is Finish.TRUNCATED and not turn.executable
    assert CallStarted("call_A", "get_weather") in progress
    assert not any(isinstance(p, CallReady) for p in progress)


def test_a_responses_done_item_that_says_completed_is_ready() -> None:
    turn, progress = _responses("completed", "response.completed")
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert progress[-1] == CallReady("call_A")
