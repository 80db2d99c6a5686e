"""A hosted shell (OpenAI runs the commands in its container) is not a client action.

Shape from a real response recorded by a public test suite (pydantic-ai cassette
test_openai_responses_hosted_shell_with_uploaded_file): ``status: completed``, three ``shell_call`` items
with ``environment: {"type": "container_reference"}``, only the last with its ``shell_call_output``,
then the final answer. It ended FAILED(UNEXPECTED_TOOL_CALL) because two calls had no output in the same
response; a hosted tool's items travel in the continuation and are never dispatched (D31), so it is
FINAL_TEXT (D1). A shell_call for a local shell (``environment: {"type": "local"}`` or none) without
its output still waits for the client: API_FAILURE(unexpected_tool_call). Ids and text are synthetic.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn

ADAPTER = get("openai-responses")


def _shell_call(n: int, environment: dict[str, Any] | None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": f"sh_{n}",
        "type": "shell_call",
        "call_id": f"call_{n}",
        "action": {"commands": ["ls /mnt/data"], "max_output_length": None, "timeout_ms": None},
        "status": "completed",
    }
    if environment is not None:
        item["environment"] = environment
    return item


def _body(environment: dict[str, Any] | None) -> dict[str, Any]:
    calls = [_shell_call(n, environment) for n in (1, 2, 3)]
    output = {
        "id": "sho_3",
        "type": "shell_call_output",
        "call_id": "call_3",
        "output": [],
        "status": "completed",
    }
    answer = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "2", "annotations": []}],
    }
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-x",
        "output": [*calls, output, answer],
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    }


def _streamed(body: dict[str, Any]) -> ModelTurn:
    events = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
        {"type": "response.completed", "response": body},
    ]
    feed = StreamFeed(ADAPTER.stream_assembler())
    feed.feed("".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode())
    feed.close()
    return feed.finish()


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_a_hosted_shell_turn_is_the_final_answer(streamed: bool) -> None:
    body = _body({"type": "container_reference", "container_id": "cntr_1"})
    turn = _streamed(body) if streamed else ADAPTER.parse_response(json.dumps(body))
    assert (turn.finish, turn.text, turn.calls) == (Finish.FINAL_TEXT, "2", ())
    assert [item["id"] for item in turn.continuation] == ["sh_1", "sh_2", "sh_3", "sho_3", "msg_1"]


@pytest.mark.parametrize("environment", [None, {"type": "local"}], ids=["no-environment", "local"])
def test_a_local_shell_call_without_its_output_still_waits_for_the_client(environment: Any) -> None:
    turn = ADAPTER.parse_response(json.dumps(_body(environment)))
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "unexpected_tool_call")
    assert turn.failure is not None and turn.failure.error_code == "shell_call"
