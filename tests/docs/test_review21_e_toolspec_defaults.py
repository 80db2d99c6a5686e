"""Review round 21, e: docs/reference.md's ``ToolSpec`` row gives the defaults a tool that moves money
depends on, and they are the dataclass's own: ``risk`` defaults to ``"read"`` (no idempotency key, no
ledger, no approval: a refund tool that leaves it out runs like a lookup), ``timeout_ms`` to 10000 (a
read past it reaches the model as ``TIMEOUT``), ``max_result_bytes`` to None. The row named the fields
only."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from typing import Any

from pydantic import BaseModel

import callbound as cb
from callbound.testing import ScriptedModel
from tests.docs.order_script import ANSWER, call_response
from tests.recordings import REPO_ROOT


def _row() -> str:
    text = (REPO_ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    return re.findall(r"^\| `Registry`, `ToolSpec` \|.*$", text, re.M)[0]


def test_the_row_gives_each_default_the_dataclass_has() -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(cb.ToolSpec) if f.init}
    row = _row()
    assert f'`risk` (`read`, `write` or `irreversible`; default `"{defaults["risk"]}"`' in row
    assert f"`timeout_ms` (default `{defaults['timeout_ms']}`" in row
    assert f"`max_result_bytes` (default `{defaults['max_result_bytes']}`" in row


class Order(BaseModel):
    order_id: str


def test_a_tool_left_at_the_default_risk_runs_as_a_read_without_a_key() -> None:
    seen: list[Any] = []

    def handler(args: Order, ctx: cb.CallContext) -> dict[str, str]:
        seen.append(ctx.idempotency_key)
        return {"refund_id": "rf_1"}

    spec = cb.ToolSpec(
        name="get_order", description="Refund", params=Order, handler=handler, schema_version="v1"
    )
    model = ScriptedModel("openai-responses", [call_response("r1"), ANSWER])
    outcome = cb.Runner(model=model, registry=cb.Registry([spec])).run_sync(
        input="x", tenant="acme", subject="user-1"
    )
    assert (outcome.state, spec.risk, seen) == ("COMPLETED", "read", [None])


def test_a_read_past_its_timeout_reaches_the_model_as_timeout() -> None:
    def handler(args: Order, ctx: cb.CallContext) -> dict[str, str]:
        time.sleep(0.5)
        return {"status": "shipped"}

    spec = cb.ToolSpec(
        name="get_order",
        description="Look up an order",
        params=Order,
        handler=handler,
        schema_version="v1",
        timeout_ms=50,
    )
    model = ScriptedModel("openai-responses", [call_response("r1"), ANSWER])
    outcome = cb.Runner(model=model, registry=cb.Registry([spec])).run_sync(
        input="x", tenant="acme", subject="user-1"
    )
    sent = [
        json.loads(i["output"]) for i in model.requests[1]["input"] if i.get("type") == "function_call_output"
    ]
    assert outcome.state == "COMPLETED"
    assert [s["error"]["code"] for s in sent] == ["TIMEOUT"]
