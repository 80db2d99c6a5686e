"""D21: a handler learns the fencing token of the lease it runs under (CallContext.fence), so a
downstream system can refuse a driver that was frozen past its lease and woke inside the handler after
another driver took the operation over (review 9: a SIGSTOPped resume paid a refund a second time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import callbound as cb
from callbound import stores

from .helpers import RefundArgs, make
from .test_approvals_runtime import refund_script


def fenced_refund(seen: list[int | None]) -> cb.ToolSpec:
    def refund(args: RefundArgs, ctx: cb.CallContext) -> dict[str, Any]:
        seen.append(ctx.fence)
        return {"refund_id": f"rf_{args.order_id}"}

    return cb.ToolSpec(
        name="refund",
        description="Refund an order",
        params=RefundArgs,
        handler=refund,
        schema_version="refund-v1",
        risk="irreversible",
        timeout_ms=2000,
    )


async def test_the_handler_sees_the_current_fencing_token(tmp_path: Path) -> None:
    store = stores.open(f"sqlite:///{tmp_path / 'cb.db'}")
    seen: list[int | None] = []
    h = make(refund_script(), [fenced_refund(seen)], store=store)
    out = await h.run("Refund A1")
    assert out.state == cb.State.WAITING_APPROVAL
    first_drive = store.load_operation(out.operation_id).head["fence"]
    (p,) = out.pending_approvals
    out = await h.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    assert len(seen) == 1 and isinstance(seen[0], int)
    # the resume took the lease again, which moved the token: the handler ran under the newer one
    assert seen[0] > first_drive
    assert seen[0] == store.load_operation(out.operation_id).head["fence"]
    store.close()


def test_a_context_built_by_hand_needs_no_token() -> None:
    assert cb.CallContext("op", "t", "s", "c", "refund", None, None).fence is None
