"""Approvals, review round 13: a redact hook that masks the dict it is given in place must not edit the
call itself (the approved refund failed INTEGRITY and verify reported tampering), and a human's denial
text reaches the model capped as a ToolError's text is (D11: a pasted page went past the result cap)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import callbound as cb
from callbound.runtime.verify import verify_store
from callbound.stores.sqlite import SQLiteStore

from .helpers import Counter, calls, error_code, fc, final, last_outputs, make, refund_tool

REFUND = {"order_id": "A1", "amount": 40.5}


def masks_in_place(arguments: dict[str, Any]) -> dict[str, Any]:
    arguments["order_id"] = "***"  # edits what it was given, then returns it: a common way to write it
    return arguments


async def test_a_redact_hook_that_edits_its_argument_leaves_the_call_as_proposed(tmp_path: Path) -> None:
    paid = Counter()
    store = SQLiteStore(tmp_path / "cb.db")
    h = make(
        [calls("r1", fc("c1", "refund", REFUND)), final("r2")],
        [refund_tool(paid, redact=masks_in_place)],
        store=store,
    )  # type: ignore[arg-type]
    out = await h.run()
    (pending,) = out.pending_approvals
    assert pending.arguments == {"order_id": "***", "amount": 40.5}  # the approver sees the masked copy
    out = await h.runner.resume(
        out.operation_id, [cb.Decision.approve(pending.approval_id, approver="alice")]
    )
    assert out.state == cb.State.COMPLETED, out.reason
    assert paid.calls[0][:2] == ("A1", 40.5)  # the handler got the real arguments
    assert last_outputs(h.model)["c1"]["ok"] is True
    assert verify_store(store) == []
    store.close()


async def test_a_long_denial_reason_is_capped_in_what_the_model_is_told() -> None:
    h = make(
        [calls("r1", fc("c1", "refund", REFUND)), final("r2")],
        [refund_tool()],
        budgets=cb.Budgets(max_result_bytes=1024),
    )
    out = await h.run()
    (pending,) = out.pending_approvals
    reason = "the customer is on a watch list. " * 6000  # about 200 KB pasted into the form
    out = await h.runner.resume(out.operation_id, [cb.Decision.deny(pending.approval_id, "alice", reason)])
    assert out.state == cb.State.COMPLETED
    result = last_outputs(h.model)["c1"]
    assert error_code(result) == "DENIED"
    message = result["error"]["message"]
    assert message.startswith("a human denied this call: the customer is on a watch list.")
    assert len(message) < 600
    assert h.store.get_approval(pending.approval_id).reason == reason  # type: ignore[union-attr]  # kept whole


async def test_an_approval_withdrawn_by_a_stop_on_expiry_says_the_operation_stopped() -> None:
    """Policy(on_approval_expired="stop"): nothing is sent to the model, so the withdrawn approval must
    not say "the model was told APPROVAL_EXPIRED"."""
    from datetime import timedelta

    h = make(
        [calls("r1", fc("c1", "refund", REFUND)), final("r2")],
        [refund_tool()],
        policy=cb.Policy(on_approval_expired="stop"),
    )
    out = await h.run()
    (pending,) = out.pending_approvals
    h.clock.advance(timedelta(days=2).total_seconds())
    out = await h.runner.resume(out.operation_id)
    assert (out.state, out.reason) == (cb.State.STOPPED, "APPROVAL_EXPIRED")
    assert len(h.model.requests) == 1
    stored = h.store.get_approval(pending.approval_id)
    assert stored is not None and stored.status == "withdrawn"
    assert stored.reason is not None and stored.reason.endswith(
        "before anyone decided; the operation stopped STOPPED(APPROVAL_EXPIRED)"
    )
