"""Review round 18, c F3: a NUL character where the stores key rows by it is refused up front, the same
on every store, never a StoreError out of ``run`` (D4).

PostgreSQL cannot hold a NUL (``\\x00``) in the text it keys operations, approvals and the ledger by.
An ``intent_key`` built from the model's arguments (``f"refund:{args.order_id}"``, the model sending
``"A1\\u0000"``) made the write's ledger read fail after the paid model turn: StoreError out of
``run()`` as if the database were down, the operation left MODEL_REQUESTED, and every resume paid for
the same turn again; on SQLite and in memory the same key was accepted. A tenant or operation id with a
NUL was a StoreError from PostgreSQL and accepted elsewhere. Now the hook's text names no intent
(HANDLER_ERROR, the handler does not run, as for a lone surrogate) and the caller's ids are a
UsageError before anything is stored, on every store."""

from __future__ import annotations

import pytest

import callbound as cb
from callbound.stores.base import Store

from .helpers import (
    Counter,
    OrderArgs,
    calls,
    error_code,
    fc,
    final,
    last_outputs,
    make,
    refund_tool,
    write_tool,
)


@pytest.fixture
def store(each_store: Store) -> Store:
    return each_store  # memory, SQLite and PostgreSQL (tests/conftest.py)


def intent(args: OrderArgs, ctx: cb.CallContext) -> str:
    return f"note:{args.order_id}"


async def test_an_intent_key_holding_nul_names_no_intent(store: Store) -> None:
    notes = Counter()
    h = make(
        [calls("r1", fc("c1", "set_note", {"order_id": "A1\u0000"})), final("r2")],
        [write_tool(notes, intent_key=intent)],
        store=store,
    )
    out = await h.run()  # was: StoreError on PostgreSQL; the write ran on SQLite and in memory
    assert out.state == cb.State.COMPLETED
    assert notes.n == 0
    result = last_outputs(h.model)["c1"]
    assert error_code(result) == "HANDLER_ERROR"
    assert result["error"]["message"] == "the tool could not name the intent of this call"


@pytest.mark.parametrize("field", ["tenant", "operation_id"])
async def test_a_tenant_or_operation_id_holding_nul_is_a_usage_error(field: str, store: Store) -> None:
    h = make([final("r1")], [write_tool()], store=store)
    kw = {field: "acme\x00" if field == "tenant" else "op\x001"}
    with pytest.raises(cb.UsageError, match="NUL"):
        await h.run(**kw)
    with pytest.raises(cb.UsageError, match="NUL"):
        h.runner.submit("Hi", **{"tenant": "acme", "subject": "u", **kw})
    assert h.model.requests == []
    if field == "operation_id":
        with pytest.raises(cb.UsageError, match="NUL"):
            await h.runner.resume("op\x001")


async def test_a_decision_on_an_approval_id_holding_nul_is_an_unknown_approval(store: Store) -> None:
    """No approval id holds a NUL; PostgreSQL refused the lookup, a StoreError instead of the
    UnknownApproval the other stores give."""
    refund = Counter()
    h = make(
        [calls("r1", fc("c1", "refund", {"order_id": "A1", "amount": 40})), final("r2")],
        [refund_tool(refund)],
        store=store,
    )
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    with pytest.raises(cb.UnknownApproval):
        h.runner.approve("apr_\x001", "alice", tenant="acme")
    with pytest.raises(cb.UnknownApproval):
        await h.runner.resume(out.operation_id, [cb.Decision.approve("apr_\x001", approver="alice")])
    assert h.runner.outcome(out.operation_id).state == cb.State.WAITING_APPROVAL
    assert refund.n == 0
