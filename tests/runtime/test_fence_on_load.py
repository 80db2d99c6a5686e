"""D21: a drive proves its lease when it reads the operation, not only when it writes.

Found by an acceptance probe: worker A claimed an operation (fence 1) and then stalled longer than its
lease (building the operation's app); worker B claimed it (fence 2) and started the refund. A then read
the operation, took the fence stored in its row (B's 2) for its own, passed every fenced commit,
reconciled B's STARTED entry as its own crash and paid the refund a second time, on SQLite and on
PostgreSQL; the operation ended COMPLETED and the audit verified.

Now ``resume_leased(..., fence=)`` (what a worker calls with its claim's token, and what ``resume``
calls with the token of the lease it takes) raises ``StaleLease`` when the stored token differs, before
anything is written or run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import callbound as cb
from callbound.stores.sqlite import SQLiteStore

from .helpers import Counter, calls, fc, final, make, write_tool

T0 = 1_900_000_000.0


def at(seconds: float) -> object:
    return lambda: T0 + seconds


async def test_a_claim_taken_over_before_the_read_drives_nothing(tmp_path: Path) -> None:
    paid = Counter()
    store = SQLiteStore(tmp_path / "cb.db")
    h = make(
        [calls("resp_1", fc("call_1", "set_note", {"order_id": "A1"})), final("resp_2")],
        [write_tool(paid)],
        store=store,  # type: ignore[arg-type]
    )
    op_id = h.runner.submit("Refund A1", tenant="acme", subject="user-1")
    claimed_a = store.claim("worker-a", 1.0, now_fn=at(0))  # type: ignore[arg-type]
    claimed_b = store.claim("worker-b", 1.0, now_fn=at(5))  # type: ignore[arg-type]  # A's lease expired
    assert claimed_a is not None and claimed_b is not None
    (op_a, fence_a), (op_b, fence_b) = claimed_a, claimed_b
    assert op_a == op_b == op_id and fence_b > fence_a

    with pytest.raises(cb.StaleLease, match=f"lease token {fence_a} is no longer current"):
        await h.runner.resume_leased(op_id, fence=fence_a)
    assert paid.n == 0 and len(h.model.requests) == 0
    stored = store.load_operation(op_id)
    assert stored is not None and stored.head["fence"] == fence_b and stored.head["commits"] == 1

    out = await h.runner.resume_leased(op_id, fence=fence_b)  # the new owner drives it, once
    assert out.state == cb.State.COMPLETED
    assert paid.n == 1
    store.close()
