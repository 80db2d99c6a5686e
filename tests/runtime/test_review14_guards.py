"""Review round 14, loop guards (reviewer h11): D13 (2) counts every successful run, a refused ledger
claim keeps the paid turn, identical reads of one turn are decided on completed runs, and every stop's
escalation record names the last turn.

1. A write whose handler raised (or whose process died) after the effect, reconciled as applied, is a
   successful run of the operation (D13 (2), D16): before, _reconcile sealed it without counting it, so
   the same tool and arguments under a new intent key ran again past ``max_identical_calls``.
2. A refused claim (IntentTaken) on a turn of writes only: C1 goes out with the first write's STARTED,
   and the store refused it whole; the drive reloaded the operation back to MODEL_REQUESTED and asked
   the model again, so the answered, paid turn never reached Spent (D12, D27). Now the claim alone is
   taken back and the write decided again; the turn goes out with the next commit (D18 unchanged).
3. Two identical reads in one turn: the second was refused NO_PROGRESS against the first's reservation
   while it ran, and stayed refused when it failed (zero successful runs), its key then counted as told
   for D13 (3). Now it waits for that run and is decided on completed runs only.
4. A stop checked before the next model request (MAX_TURNS here) or a token budget on a tool turn named
   no calls in its escalation record (issue 2 §5), unlike MAX_TOOL_CALLS and NO_PROGRESS.
5. (Reviewer h13) A reconcile's takeover claim went out with the outcome, after its hook had run; refused,
   it reloaded the operation to before the answered turn, as in 2. Now it is committed before the hook
   (D16) and, refused, taken back alone and decided again.

Bodies are synthetic, in the Responses shape of tests/runtime/helpers.py; the race is the stale ledger
read of tests/runtime/test_ledger_claims.py. Repros: /tmp/s14/h11/r_reconcile_count.py,
crash_reconcile_count.py, r_intent_taken.py, r_parallel_identical.py, r_escalation_last_calls.py;
/tmp/s14/h13/r_reconcile_claim_reask.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
import callbound.runtime.execute as execute
import callbound.runtime.results as results
from callbound.core.idempotency import LedgerStatus
from callbound.core.ids import SequentialIds
from callbound.runtime.verify import verify_operation
from callbound.stores.memory import MemoryStore
from callbound.stores.sqlite import SQLiteStore

from .helpers import (
    MODEL,
    Counter,
    OrderArgs,
    calls,
    error_code,
    fc,
    final,
    get_order_tool,
    last_outputs,
    make,
    outputs,
    rebuild,
    write_tool,
)

B7 = {"order_id": "B7"}
A1 = {"order_id": "A1"}


class Died(BaseException):
    """A process dying at a crash point (BaseException: nothing in the loop catches it)."""


def _die_at(point: str) -> Any:
    def crash_point(name: str, *args: Any) -> None:
        if name == point:
            raise Died(name)

    return crash_point


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield MemoryStore()
        return
    s = SQLiteStore(tmp_path / "cb.db")
    yield s
    s.close()


# ---- 1. D13 (2): a write reconciled as applied is a successful run ----------------------------------


def _pay_tool(paid: list[str], *, fail_first: bool) -> cb.ToolSpec:
    """set_note as a payment whose intent is the caller's own request id per proposal (a new intent per
    call), whose downstream lookup says "applied"."""

    def pay(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        paid.append(ctx.call_id)
        if fail_first and len(paid) == 1:
            raise ConnectionError("reset after the payment went through")
        return {"paid": args.order_id}

    return write_tool(
        handler=pay,
        reconcile=lambda key, ctx: {"paid": "B7"},
        intent_key=lambda args, ctx: f"pay-{ctx.call_id}",
    )


def _twice() -> list[dict[str, Any]]:
    return [calls("r1", fc("c1", "set_note", B7)), calls("r2", fc("c2", "set_note", B7)), final("f")]


async def test_d13_a_write_reconciled_as_applied_after_a_handler_error_is_a_counted_run() -> None:
    paid: list[str] = []
    h = make(_twice(), [_pay_tool(paid, fail_first=True)], budgets=cb.Budgets(max_identical_calls=1))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert outputs(h.model.requests[1])[-1]["result"] == {"ok": True, "data": {"paid": "B7"}}
    # run number 2 with max_identical_calls=1: refused without running (D13 (2))
    assert error_code(outputs(h.model.requests[2])[-1]["result"]) == "NO_PROGRESS"
    assert paid == ["c1"]


async def test_d13_a_write_reconciled_as_applied_after_a_crash_is_a_counted_run(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process dies after the effect, before C2; the resuming runner reconciles the STARTED entry
    as applied. That run counts as the uncrashed operation's does."""
    paid: list[str] = []
    budgets = cb.Budgets(max_identical_calls=1)
    h = make(_twice(), [_pay_tool(paid, fail_first=False)], store=store, budgets=budgets)
    with monkeypatch.context() as m:
        m.setattr(execute, "crash_point", _die_at("after_effect_before_result_commit"))
        with pytest.raises(Died):
            await h.run(operation_id="op_rc")
    h2 = rebuild(h, [_pay_tool(paid, fail_first=False)], budgets=budgets)
    out = await h2.runner.resume("op_rc")
    assert out.state == cb.State.COMPLETED
    results_of = last_outputs(h2.model)
    assert error_code(results_of["c2"]) == "NO_PROGRESS"
    assert paid == ["c1"]  # never run again under its new intent key


