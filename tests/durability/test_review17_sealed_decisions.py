"""Approval decisions carry a seal of what they say, made by whoever decides, and a resume acts only on a
decision whose seal verifies (D17, D20; review round 17, r3 F1 and F4).

A pending approval row edited to "approved" in the database (its status column and its document) was
acted on by the next resume: the irreversible refund was paid, and the resume wrote the forged decision
into the audit chain, so `audit verify` passed before and after, with CALLBOUND_AUDIT_KEY set or not.
An approval row added for a call of the turn under work was named by `audit verify`, but a resume only
looked at the rows its call records name and went on waiting. Now both end FAILED(INTEGRITY) before
anything runs, and `audit verify` names the row.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.runtime.verify import verify_store
from callbound.stores import open_store
from tests.runtime.helpers import Counter, calls, fc, final, make, rebuild, refund_tool

KEY = b"s3cr3t-audit-key"


def _paused(tmp_path: Path, key: bytes | None) -> tuple[Any, Any, Counter, Path]:
    db = tmp_path / "cb.db"
    store = open_store(f"sqlite:///{db}")
    refunds = Counter()
    script = [calls("resp_1", fc("call_1", "refund", {"order_id": "A1", "amount": 5.0})), final("resp_2")]
    h = make(script, [refund_tool(refunds)], store=store, audit_key=key)
    out = h.runner.run_sync("Refund A1", tenant="acme", subject="user-1")
    assert out.state == cb.State.WAITING_APPROVAL and refunds.n == 0
    return h, out, refunds, db


def _forge(db: Path, approval_id: str, *, new_id: str | None = None) -> None:
    """Set the row to approved by hand (column and document), or add an approved copy under ``new_id``."""
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT * FROM approvals WHERE approval_id = ?", (approval_id,)).fetchone()
        names = [d[0] for d in conn.execute("SELECT * FROM approvals LIMIT 0").description]
        values = dict(zip(names, row, strict=True))
        doc = json.loads(values["data"])
        doc.update(status="approved", approver="mallory", decided_at=doc["created_at"])
        values.update(status="approved", data=json.dumps(doc))
        if new_id is None:
            conn.execute(
                "UPDATE approvals SET status = ?, data = ? WHERE approval_id = ?",
                ("approved", values["data"], approval_id),
            )
        else:
            doc["approval_id"] = new_id
            values.update(approval_id=new_id, data=json.dumps(doc))
            values.pop("id", None)  # the rowid of the copy is new
            marks = ", ".join("?" for _ in values)
            conn.execute(
                f"INSERT INTO approvals ({', '.join(values)}) VALUES ({marks})", list(values.values())
            )
        conn.commit()
    finally:
        conn.close()


def _findings(store: Any, key: bytes | None) -> list[str]:
    return [f"{p.where}: {p.why}" for p in verify_store(store, key=key)]


@pytest.mark.parametrize("key", [KEY, None], ids=["hmac-key", "no-key"])
def test_a_decision_forged_in_the_database_is_never_acted_on(tmp_path: Path, key: bytes | None) -> None:
    h, out, refunds, db = _paused(tmp_path, key)
    (approval,) = out.pending_approvals
    assert _findings(h.store, key) == []
    _forge(db, approval.approval_id)
    found = _findings(h.store, key)
    assert any(f.startswith(f"approval {approval.approval_id}") and "no valid seal" in f for f in found), (
        found
    )
    h2 = rebuild(h, [refund_tool(refunds)], audit_key=key)
    done = h2.runner.resume_sync(out.operation_id)
    assert (done.state, done.reason, refunds.n) == (cb.State.FAILED, "INTEGRITY", 0)
    assert h2.model.requests == []
    assert _findings(h.store, key), "the forged decision must not be laundered into the chain"


@pytest.mark.parametrize("key", [KEY, None], ids=["hmac-key", "no-key"])
def test_a_decision_recorded_by_another_process_runs_once(tmp_path: Path, key: bytes | None) -> None:
    h, out, refunds, _ = _paused(tmp_path, key)
    (approval,) = out.pending_approvals
    decider = rebuild(h, [refund_tool(refunds)], audit_key=key)
    decided = decider.runner.decide(
        cb.Decision.approve(approval.approval_id, approver="alice"), tenant="acme"
    )
    assert decided.decision_seal is not None
    assert _findings(h.store, key) == []
    h2 = rebuild(h, [refund_tool(refunds)], audit_key=key)
    done = h2.runner.resume_sync(out.operation_id)
    assert (done.state, refunds.n) == (cb.State.COMPLETED, 1)
    assert _findings(h.store, key) == []


def test_a_decision_under_another_audit_key_is_refused_before_it_is_recorded(tmp_path: Path) -> None:
    """Sealed under another key than the chain's, every resume would find it forged: refused at once."""
    h, out, refunds, _ = _paused(tmp_path, KEY)
    (approval,) = out.pending_approvals
    for other in (None, b"another-key"):
        decider = rebuild(h, [refund_tool(refunds)], audit_key=other)
        with pytest.raises(cb.UsageError, match="CALLBOUND_AUDIT_KEY"):
            decider.runner.decide(cb.Decision.approve(approval.approval_id, approver="alice"), tenant="acme")
    stored = h.store.get_approval(approval.approval_id)
    assert stored is not None and stored.status == "pending"


def test_a_resume_with_decisions_seals_them(tmp_path: Path) -> None:
    h, out, refunds, _ = _paused(tmp_path, KEY)
    (approval,) = out.pending_approvals
    h2 = rebuild(h, [refund_tool(refunds)], audit_key=KEY)
    done = h2.runner.resume_sync(
        out.operation_id, [cb.Decision.approve(approval.approval_id, approver="alice")]
    )
    assert (done.state, refunds.n) == (cb.State.COMPLETED, 1)
    stored = h.store.get_approval(approval.approval_id)
    assert stored is not None and stored.decision_seal is not None
    assert _findings(h.store, KEY) == []


def test_an_approval_row_added_for_the_turn_under_work_fails_the_resume(tmp_path: Path) -> None:
    h, out, refunds, db = _paused(tmp_path, KEY)
    (approval,) = out.pending_approvals
    _forge(db, approval.approval_id, new_id="apr_" + "f" * 32)
    h2 = rebuild(h, [refund_tool(refunds)], audit_key=KEY)
    done = h2.runner.resume_sync(out.operation_id)
    assert (done.state, done.reason, refunds.n) == (cb.State.FAILED, "INTEGRITY", 0)
    assert done.escalation is not None and "apr_" + "f" * 32 in done.escalation["detail"]
