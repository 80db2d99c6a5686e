"""Review round 18, e F2: docs/reference.md and docs/stop-reasons.md say what round 18 changed, and each
claim is tried here.

- a number JSON cannot carry (NaN, Infinity, 1e400) in call arguments goes back as
  {"INVALID_JSON": text} on every API, not only Anthropic (the model is told INVALID_ARGUMENTS), and
  anywhere else in a turn that runs calls it fails the turn ``non_finite_number`` (D4, D8); a final
  answer holding one keeps its finish;
- a NUL in a tenant or operation id is a UsageError on every store, before anything is stored, and an
  intent key holding one (or a lone surrogate) names no intent: HANDLER_ERROR;
- a handler's result may hold pydantic models at any depth."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.adapters import get
from callbound.testing import ScriptedModel

NAN = float("nan")


NON_FINITE_CALLS: dict[str, dict[str, Any]] = {
    "openai-responses": {
        "id": "r1",
        "status": "completed",
        "output": [
            {
                "type": "function_call",
                "id": "fc",
                "call_id": "c1",
                "name": "get_order",
                "arguments": {"order_id": NAN},
            }
        ],
    },
    "openai-chat": {
        "id": "c1",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_order", "arguments": {"order_id": NAN}},
                        }
                    ],
                },
            }
        ],
    },
    "anthropic-messages": {
        "id": "m1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": {"order_id": NAN}}],
        "stop_reason": "tool_use",
    },
    "gemini-generate": {
        "responseId": "g1",
        "candidates": [
            {
                "index": 0,
                "finishReason": "STOP",
                "content": {
                    "role": "model",
                    "parts": [{"functionCall": {"name": "get_order", "args": {"order_id": NAN}}}],
                },
            }
        ],
    },
    "gemini-interactions": {
        "id": "i1",
        "status": "requires_action",
        "steps": [{"type": "function_call", "id": "f1", "name": "get_order", "arguments": {"order_id": NAN}}],
    },
}


@pytest.mark.parametrize("api", sorted(NON_FINITE_CALLS))
def test_non_finite_arguments_go_back_as_invalid_json_on_every_api(api: str) -> None:
    turn = get(api).parse_response(NON_FINITE_CALLS[api])
    assert turn.finish == cb.Finish.TOOL_PROPOSALS
    (call,) = turn.calls
    assert call.arguments is None and call.arguments_error  # the call never runs: INVALID_ARGUMENTS
    sent = json.dumps(turn.continuation, allow_nan=False)  # the next request is JSON
    assert '"INVALID_JSON"' in sent


class GetOrder(BaseModel):
    order_id: str


def _registry(handler: Any, **spec: Any) -> cb.Registry:
    return cb.Registry(
        [
            cb.ToolSpec(
                name="get_order",
                description="Look up an order",
                params=GetOrder,
                handler=handler,
                schema_version="v1",
                **({"risk": "read"} | spec),
            )
        ]
    )


def _recorder(ran: list[str]) -> Any:
    def handler(args: GetOrder, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.order_id)
        return {"ok": True}

    return handler


def _message(text: str, logprob: float | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "output_text", "text": text}
    if logprob is not None:
        part["logprobs"] = [{"token": text, "logprob": logprob}]
    return {"type": "message", "role": "assistant", "content": [part]}


def _call(rid: str, call_id: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_" + call_id,
        "call_id": call_id,
        "name": "get_order",
        "arguments": json.dumps(args),
    }


def _final(rid: str, text: str = "Done.", logprob: float | None = None) -> dict[str, Any]:
    return {"id": rid, "status": "completed", "output": [_message(text, logprob)]}


def test_a_non_finite_number_beside_calls_fails_the_turn_non_finite_number() -> None:
    ran: list[str] = []
    body = {
        "id": "r1",
        "status": "completed",
        "output": [_message("Looking.", float("-inf")), _call("r1", "c1", {"order_id": "A1"})],
    }
    runner = cb.Runner(
        model=ScriptedModel("openai-responses", [body, _final("r2")]),
        registry=_registry(_recorder(ran)),
    )
    out = runner.run_sync(input="Where is A1?", tenant="acme", subject="u1")
    assert (out.state, out.reason) == (cb.State.FAILED, "MALFORMED_RESPONSE")
    assert out.history[-1].details["error_code"] == "non_finite_number"
    assert ran == []


def test_a_final_answer_holding_one_keeps_its_finish() -> None:
    runner = cb.Runner(
        model=ScriptedModel("openai-responses", [_final("r1", "Shipped.", float("-inf"))]),
        registry=_registry(lambda a, ctx: {}),
    )
    out = runner.run_sync(input="Where is A1?", tenant="acme", subject="u1")
    assert (out.state, out.text) == (cb.State.COMPLETED, "Shipped.")


# --- NUL characters ---------------------------------------------------------------------------------


def test_a_nul_in_a_tenant_or_operation_id_is_a_usage_error_everywhere_documented() -> None:
    write = _registry(lambda a, ctx: {"refund": a.order_id}, risk="irreversible")
    runner = cb.Runner(
        model=ScriptedModel(
            "openai-responses",
            [{"id": "r1", "status": "completed", "output": [_call("r1", "c1", {"order_id": "A1"})]}],
        ),
        registry=write,
    )
    paused = runner.run_sync(input="Refund A1", tenant="acme", subject="u1")
    assert paused.state == cb.State.WAITING_APPROVAL
    approval = paused.pending_approvals[0].approval_id
    op = paused.operation_id
    bad = "a\x00b"
    attempts: dict[str, Callable[[], object]] = {
        "run tenant": lambda: runner.run_sync(input="x", tenant=bad, subject="u1"),
        "run operation_id": lambda: runner.run_sync(input="x", tenant="acme", subject="u1", operation_id=bad),
        "submit": lambda: runner.submit("x", tenant=bad, subject="u1"),
        "resume": lambda: runner.resume_sync(bad),
        "decide": lambda: runner.decide(cb.Decision.approve(approval, "alice"), tenant=bad),
        "approve": lambda: runner.approve(approval, "alice", bad),
        "deny": lambda: runner.deny(approval, "alice", bad),
        "cancel": lambda: runner.cancel(bad),
        "outcome": lambda: runner.outcome(bad),
    }
    for name, attempt in attempts.items():
        with pytest.raises(cb.UsageError, match="NUL"):
            attempt()
        assert runner.outcome(op).state == cb.State.WAITING_APPROVAL, name
    with pytest.raises(cb.UnknownApproval):
        runner.decide(cb.Decision.approve("apr_\x00", "alice"), tenant="acme")


@pytest.mark.parametrize("key", ["note:A1\x00", "note:\udc80"])
def test_an_intent_key_holding_a_nul_or_lone_surrogate_names_no_intent(key: str) -> None:
    ran: list[str] = []
    seen: list[dict[str, Any]] = []

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        seen.extend(
            json.loads(i["output"]) for i in request["input"] if i.get("type") == "function_call_output"
        )
        return _final("r2")

    runner = cb.Runner(
        model=ScriptedModel(
            "openai-responses",
            [{"id": "r1", "status": "completed", "output": [_call("r1", "c1", {"order_id": "A1"})]}, answer],
        ),
        registry=_registry(_recorder(ran), risk="write", intent_key=lambda a, ctx: key),
    )
    out = runner.run_sync(input="Note A1", tenant="acme", subject="u1")
    assert out.state == cb.State.COMPLETED
    assert ran == []
    assert seen == [
        {
            "ok": False,
            "error": {"code": "HANDLER_ERROR", "message": "the tool could not name the intent of this call"},
        }
    ]


# --- handler results ---------------------------------------------------------------------------------


class Refund(BaseModel):
    refund_id: str


def test_pydantic_models_at_any_depth_of_a_result_are_json() -> None:
    seen: list[dict[str, Any]] = []

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        seen.extend(
            json.loads(i["output"]) for i in request["input"] if i.get("type") == "function_call_output"
        )
        return _final("r2")

    runner = cb.Runner(
        model=ScriptedModel(
            "openai-responses",
            [{"id": "r1", "status": "completed", "output": [_call("r1", "c1", {"order_id": "A1"})]}, answer],
        ),
        registry=_registry(lambda a, ctx: {"refunds": [Refund(refund_id="rf_1")], "pair": (1, 2)}),
    )
    assert runner.run_sync(input="x", tenant="acme", subject="u1").state == cb.State.COMPLETED
    assert seen == [{"ok": True, "data": {"refunds": [{"refund_id": "rf_1"}], "pair": [1, 2]}}]
