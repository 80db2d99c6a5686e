"""Yes-or-no hooks fail closed (review finding p7): only a real ``True`` allows a call, only a real
``False`` skips a human. A truthy non-bool (a denial reason string) must not allow; an answer whose
truth test raises (an array) must become a DENIED envelope, never an exception out of ``run()`` (D4)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.core.dispatch import DENIED, Execute, NeedsApproval, Reject, TrustedOperation, plan_call
from callbound.core.registry import CallContext, Registry, ToolSpec
from callbound.core.types import ToolCall


class Args(BaseModel):
    order_id: str


class Ambiguous:
    """Like a numpy array of several elements: asking its truth value raises."""

    def __bool__(self) -> bool:
        raise ValueError("The truth value of an array with more than one element is ambiguous")


def handler(args: Any, ctx: CallContext) -> dict[str, Any]:
    return {}


OP = TrustedOperation("op_1", "acme", "user-1", None)


def spec(**kw: Any) -> ToolSpec:
    return ToolSpec("get_order", "look up", Args, handler, "v1", **kw)


def call() -> ToolCall:
    raw = '{"order_id": "A1"}'
    return ToolCall(
        "openai", "openai-responses", "resp_1", "call_1", "get_order", raw, {"order_id": "A1"}, None, 0
    )


def plan(s: ToolSpec, policy: Any = None) -> Any:
    return plan_call(call(), Registry([s]), None, OP, policy)


async def _coroutine() -> bool:
    return True


NOT_BOOLS = [
    pytest.param(lambda a, c: Ambiguous(), "Ambiguous", id="truth-test-raises"),
    pytest.param(lambda a, c: "denied: order belongs to another tenant", "str", id="truthy-string"),
    pytest.param(lambda a, c: 1, "int", id="one"),
    pytest.param(lambda a, c: [True], "list", id="list"),
    pytest.param(lambda a, c: None, "NoneType", id="none"),
]


@pytest.mark.parametrize(("hook", "type_name"), NOT_BOOLS)
def test_authorize_allows_only_a_real_true(hook: Any, type_name: str) -> None:
    item = plan(spec(authorize=hook))
    assert isinstance(item, Reject)
    assert item.code == DENIED
    assert f"returned {type_name}, not True or False" in item.message
    assert "only True allows" in item.message


@pytest.mark.parametrize(("hook", "type_name"), NOT_BOOLS)
def test_policy_authorize_allows_only_a_real_true(hook: Any, type_name: str) -> None:
    item = plan(spec(), policy=lambda s, a, c: hook(a, c))
    assert isinstance(item, Reject)
    assert item.code == DENIED
    assert f"returned {type_name}" in item.message


def test_real_bools_answer_as_before() -> None:
    assert isinstance(plan(spec(authorize=lambda a, c: True)), Execute)
    denied = plan(spec(authorize=lambda a, c: False))
    assert isinstance(denied, Reject) and denied.code == DENIED
    assert "hook" not in denied.message  # a plain no needs no explanation
    assert isinstance(plan(spec(), policy=lambda s, a, c: True), Execute)


def test_a_raising_authorize_hook_names_the_exception_type_only() -> None:
    def boom(a: Any, c: Any) -> bool:
        raise KeyError("secret-value")

    item = plan(spec(authorize=boom))
    assert isinstance(item, Reject) and item.code == DENIED
    assert "raised KeyError" in item.message
    assert "secret-value" not in item.message


def test_an_authorize_hook_handing_back_a_coroutine_denies_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine was never awaited" would fail the test
        item = plan(spec(authorize=lambda a, c: _coroutine()))
    assert isinstance(item, Reject) and item.code == DENIED
    assert "awaitable" in item.message


@pytest.mark.parametrize(("rule", "_type"), NOT_BOOLS)
def test_requires_approval_asks_a_human_unless_the_rule_says_false(rule: Any, _type: str) -> None:
    s = spec(requires_approval=rule)
    assert isinstance(plan(s), NeedsApproval)
    assert s.needs_approval(Args(order_id="A1"), None) is True  # type: ignore[arg-type]


def test_requires_approval_real_bools() -> None:
    assert isinstance(plan(spec(requires_approval=lambda a, c: False)), Execute)
    assert isinstance(plan(spec(requires_approval=lambda a, c: True)), NeedsApproval)


# ---- through the runner: nothing escapes run(), the operation is not left half-way -----------------


async def test_an_ambiguous_authorize_answer_is_a_denial_not_an_exception() -> None:
    from tests.runtime.helpers import Counter, calls, fc, final, get_order_tool, make, outputs

    n = Counter()
    h = make(
        [calls("r1", fc("c1", "get_order", {"order_id": "A1"})), final("r2")],
        [get_order_tool(n, authorize=lambda a, c: Ambiguous())],
    )
    out = await h.run()  # raised ValueError before the fix, leaving MODEL_REQUESTED
    assert out.state == cb.State.COMPLETED
    assert n.n == 0
    [sent] = outputs(h.model.requests[-1])
    assert sent["result"]["error"]["code"] == DENIED
    assert len(h.model.requests) == 2


async def test_a_denial_string_from_authorize_does_not_run_the_tool() -> None:
    from tests.runtime.helpers import Counter, calls, fc, final, get_order_tool, make, outputs

    n = Counter()
    h = make(
        [calls("r1", fc("c1", "get_order", {"order_id": "A1"})), final("r2")],
        [get_order_tool(n, authorize=lambda a, c: "denied: order belongs to another tenant")],
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert n.n == 0  # the string's truth value allowed the call before the fix
    [sent] = outputs(h.model.requests[-1])
    assert sent["result"]["ok"] is False
    assert sent["result"]["error"]["code"] == DENIED
