"""One damaged approval or ledger row no longer hides every other one (review round 21, b).

Before, ``Store.list_approvals`` and ``Store.ledger_list`` raised ``UnreadableRow`` at the first row that
did not load, so ``callbound approvals list`` and ``callbound ledger list`` printed one error line and
exit 2 and listed nothing: an operator with 10,000 paused operations could neither see nor decide the
healthy ones. ``ops list`` already listed around a damaged operation row (review round 16, r2 F3).

Now both listings do the same, on SQLite and PostgreSQL (MemoryStore keeps objects, which cannot be
damaged, and takes the same keyword): the damaged row is listed as ``DAMAGED`` in its place (``--json``:
its own columns and ``"damaged"``: why), a warning on stderr names it and says what to do, the others are
listed, and the command exits 0 as ``ops list`` does (D28; docs/reference.md's exit-code table). The
library keeps failing closed by default: without ``damaged=`` the calls still raise, so a resume or
``audit verify`` never skips a row it cannot read."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from callbound.cli.app import app
from callbound.demo.refund import make_app
from callbound.stores import open as open_store
from callbound.stores.base import Store
from callbound.stores.rows import UnreadableRow

# (table, the column holding the document, the column naming the row)
TABLES = {"approvals": ("data", "approval_id"), "ledger": ("entry", "key")}
# text that is not JSON (SQLite only: PostgreSQL's json column refuses it), an array, an object missing fields
DAMAGE = {"sqlite": ["{", "[]", "{}"], "postgres": ["[]", "{}"]}


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def three_paused(st: Store, tmp_path: Path) -> list[tuple[str, str, str]]:
    """Three demo operations waiting for approval, oldest first: (operation, approval id, ledger key)."""
    payments = str(tmp_path / "pay.db")
    runner = make_app(payments=payments).runner(
        st, ref={"ref": "callbound.demo.refund:make_app", "args": {"payments": payments}}
    )
    paused = []
    for i in range(3):
        o = runner.run_sync(input=f"refund A{i}", tenant="acme", subject="customer-1")
        assert o.state == "WAITING_APPROVAL"
        (entry,) = [e for e in st.ledger_list() if e.operation_id == o.operation_id]
        paused.append((o.operation_id, o.pending_approvals[0].approval_id, entry.key))
    return paused


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'cb.db'}"
        return
    from tests.stores.conftest import PgSchema

    schema = PgSchema()
    try:
        yield schema.url
    finally:
        schema.drop()


def damage(url: str, table: str, name: str, value: str) -> None:
    column, key = TABLES[table]
    sql = f"UPDATE {table} SET {column} = %s WHERE {key} = %s"
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as c:
            assert c.execute(sql.replace("%s", "?"), (value, name)).rowcount == 1
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        assert c.execute(sql.replace("= %s WHERE", "= %s::json WHERE", 1), (value, name)).rowcount == 1


def kinds(url: str) -> list[str]:
    return DAMAGE["sqlite" if url.startswith("sqlite") else "postgres"]


def test_the_library_lists_around_a_damaged_row_only_when_asked(url: str, tmp_path: Path) -> None:
    st = open_store(url)
    paused = three_paused(st, tmp_path)
    st.close()
    (_, apr0, key0), (op1, apr1, key1), (_, apr2, key2) = paused
    for value in kinds(url):
        damage(url, "approvals", apr1, value)
        damage(url, "ledger", key1, value)
        st = open_store(url)
        try:
            # by default still fail closed: a resume must never skip a row it cannot read
            with pytest.raises(UnreadableRow, match=apr1):
                st.list_approvals(status=None)
            with pytest.raises(UnreadableRow, match=key1):
                st.ledger_list()

            damaged: list[UnreadableRow] = []
            listed = st.list_approvals(status="pending", damaged=damaged)
            assert [a.approval_id for a in listed] == [apr0, apr2], value
            (d,) = damaged
            assert d.index == 1 and d.operation_id == op1 and apr1 in str(d) and op1 in str(d)
            assert d.columns == {
                "approval_id": apr1,
                "operation_id": op1,
                "tenant": "acme",
                "status": "pending",
            }

            damaged = []
            entries = st.ledger_list(tenant="acme", damaged=damaged)
            assert {e.key for e in entries} == {key0, key2}, value
            (d,) = damaged
            assert d.operation_id == op1 and key1 in str(d)
            assert d.columns == {"tenant": "acme", "key": key1, "operation_id": op1, "status": "SUCCEEDED"}
        finally:
            st.close()


def test_memory_store_takes_the_keyword(tmp_path: Path) -> None:
    st = open_store("memory:")
    paused = three_paused(st, tmp_path)
    damaged: list[UnreadableRow] = []
    assert [a.approval_id for a in st.list_approvals(damaged=damaged)] == [p[1] for p in paused]
    assert len(st.ledger_list(damaged=damaged)) == 3 and damaged == []


def test_approvals_list_lists_around_a_damaged_row(url: str, tmp_path: Path) -> None:
    st = open_store(url)
    (_, apr0, _), (op1, apr1, _), (_, apr2, _) = three_paused(st, tmp_path)
    st.close()
    for value in kinds(url):
        damage(url, "approvals", apr1, value)
        for args in ([], ["--all"], ["--tenant", "acme"]):
            r = run("approvals", "list", *args, "--store", url)
            assert r.exit_code == 0, (value, args, r.stderr, r.exception)
            rows = [line for line in r.stdout.splitlines() if "apr_" in line]
            assert [apr0 in rows[0], apr1 in rows[1], apr2 in rows[2]] == [True] * 3, r.stdout
            assert "pending" in rows[0] and "pending" in rows[2] and "DAMAGED" in rows[1], r.stdout
            (warning,) = r.stderr.strip().splitlines()
            assert warning.startswith("warning: ") and apr1 in warning and op1 in warning, warning
            assert "restore the row from a backup" in warning, warning

        r = run("approvals", "list", "--json", "--store", url)
        assert r.exit_code == 0, (value, r.stderr, r.exception)
        listed = json.loads(r.stdout)
        assert [a["approval_id"] for a in listed] == [apr0, apr1, apr2]
        assert "damaged" not in listed[0] and listed[0]["tool"] == "submit_refund"
        assert listed[1]["operation_id"] == op1 and listed[1]["status"] == "pending" and listed[1]["damaged"]

    # the healthy ones can still be decided; the damaged one is one error line, exit 2
    r = run("approvals", "approve", apr2, "--approver", "alice", "--store", url)
    assert r.exit_code == 0, (r.stderr, r.exception)
    r = run("approvals", "approve", apr1, "--approver", "alice", "--store", url)
    assert r.exit_code == 2 and apr1 in r.stderr, (r.stderr, r.exception)


def test_ledger_list_lists_around_a_damaged_row(url: str, tmp_path: Path) -> None:
    st = open_store(url)
    paused = three_paused(st, tmp_path)
    st.close()
    (_, _, key0), (op1, _, key1), (_, _, key2) = paused
    for value in kinds(url):
        damage(url, "ledger", key1, value)
        for args in ([], ["--status", "SUCCEEDED"], ["--tenant", "acme"]):
            r = run("ledger", "list", *args, "--store", url)
            assert r.exit_code == 0, (value, args, r.stderr, r.exception)
            rows = [line for line in r.stdout.splitlines() if "ik_" in line]
            assert len(rows) == 3, r.stdout
            (bad,) = [line for line in rows if key1 in line]
            assert "DAMAGED" in bad and op1 in bad, r.stdout
            assert all("SUCCEEDED" in line for line in rows if line is not bad), r.stdout
            (warning,) = r.stderr.strip().splitlines()
            assert warning.startswith("warning: ") and key1 in warning and "restore the row" in warning

        r = run("ledger", "list", "--json", "--store", url)
        assert r.exit_code == 0, (value, r.stderr, r.exception)
        listed = {e["key"]: e for e in json.loads(r.stdout)}
        assert set(listed) == {key0, key1, key2}
        assert listed[key1]["damaged"] and listed[key1]["operation_id"] == op1
        assert "damaged" not in listed[key0] and listed[key0]["status"] == "SUCCEEDED"
