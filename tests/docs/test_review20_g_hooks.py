"""Review round 20, g: docs/reference.md on the yes/no hooks and the checks of the value types.

The page said `async def` is fine for every ToolSpec hook; ``ToolSpec(...)`` refuses it for
``requires_approval``, ``authorize``, ``intent_key`` and ``redact``, which decide while the turn is
planned (only ``handler`` and ``reconcile`` may be async). What those hooks' answers mean was not written
anywhere: only ``True`` lets ``authorize`` (and ``Policy.authorize(spec, args, ctx)``) run a call, and
only ``False`` spares ``requires_approval`` a human (fail closed, D4, D17). ``Policy``, ``Price``,
``Budgets`` and ``Registry`` check their values, which the page now says; each claim is tried here, with
the hook names read from the page."""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.testing import ScriptedModel
from tests.recordings import REPO_ROOT

REFERENCE = REPO_ROOT / "docs" / "reference.md"


def _page() -> str:
    return " ".join(REFERENCE.read_text(encoding="utf-8").split())


class _Order(BaseModel):
    order_id: str


def _sync(*args: Any) -> Any:
    return True


async def _async(*args: Any) -> Any:
    return True


def _spec(**kw: Any) -> cb.ToolSpec:
    base: dict[str, Any] = {
        "name": "get_order",
        "description": "Look up an order",
        "params": _Order,
        "handler": lambda args, ctx: {"order_id": args.order_id},
        "schema_version": "v1",
        "risk": "read",
    }
    return cb.ToolSpec(**{**base, **kw})


def _named(pattern: str) -> list[str]:
    (found,) = re.findall(pattern, _page())
    return re.findall(r"`(\w+)`", found)


def test_the_page_says_which_hooks_may_be_async() -> None:
    may = _named(r"and so is `async def` for ((?:`\w+`(?:, | and )?)+)\.")
    may_not = _named(r"((?:`\w+`(?:, | and )?)+) decide while the turn is planned, which does not wait")
    assert sorted(may) == ["handler", "reconcile"]
    assert sorted(may_not) == ["authorize", "intent_key", "redact", "requires_approval"]
    for hook in may:
        _spec(**{hook: _async, "risk": "write"})
    for hook in may_not:
        _spec(**{hook: _sync})
        with pytest.raises(cb.UsageError, match=f"{hook} must be a plain"):
            _spec(**{hook: _async})


def _call() -> dict[str, Any]:
    return {
        "id": "r1",
        "status": "completed",
        "output": [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "get_order",
                "arguments": json.dumps({"order_id": "A1"}),
            }
        ],
    }


ANSWER = {
    "id": "r2",
    "status": "completed",
    "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}],
}


def _run(spec: cb.ToolSpec, policy: cb.Policy | None = None) -> tuple[cb.Outcome, ScriptedModel]:
    model = ScriptedModel("openai-responses", [_call(), ANSWER])
    outcome = cb.Runner(model=model, registry=cb.Registry([spec]), policy=policy).run_sync(
        input="A1?", tenant="acme", subject="user-1"
    )
    return outcome, model


def _sent_code(model: ScriptedModel) -> str | None:
    (sent,) = [
        json.loads(i["output"]) for i in model.requests[1]["input"] if i.get("type") == "function_call_output"
    ]
    return None if sent["ok"] else str(sent["error"]["code"])


def _raises(*args: Any) -> Any:
    raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("answer", "allowed"),
    [(lambda *a: True, True), (lambda *a: False, False), (lambda *a: "yes", False), (_raises, False)],
    ids=["True", "False", "truthy-str", "raises"],
)
@pytest.mark.parametrize("where", ["ToolSpec.authorize", "Policy.authorize"])
def test_only_true_lets_authorize_run_the_call(answer: Any, allowed: bool, where: str) -> None:
    assert "let the call run only when they return `True`" in _page()
    if where == "ToolSpec.authorize":
        outcome, model = _run(_spec(authorize=answer))
    else:
        outcome, model = _run(_spec(), cb.Policy(authorize=answer))
    assert outcome.state == "COMPLETED"
    assert _sent_code(model) == (None if allowed else "DENIED")


@pytest.mark.parametrize(
    ("rule", "asks"),
    [(None, False), (False, False), (True, True), (lambda *a: None, True), (_raises, True)],
    ids=["default-read", "False", "True", "None-answer", "raises"],
)
def test_requires_approval_spares_a_human_only_on_false(rule: Any, asks: bool) -> None:
    assert "asks a human unless it returns `False`" in _page()
    outcome, _ = _run(_spec(requires_approval=rule))
    assert outcome.state == ("WAITING_APPROVAL" if asks else "COMPLETED")


