"""Runner.cancel and Runner.approve/deny (durability §3, §6)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.core.approvals import record_decision, revalidate, withdraw
from callbound.core.errors import StaleLease
from callbound.stores.memory import MemoryStore
from callbound.testing import FakeClock, ScriptedModel


class Args(BaseModel):
    order_id: str


def call(rid: str, name: str) -> dict[str, object]:
    return {
        "id": rid,
        "status": "completed",
        "output": [
            {
                "type": "function_call",
                "id": "fc_" + rid,
                "call_id": "call_" + rid,
                "name": name,
                "arguments": '{"order_id": "A1"}',
            }
        ],
    }


FINAL = {
    "id": "r_final",
    "status": "completed",
    "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}],
}


def test_cancel_a_waiting_operation_and_resume_is_refused() -> None:
    runner, out = _paused_refund()
    assert out.state == "WAITING_APPROVAL"
    cancelled = runner.cancel(out.operation_id, "customer withdrew")
    assert cancelled.state == "STOPPED" and cancelled.reason == "CANCELLED"
    assert cancelled.escalation is not None and cancelled.escalation["detail"] == "customer withdrew"
    with pytest.raises(cb.UsageError):
        runner.resume_sync(out.operation_id)
    with pytest.raises(cb.UsageError):
        runner.cancel(out.operation_id)
    # its approval can no longer take effect: deciding it is refused, not reported as a success
    (approval,) = out.pending_approvals
    with pytest.raises(cb.UsageError, match="can no longer take effect"):
        runner.approve(approval.approval_id, approver="alice", tenant="t")


def test_cancel_is_refused_while_a_write_handler_runs_and_fences_out_the_old_owner() -> None:
    started, release = threading.Event(), threading.Event()

    def slow_write(args: Args, ctx: cb.CallContext) -> int:
        started.set()
        release.wait(5)
        return 1

    store = MemoryStore()
    reg = cb.Registry(
        [
            cb.ToolSpec(
                name="write",
                description="d",
                params=Args,
                handler=slow_write,
                schema_version="1",
                risk="write",
                timeout_ms=10_000,
            )
        ]
    )
    runner = cb.Runner(
        model=ScriptedModel("openai-responses", [call("r1", "write"), FINAL]),
        registry=reg,
        store=store,
        clock=FakeClock(),
    )
    other = cb.Runner(
        model=ScriptedModel("openai-responses", []), registry=reg, store=store, clock=FakeClock()
    )

    async def scenario() -> None:
        task = asyncio.create_task(runner.run("x", tenant="t", subject="s", operation_id="op_1"))
        while not started.is_set():
            await asyncio.sleep(0.01)
        with pytest.raises(cb.UsageError, match="running write call"):
            other.cancel("op_1")
        release.set()
        out = await task
        assert out.state == "COMPLETED"

    asyncio.run(scenario())


def test_cancel_takes_the_fence_so_a_stale_writer_cannot_overwrite_it() -> None:
    store = MemoryStore()
    reg = cb.Registry(
        [cb.ToolSpec(name="get", description="d", params=Args, handler=lambda a, c: 1, schema_version="1")]
    )
    runner = cb.Runner(
        model=ScriptedModel("openai-responses", [call("r1", "get"), FINAL]),
        registry=reg,
        store=store,
        clock=FakeClock(),
    )
    op_id = runner.submit("x", tenant="t", subject="s")
    claimed = store.claim("worker-1", 30.0)
    assert claimed is not None and claimed[0] == op_id
    stale = runner._load(op_id)  # the worker's in-memory copy, loaded under its lease
    assert stale.fence == claimed[1]
    runner.cancel(op_id)
    with pytest.raises(StaleLease):
        store.commit(stale.take_commit())
    assert runner.outcome(op_id).state == "STOPPED"


def test_approve_and_deny_by_tenant() -> None:
    reg = cb.Registry(
        [
            cb.ToolSpec(
                name="refund",
                description="d",
                params=Args,
                handler=lambda a, c: 1,
                schema_version="1",
                risk="irreversible",
            )
        ]
    )
    runner = cb.Runner(
        model=ScriptedModel("openai-responses", [call("r1", "refund"), FINAL]),
        registry=reg,
        clock=FakeClock(),
    )
    out = runner.run_sync("x", tenant="tenant-a", subject="s")
    approval_id = out.pending_approvals[0].approval_id
    with pytest.raises(cb.UnknownApproval):
        runner.approve(approval_id, "alice", tenant="tenant-b")  # another tenant's approver cannot decide
    decided = runner.approve(approval_id, "alice", tenant="tenant-a")
    assert decided.status == "approved"
    assert runner.approve(approval_id, "alice", tenant="tenant-a") == decided  # replay: original decision
    with pytest.raises(cb.ApprovalAlreadyDecided):
        runner.deny(approval_id, "bob", tenant="tenant-a", reason="no")
    assert runner.resume_sync(out.operation_id).state == "COMPLETED"


def test_redaction_hook_decides_what_is_stored_in_clear() -> None:
    store = MemoryStore()
    reg = cb.Registry(
        [
            cb.ToolSpec(
                name="get",
                description="d",
                params=Args,
                handler=lambda a, c: 1,
                schema_version="1",
                redact=lambda args: {"order_id": "***"},
            )
        ]
    )
    runner = cb.Runner(
        model=ScriptedModel("openai-responses", [call("r1", "get"), FINAL]),
        registry=reg,
        store=store,
        clock=FakeClock(),
    )
    out = runner.run_sync("x", tenant="t", subject="s")
    stored = store.load_operation(out.operation_id)
    assert stored is not None
    envs = [e for r in stored.journal if r.kind == "results" for e in r.data["envelopes"]]
    assert envs[0]["protected_audit"]["input"] == {"order_id": "***"}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_cancel_withdraws_the_pending_approval_so_it_is_no_longer_listed(kind: str, tmp_path: Path) -> None:
    """An approver listing pending approvals must not be shown one that nothing will act on: the
    commit that ends the operation also marks its pending approvals withdrawn."""
    from callbound.stores.sqlite import SQLiteStore

    store: Any = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "cb.db")
    runner, out = _paused_refund(store)
    (approval,) = out.pending_approvals
    assert [a.approval_id for a in store.list_approvals(tenant="t")] == [approval.approval_id]
    runner.cancel(out.operation_id, "customer withdrew")
    assert store.list_approvals(tenant="t") == []
    stored = store.get_approval(approval.approval_id)
    assert stored.status == "withdrawn" and stored.decided_at is not None
    assert stored.reason == "the operation ended STOPPED(CANCELLED)"
    assert [a.status for a in store.list_approvals(tenant="t", status=None)] == ["withdrawn"]
    with pytest.raises(cb.UsageError, match="withdrawn"):
        runner.approve(approval.approval_id, approver="alice", tenant="t")
    # a withdrawn approval cannot be turned into a decision by the core either
    with pytest.raises(cb.ApprovalAlreadyDecided, match="withdrawn"):
        record_decision(stored, cb.Decision.approve(approval.approval_id, "alice"), stored.decided_at)
    if kind == "sqlite":
        store.close()


def test_a_withdrawn_approval_never_passes_revalidation() -> None:
    """Fail closed: whatever reaches re-validation, only an approved call may run."""
    _, out = _paused_refund()
    (a,) = out.pending_approvals
    now = a.created_at
    withdrawn = withdraw(a, now, "ended")
    kw = {
        "argument_digest": a.argument_digest,
        "policy_revision": a.policy_revision,
        "schema_version": a.schema_version,
        "tool_digest": a.tool_digest,
    }
    assert revalidate(withdrawn, now, **kw) == "DENIED"
    assert revalidate(replace(a, status="approved", decided_at=now), now, **kw) is None


def _paused_refund(store: Any = None) -> tuple[cb.Runner, cb.Outcome]:
    """A run paused for approval of one irreversible refund."""
    runner = cb.Runner(
        model=ScriptedModel("openai-responses", [call("r1", "refund"), FINAL]),
        registry=_refund_registry(),
        clock=FakeClock(),
        store=store,
    )
    return runner, runner.run_sync("x", tenant="t", subject="s")


def _refund_registry() -> cb.Registry:
    return cb.Registry(
        [
            cb.ToolSpec(
                name="refund",
                description="d",
                params=Args,
                handler=lambda a, c: 1,
                schema_version="1",
                risk="irreversible",
            )
        ]
    )
