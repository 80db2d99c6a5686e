"""on_transition is told of a transition when the runner makes it, before the commit that stores it
(docs/reference.md, Runner), the first (created) excepted: what an observer has seen is not yet durable,
and the store is the durable record. The effect a transition announces still waits for its commit (D18): a handler runs only after
EXECUTING is stored."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

import callbound as cb
from callbound.stores.memory import MemoryStore
from callbound.testing import ScriptedModel


class _Order(BaseModel):
    order_id: str


def _responses() -> list[dict[str, Any]]:
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_order",
        "arguments": '{"order_id":"A1"}',
        "status": "completed",
    }
    text = {
        "type": "message",
        "id": "m_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "shipped", "annotations": []}],
    }
    return [
        {"id": "r1", "object": "response", "status": "completed", "model": "m", "output": [call]},
        {"id": "r2", "object": "response", "status": "completed", "model": "m", "output": [text]},
    ]


def test_an_observer_hears_each_move_before_its_commit_and_a_handler_runs_after_it() -> None:
    store = MemoryStore()
    seen: list[tuple[str, str | None]] = []  # (the state announced, the state the store held then)
    stored_when_run: list[str | None] = []

    def committed(operation_id: str) -> str | None:
        stored = store.load_operation(operation_id)
        return None if stored is None else str(stored.head["state"])

    def get_order(args: _Order, ctx: cb.CallContext) -> dict[str, Any]:
        stored_when_run.append(committed(ctx.operation_id))
        return {"order_id": args.order_id, "status": "shipped"}

    registry = cb.Registry(
        [
            cb.ToolSpec(
                name="get_order",
                description="Look up an order",
                params=_Order,
                handler=get_order,
                schema_version="get-order-v1",
                risk="read",
                timeout_ms=1000,
            )
        ]
    )
    runner = cb.Runner(
        model=ScriptedModel("openai-responses", _responses()),
        registry=registry,
        store=store,
        on_transition=lambda oid, t: seen.append((t.state, committed(oid))),
    )
    outcome = runner.run_sync("where is A1?", tenant="t", subject="u")
    assert outcome.state is cb.State.COMPLETED
    states = [s for s, _ in seen]
    assert states[-1] == "COMPLETED" and "EXECUTING" in states
    assert seen[0][1] == seen[0][0], "the first (created) is announced once stored: a refused run never was"
    executing = states.index("EXECUTING")
    assert seen[executing][1] != "EXECUTING", "announced before the commit that stores it"
    assert seen[-1][1] != "COMPLETED", "the final state too is announced before it is stored"
    assert stored_when_run == ["EXECUTING"], "the handler ran only once EXECUTING was committed (D18)"
    assert committed(outcome.operation_id) == "COMPLETED"
