"""A reconcile hook that returns None has not told (D16: reconciled, not guessed; review round 20, d).

``reconcile=lambda key, ctx: payments.lookup(key)`` returns None when the payment is not there. That
None was read as "applied, result null": the ledger recorded SUCCEEDED, the model was told the refund
went through, and it never ran (an effect lost, and the intent closed for good). None is now no answer:
the entry stays UNKNOWN and the operation stops STOPPED(OUTCOME_UNKNOWN) for a human, naming the key.
A hook that finds the effect returns what it found; one that knows it is absent raises NotApplied.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import callbound as cb
from callbound.core.errors import NotApplied

from .helpers import RefundArgs, calls, error_code, fc, final, last_outputs, make

REFUND = {"order_id": "A1", "amount": 40.0}


def _refund(downstream: dict[str, Any], apply: bool, reconcile: Any) -> cb.ToolSpec:
    def refund(args: RefundArgs, ctx: cb.CallContext) -> dict[str, Any]:
        assert ctx.idempotency_key is not None
        if apply:
            downstream[ctx.idempotency_key] = {"refund_id": "rf_1"}
        time.sleep(0.3)  # the answer comes after the timeout
        return {"refund_id": "rf_1"}

    return cb.ToolSpec(
        name="refund",
        description="Refund an order",
        params=RefundArgs,
        handler=refund,
        schema_version="refund-v1",
        risk="write",
        timeout_ms=50,
        reconcile=reconcile,
    )


def _run(apply: bool, reconcile_of: Any) -> tuple[cb.Outcome, Any, dict[str, Any]]:
    downstream: dict[str, Any] = {}
    h = make(
        [calls("r1", fc("c1", "refund", REFUND)), final("r2")],
        [_refund(downstream, apply, reconcile_of(downstream))],
        grace_s=1.0,
    )
    return asyncio.run(h.run()), h, downstream


def _lookup(downstream: dict[str, Any]) -> Any:
    return lambda key, ctx: downstream.get(key)  # None when nothing is there


def test_a_reconcile_returning_none_is_no_answer_the_operation_stops() -> None:
    outcome, h, downstream = _run(apply=False, reconcile_of=_lookup)
    assert downstream == {}
    assert (outcome.state, outcome.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    assert outcome.escalation is not None and outcome.escalation["call_ids"] == ["c1"]
    [entry] = h.store.ledger_list("acme")
    assert entry.status.value == "UNKNOWN"  # not SUCCEEDED: a later proposal is not told "done"
    assert len(h.model.requests) == 1  # the model was never told the refund went through


def test_async_reconcile_returning_none_is_no_answer_too() -> None:
    def of(downstream: dict[str, Any]) -> Any:
        async def lookup(key: str, ctx: cb.CallContext) -> Any:
            return downstream.get(key)

        return lookup

    outcome, _, _ = _run(apply=False, reconcile_of=of)
    assert (outcome.state, outcome.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")


@pytest.mark.parametrize("apply", [True, False])
def test_a_reconcile_that_answers_still_settles_the_call(apply: bool) -> None:
    def of(downstream: dict[str, Any]) -> Any:
        def lookup(key: str, ctx: cb.CallContext) -> Any:
            if key not in downstream:
                raise NotApplied("no refund under this key")
            return downstream[key]

        return lookup

    outcome, h, _ = _run(apply=apply, reconcile_of=of)
    assert outcome.state == cb.State.COMPLETED
    result = last_outputs(h.model)["c1"]
    if apply:
        assert result == {"ok": True, "data": {"refund_id": "rf_1"}}
    else:
        assert error_code(result) == "TIMEOUT" and "not applied" in result["error"]["message"]


def test_an_applied_refund_found_by_a_lookup_is_reconciled() -> None:
    outcome, h, downstream = _run(apply=True, reconcile_of=_lookup)
    assert outcome.state == cb.State.COMPLETED
    assert last_outputs(h.model)["c1"] == {"ok": True, "data": {"refund_id": "rf_1"}}
    [entry] = h.store.ledger_list("acme")
    assert entry.status.value == "SUCCEEDED" and list(downstream) == [entry.key]
