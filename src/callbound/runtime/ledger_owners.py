"""``callbound audit verify``: each idempotency-ledger entry held to the chains that record who claimed
its key (D13, D16, D20; review round 17, r3 F2/F3).

A ledger entry is in no chain, yet its operation decides what happens to it: a ``STARTED`` or ``UNKNOWN``
entry is reconciled by that operation alone, others are told ``IN_PROGRESS`` while it runs, a settle is
refused until it ends, and ``ledger show`` credits the effect to it. Every claim of a key is in the
claiming operation's chain, in the commit that writes the claim: ``write_started`` (with its attempt
number) before a fresh attempt, ``reconcile_started`` (with ``over``, the operation the key is taken over
from) before a reconcile; ``result`` entries record the outcomes an operation wrote. So:

- an entry whose operation is not in the store is named: the store has no call that deletes an operation,
  so its rows were deleted under it;
- an entry whose operation's chain records no claim of its key (nor any outcome it wrote), under the
  entry's tenant, is named: the row was moved to another operation;
- an entry whose key another operation's chain records as taken after its operation's last claim is
  named: that operation took it over (``reconcile_started`` over it: only an operation that has ended is
  taken over, D16, and an ended one never claims again), or made a fresh attempt numbered above every
  attempt the owner made or took over (attempt numbers only grow: a fresh attempt is the entry's count
  plus one, a takeover and a settle keep the count).

A settle (``ledger settle``) keeps the entry's operation, and a replay writes nothing, so neither needs a
record. Chains written before the ``digests`` marker (``created``) are not held to this: what they record
is not complete enough, so an entry naming such an operation is checked for its presence only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.audit import AuditEvent, audit_entries
from ..core.idempotency import LedgerEntry
from ..stores.base import Store
from ..stores.rows import FAILURES, UnreadableRow
from .integrity import DIGESTS_VERSION

# Effects of a result that the operation's own ledger write recorded (a replay writes nothing, and a call
# that never reached the ledger has the effect "none").
_WROTE = frozenset({"applied", "not_applied", "unknown", "reconciled"})

Found = tuple[str, str, str]  # (operation id, where, why), as verify.Problem


@dataclass(slots=True)
class Took:
    """What one operation's chain records of one ledger key."""

    attempts: set[int] = field(default_factory=set)  # its fresh attempts (write_started)
    over: set[str] = field(default_factory=set)  # operations it took the key over from (reconcile_started)


@dataclass(slots=True)
class Claims:
    """The ledger keys one operation's chain records claiming or writing."""

    present: bool  # its operation row is in the store
    tenant: Any = None
    digests: bool = False  # its chain records what is checked here (the ``created`` marker)
    readable: bool = True  # False: a newer callbound wrote it, or its rows cannot be read (named elsewhere)
    keys: dict[str, Took] = field(default_factory=dict)


def chain_claims(events: Sequence[AuditEvent], head: dict[str, Any] | None) -> Claims:
    tenant = head.get("tenant") if head is not None else None
    claims = Claims(present=head is not None, tenant=tenant)
    created = False
    for e in audit_entries(events):
        d = e.data
        if e.kind == "created" and not created:
            created = True
            claims.tenant = d.get("tenant", tenant)
            claims.digests = d.get("digests") == DIGESTS_VERSION
            continue
        key = d.get("idempotency_key")
        if not isinstance(key, str):
            continue
        if e.kind == "write_started":
            attempt = d.get("attempt")
            took = claims.keys.setdefault(key, Took())
            if isinstance(attempt, int) and not isinstance(attempt, bool):
                took.attempts.add(attempt)
        elif e.kind == "reconcile_started":
            over = d.get("over")
            took = claims.keys.setdefault(key, Took())
            if isinstance(over, str) and over:
                took.over.add(over)
        elif e.kind == "result" and d.get("effect") in _WROTE:
            claims.keys.setdefault(key, Took())
    return claims


