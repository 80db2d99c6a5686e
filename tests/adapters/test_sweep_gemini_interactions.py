"""gemini-interactions: regressions found by sweeping public recordings (synthetic bodies, real shapes)."""

from __future__ import annotations

import json
from typing import Any

from callbound.adapters.gemini_interactions import ADAPTER
from callbound.core.types import Finish, ok_result
from tests.adapters import streaming

IID = "v1_ChdVbXNIYXVEUkVacmpxdHNQb3JQeXlBRRIXVW1zSGF1RFJFWnJqcXRzUG9yUHl5QUU"


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(
        f"event: {e['event_type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n".encode() for e in events
    )


def tool_call_stream(*deltas: dict[str, Any]) -> bytes:
    """The event sequence of vercel/ai packages/google/src/interactions/__fixtures__/tool-call-step1.chunks.txt
    (thought step with its signature, function_call step.start with ``arguments: {}``, argument deltas,
    interaction.completed with requires_action), with the given argument deltas."""
    return sse(
        {"interaction": {"id": IID, "status": "in_progress", "model": "gemini-2.5-flash"}, "event_type": "interaction.created"},
        {"interaction_id": IID, "status": "in_progress", "event_type": "interaction.status_update"},
        {"index": 0, "step": {"type": "thought"}, "event_type": "step.start"},
        {"index": 0, "delta": {"signature": "CiQBsig", "type": "thought_signature"}, "event_type": "step.delta"},
        {"index": 0, "event_type": "step.stop"},
        {
            "index": 1,
            "step": {"id": "61nzpsv4", "signature": "", "type": "function_call", "name": "getWeather", "arguments": {}},
            "event_type": "step.start",
        },
        *({"index": 1, "delta": d, "event_type": "step.delta"} for d in deltas),
        {"index": 1, "event_type": "step.stop"},
        {
            "interaction": {
                "id": IID,
                "status": "requires_action",
                "usage": {"total_input_tokens": 53, "total_output_tokens": 15, "total_thought_tokens": 65},
            },
            "event_type": "interaction.completed",
        },
    )  # fmt: skip


def test_partial_arguments_deltas_are_the_call_arguments() -> None:
    # The API revision before 2026-05-12 named the fragment ``partial_arguments`` (genai SDK
    # StepDeltaDeltaArgumentsDelta, WIRE.md 5.6). Ignored, the call ran with the ``{}`` of its
    # step.start snapshot and the replay carried a stray ``partial_arguments`` key (D5, D8).
    raw = tool_call_stream(
        {"partial_arguments": '{"location":', "type": "arguments_delta"},
        {"partial_arguments": '"San Francisco"}', "type": "arguments_delta"},
    )
    turn, _ = streaming.fed(ADAPTER, raw)
    assert turn.finish is Finish.TOOL_PROPOSALS
    [call] = turn.calls
    assert (call.call_id, call.name, call.arguments, call.arguments_error) == (
        "61nzpsv4",
        "getWeather",
        {"location": "San Francisco"},
        None,
    )
    step = turn.continuation[1]
    assert step["arguments"] == {"location": "San Francisco"} and "partial_arguments" not in step


def test_partial_arguments_and_arguments_spellings_give_the_same_turn() -> None:
    old = tool_call_stream({"partial_arguments": '{"location":"Oslo"}', "type": "arguments_delta"})
    new = tool_call_stream({"arguments": '{"location":"Oslo"}', "type": "arguments_delta"})
    t_old, p_old = streaming.fed(ADAPTER, old)
    t_new, p_new = streaming.fed(ADAPTER, new)
    assert (t_old.calls, t_old.continuation, p_old) == (t_new.calls, t_new.continuation, p_new)
    results = ADAPTER.result_items(t_old, [(t_old.calls[0], ok_result({"temp": 3}))])
    body = ADAPTER.build_request(
        items=[*ADAPTER.turn_items(t_old), *results], tools=[], settings={}, instructions=None, stream=False
    )
    ADAPTER.check_request(body, t_old)


def test_unparseable_partial_arguments_are_an_arguments_error_not_an_empty_call() -> None:
    turn, _ = streaming.fed(
        ADAPTER, tool_call_stream({"partial_arguments": '{"location":"Os', "type": "arguments_delta"})
    )
    [call] = turn.calls
    assert call.arguments is None and call.arguments_error
