"""The escalation record of a safe stop: what a human must look at (issue 2 §5, D13, D16).

Every stop names what tripped, the counts (its detail) and the turn it happened on. A stop that
names no turn of its own (one checked before the next model request: MAX_TURNS, DEADLINE, a cost or
token budget, also before a retry; an approval that expired; a cancel) names the turn last handled:
its response id, its calls and each call's effect. Its calls may have run, a write among them,
while their results never reached the model; only MAX_TOOL_CALLS and NO_PROGRESS named their turn
before (review round 14).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.approvals import PendingApproval
from ..core.errors import StoreError
from ..core.states import TERMINAL, State
from ..core.types import ModelTurn
from .decisions import withdraw_pending
from .operation import Operation

if TYPE_CHECKING:
    from .runner import Runner


def turn_calls(turn: ModelTurn) -> dict[str, Any]:
    """The calls a stop on ``turn`` leaves unrun: their ids and tools, in the order proposed."""
    return {"call_ids": [c.call_id for c in turn.calls], "tools": [c.name for c in turn.calls]}


def escalate(
    runner: Runner,
    op: Operation,
    reason: str,
    detail: str,
    target: State,
    ended_by: str | None,
    extra: dict[str, Any],
) -> None:
    """End ``op`` in ``target`` with ``reason`` and its escalation record (runner._stop)."""
    if target in TERMINAL and "decided_approvals" not in extra:
        # Decisions recorded for calls that will not run now (a DEADLINE or APPROVAL_EXPIRED stop while
        # one call of the turn was approved and another still waited): kept as recorded, and said, as a
        # cancel says them (cancel.py passes its own); left out, an approval recorded as given was
        # silently never acted on (issue 4 §5: no lost approval; review round 14).
        why = f"the operation ended {target.value}({reason})"
        decided = withdraw_pending(runner, op, why)
        detail += kept_text(decided)
        extra = {**extra, **decided_extra(decided)}
    op.reason = reason
    op.escalation = {
        "reason": reason,
        "detail": detail,
        "at": runner.clock.now().isoformat(),
        "operation_id": op.operation_id,
        "state_before": op.state.value,
        "tenant": op.tenant,
        "subject": op.subject,
        **({} if "response_id" in extra else _last_turn(runner, op, "call_ids" not in extra)),
        **extra,
    }
    by = {} if ended_by is None else {"response_id": ended_by}
    runner._move(op, target, reason.lower(), reason=reason, **by)
    op.audit(runner.clock.now(), "escalation", op.escalation, runner.audit_key)


def kept_text(decided: list[PendingApproval]) -> str:
    """The words an escalation's detail adds for decisions kept whose calls do not run."""
    if not decided:
        return ""
    said = "; ".join(
        f"approval {a.approval_id} was {a.status} by {a.approver} at "
        f"{a.decided_at.isoformat() if a.decided_at else '?'}"
        for a in decided
    )
    return f" ({said}: the decision is kept, but the operation ends here and the call does not run)"


def decided_extra(decided: list[PendingApproval]) -> dict[str, Any]:
    if not decided:
        return {}
    return {
        "decided_approvals": [
            {"approval_id": a.approval_id, "status": a.status, "approver": a.approver} for a in decided
        ]
    }


def _last_turn(runner: Runner, op: Operation, with_calls: bool) -> dict[str, Any]:
    """The turn last handled: the one under work, else the last whose results were saved (its
    effects read back from that results row). ``with_calls``: the stop names no calls of its own."""
    if op.current is not None:
        out: dict[str, Any] = {"response_id": op.current.turn.response_id}
        if with_calls:
            records = op.current.records
            out["call_ids"] = [r.call_id for r in records]
            out["tools"] = [r.tool for r in records]
            out["effects"] = [r.effect for r in records]
        return out
    last = op.last_turn
    if last is None:
        return {}  # no turn yet
    out = {"response_id": last.response_id}
    if with_calls:
        out.update(turn_calls(last))
        effects = _saved_effects(runner, op, last.response_id) if last.calls else {}
        out["effects"] = [effects.get(c.call_id) for c in last.calls]
    return out


def _saved_effects(runner: Runner, op: Operation, response_id: str) -> dict[str, Any]:
    """call id → effect ("applied", "replayed", "reconciled", "not_applied", "none" ...) from the results
    row of ``response_id``, as committed with C2 (D18); read only when a stop needs it. Rows that do
    not read back (a store that cannot be read, an edited row: an INTEGRITY stop reports those) leave
    the effects unknown (null) rather than fail the stop itself (D4)."""
    try:
        stored = runner.store.load_operation(op.operation_id)
    except StoreError:
        return {}
    for row in reversed(stored.journal if stored is not None else []):
        if (
            row.kind != "results"
            or not isinstance(row.data, dict)
            or row.data.get("response_id") != response_id
        ):
            continue
        envelopes = row.data.get("envelopes")
        return {
            e["call_id"]: e["protected_audit"].get("effect")
            for e in (envelopes if isinstance(envelopes, list) else [])
            if isinstance(e, dict)
            and isinstance(e.get("call_id"), str)
            and isinstance(e.get("protected_audit"), dict)
        }
    return {}
