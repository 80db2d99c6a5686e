"""Executing the planned calls of one turn: ledger, repeat guard, handlers, reconcile, envelopes.

Order per call (D13): (1) write tools consult the ledger (same intent → recorded result, a replay);
(2) the repeat guard refuses run number ``max_identical_calls + 1``; (3) run. Reads run concurrently
up to ``max_parallel``; writes one at a time in proposal order (D15). Each write's ledger STARTED is
committed before its handler runs (D18), a reconcile's takeover of an entry before its hook (D16).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..core.binding import TrustedCall, make_envelope
from ..core.dispatch import (
    HANDLER_ERROR,
    IN_PROGRESS,
    INVALID_ARGUMENTS,
    NO_PROGRESS,
    RESULT_TOO_LARGE,
    TIMEOUT,
    UNKNOWN_TOOL,
)
from ..core.errors import USER_CODE_FAILURES
from ..core.guards import identical_allowed
from ..core.idempotency import PURGED_APPLIED, LedgerAction, LedgerEntry, LedgerStatus, decide, run_key
from ..core.registry import ToolSpec, is_async_callable
from ..core.snapshot import envelope_to_dict
from ..core.types import ModelTurn, ToolCall, error_result, ok_result
from .call_values import count_run as _count_run
from .call_values import replayed as _replayed
from .call_values import result_for as _result_for
from .claims import Claim
from .claims import held_elsewhere as _held_elsewhere
from .claims import queue as _ledger
from .crash import crash_point, ledger_disabled
from .operation import DONE, PLANNED, RUNNING, UNKNOWN, CallRecord, Operation
from .repeats import TurnRuns
from .slots import outside_turn
from .tools import HandlerOutcome, linger_for, turn_slots
from .turn_deadline import (
    ReadGate,
    ctx_for,
    deadline_stop,
    raise_if_reads_left,
    reconcile_bounds,
    time_left_s,
    timeout_for,
)

if TYPE_CHECKING:
    from .runner import Runner

log = logging.getLogger("callbound.runtime")


def trusted_for(
    runner: Runner, op: Operation, turn: ModelTurn, rec: CallRecord, spec: ToolSpec | None
) -> TrustedCall:
    """Trusted context for a call, from the operation row, the registry, the record and the turn (D10)."""
    return TrustedCall(
        provider=turn.provenance.provider,
        api=turn.api,
        adapter_revision=turn.provenance.adapter_revision,
        response_id=rec.response_id,
        call_id=rec.call_id,
        tool=rec.tool,
        arguments_json=rec.arguments_json,
        operation_id=op.operation_id,
        tenant=op.tenant,
        subject=op.subject,
        # A sealed record keeps the context it was bound under (see CallRecord.handler).
        handler=rec.handler if rec.handler is not None else (spec.handler_ref if spec is not None else "-"),
        schema_version=rec.schema_version
        if rec.schema_version is not None
        else (spec.schema_version if spec is not None else "-"),
        policy_revision=rec.policy_revision if rec.policy_revision is not None else runner.policy.revision,
        idempotency_key=rec.idempotency_key,
        effect=rec.effect,
        producer=rec.producer,
    )


def ledger_entry(runner: Runner, op: Operation, key: str) -> LedgerEntry | None:
    """The ledger entry of an intent as this operation sees it: its newest entry not committed yet
    (this turn's), else the store's."""
    pending = [e for e in op.pending_ledger if e.key == key and e.tenant == op.tenant]
    return pending[-1] if pending else runner.store.ledger_get(op.tenant, key)


def seal(
    runner: Runner,
    op: Operation,
    turn: ModelTurn,
    rec: CallRecord,
    spec: ToolSpec | None,
    model_result: dict[str, Any],
    output: Any = None,
) -> None:
    """Attach a bound envelope to the record; the call is done."""
    audit_input: Any = None
    if spec is not None and rec.arguments_json is not None:
        # D20: the tool's redaction hook decides what of the arguments is stored in clear.
        audit_input = (
            rec.arguments_json if spec.redact is None else spec.redacted(json.loads(rec.arguments_json))
        )
    trusted = trusted_for(runner, op, turn, rec, spec)
    env = make_envelope(trusted, model_result, output=output, audit_input=audit_input)
    rec.envelope = envelope_to_dict(env)
    rec.handler, rec.schema_version, rec.policy_revision = (
        trusted.handler,
        trusted.schema_version,
        trusted.policy_revision,
    )
    rec.status = DONE
    op.unaudited_seals.append(rec)


def refuse(
    runner: Runner,
    op: Operation,
    turn: ModelTurn,
    rec: CallRecord,
    spec: ToolSpec | None,
    code: str,
    message: str,
) -> None:
    """Seal a call that does not run with an error envelope for the model (``code``, ``message``)."""
    seal(runner, op, turn, rec, spec, error_result(code, message))


async def run_turn(runner: Runner, op: Operation, flush: Callable[[], Awaitable[None]]) -> None:
    """Run every PLANNED call of the current turn."""
    assert op.current is not None
    turn = op.current.turn
    calls = {(c.response_id, c.call_id): c for c in turn.calls}
    reads: list[CallRecord] = []
    writes: list[CallRecord] = []
    for rec in op.current.records:
        if rec.status == RUNNING:
            # Left running by a process that died: a read is safe to run again; a write's outcome is
            # unknown and goes through the ledger (STARTED → reconcile).
            rec.status = PLANNED
        if rec.status != PLANNED:
            continue
        spec = runner.registry.get(rec.tool)
        (writes if spec is not None and spec.is_write else reads).append(rec)

    if len(reads) == 1 and not writes:
        # The common turn, one read: no slot to share (max_parallel cannot bind one call), and its
        # timeout is already capped by the remaining deadline (timeout_for). The turn's slots cost
        # about 10% of a sync round trip (bench), for nothing here.
        rec = reads[0]
        await _run_read(runner, op, turn, rec, calls[(rec.response_id, rec.call_id)])
        raise_if_reads_left(runner, op, reads)
        return
    # max_parallel is enforced where handlers run (the executor), not around _run_read: a sync handler
    # that timed out keeps its slot until its thread really ends (D15). A write's handler that never
    # started there is "not applied"; a reconcile hook's is not, it tells nothing about the effect.
    write_specs = [s for s in (runner.registry.get(r.tool) for r in writes) if s is not None]
    hooks = {id(s.reconcile) for s in write_specs if s.reconcile is not None}
    effects = [s.handler for s in write_specs if id(s.handler) not in hooks]
    with turn_slots(op.budgets.max_parallel, time_left_s(runner, op), effects):
        if len(reads) == 1:
            rec = reads[0]  # no task for one read
            await _run_read(runner, op, turn, rec, calls[(rec.response_id, rec.call_id)])
        elif reads:
            runs = TurnRuns()  # identical reads side by side: D13 (2) on completed runs (repeats.py)
            gate = ReadGate(runner, op)  # D14 where each handler starts, after any wait for a slot
            await asyncio.gather(
                *(
                    _run_read(runner, op, turn, r, calls[(r.response_id, r.call_id)], runs, gate)
                    for r in reads
                )
            )
        raise_if_reads_left(runner, op, reads)  # no write starts either (D14)

        for rec in writes:
            await _run_write(runner, op, turn, rec, calls[(rec.response_id, rec.call_id)], flush)
            if rec.status == UNKNOWN:
                return  # stop here: a human must look before anything else runs (D16)


def _args_or_refuse(runner: Runner, op: Operation, turn: ModelTurn, rec: CallRecord, spec: ToolSpec) -> Any:
    """The call's arguments under the tool as the registry has it now, or None after sealing an
    INVALID_ARGUMENTS envelope. They were valid when the call was planned; a resume after a crash may
    run under a new deploy whose tool of the same name takes other arguments (D4: never an exception
    out of the loop; nothing runs on arguments its handler does not accept)."""
    assert rec.arguments_json is not None
    try:
        return spec.validate_json(rec.arguments_json)
    except USER_CODE_FAILURES as exc:  # pydantic's ValidationError, or a validator's own error
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        why = (
            f"arguments rejected by {spec.name} ({spec.schema_version}): {first}. The tool changed since "
            "the call was proposed; it was not run."
        )
        refuse(runner, op, turn, rec, spec, INVALID_ARGUMENTS, why)
        return None


def _tool_gone(runner: Runner, op: Operation, turn: ModelTurn, rec: CallRecord) -> None:
    """The call's tool is no longer in the registry: a deploy between planning and running (a resume
    after a crash, or after an approval). A write planned before may have started already: its own
    ledger entry says so. SUCCEEDED is replayed; STARTED or UNKNOWN cannot be reconciled without the
    tool, so the outcome is unknown (D16, OUTCOME_UNKNOWN); otherwise nothing ran and the model is told."""
    entry = None
    if rec.idempotency_key is not None and not ledger_disabled():
        entry = ledger_entry(runner, op, rec.idempotency_key)
        if entry is not None and entry.operation_id != op.operation_id:
            entry = None
    if entry is not None and entry.status is LedgerStatus.SUCCEEDED and entry.result is not None:
        rec.effect, rec.producer = "replayed", "ledger"
        seal(runner, op, turn, rec, None, _replayed(op, None, entry.result))
        return
    if entry is not None and entry.status in (LedgerStatus.STARTED, LedgerStatus.UNKNOWN):
        rec.status = UNKNOWN
        return
    why = f"{rec.tool} is no longer offered (the application changed since the call was proposed); it was not run."
    refuse(runner, op, turn, rec, None, UNKNOWN_TOOL, why)


def _repeat_refused(
    runner: Runner, op: Operation, turn: ModelTurn, rec: CallRecord, spec: ToolSpec, key: str
) -> bool:
    if identical_allowed(op.budgets, op.spent, key):
        return False
    rec.no_progress = True
    why = (
        f"{spec.name} was already run {op.budgets.max_identical_calls} times with these arguments; "
        "repeating it makes no progress. Use the results you have or try something else."
    )
    refuse(runner, op, turn, rec, spec, NO_PROGRESS, why)
    return True


def _approval_lapsed(runner: Runner, op: Operation, turn: ModelTurn, rec: CallRecord, spec: ToolSpec) -> bool:
    """D17 at the moment an approved call would run, not only when its approval was resolved: a process
    that resolved it may have died before the handler ran (crash point after_approval_before_execution),
    and the process that takes the operation over may run another deploy. Under that deploy's policy
    revision, schema, approver rule and authorization hooks the approval must still hold, as a resume from WAITING_APPROVAL
    would check; else the call is refused (APPROVAL_STALE or DENIED) and does not run."""
    if rec.approval_id is None:
        return False
    from .decisions import approval_verdict  # decisions → integrity → results → here

    approval = runner.store.get_approval(rec.approval_id)
    if approval is None:
        refuse(
            runner,
            op,
            turn,
            rec,
            spec,
            "APPROVAL_STALE",
            "the approval for this call is gone; it was not run",
        )
        return True
    call = next(c for c in turn.calls if (c.response_id, c.call_id) == (rec.response_id, rec.call_id))
    code, message = approval_verdict(runner, op, rec, approval, call)
    if code is None:
        return False
    refuse(runner, op, turn, rec, spec, code, message)
    return True


async def _run_read(
    runner: Runner,
    op: Operation,
    turn: ModelTurn,
    rec: CallRecord,
    call: ToolCall,
    runs: TurnRuns | None = None,
    gate: ReadGate | None = None,
) -> None:
    spec = runner.registry.get(rec.tool)
    if spec is None:  # run_turn files a call whose tool is gone with the reads
        _tool_gone(runner, op, turn, rec)
        return
    if _approval_lapsed(runner, op, turn, rec, spec):
        return
    args = _args_or_refuse(runner, op, turn, rec, spec)
    if args is None:
        return
    key = run_key(spec, rec.arguments_json, args)
    if runs is not None:
        await runs.settle(op, key)  # an identical read of this turn still running: its outcome first
    if _repeat_refused(runner, op, turn, rec, spec, key):
        return
    # Fix: reads run concurrently, and the run used to be counted only after the handler returned, so
    # identical reads of one turn all passed the check (5 proposals ran 4 times with
    # max_identical_calls=2). Reserve the run now; give it back if the run does not succeed.
    op.spent.identical[key] = op.spent.identical.get(key, 0) + 1
    if runs is not None:
        runs.start(key)
    try:
        # D14: no handler starts once the deadline is spent (review 15, F2); the read stays PLANNED
        # and the turn stops DEADLINE, as before a write. One of several may first wait for a slot
        # (D15), so its gate checks in the executor, just before the handler; one alone, here.
        gated = None if gate is None else gate.wrap(spec.handler)
        # On the loop first too: with the time spent the timeout below is 0, and a sync job could be
        # withdrawn by its timer before the gate in its thread ran (review round 15, r7).
        if gate.spent() if gate is not None else deadline_stop(runner, op) is not None:
            op.spent.identical[key] -= 1
            return
        rec.status = RUNNING
        outcome = await runner.executor.run(
            gated or spec.handler, args, ctx_for(runner, op, rec, spec), timeout_for(runner, op, spec)
        )
        if gated is not None and gated.never_ran(outcome.started):
            rec.status = PLANNED
            op.spent.identical[key] -= 1
            return
        rec.producer = "handler"
        succeeded = False
        if outcome.kind == "ok":
            model_result, output = _result_for(spec, op, outcome.value)
            # D13 (2) counts runs: a handler that returned a value too large to send still ran, as a
            # write's does (_count_run); uncounted, the same read re-ran on every repeat, never refused
            succeeded = bool(model_result["ok"]) or model_result["error"]["code"] == RESULT_TOO_LARGE
            if succeeded:
                rec.identical_key = key
            seal(runner, op, turn, rec, spec, model_result, output)
        if not succeeded:
            op.spent.identical[key] -= 1
    finally:
        if runs is not None:
            runs.end(key)  # the count is final: a duplicate waiting in settle() decides on it
    if outcome.kind == "ok":
        return
    if outcome.kind == "timeout":
        seal(runner, op, turn, rec, spec, error_result(TIMEOUT, outcome.message or "timeout"))
    else:
        seal(runner, op, turn, rec, spec, error_result(HANDLER_ERROR, outcome.message or "the tool failed"))


async def _reconcile(
    runner: Runner,
    op: Operation,
    turn: ModelTurn,
    rec: CallRecord,
    spec: ToolSpec,
    attempts: int,
    failure_code: str = TIMEOUT,
    *,
    ours: bool = True,
) -> bool:
    """D16: find out whether an unknown write happened. True if the call is settled (done), False if
    nobody can tell (the record is UNKNOWN, the operation must stop). ``ours``: the attempt was this
    operation's (not another operation's entry taken over), so an applied one is a run of it."""
    if spec.reconcile is None or rec.idempotency_key is None:
        rec.status = UNKNOWN
        return False
    # Through the executor, like a handler (a sync reconcile in a worker thread, not on the event loop,
    # where it would also stop the lease's heartbeat), but under the tool's own timeout alone, outside
    # the turn's slots: not cut to the deadline or not_after, which may be what cut the handler (D35).
    # A timeout or any failure means nobody can tell; a spent deadline stops the operation afterwards.
    ctx, timeout_s = reconcile_bounds(runner, op, rec, spec)
    with outside_turn():
        checked = await runner.executor.run(spec.reconcile, rec.idempotency_key, ctx, timeout_s)
    if checked.kind == "not_applied":
        _ledger(op, rec, spec, LedgerStatus.FAILED, None, attempts)
        rec.effect, rec.producer = "not_applied", "reconcile"
        seal(
            runner,
            op,
            turn,
            rec,
            spec,
            # the code says what happened to the attempt: it timed out, or the handler failed
            error_result(
                failure_code, f"{spec.name} did not complete and was not applied; you may try again."
            ),
        )
        return True
    if checked.kind != "ok" or checked.value is None:
        # LookupError, any other failure, no answer in time; or None, which a lookup that found nothing
        # returns as readily as a bare "applied" (``return payments.lookup(key)``): read as applied, a
        # refund that never happened was told to the model as done and never run (D16: not guessed)
        if checked.kind == "ok":
            log.warning("%s's reconcile returned None: return the result, or raise NotApplied", spec.name)
        rec.status = UNKNOWN
        return False
    model_result, output = _result_for(spec, op, checked.value)
    _ledger(op, rec, spec, LedgerStatus.SUCCEEDED, model_result, attempts)
    rec.effect, rec.producer = "reconciled", "reconcile"
    if ours:
        # D13 (2) counts successful runs: this operation's handler ran and the effect is applied, as
        # when it returns (_run_write). Uncounted, a handler error or a crash after the effect let the
        # same tool and arguments (under a new intent key) run again past max_identical_calls.
        _count_run(op, rec, spec)
    seal(runner, op, turn, rec, spec, model_result, output)
    return True


async def _run_write(
    runner: Runner,
    op: Operation,
    turn: ModelTurn,
    rec: CallRecord,
    call: ToolCall,
    flush: Callable[[], Awaitable[None]],
) -> None:
    spec = runner.registry.get(rec.tool)
    assert spec is not None and rec.idempotency_key is not None
    if op.pending_ledger:
        # An earlier write of this turn has its outcome queued: durable first. This write may queue a
        # claim, and the store refuses a commit with a refused claim whole (IntentTaken): the earlier
        # write's SUCCEEDED went with it, and the reload read it as STARTED, a crash to reconcile
        # (OUTCOME_UNKNOWN, or a lagging lookup that said "not applied" and paid again; D16, D18).
        await flush()
    claim = Claim(op, rec, flush)
    started = await _start_write(runner, op, turn, rec, spec, claim)
    # STARTED is durable before the effect; for a turn of writes only, this is C1 (D18). A refused
    # claim is taken back and the write decided again (claims.py), the answered turn kept.
    while started is not None and not await claim.commit(op):
        started = await _start_write(runner, op, turn, rec, spec, claim)
    if started is None:
        return  # settled without its handler: refused, in progress elsewhere, replayed, reconciled
    args, attempts = started
    crash_point("after_ledger_started", spec.name)
    # Fix: CallContext.attempt was always 1; a write run again after NotApplied (ledger FAILED) now
    # sees the ledger's attempt number.
    try:
        outcome: HandlerOutcome = await runner.executor.run(
            spec.handler, args, ctx_for(runner, op, rec, spec, attempts), timeout_for(runner, op, spec)
        )
    except asyncio.CancelledError:
        # The run is cancelled: an async handler's task ends, work it handed to a thread goes on.
        # Nobody may reconcile before the grace a timeout gives it (below): the lease is held (D16).
        if is_async_callable(spec.handler):
            linger_for(op.operation_id, runner.executor.grace_s)
        raise
    crash_point("after_effect_before_result_commit", spec.name)
    rec.producer = "handler"
    if outcome.kind == "ok":
        model_result, output = _result_for(spec, op, outcome.value)
        _ledger(op, rec, spec, LedgerStatus.SUCCEEDED, model_result, attempts)
        rec.effect = "applied"
        _count_run(op, rec, spec, args)
        seal(runner, op, turn, rec, spec, model_result, output)
        return
    if outcome.kind == "not_applied":
        _ledger(op, rec, spec, LedgerStatus.FAILED, None, attempts)
        rec.effect = "not_applied"
        seal(runner, op, turn, rec, spec, error_result(HANDLER_ERROR, outcome.message or "not applied"))
        return
    # error or timeout: the effect may or may not have happened (D16)
    # a thread still running may still apply it: neither this operation nor another may reconcile yet
    _ledger(op, rec, spec, LedgerStatus.UNKNOWN, None, attempts, handler_alive=outcome.still_running)
    rec.effect = "unknown"
    if outcome.still_running:
        rec.status = UNKNOWN
        return
    if outcome.kind == "timeout" and is_async_callable(spec.handler):
        # Cancelling an async handler stops its task, not work it handed to a thread
        # (asyncio.to_thread around a blocking client), which may still apply the effect: asked at
        # once, reconcile would find nothing, answer "not applied", and the model's retry would pay
        # twice. Give it the grace a sync handler's thread gets (D16) before asking; a run cancelled
        # in this wait holds the lease for what is left of it (review round 15, r8).
        grace_end = asyncio.get_running_loop().time() + runner.executor.grace_s
        try:
            await asyncio.sleep(runner.executor.grace_s)
        except asyncio.CancelledError:
            linger_for(op.operation_id, grace_end - asyncio.get_running_loop().time())
            raise
    await _reconcile(
        runner, op, turn, rec, spec, attempts, TIMEOUT if outcome.kind == "timeout" else HANDLER_ERROR
    )


async def _start_write(
    runner: Runner, op: Operation, turn: ModelTurn, rec: CallRecord, spec: ToolSpec, claim: Claim
) -> tuple[Any, int] | None:
    """Decide a write on its ledger entry (D13 (1), D16) and the repeat guard (D13 (2)). (arguments,
    attempt) once its STARTED claim is queued, to be committed (``claim``) before the handler runs;
    None when the call was settled without running its handler (sealed, or UNKNOWN)."""
    assert rec.idempotency_key is not None
    # Fix: an earlier write of this turn with the same intent keeps its outcome in op.pending_ledger
    # until the next commit; reading only the store saw that write's STARTED row and treated a finished
    # write like a crash (RECONCILE, then OUTCOME_UNKNOWN) instead of replaying it. Newest entry wins.
    entry = None if ledger_disabled() else ledger_entry(runner, op, rec.idempotency_key)
    if entry is not None and entry.tool != spec.name:
        # Two tools named the same intent (their intent_key hooks collide): the entry is another tool's
        # effect, whose result must not be replayed as this one's, and running this one could not be
        # told apart from it in the ledger. Neither: the model is told, and nothing runs.
        why = f"{spec.name} could not run: its intent key is already used by another tool. It was not run."
        refuse(runner, op, turn, rec, spec, HANDLER_ERROR, why)
        return None
    action = decide(entry, held_elsewhere=_held_elsewhere(runner, op, entry))
    attempts = entry.attempts if entry else 0
    if action is LedgerAction.IN_PROGRESS:
        # Another operation is carrying out this intent and may be inside its handler now: neither
        # run it nor reconcile it (D16, D21). Nothing of ours happened; the model may ask again
        # later, when the ledger holds that operation's outcome to replay.
        rec.producer = "ledger"
        assert entry is not None
        why = (
            # handler_alive: the attempt that holds the key was given up on, its handler may still land
            # the effect, and a human settles it; "being carried out elsewhere" read as if it were live.
            f"an earlier {spec.name} request with the same intent has an unknown outcome that is being "
            "checked; it was not run again. Do not repeat it now."
            if entry.status is LedgerStatus.UNKNOWN
            else f"the same {spec.name} request is already being carried out elsewhere and its outcome "
            "is not known yet; it was not run again. Do not repeat it now."
        )
        refuse(runner, op, turn, rec, spec, IN_PROGRESS, why)
        return None
    if action is LedgerAction.REPLAY:
        assert entry is not None
        rec.effect, rec.producer = "replayed", "ledger"
        # A result purged from the ledger (D20 allows it) still stands for an effect that happened:
        # replayed as "applied", never run again (an assert here crashed the run).
        recorded = entry.result if entry.result is not None else ok_result(dict(PURGED_APPLIED))
        seal(runner, op, turn, rec, spec, _replayed(op, spec, recorded))
        return None
    if action is LedgerAction.RECONCILE:
        assert entry is not None
        # STARTED left by a crash, or UNKNOWN from an earlier timeout: never re-run blindly. Taking it
        # over is a claim, committed before the reconcile hook runs, so the hook never runs for an entry
        # another operation took over (D16), and written STARTED, so no other operation reconciles it
        # while ours does (IN_PROGRESS: held_elsewhere). Queued with the outcome as before, a refused
        # claim reloaded the operation to before its answered turn: the paid turn was lost from Spent
        # and the model asked again (D12, D27; review round 14). Refused here: decided again.
        _ledger(op, rec, spec, LedgerStatus.STARTED, None, attempts, claim=True, read=entry)
        data = {"call_id": rec.call_id, "tool": spec.name, "idempotency_key": rec.idempotency_key}
        op.audit(
            runner.clock.now(), "reconcile_started", {**data, "over": entry.operation_id}, runner.audit_key
        )
        if not await claim.commit(op):
            return await _start_write(runner, op, turn, rec, spec, claim)  # CLAIM_TRIES bounds it
        if not await _reconcile(
            runner, op, turn, rec, spec, attempts, ours=entry.operation_id == op.operation_id
        ):
            _ledger(op, rec, spec, LedgerStatus.UNKNOWN, None, attempts)  # nobody can tell (D16)
        if rec.status != UNKNOWN and rec.effect == "not_applied":
            # definitely not applied: it may run now, as a fresh attempt
            rec.status, rec.envelope = PLANNED, None
            rec.handler = rec.schema_version = rec.policy_revision = None  # re-bound when it runs
        else:
            return None
    if _approval_lapsed(runner, op, turn, rec, spec):
        return None
    args = _args_or_refuse(runner, op, turn, rec, spec)  # before STARTED: a refusal leaves no claim
    if args is None or _repeat_refused(runner, op, turn, rec, spec, run_key(spec, rec.arguments_json, args)):
        return None
    attempts += 1
    # A claim of the intent, decided on the entry read (none, FAILED, or the one just reconciled): the
    # store refuses it if another operation's entry replaced that one since the read (two operations
    # proposing one refund at the same moment, or retrying one that definitely failed). Not under the
    # crash matrix's negative control, which must be able to run an effect twice.
    _ledger(op, rec, spec, LedgerStatus.STARTED, None, attempts, claim=True, read=entry)
    rec.status = RUNNING
    # Every commit links the audit chain, this one too: a write is about to start, and a commit built
    # from an older head (a cancel from another process) no longer follows the chain, so the store
    # refuses it instead of ending the operation under a running write.
    op.audit(
        runner.clock.now(),
        "write_started",
        {
            "call_id": rec.call_id,
            "tool": spec.name,
            "idempotency_key": rec.idempotency_key,
            "attempt": attempts,
        },
        runner.audit_key,
    )
    return args, attempts
