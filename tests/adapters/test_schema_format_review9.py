"""Review 9: the JSON Schema ``format`` keyword in tool declarations (D9: a schema is declared in a form
the provider accepts, or refused when the registry is bound, never on the first live call).

- OpenAI strict mode accepts only the formats ``date-time``, ``time``, ``date``, ``duration``, ``email``,
  ``hostname``, ``ipv4``, ``ipv6`` and ``uuid``; any other (pydantic's ``HttpUrl`` → ``uri``) is a 400
  ``invalid_function_parameters`` ("'uri' is not a valid format"). Such a tool is declared
  ``strict: false``, as for the other constructs strict mode refuses.
- Gemini's function declarations accept ``format`` on STRING only as ``enum`` or ``date-time`` (400 "only
  'enum' and 'date-time' are supported for STRING type"); INTEGER takes ``int32``/``int64`` and NUMBER
  ``float``/``double`` (SDK google/genai/types.py ``Schema.format``). Any other format moves into the
  description, which only widens what the declaration admits: callbound still validates the arguments
  against the tool's own schema (D5).
"""

from __future__ import annotations

import datetime
import json
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from pydantic import BaseModel, HttpUrl

import callbound as cb
from callbound.adapters import get
from callbound.adapters.gemini_schema import gemini_schema
from callbound.adapters.schema import openai_strict
from callbound.core.errors import UnsupportedSchema
from tests.adapters.test_gemini_generate import pydantic_style_schemas

OPENAI_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
GEMINI_FORMATS = {
    "STRING": {"date-time", "enum"},
    "INTEGER": {"int32", "int64"},
    "NUMBER": {"float", "double"},
}


class Fetch(BaseModel):
    url: HttpUrl
    ref: uuid.UUID
    day: datetime.date


class Dated(BaseModel):
    ref: uuid.UUID
    at: datetime.datetime
    day: datetime.date


def declarations(params: type[BaseModel]) -> list[Any]:
    spec = cb.ToolSpec(
        name="fetch", description="Fetch", params=params, handler=lambda a, c: {}, schema_version="v1"
    )
    return cb.Registry([spec]).declarations()


