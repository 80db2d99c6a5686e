"""Write tools through the idempotency ledger (D13, D16, D18): intent keys, replays, timeouts,
reconcile, unknown outcomes."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.core.idempotency import LedgerEntry, LedgerStatus
from callbound.stores.base import Commit
from callbound.stores.memory import MemoryStore
from callbound.stores.sqlite import SQLiteStore

from .helpers import (
    Counter,
    OrderArgs,
    RefundArgs,
    calls,
    error_code,
    fc,
    final,
    last_outputs,
    make,
    outputs,
    write_tool,
)

A1 = {"order_id": "A1"}


class Payments:
    """A fake downstream service: one row per effect, looked up by idempotency key for reconcile."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def apply(self, key: str | None, order_id: str) -> dict[str, Any]:
        row = {"payment_id": f"pay_{len(self.rows) + 1}", "order_id": order_id, "key": key}
        with self.lock:
            self.rows.append(row)
        return {"payment_id": row["payment_id"], "order_id": order_id}

    def find(self, key: str) -> dict[str, Any] | None:
        for row in self.rows:
            if row["key"] == key:
                return {"payment_id": row["payment_id"], "order_id": row["order_id"]}
        return None


def pay_tool(payments: Payments, handler: Any = None, **kw: Any) -> cb.ToolSpec:
    def pay(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        return payments.apply(ctx.idempotency_key, args.order_id)

    kw.setdefault("name", "pay")
    kw.setdefault("schema_version", "pay-v1")
    return write_tool(handler=handler or pay, **kw)


def ledger(store: MemoryStore, key: str) -> Any:
    entry = store.ledger_get("acme", key)
    assert entry is not None
    return entry


async def test_write_gets_an_intent_key_that_is_not_the_call_id() -> None:
    notes = Counter()
    h = make([calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")], [write_tool(notes)])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    ((_, key, call_id),) = notes.calls
    assert key and key.startswith("ik_") and key != call_id and "call_1" not in key
    entry = ledger(h.store, key)
    assert entry.status is LedgerStatus.SUCCEEDED and entry.attempts == 1
    assert entry.result == last_outputs(h.model)["call_1"]


async def test_same_intent_with_a_new_call_id_replays_without_running() -> None:
    notes = Counter()
    script = [
        calls("resp_1", fc("call_1", "set_note", A1)),
        calls("resp_2", fc("call_2", "set_note", A1)),
        final("resp_3"),
    ]
    h = make(script, [write_tool(notes)])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert notes.n == 1
    first = outputs(h.model.requests[1])[0]["result"]
    second = last_outputs(h.model)["call_2"]
    assert first == second == {"ok": True, "data": {"noted": "A1"}}


async def test_replay_within_one_turn() -> None:
    notes = Counter()
    body = calls("resp_1", fc("call_1", "set_note", A1), fc("call_2", "set_note", A1))
    h = make([body, final("resp_2")], [write_tool(notes)])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert notes.n == 1
    res = last_outputs(h.model)
    assert res["call_1"] == res["call_2"]


async def test_replay_is_not_blocked_by_the_identical_call_guard() -> None:
    """D13 order: the ledger answers first, so a replay is not a run and not NO_PROGRESS."""
    notes = Counter()
    script = [*(calls(f"resp_{i}", fc(f"call_{i}", "set_note", A1)) for i in range(1, 4)), final("f")]
    h = make(script, [write_tool(notes)], budgets=cb.Budgets(max_identical_calls=1, max_no_progress_turns=5))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert notes.n == 1
    assert all(o["result"]["ok"] for o in outputs(h.model.requests[-1]))


async def test_custom_intent_key_is_shared_across_operations_of_a_tenant() -> None:
    notes = Counter()

    def intent(args: OrderArgs, ctx: cb.CallContext) -> str:
        return f"note:{args.order_id}"

    spec = write_tool(notes, intent_key=intent)
    script = [calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")]
    h = make(script, [spec])
    assert (await h.run(operation_id="op_1")).state == cb.State.COMPLETED
    assert (await h.run(operation_id="op_2")).state == cb.State.COMPLETED
    assert notes.n == 1
    assert notes.calls[0][1] == "ik_note:A1"
    # another tenant has its own ledger
    assert (await h.run(operation_id="op_3", tenant="globex")).state == cb.State.COMPLETED
    assert notes.n == 2


async def test_default_intent_keys_differ_between_operations() -> None:
    notes = Counter()
    h = make([calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")], [write_tool(notes)])
    await h.run(operation_id="op_1")
    await h.run(operation_id="op_2")
    assert notes.n == 2 and notes.calls[0][1] != notes.calls[1][1]


async def test_intent_key_hook_that_fails_rejects_the_call() -> None:
    notes = Counter()

    def broken(args: Any, ctx: cb.CallContext) -> str:
        raise RuntimeError("no")

    h = make(
        [calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")],
        [write_tool(notes, intent_key=broken)],
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["call_1"]) == "HANDLER_ERROR"
    assert notes.n == 0


async def test_ledger_started_is_committed_before_the_handler_runs() -> None:
    """D18: the STARTED entry is durable before the effect."""
    seen: list[Any] = []
    store = MemoryStore()

    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        assert ctx.idempotency_key is not None
        seen.append(store.ledger_get(ctx.tenant, ctx.idempotency_key))
        stored = store.load_operation(ctx.operation_id)
        assert stored is not None
        seen.append(stored.head["state"])
        return {}

    h = make(
        [calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")],
        [write_tool(handler=handler)],
        store=store,
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    entry, state = seen
    assert entry is not None and entry.status is LedgerStatus.STARTED
    assert state == "EXECUTING"


# ---- timeouts and reconcile (D16) -----------------------------------------------------------------


def slow_pay(payments: Payments, seconds: float, *, effect_first: bool = True) -> Any:
    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        if effect_first:
            result = payments.apply(ctx.idempotency_key, args.order_id)
            time.sleep(seconds)
            return result
        time.sleep(seconds)
        return {"late": True}

    return handler


async def test_timed_out_write_found_by_reconcile() -> None:
    payments = Payments()
    reconciled: list[str] = []

    def reconcile(key: str, ctx: cb.CallContext) -> Any:
        reconciled.append(key)
        found = payments.find(key)
        if found is None:
            raise cb.NotApplied("no such payment")
        return found

    spec = pay_tool(payments, handler=slow_pay(payments, 0.15), timeout_ms=30, reconcile=reconcile)
    h = make([calls("resp_1", fc("call_1", "pay", A1)), final("resp_2", "Paid.")], [spec], grace_s=2.0)
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert len(payments.rows) == 1  # exactly one effect
    key = payments.rows[0]["key"]
    assert reconciled == [key]
    assert last_outputs(h.model)["call_1"] == {"ok": True, "data": {"payment_id": "pay_1", "order_id": "A1"}}
    entry = ledger(h.store, key)
    assert entry.status is LedgerStatus.SUCCEEDED
    stored = h.store.load_operation(out.operation_id)
    assert stored is not None
    envs = [e for row in stored.journal if row.kind == "results" for e in row.data["envelopes"]]
    assert envs[0]["protected_audit"]["effect"] == "reconciled"
    assert envs[0]["protected_audit"]["producer"] == "reconcile"


async def test_reconcile_result_is_replayed_later() -> None:
    payments = Payments()
    spec = pay_tool(
        payments,
        handler=slow_pay(payments, 0.15),
        timeout_ms=30,
        reconcile=lambda key, ctx: payments.find(key),
    )
    script = [calls("resp_1", fc("call_1", "pay", A1)), calls("resp_2", fc("call_2", "pay", A1)), final("f")]
    h = make(script, [spec], grace_s=2.0)
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert len(payments.rows) == 1
    assert last_outputs(h.model)["call_2"]["ok"] is True


async def test_reconcile_not_applied_allows_a_later_run() -> None:
    payments = Payments()
    attempts: list[int] = []

    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            time.sleep(0.6)  # times out; the payment never happened
            return {"late": True}
        return payments.apply(ctx.idempotency_key, args.order_id)

    def reconcile(key: str, ctx: cb.CallContext) -> Any:
        found = payments.find(key)
        if found is None:
            raise cb.NotApplied("no such payment")
        return found

    # 150 ms, not less: the second attempt must finish within it even on a loaded machine
    spec = pay_tool(payments, handler=handler, timeout_ms=150, reconcile=reconcile)
    script = [calls("resp_1", fc("call_1", "pay", A1)), calls("resp_2", fc("call_2", "pay", A1)), final("f")]
    h = make(script, [spec], grace_s=2.0)
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    first = outputs(h.model.requests[1])[0]["result"]
    assert error_code(first) == "TIMEOUT"
    assert "not applied" in first["error"]["message"]
    assert attempts == [1, 2]  # the same intent ran again
    assert len(payments.rows) == 1
    assert last_outputs(h.model)["call_2"]["ok"] is True
    entry = ledger(h.store, payments.rows[0]["key"])
    assert entry.status is LedgerStatus.SUCCEEDED and entry.attempts == 2


async def test_a_failed_write_reconciled_as_not_applied_is_reported_as_a_handler_error() -> None:
    """D16: the handler raised (no timeout); reconcile says nothing happened. The model is told
    HANDLER_ERROR, not TIMEOUT: the code says what happened to the attempt."""

    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        raise RuntimeError("payments API returned 502")

    def reconcile(key: str, ctx: cb.CallContext) -> Any:
        raise cb.NotApplied("no such payment")

    spec = pay_tool(Payments(), handler=handler, reconcile=reconcile)
    h = make([calls("resp_1", fc("call_1", "pay", A1)), final("resp_2")], [spec])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    result = last_outputs(h.model)["call_1"]
    assert error_code(result) == "HANDLER_ERROR" and "not applied" in result["error"]["message"]


@pytest.mark.parametrize("reconcile", [None, "lookup_error", "crash"])
async def test_unknown_outcome_stops_with_an_escalation_naming_the_key(reconcile: str | None) -> None:
    payments = Payments()

    def rec(key: str, ctx: cb.CallContext) -> Any:
        if reconcile == "lookup_error":
            raise LookupError("payments API cannot tell")
        raise RuntimeError("reconcile broke")

    spec = pay_tool(
        payments,
        handler=slow_pay(payments, 0.15),
        timeout_ms=30,
        reconcile=None if reconcile is None else rec,
    )
    h = make([calls("resp_1", fc("call_1", "pay", A1)), final("resp_2")], [spec], grace_s=2.0)
    out = await h.run()
    assert out.state == cb.State.STOPPED and out.reason == "OUTCOME_UNKNOWN"
    assert out.escalation is not None
    key = payments.rows[0]["key"]
    assert out.escalation["idempotency_keys"] == [key]
    assert out.escalation["call_ids"] == ["call_1"]
    assert ledger(h.store, key).status is LedgerStatus.UNKNOWN
    assert len(h.model.requests) == 1  # the model is not asked again with an unknown effect
    assert len(payments.rows) == 1


async def test_write_handler_exception_is_an_unknown_outcome() -> None:
    def crash(args: OrderArgs, ctx: cb.CallContext) -> Any:
        raise ConnectionError("socket closed after the request was sent")

    h = make(
        [calls("resp_1", fc("call_1", "pay", A1)), final("resp_2")], [pay_tool(Payments(), handler=crash)]
    )
    out = await h.run()
    assert out.state == cb.State.STOPPED and out.reason == "OUTCOME_UNKNOWN"


async def test_tool_error_from_a_write_is_still_unknown() -> None:
    def crash(args: OrderArgs, ctx: cb.CallContext) -> Any:
        raise cb.ToolError("gateway said 502")

    h = make(
        [calls("resp_1", fc("call_1", "pay", A1)), final("resp_2")], [pay_tool(Payments(), handler=crash)]
    )
    out = await h.run()
    assert out.state == cb.State.STOPPED and out.reason == "OUTCOME_UNKNOWN"


async def test_reconcile_is_not_called_while_the_handler_thread_still_runs() -> None:
    payments = Payments()
    reconciled: list[str] = []

    def rec(key: str, ctx: cb.CallContext) -> Any:
        reconciled.append(key)
        return payments.find(key)

    spec = pay_tool(
        payments, handler=slow_pay(payments, 0.3, effect_first=False), timeout_ms=20, reconcile=rec
    )
    h = make([calls("resp_1", fc("call_1", "pay", A1)), final("resp_2")], [spec], grace_s=0.02)
    out = await h.run()
    assert out.state == cb.State.STOPPED and out.reason == "OUTCOME_UNKNOWN"
    assert reconciled == []


async def test_async_write_timeout_is_reconciled() -> None:
    payments = Payments()

    async def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        payments.apply(ctx.idempotency_key, args.order_id)
        await asyncio.sleep(5)
        return {}

    spec = pay_tool(payments, handler=handler, timeout_ms=30, reconcile=lambda key, ctx: payments.find(key))
    h = make([calls("resp_1", fc("call_1", "pay", A1)), final("resp_2")], [spec])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert last_outputs(h.model)["call_1"]["data"] == {"payment_id": "pay_1", "order_id": "A1"}


async def test_async_reconcile_hook() -> None:
    payments = Payments()

    async def rec(key: str, ctx: cb.CallContext) -> Any:
        return payments.find(key)

    spec = pay_tool(payments, handler=slow_pay(payments, 0.15), timeout_ms=30, reconcile=rec)
    h = make([calls("resp_1", fc("call_1", "pay", A1)), final("resp_2")], [spec], grace_s=2.0)
    out = await h.run()
    assert out.state == cb.State.COMPLETED and len(payments.rows) == 1


async def test_handler_not_applied_leaves_the_ledger_failed_and_may_run_again() -> None:
    payments = Payments()
    tries: list[int] = []

    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        tries.append(1)
        if len(tries) == 1:
            raise cb.NotApplied("card declined, nothing charged")
        return payments.apply(ctx.idempotency_key, args.order_id)

    script = [calls("resp_1", fc("call_1", "pay", A1)), calls("resp_2", fc("call_2", "pay", A1)), final("f")]
    h = make(script, [pay_tool(payments, handler=handler)])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    first = outputs(h.model.requests[1])[0]["result"]
    assert error_code(first) == "HANDLER_ERROR"
    assert first["error"]["message"] == "card declined, nothing charged"
    assert len(tries) == 2 and len(payments.rows) == 1
    key = payments.rows[0]["key"]
    assert ledger(h.store, key).status is LedgerStatus.SUCCEEDED


async def test_not_applied_ledger_entry_between_turns() -> None:
    store = MemoryStore()
    keys: list[str] = []

    def handler(args: OrderArgs, ctx: cb.CallContext) -> Any:
        assert ctx.idempotency_key is not None
        keys.append(ctx.idempotency_key)
        raise cb.NotApplied("no")

    h = make(
        [calls("resp_1", fc("call_1", "pay", A1)), final("resp_2")],
        [pay_tool(Payments(), handler=handler)],
        store=store,
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert ledger(store, keys[0]).status is LedgerStatus.FAILED


async def test_a_write_after_an_unknown_one_does_not_run() -> None:
    """D16: once a write's outcome is unknown, nothing else of the turn runs."""
    payments = Payments()
    later = Counter()
    spec = pay_tool(payments, handler=slow_pay(payments, 0.15), timeout_ms=30)
    body = calls("resp_1", fc("call_1", "pay", A1), fc("call_2", "set_note", {"order_id": "B2"}))
    h = make([body, final("resp_2")], [spec, write_tool(later)], grace_s=2.0)
    out = await h.run()
    assert out.state == cb.State.STOPPED and out.reason == "OUTCOME_UNKNOWN"
    assert later.n == 0


async def test_refund_intent_key_from_amount_and_order() -> None:
    """A business key: same order and amount with different wording is the same refund."""
    refunds = Counter()

    def refund(args: RefundArgs, ctx: cb.CallContext) -> dict[str, Any]:
        refunds.calls.append(ctx.idempotency_key)
        return {"refunded": args.amount}

    spec = cb.ToolSpec(
        name="refund",
        description="r",
        params=RefundArgs,
        handler=refund,
        schema_version="refund-v1",
        risk="irreversible",
        requires_approval=False,
        intent_key=lambda a, ctx: f"refund:{a.order_id}:{a.amount:.2f}",
    )
    script = [
        calls("resp_1", fc("call_1", "refund", raw='{"order_id": "A1", "amount": 40.0}')),
        calls("resp_2", fc("call_2", "refund", raw='{"amount": 40, "order_id": "A1"}')),
        final("f"),
    ]
    h = make(script, [spec])
    out = await h.run()
    # strict JSON mode accepts the integer 40 for a float field, so both name the same refund
    assert out.state == cb.State.COMPLETED
    assert refunds.calls == ["ik_refund:A1:40.00"]


# ---- an intent whose earlier outcome is unknown (D16, D21) ----------------------------------------


def _shared_intent(args: OrderArgs, ctx: cb.CallContext) -> str:
    return f"pay:{args.order_id}"


async def test_unknown_intent_proposed_again_is_reconciled_not_rerun() -> None:
    payments = Payments()
    ran: list[str] = []
    can_tell = [False]

    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.order_id)
        result = payments.apply(ctx.idempotency_key, args.order_id)
        time.sleep(0.1)
        return result

    def reconcile(key: str, ctx: cb.CallContext) -> Any:
        if not can_tell[0]:
            raise LookupError("the payments API is down")
        return payments.find(key)

    spec = pay_tool(payments, handler=handler, timeout_ms=20, reconcile=reconcile, intent_key=_shared_intent)
    h = make([calls("resp_1", fc("call_1", "pay", A1)), final("resp_2")], [spec], grace_s=2.0)
    first = await h.run(operation_id="op_1")
    assert first.state == cb.State.STOPPED and first.reason == "OUTCOME_UNKNOWN"
    assert ledger(h.store, "ik_pay:A1").status is LedgerStatus.UNKNOWN

    can_tell[0] = True  # later, the downstream system can answer
    second = await h.run(operation_id="op_2")
    assert second.state == cb.State.COMPLETED
    assert ran == ["A1"] and len(payments.rows) == 1  # never re-run blindly
    assert last_outputs(h.model)["call_1"] == {"ok": True, "data": {"payment_id": "pay_1", "order_id": "A1"}}
    assert ledger(h.store, "ik_pay:A1").status is LedgerStatus.SUCCEEDED


async def test_unknown_intent_reconciled_as_not_applied_runs_as_a_new_attempt() -> None:
    payments = Payments()
    attempts: list[int] = []
    can_tell = [False]

    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        attempts.append(ctx.attempt)
        if len(attempts) == 1:
            time.sleep(0.1)  # times out before doing anything
            return {}
        return payments.apply(ctx.idempotency_key, args.order_id)

    def reconcile(key: str, ctx: cb.CallContext) -> Any:
        if not can_tell[0]:
            raise LookupError("cannot tell yet")
        found = payments.find(key)
        if found is None:
            raise cb.NotApplied("no payment with this key")
        return found

    spec = pay_tool(payments, handler=handler, timeout_ms=20, reconcile=reconcile, intent_key=_shared_intent)
    h = make([calls("resp_1", fc("call_1", "pay", A1)), final("resp_2")], [spec], grace_s=2.0)
    assert (await h.run(operation_id="op_1")).reason == "OUTCOME_UNKNOWN"
    can_tell[0] = True
    out = await h.run(operation_id="op_2")
    assert out.state == cb.State.COMPLETED
    assert attempts == [1, 2]  # the handler is told which attempt this is
    assert len(payments.rows) == 1
    entry = ledger(h.store, "ik_pay:A1")
    assert entry.status is LedgerStatus.SUCCEEDED and entry.attempts == 2


def _started_by(store: MemoryStore, owner: str, state: str) -> None:
    """What another operation left behind: a STARTED entry for the intent, its head in ``state``."""
    head = {"operation_id": owner, "tenant": "acme", "state": state}
    store.commit(Commit(owner, head, create=True))
    store.commit(
        Commit(
            owner,
            head,
            ledger=[LedgerEntry("ik_pay:A1", "acme", "pay", owner, LedgerStatus.STARTED, None, 1)],
        )
    )


async def test_started_entry_of_an_ended_operation_is_reconciled() -> None:
    """A STARTED ledger row whose operation ended without settling it is never re-run blindly:
    nobody is inside its handler any more, so the tool's reconcile finds out what happened."""
    payments = Payments()
    store = MemoryStore()
    _started_by(store, "op_dead", "STOPPED")
    payments.apply("ik_pay:A1", "A1")  # the payment that operation made
    ran: list[str] = []

    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.order_id)
        return payments.apply(ctx.idempotency_key, args.order_id)

    spec = pay_tool(
        payments, handler=handler, intent_key=_shared_intent, reconcile=lambda key, ctx: payments.find(key)
    )
    h = make([calls("resp_1", fc("call_1", "pay", A1)), final("resp_2")], [spec], store=store)
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert ran == [] and len(payments.rows) == 1
    assert last_outputs(h.model)["call_1"]["ok"] is True


@pytest.mark.parametrize("owner_state", ["EXECUTING", "WAITING_APPROVAL", "MODEL_REQUESTED"])
async def test_started_entry_of_a_running_operation_is_left_alone(owner_state: str) -> None:
    """D16, D21: another operation that has not ended may be inside its handler right now; its
    reconcile would find nothing yet and the effect would run twice. The call is neither run nor
    reconciled; the model gets IN_PROGRESS and the ledger keeps the owner's entry."""
    store = MemoryStore()
    _started_by(store, "op_busy", owner_state)
    ran: list[str] = []
    looked: list[str] = []

    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.order_id)
        return {"paid": args.order_id}

    def reconcile(key: str, ctx: cb.CallContext) -> Any:
        looked.append(key)
        raise cb.NotApplied("nothing yet")

    spec = pay_tool(Payments(), handler=handler, intent_key=_shared_intent, reconcile=reconcile)
    h = make([calls("resp_1", fc("call_1", "pay", A1)), final("resp_2")], [spec], store=store)
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert ran == [] and looked == []
    assert error_code(last_outputs(h.model)["call_1"]) == "IN_PROGRESS"
    entry = ledger(store, "ik_pay:A1")
    assert entry.status is LedgerStatus.STARTED and entry.operation_id == "op_busy"


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_two_operations_with_one_intent_at_once_apply_it_once(kind: str, tmp_path: Path) -> None:
    """D16, D21, D18: operation B proposes the intent while operation A is inside its handler. B
    must not reconcile (nothing is found yet) and then run it again: one payment, B's model told
    IN_PROGRESS, and a later operation replays A's outcome."""
    store: Any = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "cb.db")
    payments = Payments()
    inside, release = asyncio.Event(), asyncio.Event()

    async def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        inside.set()
        await release.wait()
        return payments.apply(ctx.idempotency_key, args.order_id)

    def reconcile(key: str, ctx: cb.CallContext) -> Any:
        found = payments.find(key)
        if found is None:
            raise cb.NotApplied("no payment with this key")
        return found

    spec = pay_tool(payments, handler=handler, intent_key=_shared_intent, reconcile=reconcile)

    def script() -> list[Any]:
        return [calls("resp_1", fc("call_1", "pay", A1)), final("resp_2")]

    a, b, c = (make(script(), [spec], store=store) for _ in range(3))

    async def while_a_runs() -> cb.Outcome:
        await inside.wait()
        try:
            return await b.run(operation_id="op_b")
        finally:
            release.set()

    out_a, out_b = await asyncio.gather(a.run(operation_id="op_a"), while_a_runs())
    assert out_a.state == out_b.state == cb.State.COMPLETED
    assert len(payments.rows) == 1
    assert last_outputs(a.model)["call_1"]["ok"] is True
    assert error_code(last_outputs(b.model)["call_1"]) == "IN_PROGRESS"
    out_c = await c.run(operation_id="op_c")
    assert out_c.state == cb.State.COMPLETED and len(payments.rows) == 1
    assert last_outputs(c.model)["call_1"] == last_outputs(a.model)["call_1"]  # replayed
    if kind == "sqlite":
        store.close()


async def test_started_entry_without_reconcile_stops() -> None:
    store = MemoryStore()
    _started_by(store, "op_dead", "FAILED")
    ran = Counter()
    spec = write_tool(ran, name="pay", intent_key=_shared_intent)
    h = make([calls("resp_1", fc("call_1", "pay", A1)), final("resp_2")], [spec], store=store)
    out = await h.run()
    assert out.state == cb.State.STOPPED and out.reason == "OUTCOME_UNKNOWN"
    assert out.escalation is not None and out.escalation["idempotency_keys"] == ["ik_pay:A1"]
    assert ran.n == 0


async def test_audit_verify_checks_the_ledger_result_of_the_recording_and_the_replaying_operation() -> None:
    """D16/D20: a SUCCEEDED ledger entry is what every later call of the same intent replays. Verify
    accepts an honest replay across operations and names an edited entry in both operations."""
    from dataclasses import replace

    from callbound.runtime.verify import verify_store

    notes = Counter()

    def intent(args: OrderArgs, ctx: cb.CallContext) -> str:
        return f"note:{args.order_id}"

    script = [calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")]
    h = make(script, [write_tool(notes, intent_key=intent)])
    assert (await h.run(operation_id="op_1")).state == cb.State.COMPLETED
    assert (await h.run(operation_id="op_2")).state == cb.State.COMPLETED  # a replay
    assert notes.n == 1
    assert verify_store(h.store) == []
    (key,) = [k for (_, k) in h.store._ledger]
    entry = h.store._ledger[("acme", key)]
    h.store._ledger[("acme", key)] = replace(entry, result={"ok": True, "data": {"noted": "B9"}})
    problems = verify_store(h.store)
    assert {(p.operation_id, p.where) for p in problems} == {
        ("op_1", f"ledger {key}"),
        ("op_2", f"ledger {key}"),
    }
