"""The per-operation audit hash chain (D20)."""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbound.core.audit import GENESIS, AuditEvent, ChainBreak, link_hash, next_event, verify_chain
from callbound.core.canonical import canonical_sha256
from callbound.core.errors import CanonicalizationError

KEY = b"audit-key-from-CALLBOUND_AUDIT_KEY"


def chain(n: int = 5, key: bytes | None = None, op: str = "op-1") -> list[AuditEvent]:
    events: list[AuditEvent] = []
    prev = None
    for i in range(n):
        prev = next_event(
            prev,
            op,
            ["created", "transition", "turn", "results", "transition"][i % 5],
            f"2025-01-01T00:00:{i:02d}+00:00",
            {"i": i, "state": "VALIDATING", "digest": "ab" * 32},
            key,
        )
        events.append(prev)
    return events


def test_chain_links_and_verifies() -> None:
    events = chain(5)
    assert [e.seq for e in events] == [0, 1, 2, 3, 4]
    assert events[0].prev_hash == GENESIS == "0" * 64
    for a, b in itertools.pairwise(events):
        assert b.prev_hash == a.hash
    assert len({e.hash for e in events}) == 5
    assert verify_chain(events) is None
    assert verify_chain([]) is None


def test_keyed_chain_verifies_only_with_its_key() -> None:
    events = chain(4, KEY)
    assert verify_chain(events, KEY) is None
    assert verify_chain(events) == ChainBreak(0, verify_chain(events).why)  # type: ignore[union-attr]
    assert verify_chain(events, b"another key") is not None


def test_chain_rebuilt_without_the_key_fails_keyed_verification() -> None:
    # Someone who can write to the database but not read the key rewrites event 2 and re-hashes
    # everything from there on with plain SHA-256.
    original = chain(5, KEY)
    forged = original[:2]
    prev = forged[-1]
    for ev in original[2:]:
        data = {**ev.data, "state": "COMPLETED"} if ev.seq == 2 else ev.data
        prev = next_event(prev, ev.operation_id, ev.kind, ev.at, data, None)
        forged.append(prev)
    assert verify_chain(forged) is not None  # the early links are HMACs, not plain hashes
    brk = verify_chain(forged, KEY)
    assert brk is not None and brk.seq == 2
    # Rebuilding the whole chain without the key fails at the very first event.
    rebuilt = chain(5, None)
    assert verify_chain(rebuilt) is None
    brk = verify_chain(rebuilt, KEY)
    assert brk is not None and brk.seq == 0


def test_hash_covers_digests_of_data_so_payloads_can_be_purged() -> None:
    ev = chain(1)[0]
    body_hash = link_hash(GENESIS, ev.operation_id, 0, ev.kind, ev.at, ev.data, None)
    assert body_hash == ev.hash
    assert canonical_sha256(ev.data) != ev.hash  # the link is over the digest plus the metadata


# --- tampering -----------------------------------------------------------------------------------


def tampered_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, dict):
        return {**value, "i": -1}
    assert isinstance(value, str)
    return value[:-1] + ("0" if value[-1:] != "0" else "1")


# data_json is not a field of the event but the text its data was hashed as (compare=False); the
# store keeps it, and what it loads back is ``data`` (tested below).
FIELDS = [f.name for f in dataclasses.fields(AuditEvent) if f.compare]


@pytest.mark.parametrize("key", [None, KEY])
@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("index", [0, 2, 4])
def test_changing_any_field_of_any_event_breaks_at_that_event(
    field: str, index: int, key: bytes | None
) -> None:
    events = chain(5, key)
    events[index] = dataclasses.replace(
        events[index], **{field: tampered_value(getattr(events[index], field))}
    )
    brk = verify_chain(events, key)
    assert brk is not None
    assert brk.seq == index, brk
    assert brk.why


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("hash", "é" * 64),
        ("hash", None),
        ("hash", ""),
        ("data", {"x": float("nan")}),
        ("data", {"\ud800": 1}),
    ],
    ids=repr,
)
def test_garbage_in_a_row_is_reported_not_raised(field: str, value: Any) -> None:
    events = chain(4, KEY)
    events[1] = dataclasses.replace(events[1], **{field: value})
    brk = verify_chain(events, KEY)
    assert brk is not None and brk.seq == 1


@pytest.mark.parametrize("index", [0, 1, 2, 3, 4])
def test_deleting_an_event_is_reported_at_its_position(index: int) -> None:
    events = chain(5)
    del events[index]
    if index == 4:
        # Dropping the tail cannot be seen from the rows alone; the operation row's audit tail is
        # what catches it (the store keeps the last hash).
        assert verify_chain(events) is None
        return
    brk = verify_chain(events)
    assert brk is not None and brk.seq == index


