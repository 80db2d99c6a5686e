"""An operation's saved ``max_cost`` binds whoever drives it (review finding p10, D12).

The operation below is created with ``Budgets(max_cost=1.00)`` and a price of $0.80 per turn, then
resumed after an approval. A resuming runner (a worker, ``callbound resume``, the approver's service)
without a price for the operation's model used to price nothing, so the limit never tripped: $3.20
spent, $0.80 reported. It must refuse with ``UsageError`` before any request instead, and a runner that
has the price must count it and stop at the limit.
"""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

import pytest

import callbound as cb
from callbound.runtime.app import App
from callbound.runtime.worker import Worker
from callbound.stores import open_store
from callbound.testing import ScriptedModel

from .helpers import (
    API,
    MODEL,
    Harness,
    calls,
    fc,
    final,
    get_order_tool,
    make,
    rebuild,
    refund_tool,
)

BIG = (400_000, 100_000)  # tokens per turn
PRICE = {MODEL: cb.Price(Decimal("1"), Decimal("4"))}  # $1 / $4 per Mtok: $0.80 per turn
LIMIT = cb.Budgets(max_cost=Decimal("1.00"))


def script() -> list[dict[str, Any]]:
    turns = [calls("r1", fc("c1", "refund", {"order_id": "A1", "amount": 1.5}), tokens=BIG)]
    turns += [
        calls(f"r{i}", fc(f"c{i}", "get_order", {"order_id": f"A{i}"}), tokens=BIG) for i in range(2, 8)
    ]
    return [*turns, final("r9", tokens=BIG)]


def tools() -> list[cb.ToolSpec]:
    return [refund_tool(), get_order_tool()]


async def waiting() -> tuple[Harness, cb.Outcome]:
    h = make(script(), tools(), budgets=LIMIT, prices=PRICE)
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    assert out.usage.cost == Decimal("0.8")
    return h, out


@pytest.mark.parametrize(
    "prices",
    [
        pytest.param({}, id="no-price-table"),
        pytest.param({"another-model": cb.Price(Decimal(1), Decimal(1))}, id="other-models-only"),
    ],
)
async def test_resume_without_the_operations_price_is_refused_before_any_request(
    prices: dict[str, cb.Price],
) -> None:
    h, out = await waiting()
    approval = out.pending_approvals[0].approval_id
    h2 = rebuild(h, tools(), prices=prices)  # its own budgets set no max_cost: __init__ accepts it
    with pytest.raises(cb.UsageError) as err:
        await h2.runner.resume(out.operation_id, [cb.Decision.approve(approval, approver="alice")])
    message = str(err.value)
    assert out.operation_id in message and repr(MODEL) in message and "price" in message
    assert h2.model.requests == []  # nothing was paid for
    # Refused before the decision was recorded or the refund ran: a runner with the price starts clean.
    assert h.store.get_approval(approval).status == "pending"  # type: ignore[union-attr]
    assert h2.runner.outcome(out.operation_id).state == cb.State.WAITING_APPROVAL


async def test_a_runner_with_the_price_counts_it_and_stops_at_the_saved_limit() -> None:
    h, out = await waiting()
    approval = out.pending_approvals[0].approval_id
    h2 = rebuild(h, tools(), prices=PRICE)
    done = await h2.runner.resume(out.operation_id, [cb.Decision.approve(approval, approver="alice")])
    assert (done.state, done.reason) == (cb.State.STOPPED, "MAX_COST")
    assert len(h2.model.requests) == 1
    assert done.usage.cost == Decimal("1.6")


async def test_turns_are_priced_by_the_operations_model_not_the_resuming_runners() -> None:
    # The request names the operation's saved model; a runner configured for another model must price
    # that one (it used to look up its own, find nothing and count nothing).
    h, out = await waiting()
    approval = out.pending_approvals[0].approval_id
    h2 = rebuild(h, tools(), prices=PRICE, settings={"model": "unpriced-model"})
    done = await h2.runner.resume(out.operation_id, [cb.Decision.approve(approval, approver="alice")])
    assert (done.state, done.reason) == (cb.State.STOPPED, "MAX_COST")
    assert done.usage.cost == Decimal("1.6")


async def test_a_queued_operation_is_not_driven_unpriced() -> None:
    h = make(script(), tools(), budgets=LIMIT, prices=PRICE)
    op = h.runner.submit("Refund order A1", "acme", "user-1")
    h2 = rebuild(h, tools())
    with pytest.raises(cb.UsageError, match="price"):
        await h2.runner.resume(op)
    assert h2.model.requests == []


async def test_operations_without_a_cost_limit_resume_without_prices() -> None:
    h = make(script(), tools(), prices=PRICE)
    out = await h.run()
    approval = out.pending_approvals[0].approval_id
    h2 = rebuild(h, tools())
    done = await h2.runner.resume(out.operation_id, [cb.Decision.approve(approval, approver="alice")])
    assert done.state == cb.State.COMPLETED
    # the later turns had no price: their cost is unknown, so is the operation's (D27; it was the
    # first turns' 0.8 alone, a part reported as the whole: review round 17, r2 F3)
    assert done.usage.cost is None
    assert done.spent["cost"] == "0.8"  # what a cost budget counted is kept


async def test_the_request_itself_is_guarded() -> None:
    # Even if the runner's table changes after it was built, no turn of a max_cost operation is sent
    # unpriced: the check sits right before the request.
    h = make(script(), tools(), budgets=LIMIT, prices=dict(PRICE))
    h.runner.prices.clear()
    with pytest.raises(cb.UsageError, match="price"):
        await h.run()
    assert h.model.requests == []


async def test_a_worker_without_the_price_refuses_the_operation(caplog: pytest.LogCaptureFixture) -> None:
    store = open_store("memory:")
    reg = cb.Registry([get_order_tool()])
    settings = {"model": MODEL}
    creator = App(
        reg, ScriptedModel(API, []), budgets=LIMIT, settings=settings, runner_options={"prices": PRICE}
    )
    op = creator.runner(store).submit("Where is A1?", "acme", "user-1")
    unpriced = ScriptedModel(API, [final("r1", tokens=BIG)])
    worker = Worker(App(reg, unpriced, settings=settings), store, lease_s=5, poll_s=0.01)
    with caplog.at_level(logging.ERROR, logger="callbound.worker"):
        stats = await worker.run(max_operations=1, idle_exit_s=0)
    assert stats.errors == 1 and stats.finished == 0
    assert unpriced.requests == []
    assert any(op in r.getMessage() and "price" in r.getMessage() for r in caplog.records)
    store.close()