def formats(node: Any) -> list[tuple[Any, Any]]:
    """(type, format) of every schema node with a format (property names are never schema nodes)."""
    found: list[tuple[Any, Any]] = []
    if isinstance(node, dict):
        if "format" in node and not isinstance(node["format"], dict):
            found.append((node.get("type"), node["format"]))
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for sub in value.values():
                    found.extend(formats(sub))
            elif key in ("items", "anyOf") or isinstance(value, dict | list):
                found.extend(formats(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(formats(value))
    return found


@pytest.mark.parametrize("api", ["openai-responses", "openai-chat"])
def test_an_openai_tool_with_a_format_strict_mode_refuses_is_not_strict(api: str) -> None:
    [tool] = get(api).render_tools(declarations(Fetch))
    function = tool.get("function", tool)
    assert function["strict"] is False
    assert function["parameters"]["properties"]["url"]["format"] == "uri"  # sent as a plain hint


@pytest.mark.parametrize("api", ["openai-responses", "openai-chat"])
def test_an_openai_tool_with_supported_formats_stays_strict(api: str) -> None:
    [tool] = get(api).render_tools(declarations(Dated))
    function = tool.get("function", tool)
    assert function["strict"] is True
    assert {f for _, f in formats(function["parameters"])} == {"uuid", "date-time", "date"}


@pytest.mark.parametrize("fmt", sorted(OPENAI_FORMATS))
def test_openai_strict_accepts_each_supported_format(fmt: str) -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", "format": fmt}}, "required": ["v"]}
    assert openai_strict(schema)[1] is True


@pytest.mark.parametrize(
    "node",
    [
        {"type": "string", "format": "uri"},
        {"type": "string", "format": "uri-reference"},
        {"type": "string", "format": "binary"},
        {"type": "integer", "format": "int64"},
        {"type": "array", "items": {"type": "string", "format": "uri"}},
        {"anyOf": [{"type": "string", "format": "password"}, {"type": "null"}]},
    ],
)
def test_openai_strict_refuses_any_other_format_anywhere(node: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"v": node}, "required": ["v"]}
    out, ok = openai_strict(schema)
    assert ok is False
    assert out["properties"]["v"] == node  # the non-strict schema is the inlined one, unchanged


def test_a_property_named_format_is_no_keyword() -> None:
    schema = {
        "type": "object",
        "properties": {"format": {"type": "string"}},
        "required": ["format"],
        "additionalProperties": False,
    }
    assert openai_strict(schema)[1] is True
    assert gemini_schema(schema)["properties"] == {"format": {"type": "STRING"}}


def test_gemini_moves_formats_it_refuses_into_the_description() -> None:
    [tool] = get("gemini-generate").render_tools(declarations(Fetch))
    props = tool["functionDeclarations"][0]["parameters"]["properties"]
    assert all("format" not in p for p in props.values()), props
    assert props["url"]["description"].endswith("(format: uri)")
    assert props["ref"]["description"].endswith("(format: uuid)")
    assert props["day"]["description"].endswith("(format: date)")


@pytest.mark.parametrize(
    ("node", "kept"),
    [
        ({"type": "string", "format": "date-time"}, True),
        ({"type": "string", "format": "enum", "enum": ["a"]}, True),
        ({"type": "integer", "format": "int32"}, True),
        ({"type": "integer", "format": "int64"}, True),
        ({"type": "number", "format": "float"}, True),
        ({"type": "number", "format": "double"}, True),
        ({"type": "string", "format": "uri"}, False),
        ({"type": "string", "format": "email"}, False),
        ({"type": "string", "format": "int32"}, False),
        ({"type": "integer", "format": "date-time"}, False),
        ({"type": "number", "format": "int64"}, False),
        ({"type": "boolean", "format": "date-time"}, False),
        ({"type": ["string", "integer"], "format": "date-time"}, False),
    ],
)
def test_gemini_keeps_a_format_only_on_its_own_type(node: dict[str, Any], kept: bool) -> None:
    schema = {"type": "object", "properties": {"v": {**node, "description": "Value"}}}
    out = gemini_schema(schema)["properties"]["v"]
    if kept:
        assert out["format"] == node["format"] and out["description"] == "Value"
    else:
        assert "format" not in out
        assert out["description"] == f"Value\n(format: {node['format']})"
    assert gemini_schema(gemini_schema(schema)) == gemini_schema(schema)  # idempotent


def test_gemini_format_hint_without_a_description_and_under_optional() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "format": "uuid"},
            "b": {"anyOf": [{"type": "string", "format": "uri"}, {"type": "null"}], "default": None},
            "c": {"type": "string", "format": 5},
        },
    }
    props = gemini_schema(schema)["properties"]
    assert props["a"] == {"type": "STRING", "description": "(format: uuid)"}
    assert props["b"] == {"type": "STRING", "description": "(format: uri)", "default": None, "nullable": True}
    assert props["c"] == {"type": "STRING"}  # a format that is not a string names nothing


@settings(max_examples=200, deadline=None)
@given(schema=pydantic_style_schemas())
def test_generated_schemas_carry_only_formats_their_provider_accepts(schema: dict[str, Any]) -> None:
    strict_out, strict = openai_strict(schema)
    if strict:
        assert {f for _, f in formats(strict_out)} <= OPENAI_FORMATS
    try:
        out = gemini_schema(schema, "t")
    except UnsupportedSchema:
        return
    for typ, fmt in formats(out):
        assert fmt in GEMINI_FORMATS.get(typ, set()), (typ, fmt, json.dumps(out))
    assert gemini_schema(out, "t") == out
