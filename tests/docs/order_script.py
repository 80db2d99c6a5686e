"""One read tool, get_order, and the Responses bodies that script a run of it, for the docs' tests that
drive a runner through ScriptedModel (test_review20_g_readme, test_review20_g_testing)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

import callbound as cb


class Order(BaseModel):
    order_id: str


def call_response(rid: str) -> dict[str, Any]:
    """A Responses body ``rid`` proposing get_order(A1)."""
    return {
        "id": rid,
        "status": "completed",
        "output": [
            {
                "type": "function_call",
                "id": "fc_" + rid,
                "call_id": "call_" + rid,
                "name": "get_order",
                "arguments": json.dumps({"order_id": "A1"}),
            }
        ],
    }


ANSWER = {
    "id": "r9",
    "status": "completed",
    "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}
    ],
}


def registry(result: object) -> cb.Registry:
    """get_order, whose handler returns ``result``."""

    def handler(args: Order, ctx: cb.CallContext) -> object:
        return result

    return cb.Registry(
        [
            cb.ToolSpec(
                name="get_order",
                description="Look up an order",
                params=Order,
                handler=handler,
                schema_version="v1",
                risk="read",
            )
        ]
    )