def test_inserting_an_event_is_reported_at_its_position() -> None:
    events = chain(5)
    other = chain(5, op="op-2")
    events.insert(2, other[2])  # a real, well-formed event from another operation
    brk = verify_chain(events)
    assert brk is not None and brk.seq == 2
    # A forged event appended with the right seq but a guessed prev_hash.
    events = chain(5)
    forged = next_event(None, "op-1", "transition", "2025-01-01T00:01:00+00:00", {"x": 1})
    events.append(dataclasses.replace(forged, seq=5))
    brk = verify_chain(events)
    assert brk is not None and brk.seq == 5


@pytest.mark.parametrize(("i", "j"), [(0, 1), (1, 3), (3, 4), (0, 4)])
def test_reordering_events_is_reported_at_the_first_moved(i: int, j: int) -> None:
    events = chain(5)
    events[i], events[j] = events[j], events[i]
    brk = verify_chain(events)
    assert brk is not None and brk.seq == i


@given(
    n=st.integers(1, 8),
    data=st.data(),
)
def test_any_single_edit_is_found_at_the_first_bad_event(n: int, data: st.DataObject) -> None:
    events = chain(n)
    index = data.draw(st.integers(0, n - 1))
    field = data.draw(st.sampled_from(["kind", "at", "data", "operation_id", "hash", "prev_hash"]))
    replacement: Any
    if field == "data":
        replacement = data.draw(st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
    else:
        replacement = data.draw(st.text(max_size=8))
    if replacement == getattr(events[index], field):
        return
    events[index] = dataclasses.replace(events[index], **{field: replacement})
    brk = verify_chain(events)
    assert brk is not None and brk.seq == index


# --- serialisation -------------------------------------------------------------------------------


def test_event_round_trip_through_json_still_verifies() -> None:
    events = chain(5, KEY)
    restored = [AuditEvent.from_dict(json.loads(json.dumps(e.to_dict()))) for e in events]
    assert restored == events
    assert verify_chain(restored, KEY) is None
    assert set(events[0].to_dict()) == set(FIELDS)


# ---- the text an event's data was hashed as (AuditEvent.data_json) ------------------------------------

_JSON_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)  # 16 digits: checked on the exact path
    | st.floats(allow_nan=False, allow_infinity=False)  # ECMAScript number text: the exact path
    | st.sampled_from([1e16, 2.0**60, 1e20, 300.0, -0.0])  # canonical text without "." or "e"
    | st.text(st.characters(exclude_categories=["Cs"]), max_size=8)  # astral characters included
)
_KEY = st.text(st.characters(exclude_categories=["Cs"]), max_size=6)
_JSON_DATA = st.dictionaries(
    _KEY,
    st.recursive(
        _JSON_LEAF,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEY, inner, max_size=3),
        max_leaves=12,
    ),
    max_size=5,
)


@given(_JSON_DATA)
def test_chained_text_is_the_canonical_json_of_the_data_and_loads_back_equal(data: dict[str, Any]) -> None:
    """Stores keep ``data_json`` instead of encoding ``data`` again: it must load back as ``data``,
    types included (the float 1e16 must not come back as an integer, which has no canonical form),
    and the event read back from it must verify."""
    ev = next_event(None, "op", "commit", "2025-01-01T00:00:00+00:00", data)
    assert ev.data_json is not None
    loaded = json.loads(ev.data_json)
    assert loaded == data
    assert json.dumps(loaded, sort_keys=True) == json.dumps(data, sort_keys=True)  # float stays float
    assert canonical_sha256(loaded) == canonical_sha256(data)
    stored = AuditEvent(ev.operation_id, ev.seq, ev.kind, ev.at, loaded, ev.prev_hash, ev.hash)
    assert verify_chain([stored]) is None


def test_replacing_the_data_drops_the_chained_text() -> None:
    """``dataclasses.replace(ev, data=...)`` must not carry the old text to new data: a store would
    write the old data under the new event."""
    ev = next_event(None, "op", "commit", "2025-01-01T00:00:00+00:00", {"a": 1})
    changed = dataclasses.replace(ev, data={"a": 2})
    assert changed.data_json is None
    assert changed == dataclasses.replace(ev, data={"a": 2})  # the text is not part of the identity
    assert AuditEvent.from_dict(ev.to_dict()).data_json is None


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), object(), {"at": b"bytes"}])
def test_chaining_data_with_no_json_form_is_a_canonicalization_error(bad: Any) -> None:
    """The C encoder refuses these first; the exact path must then say why (a CanonicalizationError),
    not let the encoder's TypeError or ValueError through."""
    with pytest.raises(CanonicalizationError):
        next_event(None, "op", "commit", "2025-01-01T00:00:00+00:00", {"x": bad})
