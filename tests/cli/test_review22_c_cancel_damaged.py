"""``callbound ops cancel`` ends an operation whose approval row is damaged (review round 22, c).

Cancel is the escape hatch: an operation whose approval row does not load (not JSON, the wrong shape,
a field missing, another approval's document copied in) can neither be resumed nor decided. Before,
cancelling it failed too (``withdraw_pending`` read the row to withdraw it: ``UnreadableRow``, exit 2),
and only a restore from a backup was left. Now the cancel ends it ``STOPPED(CANCELLED)`` as always; the
damaged row is left as it is (the evidence: ``approvals list`` lists it ``DAMAGED``, ``audit verify``
reports it) and the escalation record says which approval could not be read and why
(``unreadable_approvals``). Every other path still fails closed on such a row: a resume or a decision
exits 2, now saying that a cancel ends the operation. MemoryStore keeps objects, which cannot be damaged;
a store that raises ``UnreadableRow`` for one approval stands in for it there."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from callbound.core.approvals import PendingApproval
from callbound.demo.refund import make_app
from callbound.stores import open as open_store
from callbound.stores.memory import MemoryStore
from callbound.stores.rows import UnreadableRow
from tests.cli.test_review21_b_damaged_listed import damage, kinds, run, three_paused


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'cb.db'}"
        return
    from tests.stores.conftest import PgSchema

    schema = PgSchema()
    try:
        yield schema.url
    finally:
        schema.drop()


def raw_row(url: str, approval_id: str) -> Any:
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as c:
            return c.execute("SELECT data FROM approvals WHERE approval_id = ?", (approval_id,)).fetchone()
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        return c.execute("SELECT data::text FROM approvals WHERE approval_id = %s", (approval_id,)).fetchone()


def damages(url: str, other: str) -> list[str]:
    """The kinds of damage: those of round 21, and another approval's document copied in."""
    (copied,) = raw_row(url, other)
    return [*kinds(url), copied if isinstance(copied, str) else json.dumps(copied)]


@pytest.mark.parametrize("kind", range(4))
def test_ops_cancel_ends_an_operation_whose_approval_row_is_damaged(
    url: str, tmp_path: Path, kind: int
) -> None:
    st = open_store(url)
    (op0, apr0, _), (op1, apr1, _), (op2, apr2, _) = three_paused(st, tmp_path)
    st.close()
    values = damages(url, apr0)
    if kind >= len(values):
        pytest.skip("text that is not JSON: PostgreSQL's json column refuses it")
    damage(url, "approvals", apr1, values[kind])
    before = raw_row(url, apr1)

    # the other ways on still fail closed, and say that a cancel ends the operation
    r = run("resume", op1, "--store", url)
    assert r.exit_code == 2 and apr1 in r.stderr and f"callbound ops cancel {op1}" in r.stderr, r.stderr
    r = run("approvals", "approve", apr1, "--approver", "alice", "--store", url)
    assert r.exit_code == 2 and apr1 in r.stderr and "callbound ops cancel" in r.stderr, r.stderr
    r = run("approvals", "list", "--store", url)
    assert r.exit_code == 0 and f"callbound ops cancel {op1}" in r.stderr, r.stderr

    r = run("ops", "cancel", op1, "--store", url)
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert "STOPPED" in r.stdout and "CANCELLED" in r.stdout and apr1 in r.stdout, r.stdout

    r = run("ops", "show", op1, "--json", "--store", url)
    assert r.exit_code == 0, (r.stderr, r.exception)
    shown = json.loads(r.stdout)
    head = shown.get("head", shown)
    assert head["state"] == "STOPPED" and head["reason"] == "CANCELLED"
    (unread,) = head["escalation"]["unreadable_approvals"]
    assert unread["approval_id"] == apr1 and unread["why"]
    assert apr1 in head["escalation"]["detail"] and "could not be read" in head["escalation"]["detail"]

    # the damaged row stays as it was, listed as damaged; the other operations are untouched
    assert raw_row(url, apr1) == before
    r = run("approvals", "list", "--all", "--json", "--store", url)
    assert r.exit_code == 0, (r.stderr, r.exception)
    listed = {a["approval_id"]: a for a in json.loads(r.stdout)}
    assert listed[apr1]["damaged"] and listed[apr0]["status"] == listed[apr2]["status"] == "pending"
    assert "has ended STOPPED" in r.stderr, r.stderr
    for op in (op0, op2):
        r = run("ops", "show", op, "--json", "--store", url)
        shown = json.loads(r.stdout)
        assert shown.get("head", shown)["state"] == "WAITING_APPROVAL"
    # audit verify still reports the row (exit 1), as before the cancel
    r = run("audit", "verify", op1, "--store", url)
    assert r.exit_code == 1 and apr1 in r.stdout + r.stderr, (r.stdout, r.stderr)
    # a second cancel says the operation has ended (exit 2), as for any ended operation
    r = run("ops", "cancel", op1, "--store", url)
    assert r.exit_code == 2 and "already STOPPED" in r.stderr, r.stderr


class OneUnreadable(MemoryStore):
    """A MemoryStore whose one approval reads as a damaged row would."""

    def __init__(self) -> None:
        super().__init__()
        self.bad: str | None = None

    def get_approval(self, approval_id: str) -> PendingApproval | None:
        if approval_id == self.bad:
            raise UnreadableRow(f"approval {approval_id}", "it holds an array where a JSON object belongs")
        return super().get_approval(approval_id)


def test_runner_cancel_reads_around_an_unreadable_approval(tmp_path: Path) -> None:
    st = OneUnreadable()
    payments = str(tmp_path / "pay.db")
    runner = make_app(payments=payments).runner(st)
    o = runner.run_sync(input="refund A1", tenant="acme", subject="customer-1")
    (pending,) = o.pending_approvals
    st.bad = pending.approval_id
    with pytest.raises(UnreadableRow):  # a resume never skips it
        runner.resume_sync(o.operation_id)
    out = runner.cancel(o.operation_id)
    assert (out.state, out.reason) == ("STOPPED", "CANCELLED")
    assert out.escalation is not None
    assert out.escalation["unreadable_approvals"] == [
        {"approval_id": pending.approval_id, "why": "it holds an array where a JSON object belongs"}
    ]
    assert out.escalation["decided_approvals"] == []
    st.bad = None
    # left as it was: not withdrawn (the store could not read it to withdraw it)
    kept = st.get_approval(pending.approval_id)
    assert kept is not None and kept.status == "pending"


def test_a_healthy_cancel_keeps_its_escalation_shape(tmp_path: Path) -> None:
    st = MemoryStore()
    runner = make_app(payments=str(tmp_path / "pay.db")).runner(st)
    o = runner.run_sync(input="refund A1", tenant="acme", subject="customer-1")
    out = runner.cancel(o.operation_id)
    assert out.escalation is not None
    assert "unreadable_approvals" not in out.escalation and "decided_approvals" not in out.escalation
    (a,) = o.pending_approvals
    withdrawn = st.get_approval(a.approval_id)
    assert withdrawn is not None and withdrawn.status == "withdrawn"
