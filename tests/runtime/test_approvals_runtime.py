"""Approvals in the running loop (D3, D17): pause, decide, resume, re-validate, single use."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import callbound as cb
from callbound.core.audit import audit_entries
from callbound.core.canonical import canonical_json, sha256_hex
from callbound.core.ids import RandomIds
from callbound.testing import FakeClock, ScriptedModel

from .helpers import (
    Counter,
    Harness,
    OrderArgs,
    calls,
    error_code,
    fc,
    final,
    get_order_tool,
    last_outputs,
    make,
    outputs,
    rebuild,
    refund_tool,
    states,
    write_tool,
)

REFUND = {"order_id": "A1", "amount": 40.0}


def refund_script(*more: Any) -> list[Any]:
    return [calls("resp_1", fc("call_1", "refund", REFUND)), *more, final("resp_9", "Refunded.")]


async def paused(
    counter: Counter | None = None, *, script: list[Any] | None = None, **kw: Any
) -> tuple[Harness, cb.Outcome]:
    tools = kw.pop("tools", None) or [refund_tool(counter), get_order_tool()]
    h = make(script or refund_script(), tools, **kw)
    out = await h.run("Refund A1")
    assert out.state == cb.State.WAITING_APPROVAL
    return h, out


async def test_irreversible_waits_for_approval_with_a_complete_record() -> None:
    refunds = Counter()
    h, out = await paused(refunds, ids=RandomIds())
    assert out.reason is None and out.escalation is None
    assert refunds.n == 0
    assert len(h.model.requests) == 1
    (p,) = out.pending_approvals
    prefix, _, hexpart = p.approval_id.partition("_")
    assert prefix == "apr" and len(hexpart) >= 32 and int(hexpart, 16) >= 2**64  # >= 128 random bits
    assert p.operation_id == out.operation_id and p.tenant == "acme" and p.subject == "user-1"
    assert (p.response_id, p.call_id, p.tool) == ("resp_1", "call_1", "refund")
    assert p.arguments == REFUND
    assert p.argument_digest == sha256_hex(canonical_json(REFUND))
    assert p.policy_revision == "1"
    assert p.schema_version == "refund-v1"
    assert p.created_at == h.clock.now()
    assert p.expires_at == p.created_at + timedelta(hours=24)
    assert p.status == "pending"
    # the store lists it too, and the default approval ids differ
    assert [a.approval_id for a in h.store.list_approvals(operation_id=out.operation_id)] == [p.approval_id]
    _, out2 = await paused(ids=RandomIds())
    assert out2.pending_approvals[0].approval_id != p.approval_id


async def test_default_runner_approval_ids_carry_128_random_bits() -> None:
    """No id source given: the Runner's default must be random, not sequential."""
    model = ScriptedModel("openai-responses", refund_script())
    runner = cb.Runner(model=model, registry=cb.Registry([refund_tool()]), clock=FakeClock())
    ids = set()
    for _ in range(3):
        out = await runner.run("Refund A1", tenant="acme", subject="user-1")
        (p,) = out.pending_approvals
        hexpart = p.approval_id.split("_", 1)[1]
        assert len(hexpart) >= 32
        assert int(hexpart, 16) >= 2**64  # a counter would not get here; 128 random bits do (p = 1 - 2**-64)
        ids.add(p.approval_id)
        assert out.operation_id not in p.approval_id
    assert len(ids) == 3


async def test_policy_ttl_sets_expiry() -> None:
    _, out = await paused(policy=cb.Policy(approval_ttl=timedelta(minutes=5)))
    (p,) = out.pending_approvals
    assert p.expires_at - p.created_at == timedelta(minutes=5)


async def test_requires_approval_overrides_risk() -> None:
    refunds, reads = Counter(), Counter()
    tools = [refund_tool(refunds, requires_approval=False), get_order_tool(reads, requires_approval=True)]
    script = [
        calls("resp_1", fc("call_1", "refund", REFUND)),
        calls("resp_2", fc("call_2", "get_order", {"order_id": "A1"})),
        final("resp_3"),
    ]
    h = make(script, tools)
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    assert refunds.n == 1 and reads.n == 0
    assert out.pending_approvals[0].tool == "get_order"


