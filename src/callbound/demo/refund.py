"""``callbound demo refund``: look up an order (read) → create a refund draft (write) → submit the
refund (irreversible, needs approval) → final explanation, driven by a scripted OpenAI Responses
model. Each scenario ends in the state DECISIONS.md D28 gives.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..core.errors import NotApplied, UsageError
from ..core.guards import Budgets
from ..core.registry import CallContext, Registry, ToolSpec
from ..runtime.app import App
from ..runtime.runner import Policy
from ..testing import ScriptedModel
from .payments import FakePayments

SCENARIOS: dict[str, tuple[str, str | None]] = {
    # scenario: (end state, reason) per D28
    "happy": ("COMPLETED", None),
    "max-tokens": ("INCOMPLETE", "MAX_TOKENS"),
    "unknown-tool": ("COMPLETED", None),
    "approval-expired": ("COMPLETED", None),
    "submit-timeout": ("COMPLETED", None),
    "repeated-call": ("STOPPED", "NO_PROGRESS"),
}

ORDER = "A1"
DRAFT = "dr_A1"


class GetOrder(BaseModel):
    order_id: str = Field(description="The order number, e.g. A1")


class CreateRefundDraft(BaseModel):
    order_id: str
    amount: str = Field(pattern=r"^\d+\.\d{2}$", description="Decimal amount as text, e.g. 40.00")
    currency: Literal["EUR", "USD"]
    reason: str


class SubmitRefund(BaseModel):
    draft_id: str


def build_registry(payments: FakePayments, scenario: str) -> Registry:
    def get_order(args: GetOrder, ctx: CallContext) -> dict[str, Any]:
        return {
            "order_id": args.order_id,
            "status": "delivered",
            "total": "40.00",
            "currency": "EUR",
            "item": "kettle, arrived broken",
        }

    def create_refund_draft(args: CreateRefundDraft, ctx: CallContext) -> dict[str, Any]:
        # One draft per operation: the submit's intent is its draft (refund:{draft_id}), so a second
        # demo in the same store is a new refund, while a retry or resume of this one never is.
        return {
            "draft_id": draft_for(args.order_id, ctx.operation_id),
            "amount": args.amount,
            "currency": args.currency,
        }

    def submit_refund(args: SubmitRefund, ctx: CallContext) -> dict[str, Any]:
        assert ctx.idempotency_key is not None
        receipt = payments.submit(ctx.idempotency_key, args.draft_id, "40.00", "EUR")
        if scenario == "submit-timeout":
            time.sleep(0.6)  # the downstream applied the refund, but the answer comes too late
        return receipt

    def reconcile_refund(key: str, ctx: CallContext) -> dict[str, Any]:
        found = payments.lookup(key)
        if found is None:
            raise NotApplied("no refund with this key exists downstream")
        return found

    return Registry(
        [
            ToolSpec(
                name="get_order",
                description="Look up an order by its number.",
                params=GetOrder,
                handler=get_order,
                schema_version="get-order-v1",
                risk="read",
                timeout_ms=2_000,
            ),
            ToolSpec(
                name="create_refund_draft",
                description="Create a refund draft for an order.",
                params=CreateRefundDraft,
                handler=create_refund_draft,
                schema_version="refund-draft-v1",
                risk="write",
                timeout_ms=2_000,
            ),
            ToolSpec(
                name="submit_refund",
                description="Submit a refund draft to the payments service.",
                params=SubmitRefund,
                handler=submit_refund,
                schema_version="submit-refund-v1",
                risk="irreversible",
                timeout_ms=300 if scenario == "submit-timeout" else 5_000,
                intent_key=lambda args, ctx: f"refund:{args.draft_id}",
                reconcile=reconcile_refund,
            ),
        ]
    )


def _calls(n: int, *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": f"resp_demo_{n}",
        "object": "response",
        "status": "completed",
        "model": "demo-model",
        "output": [
            {
                "type": "function_call",
                "id": f"fc_demo_{n}_{i}",
                "call_id": f"call_demo_{n}_{i}",
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
            for i, (name, args) in enumerate(calls)
        ],
        "usage": {"input_tokens": 120 + 40 * n, "output_tokens": 20},
    }


def _text(n: int, text: str, status: str = "completed", incomplete: str | None = None) -> dict[str, Any]:
    return {
        "id": f"resp_demo_{n}",
        "object": "response",
        "status": status,
        "model": "demo-model",
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "output": [
            {
                "type": "message",
                "id": f"msg_demo_{n}",
                "role": "assistant",
                "status": status,
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 120 + 40 * n, "output_tokens": 30},
    }


LOOKUP = ("get_order", {"order_id": ORDER})
DRAFT_CALL = (
    "create_refund_draft",
    {"order_id": ORDER, "amount": "40.00", "currency": "EUR", "reason": "arrived broken"},
)


def draft_for(order_id: str, operation_id: str) -> str:
    """The draft an operation creates for an order (one per operation)."""
    return f"dr_{order_id}_{operation_id[-8:]}"


def refund_key(operation_id: str) -> str:
    """The idempotency key of the demo's refund in ``operation_id`` (what the payments service keeps)."""
    return f"ik_refund:{draft_for(ORDER, operation_id)}"


