"""An OUTCOME_UNKNOWN stop's escalation record names the rest of its turn (issue 2 §5, D16; review
round 20, d).

A write whose outcome is unknown stops the turn where it is: the writes proposed after it never start,
so a human looks first. The record named the unknown write alone: the refund the model also asked for,
never run, and the read that did run were not in it, though the model hears of none of them and the
human deciding what to do next must know what was left undone. Now ``not_run`` names the calls that
did not run and ``handled`` those that did, with their effects, as a DEADLINE stop names them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import callbound as cb

from .helpers import Counter, calls, fc, final, get_order_tool, make, refund_tool, write_tool


def _fails(args: Any, ctx: cb.CallContext) -> Any:
    raise RuntimeError("connection reset")


def test_the_record_names_the_writes_left_unrun_and_the_calls_that_ran() -> None:
    notes, refunds, reads = Counter(), Counter(), Counter()
    script = [
        calls(
            "r1",
            fc("c1", "set_note", {"order_id": "A1"}),
            fc("c2", "get_order", {"order_id": "A1"}),
            fc("c3", "post_note", {"order_id": "A1"}),
            fc("c4", "refund", {"order_id": "A1", "amount": 40.0}),
        ),
        final("r2"),
    ]
    tools = [
        write_tool(notes),
        get_order_tool(reads),
        write_tool(name="post_note", handler=_fails),  # no reconcile: nobody can tell
        refund_tool(refunds, requires_approval=False, risk="write"),
    ]
    h = make(script, tools)
    outcome = asyncio.run(h.run())
    assert (outcome.state, outcome.reason) == (cb.State.STOPPED, "OUTCOME_UNKNOWN")
    assert (notes.n, reads.n, refunds.n) == (1, 1, 0)
    esc = outcome.escalation
    assert esc is not None
    assert (esc["call_ids"], esc["tools"]) == (["c3"], ["post_note"])
    assert esc["not_run"] == [{"call_id": "c4", "tool": "refund"}]
    assert esc["handled"] == [
        {"call_id": "c1", "tool": "set_note", "effect": "applied"},
        {"call_id": "c2", "tool": "get_order", "effect": "none"},
    ]
    # the stored record is the audited one: a resume's integrity check and `audit verify` agree
    from callbound.runtime.verify import verify_store

    assert verify_store(h.store, outcome.operation_id) == []


def test_a_lone_unknown_write_adds_nothing() -> None:
    h = make(
        [calls("r1", fc("c1", "post_note", {"order_id": "A1"})), final("r2")],
        [write_tool(name="post_note", handler=_fails)],
    )
    outcome = asyncio.run(h.run())
    assert outcome.reason == "OUTCOME_UNKNOWN"
    assert outcome.escalation is not None
    assert "not_run" not in outcome.escalation and "handled" not in outcome.escalation
