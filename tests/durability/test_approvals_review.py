"""Approval rules from the fourth acceptance review, against memory, SQLite and PostgreSQL.

- A write that takes an approval out of ``pending`` without being the decision itself (a cancel's or a
  stop's withdrawal, an expiry) takes effect only while the approval is still pending: a decision
  recorded between the writer's read and its commit is never overwritten (the store refuses the commit
  with ``ApprovalChanged``; the cancel or the runtime reads again and reports what happened). The races
  are forced deterministically: the decision is recorded from another connection just before the
  writer's commit reaches the store.
- The operation's own subject may not approve its own call (D17), whatever the case, width or padding
  of the name (compared NFKC-normalised, case-folded, stripped).
- An approval that expired undecided, resolved by telling the model APPROVAL_EXPIRED, is recorded as
  withdrawn (reason: expired) in the same commit, so it is no longer listed as pending
  (docs/durability.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.core.approvals import identity, same_identity
from callbound.core.errors import ApprovalChanged
from callbound.demo.payments import FakePayments
from callbound.runtime.decisions import check_approver
from callbound.runtime.verify import verify_store
from callbound.testing import FakeClock, ScriptedModel

# `stores` is the fixture the tests below take ("as": a re-export, which their parameters do not
# redefine)
from .test_rules_review import (
    API,
    Stores,
    calls,
    fc,
    final,
    outputs_of,
    pay_spec,
    runner,
)
from .test_rules_review import stores as stores

STORES = ["memory", "sqlite", "postgres"]
all_stores = pytest.mark.parametrize("stores", STORES, indirect=True)
PAY = {"order_id": "A1", "amount": "40.00"}


def script() -> list[Any]:
    return [calls("r1", fc("c1", "pay", PAY)), final("r2", "Done.")]


def paused(
    stores: Stores, tmp_path: Path, clock: FakeClock, op_id: str, **kw: Any
) -> tuple[FakePayments, list[cb.ToolSpec], cb.PendingApproval]:
    """An operation of subject customer-1 waiting for the approval of one irreversible payment."""
    payments = FakePayments(str(tmp_path / "payments.db"))
    tools = [pay_spec(payments, risk="irreversible")]
    out = runner(stores.open(), script(), tools, clock=clock, **kw).run_sync(
        "refund", tenant="acme", subject="customer-1", operation_id=op_id
    )
    assert out.state == "WAITING_APPROVAL"
    (pending,) = out.pending_approvals
    return payments, tools, pending


class DecideBeforeCommit:
    """Forwards to a store. Before the first commit that takes ``approval_id`` out of pending (the
    writer read it while pending), ``decide()`` records a decision from another connection: the
    interleaving an approver and a canceller (or a resuming runner) get when their writes cross."""

    def __init__(self, inner: Any, approval_id: str, decide: Callable[[], Any]) -> None:
        self.inner, self.approval_id, self.decide = inner, approval_id, decide
        self.refused: list[ApprovalChanged] = []
        self.decided = False

    def commit(self, commit: Any) -> None:
        if not self.decided and any(
            a.approval_id == self.approval_id and a.status != "pending" for a in commit.approvals
        ):
            self.decided = True
            self.decide()
        try:
            self.inner.commit(commit)
        except ApprovalChanged as exc:
            self.refused.append(exc)
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


# ---- a withdrawal never overwrites a decision -----------------------------------------------------


@all_stores
def test_cancel_crossing_an_approval_keeps_the_decision_and_says_so(stores: Stores, tmp_path: Path) -> None:
    """The reviewer's p3: the cancel reads the approval pending, an approver approves it (and is told
    it was recorded), then the cancel commits. The store refuses the withdrawal; the cancel reads
    again, still ends the operation, keeps the decision and reports it in the escalation."""
    clock = FakeClock()
    payments, tools, pending = paused(stores, tmp_path, clock, "op_cancel_race")
    approver = runner(stores.open(), [], tools, clock=clock)  # another process

    def approve() -> None:
        decided = approver.approve(pending.approval_id, "alice", tenant="acme")
        assert decided.status == "approved"  # the approver is told it was recorded

    spy = DecideBeforeCommit(stores.open(), pending.approval_id, approve)
    out = runner(spy, [], tools, clock=clock).cancel("op_cancel_race", "not needed")

    assert (out.state, out.reason) == ("STOPPED", "CANCELLED")
    assert [e.approval_id for e in spy.refused] == [pending.approval_id]
    assert spy.refused[0].status == "approved"
    kept = stores.open().get_approval(pending.approval_id)
    assert (kept.status, kept.approver) == ("approved", "alice") and kept.decided_at is not None
    assert out.escalation is not None
    assert out.escalation["decided_approvals"] == [
        {"approval_id": pending.approval_id, "status": "approved", "approver": "alice"}
    ]
    assert f"approval {pending.approval_id} was approved by alice" in out.escalation["detail"]
    assert "call does not run" in out.escalation["detail"]
    assert stores.open().list_approvals(operation_id="op_cancel_race") == []  # nothing pending
    with pytest.raises(cb.UsageError):  # ended: the approved call never runs
        runner(stores.open(), script(), tools, clock=clock).resume_sync("op_cancel_race")
    assert payments.count() == 0
    assert verify_store(stores.open(), "op_cancel_race") == []


@all_stores
def test_a_refused_withdrawal_writes_nothing(stores: Stores, tmp_path: Path) -> None:
    """Store contract: a commit that withdraws an approval decided since its writer read it is refused
    whole (head, journal, audit, approvals untouched) and names the approval."""
    clock = FakeClock()
    _, tools, pending = paused(stores, tmp_path, clock, "op_refused")
    store = stores.open()
    canceller = runner(store, [], tools, clock=clock)
    before = store.load_operation("op_refused")
    events = len(store.audit_events("op_refused"))

    stale = canceller._load("op_refused")
    canceller._stop(stale, "CANCELLED", "test")
    commit = stale.take_commit()
    assert [a.status for a in commit.approvals] == ["withdrawn"]
    decided = runner(stores.open(), [], tools, clock=clock).deny(
        pending.approval_id, "bob", tenant="acme", reason="no"
    )
    with pytest.raises(ApprovalChanged, match=pending.approval_id) as refused:
        store.commit(commit)
    assert isinstance(refused.value, cb.StoreError) and refused.value.status == "denied"
    after = stores.open().load_operation("op_refused")
    assert after.head["state"] == "WAITING_APPROVAL" and len(after.journal) == len(before.journal)
    assert len(stores.open().audit_events("op_refused")) == events
    assert stores.open().get_approval(pending.approval_id) == decided


@all_stores
def test_expiry_crossing_a_late_decision_keeps_the_decision(stores: Stores, tmp_path: Path) -> None:
    """The runtime reads an expired approval pending and resolves it as expired; an approver's (late)
    decision lands before that commit. The store refuses it, the runtime reloads and resolves the turn
    from the decision: still APPROVAL_EXPIRED (it came after expires_at), and the decision is kept."""
    clock = FakeClock()
    payments, tools, pending = paused(stores, tmp_path, clock, "op_exp_race")
    clock.advance(timedelta(hours=25).total_seconds())
    approver = runner(stores.open(), [], tools, clock=clock)
    spy = DecideBeforeCommit(
        stores.open(),
        pending.approval_id,
        lambda: approver.approve(pending.approval_id, "alice", tenant="acme"),
    )
    model = ScriptedModel(API, script())
    out = runner(spy, script(), tools, clock=clock, model=model).resume_sync("op_exp_race")

    assert out.state == "COMPLETED"
    assert [e.approval_id for e in spy.refused] == [pending.approval_id]
    assert outputs_of(model.requests[-1])["c1"]["error"]["code"] == "APPROVAL_EXPIRED"
    kept = stores.open().get_approval(pending.approval_id)
    assert (kept.status, kept.approver) == ("approved", "alice")
    assert payments.count() == 0
    assert verify_store(stores.open(), "op_exp_race") == []


@all_stores
def test_not_after_crossing_a_decision_keeps_the_decision(stores: Stores, tmp_path: Path) -> None:
    """D14: not_after ends a waiting operation (its approvals withdrawn). A decision landing between
    the runtime's read and that commit is kept: the stop is written on a fresh read."""
    clock = FakeClock()
    payments = FakePayments(str(tmp_path / "payments.db"))
    tools = [pay_spec(payments, risk="irreversible")]
    budgets = cb.Budgets(not_after=clock.now() + timedelta(hours=1))
    r = cb.Runner(
        model=ScriptedModel(API, script()),
        registry=cb.Registry(tools),
        budgets=budgets,
        store=stores.open(),
        clock=clock,
        settings={"model": "gpt-test"},
    )
    out = r.run_sync("refund", tenant="acme", subject="customer-1", operation_id="op_na_race")
    (pending,) = out.pending_approvals
    clock.advance(2 * 3600)
    approver = runner(stores.open(), [], tools, clock=clock)
    spy = DecideBeforeCommit(
        stores.open(), pending.approval_id, lambda: approver.deny(pending.approval_id, "bob", tenant="acme")
    )
    out = runner(spy, script(), tools, clock=clock).resume_sync("op_na_race")
    assert (out.state, out.reason) == ("STOPPED", "DEADLINE")
    assert len(spy.refused) == 1
    kept = stores.open().get_approval(pending.approval_id)
    assert (kept.status, kept.approver) == ("denied", "bob")
    assert verify_store(stores.open(), "op_na_race") == []


