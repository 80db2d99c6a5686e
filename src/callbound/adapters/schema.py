"""Tool-schema transforms shared by adapters (D9). Each adapter documents which ones it applies.

- ``inline_refs``: replace ``$ref`` into ``$defs``/``definitions`` with the definition itself; a
  recursive schema cannot be inlined and raises ``UnsupportedSchema``.
- ``openai_strict``: OpenAI strict mode wants every property listed in ``required`` and
  ``additionalProperties: false`` on every object. An optional property that already admits ``null``
  becomes required (the model sends null, which validation accepts); an optional property that does
  not admit null cannot be expressed strictly, so the tool is declared with ``strict: false`` instead
  of silently changing its meaning.

  Strict mode also rejects a schema without a type (a field typed ``Any``), a fixed set of
  keywords (``uniqueItems``, ``allOf``, ``not``, ``patternProperties``, ``minLength``/``maxLength``, ...:
  ``'X' is not permitted``), an array without ``items`` (a tuple's ``prefixItems``), a ``pattern`` with
  lookaround, and any ``format`` but ``date-time``, ``time``, ``date``, ``duration``, ``email``, ``hostname``,
  ``ipv4``, ``ipv6`` and ``uuid`` (pydantic's ``HttpUrl`` writes ``uri``: 400
  ``invalid_function_parameters``, "'uri' is not a valid format"); such a tool is declared
  ``strict: false`` too, with its schema otherwise as written. ``oneOf`` (pydantic's discriminated unions, whose
  variants are disjoint by their tag) becomes ``anyOf``, which strict mode accepts and which admits
  the same values; callbound validates arguments strictly itself either way (D5).
- Both: ``discriminator`` (an OpenAPI annotation) is dropped when refs are inlined: its ``mapping``
  points into ``$defs``, which no longer exist.

Both walk schemas keyword by keyword: names under ``properties`` are property names, never keywords
(a property may be called ``definitions`` or ``$ref``), and values of ``default``, ``enum``,
``const`` and ``examples`` are data, never schemas.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from ..core.errors import UnsupportedSchema

# keyword -> how its value holds sub-schemas
_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas")
_SCHEMA_ONE = (
    "items",
    "additionalProperties",
    "additionalItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_DEF_KEYS = ("$defs", "definitions")


def _map_subschemas(node: dict[str, Any], fn: Callable[[Any], Any]) -> dict[str, Any]:
    """A copy of one schema object with ``fn`` applied to each direct sub-schema."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: fn(sub) for name, sub in value.items()}
        elif key in _SCHEMA_ONE and isinstance(value, dict):
            out[key] = fn(value)
        elif key in (*_SCHEMA_LISTS, "items") and isinstance(value, list):
            out[key] = [fn(sub) for sub in value]
        else:
            out[key] = value
    return out


def _subschemas(node: dict[str, Any]) -> list[Any]:
    subs: list[Any] = []
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            subs.extend(value.values())
        elif key in _SCHEMA_ONE and isinstance(value, dict):
            subs.append(value)
        elif key in (*_SCHEMA_LISTS, "items") and isinstance(value, list):
            subs.extend(value)
    return subs


def _pointer_token(token: str) -> str:
    from urllib.parse import unquote

    return unquote(token).replace("~1", "/").replace("~0", "~")


def inline_refs(schema: dict[str, Any], tool: str = "?") -> dict[str, Any]:
    defs: dict[str, dict[str, Any]] = {}
    for key in _DEF_KEYS:
        table = schema.get(key)
        defs[key] = table if isinstance(table, dict) else {}

    def target_of(ref: str) -> tuple[str, Any]:
        for key in _DEF_KEYS:
            prefix = f"#/{key}/"
            if ref.startswith(prefix):
                name = _pointer_token(ref[len(prefix) :])
                if "/" not in ref[len(prefix) :] and name in defs[key]:
                    return f"{key}/{name}", defs[key][name]
        raise UnsupportedSchema(f"tool {tool!r}: cannot resolve $ref {ref!r}")

    def resolve(node: Any, stack: tuple[str, ...]) -> Any:
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            name, target = target_of(ref)
            if name in stack:
                raise UnsupportedSchema(f"tool {tool!r}: recursive schema via {ref!r} cannot be inlined")
            resolved = resolve(target, (*stack, name))
            rest = {k: v for k, v in node.items() if k != "$ref"}
            if not rest:
                return resolved
            extra = _map_subschemas(rest, lambda sub: resolve(sub, stack))
            return {**resolved, **extra} if isinstance(resolved, dict) else extra
        body = {k: v for k, v in node.items() if k not in _DEF_KEYS and k != "discriminator"}
        return _map_subschemas(body, lambda sub: resolve(sub, stack))

    out = resolve(schema, ())
    if not isinstance(out, dict):
        raise UnsupportedSchema(f"tool {tool!r}: the parameters schema must be a JSON object")
    return out


