"""Review round 18 (d): one refused commit gives the same typed error on every store.

A commit that both carries a stale fencing token (D21) and claims an intent another operation took
(D13) was refused with StaleLease by MemoryStore and PostgreSQL but with IntentTaken by SQLite, which
checked the ledger claims before the head row. The runtime answers the two differently: IntentTaken
rewinds the write and decides it again (runtime/claims.py), StaleLease ends the drive (the worker
counts a lost lease). A worker that lost its lease went on deciding writes on SQLite only. Likewise a
create of an existing operation, or a commit to a missing one, is refused as such (OperationExists,
"does not exist") before any claim is looked at, and an audit sequence that does not follow is
named before the claim.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from callbound.core.errors import IntentTaken, OperationExists, StaleLease, StoreError
from callbound.stores.base import Commit, JournalRow

from .conftest import create, make_entry, make_events, make_head
from .test_contract import snapshot


def _taken(store: Any) -> None:
    """op1 holds intent k1 (its claim committed)."""
    create(store, "op1")
    store.commit(Commit("op1", make_head("op1"), ledger=[replace(make_entry("k1", "op1"), claim=True)]))


def test_a_stale_writer_claiming_a_taken_intent_gets_stale_lease(store: Any) -> None:
    _taken(store)
    create(store, "op2", fence=3)
    before = snapshot(store, "op2")
    stale = Commit(
        "op2",
        make_head("op2", "EXECUTING", fence=2),
        journal=[JournalRow("transition", {"state": "EXECUTING"})],
        ledger=[replace(make_entry("k1", "op2"), claim=True)],
        fence=2,
    )
    with pytest.raises(StaleLease):
        store.commit(stale)
    assert snapshot(store, "op2") == before
    assert store.ledger_get("acme", "k1") == make_entry("k1", "op1")


def test_creating_an_existing_operation_with_a_taken_claim_is_operation_exists(store: Any) -> None:
    _taken(store)
    create(store, "op2")
    again = Commit(
        "op2", make_head("op2"), ledger=[replace(make_entry("k1", "op2"), claim=True)], create=True
    )
    with pytest.raises(OperationExists):
        store.commit(again)
    assert store.ledger_get("acme", "k1") == make_entry("k1", "op1")


def test_a_commit_to_a_missing_operation_with_a_taken_claim_says_it_does_not_exist(store: Any) -> None:
    _taken(store)
    orphan = Commit("ghost", make_head("ghost"), ledger=[replace(make_entry("k1", "ghost"), claim=True)])
    with pytest.raises(StoreError, match="does not exist") as caught:
        store.commit(orphan)
    assert not isinstance(caught.value, IntentTaken)
    assert store.load_operation("ghost") is None


def test_an_audit_gap_is_named_before_a_taken_claim(store: Any) -> None:
    _taken(store)
    create(store, "op2")
    gap = Commit(
        "op2",
        make_head("op2"),
        ledger=[replace(make_entry("k1", "op2"), claim=True)],
        audit=make_events("op2", 3)[2:],  # seq 2 where 1 is next
    )
    with pytest.raises(StoreError, match="audit sequence") as caught:
        store.commit(gap)
    assert not isinstance(caught.value, IntentTaken)
