"""RFC 8785 canonical JSON (D6): the RFC's own examples, the error cases, and a differential test
against the reference ``rfc8785`` package."""

from __future__ import annotations

import hashlib
import json
import math
import struct
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from callbound.core.canonical import (
    MAX_SAFE_INTEGER,
    FlatRecord,
    canonical_bytes,
    canonical_json,
    canonical_sha256,
    canonical_sha256_str_keys,
    format_number,
    sha256_hex,
)
from callbound.core.errors import CallboundError, CanonicalizationError
from tests.stable_ids import stable_id


def from_bits(bits: int) -> float:
    value: float = struct.unpack(">d", bits.to_bytes(8, "big"))[0]
    return value


# RFC 8785 Appendix B: IEEE 754 bit patterns and their required serialisation.
APPENDIX_B = [
    (0x0000000000000000, "0"),
    (0x8000000000000000, "0"),  # minus zero
    (0x0000000000000001, "5e-324"),
    (0x8000000000000001, "-5e-324"),
    (0x7FEFFFFFFFFFFFFF, "1.7976931348623157e+308"),
    (0xFFEFFFFFFFFFFFFF, "-1.7976931348623157e+308"),
    (0x4340000000000000, "9007199254740992"),
    (0xC340000000000000, "-9007199254740992"),
    (0x4430000000000000, "295147905179352830000"),
    (0x44B52D02C7E14AF5, "9.999999999999997e+22"),
    (0x44B52D02C7E14AF6, "1e+23"),
    (0x44B52D02C7E14AF7, "1.0000000000000001e+23"),
    (0x444B1AE4D6E2EF4E, "999999999999999700000"),
    (0x444B1AE4D6E2EF4F, "999999999999999900000"),
    (0x444B1AE4D6E2EF50, "1e+21"),
    (0x3EB0C6F7A0B5ED8C, "9.999999999999997e-7"),
    (0x3EB0C6F7A0B5ED8D, "0.000001"),
    (0x41B3DE4355555553, "333333333.3333332"),
    (0x41B3DE4355555554, "333333333.33333325"),
    (0x41B3DE4355555555, "333333333.3333333"),
    (0x41B3DE4355555556, "333333333.3333334"),
    (0x41B3DE4355555557, "333333333.33333343"),
    (0xBECBF647612F3696, "-0.0000033333333333333333"),
    (0x43143FF3C1CB0959, "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "expected"), APPENDIX_B, ids=[e for _, e in APPENDIX_B])
def test_appendix_b_number_serialisation(bits: int, expected: str) -> None:
    value = from_bits(bits)
    assert format_number(value) == expected
    assert canonical_json(value) == expected


@pytest.mark.parametrize("bits", [0x7FFFFFFFFFFFFFFF, 0x7FF0000000000000, 0xFFF0000000000000])
def test_appendix_b_nan_and_infinity_are_errors(bits: int) -> None:
    with pytest.raises(CanonicalizationError):
        canonical_json(from_bits(bits))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("333333333.33333329", "333333333.3333333"),
        ("1E30", "1e+30"),
        ("4.50", "4.5"),
        ("2e-3", "0.002"),
        ("0.000000000000000000000000001", "1e-27"),
        ("-0", "0"),
        ("-0.0", "0"),
        ("100.0", "100"),
        ("1e21", "1e+21"),
        ("1e20", "100000000000000000000"),
        ("1e-6", "0.000001"),
        ("1e-7", "1e-7"),
        ("1.5e-7", "1.5e-7"),
        ("123456789012345680000", "123456789012345680000"),
    ],
)
def test_section_3_2_2_3_numbers(source: str, expected: str) -> None:
    # Parse as a double, the way a JSON reader does, then serialise.
    assert canonical_json(float(source)) == expected


def test_section_3_2_2_example_document() -> None:
    source = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical_json(json.loads(source)) == expected


def test_section_3_2_3_key_sorting_by_utf16_code_units() -> None:
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    expected = (
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control",'
        '"\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign",'
        '"\U0001f600":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'
    )
    assert canonical_json(value) == expected
    # Code point order would put U+FB33 before U+1F600; UTF-16 order puts the surrogate pair first.
    assert json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")) != expected


