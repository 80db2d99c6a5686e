"""RFC 8785 (JSON Canonicalization Scheme) serialisation and SHA-256 helpers (D6).

Why our own encoder: the binding hashes must be byte-identical across processes, versions and
machines. ``json.dumps(sort_keys=True)`` sorts keys by code point (RFC 8785 wants UTF-16 code units)
and prints floats the Python way (``1e-07``, ``100.0``) rather than the ECMAScript way. String escaping
is the same as the stdlib's non-ASCII-preserving encoder, so that part is delegated to its C version.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

from .errors import CanonicalizationError

MAX_SAFE_INTEGER = 2**53 - 1


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _check_string(s: str) -> None:
    # A lone surrogate cannot be written as UTF-8; RFC 8785 requires valid Unicode.
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalizationError(f"string is not valid Unicode: {s!r}") from exc


def format_number(value: int | float) -> str:
    """Serialise a number as ECMAScript's Number.prototype.toString would (RFC 8785 section 3.2.2.3)."""
    if isinstance(value, bool):  # pragma: no cover - callers handle bools first
        raise CanonicalizationError("bool is not a number")
    if isinstance(value, int):
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            # int's own text: str() of an int subclass is its own (a ``class Status(int, Enum)`` member
            # wrote ``Status.OK``, not JSON, into the result sent to the model and hashed)
            return int.__repr__(value)
        raise CanonicalizationError(
            f"integer {value} is outside ±(2^53-1) and has no exact JSON number representation"
        )
    if math.isnan(value) or math.isinf(value):
        raise CanonicalizationError(f"{value!r} has no JSON representation")
    if value == 0:
        return "0"
    # repr() gives the shortest round-tripping digits; re-lay them out per ECMAScript.
    text = repr(abs(value))
    mantissa, _, exp_text = text.partition("e")
    exponent = int(exp_text) if exp_text else 0
    int_part, _, frac_part = mantissa.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    # n: position of the decimal point relative to the digit string (ECMAScript's n).
    n = (
        len(int_part.lstrip("0")) + exponent
        if int_part.strip("0")
        else exponent - (len(frac_part) - len(frac_part.lstrip("0")))
    )
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    sign = "-" if value < 0 else ""
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        exp = ("+" if e >= 0 else "-") + str(abs(e))
        out = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + exp
    return sign + out


def _encode(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        _check_string(value)
        out.append(encode_basestring(value))
    elif isinstance(value, int | float):
        out.append(format_number(value))
    elif isinstance(value, Mapping):
        items = []
        for key in value:
            if not isinstance(key, str):
                raise CanonicalizationError(f"object key {key!r} is not a string")
            _check_string(key)
            items.append(key)
        items.sort(key=_utf16_key)
        out.append("{")
        first = True
        for key in items:
            if not first:
                out.append(",")
            first = False
            out.append(encode_basestring(key))
            out.append(":")
            _encode(value[key], out)
        out.append("}")
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out)
        out.append("]")
    else:
        raise CanonicalizationError(f"{type(value).__name__} is not a JSON value")


_MIN_SAFE = -MAX_SAFE_INTEGER


