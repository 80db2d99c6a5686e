"""Cancelling an operation from any process: STOPPED(CANCELLED), refused while a write handler runs."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..core.errors import ApprovalChanged, StoreError, UsageError
from ..core.states import TERMINAL
from ..stores.rows import UnreadableRow
from .decisions import withdraw_pending
from .escalation import decided_extra, kept_text
from .lease import owner_is_gone
from .outcome import Outcome

if TYPE_CHECKING:
    from .runner import Runner

_ATTEMPTS = 3
log = logging.getLogger("callbound.runtime")


def cancel(runner: Runner, operation_id: str, reason: str) -> Outcome:
    """End an operation STOPPED(CANCELLED), unless a write handler is running (its effect would be
    left unknown). The check is made on a read of the operation; the commit is refused by the store
    if the operation moved on since, or if an approval it withdraws was decided since
    (``ApprovalChanged``), and the decision is made again on a fresh read. A decision recorded before
    the cancel is kept, and the escalation says that its call will not run."""
    for attempt in range(_ATTEMPTS):
        op = runner._load(operation_id)
        if op.state in TERMINAL:
            raise UsageError(f"operation {operation_id} is already {op.state.value}")
        if op.current is not None:
            for rec in op.current.records:
                spec = runner.registry.get(rec.tool)
                if rec.status == "running" and (spec is None or spec.is_write):
                    raise UsageError(_running_write(runner, operation_id, rec.call_id, rec.tool))
        # One read of its approvals, before the stop: the pending ones are withdrawn in the cancel's
        # commit (which the store refuses if one of them is decided meanwhile), and the ones already
        # decided are reported in the escalation. The stop's own withdrawal then finds nothing left.
        # An approval row that does not load (edited, damaged) is no reason to refuse the cancel: cancel
        # is how an operator ends an operation that cannot go on, and that row is why it cannot. The row
        # is left as it is (the evidence; audit verify and approvals list name it), and the escalation
        # says that it could not be read, so it was neither withdrawn nor reported as decided.
        unread: list[UnreadableRow] = []
        decided = withdraw_pending(runner, op, "the operation ended STOPPED(CANCELLED)", unread)
        runner._stop(
            op,
            "CANCELLED",
            reason + kept_text(decided) + _unread_text(unread),
            **(_unread_extra(unread) | decided_extra(decided)),
        )
        # Take the fencing token forward: a worker still driving this operation fails its next write
        # with StaleLease instead of overwriting the cancellation (D21).
        commit = op.take_commit()
        commit.fence = op.fence
        op.fence = (op.fence or 0) + 1
        commit.head["fence"] = op.fence
        try:
            runner.store.commit(commit)
        except StoreError as exc:
            # The operation moved on after we read it: its driver committed (a write may have
            # started; every commit links the audit chain, so ours no longer follows it) or a worker
            # claimed it; or an approver decided one of its approvals, which our commit would have
            # overwritten as withdrawn (the approver was told the decision was recorded). Read it
            # again and decide again: the decision then stays, and the escalation reports it.
            if attempt + 1 == _ATTEMPTS:
                raise
            if isinstance(exc, ApprovalChanged):
                log.info(
                    "cancel of %s: approval %s was decided meanwhile (%s); reading again",
                    operation_id,
                    exc.approval_id,
                    exc.status,
                    extra={"operation_id": operation_id, "approval_id": exc.approval_id},
                )
            continue
        return runner._outcome(op)
    raise AssertionError("unreachable")  # the loop returns or raises


def _unread_text(unread: list[UnreadableRow]) -> str:
    """The words a cancel's escalation adds for approval rows it could not read."""
    if not unread:
        return ""
    said = "; ".join(f"approval {u.columns.get('approval_id')} could not be read: {u.why}" for u in unread)
    return (
        f" ({said}; its stored row was left as it is, neither withdrawn nor decided: restore it from a "
        "backup, or keep it as evidence; callbound audit verify reports it)"
    )


def _unread_extra(unread: list[UnreadableRow]) -> dict[str, Any]:
    if not unread:
        return {}
    return {
        # with decided_approvals, even empty: the stop must not read the approvals again (escalation.py)
        "decided_approvals": [],
        "unreadable_approvals": [{"approval_id": u.columns.get("approval_id"), "why": u.why} for u in unread],
    }


def _running_write(runner: Runner, operation_id: str, call_id: str, tool: str) -> str:
    """Why a cancel is refused while a write is RUNNING, and what to do. The refusal stands either
    way: a write whose driver died has an unknown effect, which is reconciled, never guessed (D16)."""
    holder_of = getattr(runner.store, "lease_holder", None)
    holder = holder_of(operation_id) if holder_of is not None else None
    if holder_of is not None and (holder is None or owner_is_gone(holder)):
        return (
            f"operation {operation_id} has write call {call_id} ({tool}) left running by a process "
            f"that is gone, so its effect is unknown: run `callbound resume {operation_id}` to "
            "reconcile it (D16), then cancel if it is still running"
        )
    return (
        f"operation {operation_id} is running write call {call_id} ({tool}) under {holder or 'its driver'}; "
        "cancel it after the call finishes"
    )