async def test_write_tools_do_not_need_approval_by_default() -> None:
    notes = Counter()
    h = make(
        [calls("resp_1", fc("call_1", "set_note", {"order_id": "A1"})), final("resp_2")], [write_tool(notes)]
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED and notes.n == 1


async def test_approve_runs_the_call() -> None:
    refunds = Counter()
    h, out = await paused(refunds)
    (p,) = out.pending_approvals
    out = await h.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED and out.text == "Refunded."
    assert refunds.n == 1
    assert last_outputs(h.model)["call_1"]["ok"] is True
    assert out.pending_approvals == ()
    stored = h.store.get_approval(p.approval_id)
    assert stored is not None and stored.status == "approved" and stored.approver == "alice"
    assert "WAITING_APPROVAL" in states(out)


async def test_deny_tells_the_model_denied() -> None:
    refunds = Counter()
    h, out = await paused(refunds)
    (p,) = out.pending_approvals
    decision = cb.Decision.deny(p.approval_id, approver="alice", reason="amount too high")
    out = await h.runner.resume(out.operation_id, [decision])
    assert out.state == cb.State.COMPLETED
    res = last_outputs(h.model)["call_1"]
    assert error_code(res) == "DENIED"
    assert "amount too high" in res["error"]["message"]
    assert refunds.n == 0


async def test_resume_without_a_decision_keeps_waiting() -> None:
    refunds = Counter()
    h, out = await paused(refunds)
    again = await h.runner.resume(out.operation_id)
    assert again.state == cb.State.WAITING_APPROVAL
    assert again.pending_approvals == out.pending_approvals
    assert refunds.n == 0 and len(h.model.requests) == 1


async def test_expired_approval_is_told_to_the_model_and_never_runs() -> None:
    refunds = Counter()
    h, out = await paused(refunds)
    h.clock.advance(24 * 3600 + 1)
    out = await h.runner.resume(out.operation_id)
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["call_1"]) == "APPROVAL_EXPIRED"
    assert refunds.n == 0


async def test_approval_given_after_expiry_is_still_expired() -> None:
    refunds = Counter()
    h, out = await paused(refunds)
    (p,) = out.pending_approvals
    h.clock.advance(24 * 3600)  # exactly at expires_at
    out = await h.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["call_1"]) == "APPROVAL_EXPIRED"
    assert refunds.n == 0


async def test_expiry_policy_stop() -> None:
    refunds = Counter()
    h, out = await paused(refunds, policy=cb.Policy(on_approval_expired="stop"))
    h.clock.advance(25 * 3600)
    out = await h.runner.resume(out.operation_id)
    assert out.state == cb.State.STOPPED and out.reason == "APPROVAL_EXPIRED"
    assert out.escalation is not None and out.escalation["reason"] == "APPROVAL_EXPIRED"
    assert refunds.n == 0
    assert len(h.model.requests) == 1


async def test_changed_policy_revision_is_stale() -> None:
    refunds = Counter()
    h, out = await paused(refunds)
    (p,) = out.pending_approvals
    h2 = rebuild(h, [refund_tool(refunds), get_order_tool()], policy=cb.Policy(revision="2"))
    out = await h2.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h2.model)["call_1"]) == "APPROVAL_STALE"
    assert refunds.n == 0


async def test_changed_schema_version_is_stale() -> None:
    refunds = Counter()
    h, out = await paused(refunds)
    (p,) = out.pending_approvals
    h2 = rebuild(h, [refund_tool(refunds, schema_version="refund-v2"), get_order_tool()])
    out = await h2.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h2.model)["call_1"]) == "APPROVAL_STALE"
    assert refunds.n == 0


