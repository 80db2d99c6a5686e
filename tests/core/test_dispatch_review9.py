"""Acceptance review 9 (dispatch): what user code and model-chosen names can do to planning.

- g19: a pydantic validator in a tool's schema that raises anything pydantic does not wrap (KeyError
  from a dict lookup, RuntimeError, TypeError) escaped ``run()`` and ``resume()``, leaving the operation
  MODEL_REQUESTED, and each resume asked the model again. D4: only UsageError and StoreError escape;
  such a call is an INVALID_ARGUMENTS envelope naming the exception's type only.
- g15: model-chosen key names (a 200 KB extra field name, a duplicate key, hundreds of extra fields)
  were echoed unbounded in the INVALID_ARGUMENTS envelope: 200 KB to the model with a 64 KiB result
  cap (D11), re-sent in every later request. Now each echoed name or location is at most 64
  characters, the message at most 1 KiB, control characters escaped.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel, field_validator, model_validator

import callbound as cb
from callbound.core import dispatch
from callbound.core.arguments import loads_body, parse_arguments
from callbound.core.dispatch import (
    DUPLICATE_CALL_ID,
    INVALID_ARGUMENTS,
    Execute,
    PlanItem,
    Reject,
    TrustedOperation,
    plan_call,
    plan_turn,
)
from callbound.core.registry import CallContext, Registry, ToolSpec
from callbound.core.types import ToolCall

from ..runtime.helpers import calls, error_code, fc, final, last_outputs, make

OP = TrustedOperation("op-1", "acme", "user-1", datetime(2025, 1, 1, tzinfo=UTC))
SECRET = "postgres://admin:hunter2@db/orders"
MAX_MESSAGE = 1024


def handler(args: Any, ctx: CallContext) -> dict[str, Any]:
    return {"ok": True}


def mk(raw: str | dict[str, Any], name: str = "t", call_id: str = "c1") -> ToolCall:
    arguments, error = parse_arguments(raw)
    return ToolCall("prov", "api", "r1", call_id, name, raw, arguments, error, 0)


def plan(params: type[BaseModel], raw: str | dict[str, Any], **kw: Any) -> PlanItem:
    spec = ToolSpec("t", "a tool", params, handler, "v1", **kw)
    return plan_call(mk(raw), Registry([spec]), None, OP)


def rejected(item: PlanItem) -> str:
    assert isinstance(item, Reject), item
    assert item.code == INVALID_ARGUMENTS, item
    return item.message


def bounded(message: str) -> str:
    """The message fits in 1 KiB of UTF-8, holds no control character, and is valid Unicode."""
    data = message.encode("utf-8")  # strict: a lone surrogate would raise
    assert len(data) <= MAX_MESSAGE, len(data)
    assert all(ch.isprintable() for ch in message), message
    return message


# ---- D4: a validator that raises something pydantic does not wrap ----------------------------------

CATALOG = {"A1": 1}


class Lookup(BaseModel):
    order_id: str

    @field_validator("order_id")
    @classmethod
    def known(cls, v: str) -> str:
        CATALOG[v]  # KeyError for an unknown order
        return v


class Broken(BaseModel):
    order_id: str

    @field_validator("order_id")
    @classmethod
    def check(cls, v: str) -> str:
        raise RuntimeError(f"cannot reach {SECRET}")


class Typo(BaseModel):
    order_id: str

    @model_validator(mode="after")
    def check(self) -> Typo:
        return self.order_id + 1  # type: ignore[operator, no-any-return]  # TypeError


@pytest.mark.parametrize(
    ("params", "raw", "kind"),
    [
        (Lookup, '{"order_id": "ZZ"}', "KeyError"),
        (Broken, '{"order_id": "A1"}', "RuntimeError"),
        (Typo, '{"order_id": "A1"}', "TypeError"),
    ],
)
def test_d4_a_validator_raising_any_exception_is_invalid_arguments_naming_its_type_only(
    params: type[BaseModel], raw: str, kind: str
) -> None:
    """D4: user code in the schema never ends the loop; the model is told INVALID_ARGUMENTS."""
    item = plan(params, raw)
    message = bounded(rejected(item))
    assert kind in message
    assert "hunter2" not in message and "ZZ" not in message  # the exception's text is never shown
    assert isinstance(item, Reject) and item.arguments_json == json.dumps(
        json.loads(raw), separators=(",", ":")
    )


def test_d4_the_validator_still_passes_good_arguments() -> None:
    assert isinstance(plan(Lookup, '{"order_id": "A1"}'), Execute)


def test_d4_a_failing_fold_check_is_invalid_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    """ToolSpec.folded walks the user's validated model: whatever it raises is a rejection (D4)."""

    def folded(self: ToolSpec, args: BaseModel, sent: dict[str, Any]) -> str | None:
        raise RecursionError(SECRET)

    monkeypatch.setattr(ToolSpec, "folded", folded)
    message = bounded(rejected(plan(Lookup, '{"order_id": "A1"}')))
    assert "RecursionError" in message and "hunter2" not in message


