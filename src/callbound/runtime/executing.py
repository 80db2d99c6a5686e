"""EXECUTING → RESULTS_READY | WAITING_APPROVAL | STOPPED: one turn's planned calls, run under the
deadline (D14), with C1 durable before any handler (D18) and unknown write outcomes escalated (D16)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.guards import Stop
from ..core.idempotency import LedgerEntry, LedgerStatus
from ..core.states import State
from .execute import run_turn
from .operation import PLANNED, RUNNING, UNKNOWN, WAITING, CallRecord, Operation
from .planning import enter_waiting
from .turn_deadline import DeadlineSpent, deadline_stop

if TYPE_CHECKING:
    from .runner import Runner


async def execute_step(runner: Runner, op: Operation) -> None:
    """Run the turn's planned calls (C1 first, D18), stopping before any handler once the deadline
    is spent (D14); then RESULTS_READY, WAITING_APPROVAL (deadline not spent) or STOPPED."""
    assert op.current is not None
    statuses = {r.status for r in op.current.records}
    # D14: no handler starts once the deadline is spent (here: on entering EXECUTING, also after
    # an approval or in another process). A write left RUNNING by a process that died must go
    # through reconcile first (D16); the check before each write below still applies to it.
    if PLANNED in statuses and RUNNING not in statuses:
        stop = deadline_stop(runner, op)
        if stop is not None:
            _stop_before_handlers(runner, op, stop)
            await runner._flush(op)
            return
    if PLANNED in statuses and op.pending_journal and not writes_only(runner, op):
        await runner._flush(op)  # C1 is durable before any handler runs (D18)

    async def flush() -> None:
        runner._tick(op)
        if _starting_write(op) is not None:
            # Earlier calls of this turn may have used up the deadline: the write about to start
            # would get no time at all and end with an unknown outcome (D14, D16).
            stop = deadline_stop(runner, op)
            if stop is not None:
                raise DeadlineSpent(stop)
        runner.store.commit(op.take_commit())

    try:
        # a read that finds the deadline spent raises it too, before any later call starts (D14)
        await run_turn(runner, op, flush)
    except DeadlineSpent as spent:
        _stop_before_handlers(runner, op, spent.stop)
        await runner._flush(op)
        return
    records = op.current.records
    unknown = [r for r in records if r.status == UNKNOWN]
    if unknown:
        runner._stop(
            op,
            "OUTCOME_UNKNOWN",
            # A STOPPED operation cannot be resumed; the human checks the downstream system and
            # settles each key in the ledger (runtime/settle.py), then starts a new operation.
            "a write's outcome is unknown and could not be reconciled, so this operation stopped; a "
            "stopped operation cannot be resumed. Check the downstream system for these idempotency keys, "
            "then settle each one in the ledger: callbound ledger settle <key> --tenant <tenant> "
            "--applied|--not-applied --by <you> (applied: later proposals of the intent replay the "
            "result; not applied: the next proposal runs it again). Until then the ledger keeps each key "
            "UNKNOWN: a later operation proposing the same key goes through the tool's reconcile first "
            "and never re-runs it blindly, except where the handler was still running when this "
            "operation gave up on it (handler_alive): later operations are told IN_PROGRESS for that "
            "key, since the effect may still land (D16; docs/durability.md, Idempotency). Then start a "
            "new operation if work remains",
            call_ids=[r.call_id for r in unknown],
            idempotency_keys=[r.idempotency_key for r in unknown],
            tools=[r.tool for r in unknown],
            **_rest_of_turn(records),
        )
        await runner._flush(op)
        return
    if any(r.status == WAITING for r in records):
        # D14 (review 15, F1): the turn's other calls may have used up the deadline. Waiting now asked
        # a human to approve a call that could never run (the approval led to STOPPED(DEADLINE)).
        stop = deadline_stop(runner, op)
        if stop is not None:
            _stop_before_handlers(runner, op, stop)  # withdraws the pending approvals (runner._stop)
            await runner._flush(op)
            return
        enter_waiting(runner, op)
        await runner._flush(op)
        return
    runner._move(op, State.RESULTS_READY, "results_ready")


def _rest_of_turn(records: list[CallRecord]) -> dict[str, Any]:
    """What an OUTCOME_UNKNOWN stop's record says of the turn's other calls: the writes after the
    unknown one never start (D16: a human looks first), and those that ran did their effects, while
    the model hears of none of it. Named, as a DEADLINE stop names them (_stop_before_handlers)."""
    extra: dict[str, Any] = {}
    unrun = [r for r in records if r.status in (PLANNED, WAITING)]
    if unrun:
        extra["not_run"] = [{"call_id": r.call_id, "tool": r.tool} for r in unrun]
    handled = [r for r in records if r.status not in (PLANNED, WAITING, UNKNOWN)]
    if handled:
        extra["handled"] = [{"call_id": r.call_id, "tool": r.tool, "effect": r.effect} for r in handled]
    return extra


def writes_only(runner: Runner, op: Operation) -> bool:
    """Every planned call of the turn is a write. Then C1 waits for the first write's ledger STARTED
    and goes out in the same commit (D18: turn, plan, STARTED, EXECUTING); a write that runs no
    handler (replayed, in progress elsewhere, refused as a repeat) sends it with C2 instead."""
    if op.current is None:
        return False
    planned = [r for r in op.current.records if r.status == PLANNED]
    if not planned:
        return False
    for rec in planned:
        spec = runner.registry.get(rec.tool)
        if spec is None or not spec.is_write:
            return False
    return True


def _stop_before_handlers(runner: Runner, op: Operation, stop: Stop) -> None:
    """End the operation from EXECUTING without starting another handler. A write that was about
    to start is put back: its ledger STARTED never reaches the store, so its intent stays free."""
    assert op.current is not None
    starting = _starting_write(op)
    if starting is not None:
        rec, entry = starting
        op.pending_ledger = [e for e in op.pending_ledger if e is not entry]
        rec.status = PLANNED
    # The calls that do not run (planned, or still waiting for their approval), and those of the turn
    # that did, with their effects: an applied write's result never reaches the model (issue 2 §5).
    unrun = [r for r in op.current.records if r.status in (PLANNED, WAITING)]
    extra: dict[str, Any] = {"call_ids": [r.call_id for r in unrun], "tools": [r.tool for r in unrun]}
    handled = [r for r in op.current.records if r.status not in (PLANNED, WAITING)]
    if handled:
        extra["handled"] = [{"call_id": r.call_id, "tool": r.tool, "effect": r.effect} for r in handled]
    runner._stop(op, stop.reason, stop.detail, **extra)


def _starting_write(op: Operation) -> tuple[CallRecord, LedgerEntry] | None:
    """The write whose handler is about to start: RUNNING, with ledger STARTED not yet committed."""
    if op.current is None:
        return None
    for rec in op.current.records:
        if rec.status != RUNNING or rec.idempotency_key is None:
            continue
        mine = [e for e in op.pending_ledger if e.key == rec.idempotency_key and e.tenant == op.tenant]
        if mine and mine[-1].status is LedgerStatus.STARTED:
            return rec, mine[-1]
    return None
