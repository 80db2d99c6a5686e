"""Approval decisions (D17): recorded from any process, single use, checked against the policy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.approvals import Decision, PendingApproval, record_decision, withdraw
from ..core.errors import UnknownApproval, UsageError
from ..core.states import TERMINAL
from .operation import Operation
from .outcome import ApproverNotAllowed, Policy

if TYPE_CHECKING:
    from .runner import Runner


def record(runner: Runner, decision: Decision, tenant: str, op: Operation | None = None) -> PendingApproval:
    """Record one decision (single use, D17) without resuming. Works from any process; ``op`` is the
    operation being resumed, when a resume records it."""
    approval = runner.store.get_approval(decision.approval_id)
    if (
        approval is None
        or approval.tenant != tenant
        or (op is not None and approval.operation_id != op.operation_id)
    ):
        raise UnknownApproval(f"no approval {decision.approval_id!r} for tenant {tenant!r}")
    if approval.status == "withdrawn":
        raise UsageError(
            f"approval {approval.approval_id} was withdrawn ({approval.reason}); it can no longer take effect"
        )
    if op is None and approval.status == "pending":  # a decided one answers as D17 says
        stored = runner.store.load_operation(approval.operation_id)
        state = None if stored is None else stored.head.get("state")
        if isinstance(state, str) and state in TERMINAL:  # a StrEnum set: names match
            # Fix: a decision on an approval whose operation was cancelled or stopped was recorded
            # and reported as success, though nothing can resume that operation any more.
            raise UsageError(
                f"operation {approval.operation_id} is {state}; approval {approval.approval_id} "
                "can no longer take effect"
            )
    check_approver(runner.policy, decision.approver, approval)
    now = runner.clock.now()
    decided, changed = record_decision(approval, decision, now)
    if changed and not runner.store.decide_approval(decided):
        current = runner.store.get_approval(decision.approval_id)
        assert current is not None
        decided, _ = record_decision(current, decision, now)  # same verdict → original; else raises
    return decided


def check_approver(policy: Policy, approver: str, approval: PendingApproval) -> None:
    """Raise ``ApproverNotAllowed`` unless ``approver`` may decide ``approval`` (D17)."""
    if approver.strip() == approval.subject.strip() and not policy.allow_self_approval:
        raise ApproverNotAllowed(
            f"{approver!r} proposed this operation and may not approve its own call (Policy.allow_self_approval)"
        )
    hook = policy.approver_allowed
    if hook is not None:
        try:
            allowed = bool(hook(approver, approval))
        except Exception:
            allowed = False
        if not allowed:
            raise ApproverNotAllowed(f"{approver!r} may not decide approval {approval.approval_id}")


def withdraw_pending(runner: Runner, op: Operation, why: str) -> None:
    """The operation is ending while some of its calls still wait for a decision: mark those approvals
    withdrawn in the same commit, so no approver is left looking at a request nothing will act on and
    ``list_approvals(status="pending")`` stops showing it."""
    if op.current is None:
        return
    now = runner.clock.now()
    for rec in op.current.records:
        # Not only WAITING records: a turn resolved on expiry seals its records before the stop
        # (Policy(on_approval_expired="stop")), and their approvals are still pending in the store.
        if rec.approval_id is None:
            continue
        # Asked in this turn and not committed yet (a stop before C1), or read from the store.
        mine = [a for a in op.pending_approvals if a.approval_id == rec.approval_id]
        approval = mine[-1] if mine else runner.store.get_approval(rec.approval_id)
        if approval is not None and approval.status == "pending":
            op.pending_approvals.append(withdraw(approval, now, why))