class Order(BaseModel):
    order_id: str

    @field_validator("order_id")
    @classmethod
    def known(cls, v: str) -> str:
        CATALOG[v]
        return v


def order_tool(**kw: Any) -> cb.ToolSpec:
    return cb.ToolSpec("get_order", "Look up an order", Order, handler, "get-order-v1", **kw)


async def test_d4_run_returns_an_outcome_when_a_validator_raises() -> None:
    """g19 through run(): an Outcome, the model told INVALID_ARGUMENTS, nothing raised (D4)."""
    h = make([calls("r1", fc("c1", "get_order", {"order_id": "ZZ"})), final("rf")], [order_tool()])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    result = last_outputs(h.model)["c1"]
    assert error_code(result) == INVALID_ARGUMENTS and "KeyError" in result["error"]["message"]
    assert len(h.model.requests) == 2


async def test_d4_resume_returns_an_outcome_when_a_validator_raises_on_revalidation() -> None:
    """g19 through resume(): approvals_ready re-plans the approved call with today's validator; one
    that now raises (the catalog changed while the call waited) is INVALID_ARGUMENTS (D4, D17)."""
    CATALOG["B7"] = 1
    try:
        tool = order_tool(risk="irreversible")
        h = make([calls("r1", fc("c1", "get_order", {"order_id": "B7"})), final("rf")], [tool])
        out = await h.run()
        assert out.state == cb.State.WAITING_APPROVAL
        del CATALOG["B7"]
        decision = cb.Decision.approve(out.pending_approvals[0].approval_id, approver="alice")
        out = await h.runner.resume(out.operation_id, [decision])
    finally:
        CATALOG.pop("B7", None)
    assert out.state == cb.State.COMPLETED
    result = last_outputs(h.model)["c1"]
    assert error_code(result) == INVALID_ARGUMENTS and "KeyError" in result["error"]["message"]
    assert len(h.model.requests) == 2


def _raise(*args: Any) -> Any:
    raise KeyError(SECRET)


class PlainOrder(BaseModel):
    order_id: str


@pytest.mark.parametrize(
    ("tool_kw", "policy_kw"),
    [
        ({"authorize": _raise}, {}),
        ({"risk": "write", "intent_key": _raise}, {}),
        ({"requires_approval": _raise}, {}),
        ({"risk": "irreversible", "redact": _raise}, {}),
        ({}, {"authorize": _raise}),
    ],
    ids=["authorize", "intent_key", "requires_approval", "redact", "policy_authorize"],
)
async def test_d4_no_other_planning_hook_escapes_run(
    tool_kw: dict[str, Any], policy_kw: dict[str, Any]
) -> None:
    """The other user code that runs while planning (already safe): none of it escapes run() (D4)."""
    tool = cb.ToolSpec("get_order", "Look up an order", PlainOrder, handler, "get-order-v1", **tool_kw)
    h = make(
        [calls("r1", fc("c1", "get_order", {"order_id": "A1"})), final("rf")],
        [tool],
        policy=cb.Policy(**policy_kw),
    )
    out = await h.run()
    assert out.state in (cb.State.COMPLETED, cb.State.WAITING_APPROVAL)
    assert "hunter2" not in json.dumps(h.model.requests[-1])


# ---- D11: model-chosen names echoed back are bounded ---------------------------------------------

BIG = "k" * 200_000


class GetOrder(BaseModel):
    order_id: str


class Refund(BaseModel):
    order_id: str
    amount: float


class Tags(BaseModel):
    tags: list[str]


class IntMap(BaseModel):
    m: dict[int, str]


def test_d11_a_huge_extra_field_name_is_shown_shortened() -> None:
    message = bounded(rejected(plan(GetOrder, f'{{"order_id": "A", "{BIG}": 1}}')))
    assert "kkkk" in message and "…" in message  # which field, shortened
    assert "Extra inputs are not permitted" in message  # what was wrong
    assert "k" * 65 not in message


@pytest.mark.parametrize("object_style", [False, True])
def test_d11_a_huge_duplicate_key_name_is_shown_shortened(object_style: bool) -> None:
    raw = f'{{"order_id": "A", "{BIG}": 1, "{BIG}": 2}}'
    if object_style:  # Anthropic / Gemini: the dict read with loads_body carries the duplicate marked
        args = loads_body(f'{{"input": {raw}}}')["input"]
        call = ToolCall("prov", "api", "r1", "c1", "t", args, args, None, 0)
        spec = ToolSpec("t", "a tool", GetOrder, handler, "v1")
        item = plan_call(call, Registry([spec]), None, OP)
    else:
        item = plan(GetOrder, raw)
    message = bounded(rejected(item))
    assert "duplicate key" in message and "k" * 65 not in message


