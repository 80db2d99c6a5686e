"""``callbound audit verify``: recompute each operation's hash chain and every stored binding.

Sources are kept apart as D10 requires: the call (name, arguments) from the stored model turn, the
operation row (id, tenant, subject), the ledger (idempotency key) and the result bytes are hashed
afresh; the audit chain's own record of each binding must match both the envelope and the
recomputation. Changing any stored audit row or result makes verification name that row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

from ..core.audit import verify_chain
from ..core.binding import TrustedCall, compute_binding, request_sha256
from ..core.canonical import canonical_bytes, canonical_json, canonical_sha256
from ..core.dispatch import RESULT_TOO_LARGE
from ..core.errors import CanonicalizationError
from ..core.idempotency import LedgerEntry, LedgerStatus
from ..core.snapshot import SNAPSHOT_VERSION, turn_from_dict
from ..core.types import ModelTurn
from ..stores.base import Store
from ..stores.rows import FAILURES, UnreadableRow
from .integrity import CONTEXT_COPIES, AuditedTurn, approval_problems, chain_fault, read_chain
from .integrity import problems as digest_problems
from .ledger_owners import Claims, chain_claims, ledger_problems
from .operation import Operation
from .results import payload_digest


@dataclass(frozen=True, slots=True)
class Problem:
    operation_id: str
    where: str  # "audit seq 7", "result call_1 (response resp_1)"
    why: str
    # Not a finding of tampering: the operation was written by a newer callbound, which this version
    # cannot read (D19); `audit verify` exits 2 for it unless something else is tampered (D28).
    unreadable: bool = False


# What a result's audit record (protected_audit) copies from its trusted context (core.binding.make_envelope).
_COPIED = CONTEXT_COPIES

# Effects of a result after which its intent is done for good: the ledger entry must be SUCCEEDED.
_DONE = frozenset({"applied", "reconciled", "replayed"})


def _args_json(arguments: Any) -> str | None:
    if arguments is None:
        return None
    try:
        return canonical_json(arguments)
    except Exception:
        return None


def verify_operation(
    store: Store, operation_id: str, key: bytes | None = None, seen: dict[str, Claims] | None = None
) -> list[Problem]:
    """``seen``: where to keep the ledger keys the operation's chain records claiming, for
    ``ledger_owners.ledger_problems``."""
    problems: list[Problem] = []
    events = store.audit_events(operation_id)
    stored = store.load_operation(operation_id)
    if seen is not None:
        seen[operation_id] = chain_claims(events, stored.head if stored is not None else None)
    if stored is None:
        brk = verify_chain(events, key)
        if brk is not None:
            problems.append(Problem(operation_id, f"audit seq {brk.seq}", brk.why))
        problems.append(Problem(operation_id, "operation", "missing from the store"))
        return problems
    head = stored.head
    newer = _newer_version(head)
    if newer is not None:
        # D19: written by a newer callbound, whose rows (and chain entries) this code cannot read.
        # Not tampering: say so, and check nothing (its format may differ in ways read here as edits).
        why = (
            f"saved by a newer callbound (snapshot_version {newer}, this version reads up to "
            f"{SNAPSHOT_VERSION}): upgrade callbound to verify it"
        )
        if seen is not None:
            seen[operation_id] = Claims(present=True, readable=False)
        return [Problem(operation_id, "operation", why, unreadable=True)]
    fault = chain_fault(events, head, key)
    if fault is not None:
        why = fault.why
        if fault.at_start:
            # Not even the first link verifies: an edit of it, or (far more often) a chain written
            # under another CALLBOUND_AUDIT_KEY, or none. Say both; resume refuses it the same way.
            why += (
                " (not even the chain's first link verifies under this key: check that CALLBOUND_AUDIT_KEY "
                "is the one it was written with, or unset if it was written without one)"
            )
        problems.append(Problem(operation_id, fault.where, why))
    chain = read_chain(events)
    # The journal's turns in order, each with the envelopes of its "results" rows. Turns are paired
    # with the chain's by position, not by response id: a provider may repeat an id in every turn.
    segments: list[tuple[ModelTurn, list[Any]]] = []
    for row in stored.journal:
        if row.kind == "turn":
            segments.append((turn_from_dict(row.data["turn"]), []))
        elif row.kind == "results":
            envelopes = [e for e in row.data.get("envelopes", []) if e is not None]
            if segments:
                segments[-1][1].extend(envelopes)
            else:
                for env in envelopes:
                    where = f"result {env['call_id']} (response {env['response_id']})"
                    problems.append(Problem(operation_id, where, "no stored model turn proposed this call"))
    # (key, replayed) -> result digests of this operation's envelopes carrying that key
    ledger_results: dict[tuple[str, bool], set[Any]] = {}
    ledger_entries: dict[str, LedgerEntry] = {}
    for n, (turn, envelopes) in enumerate(segments):
        audited = chain.turns[n] if n < len(chain.turns) else None
        recorded = audited.results if audited is not None else {}
        calls: dict[tuple[str, str], Any] = {}
        for c in turn.calls:
            calls.setdefault((c.response_id, c.call_id), c)  # the first of a repeated id (D7)
        stored_results: set[tuple[str, str]] = set()
        for env in envelopes:
            rid, cid = env["response_id"], env["call_id"]
            where = f"result {cid} (response {rid})"
            call = calls.get((rid, cid))
            if call is None:
                problems.append(Problem(operation_id, where, "no stored model turn proposed this call"))
                continue
            found = _envelope_problems(store, head, turn, call, env, ledger_results, ledger_entries)
            audit = recorded.get((rid, cid))
            if audit is None or audit.get("call_binding_sha256") != found.binding:
                found.whys.append((where, "audit chain does not record this binding"))
            else:
                found.whys.extend(_payload_problems(env["protected_audit"], audit))
            problems.extend(Problem(operation_id, w or where, why) for w, why in found.whys)
            stored_results.add((rid, cid))
        problems.extend(_unsaved(operation_id, recorded, stored_results))
    problems.extend(_ledger_problems(operation_id, ledger_entries, ledger_results))
    for audited in chain.turns[len(segments) :]:
        problems.extend(_unsaved(operation_id, audited.results, set()))
    problems.extend(_unsaved(operation_id, chain.stray_results, set()))
    problems.extend(_turn_problems(operation_id, [t for t, _ in segments], chain.turns))
    # D20: the plan, transcript, saved results, offered tools, state, history and approvals against
    # what the chain records of them
    try:
        op = Operation.from_stored(stored, events[-1] if events else None)
    except Exception as exc:  # an edited row may not even load; that is a finding, not a crash
        problems.append(Problem(operation_id, "operation", f"its row cannot be loaded ({exc!r})"))
    else:
        approvals = store.list_approvals(operation_id=operation_id, status=None, limit=1_000_000)
        held = digest_problems(op, chain, [t for t, _ in segments]) + approval_problems(
            chain, approvals, key=key
        )
        problems.extend(Problem(operation_id, p.where, p.why) for p in held)
        problems.extend(_saved_problems(store, head, op))
        if chain.digests:
            asked = {a.approval_id for a in approvals}
            for aid in chain.requested:
                if aid not in asked:
                    where = f"approval {aid}"
                    problems.append(Problem(operation_id, where, "audited but missing from the store"))
    last_turn = segments[-1][0] if segments else None
    if (
        not chain.digests  # with digests, the row's text is held to the chain's last transition
        and last_turn is not None
        and head.get("state") == "COMPLETED"
        and head.get("text") != last_turn.text
    ):
        problems.append(
            Problem(operation_id, "operation", "its final text differs from the last model turn's")
        )
    return problems


def _saved_problems(store: Store, head: dict[str, Any], op: Operation) -> list[Problem]:
    """Results of the turn under work saved before a pause (not yet in a ``results`` row), each
    recomputed as the journal's are: the chain's ``sealed`` entry vouches for the stored binding
    (``digest_problems``), and this for the result it binds (review round 17, r2 F1: a result edited
    with its binding left alone passed ``audit verify``)."""
    if op.current is None:
        return []
    calls: dict[tuple[str, str], Any] = {}
    for c in op.current.turn.calls:
        calls.setdefault((c.response_id, c.call_id), c)
    out: list[Problem] = []
    for rec in op.current.records:
        env = rec.envelope
        if env is None:
            continue
        where = f"result {rec.call_id} (response {rec.response_id})"
        call = calls.get((rec.response_id, rec.call_id))
        if call is None:
            out.append(Problem(op.operation_id, where, "no call of the turn under work proposed it"))
            continue
        try:
            found = _envelope_problems(store, head, op.current.turn, call, env, {}, {})
        except (CanonicalizationError, KeyError, TypeError, AttributeError) as exc:
            out.append(Problem(op.operation_id, where, f"it cannot be read ({type(exc).__name__})"))
            continue
        out.extend(Problem(op.operation_id, w or where, why) for w, why in found.whys)
    return out


@dataclass(slots=True)
class _Found:
    binding: str  # the binding recomputed from the trusted sources
    whys: list[tuple[str | None, str]]  # (where, or None for the result itself; why)


def _envelope_problems(
    store: Store,
    head: dict[str, Any],
    turn: ModelTurn,
    call: Any,
    env: dict[str, Any],
    ledger_results: dict[tuple[str, bool], set[Any]],
    ledger_entries: dict[str, LedgerEntry],
) -> _Found:
    """One saved result against its call, the operation row and the ledger (D10); collects the ledger
    entries of the operation's results for ``_ledger_problems``."""
    whys: list[tuple[str | None, str]] = []
    p = env["protected_audit"]
    ledger_key = p.get("idempotency_key")
    effect = p.get("effect", "none")
    # Calls that never reached the ledger (denied, expired, stale, refused as repeats, IN_PROGRESS
    # elsewhere) have no entry of their own to check (as results.ledger_key).
    if ledger_key is not None and effect != "none":
        entry = store.ledger_get(head["tenant"], ledger_key)
        if entry is None:
            whys.append((None, "idempotency key is not in the ledger"))
        elif effect in _DONE and entry.status is not LedgerStatus.SUCCEEDED:
            # an effect that happened can only be SUCCEEDED (nothing overwrites that): an entry set
            # back would let the next proposal of the intent run it again
            why = f"the result says the effect was {effect} but the ledger says {entry.status.value}"
            whys.append((f"ledger {ledger_key}", why))
        elif entry.status is LedgerStatus.SUCCEEDED and entry.result is not None:
            replayed = effect == "replayed"
            # A settled entry's result was recorded by a human (``callbound ledger settle``), not by
            # this operation: only later replays of it are held to it.
            if replayed and _capped_replay(env["model_result"]) and entry.result.get("ok") is True:
                # the recorded result was over this operation's cap (D11): the model was told its size
                if not _size_told_truly(env["model_result"], entry.result):
                    why = "the replayed result's size differs from the result the ledger recorded"
                    whys.append((f"ledger {ledger_key}", why))
            elif replayed or (entry.operation_id == head["operation_id"] and entry.settled is None):
                ledger_results.setdefault((ledger_key, replayed), set()).add(p.get("result_sha256"))
                ledger_entries[ledger_key] = entry
    trusted = TrustedCall(
        provider=turn.provenance.provider,
        api=turn.api,
        adapter_revision=turn.provenance.adapter_revision,
        response_id=env["response_id"],
        call_id=env["call_id"],
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
    for name in _COPIED:
        # The audit projection repeats the trusted context it was bound under: an auditor reads it there
        if p.get(name) != getattr(trusted, name):
            whys.append((None, f"its audit record's {name} differs from the trusted context"))
    if canonical_sha256(env["model_result"]) != p.get("result_sha256"):
        whys.append((None, "stored result does not match its result_sha256"))
    elif request_sha256(trusted.arguments_json) != p.get("request_sha256"):
        whys.append((None, "arguments differ from the proposed call"))
    elif want != p.get("call_binding_sha256"):
        whys.append((None, "binding does not match its trusted context"))
    return _Found(want, whys)


_TOO_LARGE = re.compile(r"the result is (\d+) bytes, over the (\d+)-byte limit\.")


def _capped_replay(model_result: dict[str, Any]) -> bool:
    error = model_result.get("error")
    return (
        model_result.get("ok") is False and isinstance(error, dict) and error.get("code") == RESULT_TOO_LARGE
    )


def _size_told_truly(model_result: dict[str, Any], recorded: dict[str, Any]) -> bool:
    """A replay over the cap (call_values.replayed) names the recorded result's canonical size, which must
    be over the cap it names."""
    found = _TOO_LARGE.match(str(model_result["error"].get("message", "")))
    if found is None or recorded.get("ok") is not True:
        return False
    try:
        size = len(canonical_bytes(recorded.get("data")))
    except CanonicalizationError:
        return False
    return int(found.group(1)) == size and size > int(found.group(2))


def _payload_problems(p: dict[str, Any], audit: dict[str, Any]) -> list[tuple[str | None, str]]:
    """The result's stored input and output against the digests the chain recorded of them (D20). A
    payload set to null was purged, which D20 allows; any other change is named. Chains written before
    these digests were recorded have none to hold them to."""
    out: list[tuple[str | None, str]] = []
    for name in ("input", "output"):
        said = audit.get(f"{name}_sha256")
        if said is not None and p.get(name) is not None and payload_digest(p.get(name)) != said:
            out.append((None, f"its audit record's {name} differs from the digest the chain recorded"))
    return out


def _turn_problems(operation_id: str, turns: list[ModelTurn], audited: list[AuditedTurn]) -> list[Problem]:
    """The journal's turns against the chain's, position by position."""
    out = []
    for turn, said in zip_longest(turns, audited):
        if turn is None:
            out.append(
                Problem(
                    operation_id, f"model turn {said.response_id}", "audited but missing from the journal"
                )
            )
        elif said is None:
            where = f"model turn {turn.response_id}"
            out.append(Problem(operation_id, where, "in the journal but not in the audit chain"))
        elif (turn.response_id, turn.raw_sha256) != (said.response_id, said.raw_sha256):
            where = f"model turn {turn.response_id}"
            out.append(Problem(operation_id, where, "differs from the audited raw response"))
    return out


def _unsaved(
    operation_id: str, recorded: dict[tuple[Any, Any], Any], saved: set[tuple[str, str]]
) -> list[Problem]:
    return [
        Problem(
            operation_id,
            f"result {cid} (response {rid})",
            "the audit chain records it but the journal has no result",
        )
        for rid, cid in recorded
        if (rid, cid) not in saved
    ]


def _newer_version(head: dict[str, Any]) -> int | None:
    """The head's snapshot_version when a newer callbound wrote it (read as ``migrate_head`` reads it)."""
    try:
        version = int(head.get("snapshot_version", 0))
    except (TypeError, ValueError):
        return None  # no version this code could read: the load below names it
    return version if version > SNAPSHOT_VERSION else None


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
    seen: dict[str, Claims] = {}
    if operation_id is not None:
        found = _verify_one(store, operation_id, key, seen) + _column_problems(store, operation_id)
        return found + _owner_problems(store, seen, operation_id)
    problems: list[Problem] = _column_problems(store, None)
    # the ids alone (SQL stores): a head that does not load is named for its operation, not a crash
    listed_ids = getattr(store, "operation_ids", None)
    if listed_ids is not None:
        ids: list[str] = listed_ids()
    else:
        ids = [head["operation_id"] for head in store.list_operations(limit=1_000_000)]
    listed = set(ids)
    # an operation row deleted under its chain leaves audit events that no listed operation owns
    audited = getattr(store, "audited_operations", None)
    ids += sorted(op for op in (audited() if audited is not None else []) if op not in listed)
    for operation_id in ids:
        problems.extend(_verify_one(store, operation_id, key, seen))
    return problems + _owner_problems(store, seen, None)


def _owner_problems(store: Store, seen: dict[str, Claims], only: str | None) -> list[Problem]:
    """Each ledger entry's operation held to the chains (ledger_owners: an entry moved to another
    operation, or left behind by a deleted one; D20, review round 17, r3 F2/F3)."""
    return [Problem(op, where, why) for op, where, why in ledger_problems(store, seen, only)]


def _verify_one(
    store: Store, operation_id: str, key: bytes | None, seen: dict[str, Claims] | None = None
) -> list[Problem]:
    """An operation whose stored rows do not even load (hand-edited into text that is not JSON, or JSON
    of the wrong shape: stores/rows.py) is a finding naming the row, and the other operations are still
    verified (docs/durability.md: exit 1 naming the first bad row; review round 14)."""
    try:
        return verify_operation(store, operation_id, key, seen)
    except UnreadableRow as exc:
        return [Problem(operation_id, exc.where, f"cannot be loaded: {exc.why}")]
    except FAILURES as exc:
        # objects that load but not as callbound wrote them (a head without its ids, {"turn": []}): the
        # stores check only that a document is an object, so the edit is found here, as a finding
        why = f"its stored rows cannot be read ({type(exc).__name__}: {exc})"
        return [Problem(operation_id, "operation", why)]


def _column_problems(store: Store, operation_id: str | None) -> list[Problem]:
    """A SQL store's indexed columns held to the documents the chain vouches for (stores/drift.py): the
    store's queries read the columns (which operation a worker claims, which approvals are pending)."""
    drift = getattr(store, "column_drift", None)
    if drift is None:
        return []  # the memory store keeps no second copy
    return [Problem(op, where, why) for op, where, why in drift(operation_id)]
