"""Approval decisions (D17): recorded from any process, single use, checked against the policy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, replace
from datetime import datetime
from typing import TYPE_CHECKING

from ..core.approvals import (
    Decision,
    PendingApproval,
    decision_seal,
    record_decision,
    revalidate,
    same_identity,
    withdraw,
)
from ..core.audit import verify_chain
from ..core.canonical import sha256_hex
from ..core.dispatch import Reject, hook_verdict, plan_call
from ..core.errors import UnknownApproval, UsageError
from ..core.snapshot import migrate_head
from ..core.states import TERMINAL
from ..stores.rows import UnreadableRow
from .integrity import approval_problems, read_chain
from .operation import PLANNED, WAITING, CallRecord, Operation
from .outcome import ApproverNotAllowed, Policy

if TYPE_CHECKING:
    from ..core.registry import ToolSpec
    from ..core.types import ToolCall
    from .runner import Runner


def record(runner: Runner, decision: Decision, tenant: str, op: Operation | None = None) -> PendingApproval:
    """Record one decision (single use, D17) without resuming. Works from any process; ``op`` is the
    operation being resumed, when a resume records it."""
    return _write(runner, decision, *_checked(runner, decision, tenant, op))


def record_all(runner: Runner, decisions: Sequence[Decision], tenant: str, op: Operation) -> None:
    """Record a resume's decisions, all checked before any is: a list whose second decision is refused
    (an unknown id, a self-approval, a verdict that contradicts the one recorded) records none, and the
    caller who reads the exception as "nothing happened" is right (decisions are single use, D17)."""
    seen: dict[str, tuple[str, str]] = {}
    for decision in decisions:
        who = (decision.verdict, decision.approver)
        if seen.setdefault(decision.approval_id, who) != who:
            raise UsageError(
                f"the decisions hold approval {decision.approval_id} twice, with another verdict or approver: "
                "pass one decision for it"
            )
    checked = [(decision, _checked(runner, decision, tenant, op)) for decision in decisions]
    for decision, found in checked:
        _write(runner, decision, *found)


def _write(
    runner: Runner, decision: Decision, decided: PendingApproval, changed: bool, now: datetime
) -> PendingApproval:
    if changed and not runner.store.decide_approval(decided):
        current = runner.store.get_approval(decision.approval_id)
        assert current is not None
        decided, _ = record_decision(current, decision, now)  # same verdict → original; else raises
    return decided


def _checked(
    runner: Runner, decision: Decision, tenant: str, op: Operation | None
) -> tuple[PendingApproval, bool, datetime]:
    """Every check of ``record`` (raises as it does), nothing written: (the decided approval, whether it
    changes the stored one, the time it is decided at)."""
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
    if changed:  # sealed by the one who decides: a resume acts only on a decision it can verify (D20)
        decided = replace(decided, decision_seal=decision_seal(decided, runner.audit_key))
    return decided, changed, now


def _check_shown(runner: Runner, approval: PendingApproval) -> None:
    """Refuse to record a decision on an approval row that differs from its audited request (D17, D20):
    the approver decides on what the row shows, and an edited row (another amount shown than the one
    that would run) must not collect an approval. The resume would refuse it too (FAILED(INTEGRITY)),
    but only after a human approved what they were not going to get."""
    events = runner.store.audit_events(approval.operation_id)
    first = verify_chain(events[:1], runner.audit_key)
    if first is not None:
        # The decision is sealed under this runner's key (core.approvals.decision_seal): sealed under
        # another key (or none) than the chain's, every resume would find it forged (D20).
        raise UsageError(
            f"the audit chain of operation {approval.operation_id} does not verify under this process's "
            "audit key: decide with the CALLBOUND_AUDIT_KEY it was written with (or unset, if none), or run "
            f"`callbound audit verify {approval.operation_id}` to see whether it was edited"
        )
    chain = read_chain(events)
    # as a resume holds it (before_run): an expiry moved earlier only withholds the call, as time passing does
    found = approval_problems(chain, [approval], before_run=True, key=runner.audit_key)
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


def approval_verdict(
    runner: Runner, op: Operation, rec: CallRecord, approval: PendingApproval, call: ToolCall
) -> tuple[str | None, str]:
    """D17: (None, "") while ``approval`` lets its call run, else (code, message for the model). One
    reading for resolving a pause (planning.approvals_ready) and for the moment the approved call runs
    (execute): a deploy that took over after the crash point after_approval_before_execution applies
    every rule a resume from WAITING_APPROVAL would have, the authorization hooks included (the approved
    refund its new authorize refused was paid)."""
    spec = runner.registry.get(rec.tool)
    if spec is None:
        return "APPROVAL_STALE", f"{rec.tool} is no longer available"
    code = revalidated(runner, approval, rec.arguments_json, spec)
    late = approval.decided_at is not None and approval.decided_at >= approval.expires_at
    message = {
        # A decision recorded after the expiry is kept (D17) but never lets the call run; the model and
        # the audit must not read it as "nobody decided".
        "APPROVAL_EXPIRED": (
            f"the approval for this call expired at {approval.expires_at.isoformat()}; the decision came "
            "after that and does not count, so it was not run"
            if late
            else "the approval for this call expired before anyone decided; it was not run"
        ),
        "APPROVAL_STALE": "the tool or policy changed since approval was asked; it was not run",
        "DENIED": f"a human denied this call{': ' + _capped(approval.reason) if approval.reason else ''}; "
        "it was not run",
    }.get(code or "", "")
    if code is None and not approver_still_allowed(runner, approval):
        return "DENIED", f"{_capped(approval.approver or '')!r} may not approve this call; it was not run"
    if code is None:
        # schema and authorization against today's registry and policy
        item = plan_call(
            call, runner.registry, frozenset(op.offered), runner._trusted_op(op), runner.policy.authorize
        )
        if isinstance(item, Reject):
            return item.code, item.message
        if item.idempotency_key != rec.idempotency_key:
            return "APPROVAL_STALE", "the call's intent changed since approval was asked; it was not run"
        return None, ""
    return code, message


# A human's text reaches the model inside a result: held to the length a ToolError's text is (D11's cap
# would otherwise be passed by a pasted page of reasons).
_TEXT_CAP = 500


def _capped(text: str) -> str:
    return text if len(text) <= _TEXT_CAP else text[: _TEXT_CAP - 1] + "…"


def stale_context(runner: Runner, approval: PendingApproval) -> str | None:
    """What of an approval's context ``runner`` no longer has, in words, or None: its policy revision, the
    tool, its schema version or definition (D17's re-validation on resume, less the argument digest).
    ``callbound approvals approve`` warns with it: "approved" alone read as if the call would now run."""
    spec = runner.registry.get(approval.tool)
    if approval.policy_revision != runner.policy.revision:
        return f"policy revision {approval.policy_revision!r}, and this application's is {runner.policy.revision!r}"
    if spec is None:
        return f"tool {approval.tool!r}, which this application no longer has"
    if spec.schema_version != approval.schema_version:
        return (
            f"schema version {approval.schema_version!r}, and {approval.tool} is now {spec.schema_version!r}"
        )
    if spec.definition_digest() != approval.tool_digest:
        return f"another definition of {approval.tool} (its parameters or risk changed)"
    return None


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


def withdraw_pending(
    runner: Runner, op: Operation, why: str, unreadable: list[UnreadableRow] | None = None
) -> list[PendingApproval]:
    """The operation is ending while some of its calls still wait for a decision: mark those approvals
    withdrawn in the same commit, so no approver is left looking at a request nothing will act on and
    ``list_approvals(status="pending")`` stops showing it. A decision may land between the read below
    and that commit: the store then refuses the commit (``ApprovalChanged``) rather than overwrite the
    decision, and the caller reads again (cancel, ``approvals_ready``).

    Returns the approvals of waiting calls that were already approved or denied (nobody resumed the
    operation since): those decisions stay as recorded, but their calls will not run, which whoever
    ends the operation is told. Decisions are final, so what this one read saw holds at the commit.

    ``unreadable`` (a cancel's): an approval row that does not load (``UnreadableRow``) is collected
    there and left as it is, instead of ending the caller; without it such a row raises."""
    decided: list[PendingApproval] = []
    if op.current is None:
        return decided
    now = runner.clock.now()
    # The rows a cancel's escalation names as unreadable (cancel.py): left as they are, not read again.
    unread = {u.get("approval_id") for u in (op.escalation or {}).get("unreadable_approvals", ())}
    for rec in op.current.records:
        # Not only WAITING records: a turn resolved on expiry seals its records before the stop
        # (Policy(on_approval_expired="stop")), and their approvals are still pending in the store.
        if rec.approval_id is None or rec.approval_id in unread:
            continue
        # Asked in this turn and not committed yet (a stop before C1), or read from the store.
        mine = [a for a in op.pending_approvals if a.approval_id == rec.approval_id]
        try:
            approval = mine[-1] if mine else runner.store.get_approval(rec.approval_id)
        except UnreadableRow as exc:
            if unreadable is None:
                raise
            exc.columns.setdefault("approval_id", rec.approval_id)
            unreadable.append(exc)
            continue
        if approval is None:
            continue
        if approval.status == "pending":
            op.pending_approvals.append(withdraw(approval, now, why))
        elif (rec.status == WAITING and approval.status in ("approved", "denied")) or (
            # approved and resolved to run (a resume, or the expiry of another approval of its turn
            # under on_approval_expired="stop"), but the operation ends before it runs (review 14)
            rec.status == PLANNED and approval.status == "approved"
        ):
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