@all_stores
def test_cancel_reports_a_decision_recorded_before_it(stores: Stores, tmp_path: Path) -> None:
    """No race: approved but never resumed, then cancelled. The decision stays as recorded and the
    escalation says the call will not run."""
    clock = FakeClock()
    payments, tools, pending = paused(stores, tmp_path, clock, "op_cancel_after")
    runner(stores.open(), [], tools, clock=clock).approve(pending.approval_id, "alice", tenant="acme")
    out = runner(stores.open(), [], tools, clock=clock).cancel("op_cancel_after")
    assert (out.state, out.reason) == ("STOPPED", "CANCELLED")
    assert out.escalation is not None and out.escalation["decided_approvals"][0]["approver"] == "alice"
    assert stores.open().get_approval(pending.approval_id).status == "approved"
    assert payments.count() == 0


# ---- expired approvals are no longer pending --------------------------------------------------------


@all_stores
@pytest.mark.parametrize("on_expiry", ["tell_model", "stop"])
def test_an_expired_approval_is_withdrawn_when_resolved(
    stores: Stores, tmp_path: Path, on_expiry: str
) -> None:
    """The reviewer's p2: once resume told the model APPROVAL_EXPIRED (or stopped on it), the approval is
    recorded withdrawn with a reason saying it expired, in the same commit; it is not listed as
    pending, and a decision on it is refused."""
    clock = FakeClock()
    policy = cb.Policy(on_approval_expired=on_expiry)  # type: ignore[arg-type]
    payments, tools, pending = paused(stores, tmp_path, clock, "op_expired", policy=policy)
    clock.advance(timedelta(hours=25).total_seconds())
    model = ScriptedModel(API, script())
    out = runner(stores.open(), script(), tools, clock=clock, model=model, policy=policy).resume_sync(
        "op_expired"
    )
    if on_expiry == "stop":
        assert (out.state, out.reason) == ("STOPPED", "APPROVAL_EXPIRED")
    else:
        assert out.state == "COMPLETED"
        assert outputs_of(model.requests[-1])["c1"]["error"]["code"] == "APPROVAL_EXPIRED"
    stored = stores.open().get_approval(pending.approval_id)
    assert stored.status == "withdrawn" and stored.approver is None
    assert stored.reason is not None and "expired" in stored.reason and "APPROVAL_EXPIRED" in stored.reason
    assert stores.open().list_approvals() == []
    assert [a.status for a in stores.open().list_approvals(status=None)] == ["withdrawn"]
    with pytest.raises(cb.UsageError, match="withdrawn"):
        runner(stores.open(), [], tools, clock=clock).approve(pending.approval_id, "alice", tenant="acme")
    assert payments.count() == 0
    assert verify_store(stores.open(), "op_expired") == []


