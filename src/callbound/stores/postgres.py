"""PostgreSQL store (psycopg 3, synchronous API). Needs the ``postgres`` extra.

This module is imported only by ``callbound.stores.open`` or by users who ask for it, never by ``import
callbound``. One ``commit`` is one transaction: a fenced ``UPDATE … RETURNING`` of the head row (or the
``INSERT`` of a new one), the approval upserts (each refuses the commit over a decided approval), then
the appended journal and audit rows and the ledger upserts, pipelined. Statements are prepared by
psycopg after a few uses. Workers claim operations with ``FOR UPDATE SKIP LOCKED`` and lease times come
from the database's clock (D21).

psycopg errors are translated into ``StoreError`` here and in pg_connection.py (connecting), nowhere
else (D30).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

try:
    import psycopg
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("PostgreSQL needs the postgres extra: pip install 'callbound[postgres]'") from exc

from ..core.approvals import PendingApproval
from ..core.audit import AuditEvent
from ..core.errors import (
    ApprovalChanged,
    IntentTaken,
    LedgerChanged,
    OperationExists,
    SchemaVersionError,
    StaleLease,
    StoreError,
    UsageError,
)
from ..core.idempotency import LedgerEntry, claim_refused
from . import rows as docs
from .base import CLAIMABLE_STATES, WAITING_APPROVAL, Commit, NowFn, StoredOperation
from .drift import Drift, column_drift
from .pg_connection import PgConnection
from .pg_connection import describe as _describe
from .schema import (
    DB_SCHEMA_VERSION,
    META_KEY,
    POSTGRES_MIGRATIONS,
    check_migrations,
    dumps,
    encode_commit,
    newer_than_code,
    utc,
)

_CLAIMABLE_SQL = ", ".join(f"'{s}'" for s in CLAIMABLE_STATES)
_NOW = "COALESCE(to_timestamp(%s::float8), clock_timestamp())"  # a test clock, else the database's

_INSERT_OP = (
    "INSERT INTO operations (operation_id, tenant, state, created_at, updated_at, head, journal_len, "
    "audit_len, fence, wake_at) VALUES (%s, %s, %s, %s, %s, %s::json, %s, %s, %s, "
    "COALESCE(%s::timestamptz, '-infinity')) "
    "ON CONFLICT (operation_id) DO NOTHING"
)
_UPDATE_OP = (
    "UPDATE operations SET tenant = %s, state = %s, created_at = %s, updated_at = %s, head = %s::json, "
    "journal_len = journal_len + %s, audit_len = audit_len + %s, fence = %s "
    "WHERE operation_id = %s AND (%s::bigint IS NULL OR fence IS NULL OR fence = %s) "
    "AND (%s::integer IS NULL OR audit_len = %s) RETURNING journal_len"
)
_INSERT_JOURNAL = "INSERT INTO journal (operation_id, pos, kind, data) VALUES (%s, %s, %s, %s::json)"
_INSERT_AUDIT = (
    "INSERT INTO audit (operation_id, seq, kind, at, data, prev_hash, hash) "
    "VALUES (%s, %s, %s, %s, %s::json, %s, %s)"
)
_UPSERT_LEDGER = (
    "INSERT INTO ledger (tenant, key, operation_id, status, entry) VALUES (%s, %s, %s, %s, %s::json) "
    "ON CONFLICT (tenant, key) DO UPDATE SET operation_id = excluded.operation_id, "
    "status = excluded.status, entry = excluded.entry"
)
_CLAIM_LEDGER = (
    "INSERT INTO ledger (tenant, key, operation_id, status, entry) VALUES (%s, %s, %s, %s, %s::json) "
    "ON CONFLICT (tenant, key) DO NOTHING RETURNING 1"
)
# FOR UPDATE: a concurrent claim of the same key waits for this transaction, then reads its entry.
_LEDGER_HOLDER = "SELECT operation_id, status FROM ledger WHERE tenant = %s AND key = %s FOR UPDATE"
_LEDGER_ENTRY = "SELECT entry FROM ledger WHERE tenant = %s AND key = %s"
_SETTLE_LEDGER = (
    "UPDATE ledger SET operation_id = %s, status = %s, entry = %s::json WHERE tenant = %s AND key = %s"
)
# A commit's approval rows: new ones, or a pending one changed (withdrawn when its operation ends, or
# expired). Never over a decided one, as _DECIDE never decides twice: an approver's decision recorded
# after the writer read the approval would be lost, though the approver was told it was recorded. ON
# CONFLICT locks the row and evaluates the WHERE on its latest version (READ COMMITTED), so a decision
# committed meanwhile is seen; the row is left alone and the commit refused (ApprovalChanged).
_UPSERT_APPROVAL = (
    "INSERT INTO approvals (approval_id, operation_id, tenant, status, created_at, expires_at, data) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s::json) ON CONFLICT (approval_id) DO UPDATE SET "
    "operation_id = excluded.operation_id, tenant = excluded.tenant, status = excluded.status, "
    "created_at = excluded.created_at, expires_at = excluded.expires_at, data = excluded.data "
    "WHERE approvals.status = 'pending'"
)
_APPROVAL_STATUS = "SELECT status FROM approvals WHERE approval_id = %s"
_DECIDE = (
    "UPDATE approvals SET operation_id = %s, tenant = %s, status = %s, created_at = %s, expires_at = %s, "
    "data = %s::json WHERE approval_id = %s AND status = 'pending'"
)
_REFRESH_WAKE = (
    "UPDATE operations SET wake_at = COALESCE((SELECT min(expires_at) FROM approvals "
    "WHERE operation_id = %(op)s AND status = 'pending'), '-infinity') WHERE operation_id = %(op)s"
)
# Two picks, each the oldest free operation of its kind (runnable state / waiting with nothing pending
# any more), locked with SKIP LOCKED; the older of the two is taken. "c.id + 0" stops the planner from
# walking every paused operation in id order: the few that woke up come from operations_wake instead.
_FREE = "(c.lease_owner IS NULL OR c.lease_expires_at IS NULL OR c.lease_expires_at <= (SELECT t FROM n))"
_CLAIM = (
    "WITH n AS MATERIALIZED (SELECT COALESCE(to_timestamp(%(now)s::float8), clock_timestamp()) AS t), "
    f"running AS (SELECT c.id FROM operations c WHERE c.state IN ({_CLAIMABLE_SQL}) AND {_FREE} "
    "ORDER BY c.id LIMIT 1 FOR UPDATE OF c SKIP LOCKED), "
    f"waiting AS (SELECT c.id FROM operations c WHERE c.state = '{WAITING_APPROVAL}' "
    f"AND c.wake_at <= (SELECT t FROM n) AND {_FREE} AND NOT EXISTS (SELECT 1 FROM approvals a "
    "WHERE a.operation_id = c.operation_id AND a.status = 'pending' AND a.expires_at > (SELECT t FROM n)) "
    "ORDER BY c.id + 0 LIMIT 1 FOR UPDATE OF c SKIP LOCKED), "
    "pick AS (SELECT min(id) AS id FROM (SELECT id FROM running UNION ALL SELECT id FROM waiting) x) "
    "UPDATE operations o SET fence = COALESCE(o.fence, 0) + 1, lease_owner = %(worker)s, "
    "lease_expires_at = n.t + %(lease)s * interval '1 second' "
    "FROM pick, n WHERE o.id = pick.id RETURNING o.operation_id, o.fence"
)
# A direct drive's lease on one operation (D21): free, expired, already ours, or held by an owner the
# caller found gone.
_HOLD = (
    "WITH n AS MATERIALIZED (SELECT COALESCE(to_timestamp(%(now)s::float8), clock_timestamp()) AS t) "
    "UPDATE operations o SET fence = COALESCE(o.fence, 0) + 1, lease_owner = %(owner)s, "
    "lease_expires_at = n.t + %(lease)s * interval '1 second' FROM n WHERE o.operation_id = %(op)s "
    "AND (o.lease_owner IS NULL OR o.lease_expires_at IS NULL OR o.lease_expires_at <= n.t "
    "OR o.lease_owner = %(owner)s OR o.lease_owner = %(replacing)s::text) RETURNING o.fence"
)
_HOLDER = (
    "SELECT lease_owner FROM operations WHERE operation_id = %s AND lease_owner IS NOT NULL "
    f"AND lease_expires_at > {_NOW}"
)
_RENEW = (
    f"UPDATE operations SET lease_expires_at = {_NOW} + %s * interval '1 second' "
    "WHERE operation_id = %s AND lease_owner = %s AND fence = %s"
)
_RELEASE = (
    "UPDATE operations SET lease_owner = NULL, lease_expires_at = NULL "
    "WHERE operation_id = %s AND fence = %s AND lease_owner IS NOT NULL"
)


def _approval_row(a: PendingApproval, data: str | None = None) -> tuple[Any, ...]:
    return (
        a.approval_id,
        a.operation_id,
        a.tenant,
        a.status,
        utc(a.created_at),
        utc(a.expires_at),
        dumps(a.to_dict(), f"approval {a.approval_id}") if data is None else data,
    )


def no_schema(where: str) -> str:
    """Why a database without callbound's tables is not opened to read (``create=False``): an empty
    database read as a store lists nothing and verifies clean, so a mistyped database name would pass
    for an empty store (and, opened to write, get callbound's tables)."""
    return (
        f"no callbound tables in the PostgreSQL database at {where} (nothing was created): check the "
        "--store URL (database name, and search_path if set); the tables are created by the commands "
        "that start work there (callbound demo, run, worker) or by callbound.stores.open(url) in code"
    )


def missing_schema(url: str, *, connect_timeout_s: int = 10) -> str | None:
    """``no_schema`` for the database at ``url`` when it holds no callbound tables, else None. Only
    reads (the catalog, and the meta table if there is one). A database that cannot be reached or read gives None: opening it reports why,
    with the opening's own message."""
    try:
        with psycopg.connect(
            url, autocommit=True, connect_timeout=connect_timeout_s, application_name="callbound"
        ) as conn:
            found = PostgresStore._read_version(conn)
    except (psycopg.Error, StoreError):
        return None
    return no_schema(_describe(url)) if found == 0 else None


class PostgresStore(PgConnection):
    """A durable store in PostgreSQL. Tables live in the first schema of the connection's
    ``search_path``; point it elsewhere with ``?options=-csearch_path%3Dmyschema`` in the URL."""

    def __init__(
        self,
        url: str,
        *,
        create: bool = True,
        connect_timeout_s: int = 10,
        application_name: str = "callbound",
    ) -> None:
        """``create=False`` refuses (``UsageError``) a database that holds no callbound tables instead of
        creating them: for callers that only read or decide what is already stored."""
        self._url = url
        self._where = _describe(url)
        self._connect_kwargs: dict[str, Any] = {
            "autocommit": True,  # transactions are explicit
            "connect_timeout": connect_timeout_s,
            "application_name": application_name,
        }
        self._lock = threading.Lock()
        self._closed = False
        self._conn = self._connect()
        try:
            self._open(create)
        except BaseException:
            self._conn.close()
            raise

    # ---- connecting and migrating -------------------------------------------------------------

    def _open(self, create: bool) -> None:
        check_migrations(POSTGRES_MIGRATIONS)
        conn = self._conn
        with self._errors("opening"):
            found = self._read_version(conn, self._where)
            if found == DB_SCHEMA_VERSION:
                return
            if found > DB_SCHEMA_VERSION:
                raise SchemaVersionError(newer_than_code(found, f"the PostgreSQL database at {self._where}"))
            # Checked before the lock and the migrating transaction, so nothing is written. An older
            # callbound schema is still migrated, as an existing SQLite file is: it is a store.
            if found == 0 and not create:
                raise UsageError(no_schema(self._where))
            # One migrator per schema at a time. A session lock, taken before the migrating transaction
            # begins: a transaction that began earlier could still see "no tables" in its catalog cache.
            key_row = conn.execute(
                "SELECT hashtext(COALESCE(current_schema(), '') || '.callbound')"
            ).fetchone()
            key = 0 if key_row is None else int(key_row[0])
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            try:
                with conn.transaction():
                    found = self._read_version(conn, self._where)
                    if found > DB_SCHEMA_VERSION:
                        raise SchemaVersionError(
                            newer_than_code(found, f"the PostgreSQL database at {self._where}")
                        )
                    for version in range(found + 1, DB_SCHEMA_VERSION + 1):
                        POSTGRES_MIGRATIONS[version](conn.execute)
                    if found < DB_SCHEMA_VERSION:
                        conn.execute(
                            "INSERT INTO meta (key, value) VALUES (%s, %s) "
                            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                            (META_KEY, str(DB_SCHEMA_VERSION)),
                        )
            finally:
                if not conn.closed:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    @staticmethod
    def _read_version(conn: psycopg.Connection[Any], where: str | None = None) -> int:
        exists = conn.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()
        if exists is None or not exists[0]:
            return 0
        row = conn.execute("SELECT value FROM meta WHERE key = %s", (META_KEY,)).fetchone()
        # named as the SQLite store names its file (review round 20, e)
        at = "the PostgreSQL database" if where is None else f"the PostgreSQL database at {where}"
        return 0 if row is None else docs.schema_version(row[0], at)

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except psycopg.OperationalError as exc:
            raise StoreError(
                f"PostgreSQL at {self._where} failed while {what}: {exc}; check that the server is up and "
                "reachable, then retry"
            ) from exc
        except psycopg.DataError as exc:
            raise StoreError(
                f"PostgreSQL at {self._where} cannot store the data of {what}: {exc}; ids, keys and "
                "tenant names must be text without NUL characters, and the database encoding UTF8"
            ) from exc
        except psycopg.Error as exc:
            raise StoreError(
                f"PostgreSQL at {self._where} refused {what}: {exc}; check that the database holds callbound "
                "tables and the user may write them"
            ) from exc

    # ---- the Store protocol -------------------------------------------------------------------

    def commit(self, commit: Commit) -> None:
        op = commit.operation_id
        head = commit.head
        head_json, journal_data, audit_data, ledger_data, approval_data = encode_commit(commit)
        n_journal = len(journal_data)
        audit = [
            (op, ev.seq, ev.kind, ev.at, data, ev.prev_hash, ev.hash)
            for ev, data in zip(commit.audit, audit_data, strict=True)
        ]
        ledger = [
            (e.tenant, e.key, e.operation_id, e.status.value, data)
            for e, data in zip(commit.ledger, ledger_data, strict=True)
        ]
        approvals = [_approval_row(a, d) for a, d in zip(commit.approvals, approval_data, strict=True)]
        first_seq = commit.audit[0].seq if commit.audit else None
        consecutive = all(ev.seq == (first_seq or 0) + i for i, ev in enumerate(commit.audit))
        fence = head.get("fence")
        columns = (head.get("tenant"), head.get("state"), head.get("created_at"), head.get("updated_at"))
        with self._lock, self._errors(f"committing operation {op}"):
            # run again on a new connection if the server dropped the old one before COMMIT was sent
            # (pg_connection.py): a result the caller holds is not lost to a restart or idle timeout
            def write(conn: psycopg.Connection[Any]) -> None:
                if commit.create:
                    if first_seq not in (None, 0) or not consecutive:
                        self._refuse(conn, commit)
                    latest = {a[0]: a for a in approvals}.values()  # the last write of an approval wins
                    wake = min((a[5] for a in latest if a[1] == op and a[3] == "pending"), default=None)
                    cur = conn.execute(
                        _INSERT_OP, (op, *columns, head_json, n_journal, len(audit), fence, wake)
                    )
                    if cur.rowcount != 1:
                        raise OperationExists(op)
                    start = 0
                else:
                    row = None
                    guards = (commit.fence, commit.fence, first_seq, first_seq)
                    if consecutive:
                        row = conn.execute(
                            _UPDATE_OP,
                            (*columns, head_json, n_journal, len(audit), fence, op, *guards),
                        ).fetchone()
                    if row is None:
                        self._refuse(conn, commit)
                    start = int(row[0]) - n_journal
                for e, row_data in zip(commit.ledger, ledger, strict=True):
                    # Insert a claim alone first: a concurrent claim of the same key waits on this row's
                    # lock and then finds it taken (READ COMMITTED re-reads per statement). Over an
                    # existing entry, the row lock of SELECT ... FOR UPDATE orders the claimants the same
                    # way: the second one reads the first one's entry and is refused.
                    if e.claim and conn.execute(_CLAIM_LEDGER, row_data).fetchone() is None:
                        holder = conn.execute(_LEDGER_HOLDER, (e.tenant, e.key)).fetchone()
                        if holder is not None and claim_refused(e, (holder[0], holder[1])):
                            raise IntentTaken(e.tenant, e.key, holder[0])
                # Out of the pipeline, one statement each (few rows, only on a pause or an end): each
                # result is needed to refuse the commit, naming the approval.
                for a in approvals:
                    if conn.execute(_UPSERT_APPROVAL, a).rowcount != 1:
                        row = conn.execute(_APPROVAL_STATUS, (a[0],)).fetchone()
                        raise ApprovalChanged(a[0], None if row is None else row[0])  # rolls back
                if journal_data or audit or ledger or approvals:
                    with conn.pipeline(), conn.cursor() as cur:
                        if journal_data:
                            cur.executemany(
                                _INSERT_JOURNAL,
                                [
                                    (op, pos, r.kind, d)
                                    for pos, r, d in zip(
                                        range(start, start + n_journal),
                                        commit.journal,
                                        journal_data,
                                        strict=True,
                                    )
                                ],
                            )
                        if audit:
                            cur.executemany(_INSERT_AUDIT, audit)
                        if ledger:
                            cur.executemany(_UPSERT_LEDGER, ledger)
                        if approvals:
                            # a new operation got its wake time in the INSERT: no second row version
                            wake_ops = {a[1] for a in approvals} - ({op} if commit.create else set())
                            if wake_ops:
                                cur.executemany(_REFRESH_WAKE, [{"op": o} for o in sorted(wake_ops)])

            self._transaction(write)

    def _refuse(self, conn: psycopg.Connection[Any], commit: Commit) -> NoReturn:
        """Say why a commit cannot be written (in the same order as MemoryStore) and raise; the
        caller's transaction rolls back."""
        op = commit.operation_id
        stored_audit = 0
        if commit.create:
            if conn.execute("SELECT 1 FROM operations WHERE operation_id = %s", (op,)).fetchone() is not None:
                raise OperationExists(op)
        else:
            row = conn.execute(
                "SELECT fence, audit_len FROM operations WHERE operation_id = %s", (op,)
            ).fetchone()
            if row is None:
                raise StoreError(f"operation {op} does not exist")
            current, stored_audit = row
            if commit.fence is not None and current is not None and current != commit.fence:
                raise StaleLease(
                    f"operation {op}: lease token {commit.fence} is stale (current {current}); "
                    "another worker owns it now"
                )
        for i, ev in enumerate(commit.audit):
            if ev.seq != stored_audit + i:
                raise StoreError(
                    f"audit sequence {ev.seq} for {op} does not follow {stored_audit + i - 1}; "
                    "reload the operation before writing to it"
                )
        raise StoreError(f"operation {op} changed while committing; reload it and retry")

    def load_operation(self, operation_id: str) -> StoredOperation | None:
        with self._lock, self._errors(f"loading operation {operation_id}"):
            conn = self._connection()
            row = conn.execute(
                "SELECT head, journal_len, fence FROM operations WHERE operation_id = %s", (operation_id,)
            ).fetchone()
            if row is None:
                return None
            # rows below journal_len are immutable: no transaction needed for a consistent read
            rows = conn.execute(
                "SELECT pos, kind, data FROM journal WHERE operation_id = %s AND pos < %s ORDER BY pos",
                (operation_id, row[1]),
            ).fetchall()
        # a json column edited into a value of the wrong shape is an UnreadableRow naming it (rows.py)
        return docs.operation(operation_id, row[0], row[2], rows, text=False)

    def list_operations(
        self, *, tenant: str | None = None, state: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        where, params = _where((("tenant", tenant), ("state", state)))
        sql = f"SELECT operation_id, head, fence FROM operations{where} ORDER BY id DESC LIMIT %s"
        with self._lock, self._errors("listing operations"):
            rows = self._connection().execute(sql, (*params, max(limit, 0))).fetchall()
        return [docs.head(r, text=False) for r in rows]

    def operation_ids(self) -> list[str]:
        """Every operation's id, newest first, without reading a head (``audit verify``)."""
        with self._lock, self._errors("listing operations"):
            rows = self._connection().execute("SELECT operation_id FROM operations ORDER BY id DESC")
            return [str(r[0]) for r in rows.fetchall()]

    def ledger_get(self, tenant: str, key: str) -> LedgerEntry | None:
        with self._lock, self._errors("reading the ledger"):
            row = self._connection().execute(_LEDGER_ENTRY, (tenant, key)).fetchone()
        return None if row is None else docs.ledger_entry(row[0], tenant, key, text=False)

    def ledger_list(
        self,
        tenant: str | None = None,
        status: str | None = None,
        limit: int = 100,
        *,
        damaged: docs.Damaged = None,
    ) -> list[LedgerEntry]:
        where, params = _where((("tenant", tenant), ("status", status)))
        # COLLATE "C": code point order, as SQLite's and MemoryStore's, whatever the database's locale
        order = 'ORDER BY tenant COLLATE "C", key COLLATE "C"'
        sql = f"SELECT tenant, key, operation_id, status, entry FROM ledger{where} {order} LIMIT %s"
        with self._lock, self._errors("listing the ledger"):
            rows = self._connection().execute(sql, (*params, max(limit, 0))).fetchall()
        return docs.ledger_entries(rows, text=False, damaged=damaged)

    def settle_ledger(self, expected: LedgerEntry, settled: LedgerEntry) -> None:
        where = (expected.tenant, expected.key)
        if (settled.tenant, settled.key) != where:
            raise UsageError("a settled ledger entry must keep the tenant and key of the one it replaces")
        data = dumps(settled.to_dict(), f"ledger entry {settled.key}")
        with self._lock, self._errors(f"settling ledger entry {expected.key}"):

            def settle(conn: psycopg.Connection[Any]) -> None:
                # FOR UPDATE: a claim of the key waits for this, or this for it
                row = conn.execute(_LEDGER_ENTRY + " FOR UPDATE", where).fetchone()
                if row is None or docs.ledger_entry(row[0], *where, text=False) != expected:
                    raise LedgerChanged(*where)  # rolls back
                conn.execute(_SETTLE_LEDGER, (settled.operation_id, settled.status.value, data, *where))

            self._transaction(settle)

    def get_approval(self, approval_id: str) -> PendingApproval | None:
        with self._lock, self._errors("reading an approval"):
            row = (
                self._connection()
                .execute("SELECT data FROM approvals WHERE approval_id = %s", (approval_id,))
                .fetchone()
            )
        return None if row is None else docs.approval(row[0], approval_id, text=False)

    def list_approvals(
        self,
        *,
        tenant: str | None = None,
        status: str | None = "pending",
        operation_id: str | None = None,
        limit: int = 1000,
        damaged: docs.Damaged = None,
    ) -> list[PendingApproval]:
        where, params = _where((("status", status), ("tenant", tenant), ("operation_id", operation_id)))
        sql = f"SELECT approval_id, operation_id, tenant, status, data FROM approvals{where} ORDER BY created_at, id LIMIT %s"
        with self._lock, self._errors("listing approvals"):
            rows = self._connection().execute(sql, (*params, max(limit, 0))).fetchall()
        return docs.approvals(rows, text=False, damaged=damaged)

    def decide_approval(self, decided: PendingApproval) -> bool:
        a = _approval_row(decided)
        with self._lock, self._errors(f"deciding approval {decided.approval_id}"):

            def decide(conn: psycopg.Connection[Any]) -> bool:
                if conn.execute(_DECIDE, (*a[1:], a[0])).rowcount != 1:
                    return False
                conn.execute(_REFRESH_WAKE, {"op": decided.operation_id})
                return True

            return self._transaction(decide)

    def audited_operations(self) -> list[str]:
        with self._lock, self._errors("listing the audited operations"):
            rows = self._connection().execute("SELECT DISTINCT operation_id FROM audit").fetchall()
        return [str(r[0]) for r in rows]

    def audit_events(self, operation_id: str) -> list[AuditEvent]:
        with self._lock, self._errors(f"reading the audit chain of {operation_id}"):
            rows = (
                self._connection()
                .execute(
                    "SELECT seq, kind, at, data, prev_hash, hash FROM audit "
                    "WHERE operation_id = %s ORDER BY seq",
                    (operation_id,),
                )
                .fetchall()
            )
        return docs.audit_events(operation_id, rows, text=False)

    def column_drift(self, operation_id: str | None = None) -> list[Drift]:
        """Rows whose indexed columns differ from their documents (``audit verify``, stores/drift.py)."""
        with self._lock, self._errors("reading the rows' columns"):
            conn = self._connection()
            return column_drift(lambda q, p: conn.execute(q, p).fetchall(), "%s", "expires_at", operation_id)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._conn.close()

    # ---- leases (D21) -------------------------------------------------------------------------

    def claim(self, worker_id: str, lease_s: float, now_fn: NowFn | None = None) -> tuple[str, int] | None:
        now = None if now_fn is None else float(now_fn())
        with self._lock, self._errors("claiming an operation"):
            row = (
                self._connection()
                .execute(_CLAIM, {"now": now, "worker": worker_id, "lease": lease_s})
                .fetchone()
            )
        return None if row is None else (str(row[0]), int(row[1]))

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
        params = {"now": now, "owner": owner, "lease": lease_s, "op": operation_id, "replacing": replacing}
        with self._lock, self._errors(f"taking the lease on {operation_id}"):
            row = self._connection().execute(_HOLD, params).fetchone()
        return None if row is None else int(row[0])

    def lease_holder(self, operation_id: str, now_fn: NowFn | None = None) -> str | None:
        now = None if now_fn is None else float(now_fn())
        with self._lock, self._errors(f"reading the lease on {operation_id}"):
            row = self._connection().execute(_HOLDER, (operation_id, now)).fetchone()
        return None if row is None else str(row[0])

    def renew(
        self, operation_id: str, worker_id: str, fence: int, lease_s: float, now_fn: NowFn | None = None
    ) -> bool:
        now = None if now_fn is None else float(now_fn())
        with self._lock, self._errors(f"renewing the lease on {operation_id}"):
            cur = self._connection().execute(_RENEW, (now, lease_s, operation_id, worker_id, fence))
            return cur.rowcount == 1

    def release(self, operation_id: str, fence: int) -> bool:
        with self._lock, self._errors(f"releasing the lease on {operation_id}"):
            return self._connection().execute(_RELEASE, (operation_id, fence)).rowcount == 1


def _where(filters: Sequence[tuple[str, str | None]]) -> tuple[str, list[str]]:
    used = [(column, value) for column, value in filters if value is not None]
    if not used:
        return "", []
    return " WHERE " + " AND ".join(f"{column} = %s" for column, _ in used), [v for _, v in used]
