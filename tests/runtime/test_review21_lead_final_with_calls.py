"""D1: FINAL_TEXT is an explicit completion with no calls.

The five adapters never build a completion that carries calls (Anthropic's end_turn with tool_use blocks
is already API_FAILURE(unknown_stop_reason)), but a custom model client builds its own ModelTurn. One that
said FINAL_TEXT and carried calls ended COMPLETED: the operation claimed success while the calls the model
proposed were dropped, neither run nor answered."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get as get_adapter
from callbound.core.types import Finish


class _Order(BaseModel):
    order_id: str


def _body() -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "m",
        "output": [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "refund",
                "arguments": '{"order_id":"A1"}',
                "status": "completed",
            }
        ],
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }


class _CompletesWithCalls:
    """A custom client whose turn says FINAL_TEXT while it carries the model's call."""

    def __init__(self) -> None:
        self.adapter = get_adapter("openai-responses")
        self.requests = 0

    async def complete(self, body: Any, *, stream: bool, meta: Any, on_progress: Any = None) -> Any:
        self.requests += 1
        turn = self.adapter.parse_response(_body())
        assert turn.calls and turn.finish is Finish.TOOL_PROPOSALS
        return dataclasses.replace(turn, finish=Finish.FINAL_TEXT, raw_stop_reason="completed")


def test_a_completion_carrying_calls_is_not_success_and_runs_nothing() -> None:
    ran: list[str] = []

    def refund(args: _Order, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.order_id)
        return {"refunded": True}

    registry = cb.Registry(
        [
            cb.ToolSpec(
                name="refund",
                description="Refund an order",
                params=_Order,
                handler=refund,
                schema_version="refund-v1",
                risk="read",
                timeout_ms=1000,
            )
        ]
    )
    model = _CompletesWithCalls()
    outcome = cb.Runner(model=model, registry=registry).run_sync("refund A1", tenant="t", subject="u")
    assert outcome.state is cb.State.FAILED
    assert outcome.reason == "UNKNOWN_STOP_REASON"
    assert ran == [] and model.requests == 1
