"""Pure JSON helpers for the two Gemini adapters: the tool-schema subset (D9), Vertex ``partialArgs``
assembly, and the reading of ``google.rpc`` error details.

Tool schemas
------------

``FunctionDeclaration.parameters`` takes Gemini's ``Schema``, a select subset of OpenAPI 3.0. A JSON
Schema (as pydantic writes it) is transformed so:

1. ``$ref`` into ``$defs``/``definitions`` is inlined (``schema.inline_refs``); a recursive schema
   cannot be inlined and raises ``UnsupportedSchema``.
2. ``allOf`` members are merged into their parent when they agree; conflicting members raise
   ``UnsupportedSchema``. ``oneOf`` becomes ``anyOf``.
3. Only these keywords are kept: ``type format description nullable enum items properties required
   anyOf minimum maximum minItems maxItems minLength maxLength pattern minProperties maxProperties
   default example propertyOrdering``. Everything else (``$schema``, ``$id``, ``title``,
   ``additionalProperties``, ``examples``, ``exclusiveMinimum``, ``multipleOf``, ``uniqueItems``,
   ``discriminator``, ``not``, ...) is dropped. ``format`` is kept only where Gemini accepts it: STRING
   ``date-time`` or ``enum``, INTEGER ``int32``/``int64``, NUMBER ``float``/``double`` (anything else on a
   STRING is a 400, "only 'enum' and 'date-time' are supported for STRING type"). Any other format
   string moves into the description as ``(format: uri)``; a format that is not a string is dropped.
4. Type names are upper-case (``STRING``, ``NUMBER``, ``INTEGER``, ``BOOLEAN``, ``ARRAY``, ``OBJECT``).
   A missing type is inferred (``properties`` → OBJECT, ``items`` → ARRAY, string ``enum`` → STRING).
5. Null: ``type: [X, "null"]``, an ``anyOf`` member ``{"type": "null"}`` and a ``null`` in ``enum``
   become ``nullable: true``; several non-null types become an ``anyOf`` of single types; a single
   ``anyOf`` member left over is merged into its parent. A schema that admits only null raises.
6. ``const`` becomes a one-value ``enum``. Gemini's ``enum`` holds strings on STRING only: any other
   enum is dropped and its values are listed in the description (``Allowed values: [1, 2]``).
7. A tuple (``prefixItems``) becomes an ARRAY whose ``items`` is an ``anyOf`` of the member schemas,
   bounded by ``minItems``/``maxItems``.
8. ``required`` keeps only declared properties; the top level must be an OBJECT (an empty top-level
   schema means "no parameters").
9. A schema that admits any value (no type, nothing to infer one from: a field typed ``Any``, an array
   without an item schema) raises ``UnsupportedSchema``: Gemini needs a type everywhere.

Why dropping is safe: every dropped keyword only widens what the declaration admits. The model sees a
looser hint; callbound still validates the arguments strictly against the tool's own schema (D5), so
a value outside it is rejected and never runs. The transform is idempotent (transforming its output
again returns it unchanged), which the tests check with generated schemas.

partialArgs
-----------
Vertex can stream a call's arguments as entries ``{jsonPath, stringValue | numberValue | boolValue |
nullValue, willContinue}`` (WIRE.md 4.7). ``PartialArgs`` builds the argument object from them in one
pass: containers are created along the path (an array index must be the next one), a string value is
kept as a list of fragments and joined once at the end (linear, however it is split; by
``base.join_fragments``, which re-pairs surrogate halves split over two pieces), and a string
whose last fragment said ``willContinue`` is reported as cut off. Any inconsistency (a value set
twice, a skipped index, a path through a scalar) is reported, never repaired.

Each entry reports the bytes it added to what is buffered, for the byte caps: the value's, and the
structure it created (a new member's key, quotes, colon and comma; a new container's brackets; the
root's braces once). A call's count is then the size of its arguments as compact JSON, the measure
plain bodies get (``base.capped``), except that string values are counted decoded (a ``"`` is 1 byte,
not 2). Counting values only would let a call of long key names, each short value cheap, pass any cap.

Error details
-------------
``google_error_details`` reads ``RetryInfo.retryDelay`` (``"34.4s"``) and decides whether a quota error
is one that waiting cannot fix: a per-day quota (``quotaId`` containing ``PerDay``), a quota of zero,
or an ``ErrorInfo`` reason about billing. Per-minute quotas are transient. The message text is not
read: Gemini says "check your plan and billing details" on transient per-minute limits too.

Usage
-----
``token_sum`` and ``gemini_usage`` read both APIs' token counts by one rule (D27), see their docstrings.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from ..core.errors import UnsupportedSchema
from ..core.types import Usage
from .base import join_fragments, utf8_len
from .schema import inline_refs

_TYPES = {"string", "number", "integer", "boolean", "array", "object"}
_KEEP_SCALAR = (
    "pattern",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
    "default",
    "example",
    "propertyOrdering",
)
_DOC_KEYS = ("description", "title", "default", "example", "examples")
# The formats Gemini accepts, by type; any other is described instead (module doc, point 3).
_FORMATS = {"STRING": ("date-time", "enum"), "INTEGER": ("int32", "int64"), "NUMBER": ("float", "double")}


def gemini_schema(schema: dict[str, Any], tool: str = "?") -> dict[str, Any]:
    """Gemini ``parameters`` for a tool's JSON Schema; raises ``UnsupportedSchema`` (see module doc)."""
    inlined = inline_refs(schema, tool)
    if not any(k in inlined for k in ("type", "properties", "anyOf", "oneOf", "allOf")):
        inlined = {**inlined, "type": "object", "properties": {}}
    out = _node(inlined, tool, "$")
    if out.get("type") != "OBJECT" or out.get("nullable"):
        raise UnsupportedSchema(f"tool {tool!r}: Gemini parameters must be an object schema")
    return out


