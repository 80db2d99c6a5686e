"""A hook or validator of the user's that calls sys.exit() fails like one that raises (D4; review round
20, lead). Round 20's d made a handler's SystemExit the tool's failure; the hooks that decide while a
turn is planned (authorize, Policy.authorize, requires_approval, intent_key, redact, approver_allowed),
a validator in the tool's params and a serializer of a returned model still let it out of run(): the
paid turn recorded, nothing decided. Each now gives the verdict the same hook's exception gives."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel, computed_field, field_validator

import callbound as cb
from callbound.runtime.outcome import ApproverNotAllowed

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
    write_tool,
)


def _exit(*_: Any) -> Any:
    raise SystemExit(2)


def _one_call(tool: cb.ToolSpec, arguments: dict[str, Any], **kw: Any) -> Any:
    h = make([calls("r1", fc("c1", tool.name, arguments)), final("r2")], [tool], **kw)
    return h, asyncio.run(h.run())


def test_an_authorize_hook_that_exits_denies_the_call() -> None:
    counter = Counter()
    h, outcome = _one_call(get_order_tool(counter, authorize=_exit), {"order_id": "A1"})
    assert outcome.state == cb.State.COMPLETED
    result = last_outputs(h.model)["c1"]
    assert error_code(result) == "DENIED" and "raised SystemExit" in result["error"]["message"]
    assert counter.n == 0


def test_a_policy_authorize_that_exits_denies_the_call() -> None:
    counter = Counter()
    h, outcome = _one_call(get_order_tool(counter), {"order_id": "A1"}, policy=cb.Policy(authorize=_exit))
    assert outcome.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["c1"]) == "DENIED"
    assert counter.n == 0


def test_a_requires_approval_rule_that_exits_asks_a_human() -> None:
    counter = Counter()
    _, outcome = _one_call(write_tool(counter, requires_approval=_exit), {"order_id": "A1"})
    assert outcome.state == cb.State.WAITING_APPROVAL  # cannot tell: a human looks (fail closed)
    assert counter.n == 0


def test_an_intent_key_hook_that_exits_names_no_intent() -> None:
    counter = Counter()
    h, outcome = _one_call(write_tool(counter, intent_key=_exit), {"order_id": "A1"})
    assert outcome.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["c1"]) == "HANDLER_ERROR"
    assert counter.n == 0


def test_a_redact_hook_that_exits_stores_the_failure_mark() -> None:
    counter = Counter()
    _, outcome = _one_call(refund_tool(counter, redact=_exit), {"order_id": "A1", "amount": 5.0})
    assert outcome.state == cb.State.WAITING_APPROVAL
    (pending,) = outcome.pending_approvals
    assert pending.arguments == "[redaction failed]"
    assert counter.n == 0


class _ExitingArgs(BaseModel):
    order_id: str

    @field_validator("order_id")
    @classmethod
    def _check(cls, value: str) -> str:
        raise SystemExit("usage: lookup ORDER")


def test_a_params_validator_that_exits_rejects_the_arguments() -> None:
    counter = Counter()
    h, outcome = _one_call(get_order_tool(counter, params=_ExitingArgs), {"order_id": "A1"})
    assert outcome.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["c1"]) == "INVALID_ARGUMENTS"
    assert counter.n == 0


class _ExitingResult(BaseModel):
    order_id: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def status(self) -> str:
        raise SystemExit(1)


def test_a_returned_model_whose_dump_exits_is_a_handler_error() -> None:
    def handler(args: OrderArgs, ctx: cb.CallContext) -> _ExitingResult:
        return _ExitingResult(order_id=args.order_id)

    h, outcome = _one_call(get_order_tool(handler=handler), {"order_id": "A1"})
    assert outcome.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["c1"]) == "HANDLER_ERROR"


def test_an_approver_allowed_hook_that_exits_refuses_the_approver() -> None:
    h, outcome = _one_call(
        refund_tool(), {"order_id": "A1", "amount": 5.0}, policy=cb.Policy(approver_allowed=_exit)
    )
    assert outcome.state == cb.State.WAITING_APPROVAL
    (pending,) = outcome.pending_approvals
    with pytest.raises(ApproverNotAllowed, match="raised SystemExit"):
        h.runner.approve(pending.approval_id, approver="lead-1", tenant="acme")