def _admits_null(node: dict[str, Any]) -> bool:
    t = node.get("type")
    if t == "null" or (isinstance(t, list) and "null" in t):
        return True
    if "const" in node and node["const"] is None:
        return True
    enum = node.get("enum")
    if isinstance(enum, list) and None in enum and "type" not in node:
        return True
    for key in ("anyOf", "oneOf"):
        options = node.get(key)
        if isinstance(options, list) and any(isinstance(o, dict) and _admits_null(o) for o in options):
            return True
    return False


def _is_array(node: dict[str, Any]) -> bool:
    t = node.get("type")
    return t == "array" or (isinstance(t, list) and "array" in t)


# a lookahead or lookbehind group, not an escaped parenthesis
_LOOKAROUND = re.compile(r"(?<!\\)\(\?<?[=!]")


def _is_object(node: dict[str, Any]) -> bool:
    t = node.get("type")
    return t == "object" or (isinstance(t, list) and "object" in t) or "properties" in node


# Keywords OpenAI strict mode refuses ("'uniqueItems' is not permitted"; "'minLength' is not permitted":
# strings take only pattern and format there): a schema using any of them can only be declared non-strict.
# ``prefixItems`` (pydantic's fixed-length tuple) comes without ``items``, and strict mode refuses an array
# schema without ``items`` ("array schema missing items").
_NOT_STRICT = frozenset(
    {
        "minLength",
        "maxLength",
        "prefixItems",
        "allOf",
        "not",
        "if",
        "then",
        "else",
        "dependentRequired",
        "dependentSchemas",
        "uniqueItems",
        "contains",
        "minContains",
        "maxContains",
        "unevaluatedItems",
        "unevaluatedProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "patternProperties",
    }
)
# The only ``format`` values strict mode accepts (OpenAI structured outputs, "Supported properties").
STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
# What gives a schema its type in strict mode; one without any of them ({} or a field typed Any) is
# refused with "schema must have a 'type' key".
_TYPED_BY = ("type", "anyOf", "enum", "const")


def _one_of_as_any_of(node: Any) -> Any:
    """``oneOf`` → ``anyOf`` throughout (a node holding both is left as it is, and is not strict)."""
    if not isinstance(node, dict):
        return node
    out = _map_subschemas(node, _one_of_as_any_of)
    if "oneOf" in out and "anyOf" not in out:
        out["anyOf"] = out.pop("oneOf")
    return out


def openai_strict(schema: dict[str, Any], tool: str = "?") -> tuple[dict[str, Any], bool]:
    """Return (schema, strict_ok)."""
    inlined = _one_of_as_any_of(inline_refs(schema, tool))
    out = copy.deepcopy(inlined)  # inlined shares data values (enum, default) with the caller's schema
    ok = True

    def walk(node: Any) -> None:
        nonlocal ok
        if not isinstance(node, dict):
            return
        if "oneOf" in node or not _NOT_STRICT.isdisjoint(node) or not any(k in node for k in _TYPED_BY):
            ok = False
        fmt = node.get("format", "date-time")
        if not isinstance(fmt, str) or fmt not in STRICT_FORMATS:
            ok = False
        if _is_array(node) and "items" not in node:
            ok = False
        pattern = node.get("pattern")
        if pattern is not None and (not isinstance(pattern, str) or _LOOKAROUND.search(pattern)):
            ok = False  # strict mode's regex dialect has no lookaround
        if _is_object(node):
            props = node.get("properties", {})
            if not isinstance(props, dict):
                ok = False
                props = {}
            listed = node.get("required", [])
            required = [r for r in listed if isinstance(r, str)] if isinstance(listed, list) else []
            for name, sub in props.items():
                if name not in required:
                    if isinstance(sub, dict) and _admits_null(sub):
                        required.append(name)
                        sub.pop("default", None)
                    else:
                        ok = False
            node["required"] = required
            if node.get("additionalProperties") not in (False, None) or node.get("patternProperties"):
                ok = False
            node["additionalProperties"] = False
        for sub in _subschemas(node):
            walk(sub)

    walk(out)
    if not ok:
        return copy.deepcopy(inlined), False
    return out, True
