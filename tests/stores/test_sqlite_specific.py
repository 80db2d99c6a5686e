"""SQLiteStore behaviour beyond the shared contract: pragmas, versions, several processes, cost."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from callbound.core.errors import SchemaVersionError, StoreError, UsageError
from callbound.stores import open_store
from callbound.stores.base import Commit, JournalRow
from callbound.stores.schema import DB_SCHEMA_VERSION, META_KEY
from callbound.stores.sqlite import SQLiteStore

from .conftest import create, decide, make_approval, make_entry, make_events, make_head

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_wal_and_synchronous_full_by_default(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    try:
        settings = store.settings()
        assert settings["journal_mode"] == "wal"
        assert settings["synchronous"] == "FULL"
        assert settings["busy_timeout_ms"] == 10_000
        assert settings["db_schema_version"] == DB_SCHEMA_VERSION
    finally:
        store.close()
    raw = sqlite3.connect(tmp_path / "a.db")
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # persistent in the file
    raw.close()


def test_synchronous_normal_and_busy_timeout_are_configurable(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db", synchronous="normal", busy_timeout_ms=250)
    try:
        assert store.settings()["synchronous"] == "NORMAL"
        assert store.settings()["busy_timeout_ms"] == 250
    finally:
        store.close()
    with pytest.raises(UsageError, match="synchronous"):
        SQLiteStore(tmp_path / "b.db", synchronous="OFF")


def test_open_store_urls(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'u.db'}")
    assert isinstance(store, SQLiteStore)
    assert store.path == str(tmp_path / "u.db")
    store.close()


def test_d30_stores_open_is_the_documented_entry_point(tmp_path: Path) -> None:
    """D30: ``callbound.stores.open(url)``; ``open_store`` stays as the earlier name."""
    import callbound.stores
    from callbound.stores.memory import MemoryStore

    store = callbound.stores.open(f"sqlite:///{tmp_path / 'o.db'}")
    assert isinstance(store, SQLiteStore)
    assert store.path == str(tmp_path / "o.db")
    store.close()
    assert isinstance(callbound.stores.open("memory:"), MemoryStore)
    assert "open" in callbound.stores.__all__
    assert callbound.stores.open_store is callbound.stores.open
    with pytest.raises(UsageError, match="unknown store URL"):
        callbound.stores.open("mysql://nope")


def _set_version(path: Path, version: int) -> None:
    raw = sqlite3.connect(path)
    raw.execute("UPDATE meta SET value = ? WHERE key = ?", (str(version), META_KEY))
    raw.commit()
    raw.close()


def test_a_newer_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    store = SQLiteStore(path)
    create(store, "op1")
    store.close()
    _set_version(path, DB_SCHEMA_VERSION + 1)
    before = path.read_bytes()
    with pytest.raises(SchemaVersionError, match=r"upgrade callbound") as info:
        SQLiteStore(path)
    assert f"version {DB_SCHEMA_VERSION + 1}" in str(info.value)
    assert isinstance(info.value, StoreError)
    assert path.read_bytes() == before
    _set_version(path, DB_SCHEMA_VERSION)
    again = SQLiteStore(path)
    assert again.load_operation("op1") is not None
    again.close()


def _file_state(path: Path) -> tuple[str, int, list[tuple[str, str]], str]:
    """What plain sqlite3 sees of a file: journal mode, user_version, schema, db_schema_version."""
    raw = sqlite3.connect(path)
    try:
        return (
            raw.execute("PRAGMA journal_mode").fetchone()[0],
            raw.execute("PRAGMA user_version").fetchone()[0],
            raw.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall(),
            raw.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).fetchone()[0],
        )
    finally:
        raw.close()


@pytest.mark.parametrize("how", ["SQLiteStore", "open", "open create=False"])
def test_a_newer_database_in_rollback_journal_mode_is_not_switched_to_wal(tmp_path: Path, how: str) -> None:
    """docs/durability.md: a database newer than this code is "refused rather than touched". A store
    created by callbound is already in WAL, so the test above cannot see a switch to WAL made before
    the version check; a newer database in rollback-journal mode (journal_mode=delete) can: the
    version is read first, and nothing (journal mode, synchronous, tables, meta row) is written."""
    path = tmp_path / "future.db"
    SQLiteStore(path).close()
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
    raw.execute("UPDATE meta SET value = ? WHERE key = ?", (str(DB_SCHEMA_VERSION + 1), META_KEY))
    raw.commit()
    raw.close()
    before, state = path.read_bytes(), _file_state(path)
    assert state[0] == "delete"
    files = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(SchemaVersionError, match="upgrade callbound"):
        if how == "SQLiteStore":
            SQLiteStore(path)
        else:
            open_store(f"sqlite:///{path}", create=how == "open")
    assert sorted(p.name for p in tmp_path.iterdir()) == files  # no -wal or -shm file was made
    assert path.read_bytes() == before
    assert _file_state(path) == state


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is not SQLite\n" * 100)
    with pytest.raises(StoreError, match="callbound database"):
        SQLiteStore(path)


def test_a_missing_folder_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="folder exists"):
        SQLiteStore(tmp_path / "no" / "such" / "dir.db")


def test_a_closed_store_raises_store_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    store.close()
    with pytest.raises(StoreError):
        store.load_operation("op1")


def test_a_failure_inside_the_transaction_rolls_everything_back(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = SQLiteStore(path)
    create(store, "op1")
    # plant a row where the next journal row must go, so the INSERT fails after the head UPDATE
    raw = sqlite3.connect(path)
    raw.execute("INSERT INTO journal (operation_id, pos, kind, data) VALUES ('op1', 1, 'planted', '{}')")
    raw.commit()
    raw.close()
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
    store.close()


def test_a_commit_costs_the_same_statements_at_turn_1_and_turn_300(tmp_path: Path) -> None:
    """History is appended, never rewritten (D18): the statements of a commit do not grow with it."""
    store = SQLiteStore(tmp_path / "a.db")
    create(store, "op1")
    statements: list[str] = []

    def one_commit(n: int) -> list[str]:
        statements.clear()
        store._conn.set_trace_callback(statements.append)
        store.commit(
            Commit(
                "op1",
                make_head("op1", "EXECUTING", n=n),
                [JournalRow("turn", {"n": n}), JournalRow("results", {})],
            )
        )
        store._conn.set_trace_callback(None)
        return list(statements)

    first = one_commit(1)
    for n in range(2, 300):
        store.commit(Commit("op1", make_head("op1", "EXECUTING", n=n), [JournalRow("turn", {"n": n})]))
    late = one_commit(300)
    assert len(late) == len(first) <= 5
    assert [s.split()[0] for s in late] == ["BEGIN", "UPDATE", "INSERT", "INSERT", "COMMIT"]
    assert not any(re.match(r"(UPDATE|DELETE FROM|REPLACE INTO)\s+(journal|audit)\b", s) for s in late)
    store.close()


def _update_of(store: SQLiteStore, commit: Commit) -> list[str]:
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    try:
        store.commit(commit)
    finally:
        store._conn.set_trace_callback(None)
    return [s.split(" WHERE ")[0] for s in statements if s.startswith("UPDATE")]  # the SET clauses


def test_a_commit_names_only_the_indexed_columns_that_change(tmp_path: Path) -> None:
    """SQLite rewrites an index whenever an UPDATE sets one of its columns, changed or not: one more
    page appended to the WAL and fsync'd per index. The usual commit sets neither tenant nor an
    unchanged state, and one statement does the fencing, the update and the counts."""
    store = SQLiteStore(tmp_path / "a.db")
    create(store, "op1")
    moved = _update_of(store, Commit("op1", make_head("op1", "EXECUTING", n=1), [JournalRow("note", {})]))
    assert len(moved) == 1 and "state = " in moved[0] and "tenant = " not in moved[0]
    same = _update_of(store, Commit("op1", make_head("op1", "EXECUTING", n=2), [JournalRow("note", {})]))
    assert len(same) == 1 and "state = " not in same[0] and "tenant = " not in same[0]
    store.close()


@pytest.mark.parametrize("returning", [True, False], ids=["returning", "no-returning"])
def test_the_copied_columns_follow_the_head_whatever_changes(tmp_path: Path, returning: bool) -> None:
    """tenant, state, created_at and updated_at are copied out of every head, whichever UPDATE writes
    it: a changed tenant, a kept or changed state, two operations interleaved (the state guess wrong)."""
    path = tmp_path / "a.db"
    store = SQLiteStore(path)
    store._returning = returning
    create(store, "op1")
    create(store, "op2")
    steps = [
        ("op1", "EXECUTING", "acme"),
        ("op1", "EXECUTING", "acme"),
        ("op2", "EXECUTING", "acme"),
        ("op1", "MODEL_REQUESTED", "acme"),
        ("op2", "EXECUTING", "other"),
        ("op1", "MODEL_REQUESTED", "other"),
        ("op2", "COMPLETED", "other"),
        ("op1", "EXECUTING", "acme"),
    ]
    for n, (op, state, tenant) in enumerate(steps, start=1):
        head = make_head(op, state, tenant=tenant, n=n)
        head["created_at"] = f"2025-01-0{n % 9 + 1}T00:00:00+00:00"
        head["updated_at"] = f"2025-02-0{n % 9 + 1}T00:00:00+00:00"
        store.commit(Commit(op, head, [JournalRow("note", {"n": n})]))
        raw = sqlite3.connect(path)
        try:
            row = raw.execute(
                "SELECT tenant, state, created_at, updated_at, head, journal_len FROM operations "
                "WHERE operation_id = ?",
                (op,),
            ).fetchone()
        finally:
            raw.close()
        assert row[:4] == (tenant, state, head["created_at"], head["updated_at"])
        assert json.loads(row[4]) == head
        loaded = store.load_operation(op)
        assert loaded is not None and loaded.head == head and len(loaded.journal) == row[5]
    assert [h["operation_id"] for h in store.list_operations(tenant="acme")] == ["op1"]
    assert [h["operation_id"] for h in store.list_operations(state="COMPLETED")] == ["op2"]
    store.close()


def test_decisions_from_two_processes_exactly_one_wins(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = SQLiteStore(path)
    create(store, "op1")
    approvals = [make_approval(f"ap{i}", "op1") for i in range(40)]
    store.commit(Commit("op1", make_head("op1", "WAITING_APPROVAL"), approvals=approvals))
    script = textwrap.dedent(
        """
        import sys
        from dataclasses import replace
        from datetime import datetime, UTC
        sys.path.insert(0, sys.argv[3])
        from callbound.stores.sqlite import SQLiteStore
        store = SQLiteStore(sys.argv[1])
        won = []
        for a in store.list_approvals(limit=1000):
            decided = replace(a, status="approved", approver=sys.argv[2], decided_at=datetime.now(UTC))
            if store.decide_approval(decided):
                won.append(a.approval_id)
        print(",".join(won))
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(path), who, SRC], stdout=subprocess.PIPE, text=True
        )
        for who in ("alice", "bob")
    ]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    won = {who: set(filter(None, out.split(","))) for who, out in zip(("alice", "bob"), outs, strict=True)}
    assert won["alice"].isdisjoint(won["bob"])
    assert won["alice"] | won["bob"] == {a.approval_id for a in approvals}
    for a in approvals:
        stored = store.get_approval(a.approval_id)
        assert stored is not None and stored.approver is not None
        assert stored.status == "approved"
        assert a.approval_id in won[stored.approver]
    store.close()


