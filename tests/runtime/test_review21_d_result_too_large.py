"""Review round 21, d: a result over the size cap is not stored whole (D11, D20).

The cap (D11) bounds what is sent and what is kept, but a handler's value over it went into the
envelope's ``protected_audit.output`` whole: a read returning 50 MB wrote 50 MB into the journal's
``results`` row (and, across an approval pause, into the operation row). Now the audit output of a
RESULT_TOO_LARGE envelope is a stand-in, ``{"omitted": "RESULT_TOO_LARGE", "bytes": N, "sha256": H}``:
the size and the SHA-256 of the canonical JSON of the value the handler (or a write's reconcile)
returned, so anyone who kept the value can prove it is the one the call produced, and the chain vouches
for the stand-in like for any output (D20): ``audit verify`` stays clean, an edited stand-in is named.
Held on memory, SQLite and PostgreSQL (``each_store``)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.core.canonical import canonical_bytes, canonical_sha256
from callbound.core.idempotency import LedgerStatus
from callbound.runtime.verify import verify_store
from callbound.stores import open as open_store
from callbound.stores.base import Store
from callbound.testing import FakeClock

from .helpers import (
    Counter,
    OrderArgs,
    calls,
    error_code,
    fc,
    final,
    get_order_tool,
    last_outputs,
    make,
    refund_tool,
    write_tool,
)

BLOB = "x" * 300_000  # over the default 64 KiB cap (D12); a 50 MB one behaves the same, only slower
BODY = {"blob": BLOB}
MARK = "x" * 1000  # any run of the body found in stored rows means it was kept


def _big(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
    return BODY


def _stand_in() -> dict[str, Any]:
    return {
        "omitted": "RESULT_TOO_LARGE",
        "bytes": len(canonical_bytes(BODY)),
        "sha256": canonical_sha256(BODY),
    }


def _stored_text(store: Store, operation_id: str) -> str:
    """Everything the store holds of the operation, as text: head, journal, audit events, ledger."""
    loaded = store.load_operation(operation_id)
    assert loaded is not None
    parts: list[Any] = [loaded.head, [(r.kind, r.data) for r in loaded.journal]]
    parts += [e.to_dict() for e in store.audit_events(operation_id)]
    parts += [(e.key, e.status.value, e.result) for e in store.ledger_list("acme")]
    return json.dumps(parts)


def _outputs(store: Store, operation_id: str) -> list[Any]:
    loaded = store.load_operation(operation_id)
    assert loaded is not None
    return [
        env["protected_audit"]["output"]
        for row in loaded.journal
        if row.kind == "results"
        for env in row.data["envelopes"]
    ]


@pytest.fixture
def store(each_store: Store) -> Store:
    return each_store


async def test_a_read_over_the_cap_keeps_its_size_and_digest_not_its_body(store: Store) -> None:
    h = make(
        [calls("r1", fc("c1", "get_order", {"order_id": "A1"})), final("r2")],
        [get_order_tool(handler=_big)],
        store=store,  # type: ignore[arg-type]
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["c1"]) == "RESULT_TOO_LARGE"
    assert _outputs(store, out.operation_id) == [_stand_in()]
    text = _stored_text(store, out.operation_id)
    assert MARK not in text  # was: the 300 KB body in the journal's results row
    assert len(text) < 50_000
    assert verify_store(store, out.operation_id) == []


async def test_an_under_cap_result_is_still_kept_whole(store: Store) -> None:
    h = make(
        [calls("r1", fc("c1", "get_order", {"order_id": "A1"})), final("r2")],
        [get_order_tool()],
        store=store,  # type: ignore[arg-type]
    )
    out = await h.run()
    assert _outputs(store, out.operation_id) == [{"order_id": "A1", "status": "shipped"}]


async def test_a_write_over_the_cap_keeps_no_body_in_the_ledger_or_audit(store: Store) -> None:
    notes = Counter()

    def note(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        notes.calls.append(args.order_id)
        return BODY

    h = make(
        [calls("r1", fc("c1", "set_note", {"order_id": "A1"})), final("r2")],
        [write_tool(handler=note)],
        store=store,  # type: ignore[arg-type]
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED and notes.n == 1
    result = last_outputs(h.model)["c1"]
    assert error_code(result) == "RESULT_TOO_LARGE" and "applied" in result["error"]["message"]
    [entry] = store.ledger_list("acme")
    assert entry.status == LedgerStatus.SUCCEEDED  # applied (D11): a replay says so, never re-runs
    assert _outputs(store, out.operation_id) == [_stand_in()]
    assert MARK not in _stored_text(store, out.operation_id)
    assert verify_store(store, out.operation_id) == []


async def test_a_reconciled_value_over_the_cap_is_kept_as_size_and_digest(store: Store) -> None:
    """D16: the value reconcile finds goes through the same cap as the handler's."""

    def timed_out(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        raise TimeoutError("downstream did not answer")

    h = make(
        [calls("r1", fc("c1", "set_note", {"order_id": "A1"})), final("r2")],
        [write_tool(handler=timed_out, reconcile=lambda key, ctx: BODY)],
        store=store,  # type: ignore[arg-type]
    )
    out = await h.run()
    assert out.state == cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["c1"]) == "RESULT_TOO_LARGE"
    assert _outputs(store, out.operation_id) == [_stand_in()]
    assert MARK not in _stored_text(store, out.operation_id)
    assert verify_store(store, out.operation_id) == []


