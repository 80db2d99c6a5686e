"""Tool-schema transforms (adapters/schema.py, D9) and their use by the Responses adapter."""

from __future__ import annotations

import copy
import json
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from callbound.adapters.openai_responses import ADAPTER
from callbound.adapters.schema import inline_refs, openai_strict
from callbound.core.errors import UnsupportedSchema
from callbound.core.registry import ToolDeclaration

# ---- pydantic models used as real-world schemas ---------------------------------------------------


class Address(BaseModel):
    model_config = ConfigDict(extra="forbid")
    street: str
    city: str
    zip: str | None = None


class Line(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sku: str
    qty: int


class Order(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: str
    ship_to: Address
    bill_to: Address | None = None
    lines: list[Line]
    note: str | None = None


class WithPlainDefault(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str
    limit: int = 10  # optional and not nullable: strict mode cannot say "may be left out"


class Node(BaseModel):
    name: str
    children: list[Node] = []


class Tree(BaseModel):
    root: Node


def walk_schemas(node: Any, path: str = "$") -> list[tuple[str, dict[str, Any]]]:
    """Every schema object (not data values) with its path."""
    found: list[tuple[str, dict[str, Any]]] = []
    if not isinstance(node, dict):
        return found
    found.append((path, node))
    for key in ("properties", "patternProperties", "$defs", "definitions"):
        for name, sub in (node.get(key) or {}).items():
            found.extend(walk_schemas(sub, f"{path}.{key}.{name}"))
    for key in ("items", "additionalProperties", "not"):
        if isinstance(node.get(key), dict):
            found.extend(walk_schemas(node[key], f"{path}.{key}"))
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for i, sub in enumerate(node.get(key) or []):
            found.extend(walk_schemas(sub, f"{path}.{key}[{i}]"))
    return found


def has_refs(schema: dict[str, Any]) -> bool:
    return any("$ref" in node or "$defs" in node or "definitions" in node for _, node in walk_schemas(schema))


def is_object(node: dict[str, Any]) -> bool:
    t = node.get("type")
    return t == "object" or (isinstance(t, list) and "object" in t) or "properties" in node


def assert_strict_shape(schema: dict[str, Any]) -> None:
    for path, node in walk_schemas(schema):
        if is_object(node):
            assert node.get("additionalProperties") is False, path
            assert sorted(node.get("required", [])) == sorted(node.get("properties", {})), path


# ---- inline_refs ----------------------------------------------------------------------------------


def test_inline_refs_on_nested_pydantic_models() -> None:
    schema = Order.model_json_schema()
    assert "$defs" in schema  # the test is only meaningful if pydantic used refs
    out = inline_refs(schema, "order")
    assert not has_refs(out)
    assert out["properties"]["ship_to"]["properties"]["city"] == {"title": "City", "type": "string"}
    bill_options = out["properties"]["bill_to"]["anyOf"]
    assert bill_options[0]["properties"]["street"]["type"] == "string"
    assert bill_options[1] == {"type": "null"}
    assert out["properties"]["lines"]["items"]["required"] == ["sku", "qty"]
    assert schema == Order.model_json_schema()  # input untouched


def test_recursive_schema_is_unsupported() -> None:
    with pytest.raises(UnsupportedSchema, match="recursive"):
        inline_refs(Tree.model_json_schema(), "tree")
    with pytest.raises(UnsupportedSchema):
        openai_strict(Tree.model_json_schema(), "tree")


def test_unresolvable_refs_are_unsupported() -> None:
    for ref in ("#/$defs/Missing", "https://example.com/schema.json", "#", "#/properties/a"):
        with pytest.raises(UnsupportedSchema, match="cannot resolve"):
            inline_refs({"type": "object", "properties": {"a": {"$ref": ref}}, "$defs": {"X": {}}})


def test_ref_siblings_are_kept_and_resolved() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A", "description": "the a"}},
        "$defs": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
            "B": {"type": "integer"},
        },
    }
    out = inline_refs(schema)
    assert out["properties"]["a"] == {
        "type": "object",
        "properties": {"b": {"type": "integer"}},
        "description": "the a",
    }


def test_definitions_and_defs_namespaces_are_not_confused() -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "#/definitions/T"}, "y": {"$ref": "#/$defs/T"}},
        "definitions": {"T": {"type": "string"}},
        "$defs": {"T": {"type": "integer"}},
    }
    out = inline_refs(schema)
    assert out["properties"]["x"] == {"type": "string"}
    assert out["properties"]["y"] == {"type": "integer"}


