"""``audit verify`` holds a SQL store's indexed columns to the JSON documents the audit chain vouches for
(review round 13). The store's queries read the columns: an edit of one alone changed what the store does
while everything verified intact (a paused operation marked COMPLETED was never claimed again; an expiry
moved into the past woke workers in a loop; a ledger status set back let the intent be claimed again)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound import stores
from callbound.runtime.verify import verify_store
from callbound.testing import FakeClock, ScriptedModel
from tests.runtime.helpers import API, calls, fc, final, refund_tool, write_tool

from .conftest import store_urls


def paused_and_noted(url: str) -> tuple[str, str, str]:
    """One operation waiting for a refund's approval, after a write recorded in the ledger."""
    script = [
        calls("r1", fc("c1", "set_note", {"order_id": "A1"})),
        calls("r2", fc("c2", "refund", {"order_id": "A1", "amount": 5.0})),
        final("r3"),
    ]
    store = stores.open(url)
    runner = cb.Runner(
        model=ScriptedModel(API, script), registry=cb.Registry([write_tool(), refund_tool()]), store=store,
        clock=FakeClock(),
    )  # fmt: skip
    out = runner.run_sync("note and refund A1", tenant="acme", subject="u1")
    assert out.state == cb.State.WAITING_APPROVAL
    (pending,) = out.pending_approvals
    ((entry_key, _),) = [(e.key, e) for e in store.ledger_list(tenant="acme")]
    assert verify_store(store) == []
    store.close()
    return out.operation_id, pending.approval_id, entry_key


def edit(kind: str, url: str, tmp_path: Path, sql: str, params: tuple[Any, ...]) -> None:
    if kind == "sqlite":
        with sqlite3.connect(tmp_path / "callbound.db") as conn:
            conn.execute(sql.replace("%s", "?"), params)
        return
    import psycopg

    dsn, _, options = url.partition("?options=-csearch_path%3D")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {options}")
        conn.execute(sql, params)


EDITS: dict[str, Callable[[str, str, str], tuple[str, tuple[Any, ...], str, str]]] = {
    "operation state": lambda op, apr, key: (
        "UPDATE operations SET state = 'COMPLETED' WHERE operation_id = %s",
        (op,),
        "operation row",
        "state",
    ),
    "operation tenant": lambda op, apr, key: (
        "UPDATE operations SET tenant = 'other' WHERE operation_id = %s",
        (op,),
        "operation row",
        "tenant",
    ),
    "approval status": lambda op, apr, key: (
        "UPDATE approvals SET status = 'withdrawn' WHERE approval_id = %s",
        (apr,),
        f"approval {apr}",
        "status",
    ),
    "ledger status": lambda op, apr, key: (
        "UPDATE ledger SET status = 'FAILED' WHERE key = %s",
        (key,),
        f"ledger {key}",
        "status",
    ),
}


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("what", list(EDITS))
def test_an_edit_of_an_indexed_column_alone_is_named(kind: str, what: str, tmp_path: Path) -> None:
    url = store_urls(kind, tmp_path)
    op, approval_id, key = paused_and_noted(url)
    sql, params, where, column = EDITS[what](op, approval_id, key)
    edit(kind, url, tmp_path, sql, params)
    store = stores.open(url)
    for found in (verify_store(store), verify_store(store, op)):
        assert [(p.operation_id, p.where) for p in found] == [(op, where)], found
        assert f"its {column} column" in found[0].why
    store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_an_expiry_column_moved_is_named(kind: str, tmp_path: Path) -> None:
    url = store_urls(kind, tmp_path)
    _, approval_id, _ = paused_and_noted(url)
    sql = (
        "UPDATE approvals SET expires_us = 0 WHERE approval_id = %s"
        if kind == "sqlite"
        else "UPDATE approvals SET expires_at = '2000-01-01T00:00:00Z' WHERE approval_id = %s"
    )
    edit(kind, url, tmp_path, sql, (approval_id,))
    store = stores.open(url)
    (problem,) = verify_store(store)
    assert problem.where == f"approval {approval_id}" and "expiry column" in problem.why
    store.close()
