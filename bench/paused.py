"""Scale of paused work: many operations waiting for approval in one durable store.

Setup: ``ops`` operations, each proposing one irreversible ``refund`` call (which needs approval by
D17), run until WAITING_APPROVAL. Setup writes with ``synchronous=NORMAL`` to save minutes of fsyncs;
the store is then closed and reopened with its default durability (``FULL``) for every measurement:
- list pending approvals: ``list_approvals(tenant=..., limit=100)`` (a page) and the full list;
- approve and resume one: ``Runner.resume(op, [Decision.approve(...)])`` on distinct operations: the
  decision is recorded, the refund runs through the ledger, the fake model answers with final text
  and the operation is COMPLETED.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from _common import median, percentile


class _Client:
    """Request 0 proposes a refund for this operation's order; request 1 answers with final text."""

    api = "openai-responses"

    def __init__(self) -> None:
        from callbound.adapters import get

        self._adapter = get(self.api)

    @property
    def adapter(self) -> Any:
        return self._adapter

    async def complete(
        self, body: dict[str, Any], *, stream: bool, meta: Any, on_progress: Any = None
    ) -> Any:
        k = meta.index
        op = meta.operation_id
        if k == 0:
            output = [
                {
                    "type": "function_call",
                    "id": f"fc_{op}",
                    "call_id": f"call_{op}",
                    "name": "refund",
                    "arguments": f'{{"order_id":"{op}","amount_cents":4000}}',
                    "status": "completed",
                }
            ]
        else:
            output = [
                {
                    "type": "message",
                    "id": f"msg_{op}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Refunded.", "annotations": []}],
                }
            ]
        return self._adapter.parse_response(
            {"id": f"resp_{op}_{k}", "status": "completed", "model": "fake-model", "output": output}
        )


def _registry() -> Any:
    from pydantic import BaseModel

    import callbound as cb

    class Refund(BaseModel):
        order_id: str
        amount_cents: int

    def refund(args: Refund, ctx: cb.CallContext) -> dict[str, Any]:
        return {"refund_id": "r-" + args.order_id, "amount_cents": args.amount_cents}

    return cb.Registry(
        [
            cb.ToolSpec(
                name="refund",
                description="Refund an order",
                params=Refund,
                handler=refund,
                schema_version="refund-v1",
                risk="irreversible",
            )
        ]
    )


def _open(backend: str, path: str, *, setup: bool) -> Any:
    if backend == "sqlite":
        from callbound.stores.sqlite import SQLiteStore

        return SQLiteStore(path, synchronous="NORMAL") if setup else SQLiteStore(path)
    from callbound.stores.postgres import PostgresStore

    return PostgresStore(os.environ["CALLBOUND_TEST_POSTGRES"])


def measure(backend: str, ops: int, samples: int, dbdir: str) -> dict[str, Any]:
    import callbound as cb

    os.makedirs(dbdir, exist_ok=True)
    path = os.path.join(dbdir, f"paused-{os.getpid()}.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    registry = _registry()
    tenant = f"bench-{os.getpid()}-{time.time_ns()}"  # PostgreSQL may hold other runs' rows

    def runner(store: Any) -> Any:
        return cb.Runner(model=_Client(), registry=registry, store=store)

    store = _open(backend, path, setup=True)
    r = runner(store)
    t0 = time.perf_counter()
    waiting: list[tuple[str, str]] = []

    async def create() -> None:
        for _ in range(ops):
            outcome = await r.run("Refund my order", tenant=tenant, subject="user-1")
            assert outcome.state.value == "WAITING_APPROVAL", outcome.state
            waiting.append((outcome.operation_id, outcome.pending_approvals[0].approval_id))

    asyncio.run(create())
    setup_s = time.perf_counter() - t0
    store.close()

    store = _open(backend, path, setup=False)
    durability = store.settings().get("synchronous") if hasattr(store, "settings") else None
    r = runner(store)

    page_s, full_s = [], []
    for _ in range(max(samples, 50)):
        t = time.perf_counter()
        page = store.list_approvals(tenant=tenant, status="pending", limit=100)
        page_s.append(time.perf_counter() - t)
    assert len(page) == min(100, ops)
    for _ in range(max(5, samples // 10)):
        t = time.perf_counter()
        full = store.list_approvals(tenant=tenant, status="pending", limit=ops + 10)
        full_s.append(time.perf_counter() - t)
    assert len(full) == ops, len(full)

    resume_s: list[float] = []
    writes = {"n": 0}
    for name in ("commit", "decide_approval"):
        original = getattr(store, name)

        def counted(*a: Any, _original: Any = original, **k: Any) -> Any:
            writes["n"] += 1
            return _original(*a, **k)

        setattr(store, name, counted)

    async def resume_some() -> None:
        step = max(1, len(waiting) // samples)
        for op_id, approval_id in waiting[::step][:samples]:
            t = time.perf_counter()
            outcome = await r.resume(op_id, [cb.Decision.approve(approval_id, approver="alice")])
            resume_s.append(time.perf_counter() - t)
            assert outcome.state.value == "COMPLETED", (outcome.state, outcome.reason)

    asyncio.run(resume_some())
    store.close()
    if backend == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)

    def stats(xs: list[float]) -> dict[str, float]:
        return {"median_ms": median(xs) * 1e3, "p99_ms": percentile(xs, 99) * 1e3, "n": len(xs)}

    return {
        "ops": ops,
        "setup_s": setup_s,
        "durability": durability,
        "list_page": stats(page_s),
        "list_all": stats(full_s),
        "approve_resume": stats(resume_s),
        "writes_per_resume": writes["n"] / max(1, len(resume_s)),
    }
