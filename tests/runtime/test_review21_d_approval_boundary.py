"""Review round 21, d: the expiry boundary of an approval, decided from another process and resumed
later, on every store (D17, D14).

An approval expires at ``expires_at`` exactly: a decision recorded one microsecond before it counts,
however late the resume comes (the wait is bounded by the expiry, not the drive), and runs the call
once; a decision recorded at ``expires_at`` is kept but the model is told APPROVAL_EXPIRED, saying the
decision came after. The decision's time goes through each store (SQLite and PostgreSQL keep it as
text in the approval row); a store that rounded it would move the boundary. A denial's reason reaches
the model. Checked here through ``Runner.decide`` (the CLI's path) and a second runner, as another
process resumes."""

from __future__ import annotations

from datetime import timedelta

import pytest

import callbound as cb
from callbound.stores.base import Store

from .helpers import Counter, Harness, calls, error_code, fc, final, last_outputs, make, rebuild, refund_tool

DAY = 24 * 3600.0


@pytest.fixture
def store(each_store: Store) -> Store:
    return each_store


async def _paused(store: Store, refunds: Counter) -> tuple[Harness, cb.Outcome]:
    h = make(
        [calls("r1", fc("c1", "refund", {"order_id": "A1", "amount": 40})), final("r2")],
        [refund_tool(refunds)],
        store=store,  # type: ignore[arg-type]
    )
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    return h, out


async def test_approved_a_microsecond_before_expiry_runs_once_when_resumed_an_hour_late(store: Store) -> None:
    refunds = Counter()
    h, out = await _paused(store, refunds)
    [p] = out.pending_approvals
    h.clock.advance(DAY - 1e-6)
    decided = h.runner.decide(cb.Decision.approve(p.approval_id, approver="boss"), tenant="acme")
    assert decided.decided_at == p.expires_at - timedelta(microseconds=1)
    stored = store.get_approval(p.approval_id)
    assert stored is not None and stored.decided_at == decided.decided_at  # not rounded by the store
    h.clock.advance(3600)
    h2 = rebuild(h, [refund_tool(refunds)])
    done = await h2.runner.resume(out.operation_id)
    assert done.state == cb.State.COMPLETED
    assert refunds.n == 1
    assert last_outputs(h2.model)["c1"]["ok"] is True


async def test_approved_exactly_at_expiry_is_kept_but_expired(store: Store) -> None:
    refunds = Counter()
    h, out = await _paused(store, refunds)
    [p] = out.pending_approvals
    h.clock.advance(DAY)
    h.runner.decide(cb.Decision.approve(p.approval_id, approver="boss"), tenant="acme")
    h2 = rebuild(h, [refund_tool(refunds)])
    done = await h2.runner.resume(out.operation_id)
    assert done.state == cb.State.COMPLETED and refunds.n == 0
    result = last_outputs(h2.model)["c1"]
    assert error_code(result) == "APPROVAL_EXPIRED"
    assert "the decision came after that" in result["error"]["message"]
    stored = store.get_approval(p.approval_id)
    assert stored is not None and stored.status == "approved" and stored.approver == "boss"  # kept


async def test_a_denial_in_time_tells_the_model_its_reason(store: Store) -> None:
    refunds = Counter()
    h, out = await _paused(store, refunds)
    [p] = out.pending_approvals
    h.clock.advance(DAY - 1)
    deny = cb.Decision.deny(p.approval_id, approver="boss", reason="amount over the order total")
    h.runner.decide(deny, tenant="acme")
    h.clock.advance(3600)
    h2 = rebuild(h, [refund_tool(refunds)])
    done = await h2.runner.resume(out.operation_id)
    assert done.state == cb.State.COMPLETED and refunds.n == 0
    result = last_outputs(h2.model)["c1"]
    assert error_code(result) == "DENIED"
    assert "amount over the order total" in result["error"]["message"]
