"""Review 22 (d): a Gemini Interactions call whose arguments are no JSON object goes back to the
provider the same way whether the turn was streamed or not.

A plain body's ``function_call`` step with ``arguments`` of another JSON type (a list, a string, a
number, ``null``) went back as ``{"INVALID_JSON": "<its JSON text>"}`` (finite.py), while the same value
streamed as ``arguments_delta`` text went back as ``{}``: the call was refused either way (D5), but the
continuation (D8) differed by transport, and ``{}`` says the model sent an empty object, which it did
not. The SDK's ``FunctionCallStepParam.arguments`` is a required object, so ``null`` is wrapped too.
Bodies are synthetic, in the shape of gemini-interactions/ai__steps__tool-call-step1.json.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.core.types import Finish, ModelTurn
from tests.adapters import streaming

INTERACTIONS = get("gemini-interactions")

# JSON texts, compact as json.dumps(separators=(",", ":")) writes them, so plain and streamed carry the
# same text
NOT_OBJECTS = ["[1,2]", '"Oslo"', '"{\\"city\\":\\"Oslo\\"}"', "42", "true", "null", '[{"city":"Oslo"}]']


def _plain(args: str) -> ModelTurn:
    body = {
        "id": "i1",
        "status": "requires_action",
        "steps": [
            {"type": "thought", "signature": "CtkBsig"},
            {"type": "function_call", "id": "c1", "name": "get_weather", "arguments": "@"},
        ],
        "usage": {"total_input_tokens": 3, "total_output_tokens": 4},
    }
    return INTERACTIONS.parse_response(json.dumps(body).replace('"@"', args).encode())


def _streamed(args: str, *, fragments: int = 1) -> ModelTurn:
    cut = max(1, len(args) // fragments)
    pieces = [args[i : i + cut] for i in range(0, len(args), cut)]
    events: list[dict[str, Any]] = [
        {"event_type": "interaction.created", "interaction": {"id": "i1", "status": "in_progress"}},
        {"event_type": "step.start", "index": 0, "step": {"type": "thought", "signature": "CtkBsig"}},
        {"event_type": "step.stop", "index": 0},
        {
            "event_type": "step.start",
            "index": 1,
            "step": {"type": "function_call", "id": "c1", "name": "get_weather", "arguments": {}},
        },
        *[
            {"event_type": "step.delta", "index": 1, "delta": {"type": "arguments_delta", "arguments": p}}
            for p in pieces
        ],
        {"event_type": "step.stop", "index": 1},
        {
            "event_type": "interaction.completed",
            "interaction": {
                "id": "i1",
                "status": "requires_action",
                "usage": {"total_input_tokens": 3, "total_output_tokens": 4},
            },
        },
    ]
    raw = "".join(f"event: {e['event_type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    turn, _ = streaming.fed(INTERACTIONS, raw)
    return turn


@pytest.mark.parametrize("args", NOT_OBJECTS)
@pytest.mark.parametrize("fragments", [1, 3])
def test_streamed_and_plain_give_the_same_continuation(args: str, fragments: int) -> None:
    plain, streamed = _plain(args), _streamed(args, fragments=fragments)
    for turn in (plain, streamed):
        assert turn.finish is Finish.TOOL_PROPOSALS
        [call] = turn.calls
        assert call.arguments is None and call.arguments_error  # D5: never runs
        assert call.arguments_raw == args
    assert INTERACTIONS.turn_items(streamed) == INTERACTIONS.turn_items(plain)
    step = INTERACTIONS.turn_items(plain)[1]
    assert step["arguments"] == {"INVALID_JSON": args}
    assert streamed.calls[0].arguments_error == plain.calls[0].arguments_error


@pytest.mark.parametrize("args", NOT_OBJECTS)
def test_the_next_request_is_the_same_and_passes_the_request_guard(args: str) -> None:
    bodies = []
    for turn in (_plain(args), _streamed(args)):
        [call] = turn.calls
        results = INTERACTIONS.result_items(
            turn, [(call, {"ok": False, "error": {"code": "INVALID_ARGUMENTS"}})]
        )
        items = [{"type": "user_input", "content": [{"type": "text", "text": "go"}]}]
        items += [*INTERACTIONS.turn_items(turn), *results]
        body = INTERACTIONS.build_request(items=items, tools=[], settings={}, instructions=None, stream=False)
        INTERACTIONS.check_request(body, turn)  # D24: arguments sent back are an object
        bodies.append(body)
    assert bodies[0] == bodies[1]


def test_text_that_is_no_json_goes_back_as_sent() -> None:
    # A stream may carry text no JSON reader takes (the plain body cannot): the model's text goes back
    # wrapped, as Anthropic's fine-grained streaming sends it, not an empty object it never wrote.
    turn = _streamed('{"city": "Os')
    assert turn.finish is Finish.TOOL_PROPOSALS and turn.calls[0].arguments is None
    assert INTERACTIONS.turn_items(turn)[1]["arguments"] == {"INVALID_JSON": '{"city": "Os'}


def test_objects_and_empty_text_are_unchanged() -> None:
    for args in ('{"city":"Oslo"}', "{}"):
        plain, streamed = _plain(args), _streamed(args)
        assert INTERACTIONS.turn_items(streamed) == INTERACTIONS.turn_items(plain)
        assert INTERACTIONS.turn_items(plain)[1]["arguments"] == json.loads(args)
        assert plain.calls[0].arguments == json.loads(args)
    # no arguments text at all keeps the step.start's {}
    assert INTERACTIONS.turn_items(_streamed(""))[1]["arguments"] == {}
