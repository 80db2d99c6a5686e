"""Arguments are read as sent (D5): only JSON's own whitespace makes "nothing sent"; review round 20 (a)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbound.core.arguments import parse_arguments

JSON_WHITESPACE = " \t\n\r"
# whitespace to str.strip() that JSON (RFC 8259 section 2) does not allow between tokens
NOT_JSON_WHITESPACE = [c for c in map(chr, range(0x3001)) if c.isspace() and c not in JSON_WHITESPACE]


def test_the_alphabet_is_what_str_strip_takes_beyond_json() -> None:
    assert {"\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u2028", "\u3000"} <= set(NOT_JSON_WHITESPACE)


@pytest.mark.parametrize("char", NOT_JSON_WHITESPACE)
def test_other_whitespace_alone_is_invalid_json_not_an_empty_object(char: str) -> None:
    # str.strip() took these for "nothing sent" and the call ran with {} (an object no JSON parser
    # reads from this text)
    arguments, why = parse_arguments(char)
    assert arguments is None
    assert why is not None and "invalid JSON" in why
    assert parse_arguments(f" {char}\n")[0] is None


@given(st.text(alphabet=JSON_WHITESPACE, max_size=20))
def test_json_whitespace_alone_is_an_empty_object(raw: str) -> None:
    assert parse_arguments(raw) == ({}, None)


@given(
    st.text(alphabet=JSON_WHITESPACE, max_size=5),
    st.sampled_from(NOT_JSON_WHITESPACE),
    st.text(alphabet=JSON_WHITESPACE, max_size=5),
)
def test_other_whitespace_around_an_object_is_invalid_json(before: str, char: str, after: str) -> None:
    assert parse_arguments(before + "{}" + after) == ({}, None)
    assert parse_arguments(before + char + "{}" + after)[0] is None
    assert parse_arguments(before + "{}" + char + after)[0] is None