def test_json_pointer_escapes_in_ref_names() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/a~1b%20c"}},
        "$defs": {"a/b c": {"type": "null"}},
    }
    assert inline_refs(schema)["properties"]["a"] == {"type": "null"}


def test_properties_named_like_keywords_survive() -> None:
    # A property may be called "definitions" or "$defs"; only the keyword at schema level is dropped.
    schema = {
        "type": "object",
        "properties": {
            "definitions": {"type": "string"},
            "$defs": {"type": "integer"},
            "$ref": {"type": "boolean"},
        },
        "required": ["definitions", "$defs", "$ref"],
    }
    out = inline_refs(schema)
    assert set(out["properties"]) == {"definitions", "$defs", "$ref"}
    strict, ok = openai_strict(schema)
    assert ok
    assert set(strict["properties"]) == {"definitions", "$defs", "$ref"}


def test_data_values_are_not_treated_as_schemas() -> None:
    default = {"$ref": "#/$defs/Nope", "definitions": 1}
    schema = {
        "type": "object",
        "properties": {
            "cfg": {"type": "object", "default": default, "examples": [{"$ref": "x"}]},
            "mode": {"enum": [{"$ref": "y"}, None]},
        },
    }
    out = inline_refs(schema)
    assert out["properties"]["cfg"]["default"] == default
    assert out["properties"]["mode"]["enum"] == [{"$ref": "y"}, None]


# ---- openai_strict --------------------------------------------------------------------------------


def test_strict_when_every_optional_field_admits_null() -> None:
    schema = Order.model_json_schema()
    out, ok = openai_strict(schema, "order")
    assert ok is True
    assert not has_refs(out)
    assert_strict_shape(out)
    assert out["required"] == ["order_id", "ship_to", "lines", "bill_to", "note"]
    assert "default" not in out["properties"]["note"]  # made required, so its default is meaningless
    assert out["properties"]["bill_to"]["anyOf"][0]["additionalProperties"] is False
    assert out["properties"]["bill_to"]["anyOf"][0]["required"] == ["street", "city", "zip"]
    assert out["properties"]["lines"]["items"]["additionalProperties"] is False
    assert schema == Order.model_json_schema()  # input untouched


def test_not_strict_when_an_optional_field_cannot_be_null() -> None:
    schema = WithPlainDefault.model_json_schema()
    out, ok = openai_strict(schema, "search")
    assert ok is False
    # meaning kept: "limit" stays optional with its default, nothing was forced
    assert out["required"] == ["query"]
    assert out["properties"]["limit"]["default"] == 10
    assert out == inline_refs(schema)


def test_not_strict_for_free_form_maps() -> None:
    class Tags(BaseModel):
        tags: dict[str, int]

    out, ok = openai_strict(Tags.model_json_schema())
    assert ok is False
    assert out["properties"]["tags"]["additionalProperties"] == {"type": "integer"}


def test_nullable_object_without_properties_is_closed() -> None:
    schema = {"type": "object", "properties": {"meta": {"type": ["object", "null"]}}, "required": ["meta"]}
    out, ok = openai_strict(schema)
    assert ok
    assert out["properties"]["meta"] == {
        "type": ["object", "null"],
        "required": [],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("prop", "nullable"),
    [
        ({"type": "null"}, True),
        ({"type": ["string", "null"]}, True),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, True),
        ({"oneOf": [{"type": "integer"}, {"anyOf": [{"type": "null"}]}]}, True),
        ({"enum": ["a", None]}, True),
        ({"const": None}, True),
        ({"type": "string"}, False),
        ({"enum": ["a", "b"]}, False),
        ({"type": "string", "enum": ["a", None]}, False),  # the type excludes null
        ({}, False),
    ],
)
def test_optional_property_nullability_decides_strictness(prop: dict[str, Any], nullable: bool) -> None:
    schema = {"type": "object", "properties": {"p": prop}}
    out, ok = openai_strict(schema)
    assert ok is nullable
    if nullable:
        assert out["required"] == ["p"]
        assert out["additionalProperties"] is False


