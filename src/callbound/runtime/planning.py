"""Planning a turn's calls (VALIDATING), pausing for approvals, and resuming once they are decided (D3, D17)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from ..core.approvals import PendingApproval, expire
from ..core.dispatch import (
    APPROVAL_EXPIRED,
    Execute,
    NeedsApproval,
    Reject,
    plan_turn,
)
from ..core.errors import (
    ApprovalChanged,
    StoreError,
)
from ..core.guards import (
    Stop,
    check_tool_calls,
    identical_allowed,
)
from ..core.idempotency import LedgerStatus, run_key
from ..core.states import State
from ..core.types import ModelTurn, error_result
from .crash import crash_point, ledger_disabled
from .decisions import approval_verdict, reload_into
from .escalation import turn_calls
from .execute import ledger_entry, seal
from .integrity import plan_digest
from .operation import PLANNED, WAITING, CallRecord, CurrentTurn, Operation
from .results import call_arguments_json, payload_digest

if TYPE_CHECKING:
    from ..core.registry import ToolSpec
    from .runner import Runner


def plan(runner: Runner, op: Operation, turn: ModelTurn, replan: bool = False) -> None:
    """VALIDATING → EXECUTING | WAITING_APPROVAL | RESULTS_READY | STOPPED. Adds C1's content."""
    unique = {(c.response_id, c.call_id) for c in turn.calls}
    stop = check_tool_calls(op.budgets, op.spent, len(unique))
    if isinstance(stop, Stop):
        runner._stop(
            op,
            stop.reason,
            stop.detail,
            response_id=turn.response_id,
            **turn_calls(turn),
        )
        return
    offered = frozenset(op.offered)
    plan = plan_turn(turn.calls, runner.registry, offered, runner._trusted_op(op), runner.policy.authorize)
    repeated = [item.call.call_id for item in plan if _repeats_after_no_progress(runner, op, item)]
    if repeated:
        # D13 (3): the repeat ends the operation, known now, before any call of the turn runs or asks
        # a human. Checked only after the results, the turn's other calls (a refund among them) ran
        # for a model that was never told, as D15 keeps a turn over max_tool_calls from running.
        runner._stop(
            op,
            "NO_PROGRESS",
            f"the model repeated a call after being told it makes no progress (call {repeated[0]})",
            response_id=turn.response_id,
            **turn_calls(turn),
        )
        return
    op.spent.tool_calls += len(plan)
    records: list[CallRecord] = []
    cached = runner._turn_plain
    op.current = CurrentTurn(turn, records, cached[1] if cached is not None and cached[0] is turn else None)
    now = runner.clock.now()
    for item in plan:
        rec = CallRecord(
            item.call.response_id,
            item.call.call_id,
            item.call.name,
            PLANNED,
            # dispatch already wrote the canonical arguments it validated; the same text as
            # call_arguments_json(call), which re-encodes only where dispatch stopped before that
            item.arguments_json if item.arguments_json is not None else call_arguments_json(item.call),
        )
        records.append(rec)
        if isinstance(item, Reject):
            seal(runner, op, turn, rec, item.spec, error_result(item.code, item.message))
            continue
        rec.idempotency_key = item.idempotency_key
        if (
            isinstance(item, NeedsApproval)
            and not _already_done(runner, op, item.idempotency_key)
            and not _repeat_refused_anyway(op, item.spec, rec)
        ):
            approval = PendingApproval(
                approval_id=runner.ids.new_id("apr"),
                operation_id=op.operation_id,
                tenant=op.tenant,
                subject=op.subject,
                response_id=rec.response_id,
                call_id=rec.call_id,
                tool=item.spec.name,
                arguments=item.spec.redacted(item.call.arguments),
                argument_digest=item.argument_digest,
                policy_revision=runner.policy.revision,
                schema_version=item.spec.schema_version,
                tool_digest=item.spec.definition_digest(),
                created_at=now,
                expires_at=_expiry(runner, op, now),
            )
            rec.approval_id = approval.approval_id
            rec.status = WAITING
            op.pending_approvals.append(approval)
            op.audit(
                now,
                "approval_requested",
                {
                    "approval_id": approval.approval_id,
                    "call_id": rec.call_id,
                    "tool": approval.tool,
                    "argument_digest": approval.argument_digest,
                    # what the approver is shown (redacted): held to the chain like the digest, so an
                    # edited display cannot get a different amount approved (D17, D20)
                    "shown_sha256": payload_digest(approval.arguments),
                    "expires_at": approval.expires_at.isoformat(),
                    # its decision will carry a seal (core.approvals.decision_seal): a resume and
                    # `audit verify` require one of the decisions of approvals asked for so (D20)
                    "sealed_decision": 1,
                },
                runner.audit_key,
            )
    # D20: what each handler will be given, in the commit that holds the turn (C1)
    op.pending_plan = [turn.response_id, plan_digest(records)]
    after_plan(runner, op)


def _already_done(runner: Runner, op: Operation, key: str | None) -> bool:
    """D13 (1): the ledger comes first. An intent it holds as SUCCEEDED replays its recorded result
    without asking a human again: a pause (and a denial telling the model "it was not run") for an
    effect that already happened would be wrong. The call stays PLANNED and executing replays it."""
    if key is None or ledger_disabled():
        return False
    entry = ledger_entry(runner, op, key)
    return entry is not None and entry.status is LedgerStatus.SUCCEEDED


def _expiry(runner: Runner, op: Operation, now: datetime) -> datetime:
    """``approval_ttl`` after now, but never past the operation's ``not_after``, which ends the operation
    regardless (D14): an approval must not look decidable, listed as pending for hours, when no decision
    can take effect any more. A decision after it gets the late-decision warning, as for any expiry."""
    expires = now + runner.policy.approval_ttl
    not_after = op.budgets.not_after
    return min(expires, not_after) if not_after is not None else expires