@all_stores
def test_an_unexpired_pending_approval_stays_pending_on_resume(stores: Stores, tmp_path: Path) -> None:
    """Control: resuming before expiry without a decision changes nothing."""
    clock = FakeClock()
    _, tools, pending = paused(stores, tmp_path, clock, "op_still")
    clock.advance(3600)
    out = runner(stores.open(), script(), tools, clock=clock).resume_sync("op_still")
    assert out.state == "WAITING_APPROVAL"
    assert stores.open().get_approval(pending.approval_id).status == "pending"


# ---- self-approval compares identities ----------------------------------------------------------------

SAME_AS_CUSTOMER_1 = [
    "CUSTOMER-1",
    "Customer-1",
    " customer-1\t",
    "\u00a0customer-1",  # no-break space: NFKC makes it a space, then stripped
    "\uff43\uff55\uff53\uff54\uff4f\uff4d\uff45\uff52\uff0d\uff11",  # full width
    "customer-\uff11",  # a full-width digit one
]


@pytest.mark.parametrize("name", SAME_AS_CUSTOMER_1)
def test_identity_folds_case_width_and_padding(name: str) -> None:
    assert identity(name) == "customer-1"
    assert same_identity(name, "customer-1")


def test_identity_folds_what_casefold_adds() -> None:
    assert same_identity("STRASSE", "straße") and same_identity("ﬁle", "FILE")
    assert not same_identity("customer-1", "customer-2")
    assert not same_identity(None, "customer-1") and not same_identity("x", None)