async def test_a_read_over_the_cap_saved_across_an_approval_pause_is_not_kept_whole(store: Store) -> None:
    """D3: the read of a mixed turn is sealed before the pause, its envelope saved in the operation
    row until the refund is decided; that row is rewritten on every commit."""
    refunds = Counter()
    h = make(
        [
            calls(
                "r1",
                fc("c1", "get_order", {"order_id": "A1"}),
                fc("c2", "refund", {"order_id": "A1", "amount": 40}),
            ),
            final("r2"),
        ],
        [get_order_tool(handler=_big), refund_tool(refunds)],
        store=store,  # type: ignore[arg-type]
        clock=FakeClock(),
    )
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    assert MARK not in _stored_text(store, out.operation_id)  # was: in the operation row
    [pending] = out.pending_approvals
    done = await h.runner.resume(out.operation_id, cb.Decision.approve(pending.approval_id, approver="boss"))
    assert done.state == cb.State.COMPLETED and refunds.n == 1
    assert error_code(last_outputs(h.model)["c1"]) == "RESULT_TOO_LARGE"
    assert MARK not in _stored_text(store, out.operation_id)
    assert verify_store(store, out.operation_id) == []


def test_an_edited_stand_in_is_named_by_audit_verify(tmp_path: Path) -> None:
    """D20: the chain holds the stand-in's digest; a changed size or digest is tampering (SQLite, edited
    with sqlite3 as anyone with write access to the file could)."""
    url = f"sqlite:///{tmp_path / 'cb.db'}"
    h = make(
        [calls("r1", fc("c1", "get_order", {"order_id": "A1"})), final("r2")],
        [get_order_tool(handler=_big)],
        store=open_store(url),  # type: ignore[arg-type]
    )
    out = h.runner.run_sync("Where is A1?", tenant="acme", subject="u1", operation_id="op_big")
    assert out.state == cb.State.COMPLETED
    loaded = h.store.load_operation("op_big")
    assert loaded is not None
    pos = next(i for i, row in enumerate(loaded.journal) if row.kind == "results")
    data = json.loads(json.dumps(loaded.journal[pos].data))
    data["envelopes"][0]["protected_audit"]["output"]["sha256"] = "0" * 64
    with sqlite3.connect(tmp_path / "cb.db") as db:
        db.execute(
            "UPDATE journal SET data = ? WHERE operation_id = ? AND pos = ?",
            (json.dumps(data), "op_big", pos),
        )
    problems = verify_store(open_store(url), "op_big")
    assert [p.why for p in problems] == [
        "its audit record's output differs from the digest the chain recorded"
    ]
