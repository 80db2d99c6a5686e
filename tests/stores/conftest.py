"""Store backends for the one contract suite (tests/stores/test_contract.py).

PostgreSQL runs when ``CALLBOUND_TEST_POSTGRES`` holds a DSN (``eval "$(.ci/postgres.sh start)"``) and is
skipped otherwise (a failure instead when ``CALLBOUND_REQUIRE_POSTGRES`` is set, as in CI). Each
PostgreSQL test gets a schema of its own, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from callbound.core.approvals import PendingApproval
from callbound.core.audit import AuditEvent, next_event
from callbound.core.idempotency import LedgerEntry, LedgerStatus
from callbound.stores.base import Commit, JournalRow
from callbound.stores.memory import MemoryStore

PG_ENV = "CALLBOUND_TEST_POSTGRES"
REQUIRE_ENV = "CALLBOUND_REQUIRE_POSTGRES"
PG_SKIP = (
    f"PostgreSQL store tests need {PG_ENV}=postgresql://user@host:port/db "
    '(start a throwaway server with: eval "$(.ci/postgres.sh start)")'
)
T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
T0_S = T0.timestamp()


# ---- backends --------------------------------------------------------------------------------------


def pg_dsn() -> str:
    dsn = os.environ.get(PG_ENV, "")
    if not dsn:
        if os.environ.get(REQUIRE_ENV):  # CI: these tests must run, never skip
            pytest.fail(f"{REQUIRE_ENV} is set but {PG_ENV} is not: {PG_SKIP}")
        pytest.skip(PG_SKIP)
    try:
        import psycopg  # noqa: F401
    except ImportError:  # the variable is set: these tests must run, so this is a failure
        pytest.fail(f"{PG_ENV} is set but psycopg is missing: pip install -e '.[postgres]'")
    return dsn


def with_search_path(dsn: str, schema: str) -> str:
    """The DSN with ``options=-csearch_path=<schema>`` added (URL or key=value form)."""
    if "://" not in dsn:
        return f"{dsn} options='-csearch_path={schema}'"
    parts = urlsplit(dsn)
    query = [*parse_qsl(parts.query), ("options", f"-csearch_path={schema}")]
    return urlunsplit(parts._replace(query=urlencode(query)))


class PgSchema:
    """A fresh schema in the test database, dropped (with everything in it) by ``drop``."""

    def __init__(self) -> None:
        import psycopg

        self.dsn = pg_dsn()
        self.name = f"cbt_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {self.name}")
        self.url = with_search_path(self.dsn, self.name)

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.name} CASCADE")


@dataclass
class Backend:
    """Opens stores on one shared database. ``open()`` twice gives two connections to the same data
    (MemoryStore has no second connection: it returns the same instance)."""

    name: str
    durable: bool
    factory: Callable[[], Any]
    opened: list[Any] = field(default_factory=list)

    def open(self) -> Any:
        store = self.factory()
        self.opened.append(store)
        return store

    def close_all(self) -> None:
        for store in self.opened:
            store.close()
        self.opened.clear()


def sqlite_without_returning(path: Path) -> Any:
    """A SQLiteStore that commits with the statements it uses on SQLite before 3.35 (no RETURNING)."""
    from callbound.stores.sqlite import SQLiteStore

    store = SQLiteStore(path)
    store._returning = False
    return store


@pytest.fixture(params=["memory", "sqlite", "sqlite-no-returning", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "memory":
        memory = MemoryStore()
        yield Backend("memory", False, lambda: memory)
    elif request.param in ("sqlite", "sqlite-no-returning"):
        from callbound.stores.sqlite import SQLiteStore

        path = tmp_path / "callbound.db"
        opener = SQLiteStore if request.param == "sqlite" else sqlite_without_returning
        b = Backend(request.param, True, lambda: opener(path))
        yield b
        b.close_all()
    else:
        from callbound.stores.postgres import PostgresStore

        schema = PgSchema()
        b = Backend("postgres", True, lambda: PostgresStore(schema.url))
        try:
            yield b
        finally:
            b.close_all()
            schema.drop()


@pytest.fixture
def store(backend: Backend) -> Any:
    return backend.open()


@pytest.fixture
def pg_schema() -> Iterator[PgSchema]:
    schema = PgSchema()
    try:
        yield schema
    finally:
        schema.drop()


# ---- data ----------------------------------------------------------------------------------------


def make_head(
    op: str, state: str = "MODEL_REQUESTED", *, tenant: str = "acme", fence: int | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "snapshot_version": 1,
        "operation_id": op,
        "tenant": tenant,
        "subject": "user-1",
        "state": state,
        "created_at": T0.isoformat(),
        "updated_at": T0.isoformat(),
        "fence": fence,
        **extra,
    }


def make_approval(
    approval_id: str,
    op: str,
    *,
    tenant: str = "acme",
    created_at: datetime = T0,
    ttl: timedelta = timedelta(hours=24),
    status: str = "pending",
) -> PendingApproval:
    return PendingApproval(
        approval_id=approval_id,
        operation_id=op,
        tenant=tenant,
        subject="user-1",
        response_id="resp_1",
        call_id=f"call_{approval_id}",
        tool="refund",
        arguments={"order_id": "A1", "amount": "40.00", "note": "café ☕"},
        argument_digest="d" * 64,
        policy_revision="policy-1",
        schema_version="refund-v1",
        tool_digest="t" * 64,
        created_at=created_at,
        expires_at=created_at + ttl,
        status=status,  # type: ignore[arg-type]
    )


def decide(a: PendingApproval, status: str, approver: str, at: datetime | None = None) -> PendingApproval:
    decided_at = at or a.created_at + timedelta(minutes=5)
    return replace(a, status=status, approver=approver, decided_at=decided_at)  # type: ignore[arg-type]


def make_events(
    op: str, n: int, prev: AuditEvent | None = None, kind: str = "transition"
) -> list[AuditEvent]:
    out: list[AuditEvent] = []
    for i in range(n):
        prev = next_event(prev, op, kind, (T0 + timedelta(seconds=i)).isoformat(), {"i": i, "state": "X"})
        out.append(prev)
    return out


def make_entry(key: str, op: str, status: LedgerStatus = LedgerStatus.STARTED, **kw: Any) -> LedgerEntry:
    return LedgerEntry(
        key=key,
        tenant=kw.pop("tenant", "acme"),
        tool="refund",
        operation_id=op,
        status=status,
        result=kw.pop("result", None),
        attempts=kw.pop("attempts", 1),
        **kw,
    )


def create(store: Any, op: str, state: str = "MODEL_REQUESTED", **kw: Any) -> None:
    """Create an operation with one journal row and the first audit event."""
    store.commit(
        Commit(
            op,
            make_head(op, state, **kw),
            journal=[JournalRow("transition", {"state": state, "n": 0})],
            audit=make_events(op, 1),
            create=True,
        )
    )
