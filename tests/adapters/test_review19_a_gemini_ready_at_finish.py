"""Review round 19, a F4: a Vertex partialArgs call still open at the finish chunk is ready there only
when its arguments are complete.

D34: such a call is finalised at the finishReason chunk, and its arguments must parse or the turn is
TRUNCATED. CallReady came there whatever happened: for a call whose last string piece was cut
(TRUNCATED(arguments_incomplete)) and for one ended by MAX_TOKENS or MALFORMED_FUNCTION_CALL, though
no such call runs and docs/reference.md says CallReady comes "once the provider says the call's
arguments are complete". Now it comes only when they parse and the finish is STOP. The chunks follow
vercel-ai's ai__google-stream-tool-call-arguments recording; ids and values are synthetic.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from callbound.adapters import get
from callbound.core.types import CallReady, CallStarted, Finish, ModelTurn, Progress

from .streaming import fed


def _chunk(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if finish is not None:
        candidate["finishReason"] = finish
    usage = {"promptTokenCount": 3, "candidatesTokenCount": 4}
    return {"candidates": [candidate], "responseId": "r1", "modelVersion": "gemini-x", "usageMetadata": usage}


def _read(finish: str, *, string_closed: bool) -> tuple[ModelTurn, list[Progress]]:
    def piece(value: str, more: bool) -> dict[str, Any]:
        entry: dict[str, Any] = {"jsonPath": "$.location", "stringValue": value}
        if more:
            entry["willContinue"] = True
        return {"functionCall": {"partialArgs": [entry], "willContinue": True}}

    events = [
        _chunk([{"functionCall": {"name": "getWeather", "willContinue": True}}]),
        _chunk([piece("Boston", True)]),
    ]
    if string_closed:
        events.append(_chunk([piece("", False)]))
    events.append(_chunk([{"text": ""}], finish))  # the finish chunk, without the empty terminator
    raw = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
    return fed(get("gemini-generate"), raw)


@pytest.mark.parametrize(
    ("finish", "string_closed", "finish_as", "reason"),
    [
        ("STOP", False, Finish.TRUNCATED, "arguments_incomplete"),
        ("MAX_TOKENS", True, Finish.TRUNCATED, "max_tokens"),
        ("MAX_TOKENS", False, Finish.TRUNCATED, "max_tokens"),
        ("MALFORMED_FUNCTION_CALL", True, Finish.API_FAILURE, "malformed_function_call"),
    ],
)
def test_a_call_cut_at_the_finish_is_never_ready(
    finish: str, string_closed: bool, finish_as: Finish, reason: str
) -> None:
    turn, progress = _read(finish, string_closed=string_closed)
    assert (turn.finish, turn.reason) == (finish_as, reason)
    assert not turn.executable
    assert [p for p in progress if isinstance(p, CallStarted)] == [CallStarted("r1:0", "getWeather")]
    assert not any(isinstance(p, CallReady) for p in progress)


def test_a_call_whose_arguments_parse_at_a_stop_is_ready() -> None:
    """The control (D34): finalised at the STOP chunk, it parses and runs."""
    turn, progress = _read("STOP", string_closed=True)
    assert turn.finish is Finish.TOOL_PROPOSALS
    assert [(c.call_id, c.arguments) for c in turn.calls] == [("r1:0", {"location": "Boston"})]
    assert progress[-1] == CallReady("r1:0")
