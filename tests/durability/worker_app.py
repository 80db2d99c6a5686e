"""An application for the two-worker test: every operation refunds its own order (its operation id),
so each has a distinct intent and a double refund is visible downstream."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from pydantic import BaseModel

from callbound.adapters import get as get_adapter
from callbound.core.errors import NotApplied
from callbound.core.guards import Budgets
from callbound.core.model import ProgressCallback, RequestMeta
from callbound.core.registry import CallContext, Registry, ToolSpec
from callbound.core.types import ModelTurn
from callbound.demo.payments import FakePayments
from callbound.runtime.app import App
from callbound.runtime.runner import Policy


class GetOrder(BaseModel):
    order_id: str


class SubmitRefund(BaseModel):
    order_id: str


class PerOperationModel:
    """Turn 0 looks the order up, turn 1 submits its refund, turn 2 answers."""

    api = "openai-responses"

    def __init__(self) -> None:
        self._adapter = get_adapter(self.api)

    @property
    def adapter(self) -> Any:
        return self._adapter

    async def complete(
        self,
        body: dict[str, Any],
        *,
        stream: bool,
        meta: RequestMeta,
        on_progress: ProgressCallback | None = None,
    ) -> ModelTurn:
        oid, k = meta.operation_id, meta.index
        rid = f"resp_{oid}_{k}"
        if k < 2:
            name = "get_order" if k == 0 else "submit_refund"
            out: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{k}",
                "call_id": f"call_{oid}_{k}",
                "name": name,
                "arguments": json.dumps({"order_id": oid}),
            }
        else:
            out = {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "done"}],
            }
        return self._adapter.parse_response({"id": rid, "status": "completed", "output": [out]})


def make_app() -> App:
    payments = FakePayments(os.environ["CALLBOUND_TEST_PAYMENTS"])

    slow = float(os.environ.get("CALLBOUND_TEST_SLOW_READ", "0"))

    def get_order(args: GetOrder, ctx: CallContext) -> dict[str, Any]:
        if slow:
            time.sleep(slow)  # keeps this worker busy inside an operation when the test kills it
        return {"order_id": args.order_id, "total": "10.00"}

    def submit_refund(args: SubmitRefund, ctx: CallContext) -> dict[str, Any]:
        assert ctx.idempotency_key is not None
        return payments.submit(ctx.idempotency_key, args.order_id, "10.00", "EUR")

    def reconcile(key: str, ctx: CallContext) -> dict[str, Any]:
        found = payments.lookup(key)
        if found is None:
            raise NotApplied("not found downstream")
        return found

    registry = Registry(
        [
            ToolSpec(
                name="get_order",
                description="Look up an order",
                params=GetOrder,
                handler=get_order,
                schema_version="1",
                risk="read",
                timeout_ms=5_000,
            ),
            ToolSpec(
                name="submit_refund",
                description="Refund an order",
                params=SubmitRefund,
                handler=submit_refund,
                schema_version="1",
                risk="irreversible",
                timeout_ms=5_000,
                intent_key=lambda a, c: f"refund:{a.order_id}",
                reconcile=reconcile,
            ),
        ]
    )
    return App(
        registry=registry,
        model=PerOperationModel(),
        policy=Policy(revision="w1"),
        budgets=Budgets(max_model_turns=6),
    )
