"""What an auditor or approver reads is held to the audit chain, not only the bindings (D17, D20).

Issue 4 ("Done when"): changing any audit row or stored result makes ``audit verify`` fail and name it.
- A stored result's audit record (``protected_audit``) repeats its trusted context (tenant, subject,
  tool, operation, call, provider) and keeps the call's input and the handler's output. Those copies
  were checked nowhere: a refund could be shown under another tenant, as another tool, for another
  amount, and verify said intact. The copies are now compared with the trusted context, and the chain
  records digests of input and output, so those payloads can be purged (null, D20) but not changed.
- An approval row shows the approver the (redacted) arguments. Editing only those, say the amount, left
  digest and call untouched: the approver approved 1.00 and 995.00 was paid. The chain now records a
  digest of what the approval shows; deciding such a row is refused, a resume fails INTEGRITY before
  anything runs, and verify names the row.

Edits are SQL on the SQLite file, as anyone who can write to the database could; each has an untouched
control.
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

from .helpers import Counter
from .test_integrity_review import edit_approval, edit_journal, named, refund_flow, resume_approved

Doc = dict[str, Any]


def _completed(tmp_path: Path) -> tuple[Any, Path, str, Counter]:
    h, out, refunds, db = refund_flow(tmp_path)
    h2, done = resume_approved(h, out, refunds)
    assert done.state == cb.State.COMPLETED and refunds.n == 1
    assert verify_store(h.store) == []
    return h2, db, out.operation_id, refunds


def _audit_record(change: Callable[[Doc], None]) -> Callable[[Doc], None]:
    def edit(row: Doc) -> None:
        (env,) = [e for e in row["envelopes"] if e is not None and e["call_id"] == "call_2"]
        change(env["protected_audit"])

    return edit


EDITS = {
    "tenant": lambda p: p.update(tenant="globex"),
    "subject": lambda p: p.update(subject="someone-else"),
    "tool": lambda p: p.update(tool="get_order"),
    "operation_id": lambda p: p.update(operation_id="op_other"),
    "input": lambda p: p.update(input=json.dumps({"amount": 4.0, "order_id": "B7"})),
    "output": lambda p: p.update(output={"refund_id": "rf_FORGED", "amount": 5.0}),
}


@pytest.mark.parametrize("field", list(EDITS))
def test_an_edited_audit_record_of_a_result_is_named(tmp_path: Path, field: str) -> None:
    h, db, op, _ = _completed(tmp_path)
    edit_journal(db, op, "results", _audit_record(EDITS[field]))
    assert named(verify_store(h.store), "result call_2", f"its audit record's {field} differs")


def test_purged_payloads_still_verify(tmp_path: Path) -> None:
    h, db, op, _ = _completed(tmp_path)
    edit_journal(db, op, "results", _audit_record(lambda p: p.update(input=None, output=None)))
    assert verify_store(h.store) == []


def _paused(tmp_path: Path) -> tuple[Any, cb.Outcome, Counter, Path]:
    h, out, refunds, db = refund_flow(tmp_path)
    return h, out, refunds, db


def _shown(amount: float) -> Callable[[Doc], None]:
    def edit(d: Doc) -> None:
        d["arguments"] = {**d["arguments"], "amount": amount}

    return edit


def test_an_approval_showing_other_arguments_cannot_be_decided_nor_run(tmp_path: Path) -> None:
    h, out, refunds, db = _paused(tmp_path)
    (p,) = out.pending_approvals
    edit_approval(db, p.approval_id, _shown(1.0))
    assert named(
        verify_store(h.store), f"approval {p.approval_id}", "the arguments it shows the approver differ"
    )
    with pytest.raises(cb.UsageError, match="differs from its audited request"):
        h.runner.decide(cb.Decision.approve(p.approval_id, approver="alice"), tenant="acme")
    _, after = resume_approved(h, out, refunds)
    assert (after.state, after.reason) == (cb.State.FAILED, "INTEGRITY")
    assert refunds.n == 0


def test_control_an_untouched_approval_is_decided_and_runs(tmp_path: Path) -> None:
    h, out, refunds, _ = _paused(tmp_path)
    (p,) = out.pending_approvals
    h.runner.decide(cb.Decision.approve(p.approval_id, approver="alice"), tenant="acme")
    _, after = resume_approved(h, out, refunds)
    assert after.state == cb.State.COMPLETED and refunds.n == 1
    with sqlite3.connect(tmp_path / "cb.db") as conn:
        assert conn.execute("SELECT count(*) FROM approvals").fetchone() == (1,)


def test_an_approval_of_an_operation_saved_by_a_newer_callbound_is_not_decided(tmp_path: Path) -> None:
    """As resume, cancel and verify refuse such an operation (D19): this version cannot act on it, so a
    decision recorded now would be reported as done though nothing of this version can resume it."""
    from .test_integrity_review import edit_head

    h, out, _, db = _paused(tmp_path)
    (p,) = out.pending_approvals
    edit_head(db, out.operation_id, lambda d: d.update(snapshot_version=d["snapshot_version"] + 1))
    with pytest.raises(cb.UsageError, match="newer callbound"):
        h.runner.decide(cb.Decision.approve(p.approval_id, approver="alice"), tenant="acme")
    stored = h.store.get_approval(p.approval_id)
    assert stored is not None and stored.status == "pending"
