"""In-memory store: the default for ``Runner(store=None)``. Same contract as the durable stores,
lost with the process.

Audit events keep their data as JSON text, the text written while hashing it (``AuditEvent.data_json``)
that the durable stores write too, and load it back on read. The chain is about a third of what an
operation keeps, and as text it takes half the memory of the dicts (peak RSS in docs/benchmarks.md);
reusing that text costs no encoding on the hot path. What was chained also cannot change afterwards
through an object the runtime still holds."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from ..core.approvals import PendingApproval
from ..core.audit import AuditEvent
from ..core.errors import (
    ApprovalChanged,
    IntentTaken,
    LedgerChanged,
    OperationExists,
    StaleLease,
    StoreError,
    UsageError,
)
from ..core.idempotency import LedgerEntry, claim_refused
from .base import CLAIMABLE_STATES, WAITING_APPROVAL, Commit, JournalRow, NowFn, StoredOperation
from .rows import Damaged
from .schema import dumps, utc

# One stored audit event: (seq, kind, at, data as JSON text, prev_hash, hash).
_StoredEvent = tuple[int, str, str, str, str, str]


class MemoryStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._heads: dict[str, dict[str, Any]] = {}
        self._journals: dict[str, list[JournalRow]] = {}
        self._ledger: dict[tuple[str, str], LedgerEntry] = {}
        self._approvals: dict[str, PendingApproval] = {}
        self._audit: dict[str, list[_StoredEvent]] = {}
        self._order: list[str] = []
        self._leases: dict[str, tuple[str, float]] = {}  # operation -> (worker, expiry in epoch seconds)

    def commit(self, commit: Commit) -> None:
        # an event chained elsewhere (no text of its own) is encoded as the durable stores do, and
        # refused as they refuse it: StoreError naming the event
        op_id = commit.operation_id
        audit = [
            (
                ev.seq,
                ev.kind,
                ev.at,
                ev.data_json or dumps(ev.data, f"audit event {ev.seq} of {op_id}"),
                ev.prev_hash,
                ev.hash,
            )
            for ev in commit.audit
        ]
        with self._lock:
            op = commit.operation_id
            # validate everything first: a refused commit writes nothing
            if commit.create:
                if op in self._heads:
                    raise OperationExists(op)
            elif op not in self._heads:
                raise StoreError(f"operation {op} does not exist")
            if commit.fence is not None and not commit.create:
                current = self._heads[op].get("fence")
                if current is not None and current != commit.fence:
                    raise StaleLease(
                        f"operation {op}: lease token {commit.fence} is stale (current {current})"
                    )
            stored = 0 if commit.create else len(self._audit[op])
            for i, ev in enumerate(commit.audit):
                if ev.seq != stored + i:
                    raise StoreError(f"audit sequence {ev.seq} for {op} does not follow {stored + i - 1}")
            # claims after the head's checks, in the durable stores' order (review round 18, d F1)
            for entry in commit.ledger:
                held = self._ledger.get((entry.tenant, entry.key)) if entry.claim else None
                if held is not None and claim_refused(entry, (held.operation_id, held.status.value)):
                    raise IntentTaken(entry.tenant, entry.key, held.operation_id)
            # An approval is written only while it is pending (as the durable stores' upsert): a commit
            # withdrawing one that an approver decided after the writer read it is refused, so the
            # decision stays. Later rows of one commit see the earlier ones (the last write wins).
            statuses: dict[str, str] = {}
            for approval in commit.approvals:
                known = self._approvals.get(approval.approval_id)
                current = statuses.get(approval.approval_id, None if known is None else known.status)
                if current not in (None, "pending"):
                    raise ApprovalChanged(approval.approval_id, current)
                statuses[approval.approval_id] = approval.status
            if commit.create:
                self._order.append(op)
                self._journals[op] = []
                self._audit[op] = []
            self._audit[op].extend(audit)
            self._heads[op] = commit.head
            self._journals[op].extend(commit.journal)
            for entry in commit.ledger:
                self._ledger[(entry.tenant, entry.key)] = entry
            for approval in commit.approvals:
                self._approvals[approval.approval_id] = approval

    def load_operation(self, operation_id: str) -> StoredOperation | None:
        with self._lock:
            head = self._heads.get(operation_id)
            if head is None:
                return None
            return StoredOperation(dict(head), list(self._journals[operation_id]))

    def list_operations(
        self, *, tenant: str | None = None, state: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        with self._lock:
            out: list[dict[str, Any]] = []
            if limit <= 0:
                return out
            for op in reversed(self._order):
                head = self._heads[op]
                if tenant is not None and head.get("tenant") != tenant:
                    continue
                if state is not None and head.get("state") != state:
                    continue
                out.append(dict(head))
                if len(out) >= limit:
                    break
            return out

    def ledger_get(self, tenant: str, key: str) -> LedgerEntry | None:
        with self._lock:
            return self._ledger.get((tenant, key))

    def ledger_list(
        self,
        tenant: str | None = None,
        status: str | None = None,
        limit: int = 100,
        *,
        damaged: Damaged = None,
    ) -> list[LedgerEntry]:
        # ``damaged``: as the SQL stores take it; the objects this store keeps cannot be damaged
        with self._lock:
            rows = [
                e
                for (t, _), e in sorted(self._ledger.items())
                if (tenant is None or t == tenant) and (status is None or e.status.value == status)
            ]
        return rows[: max(limit, 0)]

    def settle_ledger(self, expected: LedgerEntry, settled: LedgerEntry) -> None:
        where = (expected.tenant, expected.key)
        if (settled.tenant, settled.key) != where:
            raise UsageError("a settled ledger entry must keep the tenant and key of the one it replaces")
        with self._lock:
            if self._ledger.get(where) != expected:
                raise LedgerChanged(*where)
            self._ledger[where] = settled

    def get_approval(self, approval_id: str) -> PendingApproval | None:
        with self._lock:
            return self._approvals.get(approval_id)

    def list_approvals(
        self,
        *,
        tenant: str | None = None,
        status: str | None = "pending",
        operation_id: str | None = None,
        limit: int = 1000,
        damaged: Damaged = None,
    ) -> list[PendingApproval]:
        with self._lock:
            out = [
                a
                for a in self._approvals.values()
                if (tenant is None or a.tenant == tenant)
                and (status is None or a.status == status)
                and (operation_id is None or a.operation_id == operation_id)
            ]
            out.sort(key=lambda a: a.created_at)
            return out[: max(limit, 0)]

    def decide_approval(self, decided: PendingApproval) -> bool:
        with self._lock:
            current = self._approvals.get(decided.approval_id)
            if current is None or current.status != "pending":
                return False
            self._approvals[decided.approval_id] = decided
            return True

    def audit_events(self, operation_id: str) -> list[AuditEvent]:
        with self._lock:
            events = list(self._audit.get(operation_id, []))
        return [
            AuditEvent(operation_id, seq, kind, at, json.loads(data), prev, h)
            for seq, kind, at, data, prev, h in events
        ]

    def audited_operations(self) -> list[str]:
        with self._lock:
            return [op for op, events in self._audit.items() if events]

    # ---- leases (D21) ----------------------------------------------------------------------------

    def claim(self, worker_id: str, lease_s: float, now_fn: NowFn | None = None) -> tuple[str, int] | None:
        now = time.time() if now_fn is None else now_fn()
        with self._lock:
            waiting = {
                a.operation_id
                for a in self._approvals.values()
                if a.status == "pending" and utc(a.expires_at).timestamp() > now
            }
            for op in self._order:
                head = self._heads[op]
                lease = self._leases.get(op)
                if lease is not None and lease[1] > now:
                    continue
                state = head.get("state")
                if state not in CLAIMABLE_STATES and (state != WAITING_APPROVAL or op in waiting):
                    continue
                fence = int(head.get("fence") or 0) + 1
                self._heads[op] = {**head, "fence": fence}
                self._leases[op] = (worker_id, now + lease_s)
                return op, fence
            return None

    def hold(
        self,
        operation_id: str,
        owner: str,
        lease_s: float,
        *,
        replacing: str | None = None,
        now_fn: NowFn | None = None,
    ) -> int | None:
        now = time.time() if now_fn is None else now_fn()
        with self._lock:
            head = self._heads.get(operation_id)
            if head is None:
                return None
            lease = self._leases.get(operation_id)
            if lease is not None and lease[1] > now and lease[0] not in (owner, replacing):
                return None
            fence = int(head.get("fence") or 0) + 1
            self._heads[operation_id] = {**head, "fence": fence}
            self._leases[operation_id] = (owner, now + lease_s)
            return fence

    def lease_holder(self, operation_id: str, now_fn: NowFn | None = None) -> str | None:
        now = time.time() if now_fn is None else now_fn()
        with self._lock:
            lease = self._leases.get(operation_id)
            return lease[0] if lease is not None and lease[1] > now else None

    def renew(
        self, operation_id: str, worker_id: str, fence: int, lease_s: float, now_fn: NowFn | None = None
    ) -> bool:
        now = time.time() if now_fn is None else now_fn()
        with self._lock:
            lease = self._leases.get(operation_id)
            head = self._heads.get(operation_id)
            if lease is None or head is None or lease[0] != worker_id or head.get("fence") != fence:
                return False
            self._leases[operation_id] = (worker_id, now + lease_s)
            return True

    def release(self, operation_id: str, fence: int) -> bool:
        with self._lock:
            head = self._heads.get(operation_id)
            if operation_id not in self._leases or head is None or head.get("fence") != fence:
                return False
            del self._leases[operation_id]
            return True

    def close(self) -> None:
        pass
