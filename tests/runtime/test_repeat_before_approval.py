"""The repeat guard comes before the approval pause (D13 (2), (3) before D17).

A read that needs approval (say, a customer's personal data) proposed again and again with the same
arguments: runs 1 and 2 are approved and run (max_identical_calls=2). Run 3 was sent to a human, and
whatever they decided it got NO_PROGRESS (approved) or DENIED (denied); a denied 4th repeat after that
NO_PROGRESS let the operation end COMPLETED instead of STOPPED(NO_PROGRESS). Now a call the guard refuses
whatever the decision asks nobody: it gets NO_PROGRESS, and the next repeat stops the operation.
"""

from __future__ import annotations

from typing import Any

import callbound as cb

from .helpers import Counter, calls, error_code, fc, final, get_order_tool, make, outputs

ARGS = {"order_id": "A1"}


def _script() -> list[Any]:
    return [*(calls(f"resp_{n}", fc(f"call_{n}", "get_order", ARGS)) for n in range(4)), final("resp_9")]


async def _approve_all(h: Any, out: cb.Outcome, verdicts: list[str]) -> cb.Outcome:
    while out.state == cb.State.WAITING_APPROVAL:
        decisions = []
        for p in out.pending_approvals:
            verdicts.append(p.call_id)
            decisions.append(cb.Decision.approve(p.approval_id, approver="alice"))
        out = await h.runner.resume(out.operation_id, decisions)
    return out


async def test_a_call_the_guard_refuses_asks_no_human_and_its_repeat_stops() -> None:
    reads = Counter()
    h = make(
        _script(), [get_order_tool(reads, requires_approval=True)], budgets=cb.Budgets(max_identical_calls=2)
    )
    asked: list[str] = []
    out = await _approve_all(h, await h.run("Look up A1"), asked)
    assert asked == ["call_0", "call_1"]  # call_2 and call_3 would be refused whatever the decision
    assert reads.n == 2
    assert (out.state, out.reason) == (cb.State.STOPPED, "NO_PROGRESS")
    answered = {o["call_id"]: o["result"] for o in outputs(h.model.requests[-1])}
    assert error_code(answered["call_2"]) == "NO_PROGRESS"  # without a pause
    assert len(h.model.requests) == 4  # the repeat of call_3 stops before a 5th request


async def test_under_the_limit_approval_is_still_asked() -> None:
    h = make([*_script()[:1], final("resp_9")], [get_order_tool(requires_approval=True)])
    out = await h.run("Look up A1")
    assert out.state == cb.State.WAITING_APPROVAL