async def test_tool_removed_while_waiting_is_stale() -> None:
    h, out = await paused()
    (p,) = out.pending_approvals
    h2 = rebuild(h, [get_order_tool()])
    out = await h2.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h2.model)["call_1"]) == "APPROVAL_STALE"


async def test_authorization_is_checked_again_on_resume() -> None:
    refunds = Counter()
    h, out = await paused(refunds)
    (p,) = out.pending_approvals
    h2 = rebuild(
        h,
        [refund_tool(refunds), get_order_tool()],
        policy=cb.Policy(authorize=lambda spec, args, ctx: spec.name != "refund"),
    )
    out = await h2.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h2.model)["call_1"]) == "DENIED"
    assert refunds.n == 0


# ---- who may decide -------------------------------------------------------------------------------


async def test_self_approval_is_refused() -> None:
    refunds = Counter()
    h, out = await paused(refunds)
    (p,) = out.pending_approvals
    with pytest.raises(cb.ApproverNotAllowed):
        await h.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="user-1")])
    assert isinstance(cb.ApproverNotAllowed("x"), cb.UsageError)
    stored = h.store.get_approval(p.approval_id)
    assert stored is not None and stored.status == "pending"
    assert refunds.n == 0
    assert h.runner.outcome(out.operation_id).state == cb.State.WAITING_APPROVAL


async def test_self_approval_allowed_by_policy() -> None:
    refunds = Counter()
    h, out = await paused(refunds, policy=cb.Policy(allow_self_approval=True))
    (p,) = out.pending_approvals
    out = await h.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="user-1")])
    assert out.state == cb.State.COMPLETED and refunds.n == 1


@pytest.mark.parametrize("hook_result", ["deny", "raise"])
async def test_approver_hook_denies(hook_result: str) -> None:
    seen: list[tuple[str, str]] = []

    def hook(approver: str, approval: cb.PendingApproval) -> bool:
        seen.append((approver, approval.tool))
        if hook_result == "raise":
            raise RuntimeError("directory down")
        return approver == "manager"

    refunds = Counter()
    h, out = await paused(refunds, policy=cb.Policy(approver_allowed=hook))
    (p,) = out.pending_approvals
    with pytest.raises(cb.ApproverNotAllowed):
        await h.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="intern")])
    assert seen == [("intern", "refund")]
    assert refunds.n == 0
    if hook_result == "deny":
        out = await h.runner.resume(
            out.operation_id, [cb.Decision.approve(p.approval_id, approver="manager")]
        )
        assert out.state == cb.State.COMPLETED and refunds.n == 1


# ---- single use -----------------------------------------------------------------------------------


async def test_same_decision_again_is_a_no_op_returning_the_original() -> None:
    refunds = Counter()
    h, out = await paused(refunds)
    (p,) = out.pending_approvals
    first = h.runner.decide(cb.Decision.approve(p.approval_id, approver="alice"), tenant="acme")
    h.clock.advance(60)
    second = h.runner.decide(cb.Decision.approve(p.approval_id, approver="alice"), tenant="acme")
    assert second == first
    assert second.decided_at == first.decided_at
    # resuming with the same decision once more is fine too
    out = await h.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED and refunds.n == 1


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(lambda aid: cb.Decision.deny(aid, approver="alice"), id="other_verdict"),
        pytest.param(lambda aid: cb.Decision.approve(aid, approver="bob"), id="other_approver"),
    ],
)
async def test_a_different_decision_is_refused(other: Any) -> None:
    refunds = Counter()
    h, out = await paused(refunds)
    (p,) = out.pending_approvals
    h.runner.decide(cb.Decision.approve(p.approval_id, approver="alice"), tenant="acme")
    with pytest.raises(cb.ApprovalAlreadyDecided):
        await h.runner.resume(out.operation_id, [other(p.approval_id)])
    stored = h.store.get_approval(p.approval_id)
    assert stored is not None and stored.status == "approved" and stored.approver == "alice"
    out = await h.runner.resume(out.operation_id)
    assert out.state == cb.State.COMPLETED and refunds.n == 1


