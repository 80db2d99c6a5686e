"""Review round 18 (d F2): an intent held (STARTED) by an operation whose stored head is damaged.

``claims.held_elsewhere`` takes such a holder as running, "the safe side: a refusal, never a second
effect" (D16, D21): the proposing operation's model is told IN_PROGRESS and nothing runs. But loading
the holder's head raised the store's UnreadableRow, which escaped ``Runner.run`` of the *proposing*
operation as a StoreError about another operation's row: ``callbound run`` exited 2, and a worker
failed the operation again at every lease expiry, though nothing was wrong with it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.core.idempotency import LedgerEntry, LedgerStatus
from callbound.stores.base import Commit
from callbound.stores.sqlite import SQLiteStore
from tests.runtime.helpers import OrderArgs, calls, error_code, fc, final, last_outputs, make, write_tool

A1 = {"order_id": "A1"}


def _intent(args: OrderArgs, ctx: cb.CallContext) -> str:
    return f"pay:{args.order_id}"


@pytest.mark.parametrize(
    "damage",
    ["'not json'", "'[1, 2]'", "json_object('operation_id', 'op_busy')"],
    ids=["not-json", "not-an-object", "no-state"],
)
async def test_an_intent_held_by_an_operation_with_a_damaged_head_is_in_progress(
    damage: str, tmp_path: Path
) -> None:
    path = tmp_path / "cb.db"
    store = SQLiteStore(path)
    head = {"operation_id": "op_busy", "tenant": "acme", "state": "EXECUTING"}
    store.commit(Commit("op_busy", head, create=True))
    entry = LedgerEntry("ik_pay:A1", "acme", "pay", "op_busy", LedgerStatus.STARTED, None, 1)
    store.commit(Commit("op_busy", head, ledger=[entry]))
    with sqlite3.connect(path) as raw:
        raw.execute(f"UPDATE operations SET head = {damage} WHERE operation_id = 'op_busy'")
    raw.close()

    ran: list[str] = []
    looked: list[str] = []

    def pay(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.order_id)
        return {"paid": args.order_id}

    def reconcile(key: str, ctx: cb.CallContext) -> Any:
        looked.append(key)
        raise cb.NotApplied("nothing yet")

    spec = write_tool(
        handler=pay, name="pay", schema_version="pay-v1", intent_key=_intent, reconcile=reconcile
    )
    h = make([calls("resp_1", fc("call_1", "pay", A1)), final("resp_2")], [spec], store=store)
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert ran == [] and looked == []
    assert error_code(last_outputs(h.model)["call_1"]) == "IN_PROGRESS"
    kept = store.ledger_get("acme", "ik_pay:A1")
    assert kept is not None and kept.status is LedgerStatus.STARTED and kept.operation_id == "op_busy"
    store.close()
