"""Dispatch planning: Execute | NeedsApproval | Reject, never an exception (D5, D7, D13, D17)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from callbound.core.arguments import loads_body, parse_arguments
from callbound.core.canonical import canonical_json, sha256_hex
from callbound.core.dispatch import (
    DENIED,
    DUPLICATE_CALL_ID,
    HANDLER_ERROR,
    INVALID_ARGUMENTS,
    UNKNOWN_TOOL,
    Execute,
    NeedsApproval,
    PlanItem,
    Reject,
    TrustedOperation,
    plan_call,
    plan_turn,
)
from callbound.core.ids import default_intent_key
from callbound.core.registry import CallContext, Registry, ToolSpec
from callbound.core.types import ToolCall


class GetOrder(BaseModel):
    order_id: str


class Refund(BaseModel):
    order_id: str
    amount: float


def handler(args: Any, ctx: CallContext) -> dict[str, Any]:
    return {}


def boom(*args: Any) -> bool:
    raise RuntimeError("internal detail: db password is hunter2")


def tool(name: str, params: type[BaseModel] = GetOrder, **kw: Any) -> ToolSpec:
    return ToolSpec(name, f"{name} tool", params, handler, f"{name}-v1", **kw)


REGISTRY = Registry(
    [
        tool("get_order"),
        tool("refund", Refund, risk="write"),
        tool("wire", Refund, risk="irreversible"),
        tool("secret", authorize=lambda args, ctx: False),
        tool("fragile", authorize=boom),
        tool("own_orders", authorize=lambda args, ctx: args.order_id.startswith(ctx.subject)),
        tool("named", Refund, risk="write", intent_key=lambda a, c: f"refund:{a.order_id}:{a.amount}"),
        tool("prefixed", Refund, risk="write", intent_key=lambda a, c: f"ik_{a.order_id}"),
        tool("no_intent", Refund, risk="write", intent_key=lambda a, c: ""),
        tool("bad_intent", Refund, risk="write", intent_key=boom),
        tool("maybe", Refund, risk="write", requires_approval=lambda a, c: a.amount > 100),
        tool("unsure", Refund, risk="write", requires_approval=boom),
    ]
)
OP = TrustedOperation("op-1", "acme", "user-1", datetime(2025, 1, 1, tzinfo=UTC))
REFUND_ARGS = '{"order_id": "A1", "amount": 40.0}'


def mk(
    call_id: str, name: Any, raw: str | dict[str, Any] | None = '{"order_id": "A1"}', rid: str = "r1"
) -> ToolCall:
    """Build a call the way adapters do (core/arguments.parse_arguments)."""
    arguments, error = parse_arguments(raw)
    return ToolCall("prov", "api", rid, call_id, name, raw, arguments, error, 0)


def plan1(call: ToolCall, **kw: Any) -> PlanItem:
    kw.setdefault("offered", None)
    return plan_call(call, REGISTRY, kw.pop("offered"), kw.pop("op", OP), **kw)


def reject(item: PlanItem, code: str) -> Reject:
    assert isinstance(item, Reject), item
    assert item.code == code, item
    return item


# --- happy path ----------------------------------------------------------------------------------


def test_read_call_executes_with_trusted_context_and_no_key() -> None:
    call = mk("c1", "get_order", '{ "order_id" : "A1" }')
    item = plan1(call)
    assert isinstance(item, Execute)
    assert item.call is call
    assert item.spec is REGISTRY.get("get_order")
    assert isinstance(item.args, GetOrder) and item.args.order_id == "A1"
    assert item.arguments_json == '{"order_id":"A1"}'
    assert item.argument_digest == sha256_hex('{"order_id":"A1"}')
    assert item.idempotency_key is None
    assert item.ctx == CallContext("op-1", "acme", "user-1", "c1", "get_order", None, OP.deadline)


def test_empty_argument_string_is_an_empty_object_checked_by_the_schema() -> None:
    reject(plan1(mk("c1", "get_order", "")), INVALID_ARGUMENTS)

    class NoArgs(BaseModel):
        pass

    reg = Registry([tool("ping", NoArgs)])
    item = plan_call(mk("c1", "ping", ""), reg, None, OP)
    assert isinstance(item, Execute) and item.arguments_json == "{}"


# --- D7 duplicate call ids -----------------------------------------------------------------------


def test_repeated_call_id_runs_none_and_rejects_once() -> None:
    calls = [
        mk("c1", "get_order"),
        mk("c2", "refund", REFUND_ARGS),
        mk("c1", "refund", REFUND_ARGS),
        mk("c3", "get_order"),
        mk("c2", "get_order"),
        mk("c1", "get_order"),
    ]
    plan = plan_turn(calls, REGISTRY, None, OP)
    assert [p.call.call_id for p in plan] == ["c1", "c2", "c3"]
    reject(plan[0], DUPLICATE_CALL_ID)
    assert "3" in plan[0].message  # type: ignore[union-attr]
    reject(plan[1], DUPLICATE_CALL_ID)
    assert isinstance(plan[2], Execute)


@given(st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=12))
def test_duplicate_ids_property(ids: list[str]) -> None:
    calls = [mk(cid, "get_order") for cid in ids]
    plan = plan_turn(calls, REGISTRY, None, OP)
    counts = Counter(ids)
    # One plan item per distinct id, in order of first appearance.
    assert [p.call.call_id for p in plan] == list(dict.fromkeys(ids))
    for item in plan:
        if counts[item.call.call_id] > 1:
            reject(item, DUPLICATE_CALL_ID)
        else:
            assert isinstance(item, Execute)
    runnable = [p for p in plan if not isinstance(p, Reject)]
    assert all(counts[p.call.call_id] == 1 for p in runnable)


def test_same_call_id_in_different_positions_of_a_batch_never_executes() -> None:
    calls = [mk("x", "refund", REFUND_ARGS), mk("x", "refund", REFUND_ARGS)]
    plan = plan_turn(calls, REGISTRY, None, OP)
    assert len(plan) == 1
    reject(plan[0], DUPLICATE_CALL_ID)


# --- unknown and not offered ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["nope", "GET_ORDER", "get_order ", "__class__", "", "refund\x00"])
def test_unknown_names_are_rejected(name: str) -> None:
    item = reject(plan1(mk("c1", name)), UNKNOWN_TOOL)
    assert item.spec is None


def test_unknown_tool_message_is_bounded() -> None:
    item = reject(plan1(mk("c1", "x" * 10_000)), UNKNOWN_TOOL)
    assert len(item.message) < 300


def test_registered_but_not_offered_is_unknown() -> None:
    offered = frozenset({"get_order"})
    assert isinstance(plan1(mk("c1", "get_order"), offered=offered), Execute)
    reject(plan1(mk("c2", "refund", REFUND_ARGS), offered=offered), UNKNOWN_TOOL)
    reject(plan1(mk("c3", "refund", REFUND_ARGS), offered=frozenset()), UNKNOWN_TOOL)


# --- INVALID_ARGUMENTS -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        '{"order_id": "A1"',  # invalid JSON
        '["A1"]',  # not an object
        '"A1"',
        '{"order_id": "A1", "order_id": "B2"}',  # duplicate keys
        '{"order_id": "A1", "x": {"k": 1, "k": 2}}',
        '{"order_id": NaN}',
        '{"order_id": Infinity}',
        '{"order_id": 9007199254740993}',  # beyond ±(2^53-1)
        '{"order_id": 1e999}',  # huge exponent
        '{"order_id": "\\ud800"}',  # lone surrogate: no canonical form
        None,
    ],
)
def test_bad_argument_classes_are_invalid_arguments(raw: str | None) -> None:
    item = reject(plan1(mk("c1", "get_order", raw)), INVALID_ARGUMENTS)
    assert item.spec is REGISTRY.get("get_order")


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ('{"order_id": "A1", "amount": "40.00"}', "amount"),
        ('{"order_id": "A1", "amount": true}', "amount"),
        ('{"order_id": "A1"}', "amount"),
        ('{"order_id": "A1", "amount": 40, "currency": "EUR"}', "currency"),
        ('{"order_id": 7, "amount": 40}', "order_id"),
    ],
)
def test_schema_errors_carry_field_paths(raw: str, path: str) -> None:
    item = reject(plan1(mk("c1", "refund", raw)), INVALID_ARGUMENTS)
    assert f"{path}:" in item.message, item.message
    assert item.arguments_json == canonical_json(parse_arguments(raw)[0])


def test_adapter_flagged_argument_error_is_respected() -> None:
    call = ToolCall(
        "p", "a", "r1", "c1", "get_order", '{"order_id": "A1"}', {"order_id": "A1"}, "truncated", 0
    )
    item = reject(plan1(call), INVALID_ARGUMENTS)
    assert "truncated" in item.message


@pytest.mark.parametrize(
    "arguments",
    [
        {"order_id": float("nan")},
        {"order_id": 2**60},
        {"order_id": "A1", "bad": {1: 2}},
    ],
    ids=repr,
)
def test_object_arguments_on_the_call_are_checked_too(arguments: dict[Any, Any]) -> None:
    call = ToolCall("p", "a", "r1", "c1", "get_order", arguments, arguments, None, 0)
    reject(plan1(call), INVALID_ARGUMENTS)


def test_marked_duplicate_keys_in_object_arguments_are_rejected() -> None:
    # Object-style arguments read with loads_body keep the duplicate marked; dispatch must not trust
    # a ToolCall whose ``arguments`` still carries it.
    args = loads_body('{"input": {"order_id": "A1", "amount": 40, "amount": 4000}}')["input"]
    call = ToolCall("p", "a", "r1", "c1", "refund", args, args, None, 0)
    reject(plan1(call), INVALID_ARGUMENTS)
    nested = loads_body('{"input": {"order_id": "A1", "amount": 40, "x": {"k": 1, "k": 2}}}')["input"]
    call = ToolCall("p", "a", "r1", "c2", "refund", nested, nested, None, 0)
    reject(plan1(call), INVALID_ARGUMENTS)


# --- DENIED --------------------------------------------------------------------------------------


def test_spec_authorize_false_denies() -> None:
    reject(plan1(mk("c1", "secret")), DENIED)


def test_spec_authorize_raising_denies_without_leaking() -> None:
    item = reject(plan1(mk("c1", "fragile")), DENIED)
    assert "hunter2" not in item.message


def test_spec_authorize_sees_validated_args_and_trusted_ctx() -> None:
    assert isinstance(plan1(mk("c1", "own_orders", '{"order_id": "user-1/A"}')), Execute)
    reject(plan1(mk("c2", "own_orders", '{"order_id": "user-2/A"}')), DENIED)


def test_policy_authorize_false_or_raising_denies() -> None:
    seen: list[tuple[str, Any, CallContext]] = []

    def policy(spec: ToolSpec, args: Any, ctx: CallContext) -> bool:
        seen.append((spec.name, args, ctx))
        return spec.name != "refund"

    assert isinstance(plan1(mk("c1", "get_order"), policy_authorize=policy), Execute)
    reject(plan1(mk("c2", "refund", REFUND_ARGS), policy_authorize=policy), DENIED)
    reject(plan1(mk("c3", "get_order"), policy_authorize=boom), DENIED)
    name, args, ctx = seen[1]
    assert name == "refund" and isinstance(args, Refund)
    assert (ctx.operation_id, ctx.tenant, ctx.subject, ctx.call_id) == ("op-1", "acme", "user-1", "c2")
    assert ctx.idempotency_key is not None


def test_rejections_come_before_policy() -> None:
    calls: list[str] = []

    def policy(spec: ToolSpec, args: Any, ctx: CallContext) -> bool:
        calls.append(spec.name)
        return True

    reject(plan1(mk("c1", "nope"), policy_authorize=policy), UNKNOWN_TOOL)
    reject(plan1(mk("c2", "refund", "{"), policy_authorize=policy), INVALID_ARGUMENTS)
    reject(plan1(mk("c3", "secret"), policy_authorize=policy), DENIED)
    assert calls == []


# --- approvals -----------------------------------------------------------------------------------


def test_irreversible_tool_needs_approval() -> None:
    item = plan1(mk("c1", "wire", REFUND_ARGS))
    assert isinstance(item, NeedsApproval)
    assert item.arguments_json == '{"amount":40,"order_id":"A1"}'
    assert item.argument_digest == sha256_hex(item.arguments_json)
    assert item.idempotency_key == default_intent_key(
        "wire", "wire-v1", {"order_id": "A1", "amount": 40.0}, "op-1"
    )
    assert item.ctx.idempotency_key == item.idempotency_key


def test_computed_approval_rule() -> None:
    assert isinstance(plan1(mk("c1", "maybe", '{"order_id": "A", "amount": 10}')), Execute)
    assert isinstance(plan1(mk("c2", "maybe", '{"order_id": "A", "amount": 500}')), NeedsApproval)


def test_approval_rule_that_raises_asks_a_human() -> None:
    assert isinstance(plan1(mk("c1", "unsure", REFUND_ARGS)), NeedsApproval)


def test_denied_beats_approval() -> None:
    def policy(spec: ToolSpec, args: Any, ctx: CallContext) -> bool:
        return False

    reject(plan1(mk("c1", "wire", REFUND_ARGS), policy_authorize=policy), DENIED)


# --- idempotency keys (D13) ----------------------------------------------------------------------


def key_of(item: PlanItem) -> str | None:
    assert isinstance(item, Execute | NeedsApproval), item
    assert item.ctx.idempotency_key == item.idempotency_key
    return item.idempotency_key


def test_write_tools_get_the_default_intent_key() -> None:
    key = key_of(plan1(mk("c1", "refund", REFUND_ARGS)))
    assert key == default_intent_key("refund", "refund-v1", {"order_id": "A1", "amount": 40.0}, "op-1")
    assert key is not None and key.startswith("ik_")


def test_key_ignores_call_id_and_formatting() -> None:
    a = key_of(plan1(mk("c1", "refund", REFUND_ARGS)))
    b = key_of(plan1(mk("call_999", "refund", '{"amount":40,"order_id":"A1"}', rid="r2")))
    assert a == b


def test_key_depends_on_operation_args_tool_and_schema_version() -> None:
    base = key_of(plan1(mk("c1", "refund", REFUND_ARGS)))
    other_op = TrustedOperation("op-2", "acme", "user-1", None)
    assert key_of(plan1(mk("c1", "refund", REFUND_ARGS), op=other_op)) != base
    assert key_of(plan1(mk("c1", "refund", '{"order_id": "A1", "amount": 40.01}'))) != base
    assert key_of(plan1(mk("c1", "wire", REFUND_ARGS))) != base
    assert default_intent_key("refund", "refund-v2", {"order_id": "A1", "amount": 40.0}, "op-1") != base


def test_read_tools_get_no_key() -> None:
    assert key_of(plan1(mk("c1", "get_order"))) is None


def test_tool_named_intent_key() -> None:
    assert key_of(plan1(mk("c1", "named", REFUND_ARGS))) == "ik_refund:A1:40.0"
    assert key_of(plan1(mk("c9", "named", REFUND_ARGS), op=TrustedOperation("op-2", "t", "s", None))) == (
        "ik_refund:A1:40.0"
    )
    # a hook's text is always prefixed: "ik_A1" and "A1" are two intents, never one (a reviewer's finding)
    assert key_of(plan1(mk("c1", "prefixed", REFUND_ARGS))) == "ik_ik_A1"


@pytest.mark.parametrize("name", ["no_intent", "bad_intent"])
def test_intent_key_that_fails_rejects_the_call(name: str) -> None:
    item = reject(plan1(mk("c1", name, REFUND_ARGS)), HANDLER_ERROR)
    assert "hunter2" not in item.message


@given(
    order=st.text(min_size=1, max_size=8),
    amount=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    id_a=st.text(min_size=1, max_size=8),
    id_b=st.text(min_size=1, max_size=8),
)
def test_same_intent_same_key_across_call_ids(order: str, amount: float, id_a: str, id_b: str) -> None:
    args = {"order_id": order, "amount": amount}
    a = plan1(mk(id_a, "refund", args))
    b = plan1(mk(id_b, "refund", dict(reversed(list(args.items()))), rid="other"))
    assert key_of(a) == key_of(b)
    assert isinstance(a, Execute) and isinstance(b, Execute)
    assert a.arguments_json == b.arguments_json


# --- plan_turn keeps proposal order and plans each call --------------------------------------------


def test_plan_turn_mixed() -> None:
    calls = [
        mk("c1", "get_order"),
        mk("c2", "nope"),
        mk("c3", "wire", REFUND_ARGS),
        mk("c4", "refund", "{bad"),
        mk("c5", "refund", REFUND_ARGS),
    ]
    plan = plan_turn(calls, REGISTRY, None, OP)
    assert [p.call.call_id for p in plan] == ["c1", "c2", "c3", "c4", "c5"]
    assert isinstance(plan[0], Execute)
    reject(plan[1], UNKNOWN_TOOL)
    assert isinstance(plan[2], NeedsApproval)
    reject(plan[3], INVALID_ARGUMENTS)
    assert isinstance(plan[4], Execute)


@given(st.lists(st.text(max_size=12), max_size=6), st.lists(st.text(max_size=30), max_size=6))
def test_planning_never_raises(names: list[str], raws: list[str]) -> None:
    calls = [mk(f"c{i}", name, raw) for i, (name, raw) in enumerate(zip(names, raws, strict=False))]
    plan = plan_turn(calls, REGISTRY, None, OP)
    assert len(plan) == len(calls)
    for item in plan:
        assert isinstance(item, Execute | NeedsApproval | Reject)