def test_an_irreversible_tool_asks_by_default() -> None:
    outcome, _ = _run(_spec(risk="irreversible"))
    assert outcome.state == "WAITING_APPROVAL"


@pytest.mark.parametrize("answer", [lambda *a: "yes", _raises], ids=["truthy-str", "raises"])
def test_approver_allowed_refuses_anything_but_true(answer: Any) -> None:
    runner = cb.Runner(
        model=ScriptedModel("openai-responses", [_call(), ANSWER]),
        registry=cb.Registry([_spec(risk="irreversible")]),
        policy=cb.Policy(approver_allowed=answer),
    )
    outcome = runner.run_sync(input="A1?", tenant="acme", subject="user-1")
    (pending,) = outcome.pending_approvals
    with pytest.raises(cb.ApproverNotAllowed, match="only True allows"):
        runner.decide(cb.Decision.approve(pending.approval_id, approver="alice"), tenant="acme")


def test_approver_allowed_is_asked_with_the_approver_and_the_pending_approval() -> None:
    seen: list[tuple[str, Any]] = []

    def allowed(approver: str, approval: Any) -> bool:
        seen.append((approver, approval))
        return approver != "mallory"

    model = ScriptedModel("openai-responses", [_call(), ANSWER])
    runner = cb.Runner(
        model=model,
        registry=cb.Registry([_spec(risk="irreversible")]),
        policy=cb.Policy(approver_allowed=allowed),
    )
    outcome = runner.run_sync(input="A1?", tenant="acme", subject="user-1")
    (pending,) = outcome.pending_approvals
    with pytest.raises(cb.ApproverNotAllowed):
        runner.decide(cb.Decision.approve(pending.approval_id, approver="mallory"), tenant="acme")
    runner.decide(cb.Decision.approve(pending.approval_id, approver="alice"), tenant="acme")
    assert [(a, type(p).__name__, p.approval_id) for a, p in seen] == [
        ("mallory", "PendingApproval", pending.approval_id),
        ("alice", "PendingApproval", pending.approval_id),
    ]
    assert runner.resume_sync(outcome.operation_id).state == "COMPLETED"


def test_policy_defaults_and_checks_are_as_documented() -> None:
    page = _page()
    assert '`revision` (default `"1"`)' in page and "(default 24 hours;" in page
    policy = cb.Policy()
    assert (policy.revision, policy.approval_ttl, policy.allow_self_approval) == (
        "1",
        dt.timedelta(hours=24),
        False,
    )
    for bad in (
        {"revision": ""},
        {"approval_ttl": 3600},
        {"approval_ttl": dt.timedelta(seconds=-1)},
        {"allow_self_approval": "false"},
        {"authorize": _async},
        {"approver_allowed": _async},
        {"authorize": "yes"},
        {"on_approval_expired": "ignore"},
    ):
        with pytest.raises(cb.UsageError):
            cb.Policy(**bad)
    cb.Policy(approval_ttl=dt.timedelta(0))


@pytest.mark.parametrize(
    "bad",
    [
        {"max_model_turns": 0},
        {"max_tool_calls": "8"},
        {"max_retries": -1},
        {"max_input_tokens": 0},
        {"deadline_s": float("inf")},
        {"deadline_s": 0},
        {"max_cost": Decimal(0)},
        {"not_after": dt.datetime(2030, 1, 1)},
    ],
)
def test_budgets_refuse_what_the_page_says(bad: dict[str, Any]) -> None:
    assert "`Budgets(...)` checks each" in _page()
    name = next(iter(bad))
    with pytest.raises(cb.UsageError, match=f"Budgets.{name}"):
        cb.Budgets(**bad)


def test_budgets_take_what_the_page_allows() -> None:
    cb.Budgets(
        max_retries=0, max_input_tokens=None, max_cost=Decimal("0.5"), not_after=dt.datetime.now(dt.UTC)
    )


def test_price_and_registry_checks() -> None:
    assert cb.Price(1.5, 2).input_per_mtok == Decimal("1.5")
    for amounts in ((-1, 1), (float("nan"), 1), ("x", 1)):
        with pytest.raises(cb.UsageError):
            cb.Price(*amounts)
    with pytest.raises(cb.UsageError, match="twice"):
        cb.Registry([_spec(), _spec()])
    with pytest.raises(cb.UsageError):
        cb.Registry([object()])  # type: ignore[list-item]
