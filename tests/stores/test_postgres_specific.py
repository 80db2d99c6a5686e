"""PostgresStore behaviour beyond the shared contract. Needs CALLBOUND_TEST_POSTGRES (see conftest),
except the import and connection-error tests."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from callbound.core.errors import SchemaVersionError, StoreError
from callbound.stores.base import Commit, JournalRow
from callbound.stores.schema import DB_SCHEMA_VERSION, META_KEY

from .conftest import PgSchema, create, make_approval, make_entry, make_events, make_head

DATA = Path(__file__).parent / "data"


def test_import_callbound_never_imports_psycopg() -> None:
    code = (
        "import sys, callbound, callbound.stores, callbound.stores.sqlite\n"
        "from callbound.stores import open_store\n"
        "open_store('memory:')\n"
        "assert 'psycopg' not in sys.modules, sorted(m for m in sys.modules if 'psycopg' in m)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unreachable_server_is_a_store_error_without_the_password() -> None:
    pytest.importorskip("psycopg")
    from callbound.stores.postgres import PostgresStore

    with pytest.raises(StoreError, match=r"cannot connect to PostgreSQL at 127\.0\.0\.1:1/db") as info:
        PostgresStore("postgresql://someone:s3cret-pw@127.0.0.1:1/db", connect_timeout_s=2)
    assert "s3cret-pw" not in str(info.value)


def _open(schema: PgSchema) -> Any:
    from callbound.stores.postgres import PostgresStore

    return PostgresStore(schema.url)


def _raw(schema: PgSchema) -> Any:
    import psycopg

    return psycopg.connect(schema.url, autocommit=True)


def test_open_store_picks_postgres(pg_schema: PgSchema) -> None:
    from callbound.stores import open_store
    from callbound.stores.postgres import PostgresStore

    store = open_store(pg_schema.url)
    assert isinstance(store, PostgresStore)
    store.close()


def test_tables_live_in_the_schema_of_the_search_path(pg_schema: PgSchema) -> None:
    _open(pg_schema).close()
    with _raw(pg_schema) as conn:
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (pg_schema.name,)
            )
        }
        version = conn.execute("SELECT value FROM meta WHERE key = %s", (META_KEY,)).fetchone()
    assert tables == {"meta", "operations", "journal", "audit", "ledger", "approvals"}
    assert version == (str(DB_SCHEMA_VERSION),)


def test_a_newer_database_is_refused_untouched(pg_schema: PgSchema) -> None:
    store = _open(pg_schema)
    create(store, "op1")
    store.close()
    with _raw(pg_schema) as conn:
        conn.execute("UPDATE meta SET value = %s WHERE key = %s", (str(DB_SCHEMA_VERSION + 1), META_KEY))
    with pytest.raises(SchemaVersionError, match="upgrade callbound"):
        _open(pg_schema)
    with _raw(pg_schema) as conn:
        assert conn.execute("SELECT value FROM meta").fetchall() == [(str(DB_SCHEMA_VERSION + 1),)]
        assert conn.execute("SELECT count(*) FROM operations").fetchone() == (1,)


@pytest.mark.parametrize("version", range(1, DB_SCHEMA_VERSION + 1))
def test_each_frozen_version_opens_and_migrates(pg_schema: PgSchema, version: int) -> None:
    with _raw(pg_schema) as conn:
        conn.execute((DATA / f"db_schema_v{version}_postgres.sql").read_text(encoding="utf-8"))
        conn.execute("INSERT INTO meta (key, value) VALUES (%s, %s)", (META_KEY, str(version)))
    store = _open(pg_schema)
    create(store, "op1")
    assert store.load_operation("op1") is not None
    store.close()
    with _raw(pg_schema) as conn:
        assert conn.execute("SELECT value FROM meta").fetchall() == [(str(DB_SCHEMA_VERSION),)]


def test_concurrent_first_opens_migrate_once(pg_schema: PgSchema) -> None:
    errors: list[BaseException] = []
    stores: list[Any] = []
    barrier = threading.Barrier(5)

    def run() -> None:
        barrier.wait()
        try:
            stores.append(_open(pg_schema))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    create(stores[0], "op1")
    assert stores[4].load_operation("op1") is not None
    for s in stores:
        s.close()


def test_claim_skips_rows_locked_by_another_transaction(pg_schema: PgSchema) -> None:
    store = _open(pg_schema)
    create(store, "op1")
    create(store, "op2")
    got: list[Any] = []
    with _raw(pg_schema) as conn, conn.transaction():
        conn.execute("SELECT 1 FROM operations WHERE operation_id = 'op1' FOR UPDATE")
        t = threading.Thread(target=lambda: got.append(store.claim("w1", 60)))
        t.start()
        t.join(timeout=10)
        assert not t.is_alive(), "claim blocked on a locked row instead of skipping it"
    assert got == [("op2", 1)]
    assert store.claim("w2", 60) == ("op1", 1)
    store.close()


def test_a_fenced_commit_racing_a_takeover_loses(pg_schema: PgSchema) -> None:
    """A takeover that commits while the old holder's commit waits on the row lock: the old commit
    re-reads the fence after the lock and is refused."""
    store, other = _open(pg_schema), _open(pg_schema)
    create(store, "op1", fence=1)
    with _raw(pg_schema) as conn:
        with conn.transaction():
            conn.execute("UPDATE operations SET fence = 2 WHERE operation_id = 'op1'")
            failures: list[BaseException] = []

            def old_holder() -> None:
                try:
                    other.commit(
                        Commit("op1", make_head("op1", "EXECUTING", fence=1), [JournalRow("x", {})], fence=1)
                    )
                except BaseException as exc:
                    failures.append(exc)

            t = threading.Thread(target=old_holder)
            t.start()
            t.join(timeout=0.5)
            assert t.is_alive()  # waiting for the row lock
        t.join(timeout=10)
    assert len(failures) == 1 and type(failures[0]).__name__ == "StaleLease"
    assert len(store.load_operation("op1").journal) == 1
    store.close()
    other.close()


def test_a_failure_inside_the_transaction_rolls_everything_back(pg_schema: PgSchema) -> None:
    store = _open(pg_schema)
    create(store, "op1")
    with _raw(pg_schema) as conn:
        conn.execute("INSERT INTO journal (operation_id, pos, kind, data) VALUES ('op1', 1, 'planted', '{}')")
    before = (store.load_operation("op1"), store.audit_events("op1"))
    with pytest.raises(StoreError, match="committing operation op1"):
        store.commit(
            Commit(
                "op1",
                make_head("op1", "EXECUTING"),
                [JournalRow("note", {})],
                [make_entry("k1", "op1")],
                [make_approval("ap1", "op1")],
                make_events("op1", 2)[1:],
            )
        )
    assert (store.load_operation("op1"), store.audit_events("op1")) == before
    assert store.ledger_get("acme", "k1") is None and store.get_approval("ap1") is None
    create(store, "op2")  # the connection is usable again
    store.close()


def test_reconnects_after_the_server_drops_the_connection(pg_schema: PgSchema) -> None:
    store = _open(pg_schema)
    create(store, "op1")
    pid = store._conn.info.backend_pid
    with _raw(pg_schema) as conn:  # waits until the backend is gone: the drop has reached the client
        conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
    # Changed in review round 14 (h9): the first call after a drop failed here, and when it was the
    # commit of a write handler's result, the result was lost. The drop is now found before the call
    # and the connection reopened (stores/pg_connection.py, test_review14_pg_reconnect.py).
    assert store.load_operation("op1") is not None  # a fresh connection
    assert store._conn.info.backend_pid != pid
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.load_operation("op1")
