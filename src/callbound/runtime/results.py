"""RESULTS_READY → MODEL_REQUESTED: correlate, verify every binding from trusted context, check progress, commit C2 (D10, D13, D18)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from ..core.binding import CorrelationTable, TrustedCall, verify_results_hashed
from ..core.canonical import canonical_json, canonical_sha256
from ..core.errors import (
    BindingMismatch,
    CanonicalizationError,
    CorrelationError,
)
from ..core.guards import (
    Stop,
    identical_key,
    record_turn_results,
)
from ..core.idempotency import run_key
from ..core.snapshot import envelope_from_dict
from ..core.states import State
from ..core.types import ModelTurn, ResultEnvelope, ToolCall
from ..stores.base import JournalRow
from .crash import crash_point
from .execute import ledger_entry, trusted_for
from .operation import CallRecord, Operation

if TYPE_CHECKING:
    from .runner import Runner


async def send_results(runner: Runner, op: Operation) -> None:
    """RESULTS_READY → MODEL_REQUESTED: correlate, verify every binding, check progress, C2."""
    assert op.current is not None
    turn = op.current.turn
    records = op.current.records
    envelopes = [envelope_from_dict(r.envelope) for r in records if r.envelope is not None]
    first_call = first_calls(turn)
    trusted = trusted_calls(runner, op, first_call)
    try:
        ordered, hashes = verify_results_hashed(CorrelationTable(turn.calls), envelopes, trusted)
    except (CorrelationError, BindingMismatch) as exc:
        # no response id passed: the record names the turn under work with its calls and their effects
        # (escalation._last_turn): they ran, a write among them, and the model hears of none of it
        runner._stop(op, "INTEGRITY", str(exc), target=State.FAILED)
        await runner._flush(op)
        return
    # the key _repeat_refused refused each call under (its schema version is the one it was sealed with),
    # from the arguments as validated (run_key) while the tool is still registered under that version
    refused = [refused_key(runner, r) for r in records if r.no_progress]
    verdict = record_turn_results(op.budgets, op.spent, hashes, refused)
    results = [(first_call[(e.response_id, e.call_id)], e.model_result) for e in ordered]
    op.pending_journal.append(
        JournalRow(
            "results",
            {
                "response_id": turn.response_id,
                "envelopes": [r.envelope for r in records],
                "identical": [r.identical_key for r in records if r.identical_key],
                "result_hashes": hashes,
            },
        )
    )
    for e in ordered:
        op.audit(runner.clock.now(), "result", _audit_result(e), runner.audit_key)
    op.unaudited_seals = []  # the "result" entries above record every binding of the turn
    if isinstance(verdict, Stop):
        runner._stop(
            op,
            verdict.reason,
            verdict.detail,
            response_id=turn.response_id,
            # D13 (3) decides this after the calls ran: each one's tool and effect, as every stop on a
            # handled turn names them (docs/stop-reasons.md; review round 21, d)
            call_ids=[r.call_id for r in records],
            tools=[r.tool for r in records],
            effects=[r.effect for r in records],
        )
        await runner._flush(op)
        return
    op.append_items(runner.adapter.turn_items(turn))
    op.new_items_start = len(op.transcript)
    op.append_items(runner.adapter.result_items(turn, results))
    op.last_turn = turn
    op.current = None
    runner._move(op, State.MODEL_REQUESTED, "results_sent", response_id=turn.response_id)
    await runner._flush(op)
    crash_point("after_result_commit")


def refused_key(runner: Runner, rec: CallRecord) -> str:
    """The identical-call key a call was refused NO_PROGRESS under (D13 (2), execute.run_key)."""
    spec = runner.registry.get(rec.tool)
    if spec is not None and spec.schema_version == rec.schema_version:
        return run_key(spec, rec.arguments_json)
    return identical_key(rec.tool, rec.schema_version or "-", rec.arguments_json or "null")


def first_calls(turn: ModelTurn) -> dict[tuple[str, str], ToolCall]:
    """Each (response id, call id) of a turn to its first call (D7: a repeated id is one call)."""
    first_call: dict[tuple[str, str], ToolCall] = {}
    for c in turn.calls:
        first_call.setdefault((c.response_id, c.call_id), c)
    return first_call


def trusted_calls(
    runner: Runner, op: Operation, first_call: dict[tuple[str, str], ToolCall] | None = None
) -> dict[tuple[str, str], TrustedCall]:
    """The trusted context of every call record of the turn under work, which each saved result's
    binding is recomputed from: before its results go back (RESULTS_READY) and when a resume loads
    results saved before a pause (integrity.resume_problems)."""
    assert op.current is not None
    turn = op.current.turn
    records = op.current.records
    if first_call is None:
        first_call = first_calls(turn)
    # Fix: a DUPLICATE_CALL_ID or UNKNOWN_TOOL rejection is sealed without a spec (handler "-"), but
    # the binding was recomputed with the registry's spec whenever the name was registered, so a
    # repeated call id of a real tool (or a registered tool that was not offered) ended
    # FAILED(INTEGRITY). Resolve the spec the way dispatch did, from the correlation table and the
    # offered list, never from the envelope.
    per_key = Counter((c.response_id, c.call_id) for c in turn.calls)
    offered = frozenset(op.offered)
    trusted: dict[tuple[str, str], TrustedCall] = {}
    for rec in records:
        rejected_unbound = per_key[(rec.response_id, rec.call_id)] > 1 or rec.tool not in offered
        spec = None if rejected_unbound else runner.registry.get(rec.tool)
        call = first_call.get((rec.response_id, rec.call_id))
        # D10: name and arguments come from the correlation table (the call as proposed), the key
        # from the idempotency ledger, effect and producer from the call record, the rest from the
        # operation row and registry.
        source = (
            rec
            if call is None
            else CallRecord(
                rec.response_id,
                rec.call_id,
                call.name,
                rec.status,
                call_arguments_json(call),
                ledger_key(runner, op, rec, call.name),
                effect=rec.effect,
                producer=rec.producer,
                handler=rec.handler,
                schema_version=rec.schema_version,
                policy_revision=rec.policy_revision,
            )
        )
        trusted[(rec.response_id, rec.call_id)] = trusted_for(runner, op, turn, source, spec)
    return trusted


# Stands in for the key of a write whose intent the ledger does not hold: matches no sealed binding.
NOT_IN_LEDGER = "-not-in-ledger-"


def ledger_key(runner: Runner, op: Operation, rec: CallRecord, tool: str) -> str | None:
    """D10: the idempotency key of a call's binding as the ledger holds it, not as the call record
    says. A write that went through the ledger (run, replayed, reconciled, found not applied) left an
    entry of this tenant and tool under its key; a record that names a key the ledger does not hold
    under that tool (edited, or re-sealed under another intent) gets a key no binding matches, so the
    turn ends FAILED(INTEGRITY) before its results go back. Calls that never reached the ledger
    (refused as repeats, held elsewhere, denied, reads) keep the record's key, which is None for reads.
    The newest entry of this turn (not yet committed) wins over the store's, as when the call ran."""
    key = rec.idempotency_key
    if key is None or rec.effect == "none":
        return key
    entry = ledger_entry(runner, op, key)
    if entry is None or entry.tool != tool:
        return NOT_IN_LEDGER
    return entry.key


def payload_digest(value: Any) -> str | None:
    """SHA-256 of a payload the chain vouches for by digest (canonical JSON): a result's audit input and
    output, which can be purged (set to null) but not changed (D20), and the arguments an approval shows;
    None for null or a value with no canonical form."""
    if value is None:
        return None
    try:
        return canonical_sha256(value)
    except CanonicalizationError:
        return None


def _audit_result(e: ResultEnvelope) -> dict[str, Any]:
    p = e.protected_audit
    return {
        "input_sha256": payload_digest(p.get("input")),
        "output_sha256": payload_digest(p.get("output")),
        "response_id": e.response_id,
        "call_id": e.call_id,
        "ok": e.ok,
        "error_code": e.error_code,
        "idempotency_key": p.get("idempotency_key"),
        "effect": p.get("effect"),
        "producer": p.get("producer"),
        "request_sha256": p.get("request_sha256"),
        "result_sha256": p.get("result_sha256"),
        "call_binding_sha256": p.get("call_binding_sha256"),
    }


def call_arguments_json(call: ToolCall) -> str | None:
    """Canonical arguments of a call as proposed, or None where they are unreadable."""
    if call.arguments is None:
        return None
    try:
        return canonical_json(call.arguments)
    except CanonicalizationError:
        return None
