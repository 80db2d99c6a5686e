"""The JSON text the durable stores write is frozen with the v1 schema (D19): ``encode`` must produce
exactly what ``json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)`` does,
and ASCII escapes for text UTF-8 cannot carry."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from callbound.core.errors import StoreError
from callbound.stores.base import Commit, JournalRow
from callbound.stores.schema import dumps, encode, encode_commit

from .conftest import make_approval, make_entry, make_events, make_head

VALUES: list[Any] = [
    {},
    [],
    "",
    "plain",
    0,
    -1,
    2**80,
    1.5,
    -0.0,
    1e300,
    5e-324,
    0.1 + 0.2,
    True,
    False,
    None,
    {"é": "東京 ☕", "nul": "\x00", "ctl": "\x01\x1f\x7f", "sep": "\u2028\u2029", "q": '"\\/'},
    {"nested": [{"a": [1, [2, [3, {"b": None}]]]}], "empty": {"l": [], "d": {}}},
    {"emoji": "\U0001f600", "keys": {"1": 1, "": 0}},
    [True, 1, 1.0, "1"],
    ("tuple", 1),
]


def _reference(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@pytest.mark.parametrize("value", VALUES, ids=[str(i) for i in range(len(VALUES))])
def test_encode_is_json_dumps_compact(value: Any) -> None:
    assert encode(value) == _reference(value)
    assert dumps(value, "x") == _reference(value)


def test_lone_surrogates_are_written_with_ascii_escapes() -> None:
    value = {"t": "lone \ud800 surrogate, 東京", "k": ["\udfff"]}
    assert encode(value) == json.dumps(value, separators=(",", ":"), allow_nan=False)
    assert json.loads(encode(value)) == value
    encode(value).encode("utf-8")  # storable


@pytest.mark.parametrize("bad", [float("nan"), float("-inf"), object(), {(1, 2): 3}])
def test_unstorable_values_are_named(bad: Any) -> None:
    with pytest.raises(StoreError, match=r"cannot store the thing: it is not plain JSON data"):
        dumps({"a": [bad]}, "the thing")


def test_a_cycle_is_unstorable_not_a_crash() -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    with pytest.raises(StoreError, match="not plain JSON"):
        dumps(cycle, "the thing")


def test_encode_commit_names_the_first_unstorable_part() -> None:
    events = make_events("op1", 2)
    good = Commit(
        "op1",
        make_head("op1"),
        [JournalRow("turn", {"n": 1}), JournalRow("items", {"items": []})],
        [make_entry("k1", "op1")],
        [make_approval("ap1", "op1")],
        events,
    )
    head, journal, audit, ledger, approvals = encode_commit(good)
    assert head == _reference(good.head)
    assert journal == [_reference(r.data) for r in good.journal]
    assert audit == [_reference(e.data) for e in events]
    assert ledger == [_reference(e.to_dict()) for e in good.ledger]
    assert approvals == [_reference(a.to_dict()) for a in good.approvals]

    bad_row = Commit("op1", make_head("op1"), [JournalRow("turn", {}), JournalRow("items", {"x": {1j}})])
    with pytest.raises(StoreError, match=r"cannot store a 'items' journal row of op1"):
        encode_commit(bad_row)
    bad_head = Commit("op1", {**make_head("op1"), "x": float("nan")}, [JournalRow("items", {"x": {1j}})])
    with pytest.raises(StoreError, match=r"cannot store the head of operation op1"):
        encode_commit(bad_head)
    bad_audit = Commit("op1", make_head("op1"), audit=[events[0], replace(events[1], data={"x": object()})])
    with pytest.raises(StoreError, match=r"cannot store audit event 1 of op1"):
        encode_commit(bad_audit)
