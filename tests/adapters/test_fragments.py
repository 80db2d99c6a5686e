"""Shared argument-fragment helpers: byte counts that never raise, and surrogate pairs split over two
deltas put back together (a provider may escape each UTF-16 half in its own delta)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from callbound.adapters.base import join_fragments, utf8_len


@given(st.lists(st.text(max_size=6), max_size=6))
def test_valid_text_counts_its_utf8_bytes_and_joins_unchanged(parts: list[str]) -> None:
    assert sum(utf8_len(p) for p in parts) == len("".join(parts).encode("utf-8"))
    assert join_fragments(parts) == "".join(parts)


def test_a_pair_split_over_two_fragments_is_rejoined_and_counted_as_its_four_bytes() -> None:
    parts = ['{"a": "', "\ud83d", "\ude00", '"}']
    assert join_fragments(parts) == '{"a": "\U0001f600"}'
    assert sum(utf8_len(p) for p in parts) == len('{"a": "\U0001f600"}'.encode())


def test_a_surrogate_without_a_partner_stays_for_the_parser_to_reject() -> None:
    text = join_fragments(['{"a": "x', "\ud83d", '"}'])
    assert "\ud83d" in text
    assert utf8_len("\ud83d") == 2