def _repeat_refused_anyway(op: Operation, spec: ToolSpec, rec: CallRecord) -> bool:
    """D13 (2) before D17: a call the repeat guard will refuse with NO_PROGRESS whatever the decision
    (its tool and arguments already ran ``max_identical_calls`` times) asks no human: the call stays
    PLANNED and executing refuses it, so a model that repeats it after that NO_PROGRESS is stopped (D13
    (3)) instead of being told DENIED or making someone approve a call that cannot run."""
    return not identical_allowed(op.budgets, op.spent, run_key(spec, rec.arguments_json))


def _repeats_after_no_progress(runner: Runner, op: Operation, item: Execute | NeedsApproval | Reject) -> bool:
    """A call executing would refuse with NO_PROGRESS (D13 (2)) although the model was already told so
    for these arguments: D13 (3). A write whose intent the ledger holds is replayed or reconciled
    first (D13 (1)), not refused, so only a write the ledger holds nothing live for counts here."""
    spent = op.spent
    if isinstance(item, Reject) or not spent.no_progress_warned:
        return False  # the common turn: the model was never told NO_PROGRESS (no key to build)
    # validated again from the same text as when it runs (execute.run_key), so the two keys agree
    key = run_key(item.spec, item.arguments_json)
    told = key in spent.no_progress_keys or not spent.no_progress_keys
    if not told or identical_allowed(op.budgets, spent, key):
        return False
    if item.spec.is_write and item.idempotency_key is not None and not ledger_disabled():
        entry = ledger_entry(runner, op, item.idempotency_key)
        if entry is not None and entry.status is not LedgerStatus.FAILED:
            return False
    return True


def after_plan(runner: Runner, op: Operation) -> None:
    assert op.current is not None
    statuses = [r.status for r in op.current.records]
    if PLANNED in statuses:
        planned = [r for r in op.current.records if r.status == PLANNED]
        runner._move(
            op,
            State.EXECUTING,
            "execute",
            call_ids=[r.call_id for r in planned],
            idempotency_keys=[r.idempotency_key for r in planned if r.idempotency_key],
        )
    elif WAITING in statuses:
        enter_waiting(runner, op)
    else:
        runner._move(op, State.RESULTS_READY, "all_rejected")


def enter_waiting(runner: Runner, op: Operation) -> None:
    assert op.current is not None
    runner._move(
        op,
        State.WAITING_APPROVAL,
        "approval_required",
        approval_ids=[r.approval_id for r in op.current.records if r.status == WAITING],
    )


async def approvals_ready(runner: Runner, op: Operation) -> bool:
    """In WAITING_APPROVAL: False (still waiting) or move on once every approval of the turn is
    decided or expired, re-validating each approved call (D17). An approval that expired undecided is
    withdrawn in the same commit, so it is no longer listed as pending."""
    assert op.current is not None

    async def committed() -> bool:
        # An approver may decide an approval between our read of it and this commit, which marks it
        # withdrawn (expired, or the operation ending): the store refuses the commit rather than
        # overwrite the decision. Nothing of it was written: reload, and the drive calls here again
        # to resolve the turn from the decision. Each refusal needs a new decision, so this ends.
        try:
            await runner._flush(op)
        except ApprovalChanged:
            reload_into(runner, op)
            return False
        return True

    now = runner.clock.now()
    # D14: not_after ends the operation regardless, also while approvals are still pending.
    if op.budgets.not_after is not None and now >= op.budgets.not_after:
        runner._stop(op, "DEADLINE", "not_after passed while waiting for approval")
        await committed()
        return True
    waiting = [r for r in op.current.records if r.status == WAITING]
    approvals: dict[str, PendingApproval] = {}
    for rec in waiting:
        assert rec.approval_id is not None
        a = runner.store.get_approval(rec.approval_id)
        if a is None:
            raise StoreError(
                f"approval {rec.approval_id} of operation {op.operation_id} is missing from the store"
            )
        approvals[rec.approval_id] = a
        if a.status == "pending" and now < a.expires_at:
            return False
    turn = op.current.turn
    calls = {(c.response_id, c.call_id): c for c in turn.calls}
    expired_stop = False
    for rec in waiting:
        assert rec.approval_id is not None
        a = approvals[rec.approval_id]
        spec = runner.registry.get(rec.tool)
        code, message = approval_verdict(runner, op, rec, a, calls[(rec.response_id, rec.call_id)])
        op.audit(
            now,
            "approval_resolved",
            {
                "approval_id": a.approval_id,
                "status": a.status,
                "approver": a.approver,
                "result": code or "APPROVED",
            },
            runner.audit_key,
        )
        if a.status == "pending":
            # Expired undecided (an unexpired one returned above): nothing can take effect on it any
            # more, so it must not stay listed as pending after the model was told (docs/durability.md).
            stops = code == APPROVAL_EXPIRED and runner.policy.on_approval_expired == "stop"
            op.pending_approvals.append(expire(a, now, None if stops else code or APPROVAL_EXPIRED))
        if code is None:
            rec.status = PLANNED
        else:
            if code == APPROVAL_EXPIRED and runner.policy.on_approval_expired == "stop":
                expired_stop = True
            seal(runner, op, turn, rec, spec, error_result(code, message))
    if expired_stop:
        runner._stop(op, "APPROVAL_EXPIRED", "an approval expired and the policy stops on expiry")
        await committed()
        return True
    after_plan(runner, op)
    if await committed():
        crash_point("after_approval_before_execution")
    return True