def _result(body: dict[str, Any], call_id: str) -> dict[str, Any] | None:
    """The result callbound sent back for ``call_id`` in a Responses request body, if any."""
    for item in body.get("input") or ():
        if (
            isinstance(item, dict)
            and item.get("type") == "function_call_output"
            and item.get("call_id") == call_id
        ):
            try:
                result = json.loads(item.get("output") or "null")
            except ValueError:
                return None
            return result if isinstance(result, dict) else None
    return None


def _submit(body: dict[str, Any]) -> dict[str, Any]:
    """Turn 3 submits the draft turn 2's result named, as a model reading it would."""
    draft = (_result(body, "call_demo_2_0") or {}).get("data", {}).get("draft_id", DRAFT)
    return _calls(3, ("submit_refund", {"draft_id": draft}))


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    """Turn 4 says what the submit's result says: submitted, denied or expired."""
    result = _result(body, "call_demo_3_0") or {}
    code = (result.get("error") or {}).get("code")
    if result.get("ok"):
        return _text(4, "Your refund of 40.00 EUR for order A1 has been submitted.")
    if code == "APPROVAL_EXPIRED":
        return _text(4, "The approval for the refund expired, so no refund was made. Please ask again.")
    if code == "DENIED":
        return _text(4, "The refund was not approved, so no refund was made.")
    return _text(4, "The refund could not be submitted, so no refund was made.")


def script(scenario: str) -> list[Any]:
    """The model's side of each scenario; turns 3 and 4 of a refund read the results they were sent."""
    if scenario in ("happy", "submit-timeout", "approval-expired"):
        return [_calls(1, LOOKUP), _calls(2, DRAFT_CALL), _submit, _answer]
    if scenario == "max-tokens":
        return [
            _calls(1, LOOKUP),
            _text(
                2,
                "Your order A1 was delivered and you are entitled to",
                status="incomplete",
                incomplete="max_output_tokens",
            ),
        ]
    if scenario == "unknown-tool":
        return [
            _calls(1, ("issue_instant_refund", {"order_id": ORDER})),
            _text(2, "I cannot issue instant refunds; I can look up the order and draft a refund instead."),
        ]
    if scenario == "repeated-call":
        return [_calls(n, LOOKUP) for n in range(1, 6)]
    raise UsageError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")


def to_stream(body: dict[str, Any], delta: int = 6) -> list[dict[str, Any]]:
    """The same response as OpenAI Responses stream events, arguments in small deltas."""
    rid = body["id"]
    events: list[dict[str, Any]] = [
        {
            "type": "response.created",
            "response": {"id": rid, "status": "in_progress", "output": [], "model": body["model"]},
        }
    ]
    for idx, item in enumerate(body["output"]):
        if item["type"] == "function_call":
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": idx,
                    "item": {**item, "arguments": "", "status": "in_progress"},
                }
            )
            args = item["arguments"]
            for i in range(0, len(args), delta):
                events.append(
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item["id"],
                        "output_index": idx,
                        "delta": args[i : i + delta],
                    }
                )
            events.append(
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": item["id"],
                    "output_index": idx,
                    "arguments": args,
                }
            )
        else:
            events.append(
                {"type": "response.output_item.added", "output_index": idx, "item": {**item, "content": []}}
            )
        events.append({"type": "response.output_item.done", "output_index": idx, "item": item})
    terminal = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
    events.append({"type": terminal, "response": body})
    return events


def _streamed(response: Any) -> Any:
    if callable(response):
        return lambda body: to_stream(response(body))
    return to_stream(response)


def make_app(
    scenario: str = "happy", payments: str = "callbound-demo-payments.db", stream: bool = False
) -> App:
    """The demo application (``callbound.demo.refund:make_app``)."""
    if scenario not in SCENARIOS:
        raise UsageError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")
    service = FakePayments(payments)
    responses: list[Any] = script(scenario)
    if stream:
        responses = [_streamed(r) for r in responses]
    policy = Policy(
        revision="demo-1",
        approval_ttl=timedelta(0) if scenario == "approval-expired" else timedelta(hours=24),
    )
    return App(
        registry=build_registry(service, scenario),
        model=ScriptedModel("openai-responses", responses),
        policy=policy,
        budgets=Budgets(max_model_turns=8),
        settings={"model": "demo-model", "stream": stream},
        instructions="You are a support agent. Use the tools to help with refunds.",
    )