def _merge_all_of(node: dict[str, Any], tool: str, path: str) -> dict[str, Any]:
    members = node.get("allOf")
    if not isinstance(members, list):
        return node
    merged = {k: v for k, v in node.items() if k != "allOf"}
    for member in members:
        if not isinstance(member, dict):
            raise UnsupportedSchema(f"tool {tool!r}: allOf member at {path} is not a schema")
        for key, value in _merge_all_of(member, tool, path).items():
            if key not in merged:
                merged[key] = value
            elif key == "properties" and isinstance(value, dict) and isinstance(merged[key], dict):
                props = dict(merged[key])
                for name, sub in value.items():
                    if name in props and props[name] != sub:
                        raise UnsupportedSchema(f"tool {tool!r}: allOf members disagree on {path}.{name}")
                    props[name] = sub
                merged[key] = props
            elif key == "required" and isinstance(value, list) and isinstance(merged[key], list):
                merged[key] = [*merged[key], *(r for r in value if r not in merged[key])]
            elif key in _DOC_KEYS or merged[key] == value:
                continue  # the parent's documentation wins; equal constraints agree
            else:
                raise UnsupportedSchema(f"tool {tool!r}: allOf members disagree on {key!r} at {path}")
    return merged


def _with_hint(out: dict[str, Any], values: list[Any]) -> None:
    hint = "Allowed values: " + json.dumps(values, ensure_ascii=False)
    desc = out.get("description")
    out["description"] = f"{desc}\n{hint}" if isinstance(desc, str) and desc else hint


