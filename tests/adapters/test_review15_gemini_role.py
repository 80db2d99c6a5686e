"""Review 15: a Gemini tool turn whose content role is not ``model`` must not run (as Chat calls outside an
assistant message, tests/adapters/test_review15_unanswerable.py).

The content goes back as received (D8), and Gemini takes functionCall parts in a model-role content only
(the adapter's ``check_request``): the handler ran, then the next request was refused (live: a 400).
Now API_FAILURE(malformed_response), error_code ``content_role_not_model``, before any dispatch. A content
without a role is filled in as ``model`` and still runs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.core.types import Finish
from callbound.testing import ScriptedModel, Stream
from tests.adapters import streaming

GEMINI = get("gemini-generate")
FINAL = {"candidates": [{"content": {"role": "model", "parts": [{"text": "done"}]}, "finishReason": "STOP"}]}


class Args(BaseModel):
    order_id: str


def _body(role: Any) -> dict[str, Any]:
    content: dict[str, Any] = {"parts": [{"functionCall": {"name": "f", "args": {"order_id": "A1"}}}]}
    if role is not None:
        content["role"] = role
    return {"candidates": [{"content": content, "finishReason": "STOP"}], "responseId": "g1"}


def _stream(role: Any) -> str:
    body = _body(role)
    return "".join(f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in (body,))


def _run(first: Any) -> tuple[cb.Outcome, list[str]]:
    ran: list[str] = []

    def handler(args: Args, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.order_id)
        return {"ok": 1}

    spec = cb.ToolSpec(name="f", description="t", params=Args, handler=handler, schema_version="v1")
    model = ScriptedModel("gemini-generate", [first, FINAL])
    out = cb.Runner(model=model, registry=cb.Registry([spec])).run_sync(input="go", tenant="t", subject="s")
    return out, ran


@pytest.mark.parametrize("role", ["user", "modelx", ""])
def test_calls_in_a_content_whose_role_is_not_model_do_not_run(role: str) -> None:
    turn = GEMINI.parse_response(_body(role))
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "malformed_response")
    assert turn.failure is not None and turn.failure.error_code == "content_role_not_model"
    streamed, _ = streaming.fed(GEMINI, _stream(role).encode())
    assert (streamed.finish, streamed.reason) == (Finish.API_FAILURE, "malformed_response")
    for first in (_body(role), Stream(_stream(role))):
        out, ran = _run(first)
        assert (out.state.value, out.reason, ran) == ("FAILED", "MALFORMED_RESPONSE", [])


@pytest.mark.parametrize("role", ["model", None])
def test_a_model_role_or_none_still_runs(role: Any) -> None:
    assert GEMINI.parse_response(_body(role)).finish is Finish.TOOL_PROPOSALS
    out, ran = _run(_body(role))
    assert (out.state.value, ran) == ("COMPLETED", ["A1"])


@pytest.mark.parametrize("name", [None, 5, ""], ids=["missing", "number", "empty"])
def test_a_call_without_a_name_fails_the_turn_before_any_handler_runs(name: Any) -> None:
    """An id-less Gemini call is answered by name and position (issue 3 §3): one without a name can never
    be, and its siblings ran before the next request was refused (regression review, round 15, r9)."""
    body = _body("model")
    nameless: dict[str, Any] = {"args": {"order_id": "B2"}}
    if name is not None:
        nameless["name"] = name
    body["candidates"][0]["content"]["parts"].append({"functionCall": nameless})
    turn = GEMINI.parse_response(body)
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "malformed_response")
    assert turn.failure is not None and turn.failure.error_code == "call_without_name"
    out, ran = _run(body)
    assert (out.state.value, out.reason, ran) == ("FAILED", "MALFORMED_RESPONSE", [])
