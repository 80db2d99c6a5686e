"""Review round 21, d: the stops decided after a turn's calls ran name what each call did.

D13 (3) ends an operation STOPPED(NO_PROGRESS) once ``max_no_progress_turns`` turns in a row return
only results seen before. That is decided after the turn's calls ran (at RESULTS_READY): a write among
them may have applied its effect, and its result never reaches the model. docs/stop-reasons.md: every
escalation record names the turn it concerns, ``call_ids``, ``tools`` and, for calls that were
handled, ``effects``, one per call. This stop named the call ids and a sorted set of the tool names
(not one per call), and no effects: the human could not tell from the record that a refund had just been
made. Now ``tools`` and ``effects`` are one per call, in the order of ``call_ids``. The FAILED(INTEGRITY)
end at the same point named the response id alone."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

import callbound as cb
from callbound.runtime.operation import Operation
from callbound.testing import ApiError

from .helpers import calls, fc, final, get_order_tool, make


class NoteArgs(BaseModel):
    order_id: str
    text: str


def _note_tool(runs: list[str]) -> cb.ToolSpec:
    def note(args: NoteArgs, ctx: cb.CallContext) -> dict[str, Any]:
        runs.append(args.text)
        return {"noted": args.order_id}  # the same result whatever the text: no progress to see

    return cb.ToolSpec(
        name="set_note",
        description="Write a note on an order",
        params=NoteArgs,
        handler=note,
        schema_version="set-note-v1",
        risk="write",
        timeout_ms=2000,
    )


async def test_the_stop_names_each_call_of_the_turn_with_its_tool_and_effect() -> None:
    runs: list[str] = []
    # each turn writes a new note (a new intent, so it runs) and reads the order: all results seen before
    script = [
        calls(
            f"r{i}",
            fc(f"w{i}", "set_note", {"order_id": "A1", "text": f"try {i}"}),
            fc(f"g{i}", "get_order", {"order_id": f"A{i % 2}"}),
        )
        for i in range(1, 8)
    ]
    h = make(script, [_note_tool(runs), get_order_tool()], budgets=cb.Budgets(max_identical_calls=10))
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "NO_PROGRESS")
    esc = out.escalation or {}
    assert "results seen before" in esc["detail"]
    last = esc["response_id"]
    n = last.removeprefix("r")
    assert runs[-1] == f"try {n}"  # the stopping turn's write ran: its effect is applied
    assert esc["call_ids"] == [f"w{n}", f"g{n}"]
    assert esc["tools"] == ["set_note", "get_order"]  # was: ["get_order", "set_note"] (a sorted set)
    assert esc["effects"] == ["applied", "none"]  # was: missing


# ---- FAILED(INTEGRITY) at RESULTS_READY: the turn's calls ran too -------------------------------------


async def test_an_integrity_failure_before_results_go_back_names_the_calls_and_their_effects() -> None:
    """D4: a result not bound to its call ends the operation FAILED(INTEGRITY) before the results go
    back; the calls ran, a write among them. The record named the response id only."""
    runs: list[str] = []
    h = make(
        [
            calls(
                "r1",
                fc("w1", "set_note", {"order_id": "A1", "text": "refund noted"}),
                fc("g1", "get_order", {"order_id": "A1"}),
            ),
            final("r2"),
        ],
        [_note_tool(runs), get_order_tool()],
    )
    original = h.runner._send_results

    async def swapped(op: Operation) -> None:  # a bug or an attacker inside the process
        assert op.current is not None
        e1, e2 = (r.envelope for r in op.current.records)
        assert e1 is not None and e2 is not None
        e1["model_result"], e2["model_result"] = e2["model_result"], e1["model_result"]
        await original(op)

    h.runner._send_results = swapped  # type: ignore[method-assign]
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.FAILED, "INTEGRITY")
    assert runs == ["refund noted"]
    esc = out.escalation or {}
    assert esc["response_id"] == "r1"
    assert esc["call_ids"] == ["w1", "g1"]  # was: missing
    assert esc["tools"] == ["set_note", "get_order"]
    assert esc["effects"] == ["applied", "none"]


# ---- STOPPED(DEADLINE) before a retry: the last handled turn's results never reached the model -------


async def test_a_deadline_stop_before_a_retry_names_the_turn_last_handled_and_its_effects() -> None:
    """D14, D26: the request carrying a write's result failed (503) and its retry would wait past the
    deadline. The record named the failed request's made-up id (``cb:...``, D7) and none of the calls
    whose results never reached the model, unlike the same stop decided once the retry is due
    (retry_step) and docs/stop-reasons.md ("also before a retry")."""
    runs: list[str] = []
    h = make(
        [
            calls("r1", fc("w1", "set_note", {"order_id": "A1", "text": "refund noted"})),
            ApiError(503, headers={"retry-after": "60"}),
            final("r2"),
        ],
        [_note_tool(runs)],
        budgets=cb.Budgets(deadline_s=10),
    )
    out = await h.run()
    assert (out.state, out.reason) == (cb.State.STOPPED, "DEADLINE")
    assert runs == ["refund noted"]
    esc = out.escalation or {}
    assert (esc["response_id"], esc["call_ids"], esc["tools"], esc["effects"]) == (
        "r1",
        ["w1"],
        ["set_note"],
        ["applied"],
    )
    # the failed request is still named, beside the turn
    assert esc["failed_response_id"].startswith("cb:") and esc["raw_stop_reason"] == "503"
    assert esc["retries"] == 0