async def test_d13_another_operations_attempt_reconciled_here_is_not_a_run_of_this_one() -> None:
    """Reconciling an entry another operation left UNKNOWN is like a replay (D13 (1)): the effect was
    that operation's, so this operation's own first run of the same arguments still runs."""
    store = MemoryStore()
    paid: list[str] = []

    def broken(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        raise RuntimeError("hung up")

    def cannot_tell(key: str, ctx: cb.CallContext) -> Any:
        raise LookupError("down")

    intent = {"intent_key": lambda args, ctx: f"pay-{ctx.call_id}"}
    first = make(
        [calls("r1", fc("c1", "set_note", B7)), final("f")],
        [write_tool(handler=broken, reconcile=cannot_tell, **intent)],
        store=store,
    )
    out = await first.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    second = make(
        _twice(),
        [_pay_tool(paid, fail_first=False)],
        store=store,
        ids=SequentialIds(500),
        budgets=cb.Budgets(max_identical_calls=1),
    )
    out = await second.run()
    assert out.state == cb.State.COMPLETED
    assert last_outputs(second.model)["c2"] == {"ok": True, "data": {"paid": "B7"}}
    assert paid == ["c2"]


# ---- 2. a refused claim keeps the answered turn and its usage --------------------------------------


def _refund(paid: Counter, *, fail: bool = False) -> cb.ToolSpec:
    def refund(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        if fail:
            raise cb.NotApplied("declined")
        paid.calls.append(ctx.operation_id)
        return {"refunded": args.order_id}

    return write_tool(handler=refund, intent_key=lambda args, ctx: f"refund-{args.order_id}")


def _refund_op(store: Any, tool: cb.ToolSpec, base: int, **budgets: Any) -> Any:
    script = [
        calls(f"resp_{base}", fc(f"call_{base}", "set_note", A1), tokens=(1000, 100)),
        calls(f"resp_{base}b", fc(f"call_{base}b", "set_note", A1), tokens=(1000, 100)),
        final(f"resp_{base + 1}", tokens=(1000, 100)),
    ]
    price = cb.Price(input_per_mtok=Decimal(1), output_per_mtok=Decimal(10))
    return make(
        script,
        [tool],
        store=store,
        ids=SequentialIds(base),
        prices={MODEL: price},
        budgets=cb.Budgets(**budgets),
    )


async def test_a_refused_claim_on_a_turn_of_writes_only_keeps_the_paid_turn(store: Any) -> None:
    paid = Counter()
    assert (await _refund_op(store, _refund(paid, fail=True), 100).run()).state == cb.State.COMPLETED
    failed = store.ledger_get("acme", "ik_refund-A1")
    assert failed is not None and failed.status is LedgerStatus.FAILED
    assert (await _refund_op(store, _refund(paid), 200).run()).state == cb.State.COMPLETED
    # the third operation's first ledger read is stale: it sees the FAILED entry, claims over it, and
    # the store refuses the claim (the key holds the second operation's SUCCEEDED by now)
    real, reads = store.ledger_get, {"n": 0}

    def stale(tenant: str, key: str) -> Any:
        reads["n"] += 1
        return failed if reads["n"] == 1 else real(tenant, key)

    store.ledger_get = stale
    third = _refund_op(store, _refund(paid), 300, max_model_turns=3, max_cost=Decimal(1))
    out = await third.run()
    assert out.state == cb.State.COMPLETED
    assert len(paid.calls) == 1  # never twice
    assert last_outputs(third.model)["call_300"] == {"ok": True, "data": {"refunded": "A1"}}
    # every answered (paid) request is counted, and none was asked twice: 3 turns, within max_model_turns
    assert len(third.model.requests) == 3
    assert out.spent["model_turns"] == 3
    assert (out.usage.input_tokens, out.usage.output_tokens) == (3000, 300)
    assert out.usage.cost == Decimal("0.006")
    assert verify_operation(store, out.operation_id) == []  # the chain holds no trace of the refused commit


async def test_a_turn_of_writes_only_still_commits_twice_per_write_round_trip() -> None:
    """D18: the taken-back claim adds no commit to the normal path: creation, C1 with STARTED, C2, end."""
    h = make([calls("r1", fc("c1", "set_note", A1)), final("r2")], [write_tool()])
    real, commits = h.store.commit, []

    def counting(commit: Any) -> None:
        commits.append(commit)
        real(commit)

    h.store.commit = counting  # type: ignore[method-assign]
    assert (await h.run()).state == cb.State.COMPLETED
    assert len(commits) == 4


# ---- 3. identical reads of one turn: decided on completed runs --------------------------------------


async def test_d13_a_duplicate_read_beside_a_run_that_fails_is_not_refused() -> None:
    runs: list[str] = []

    async def lookup(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        runs.append(ctx.call_id)
        await asyncio.sleep(0.01)
        if len(runs) == 1:
            raise RuntimeError("database briefly unavailable")
        return {"order_id": args.order_id, "status": "shipped"}

    script = [
        calls("r1", fc("c1", "get_order", A1), fc("c2", "get_order", A1)),
        calls("r2", fc("c3", "get_order", A1)),
        final("r3"),
    ]
    h = make(script, [get_order_tool(handler=lookup)], budgets=cb.Budgets(max_identical_calls=1))
    out = await h.run()
    turn1 = {o["call_id"]: o["result"] for o in outputs(h.model.requests[1])}
    assert error_code(turn1["c1"]) == "HANDLER_ERROR"
    assert turn1["c2"] == {"ok": True, "data": {"order_id": "A1", "status": "shipped"}}
    assert runs == ["c1", "c2"]  # c2 waited for c1, then ran
    # the first NO_PROGRESS comes after one successful run, and is a warning, not a stop (D13 (3))
    assert error_code(outputs(h.model.requests[2])[-1]["result"]) == "NO_PROGRESS"
    assert (out.state, out.reason) == (cb.State.COMPLETED, None)


async def test_d13_a_duplicate_read_beside_a_run_that_succeeds_is_refused_after_it() -> None:
    runs = Counter()
    script = [
        calls("r1", *(fc(f"c{i}", "get_order", A1) for i in range(1, 6))),
        final("r2"),
    ]
    h = make(script, [get_order_tool(runs)], budgets=cb.Budgets(max_identical_calls=2))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert runs.n == 2
    codes = [error_code(o["result"]) for o in outputs(h.model.requests[1])]
    assert codes == [None, None, "NO_PROGRESS", "NO_PROGRESS", "NO_PROGRESS"]


# ---- 4. every stop's escalation names the last turn ------------------------------------------------


async def test_a_max_turns_escalation_names_the_last_turn_its_calls_and_their_effects() -> None:
    notes = Counter()
    script = [
        calls("r1", fc("c1", "get_order", A1)),
        calls("r2", fc("c2", "set_note", A1), fc("c3", "get_order", A1)),
        final("f"),
    ]
    h = make(script, [get_order_tool(), write_tool(notes)], budgets=cb.Budgets(max_model_turns=2))
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "MAX_TURNS")
    assert notes.n == 1  # it ran; its result never reached the model
    esc = out.escalation
    assert esc is not None
    assert esc["response_id"] == "r2"
    assert esc["call_ids"] == ["c2", "c3"]
    assert esc["tools"] == ["set_note", "get_order"]
    assert esc["effects"] == ["applied", "none"]


async def test_a_max_turns_escalation_on_resume_reads_the_effects_back_from_the_store(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = [calls("r1", fc("c1", "set_note", A1)), final("f")]
    h = make(script, [write_tool()], store=store, budgets=cb.Budgets(max_model_turns=1))
    with monkeypatch.context() as m:
        m.setattr(results, "crash_point", _die_at("after_result_commit"))
        with pytest.raises(Died):
            await h.run(operation_id="op_esc")
    h2 = rebuild(h, [write_tool()], budgets=cb.Budgets(max_model_turns=1))
    out = await h2.runner.resume("op_esc")
    assert (out.state, out.reason) == (cb.State.STOPPED, "MAX_TURNS")
    esc = out.escalation
    assert esc is not None
    assert (esc["response_id"], esc["call_ids"], esc["tools"], esc["effects"]) == (
        "r1",
        ["c1"],
        ["set_note"],
        ["applied"],
    )
    assert verify_operation(store, "op_esc") == []


async def test_a_token_stop_on_a_tool_turn_names_the_calls_that_did_not_run() -> None:
    notes = Counter()
    script = [
        calls("r1", fc("c1", "get_order", A1), fc("c2", "set_note", {"order_id": "A2"}), tokens=(500, 5))
    ]
    h = make(script, [get_order_tool(), write_tool(notes)], budgets=cb.Budgets(max_input_tokens=100))
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "MAX_INPUT_TOKENS")
    assert notes.n == 0
    esc = out.escalation
    assert esc is not None
    assert (esc["response_id"], esc["call_ids"], esc["tools"]) == (
        "r1",
        ["c1", "c2"],
        ["get_order", "set_note"],
    )


# ---- 5. a reconcile's takeover claim: committed before its hook, taken back alone if refused --------
# Reviewer h13, /tmp/s14/h13/r_reconcile_claim_reask.py: the takeover of an entry another operation left
# UNKNOWN went out with the outcome after the hook had run; refused, it reloaded the operation to before
# its answered turn (D12, D27). Now it is committed first (D16) and decided again when refused.


def _broken_unknown(store: Any, base: int = 100) -> Any:
    """An operation whose refund hung up and whose lookup was down: it leaves the intent UNKNOWN."""

    def broken(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        raise RuntimeError("the payment service hung up")

    def cannot_tell(key: str, ctx: cb.CallContext) -> Any:
        raise LookupError("the payment service is down")

    tool = write_tool(handler=broken, reconcile=cannot_tell, intent_key=lambda a, c: f"refund-{a.order_id}")
    return _refund_op(store, tool, base)


def _looked_up(paid: Counter, looked: list[str]) -> cb.ToolSpec:
    """The refund whose lookup finds it applied (and records which operation asked)."""

    def applied(key: str, ctx: cb.CallContext) -> dict[str, Any]:
        looked.append(ctx.operation_id)
        return {"refunded": "A1"}

    return write_tool(
        handler=_refund(paid).handler, reconcile=applied, intent_key=lambda a, c: f"refund-{a.order_id}"
    )


async def test_a_refused_reconcile_claim_keeps_the_paid_turn_and_runs_no_hook(store: Any) -> None:
    out = await _broken_unknown(store).run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    left = store.ledger_get("acme", "ik_refund-A1")
    assert left is not None and left.status is LedgerStatus.UNKNOWN
    paid, looked = Counter(), []
    assert (await _refund_op(store, _looked_up(paid, looked), 200).run()).state == cb.State.COMPLETED
    assert store.ledger_get("acme", "ik_refund-A1").status is LedgerStatus.SUCCEEDED
    # the third operation's first ledger read is stale: it sees the UNKNOWN entry the second one has
    # reconciled and settled since, and its takeover claim over it is refused
    real, reads = store.ledger_get, {"n": 0}

    def stale(tenant: str, key: str) -> Any:
        reads["n"] += 1
        return left if reads["n"] == 1 else real(tenant, key)

    store.ledger_get = stale
    looked.clear()
    third = _refund_op(store, _looked_up(paid, looked), 300, max_model_turns=3, max_cost=Decimal(1))
    out = await third.run()
    assert out.state == cb.State.COMPLETED
    assert last_outputs(third.model)["call_300"] == {"ok": True, "data": {"refunded": "A1"}}  # replayed
    assert len(third.model.requests) == 3  # the answered turn was not asked again
    assert out.spent["model_turns"] == 3
    assert (out.usage.input_tokens, out.usage.output_tokens) == (3000, 300)
    assert out.usage.cost == Decimal("0.006")
    assert verify_operation(store, out.operation_id) == []
    assert paid.calls == [] and looked == []  # D16: no hook for an entry another operation took over
    entry = real("acme", "ik_refund-A1")
    assert entry is not None and entry.status is LedgerStatus.SUCCEEDED
    assert entry.operation_id == "op_" + format(200, "032x")  # still the second operation's


async def test_the_takeover_is_durable_before_the_hook_and_held_against_other_operations(
    store: Any,
) -> None:
    """D16: while one operation reconciles an entry it took over, the ledger names it (STARTED), so
    another operation proposing the intent is told IN_PROGRESS and runs neither hook nor handler.
    Before, the takeover was only queued: the second operation took the entry over too and ran its
    own hook at the same moment."""
    assert (await _broken_unknown(store).run()).reason == "OUTCOME_UNKNOWN"
    paid, looked, seen, nested = Counter(), [], [], {}
    second = _refund_op(store, _looked_up(paid, looked), 300)

    def applied(key: str, ctx: cb.CallContext) -> dict[str, Any]:
        entry = store.ledger_get("acme", key)
        seen.append((entry.operation_id, entry.status))
        nested["out"] = asyncio.run(second.run())  # the other operation, proposing the same refund now
        return {"refunded": "A1"}

    first = _refund_op(
        store,
        write_tool(
            handler=_refund(paid).handler, reconcile=applied, intent_key=lambda a, c: f"refund-{a.order_id}"
        ),
        200,
    )
    out = await first.run()
    assert out.state == cb.State.COMPLETED
    assert seen == [(out.operation_id, LedgerStatus.STARTED)]
    assert looked == [] and paid.calls == []
    assert nested["out"].state == cb.State.COMPLETED
    told = {o["call_id"]: o["result"] for o in outputs(second.model.requests[1])}
    assert error_code(told["call_300"]) == "IN_PROGRESS"
    entry = store.ledger_get("acme", "ik_refund-A1")
    assert entry is not None and (entry.operation_id, entry.status) == (
        out.operation_id,
        LedgerStatus.SUCCEEDED,
    )
    assert verify_operation(store, out.operation_id) == []


async def test_a_takeover_nobody_can_tell_leaves_the_intent_unknown_under_this_operation(
    store: Any,
) -> None:
    """The takeover's STARTED becomes UNKNOWN when the hook cannot tell (D16), as the queued takeover
    did before; the operation stops OUTCOME_UNKNOWN naming the key."""
    assert (await _broken_unknown(store).run()).reason == "OUTCOME_UNKNOWN"
    out = await _broken_unknown(store, 200).run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    entry = store.ledger_get("acme", "ik_refund-A1")
    assert entry is not None and (entry.operation_id, entry.status) == (
        out.operation_id,
        LedgerStatus.UNKNOWN,
    )
    assert out.escalation is not None and "ik_refund-A1" in out.escalation["idempotency_keys"]
    assert verify_operation(store, out.operation_id) == []


async def test_a_process_dying_inside_the_takeovers_hook_is_reconciled_on_resume(store: Any) -> None:
    """The takeover is durable before the hook: a process that dies inside it leaves the intent
    STARTED under its operation (IN_PROGRESS for others until it is resumed, D16, D21), and the resume
    reconciles it again, paying nothing."""
    assert (await _broken_unknown(store).run()).reason == "OUTCOME_UNKNOWN"
    paid = Counter()

    async def dies(key: str, ctx: cb.CallContext) -> Any:
        raise Died("SIGKILL inside reconcile")

    h = _refund_op(
        store,
        write_tool(
            handler=_refund(paid).handler, reconcile=dies, intent_key=lambda a, c: f"refund-{a.order_id}"
        ),
        200,
    )
    with pytest.raises(Died):
        await h.run(operation_id="op_rk")
    entry = store.ledger_get("acme", "ik_refund-A1")
    assert entry is not None and (entry.operation_id, entry.status) == ("op_rk", LedgerStatus.STARTED)
    looked: list[str] = []
    h2 = rebuild(h, [_looked_up(paid, looked)])
    out = await h2.runner.resume("op_rk")
    assert out.state == cb.State.COMPLETED
    assert looked == ["op_rk"] and paid.calls == []
    assert last_outputs(h2.model)["call_200"] == {"ok": True, "data": {"refunded": "A1"}}
    assert verify_operation(store, "op_rk") == []
