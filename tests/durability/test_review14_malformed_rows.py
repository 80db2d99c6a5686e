"""A stored row hand-edited into text that is not JSON, or into JSON of the wrong shape, is named (review
round 14; reviewer's repro r3_verify_malformed_row.py and tamper2.sh). It crashed ``audit verify`` with a
JSONDecodeError or TypeError traceback that named no row and checked no other operation, and crashed every
other command that read the row (a resume of an approved operation: a traceback, nothing run).

Now the stores raise ``UnreadableRow`` (a ``StoreError``) naming the table and key, and ``audit verify``
names the row as a finding for its operation and goes on with the others (docs/durability.md: "exits 1
naming the first bad row"). PostgreSQL's json columns refuse text that is not JSON, so there only the
wrong shape is tried. The edits are synthetic SQL on a store this test writes."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound import stores
from callbound.core.errors import StoreError
from callbound.runtime.verify import Problem, verify_store
from callbound.testing import FakeClock, ScriptedModel
from tests.runtime.helpers import API, Counter, calls, fc, final, refund_tool, write_tool

from .conftest import store_urls

NOT_JSON = "{"  # what the reviewer typed into each column (SQLite only: a json column refuses it)
NOT_OBJECT = "[]"  # valid JSON, wrong shape (both stores)


def runner(store: Any, script: list[dict[str, Any]], counter: Counter | None = None) -> cb.Runner:
    return cb.Runner(
        model=ScriptedModel(API, script), registry=cb.Registry([write_tool(), refund_tool(counter)]),
        store=store, clock=FakeClock(),
    )  # fmt: skip


def two_operations(url: str) -> tuple[str, str, str, str]:
    """An older operation that completed, then one waiting for a refund's approval after a write recorded
    in the ledger. Returns (older op, paused op, its approval id, its ledger key)."""
    store = stores.open(url)
    older = runner(store, [final("r0", "Hello.")]).run_sync("hi", tenant="acme", subject="u1")
    assert older.state == cb.State.COMPLETED
    script = [
        calls("r1", fc("c1", "set_note", {"order_id": "A1"})),
        calls("r2", fc("c2", "refund", {"order_id": "A1", "amount": 5.0})),
        final("r3"),
    ]
    out = runner(store, script).run_sync("note and refund A1", tenant="acme", subject="u1")
    assert out.state == cb.State.WAITING_APPROVAL
    (pending,) = out.pending_approvals
    (entry,) = store.ledger_list(tenant="acme")
    assert verify_store(store) == []
    store.close()
    return older.operation_id, out.operation_id, pending.approval_id, entry.key


def edit(kind: str, url: str, tmp_path: Path, sql: str, params: tuple[Any, ...]) -> None:
    if kind == "sqlite":
        with sqlite3.connect(tmp_path / "callbound.db") as conn:
            conn.execute(sql.replace("%s", "?").replace("::json", ""), params)
        return
    import psycopg

    dsn, _, options = url.partition("?options=-csearch_path%3D")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {options}")
        conn.execute(sql, params)


def first_journal_pos(kind: str, url: str, tmp_path: Path, op: str) -> int:
    sql = "SELECT min(pos) FROM journal WHERE operation_id = %s AND kind = 'results'"
    if kind == "sqlite":
        with sqlite3.connect(tmp_path / "callbound.db") as conn:
            return int(conn.execute(sql.replace("%s", "?"), (op,)).fetchone()[0])
    import psycopg

    dsn, _, options = url.partition("?options=-csearch_path%3D")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {options}")
        row = conn.execute(sql, (op,)).fetchone()
        assert row is not None
        return int(row[0])


Reads = Callable[[Any], object]
# table -> (the edit, the row verify names, the store reads that must name it): op, approval id, ledger key
EDITS: dict[str, Callable[[str, str, str, int], tuple[str, tuple[Any, ...], str, list[Reads]]]] = {
    "operations.head": lambda op, apr, key, pos: (
        "UPDATE operations SET head = %s::json WHERE operation_id = %s",
        (op,),
        "operation row",
        [lambda s: s.load_operation(op), lambda s: s.list_operations()],
    ),
    "journal.data": lambda op, apr, key, pos: (
        "UPDATE journal SET data = %s::json WHERE operation_id = %s AND pos = %s",
        (op, pos),
        f"journal pos {pos}",
        [lambda s: s.load_operation(op)],
    ),
    "audit.data": lambda op, apr, key, pos: (
        "UPDATE audit SET data = %s::json WHERE operation_id = %s AND seq = 1",
        (op,),
        "audit seq 1",
        [lambda s: s.audit_events(op)],
    ),
    "ledger.entry": lambda op, apr, key, pos: (
        "UPDATE ledger SET entry = %s::json WHERE key = %s",
        (key,),
        f"ledger {key} (tenant acme)",
        [lambda s: s.ledger_get("acme", key), lambda s: s.ledger_list()],
    ),
    "approvals.data": lambda op, apr, key, pos: (
        "UPDATE approvals SET data = %s::json WHERE approval_id = %s",
        (apr,),
        f"approval {apr}",
        [
            lambda s: s.get_approval(apr),
            lambda s: s.list_approvals(status=None),
            lambda s: s.list_approvals(operation_id=op, status=None),
        ],
    ),
}
CASES = [("sqlite", NOT_JSON), ("sqlite", NOT_OBJECT), ("postgres", NOT_OBJECT)]


def loaded_not(found: list[Problem], op: str, where: str) -> bool:
    return any(
        p.operation_id == op and p.where == where and p.why.startswith("cannot be loaded") for p in found
    )


@pytest.mark.parametrize(("kind", "value"), CASES)
@pytest.mark.parametrize("table", list(EDITS))
def test_a_row_that_does_not_load_is_named_and_the_other_operations_are_verified(
    kind: str, value: str, table: str, tmp_path: Path
) -> None:
    url = store_urls(kind, tmp_path)
    older, op, approval_id, key = two_operations(url)
    pos = first_journal_pos(kind, url, tmp_path, op)
    sql, params, where, reads = EDITS[table](op, approval_id, key, pos)
    edit(kind, url, tmp_path, sql, (value, *params))
    # the older operation (verified after the paused one, newest first) is edited legibly as well
    edit(
        kind,
        url,
        tmp_path,
        "UPDATE audit SET data = %s::json WHERE operation_id = %s AND seq = 0",
        ('{"x": 1}', older),
    )
    store = stores.open(url)
    try:
        found = verify_store(store)
        assert loaded_not(found, op, where), found
        # named once, by its loader: not again for each plain column beside it (stores/drift.py)
        assert not any(p.operation_id == op and " column (" in p.why for p in found), found
        assert any(p.operation_id == older and p.where == "audit seq 0" for p in found), found
        assert loaded_not(verify_store(store, op), op, where)
        for read in reads:
            with pytest.raises(StoreError) as caught:  # stores.rows.UnreadableRow
                read(store)
            assert f"the stored {where}" in str(caught.value)
            assert getattr(caught.value, "where", None) == where
    finally:
        store.close()


@pytest.mark.parametrize(("kind", "value"), CASES)
def test_resume_of_an_approved_operation_whose_journal_does_not_load_raises_and_runs_nothing(
    kind: str, value: str, tmp_path: Path
) -> None:
    url = store_urls(kind, tmp_path)
    _, op, approval_id, _ = two_operations(url)
    counter = Counter()
    store = stores.open(url)
    runner(store, [final("r3")], counter).approve(approval_id, "alice", tenant="acme")
    pos = first_journal_pos(kind, url, tmp_path, op)
    edit(
        kind,
        url,
        tmp_path,
        "UPDATE journal SET data = %s::json WHERE operation_id = %s AND pos = %s",
        (value, op, pos),
    )
    try:
        with pytest.raises(StoreError, match=f"journal pos {pos} of operation {op}"):
            runner(store, [final("r3")], counter).resume_sync(op)
        assert counter.calls == []
        assert [h["state"] for h in store.list_operations() if h["operation_id"] == op] == [
            "WAITING_APPROVAL"
        ]
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize(
    ("table", "value"),
    [("operations.head", "{}"), ("journal.data", '{"turn": []}')],
)
def test_an_object_that_does_not_read_as_callbound_wrote_it_is_a_finding(
    kind: str, table: str, value: str, tmp_path: Path
) -> None:
    """An object of the right shape at the top but not inside (the stores check only the top) is named by
    verify for its operation, not a KeyError or TypeError traceback."""
    url = store_urls(kind, tmp_path)
    older, op, _, _ = two_operations(url)
    if table == "journal.data":
        sql = "UPDATE journal SET data = %s::json WHERE operation_id = %s AND kind = 'turn'"
    else:
        sql = "UPDATE operations SET head = %s::json WHERE operation_id = %s"
    edit(kind, url, tmp_path, sql, (value, op))
    store = stores.open(url)
    try:
        for found in (verify_store(store), verify_store(store, op)):
            assert any(
                p.operation_id == op and p.where == "operation" and "cannot be read" in p.why for p in found
            ), found
            assert not any(p.operation_id == older for p in found), found
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("value", ["abc", ""])
def test_a_schema_version_that_is_not_a_number_is_a_store_error(
    kind: str, value: str, tmp_path: Path
) -> None:
    url = store_urls(kind, tmp_path)
    stores.open(url).close()
    edit(kind, url, tmp_path, "UPDATE meta SET value = %s WHERE key = 'db_schema_version'", (value,))
    with pytest.raises(StoreError, match="db_schema_version row of the meta table"):
        stores.open(url)
    if kind == "postgres":
        from callbound.stores.postgres import missing_schema

        assert missing_schema(url) is None  # unreadable, not empty: opening it says why
