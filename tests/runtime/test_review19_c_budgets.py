"""Review round 19, c F3: ``Budgets.from_dict`` refuses what is not the mapping ``to_dict`` writes.

A list (``Budgets.from_dict([])``) or None read as "no limits given" and returned the defaults, so a
config file whose budgets were written as a list ran every operation under limits nobody chose; an
unknown key (a misspelt ``max_turns``) raised TypeError and a ``not_after`` that is not ISO 8601 text
ValueError, neither callbound's ``UsageError``; ``max_cost`` went through ``Decimal(float)``, so 0.1
became 0.1000000000000000055..., where ``Budgets(max_cost=0.1)`` keeps Decimal("0.1"). A saved head
whose budgets do not read as Budgets stays an ``UnreadableRow`` (a StoreError naming the row)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

import callbound as cb
from callbound.core.guards import Budgets
from callbound.runtime.operation import Operation
from callbound.stores.base import StoredOperation
from callbound.stores.rows import UnreadableRow

from .helpers import calls, fc, make, refund_tool


@pytest.mark.parametrize("data", [[], (), None, "max_model_turns=3", 5, [("max_model_turns", 3)], {1: 2}])
def test_what_is_not_a_mapping_of_budget_names_is_refused(data: Any) -> None:
    with pytest.raises(cb.UsageError, match=r"Budgets\.from_dict takes a mapping of field names"):
        Budgets.from_dict(data)


def test_an_unknown_budget_name_is_refused_naming_the_fields() -> None:
    with pytest.raises(cb.UsageError, match="no budget named 'max_turns'") as info:
        Budgets.from_dict({"max_turns": 3})
    assert "max_model_turns" in str(info.value)


@pytest.mark.parametrize("value", ["tomorrow", "2030-13-01T00:00:00+00:00"])
def test_a_not_after_that_is_not_iso_text_is_refused(value: str) -> None:
    with pytest.raises(cb.UsageError, match=r"Budgets\.not_after must be an ISO 8601 time"):
        Budgets.from_dict({"not_after": value})


@pytest.mark.parametrize("value", ["lots", "NaN", float("inf"), -1, True, [1]])
def test_a_cost_that_is_no_amount_is_refused(value: Any) -> None:
    with pytest.raises(cb.UsageError, match=r"Budgets\.max_cost"):
        Budgets.from_dict({"max_cost": value})


@pytest.mark.parametrize(
    ("field", "value"), [("max_model_turns", True), ("max_tool_calls", 2.0), ("max_retries", -1)]
)
def test_wrong_types_and_negative_limits_are_refused(field: str, value: Any) -> None:
    with pytest.raises(cb.UsageError, match=f"Budgets.{field}"):
        Budgets.from_dict({field: value})


def test_a_cost_reads_as_budgets_keeps_it() -> None:
    assert Budgets.from_dict({"max_cost": 0.1}).max_cost == Decimal("0.1") == Budgets(max_cost=0.1).max_cost
    assert Budgets.from_dict({"max_cost": "2.50"}).max_cost == Decimal("2.50")


def test_a_mapping_round_trips_and_not_after_may_be_a_datetime() -> None:
    when = datetime(2030, 1, 1, tzinfo=UTC)
    b = Budgets(max_model_turns=5, max_cost=Decimal("1.25"), not_after=when)
    assert Budgets.from_dict(b.to_dict()) == b
    assert Budgets.from_dict({"not_after": when}).not_after == when
    assert Budgets.from_dict({}) == Budgets()


async def test_a_saved_head_with_an_unknown_budget_is_an_unreadable_row() -> None:
    h = make([calls("r1", fc("c1", "refund", {"order_id": "A1", "amount": 5.0}))], [refund_tool()])
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    stored = h.store.load_operation(out.operation_id)
    assert stored is not None
    for budgets in ({**stored.head["budgets"], "max_turns": 3}, []):
        head = copy.deepcopy(stored.head)
        head["budgets"] = budgets
        with pytest.raises(UnreadableRow) as info:
            Operation.from_stored(StoredOperation(head, list(stored.journal)), None)
        assert (info.value.where, info.value.operation_id) == ("operation row", out.operation_id)
        assert isinstance(info.value, cb.StoreError) and not isinstance(info.value, cb.UsageError)
