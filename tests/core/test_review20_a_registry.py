"""ToolSpec limits at their edges (issue 2 §3); review round 20 (a)."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from pydantic import BaseModel, Field

from callbound.core.errors import UsageError
from callbound.core.registry import CallContext, ToolSpec

LARGEST = int(sys.float_info.max)


class Params(BaseModel):
    x: int


def handler(args: Any, ctx: CallContext) -> None:
    return None


@pytest.mark.parametrize("timeout_ms", [LARGEST + 1, 10**309, 10**400])
def test_a_timeout_no_float_can_hold_is_a_usage_error(timeout_ms: int) -> None:
    # It was accepted, and the handler's timeout (timeout_ms / 1000.0) raised OverflowError out of
    # run() at the tool's first call.
    with pytest.raises(UsageError, match="timeout_ms"):
        ToolSpec("t", "d", Params, handler, "t-v1", timeout_ms=timeout_ms)


@pytest.mark.parametrize("timeout_ms", [1, 10**30, LARGEST])
def test_any_timeout_a_float_holds_is_kept(timeout_ms: int) -> None:
    spec = ToolSpec("t", "d", Params, handler, "t-v1", timeout_ms=timeout_ms)
    assert spec.timeout_ms == timeout_ms
    assert spec.timeout_ms / 1000.0 > 0


@pytest.mark.parametrize("value", [0, -1, True, 1.0, "10", None])
def test_other_timeouts_are_refused_as_before(value: Any) -> None:
    with pytest.raises(UsageError, match="timeout_ms must be an integer >= 1"):
        ToolSpec("t", "d", Params, handler, "t-v1", timeout_ms=value)


def test_a_result_cap_is_an_int_compare_and_may_be_any_size() -> None:
    assert ToolSpec("t", "d", Params, handler, "t-v1", max_result_bytes=10**400).max_result_bytes == 10**400


@pytest.mark.parametrize("version", ["v\ud800", "\udce9-v1", "v1\udfff"])
def test_a_schema_version_with_a_lone_surrogate_is_a_usage_error(version: str) -> None:
    # It was accepted, and every call's binding (which hashes it) raised CanonicalizationError out of
    # run() after the paid turn (D4, D6).
    with pytest.raises(UsageError, match="schema_version holds a lone surrogate"):
        ToolSpec("t", "d", Params, handler, version)


def test_a_schema_version_with_any_character_of_unicode_is_kept() -> None:
    assert ToolSpec("t", "d", Params, handler, "v1-\U0001f600-é").schema_version == "v1-\U0001f600-é"


def test_the_run_with_such_a_version_never_starts() -> None:
    import callbound as cb
    from callbound.testing import ScriptedModel

    with pytest.raises(cb.UsageError):
        registry = cb.Registry([ToolSpec("t", "d", Params, handler, "v\ud800")])
        cb.Runner(model=ScriptedModel("openai-responses", []), registry=registry)


def _model_with(kind: str) -> type[BaseModel]:
    from pydantic import Field, create_model

    fields: dict[str, Any] = {
        "description": (int, Field(description="an order\ud800")),
        "title": (int, Field(title="T\udce9")),
        "default": (str, "caf\udce9"),
        "examples": (int, Field(examples=["x\ud800"])),
    }
    return create_model(f"Params_{kind}", x=fields[kind])


@pytest.mark.parametrize("kind", ["description", "title", "default", "examples"])
@pytest.mark.parametrize("risk", ["read", "irreversible"])
def test_a_schema_holding_a_lone_surrogate_is_a_usage_error(kind: str, risk: str) -> None:
    # It was accepted: sent to the provider in every request's tools, and for a tool that asks a human,
    # hashed into the approval's tool digest, which raised CanonicalizationError out of run().
    with pytest.raises(UsageError, match="holds a lone surrogate"):
        ToolSpec("t", "d", _model_with(kind), handler, "t-v1", risk=risk)  # type: ignore[arg-type]


def test_a_schema_with_any_character_of_unicode_is_kept() -> None:
    from pydantic import Field, create_model

    params = create_model("Params_ok", x=(int, Field(description="📦 café \u2028 ☃")))
    spec = ToolSpec("t", "d", params, handler, "t-v1", risk="irreversible")
    assert spec.json_schema["properties"]["x"]["description"] == "📦 café \u2028 ☃"
    assert len(spec.definition_digest()) == 64


class Int64(BaseModel):
    x: int = Field(ge=0, le=2**63 - 1)


class Int64Narrower(BaseModel):
    x: int = Field(ge=0, le=2**63 - 2)


def test_a_schema_bound_beyond_the_safe_integers_has_a_stable_definition_digest() -> None:
    # canonical_sha256 raised CanonicalizationError for le=2**63-1, out of run() when an
    # irreversible tool asked for approval (D4); the digest is now the schema's exact text's
    first = ToolSpec("t", "d", Int64, handler, "t-v1", risk="irreversible").definition_digest()
    again = ToolSpec("t", "d", Int64, handler, "t-v1", risk="irreversible").definition_digest()
    other = ToolSpec("t", "d", Int64Narrower, handler, "t-v1", risk="irreversible").definition_digest()
    assert first == again and len(first) == 64
    assert other != first  # a changed bound makes an approval stale


def test_a_safe_schema_keeps_its_canonical_digest() -> None:
    from callbound.core.canonical import canonical_sha256

    spec = ToolSpec("t", "d", Params, handler, "t-v1", risk="irreversible")
    definition = {"name": "t", "schema_version": "t-v1", "risk": "irreversible", "schema": spec.json_schema}
    assert spec.definition_digest() == canonical_sha256(definition)


def test_an_irreversible_tool_with_such_a_bound_asks_and_runs() -> None:
    import callbound as cb
    from callbound.testing import ScriptedModel

    ran: list[int] = []

    def pay(args: Int64, ctx: CallContext) -> dict[str, int]:
        ran.append(args.x)
        return {"paid": args.x}

    call = {
        "id": "r1",
        "status": "completed",
        "output": [
            {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "pay", "arguments": '{"x":5}'}
        ],
    }
    final = {
        "id": "r2",
        "status": "completed",
        "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
        ],
    }
    registry = cb.Registry([ToolSpec("pay", "d", Int64, pay, "pay-v1", risk="irreversible")])
    runner = cb.Runner(model=ScriptedModel("openai-responses", [call, final]), registry=registry)
    out = runner.run_sync(input="pay", tenant="acme", subject="u1")
    assert out.state == "WAITING_APPROVAL"
    decision = cb.Decision.approve(out.pending_approvals[0].approval_id, approver="alice")
    out = runner.resume_sync(out.operation_id, [decision])
    assert out.state == "COMPLETED" and ran == [5]


@pytest.mark.parametrize("field", [Field(default=float("nan")), Field(default=1.0, examples=[float("-inf")])])
def test_a_schema_holding_nan_or_infinity_is_a_usage_error(field: Any) -> None:
    from pydantic import create_model

    params = create_model("Params_nan", x=(float, field))
    with pytest.raises(UsageError, match="NaN or Infinity"):
        ToolSpec("t", "d", params, handler, "t-v1")