def _load(store: Store, operation_id: str) -> Claims:
    try:
        stored = store.load_operation(operation_id)
        events = store.audit_events(operation_id)
        claims = chain_claims(events, stored.head if stored is not None else None)
    except (UnreadableRow, *FAILURES):
        return Claims(present=True, readable=False)  # named for its operation by verify_operation
    return claims


def ledger_problems(store: Store, seen: dict[str, Claims], only: str | None = None) -> list[Found]:
    """The ledger entries whose operation the chains contradict. ``seen``: the claims of the operations
    verified (every operation, or ``only``); others are read when an entry names them. With ``only``, the
    entries naming it and the keys its chain records are checked, against the chains of the operations
    involved; without it, every entry against every chain."""
    # Read around a damaged row (each is reported) so that every other entry is still checked: one
    # unreadable row used to end the ledger check, leaving the rest unchecked.
    damaged: list[UnreadableRow] = []
    entries = store.ledger_list(limit=1_000_000_000, damaged=damaged)
    out: list[Found] = [
        (row.operation_id or "-", row.where, f"cannot be loaded: {row.why}")
        for row in damaged
        if only is None or row.operation_id in (None, only)  # another operation's row is its own finding
    ]

    def claims_of(operation_id: str) -> Claims:
        if operation_id not in seen:
            seen[operation_id] = _load(store, operation_id)
        return seen[operation_id]

    # (tenant, key) -> the operations whose chain records claiming it, from the chains verified
    takers: dict[tuple[Any, str], list[str]] = {}
    for operation_id, claims in list(seen.items()):
        if claims.readable:
            for key in claims.keys:
                takers.setdefault((claims.tenant, key), []).append(operation_id)
    for entry in entries:
        mine = only is None or entry.operation_id == only or only in takers.get((entry.tenant, entry.key), [])
        if mine:
            why = _entry_problem(entry, claims_of, takers.get((entry.tenant, entry.key), []))
            if why is not None:
                out.append((entry.operation_id, f"ledger {entry.key}", why))
    return out


def _entry_problem(entry: LedgerEntry, claims_of: Callable[[str], Claims], takers: list[str]) -> str | None:
    owner = claims_of(entry.operation_id)
    if not owner.present:
        return f"its operation {entry.operation_id} is not in the store (its rows were deleted)"
    if not owner.readable or not owner.digests:
        return None
    took = owner.keys.get(entry.key) if owner.tenant == entry.tenant else None
    if took is None:
        others = [t for t in sorted(takers) if t != entry.operation_id]
        held = f" (the chain of {', '.join(others)} records claiming it)" if others else ""
        return (
            f"its operation {entry.operation_id}'s audit chain records no claim of this key: the entry "
            f"names an operation that never held it{held}"
        )
    reach = _reach(entry, entry.operation_id, claims_of, set())
    for other in sorted(takers):
        if other == entry.operation_id:
            continue
        theirs = claims_of(other).keys[entry.key]
        if entry.operation_id in theirs.over:
            return (
                f"operation {other}'s audit chain records taking this key over from {entry.operation_id}, "
                "which never claimed it again"
            )
        if reach is not None and theirs.attempts and max(theirs.attempts) > reach:
            return (
                f"operation {other}'s audit chain records attempt {max(theirs.attempts)} of this key, after "
                f"every claim of {entry.operation_id} (attempt {reach} at most)"
            )
    return None


def _reach(
    entry: LedgerEntry, operation_id: str, claims_of: Callable[[str], Claims], seen: set[str]
) -> int | None:
    """The highest attempt count the entry could have held under ``operation_id``'s claims: its own
    attempts, and the count of each entry it took over (that holder's reach). None when a chain on the
    way does not record its attempts (written before the ``digests`` marker, or unreadable): not known."""
    seen.add(operation_id)
    claims = claims_of(operation_id)
    if not (claims.present and claims.readable and claims.digests):
        return None
    took = claims.keys.get(entry.key) if claims.tenant == entry.tenant else None
    if took is None:
        return 0
    reach = max(took.attempts, default=0)
    for over in sorted(took.over - seen):
        theirs = _reach(entry, over, claims_of, seen)
        if theirs is None:
            return None
        reach = max(reach, theirs)
    return reach
