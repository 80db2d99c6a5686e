"""A tool turn whose provider items nest deeply still runs (D4, D8; review round 18).

JSON nested several hundred levels deep is valid provider output (an unknown member of a message part,
say); Python's json reads it. The check that a resent turn holds no lone surrogate walked it by
recursion, so RecursionError escaped ``run`` after the paid request and every resume paid again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.stores.sqlite import SQLiteStore
from callbound.testing import ScriptedModel


class GetOrder(BaseModel):
    order_id: str


def _get_order(args: GetOrder, ctx: cb.CallContext) -> dict[str, Any]:
    return {"order_id": args.order_id, "status": "shipped"}


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
def test_a_deeply_nested_item_in_a_tool_turn_is_resent_not_a_crash(store_kind: str, tmp_path: Path) -> None:
    # 900: about as deep as json.loads reads a body at the default recursion limit (a transport's path)
    deep = _nested(900)
    seen: list[dict[str, Any]] = []

    def second(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        return {
            "id": "r2",
            "status": "completed",
            "output": [
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
            ],
        }

    model = ScriptedModel(
        "openai-responses",
        [
            {
                "id": "r1",
                "status": "completed",
                "output": [
                    {
                        "type": "message",
                        "id": "m1",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "looking", "annotations": [], "x": deep}],
                    },
                    {
                        "type": "function_call",
                        "id": "fc1",
                        "call_id": "c1",
                        "name": "get_order",
                        "arguments": json.dumps({"order_id": "A1"}),
                    },
                ],
            },
            second,
        ],
    )
    registry = cb.Registry(
        [
            cb.ToolSpec(
                name="get_order",
                description="Look up an order",
                params=GetOrder,
                handler=_get_order,
                schema_version="v1",
                risk="read",
                timeout_ms=2000,
            )
        ]
    )
    store = SQLiteStore(str(tmp_path / "cb.db")) if store_kind == "sqlite" else None
    runner = cb.Runner(
        model=model,
        registry=registry,
        budgets=cb.Budgets(max_model_turns=4),
        **({"store": store} if store else {}),
    )
    outcome = runner.run_sync(input="Where is A1?", tenant="acme", subject="u1")
    assert outcome.state == "COMPLETED", (outcome.state, outcome.reason)
    assert outcome.text == "ok"
    # the deep item went back as received (D8), and the call's result with it
    sent = seen[0]["input"]
    message = next(i for i in sent if i.get("type") == "message" and i.get("role") == "assistant")
    assert message["content"][0]["x"] == deep
    assert any(i.get("type") == "function_call_output" and i.get("call_id") == "c1" for i in sent)
