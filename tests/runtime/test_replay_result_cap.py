"""D11 with D13 (1): a write's result replayed from the ledger is held to the result-size cap of the
operation that replays it, as the handler's own result is, and ``audit verify`` accepts that replay and
still catches a size that the ledger's result does not have."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.runtime.verify import verify_store
from callbound.stores.sqlite import SQLiteStore

from .helpers import Counter, calls, error_code, fc, final, last_outputs, make, rebuild


class RefundArgs(BaseModel):
    order_id: str


def refund_tool(counter: Counter, **overrides: Any) -> cb.ToolSpec:
    def refund(args: RefundArgs, ctx: cb.CallContext) -> dict[str, Any]:
        counter.calls.append(args.order_id)
        return {"refunded": args.order_id, "receipt": "r" * 5000}

    kw: dict[str, Any] = {
        "name": "submit_refund",
        "description": "Refund an order",
        "params": RefundArgs,
        "handler": refund,
        "schema_version": "refund-v1",
        "risk": "write",
        "intent_key": lambda args, ctx: f"refund-{args.order_id}",
    }
    kw.update(overrides)
    return cb.ToolSpec(**kw)


def script() -> list[dict[str, Any]]:
    return [calls("resp_1", fc("call_1", "submit_refund", {"order_id": "A1"})), final("resp_2")]


@pytest.mark.parametrize("where", ["budget", "tool"])
async def test_a_replayed_result_over_the_replaying_operations_cap_is_result_too_large(
    tmp_path: Path, where: str
) -> None:
    runs = Counter()
    store = SQLiteStore(tmp_path / "cb.db")
    h1 = make(script(), [refund_tool(runs)], store=store)  # type: ignore[arg-type]
    out1 = await h1.runner.run("refund A1", tenant="acme", subject="u1")
    assert out1.state == cb.State.COMPLETED
    assert last_outputs(h1.model)["call_1"]["ok"] is True

    small = {"budgets": cb.Budgets(max_result_bytes=1000)} if where == "budget" else {}
    spec = refund_tool(runs, max_result_bytes=1000) if where == "tool" else refund_tool(runs)
    h2 = rebuild(h1, [spec], script=script(), **small)
    out2 = await h2.runner.run("refund A1 again", tenant="acme", subject="u1", operation_id="op_two")
    assert out2.state == cb.State.COMPLETED
    assert runs.calls == ["A1"]  # replayed, never run again
    sent = last_outputs(h2.model)["call_1"]
    assert error_code(sent) == "RESULT_TOO_LARGE"
    assert "The effect was applied; do not repeat the call." in sent["error"]["message"]
    assert len(json.dumps(sent)) < 1000
    assert verify_store(store) == []
    store.close()


async def test_verify_names_a_capped_replay_whose_size_the_ledger_result_does_not_have(
    tmp_path: Path,
) -> None:
    runs = Counter()
    store = SQLiteStore(tmp_path / "cb.db")
    h1 = make(script(), [refund_tool(runs)], store=store)  # type: ignore[arg-type]
    await h1.runner.run("refund A1", tenant="acme", subject="u1")
    h2 = rebuild(h1, [refund_tool(runs)], script=script(), budgets=cb.Budgets(max_result_bytes=1000))
    await h2.runner.run("refund A1 again", tenant="acme", subject="u1", operation_id="op_two")
    # the ledger row edited afterwards: a shorter receipt than the one the replay said it was over the cap
    store.close()
    with sqlite3.connect(tmp_path / "cb.db") as conn:
        ((key, entry),) = conn.execute("SELECT key, entry FROM ledger").fetchall()
        doc = json.loads(entry)
        doc["result"]["data"]["receipt"] = "r" * 4000
        conn.execute("UPDATE ledger SET entry = ? WHERE key = ?", (json.dumps(doc), key))
    store = SQLiteStore(tmp_path / "cb.db")
    problems = verify_store(store, "op_two")  # the replaying operation, not only the one that recorded it
    assert [p.why for p in problems] == [
        "the replayed result's size differs from the result the ledger recorded"
    ]
    store.close()


async def test_a_replay_of_a_result_recorded_over_the_cap_verifies_clean(tmp_path: Path) -> None:
    """The ledger recorded the RESULT_TOO_LARGE envelope itself (the first run was over its cap): a replay
    sends that envelope as recorded, and verify must not read it as a capped replay of a real result
    (a false TAMPERED; generative review, round 13)."""
    runs = Counter()
    store = SQLiteStore(tmp_path / "cb.db")
    script = [
        calls("resp_1", fc("call_1", "submit_refund", {"order_id": "A1"})),
        calls("resp_2", fc("call_2", "submit_refund", {"order_id": "A1"})),
        final("resp_3"),
    ]
    h = make(script, [refund_tool(runs)], store=store, budgets=cb.Budgets(max_result_bytes=1000))  # type: ignore[arg-type]
    out = await h.runner.run("refund A1", tenant="acme", subject="u1")
    assert out.state == cb.State.COMPLETED
    assert runs.calls == ["A1"]
    assert error_code(last_outputs(h.model)["call_2"]) == "RESULT_TOO_LARGE"
    assert verify_store(store) == []
    h2 = rebuild(h, [refund_tool(runs)], script=script)  # the default cap, far over the result
    await h2.runner.run("refund A1 again", tenant="acme", subject="u1", operation_id="op_two")
    assert runs.calls == ["A1"]
    assert verify_store(store) == []
    store.close()


async def test_a_purged_ledger_result_replays_as_applied_and_never_runs_again(tmp_path: Path) -> None:
    """D20 lets payloads be purged for privacy: a SUCCEEDED entry whose result was set to null still
    stands for a refund that happened. A later proposal of that intent crashed the run with a bare
    AssertionError (review round 14); it now hears "applied", the refund is not paid again, and verify
    accepts the purge and the replay."""
    runs = Counter()
    store = SQLiteStore(tmp_path / "cb.db")
    h1 = make(script(), [refund_tool(runs)], store=store)  # type: ignore[arg-type]
    assert (await h1.runner.run("refund A1", tenant="acme", subject="u1")).state == cb.State.COMPLETED
    store.close()
    with sqlite3.connect(tmp_path / "cb.db") as conn:
        ((key, entry),) = conn.execute("SELECT key, entry FROM ledger").fetchall()
        doc = json.loads(entry)
        doc["result"] = None  # purged
        conn.execute("UPDATE ledger SET entry = ? WHERE key = ?", (json.dumps(doc), key))
    store = SQLiteStore(tmp_path / "cb.db")
    h2 = make(script(), [refund_tool(runs)], store=store, clock=h1.clock)  # type: ignore[arg-type]
    out = await h2.runner.run("refund A1 again", tenant="acme", subject="u1", operation_id="op_two")
    assert out.state == cb.State.COMPLETED
    assert runs.calls == ["A1"]  # replayed, never run again
    sent = last_outputs(h2.model)["call_1"]
    assert sent["ok"] is True and sent["data"]["applied"] is True
    assert verify_store(store) == []
    store.close()
