"""The Store protocol every backend implements, and the row types it moves.

A store keeps, per operation, one small *head* row (state, counters, the turn under work) that is
replaced on each commit, and an append-only *journal* (transitions, turns, transcript items, result
envelopes). History is never rewritten (D18), so a commit costs the same at turn 1 and turn 1,000.
Approvals, the idempotency ledger and the audit chain have their own tables. One ``commit`` is one
atomic transaction. An audit event chained by this process carries its data as JSON text
(``AuditEvent.data_json``, written while hashing it): a store writes that text rather than encoding
``data`` again, and gives back ``json.loads`` of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..core.approvals import PendingApproval
from ..core.audit import AuditEvent
from ..core.idempotency import LedgerEntry

if TYPE_CHECKING:
    from .rows import Damaged


@dataclass(frozen=True, slots=True)
class JournalRow:
    kind: str  # "transition" | "turn" | "items" | "results" | "note"
    data: dict[str, Any]


@dataclass(slots=True)
class Commit:
    """Everything one transaction writes. ``fence`` is the lease token the writer holds (D21)."""

    operation_id: str
    head: dict[str, Any]
    journal: list[JournalRow] = field(default_factory=list)
    ledger: list[LedgerEntry] = field(default_factory=list)
    approvals: list[PendingApproval] = field(default_factory=list)
    audit: list[AuditEvent] = field(default_factory=list)
    fence: int | None = None
    create: bool = False


@dataclass(frozen=True, slots=True)
class StoredOperation:
    head: dict[str, Any]
    journal: list[JournalRow]


class Store(Protocol):
    def commit(self, commit: Commit) -> None:
        """Write everything in ``commit`` atomically, or nothing (raise ``StoreError``)."""
        ...

    def load_operation(self, operation_id: str) -> StoredOperation | None: ...

    def list_operations(
        self, *, tenant: str | None = None, state: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Heads, newest first."""
        ...

    def ledger_get(self, tenant: str, key: str) -> LedgerEntry | None: ...

    def ledger_list(
        self,
        tenant: str | None = None,
        status: str | None = None,
        limit: int = 100,
        *,
        damaged: Damaged = None,
    ) -> list[LedgerEntry]:
        """Ledger entries, ordered by tenant, then key (code point order). An entry that does not read
        raises ``UnreadableRow``; with ``damaged`` (a list) it is appended there instead and the others
        are listed."""
        ...

    def settle_ledger(self, expected: LedgerEntry, settled: LedgerEntry) -> None:
        """Compare-and-set: replace the (tenant, key) entry with ``settled`` only if the stored entry,
        read under the write lock, still equals ``expected`` (the one the settle was decided on);
        otherwise change nothing and raise ``LedgerChanged``. ``settled`` names the same tenant and key."""
        ...

    def get_approval(self, approval_id: str) -> PendingApproval | None: ...

    def list_approvals(
        self,
        *,
        tenant: str | None = None,
        status: str | None = "pending",
        operation_id: str | None = None,
        limit: int = 1000,
        damaged: Damaged = None,
    ) -> list[PendingApproval]:
        """Approvals, oldest first; ``damaged`` as for ``ledger_list``."""
        ...

    def decide_approval(self, decided: PendingApproval) -> bool:
        """Compare-and-set: store ``decided`` only if the stored approval is still pending. Returns
        False (and changes nothing) if another decision got there first."""
        ...

    def audit_events(self, operation_id: str) -> list[AuditEvent]: ...

    def audited_operations(self) -> list[str]:
        """Every operation id the audit table holds events for, with or without its operation row
        (``audit verify`` names a row deleted under its chain)."""
        ...

    def close(self) -> None: ...


# Head states a worker may pick up (D21). WAITING_APPROVAL counts only once none of the operation's
# approvals is still pending and unexpired.
CLAIMABLE_STATES: tuple[str, ...] = ("MODEL_REQUESTED", "RETRY", "VALIDATING", "EXECUTING", "RESULTS_READY")
WAITING_APPROVAL = "WAITING_APPROVAL"

# Returns seconds since the Unix epoch; overrides the store's clock (the database's, for durable
# stores) in lease methods. For tests.
NowFn = Callable[[], float]


class LeaseStore(Store, Protocol):
    """Worker leases with fencing tokens (D21). Every store callbound ships implements this."""

    def claim(self, worker_id: str, lease_s: float, now_fn: NowFn | None = None) -> tuple[str, int] | None:
        """Atomically take the oldest runnable operation whose lease is free or expired: set its owner
        and expiry, increment its fencing token (``head["fence"]`` too) and return
        ``(operation_id, fence)``; None when there is nothing to do."""
        ...

    def hold(
        self,
        operation_id: str,
        owner: str,
        lease_s: float,
        *,
        replacing: str | None = None,
        now_fn: NowFn | None = None,
    ) -> int | None:
        """Take the lease of one operation for a direct drive (``Runner.run`` / ``resume``): when it is
        free or expired, already ``owner``'s, or held by ``replacing`` (a holder the caller found
        gone). Moves the fencing token (``head["fence"]`` too) and returns it; None when another
        holder's lease is still running or there is no such operation."""
        ...

    def lease_holder(self, operation_id: str, now_fn: NowFn | None = None) -> str | None:
        """The owner of the operation's unexpired lease, or None."""
        ...

    def renew(
        self, operation_id: str, worker_id: str, fence: int, lease_s: float, now_fn: NowFn | None = None
    ) -> bool:
        """Extend a lease still held under ``fence``; False if another worker has taken it over."""
        ...

    def release(self, operation_id: str, fence: int) -> bool:
        """Give the lease up (the token stays, so it never goes back); False if no longer held."""
        ...


def heads_only(rows: Sequence[StoredOperation]) -> list[dict[str, Any]]:
    return [r.head for r in rows]
