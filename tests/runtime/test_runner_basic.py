"""The loop itself: only an explicit completion is success (D1), dispatch errors go back to the model
as data and the loop continues, nothing the model or a tool does raises out of ``run`` (D4)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.core.errors import ScriptExhausted

from .helpers import (
    MODEL,
    Counter,
    OrderArgs,
    RefundArgs,
    calls,
    error_code,
    fc,
    final,
    get_order_tool,
    last_outputs,
    make,
    msg,
    outputs,
    rebuild,
    refund_tool,
    refusal_msg,
    response,
    sleepy_sync,
    states,
    write_tool,
)

A1 = {"order_id": "A1"}


async def test_happy_path_completes_with_text_and_one_run() -> None:
    counter = Counter()
    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2", "A1 has shipped.")],
        [get_order_tool(counter)],
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert out.reason is None
    assert out.text == "A1 has shipped."
    assert out.escalation is None
    assert counter.calls == ["A1"]
    assert len(h.model.requests) == 2
    result = last_outputs(h.model)["call_1"]
    assert result == {"ok": True, "data": {"order_id": "A1", "status": "shipped"}}
    assert states(out) == [
        "MODEL_REQUESTED",
        "VALIDATING",
        "EXECUTING",
        "RESULTS_READY",
        "MODEL_REQUESTED",
        "COMPLETED",
    ]
    assert out.usage.input_tokens == 20 and out.usage.output_tokens == 10
    assert out.spent["model_turns"] == 2 and out.spent["tool_calls"] == 1


# ---- only an explicit completion is success (D1) --------------------------------------------------

NOT_SUCCESS = [
    pytest.param(
        {"status": "incomplete", "incomplete_reason": "max_output_tokens"},
        [],
        cb.State.INCOMPLETE,
        "MAX_TOKENS",
        id="max_tokens",
    ),
    pytest.param({}, [refusal_msg()], cb.State.REFUSED, "REFUSAL", id="refusal_part"),
    pytest.param(
        {"status": "incomplete", "incomplete_reason": "content_filter"},
        [],
        cb.State.REFUSED,
        "CONTENT_FILTER",
        id="content_filter",
    ),
    pytest.param(
        {"status": "failed", "error": {"type": "server_error", "code": "invalid_prompt"}},
        [],
        cb.State.FAILED,
        None,
        id="failed",
    ),
    pytest.param({"status": "cancelled"}, [], cb.State.FAILED, "CANCELLED", id="cancelled"),
    pytest.param({"status": "paused_forever"}, [], cb.State.FAILED, "UNKNOWN_STOP_REASON", id="unknown"),
    pytest.param(
        {"status": "incomplete", "incomplete_reason": "something_new"},
        [],
        cb.State.FAILED,
        "UNKNOWN_STOP_REASON",
        id="incomplete_unknown_reason",
    ),
]


@pytest.mark.parametrize(("kw", "extra_items", "state", "reason"), NOT_SUCCESS)
async def test_calls_in_a_non_completed_turn_never_run(
    kw: dict[str, Any], extra_items: list[dict[str, Any]], state: cb.State, reason: str | None
) -> None:
    counter = Counter()
    # The call's arguments parse perfectly; it must still not run.
    body = response("resp_1", [*extra_items, fc("call_1", "get_order", A1)], **kw)
    h = make([body, final("resp_2")], [get_order_tool(counter)], budgets=cb.Budgets(max_retries=0))
    out = await h.run()
    assert out.state == state
    if reason is not None:
        assert out.reason == reason
    else:
        assert out.reason  # some UPPER_SNAKE code, never None for a failure
        assert out.reason == out.reason.upper()
    assert counter.n == 0
    assert len(h.model.requests) == 1
    assert out.state != cb.State.COMPLETED


async def test_refusal_text_is_reported() -> None:
    h = make([response("resp_1", [refusal_msg("No refunds from me.")])], [get_order_tool()])
    out = await h.run()
    assert out.state == cb.State.REFUSED
    assert out.refusal == "No refunds from me."


async def test_refusal_wins_over_final_text() -> None:
    h = make([response("resp_1", [msg("Sure!"), refusal_msg()])], [get_order_tool()])
    out = await h.run()
    assert out.state == cb.State.REFUSED


async def test_max_tokens_keeps_partial_text_but_is_not_success() -> None:
    body = response(
        "resp_1", [msg("The order is")], status="incomplete", incomplete_reason="max_output_tokens"
    )
    h = make([body], [get_order_tool()])
    out = await h.run()
    assert out.state == cb.State.INCOMPLETE and out.reason == "MAX_TOKENS"
    assert out.text == "The order is"


async def test_unknown_stop_reason_is_not_retried() -> None:
    h = make([response("resp_1", [msg("hm")], status="weird"), final("resp_2")], [get_order_tool()])
    out = await h.run()
    assert out.state == cb.State.FAILED and out.reason == "UNKNOWN_STOP_REASON"
    assert len(h.model.requests) == 1


# ---- dispatch inside the loop ---------------------------------------------------------------------


async def test_unknown_tool_goes_back_to_the_model_and_the_loop_continues() -> None:
    counter = Counter()
    h = make(
        [
            calls("resp_1", fc("call_1", "delete_everything", {"x": 1})),
            calls("resp_2", fc("call_2", "get_order", A1)),
            final("resp_3"),
        ],
        [get_order_tool(counter)],
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    first = {o["call_id"]: o["result"] for o in outputs(h.model.requests[1])}
    assert error_code(first["call_1"]) == "UNKNOWN_TOOL"
    assert counter.n == 1


async def test_registered_but_not_offered_tool_is_unknown() -> None:
    refunds = Counter()
    full = cb.Registry([get_order_tool(), write_tool(refunds)])
    h = make([calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")], full.subset(["get_order"]))
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert [t["name"] for t in h.model.requests[0]["tools"]] == ["get_order"]
    assert error_code(last_outputs(h.model)["call_1"]) == "UNKNOWN_TOOL"
    assert refunds.n == 0


class Amount(BaseModel):
    amount: float


class Nested(BaseModel):
    order: OrderArgs


@pytest.mark.parametrize(
    ("params", "raw"),
    [
        pytest.param(Amount, '{"amount": "40.00"}', id="string_for_float"),
        pytest.param(OrderArgs, '{"order_id": "A1", "extra": true}', id="extra_field"),
        pytest.param(OrderArgs, '{"order_id": "A1", "order_id": "B2"}', id="duplicate_keys"),
        pytest.param(OrderArgs, '{"order_id": "A1"', id="not_json"),
        pytest.param(OrderArgs, "{}", id="missing_field"),
        pytest.param(OrderArgs, '{"order_id": 7}', id="int_for_str"),
        pytest.param(Amount, '{"amount": NaN}', id="nan"),
        pytest.param(OrderArgs, '["A1"]', id="not_an_object"),
        pytest.param(Nested, '{"order": {"order_id": "A1", "sneaky": 1}}', id="nested_extra"),
    ],
)
async def test_invalid_arguments_are_rejected_without_running(params: type[BaseModel], raw: str) -> None:
    counter = Counter()

    def handler(args: Any, ctx: cb.CallContext) -> dict[str, Any]:
        counter.calls.append(args)
        return {"ok": 1}

    spec = cb.ToolSpec(name="tool", description="t", params=params, handler=handler, schema_version="v1")
    h = make([calls("resp_1", fc("call_1", "tool", raw=raw)), final("resp_2")], [spec])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["call_1"]) == "INVALID_ARGUMENTS"
    assert counter.n == 0


async def test_valid_float_argument_runs() -> None:
    seen: list[float] = []

    def handler(args: Amount, ctx: cb.CallContext) -> dict[str, Any]:
        seen.append(args.amount)
        return {"amount": args.amount}

    spec = cb.ToolSpec(name="tool", description="t", params=Amount, handler=handler, schema_version="v1")
    h = make([calls("resp_1", fc("call_1", "tool", raw='{"amount": 40.0}')), final("resp_2")], [spec])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert seen == [40.0]


async def test_tool_authorize_false_is_denied() -> None:
    counter = Counter()
    spec = get_order_tool(counter, authorize=lambda args, ctx: args.order_id != "A1")
    h = make(
        [
            calls("resp_1", fc("call_1", "get_order", A1), fc("call_2", "get_order", {"order_id": "B2"})),
            final("resp_2"),
        ],
        [spec],
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    res = last_outputs(h.model)
    assert error_code(res["call_1"]) == "DENIED"
    assert res["call_2"]["ok"] is True
    assert counter.calls == ["B2"]


async def test_authorize_hook_that_raises_denies() -> None:
    counter = Counter()

    def boom(args: Any, ctx: cb.CallContext) -> bool:
        raise RuntimeError("db down")

    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")],
        [get_order_tool(counter, authorize=boom)],
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["call_1"]) == "DENIED"
    assert counter.n == 0


async def test_policy_authorize_false_is_denied() -> None:
    counter = Counter()
    seen: list[tuple[str, str]] = []

    def authorize(spec: cb.ToolSpec, args: Any, ctx: cb.CallContext) -> bool:
        seen.append((spec.name, ctx.tenant))
        return False

    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")],
        [get_order_tool(counter)],
        policy=cb.Policy(authorize=authorize),
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["call_1"]) == "DENIED"
    assert counter.n == 0
    assert seen == [("get_order", "acme")]


async def test_duplicate_call_id_runs_neither_and_answers_once() -> None:
    counter = Counter()
    body = calls(
        "resp_1",
        fc("call_1", "get_order", A1),
        fc("call_1", "get_order", {"order_id": "B2"}),
        fc("call_2", "get_order", {"order_id": "C3"}),
    )
    h = make([body, final("resp_2")], [get_order_tool(counter)])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    outs = outputs(h.model.requests[1])
    dup = [o for o in outs if o["call_id"] == "call_1"]
    assert len(dup) == 1
    assert error_code(dup[0]["result"]) == "DUPLICATE_CALL_ID"
    assert counter.calls == ["C3"]  # the unambiguous call still runs


async def test_handler_exception_is_sanitized() -> None:
    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        raise ValueError("password=hunter2 at /srv/secret.py line 12")

    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")], [get_order_tool(handler=handler)]
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    res = last_outputs(h.model)["call_1"]
    assert error_code(res) == "HANDLER_ERROR"
    wire = json.dumps(h.model.requests)
    assert "hunter2" not in wire and "secret.py" not in wire


@pytest.mark.parametrize("exc", [cb.ToolError("order A1 is archived"), cb.NotApplied("order A1 is archived")])
async def test_tool_error_and_not_applied_messages_reach_the_model(exc: Exception) -> None:
    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        raise exc

    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")], [get_order_tool(handler=handler)]
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    res = last_outputs(h.model)["call_1"]
    assert error_code(res) == "HANDLER_ERROR"
    assert res["error"]["message"] == "order A1 is archived"


async def test_async_and_sync_handlers_both_run() -> None:
    ran: list[str] = []

    async def async_handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        await asyncio.sleep(0)
        ran.append("async:" + args.order_id)
        return {"async": True}

    def sync_handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append("sync:" + args.order_id)
        return {"sync": True}

    tools = [get_order_tool(name="a", handler=async_handler), get_order_tool(name="s", handler=sync_handler)]
    h = make([calls("resp_1", fc("call_1", "a", A1), fc("call_2", "s", A1)), final("resp_2")], tools)
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert sorted(ran) == ["async:A1", "sync:A1"]
    res = last_outputs(h.model)
    assert res["call_1"] == {"ok": True, "data": {"async": True}}
    assert res["call_2"] == {"ok": True, "data": {"sync": True}}


async def test_handler_receives_trusted_context() -> None:
    seen: list[cb.CallContext] = []

    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        seen.append(ctx)
        return {}

    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")], [get_order_tool(handler=handler)]
    )
    out = await h.run(tenant="t-1", subject="s-1")
    (ctx,) = seen
    assert (ctx.operation_id, ctx.tenant, ctx.subject, ctx.call_id, ctx.tool) == (
        out.operation_id,
        "t-1",
        "s-1",
        "call_1",
        "get_order",
    )
    assert ctx.idempotency_key is None  # reads have no intent key
    assert isinstance(ctx.deadline, type(h.clock.now())) and ctx.deadline > h.clock.now()


async def test_sync_handler_timeout() -> None:
    counter = Counter()
    spec = get_order_tool(handler=sleepy_sync(0.3, counter), timeout_ms=50)
    h = make([calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")], [spec], grace_s=0.01)
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["call_1"]) == "TIMEOUT"
    assert counter.n == 1


async def test_async_handler_timeout_is_cancelled() -> None:
    finished: list[bool] = []

    async def slow(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        await asyncio.sleep(5)
        finished.append(True)
        return {}

    spec = get_order_tool(handler=slow, timeout_ms=50)
    h = make([calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")], [spec])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["call_1"]) == "TIMEOUT"
    assert finished == []


def _big(n: int) -> Any:
    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        return {"blob": "x" * n}

    return handler


@pytest.mark.parametrize(
    ("spec_cap", "budget_cap", "size", "too_large"),
    [
        pytest.param(100, 64 * 1024, 200, True, id="spec_cap_smaller"),
        pytest.param(None, 100, 200, True, id="budget_cap_only"),
        pytest.param(10_000, 100, 200, True, id="budget_smaller_than_spec"),
        pytest.param(100, 10_000, 200, True, id="spec_smaller_than_budget"),
        pytest.param(300, 300, 200, False, id="under_both"),
    ],
)
async def test_result_size_cap_is_the_smaller_of_both(
    spec_cap: int | None, budget_cap: int, size: int, too_large: bool
) -> None:
    spec = get_order_tool(handler=_big(size), max_result_bytes=spec_cap)
    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")],
        [spec],
        budgets=cb.Budgets(max_result_bytes=budget_cap),
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    res = last_outputs(h.model)["call_1"]
    if too_large:
        assert error_code(res) == "RESULT_TOO_LARGE"
        assert "x" * 50 not in json.dumps(h.model.requests[-1])
    else:
        assert res["ok"] is True


async def test_result_too_large_for_a_write_says_it_was_applied() -> None:
    counter = Counter()

    def handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        counter.calls.append(args.order_id)
        return {"blob": "x" * 500}

    spec = write_tool(handler=handler, max_result_bytes=100)
    h = make([calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")], [spec])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    res = last_outputs(h.model)["call_1"]
    assert error_code(res) == "RESULT_TOO_LARGE"
    assert "applied" in res["error"]["message"]
    assert counter.n == 1


async def test_non_json_result_is_a_handler_error() -> None:
    def handler(args: OrderArgs, ctx: cb.CallContext) -> Any:
        return {"when": object()}

    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")], [get_order_tool(handler=handler)]
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["call_1"]) == "HANDLER_ERROR"


async def test_pydantic_results_are_dumped() -> None:
    def handler(args: OrderArgs, ctx: cb.CallContext) -> OrderArgs:
        return OrderArgs(order_id=args.order_id)

    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2")], [get_order_tool(handler=handler)]
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert last_outputs(h.model)["call_1"] == {"ok": True, "data": {"order_id": "A1"}}


async def test_everything_bad_at_once_still_returns_an_outcome() -> None:
    """Unknown tool, bad arguments, a crashing handler and a timeout in one turn: nothing raises."""

    def crash(args: OrderArgs, ctx: cb.CallContext) -> Any:
        raise KeyError("boom")

    tools = [
        get_order_tool(name="crash", handler=crash),
        get_order_tool(name="slow", handler=sleepy_sync(0.2), timeout_ms=20),
        get_order_tool(name="fine"),
    ]
    body = calls(
        "resp_1",
        fc("call_1", "nope", A1),
        fc("call_2", "fine", raw='{"order_id": 1}'),
        fc("call_3", "crash", A1),
        fc("call_4", "slow", A1),
        fc("call_5", "fine", A1),
    )
    h = make([body, final("resp_2")], tools, grace_s=0.01)
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    res = last_outputs(h.model)
    assert [error_code(res[f"call_{i}"]) for i in range(1, 6)] == [
        "UNKNOWN_TOOL",
        "INVALID_ARGUMENTS",
        "HANDLER_ERROR",
        "TIMEOUT",
        None,
    ]
    # results go back in proposal order
    assert [o["call_id"] for o in outputs(h.model.requests[1])] == [f"call_{i}" for i in range(1, 6)]


async def test_instructions_messages_and_settings_reach_the_request() -> None:
    h = make(
        [final("resp_1")],
        [get_order_tool()],
        settings={"temperature": 0.1, "max_output_tokens": 64, "tool_choice": "auto"},
        instructions="Be brief.",
        messages=[{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"}],
    )
    out = await h.run("now")
    assert out.state == cb.State.COMPLETED
    req = h.model.requests[0]
    assert req["model"] == MODEL and req["instructions"] == "Be brief."
    assert req["temperature"] == 0.1 and req["max_output_tokens"] == 64 and req["tool_choice"] == "auto"
    assert [i["content"] for i in req["input"]] == ["earlier", "ok", "now"]


def test_unknown_setting_is_a_usage_error() -> None:
    with pytest.raises(cb.UsageError):
        make([], [get_order_tool()], settings={"temprature": 0.1})


async def test_run_needs_tenant_and_subject() -> None:
    h = make([final("resp_1")], [get_order_tool()])
    with pytest.raises(cb.UsageError):
        await h.runner.run("hi", tenant="", subject="u")


# ---- run_sync / resume_sync and ScriptExhausted (D24) ---------------------------------------------


def test_run_sync_outside_a_loop_runs() -> None:
    counter = Counter()
    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2", "ok")], [get_order_tool(counter)]
    )
    out = h.runner.run_sync("hi", tenant="acme", subject="user-1")
    assert out.state == "COMPLETED" and out.text == "ok" and counter.n == 1


async def test_run_sync_inside_a_running_loop_is_a_usage_error() -> None:
    h = make([final("resp_1")], [get_order_tool()])
    with pytest.raises(cb.UsageError):
        h.runner.run_sync("hi", tenant="acme", subject="user-1")
    with pytest.raises(cb.UsageError):
        h.runner.resume_sync("op_whatever")
    assert h.model.requests == []  # nothing ran
    assert h.store.list_operations() == []


def test_resume_sync_outside_a_loop() -> None:
    refunds = Counter()
    h = make(
        [calls("resp_1", fc("call_1", "refund", {"order_id": "A1", "amount": 5.0})), final("resp_2")],
        [refund_tool(refunds)],
    )
    out = h.runner.run_sync("refund", tenant="acme", subject="user-1")
    assert out.state == "WAITING_APPROVAL"
    (p,) = out.pending_approvals
    out = h.runner.resume_sync(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == "COMPLETED" and refunds.n == 1


async def test_script_exhausted_names_k_and_leaves_model_requested() -> None:
    counter = Counter()
    h = make([calls("resp_1", fc("call_1", "get_order", A1))], [get_order_tool(counter)])
    with pytest.raises(ScriptExhausted) as info:
        await h.run(operation_id="op_script")
    assert isinstance(info.value, cb.UsageError)
    assert "response 1" in str(info.value)
    assert "op_script" in str(info.value)
    stored = h.runner.outcome("op_script")
    assert stored.state == cb.State.MODEL_REQUESTED
    assert counter.n == 1  # the first round trip was saved


def test_script_exhausted_from_run_sync() -> None:
    h = make([], [get_order_tool()])
    with pytest.raises(ScriptExhausted, match="response 0"):
        h.runner.run_sync("hi", tenant="acme", subject="user-1", operation_id="op_empty")
    assert h.runner.outcome("op_empty").state == cb.State.MODEL_REQUESTED


async def test_scripted_model_continues_after_exhaustion_with_a_new_runner() -> None:
    """k comes from the stored operation: a new runner with a longer script picks up at k=1."""
    counter = Counter()
    h = make([calls("resp_1", fc("call_1", "get_order", A1))], [get_order_tool(counter)])
    with pytest.raises(ScriptExhausted):
        await h.run(operation_id="op_k")
    h2 = rebuild(
        h,
        [get_order_tool(counter)],
        script=[calls("resp_1", fc("call_1", "get_order", A1)), final("resp_2", "later")],
    )
    out = await h2.runner.resume("op_k")
    assert out.state == cb.State.COMPLETED and out.text == "later"
    assert counter.n == 1
    assert len(h2.model.requests) == 1


async def test_refund_args_type_is_strict() -> None:
    refunds = Counter()
    h = make(
        [calls("resp_1", fc("call_1", "refund", {"order_id": "A1", "amount": "40.00"})), final("resp_2")],
        [refund_tool(refunds)],
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED  # rejected before any approval is asked
    assert out.pending_approvals == ()
    assert error_code(last_outputs(h.model)["call_1"]) == "INVALID_ARGUMENTS"
    assert refunds.n == 0
    assert RefundArgs.model_fields["amount"].annotation is float


def test_run_with_an_existing_operation_id_is_a_typed_error_that_changes_nothing() -> None:
    h = make([final("resp_1", "first"), final("resp_2", "second")], [get_order_tool()])
    first = h.runner.run_sync("hi", tenant="acme", subject="user-1", operation_id="op-fixed")
    assert first.state is cb.State.COMPLETED
    with pytest.raises(cb.OperationExists) as info:
        h.runner.run_sync("again", tenant="acme", subject="user-1", operation_id="op-fixed")
    assert info.value.operation_id == "op-fixed" and isinstance(info.value, cb.StoreError)
    assert h.runner.outcome("op-fixed").text == "first"
    assert len(h.model.requests) == 1  # the refused run never asked the model