def test_insertion_order_does_not_matter() -> None:
    a = {"b": 1, "a": [1, {"y": None, "x": True}]}
    b = {"a": [1, {"x": True, "y": None}], "b": 1}
    assert canonical_json(a) == canonical_json(b) == '{"a":[1,{"x":true,"y":null}],"b":1}'


def test_control_characters_are_escaped_lowercase_and_others_kept() -> None:
    assert canonical_json("\x00\x1f\x7f\u2028é") == '"\\u0000\\u001f\x7f\u2028é"'
    assert canonical_json('\b\f\n\r\t"\\/') == '"\\b\\f\\n\\r\\t\\"\\\\/"'


def test_literals_and_containers() -> None:
    assert canonical_json(None) == "null"
    assert canonical_json(True) == "true"
    assert canonical_json(False) == "false"
    assert canonical_json([]) == "[]"
    assert canonical_json({}) == "{}"
    assert canonical_json((1, "a")) == '[1,"a"]'
    assert canonical_json([True, 1, 1.0]) == "[true,1,1]"


@pytest.mark.parametrize(
    "value",
    [
        math.nan,
        math.inf,
        -math.inf,
        MAX_SAFE_INTEGER + 1,
        -MAX_SAFE_INTEGER - 1,
        2**64,
        {"a": [1, {"b": math.nan}]},
        {"n": 2**53},
        "\ud800",
        "a\udfffb",
        {"\ud83d": 1},
        {1: "int key"},
        {None: "null key"},
        b"bytes",
        {1, 2},
        object(),
    ],
    ids=stable_id,
)
def test_values_without_an_exact_representation_raise(value: Any) -> None:
    with pytest.raises(CanonicalizationError):
        canonical_json(value)


def test_canonicalization_error_is_in_the_error_tree() -> None:
    assert issubclass(CanonicalizationError, CallboundError)
    assert issubclass(CanonicalizationError, ValueError)


def test_safe_integer_bounds_are_inclusive() -> None:
    assert MAX_SAFE_INTEGER == 2**53 - 1
    assert canonical_json(MAX_SAFE_INTEGER) == "9007199254740991"
    assert canonical_json(-MAX_SAFE_INTEGER) == "-9007199254740991"


def test_bytes_and_hashes() -> None:
    value = {"b": "€", "a": 1}
    assert canonical_bytes(value) == '{"a":1,"b":"€"}'.encode()
    assert canonical_sha256(value) == hashlib.sha256(canonical_bytes(value)).hexdigest()
    assert sha256_hex("abc") == sha256_hex(b"abc") == hashlib.sha256(b"abc").hexdigest()
    assert canonical_sha256({"a": 1, "b": "€"}) == canonical_sha256({"b": "€", "a": 1})
    assert canonical_sha256({"a": 1}) != canonical_sha256({"a": 2})


# --- differential test against the reference implementation -------------------------------------

any_char = st.characters(exclude_categories=())  # includes lone surrogates
text = st.text(max_size=8) | st.text(alphabet=any_char, max_size=4)
numbers = (
    st.integers(min_value=-(2**60), max_value=2**60)
    | st.sampled_from([MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1])
    | st.floats()  # NaN, infinities, subnormals and -0.0 included
)
scalars = st.none() | st.booleans() | numbers | text
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=16,
)


@settings(max_examples=600)
@given(json_values)
def test_matches_rfc8785_reference(value: Any) -> None:
    try:
        reference = rfc8785.dumps(value)
    except Exception:  # the reference rejects it (NaN, Infinity, big ints, lone surrogates)
        with pytest.raises(CanonicalizationError):
            canonical_json(value)
        return
    assert canonical_bytes(value) == reference


@settings(max_examples=600)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_finite_floats_match_reference_and_round_trip(value: float) -> None:
    text_value = canonical_json(value)
    assert text_value.encode() == rfc8785.dumps(value)
    assert float(text_value) == value  # never rounds (D6)


@given(st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER))
def test_safe_integers_print_exactly(value: int) -> None:
    assert canonical_json(value) == str(value)
    assert int(canonical_json(value)) == value


@given(
    st.builds(
        lambda sign, excess: sign * (MAX_SAFE_INTEGER + excess),
        st.sampled_from([1, -1]),
        st.integers(min_value=1, max_value=2**80),
    )
)
def test_unsafe_integers_raise(value: int) -> None:
    with pytest.raises(CanonicalizationError):
        canonical_json(value)


