"""``audit verify`` checks every ledger entry, also when one ledger row is damaged (round 21).

``ledger_problems`` read the whole ledger with one ``ledger_list``: the first damaged row raised, was
reported, and no other entry was checked against its operation's chain; a second entry whose operation
had been deleted went unreported. It now reads around the damaged row (``damaged=[]``, as the CLI's
lists do) and reports both. The edits are synthetic SQL on a store this test writes."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import callbound as cb
from callbound import stores
from callbound.runtime.verify import verify_store
from callbound.testing import FakeClock, ScriptedModel
from tests.runtime.helpers import API, calls, fc, final, write_tool


def _note(store: Any, tenant: str, order: str) -> str:
    script = [calls("r1", fc("c1", "set_note", {"order_id": order})), final("r2")]
    runner = cb.Runner(
        model=ScriptedModel(API, script), registry=cb.Registry([write_tool()]), store=store, clock=FakeClock()
    )
    out = runner.run_sync(f"note {order}", tenant=tenant, subject="u1")
    assert out.state is cb.State.COMPLETED
    return out.operation_id


def test_a_damaged_ledger_row_does_not_hide_another_entrys_problem(tmp_path: Path) -> None:
    path = tmp_path / "callbound.db"
    store = stores.open(f"sqlite:///{path}")
    damaged_op = _note(store, "acme", "A1")
    orphan_op = _note(store, "beta", "B2")
    (damaged_entry,) = store.ledger_list(tenant="acme")
    assert verify_store(store) == []
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE ledger SET entry = '{' WHERE key = ?", (damaged_entry.key,))
        conn.execute("DELETE FROM operations WHERE operation_id = ?", (orphan_op,))
    store = stores.open(f"sqlite:///{path}")
    try:
        found = {(p.operation_id, p.where, p.why) for p in verify_store(store)}
    finally:
        store.close()
    assert any(op == damaged_op and "cannot be loaded" in why for op, _, why in found), found
    assert any(
        op == orphan_op and "ledger" in where and "not in the store" in why for op, where, why in found
    ), found


def test_verifying_one_operation_names_its_damaged_row_not_anothers(tmp_path: Path) -> None:
    path = tmp_path / "callbound.db"
    store = stores.open(f"sqlite:///{path}")
    damaged_op = _note(store, "acme", "A1")
    healthy_op = _note(store, "beta", "B2")
    (damaged_entry,) = store.ledger_list(tenant="acme")
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE ledger SET entry = '{' WHERE key = ?", (damaged_entry.key,))
    store = stores.open(f"sqlite:///{path}")
    try:
        assert verify_store(store, healthy_op) == []
        found = verify_store(store, damaged_op)
        assert found and {p.operation_id for p in found} == {damaged_op}, found
        assert any("cannot be loaded" in p.why for p in found), found
    finally:
        store.close()
