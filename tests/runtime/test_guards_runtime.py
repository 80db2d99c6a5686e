"""Loop guards in the running loop (D12–D15): every trip ends STOPPED with a reason code and an
escalation record, and nothing of the tripping turn runs."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

import callbound as cb
from callbound.testing import FakeClock, ScriptedModel

from .helpers import (
    API,
    MODEL,
    Concurrency,
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
    refund_tool,
    states,
    write_tool,
)


def assert_stopped(out: cb.Outcome, reason: str) -> None:
    assert out.state == cb.State.STOPPED
    assert out.reason == reason
    assert out.escalation is not None
    assert out.escalation["reason"] == reason
    assert out.escalation["operation_id"] == out.operation_id
    assert out.escalation["detail"]
    assert out.history[-1].state == "STOPPED"


def order(i: int) -> dict[str, str]:
    return {"order_id": f"A{i}"}


def looping_script(n: int) -> list[dict[str, Any]]:
    """n turns, each proposing one new read with new arguments."""
    return [calls(f"resp_{i}", fc(f"call_{i}", "get_order", order(i))) for i in range(1, n + 1)]


# ---- turns and calls ------------------------------------------------------------------------------


async def test_max_turns() -> None:
    counter = Counter()
    h = make(looping_script(10), [get_order_tool(counter)], budgets=cb.Budgets(max_model_turns=3))
    out = await h.run()
    assert_stopped(out, "MAX_TURNS")
    assert len(h.model.requests) == 3
    assert counter.n == 3
    assert out.spent["model_turns"] == 3


async def test_max_turns_allows_exactly_the_budget() -> None:
    h = make([*looping_script(2), final("resp_f")], [get_order_tool()], budgets=cb.Budgets(max_model_turns=3))
    out = await h.run()
    assert out.state == cb.State.COMPLETED


async def test_max_tool_calls_first_turn_runs_none() -> None:
    counter = Counter()
    body = calls("resp_1", *(fc(f"call_{i}", "get_order", order(i)) for i in range(3)))
    h = make([body, final("resp_2")], [get_order_tool(counter)], budgets=cb.Budgets(max_tool_calls=2))
    out = await h.run()
    assert_stopped(out, "MAX_TOOL_CALLS")
    assert counter.n == 0
    assert len(h.model.requests) == 1


async def test_max_tool_calls_a_later_turn_that_would_exceed_runs_none_of_its_calls() -> None:
    counter = Counter()
    script = [
        calls("resp_1", fc("call_1", "get_order", order(1))),
        calls("resp_2", fc("call_2", "get_order", order(2)), fc("call_3", "get_order", order(3))),
        final("resp_3"),
    ]
    h = make(script, [get_order_tool(counter)], budgets=cb.Budgets(max_tool_calls=2))
    out = await h.run()
    assert_stopped(out, "MAX_TOOL_CALLS")
    assert counter.calls == ["A1"]  # A2 would fit, but the turn as a whole would not: none runs


async def test_max_tool_calls_exactly_at_the_limit_runs() -> None:
    counter = Counter()
    script = [
        calls("resp_1", fc("call_1", "get_order", order(1)), fc("call_2", "get_order", order(2))),
        final("resp_2"),
    ]
    h = make(script, [get_order_tool(counter)], budgets=cb.Budgets(max_tool_calls=2))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert counter.n == 2


# ---- deadline (D14) -------------------------------------------------------------------------------


async def test_deadline_trips_on_active_time() -> None:
    h_clock: list[Any] = []

    def slow(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        h_clock[0].advance(11)  # the handler takes 11 s of (fake) time
        return {"ok": True}

    h = make(
        [*looping_script(3), final("resp_f")],
        [get_order_tool(handler=slow)],
        budgets=cb.Budgets(deadline_s=10),
    )
    h_clock.append(h.clock)
    out = await h.run()
    assert_stopped(out, "DEADLINE")
    assert len(h.model.requests) == 1
    assert out.spent["active_s"] >= 10


async def test_deadline_shortens_a_tool_timeout() -> None:
    """A handler may not outlive the operation's remaining active time."""
    seen: list[Any] = []

    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        seen.append(ctx.deadline)
        return {}

    h = make(
        [*looping_script(1), final("resp_f")],
        [get_order_tool(handler=handler)],
        budgets=cb.Budgets(deadline_s=30),
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert seen[0] == h.clock.now() + timedelta(seconds=30)


async def test_time_waiting_for_approval_is_not_active_time() -> None:
    refunds = Counter()
    script = [calls("resp_1", fc("call_1", "refund", {"order_id": "A1", "amount": 5.0})), final("resp_2")]
    h = make(script, [refund_tool(refunds)], budgets=cb.Budgets(deadline_s=60))
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    h.clock.advance(6 * 3600)  # six hours pass while a human thinks (well within the 24 h ttl)
    (p,) = out.pending_approvals
    out = await h.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    assert refunds.n == 1
    assert out.spent["active_s"] < 60


async def test_active_time_is_summed_across_processes() -> None:
    """6 s before the pause (in one process) + 6 s after it (in another) trips a 10 s deadline."""
    clock_box: list[Any] = []

    def slow(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        clock_box[0].advance(6)
        return {"id": args.order_id}

    def tools() -> list[cb.ToolSpec]:
        return [get_order_tool(handler=slow), refund_tool()]

    script = [
        calls(
            "resp_1",
            fc("call_1", "get_order", order(1)),
            fc("call_2", "refund", {"order_id": "A1", "amount": 1.0}),
        ),
        calls("resp_2", fc("call_3", "get_order", order(2))),
        calls("resp_3", fc("call_4", "get_order", order(3))),
        final("resp_4"),
    ]
    h = make(script, tools(), budgets=cb.Budgets(deadline_s=10))
    clock_box.append(h.clock)
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    assert 6 <= out.spent["active_s"] < 10
    h.clock.advance(3600)  # waiting is not active time
    h2 = rebuild(h, tools())
    (p,) = out.pending_approvals
    out = await h2.runner.resume(out.operation_id, [cb.Decision.deny(p.approval_id, approver="alice")])
    assert_stopped(out, "DEADLINE")
    assert len(h2.model.requests) == 1  # resp_2's call ran (6 s more), then the deadline stopped it
    assert out.spent["active_s"] >= 12


async def test_not_after_ends_a_waiting_operation() -> None:
    refunds = Counter()
    script = [calls("resp_1", fc("call_1", "refund", {"order_id": "A1", "amount": 5.0})), final("resp_2")]
    h = make(script, [refund_tool(refunds)])
    h.runner.budgets = cb.Budgets(not_after=h.clock.now() + timedelta(hours=1))
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    h.clock.advance(2 * 3600)
    (p,) = out.pending_approvals
    out = await h.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert_stopped(out, "DEADLINE")
    assert refunds.n == 0


async def test_d14_not_after_ends_an_operation_whose_approval_is_still_pending() -> None:
    """D14: not_after ends the operation regardless, even before anyone decides the approval."""
    refunds = Counter()
    script = [calls("resp_1", fc("call_1", "refund", {"order_id": "A1", "amount": 5.0})), final("resp_2")]
    h = make(script, [refund_tool(refunds)])
    h.runner.budgets = cb.Budgets(not_after=h.clock.now() + timedelta(hours=1))
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    h.clock.advance(2 * 3600)  # past not_after, which the approval's expiry is bounded by
    h2 = rebuild(h, [refund_tool(refunds)])
    out = await h2.runner.resume(out.operation_id)
    assert_stopped(out, "DEADLINE")
    assert refunds.n == 0
    assert len(h2.model.requests) == 0
    # the approval nobody decided is withdrawn in the same commit, so it is no longer listed
    assert h2.store.list_approvals(tenant="acme") == []
    (withdrawn,) = h2.store.list_approvals(tenant="acme", status=None)
    assert withdrawn.status == "withdrawn" and "DEADLINE" in (withdrawn.reason or "")


class _SlowModel(ScriptedModel):
    """Each model request takes ``seconds`` of (fake) active time."""

    def __init__(self, clock: FakeClock, seconds: float, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.clock, self.seconds = clock, seconds

    async def complete(self, body: Any, *, stream: bool, meta: Any, on_progress: Any = None) -> Any:
        self.clock.advance(self.seconds)
        return await super().complete(body, stream=stream, meta=meta, on_progress=on_progress)


def _note_key(args: Any, ctx: cb.CallContext) -> str:
    return f"note-{args.order_id}"


async def test_d14_a_model_request_that_spends_the_deadline_starts_no_handler() -> None:
    """D14: the model request's own time counts; its calls must not start with no time left."""
    notes = Counter()
    clock = FakeClock()
    model = _SlowModel(
        clock, 301, API, [calls("resp_1", fc("call_1", "set_note", order(1))), final("resp_2")]
    )
    runner = cb.Runner(
        model=model,
        registry=cb.Registry([write_tool(notes, intent_key=_note_key)]),
        budgets=cb.Budgets(deadline_s=300),
        clock=clock,
        settings={"model": MODEL},
    )
    out = await runner.run("Note A1", tenant="acme", subject="user-1")
    assert_stopped(out, "DEADLINE")
    assert notes.n == 0
    assert "EXECUTING" not in states(out)
    assert out.spent["active_s"] >= 300
    assert runner.store.ledger_get("acme", "ik_note-A1") is None


async def test_d14_reads_that_spend_the_deadline_keep_the_turns_write_from_starting() -> None:
    """D14/D16: a write after reads that used up the deadline does not start (it would get 0 s and an
    unknown outcome); its intent is not left STARTED in the ledger."""
    clock_box: list[FakeClock] = []
    notes = Counter()

    def slow(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        clock_box[0].advance(11)
        return {"id": args.order_id}

    script = [
        calls("resp_1", fc("call_1", "get_order", order(1)), fc("call_2", "set_note", order(1))),
        final("resp_2"),
    ]
    h = make(
        script,
        [get_order_tool(handler=slow), write_tool(notes, intent_key=_note_key)],
        budgets=cb.Budgets(deadline_s=10),
    )
    clock_box.append(h.clock)
    out = await h.run()
    assert_stopped(out, "DEADLINE")
    assert notes.n == 0
    assert out.escalation is not None and out.escalation["call_ids"] == ["call_2"]
    assert h.store.ledger_get("acme", "ik_note-A1") is None
    assert len(h.model.requests) == 1


async def test_d14_deadline_spent_before_an_approval_runs_nothing_on_resume() -> None:
    """D14: EXECUTING after an approval checks the deadline before any handler starts."""
    clock_box: list[FakeClock] = []
    refunds = Counter()

    def slow(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        clock_box[0].advance(11)
        return {"id": args.order_id}

    def tools() -> list[cb.ToolSpec]:
        return [get_order_tool(handler=slow), refund_tool(refunds)]

    script = [
        calls(
            "resp_1",
            fc("call_1", "get_order", order(1)),
            fc("call_2", "refund", {"order_id": "A1", "amount": 1.0}),
        ),
        final("resp_2"),
    ]
    h = make(script, tools(), budgets=cb.Budgets(deadline_s=10))
    clock_box.append(h.clock)
    out = await h.run()
    # at once, with the approval withdrawn: waiting asked a human to approve a call that could never
    # run (review round 15; the check after an approval is kept by tests/runtime/test_review15_deadline.py)
    assert_stopped(out, "DEADLINE")
    assert out.spent["active_s"] >= 10
    assert out.pending_approvals == () and refunds.n == 0
    assert len(h.model.requests) == 1


# ---- tokens and cost ------------------------------------------------------------------------------


async def test_max_input_tokens_is_cumulative() -> None:
    counter = Counter()
    script = [calls(f"resp_{i}", fc(f"call_{i}", "get_order", order(i)), tokens=(10, 1)) for i in range(1, 5)]
    h = make(script, [get_order_tool(counter)], budgets=cb.Budgets(max_input_tokens=25))
    out = await h.run()
    assert_stopped(out, "MAX_INPUT_TOKENS")
    assert len(h.model.requests) == 3  # 10, 20, 30 > 25
    assert counter.n == 2  # the calls of the turn that went over do not run
    assert out.usage.input_tokens == 30


async def test_max_output_tokens_is_cumulative() -> None:
    counter = Counter()
    script = [calls(f"resp_{i}", fc(f"call_{i}", "get_order", order(i)), tokens=(1, 40)) for i in range(1, 5)]
    h = make(script, [get_order_tool(counter)], budgets=cb.Budgets(max_output_tokens=50))
    out = await h.run()
    assert_stopped(out, "MAX_OUTPUT_TOKENS")
    assert len(h.model.requests) == 2
    assert counter.n == 1


async def test_max_cost_with_a_price() -> None:
    counter = Counter()
    script = [
        calls(f"resp_{i}", fc(f"call_{i}", "get_order", order(i)), tokens=(1000, 500)) for i in range(1, 5)
    ]
    price = cb.Price(input_per_mtok=Decimal("3"), output_per_mtok=Decimal("15"))
    # one turn: 1000 * 3/1e6 + 500 * 15/1e6 = 0.0105
    h = make(
        script, [get_order_tool(counter)], budgets=cb.Budgets(max_cost=Decimal("0.02")), prices={MODEL: price}
    )
    out = await h.run()
    assert_stopped(out, "MAX_COST")
    assert len(h.model.requests) == 2
    assert counter.n == 1
    assert out.usage.cost == Decimal("0.021")
    assert isinstance(out.usage.cost, Decimal)


async def test_cost_is_computed_without_a_cost_budget() -> None:
    price = cb.Price(input_per_mtok=Decimal("2"), output_per_mtok=Decimal("4"))
    h = make([final("resp_1", tokens=(1_000_000, 500_000))], [get_order_tool()], prices={MODEL: price})
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert out.usage.cost == Decimal(4)


def test_max_cost_without_a_price_is_a_usage_error() -> None:
    with pytest.raises(cb.UsageError, match="price"):
        make([], [get_order_tool()], budgets=cb.Budgets(max_cost=Decimal(1)))
    other = cb.Price(Decimal(1), Decimal(1))
    with pytest.raises(cb.UsageError):
        make([], [get_order_tool()], budgets=cb.Budgets(max_cost=Decimal(1)), prices={"another-model": other})


# ---- parallelism (D15) ----------------------------------------------------------------------------


def _tracked(conc: Concurrency, name: str = "probe", risk: str = "read") -> cb.ToolSpec:
    async def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        await conc.enter(args.order_id)
        return {"id": args.order_id}

    spec = (
        write_tool(name=name, handler=handler, risk=risk)
        if risk != "read"
        else get_order_tool(name=name, handler=handler)
    )
    return spec


async def test_reads_run_concurrently_up_to_max_parallel() -> None:
    conc = Concurrency()
    body = calls("resp_1", *(fc(f"call_{i}", "probe", order(i)) for i in range(6)))
    h = make([body, final("resp_2")], [_tracked(conc)], budgets=cb.Budgets(max_parallel=2))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert conc.peak == 2
    assert len(conc.finished) == 6


async def test_reads_do_run_concurrently() -> None:
    conc = Concurrency()
    body = calls("resp_1", *(fc(f"call_{i}", "probe", order(i)) for i in range(3)))
    h = make([body, final("resp_2")], [_tracked(conc)])  # default max_parallel = 4
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert conc.peak == 3


async def test_max_parallel_one_is_sequential() -> None:
    conc = Concurrency()
    body = calls("resp_1", *(fc(f"call_{i}", "probe", order(i)) for i in range(4)))
    h = make([body, final("resp_2")], [_tracked(conc)], budgets=cb.Budgets(max_parallel=1))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert conc.peak == 1


async def test_writes_run_one_at_a_time_in_proposal_order() -> None:
    conc = Concurrency()
    ids = [5, 3, 9, 1]
    body = calls("resp_1", *(fc(f"call_{i}", "probe", order(i)) for i in ids))
    h = make([body, final("resp_2")], [_tracked(conc, risk="write")], budgets=cb.Budgets(max_parallel=4))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert conc.peak == 1
    assert conc.started == [f"A{i}" for i in ids]
    # results still go back in proposal order
    assert [o["call_id"] for o in outputs(h.model.requests[1])] == [f"call_{i}" for i in ids]


async def test_mixed_reads_and_writes_never_overlap_a_write() -> None:
    conc = Concurrency()
    tools = [_tracked(conc, "r"), _tracked(conc, "w", risk="write")]
    body = calls(
        "resp_1",
        fc("call_1", "w", order(1)),
        fc("call_2", "r", order(2)),
        fc("call_3", "w", order(3)),
        fc("call_4", "r", order(4)),
    )
    h = make([body, final("resp_2")], tools)
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    writes = [s for s in conc.started if s in ("A1", "A3")]
    assert writes == ["A1", "A3"]
    assert conc.peak <= 2  # the two reads may overlap each other, never a write
    assert len(conc.finished) == 4


# ---- repeats and no progress (D13) ----------------------------------------------------------------


async def test_identical_call_beyond_the_limit_is_refused_without_running() -> None:
    counter = Counter()
    a1 = {"order_id": "A1"}
    script = [
        calls("resp_1", fc("call_1", "get_order", a1)),
        calls("resp_2", fc("call_2", "get_order", a1)),
        calls("resp_3", fc("call_3", "get_order", a1)),
        final("resp_4"),
    ]
    h = make(script, [get_order_tool(counter)], budgets=cb.Budgets(max_identical_calls=2))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert counter.n == 2
    assert error_code(outputs(h.model.requests[3])[-1]["result"]) == "NO_PROGRESS"


async def test_repeating_after_no_progress_stops_with_escalation() -> None:
    counter = Counter()
    a1 = {"order_id": "A1"}
    script = [calls(f"resp_{i}", fc(f"call_{i}", "get_order", a1)) for i in range(1, 6)]
    h = make(
        script, [get_order_tool(counter)], budgets=cb.Budgets(max_identical_calls=1, max_no_progress_turns=10)
    )
    out = await h.run()
    assert_stopped(out, "NO_PROGRESS")
    assert counter.n == 1
    # turn 2 got NO_PROGRESS, turn 3 repeated it: stop before a 4th request
    assert len(h.model.requests) == 3
    assert error_code(last_outputs(h.model)["call_2"]) == "NO_PROGRESS"


@pytest.mark.parametrize("other", ["write", "irreversible"])
async def test_a_repeat_after_no_progress_stops_before_the_turns_other_calls_run(other: str) -> None:
    """D13 (3), and "nothing of the tripping turn runs": the repeat is known when the turn is planned,
    so the write proposed beside it neither runs nor asks a human (it ran before the stop)."""
    reads, writes = Counter(), Counter()
    a1 = {"order_id": "A1"}
    same = [calls(f"resp_{i}", fc(f"call_{i}", "get_order", a1)) for i in (1, 2, 3)]  # run, run, NO_PROGRESS
    other_call = (
        fc("call_5", "set_note", {"order_id": "B7"})
        if other == "write"
        else fc("call_5", "refund", {"order_id": "B7", "amount": 5.0})
    )
    script = [*same, calls("resp_4", fc("call_4", "get_order", a1), other_call), final("resp_f")]
    tools = [get_order_tool(reads), write_tool(writes) if other == "write" else refund_tool(writes)]
    h = make(script, tools, budgets=cb.Budgets(max_identical_calls=2, max_no_progress_turns=10))
    out = await h.run()
    assert_stopped(out, "NO_PROGRESS")
    assert reads.n == 2
    assert writes.calls == []
    assert out.pending_approvals == ()
    assert len(h.model.requests) == 4
    assert out.escalation is not None
    assert out.escalation["call_ids"] == ["call_4", "call_5"]
    assert out.spent["tool_calls"] == 3  # the stopped turn's calls were never counted as made


async def test_a_write_repeat_the_ledger_replays_is_no_repeat_after_no_progress() -> None:
    """D13 (1) before (2): the same intent again is a replay of the recorded result, not a run, so it
    never meets the repeat guard and never stops the operation."""
    writes = Counter()
    b7 = {"order_id": "B7"}
    script = [*(calls(f"resp_{i}", fc(f"call_{i}", "set_note", b7)) for i in (1, 2, 3)), final("resp_f")]
    h = make(script, [write_tool(writes)], budgets=cb.Budgets(max_identical_calls=1))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert len(writes.calls) == 1


@pytest.mark.parametrize("max_parallel", [1, 4])
@pytest.mark.parametrize(("proposed", "limit"), [(2, 1), (5, 2)])
async def test_identical_reads_within_one_turn_count_even_when_concurrent(
    max_parallel: int, proposed: int, limit: int
) -> None:
    counter = Counter()
    a1 = {"order_id": "A1"}
    body = calls("resp_1", *(fc(f"call_{i}", "get_order", a1) for i in range(proposed)))
    h = make(
        [body, final("resp_2")],
        [get_order_tool(counter)],
        budgets=cb.Budgets(max_identical_calls=limit, max_parallel=max_parallel),
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert counter.n == limit
    res = last_outputs(h.model)
    assert (
        sorted(error_code(r) or "ok" for r in res.values())
        == ["NO_PROGRESS"] * (proposed - limit) + ["ok"] * limit
    )


async def test_a_read_whose_result_is_too_large_still_counts_as_a_run() -> None:
    """D13 (2) with D11: the handler ran and returned a value (only sending it was refused), so the
    same read is refused after max_identical_calls runs and its repeat stops the operation. Uncounted,
    it re-ran on every repeat until the turn budget ran out."""
    runs: list[int] = []

    def big(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        runs.append(1)
        return {"rows": "x" * (2000 + len(runs))}  # a log that grows a little each call

    a1 = {"order_id": "A1"}
    script = [calls(f"resp_{i}", fc(f"call_{i}", "get_order", a1)) for i in range(1, 9)]
    budgets = cb.Budgets(max_result_bytes=1000, max_model_turns=8, max_no_progress_turns=10)
    h = make([*script, final("f")], [get_order_tool(handler=big)], budgets=budgets)
    out = await h.run()
    assert_stopped(out, "NO_PROGRESS")
    assert len(runs) == 2
    assert error_code(last_outputs(h.model)["call_3"]) == "NO_PROGRESS"
    assert len(h.model.requests) == 4


async def test_failed_runs_do_not_count_as_identical_runs() -> None:
    attempts: list[int] = []

    def flaky(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) <= 2:
            raise RuntimeError("flaky")
        return {"ok": True}

    a1 = {"order_id": "A1"}
    script = [*(calls(f"resp_{i}", fc(f"call_{i}", "get_order", a1)) for i in range(1, 4)), final("f")]
    h = make(script, [get_order_tool(handler=flaky)], budgets=cb.Budgets(max_identical_calls=1))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert len(attempts) == 3
    assert last_outputs(h.model)["call_3"]["ok"] is True


async def test_no_progress_turns_stop_on_repeated_result_hashes() -> None:
    counter = Counter()

    def constant(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        counter.calls.append(args.order_id)
        return {"status": "unknown"}  # the same answer for every order: no progress

    script = [calls(f"resp_{i}", fc(f"call_{i}", "get_order", order(i))) for i in range(1, 8)]
    h = make(script, [get_order_tool(handler=constant)], budgets=cb.Budgets(max_no_progress_turns=2))
    out = await h.run()
    assert_stopped(out, "NO_PROGRESS")
    # turn 1 is new; turns 2 and 3 only repeat its result hash
    assert counter.n == 3
    assert len(h.model.requests) == 3


async def test_new_results_reset_the_no_progress_count() -> None:
    seq = iter(["x", "x", "y", "y", "z", "z"])

    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        return {"v": next(seq)}

    script = [*(calls(f"resp_{i}", fc(f"call_{i}", "get_order", order(i))) for i in range(1, 7)), final("f")]
    h = make(script, [get_order_tool(handler=handler)], budgets=cb.Budgets(max_no_progress_turns=2))
    out = await h.run()
    assert out.state == cb.State.COMPLETED


async def test_guard_state_survives_a_new_runner() -> None:
    """The identical-call count is rebuilt from the store: a new process cannot reset it."""
    counter = Counter()
    a1 = {"order_id": "A1"}
    script = [
        calls(
            "resp_1", fc("call_1", "get_order", a1), fc("call_r", "refund", {"order_id": "A1", "amount": 1.0})
        ),
        calls("resp_2", fc("call_2", "get_order", a1)),
        final("resp_3"),
    ]
    tools = [get_order_tool(counter), refund_tool()]
    h = make(script, tools, budgets=cb.Budgets(max_identical_calls=1))
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    h2 = rebuild(h, [get_order_tool(counter), refund_tool()])
    (p,) = out.pending_approvals
    out = await h2.runner.resume(out.operation_id, [cb.Decision.deny(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    assert counter.n == 1
    assert error_code(last_outputs(h2.model)["call_2"]) == "NO_PROGRESS"


async def test_guards_never_raise_from_concurrent_operations() -> None:
    """Two operations on one runner at once keep their own budgets."""
    c1, c2 = Counter(), Counter()
    h = make([*looping_script(5)], [get_order_tool(c1)], budgets=cb.Budgets(max_model_turns=2))
    out1, out2 = await asyncio.gather(h.run(operation_id="op_a"), h.run(operation_id="op_b"))
    assert out1.reason == out2.reason == "MAX_TURNS"
    assert c1.n == 4 and c2.n == 0
