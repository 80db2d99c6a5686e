"""Values nested deeper than the stack, or holding themselves, are refused as data, never a
RecursionError (D4, D5, D6); review round 20 (a)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from callbound.core.arguments import parse_arguments
from callbound.core.canonical import (
    FlatRecord,
    canonical_bytes,
    canonical_json,
    canonical_json_sha256_str_keys,
    canonical_sha256,
)
from callbound.core.dispatch import INVALID_ARGUMENTS, Reject, TrustedOperation, plan_call
from callbound.core.errors import CanonicalizationError
from callbound.core.registry import CallContext, Registry, ToolSpec
from callbound.core.types import ToolCall


def nested(depth: int) -> list[Any]:
    top: list[Any] = []
    here = top
    for _ in range(depth):
        here.append([])
        here = here[0]
    return top


def cyclic_list() -> list[Any]:
    a: list[Any] = []
    a.append(a)
    return a


def cyclic_dict() -> dict[str, Any]:
    d: dict[str, Any] = {}
    d["self"] = d
    return d


ENCODERS = {
    "canonical_json": canonical_json,
    "canonical_bytes": canonical_bytes,
    "canonical_sha256": canonical_sha256,
    "canonical_json_sha256_str_keys": canonical_json_sha256_str_keys,
    "FlatRecord": lambda v: FlatRecord(["a"]).encode([v]),
}
VALUES = {
    "deep list": lambda: nested(50_000),
    "deep object": lambda: {"a": nested(50_000)},
    "deep with a float (exact path)": lambda: [1.5, nested(50_000)],
    "cyclic list": cyclic_list,
    "cyclic object": cyclic_dict,
}


@pytest.mark.parametrize("encoder", list(ENCODERS))
@pytest.mark.parametrize("value", list(VALUES))
def test_too_deep_or_cyclic_is_a_canonicalization_error(encoder: str, value: str) -> None:
    # It was a RecursionError, which callers that handle CanonicalizationError (verify_binding,
    # call_arguments_json, redaction) let escape the loop.
    with pytest.raises(CanonicalizationError, match="nested too deeply"):
        ENCODERS[encoder](VALUES[value]())


def test_deep_but_within_the_stack_is_still_written() -> None:
    assert canonical_json(nested(200)) == "[" * 201 + "]" * 201
    assert canonical_json({"a": [1.5, nested(200)]}) == '{"a":[1.5,' + "[" * 201 + "]" * 201 + "]}"


def test_object_style_arguments_nested_too_deep_are_rejected_not_raised() -> None:
    arguments, why = parse_arguments({"a": nested(50_000)})
    assert arguments is None
    assert why is not None and "nested too deeply" in why


class Anything(BaseModel):
    a: Any = None


def noop(args: Any, ctx: CallContext) -> None:
    return None


def test_planning_a_call_with_such_arguments_rejects_it() -> None:
    spec = ToolSpec("t", "t", Anything, noop, "t-v1")
    arguments = {"a": nested(50_000)}
    call = ToolCall("p", "api", "r1", "c1", "t", arguments, arguments, None, 0)
    item = plan_call(call, Registry([spec]), None, TrustedOperation("op", "acme", "u1", None))
    assert isinstance(item, Reject)
    assert item.code == INVALID_ARGUMENTS
    assert "nested too deeply" in item.message


def test_items_too_deep_have_no_digest_rather_than_raising() -> None:
    from callbound.core.audit import items_digest

    assert items_digest([nested(50_000)]) is None
    assert items_digest([cyclic_dict()]) is None
    assert items_digest([nested(100)]) is not None
