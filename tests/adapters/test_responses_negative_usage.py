"""openai-responses: a negative token count is unknown (None), never a count (D27).

A compatible server may send -1 for "unknown". Taken as a count it would lower the spend and let a token
budget pass; D27 says unknown usage is None. The other adapters already read it so
(tests/adapters/test_review13_g1.py, section 2); this holds openai-responses, plain and streamed, to the
same rule. ``input_tokens`` already counts cached tokens and ``output_tokens`` reasoning tokens (D27), so
the nested details and ``total_tokens`` are not read: a negative one there changes nothing, as Chat
ignores its details. Bodies and streams are synthetic, in the shapes of the Responses API.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import callbound as cb
from callbound.adapters import get
from callbound.testing import ScriptedModel

from . import streaming

ADAPTER = get("openai-responses")


def _body(usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "resp_neg",
        "object": "response",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "x", "annotations": []}],
            }
        ],
        "usage": usage,
    }


def _stream(usage: dict[str, Any]) -> bytes:
    body = _body(usage)
    events = [
        {"type": "response.created", "response": {"id": "resp_neg", "status": "in_progress", "output": []}},
        {"type": "response.output_item.done", "output_index": 0, "item": body["output"][0]},
        {"type": "response.completed", "response": body},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _both(usage: dict[str, Any]) -> list[tuple[int | None, int | None]]:
    """(input_tokens, output_tokens) read from a plain body and from the same response streamed."""
    plain = ADAPTER.parse_response(_body(usage)).usage
    streamed = streaming.fed(ADAPTER, _stream(usage))[0].usage
    return [(u.input_tokens, u.output_tokens) for u in (plain, streamed)]


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"input_tokens": -1, "output_tokens": -1, "total_tokens": -1}, (None, None)),
        ({"input_tokens": -5000, "output_tokens": 5, "total_tokens": -4995}, (None, 5)),
        ({"input_tokens": 10, "output_tokens": -1, "total_tokens": 9}, (10, None)),
    ],
)
def test_negative_input_or_output_count_is_unknown(
    usage: dict[str, Any], expected: tuple[int | None, int | None]
) -> None:
    assert _both(usage) == [expected, expected]


def test_negative_nested_details_and_total_leave_the_counts_as_sent() -> None:
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": -1},
        "output_tokens": 4,
        "output_tokens_details": {"reasoning_tokens": -1},
        "total_tokens": -1,
    }
    assert _both(usage) == [(10, 4), (10, 4)]


def test_negative_input_count_stops_a_token_budget_as_unknown() -> None:
    body = _body({"input_tokens": -5000, "output_tokens": 5, "total_tokens": -4995})
    runner = cb.Runner(
        model=ScriptedModel("openai-responses", [body]),
        registry=cb.Registry([]),
        settings={"model": "m"},
        budgets=cb.Budgets(max_input_tokens=1000),
    )
    outcome = runner.run_sync("hi", tenant="t", subject="s")
    assert (outcome.state.value, outcome.reason) == ("STOPPED", "USAGE_UNKNOWN")
