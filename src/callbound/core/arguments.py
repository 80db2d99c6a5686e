"""Strict parsing of tool-call arguments (D5).

Arguments are parsed exactly as sent: duplicate keys, NaN, Infinity and integers outside ±(2^53−1)
are rejected, never repaired. Object-style arguments (Anthropic, Gemini) arrive inside a body that
was read with :func:`loads_body`, which marks (rather than drops) duplicate keys so they can be
rejected here too.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .canonical import MAX_SAFE_INTEGER


class DuplicateKeyDict(dict[str, Any]):
    """A JSON object in which some key appeared more than once (the last value wins, as in json.loads)."""

    duplicate_keys: tuple[str, ...] = ()


class ArgumentsError(ValueError):
    """Why a raw argument payload is not acceptable."""


def _pairs_marking_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    dups: list[str] = []
    for key, value in pairs:
        if key in out:
            dups.append(key)
        out[key] = value
    if dups:
        marked = DuplicateKeyDict(out)
        marked.duplicate_keys = tuple(dups)
        return marked
    return out


_BODY_DECODER = json.JSONDecoder(object_pairs_hook=_pairs_marking_duplicates)


def _no_bom(text: str) -> str:
    """``text``, or the error ``json.loads`` raises for a leading BOM (a reused decoder does not check)."""
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return text


def loads_body(data: bytes | str) -> Any:
    """Parse a provider body leniently but faithfully: duplicates are marked, not silently merged.
    One decoder is reused: streams call this once per event."""
    if isinstance(data, bytes | bytearray):
        data = data.decode(json.detect_encoding(data), "surrogatepass")
    return _BODY_DECODER.decode(_no_bom(data))


def _reject_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ArgumentsError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise ArgumentsError(f"{name} is not a JSON number")


def _checked_int(text: str) -> int:
    # Fix: a literal with more than ~4300 digits made int() raise a plain ValueError (Python's
    # int_max_str_digits guard), which escaped parse_arguments. Anything over 16 digits is outside
    # ±(2^53-1) anyway, so reject it before converting.
    if len(text.lstrip("-")) > 16:
        raise ArgumentsError(f"integer {text[:20]}... is outside ±(2^53-1)")
    value = int(text)
    if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        raise ArgumentsError(f"integer {text} is outside ±(2^53-1)")
    return value


def _checked_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ArgumentsError(f"number {text} overflows a double")
    if abs(value) > MAX_SAFE_INTEGER:
        # D5: beyond ±(2^53-1) a double holds integers only, and not every one of them
        # (9007199254740993.0 reads as ...992): the number would run as another number.
        raise ArgumentsError(f"number {text[:30]} is outside ±(2^53-1), where doubles lose integers")
    return value


def _check_value(value: Any, path: str) -> None:
    if isinstance(value, DuplicateKeyDict):
        raise ArgumentsError(f"duplicate key {value.duplicate_keys[0]!r} at {path or '$'}")
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int):
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise ArgumentsError(f"integer {value} at {path or '$'} is outside ±(2^53-1)")
        return
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ArgumentsError(f"{value} at {path or '$'} is not a JSON number")
        if abs(value) > MAX_SAFE_INTEGER:
            raise ArgumentsError(f"number {value!r} at {path or '$'} is outside ±(2^53-1)")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            # Fix: object-style arguments with a non-string key ({1: ...}) were accepted; JSON keys are
            # always strings.
            if not isinstance(key, str):
                raise ArgumentsError(f"object key {key!r} at {path or '$'} is not a string")
            _check_value(item, f"{path}.{key}" if path else key)
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_value(item, f"{path}[{i}]")
        return
    raise ArgumentsError(f"{type(value).__name__} at {path or '$'} is not a JSON value")


# One strict decoder, reused: ``json.loads`` with hooks builds a new decoder and scanner per call,
# which cost more than parsing a small argument object (this runs for every proposed call).
_ARGS_DECODER = json.JSONDecoder(
    object_pairs_hook=_reject_pairs,
    parse_constant=_reject_constant,
    parse_int=_checked_int,
    parse_float=_checked_float,
)


_JSON_WHITESPACE = " \t\n\r"  # RFC 8259 section 2


def parse_arguments(raw: str | dict[str, Any] | None) -> tuple[dict[str, Any] | None, str | None]:
    """Return ``(arguments, None)`` or ``(None, why)``. Never raises for bad input.

    An empty string means "no arguments" only when the provider sent nothing at all; it is read as an
    empty object, which then has to pass the tool's schema like any other value.
    """
    if raw is None:
        return None, "no arguments were sent"
    if isinstance(raw, dict):
        try:
            _check_value(raw, "")
        except ArgumentsError as exc:
            return None, str(exc)
        except RecursionError:
            # an object nested deeper than the stack allows: the string path says "invalid JSON" for
            # the same depth; this one raised out of planning (D4)
            return None, "arguments are nested too deeply"
        return dict(raw), None
    if not isinstance(raw, str):
        return None, f"arguments must be a JSON object, got {type(raw).__name__}"
    if raw.strip(_JSON_WHITESPACE) == "":
        # JSON's own whitespace only: str.strip() also took a no-break space, U+2028 or a control
        # character such as \x1c for "nothing sent", turning text no JSON parser reads into {} (D5)
        return {}, None
    try:
        value = _ARGS_DECODER.decode(_no_bom(raw))
    except ArgumentsError as exc:
        return None, str(exc)
    except (json.JSONDecodeError, RecursionError) as exc:
        return None, f"invalid JSON: {exc}"
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None