@given(json_values)
def test_output_is_parseable_and_idempotent(value: Any) -> None:
    try:
        text_value = canonical_json(value)
    except CanonicalizationError:
        return
    # A JSON reader sees numbers, not Python types: large integral doubles come back as big ints.
    reparsed = json.loads(
        text_value, parse_int=lambda s: int(s) if abs(int(s)) <= MAX_SAFE_INTEGER else float(s)
    )
    assert canonical_json(reparsed) == text_value


ascii_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=6)


@settings(max_examples=400)
@given(st.dictionaries(ascii_keys, json_values, max_size=6))
def test_flat_record_hash_equals_the_canonical_hash_of_the_object(record: dict[str, Any]) -> None:
    """The field-by-field writer used for bindings and audit links gives the same digest as the
    reference canonicaliser, and fails the same way where a value has no canonical form."""
    keys = sorted(record)
    flat = FlatRecord(keys)
    values = [record[k] for k in keys]
    try:
        reference = hashlib.sha256(rfc8785.dumps(record)).hexdigest()
    except Exception:
        with pytest.raises(CanonicalizationError):
            flat.sha256(values)
        return
    assert flat.sha256(values) == reference


str_key_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=16,
)


@settings(max_examples=600)
@given(str_key_values)
def test_str_keys_hash_equals_the_reference(value: Any) -> None:
    """The check-the-text path for callbound's own records gives the reference digest, or the same
    error, for every value with string keys (floats, big integers, astral keys, lone surrogates)."""
    try:
        reference = hashlib.sha256(rfc8785.dumps(value)).hexdigest()
    except Exception:
        with pytest.raises(CanonicalizationError):
            canonical_sha256_str_keys(value)
        return
    assert canonical_sha256_str_keys(value) == reference


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1.5},
        {"a": [1e-07]},
        {"a": 1e16},
        {"a": 2**53},
        {"a": -(2**60)},
        {"\U0001f600": 1, "\ufb01": 2},
        1.0,
        [10**20],
        {"s": "x:1.5"},
        {"é": 1e16, "ü": [0.5]},
        {"hex": "a9c53269d03b2871234567890123456", "n": [12345678901234567]},
        2.5,
        [-1.5e-300, 1e300],
        {"t": "12:00:00.5]", "u": "e+1"},  # look like number tokens inside strings: still exact
        {"big": -12345678901234567, "ok": 1234567890123456},
    ],
)
def test_str_keys_hash_takes_the_exact_path_where_the_c_encoder_differs(value: Any) -> None:
    def outcome(f: Any) -> str:
        try:
            return str(f(value))
        except CanonicalizationError:
            return "error"

    assert outcome(canonical_sha256_str_keys) == outcome(canonical_sha256)
    if value in ({"a": 2**53}, {"a": -(2**60)}, [10**20]):
        assert outcome(canonical_sha256) == "error"


def test_str_keys_hash_of_an_audit_like_record_needs_no_exact_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """ISO times and ids must not look like floats, or every audit link takes the slow path."""
    import callbound.core.canonical as canonical

    record = {
        "events": [
            {
                "kind": "transition",
                "at": "2026-11-30T01:34:06.123456+00:00",
                "data": {"seq": 3, "ids": ["a:1"]},
            }
        ]
    }
    expected = canonical_sha256(record)

    def no_exact_path(value: Any) -> str:
        raise AssertionError("took the exact path")

    monkeypatch.setattr(canonical, "canonical_sha256", no_exact_path)
    assert canonical_sha256_str_keys(record) == expected


@settings(max_examples=300)
@given(st.lists(json_values, min_size=3, max_size=3))
def test_flat_record_class_equals_the_canonical_object(values: list[Any]) -> None:
    rec = FlatRecord(("a", "b_1", "seq"))
    record = dict(zip(rec.keys, values, strict=True))
    try:
        reference = rfc8785.dumps(record)
    except Exception:
        with pytest.raises(CanonicalizationError):
            rec.encode(values)
        return
    assert rec.encode(values) == reference


@pytest.mark.parametrize("keys", [("b", "a"), ("a", "a"), ("é",), ('a"',)])
def test_flat_record_refuses_keys_it_cannot_write_verbatim(keys: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        FlatRecord(keys)
