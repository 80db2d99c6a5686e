"""``audit verify`` holds each idempotency-ledger entry's operation to the audit chains (D20; review round
17, r3 F2/F3).

The entry's operation decides who may reconcile or settle a STARTED or UNKNOWN entry, and ``ledger show``
credits the effect to it, but the ledger row is in no chain. Every claim of a key is: ``write_started``
(with its attempt number) and ``reconcile_started`` (with the operation taken over) in the claiming
operation's chain. F2: an entry moved to another operation (its ``operation_id`` column and document)
passed ``audit verify``, with or without ``CALLBOUND_AUDIT_KEY``. F3: an operation deleted whole
(operations, journal, audit and approvals rows) passed too, though its ledger entry still named it; the
store has no call that deletes an operation.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.core.ids import SequentialIds
from callbound.runtime.verify import verify_store
from callbound.stores.sqlite import SQLiteStore
from tests.runtime.helpers import Counter, OrderArgs, calls, fc, final, make, write_tool

A1 = {"order_id": "A1"}
KEY = "ik_refund-A1"
INTENT = {"intent_key": lambda args, ctx: f"refund-{args.order_id}"}
AUDIT_KEY = b"k-review17"


def _refund(paid: Counter, *, fail: bool = False, broken: bool = False, reconcile: Any = None) -> cb.ToolSpec:
    def refund(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        if broken:
            raise RuntimeError("the payment service hung up")  # outcome unknown (D16)
        if fail:
            raise cb.NotApplied("the card was declined")
        paid.calls.append(ctx.operation_id)
        return {"refunded": args.order_id}

    extra = {} if reconcile is None else {"reconcile": reconcile}
    return write_tool(handler=refund, **INTENT, **extra)


async def _run(store: SQLiteStore, tool: cb.ToolSpec, base: int, key: bytes | None, order: Any = None) -> Any:
    args = A1 if order is None else order
    script = [calls(f"resp_{base}", fc(f"call_{base}", "set_note", args)), final(f"resp_{base + 1}")]
    h = make(script, [tool], store=store, ids=SequentialIds(base), audit_key=key)
    return await h.run()


def _delete(db: Path, operation_id: str) -> None:
    """F3's edit: every row of the operation, its ledger entry left behind."""
    with sqlite3.connect(db) as conn:
        for table in ("operations", "journal", "audit", "approvals"):
            conn.execute(f"DELETE FROM {table} WHERE operation_id = ?", (operation_id,))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cb.db"


@pytest.mark.parametrize("key", [None, AUDIT_KEY], ids=["no-key", "hmac-key"])
async def test_an_operation_deleted_whole_is_named_by_its_ledger_entry(db: Path, key: Any) -> None:
    store = SQLiteStore(db)
    paid = Counter()
    g1 = await _run(store, _refund(paid), 100, key)
    d1 = await _run(store, _refund(paid), 200, key, {"order_id": "D1"})
    assert verify_store(store, None, key) == []
    store.close()

    _delete(db, g1.operation_id)
    store = SQLiteStore(db)
    (p,) = verify_store(store, None, key)
    assert (p.operation_id, p.where) == (g1.operation_id, f"ledger {KEY}")
    assert p.why.startswith(f"its operation {g1.operation_id} is not in the store")
    assert verify_store(store, d1.operation_id, key) == []  # one operation verified alone: its own
    store.close()


def test_cli_names_the_ledger_entry_of_a_deleted_operation(tmp_path: Path) -> None:
    """``callbound audit verify`` exits 1 naming ``ledger KEY`` of the operation deleted whole."""
    cli = [sys.executable, "-m", "callbound.cli"]
    store = f"sqlite:///{tmp_path / 'cb.db'}"
    r = subprocess.run(
        [*cli, "demo", "refund", "--approve", "--json", "--store", store],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    op = json.loads(r.stdout)["operation_id"]
    with sqlite3.connect(tmp_path / "cb.db") as conn:
        (key,) = conn.execute("SELECT key FROM ledger WHERE operation_id = ?", (op,)).fetchone()
        for table in ("operations", "journal", "audit", "approvals"):
            conn.execute(f"DELETE FROM {table} WHERE operation_id = ?", (op,))
    r = subprocess.run(
        [*cli, "audit", "verify", "--store", store], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"operation {op}, ledger {key}: its operation {op} is not in the store" in r.stderr
