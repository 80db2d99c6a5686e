"""An approval or ledger row whose document names another row (edited, or copied from another by a
hand restore) is a damaged row (review round 21, b), as a head naming another operation has been since
review round 20 (lead).

Before, the stores read such an approval as the approval its document names: ``approvals list`` showed
that other approval twice and this one not at all, and ``approvals approve`` of this id refused with
"decision is for another approval", which names no row and says nothing of what to do. A ledger row
copied from another entry was read as that entry: ``ledger_get`` of one intent gave another intent's
entry, its recorded result included, which a later proposal would replay. Now both are ``UnreadableRow``
naming the row and what it names (D28: the commands about it exit 2; the listings list it as
``DAMAGED`` among the others)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from callbound.stores import open as open_store
from callbound.stores.rows import UnreadableRow
from tests.cli.test_review21_b_damaged_listed import run, three_paused
from tests.cli.test_review21_b_damaged_listed import url as url  # the fixture: SQLite and PostgreSQL

TABLES = {"approvals": ("data", "approval_id"), "ledger": ("entry", "key")}


def copy_row(url: str, table: str, source: str, target: str) -> None:
    """Write the document of row ``source`` over that of row ``target``."""
    column, key = TABLES[table]
    read = f"SELECT {column} FROM {table} WHERE {key} = %s"
    write = f"UPDATE {table} SET {column} = %s WHERE {key} = %s"
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as c:
            (doc,) = c.execute(read.replace("%s", "?"), (source,)).fetchone()
            assert c.execute(write.replace("%s", "?"), (doc, target)).rowcount == 1
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        row = c.execute(read.replace(column, f"{column}::text", 1), (source,)).fetchone()
        assert row is not None
        assert c.execute(write.replace("= %s WHERE", "= %s::json WHERE", 1), (row[0], target)).rowcount == 1


def test_an_approval_row_naming_another_approval_is_damaged(url: str, tmp_path: Path) -> None:
    st = open_store(url)
    (_, apr0, _), (op1, apr1, _), (_, apr2, _) = three_paused(st, tmp_path)
    st.close()
    copy_row(url, "approvals", apr0, apr1)

    st = open_store(url)
    try:
        with pytest.raises(UnreadableRow, match=f"approval {apr1}.*names another approval .*{apr0}"):
            st.get_approval(apr1)
        damaged: list[UnreadableRow] = []
        assert [a.approval_id for a in st.list_approvals(damaged=damaged)] == [apr0, apr2]
        (d,) = damaged
        assert d.columns["approval_id"] == apr1 and d.operation_id == op1
    finally:
        st.close()

    r = run("approvals", "list", "--json", "--store", url)
    assert r.exit_code == 0, (r.stderr, r.exception)
    listed = json.loads(r.stdout)
    assert [a["approval_id"] for a in listed] == [apr0, apr1, apr2]  # apr0 once, apr1 in its place
    assert "names another approval" in listed[1]["damaged"]

    r = run("approvals", "approve", apr1, "--approver", "alice", "--store", url)
    assert r.exit_code == 2, (r.stderr, r.exception)
    assert apr1 in r.stderr and "names another approval" in r.stderr, r.stderr
    # nothing was decided: the approval the copied document names is still pending
    r = run("approvals", "list", "--json", "--store", url)
    assert [a.get("status") for a in json.loads(r.stdout)] == ["pending"] * 3


def test_a_ledger_row_naming_another_entry_is_damaged(url: str, tmp_path: Path) -> None:
    st = open_store(url)
    (_, _, key0), (_, _, key1), (_, _, key2) = three_paused(st, tmp_path)
    st.close()
    copy_row(url, "ledger", key0, key1)

    st = open_store(url)
    try:
        with pytest.raises(UnreadableRow, match=f"ledger {key1}.*names another entry .*{key0}"):
            st.ledger_get("acme", key1)
        damaged: list[UnreadableRow] = []
        assert {e.key for e in st.ledger_list(damaged=damaged)} == {key0, key2}
        (d,) = damaged
        assert d.columns["key"] == key1
    finally:
        st.close()

    r = run("ledger", "show", key1, "--tenant", "acme", "--store", url)
    assert r.exit_code == 2 and "names another entry" in r.stderr, (r.stderr, r.exception)
    r = run("ledger", "list", "--json", "--store", url)
    assert r.exit_code == 0, (r.stderr, r.exception)
    listed = {e["key"]: e for e in json.loads(r.stdout)}
    assert set(listed) == {key0, key1, key2} and "names another entry" in listed[key1]["damaged"]
