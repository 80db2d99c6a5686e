"""A whole tool loop on every API through the real adapters, streamed and not; and the payload scan:
no protected_audit value ever appears in a request sent to any provider (only model_result does)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.core.binding import PROTECTED_FIELDS
from callbound.stores.memory import MemoryStore
from callbound.testing import FakeClock, ScriptedModel
from tests.docs.stop_reason_bodies import BUILDERS

APIS = list(BUILDERS)
CALLS = {
    "openai-responses": "completed+calls",
    "openai-chat": "tool_calls+calls",
    "anthropic-messages": "tool_use+calls",
    "gemini-generate": "STOP+calls",
    "gemini-interactions": "requires_action+calls",
}
FINAL = {
    "openai-responses": "completed",
    "openai-chat": "stop",
    "anthropic-messages": "end_turn",
    "gemini-generate": "STOP",
    "gemini-interactions": "completed",
}


class GetOrder(BaseModel):
    order_id: str


class Refund(BaseModel):
    order_id: str


def registry() -> cb.Registry:
    return cb.Registry(
        [
            cb.ToolSpec(
                name="get_order",
                description="Look up an order",
                params=GetOrder,
                handler=lambda a, c: {"order_id": a.order_id, "secret_internal": "kept-out"},
                schema_version="v1",
                risk="read",
                timeout_ms=1000,
            ),
            cb.ToolSpec(
                name="refund",
                description="Refund",
                params=Refund,
                handler=lambda a, c: {"ok": 1},
                schema_version="v1",
                risk="write",
                timeout_ms=1000,
            ),
        ]
    )


def scripted(api: str) -> list[Any]:
    call = BUILDERS[api](CALLS[api])
    final = BUILDERS[api](FINAL[api])
    return [call, final]


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


@pytest.mark.parametrize("api", APIS)
def test_loop_completes_and_no_protected_value_reaches_the_provider(api: str) -> None:
    store = MemoryStore()
    model = ScriptedModel(api, scripted(api))
    runner = cb.Runner(
        model=model,
        registry=registry(),
        store=store,
        clock=FakeClock(),
        settings={"model": "m-1"},
        policy=cb.Policy(revision="policy-revision-7"),
    )
    outcome = runner.run_sync("where is A1?", tenant="tenant-secret-ref", subject="subject-secret-ref")
    assert outcome.state == "COMPLETED", outcome
    assert len(model.requests) == 2
    stored = store.load_operation(outcome.operation_id)
    assert stored is not None
    protected_values: set[str] = set()
    for row in stored.journal:
        if row.kind == "results":
            for env in row.data["envelopes"]:
                for key in PROTECTED_FIELDS:
                    if key in (
                        "provider",
                        "api",
                        "response_id",
                        "call_id",
                        "input",
                        "output",
                        "effect",
                        "producer",
                    ):
                        continue  # ids the provider itself sent, or values present in model_result
                    value = env["protected_audit"].get(key)
                    if isinstance(value, str) and len(value) >= 8:  # short values match by accident
                        protected_values.add(value)
    protected_values |= {"tenant-secret-ref", "subject-secret-ref", outcome.operation_id}
    assert any(len(v) == 64 for v in protected_values), "binding digests are part of the scan"
    assert "policy-revision-7" in protected_values
    text = json.dumps(model.requests)
    for value in protected_values:
        assert value not in text, f"protected value {value[:20]}… leaked into a {api} request"
    # the model does see its result
    assert "A1" in json.dumps(model.requests[1])


@pytest.mark.parametrize("api", APIS)
def test_truncated_turn_never_runs_its_calls(api: str) -> None:
    ran: list[str] = []
    reg = cb.Registry(
        [
            cb.ToolSpec(
                name="get_order",
                description="d",
                params=GetOrder,
                handler=lambda a, c: ran.append(a.order_id),
                schema_version="v1",
            )
        ]
    )
    truncated = {
        "openai-responses": "max_output_tokens",
        "openai-chat": "length",
        "anthropic-messages": "max_tokens",
        "gemini-generate": "MAX_TOKENS",
        "gemini-interactions": "incomplete",
    }[api]
    body = BUILDERS[api](truncated + "+calls") if api != "openai-responses" else BUILDERS[api](truncated)
    model = ScriptedModel(api, [body])
    outcome = cb.Runner(model=model, registry=reg, clock=FakeClock()).run_sync("x", tenant="t", subject="s")
    assert outcome.state == "INCOMPLETE"
    assert ran == []


def _forced(body: dict[str, Any]) -> bool:
    """Does a request body carry a tool_choice (each API spells it its own way)?"""
    generation = body.get("generation_config")
    return (
        "tool_choice" in body
        or "toolConfig" in body
        or (isinstance(generation, dict) and "tool_choice" in generation)
    )


@pytest.mark.parametrize("choice", ["required", {"name": "get_order"}])
@pytest.mark.parametrize("api", APIS)
def test_a_forced_tool_choice_is_dropped_after_the_first_tool_round(api: str, choice: Any) -> None:
    """Resent on every turn, a forced tool_choice forbids the final answer and the loop can only end
    on a guard; it applies until the first tool round, then the API's default (auto) does."""
    model = ScriptedModel(api, scripted(api))
    runner = cb.Runner(
        model=model, registry=registry(), clock=FakeClock(), settings={"model": "m-1", "tool_choice": choice}
    )
    outcome = runner.run_sync("where is A1?", tenant="t", subject="s")
    assert outcome.state == "COMPLETED", outcome
    assert [_forced(r) for r in model.requests] == [True, False]


@pytest.mark.parametrize("api", APIS)
def test_reset_tool_choice_false_keeps_forcing_and_a_plain_choice_is_always_kept(api: str) -> None:
    model = ScriptedModel(api, scripted(api))
    settings = {"model": "m-1", "tool_choice": "required", "reset_tool_choice": False}
    runner = cb.Runner(model=model, registry=registry(), clock=FakeClock(), settings=settings)
    assert runner.run_sync("where is A1?", tenant="t", subject="s").state == "COMPLETED"
    assert [_forced(r) for r in model.requests] == [True, True]
    model = ScriptedModel(api, scripted(api))
    runner = cb.Runner(
        model=model, registry=registry(), clock=FakeClock(), settings={"model": "m-1", "tool_choice": "auto"}
    )
    assert runner.run_sync("where is A1?", tenant="t", subject="s").state == "COMPLETED"
    assert [_forced(r) for r in model.requests] == [True, True]


def test_reset_tool_choice_must_be_a_bool() -> None:
    with pytest.raises(cb.UsageError, match="reset_tool_choice"):
        cb.Runner(model=ScriptedModel(APIS[0], []), registry=registry(), settings={"reset_tool_choice": "no"})