def _node(raw: Any, tool: str, path: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise UnsupportedSchema(f"tool {tool!r}: schema at {path} is not an object")
    node = _merge_all_of(raw, tool, path)
    out: dict[str, Any] = {}
    nullable = node.get("nullable") is True

    # Types: a list of types becomes nullable and/or anyOf; names are upper-cased.
    raw_type = node.get("type")
    types = raw_type if isinstance(raw_type, list) else ([raw_type] if raw_type is not None else [])
    names: list[str] = []
    for t in types:
        if not isinstance(t, str) or t.lower() not in {*_TYPES, "null"}:
            raise UnsupportedSchema(f"tool {tool!r}: unknown type {t!r} at {path}")
        if t.lower() == "null":
            nullable = True
        elif t.upper() not in names:
            names.append(t.upper())

    # const and enum: strings stay on STRING; anything else becomes a description hint.
    values: list[Any] | None = None
    if "const" in node:
        values = [node["const"]]
    elif isinstance(node.get("enum"), list):
        values = list(node["enum"])
    if values is not None:
        if None in values:
            nullable = True
            values = [v for v in values if v is not None]
        if values and all(isinstance(v, str) for v in values) and names in ([], ["STRING"]):
            names = ["STRING"]
            out["enum"] = values
        elif values:
            _with_hint(out, values)
            if not names:
                names = list(dict.fromkeys(_json_type(v, tool, path) for v in values))

    # Unions: oneOf is read as anyOf (widening, see module doc); null members become nullable.
    options = node.get("anyOf") if isinstance(node.get("anyOf"), list) else node.get("oneOf")
    members: list[dict[str, Any]] = []
    if isinstance(options, list):
        for i, option in enumerate(options):
            if isinstance(option, dict) and _only_null(option):
                nullable = True
                continue
            members.append(_node(option, tool, f"{path}.anyOf[{i}]"))

    if isinstance(node.get("description"), str):
        desc = node["description"]
        out["description"] = f"{desc}\n{out['description']}" if "description" in out else desc
    for key in _KEEP_SCALAR:
        if key in node:
            out[key] = node[key]

    if "properties" in node and isinstance(node["properties"], dict):
        out["properties"] = {
            name: _node(sub, tool, f"{path}.{name}") for name, sub in node["properties"].items()
        }
        req = node.get("required")
        if isinstance(req, list):
            kept = [r for r in req if isinstance(r, str) and r in out["properties"]]
            if kept:
                out["required"] = kept
    items = node.get("items")
    prefix = node.get("prefixItems") if isinstance(node.get("prefixItems"), list) else None
    if isinstance(items, list):
        prefix, items = items, None
    if isinstance(items, dict):
        out["items"] = _node(items, tool, f"{path}[]")
    elif prefix:
        tuple_items = [_node(p, tool, f"{path}[{i}]") for i, p in enumerate(prefix)]
        out["items"] = tuple_items[0] if len(tuple_items) == 1 else {"anyOf": tuple_items}
        out.setdefault("minItems", len(prefix))
        if items is not True:
            out.setdefault("maxItems", len(prefix))

    if not names and not members:
        if "properties" in out:
            names = ["OBJECT"]
        elif "items" in out:
            names = ["ARRAY"]
    if len(names) > 1:
        members = [*({"type": n} for n in names), *members]
        names = []
    if names:
        out["type"] = names[0]
    if members:
        if len(members) == 1 and not names:
            # A single alternative left (typically Optional[X]): X itself, nullable.
            out = {**members[0], **out}  # the parent's keys (its description) win
        else:
            out["anyOf"] = members
    fmt = node.get("format")
    if isinstance(fmt, str) and fmt:
        if fmt in _FORMATS.get(out.get("type", ""), ()):
            out["format"] = fmt
        else:
            hint = f"(format: {fmt})"
            desc = out.get("description")
            out["description"] = f"{desc}\n{hint}" if isinstance(desc, str) and desc else hint
    if out.get("type") == "ARRAY" and "items" not in out:
        raise UnsupportedSchema(f"tool {tool!r}: array at {path} has no item schema Gemini can express")
    if "type" not in out and "anyOf" not in out:
        what = "only null" if nullable else "any value"
        raise UnsupportedSchema(f"tool {tool!r}: schema at {path} admits {what}; Gemini needs a type")
    if nullable or out.get("nullable") is True:
        out["nullable"] = True
    return out


def _json_type(value: Any, tool: str, path: str) -> str:
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "INTEGER"
    if isinstance(value, float):
        return "NUMBER"
    if isinstance(value, str):
        return "STRING"
    raise UnsupportedSchema(f"tool {tool!r}: enum value {value!r} at {path} cannot be declared to Gemini")


def _only_null(schema: dict[str, Any]) -> bool:
    t = schema.get("type")
    return (
        t in ("null", "NULL")
        or ("const" in schema and schema["const"] is None)
        or schema.get("enum") == [None]
    )


# ---- partialArgs ----------------------------------------------------------------------------------

_MISSING = object()
_SEGMENT = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]")


def _brackets(value: Any) -> int:
    """The bytes a new member's value has before any content: a container's brackets, a string's
    quotes (its fragments count as they come; a scalar counts in ``apply``)."""
    return 2 if isinstance(value, dict | list | _Str) else 0


class _Str:
    __slots__ = ("done", "fragments")

    def __init__(self) -> None:
        self.fragments: list[str] = []
        self.done = False


def parse_json_path(path: Any) -> list[str | int] | None:
    """``$.a.b[0]['c d']`` → ``["a", "b", 0, "c d"]``; None if it is not such a path."""
    if not isinstance(path, str) or not path.startswith("$"):
        return None
    # A stream repeats the same few paths once per fragment: each is parsed once. A long one is not
    # kept: the cache outlives the stream, and 1024 paths of a hostile stream's size would stay held.
    parsed = _parse_path_cached(path) if len(path) <= _CACHED_PATH else _parse_path(path)
    return None if parsed is None else list(parsed)


