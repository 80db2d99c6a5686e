"""Approval decisions (D17): recorded from any process, single use, checked against the policy."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING

from ..core.approvals import Decision, PendingApproval, record_decision, revalidate, same_identity, withdraw
from ..core.canonical import sha256_hex
from ..core.dispatch import hook_verdict
from ..core.errors import UnknownApproval, UsageError
from ..core.snapshot import migrate_head
from ..core.states import TERMINAL
from .integrity import approval_problems, read_chain
from .operation import WAITING, Operation
from .outcome import ApproverNotAllowed, Policy

if TYPE_CHECKING:
    from ..core.registry import ToolSpec
    from .runner import Runner


def record(runner: Runner, decision: Decision, tenant: str, op: Operation | None = None) -> PendingApproval:
    """Record one decision (single use, D17) without resuming. Works from any process; ``op`` is the
    operation being resumed, when a resume records it."""
    approval = runner.store.get_approval(decision.approval_id)
    if approval is None or approval.tenant != tenant:
        raise UnknownApproval(f"no approval {decision.approval_id!r} for tenant {tenant!r}")
    if op is not None and approval.operation_id != op.operation_id:
        # Same tenant, so naming the operation it belongs to tells the caller nothing they may not see.
        raise UnknownApproval(
            f"approval {decision.approval_id!r} belongs to operation {approval.operation_id!r}, not "
            f"{op.operation_id!r}: resume that operation with it"
        )
    if approval.status == "withdrawn":
        raise UsageError(
            f"approval {approval.approval_id} was withdrawn ({approval.reason}); it can no longer take effect"
        )
    if op is None and approval.status == "pending":  # a decided one answers as D17 says
        stored = runner.store.load_operation(approval.operation_id)
        if stored is not None:
            # an operation saved by a newer callbound is refused here as by resume, cancel and verify
            # (D19): this code cannot resume it, so a decision recorded now could not be acted on by it
            migrate_head(dict(stored.head))
        state = None if stored is None else stored.head.get("state")
        if isinstance(state, str) and state in TERMINAL:  # a StrEnum set: names match
            # Fix: a decision on an approval whose operation was cancelled or stopped was recorded
            # and reported as success, though nothing can resume that operation any more.
            raise UsageError(
                f"operation {approval.operation_id} is {state}; approval {approval.approval_id} "
                "can no longer take effect"
            )
    check_approver(runner.policy, decision.approver, approval)
    if approval.status == "pending":
        _check_shown(runner, approval)
    now = runner.clock.now()
    decided, changed = record_decision(approval, decision, now)
    if changed and not runner.store.decide_approval(decided):
        current = runner.store.get_approval(decision.approval_id)
        assert current is not None
        decided, _ = record_decision(current, decision, now)  # same verdict → original; else raises
    return decided


def _check_shown(runner: Runner, approval: PendingApproval) -> None:
    """Refuse to record a decision on an approval row that differs from its audited request (D17, D20):
    the approver decides on what the row shows, and an edited row (another amount shown than the one
    that would run) must not collect an approval. The resume would refuse it too (FAILED(INTEGRITY)),
    but only after a human approved what they were not going to get."""
    chain = read_chain(runner.store.audit_events(approval.operation_id))
    # as a resume holds it (before_run): an expiry moved earlier only withholds the call, as time passing does
    found = approval_problems(chain, [approval], before_run=True)
    if found:
        raise UsageError(
            f"approval {approval.approval_id} differs from its audited request ({found[0].why}); it cannot be "
            f"decided: run `callbound audit verify {approval.operation_id}`"
        )


def revalidated(
    runner: Runner, approval: PendingApproval, arguments_json: str | None, spec: ToolSpec
) -> str | None:
    """D17 under the runner at hand: None while the approval still lets the call run, else the code
    for the model (APPROVAL_EXPIRED, APPROVAL_STALE, DENIED). Checked when a resume resolves the
    approval and again when the approved call is about to run (a new deploy may have taken over)."""
    return revalidate(
        approval,
        runner.clock.now(),
        argument_digest=sha256_hex(arguments_json or "null"),
        policy_revision=runner.policy.revision,
        schema_version=spec.schema_version,
        tool_digest=spec.definition_digest(),
    )


def approver_still_allowed(runner: Runner, approval: PendingApproval) -> bool:
    """issue 2 §6: the approver of an approved call, under the resuming runner's policy (a decision
    recorded through a laxer app, or a hook that now says no)."""
    if approval.status != "approved":
        return True  # only an approval lets a call run; a denial needs no approver check
    try:
        check_approver(runner.policy, approval.approver or "", approval)
    except ApproverNotAllowed:
        return False
    return True


def check_approver(policy: Policy, approver: str, approval: PendingApproval) -> None:
    """Raise ``ApproverNotAllowed`` unless ``approver`` may decide ``approval`` (D17). Names are compared
    as identities (NFKC, case-folded, stripped): ``CUSTOMER-1`` is the subject ``customer-1``."""
    if same_identity(approver, approval.subject) and not policy.allow_self_approval:
        raise ApproverNotAllowed(
            f"{approver!r} proposed this operation and may not approve its own call (Policy.allow_self_approval)"
        )
    hook = policy.approver_allowed
    if hook is not None:
        # Fail closed like every yes/no hook (core.dispatch.hook_verdict): only a real True allows, so a
        # truthy refusal text ("no: not on the finance team") cannot let an approver through.
        allowed, why = hook_verdict(lambda: hook(approver, approval))
        if not allowed:
            said = "" if why is None else f" (the hook {why}; only True allows)"
            raise ApproverNotAllowed(f"{approver!r} may not decide approval {approval.approval_id}{said}")


def withdraw_pending(runner: Runner, op: Operation, why: str) -> list[PendingApproval]:
    """The operation is ending while some of its calls still wait for a decision: mark those approvals
    withdrawn in the same commit, so no approver is left looking at a request nothing will act on and
    ``list_approvals(status="pending")`` stops showing it. A decision may land between the read below
    and that commit: the store then refuses the commit (``ApprovalChanged``) rather than overwrite the
    decision, and the caller reads again (cancel, ``approvals_ready``).

    Returns the approvals of waiting calls that were already approved or denied (nobody resumed the
    operation since): those decisions stay as recorded, but their calls will not run, which whoever
    ends the operation is told. Decisions are final, so what this one read saw holds at the commit."""
    decided: list[PendingApproval] = []
    if op.current is None:
        return decided
    now = runner.clock.now()
    for rec in op.current.records:
        # Not only WAITING records: a turn resolved on expiry seals its records before the stop
        # (Policy(on_approval_expired="stop")), and their approvals are still pending in the store.
        if rec.approval_id is None:
            continue
        # Asked in this turn and not committed yet (a stop before C1), or read from the store.
        mine = [a for a in op.pending_approvals if a.approval_id == rec.approval_id]
        approval = mine[-1] if mine else runner.store.get_approval(rec.approval_id)
        if approval is None:
            continue
        if approval.status == "pending":
            op.pending_approvals.append(withdraw(approval, now, why))
        elif rec.status == WAITING and approval.status in ("approved", "denied"):
            decided.append(approval)
    return decided


def reload_into(runner: Runner, op: Operation) -> None:
    """Replace ``op`` in place with what the store holds, keeping the drive's fencing token. For a
    commit the store refused (ApprovalChanged): nothing of it was written, but ``op`` had moved on
    in memory, and the caller's drive loop still holds this object."""
    fresh = runner._load(op.operation_id)
    fresh.fence = op.fence if op.fence is not None else fresh.fence
    for f in fields(Operation):
        setattr(op, f.name, getattr(fresh, f.name))
