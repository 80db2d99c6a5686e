"""``body_bytes``/``decode_body``: a body handed over as a dict is digested as the compact JSON
``json.dumps`` writes (key order kept), from one reused encoder."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbound.adapters.base import body_bytes, decode_body

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(alphabet=st.characters(exclude_categories=("Cs",))),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6))
def test_dict_body_bytes_are_json_dumps_compact(body: dict[str, Any]) -> None:
    expected = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    assert body_bytes(body) == expected
    data, digest = decode_body(body)
    assert data is body
    assert digest == hashlib.sha256(expected).hexdigest()


def test_non_string_keys_are_written_as_json_dumps_writes_them() -> None:
    body: dict[Any, Any] = {1: "a", None: "b", False: "c", 2.5: "d"}
    assert body_bytes(body) == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def test_a_value_that_is_not_json_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        body_bytes({"output": [object()]})
    # The failed call leaves nothing behind on the reused encoder.
    assert body_bytes({"output": [1]}) == b'{"output":[1]}'


def test_a_cycle_is_a_value_error_and_the_encoder_still_works() -> None:
    body: dict[str, Any] = {"id": "r"}
    body["self"] = body
    with pytest.raises(ValueError, match="Circular reference"):
        body_bytes(body)
    assert body_bytes({"id": "r"}) == b'{"id":"r"}'


def test_bytes_and_text_are_digested_as_given() -> None:
    assert body_bytes(b'{"a": 1}') == b'{"a": 1}'
    assert body_bytes('{"é": 1}') == '{"é": 1}'.encode()
