"""Review round 15: escalation records of the stops decided at planning name the turn's tools.

docs/stop-reasons.md ("Every escalation record ... names the turn it concerns: response_id, call_ids,
tools") and issue 2 §5 (what a human must look at): the MAX_TOOL_CALLS stop and the NO_PROGRESS stop on
a call repeated after the model was told (D13 (3)) named the turn's call ids but not its tools, unlike a
token budget or USAGE_UNKNOWN stop. Bodies are synthetic, in the Responses shape of tests/runtime/helpers.py.
"""

from __future__ import annotations

import logging

import pytest

import callbound as cb

from .helpers import Counter, calls, fc, final, get_order_tool, make

A1 = {"order_id": "A1"}


async def test_a_max_tool_calls_escalation_names_the_refused_calls_and_their_tools() -> None:
    runs = Counter()
    script = [calls("r1", *(fc(f"c{i}", "get_order", {"order_id": f"A{i}"}) for i in range(1, 4)))]
    h = make(script, [get_order_tool(runs)], budgets=cb.Budgets(max_tool_calls=2))
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "MAX_TOOL_CALLS")
    assert runs.n == 0
    esc = out.escalation or {}
    assert (esc["response_id"], esc["call_ids"], esc["tools"]) == (
        "r1",
        ["c1", "c2", "c3"],
        ["get_order"] * 3,
    )


async def test_a_repeat_after_no_progress_escalation_names_the_turns_calls_and_tools() -> None:
    runs = Counter()
    script = [
        calls("r1", fc("c1", "get_order", A1)),
        calls("r2", fc("c2", "get_order", A1)),
        calls("r3", fc("c3", "get_order", A1)),
        final("r4"),
    ]
    h = make(script, [get_order_tool(runs)], budgets=cb.Budgets(max_identical_calls=1))
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "NO_PROGRESS")
    assert runs.n == 1
    esc = out.escalation or {}
    assert (esc["response_id"], esc["call_ids"], esc["tools"]) == ("r3", ["c3"], ["get_order"])


# ---- run(input=None) with no earlier messages -------------------------------------------------------


def test_no_input_and_no_messages_is_a_usage_error_before_anything_is_stored() -> None:
    """reference.md: ``run(input=...)`` takes non-empty text or None; None with no ``Runner(messages=...)``
    is an empty transcript, which every provider refuses (D4: misuse is a UsageError, not a FAILED run)."""
    h = make([final("r1")], [])
    with pytest.raises(cb.UsageError, match="nothing to ask"):
        h.runner.run_sync(None, tenant="acme", subject="u")
    with pytest.raises(cb.UsageError, match="nothing to ask"):
        h.runner.submit(None, tenant="acme", subject="u")
    assert h.store.list_operations() == [] and h.model.requests == []


def test_no_input_with_earlier_messages_still_runs() -> None:
    h = make([final("r1")], [], messages=[{"role": "user", "content": "where is A1?"}])
    assert h.runner.run_sync(None, tenant="acme", subject="u").state == cb.State.COMPLETED


# ---- D29: the first transition is logged and observed too -------------------------------------------


def test_the_created_transition_is_logged_and_shown_to_on_transition(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """D29: every transition emits a structured log record; the demo's timeline (issue 2 §9) is built
    from ``on_transition``. The first one, into MODEL_REQUESTED (cause ``created``), was in the history
    only."""
    seen: list[tuple[str, str]] = []
    h = make([final("r1")], [], on_transition=lambda op_id, t: seen.append((t.state, t.cause)))
    with caplog.at_level(logging.INFO, logger="callbound"):
        out = h.runner.run_sync("hi", tenant="acme", subject="u")
    assert [(t.state, t.cause) for t in out.history] == [
        ("MODEL_REQUESTED", "created"),
        ("COMPLETED", "final_text"),
    ]
    assert seen == [("MODEL_REQUESTED", "created"), ("COMPLETED", "final_text")]
    logged = [(r.state, r.cause) for r in caplog.records if hasattr(r, "cause")]  # type: ignore[attr-defined]
    assert logged == seen
    first = next(r for r in caplog.records if getattr(r, "cause", None) == "created")
    assert (first.operation_id, first.tenant, first.subject) == (out.operation_id, "acme", "u")  # type: ignore[attr-defined]


def test_a_run_the_store_refuses_announces_no_created_transition(caplog: pytest.LogCaptureFixture) -> None:
    """D29 (regression review of db3e8ee): the created transition is announced once stored; a second
    run under an operation id already used raises OperationExists, and no transition happened."""
    seen: list[tuple[str, str]] = []
    h = make([final("r1"), final("r2")], [], on_transition=lambda op_id, t: seen.append((op_id, t.cause)))
    h.runner.run_sync("hi", tenant="acme", subject="u", operation_id="op-fixed")
    seen.clear()
    with caplog.at_level(logging.INFO, logger="callbound"), pytest.raises(cb.OperationExists):
        h.runner.run_sync("hi", tenant="acme", subject="u", operation_id="op-fixed")
    assert seen == []
    assert not [r for r in caplog.records if getattr(r, "cause", None) == "created"]
    h.runner.submit("hi", tenant="acme", subject="u", operation_id="op-queued")
    assert seen == [("op-queued", "created")]


def test_no_input_with_instructions_only_is_sent() -> None:
    """Instructions alone are a request (a Chat system message, Responses instructions): whether the
    provider takes them is its call, not a UsageError (regression review of c1a4f00)."""
    h = make([final("r1")], [], instructions="Say hello.")
    assert h.runner.run_sync(None, tenant="acme", subject="u").state == cb.State.COMPLETED
