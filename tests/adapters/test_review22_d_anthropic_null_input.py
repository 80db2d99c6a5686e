"""Review 22 (d): an Anthropic ``tool_use`` whose ``input`` is ``null`` reads the same plain and streamed.

Streamed, ``null`` as the block's ``input_json`` text made the call refused (D5) and the block go back as
``{"INVALID_JSON": "null"}``, the turn's other calls running; the same ``input: null`` in a plain body
was kept as null, so the block sent back failed ``ToolUseBlockParam`` (input: a required object) and the
whole turn ended ``API_FAILURE(malformed_response)``, none of its calls run. A ``null`` is a value the
model wrote: both now refuse that call alone and send it back wrapped. A block with no ``input`` at all
is still ``malformed_response`` (tests/adapters/test_review21_a_object_arguments.py).
"""

from __future__ import annotations

import json
from typing import Any

from callbound.adapters import get
from callbound.core.types import Finish, ModelTurn
from tests.adapters import streaming

ANTHROPIC = get("anthropic-messages")
GOOD = {"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": {"order_id": "A1"}}
NULL = {"type": "tool_use", "id": "toolu_2", "name": "get_order", "input": None}


def _message(content: list[dict[str, Any]], stop: str | None = "tool_use") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 3},
    }


def _streamed() -> ModelTurn:
    events: list[dict[str, Any]] = [{"type": "message_start", "message": _message([], stop=None)}]
    for i, block in enumerate((GOOD, NULL)):
        events.append({"type": "content_block_start", "index": i, "content_block": {**block, "input": {}}})
        text = json.dumps(block["input"], separators=(",", ":"))
        delta = {"type": "input_json_delta", "partial_json": text}
        events.append({"type": "content_block_delta", "index": i, "delta": delta})
        events.append({"type": "content_block_stop", "index": i})
    events.append(
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}}
    )
    events.append({"type": "message_stop"})
    raw = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    return streaming.fed(ANTHROPIC, raw)[0]


def test_null_input_is_refused_alone_and_goes_back_wrapped_plain_and_streamed() -> None:
    plain = ANTHROPIC.parse_response(json.dumps(_message([GOOD, NULL])).encode())
    streamed = _streamed()
    for turn in (plain, streamed):
        assert turn.finish is Finish.TOOL_PROPOSALS
        good, null = turn.calls
        assert good.arguments == {"order_id": "A1"} and good.arguments_error is None  # runs
        assert null.arguments is None and null.arguments_error and null.arguments_raw == "null"  # refused
    assert ANTHROPIC.turn_items(plain) == ANTHROPIC.turn_items(streamed)
    assert ANTHROPIC.turn_items(plain)[0]["content"][1]["input"] == {"INVALID_JSON": "null"}
    assert plain.calls[1].arguments_error == streamed.calls[1].arguments_error


def test_the_answer_passes_the_request_guard() -> None:
    turn = ANTHROPIC.parse_response(json.dumps(_message([GOOD, NULL])).encode())
    results = ANTHROPIC.result_items(
        turn,
        [
            (turn.calls[0], {"ok": True, "data": {"status": "shipped"}}),
            (turn.calls[1], {"ok": False, "error": {"code": "INVALID_ARGUMENTS"}}),
        ],
    )
    items = [*ANTHROPIC.initial_items("Order A1?", []), *ANTHROPIC.turn_items(turn), *results]
    body = ANTHROPIC.build_request(
        items=items, tools=[], settings={"model": "m"}, instructions=None, stream=False
    )
    ANTHROPIC.check_request(body, previous=turn)
