"""Review 9: OpenAI Responses and Chat Completions.

- D1: only an explicit completion is success. A Responses body whose ``output`` is missing, not a list,
  or holds anything but objects (the SDK's ``Response.output`` is a required list of output items:
  openai-python src/openai/types/responses/response.py) cannot be read as a turn: API_FAILURE
  (``malformed_response``, not retried), the raw status kept (D32), never COMPLETED with empty text.
- D25, D9: settings the API would refuse raise ``UsageError``, never a live 400: ``tool_choice`` is
  ``"auto"``, ``"none"``, ``"required"`` or ``{"name": ...}`` (the SDKs' ``ToolChoiceOptions`` is
  ``Literal["none", "auto", "required"]``, plus a named function), as the Gemini adapters check it.
- D1: Chat reads one choice. ``extra={"n": 2}`` would ask for two and drop the second one's finish (a
  content_filter, tool calls) unread: ``n`` other than 1 is a ``UsageError``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.core.errors import UsageError
from callbound.core.machine import classify_turn
from callbound.core.types import Finish
from callbound.testing import FakeClock, ScriptedModel

RESPONSES = "openai-responses"
CHAT = "openai-chat"
MSG = {
    "type": "message",
    "id": "m",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "hi", "annotations": []}],
}


def body(**fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": "resp_1", "object": "response", "status": "completed", "model": "m"}
    out.update(fields)
    return {k: v for k, v in out.items() if v is not ...}


MALFORMED = {
    "missing": body(output=...),
    "null": body(output=None),
    "string": body(output="x"),
    "object": body(output={"type": "message"}),
    "not-objects": body(output=[1, "a"]),
    "one-not-an-object": body(output=[MSG, 5]),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_completed_body_without_an_output_list_of_objects_is_no_success(case: str) -> None:
    turn = get(RESPONSES).parse_response(json.dumps(MALFORMED[case]).encode())
    assert turn.finish is Finish.API_FAILURE
    assert (turn.raw_stop_reason, turn.reason) == ("completed", "malformed_response")
    assert turn.failure is not None and turn.failure.retryable is False
    verdict = classify_turn(turn)
    assert (verdict.target.value, verdict.reason) == ("FAILED", "MALFORMED_RESPONSE")
    assert not turn.executable


def test_an_empty_output_list_is_still_read() -> None:
    """An empty list is well formed (a terminal stream snapshot may carry one): no text, COMPLETED."""
    turn = get(RESPONSES).parse_response(json.dumps(body(output=[])).encode())
    assert (turn.finish, turn.text) == (Finish.FINAL_TEXT, "")


class Order(BaseModel):
    order_id: str


def registry() -> cb.Registry:
    spec = cb.ToolSpec(
        name="get_order", description="Order", params=Order, handler=lambda a, c: {}, schema_version="v1"
    )
    return cb.Registry([spec])


def test_a_run_on_a_body_without_output_fails() -> None:
    model = ScriptedModel(RESPONSES, [body(output=...)])
    out = cb.Runner(model=model, registry=registry(), clock=FakeClock()).run_sync(
        input="x", tenant="t", subject="s"
    )
    assert (out.state.value, out.reason) == ("FAILED", "MALFORMED_RESPONSE")


def build(api: str, settings: dict[str, Any]) -> dict[str, Any]:
    return get(api).build_request(
        items=[{"role": "user", "content": "x"}], tools=[], settings=settings, instructions=None, stream=False
    )


@pytest.mark.parametrize("api", [RESPONSES, CHAT])
@pytest.mark.parametrize(
    "choice", ["any", "bogus", "AUTO", "", 3, True, {"type": "function"}, {"name": 5}, ["auto"]]
)
def test_a_tool_choice_the_api_refuses_is_a_usage_error(api: str, choice: Any) -> None:
    with pytest.raises(UsageError, match=re.escape("'auto', 'required', 'none' or {'name': ...}")):
        build(api, {"tool_choice": choice})


@pytest.mark.parametrize(
    ("api", "choice", "wire"),
    [
        (RESPONSES, "auto", "auto"),
        (RESPONSES, "none", "none"),
        (RESPONSES, "required", "required"),
        (RESPONSES, {"name": "get_order"}, {"type": "function", "name": "get_order"}),
        (CHAT, "auto", "auto"),
        (CHAT, "none", "none"),
        (CHAT, "required", "required"),
        (CHAT, {"name": "get_order"}, {"type": "function", "function": {"name": "get_order"}}),
    ],
)
def test_the_tool_choices_the_api_takes(api: str, choice: Any, wire: Any) -> None:
    assert build(api, {"tool_choice": choice})["tool_choice"] == wire


@pytest.mark.parametrize("api", [RESPONSES, CHAT])
def test_extra_may_still_send_a_provider_specific_tool_choice(api: str) -> None:
    """settings["extra"] is the documented way to send what the neutral settings do not cover."""
    allowed = {"type": "allowed_tools", "mode": "auto", "tools": []}
    assert build(api, {"extra": {"tool_choice": allowed}})["tool_choice"] == allowed


@pytest.mark.parametrize("n", [2, 0, -1, "2", 1.0, True])
def test_chat_refuses_more_than_one_choice(n: Any) -> None:
    with pytest.raises(UsageError, match="n"):
        build(CHAT, {"extra": {"n": n}})


def test_chat_accepts_n_1() -> None:
    assert build(CHAT, {"extra": {"n": 1}})["n"] == 1
    assert build(CHAT, {"extra": {"n": None}})["n"] is None  # null: the API's default, one choice
    assert "n" not in build(CHAT, {})
