"""Review round 18, c F1: a handler's pydantic models are dumped in JSON mode wherever they are in its
result, as tuples become lists wherever they are (docs/reference.md, Tool handlers).

Only a model returned as the whole result was dumped. ``[Order(...), Order(...)]`` or
``{"refunds": [Refund(...)]}`` reached the model as ``HANDLER_ERROR`` ("the tool returned a value that is
not JSON"), and for a write whose effect had been applied, with "The effect was applied" instead of its
result. Values that are not JSON stay so at any depth (a ``Decimal`` beside a model is still
``HANDLER_ERROR``)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

import callbound as cb

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
    write_tool,
)


class Order(BaseModel):
    order_id: str
    shipped_at: datetime


class Refund(BaseModel):
    refund_id: str
    amount: Decimal  # dumped in JSON mode: "40.00"


SHIPPED = datetime(2026, 1, 2, 3, 4, 5)


async def test_a_list_of_models_reaches_the_model_as_json() -> None:
    def list_orders(args: OrderArgs, ctx: cb.CallContext) -> list[Order]:
        return [Order(order_id=args.order_id, shipped_at=SHIPPED), Order(order_id="A2", shipped_at=SHIPPED)]

    h = make(
        [calls("r1", fc("c1", "get_order", {"order_id": "A1"})), final("r2")],
        [get_order_tool(handler=list_orders)],
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert last_outputs(h.model)["c1"] == {
        "ok": True,
        "data": [
            {"order_id": "A1", "shipped_at": "2026-01-02T03:04:05"},
            {"order_id": "A2", "shipped_at": "2026-01-02T03:04:05"},
        ],
    }


async def test_a_write_whose_result_holds_models_records_and_replays_its_result() -> None:
    runs = Counter()

    def refund(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        runs.calls.append(args.order_id)
        return {"refunds": [Refund(refund_id="rf_1", amount=Decimal("40.00"))], "count": 1}

    expected = {"ok": True, "data": {"refunds": [{"refund_id": "rf_1", "amount": "40.00"}], "count": 1}}
    h = make(
        [
            calls("r1", fc("c1", "set_note", {"order_id": "A1"})),
            calls("r2", fc("c2", "set_note", {"order_id": "A1"})),  # the same intent: replayed (D13)
            final("r3"),
        ],
        [write_tool(handler=refund)],
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert runs.n == 1
    got = last_outputs(h.model)
    assert got["c1"] == expected
    assert got["c2"] == expected
    (entry,) = h.store._ledger.values()
    assert entry.result == expected


async def test_a_value_that_is_not_json_beside_a_model_is_still_a_handler_error() -> None:
    def mixed(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        return {"order": Order(order_id="A1", shipped_at=SHIPPED), "total": Decimal("40.00")}

    h = make(
        [calls("r1", fc("c1", "get_order", {"order_id": "A1"})), final("r2")],
        [get_order_tool(handler=mixed)],
    )
    assert (await h.run()).state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["c1"]) == "HANDLER_ERROR"


async def test_a_nested_model_whose_dump_fails_is_a_handler_error_not_an_exception() -> None:
    class Broken(BaseModel):
        n: int

        def model_dump(self, **kw: Any) -> Any:  # type: ignore[override]
            raise RuntimeError("user serializer bug")

    def broken(args: OrderArgs, ctx: cb.CallContext) -> list[Any]:
        return [Broken(n=1)]

    h = make(
        [calls("r1", fc("c1", "get_order", {"order_id": "A1"})), final("r2")],
        [get_order_tool(handler=broken)],
    )
    assert (await h.run()).state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["c1"]) == "HANDLER_ERROR"
