"""A decision recorded for a call the operation will no longer run is said in its escalation, whatever ends
the operation (issue 4 §5: no lost approval; D14, D17; review round 14).

One call of a turn is approved while another still waits; then the operation stops: ``not_after`` passes,
or the other approval expires under ``Policy(on_approval_expired="stop")``. The approved refund never runs,
and the approval row still says "approved by alice". A cancel named such kept decisions in its escalation
(``decided_approvals``); these stops named nothing, so an approval recorded as given was silently never
acted on.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.demo.payments import FakePayments
from callbound.runtime.verify import verify_store
from callbound.testing import FakeClock, ScriptedModel

from .test_rules_review import API, Stores, calls, fc, final, pay_spec, runner
from .test_rules_review import stores as stores

all_stores = pytest.mark.parametrize("stores", ["memory", "sqlite", "postgres"], indirect=True)


def script() -> list[Any]:
    two = calls(
        "r1",
        fc("c1", "pay", {"order_id": "A1", "amount": "40.00"}),
        fc("c2", "pay", {"order_id": "A2", "amount": "15.00"}),
    )
    return [two, final("r2", "Done.")]


@all_stores
@pytest.mark.parametrize("ending", ["not_after", "expiry_stop", "cancel"])
def test_a_kept_decision_whose_call_will_not_run_is_named_in_the_escalation(
    stores: Stores, tmp_path: Path, ending: str
) -> None:
    clock = FakeClock()
    payments = FakePayments(str(tmp_path / "payments.db"))
    tools = [pay_spec(payments, risk="irreversible")]
    policy = cb.Policy(on_approval_expired="stop") if ending == "expiry_stop" else None
    budgets = cb.Budgets(not_after=clock.now() + timedelta(hours=1)) if ending == "not_after" else None
    r = cb.Runner(
        model=ScriptedModel(API, script()),
        registry=cb.Registry(tools),
        budgets=budgets,
        policy=policy,
        store=stores.open(),
        clock=clock,
        settings={"model": "gpt-test"},
    )
    out = r.run_sync("refund both", tenant="acme", subject="customer-1", operation_id="op_kept")
    assert out.state == "WAITING_APPROVAL"
    first, second = out.pending_approvals
    r.approve(first.approval_id, "alice", tenant="acme")
    if ending == "cancel":
        out = runner(stores.open(), [], tools, clock=clock).cancel("op_kept")
    else:
        clock.advance(timedelta(hours=25).total_seconds())  # past not_after and the approvals' expiry
        out = runner(stores.open(), script(), tools, clock=clock, policy=policy).resume_sync("op_kept")
    expected = {"not_after": "DEADLINE", "expiry_stop": "APPROVAL_EXPIRED", "cancel": "CANCELLED"}[ending]
    assert (out.state, out.reason) == ("STOPPED", expected)
    assert payments.count() == 0  # the operation ended before the approved refund ran
    assert out.escalation is not None
    assert out.escalation["decided_approvals"] == [
        {"approval_id": first.approval_id, "status": "approved", "approver": "alice"}
    ]
    assert "the decision is kept, but the operation ends here and the call does not run" in str(
        out.escalation["detail"]
    )
    store = stores.open()
    assert store.get_approval(first.approval_id).status == "approved"  # kept as recorded
    assert store.get_approval(second.approval_id).status == "withdrawn"
    assert verify_store(store, "op_kept") == []
