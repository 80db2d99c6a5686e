"""Review round 20, g: docs/reference.md's errors table names the UsageErrors a Runner method raises
about the operation it is given (the row named only wrong argument types, settings keys and app
references): an operation id the store does not hold, resume or cancel of an operation that has ended,
and a cancel while one of its write handlers runs (D2: a finished operation never moves; D16: a
write's effect is never left unknown by a cancel)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.stores.memory import MemoryStore
from callbound.testing import ScriptedModel
from tests.recordings import REPO_ROOT


def _row() -> str:
    text = (REPO_ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    (row,) = [line for line in text.splitlines() if line.startswith("| `UsageError` |")]
    return row


class _Refund(BaseModel):
    order_id: str


CALL = {
    "id": "r1",
    "status": "completed",
    "output": [
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "submit_refund",
            "arguments": '{"order_id": "A1"}',
        }
    ],
}
ANSWER = {
    "id": "r2",
    "status": "completed",
    "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}
    ],
}


def _runner(handler: Any, store: MemoryStore) -> cb.Runner:
    spec = cb.ToolSpec(
        name="submit_refund",
        description="Refund an order",
        params=_Refund,
        handler=handler,
        schema_version="v1",
        risk="write",
        timeout_ms=10_000,
    )
    return cb.Runner(
        model=ScriptedModel("openai-responses", [CALL, ANSWER]), registry=cb.Registry([spec]), store=store
    )


@pytest.mark.parametrize("method", ["resume", "outcome", "cancel"])
def test_an_operation_id_the_store_does_not_hold(method: str) -> None:
    assert "an operation id the store does not hold (`resume`, `outcome`, `cancel`)" in _row()
    runner = _runner(lambda args, ctx: {}, MemoryStore())
    call = {"resume": runner.resume_sync, "outcome": runner.outcome, "cancel": runner.cancel}[method]
    with pytest.raises(cb.UsageError, match="no operation 'op_nope'"):
        call("op_nope")


def test_resume_or_cancel_of_an_operation_that_has_ended() -> None:
    assert "`resume` or `cancel` of an operation that has ended" in _row()
    runner = _runner(lambda args, ctx: {"refund_id": "rf_1"}, MemoryStore())
    outcome = runner.run_sync(input="Refund A1", tenant="acme", subject="user-1")
    assert outcome.state == "COMPLETED"
    with pytest.raises(cb.UsageError, match="cannot be resumed"):
        runner.resume_sync(outcome.operation_id)
    with pytest.raises(cb.UsageError, match="already COMPLETED"):
        runner.cancel(outcome.operation_id)


def test_cancel_while_a_write_handler_runs() -> None:
    assert "`cancel` while one of its write handlers runs" in _row()
    store = MemoryStore()
    started, release = threading.Event(), threading.Event()
    seen: dict[str, str] = {}

    def submit_refund(args: _Refund, ctx: cb.CallContext) -> dict[str, str]:
        seen["op"] = ctx.operation_id
        started.set()
        release.wait(10)
        return {"refund_id": "rf_1"}

    runner = _runner(submit_refund, store)
    result: dict[str, cb.Outcome] = {}
    driver = threading.Thread(
        target=lambda: result.setdefault(
            "o", runner.run_sync(input="Refund A1", tenant="acme", subject="user-1")
        )
    )
    driver.start()
    try:
        assert started.wait(10)
        with pytest.raises(cb.UsageError):
            _runner(submit_refund, store).cancel(seen["op"])
    finally:
        release.set()
        driver.join(30)
    assert result["o"].state == "COMPLETED"
