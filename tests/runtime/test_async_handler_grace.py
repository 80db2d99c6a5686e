"""D16 for async write handlers that hand blocking work to a thread.

Found by a reviewer: an async refund handler around a blocking client (``await asyncio.to_thread``)
timed out; cancelling its task did not stop the thread, reconcile asked at once found nothing and
answered "not applied", the model asked again, and the refund was paid twice. Now a timed-out async
write waits the executor's grace period (what a sync handler's thread gets) before reconcile asks.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import callbound as cb

from .helpers import calls, fc, final, make, refund_tool


async def test_an_async_write_that_offloads_to_a_thread_is_reconciled_after_the_grace() -> None:
    downstream: list[str] = []
    lock = threading.Lock()

    def blocking_refund(key: str) -> dict[str, Any]:
        time.sleep(0.3)  # the refund lands after callbound's 100 ms timeout
        with lock:
            downstream.append(key)
        return {"refund_id": f"rf_{len(downstream)}"}

    async def refund(args: Any, ctx: cb.CallContext) -> dict[str, Any]:
        assert ctx.idempotency_key is not None
        return await asyncio.to_thread(blocking_refund, ctx.idempotency_key)

    def reconcile(key: str, ctx: cb.CallContext) -> dict[str, Any]:
        with lock:
            if key in downstream:
                return {"refund_id": "found downstream"}
        raise cb.NotApplied("no refund with this key downstream")

    tool = refund_tool(handler=refund, reconcile=reconcile, timeout_ms=100, requires_approval=False)
    args = {"order_id": "A1", "amount": 40.0}
    script = [calls("r1", fc("c1", "refund", args)), calls("r2", fc("c2", "refund", args)), final("r3")]
    h = make(script, [tool], grace_s=0.5)
    out = await h.run()
    await asyncio.sleep(0.5)  # every thread has finished by now
    assert out.state == cb.State.COMPLETED
    assert len(downstream) == 1  # paid once: reconcile found it, the retry replayed it
