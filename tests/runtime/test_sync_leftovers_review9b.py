"""Review 9b: ``run_sync``/``resume_sync`` are not held by an abandoned async handler.

D16: an async handler that swallows its cancellation is left running after its timeout and the
executor's grace period; its call already ended as a timeout. D14: such a handler must not hold the
operation, nor the caller, past that. ``asyncio.run`` cancels leftover tasks at shutdown and waits for
them without bound, so a handler that swallows every cancellation hung ``run_sync`` forever (one that
held out 4 s delayed it 4 s). The sync entry points now cancel leftovers, wait at most the grace
period, and close the loop; async generators and the default executor are still shut down as
``asyncio.run`` does, and a run with nothing left over does not wait at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import callbound as cb
from callbound.runtime.tools import ToolExecutor
from callbound.testing import FakeClock, ScriptedModel

from .helpers import API, EchoArgs, calls, fc, final
from .helpers import echo_runner as runner

HOLD_OUT_S = 4.0  # how long the stubborn handler swallows cancellations (the unfixed code waits it out)


def test_d16_run_sync_returns_after_timeout_and_grace_though_the_handler_swallows_every_cancel() -> None:
    cancels: list[float] = []

    async def stubborn(args: Any, ctx: cb.CallContext) -> dict[str, Any]:
        end = time.monotonic() + HOLD_OUT_S
        while time.monotonic() < end:
            try:
                await asyncio.sleep(max(0.0, end - time.monotonic()))
            except asyncio.CancelledError:
                cancels.append(time.monotonic())  # swallowed, every time
        return {"late": True}

    r, model = runner(stubborn, grace_s=0.2)
    t0 = time.monotonic()
    out = r.run_sync("x", tenant="t", subject="s")
    took = time.monotonic() - t0
    assert out.state == cb.State.COMPLETED
    assert len(model.requests) == 2  # the call went back as a timeout
    # 0.1 s timeout + 0.2 s grace in the call, at most 0.2 s more at the loop's end: far below 4 s
    assert took < 1.5, took
    assert len(cancels) >= 2  # cancelled on timeout, and once more when the loop closed


def test_resume_sync_is_bounded_as_well() -> None:
    async def stubborn(args: Any, ctx: cb.CallContext) -> dict[str, Any]:
        end = time.monotonic() + HOLD_OUT_S
        while time.monotonic() < end:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(max(0.0, end - time.monotonic()))
        return {}

    tool = cb.ToolSpec(
        name="echo",
        description="Echo",
        params=EchoArgs,
        handler=stubborn,
        schema_version="v1",
        risk="read",
        timeout_ms=100,
        requires_approval=True,
    )
    model = ScriptedModel(API, [calls("r1", fc("c1", "echo", {"n": 1})), final("r2")])
    r = cb.Runner(
        model=model, registry=cb.Registry([tool]), clock=FakeClock(), executor=ToolExecutor(grace_s=0.2)
    )
    out = r.run_sync("x", tenant="t", subject="s")
    assert out.state == cb.State.WAITING_APPROVAL
    t0 = time.monotonic()
    decision = cb.Decision.approve(out.pending_approvals[0].approval_id, approver="alice")
    out = r.resume_sync(out.operation_id, [decision])
    assert out.state == cb.State.COMPLETED
    assert time.monotonic() - t0 < 1.5


def test_a_run_with_nothing_left_over_does_not_wait_for_the_grace() -> None:
    async def quick(args: Any, ctx: cb.CallContext) -> dict[str, Any]:
        return {"n": args.n}

    r, _ = runner(quick, grace_s=5.0, timeout_ms=2000)
    t0 = time.monotonic()
    assert r.run_sync("x", tenant="t", subject="s").state == cb.State.COMPLETED
    assert time.monotonic() - t0 < 2.0


def test_a_handler_that_ends_on_the_final_cancel_is_waited_for() -> None:
    """A leftover task that does end when cancelled at the close runs its cleanup before run_sync
    returns, as under asyncio.run."""
    cleaned: list[str] = []

    async def once_stubborn(args: Any, ctx: cb.CallContext) -> dict[str, Any]:
        with contextlib.suppress(asyncio.CancelledError):  # swallows the timeout's cancel
            await asyncio.sleep(10)
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.append("done")  # the loop's end cancels it again, and this time it goes
        return {}

    r, _ = runner(once_stubborn, grace_s=0.1)
    t0 = time.monotonic()
    assert r.run_sync("x", tenant="t", subject="s").state == cb.State.COMPLETED
    assert cleaned == ["done"]
    assert time.monotonic() - t0 < 1.5


def test_async_generators_and_the_default_executor_are_shut_down_within_the_grace() -> None:
    """As under asyncio.run, suspended generators are closed and work left on the default executor
    is waited for, here within the grace period (tests/runtime/test_thread_leftovers.py: work that
    never ends is not waited for)."""
    events: list[str] = []
    kept: list[AsyncIterator[int]] = []
    done = threading.Event()

    async def numbers() -> AsyncIterator[int]:
        try:
            yield 1
            yield 2
        finally:
            events.append("generator closed")

    def slow() -> None:
        time.sleep(0.2)  # outlives the call, not the grace
        done.set()

    async def handler(args: Any, ctx: cb.CallContext) -> dict[str, Any]:
        gen = numbers()
        kept.append(gen)  # left suspended: shutdown_asyncgens closes it
        await gen.__anext__()
        asyncio.get_running_loop().run_in_executor(None, slow)  # not awaited: shutdown waits for it
        return {"n": args.n}

    r, _ = runner(handler, grace_s=3.0, timeout_ms=2000)
    assert r.run_sync("x", tenant="t", subject="s").state == cb.State.COMPLETED
    assert events == ["generator closed"]
    assert done.is_set()


def test_run_sync_inside_a_running_loop_is_still_a_usage_error() -> None:
    async def inside() -> None:
        r, _ = runner(lambda a, c: {}, grace_s=0.1)
        try:
            r.run_sync("x", tenant="t", subject="s")
        except cb.UsageError as exc:
            assert "running event loop" in str(exc)
        else:
            raise AssertionError("run_sync inside a loop did not raise")

    asyncio.run(inside())


def test_an_abandoned_task_is_let_go_quietly() -> None:
    """The task abandoned with the loop leaves the executor's task set (no reference for the process's
    life) and its collection is not logged as a lost pending task: the warning named it once."""
    from callbound.runtime import tools

    async def stubborn(args: Any, ctx: cb.CallContext) -> dict[str, Any]:
        end = time.monotonic() + HOLD_OUT_S
        while time.monotonic() < end:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(max(0.0, end - time.monotonic()))
        return {"late": True}

    before = set(tools._handler_tasks)
    r, _ = runner(stubborn, grace_s=0.1)
    out = r.run_sync("go", tenant="t", subject="s")
    assert out.state == cb.State.COMPLETED
    left = set(tools._handler_tasks) - before
    assert left == set()