async def test_decision_after_the_operation_finished_cannot_change_it() -> None:
    h, out = await paused()
    (p,) = out.pending_approvals
    op_id = out.operation_id
    out = await h.runner.resume(op_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    with pytest.raises(cb.ApprovalAlreadyDecided):
        h.runner.decide(cb.Decision.deny(p.approval_id, approver="alice"), tenant="acme")


async def test_unknown_approval_id() -> None:
    h, out = await paused()
    with pytest.raises(cb.UnknownApproval):
        await h.runner.resume(out.operation_id, [cb.Decision.approve("apr_nope", approver="alice")])
    (p,) = out.pending_approvals
    with pytest.raises(cb.UnknownApproval):
        h.runner.decide(cb.Decision.approve(p.approval_id, approver="alice"), tenant="other-tenant")


async def test_approval_of_another_operation_is_unknown_here() -> None:
    h, out_a = await paused()
    out_b = await h.run("Refund A1 again", operation_id="op_b")
    assert out_b.state == cb.State.WAITING_APPROVAL
    (pa,) = out_a.pending_approvals
    # the message says whose it is (same tenant), so the caller can resume the right operation
    with pytest.raises(cb.UnknownApproval, match=f"belongs to operation '{out_a.operation_id}', not 'op_b'"):
        await h.runner.resume("op_b", [cb.Decision.approve(pa.approval_id, approver="alice")])
    with pytest.raises(cb.UnknownApproval, match=r"no approval .* for tenant 'other-tenant'"):
        h.runner.decide(cb.Decision.approve(pa.approval_id, approver="alice"), tenant="other-tenant")


# ---- mixed turns (D3) -----------------------------------------------------------------------------


async def test_mixed_turn_read_runs_first_and_results_go_back_together() -> None:
    refunds, reads = Counter(), Counter()
    script = [
        calls("resp_1", fc("call_1", "get_order", {"order_id": "A1"}), fc("call_2", "refund", REFUND)),
        final("resp_2"),
    ]
    h = make(script, [get_order_tool(reads), refund_tool(refunds)])
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    assert reads.n == 1 and refunds.n == 0
    assert len(h.model.requests) == 1  # nothing went back yet
    # the read's envelope is saved with the operation
    head = h.store.load_operation(out.operation_id)
    assert head is not None
    recs = {r["call_id"]: r for r in head.head["current"]["records"]}
    assert recs["call_1"]["status"] == "done" and recs["call_1"]["envelope"]["model_result"]["ok"] is True
    assert recs["call_2"]["status"] == "waiting" and recs["call_2"]["envelope"] is None
    assert [p.call_id for p in out.pending_approvals] == ["call_2"]

    (p,) = out.pending_approvals
    out = await h.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    assert reads.n == 1 and refunds.n == 1  # the read was not run again
    assert len(h.model.requests) == 2
    outs = outputs(h.model.requests[1])
    assert [o["call_id"] for o in outs] == ["call_1", "call_2"]  # one request, proposal order
    assert all(o["result"]["ok"] for o in outs)


async def test_mixed_turn_with_a_denied_call() -> None:
    reads = Counter()
    script = [
        calls("resp_1", fc("call_1", "refund", REFUND), fc("call_2", "get_order", {"order_id": "A1"})),
        final("resp_2"),
    ]
    h = make(script, [get_order_tool(reads), refund_tool()])
    out = await h.run()
    (p,) = out.pending_approvals
    out = await h.runner.resume(out.operation_id, [cb.Decision.deny(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    res = last_outputs(h.model)
    assert error_code(res["call_1"]) == "DENIED" and res["call_2"]["ok"] is True
    assert reads.n == 1


async def test_two_approvals_in_one_turn_wait_for_both() -> None:
    refunds = Counter()
    second = {"order_id": "B2", "amount": 1.5}
    script = [
        calls("resp_1", fc("call_1", "refund", REFUND), fc("call_2", "refund", second)),
        final("resp_2"),
    ]
    h = make(script, [refund_tool(refunds)])
    out = await h.run()
    p1, p2 = out.pending_approvals
    out = await h.runner.resume(out.operation_id, [cb.Decision.approve(p1.approval_id, approver="alice")])
    assert out.state == cb.State.WAITING_APPROVAL
    # only what still waits for a decision: p1 is decided (approved) and waits for p2 alone
    assert [p.approval_id for p in out.pending_approvals] == [p2.approval_id]
    assert refunds.n == 0 and len(h.model.requests) == 1
    out = await h.runner.resume(out.operation_id, [cb.Decision.deny(p2.approval_id, approver="bob")])
    assert out.state == cb.State.COMPLETED
    assert refunds.calls[0][:2] == ("A1", 40.0) and refunds.n == 1
    res = last_outputs(h.model)
    assert res["call_1"]["ok"] is True and error_code(res["call_2"]) == "DENIED"


@pytest.mark.parametrize("change", ["policy_revision", "read_schema_version", "read_handler"])
async def test_mixed_turn_survives_a_new_policy_or_tool_version(change: str) -> None:
    """The read that ran before the pause keeps the context it was bound under; only the waiting call is
    judged against today's policy and registry (APPROVAL_STALE when they changed, never INTEGRITY)."""
    refunds, reads = Counter(), Counter()
    script = [
        calls("resp_1", fc("call_1", "get_order", {"order_id": "A1"}), fc("call_2", "refund", REFUND)),
        final("resp_2"),
    ]
    h = make(script, [get_order_tool(reads), refund_tool(refunds)])
    out = await h.run()
    (p,) = out.pending_approvals

    def other_handler(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        return {}

    read = {
        "policy_revision": get_order_tool(reads),
        "read_schema_version": get_order_tool(reads, schema_version="get-order-v2"),
        "read_handler": get_order_tool(reads, handler=other_handler),
    }[change]
    policy = cb.Policy(revision="2") if change == "policy_revision" else None
    h2 = rebuild(h, [read, refund_tool(refunds)], policy=policy)
    out = await h2.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED, out.escalation
    res = last_outputs(h2.model)
    assert res["call_1"] == {"ok": True, "data": {"order_id": "A1", "status": "shipped"}}
    if change == "policy_revision":
        assert error_code(res["call_2"]) == "APPROVAL_STALE" and refunds.n == 0
    else:
        assert res["call_2"]["ok"] is True and refunds.n == 1
    assert reads.n == 1


async def test_resume_on_a_terminal_operation_is_a_usage_error() -> None:
    h = make([final("resp_1")], [get_order_tool()])
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    with pytest.raises(cb.UsageError):
        await h.runner.resume(out.operation_id)
    with pytest.raises(cb.UsageError):
        await h.runner.resume("op_missing")


async def test_a_refused_resume_writes_nothing(tmp_path: Any) -> None:
    """Found by a fuzzer: resume took the lease (moving the fencing token, D21) before it saw the
    operation was finished. It now refuses first; the stored row stays as it was."""
    from callbound.stores.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "cb.db")
    h = make([final("resp_1")], [get_order_tool()], store=store)  # type: ignore[arg-type]
    out = await h.run()
    before = store.load_operation(out.operation_id)
    for _ in range(3):
        with pytest.raises(cb.UsageError, match="finished operation cannot be resumed"):
            await h.runner.resume(out.operation_id)
    assert store.load_operation(out.operation_id) == before
    store.close()


async def test_a_new_runner_over_the_same_store_continues() -> None:
    refunds = Counter()
    h, out = await paused(
        refunds, script=refund_script(calls("resp_2", fc("call_2", "get_order", {"order_id": "A1"})))
    )
    (p,) = out.pending_approvals
    # another process: a new Runner and a new ScriptedModel; k is derived from the stored operation
    h2 = rebuild(h, [refund_tool(refunds), get_order_tool()])
    h2.runner.decide(cb.Decision.approve(p.approval_id, approver="alice"), tenant="acme")
    out = await h2.runner.resume(out.operation_id)
    assert out.state == cb.State.COMPLETED and out.text == "Refunded."
    assert refunds.n == 1
    assert len(h.model.requests) == 1 and len(h2.model.requests) == 2
    assert last_outputs(h2.model)["call_2"]["ok"] is True
    # the transcript the new process sent carries the first turn and its result
    first_req = h2.model.requests[0]
    assert outputs(first_req)[0]["call_id"] == "call_1"


async def test_resumed_operation_keeps_the_tools_it_was_offered() -> None:
    notes = Counter()
    full = cb.Registry([refund_tool(), get_order_tool(), write_tool(notes)])
    script = refund_script(calls("resp_2", fc("call_2", "set_note", {"order_id": "A1"})))
    h, out = await paused(script=script, tools=full.subset(["refund", "get_order"]))
    (p,) = out.pending_approvals
    h2 = rebuild(h, full)  # the new process registers more tools
    out = await h2.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h2.model)["call_2"]) == "UNKNOWN_TOOL"
    assert notes.n == 0
    for req in h2.model.requests:
        assert sorted(t["name"] for t in req["tools"]) == ["get_order", "refund"]


async def test_redacted_arguments_are_shown_to_the_approver() -> None:
    def redact(args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "order_id": "***"}

    _, out = await paused(tools=[refund_tool(redact=redact)])
    (p,) = out.pending_approvals
    assert p.arguments == {"order_id": "***", "amount": 40.0}
    assert p.argument_digest == sha256_hex(canonical_json(REFUND))  # the digest is of the real arguments


async def test_d4_a_failing_redaction_hook_fails_closed_on_the_approval() -> None:
    """D4/D20: a redact hook that raises is the tool's failure, not the caller's: run returns an Outcome
    and the approval shows a placeholder, never the clear text the hook was meant to hide."""
    refunds = Counter()

    def redact(args: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("card_number")

    h, out = await paused(tools=[refund_tool(refunds, redact=redact)])
    (p,) = out.pending_approvals
    assert p.arguments == "[redaction failed]"
    assert p.argument_digest == sha256_hex(canonical_json(REFUND))  # the digest is of the real arguments
    stored = h.store.get_approval(p.approval_id)
    assert stored is not None and stored.arguments == "[redaction failed]"
    out = await h.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    assert refunds.n == 1


async def test_approval_events_are_audited() -> None:
    h, out = await paused()
    (p,) = out.pending_approvals
    out = await h.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    kinds = [e.kind for e in audit_entries(h.store.audit_events(out.operation_id))]
    assert "approval_requested" in kinds and "approval_resolved" in kinds


async def test_conditional_approval_rule() -> None:
    refunds = Counter()

    def big(args: Any, ctx: cb.CallContext) -> bool:
        return bool(args.amount > 100)

    script = [
        calls("resp_1", fc("call_1", "refund", {"order_id": "A1", "amount": 5.0})),
        calls("resp_2", fc("call_2", "refund", {"order_id": "A2", "amount": 500.0})),
        final("resp_3"),
    ]
    h = make(script, [refund_tool(refunds, requires_approval=big)])
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    assert refunds.n == 1 and out.pending_approvals[0].call_id == "call_2"


# ---- not_after bounds an approval's expiry (D14) ---------------------------------------------------


@pytest.mark.parametrize("ttl_hours", [24, 0.5])
async def test_an_approval_never_expires_after_not_after(ttl_hours: float) -> None:
    """not_after ends the operation regardless (D14): an approval listed as pending for a day after
    it, and approvable with no warning, could never take effect. Its expiry is the earlier of the two."""
    clock = FakeClock()
    not_after = clock.now() + timedelta(hours=1)
    _, out = await paused(
        clock=clock,
        budgets=cb.Budgets(not_after=not_after),
        policy=cb.Policy(approval_ttl=timedelta(hours=ttl_hours)),
    )
    (p,) = out.pending_approvals
    assert p.expires_at == min(not_after, p.created_at + timedelta(hours=ttl_hours))
