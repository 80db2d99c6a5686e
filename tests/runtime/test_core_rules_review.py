"""Review of issue 2 and DECISIONS.md against the running loop: rules that had no test that would fail
if they broke. Each test names the rule it pins (issue section or decision number)."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import threading
import time
from datetime import timedelta
from typing import Any

import pytest

import callbound as cb
from callbound.core.ids import SequentialIds
from callbound.runtime.execute import seal
from callbound.runtime.operation import Operation
from callbound.stores.memory import MemoryStore
from callbound.testing import ApiError, FakeClock, ScriptedModel

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
    outputs,
    rebuild,
    refund_tool,
    response,
    states,
    write_tool,
)

A1 = {"order_id": "A1"}


def assert_stopped(out: cb.Outcome, reason: str) -> None:
    assert out.state == cb.State.STOPPED
    assert out.reason == reason
    assert out.escalation is not None and out.escalation["reason"] == reason
    assert out.escalation["operation_id"] == out.operation_id


# ---- D1: CONTINUE is a model turn; the output is resent unchanged (D8) -----------------------------

ANTHROPIC = "anthropic-messages"


def _anthropic(mid: str, content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _pause(i: int) -> dict[str, Any]:
    return _anthropic(f"msg_p{i}", [{"type": "text", "text": f"still searching {i}"}], "pause_turn")


def _anthropic_runner(
    script: list[Any], budgets: cb.Budgets | None = None
) -> tuple[cb.Runner, ScriptedModel]:
    model = ScriptedModel(ANTHROPIC, script)
    runner = cb.Runner(
        model=model,
        registry=cb.Registry([get_order_tool()]),
        budgets=budgets,
        clock=FakeClock(),
        settings={"model": "claude-test", "max_output_tokens": 256},
        ids=SequentialIds(),
    )
    return runner, model


async def test_d1_continue_counts_as_a_model_turn_against_max_model_turns() -> None:
    runner, model = _anthropic_runner(
        [_pause(1), _pause(2), _pause(3), _anthropic("msg_f", [{"type": "text", "text": "ok"}], "end_turn")],
        cb.Budgets(max_model_turns=2),
    )
    out = await runner.run("search", tenant="acme", subject="user-1")
    assert_stopped(out, "MAX_TURNS")
    assert len(model.requests) == 2
    assert out.spent["model_turns"] == 2


async def test_d1_continue_resends_the_output_unchanged_then_completes() -> None:
    runner, model = _anthropic_runner(
        [_pause(1), _anthropic("msg_f", [{"type": "text", "text": "found it"}], "end_turn")]
    )
    out = await runner.run("search", tenant="acme", subject="user-1")
    assert out.state == cb.State.COMPLETED and out.text == "found it"
    assert states(out) == ["MODEL_REQUESTED", "MODEL_REQUESTED", "COMPLETED"]
    assert out.spent["model_turns"] == 2
    second = model.requests[1]["messages"]
    assert second[-1] == {"role": "assistant", "content": [{"type": "text", "text": "still searching 1"}]}


# ---- D13 (3): no progress also covers repeated error envelopes -------------------------------------


async def test_d13_a_model_that_keeps_calling_an_unknown_tool_stops_no_progress() -> None:
    """UNKNOWN_TOOL envelopes repeat the same result hash: after max_no_progress_turns turns in a row the
    operation ends STOPPED(NO_PROGRESS), long before max_model_turns."""
    script = [calls(f"resp_{i}", fc(f"call_{i}", "delete_everything", {"x": 1})) for i in range(1, 10)]
    h = make(script, [get_order_tool()], budgets=cb.Budgets(max_no_progress_turns=2))
    out = await h.run()
    assert_stopped(out, "NO_PROGRESS")
    assert len(h.model.requests) == 3  # turn 1 is new, turns 2 and 3 only repeat it


async def test_d13_identical_means_canonical_arguments_not_the_text_sent() -> None:
    """Key order and whitespace do not make a call new: run 3 of the same canonical arguments is refused."""
    counter = Counter()

    class Two(OrderArgs):
        region: str

    def handler(args: Two, ctx: cb.CallContext) -> dict[str, Any]:
        counter.calls.append(args.order_id)
        return {"n": counter.n}  # a new result each time: no-progress turns do not interfere

    spec = cb.ToolSpec(name="lookup", description="t", params=Two, handler=handler, schema_version="v1")
    script = [
        calls("resp_1", fc("call_1", "lookup", raw='{"order_id":"A1","region":"eu"}')),
        calls("resp_2", fc("call_2", "lookup", raw='{ "region" : "eu" ,\n "order_id" : "A1" }')),
        calls("resp_3", fc("call_3", "lookup", raw='{"region":"eu","order_id":"A1"}')),
        final("resp_4"),
    ]
    h = make(script, [spec], budgets=cb.Budgets(max_identical_calls=2))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert counter.n == 2
    assert error_code(last_outputs(h.model)["call_3"]) == "NO_PROGRESS"


# ---- D11: the cap is measured on canonical JSON bytes (UTF-8, no escapes, no spaces) ------------------

CAP = 110  # every case below is on the same side of it whether `data` or all of model_result is measured


@pytest.mark.parametrize(
    ("data", "too_large"),
    [
        # 68 canonical bytes (87 as model_result); 189 with \u escapes
        pytest.param({"s": "é" * 30}, False, id="utf8_not_escaped"),
        # 128 canonical bytes although only 69 code points
        pytest.param({"s": "é" * 60}, True, id="bytes_not_code_points"),
        # 87 canonical bytes (106 as model_result); 127 with json.dumps' default spaces
        pytest.param({"l": [0] * 40}, False, id="no_whitespace"),
    ],
)
async def test_d11_result_size_is_measured_on_canonical_json_bytes(
    data: dict[str, Any], too_large: bool
) -> None:
    spec = get_order_tool(handler=lambda args, ctx: data, max_result_bytes=CAP)
    h = make([calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")], [spec])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    res = last_outputs(h.model)["call_1"]
    if too_large:
        assert error_code(res) == "RESULT_TOO_LARGE"
    else:
        assert res == {"ok": True, "data": data}


# ---- D15 / issue §6: sync reads run in worker threads, concurrently up to max_parallel ---------------


@pytest.mark.parametrize("max_parallel", [2, 3])
async def test_d15_sync_reads_run_in_threads_at_most_max_parallel_at_once(max_parallel: int) -> None:
    lock = threading.Lock()
    active = [0]
    peak = [0]
    threads: set[int] = set()

    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            threads.add(threading.get_ident())
        time.sleep(0.03)
        with lock:
            active[0] -= 1
        return {"id": args.order_id}

    body = calls("resp_1", *(fc(f"call_{i}", "get_order", {"order_id": f"A{i}"}) for i in range(6)))
    h = make(
        [body, final("resp_2")],
        [get_order_tool(handler=handler)],
        budgets=cb.Budgets(max_parallel=max_parallel),
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert peak[0] == max_parallel
    assert threading.get_ident() not in threads


# ---- D27 / issue §2: usage the provider did not report is None, never 0 ------------------------------


async def test_d27_missing_usage_stays_none_in_the_outcome() -> None:
    body = final("resp_1")
    del body["usage"]
    h = make([body], [get_order_tool()])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert out.usage.input_tokens is None and out.usage.output_tokens is None


# ---- issue §6 / D26: the provider's error type and code are kept, never its message text ------------


async def test_d26_failure_keeps_type_and_code_but_not_the_message_text() -> None:
    secret = "Your key sk-live-123 is wrong, see https://internal.example/acct/9"
    body = {"error": {"type": "invalid_request_error", "code": "bad_key", "message": secret, "param": None}}
    h = make([ApiError(400, body), final("resp_1")], [get_order_tool()])
    out = await h.run()
    assert out.state == cb.State.FAILED
    assert out.reason is not None and out.reason == out.reason.upper()
    assert "sk-live" not in out.reason
    last = out.history[-1]
    assert (last.details["error_type"], last.details["error_code"]) == ("invalid_request_error", "bad_key")
    assert "sk-live" not in json.dumps([t.to_dict() for t in out.history])
    assert "sk-live" not in json.dumps(out.escalation or {})


async def test_d26_retries_exhausted_keep_the_last_error_type_and_code() -> None:
    body = {"error": {"type": "server_error", "code": "overloaded", "message": "busy", "param": None}}
    h = make(
        [ApiError(503, body)] * 3 + [final("resp_1")], [get_order_tool()], budgets=cb.Budgets(max_retries=2)
    )
    out = await h.run()
    assert out.state == cb.State.FAILED
    assert len(h.model.requests) == 3
    last = out.history[-1]
    assert (last.details["status"], last.details["error_type"], last.details["error_code"]) == (
        503,
        "server_error",
        "overloaded",
    )


# ---- D7: identity is (response_id, call_id) --------------------------------------------------------


async def test_d7_a_duplicate_call_id_on_an_approval_tool_asks_nobody_and_runs_nothing() -> None:
    refunds = Counter()
    body = calls(
        "resp_1",
        fc("call_1", "refund", {"order_id": "A1", "amount": 5.0}),
        fc("call_1", "refund", {"order_id": "B2", "amount": 5.0}),
    )
    h = make([body, final("resp_2")], [refund_tool(refunds)])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert "WAITING_APPROVAL" not in states(out)
    assert refunds.n == 0
    outs = outputs(h.model.requests[1])
    assert [o["call_id"] for o in outs] == ["call_1"]
    assert error_code(outs[0]["result"]) == "DUPLICATE_CALL_ID"


async def test_d7_the_same_call_id_in_two_responses_is_two_calls() -> None:
    counter = Counter()
    script = [
        calls("resp_1", fc("call_1", "get_order", A1)),
        calls("resp_2", fc("call_1", "get_order", {"order_id": "B2"})),
        final("resp_3"),
    ]
    h = make(script, [get_order_tool(counter)])
    # Responses itself wants call ids unique in one conversation; the core must not care (D7).
    h.model.check_requests = False
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert counter.calls == ["A1", "B2"]
    assert last_outputs(h.model)["call_1"]["data"]["order_id"] == "B2"


# ---- D4: nothing a tool does escapes run() -----------------------------------------------------------


async def test_d4_a_handler_raising_cancelled_error_is_a_handler_error_not_an_escape() -> None:
    """A handler whose own inner await was cancelled (asyncio.CancelledError) failed; the operation was
    not cancelled. D4: only UsageError and StoreError escape run()."""

    async def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        inner = asyncio.ensure_future(asyncio.sleep(10))
        inner.cancel()
        await inner  # raises CancelledError into the handler
        return {}

    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")], [get_order_tool(handler=handler)]
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["call_1"]) == "HANDLER_ERROR"


def test_d4_a_sync_handler_raising_cancelled_error_is_a_handler_error() -> None:
    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        raise asyncio.CancelledError  # its own: a thread is never cancelled by the event loop

    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")], [get_order_tool(handler=handler)]
    )
    out = asyncio.run(h.run())
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["call_1"]) == "HANDLER_ERROR"


async def test_cancelling_the_run_itself_still_cancels_it() -> None:
    """The other side of the rule above: a cancellation of run() is the caller's, never a tool error."""
    entered = asyncio.Event()

    async def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        entered.set()
        await asyncio.sleep(10)
        return {}

    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")], [get_order_tool(handler=handler)]
    )
    task = asyncio.create_task(h.run())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(h.model.requests) == 1


