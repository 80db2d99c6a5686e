"""Review round 21, e: docs/reference.md's Budgets table (D12) is the dataclass's own: one row per field,
each default as ``Budgets()`` holds it, and each reason a row names is the one a run that passes that
budget ends with. The docs named the fields only: no default (a user could not tell that a run stops
after 16 model turns or 300 s of active time), and ``MAX_INPUT_TOKENS``, ``MAX_OUTPUT_TOKENS`` and
``MAX_COST`` appeared nowhere."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.testing import ApiError, FakeClock, ScriptedModel
from tests.docs.order_script import ANSWER
from tests.recordings import REPO_ROOT


def _rows() -> dict[str, tuple[str, str]]:
    text = (REPO_ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    section = text.split("\n## Budgets\n", 1)[1].split("\n## ", 1)[0]
    return {
        f: (d, what) for f, d, what in re.findall(r"^\| `(\w+)` \| `([^`]+)`[^|]* \| (.*) \|$", section, re.M)
    }


def test_the_table_has_one_row_per_field_with_its_default() -> None:
    rows = _rows()
    assert list(rows) == [f.name for f in dataclasses.fields(cb.Budgets)]
    defaults = cb.Budgets()
    assert {f: ast.literal_eval(d) for f, (d, _) in rows.items()} == {f: getattr(defaults, f) for f in rows}


class Order(BaseModel):
    order_id: str


def _calls(rid: str, *ids: str, usage: dict[str, int] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": rid,
        "status": "completed",
        "output": [
            {
                "type": "function_call",
                "id": f"fc_{rid}_{i}",
                "call_id": f"call_{rid}_{i}",
                "name": "get_order",
                "arguments": json.dumps({"order_id": i}),
            }
            for i in ids
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return body


USAGE = {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}

CASES: list[tuple[str, dict[str, Any], list[Any], str]] = [
    ("max_model_turns", {"max_model_turns": 1}, [_calls("r1", "A"), ANSWER], "MAX_TURNS"),
    ("max_tool_calls", {"max_tool_calls": 1}, [_calls("r1", "A", "B"), ANSWER], "MAX_TOOL_CALLS"),
    (
        "max_input_tokens",
        {"max_input_tokens": 50},
        [_calls("r1", "A", usage=USAGE), ANSWER],
        "MAX_INPUT_TOKENS",
    ),
    (
        "max_output_tokens",
        {"max_output_tokens": 5},
        [_calls("r1", "A", usage=USAGE), ANSWER],
        "MAX_OUTPUT_TOKENS",
    ),
    ("max_cost", {"max_cost": Decimal("0.0001")}, [_calls("r1", "A", usage=USAGE), ANSWER], "MAX_COST"),
    (
        "max_identical_calls",
        {"max_identical_calls": 1},
        [_calls(r, "A") for r in ("r1", "r2", "r3")],
        "NO_PROGRESS",
    ),
    (
        "max_no_progress_turns",
        {"max_no_progress_turns": 1, "max_identical_calls": 5},
        [_calls("r1", "A"), _calls("r2", "A"), ANSWER],
        "NO_PROGRESS",
    ),
    ("not_after", {"not_after": datetime(2025, 1, 1, tzinfo=UTC)}, [ANSWER], "DEADLINE"),
    ("max_input_tokens", {"max_input_tokens": 50}, [_calls("r1", "A"), ANSWER], "USAGE_UNKNOWN"),
]


@pytest.mark.parametrize(("field", "budgets", "script", "reason"), CASES, ids=[c[3] for c in CASES])
def test_a_run_past_the_budget_stops_with_the_reason_its_row_names(
    field: str, budgets: dict[str, Any], script: list[Any], reason: str
) -> None:
    assert f"STOPPED({reason})" in _rows()[field][1]
    spec = cb.ToolSpec(
        name="get_order",
        description="Look up an order",
        params=Order,
        handler=lambda args, ctx: {"order_id": args.order_id},
        schema_version="v1",
        risk="read",
    )
    runner = cb.Runner(
        model=ScriptedModel("openai-responses", script),
        registry=cb.Registry([spec]),
        budgets=cb.Budgets(**budgets),
        clock=FakeClock(),
        settings={"model": "m"},
        prices={"m": cb.Price(10, 10)},
    )
    outcome = runner.run_sync(input="Where is A?", tenant="acme", subject="user-1")
    assert (outcome.state, outcome.reason) == ("STOPPED", reason)


def test_results_past_max_result_bytes_and_failures_past_max_retries_stop_nothing_of_their_own() -> None:
    rows = _rows()
    assert "`RESULT_TOO_LARGE`" in rows["max_result_bytes"][1] and "never trips" in rows["max_parallel"][1]
    spec = cb.ToolSpec(
        name="get_order",
        description="Look up an order",
        params=Order,
        handler=lambda args, ctx: {"blob": "x" * 200},
        schema_version="v1",
        risk="read",
    )
    model = ScriptedModel("openai-responses", [_calls("r1", "A"), ANSWER])
    outcome = cb.Runner(
        model=model, registry=cb.Registry([spec]), budgets=cb.Budgets(max_result_bytes=50)
    ).run_sync(input="x", tenant="acme", subject="user-1")
    sent = [
        json.loads(i["output"]) for i in model.requests[1]["input"] if i.get("type") == "function_call_output"
    ]
    assert outcome.state == "COMPLETED" and [s["error"]["code"] for s in sent] == ["RESULT_TOO_LARGE"]
    assert "`FAILED(API_ERROR)`" in rows["max_retries"][1]
    failing = ScriptedModel("openai-responses", [ApiError(500), ApiError(500), ANSWER])
    outcome = cb.Runner(
        model=failing, registry=cb.Registry([spec]), budgets=cb.Budgets(max_retries=1), clock=FakeClock()
    ).run_sync(input="x", tenant="acme", subject="user-1")
    assert (outcome.state, outcome.reason, len(failing.requests)) == ("FAILED", "API_ERROR", 2)
