"""``callbound audit verify``: recompute each operation's hash chain and every stored binding.

Sources are kept apart as D10 requires: the call (name, arguments) from the stored model turn, the
operation row (id, tenant, subject), the ledger (idempotency key) and the result bytes are hashed
afresh; the audit chain's own record of each binding must match both the envelope and the
recomputation. Changing any stored audit row or result makes verification name that row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.audit import audit_entries, verify_chain
from ..core.binding import TrustedCall, compute_binding, request_sha256
from ..core.canonical import canonical_json, canonical_sha256
from ..core.errors import CanonicalizationError
from ..core.idempotency import LedgerEntry, LedgerStatus
from ..core.snapshot import turn_from_dict
from ..core.types import ModelTurn
from ..stores.base import Store
from .integrity import chain_fault
from .integrity import problems as digest_problems
from .operation import Operation


@dataclass(frozen=True, slots=True)
class Problem:
    operation_id: str
    where: str  # "audit seq 7", "result call_1 (response resp_1)"
    why: str


# Effects of a result after which its intent is done for good: the ledger entry must be SUCCEEDED.
_DONE = frozenset({"applied", "reconciled", "replayed"})


def _args_json(arguments: Any) -> str | None:
    if arguments is None:
        return None
    try:
        return canonical_json(arguments)
    except Exception:
        return None


def verify_operation(store: Store, operation_id: str, key: bytes | None = None) -> list[Problem]:
    problems: list[Problem] = []
    events = store.audit_events(operation_id)
    stored = store.load_operation(operation_id)
    if stored is None:
        brk = verify_chain(events, key)
        if brk is not None:
            problems.append(Problem(operation_id, f"audit seq {brk.seq}", brk.why))
        problems.append(Problem(operation_id, "operation", "missing from the store"))
        return problems
    head = stored.head
    fault = chain_fault(events, head, key)
    if fault is not None:
        problems.append(Problem(operation_id, fault.where, fault.why))
    recorded = {
        (e.data.get("response_id"), e.data.get("call_id")): e.data
        for e in audit_entries(events)
        if e.kind == "result"
    }
    calls: dict[tuple[str, str], Any] = {}
    turns: dict[str, ModelTurn] = {}
    stored_results: set[tuple[str, str]] = set()
    # (key, replayed) -> result digests of this operation's envelopes carrying that key
    ledger_results: dict[tuple[str, bool], set[Any]] = {}
    ledger_entries: dict[str, LedgerEntry] = {}
    last_turn: ModelTurn | None = None
    for row in stored.journal:
        if row.kind == "turn":
            stored_turn = turn_from_dict(row.data["turn"])
            turns[stored_turn.response_id] = stored_turn
            last_turn = stored_turn
            for c in stored_turn.calls:
                calls.setdefault((c.response_id, c.call_id), c)
        elif row.kind == "results":
            for env in row.data.get("envelopes", []):
                if env is None:
                    continue
                rid, cid = env["response_id"], env["call_id"]
                where = f"result {cid} (response {rid})"
                call = calls.get((rid, cid))
                turn = turns.get(rid)
                p = env["protected_audit"]
                if call is None or turn is None:
                    problems.append(Problem(operation_id, where, "no stored model turn proposed this call"))
                    continue
                ledger_key = p.get("idempotency_key")
                effect = p.get("effect", "none")
                # Calls that never reached the ledger (denied, expired, stale, refused as repeats,
                # IN_PROGRESS elsewhere) have no entry of their own to check (as results.ledger_key).
                if ledger_key is not None and effect != "none":
                    entry = store.ledger_get(head["tenant"], ledger_key)
                    if entry is None:
                        problems.append(Problem(operation_id, where, "idempotency key is not in the ledger"))
                    elif effect in _DONE and entry.status is not LedgerStatus.SUCCEEDED:
                        # an effect that happened can only be SUCCEEDED (nothing overwrites that): an entry
                        # set back would let the next proposal of the intent run it again
                        problems.append(
                            Problem(
                                operation_id,
                                f"ledger {ledger_key}",
                                f"the result says the effect was {effect} but the ledger says {entry.status.value}",
                            )
                        )
                    elif entry.status is LedgerStatus.SUCCEEDED and entry.result is not None:
                        replayed = effect == "replayed"
                        if replayed or entry.operation_id == operation_id:
                            ledger_results.setdefault((ledger_key, replayed), set()).add(
                                p.get("result_sha256")
                            )
                            ledger_entries[ledger_key] = entry
                trusted = TrustedCall(
                    provider=turn.provenance.provider,
                    api=turn.api,
                    adapter_revision=turn.provenance.adapter_revision,
                    response_id=rid,
                    call_id=cid,
                    tool=call.name,
                    arguments_json=_args_json(call.arguments),
                    operation_id=head["operation_id"],
                    tenant=head["tenant"],
                    subject=head["subject"],
                    handler=p.get("handler", "-"),
                    schema_version=p.get("schema_version", "-"),
                    policy_revision=p.get("policy_revision", "-"),
                    idempotency_key=ledger_key,
                    effect=p.get("effect", "none"),
                    producer=p.get("producer", "callbound"),
                )
                want = compute_binding(trusted, env["model_result"])
                if canonical_sha256(env["model_result"]) != p.get("result_sha256"):
                    problems.append(
                        Problem(operation_id, where, "stored result does not match its result_sha256")
                    )
                elif request_sha256(trusted.arguments_json) != p.get("request_sha256"):
                    problems.append(Problem(operation_id, where, "arguments differ from the proposed call"))
                elif want != p.get("call_binding_sha256"):
                    problems.append(
                        Problem(operation_id, where, "binding does not match its trusted context")
                    )
                audit = recorded.get((rid, cid))
                if audit is None or audit.get("call_binding_sha256") != want:
                    problems.append(Problem(operation_id, where, "audit chain does not record this binding"))
                stored_results.add((rid, cid))
    problems.extend(_ledger_problems(operation_id, ledger_entries, ledger_results))
    for rid, cid in recorded:
        if (rid, cid) not in stored_results:
            where = f"result {cid} (response {rid})"
            problems.append(
                Problem(operation_id, where, "the audit chain records it but the journal has no result")
            )
    entries = audit_entries(events)
    audited_turns = {e.data.get("response_id"): e.data for e in entries if e.kind == "model_turn"}
    for rid, data in audited_turns.items():
        turn = turns.get(rid) if isinstance(rid, str) else None
        if turn is None:
            problems.append(
                Problem(operation_id, f"model turn {rid}", "audited but missing from the journal")
            )
        elif turn.raw_sha256 != data.get("raw_sha256"):
            problems.append(
                Problem(operation_id, f"model turn {rid}", "differs from the audited raw response")
            )
    for rid in turns:
        if rid not in audited_turns:
            problems.append(
                Problem(operation_id, f"model turn {rid}", "in the journal but not in the audit chain")
            )
    # D20: the plan, transcript, saved results and offered tools against their audited digests
    try:
        op = Operation.from_stored(stored, events[-1] if events else None)
    except Exception as exc:  # an edited row may not even load; that is a finding, not a crash
        problems.append(Problem(operation_id, "operation", f"its row cannot be loaded ({exc!r})"))
    else:
        for p in digest_problems(op, events, turns):
            problems.append(Problem(operation_id, p.where, p.why))
    if last_turn is not None and head.get("state") == "COMPLETED" and head.get("text") != last_turn.text:
        problems.append(
            Problem(operation_id, "operation", "its final text differs from the last model turn's")
        )
    return problems


def _ledger_problems(
    operation_id: str, entries: dict[str, LedgerEntry], results: dict[tuple[str, bool], set[Any]]
) -> list[Problem]:
    """A SUCCEEDED ledger entry holds the result that every later call of the same intent replays, so
    it must be the result the operation that recorded it sent (and that a replay sent): otherwise an
    edited ledger row would reach the model on the next retry with a valid binding of its own."""
    problems = []
    for (key, replayed), digests in sorted(results.items()):
        entry = entries[key]
        assert entry.result is not None
        try:
            recorded = canonical_sha256(entry.result)
        except CanonicalizationError:
            recorded = None
        # the recording operation's own envelopes for the key: one of them carried the result it
        # recorded (an earlier attempt may have ended in an error); every replay carried it
        if recorded is None or (recorded not in digests if not replayed else digests != {recorded}):
            problems.append(
                Problem(
                    operation_id,
                    f"ledger {key}",
                    "the recorded result differs from the result this operation "
                    + ("replayed from it" if replayed else "sent when it recorded it"),
                )
            )
    return problems


def verify_store(store: Store, operation_id: str | None = None, key: bytes | None = None) -> list[Problem]:
    if operation_id is not None:
        return verify_operation(store, operation_id, key)
    problems: list[Problem] = []
    ids = [head["operation_id"] for head in store.list_operations(limit=1_000_000)]
    listed = set(ids)
    # an operation row deleted under its chain leaves audit events that no listed operation owns
    audited = getattr(store, "audited_operations", None)
    ids += sorted(op for op in (audited() if audited is not None else []) if op not in listed)
    for operation_id in ids:
        problems.extend(verify_operation(store, operation_id, key))
    return problems
