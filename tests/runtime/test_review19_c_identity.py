"""Review round 19, c F1: a tenant, subject or operation id of only whitespace is refused with a
``UsageError`` that says what to pass, before anything is stored or asked, as an empty one was. The
empty one was refused; one of only whitespace (``"  "``) was stored and acted for."""

from __future__ import annotations

from typing import Any

import pytest

import callbound as cb

from .helpers import calls, fc, final, get_order_tool, make, refund_tool


@pytest.mark.parametrize(
    "kw",
    [
        {"tenant": "  "},
        {"tenant": "\t\n"},
        {"subject": " "},
        {"subject": "\u3000"},  # an ideographic space is whitespace too
        {"operation_id": "   "},
    ],
)
async def test_a_blank_identity_field_is_refused_before_anything_is_stored(kw: dict[str, Any]) -> None:
    h = make([final("r1")], [get_order_tool()])
    args = {"tenant": "acme", "subject": "user-1", **kw}
    (what,) = kw
    with pytest.raises(cb.UsageError, match=f"{what} is only whitespace") as info:
        await h.runner.run("Where is order A1?", **args)
    assert "; pass " in str(info.value) and ("e.g." in str(info.value) or "None" in str(info.value))
    assert h.model.requests == []  # nothing was asked
    assert h.store.list_operations() == []
    with pytest.raises(cb.UsageError, match="only whitespace"):
        h.runner.submit("Where is order A1?", **args)


async def test_padded_identity_fields_are_still_taken_as_given() -> None:
    h = make([final("r1")], [get_order_tool()])
    out = await h.runner.run("Where is order A1?", tenant=" acme", subject="user-1 ", operation_id=" op-1")
    assert out.state == cb.State.COMPLETED
    assert out.operation_id == " op-1"


async def test_deciding_with_a_blank_tenant_is_refused() -> None:
    h = make([calls("r1", fc("c1", "refund", {"order_id": "A1", "amount": 5.0}))], [refund_tool()])
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    (pending,) = out.pending_approvals
    with pytest.raises(cb.UsageError, match="tenant is only whitespace"):
        h.runner.approve(pending.approval_id, approver="boss", tenant="  ")
