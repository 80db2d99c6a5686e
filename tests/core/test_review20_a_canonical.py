"""Canonical JSON of int subclasses (an ``(int, Enum)`` member, a subclass with its own text) is the
number's, on every path (D6); review round 20 (a)."""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbound.core.canonical import (
    MAX_SAFE_INTEGER,
    FlatRecord,
    canonical_bytes,
    canonical_json,
    canonical_json_sha256_str_keys,
    canonical_sha256,
)


class Status(int, enum.Enum):  # not IntEnum: str() of a member is "Status.SHIPPED"
    SHIPPED = 3


class Loud(int):
    def __str__(self) -> str:
        return "a number"

    __repr__ = __str__


def as_plain(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, list):
        return [as_plain(v) for v in value]
    return {k: as_plain(v) for k, v in value.items()}


@pytest.mark.parametrize(
    "value",
    [
        Status.SHIPPED,
        {"status": Status.SHIPPED},
        [Status.SHIPPED, 1.5],
        {"n": Loud(7), "f": 0.25},
        Loud(-MAX_SAFE_INTEGER),
    ],
)
def test_an_int_subclass_is_written_as_its_number(value: Any) -> None:
    # canonical_json wrote str(value): "Status.SHIPPED" and "a number", not JSON, into the result the
    # model was sent and the binding hashed, while the store's JSON (and the str-keys hash) said 3.
    text = canonical_json(value)
    assert text == canonical_json(as_plain(value))
    assert json.loads(text) == as_plain(value)
    assert canonical_bytes(value) == text.encode()
    assert canonical_sha256(value) == canonical_sha256(as_plain(value))
    if isinstance(value, dict):
        assert canonical_json_sha256_str_keys(value)[1] == canonical_sha256(as_plain(value))


def test_a_flat_record_writes_an_int_subclass_as_its_number() -> None:
    record = FlatRecord(["a", "b"])
    assert record.encode([Status.SHIPPED, Loud(2)]) == record.encode([3, 2]) == b'{"a":3,"b":2}'


leaves = (
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER).map(Loud)
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4)
)
values = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=10,
)


@given(values)
def test_any_value_with_int_subclasses_is_written_as_the_plain_value(value: Any) -> None:
    assert canonical_json(value) == canonical_json(as_plain(value))


def test_the_model_is_sent_json_for_a_result_holding_such_a_member() -> None:
    from pydantic import BaseModel

    import callbound as cb
    from callbound.testing import ScriptedModel

    class Order(BaseModel):
        order_id: str

    def get_order(args: Order, ctx: cb.CallContext) -> dict[str, Any]:
        return {"order_id": args.order_id, "status": Status.SHIPPED}

    call = {
        "id": "r1",
        "status": "completed",
        "output": [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "c1",
                "name": "get_order",
                "arguments": '{"order_id":"A1"}',
            }
        ],
    }
    final = {
        "id": "r2",
        "status": "completed",
        "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
        ],
    }
    model = ScriptedModel("openai-responses", [call, final])
    registry = cb.Registry([cb.ToolSpec("get_order", "Look up an order", Order, get_order, "get-order-v1")])
    outcome = cb.Runner(model=model, registry=registry).run_sync(input="A1?", tenant="acme", subject="u1")
    assert outcome.state == "COMPLETED"
    sent = [i["output"] for i in model.requests[1]["input"] if i.get("type") == "function_call_output"]
    assert [json.loads(s) for s in sent] == [{"ok": True, "data": {"order_id": "A1", "status": 3}}]


json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=4)
)
json_values = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=3), children, max_size=3
        )
    ),
    max_leaves=10,
)


def json_equal_form(value: Any) -> Any:
    """What JSON says is the same value: true is not 1, 1 is 1.0, -0.0 is 0, key order is nothing."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", float(value))
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(json_equal_form(v) for v in value))
    return ("object", frozenset((k, json_equal_form(v)) for k, v in value.items()))


def reordered(value: Any) -> Any:
    if isinstance(value, list):
        return [reordered(v) for v in value]
    if isinstance(value, dict):
        return {k: reordered(value[k]) for k in reversed(list(value))}
    return value


@given(json_values, json_values)
def test_canonical_text_is_equal_exactly_for_equal_json(a: Any, b: Any) -> None:
    assert (canonical_json(a) == canonical_json(b)) == (json_equal_form(a) == json_equal_form(b))


@given(json_values)
def test_canonical_text_ignores_key_order_at_every_depth(value: Any) -> None:
    assert canonical_json(reordered(value)) == canonical_json(value)
    assert canonical_sha256(reordered(value)) == canonical_sha256(value)
