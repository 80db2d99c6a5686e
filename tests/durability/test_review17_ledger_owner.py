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
from callbound.core.idempotency import LedgerStatus
from callbound.core.ids import SequentialIds
from callbound.runtime.settle import settle_intent
from callbound.runtime.verify import Problem, verify_store
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


def _move(db: Path, to: str) -> None:
    """F2's edit: the entry's operation_id, column and document, set to another operation."""
    with sqlite3.connect(db) as conn:
        (doc,) = conn.execute("SELECT entry FROM ledger WHERE key = ?", (KEY,)).fetchone()
        entry = json.loads(doc)
        entry["operation_id"] = to
        conn.execute(
            "UPDATE ledger SET entry = ?, operation_id = ? WHERE key = ?", (json.dumps(entry), to, KEY)
        )


def _delete(db: Path, operation_id: str) -> None:
    """F3's edit: every row of the operation, its ledger entry left behind."""
    with sqlite3.connect(db) as conn:
        for table in ("operations", "journal", "audit", "approvals"):
            conn.execute(f"DELETE FROM {table} WHERE operation_id = ?", (operation_id,))


def _ledger(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.where == f"ledger {KEY}"]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cb.db"


@pytest.mark.parametrize("key", [None, AUDIT_KEY], ids=["no-key", "hmac-key"])
async def test_an_entry_moved_to_an_operation_that_never_claimed_it_is_named(db: Path, key: Any) -> None:
    """The reviewer's case: g1 paid the refund, d1 never touched it; the entry moved to d1."""
    store = SQLiteStore(db)
    paid = Counter()
    g1 = await _run(store, _refund(paid), 100, key)
    d1 = await _run(store, _refund(paid), 200, key, {"order_id": "D1"})  # another intent
    assert g1.state == d1.state == cb.State.COMPLETED and paid.calls == [g1.operation_id, d1.operation_id]
    assert verify_store(store, None, key) == []
    store.close()

    _move(db, d1.operation_id)
    store = SQLiteStore(db)
    for only in (None, d1.operation_id, g1.operation_id):
        found = verify_store(store, only, key)
        assert [p.operation_id for p in found] == [d1.operation_id], (only, found)
        (p,) = _ledger(found)
        assert "records no claim of this key" in p.why
        # verified alone, d1 is held to its own chain; g1's is read too when g1 is verified or all are
        assert (g1.operation_id in p.why) is (only != d1.operation_id)
    store.close()


async def test_an_entry_moved_back_to_the_operation_it_was_taken_over_from_is_named(db: Path) -> None:
    """D16 takeover: op1's refund ended UNKNOWN, op2's reconcile took the key over (reconcile_started
    over op1) and paid. Clean as the runtime left it; moved back to op1, which also claimed the key
    once, it is named from op2's chain."""
    store = SQLiteStore(db)
    paid = Counter()

    def cannot_tell(key: str, ctx: cb.CallContext) -> Any:
        raise LookupError("the payment service is down")

    def not_applied(key: str, ctx: cb.CallContext) -> Any:
        raise cb.NotApplied("no refund with this key")

    op1 = await _run(store, _refund(paid, broken=True, reconcile=cannot_tell), 100, None)
    assert (op1.state, op1.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    op2 = await _run(store, _refund(paid, reconcile=not_applied), 200, None)
    assert op2.state == cb.State.COMPLETED and paid.calls == [op2.operation_id]
    entry = store.ledger_get("acme", KEY)
    assert entry is not None and entry.operation_id == op2.operation_id
    assert entry.status is LedgerStatus.SUCCEEDED
    assert verify_store(store) == []  # a takeover by reconcile is not a finding
    store.close()

    _move(db, op1.operation_id)
    store = SQLiteStore(db)
    (p,) = verify_store(store)
    assert (p.operation_id, p.where) == (op1.operation_id, f"ledger {KEY}")
    assert f"operation {op2.operation_id}'s audit chain records taking this key over" in p.why
    store.close()


async def test_an_entry_moved_to_an_earlier_attempt_of_the_intent_is_named(db: Path) -> None:
    """op1's refund was declined (FAILED, attempt 1), op2 ran it again (attempt 2) and paid. Moved to
    op1, whose chain records attempt 1 only, the entry is named from op2's attempt 2."""
    store = SQLiteStore(db)
    paid = Counter()
    op1 = await _run(store, _refund(paid, fail=True), 100, None)
    op2 = await _run(store, _refund(paid), 200, None)
    assert op1.state == op2.state == cb.State.COMPLETED and paid.calls == [op2.operation_id]
    assert verify_store(store) == []
    store.close()

    _move(db, op1.operation_id)
    store = SQLiteStore(db)
    found = _ledger(verify_store(store))
    # op1 never sent this result either (verify's result check); the chains say more: op2 ran it after
    assert {p.operation_id for p in found} == {op1.operation_id}
    assert any(f"operation {op2.operation_id}'s audit chain records attempt 2" in p.why for p in found)
    store.close()


async def test_settled_and_replayed_entries_are_not_findings(db: Path) -> None:
    """An operator's settle keeps the entry's operation and a replay writes nothing: neither leaves a
    claim in any other chain, and neither is named."""
    store = SQLiteStore(db)
    paid = Counter()

    def cannot_tell(key: str, ctx: cb.CallContext) -> Any:
        raise LookupError("the payment service is down")

    op1 = await _run(store, _refund(paid, broken=True, reconcile=cannot_tell), 100, None)
    assert op1.reason == "OUTCOME_UNKNOWN"
    from datetime import UTC, datetime

    settle_intent(store, "acme", KEY, applied=True, by="alice", now=datetime.now(UTC))
    op2 = await _run(store, _refund(paid), 200, None)
    op3 = await _run(store, _refund(paid), 300, None)
    assert op2.state == op3.state == cb.State.COMPLETED and paid.calls == []
    entry = store.ledger_get("acme", KEY)
    assert entry is not None and entry.operation_id == op1.operation_id and entry.settled is not None
    assert verify_store(store) == []
    assert verify_store(store, op2.operation_id) == []
    store.close()

    _move(db, op3.operation_id)  # a replaying operation never held the entry
    store = SQLiteStore(db)
    (p,) = verify_store(store)
    assert (p.operation_id, p.where) == (op3.operation_id, f"ledger {KEY}")
    assert "records no claim of this key" in p.why
    store.close()


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