def test_nested_objects_in_arrays_and_unions_are_transformed() -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"type": "object", "properties": {"a": {"type": ["integer", "null"]}}},
                        {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]},
                    ]
                },
            },
            "pairs": {
                "type": "array",
                "items": {"type": "array", "items": {"type": "object", "properties": {}}},
            },
        },
        "required": ["items", "pairs"],
    }
    out, ok = openai_strict(schema)
    assert ok
    assert_strict_shape(out)
    first = out["properties"]["items"]["items"]["anyOf"][0]
    assert first["required"] == ["a"]
    assert out["properties"]["pairs"]["items"]["items"]["additionalProperties"] is False


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string", "minLength": 1},  # pydantic Field(min_length=...), constr(max_length=...)
        {"type": "string", "maxLength": 32},
        # tuple[int, int]: prefixItems and no items ("array schema missing items")
        {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "integer"}],
            "minItems": 2,
            "maxItems": 2,
        },
        {"type": "array"},
        {"type": ["array", "null"]},
        {"type": "string", "pattern": "^(?!test)[a-z]+$"},  # lookahead: not in strict mode's regex dialect
        {"type": "string", "pattern": "(?<=a)b"},
    ],
)
def test_keywords_strict_mode_refuses_make_the_tool_non_strict_with_its_schema_as_written(
    prop: dict[str, Any],
) -> None:
    """D9: a schema OpenAI strict mode refuses ("'minLength' is not permitted", "array schema missing
    items") is declared strict: false, never sent strict to fail on the first call (review round 15)."""
    schema = {"type": "object", "properties": {"p": prop}, "required": ["p"]}
    out, ok = openai_strict(schema)
    assert ok is False
    assert out == schema


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string", "pattern": "^[a-z]+(?:-[a-z]+)*$"},
        {"type": "string", "pattern": r"^\(?=$"},  # an escaped parenthesis, not a lookahead
        {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
        {"type": "integer", "minimum": 0, "maximum": 9},
    ],
)
def test_keywords_strict_mode_takes_stay_strict(prop: dict[str, Any]) -> None:
    _, ok = openai_strict({"type": "object", "properties": {"p": prop}, "required": ["p"]})
    assert ok is True


def test_open_additional_properties_is_not_strict() -> None:
    _, ok = openai_strict({"type": "object", "properties": {}, "additionalProperties": True})
    assert ok is False


# ---- property test over generated schemas ---------------------------------------------------------

_names = st.text(alphabet="abcdefgh_$", min_size=1, max_size=6)


@st.composite
def schemas(draw: st.DrawFn, depth: int = 0) -> tuple[dict[str, Any], bool]:
    """(schema, whether OpenAI strict mode can express it). Objects nest in arrays and anyOf."""
    kinds = ["leaf"] if depth >= 3 else ["leaf", "object", "array", "anyOf", "object"]
    kind = draw(st.sampled_from(kinds))
    if kind == "leaf":
        t = draw(st.sampled_from(["string", "integer", "number", "boolean", "null"]))
        return {"type": t}, True
    if kind == "array":
        sub, ok = draw(schemas(depth + 1))
        return {"type": "array", "items": sub}, ok
    if kind == "anyOf":
        subs = draw(st.lists(schemas(depth + 1), min_size=1, max_size=3))
        return {"anyOf": [s for s, _ in subs]}, all(ok for _, ok in subs)
    props = draw(st.dictionaries(_names, schemas(depth + 1), max_size=4))
    ok = True
    required: list[str] = []
    out_props: dict[str, Any] = {}
    for name, (sub, sub_ok) in props.items():
        style = draw(
            st.sampled_from(["required", "optional", "optional-nullable-anyof", "optional-nullable-list"])
        )
        if style == "required":
            required.append(name)
        elif style == "optional-nullable-anyof":
            sub = {"anyOf": [sub, {"type": "null"}], "default": None}
        elif style == "optional-nullable-list":
            base = sub.get("type") if isinstance(sub.get("type"), str) else "string"
            sub, sub_ok = {"type": [base, "null"]}, base != "array"  # an array needs its items
        elif not _nullable(sub):
            ok = False
        ok = ok and sub_ok
        out_props[name] = sub
    node: dict[str, Any] = {"type": "object", "properties": out_props}
    if required:
        node["required"] = required
    extra = draw(st.sampled_from([None, False, True]))
    if extra is not None:
        node["additionalProperties"] = extra
        if extra is True:
            ok = False
    return node, ok


def _nullable(sub: dict[str, Any]) -> bool:
    if sub.get("type") == "null":
        return True
    return any(_nullable(o) for o in sub.get("anyOf", []))


