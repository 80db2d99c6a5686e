"""Drive leases (D21): ``Runner.run`` and ``resume`` hold the operation's lease, so two drives never
run one operation at once and a write left RUNNING is reconciled only when its driver is gone (D16).
A drive whose process died is taken over at once on the same host; anyone else's lease must expire."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.runtime import lease
from callbound.stores.memory import MemoryStore
from callbound.stores.sqlite import SQLiteStore

from .helpers import OrderArgs, calls, fc, final, make
from .lease_child import payments

ROOT = Path(__file__).resolve().parents[2]


def _store(kind: str, tmp_path: Path) -> Any:
    return MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "cb.db")


def _blocking_pay(effects: list[str], inside: asyncio.Event, release: asyncio.Event) -> cb.ToolSpec:
    async def pay(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        effects.append(args.order_id)
        inside.set()
        await release.wait()
        return {"paid": args.order_id}

    return cb.ToolSpec(
        name="pay",
        description="Pay an order",
        params=OrderArgs,
        handler=pay,
        schema_version="pay-v1",
        risk="write",
        timeout_ms=10_000,
        requires_approval=True,
    )


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_second_resume_while_the_first_is_inside_a_write_is_refused(
    kind: str, tmp_path: Path
) -> None:
    """Two resumes of one approved operation at once: the second raises OperationBusy instead of
    taking the RUNNING write for a crash leftover, reconciling it and paying twice."""
    store = _store(kind, tmp_path)
    effects: list[str] = []
    inside, release = asyncio.Event(), asyncio.Event()
    spec = _blocking_pay(effects, inside, release)
    script = [calls("resp_1", fc("call_1", "pay", {"order_id": "A1"})), final("resp_2")]
    first = make(script, [spec], store=store)
    out = await first.run()
    assert out.state == cb.State.WAITING_APPROVAL
    (approval,) = out.pending_approvals
    first.runner.approve(approval.approval_id, approver="alice", tenant="acme")
    second = make(script, [spec], store=store)

    async def while_inside() -> None:
        await inside.wait()
        try:
            with pytest.raises(cb.OperationBusy) as busy:
                await second.runner.resume(out.operation_id)
            assert busy.value.operation_id == out.operation_id
            assert busy.value.holder is not None and busy.value.holder.startswith("drive:")
        finally:
            release.set()

    done, _ = await asyncio.gather(first.runner.resume(out.operation_id), while_inside())
    assert done.state == cb.State.COMPLETED
    assert effects == ["A1"]
    assert store.lease_holder(out.operation_id) is None  # given up at the end of the drive
    if kind == "sqlite":
        store.close()


async def test_run_holds_the_lease_while_it_drives_and_moves_the_fence() -> None:
    store = MemoryStore()
    seen: list[tuple[str | None, Any]] = []

    def look(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        stored = store.load_operation(ctx.operation_id)
        assert stored is not None
        seen.append((store.lease_holder(ctx.operation_id), stored.head.get("fence")))
        return {"ok": True}

    spec = cb.ToolSpec(
        name="look", description="Look", params=OrderArgs, handler=look, schema_version="v1", risk="read"
    )
    h = make(
        [calls("resp_1", fc("call_1", "look", {"order_id": "A1"})), final("resp_2")], [spec], store=store
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    ((holder, fence),) = seen
    assert holder is not None and holder.startswith(f"drive:{lease._host()}:{os.getpid()}:")
    assert fence == 1
    assert store.lease_holder(out.operation_id) is None


async def test_a_worker_claim_is_respected_until_released() -> None:
    store = MemoryStore()
    h = make([final("resp_1")], [], store=store)
    op_id = h.runner.submit("hi", tenant="acme", subject="user-1")
    assert store.claim("worker-1", 30) == (op_id, 1)
    with pytest.raises(cb.OperationBusy, match="worker-1"):
        await h.runner.resume(op_id)
    assert store.release(op_id, 1)
    out = await h.runner.resume(op_id)
    assert out.state == cb.State.COMPLETED


async def test_the_lease_is_renewed_while_a_long_handler_runs() -> None:
    """A handler longer than the lease: the heartbeat keeps it, so no one takes the operation over."""
    store = MemoryStore()
    inside, release = asyncio.Event(), asyncio.Event()
    effects: list[str] = []
    spec = dataclasses.replace(_blocking_pay(effects, inside, release), requires_approval=False)
    script = [calls("resp_1", fc("call_1", "pay", {"order_id": "A1"})), final("resp_2")]
    h = make(script, [spec], store=store, lease_s=0.3)
    other = make([final("resp_x")], [spec], store=store)

    async def later() -> None:
        await inside.wait()
        await asyncio.sleep(0.7)  # more than twice the lease
        try:
            ops = store.list_operations()
            with pytest.raises(cb.OperationBusy):
                await other.runner.resume(ops[0]["operation_id"])
        finally:
            release.set()

    out, _ = await asyncio.gather(h.run(), later())
    assert out.state == cb.State.COMPLETED and effects == ["A1"]


def test_lease_s_must_be_positive() -> None:
    with pytest.raises(cb.UsageError, match="lease_s"):
        make([], [], lease_s=0)


def test_owner_names_tell_a_dead_process_from_a_live_one() -> None:
    mine = lease.new_owner()
    assert not lease.owner_is_gone(mine)  # this process
    assert not lease.owner_is_gone("worker-7")  # a worker: only expiry tells
    assert not lease.owner_is_gone("drive:some-other-host:1:2:ab")  # another host
    assert not lease.owner_is_gone("drive:garbage")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        host, started = lease._host(), lease._start_ticks(child.pid)
        live = f"drive:{host}:{child.pid}:{started}:ab"
        assert not lease.owner_is_gone(live)
        if started is not None:  # /proc: a reused pid has another start time
            assert lease.owner_is_gone(f"drive:{host}:{child.pid}:{int(started) - 1}:ab")
        child.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not lease.owner_is_gone(live) and time.monotonic() < deadline:  # killed, not yet reaped
            time.sleep(0.01)
        assert lease.owner_is_gone(live)
    finally:
        child.kill()
        child.wait()
    assert lease.owner_is_gone(live)  # reaped


def _child(tmp_path: Path, phase: str) -> subprocess.Popen[str]:
    args = [str(tmp_path / "cb.db"), str(tmp_path / "payments.db"), "op_1", phase, str(tmp_path / "inside")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.runtime.lease_child", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_drive_killed_inside_a_write_is_taken_over_at_once_and_paid_once(tmp_path: Path) -> None:
    """A subprocess drives the operation and is inside the write handler (payment made, result not
    committed). While it lives, another process's resume is refused; once it is SIGKILLed, resume
    takes over at once (same host, process gone), reconciles the write and never pays twice."""
    child = _child(tmp_path, "run")
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "inside").exists():
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the child never reached the handler"
            time.sleep(0.02)
        busy = subprocess.run(
            [sys.executable, "-m", "tests.runtime.lease_child", str(tmp_path / "cb.db"),
             str(tmp_path / "payments.db"), "op_1", "resume", str(tmp_path / "inside2")],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert busy.returncode != 0 and "OperationBusy" in busy.stderr, busy.stderr
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    resumed = _child(tmp_path, "resume")
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert '"state": "COMPLETED"' in out
    rows = payments(str(tmp_path / "payments.db")).execute("SELECT count(*) FROM payments").fetchone()[0]
    assert rows == 1  # reconciled from the payment the killed process made, not paid again
