"""Work an async handler hands to a thread does not hold ``run_sync`` past the grace period (D14, D16).

An async handler that wraps a blocking client in ``asyncio.to_thread`` times out as its task is
cancelled, but the thread goes on. Under ``asyncio.run`` (and ``asyncio.Runner.close``) the loop's
default executor is shut down with ``wait=True`` at the end, so a thread that never returns kept
``run_sync`` from ever returning, and the stdlib pool's threads kept the process from exiting. The loop
``run_blocking`` owns now has a default executor of daemon threads: its work is waited for at most the
grace period, then left behind with a warning, and the process can exit.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

import callbound as cb
from callbound.runtime.threads import DaemonExecutor
from tests.recordings import REPO_ROOT

from .helpers import echo_runner as _runner
from .helpers import outputs


def test_a_to_thread_that_never_returns_does_not_hold_run_sync(caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()

    async def wraps_a_hung_client(args: Any, ctx: cb.CallContext) -> dict[str, Any]:
        await asyncio.to_thread(release.wait)  # a blocking call that never comes back
        return {}

    r, model = _runner(wraps_a_hung_client, grace_s=0.2)
    t0 = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING, logger="callbound.runtime"):
            out = r.run_sync("x", tenant="t", subject="s")
        took = time.monotonic() - t0
    finally:
        release.set()  # let the thread go, for the rest of the test session
    assert out.state == cb.State.COMPLETED
    assert len(model.requests) == 2  # the call went back to the model as a timeout
    assert took < 5.0, took  # 0.1 s timeout, 0.2 s grace in the call and at most 0.2 s at the end
    assert any("thread job(s) still running left behind" in m for m in caplog.messages)


def test_the_process_exits_though_a_to_thread_never_returns() -> None:
    """What a user sees: the script prints its outcome and exits; nothing joins the hung thread."""
    script = textwrap.dedent(
        """
        import asyncio, threading
        import callbound as cb
        from callbound.runtime.tools import ToolExecutor
        from callbound.testing import ScriptedModel
        from tests.runtime.helpers import API, EchoArgs, calls, fc, final

        async def hung(args, ctx):
            await asyncio.to_thread(threading.Event().wait)
            return {}

        tool = cb.ToolSpec(name="echo", description="Echo", params=EchoArgs, handler=hung,
                           schema_version="v1", risk="read", timeout_ms=100)
        model = ScriptedModel(API, [calls("r1", fc("c1", "echo", {"n": 1})), final("r2")])
        runner = cb.Runner(model=model, registry=cb.Registry([tool]), executor=ToolExecutor(grace_s=0.2))
        print(runner.run_sync("x", tenant="t", subject="s").state, flush=True)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "COMPLETED"


def test_to_thread_results_and_errors_reach_the_handler() -> None:
    async def uses_threads(args: Any, ctx: cb.CallContext) -> dict[str, Any]:
        doubled = await asyncio.to_thread(lambda: args.n * 2)
        try:
            await asyncio.to_thread(int, "not a number")
        except ValueError as exc:
            return {
                "doubled": doubled,
                "error": type(exc).__name__,
                "thread": threading.current_thread().name,
            }
        return {}

    r, model = _runner(uses_threads, grace_s=0.2)
    assert r.run_sync("x", tenant="t", subject="s").state == cb.State.COMPLETED
    [sent] = outputs(model.requests[1])
    assert sent["result"] == {
        "ok": True,
        "data": {"doubled": 2, "error": "ValueError", "thread": "MainThread"},
    }


def test_the_executor_runs_work_on_daemon_threads_and_drains_within_its_bound() -> None:
    pool = DaemonExecutor(2, "test-daemon")
    release = threading.Event()
    names: list[tuple[str, bool]] = []

    def record() -> int:
        t = threading.current_thread()
        names.append((t.name, t.daemon))
        return 7

    assert pool.submit(record).result(timeout=5) == 7
    assert names[0][1] is True and names[0][0].startswith("test-daemon")
    hung = pool.submit(release.wait)
    t0 = time.monotonic()
    assert pool.drain(0.2) == 1  # still running: reported, not waited for past the bound
    assert time.monotonic() - t0 < 2.0
    release.set()
    assert hung.result(timeout=5) is True
    assert pool.drain(5.0) == 0
    pool.shutdown(wait=True)
    with pytest.raises(RuntimeError):
        pool.submit(record)
