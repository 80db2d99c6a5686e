"""Review round 21, e: what README.md and docs/reference.md say a handler's errors do, for a write tool.

The README told every handler to raise ``cb.ToolError("text")`` "to tell the model what went wrong".
For a write tool that text never reaches the model: any exception from a write leaves its outcome
unknown (D16), so ``reconcile`` decides or the operation stops ``STOPPED(OUTCOME_UNKNOWN)``; a write
says "not applied" with ``NotApplied("text")``, whose text the model gets. The docs say so now, and
these tests hold them to it. ``ToolSpec``'s docstring said a ``reconcile`` returning ``None`` was "a null
result, not absent" (applied); it is "cannot tell" since review round 20, d
(tests/runtime/test_review20_d_reconcile_none.py). ``ApproverNotAllowed``'s docstring named the tenant
among its causes; an approver of another tenant gets ``UnknownApproval``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.testing import ScriptedModel
from tests.docs.order_script import ANSWER


class Refund(BaseModel):
    order_id: str


def _call(name: str) -> dict[str, Any]:
    return {
        "id": "r1",
        "status": "completed",
        "output": [
            {
                "type": "function_call",
                "id": "fc_r1",
                "call_id": "call_r1",
                "name": name,
                "arguments": json.dumps({"order_id": "A1"}),
            }
        ],
    }


def _run(exc: Exception, reconcile: Callable[[str, cb.CallContext], Any] | None) -> tuple[Any, list[str]]:
    def handler(args: Refund, ctx: cb.CallContext) -> dict[str, Any]:
        raise exc

    spec = cb.ToolSpec(
        name="refund",
        description="Refund an order",
        params=Refund,
        handler=handler,
        schema_version="v1",
        risk="write",
        reconcile=reconcile,
    )
    model = ScriptedModel("openai-responses", [_call("refund"), ANSWER])
    outcome = cb.Runner(model=model, registry=cb.Registry([spec])).run_sync(
        input="Refund A1", tenant="acme", subject="user-1"
    )
    sent = [
        json.loads(item["output"])["error"]["message"]
        for request in model.requests[1:]
        for item in request["input"]
        if item.get("type") == "function_call_output"
    ]
    return outcome, sent


def _not_applied(key: str, ctx: cb.CallContext) -> Any:
    raise cb.NotApplied("no refund for this key")


def test_a_write_tool_error_without_reconcile_stops_the_operation_and_sends_nothing() -> None:
    outcome, sent = _run(cb.ToolError("card declined"), None)
    assert (outcome.state, outcome.reason) == ("STOPPED", "OUTCOME_UNKNOWN")
    assert sent == []


def test_a_write_tool_error_reconciled_as_not_applied_sends_the_generic_text_not_its_own() -> None:
    outcome, sent = _run(cb.ToolError("card declined"), _not_applied)
    assert outcome.state == "COMPLETED"
    assert sent == ["refund did not complete and was not applied; you may try again."]


def test_a_write_says_not_applied_with_not_applied_whose_text_the_model_gets() -> None:
    outcome, sent = _run(cb.NotApplied("card declined"), None)
    assert outcome.state == "COMPLETED"
    assert sent == ["card declined"]


def test_an_approver_of_another_tenant_gets_unknown_approval_not_approver_not_allowed() -> None:
    spec = cb.ToolSpec(
        name="refund",
        description="Refund an order",
        params=Refund,
        handler=lambda args, ctx: {"refund_id": "rf_1"},
        schema_version="v1",
        risk="irreversible",
    )
    runner = cb.Runner(
        model=ScriptedModel("openai-responses", [_call("refund"), ANSWER]), registry=cb.Registry([spec])
    )
    outcome = runner.run_sync(input="Refund A1", tenant="acme", subject="user-1")
    assert outcome.state == "WAITING_APPROVAL"
    approval_id = outcome.pending_approvals[0].approval_id
    with pytest.raises(cb.UnknownApproval) as caught:
        runner.approve(approval_id, "alice", tenant="other")
    assert not isinstance(caught.value, cb.ApproverNotAllowed)
    with pytest.raises(cb.ApproverNotAllowed):
        runner.approve(approval_id, "USER-1", tenant="acme")
