"""In-memory store: the default for ``Runner(store=None)``. Same contract as the durable stores,
lost with the process."""

from __future__ import annotations

import threading
from typing import Any

from ..core.approvals import PendingApproval
from ..core.audit import AuditEvent
from ..core.errors import StaleLease, StoreError
from ..core.idempotency import LedgerEntry
from .base import Commit, JournalRow, StoredOperation


class MemoryStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._heads: dict[str, dict[str, Any]] = {}
        self._journals: dict[str, list[JournalRow]] = {}
        self._ledger: dict[tuple[str, str], LedgerEntry] = {}
        self._approvals: dict[str, PendingApproval] = {}
        self._audit: dict[str, list[AuditEvent]] = {}
        self._order: list[str] = []

    def commit(self, commit: Commit) -> None:
        with self._lock:
            op = commit.operation_id
            if commit.create:
                if op in self._heads:
                    raise StoreError(f"operation {op} already exists")
                self._order.append(op)
                self._journals[op] = []
                self._audit[op] = []
            elif op not in self._heads:
                raise StoreError(f"operation {op} does not exist")
            if commit.fence is not None and not commit.create:
                current = self._heads[op].get("fence")
                if current is not None and current != commit.fence:
                    raise StaleLease(
                        f"operation {op}: lease token {commit.fence} is stale (current {current})"
                    )
            chain = self._audit[op]
            for ev in commit.audit:
                expected = len(chain)
                if ev.seq != expected:
                    raise StoreError(f"audit sequence {ev.seq} for {op} does not follow {expected - 1}")
                chain.append(ev)
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
            out = []
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
            return out[:limit]

    def decide_approval(self, decided: PendingApproval) -> bool:
        with self._lock:
            current = self._approvals.get(decided.approval_id)
            if current is None or current.status != "pending":
                return False
            self._approvals[decided.approval_id] = decided
            return True

    def audit_events(self, operation_id: str) -> list[AuditEvent]:
        with self._lock:
            return list(self._audit.get(operation_id, []))

    def close(self) -> None:
        pass