@all_stores
@pytest.mark.parametrize("name", SAME_AS_CUSTOMER_1)
def test_the_subject_may_not_approve_under_another_spelling(
    stores: Stores, tmp_path: Path, name: str
) -> None:
    """The reviewer's p4: `--approver CUSTOMER-1` approved an operation of subject customer-1."""
    clock = FakeClock()
    _, tools, pending = paused(stores, tmp_path, clock, "op_self")
    with pytest.raises(cb.ApproverNotAllowed):
        runner(stores.open(), [], tools, clock=clock).approve(pending.approval_id, name, tenant="acme")
    assert stores.open().get_approval(pending.approval_id).status == "pending"
    allowed = cb.Policy(allow_self_approval=True)
    decided = runner(stores.open(), [], tools, clock=clock, policy=allowed).approve(
        pending.approval_id, name, tenant="acme"
    )
    assert decided.status == "approved"


def test_check_approver_compares_identities() -> None:
    a = cb.PendingApproval(
        approval_id="apr_1",
        operation_id="op_1",
        tenant="acme",
        subject="Customer-1 ",
        response_id="r1",
        call_id="c1",
        tool="pay",
        arguments=None,
        argument_digest="0" * 64,
        policy_revision="1",
        schema_version="v1",
        tool_digest="0" * 64,
        created_at=FakeClock().now(),
        expires_at=FakeClock().now() + timedelta(hours=1),
    )
    for name in SAME_AS_CUSTOMER_1:
        with pytest.raises(cb.ApproverNotAllowed):
            check_approver(cb.Policy(), name, a)
    check_approver(cb.Policy(), "customer-2", a)
    check_approver(cb.Policy(allow_self_approval=True), "CUSTOMER-1", a)
    with pytest.raises(cb.ApproverNotAllowed):  # an unusual subject spelling folds too
        check_approver(cb.Policy(), "customer-1", replace(a, subject="\uff23USTOMER-1"))


@all_stores
def test_resume_rechecks_the_approver_by_identity(stores: Stores, tmp_path: Path) -> None:
    """A self-approval recorded through a lax policy, resumed under the strict default: DENIED, not
    run (issue 2 §6), also when the name differs from the subject only in case."""
    clock = FakeClock()
    payments, tools, pending = paused(stores, tmp_path, clock, "op_recheck")
    lax = cb.Policy(allow_self_approval=True)
    runner(stores.open(), [], tools, clock=clock, policy=lax).approve(
        pending.approval_id, "CUSTOMER-1", tenant="acme"
    )
    model = ScriptedModel(API, script())
    out = runner(stores.open(), script(), tools, clock=clock, model=model).resume_sync("op_recheck")
    assert out.state == "COMPLETED"
    assert outputs_of(model.requests[-1])["c1"]["error"]["code"] == "DENIED"
    assert payments.count() == 0


@all_stores
def test_the_same_decision_by_the_same_identity_returns_the_original(stores: Stores, tmp_path: Path) -> None:
    """D17 single use: "Alice" repeating alice's approval is the same approver, so she gets the
    original decision back rather than ApprovalAlreadyDecided; someone else still gets the error."""
    clock = FakeClock()
    _, tools, pending = paused(stores, tmp_path, clock, "op_same")
    first = runner(stores.open(), [], tools, clock=clock).approve(pending.approval_id, "alice", tenant="acme")
    clock.advance(60)
    again = runner(stores.open(), [], tools, clock=clock).approve(pending.approval_id, "ALICE", tenant="acme")
    assert again == first
    with pytest.raises(cb.ApprovalAlreadyDecided):
        runner(stores.open(), [], tools, clock=clock).approve(pending.approval_id, "bob", tenant="acme")