_CACHED_PATH = 256  # characters


def _parse_path(path: str) -> tuple[str | int, ...] | None:
    out: list[str | int] = []
    pos = 1
    while pos < len(path):
        m = _SEGMENT.match(path, pos)
        if m is None:
            return None
        name, idx, q1, q2 = m.groups()
        if idx is not None:
            out.append(int(idx))
        else:
            out.append(next(g for g in (name, q1, q2) if g is not None))
        pos = m.end()
    return tuple(out)


_parse_path_cached = functools.lru_cache(maxsize=1024)(_parse_path)


class PartialArgs:
    """Assembles one call's arguments from partialArgs entries (see module doc)."""

    def __init__(self) -> None:
        self.root: dict[str, Any] = {}
        self.error: str | None = None
        self._added = 2  # structure bytes not yet reported: the root's braces, reported with the first entry

    def _fail(self, why: str) -> None:
        self.error = self.error or why

    def apply_all(self, entries: Any) -> int:
        """Apply a part's ``partialArgs``; the bytes they added (see ``apply``). Anything but a list
        of entries makes the arguments unusable, like an entry that is not an object."""
        if not isinstance(entries, list):
            self._fail("partialArgs is not a list")
            return 0
        return sum(self.apply(entry) for entry in entries)

    def apply(self, entry: Any) -> int:
        """Apply one entry; returns the bytes it added to what is buffered (for the byte caps, see
        the module doc): its value's, counted even when the entry is rejected, and the structure it
        created."""
        if not isinstance(entry, dict):
            self._fail("a partialArgs entry is not an object")
            return 0
        where = entry.get("jsonPath")
        path = parse_json_path(where)
        if not path:
            self._fail(f"unusable jsonPath {where!r}")
            return 0
        if isinstance(entry.get("stringValue"), str):
            value: Any = entry["stringValue"]
            size = utf8_len(value)  # never raises on half of a split surrogate pair
        elif "numberValue" in entry or "boolValue" in entry:
            value = entry["numberValue"] if "numberValue" in entry else entry["boolValue"]
            # compact: a value of another type (odd provider data) is kept as sent, and counted so
            size = utf8_len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
        elif "nullValue" in entry:
            value, size = None, 4
        else:
            self._fail(f"partialArgs entry at {where} carries no value")
            return 0
        container: Any = self.root
        for seg, nxt in zip(path, [*path[1:], None], strict=True):
            current = self._get(container, seg)
            if nxt is None:
                self._set(container, seg, current, value, entry)
                break
            if current is _MISSING:
                current = [] if isinstance(nxt, int) else {}
                if not self._put(container, seg, current):
                    break
            elif not isinstance(current, list if isinstance(nxt, int) else dict):
                self._fail(f"jsonPath {where} goes through a value of another shape")
                break
            container = current
        added, self._added = self._added, 0
        return size + added

    @staticmethod
    def _get(container: Any, seg: str | int) -> Any:
        if isinstance(seg, int):
            return container[seg] if isinstance(container, list) and seg < len(container) else _MISSING
        return container.get(seg, _MISSING) if isinstance(container, dict) else _MISSING

    def _put(self, container: Any, seg: str | int, value: Any) -> bool:
        """Add a member that is not there yet (callers check), counting its structure bytes: the comma
        before it, a key's quotes and colon, a new container's brackets or a new string's quotes."""
        if isinstance(seg, int) and isinstance(container, list) and seg == len(container):
            self._added += (1 if container else 0) + _brackets(value)
            container.append(value)
            return True
        if isinstance(seg, str) and isinstance(container, dict):
            self._added += (4 if container else 3) + utf8_len(seg) + _brackets(value)
            container[seg] = value
            return True
        self._fail("a jsonPath skips an array index or does not match the value's shape")
        return False

    def _set(self, container: Any, seg: str | int, current: Any, value: Any, entry: dict[str, Any]) -> None:
        is_str = isinstance(entry.get("stringValue"), str)
        if is_str and isinstance(current, _Str) and not current.done:
            target = current
        elif current is not _MISSING:
            self._fail(f"jsonPath {entry.get('jsonPath')} was set twice")
            return
        elif not is_str:
            self._put(container, seg, value)
            return
        else:
            target = _Str()
            if not self._put(container, seg, target):
                return
        target.fragments.append(value)
        target.done = entry.get("willContinue") is not True

    def finalise(self) -> tuple[dict[str, Any], str | None]:
        """(the arguments object, why it is unusable or None)."""

        def build(node: Any) -> Any:
            if isinstance(node, _Str):
                if not node.done:
                    self._fail("a streamed string value was cut off")
                # join_fragments, not "".join: a character outside the BMP whose escaped surrogate
                # halves came in two pieces is put back together, as for every other adapter's
                # argument fragments (a plain join left two lone surrogates: INVALID_ARGUMENTS).
                return join_fragments(node.fragments)
            if isinstance(node, dict):
                return {k: build(v) for k, v in node.items()}
            if isinstance(node, list):
                return [build(v) for v in node]
            return node

        args: dict[str, Any] = build(self.root)
        return args, self.error


