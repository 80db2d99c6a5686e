"""gemini-interactions: a ``function_call`` without a name fails the turn before any handler runs (review
round 16, F2), as gemini-generate's does since 3315372 (docs/stop-reasons.md, ``STOP+noname``).

An id-less Interactions call is answered by name, in order (the adapter's ``check_request``, the provider's
rule): one without a (string, non-empty) name can never be answered. Its siblings ran, then the next
request carried ``name: "null"`` and was refused after the write had paid. Now the turn is
API_FAILURE(malformed_response) with ``failure.error_code`` ``call_without_name``, in the ``steps`` schema
and the legacy ``outputs`` schema, plain and streamed, and the operation ends FAILED(MALFORMED_RESPONSE)
with no call run. Payloads are synthetic, in the shapes WIRE.md 5.0 / 5.6 give.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.adapters.stream import StreamFeed
from callbound.core.types import Finish, ModelTurn
from callbound.testing import ScriptedModel

API = "gemini-interactions"
PAY = {"type": "function_call", "id": "c1", "name": "pay", "arguments": {"order_id": "A1"}}


class Pay(BaseModel):
    order_id: str


def _nameless(name: Any) -> dict[str, Any]:
    call: dict[str, Any] = {"type": "function_call", "arguments": {"order_id": "B2"}}
    if name is not _MISSING:
        call["name"] = name
    return call


_MISSING = object()
NAMES = [_MISSING, None, 5, ""]
NAME_IDS = ["missing", "null", "number", "empty"]


def _body(name: Any, *, legacy: bool = False, status: str = "requires_action") -> dict[str, Any]:
    key = "outputs" if legacy else "steps"
    return {"id": "v1_1", "status": status, key: [PAY, _nameless(name)]}


def _assert_failed(turn: ModelTurn) -> None:
    assert (turn.finish, turn.reason) == (Finish.API_FAILURE, "malformed_response")
    assert turn.failure is not None and turn.failure.error_code == "call_without_name"
    assert not turn.executable


@pytest.mark.parametrize("name", NAMES, ids=NAME_IDS)
@pytest.mark.parametrize("legacy", [False, True], ids=["steps", "legacy"])
@pytest.mark.parametrize("status", ["requires_action", "completed"])
def test_a_plain_turn_with_a_nameless_call_is_malformed(name: Any, legacy: bool, status: str) -> None:
    turn = get(API).parse_response(_body(name, legacy=legacy, status=status))
    _assert_failed(turn)
    assert turn.raw_stop_reason == status


def test_a_nameless_call_with_an_id_fails_too() -> None:
    body = _body(_MISSING)
    body["steps"][1]["id"] = "c2"
    _assert_failed(get(API).parse_response(body))


def _sse(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['event_type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _streamed(*events: dict[str, Any]) -> ModelTurn:
    feed = StreamFeed(get(API).stream_assembler())
    feed.feed(_sse(*events))
    feed.close()
    return feed.finish()


def test_a_streamed_nameless_call_is_malformed() -> None:
    turn = _streamed(
        {"event_type": "interaction.created", "interaction": {"id": "v1_s", "status": "in_progress"}},
        {"event_type": "step.start", "index": 0, "step": {**PAY, "arguments": {}}},
        {"event_type": "step.delta", "index": 0, "delta": {"type": "arguments_delta", "arguments": '{"order_id":"A1"}'}},
        {"event_type": "step.stop", "index": 0},
        {"event_type": "step.start", "index": 1, "step": {"type": "function_call", "arguments": {}}},
        {"event_type": "step.delta", "index": 1, "delta": {"type": "arguments_delta", "arguments": "{}"}},
        {"event_type": "step.stop", "index": 1},
        {"event_type": "interaction.completed", "interaction": {"id": "v1_s", "status": "requires_action"}},
    )  # fmt: skip
    _assert_failed(turn)


def test_a_streamed_legacy_nameless_call_is_malformed() -> None:
    turn = _streamed(
        {"event_type": "interaction.start", "interaction": {"id": "v1_l", "status": "in_progress"}},
        {"event_type": "content.start", "index": 0, "content": {"type": "function_call", "id": "c1"}},
        {"event_type": "content.delta", "index": 0, "delta": {**PAY}},
        {"event_type": "content.stop", "index": 0},
        {"event_type": "content.start", "index": 1, "content": {"type": "function_call"}},
        {"event_type": "content.delta", "index": 1, "delta": {"type": "function_call", "arguments": {}}},
        {"event_type": "content.stop", "index": 1},
        {"event_type": "interaction.complete", "interaction": {"id": "v1_l", "status": "requires_action"}},
    )  # fmt: skip
    _assert_failed(turn)


@pytest.mark.parametrize("legacy", [False, True], ids=["steps", "legacy"])
def test_no_handler_runs_and_the_operation_fails(legacy: bool) -> None:
    paid: list[str] = []

    def pay(args: Pay, ctx: cb.CallContext) -> dict[str, Any]:
        paid.append(args.order_id)
        return {"paid": args.order_id}

    spec = cb.ToolSpec(
        name="pay", description="Pay", params=Pay, handler=pay, schema_version="v1", risk="write"
    )
    model = ScriptedModel(API, [_body(_MISSING, legacy=legacy)])
    out = cb.Runner(model=model, registry=cb.Registry([spec])).run_sync("pay", tenant="t", subject="s")
    assert (out.state.value, out.reason, paid) == ("FAILED", "MALFORMED_RESPONSE", [])
    assert len(model.requests) == 1  # not retried: the same response would come back


def test_named_calls_still_run() -> None:
    body = {"id": "v1_1", "status": "requires_action", "steps": [PAY, {**PAY, "id": "c2"}]}
    assert get(API).parse_response(body).finish is Finish.TOOL_PROPOSALS