@st.composite
def schemas_with_refs(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    """Move some object schemas into $defs and point at them with $ref."""
    root, ok = draw(schemas())
    root = {"type": "object", "properties": {"root": root}, "required": ["root"]}
    defs: dict[str, Any] = {}

    def hoist(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: ([hoist(v) for v in val] if k == "anyOf" else val) for k, val in node.items()}
            if "items" in node:
                node["items"] = hoist(node["items"])
            if "properties" in node:
                node["properties"] = {k: hoist(v) for k, v in node["properties"].items()}
            if node.get("type") == "object" and draw(st.booleans()):
                name = f"D{len(defs)}"
                defs[name] = node
                return {"$ref": f"#/$defs/{name}"}
        return node

    root["properties"] = {"root": hoist(root["properties"]["root"])}
    if defs:
        root["$defs"] = defs
    return root, ok


@settings(max_examples=300, deadline=None)
@given(case=schemas_with_refs())
def test_openai_strict_invariants(case: tuple[dict[str, Any], bool]) -> None:
    schema, expressible = case
    before = copy.deepcopy(schema)
    out, ok = openai_strict(schema, "t")
    assert schema == before
    assert not has_refs(out)
    assert "$ref" not in json.dumps(out)
    assert ok is expressible
    if ok:
        assert_strict_shape(out)
    else:
        assert out == inline_refs(schema, "t")


# ---- render_tools uses the transform --------------------------------------------------------------


def test_render_tools_applies_openai_strict() -> None:
    tools = ADAPTER.render_tools(
        [
            ToolDeclaration("create_order", "Create an order", Order.model_json_schema()),
            ToolDeclaration("search", "Search", WithPlainDefault.model_json_schema()),
        ]
    )
    order, search = tools
    assert order["type"] == "function"
    assert order["name"] == "create_order"
    assert order["description"] == "Create an order"
    assert order["strict"] is True
    assert order["parameters"] == openai_strict(Order.model_json_schema())[0]
    assert_strict_shape(order["parameters"])
    assert search["strict"] is False
    assert search["parameters"]["required"] == ["query"]


def test_render_tools_raises_for_recursive_schema() -> None:
    with pytest.raises(UnsupportedSchema):
        ADAPTER.render_tools([ToolDeclaration("tree", "t", Tree.model_json_schema())])


# ---- what OpenAI strict mode refuses ----------------------------------------------------------------


class _Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class _Dog(BaseModel):
    kind: Literal["dog"]
    bark: str


class _Pet(BaseModel):
    pet: Annotated[_Cat | _Dog, Field(discriminator="kind")]


def test_discriminated_union_becomes_strict_any_of_without_a_dangling_discriminator() -> None:
    """pydantic's oneOf (variants disjoint by their tag) is refused by strict mode ("'oneOf' is not
    permitted"); as anyOf it admits the same values. Its discriminator mapping points into $defs,
    which inlining removed, so it goes too."""
    out, ok = openai_strict(_Pet.model_json_schema(), "t")
    assert ok
    pet = out["properties"]["pet"]
    assert "oneOf" not in json.dumps(out) and "discriminator" not in json.dumps(out)
    assert [v["properties"]["kind"]["const"] for v in pet["anyOf"]] == ["cat", "dog"]
    assert_strict_shape(out)
    assert "discriminator" not in json.dumps(inline_refs(_Pet.model_json_schema(), "t"))


class _AnyValue(BaseModel):
    value: Any


class _Tags(BaseModel):
    tags: set[str]


class _Loose(BaseModel):
    items: list  # type: ignore[type-arg]


@pytest.mark.parametrize("model", [_AnyValue, _Tags, _Loose])
def test_schemas_strict_mode_refuses_are_declared_non_strict(model: type[BaseModel]) -> None:
    """A schema with no type (Any, a bare list's items) or a keyword strict mode refuses
    (uniqueItems) would make OpenAI reject the whole request with invalid_json_schema."""
    out, ok = openai_strict(model.model_json_schema(), "t")
    assert ok is False
    assert out == inline_refs(model.model_json_schema(), "t")


@pytest.mark.parametrize(
    "keyword",
    [{"allOf": [{"type": "string"}]}, {"not": {"type": "null"}}, {"type": "object", "minProperties": 1}],
)
def test_refused_keywords_anywhere_make_the_tool_non_strict(keyword: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": keyword}}, "required": ["a"]}
    assert openai_strict(schema, "t")[1] is False
