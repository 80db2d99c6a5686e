"""Gemini leaves zero-valued counts out: the total still states a turn's output (D27).

Shape from a real Vertex stream recorded in googleapis/js-genai test/system/recordings (a gemini-2.5-pro
turn that generated only an empty text part): ``finishReason: STOP``, ``promptTokenCount: 83``,
``totalTokenCount: 83``, no ``candidatesTokenCount``. Output read as unknown (None), so a run with an
output-token budget stopped at once with USAGE_UNKNOWN after a normal answer; it is 0. Where the total is
absent too, the output stays unknown. Texts are synthetic.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import callbound as cb
from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.testing import FakeClock, ScriptedModel

API = "gemini-generate"


def _body(usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": usage,
        "modelVersion": "gemini-x",
        "responseId": "r1",
    }


EMPTY = {"promptTokenCount": 83, "totalTokenCount": 83, "trafficType": "ON_DEMAND"}


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (EMPTY, (83, 0)),
        ({"promptTokenCount": 80, "toolUsePromptTokenCount": 3, "totalTokenCount": 83}, (83, 0)),
        ({"promptTokenCount": 20, "totalTokenCount": 27}, (20, 7)),
        ({"promptTokenCount": 20}, (20, None)),
        # the total beyond the input is output (D27), one rule with Interactions (review 13 g1, finding 3)
        ({"promptTokenCount": 20, "candidatesTokenCount": 5, "totalTokenCount": 40}, (20, 20)),
        ({"promptTokenCount": 20, "totalTokenCount": 10}, (20, None)),
    ],
    ids=[
        "empty turn",
        "with tool-use prompt",
        "no candidates count",
        "no total",
        "total above the counts",
        "total below",
    ],
)
def test_output_comes_from_the_total_beyond_the_input(
    usage: dict[str, Any], expected: tuple[int, int | None]
) -> None:
    turn = get(API).parse_response(_body(usage))
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == expected


def test_streamed_reads_the_same() -> None:
    feed = StreamFeed(get(API).stream_assembler())
    feed.feed(f"data: {json.dumps(_body(EMPTY))}\r\n\r\n".encode())
    feed.close()
    turn = feed.finish()
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (83, 0)


def test_an_output_budget_does_not_stop_the_run() -> None:
    model = ScriptedModel(API, [_body(EMPTY)])
    runner = cb.Runner(
        model=model,
        registry=cb.Registry([]),
        clock=FakeClock(),
        settings={"model": "gemini-x"},
        budgets=cb.Budgets(max_output_tokens=100_000),
    )
    out = runner.run_sync("hello", tenant="t", subject="s")
    assert out.state is cb.State.COMPLETED
