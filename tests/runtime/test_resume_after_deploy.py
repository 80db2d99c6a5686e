"""A resume runs under the registry of the process that resumes, which may be a new deploy: the tool a
planned call names may now take other arguments, or be gone. D4: nothing but UsageError/StoreError
escapes ``resume``; a call its handler cannot take does not run, and the model is told why.

Before: the arguments were validated outside any guard after the ledger's STARTED was committed
(ValidationError escaped, then the next resume ended OUTCOME_UNKNOWN for a refund that never ran), and
a call whose tool was gone failed an assertion on every resume. Also here: the result-size cap comes
from the budgets saved with the operation (D11), like every other guard, not the resuming runner's.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
import callbound.runtime.execute as execute
import callbound.runtime.planning as planning

from .helpers import (
    Counter,
    calls,
    error_code,
    fc,
    final,
    get_order_tool,
    last_outputs,
    make,
    rebuild,
    refund_tool,
)

REFUND = {"order_id": "A1", "amount": 40.5}


class Died(BaseException):
    """A process dying at a crash point (BaseException: nothing in the loop catches it)."""


def _die_at(point: str) -> Any:
    def crash_point(name: str, *args: Any) -> None:
        if name == point:
            raise Died(name)

    return crash_point


class RefundArgsV2(BaseModel):
    order_id: str
    amount_cents: int  # the new deploy renamed the field


async def _approved_then_died(monkeypatch: pytest.MonkeyPatch, paid: Counter) -> tuple[Any, str]:
    """A refund approved; the process dies before its handler starts (stored: EXECUTING)."""
    h = make([calls("r1", fc("c1", "refund", REFUND)), final("r2")], [refund_tool(paid)])
    out = await h.run()
    approval = out.pending_approvals[0].approval_id
    with monkeypatch.context() as m:
        m.setattr(planning, "crash_point", _die_at("after_approval_before_execution"))
        with pytest.raises(Died):
            await h.runner.resume(out.operation_id, [cb.Decision.approve(approval, approver="alice")])
    stored = h.store.load_operation(out.operation_id)
    assert stored is not None and stored.head["state"] == "EXECUTING"
    return h, out.operation_id


async def test_a_call_whose_tool_now_takes_other_arguments_is_refused_not_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    paid = Counter()
    h, op_id = await _approved_then_died(monkeypatch, paid)
    v2 = Counter()
    h2 = rebuild(h, [refund_tool(v2, params=RefundArgsV2, schema_version="refund-v2")])
    out = await h2.runner.resume(op_id)
    assert out.state == cb.State.COMPLETED
    result = last_outputs(h2.model)["c1"]
    # D17: the approval was given for schema refund-v1; under v2 it is stale before the arguments are
    # even read (a v2 tool that kept the schema version would refuse them: the next test)
    assert error_code(result) == "APPROVAL_STALE" and "not run" in result["error"]["message"]
    assert paid.n == 0 and v2.n == 0
    assert h.store.ledger_get("acme", "ik_c1") is None  # no STARTED left behind: nothing was claimed


async def test_arguments_the_tool_no_longer_takes_are_refused_not_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same schema version with other params (a deploy that forgot to bump it): the definition digest
    changed, so the approval is stale too; nothing raises and nothing runs."""
    paid = Counter()
    h, op_id = await _approved_then_died(monkeypatch, paid)
    v2 = Counter()
    h2 = rebuild(h, [refund_tool(v2, params=RefundArgsV2)])
    out = await h2.runner.resume(op_id)
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h2.model)["c1"]) in ("APPROVAL_STALE", "INVALID_ARGUMENTS")
    assert paid.n == 0 and v2.n == 0


