"""Settling an unknown write by hand, end to end with a scripted model (D13, D16).

D16: a write whose outcome nobody can tell stops its operation STOPPED(OUTCOME_UNKNOWN) and is never re-run
blindly; later operations proposing the intent are told IN_PROGRESS (its handler was still running) or go
through reconcile and stop again. Once a human settles the entry, the next operation replays the settled
result (applied, D13: a replay is not a run) or runs the handler once (not applied: FAILED may run again).
The downstream system's effects are counted: never two.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.core.idempotency import SETTLED_APPLIED, LedgerStatus
from callbound.core.ids import SequentialIds
from callbound.runtime.settle import settle_intent
from callbound.runtime.verify import verify_store
from callbound.stores.base import Commit
from callbound.stores.memory import MemoryStore

from .helpers import OrderArgs, calls, error_code, fc, final, last_outputs, make, write_tool

A1 = {"order_id": "A1"}
KEY = "ik_pay-A1"
INTENT = {"intent_key": lambda args, ctx: f"pay-{args.order_id}", "timeout_ms": 50}


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield MemoryStore()
        return
    from callbound.stores.sqlite import SQLiteStore

    st = SQLiteStore(tmp_path / "callbound.db")
    yield st
    st.close()


class Downstream:
    """The payment service: ``effects`` holds one row per payment that really happened."""

    def __init__(self) -> None:
        self.invocations: list[str] = []  # handler runs (by operation)
        self.effects: list[str] = []
        self.down = False
        self.release = threading.Event()
        self.release.set()

    def pay(self, args: OrderArgs, ctx: cb.CallContext) -> Any:
        self.invocations.append(ctx.operation_id)
        if self.down:
            raise ConnectionError("socket closed after the request was sent")
        self.release.wait(5)
        self.effects.append(args.order_id)
        return {"paid": args.order_id}


def runner(store: Any, pay: Downstream, first_id: int, call_id: str, **kw: Any) -> Any:
    return make(
        [calls(f"resp_{call_id}", fc(call_id, "set_note", A1)), final(f"resp_{call_id}_end")],
        [write_tool(handler=pay.pay, **INTENT)],
        store=store,
        ids=SequentialIds(first_id),
        grace_s=0.05,
        **kw,
    )


async def test_a_handler_alive_intent_settled_as_applied_is_replayed_without_running(store: Any) -> None:
    pay = Downstream()
    pay.release.clear()  # the payment hangs past the timeout and the grace: handler_alive
    op1 = runner(store, pay, 1, "call_1")
    out1 = await op1.run()
    assert (out1.state, out1.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    assert out1.escalation is not None
    assert (
        "callbound ledger settle <key> --tenant <tenant> --applied|--not-applied --by <you>"
        in (out1.escalation["detail"])
    )
    entry = store.ledger_get("acme", KEY)
    assert entry is not None and entry.status is LedgerStatus.UNKNOWN and entry.handler_alive

    # as today: another operation proposing the intent is told IN_PROGRESS and runs nothing
    op2 = runner(store, pay, 1000, "call_2", clock=op1.clock)
    out2 = await op2.run()
    assert out2.state == cb.State.COMPLETED
    assert error_code(last_outputs(op2.model)["call_2"]) == "IN_PROGRESS"
    told = last_outputs(op2.model)["call_2"]["error"]["message"]
    # op1 has ended: the model is not told the request is being carried out right now (review 9)
    assert "unknown outcome" in told and "being carried out" not in told
    assert pay.invocations == [out1.operation_id]

    pay.release.set()  # the late thread lands the payment; the human sees it downstream
    for _ in range(200):
        if pay.effects:
            break
        await asyncio.sleep(0.01)
    assert pay.effects == ["A1"]

    settled = settle_intent(
        store,
        "acme",
        KEY,
        applied=True,
        result={"paid": "A1", "psp_ref": "T-1"},
        by="alice",
        note="found in the PSP dashboard",
        now=op1.clock.now(),
    )
    assert settled.status is LedgerStatus.SUCCEEDED and not settled.handler_alive
    assert store.ledger_get("acme", KEY) == settled

    op3 = runner(store, pay, 2000, "call_3", clock=op1.clock)
    out3 = await op3.run()
    assert out3.state == cb.State.COMPLETED
    assert last_outputs(op3.model)["call_3"] == {"ok": True, "data": {"paid": "A1", "psp_ref": "T-1"}}
    assert pay.invocations == [out1.operation_id]  # replayed: the handler did not run again
    assert pay.effects == ["A1"]  # paid once
    assert verify_store(store) == []  # chains and bindings intact, the replay included


async def test_an_unknown_intent_settled_as_not_applied_runs_once_more(store: Any) -> None:
    pay = Downstream()
    pay.down = True  # the write fails mid-call, and there is no reconcile: nobody can tell
    op1 = runner(store, pay, 1, "call_1")
    out1 = await op1.run()
    assert (out1.state, out1.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    entry = store.ledger_get("acme", KEY)
    assert entry is not None and entry.status is LedgerStatus.UNKNOWN and not entry.handler_alive

    # as today: another operation reconciles first, cannot tell either, and stops without running it
    op2 = runner(store, pay, 1000, "call_2", clock=op1.clock)
    out2 = await op2.run()
    assert (out2.state, out2.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    assert pay.invocations == [out1.operation_id]
    held = store.ledger_get("acme", KEY)
    assert held is not None and held.operation_id == out2.operation_id  # op2 took it over to reconcile

    settled = settle_intent(
        store, "acme", KEY, applied=False, result=None, by="bob", note="no such payment", now=op1.clock.now()
    )
    assert settled.status is LedgerStatus.FAILED
    assert settled.settled is not None and settled.settled["operation_id"] == out2.operation_id

    pay.down = False
    op3 = runner(store, pay, 2000, "call_3", clock=op1.clock)
    out3 = await op3.run()
    assert out3.state == cb.State.COMPLETED
    assert last_outputs(op3.model)["call_3"] == {"ok": True, "data": {"paid": "A1"}}
    assert pay.invocations == [out1.operation_id, out3.operation_id]  # run exactly once more
    assert pay.effects == ["A1"]
    after = store.ledger_get("acme", KEY)
    assert after is not None and after.status is LedgerStatus.SUCCEEDED
    assert after.operation_id == out3.operation_id and after.attempts == settled.attempts + 1
    assert verify_store(store) == []


async def test_settled_as_applied_without_a_result_replays_the_plain_record(store: Any) -> None:
    pay = Downstream()
    pay.down = True
    op1 = runner(store, pay, 1, "call_1")
    assert (await op1.run()).reason == "OUTCOME_UNKNOWN"
    settle_intent(store, "acme", KEY, applied=True, result=None, by="alice", now=op1.clock.now())
    op3 = runner(store, pay, 2000, "call_3", clock=op1.clock)
    assert (await op3.run()).state == cb.State.COMPLETED
    assert last_outputs(op3.model)["call_3"] == {"ok": True, "data": SETTLED_APPLIED}
    assert len(pay.invocations) == 1 and pay.effects == []
    assert verify_store(store) == []


async def test_settling_twice_or_a_missing_key_is_refused(store: Any) -> None:
    """D16: a settled entry is settled; a typed error names what is wrong and nothing is written."""
    pay = Downstream()
    pay.down = True
    op1 = runner(store, pay, 1, "call_1")
    await op1.run()
    now = op1.clock.now()
    first = settle_intent(store, "acme", KEY, applied=False, by="alice", now=now)
    with pytest.raises(cb.SettleRefused, match="settled already") as refused:
        settle_intent(store, "acme", KEY, applied=True, by="bob", now=now)
    assert (refused.value.tenant, refused.value.key) == ("acme", KEY)
    assert store.ledger_get("acme", KEY) == first
    with pytest.raises(cb.UnknownLedgerEntry, match="globex") as missing:
        settle_intent(store, "globex", KEY, applied=True, by="bob", now=now)
    assert (missing.value.tenant, missing.value.key) == ("globex", KEY)
    with pytest.raises(cb.UsageError, match="non-empty"):
        settle_intent(store, "acme", KEY, applied=True, by=" ", now=now)


async def test_an_unknown_entry_of_an_operation_that_has_not_ended_is_left_to_it(store: Any) -> None:
    """D16, D21: the operation reconciles its own entry when resumed; a settle is refused meanwhile."""
    pay = Downstream()
    pay.down = True
    op1 = runner(store, pay, 1, "call_1")
    out1 = await op1.run()
    head = store.load_operation(out1.operation_id).head
    # as after a crash between the ledger's UNKNOWN and the stop: the operation is still EXECUTING
    store.commit(Commit(out1.operation_id, {**head, "state": "EXECUTING"}))
    with pytest.raises(cb.SettleRefused, match=f"callbound resume {out1.operation_id}"):
        settle_intent(store, "acme", KEY, applied=True, by="alice", now=op1.clock.now())
    entry = store.ledger_get("acme", KEY)
    assert entry is not None and entry.status is LedgerStatus.UNKNOWN and entry.settled is None


async def test_audit_verify_stays_clean_after_settling_an_entry_its_operation_answered_before(
    store: Any,
) -> None:
    """D20: a settle is no tampering. The operation tried the intent once (NotApplied: its envelope says
    so), then again (unknown outcome); the human settles it applied; verify must not report the
    operation's earlier envelope as a result the ledger should hold."""
    tries: list[int] = []

    def pay(args: OrderArgs, ctx: cb.CallContext) -> Any:
        tries.append(1)
        if len(tries) == 1:
            raise cb.NotApplied("card declined")
        raise ConnectionError("reset")

    h = make(
        [
            calls("resp_1", fc("call_1", "set_note", A1)),
            calls("resp_2", fc("call_2", "set_note", A1)),
            final("resp_3"),
        ],
        [write_tool(handler=pay, **INTENT)],
        store=store,
        grace_s=0.05,
    )
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    assert verify_store(store) == []
    settle_intent(store, "acme", KEY, applied=True, by="alice", now=h.clock.now())
    assert verify_store(store) == []