# ---- google.rpc error details ---------------------------------------------------------------------

_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def google_error_details(err: dict[str, Any]) -> tuple[float | None, str | None, bool]:
    """(RetryInfo delay in seconds, a detail code, whether waiting cannot fix the quota)."""
    delay: float | None = None
    code: str | None = None
    permanent = False
    details = err.get("details")
    for d in details if isinstance(details, list) else []:
        if not isinstance(d, dict):
            continue
        kind = str(d.get("@type", ""))
        if kind.endswith("RetryInfo"):
            m = _DELAY.match(str(d.get("retryDelay", "")))
            delay = float(m.group(1)) if m else delay
        elif kind.endswith("QuotaFailure"):
            violations = d.get("violations")
            for v in violations if isinstance(violations, list) else ():  # else none to read
                if not isinstance(v, dict):
                    continue
                quota = str(v.get("quotaId") or v.get("quotaMetric") or "")
                code = code or quota or None
                if "PerDay" in quota or str(v.get("quotaValue", "")) == "0":
                    permanent = True
        elif kind.endswith("ErrorInfo"):
            reason = str(d.get("reason") or "")
            code = reason or code
            if "BILLING" in reason.upper():
                permanent = True
            # The quota is named here too (RATE_LIMIT_EXCEEDED with metadata quota_limit, e.g.
            # "...RequestsPerDayPerUserPerTier", and quota_limit_value, "0" where the tier has none):
            # the same reading as a QuotaFailure's
            meta = d.get("metadata")
            if isinstance(meta, dict) and (
                "PerDay" in str(meta.get("quota_limit", "")) or str(meta.get("quota_limit_value", "")) == "0"
            ):
                permanent = True
    message = err.get("message")
    if isinstance(message, str) and _NO_CREDITS in message[:2000].lower():
        # 429 RESOURCE_EXHAUSTED with no details: "Your prepayment credits are depleted. Please go to AI
        # Studio ... to manage your project and billing." No wait refills them (D26: a spend failure).
        permanent = True
    return delay, code, permanent


_NO_CREDITS = "prepayment credits are depleted"


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> None:
    """Merge settings["extra"] into a request body, nested objects key by key (generationConfig, toolConfig)."""
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merged = dict(base[key])
            deep_merge(merged, value)
            base[key] = merged
        else:
            base[key] = value


def token_sum(counts: dict[str, Any], *keys: str) -> int | None:
    """The sum of the token counts under ``keys``; None when none is there. Gemini's JSON leaves a
    zero count out, so a missing (or null) key adds nothing; a value that is no count (a negative
    number such as a compatible server's -1 for "unknown", a bool, a string) makes the sum unknown:
    taken as a count it would lower the operation's spend and let a token budget pass (D27: unknown
    is None, and a set budget then stops the run)."""
    total: int | None = None
    for key in keys:
        value = counts.get(key)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return None
        total = (total or 0) + value
    return total


def gemini_usage(input_tokens: int | None, output_tokens: int | None, total: int | None) -> Usage:
    """Usage from a Gemini response's input (prompt + tool-use prompt), output (candidates + thoughts)
    and total counts. The total holds every token of the request, so whatever it holds beyond the input
    was generated (D27: output counts every generated token): it is the output when the output counts
    are missing (the JSON leaves zeros out: 0 where total == input; js-genai test/system/recordings, a
    Vertex stream: promptTokenCount 83, totalTokenCount 83) or say less (Google's Interactions
    quickstart: total_tokens 197, total_input_tokens 8, total_output_tokens 12, a thought step and no
    thought count). As total - input it never counts the tool-use prompt or the thoughts twice."""
    if (
        total is not None
        and input_tokens is not None
        and total >= input_tokens
        and (output_tokens is None or total > input_tokens + output_tokens)
    ):
        output_tokens = total - input_tokens
    return Usage(input_tokens, output_tokens)
