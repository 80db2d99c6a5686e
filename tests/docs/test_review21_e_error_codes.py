"""Review round 21, e: docs/reference.md's table of the error codes the model receives is the code's own
list (``callbound.core.dispatch``'s code constants). The docs named the codes in passing, across
three pages, and ``DUPLICATE_CALL_ID`` (D7: one response using a call id twice runs neither call)
nowhere; the guard fails if a code is added without a row. Review round 22, b: ``NOT_RUN`` and
``OUTCOME_UNKNOWN`` were defined there too, and never sent to a model (an unknown outcome stops the
operation, D16; an unrun call is named in the escalation record): removed, and every code left is one
the runtime sends."""

from __future__ import annotations

import ast
import json
import re

import callbound as cb
from callbound.core import dispatch
from callbound.testing import ScriptedModel
from tests.docs.order_script import ANSWER, Order
from tests.recordings import REPO_ROOT


def _codes_in_code() -> set[str]:
    return {n for n, v in vars(dispatch).items() if re.fullmatch(r"[A-Z_]+", n) and v == n}


def _rows() -> list[str]:
    text = (REPO_ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    section = text.split("### Error codes the model receives", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([A-Z_]+)` \|", section, re.M)


def test_the_table_lists_every_code_the_model_can_receive() -> None:
    codes = _codes_in_code()
    assert {"UNKNOWN_TOOL", "HANDLER_ERROR", "DUPLICATE_CALL_ID", "IN_PROGRESS"} <= codes
    assert sorted(_rows()) == sorted(codes)


def test_every_code_is_one_the_runtime_sends() -> None:
    """Each code is imported from ``core.dispatch`` by the code that sends it, read inside it, or
    (APPROVAL_STALE, from the approval checks) written out where a call is refused. ``OUTCOME_UNKNOWN``
    is a stop reason (``STOPPED(OUTCOME_UNKNOWN)``), never a code the model receives (review round 22, b)."""
    codes = _codes_in_code()
    assert "NOT_RUN" not in codes and "OUTCOME_UNKNOWN" not in codes
    used: set[str] = set()
    for path in sorted((REPO_ROOT / "src" / "callbound").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("dispatch"):
                used.update(a.name for a in node.names)
            elif isinstance(node, ast.Attribute) and node.attr in codes:
                used.add(node.attr)
            elif path.name == "dispatch.py" and isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                used.add(node.id)
            elif path.name == "execute.py" and isinstance(node, ast.Constant) and node.value in codes:
                used.add(str(node.value))
    assert codes <= used, sorted(codes - used)


def test_a_call_id_used_twice_in_one_response_runs_neither_call() -> None:
    ran: list[str] = []

    def handler(args: Order, ctx: cb.CallContext) -> dict[str, bool]:
        ran.append(args.order_id)
        return {"found": True}

    spec = cb.ToolSpec(
        name="get_order", description="Look up an order", params=Order, handler=handler, schema_version="v1"
    )
    twice = {
        "id": "r1",
        "status": "completed",
        "output": [
            {
                "type": "function_call",
                "id": f"fc_{i}",
                "call_id": "call_X",
                "name": "get_order",
                "arguments": json.dumps({"order_id": i}),
            }
            for i in ("A1", "B2")
        ],
    }
    model = ScriptedModel("openai-responses", [twice, ANSWER])
    outcome = cb.Runner(model=model, registry=cb.Registry([spec])).run_sync(
        input="x", tenant="acme", subject="user-1"
    )
    sent = [
        json.loads(i["output"]) for i in model.requests[1]["input"] if i.get("type") == "function_call_output"
    ]
    assert (outcome.state, ran) == ("COMPLETED", [])
    assert [s["error"]["code"] for s in sent] == ["DUPLICATE_CALL_ID"]
