"""Results saved before an approval pause are recomputed from trusted context when a resume loads them,
and by ``audit verify`` (D10, D20; review round 17, r2 F1 and F4).

A mixed turn runs its read and saves the envelope; its refund waits for approval. The chain's ``sealed``
entry records each saved binding, and the resume held the stored binding to it, but not the result to
the binding: a result edited in the database with its binding left alone passed, the approved refund
ran, and only RESULTS_READY's recomputation ended the operation FAILED(INTEGRITY), after the payment.
``audit verify`` found nothing, before or after. The same held for the record's copies of its trusted
context (tenant, handler, policy revision), which C2 writes into the chain's ``result`` entry.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.runtime.verify import verify_store
from callbound.stores import open_store

from .helpers import Counter, calls, fc, final, get_order_tool, make, rebuild, refund_tool

Edit = Callable[[dict[str, Any]], None]


def _script() -> list[Any]:
    return [
        calls(
            "resp_1",
            fc("call_1", "get_order", {"order_id": "A1"}),
            fc("call_2", "refund", {"order_id": "A1", "amount": 5.0}),
        ),
        final("resp_2"),
    ]


def _result(env: dict[str, Any]) -> None:
    env["model_result"]["data"] = {"order_id": "A1", "status": "refund pre-approved"}


def _copies(env: dict[str, Any]) -> None:
    env["protected_audit"].update(tenant="other", handler="evil:h", policy_revision="99")


def _policy_revision(env: dict[str, Any]) -> None:
    env["protected_audit"]["policy_revision"] = "99"


def _result_and_hash(env: dict[str, Any]) -> None:
    # the result's own digest recomputed too, the binding left alone
    from callbound.core.canonical import canonical_sha256

    _result(env)
    env["protected_audit"]["result_sha256"] = canonical_sha256(env["model_result"])


EDITS = {"result": _result, "copies": _copies, "policy_revision": _policy_revision, "hash": _result_and_hash}


def _edit_sqlite(db: Path, operation_id: str, edit: Edit) -> None:
    conn = sqlite3.connect(db)
    try:
        (text,) = conn.execute("SELECT head FROM operations WHERE operation_id=?", (operation_id,)).fetchone()
        head = json.loads(text)
        edit(next(r for r in head["current"]["records"] if r["tool"] == "get_order")["envelope"])
        conn.execute("UPDATE operations SET head=? WHERE operation_id=?", (json.dumps(head), operation_id))
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize("name", EDITS)
def test_an_edited_saved_result_fails_the_resume_before_the_approved_refund(
    name: str, tmp_path: Path
) -> None:
    db = tmp_path / "cb.db"
    store = open_store(f"sqlite:///{db}")
    reads, refunds = Counter(), Counter()
    h = make(_script(), [get_order_tool(reads), refund_tool(refunds)], store=store)
    out = h.runner.run_sync("Refund A1", tenant="acme", subject="user-1")
    assert out.state == cb.State.WAITING_APPROVAL and reads.n == 1
    assert verify_store(store) == []  # the negative control: nothing edited yet
    _edit_sqlite(db, out.operation_id, EDITS[name])
    found = verify_store(store)
    assert found and all(p.where == "result call_1 (response resp_1)" for p in found), found
    (approval,) = out.pending_approvals
    h2 = rebuild(h, [get_order_tool(reads), refund_tool(refunds)])
    done = h2.runner.resume_sync(
        out.operation_id, [cb.Decision.approve(approval.approval_id, approver="alice")]
    )
    assert (done.state, done.reason) == (cb.State.FAILED, "INTEGRITY")
    assert refunds.n == 0 and reads.n == 1 and h2.model.requests == []
    assert done.escalation is not None
    assert "result call_1 (response resp_1)" in done.escalation["detail"]
    assert done.escalation["call_ids"] == ["call_1", "call_2"]  # the escalation names the turn's calls
    assert verify_store(store), "still named after the resume"


def test_an_untouched_pause_resumes_and_refunds_once(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'cb.db'}")
    reads, refunds = Counter(), Counter()
    h = make(_script(), [get_order_tool(reads), refund_tool(refunds)], store=store)
    out = h.runner.run_sync("Refund A1", tenant="acme", subject="user-1")
    (approval,) = out.pending_approvals
    h2 = rebuild(h, [get_order_tool(reads), refund_tool(refunds)])
    done = h2.runner.resume_sync(
        out.operation_id, [cb.Decision.approve(approval.approval_id, approver="alice")]
    )
    assert done.state == cb.State.COMPLETED and refunds.n == 1 and reads.n == 1
    assert verify_store(store) == []


@pytest.mark.parametrize("name", ["result", "copies"])
async def test_the_memory_store_is_held_to_the_same(name: str) -> None:
    reads, refunds = Counter(), Counter()
    h = make(_script(), [get_order_tool(reads), refund_tool(refunds)])
    out = await h.run()
    EDITS[name](h.store._heads[out.operation_id]["current"]["records"][0]["envelope"])
    (approval,) = out.pending_approvals
    h2 = rebuild(h, [get_order_tool(reads), refund_tool(refunds)])
    done = await h2.runner.resume(out.operation_id, [cb.Decision.approve(approval.approval_id, approver="a")])
    assert (done.state, done.reason, refunds.n) == (cb.State.FAILED, "INTEGRITY", 0)
