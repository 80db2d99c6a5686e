"""Tool-schema transforms shared by adapters (D9). Each adapter documents which ones it applies.

- ``inline_refs``: replace ``$ref`` into ``$defs``/``definitions`` with the definition itself; a
  recursive schema cannot be inlined and raises ``UnsupportedSchema``.
- ``openai_strict``: OpenAI strict mode wants every property listed in ``required`` and
  ``additionalProperties: false`` on every object. An optional property that already admits ``null``
  becomes required (the model sends null, which validation accepts); an optional property that does
  not admit null cannot be expressed strictly, so the tool is declared with ``strict: false`` instead
  of silently changing its meaning.
"""

from __future__ import annotations

import copy
from typing import Any

from ..core.errors import UnsupportedSchema


def inline_refs(schema: dict[str, Any], tool: str = "?") -> dict[str, Any]:
    defs: dict[str, Any] = {}
    defs.update(schema.get("definitions", {}))
    defs.update(schema.get("$defs", {}))

    def resolve(node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                name = ref.rsplit("/", 1)[-1]
                if not ref.startswith(("#/$defs/", "#/definitions/")) or name not in defs:
                    raise UnsupportedSchema(f"tool {tool!r}: cannot resolve $ref {ref!r}")
                if name in stack:
                    raise UnsupportedSchema(f"tool {tool!r}: recursive schema via {ref!r} cannot be inlined")
                target = resolve(defs[name], (*stack, name))
                extra = {k: resolve(v, stack) for k, v in node.items() if k != "$ref"}
                return {**target, **extra} if extra else target
            return {k: resolve(v, stack) for k, v in node.items() if k not in ("$defs", "definitions")}
        if isinstance(node, list):
            return [resolve(v, stack) for v in node]
        return node

    out = resolve(schema, ())
    assert isinstance(out, dict)
    return out


def _admits_null(node: dict[str, Any]) -> bool:
    t = node.get("type")
    if t == "null" or (isinstance(t, list) and "null" in t):
        return True
    for key in ("anyOf", "oneOf"):
        options = node.get(key)
        if isinstance(options, list) and any(isinstance(o, dict) and _admits_null(o) for o in options):
            return True
    return False


def openai_strict(schema: dict[str, Any], tool: str = "?") -> tuple[dict[str, Any], bool]:
    """Return (schema, strict_ok)."""
    out = copy.deepcopy(inline_refs(schema, tool))
    ok = True

    def walk(node: Any) -> None:
        nonlocal ok
        if not isinstance(node, dict):
            return
        if node.get("type") == "object" or "properties" in node:
            props = node.get("properties", {})
            required = list(node.get("required", []))
            for name, sub in props.items():
                if name not in required:
                    if isinstance(sub, dict) and _admits_null(sub):
                        required.append(name)
                        sub.pop("default", None)
                    else:
                        ok = False
            node["required"] = required
            if node.get("additionalProperties") not in (False, None):
                ok = False
            node["additionalProperties"] = False
        for sub in node.get("properties", {}).values():
            walk(sub)
        for key in ("items", "additionalProperties", "not"):
            if isinstance(node.get(key), dict):
                walk(node[key])
        for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            for sub in node.get(key, []) or []:
                walk(sub)

    walk(out)
    if not ok:
        return inline_refs(schema, tool), False
    return out, True