@pytest.mark.parametrize(
    "change", ["policy revision", "schema version", "approver rule", "tool authorize", "policy authorize"]
)
async def test_an_approval_resolved_before_a_crash_is_held_to_the_new_deploy(
    monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """D17 after the crash point after_approval_before_execution: the approval was resolved (APPROVED)
    under the old deploy, the process died before the handler, and the new deploy's worker took over in
    EXECUTING. The refund ran under a policy that forbids it; it is now refused as a resume from
    WAITING_APPROVAL refuses it: APPROVAL_STALE, or DENIED for an approver the new rule rejects."""
    paid = Counter()
    h, op_id = await _approved_then_died(monkeypatch, paid)
    tools = {
        "schema version": [refund_tool(paid, schema_version="refund-v9")],
        # issue 4 §3: resume re-validates authorization too; the hooks are not in the definition digest,
        # so only running them again tells (the refund was paid before)
        "tool authorize": [refund_tool(paid, authorize=lambda args, ctx: False)],
    }.get(change, [refund_tool(paid)])
    policy = {
        "policy revision": cb.Policy(revision="rev-2"),
        "approver rule": cb.Policy(approver_allowed=lambda approver, approval: approver != "alice"),
        "policy authorize": cb.Policy(authorize=lambda spec, args, ctx: False),
    }.get(change)
    h2 = rebuild(h, tools, policy=policy)
    out = await h2.runner.resume(op_id)
    assert out.state == cb.State.COMPLETED
    expected = "APPROVAL_STALE" if change in ("policy revision", "schema version") else "DENIED"
    assert error_code(last_outputs(h2.model)["c1"]) == expected
    assert paid.n == 0


async def test_control_the_same_deploy_runs_the_approved_call(monkeypatch: pytest.MonkeyPatch) -> None:
    paid = Counter()
    h, op_id = await _approved_then_died(monkeypatch, paid)
    out = await rebuild(h, [refund_tool(paid)]).runner.resume(op_id)
    assert out.state == cb.State.COMPLETED and paid.n == 1


async def test_a_call_whose_tool_is_gone_is_refused_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    paid = Counter()
    h, op_id = await _approved_then_died(monkeypatch, paid)
    h2 = rebuild(h, [get_order_tool()])
    out = await h2.runner.resume(op_id)
    assert out.state == cb.State.COMPLETED
    result = last_outputs(h2.model)["c1"]
    assert error_code(result) == "UNKNOWN_TOOL"
    assert "no longer offered" in result["error"]["message"]
    assert paid.n == 0


async def test_a_write_that_started_before_its_tool_was_removed_is_an_unknown_outcome(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The process died after the ledger's STARTED: the refund may have happened, and without the tool
    nobody can reconcile it, so a human looks (D16), never "it was not run"."""
    paid = Counter()
    h = make([calls("r1", fc("c1", "refund", REFUND)), final("r2")], [refund_tool(paid)])
    out = await h.run()
    approval = out.pending_approvals[0].approval_id
    with monkeypatch.context() as m:
        m.setattr(execute, "crash_point", _die_at("after_ledger_started"))
        with pytest.raises(Died):
            await h.runner.resume(out.operation_id, [cb.Decision.approve(approval, approver="alice")])
    h2 = rebuild(h, [get_order_tool()])
    again = await h2.runner.resume(out.operation_id)
    assert (again.state, again.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    assert again.escalation is not None and again.escalation["call_ids"] == ["c1"]
    assert len(h2.model.requests) == 0  # nothing was sent back to the model


async def test_the_result_size_cap_is_the_operations_not_the_resuming_runners() -> None:
    def big(args: Any, ctx: cb.CallContext) -> dict[str, Any]:
        return {"order_id": args.order_id, "blob": "x" * 500}

    tools = [refund_tool(handler=lambda a, c: {"note": "y" * 500}), get_order_tool(handler=big)]
    script = [calls("r1", fc("c1", "refund", REFUND), fc("c2", "get_order", {"order_id": "A1"})), final("r2")]
    h = make(script, tools, budgets=cb.Budgets(max_result_bytes=200))
    out = await h.run()
    approval = out.pending_approvals[0].approval_id
    h2 = rebuild(h, tools)  # a worker built with the default Budgets()
    done = await h2.runner.resume(out.operation_id, [cb.Decision.approve(approval, approver="alice")])
    assert done.state == cb.State.COMPLETED
    results = last_outputs(h2.model)
    assert error_code(results["c2"]) == "RESULT_TOO_LARGE"
    assert error_code(results["c1"]) == "RESULT_TOO_LARGE"
    assert "200-byte" in results["c1"]["error"]["message"]