def _not_json(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not a JSON value")


# The stdlib's C encoder, built once with the settings of
# ``json.dumps(ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False,
# check_circular=False)``. ``JSONEncoder.encode`` builds a new one on every call, which cost more than
# encoding the small objects hashed on every round trip. ``_fast_ok`` has already checked the value,
# so ``_not_json`` is never reached from here.
if c_make_encoder is not None:
    _c_encode = c_make_encoder(None, _not_json, encode_basestring, None, ":", ",", True, False, False)

    def _dumps(value: Any) -> str:
        return "".join(_c_encode(value, 0))

else:  # pragma: no cover - an interpreter without the _json accelerator
    _py_encoder = json.JSONEncoder(
        ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False, check_circular=False
    )

    def _dumps(value: Any) -> str:
        return _py_encoder.encode(value)


def _bmp_key(key: str) -> bool:
    """Code-point order equals UTF-16 order unless a key has characters beyond the BMP."""
    return key.isascii() or bool(max(key) < "\U00010000")


def _fast_ok(value: Any) -> bool:
    """True when the stdlib's C encoder produces exactly the RFC 8785 text: no floats (ECMAScript
    number formatting differs), integers within ±(2^53-1), string keys sortable by code point, and
    only plain JSON containers. Anything else takes the exact pure-Python path. Scalars are checked
    inline: this walk runs on every hash, so it avoids a call per leaf."""
    t = type(value)
    if t is str or t is bool or value is None:
        return True
    if t is int:
        return bool(_MIN_SAFE <= value <= MAX_SAFE_INTEGER)
    if isinstance(value, dict):
        for key, item in value.items():
            if type(key) is not str or not (key.isascii() or _bmp_key(key)):
                return False
            ti = type(item)
            if ti is str or item is None or ti is bool:
                continue
            if ti is int:
                if not _MIN_SAFE <= item <= MAX_SAFE_INTEGER:
                    return False
                continue
            if not _fast_ok(item):
                return False
        return True
    if t is list or t is tuple:
        for item in value:
            ti = type(item)
            if ti is str or item is None or ti is bool:
                continue
            if not _fast_ok(item):
                return False
        return True
    return False


def _to_bytes(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate somewhere in a string
        raise CanonicalizationError(
            f"string is not valid Unicode: {exc.object[exc.start : exc.end]!r}"
        ) from exc


def _too_deep() -> CanonicalizationError:
    return CanonicalizationError(
        "value is nested too deeply for the stack (or contains itself) to be written as JSON"
    )


def canonical_json(value: Any) -> str:
    """Return the RFC 8785 text of ``value``; raise ``CanonicalizationError`` where it has none.

    A value nested deeper than the stack allows, or one that contains itself, is such a value: it
    raised RecursionError, which callers that handle CanonicalizationError let escape (D4, D6)."""
    try:
        if _fast_ok(value):
            text: str = _dumps(value)
            _to_bytes(text)
            return text
        out: list[str] = []
        _encode(value, out)
    except RecursionError:
        raise _too_deep() from None
    return "".join(out)


def canonical_bytes(value: Any) -> bytes:
    """``canonical_json(value)`` as UTF-8."""
    try:
        if _fast_ok(value):
            return _to_bytes(_dumps(value))
        out: list[str] = []
        _encode(value, out)
    except RecursionError:
        raise _too_deep() from None
    return "".join(out).encode("utf-8")


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def canonical_sha256(value: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


# In the C encoder's output every float is ``repr``: it has a fraction (``1.5``, ``1.0``) or an exponent
# with a sign (``1e-07``, ``1.5e+16``). A fraction without an exponent ends its number token, so a
# ``.digits`` run ends right before ``,``, ``]``, ``}`` or the end of the text. Both searches start with a
# literal character, which the regex engine finds at C speed; ISO times (``08:30:19.747705+00:00``)
# match neither. A match inside a string is a false alarm that only costs the exact path.
_FLOAT_FRACTION = re.compile(r"\.[0-9]+(?:[,\]}]|$)")
_FLOAT_EXPONENT = re.compile(r"e[+-][0-9]")
# Every integer of 16 or more digits (possibly beyond ±(2^53-1)) is a number token: right after ``:``,
# ``,`` or ``[`` (or at the start), made of digits and a sign, right before ``,``, ``]``, ``}`` (or at the
# end). With every digit turned into ``0`` it holds sixteen ``0`` that a C-speed substring search finds;
# each hint is then checked exactly (a hex digest can hold sixteen digits in a row).
_HINT = "0" * 16
_BYTE_HINT = _HINT.encode()
_ZERO_DIGITS = str.maketrans("123456789", "000000000")
_ZERO_DIGIT_BYTES = bytes.maketrans(b"123456789", b"000000000")
_BIG_INTEGER = re.compile(r"[:,\[]-?\d{16,}(?:[,\]}]|$)")
_TOKEN_CHARS = frozenset("0123456789-")


def _number_risk(text: str, data: bytes) -> bool:
    """True when ``text`` (C encoder output; ``data`` is its UTF-8) may hold a float or an integer of
    16+ digits."""
    if _FLOAT_FRACTION.search(text) or _FLOAT_EXPONENT.search(text):
        return True
    if len(data) == len(text):  # ASCII: byte offsets are character offsets
        return _hinted_number(text, data.translate(_ZERO_DIGIT_BYTES), _BYTE_HINT)
    return _hinted_number(text, text.translate(_ZERO_DIGITS), _HINT)


def _hinted_number(text: str, zeroed: Any, hint: Any) -> bool:
    at = zeroed.find(hint)
    while at != -1:
        start = at
        while start > 0 and text[start - 1] in _TOKEN_CHARS:
            start -= 1
        if start == 0 or _BIG_INTEGER.match(text, start - 1):
            return True
        at = zeroed.find(hint, at + 1)
    return False


# Code-point order equals UTF-16 order unless a text has characters beyond the BMP.
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def canonical_sha256_str_keys(value: Any) -> str:
    """``canonical_sha256`` for a value whose object keys are all ``str``: see
    ``canonical_json_sha256_str_keys``."""
    return canonical_json_sha256_str_keys(value)[1]


def canonical_json_sha256_str_keys(value: Any) -> tuple[str, str]:
    """JSON text of ``value`` that loads back equal to it (floats stay floats), and the SHA-256 (hex)
    of its canonical JSON, for a value whose object keys are all ``str`` — callbound's own records
    (audit entries), never data from a model or a tool. Instead of walking the value first, it lets
    the C encoder write it and checks the text: with string keys, that text is the RFC 8785 one unless
    it has a float, a big integer or a character beyond the BMP, and those send it to the exact path.
    (The walk is what catches non-string keys, which the C encoder would silently turn into strings;
    hence the precondition.) The text is returned so that a store can keep it instead of encoding
    the value a second time. It is the C encoder's even where the canonical text differs: RFC 8785
    writes the float 1e16 as ``10000000000000000``, which would load back as an integer outside
    ±(2^53-1), a value with no canonical form."""
    try:
        text = _dumps(value)
    except (
        TypeError,
        ValueError,
        RecursionError,
    ):  # not JSON, NaN/Infinity, too deep: the exact path says why
        canonical_json(value)  # raises CanonicalizationError for every value the encoder refuses
        raise  # pragma: no cover - the encoder's own error, should the exact path ever accept one
    data = _to_bytes(text)
    if _number_risk(text, data) or (len(data) != len(text) and _ASTRAL.search(text)):
        return text, hashlib.sha256(canonical_bytes(value)).hexdigest()
    return text, hashlib.sha256(data).hexdigest()


class FlatRecord:
    """The canonical JSON (RFC 8785) of a flat record with fixed keys (a binding, an audit link),
    written field by field: no dict to build, no keys to sort, no walk. Each key's ``{"key":`` /
    ``,"key":`` prefix is written once, at import. String, safe-integer and ``None`` values are
    written inline; anything else goes through ``canonical_json``, so the bytes are always the
    canonical ones."""

    __slots__ = ("_prefixes", "keys")

    def __init__(self, keys: Sequence[str]) -> None:
        keys = tuple(keys)
        plain = all(k.isascii() and encode_basestring(k) == f'"{k}"' for k in keys)
        if not plain or list(keys) != sorted(set(keys)):
            raise ValueError("FlatRecord keys must be distinct plain ASCII names in sorted order")
        self.keys = keys
        self._prefixes = tuple(("{" if i == 0 else ",") + f'"{k}":' for i, k in enumerate(keys))

    def encode(self, values: Sequence[Any]) -> bytes:
        """Canonical JSON of ``dict(zip(self.keys, values))``."""
        if len(values) != len(self._prefixes):
            raise ValueError(f"expected {len(self._prefixes)} values, got {len(values)}")
        if not values:
            return b"{}"
        parts = []
        for prefix, value in zip(self._prefixes, values, strict=True):
            t = type(value)
            if t is str:
                parts.append(prefix + encode_basestring(value))
            elif t is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                parts.append(f"{prefix}{value}")
            elif value is None:
                parts.append(prefix + "null")
            else:
                parts.append(prefix + canonical_json(value))
        parts.append("}")
        return _to_bytes("".join(parts))

    def sha256(self, values: Sequence[Any]) -> str:
        return hashlib.sha256(self.encode(values)).hexdigest()
