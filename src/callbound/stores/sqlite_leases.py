"""SQLite leases (D21): workers' claims and the leases ``Runner.run`` / ``resume`` hold while they
drive an operation, with the fencing token every commit checks. Lease times come from the
database's clock unless a test passes ``now_fn``. A mixin of ``SQLiteStore``, which owns the
connection, its lock and the translation of sqlite3 errors."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import AbstractContextManager

from .base import CLAIMABLE_STATES, WAITING_APPROVAL, NowFn

DB_NOW = "(julianday('now') - 2440587.5) * 86400.0"  # the database's clock, seconds since the epoch
_CLAIMABLE_SQL = ", ".join(f"'{s}'" for s in CLAIMABLE_STATES)
# Free at ?1 (seconds), and runnable: in a runnable state, or waiting with no approval still pending
# at ?2 (microseconds). "+a.expires_us" keeps the planner on the per-operation approvals index.
_LEASE_FREE = "(o.lease_owner IS NULL OR o.lease_expires_at IS NULL OR o.lease_expires_at <= ?1)"
_NONE_PENDING = (
    "NOT EXISTS (SELECT 1 FROM approvals a WHERE a.operation_id = o.operation_id "
    "AND a.status = 'pending' AND +a.expires_us > ?2)"
)
_CLAIMABLE = (
    f"{_LEASE_FREE} AND (o.state IN ({_CLAIMABLE_SQL}) "
    f"OR (o.state = '{WAITING_APPROVAL}' AND {_NONE_PENDING}))"
)
# Two cheap picks; the older wins. Runnable states: operations_state. Waiting operations: only those
# whose wake time has come (operations_wake), not every paused one.
_PICK_RUNNING = f"SELECT min(o.id) FROM operations o WHERE o.state IN ({_CLAIMABLE_SQL}) AND {_LEASE_FREE}"
_PICK_WAITING = (
    f"SELECT o.id FROM operations o WHERE o.state = '{WAITING_APPROVAL}' AND o.wake_us <= ?2 "
    f"AND {_LEASE_FREE} AND {_NONE_PENDING} ORDER BY o.id LIMIT 1"
)
_CLAIM_CHECK = f"SELECT o.operation_id, o.fence FROM operations o WHERE o.id = ?3 AND {_CLAIMABLE}"
_CLAIM_TAKE = "UPDATE operations SET fence = ?, lease_owner = ?, lease_expires_at = ? WHERE id = ?"
_RENEW = (
    f"UPDATE operations SET lease_expires_at = COALESCE(?, {DB_NOW}) + ? "
    "WHERE operation_id = ? AND lease_owner = ? AND fence = ?"
)
_RELEASE = (
    "UPDATE operations SET lease_owner = NULL, lease_expires_at = NULL "
    "WHERE operation_id = ? AND fence = ? AND lease_owner IS NOT NULL"
)

# A direct drive's lease on one operation (D21): free, expired, already ours, or held by an owner the
# caller found gone (?5). ?1 owner, ?2 now (NULL: the database's clock), ?3 lease seconds, ?4 operation.
_HOLD = (
    f"UPDATE operations SET fence = COALESCE(fence, 0) + 1, lease_owner = ?1, "
    f"lease_expires_at = COALESCE(?2, {DB_NOW}) + ?3 WHERE operation_id = ?4 AND (lease_owner IS NULL "
    f"OR lease_expires_at IS NULL OR lease_expires_at <= COALESCE(?2, {DB_NOW}) OR lease_owner = ?1 "
    "OR lease_owner = ?5) RETURNING fence"
)
_HOLDER = (
    "SELECT lease_owner FROM operations WHERE operation_id = ? AND lease_owner IS NOT NULL "
    f"AND lease_expires_at > COALESCE(?, {DB_NOW})"
)


class SQLiteLeases:
    _conn: sqlite3.Connection
    _lock: threading.Lock

    def _errors(self, what: str) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def claim(self, worker_id: str, lease_s: float, now_fn: NowFn | None = None) -> tuple[str, int] | None:
        # Pick a candidate with a plain read (no write lock while scanning), then take it in a short
        # BEGIN IMMEDIATE transaction that re-checks that one row; if another worker got there
        # first, pick again.
        with self._lock, self._errors("claiming an operation"):
            conn = self._conn
            for _ in range(16):
                now = float(
                    now_fn() if now_fn is not None else conn.execute(f"SELECT {DB_NOW}").fetchone()[0]
                )
                now_us = int(now * 1_000_000)
                running = conn.execute(_PICK_RUNNING, (now,)).fetchone()[0]
                waiting = conn.execute(_PICK_WAITING, (now, now_us)).fetchone()
                candidates = [i for i in (running, waiting and waiting[0]) if i is not None]
                if not candidates:
                    return None
                picked = min(candidates)
                with self._transaction():
                    row = conn.execute(_CLAIM_CHECK, (now, now_us, picked)).fetchone()
                    if row is None:
                        continue
                    operation_id, fence = row
                    fence = int(fence or 0) + 1
                    conn.execute(_CLAIM_TAKE, (fence, worker_id, now + lease_s, picked))
                    return str(operation_id), fence
            return None  # every candidate was taken under our feet: the caller polls again

    def hold(
        self,
        operation_id: str,
        owner: str,
        lease_s: float,
        *,
        replacing: str | None = None,
        now_fn: NowFn | None = None,
    ) -> int | None:
        now = None if now_fn is None else float(now_fn())
        with self._lock, self._errors(f"taking the lease on {operation_id}"):
            # fetchall: an autocommit statement with RETURNING ends (and commits) once stepped through
            rows = self._conn.execute(_HOLD, (owner, now, lease_s, operation_id, replacing)).fetchall()
            return int(rows[0][0]) if rows else None

    def lease_holder(self, operation_id: str, now_fn: NowFn | None = None) -> str | None:
        now = None if now_fn is None else float(now_fn())
        with self._lock, self._errors(f"reading the lease on {operation_id}"):
            row = self._conn.execute(_HOLDER, (operation_id, now)).fetchone()
            return None if row is None else str(row[0])

    def renew(
        self, operation_id: str, worker_id: str, fence: int, lease_s: float, now_fn: NowFn | None = None
    ) -> bool:
        now = None if now_fn is None else float(now_fn())
        with self._lock, self._errors(f"renewing the lease on {operation_id}"):
            cur = self._conn.execute(_RENEW, (now, lease_s, operation_id, worker_id, fence))
            return cur.rowcount == 1

    def release(self, operation_id: str, fence: int) -> bool:
        with self._lock, self._errors(f"releasing the lease on {operation_id}"):
            return self._conn.execute(_RELEASE, (operation_id, fence)).rowcount == 1
