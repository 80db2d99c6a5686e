"""gemini-interactions: a function_call without an id can never be answered (review round 19, b F1).

google-genai marks ``FunctionResultStepParam.call_id`` Required ("ID to match the ID from the function call
block"; the legacy ``FunctionResultContentParam.call_id`` too), and issue 3 §3 says an Interactions result is
a ``function_result`` *with call_id*, name and result. A call step without an id (google-genai's
``FunctionCallStep.id`` is Required as well) was run, and then answered with a function_result that has no
call_id, which the API refuses, after the write had paid. Now the turn is API_FAILURE(missing_call_id), not
retried, and none of its calls runs, as a Responses function_call without call_id and an Anthropic tool_use
without id are. Steps and legacy schema, plain and streamed. Payloads synthetic, in WIRE.md 5.3 / 5.6 shapes.
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


_MISSING = object()


def _idless(cid: Any) -> dict[str, Any]:
    call: dict[str, Any] = {"type": "function_call", "name": "pay", "arguments": {"order_id": "B2"}}
    if cid is not _MISSING:
        call["id"] = cid
    return call


def _body(cid: Any = _MISSING, *, legacy: bool = False, status: str = "requires_action") -> dict[str, Any]:
    return {"id": "v1_1", "status": status, "outputs" if legacy else "steps": [PAY, _idless(cid)]}


def _assert_failed(turn: ModelTurn, status: str = "requires_action") -> None:
    assert (turn.finish, turn.raw_stop_reason, turn.reason) == (Finish.API_FAILURE, status, "missing_call_id")
    assert turn.failure is not None and not turn.failure.retryable
    assert not turn.executable


@pytest.mark.parametrize("cid", [_MISSING, None, ""], ids=["missing", "null", "empty"])
@pytest.mark.parametrize("legacy", [False, True], ids=["steps", "legacy"])
@pytest.mark.parametrize("status", ["requires_action", "completed"])
def test_a_plain_turn_with_an_idless_call_fails_closed(cid: Any, legacy: bool, status: str) -> None:
    _assert_failed(get(API).parse_response(_body(cid, legacy=legacy, status=status)), status)


def _sse(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['event_type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _streamed(*events: dict[str, Any]) -> ModelTurn:
    feed = StreamFeed(get(API).stream_assembler())
    feed.feed(_sse(*events))
    feed.close()
    return feed.finish()


def test_a_streamed_idless_call_fails_closed() -> None:
    turn = _streamed(
        {"event_type": "interaction.created", "interaction": {"id": "v1_s", "status": "in_progress"}},
        {"event_type": "step.start", "index": 0, "step": {**PAY, "arguments": {}}},
        {"event_type": "step.delta", "index": 0, "delta": {"type": "arguments_delta", "arguments": '{"order_id":"A1"}'}},
        {"event_type": "step.stop", "index": 0},
        {"event_type": "step.start", "index": 1, "step": {"type": "function_call", "name": "pay", "arguments": {}}},
        {"event_type": "step.delta", "index": 1, "delta": {"type": "arguments_delta", "arguments": '{"order_id":"B2"}'}},
        {"event_type": "step.stop", "index": 1},
        {"event_type": "interaction.completed", "interaction": {"id": "v1_s", "status": "requires_action"}},
    )  # fmt: skip
    _assert_failed(turn)


def test_a_streamed_legacy_idless_call_fails_closed() -> None:
    turn = _streamed(
        {"event_type": "interaction.start", "interaction": {"id": "v1_l", "status": "in_progress"}},
        {"event_type": "content.start", "index": 0, "content": {"type": "function_call", "id": "c1"}},
        {"event_type": "content.delta", "index": 0, "delta": {**PAY}},
        {"event_type": "content.stop", "index": 0},
        {"event_type": "content.start", "index": 1, "content": {"type": "function_call"}},
        {"event_type": "content.delta", "index": 1, "delta": _idless(_MISSING)},
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
    model = ScriptedModel(API, [_body(legacy=legacy)])
    out = cb.Runner(model=model, registry=cb.Registry([spec])).run_sync("pay", tenant="t", subject="s")
    assert (out.state.value, out.reason, paid) == ("FAILED", "MISSING_CALL_ID", [])
    assert len(model.requests) == 1  # not retried: the same response would come back


def test_calls_with_ids_still_run() -> None:
    body = {"id": "v1_1", "status": "requires_action", "steps": [PAY, {**PAY, "id": "c2"}]}
    turn = get(API).parse_response(body)
    assert turn.finish is Finish.TOOL_PROPOSALS and [c.call_id for c in turn.calls] == ["c1", "c2"]
    blocks = get(API).result_items(turn, [(c, {"ok": True, "result": 1}) for c in turn.calls])
    assert [b["call_id"] for b in blocks] == ["c1", "c2"]
