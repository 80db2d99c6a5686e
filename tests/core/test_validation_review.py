"""Construction-time checks and messages from the acceptance review (r2b p19 and the cosmetic items):
every ``Budgets`` field and the numeric ``ToolSpec`` fields refuse values that would stop or refuse
every run at once (only ``max_retries`` may be 0: no retries, D26); Budgets saved by an earlier callbound
under the looser rule still load; a tool name some provider rejects is refused; the error tree in
``callbound.core.errors`` lists every error class; and the OUTCOME_UNKNOWN escalation tells a human what
they can actually do (a STOPPED operation cannot be resumed)."""

from __future__ import annotations

import inspect
import re
from dataclasses import fields
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.core import errors
from callbound.core.errors import UsageError
from callbound.core.guards import Budgets
from callbound.core.registry import TOOL_NAME_PATTERN, ToolSpec

from ..runtime.helpers import calls, fc, final, make, write_tool

# ---- Budgets ----------------------------------------------------------------------------------------

# Each field: values refused at construction, and the accepted range the message must name.
REFUSED: dict[str, tuple[list[Any], str]] = {
    "max_model_turns": ([0, -1, 1.5, 2.0, "8", True, None], ">= 1"),
    "max_tool_calls": ([0, -3, 4.0, False], ">= 1"),
    "deadline_s": ([0, 0.0, -1, float("nan"), float("inf"), "300", True], "> 0"),
    "max_input_tokens": ([0, -1, 10.0, "100"], ">= 1, or None"),
    "max_output_tokens": ([0, -1, 1.5], ">= 1, or None"),
    "max_cost": (
        [0, Decimal(0), Decimal("-0.01"), Decimal("NaN"), "free", True, [1]],
        "> 0 (a Decimal), or None",
    ),
    "max_parallel": ([0, -1, 2.0], ">= 1"),
    "max_identical_calls": ([0, 1.0], ">= 1"),
    "max_no_progress_turns": ([0, -2], ">= 1"),
    "max_result_bytes": ([0, -1, 1024.0], ">= 1"),
    "max_retries": ([-1, 1.0, "3"], ">= 0"),
    "not_after": (["2025-01-01T00:00:00+00:00", 0], "timezone-aware datetime or None"),
}
CASES = [(name, value, expected) for name, (values, expected) in REFUSED.items() for value in values]


def test_every_budgets_field_has_refused_values() -> None:
    assert set(REFUSED) == {f.name for f in fields(Budgets)}


@pytest.mark.parametrize(("name", "value", "expected"), CASES, ids=lambda v: repr(v))
def test_budgets_refuse_values_outside_the_range(name: str, value: Any, expected: str) -> None:
    """The reviewer's p19: ``Budgets(max_model_turns=0)`` was accepted and stopped every run at once."""
    with pytest.raises(UsageError) as info:
        Budgets(**{name: value})
    message = str(info.value)
    assert f"Budgets.{name}" in message and expected in message, message


def test_the_least_values_are_accepted() -> None:
    b = Budgets(
        max_model_turns=1,
        max_tool_calls=1,
        deadline_s=0.5,
        max_input_tokens=1,
        max_output_tokens=1,
        max_cost=Decimal("0.01"),
        max_parallel=1,
        max_identical_calls=1,
        max_no_progress_turns=1,
        max_result_bytes=1,
        max_retries=0,  # the one documented 0: no retries of a model request (D26)
    )
    assert b.max_retries == 0 and b.max_cost == Decimal("0.01")


def test_budgets_saved_under_the_earlier_rule_still_load() -> None:
    """An operation created before the check kept its budgets (a 0 limit was accepted then): it must
    still load for audit verify and resume, as saved, not be reported as an unreadable row."""
    saved = {
        **Budgets().to_dict(),
        "max_model_turns": 0,
        "max_tool_calls": 0,
        "deadline_s": 0,
        "max_input_tokens": 0,
        "max_cost": "0",
        "max_result_bytes": 0,
    }
    b = Budgets.from_dict(saved)
    assert (b.max_model_turns, b.max_tool_calls, b.deadline_s, b.max_result_bytes) == (0, 0, 0, 0)
    assert b.max_cost == Decimal(0) and b.max_input_tokens == 0
    assert b.to_dict() == {**saved, "max_cost": "0"}
    # What the earlier rule refused stays refused.
    for field_name, value in [("max_parallel", 0), ("max_model_turns", -1), ("deadline_s", float("nan"))]:
        with pytest.raises(UsageError, match=f"Budgets.{field_name}"):
            Budgets.from_dict({**Budgets().to_dict(), field_name: value})


