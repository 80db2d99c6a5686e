"""Workers, review round 13 (D21):
- a claim that fails because the database went away (a restart, a failover, an idle timeout) is tried
  again after a wait; the worker exited with the queue unserved;
- a paused operation the store wakes by the database's clock, but the runner's clock still finds
  waiting, keeps its lease until it expires: released, it was claimed again at once, hundreds of times a
  second, and idle_exit never fired."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.core.errors import StoreError
from callbound.runtime.app import App
from callbound.runtime.worker import Worker
from callbound.stores import open_store
from callbound.testing import FakeClock, ScriptedModel
from tests.durability.conftest import store_urls

from .helpers import API, calls, fc, final, refund_tool

HERE = "tests.runtime.test_worker_review13"


def answers() -> App:
    return App(registry=cb.Registry([]), model=ScriptedModel(API, [final("resp_1", "done")]))


class Flaky:
    """A store whose first claims fail as a dropped connection does; everything else is the store's."""

    def __init__(self, store: Any, failures: int) -> None:
        self._store = store
        self.failures = failures

    def claim(self, worker_id: str, lease_s: float, now_fn: Any = None) -> Any:
        if self.failures > 0:
            self.failures -= 1
            raise StoreError("PostgreSQL failed while claiming an operation: terminating connection")
        return self._store.claim(worker_id, lease_s, now_fn)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_a_failed_claim_is_tried_again_and_the_queue_is_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Flaky(open_store("memory:"), failures=3)
    op = answers().runner(store, ref={"ref": f"{HERE}:answers", "args": {}}).submit("q", "acme", "u1")  # type: ignore[arg-type]
    worker = Worker(answers(), store, app_ref={"ref": f"{HERE}:answers", "args": {}}, poll_s=0.01, lease_s=5)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="callbound.worker"):
        stats = await asyncio.wait_for(worker.run(idle_exit_s=0.5), 30)
    assert stats.outcomes == {op: "COMPLETED"}
    assert stats.errors == 3
    assert sum("could not claim" in r.getMessage() for r in caplog.records) == 3


def skewed() -> App:
    """Its clock is fixed at 2026-01-01 (FakeClock, D23); the store claims by the real clock, far later,
    so every approval of this app has expired by the store's clock and by none of the runner's."""
    script = [calls("r1", fc("c1", "refund", {"order_id": "A1", "amount": 5.0})), final("r2")]
    return App(registry=cb.Registry([refund_tool()]), model=ScriptedModel(API, script), clock=FakeClock())


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_paused_operation_the_clocks_disagree_on_is_not_claimed_in_a_loop(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store("memory:" if kind == "memory" else store_urls(kind, tmp_path))
    app_ref = {"ref": f"{HERE}:skewed", "args": {}}
    out = await skewed().runner(store, ref=app_ref).run("refund A1", tenant="acme", subject="u1")
    assert out.state == cb.State.WAITING_APPROVAL
    lease_s, idle_exit_s = 0.5, 1.2
    worker = Worker(skewed(), store, app_ref=app_ref, lease_s=lease_s, poll_s=0.01)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="callbound.worker"):
        # max_operations only bounds the regression, which claimed it again at once, forever
        stats = await asyncio.wait_for(worker.run(max_operations=50, idle_exit_s=idle_exit_s), 30)
    elapsed = time.monotonic() - started
    assert idle_exit_s <= elapsed < idle_exit_s + 5
    assert 1 <= stats.claimed <= int(elapsed / lease_s) + 1, (stats, elapsed)
    assert any("clock" in r.getMessage() for r in caplog.records)
    assert store.load_operation(out.operation_id).head["state"] == "WAITING_APPROVAL"  # type: ignore[union-attr]
    store.close()


@pytest.mark.parametrize(
    ("kw", "what"),
    [
        ({"idle_exit_s": float("nan")}, "idle_exit_s"),
        ({"idle_exit_s": -1}, "idle_exit_s"),
        ({"idle_exit_s": "5"}, "idle_exit_s"),
        ({"max_operations": -1}, "max_operations"),
        ({"max_operations": 1.5}, "max_operations"),
    ],
)
async def test_run_refuses_limits_it_cannot_keep(kw: dict[str, Any], what: str) -> None:
    """`--idle-exit nan` never exited: nan compares false with every elapsed time."""
    worker = Worker(answers(), open_store("memory:"), poll_s=0.01)
    with pytest.raises(cb.UsageError, match=what):
        await worker.run(**kw)


def test_a_sqlite_url_with_query_options_is_refused(tmp_path: Path) -> None:
    """`sqlite:///x.db?mode=ro` created a file named 'x.db?mode=ro'."""
    with pytest.raises(cb.UsageError, match="takes no query options"):
        open_store(f"sqlite:///{tmp_path}/x.db?mode=ro")
    assert list(tmp_path.iterdir()) == []