# ---- D14: not_after ends an active operation too ------------------------------------------------------


async def test_d14_not_after_passing_during_a_tool_round_stops_before_the_next_request() -> None:
    box: list[FakeClock] = []

    def slow(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        box[0].advance(5)
        return {"id": args.order_id}

    script = [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")]
    h = make(script, [get_order_tool(handler=slow)])
    box.append(h.clock)
    h.runner.budgets = cb.Budgets(not_after=h.clock.now() + timedelta(seconds=3), deadline_s=300)
    out = await h.run()
    assert_stopped(out, "DEADLINE")
    assert len(h.model.requests) == 1


# ---- D10: the idempotency key of a binding comes from the ledger, not from the call record -----------


async def test_d10_a_resealed_record_with_another_idempotency_key_fails_closed() -> None:
    """Change a write's record to another intent key and re-seal its envelope consistently (binding
    recomputed from the edited record). D10: the key is taken from the idempotency ledger, which holds
    the real key, so the binding must not verify."""
    notes = Counter()
    h = make([calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")], [write_tool(notes)])
    original = h.runner._send_results

    async def wrapped(op: Operation) -> None:
        assert op.current is not None
        rec = op.current.records[0]
        assert rec.envelope is not None
        model_result = rec.envelope["model_result"]
        rec.idempotency_key = "ik_someone_elses_note"
        rec.handler = rec.schema_version = rec.policy_revision = None
        seal(h.runner, op, op.current.turn, rec, h.runner.registry.get("set_note"), model_result)
        await original(op)

    h.runner._send_results = wrapped  # type: ignore[method-assign]
    out = await h.run()
    assert notes.n == 1
    assert out.state == cb.State.FAILED and out.reason == "INTEGRITY"
    assert len(h.model.requests) == 1


async def test_d10_a_record_re_sealed_under_another_tools_real_intent_fails_closed() -> None:
    """The other key is real (the ledger holds it) but belongs to another tool's intent: the ledger
    does not hold it for this call's tool, so the binding must not verify (D10)."""
    notes, tags = Counter(), Counter()
    tag_tool = write_tool(tags, name="set_tag", schema_version="set-tag-v1")
    h = make(
        [calls("resp_1", fc("call_1", "set_note", A1), fc("call_2", "set_tag", A1)), final("resp_2")],
        [write_tool(notes), tag_tool],
    )
    original = h.runner._send_results

    async def wrapped(op: Operation) -> None:
        assert op.current is not None
        note, tag = op.current.records
        assert note.idempotency_key is not None and tag.idempotency_key != note.idempotency_key
        assert tag.envelope is not None
        tag.idempotency_key = note.idempotency_key
        tag.handler = tag.schema_version = tag.policy_revision = None
        spec = h.runner.registry.get("set_tag")
        seal(h.runner, op, op.current.turn, tag, spec, tag.envelope["model_result"])
        await original(op)

    h.runner._send_results = wrapped  # type: ignore[method-assign]
    out = await h.run()
    assert (notes.n, tags.n) == (1, 1)
    assert out.state == cb.State.FAILED and out.reason == "INTEGRITY"
    assert len(h.model.requests) == 1


async def test_d10_a_replay_in_another_operation_still_verifies_from_the_ledger() -> None:
    """The key of a replayed write is found in the ledger under the first operation's entry: the
    replay's binding verifies and the handler does not run twice (D10, D13)."""
    notes = Counter()
    store = MemoryStore()
    intent = {"intent_key": lambda args, ctx: f"note-{args.order_id}"}
    first = make(
        [calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")],
        [write_tool(notes, **intent)],
        store=store,
    )
    assert (await first.run()).state == cb.State.COMPLETED
    second = make(
        [calls("resp_3", fc("call_9", "set_note", A1)), final("resp_4")],
        [write_tool(notes, **intent)],
        store=store,
        ids=SequentialIds(1000),
    )
    out = await second.run()
    assert out.state == cb.State.COMPLETED
    assert notes.n == 1


# ---- issue §2: calls of a non-proposal turn never even ask for approval -----------------------------


async def test_d1_an_irreversible_call_in_a_truncated_turn_asks_no_approval() -> None:
    refunds = Counter()
    body = response(
        "resp_1",
        [fc("call_1", "refund", {"order_id": "A1", "amount": 5.0})],
        status="incomplete",
        incomplete_reason="max_output_tokens",
    )
    h = make([body, final("resp_2")], [refund_tool(refunds)])
    out = await h.run()
    assert out.state == cb.State.INCOMPLETE and out.reason == "MAX_TOKENS"
    assert out.pending_approvals == ()
    assert h.store.list_approvals(tenant="acme", status=None) == []
    assert refunds.n == 0


# ---- issue §2 / D23: one history, kept across processes, timed by the injected clock ----------------


async def test_history_spans_the_pause_and_is_timed_by_the_injected_clock() -> None:
    refunds = Counter()
    script = [calls("resp_1", fc("call_1", "refund", {"order_id": "A1", "amount": 5.0})), final("resp_2")]
    h = make(script, [refund_tool(refunds)])
    start = h.clock.now()
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    h.clock.advance(3600)
    (p,) = out.pending_approvals
    h2 = rebuild(h, [refund_tool(refunds)])
    out = await h2.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    assert states(out) == [
        "MODEL_REQUESTED",
        "VALIDATING",
        "WAITING_APPROVAL",
        "EXECUTING",
        "RESULTS_READY",
        "MODEL_REQUESTED",
        "COMPLETED",
    ]
    ats = [t.at for t in out.history]
    assert all(a.utcoffset() is not None for a in ats)
    assert ats == sorted(ats)
    assert ats[0] == start and ats[-1] == start + timedelta(seconds=3600)
    assert all(t.cause for t in out.history)


# ---- issue §3: handler(args, ctx) may be sync or async, whatever kind of callable it is --------------


class _AsyncCallable:
    """An async handler that is an object, not a function: ``async def __call__``."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def __call__(self, args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        await asyncio.sleep(0)
        self.seen.append(args)
        return {"order_id": args.order_id}


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
async def test_an_async_callable_object_is_awaited_as_an_async_handler() -> None:
    handler = _AsyncCallable()
    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")], [get_order_tool(handler=handler)]
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert last_outputs(h.model)["call_1"] == {"ok": True, "data": {"order_id": "A1"}}
    assert len(handler.seen) == 1 and isinstance(handler.seen[0], OrderArgs)


# ---- D26: exponential backoff with jitter --------------------------------------------------------------


class _EdgeRandom(random.Random):
    """``uniform(a, b)`` returns ``b`` (``top``) or ``a``: the bounds of the jitter window."""

    def __init__(self, top: bool) -> None:
        super().__init__(0)
        self.top = top

    def uniform(self, a: float, b: float) -> float:
        return b if self.top else a


async def test_d26_backoff_window_doubles_per_attempt_and_jitter_can_reach_zero() -> None:
    script = [ApiError(503)] * 4 + [final("resp_1")]
    h = make(script, [get_order_tool()], budgets=cb.Budgets(max_retries=4), rng=_EdgeRandom(top=True))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    w = h.clock.slept
    assert len(w) == 4 and w[0] > 0
    assert [b / a for a, b in itertools.pairwise(w)] == [2.0, 2.0, 2.0]
    h = make(script, [get_order_tool()], budgets=cb.Budgets(max_retries=4), rng=_EdgeRandom(top=False))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert h.clock.slept == [0.0] * 4


async def test_d26_retry_after_wins_over_a_shorter_backoff_but_only_for_its_own_attempt() -> None:
    script = [ApiError(429, headers={"retry-after": "9"}), ApiError(503), final("resp_1")]
    h = make(script, [get_order_tool()], rng=_EdgeRandom(top=False))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert h.clock.slept == [9.0, 0.0]


# ---- D8: results go on the wire as canonical JSON text of model_result; stateless replay by default ---


async def test_d8_responses_output_is_the_canonical_json_text_of_model_result() -> None:
    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        return {"z": 1, "a": "é", "m": [1.0, 2]}

    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")], [get_order_tool(handler=handler)]
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    second = h.model.requests[1]
    assert "previous_response_id" not in second
    items = second["input"]
    (call_item,) = [i for i in items if i.get("type") == "function_call"]
    assert call_item["call_id"] == "call_1"
    (output_item,) = [i for i in items if i.get("type") == "function_call_output"]
    assert output_item["output"] == '{"data":{"a":"é","m":[1,2],"z":1},"ok":true}'