# ---- ToolSpec ------------------------------------------------------------------------------------------


class Args(BaseModel):
    order_id: str


def _spec(**kw: Any) -> ToolSpec:
    base: dict[str, Any] = {
        "name": "get_order",
        "description": "Look up an order",
        "params": Args,
        "handler": lambda args, ctx: {},
        "schema_version": "v1",
    }
    return ToolSpec(**{**base, **kw})


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("timeout_ms", 0, ">= 1"),
        ("timeout_ms", -5, ">= 1"),
        ("timeout_ms", 1500.0, ">= 1"),
        ("timeout_ms", True, ">= 1"),
        ("timeout_ms", "500", ">= 1"),
        ("max_result_bytes", -1, ">= 1, or None"),
        ("max_result_bytes", 0, ">= 1, or None"),
        ("max_result_bytes", 100.0, ">= 1, or None"),
    ],
    ids=repr,
)
def test_toolspec_numbers_are_positive_integers(name: str, value: Any, expected: str) -> None:
    """The reviewer's p19: ``ToolSpec(max_result_bytes=-1)`` made every result RESULT_TOO_LARGE."""
    with pytest.raises(UsageError) as info:
        _spec(**{name: value})
    assert f"{name} must be an integer {expected}" in str(info.value) and "'get_order'" in str(info.value)
    _spec(**{name: 1})  # the least value


@pytest.mark.parametrize(
    "name",
    ["get order", "get.order", "2fa_check", "-x", "a" * 65, "get_order\n", "résumé", "tool/x", "a:b"],
    ids=repr,
)
def test_a_tool_name_a_provider_rejects_is_refused(name: str) -> None:
    with pytest.raises(UsageError) as info:
        _spec(name=name)
    assert TOOL_NAME_PATTERN in str(info.value) and repr(name) in str(info.value)


@pytest.mark.parametrize("name", ["get_order", "x", "_private", "Refund-V2", "a" * 64, "A1_b-2"])
def test_names_every_provider_accepts_pass(name: str) -> None:
    assert _spec(name=name).name == name


def test_the_pattern_is_the_providers_intersection() -> None:
    """OpenAI and Anthropic: ``^[a-zA-Z0-9_-]{1,64}$``; Gemini also wants a letter or _ first."""
    openai_anthropic = re.compile(r"[a-zA-Z0-9_-]{1,64}")
    gemini_first = re.compile(r"[a-zA-Z_]")
    pattern = re.compile(TOOL_NAME_PATTERN[1:-1])
    for name in ["a", "_", "Z" * 64, "a-b_c", "9a", "-a", "a" * 65, "", "a b"]:
        both = openai_anthropic.fullmatch(name) is not None and gemini_first.match(name) is not None
        assert (pattern.fullmatch(name) is not None) == both, name


# ---- the error tree ------------------------------------------------------------------------------------


def test_the_error_tree_lists_every_error_class_with_its_meaning() -> None:
    classes = {
        name
        for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == errors.__name__
    }
    doc = errors.__doc__ or ""
    rows = re.findall(r"^    [│├└─ ]*([A-Z]\w+)\s+(\S.*)$", doc, flags=re.MULTILINE)
    listed = {name for name, _ in rows}
    assert classes - listed == set(), f"missing from the tree: {sorted(classes - listed)}"
    assert listed - classes == set(), f"in the tree but not in the module: {sorted(listed - classes)}"
    assert all(len(meaning) > 10 for _, meaning in rows)


# ---- the OUTCOME_UNKNOWN escalation ------------------------------------------------------------------


async def test_the_unknown_outcome_escalation_says_what_a_human_can_do() -> None:
    def crash(args: Any, ctx: cb.CallContext) -> Any:
        raise ConnectionError("socket closed after the request was sent")

    h = make(
        [calls("resp_1", fc("call_1", "set_note", {"order_id": "A1"})), final("resp_2")],
        [write_tool(handler=crash)],
    )
    out = await h.run()
    assert out.state == cb.State.STOPPED and out.reason == "OUTCOME_UNKNOWN"
    assert out.escalation is not None
    detail = out.escalation["detail"]
    assert "resuming" not in detail and "cannot be resumed" in detail
    assert "downstream system for these idempotency keys" in detail
    assert "UNKNOWN" in detail and "never re-runs it blindly" in detail
    assert "docs/durability.md" in detail and "start a new operation" in detail
    assert out.escalation["idempotency_keys"]
    with pytest.raises(UsageError, match="cannot be resumed"):  # what the old text told a human to do
        await h.runner.resume(out.operation_id)
