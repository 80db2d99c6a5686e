"""`callbound worker` under a process manager: SIGTERM (or Ctrl-C) stops it after the operation in hand,
which is left paused or ended with its lease released, and the worker exits 0 with its summary."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from callbound.stores import open_store
from tests.durability.worker_app import make_app

from .test_workers import ROOT


def start(store_url: str, env: dict[str, str]) -> subprocess.Popen[str]:
    args = ["-m", "callbound.cli", "worker", "--app", "tests.durability.worker_app:make_app"]
    args += ["--store", store_url, "--id", "w-sig", "--lease", "5", "--poll", "0.05"]
    return subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def wait_for_start(p: subprocess.Popen[str], timeout_s: float = 60.0) -> str:
    """The worker's first stderr line, its start-up log line (a fixed sleep raced a slow start-up on a
    loaded machine: the signal came before the handlers and killed the process)."""
    assert p.stderr is not None
    ready, _, _ = select.select([p.stderr], [], [], timeout_s)
    assert ready, "the worker did not log its start"
    return p.stderr.readline()


def env_for(tmp_path: Path, slow: str = "0") -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CALLBOUND_TEST_PAYMENTS": str(tmp_path / "payments.db"),
        "CALLBOUND_TEST_SLOW_READ": slow,
    }


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_an_idle_worker_stops_on_a_signal_with_its_summary(sig: signal.Signals, tmp_path: Path) -> None:
    p = start(f"sqlite:///{tmp_path / 'cb.db'}", env_for(tmp_path))
    started = wait_for_start(p)  # its signal handlers are in place from this line on
    p.send_signal(sig)
    out, errs = p.communicate(timeout=30)
    assert p.returncode == 0, errs
    assert f"{sig.name}, stopping after the current operation" in " ".join(errs.split())
    assert "worker w-sig: claimed 0" in out
    assert "worker w-sig: started (lease 5 s, poll 0.05 s)" in started


@pytest.mark.slow
def test_a_busy_worker_finishes_its_operation_then_stops(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'cb.db'}"
    env = env_for(tmp_path, slow="2")
    os.environ["CALLBOUND_TEST_PAYMENTS"] = env["CALLBOUND_TEST_PAYMENTS"]
    try:
        store = open_store(store_url)
        op = (
            make_app()
            .runner(store, ref={"ref": "tests.durability.worker_app:make_app", "args": {}})
            .submit("Refund", tenant="acme", subject="u1")
        )
    finally:
        del os.environ["CALLBOUND_TEST_PAYMENTS"]
    p = start(store_url, env)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # wait until the worker holds the operation
        if store.lease_holder(op) == "w-sig":
            break
        time.sleep(0.05)
    else:
        p.kill()
        pytest.fail("the worker never claimed the operation")
    p.send_signal(signal.SIGTERM)
    out, errs = p.communicate(timeout=60)
    assert p.returncode == 0, errs
    assert "claimed 1" in out and "paused 1" in out
    stored = store.load_operation(op)
    assert stored is not None and stored.head["state"] == "WAITING_APPROVAL"  # not left mid-turn
    assert store.lease_holder(op) is None  # released, not left to expire
    store.close()
