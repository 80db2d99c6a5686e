"""Gemini Interactions stream assembly: a delta for a step never started (review round 18, b).

A ``step.delta`` for a step index no ``step.start`` (legacy ``content.start``) opened names no step: it
is dropped, as the Anthropic and Responses assemblers drop a delta for a block or item never started.
It was filed under a step of its own with no ``type``, which went back to the API in the next
request's input (D8 replays the turn's steps), where the API rejects a step without its type; an
orphan ``arguments_delta`` also raised ``ArgumentsProgress`` for a call no ``CallStarted`` announced.
Checked on the decoded path (``feed``) and the fast path (``feed_events``, compact ``arguments_delta``
events), whole and byte by byte.
"""

from __future__ import annotations

from pydantic import BaseModel

import callbound as cb
from callbound.core.types import ArgumentsProgress, CallReady, CallStarted, Finish
from callbound.testing import ScriptedModel

from .interactions_sse import API, CREATED, START, STOP, USAGE, args_delta, completed, readings, sse

ORPHAN_ARGS = [
    CREATED,
    START,
    args_delta(0, '{"city":"Oslo"}'),
    STOP,
    args_delta(1, '{"city":"Rome"}'),  # no step.start for index 1
    completed("requires_action"),
]


def test_an_argument_delta_for_a_step_never_started_is_dropped() -> None:
    for turn, progress in readings(ORPHAN_ARGS):
        assert turn.finish is Finish.TOOL_PROPOSALS
        assert [(c.call_id, c.arguments) for c in turn.calls] == [("c1", {"city": "Oslo"})]
        # no step without a type is invented for the replay (D8: only what the provider sent)
        assert turn.continuation == (
            {"id": "c1", "type": "function_call", "name": "get_weather", "arguments": {"city": "Oslo"}},
        )
        # progress names only the call that was started
        assert progress == [CallStarted("c1", "get_weather"), ArgumentsProgress("c1", 15), CallReady("c1")]


def test_a_text_delta_for_a_step_never_started_invents_no_step() -> None:
    events = [
        CREATED,
        {"index": 0, "step": {"type": "model_output"}, "event_type": "step.start"},
        {"index": 0, "delta": {"text": "Sunny.", "type": "text"}, "event_type": "step.delta"},
        {"index": 0, "event_type": "step.stop"},
        {"index": 1, "delta": {"text": "stray", "type": "text"}, "event_type": "step.delta"},
        completed("completed"),
    ]
    for turn, _ in readings(events):
        assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "Sunny.")
        assert turn.continuation == (
            {"type": "model_output", "content": [{"type": "text", "text": "Sunny."}]},
        )


def test_the_next_request_replays_no_step_without_a_type() -> None:
    class Q(BaseModel):
        city: str

    spec = cb.ToolSpec(
        name="get_weather",
        description="Weather for a city",
        params=Q,
        handler=lambda a, c: {"t": 3},
        schema_version="v1",
        risk="read",
        timeout_ms=500,
    )
    done = {
        "id": "v1_ok",
        "status": "completed",
        "steps": [{"type": "model_output", "content": [{"type": "text", "text": "Done."}]}],
        "usage": USAGE,
    }
    model = ScriptedModel(API, [sse(ORPHAN_ARGS, compact=True), done], model="gemini-x")
    runner = cb.Runner(model=model, registry=cb.Registry([spec]), budgets=cb.Budgets(max_model_turns=4))
    out = runner.run_sync("hi", tenant="t", subject="s")
    assert (out.state.value, out.text) == ("COMPLETED", "Done.")
    replayed = model.requests[1]["input"]
    assert all(isinstance(step, dict) and step.get("type") for step in replayed), replayed