def test_d11_many_extra_fields_are_counted_not_listed() -> None:
    raw = "{" + ",".join(f'"{i:06d}{"k" * 1000}":1' for i in range(200)) + ',"order_id":"A"}'
    message = bounded(rejected(plan(GetOrder, raw)))
    assert "000000kkk" in message  # the first one is named
    assert re.search(r"and \d+ more errors", message)  # and the rest counted


def test_d11_a_long_list_of_wrong_items_is_counted_not_listed() -> None:
    raw = '{"tags": [' + ",".join(["1"] * 5000) + "]}"
    message = bounded(rejected(plan(Tags, raw)))
    assert "tags.0: Input should be a valid string" in message
    assert re.search(r"and \d+ more errors", message)


def test_d11_control_characters_in_a_key_are_escaped() -> None:
    raw = json.dumps({"order_id": "A", "a\u0000\u001b[31mb\n\u2028c": 1})
    message = bounded(rejected(plan(GetOrder, raw)))
    assert "\\x00" in message and "\\x1b" in message and "\\n" in message


def test_d11_unicode_names_are_cut_on_whole_characters() -> None:
    key = "\U0001f600" * 5000  # astral characters: 4 bytes of UTF-8 each, two UTF-16 units
    message = bounded(rejected(plan(GetOrder, json.dumps({"order_id": "A", key: 1}, ensure_ascii=False))))
    assert "\U0001f600" in message and "\U0001f600" * 65 not in message


def test_d11_a_huge_value_in_a_canonicalisation_error_is_not_echoed() -> None:
    raw = '{"order_id": "A", "' + "x" * 100_000 + '\\ud800": 1}'  # a lone surrogate: no canonical form (D6)
    message = bounded(rejected(plan(GetOrder, raw)))
    assert "x" * 100 not in message


def test_d11_a_long_key_named_by_the_fold_check_is_shortened() -> None:
    key = "0" * 300 + "1"  # reads as the int 1, not its canonical spelling (D5)
    message = bounded(rejected(plan(IntMap, json.dumps({"m": {key: "a"}}))))
    assert "m." in message and "canonical" in message and "0" * 65 not in message


def test_d11_an_adapter_argument_error_is_bounded() -> None:
    call = ToolCall("p", "a", "r1", "c1", "t", "{}", None, "bad: " + BIG, 0)
    spec = ToolSpec("t", "a tool", GetOrder, handler, "v1")
    message = bounded(rejected(plan_call(call, Registry([spec]), None, OP)))
    assert message.startswith("arguments rejected: bad: kkk")


def test_d11_ordinary_errors_stay_complete_and_useful() -> None:
    """Short names are not touched: every field, with what was wrong, as before."""
    message = rejected(plan(Refund, '{"order_id": 7, "amount": "40", "currency": "EUR"}'))
    assert "order_id: Input should be a valid string" in message
    assert "amount: Input should be a valid number" in message
    assert "currency: Extra inputs are not permitted" in message
    assert "…" not in message and "more" not in message


def test_d11_a_huge_duplicate_call_id_is_shown_shortened() -> None:
    spec = ToolSpec("t", "a tool", GetOrder, handler, "v1")
    cid = "c" * 50_000
    raw = '{"order_id": "A"}'
    items = plan_turn([mk(raw, call_id=cid), mk(raw, call_id=cid)], Registry([spec]), None, OP)
    assert len(items) == 1 and isinstance(items[0], Reject) and items[0].code == DUPLICATE_CALL_ID
    assert len(bounded(items[0].message)) < 300


async def test_d11_the_envelope_sent_to_the_model_stays_small() -> None:
    """g15 end to end: what the model receives for a 200 KB key name is about a KiB, not 200 KB."""
    raw = f'{{"order_id": "A", "{BIG}": 1}}'
    h = make(
        [calls("r1", fc("c1", "get_order", raw=raw)), final("rf")],
        [cb.ToolSpec("get_order", "Look up an order", GetOrder, handler, "get-order-v1")],
    )
    await h.run()
    item = next(i for i in h.model.requests[-1]["input"] if i.get("type") == "function_call_output")
    assert json.loads(item["output"])["error"]["code"] == INVALID_ARGUMENTS
    assert len(item["output"].encode()) < 2 * MAX_MESSAGE


def test_the_limits_are_named() -> None:
    assert dispatch.MAX_SHOWN_NAME == 64 and dispatch.MAX_ERROR_MESSAGE == MAX_MESSAGE
