"""D13: every write that takes an intent over is a claim, decided on the ledger entry it read.

Before, only a STARTED written where the ledger held nothing was a claim. Two operations that read one
FAILED entry (definitely not applied, may run again) at the same moment both wrote STARTED through a
plain upsert and both ran the effect: an acceptance probe with four processes paid 3 of 30 refunds
twice, on SQLite and on PostgreSQL, and every operation ended COMPLETED. The same held for two
operations reconciling one UNKNOWN entry and both hearing "not applied".

Now a fresh attempt's STARTED, and the takeover a reconcile starts with, are claims over the entry read;
the store refuses the commit (IntentTaken, nothing written, no handler run) when the key holds another
operation's entry by then, and the operation decides again from what the store holds. Each test makes
one operation's ledger read stale on purpose (it sees the entry from before the other operation's
write), which is the race without its timing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.core.idempotency import LedgerStatus
from callbound.core.ids import SequentialIds
from callbound.stores.memory import MemoryStore
from callbound.stores.sqlite import SQLiteStore

from .helpers import Counter, OrderArgs, calls, fc, final, last_outputs, make, write_tool

A1 = {"order_id": "A1"}
KEY = "ik_refund-A1"
INTENT = {"intent_key": lambda args, ctx: f"refund-{args.order_id}"}


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield MemoryStore()
        return
    s = SQLiteStore(tmp_path / "cb.db")
    yield s
    s.close()


def _stale_first_read(store: Any, entry: Any) -> None:
    """The store's first ledger read answers ``entry`` (what it held a moment before); later reads
    are true."""
    real = store.ledger_get
    reads = {"n": 0}

    def ledger_get(tenant: str, key: str) -> Any:
        reads["n"] += 1
        return entry if reads["n"] == 1 else real(tenant, key)

    store.ledger_get = ledger_get


def _refund(paid: Counter, *, fail: bool = False, reconcile: Any = None) -> cb.ToolSpec:
    def refund(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        if fail:
            raise cb.NotApplied("the card was declined")
        paid.calls.append(ctx.operation_id)
        return {"refunded": args.order_id}

    extra = {} if reconcile is None else {"reconcile": reconcile}
    return write_tool(handler=refund, **INTENT, **extra)


def _op(store: Any, tool: cb.ToolSpec, base: int) -> Any:
    script = [calls(f"resp_{base}", fc(f"call_{base}", "set_note", A1)), final(f"resp_{base + 1}")]
    return make(script, [tool], store=store, ids=SequentialIds(base))


async def test_two_operations_retrying_one_failed_intent_pay_once(store: Any) -> None:
    paid = Counter()
    declined = _op(store, _refund(paid, fail=True), 100)
    assert (await declined.run()).state == cb.State.COMPLETED
    failed = store.ledger_get("acme", KEY)
    assert failed is not None and failed.status is LedgerStatus.FAILED

    first = _op(store, _refund(paid), 200)
    assert (await first.run()).state == cb.State.COMPLETED
    assert len(paid.calls) == 1

    # The second operation read the FAILED entry before the first one's STARTED landed.
    _stale_first_read(store, failed)
    second = _op(store, _refund(paid), 300)
    out = await second.run()
    assert out.state == cb.State.COMPLETED
    assert len(paid.calls) == 1  # never twice
    assert last_outputs(second.model)["call_300"] == {"ok": True, "data": {"refunded": "A1"}}
    entry = store.ledger_get("acme", KEY)
    assert entry is not None and entry.status is LedgerStatus.SUCCEEDED
    assert entry.operation_id == paid.calls[0]


async def test_two_operations_reconciling_one_unknown_intent_pay_once(store: Any) -> None:
    paid = Counter()
    world = {"applied": False}

    def broken(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        raise RuntimeError("the payment service hung up")  # outcome unknown (D16)

    def cannot_tell(key: str, ctx: cb.CallContext) -> Any:
        raise LookupError("the payment service is down")

    unknown = _op(store, write_tool(handler=broken, reconcile=cannot_tell, **INTENT), 100)
    out = await unknown.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    left = store.ledger_get("acme", KEY)
    assert left is not None and left.status is LedgerStatus.UNKNOWN

    def not_applied_yet(key: str, ctx: cb.CallContext) -> Any:
        if world["applied"]:
            return {"refunded": "A1"}
        raise cb.NotApplied("no refund with this key")

    first = _op(store, _refund(paid, reconcile=not_applied_yet), 200)
    assert (await first.run()).state == cb.State.COMPLETED
    assert len(paid.calls) == 1

    # The second operation read the UNKNOWN entry and its reconcile looked before the first one paid:
    # both heard "not applied". Its claim over the UNKNOWN entry is refused; it decides again.
    _stale_first_read(store, left)
    second = _op(store, _refund(paid, reconcile=not_applied_yet), 300)
    out = await second.run()
    assert out.state == cb.State.COMPLETED
    assert len(paid.calls) == 1  # never twice
    assert last_outputs(second.model)["call_300"] == {"ok": True, "data": {"refunded": "A1"}}


async def test_an_operation_retrying_its_own_failed_intent_still_runs(store: Any) -> None:
    """The claim passes over the operation's own entry: a NotApplied refund asked again in a later
    turn of the same operation runs again."""
    paid = Counter()
    attempts = {"n": 0}

    def flaky(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        attempts["n"] += 1
        if attempts["n"] == 1:
            raise cb.NotApplied("declined, try again")
        paid.calls.append(ctx.operation_id)
        return {"refunded": args.order_id}

    script = [
        calls("resp_1", fc("call_1", "set_note", A1)),
        calls("resp_2", fc("call_2", "set_note", A1)),
        final("resp_3"),
    ]
    h = make(script, [write_tool(handler=flaky, **INTENT)], store=store, ids=SequentialIds(10))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert attempts["n"] == 2 and len(paid.calls) == 1
