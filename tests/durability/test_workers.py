"""Two workers and an approver over 200 operations (durability §6, D21): each completes exactly once,
no double effect, nothing lost, and a killed worker's operation is taken over after its lease expires."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import callbound as cb
from callbound.demo.payments import FakePayments
from callbound.runtime.verify import verify_store
from callbound.stores import open_store

from .conftest import store_urls

ROOT = Path(__file__).resolve().parents[2]
N = int(os.environ.get("CALLBOUND_WORKER_TEST_N", "200"))


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[str]:
    # Output goes to a file: a pipe nobody reads fills up and blocks the worker mid-operation.
    with log.open("w") as fh:
        return subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, env=env, text=True, stdout=fh, stderr=subprocess.STDOUT
        )


def worker(store_url: str, name: str, env: dict[str, str], log: Path) -> subprocess.Popen[str]:
    return spawn(
        [
            "-m",
            "callbound.cli",
            "worker",
            "--app",
            "tests.durability.worker_app:make_app",
            "--store",
            store_url,
            "--id",
            name,
            "--lease",
            "2",
            "--poll",
            "0.05",
            "--idle-exit",
            "8",
        ],
        env,
        log,
    )


APPROVER = """
import sys, time
import callbound as cb
from callbound.stores import open_store
from tests.durability.worker_app import make_app
store = open_store(sys.argv[1]); runner = make_app().runner(store)
deadline = time.time() + float(sys.argv[3]); done = 0
while time.time() < deadline and done < int(sys.argv[2]):
    for a in store.list_approvals(status="pending"):
        runner.decide(cb.Decision.approve(a.approval_id, approver="approver-1"), tenant=a.tenant); done += 1
    time.sleep(0.05)
print("approved", done)
"""


@pytest.mark.slow
@pytest.mark.parametrize("store_kind", ["sqlite", "postgres"])
def test_two_workers_and_an_approver(store_kind: str, tmp_path: Path) -> None:
    store_url = store_urls(store_kind, tmp_path)
    env = {**os.environ, "CALLBOUND_TEST_PAYMENTS": str(tmp_path / "payments.db")}
    os.environ["CALLBOUND_TEST_PAYMENTS"] = env["CALLBOUND_TEST_PAYMENTS"]
    from tests.durability.worker_app import make_app

    store = open_store(store_url)
    runner = make_app().runner(store)
    ops = [runner.submit(f"refund order {i}", tenant="acme", subject="customer") for i in range(N)]

    approver = spawn(["-c", APPROVER, store_url, str(N), "150"], env, tmp_path / "approver.log")
    w1 = worker(store_url, "w1", {**env, "CALLBOUND_TEST_SLOW_READ": "0.2"}, tmp_path / "w1.log")
    w2 = worker(store_url, "w2", env, tmp_path / "w2.log")
    try:
        # Kill w1 in the middle of the run, while it holds a lease.
        deadline = time.time() + 60
        while time.time() < deadline:
            done = sum(1 for h in store.list_operations(state="COMPLETED", limit=N + 1))
            if done >= N // 5:
                break
            time.sleep(0.05)
        # ... at a moment when it is inside an operation: running its slow read, lease held.
        deadline = time.time() + 60
        while time.time() < deadline:
            lines = [ln for ln in (tmp_path / "w1.log").read_text().splitlines() if "op_" in ln]
            if lines and "-> EXECUTING" in lines[-1]:
                break
            time.sleep(0.01)
        w1.send_signal(signal.SIGKILL)
        w1.wait(timeout=10)
        deadline = time.time() + 150
        while time.time() < deadline:
            if len(store.list_operations(state="COMPLETED", limit=N + 1)) == N:
                break
            time.sleep(0.2)
    finally:
        for p in (w1, w2, approver):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
    logs_full = {name: (tmp_path / f"{name}.log").read_text() for name in ("w1", "w2", "approver")}
    logs = {name: text[-3000:] for name, text in logs_full.items()}
    # The operation w1 was inside when it died was finished by w2 after the lease expired.
    w1_lines = [ln for ln in logs_full["w1"].splitlines() if "op_" in ln]
    assert w1_lines and "transition op_" in w1_lines[-1], "w1 was not inside an operation when killed"
    orphan = w1_lines[-1].split("transition ")[1].split(" ")[0]
    assert orphan in logs_full["w2"], "the killed worker's operation was not taken over"
    states = {op: runner.outcome(op).state for op in ops}
    assert all(s == "COMPLETED" for s in states.values()), ({s for s in states.values()}, logs)
    payments = FakePayments(env["CALLBOUND_TEST_PAYMENTS"])
    rows = payments.rows()
    keys = [r[1] for r in rows]
    assert len(keys) == N and len(set(keys)) == N, "a refund happened twice or went missing"
    assert verify_store(store) == []
    assert all(a.status == "approved" for a in store.list_approvals(status=None, limit=10 * N))
    store.close()
    _ = cb
