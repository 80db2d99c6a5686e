"""Review 9: how gemini-interactions sends results back.

- WIRE.md 5.5: results go as top-level ``function_result`` steps by default, the form of Google's own
  samples and of google-genai (whose ``UserInputStepParam.content`` admits only text, image, document,
  audio and video content: SDK _gaos/types/interactions/userinputstep.py), in stateless replay and with
  ``previous_interaction_id`` alike. ``result_placement="user_input"`` (vercel-ai's form) stays available.
- WIRE.md 5.5, 5.3: ``store: false`` keeps nothing on the server (such an interaction has no id), so
  ``previous_interaction_id`` would point at nothing: the transcript is replayed instead, as the
  openai-responses adapter does with ``store: false`` (D8).
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters.gemini_interactions import ADAPTER, GeminiInteractionsAdapter
from callbound.core.types import ModelTurn, ok_result
from callbound.testing import FakeClock, ScriptedModel
from tests.recordings import read_bytes

STEP1 = "gemini-interactions/ai__steps__tool-call-step1.json"


def step1() -> ModelTurn:
    return ADAPTER.parse_response(read_bytes(STEP1))


def results_in_user_input(body: dict[str, Any]) -> list[Any]:
    """function_result objects nested in a user_input step: content the SDK's UserInputStepParam refuses."""
    return [
        c
        for step in body["input"]
        if step.get("type") == "user_input"
        for c in step.get("content") or []
        if isinstance(c, dict) and c.get("type") == "function_result"
    ]


def test_results_are_top_level_steps_by_default_in_stateless_replay() -> None:
    """WIRE.md 5.5: prefer the top-level function_result step used by Google's own samples."""
    turn = step1()
    [call] = turn.calls
    items = (
        ADAPTER.initial_items("What is the weather in San Francisco?", [])
        + ADAPTER.turn_items(turn)
        + ADAPTER.result_items(turn, [(call, ok_result({"temperature": 8}))])
    )
    body = ADAPTER.build_request(
        items=items, tools=[], settings={"model": "gemini-2.5-flash"}, instructions=None, stream=False
    )
    assert [i["type"] for i in body["input"]] == ["user_input", "thought", "function_call", "function_result"]
    assert body["input"][-1] == {
        "type": "function_result",
        "call_id": "zggxzq8r",
        "name": "getWeather",
        "result": '{"data":{"temperature":8},"ok":true}',
        "is_error": False,
    }
    assert results_in_user_input(body) == []
    ADAPTER.check_request(body, previous=turn)


def test_results_are_top_level_steps_by_default_with_previous_interaction_id() -> None:
    """WIRE.md 5.5 (stateful form): only the results, each a top-level function_result step."""
    turn = step1()
    [call] = turn.calls
    new = ADAPTER.result_items(turn, [(call, ok_result(1))])
    body = ADAPTER.build_request(
        items=[],
        tools=[],
        settings={"continuation": "previous_response_id"},
        instructions=None,
        stream=False,
        previous_response_id=turn.response_id,
        new_items=new,
    )
    assert body["previous_interaction_id"] == turn.response_id
    assert [i["type"] for i in body["input"]] == ["function_result"]
    assert body["input"][0]["call_id"] == "zggxzq8r"
    ADAPTER.check_request(body, previous=turn)


def test_the_user_input_placement_is_still_an_option() -> None:
    turn = step1()
    [call] = turn.calls
    adapter = GeminiInteractionsAdapter(result_placement="user_input")
    [item] = adapter.result_items(turn, [(call, ok_result(1))])
    assert item["type"] == "user_input" and item["content"][0]["type"] == "function_result"
    assert GeminiInteractionsAdapter().result_placement == "step"


class Loc(BaseModel):
    location: str


def test_a_run_sends_its_results_as_top_level_steps() -> None:
    """Through the Runner with request checking on (D24): the second request ends in the step."""
    body1 = {
        "id": "v1_A",
        "status": "requires_action",
        "steps": [
            {"type": "thought", "signature": "CtkB"},
            {"type": "function_call", "id": "c1", "name": "getWeather", "arguments": {"location": "SF"}},
        ],
    }
    body2 = {
        "id": "v1_B",
        "status": "completed",
        "steps": [{"type": "model_output", "content": [{"type": "text", "text": "Sunny."}]}],
    }
    registry = cb.Registry(
        [
            cb.ToolSpec(
                name="getWeather",
                description="Weather",
                params=Loc,
                handler=lambda a, c: {"weather": "sunny"},
                schema_version="v1",
            )
        ]
    )
    for settings in ({}, {"continuation": "previous_response_id"}):
        model = ScriptedModel("gemini-interactions", [body1, body2])
        out = cb.Runner(model=model, registry=registry, settings=settings, clock=FakeClock()).run_sync(
            input="Weather?", tenant="t", subject="s"
        )
        assert out.state.value == "COMPLETED", out
        last = model.requests[1]["input"][-1]
        assert (last["type"], last["call_id"]) == ("function_result", "c1"), settings
        assert results_in_user_input(model.requests[1]) == []


@pytest.mark.parametrize(
    "settings",
    [{"store": False}, {"extra": {"store": False}}],
    ids=["setting", "extra"],
)
def test_store_false_replays_the_transcript_instead_of_chaining(settings: dict[str, Any]) -> None:
    """WIRE.md 5.5: store false with previous_interaction_id is incoherent (nothing is stored); the
    whole transcript goes instead, as openai-responses does (D8)."""
    items = [{"type": "user_input", "content": [{"type": "text", "text": "hi"}]}, {"type": "thought"}]
    new = [{"type": "function_result", "call_id": "c1", "name": "f", "result": "1"}]
    body = ADAPTER.build_request(
        items=[*items, *new],
        tools=[],
        settings={**settings, "model": "m", "continuation": "previous_response_id"},
        instructions=None,
        stream=False,
        previous_response_id="v1_abc",
        new_items=new,
    )
    assert "previous_interaction_id" not in body
    assert body["input"] == [*items, *new]
    assert body["store"] is False


def test_store_true_in_extra_still_chains() -> None:
    body = ADAPTER.build_request(
        items=[{"type": "user_input", "content": []}],
        tools=[],
        settings={"extra": {"store": True}},
        instructions=None,
        stream=False,
        previous_response_id="v1_abc",
        new_items=[],
    )
    assert body["previous_interaction_id"] == "v1_abc" and body["input"] == []
