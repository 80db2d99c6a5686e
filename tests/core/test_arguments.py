"""Strict argument parsing (D5): reject, never repair."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbound.core.arguments import DuplicateKeyDict, loads_body, parse_arguments
from callbound.core.canonical import MAX_SAFE_INTEGER
from tests.stable_ids import stable_id


def assert_rejected(raw: Any, *fragments: str) -> str:
    arguments, why = parse_arguments(raw)
    assert arguments is None, f"{raw!r} was accepted as {arguments!r}"
    assert isinstance(why, str) and why
    for fragment in fragments:
        assert fragment in why, why
    return why


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"order_id": "A1"}', {"order_id": "A1"}),
        ('{"a": {"b": [1, 2.5, null, true, "x"]}}', {"a": {"b": [1, 2.5, None, True, "x"]}}),
        ("{}", {}),
        ('  {"a": 1}  \n', {"a": 1}),
        ('{"n": 9007199254740991, "m": -9007199254740991}', {"n": MAX_SAFE_INTEGER, "m": -MAX_SAFE_INTEGER}),
        ('{"x": 1e15, "y": -2.5E-10}', {"x": 1e15, "y": -2.5e-10}),
        ('{"s": "\\u20ac"}', {"s": "€"}),
    ],
)
def test_valid_objects_parse_exactly(raw: str, expected: dict[str, Any]) -> None:
    assert parse_arguments(raw) == (expected, None)


@pytest.mark.parametrize("raw", ["", "   ", "\n\t"])
def test_empty_string_means_empty_object(raw: str) -> None:
    assert parse_arguments(raw) == ({}, None)


def test_none_is_not_an_empty_object() -> None:
    assert_rejected(None)


@pytest.mark.parametrize(
    "raw",
    ['{"a": 1', '{"a": }', "{'a': 1}", '{"a": 1,}', "{a: 1}", '{"a": 1} trailing', "nul", '{"a": 01}'],
)
def test_invalid_json_is_rejected(raw: str) -> None:
    assert_rejected(raw, "invalid JSON")


@pytest.mark.parametrize("raw", ["[]", "[1]", '"text"', "1", "null", "true", "1.5"])
def test_non_object_is_rejected(raw: str) -> None:
    assert_rejected(raw, "must be a JSON object")


@pytest.mark.parametrize("raw", [b'{"a": 1}', 42, ["a"], ("a",)])
def test_raw_of_wrong_python_type_is_rejected(raw: Any) -> None:
    assert_rejected(raw)


@pytest.mark.parametrize(
    "raw",
    [
        '{"a": 1, "a": 1}',
        '{"a": 1, "a": 2}',
        '{"outer": {"k": 1, "k": 2}}',
        '{"list": [{"k": 1}, {"k": 2, "k": 3}]}',
        '{"amount": 40, "order": "A", "amount": 4000}',
    ],
)
def test_duplicate_keys_are_rejected_at_any_depth(raw: str) -> None:
    assert_rejected(raw, "duplicate key")


@pytest.mark.parametrize(
    "raw",
    ['{"a": NaN}', '{"a": Infinity}', '{"a": -Infinity}', '{"a": [1, NaN]}', '{"a": {"b": Infinity}}'],
)
def test_nan_and_infinity_are_rejected(raw: str) -> None:
    assert_rejected(raw, "not a JSON number")


@pytest.mark.parametrize(
    "raw",
    [
        '{"n": 9007199254740992}',
        '{"n": -9007199254740992}',
        '{"n": 123456789012345678901234567890}',
        '{"n": [9007199254740993]}',
        '{"deep": {"n": 18446744073709551616}}',
    ],
)
def test_integers_beyond_safe_range_are_rejected(raw: str) -> None:
    assert_rejected(raw, "2^53")


def test_integer_literal_with_thousands_of_digits_is_rejected_not_raised() -> None:
    # Python refuses int() on > 4300 digits with a ValueError; parse_arguments must never raise.
    raw = '{"n": ' + "9" * 5000 + "}"
    assert_rejected(raw)
    assert_rejected('{"n": -' + "1" * 10000 + "}")


@pytest.mark.parametrize("raw", ['{"x": 1e400}', '{"x": -1e400}', '{"x": 1E+99999}', '{"x": [2.5e309]}'])
def test_huge_exponents_are_rejected(raw: str) -> None:
    assert_rejected(raw, "overflows")


def test_deep_nesting_is_rejected_not_raised() -> None:
    raw = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert_rejected(raw)


# --- object-style arguments (Anthropic, Gemini): dicts are checked the same way -----------------


def test_plain_dict_is_accepted_and_copied() -> None:
    raw = {"a": 1, "b": [1.5, {"c": None}]}
    arguments, why = parse_arguments(raw)
    assert why is None
    assert arguments == raw
    assert arguments is not raw


@pytest.mark.parametrize(
    "raw",
    [
        {"a": float("nan")},
        {"a": float("inf")},
        {"a": [1, -float("inf")]},
        {"a": 2**53},
        {"a": {"b": -(2**53)}},
        {"a": b"bytes"},
        {"a": {1, 2}},
        {"a": object()},
        {1: "non-string key"},
        {"a": {None: 1}},
    ],
    ids=stable_id,
)
def test_bad_dicts_are_rejected(raw: dict[Any, Any]) -> None:
    assert_rejected(raw)


def test_loads_body_marks_duplicate_keys_instead_of_dropping_them() -> None:
    body = loads_body('{"args": {"amount": 40, "amount": 4000}, "ok": {"x": 1}}')
    assert isinstance(body["args"], DuplicateKeyDict)
    assert body["args"].duplicate_keys == ("amount",)
    assert body["args"]["amount"] == 4000
    assert type(body["ok"]) is dict


def test_marked_duplicate_dicts_from_loads_body_are_rejected() -> None:
    body = loads_body('{"args": {"amount": 40, "amount": 4000}}')
    assert_rejected(body["args"], "duplicate key", "amount")


def test_nested_marked_duplicate_dicts_are_rejected() -> None:
    body = loads_body('{"args": {"refund": {"amount": 40, "amount": 4000}}}')
    assert not isinstance(body["args"], DuplicateKeyDict)
    assert_rejected(body["args"], "duplicate key")
    body = loads_body('{"args": {"items": [{"id": 1}, {"id": 2, "id": 3}]}}')
    assert_rejected(body["args"], "duplicate key")


# --- properties ----------------------------------------------------------------------------------

safe_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
    # D5: beyond ±(2^53-1) a double is an integer that may not be the one sent; such numbers are refused
    | st.floats(
        allow_nan=False, allow_infinity=False, min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER
    )
    | st.text(max_size=10)
)
safe_values = st.recursive(
    safe_scalars,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4),
    max_leaves=12,
)
safe_objects = st.dictionaries(st.text(max_size=5), safe_values, max_size=5)


@given(safe_objects)
def test_any_valid_object_round_trips_as_text_and_as_dict(value: dict[str, Any]) -> None:
    assert parse_arguments(json.dumps(value)) == (value, None)
    assert parse_arguments(value) == (value, None)


@given(st.text(max_size=40))
def test_never_raises_on_arbitrary_text(raw: str) -> None:
    arguments, why = parse_arguments(raw)
    assert (arguments is None) != (why is None)
    if arguments is not None:
        assert isinstance(arguments, dict)


@given(safe_objects.filter(bool), st.data())
def test_repeating_any_top_level_key_is_rejected(value: dict[str, Any], data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(sorted(value)))
    body = json.dumps(value)
    raw = body[:-1] + (", " if len(body) > 2 else "") + json.dumps(key) + ": 0}"
    assert_rejected(raw, "duplicate key")


def test_byte_order_mark_is_rejected_as_json_loads_does() -> None:
    # parse_arguments reuses one decoder instead of json.loads, which rejects a leading BOM itself.
    assert_rejected('\ufeff{"order_id": "A1"}', "invalid JSON", "BOM")


def test_reused_decoder_keeps_no_state_between_calls() -> None:
    # A rejection midway (duplicate key) must not leak into the next parse on the shared decoder.
    assert_rejected('{"a": 1, "a": 2}', "duplicate key")
    assert parse_arguments('{"a": 1, "b": {"a": 2}}') == ({"a": 1, "b": {"a": 2}}, None)
    assert_rejected('{"n": 9007199254740992}', "outside")
    assert parse_arguments('{"n": 9007199254740991}') == ({"n": MAX_SAFE_INTEGER}, None)


@pytest.mark.parametrize("text", ["9007199254740993.0", "1e16", "-1e16", "1.5e300", "9007199254740992.0"])
def test_d5_numbers_beyond_the_safe_range_are_refused_as_floats_too(text: str) -> None:
    """9007199254740993.0 reads as the double ...992: it would run as another number (D5, D6)."""
    value, why = parse_arguments('{"n": ' + text + "}")
    assert value is None and why is not None and "2^53" in why
    value, why = parse_arguments({"n": float(text)})
    assert value is None and why is not None and "2^53" in why


def test_d5_the_largest_safe_float_is_accepted() -> None:
    assert parse_arguments('{"n": 9007199254740991.0}') == ({"n": 9007199254740991.0}, None)
    assert parse_arguments('{"n": 1.5e-300}') == ({"n": 1.5e-300}, None)