def test_several_processes_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    SQLiteStore(path).close()
    script = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, sys.argv[3])
        from callbound.stores.sqlite import SQLiteStore
        from callbound.stores.base import Commit, JournalRow
        store = SQLiteStore(sys.argv[1])
        w = sys.argv[2]
        for i in range(25):
            op = f"{w}-{i}"
            head = {"operation_id": op, "tenant": "acme", "state": "MODEL_REQUESTED", "fence": None}
            store.commit(Commit(op, head, [JournalRow("note", {"n": 0})], create=True))
            for n in range(1, 4):
                store.commit(Commit(op, {**head, "state": "EXECUTING"}, [JournalRow("note", {"n": n})]))
        # and claim work concurrently with the other processes
        claimed = []
        while (got := store.claim(w, 60)) is not None:
            claimed.append(got[0])
        print(",".join(claimed))
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(path), f"p{k}", SRC], stdout=subprocess.PIPE, text=True
        )
        for k in range(4)
    ]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    store = SQLiteStore(path)
    heads = store.list_operations(limit=1000)
    assert len(heads) == 100
    for h in heads:
        loaded = store.load_operation(h["operation_id"])
        assert loaded is not None
        assert [r.data["n"] for r in loaded.journal] == [0, 1, 2, 3]
    claimed = [op for out in outs for op in out.split(",") if op]
    assert sorted(claimed) == sorted(h["operation_id"] for h in heads)  # every op exactly once
    store.close()


def test_two_connections_in_threads_decide_and_claim(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    a, b = SQLiteStore(path), SQLiteStore(path)
    create(a, "op1")
    ap = make_approval("ap1", "op1")
    a.commit(Commit("op1", make_head("op1", "WAITING_APPROVAL"), approvals=[ap]))
    results: list[bool] = []
    barrier = threading.Barrier(2)

    def run(store: SQLiteStore, who: str) -> None:
        barrier.wait()
        results.append(store.decide_approval(decide(ap, "approved", who)))

    threads = [threading.Thread(target=run, args=(s, w)) for s, w in ((a, "alice"), (b, "bob"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, True]
    a.close()
    b.close()
