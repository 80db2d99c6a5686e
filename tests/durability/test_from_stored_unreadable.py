"""``Operation.from_stored`` names a head or journal row it cannot read (review round 14's rule).

A stored row that is JSON of the right shape but lacks a field the runtime reads (or holds one of the
wrong type) raised a bare ``KeyError`` / ``TypeError`` / ``ValueError`` out of ``from_stored``: library
callers (``Runner.resume`` on an edited store) got a traceback that named no row, while the stores
already raise ``UnreadableRow`` (a ``StoreError`` naming the table and key) for a row that is not JSON.
Now from_stored raises ``UnreadableRow`` too; the CLI's ``check_loadable`` (cli/heads.py) reads it and
still prints its one line. Rows are edited in memory, synthetically.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

import callbound as cb
from callbound.cli.heads import check_loadable
from callbound.core.errors import StoreError
from callbound.runtime.operation import Operation
from callbound.stores.base import JournalRow, StoredOperation
from callbound.stores.memory import MemoryStore
from callbound.stores.rows import UnreadableRow
from callbound.testing import FakeClock, ScriptedModel
from tests.runtime.helpers import API, calls, fc, refund_tool, write_tool


def _paused() -> tuple[MemoryStore, str, StoredOperation]:
    """An operation waiting for a refund's approval, and its stored rows."""
    store = MemoryStore()
    runner = cb.Runner(
        model=ScriptedModel(API, [calls("r1", fc("c1", "refund", {"order_id": "A1", "amount": 5.0}))]),
        registry=cb.Registry([write_tool(), refund_tool()]),
        store=store,
        clock=FakeClock(),
    )
    out = runner.run_sync("refund A1", tenant="acme", subject="u1")
    assert out.state == cb.State.WAITING_APPROVAL
    stored = store.load_operation(out.operation_id)
    assert stored is not None
    Operation.from_stored(stored, None)  # loads as stored
    return store, out.operation_id, stored


def _with_head(stored: StoredOperation, **changes: Any) -> StoredOperation:
    head = copy.deepcopy(stored.head)
    for key, value in changes.items():
        if value is _DROP:
            del head[key]
        else:
            head[key] = value
    return StoredOperation(head, list(stored.journal))


_DROP = object()


@pytest.mark.parametrize("field", ["api", "tenant", "state", "budgets", "current", "escalation"])
def test_a_head_missing_a_field_is_an_unreadable_row_naming_it(field: str) -> None:
    _, op_id, stored = _paused()
    with pytest.raises(UnreadableRow) as info:
        Operation.from_stored(_with_head(stored, **{field: _DROP}), None)
    assert isinstance(info.value, StoreError)
    assert not isinstance(info.value, KeyError)
    assert (info.value.where, info.value.operation_id) == ("operation row", op_id)
    assert info.value.why == f"it has no {field!r} field"
    assert f"the stored operation row of operation {op_id} cannot be loaded" in str(info.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [("created_at", 5), ("state", "NOT_A_STATE"), ("spent", "x"), ("usage", 5), ("offered", 3)],
)
def test_a_head_field_of_the_wrong_type_is_an_unreadable_row(field: str, value: Any) -> None:
    _, op_id, stored = _paused()
    with pytest.raises(UnreadableRow) as info:
        Operation.from_stored(_with_head(stored, **{field: value}), None)
    assert (info.value.where, info.value.operation_id) == ("operation row", op_id)
    assert info.value.why.startswith("it does not read as an operation (")


def test_a_head_without_its_operation_id_still_names_the_missing_field() -> None:
    _, _, stored = _paused()
    with pytest.raises(UnreadableRow, match="it has no 'operation_id' field") as info:
        Operation.from_stored(_with_head(stored, operation_id=_DROP), None)
    assert info.value.operation_id is None


def test_a_journal_row_missing_a_field_names_its_position() -> None:
    _, op_id, stored = _paused()
    journal = list(stored.journal)
    pos = next(i for i, row in enumerate(journal) if row.kind == "transition" and i > 0)
    data = {k: v for k, v in journal[pos].data.items() if k != "at"}
    journal[pos] = JournalRow("transition", data)
    with pytest.raises(UnreadableRow) as info:
        Operation.from_stored(StoredOperation(stored.head, journal), None)
    assert (info.value.where, info.value.operation_id) == (f"journal pos {pos}", op_id)
    assert info.value.why == "it has no 'at' field"


def test_resume_of_an_edited_head_raises_the_typed_error_not_key_error() -> None:
    store, op_id, stored = _paused()
    store._heads[op_id] = _with_head(stored, api=_DROP).head  # an edit of the stored row
    runner = cb.Runner(
        model=ScriptedModel(API, []),
        registry=cb.Registry([write_tool(), refund_tool()]),
        store=store,
        clock=FakeClock(),
    )
    with pytest.raises(UnreadableRow, match="it has no 'api' field"):
        runner.resume_sync(op_id)


def test_the_cli_check_still_gives_its_one_line_for_such_a_row() -> None:
    _, op_id, stored = _paused()
    message = check_loadable(_with_head(stored, api=_DROP), op_id)
    assert message is not None
    assert message.startswith(
        f"the stored operation row of operation {op_id} cannot be loaded: it has no 'api'"
    )
    # the caller's id is named even when the head has lost its own
    message = check_loadable(_with_head(stored, operation_id=_DROP), op_id)
    assert message is not None and f"of operation {op_id} cannot be loaded" in message
    assert check_loadable(stored, op_id) is None
