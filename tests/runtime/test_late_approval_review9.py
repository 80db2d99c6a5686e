"""D17: a decision recorded after the approval expired is kept but never lets the call run; what the
model is told (and the audit keeps) says the decision came too late, not that nobody decided."""

from __future__ import annotations

import callbound as cb

from .helpers import Counter, error_code, last_outputs
from .test_approvals_runtime import paused


async def test_a_late_decision_is_told_as_late_not_as_undecided() -> None:
    refunds = Counter()
    h, out = await paused(refunds)
    (p,) = out.pending_approvals
    h.clock.advance(24 * 3600 + 5)  # past expires_at
    out = await h.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    res = last_outputs(h.model)["call_1"]
    assert error_code(res) == "APPROVAL_EXPIRED"
    message = res["error"]["message"]
    assert "before anyone decided" not in message
    assert "after" in message and "not run" in message
    assert refunds.n == 0


async def test_no_decision_at_all_is_still_told_as_undecided() -> None:
    refunds = Counter()
    h, out = await paused(refunds)
    h.clock.advance(24 * 3600 + 5)
    out = await h.runner.resume(out.operation_id)
    res = last_outputs(h.model)["call_1"]
    assert error_code(res) == "APPROVAL_EXPIRED"
    assert "before anyone decided" in res["error"]["message"]
    assert refunds.n == 0
