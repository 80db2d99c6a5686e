"""ToolSpec and Registry: the allowlist, exact lookup, published schema and strict validation (D5, D17)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, ValidationError

from callbound.core.errors import UsageError
from callbound.core.registry import CallContext, Registry, ToolDeclaration, ToolSpec, format_validation_error


class GetOrder(BaseModel):
    order_id: str


class Line(BaseModel):
    sku: str
    qty: int


class Refund(BaseModel):
    order_id: str
    amount: float
    cents: int
    notify: bool = False
    lines: list[Line] = []
    note: Line | None = None


def handler(args: Any, ctx: CallContext) -> dict[str, Any]:
    return {}


def spec(name: str = "get_order", params: type[BaseModel] = GetOrder, **kw: Any) -> ToolSpec:
    kw.setdefault("schema_version", f"{name}-v1")
    return ToolSpec(name=name, description=f"{name} tool", params=params, handler=handler, **kw)


CTX = CallContext("op", "acme", "user-1", "c1", "t", None, None)
VALID_REFUND = '{"order_id": "A1", "amount": 40.5, "cents": 4050}'


# --- Registry ------------------------------------------------------------------------------------


def test_names_are_unique() -> None:
    with pytest.raises(UsageError, match="twice"):
        Registry([spec("a"), spec("b"), spec("a", schema_version="other")])


def test_registry_takes_only_toolspecs() -> None:
    with pytest.raises(UsageError):
        Registry([spec("a"), {"name": "b"}])  # type: ignore[list-item]


def test_registry_lists_its_tools_in_order() -> None:
    reg = Registry([spec("b"), spec("a"), spec("c")])
    assert reg.names() == ["b", "a", "c"]
    assert len(reg) == 3
    assert [s.name for s in reg] == ["b", "a", "c"]
    assert "a" in reg and "z" not in reg and 1 not in reg


def test_subset_trims_and_keeps_the_same_specs() -> None:
    a, b, c = spec("a"), spec("b"), spec("c")
    reg = Registry([a, b, c])
    sub = reg.subset(["c", "a"])
    assert sub.names() == ["c", "a"]
    assert sub.get("a") is a and sub.get("c") is c
    assert sub.get("b") is None
    assert reg.names() == ["a", "b", "c"]  # the original is untouched
    assert reg.subset([]).names() == []


def test_subset_rejects_unknown_names() -> None:
    reg = Registry([spec("a"), spec("b")])
    with pytest.raises(UsageError, match="nope"):
        reg.subset(["a", "nope"])


def test_get_is_exact() -> None:
    s = spec("get_order")
    reg = Registry([s])
    assert reg.get("get_order") is s
    for name in [
        "Get_Order",
        "GET_ORDER",
        "get_order ",
        " get_order",
        "get_order\n",
        "get_order\x00",
        "get-order",
        "getorder",
        "__class__",
        "__dict__",
        "_specs",
        "get",
        "",
        "functions.get_order",
    ]:
        assert reg.get(name) is None, name
    odd: list[object] = [None, 1, b"get_order", ["get_order"], ("get_order",), {"name": "get_order"}]
    for value in odd:
        assert reg.get(value) is None, value


@given(st.text(max_size=20) | st.integers() | st.none() | st.binary(max_size=10))
def test_get_only_finds_registered_names(name: object) -> None:
    reg = Registry([spec("get_order"), spec("refund", Refund)])
    found = reg.get(name)
    if name in ("get_order", "refund"):
        assert found is not None and found.name == name
    else:
        assert found is None


# --- ToolSpec ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw",
    [
        {"name": ""},
        {"risk": "dangerous"},
        {"risk": "READ"},
        {"timeout_ms": 0},
        {"timeout_ms": -1},
        {"schema_version": ""},
        {"params": dict},
        {"params": "GetOrder"},
    ],
    ids=repr,
)
def test_invalid_specs_are_usage_errors(kw: dict[str, Any]) -> None:
    base: dict[str, Any] = {
        "name": "t",
        "description": "d",
        "params": GetOrder,
        "handler": handler,
        "schema_version": "v1",
    }
    with pytest.raises(UsageError):
        ToolSpec(**{**base, **kw})


@pytest.mark.parametrize(("risk", "expected"), [("read", False), ("write", False), ("irreversible", True)])
def test_requires_approval_defaults_to_irreversible(risk: Any, expected: bool) -> None:
    s = spec(risk=risk)
    assert s.requires_approval is None
    assert s.needs_approval(GetOrder(order_id="A"), CTX) is expected
    assert s.is_write == (risk != "read")


def test_requires_approval_can_be_set_or_computed() -> None:
    assert spec(risk="irreversible", requires_approval=False).needs_approval(None, CTX) is False
    assert spec(risk="read", requires_approval=True).needs_approval(None, CTX) is True
    rule = spec(risk="write", requires_approval=lambda args, ctx: args.order_id.startswith("BIG"))
    assert rule.needs_approval(GetOrder(order_id="BIG-1"), CTX) is True
    assert rule.needs_approval(GetOrder(order_id="A1"), CTX) is False


def test_json_schema_comes_from_pydantic_and_forbids_extras() -> None:
    s = spec("refund", Refund)
    schema = s.json_schema
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"order_id", "amount", "cents", "notify", "lines", "note"}
    assert schema["properties"]["amount"]["type"] == "number"
    assert schema["properties"]["cents"]["type"] == "integer"
    assert schema["properties"]["notify"]["type"] == "boolean"
    assert sorted(schema["required"]) == ["amount", "cents", "order_id"]
    assert schema["additionalProperties"] is False
    assert s.declaration() == ToolDeclaration("refund", "refund tool", schema)
    reg = Registry([spec("get_order"), s])
    assert reg.declarations() == [spec("get_order").declaration(), s.declaration()]


def test_strict_params_is_a_subclass_of_the_users_model() -> None:
    s = spec("refund", Refund)
    args = s.validate_json(VALID_REFUND)
    assert isinstance(args, Refund)
    assert args.amount == 40.5 and args.cents == 4050 and args.notify is False
    # The user's own model is not mutated.
    assert Refund.model_config.get("extra") != "forbid"
    assert Refund.model_validate_json('{"order_id": "A", "amount": "1", "cents": 1, "x": 1}').amount == 1.0


def test_already_strict_model_is_used_as_is() -> None:
    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        a: int

    assert spec(params=Strict).strict_params is Strict


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ('{"order_id": "A1", "amount": "40.00", "cents": 4000}', "amount"),  # no "40.00" -> 40.0
        ('{"order_id": "A1", "amount": 40, "cents": "4000"}', "cents"),  # no "4000" -> 4000
        ('{"order_id": "A1", "amount": 40, "cents": 40.5}', "cents"),
        ('{"order_id": "A1", "amount": 40, "cents": 1, "notify": "true"}', "notify"),  # no "true" -> True
        ('{"order_id": "A1", "amount": 40, "cents": 1, "notify": 1}', "notify"),
        ('{"order_id": 123, "amount": 40, "cents": 1}', "order_id"),
        ('{"order_id": "A1", "amount": true, "cents": 1}', "amount"),
        ('{"order_id": "A1", "amount": 40, "cents": 1, "extra": 1}', "extra"),  # extra fields rejected
        ('{"order_id": "A1", "amount": 40}', "cents"),
        ('{"order_id": "A1", "amount": 40, "cents": 1, "lines": [{"sku": "x", "qty": "2"}]}', "lines.0.qty"),
        (
            '{"order_id": "A1", "amount": 40, "cents": 1, "lines": [{"sku": "x", "qty": 2, "z": 0}]}',
            "lines.0.z",
        ),
        ('{"order_id": "A1", "amount": 40, "cents": 1, "note": {"sku": "x", "qty": 1, "z": 0}}', "note.z"),
    ],
)
def test_validation_is_strict_and_names_the_field(raw: str, path: str) -> None:
    s = spec("refund", Refund)
    with pytest.raises(ValidationError) as info:
        s.validate_json(raw)
    message = format_validation_error(info.value)
    assert path in [part.split(":")[0] for part in message.split("; ")], message


def test_int_is_accepted_for_a_float_field() -> None:
    # JSON has one number type: an integer literal is a valid "number".
    args = spec("refund", Refund).validate_json('{"order_id": "A1", "amount": 40, "cents": 1}')
    assert args.amount == 40.0  # type: ignore[attr-defined]


def test_format_validation_error_has_paths_and_no_input_values() -> None:
    s = spec("refund", Refund)
    with pytest.raises(ValidationError) as info:
        s.validate_json('{"order_id": "SECRET-4111111111111111", "amount": "SECRET-40", "cents": "SECRET"}')
    message = format_validation_error(info.value)
    assert "amount:" in message and "cents:" in message
    assert "SECRET" not in message


def test_definition_digest_tracks_schema_version_risk_and_schema() -> None:
    base = spec("t").definition_digest()
    assert spec("t").definition_digest() == base
    assert spec("t", schema_version="t-v2").definition_digest() != base
    assert spec("t", risk="write").definition_digest() != base
    assert spec("t", params=Line).definition_digest() != base


def test_handler_ref_names_the_handler() -> None:
    assert spec().handler_ref == f"{__name__}:handler"


def test_is_async_follows_the_handler() -> None:
    async def ahandler(args: Any, ctx: CallContext) -> None:
        return None

    assert not spec().is_async
    assert ToolSpec("a", "d", GetOrder, ahandler, "v1").is_async


@pytest.mark.parametrize("root", [list[int], dict[str, int], int])
def test_a_root_model_as_params_is_a_usage_error(root: Any) -> None:
    """issue 2 §3 (params is a pydantic model of the arguments, a JSON object) and docs/reference.md
    (ToolSpec misuse is a UsageError): a RootModel got past the BaseModel check and raised pydantic's
    own PydanticUserError (review round 15)."""
    from pydantic import RootModel

    class Wrapped(RootModel[root]):  # type: ignore[valid-type,misc]
        pass

    with pytest.raises(UsageError, match="not a RootModel"):
        ToolSpec(name="t", description="d", params=Wrapped, handler=lambda a, c: {}, schema_version="v1")
