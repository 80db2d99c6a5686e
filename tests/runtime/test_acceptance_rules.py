"""Rules an acceptance pass (scenarios written from the issues, black-box) found broken, one test each.

Each test names the rule it pins: an issue section or a DECISIONS.md number.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, computed_field

import callbound as cb
from callbound.core.ids import SequentialIds
from callbound.stores.memory import MemoryStore

from .helpers import (
    Counter,
    OrderArgs,
    calls,
    error_code,
    fc,
    final,
    get_order_tool,
    last_outputs,
    make,
    refund_tool,
    response,
    stream_events,
    write_tool,
)

A1 = {"order_id": "A1"}
REFUND = {"order_id": "A1", "amount": 40.0}


# ---- D4: nothing a handler returns escapes the loop ------------------------------------------------


class _Opaque:
    pass


class _Unserialisable(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    x: _Opaque


class _RaisingField(BaseModel):
    a: int = 1

    @computed_field  # type: ignore[prop-decorator]
    @property
    def b(self) -> int:
        raise RuntimeError("secret inside a computed field")


@pytest.mark.parametrize("risk", ["read", "write"])
@pytest.mark.parametrize("make_value", [lambda: _Unserialisable(x=_Opaque()), lambda: _RaisingField()])
async def test_d4_a_returned_model_that_cannot_be_dumped_is_a_handler_error(
    risk: str, make_value: Any
) -> None:
    def handler(args: OrderArgs, ctx: cb.CallContext) -> Any:
        return make_value()

    spec = cb.ToolSpec(
        name="t",
        description="t",
        params=OrderArgs,
        handler=handler,
        schema_version="t1",
        risk=risk,  # type: ignore[arg-type]
    )
    h = make([calls("resp_1", fc("call_1", "t", A1)), final("resp_2")], [spec])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    result = last_outputs(h.model)["call_1"]
    assert error_code(result) == "HANDLER_ERROR"
    assert ("effect was applied" in result["error"]["message"]) is (risk == "write")
    assert "secret" not in str(h.model.requests)


# ---- D5: a number the handler would see as another number never runs ------------------------------


async def test_d5_an_integral_float_beyond_2_53_is_invalid_arguments() -> None:
    class N(BaseModel):
        n: int

    seen: list[int] = []
    spec = cb.ToolSpec(
        name="t",
        description="t",
        params=N,
        handler=lambda args, ctx: seen.append(args.n) or {"ok": 1},
        schema_version="t1",
    )
    h = make([calls("resp_1", fc("call_1", "t", raw='{"n": 9007199254740993.0}')), final("resp_2")], [spec])
    out = await h.run()
    assert out.state == cb.State.COMPLETED and seen == []
    assert error_code(last_outputs(h.model)["call_1"]) == "INVALID_ARGUMENTS"


# ---- D13 (1): the ledger comes before asking a human -------------------------------------------------


async def test_d13_an_irreversible_intent_already_carried_out_replays_without_a_new_approval() -> None:
    refunds = Counter()
    store = MemoryStore()
    intent = {"intent_key": lambda args, ctx: f"refund-{args.order_id}"}
    first = make(
        [calls("resp_1", fc("call_1", "refund", REFUND)), final("resp_2")],
        [refund_tool(refunds, **intent)],
        store=store,
    )
    out = await first.run()
    (pending,) = out.pending_approvals
    out = await first.runner.resume(
        out.operation_id, [cb.Decision.approve(pending.approval_id, approver="alice")]
    )
    assert out.state == cb.State.COMPLETED and refunds.n == 1
    second = make(
        [calls("resp_3", fc("call_9", "refund", REFUND)), final("resp_4")],
        [refund_tool(refunds, **intent)],
        store=store,
        ids=SequentialIds(1000),
    )
    out = await second.run()
    assert out.state == cb.State.COMPLETED  # no second pause, no human asked again
    assert refunds.n == 1
    assert last_outputs(second.model)["call_9"]["ok"] is True  # the recorded result, replayed


# ---- D13 (3): a stop needs a repeat of the call the model was warned about ---------------------------


async def test_d13_a_first_no_progress_of_another_call_does_not_stop_the_operation() -> None:
    reads = Counter()
    b1 = {"order_id": "B1"}
    script = [
        calls("resp_1", fc("c1", "get_order", A1)),
        calls("resp_2", fc("c2", "get_order", A1)),  # refused: NO_PROGRESS (a warning)
        calls("resp_3", fc("c3", "get_order", {"order_id": "C1"})),
        calls("resp_4", fc("c4", "get_order", b1)),
        calls("resp_5", fc("c5", "get_order", b1)),  # B1 refused for the first time: a warning too
        final("resp_6"),
    ]
    h = make(script, [get_order_tool(reads)], budgets=cb.Budgets(max_identical_calls=1))
    out = await h.run()
    assert out.state == cb.State.COMPLETED, out.reason
    assert reads.calls == ["A1", "C1", "B1"]


async def test_d13_repeating_the_warned_call_stops() -> None:
    script = [
        calls("resp_1", fc("c1", "get_order", A1)),
        calls("resp_2", fc("c2", "get_order", A1)),
        calls("resp_3", fc("c3", "get_order", A1)),
        final("resp_4"),
    ]
    h = make(script, [get_order_tool()], budgets=cb.Budgets(max_identical_calls=1))
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "NO_PROGRESS")


# ---- D3, D17: no approval stays pending on an ended operation ----------------------------------------


async def test_d17_a_mixed_turn_stopped_by_an_unknown_write_withdraws_the_waiting_approval() -> None:
    def broken(args: OrderArgs, ctx: cb.CallContext) -> Any:
        raise RuntimeError("downstream timeout")

    h = make(
        [calls("resp_1", fc("call_1", "refund", REFUND), fc("call_2", "set_note", A1)), final("resp_2")],
        [refund_tool(), write_tool(handler=broken)],
    )
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    assert h.store.list_approvals(status="pending") == []
    (withdrawn,) = h.store.list_approvals(status=None)
    assert withdrawn.status == "withdrawn"


# ---- D27: missing usage is null, never a cost of 0 ---------------------------------------------------


async def test_d27_a_turn_without_usage_has_no_cost() -> None:
    body = final("resp_1")
    del body["usage"]
    h = make([body], [get_order_tool()], prices={"gpt-test": cb.Price(Decimal(1), Decimal(2))})
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert out.usage.cost is None and out.usage.input_tokens is None


@pytest.mark.parametrize(("counts", "known"), [({"input_tokens": 1_000_000}, (1_000_000, None)),
                                               ({"output_tokens": 1_000_000}, (None, 1_000_000))])  # fmt: skip
async def test_d27_half_the_usage_is_no_cost(
    counts: dict[str, int], known: tuple[int | None, int | None]
) -> None:
    """A price applied to one count alone reported a part as the whole (Decimal 2 for a turn whose
    output was never told): the cost is unknown as the missing count is, and a later priced turn's
    cost is the only one summed."""
    body = final("resp_1")
    body["usage"] = counts
    h = make([body], [get_order_tool()], prices={"gpt-test": cb.Price(Decimal(2), Decimal(8))})
    out = await h.run()
    assert (out.usage.input_tokens, out.usage.output_tokens, out.usage.cost) == (*known, None)
    assert out.spent["cost"] in (0, "0", None)


# ---- D4: observers and misuse ----------------------------------------------------------------------


async def test_d4_an_observer_that_raises_does_not_stop_the_loop() -> None:
    def boom(*_: Any) -> None:
        raise RuntimeError("observer bug")

    notes = Counter()
    h = make(
        [stream_events(calls("resp_1", fc("call_1", "set_note", A1))), final("resp_2")],
        [write_tool(notes)],
        on_transition=boom,
        on_progress=boom,
        settings={"stream": True},
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED and notes.n == 1


async def test_d4_reusing_an_operation_id_is_a_usage_error() -> None:
    h = make([final("resp_1"), final("resp_2")], [get_order_tool()])
    await h.run(operation_id="op_fixed")
    with pytest.raises(cb.UsageError) as caught:
        await h.run(operation_id="op_fixed")
    assert isinstance(caught.value, cb.OperationExists) and isinstance(caught.value, cb.StoreError)


@pytest.mark.parametrize("hook", ["requires_approval", "authorize", "intent_key", "redact"])
def test_async_policy_hooks_of_a_tool_are_refused_when_defined(hook: str) -> None:
    async def no(*_: Any) -> bool:
        return False

    with pytest.raises(cb.UsageError, match=hook):
        refund_tool(**{hook: no})


@pytest.mark.parametrize("hook", ["authorize", "approver_allowed"])
def test_async_policy_hooks_are_refused_when_defined(hook: str) -> None:
    async def no(*_: Any) -> bool:
        return False

    with pytest.raises(cb.UsageError, match=hook):
        cb.Policy(**{hook: no})


async def test_a_sync_authorize_hook_handing_back_a_coroutine_denies() -> None:
    async def no(*_: Any) -> bool:
        return False

    notes = Counter()
    h = make(
        [calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")],
        [write_tool(notes, authorize=lambda args, ctx: no())],
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED and notes.n == 0
    assert error_code(last_outputs(h.model)["call_1"]) == "DENIED"


# ---- issue 2 §2: an unfinished call never runs -----------------------------------------------------


@pytest.mark.parametrize("status", ["incomplete", "in_progress"])
async def test_a_responses_call_item_that_says_it_is_unfinished_never_runs(status: str) -> None:
    notes = Counter()
    h = make([response("resp_1", [{**fc("call_1", "set_note", A1), "status": status}])], [write_tool(notes)])
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.INCOMPLETE, "CALL_INCOMPLETE")
    assert notes.n == 0


# ---- D13: two operations claiming one intent at the same moment ------------------------------------


async def test_d13_an_intent_claimed_by_another_operation_meanwhile_is_decided_again() -> None:
    """Operation 2 reads the ledger before operation 1's entry lands (simulated: its first read sees
    nothing). Its STARTED claim is refused by the store (IntentTaken); it reloads, decides again and
    replays operation 1's result instead of paying a second time."""
    notes = Counter()
    store = MemoryStore()
    intent = {"intent_key": lambda args, ctx: f"note-{args.order_id}"}
    first = make(
        [calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")],
        [write_tool(notes, **intent)],
        store=store,
    )
    assert (await first.run()).state == cb.State.COMPLETED
    real_get = store.ledger_get
    blind = {"reads": 0}

    def stale_read(tenant: str, key: str) -> Any:
        blind["reads"] += 1
        return None if blind["reads"] == 1 else real_get(tenant, key)

    store.ledger_get = stale_read  # type: ignore[method-assign]
    second = make(
        [calls("resp_3", fc("call_9", "set_note", A1)), final("resp_4")],
        [write_tool(notes, **intent)],
        store=store,
        ids=SequentialIds(1000),
    )
    out = await second.run()
    assert out.state == cb.State.COMPLETED
    assert notes.n == 1  # never twice
    assert last_outputs(second.model)["call_9"] == {"ok": True, "data": {"noted": "A1"}}


# ---- D16: a handler still alive after its timeout holds its intent against every other operation ---


async def test_d16_an_intent_whose_handler_is_still_running_is_in_progress_for_other_operations() -> None:
    import threading

    release = threading.Event()
    paid: list[str] = []

    def slow_pay(args: OrderArgs, ctx: cb.CallContext) -> Any:
        release.wait(5)
        paid.append(ctx.operation_id)
        return {"paid": args.order_id}

    store = MemoryStore()
    intent = {"intent_key": lambda args, ctx: f"pay-{args.order_id}", "timeout_ms": 50}
    first = make(
        [calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")],
        [write_tool(handler=slow_pay, **intent)],
        store=store,
        grace_s=0.05,
    )
    out = await first.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    entry = store.ledger_get("acme", "ik_pay-A1")
    assert entry is not None and entry.handler_alive
    second = make(
        [calls("resp_3", fc("call_9", "set_note", A1)), final("resp_4")],
        [write_tool(handler=slow_pay, **intent)],
        store=store,
        ids=SequentialIds(1000),
    )
    out = await second.run()
    release.set()
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(second.model)["call_9"]) == "IN_PROGRESS"
    for _ in range(100):
        if paid:
            break
        await asyncio.sleep(0.01)
    assert len(paid) == 1  # only the first operation's late thread paid


# ---- D16, D14: reconcile runs like a handler, under the tool's timeout ------------------------------


async def test_d16_a_reconcile_that_hangs_is_bounded_by_the_tool_timeout() -> None:
    import threading

    hang = threading.Event()

    def broken(args: OrderArgs, ctx: cb.CallContext) -> Any:
        raise ConnectionError("reset")

    def lookup(key: str, ctx: cb.CallContext) -> Any:
        hang.wait(5)
        return {"found": True}

    h = make(
        [calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")],
        [write_tool(handler=broken, reconcile=lookup, timeout_ms=50)],
        grace_s=0.05,
    )
    started = asyncio.get_running_loop().time()
    out = await h.run()
    hang.set()
    assert (out.state, out.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    assert asyncio.get_running_loop().time() - started < 3


# ---- D13: two tools whose intent keys collide ------------------------------------------------------


async def test_d13_an_intent_key_another_tool_holds_is_refused_not_replayed() -> None:
    notes, tags = Counter(), Counter()
    same = {"intent_key": lambda args, ctx: f"order-{args.order_id}"}
    h = make(
        [
            calls("resp_1", fc("call_1", "set_note", A1)),
            calls("resp_2", fc("call_2", "set_tag", A1)),
            final("resp_3"),
        ],
        [write_tool(notes, **same), write_tool(tags, name="set_tag", schema_version="tag-v1", **same)],
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED  # not FAILED(INTEGRITY)
    assert (notes.n, tags.n) == (1, 0)
    result = last_outputs(h.model)["call_2"]
    assert error_code(result) == "HANDLER_ERROR" and "another tool" in result["error"]["message"]


# ---- issue 2 §6, D17: approvers ---------------------------------------------------------------------


async def test_d17_resume_re_checks_the_approver_under_the_resuming_policy() -> None:
    refunds = Counter()
    h = make([calls("resp_1", fc("call_1", "refund", REFUND)), final("resp_2")], [refund_tool(refunds)])
    out = await h.run()
    (pending,) = out.pending_approvals
    h.runner.decide(cb.Decision.approve(pending.approval_id, approver="mallory"), tenant="acme")
    strict = cb.Policy(approver_allowed=lambda approver, approval: approver == "alice")
    again = make(h.model.responses, [refund_tool(refunds)], store=h.store, clock=h.clock, policy=strict)
    out = await again.runner.resume(out.operation_id)
    assert out.state == cb.State.COMPLETED
    assert refunds.n == 0
    assert error_code(last_outputs(again.model)["call_1"]) == "DENIED"


@pytest.mark.parametrize("answer", ["no: alice is not on the finance team", 1, None])
async def test_d17_only_a_real_true_from_approver_allowed_lets_an_approver_decide(answer: Any) -> None:
    """Fail closed like authorize (D4): a truthy refusal text, or any other non-bool, is a no."""
    refunds = Counter()
    policy = cb.Policy(approver_allowed=lambda approver, approval: answer)
    h = make(
        [calls("resp_1", fc("call_1", "refund", REFUND)), final("resp_2")],
        [refund_tool(refunds)],
        policy=policy,
    )
    out = await h.run()
    (pending,) = out.pending_approvals
    with pytest.raises(cb.ApproverNotAllowed, match="only True allows"):
        h.runner.approve(pending.approval_id, "alice", tenant="acme")
    assert refunds.n == 0


@pytest.mark.parametrize("verdict,approver", [("approve", "  "), ("maybe", "alice"), ("deny", "")])
def test_d17_a_decision_built_directly_is_checked_like_approve_and_deny(verdict: str, approver: str) -> None:
    with pytest.raises(cb.UsageError):
        cb.Decision("apr_1", verdict, approver)  # type: ignore[arg-type]


@pytest.mark.parametrize("padded", [" user-1", "user-1 ", "user-1\n"])
async def test_d17_a_padded_subject_name_is_still_the_subject(padded: str) -> None:
    refunds = Counter()
    h = make([calls("resp_1", fc("call_1", "refund", REFUND)), final("resp_2")], [refund_tool(refunds)])
    out = await h.run()
    (pending,) = out.pending_approvals
    with pytest.raises(cb.UsageError, match="own call"):
        await h.runner.resume(out.operation_id, [cb.Decision.approve(pending.approval_id, approver=padded)])
    assert refunds.n == 0


async def test_d17_a_stop_on_expiry_withdraws_the_expired_approval() -> None:
    h = make(
        [calls("resp_1", fc("call_1", "refund", REFUND)), final("resp_2")],
        [refund_tool()],
        policy=cb.Policy(on_approval_expired="stop"),
    )
    out = await h.run()
    h.clock.advance(2 * 86400)
    out = await h.runner.resume(out.operation_id)
    assert (out.state, out.reason) == (cb.State.STOPPED, "APPROVAL_EXPIRED")
    assert h.store.list_approvals(status="pending") == []


# ---- D20, D28: audit verify on untouched and on tampered stores --------------------------------------


async def test_d20_verify_is_clean_after_a_denial() -> None:
    from callbound.runtime.verify import verify_store

    h = make([calls("resp_1", fc("call_1", "refund", REFUND)), final("resp_2")], [refund_tool()])
    out = await h.run()
    (pending,) = out.pending_approvals
    out = await h.runner.resume(out.operation_id, [cb.Decision.deny(pending.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    assert verify_store(h.store) == []


async def test_d20_verify_names_a_ledger_entry_set_back_from_succeeded() -> None:
    from dataclasses import replace as dc_replace

    from callbound.core.idempotency import LedgerStatus
    from callbound.runtime.verify import verify_store

    notes = Counter()
    h = make([calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")], [write_tool(notes)])
    out = await h.run()
    assert verify_store(h.store) == []
    ((key, entry),) = [(k, e) for (t, k), e in h.store._ledger.items() if t == "acme"]
    forged = dc_replace(entry, status=LedgerStatus.FAILED, result=None)
    h.store._ledger[("acme", key)] = forged  # what an edit of the ledger row does
    problems = verify_store(h.store)
    assert [p.where for p in problems] == [f"ledger {key}"]
    assert out.state == cb.State.COMPLETED and notes.n == 1


# ---- D21: run() and a worker that claims the new operation first ------------------------------------


async def test_d21_run_returns_the_outcome_when_a_worker_claimed_its_new_operation_first() -> None:
    notes = Counter()
    store = MemoryStore()
    script = [calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")]
    worker = make(script, [write_tool(notes)], store=store)
    main = make(script, [write_tool(notes)], store=store)
    real_hold = store.hold
    tasks: list[asyncio.Task[cb.Outcome]] = []

    def hold(operation_id: str, owner: str, lease_s: float, replacing: str | None = None) -> Any:
        if not tasks:  # the worker's poll claims the operation (its lease) the moment it exists
            fence = real_hold(operation_id, "worker-1", lease_s)

            async def work() -> cb.Outcome:  # as Worker does: drive under the claim, then release
                try:
                    return await worker.runner.resume_leased(operation_id, fence=fence)
                finally:
                    store.release(operation_id, fence)

            tasks.append(asyncio.get_running_loop().create_task(work()))
            return None
        return real_hold(operation_id, owner, lease_s, replacing=replacing)

    store.hold = hold  # type: ignore[method-assign]
    out = await main.run()  # was: OperationBusy, and a caller retrying with a new id pays twice
    assert out.state == cb.State.COMPLETED and out.text == "Done."
    assert (await tasks[0]).state == cb.State.COMPLETED
    assert notes.n == 1
