"""``Runner.run`` whose new operation a worker claims before the run takes its lease (D21; review
round 18). The run waits for the worker's result; if the worker dies before pausing or ending the
operation, its lease expires and the run takes the operation over, as another worker would. It used to
poll for ever: ``callbound run`` hung with nobody left to drive the operation."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.stores.memory import MemoryStore
from callbound.stores.sqlite import SQLiteStore

from .helpers import OrderArgs, calls, fc, final, make


def _claimed_on_create(base: type, lease_s: float) -> Any:
    """A store whose first commit (the run creating its operation) is followed at once by a worker's
    claim under a short lease; that worker then dies: it never drives, renews or releases."""

    class ClaimedOnCreate(base):  # type: ignore[misc, valid-type]
        claimed: tuple[str, int] | None = None

        def commit(self, commit: Any) -> None:
            super().commit(commit)
            if self.claimed is None:
                self.claimed = self.claim("worker-dead", lease_s)

    return ClaimedOnCreate


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_run_takes_over_a_new_operation_whose_claiming_worker_died(kind: str, tmp_path: Path) -> None:
    cls = _claimed_on_create(MemoryStore if kind == "memory" else SQLiteStore, lease_s=0.3)
    store = cls() if kind == "memory" else cls(tmp_path / "cb.db")
    looked: list[str] = []

    def look(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        looked.append(args.order_id)
        return {"order_id": args.order_id}

    spec = cb.ToolSpec(
        name="look", description="Look", params=OrderArgs, handler=look, schema_version="v1", risk="read"
    )
    h = make(
        [calls("resp_1", fc("call_1", "look", {"order_id": "A1"})), final("resp_2")], [spec], store=store
    )
    out = await asyncio.wait_for(h.run(), timeout=20)
    assert store.claimed is not None and store.claimed[1] == 1  # the worker did claim it first
    assert out.state == cb.State.COMPLETED, (out.state, out.reason)
    assert looked == ["A1"]
    assert store.lease_holder(out.operation_id) is None  # the run gave its lease up
