"""A handler that calls sys.exit() fails like any handler (issue 2 §3, D4, D16; review round 20, d).

Code a tool wraps may end with ``sys.exit()`` (a command-line program's main, argparse on bad input).
In a worker thread that is only the thread's end, and it is the tool's failure, not the operation's:
the model gets HANDLER_ERROR, a write's outcome is unknown and goes to its reconcile. It escaped
``run`` instead (a sync handler's exception was re-raised on the loop; an async one's stopped the
event loop), a write's STARTED left behind with nothing recorded.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import callbound as cb
from callbound.core.errors import NotApplied

from .helpers import EchoArgs, calls, error_code, fc, final, last_outputs, make


def _exit_sync(args: EchoArgs, ctx: cb.CallContext) -> dict[str, Any]:
    raise SystemExit(2)


async def _exit_async(args: EchoArgs, ctx: cb.CallContext) -> dict[str, Any]:
    await asyncio.sleep(0)
    raise SystemExit("usage: refund-cli ORDER")


def _tool(handler: Any, risk: str, **kw: Any) -> cb.ToolSpec:
    return cb.ToolSpec(
        name="cli",
        description="Runs a command-line program",
        params=EchoArgs,
        handler=handler,
        schema_version="v1",
        risk=risk,  # type: ignore[arg-type]
        timeout_ms=2_000,
        **kw,
    )


@pytest.mark.parametrize("handler", [_exit_sync, _exit_async], ids=["sync", "async"])
def test_a_read_that_exits_is_a_handler_error(handler: Any) -> None:
    h = make([calls("r1", fc("c1", "cli", {"n": 1})), final("r2")], [_tool(handler, "read")])
    outcome = asyncio.run(h.run())
    assert outcome.state == cb.State.COMPLETED
    result = last_outputs(h.model)["c1"]
    assert error_code(result) == "HANDLER_ERROR"
    assert result["error"]["message"] == "the tool failed (SystemExit)"  # no exit text, no internals


@pytest.mark.parametrize("handler", [_exit_sync, _exit_async], ids=["sync", "async"])
def test_a_write_that_exits_has_an_unknown_outcome_reconciled(handler: Any) -> None:
    looked: list[str] = []

    def reconcile(key: str, ctx: cb.CallContext) -> dict[str, Any]:
        looked.append(key)
        raise NotApplied("nothing downstream")

    h = make(
        [calls("r1", fc("c1", "cli", {"n": 1})), final("r2")],
        [_tool(handler, "write", reconcile=reconcile)],
    )
    outcome = asyncio.run(h.run())
    assert outcome.state == cb.State.COMPLETED
    assert len(looked) == 1  # D16: reconciled at once, not guessed
    result = last_outputs(h.model)["c1"]
    assert error_code(result) == "HANDLER_ERROR"
    assert "was not applied" in result["error"]["message"]


@pytest.mark.parametrize("handler", [_exit_sync, _exit_async], ids=["sync", "async"])
def test_a_write_that_exits_without_reconcile_stops_outcome_unknown(handler: Any) -> None:
    h = make([calls("r1", fc("c1", "cli", {"n": 1})), final("r2")], [_tool(handler, "write")])
    outcome = asyncio.run(h.run())
    assert (outcome.state, outcome.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    assert outcome.escalation is not None and outcome.escalation["call_ids"] == ["c1"]
    [entry] = h.store.ledger_list("acme")
    assert entry.status.value == "UNKNOWN"
