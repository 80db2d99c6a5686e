"""The Store contract for settling ledger entries by hand and listing the ledger, on every backend
(memory, SQLite with and without RETURNING, PostgreSQL when CALLBOUND_TEST_POSTGRES is set).

D13: whatever takes an intent over is decided on the entry read, and the store refuses the write when the
entry changed since; a settle is such a write (compare-and-set), and a claim decided before a settle is
refused after it. D16: the settled entry is what later proposals replay or run again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from callbound.core.errors import IntentTaken, LedgerChanged, StoreError, UsageError
from callbound.core.idempotency import LedgerEntry, LedgerStatus, settle
from callbound.core.types import ok_result
from callbound.stores.base import Commit

from .conftest import T0, Backend, create, make_entry, make_head


def unknown(store: Any, key: str = "k1", op: str = "op1", **kw: Any) -> LedgerEntry:
    """An UNKNOWN entry of ``op`` (created STOPPED if new) for ``key``, as stored."""
    if store.load_operation(op) is None:
        create(store, op, "STOPPED")
    store.commit(
        Commit(op, make_head(op, "STOPPED"), ledger=[make_entry(key, op, LedgerStatus.UNKNOWN, **kw)])
    )
    entry = store.ledger_get(kw.get("tenant", "acme"), key)
    assert entry is not None
    return entry


def settled(entry: LedgerEntry, applied: bool = True, **kw: Any) -> LedgerEntry:
    return settle(entry, applied=applied, result=kw.get("result"), by="alice", note="checked", at=T0)


def reclaim(key: str, op: str, over: LedgerEntry) -> Commit:
    """``op``'s reconcile claim of ``key``, decided on the entry ``over`` (D13)."""
    claim = replace(
        make_entry(key, op, LedgerStatus.UNKNOWN),
        claim=True,
        claim_over=(over.operation_id, over.status.value),
    )
    return Commit(op, make_head(op, "EXECUTING"), ledger=[claim])


# ---- settle_ledger ---------------------------------------------------------------------------------------


def test_settle_replaces_the_entry_it_was_decided_on(backend: Backend) -> None:
    store = backend.open()
    read = unknown(store, handler_alive=True)
    other = unknown(store, "k2")
    elsewhere = unknown(store, "k1", tenant="globex")
    done = settled(read, result={"refund_id": "rf_1"})
    store.settle_ledger(read, done)
    assert store.ledger_get("acme", "k1") == done
    assert done.status is LedgerStatus.SUCCEEDED and done.result == ok_result({"refund_id": "rf_1"})
    assert done.settled is not None and done.settled["was"] == "UNKNOWN"
    # nothing else moved
    assert store.ledger_get("acme", "k2") == other
    assert store.ledger_get("globex", "k1") == elsewhere
    # durable stores keep it, record included, across connections
    again = backend.open()
    assert again.ledger_get("acme", "k1") == done


def test_settle_as_not_applied_leaves_a_failed_entry_a_claim_may_take_over(store: Any) -> None:
    """D16: FAILED may run again; the next operation's claim is decided on the settled entry."""
    read = unknown(store)
    failed = settled(read, applied=False)
    store.settle_ledger(read, failed)
    assert store.ledger_get("acme", "k1") == failed
    create(store, "op2")
    # a fresh attempt's STARTED, decided on the settled entry
    fresh = replace(make_entry("k1", "op2"), claim=True, claim_over=("op1", "FAILED"))
    store.commit(Commit("op2", make_head("op2", "EXECUTING"), ledger=[fresh]))
    assert store.ledger_get("acme", "k1") == make_entry("k1", "op2")


def test_settle_is_refused_when_another_operation_claimed_the_intent_since_the_read(store: Any) -> None:
    """D13: the entry was read UNKNOWN by the human; op2 then claimed it (its reconcile); the settle
    decided on the old entry writes nothing."""
    read = unknown(store)
    create(store, "op2")
    store.commit(reclaim("k1", "op2", read))
    with pytest.raises(LedgerChanged) as caught:
        store.settle_ledger(read, settled(read))
    assert (caught.value.tenant, caught.value.key) == ("acme", "k1")
    assert isinstance(caught.value, StoreError)
    assert "read it again" in str(caught.value)
    assert store.ledger_get("acme", "k1") == make_entry("k1", "op2", LedgerStatus.UNKNOWN)


def test_settle_is_refused_when_the_holder_recorded_its_outcome_since_the_read(store: Any) -> None:
    """The same operation writing over its own entry (no claim) also changes what was read."""
    read = unknown(store)
    succeeded = make_entry("k1", "op1", LedgerStatus.SUCCEEDED, result=ok_result({"paid": True}))
    store.commit(Commit("op1", make_head("op1", "STOPPED"), ledger=[succeeded]))
    with pytest.raises(LedgerChanged):
        store.settle_ledger(read, settled(read, applied=False))
    assert store.ledger_get("acme", "k1") == succeeded


def test_a_second_settle_decided_on_the_same_read_is_refused(store: Any) -> None:
    read = unknown(store)
    first = settled(read)
    store.settle_ledger(read, first)
    with pytest.raises(LedgerChanged):
        store.settle_ledger(read, settled(read, applied=False))
    assert store.ledger_get("acme", "k1") == first


def test_settle_compares_every_saved_field(store: Any) -> None:
    """Not only (operation, status): an entry whose attempts or handler_alive moved is another entry."""
    read = unknown(store, handler_alive=True)
    for stale in (replace(read, attempts=read.attempts + 1), replace(read, handler_alive=False)):
        with pytest.raises(LedgerChanged):
            store.settle_ledger(stale, settled(stale))
    assert store.ledger_get("acme", "k1") == read


def test_settle_of_a_missing_entry_is_refused(store: Any) -> None:
    ghost = make_entry("nope", "op1", LedgerStatus.UNKNOWN)
    with pytest.raises(LedgerChanged):
        store.settle_ledger(ghost, settled(ghost))
    assert store.ledger_get("acme", "nope") is None


def test_settle_may_not_move_an_entry_to_another_key_or_tenant(store: Any) -> None:
    read = unknown(store)
    for moved in (replace(settled(read), key="k9"), replace(settled(read), tenant="globex")):
        with pytest.raises(UsageError):
            store.settle_ledger(read, moved)
    assert store.ledger_get("acme", "k1") == read
    assert store.ledger_get("acme", "k9") is None and store.ledger_get("globex", "k1") is None


def test_a_claim_decided_before_a_settle_is_refused_after_it(store: Any) -> None:
    """D13: op2 read the UNKNOWN entry and decided to reconcile it; the human settled it first; op2's
    claim is refused (IntentTaken), so op2 decides again on the settled entry."""
    read = unknown(store)
    create(store, "op2")
    done = settled(read)
    store.settle_ledger(read, done)
    with pytest.raises(IntentTaken):
        store.commit(reclaim("k1", "op2", read))
    assert store.ledger_get("acme", "k1") == done


def test_a_claim_and_a_settle_at_the_same_moment_exactly_one_wins(backend: Backend) -> None:
    """D13, on real connections: for each of 12 keys, op2's reconcile claim and a human's settle, both
    decided on the same UNKNOWN entry, race; exactly one of them is written, the other is refused. A
    third of the keys start both at once; the others give one side a head start, so that each order is
    exercised (a settle is cheaper than a commit and would otherwise nearly always win)."""
    first = backend.open()
    keys = [f"k{n:02d}" for n in range(12)]
    create(first, "op1", "STOPPED")
    create(first, "op2")
    first.commit(
        Commit(
            "op1",
            make_head("op1", "STOPPED"),
            ledger=[make_entry(k, "op1", LedgerStatus.UNKNOWN) for k in keys],
        )
    )
    reads = {k: first.ledger_get("acme", k) for k in keys}
    claimer, settler = backend.open(), backend.open()
    barrier = threading.Barrier(2, timeout=30)  # a side that failed must not leave the other waiting
    outcomes: dict[str, list[str]] = {k: [] for k in keys}
    errors: list[BaseException] = []
    lock = threading.Lock()

    def head_start(n: int, side: int) -> None:
        barrier.wait()
        if n % 3 == side:  # side 1: the claim goes first, side 2: the settle goes first
            time.sleep(0.02)

    def claims() -> None:
        for n, k in enumerate(keys):
            head_start(n, 2)
            try:
                claimer.commit(reclaim(k, "op2", reads[k]))
            except IntentTaken:
                continue
            with lock:
                outcomes[k].append("claim")

    def settles() -> None:
        for n, k in enumerate(keys):
            head_start(n, 1)
            try:
                settler.settle_ledger(reads[k], settled(reads[k]))
            except LedgerChanged:
                continue
            with lock:
                outcomes[k].append("settle")

    def guarded(work: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                work()
            except BaseException as exc:  # reported below, and the other side released
                errors.append(exc)
                barrier.abort()

        return run

    threads = [threading.Thread(target=guarded(claims)), threading.Thread(target=guarded(settles))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not [e for e in errors if not isinstance(e, threading.BrokenBarrierError)], errors
    assert {w for won in outcomes.values() for w in won} == {"claim", "settle"}  # both orders ran
    for k in keys:
        assert len(outcomes[k]) == 1, (k, outcomes[k])
        now = first.ledger_get("acme", k)
        if outcomes[k] == ["claim"]:
            assert now == make_entry(k, "op2", LedgerStatus.UNKNOWN)
        else:
            assert now == settled(reads[k])


# ---- ledger_list -------------------------------------------------------------------------------------------


def test_ledger_list_orders_by_tenant_then_key_in_code_point_order(store: Any) -> None:
    for tenant, key in [("globex", "b"), ("acme", "é"), ("acme", "z"), ("acme", "K1"), ("acme", "k2")]:
        unknown(store, key, tenant=tenant)
    listed = [(e.tenant, e.key) for e in store.ledger_list()]
    assert listed == [("acme", "K1"), ("acme", "k2"), ("acme", "z"), ("acme", "é"), ("globex", "b")]


def test_ledger_list_filters_by_tenant_and_status_and_limits(store: Any) -> None:
    a1 = unknown(store, "a1")
    a2 = unknown(store, "a2")
    g1 = unknown(store, "g1", tenant="globex")
    done = settled(a2)
    store.settle_ledger(a2, done)
    started = make_entry("a3", "op1", LedgerStatus.STARTED)
    store.commit(Commit("op1", make_head("op1", "STOPPED"), ledger=[started]))
    assert store.ledger_list() == [a1, done, started, g1]
    assert store.ledger_list(tenant="acme") == [a1, done, started]
    assert store.ledger_list(status="UNKNOWN") == [a1, g1]
    assert store.ledger_list(tenant="acme", status="UNKNOWN") == [a1]
    assert store.ledger_list(status="SUCCEEDED") == [done]
    assert store.ledger_list(tenant="initech") == []
    assert store.ledger_list(limit=2) == [a1, done]
    assert store.ledger_list(limit=0) == []
    assert store.ledger_list(tenant="acme", status="UNKNOWN")[0].settled is None


def test_entries_written_without_settled_read_back_and_can_be_settled(store: Any) -> None:
    """Existing rows hold no ``settled`` key (D19: no schema change; the entry JSON carries it)."""
    read = unknown(store)
    assert read.settled is None and "settled" not in read.to_dict()
    store.settle_ledger(read, settled(read))
    got = store.ledger_get("acme", "k1")
    assert got is not None and got.settled is not None and got.settled["by"] == "alice"


def test_postgres_lists_in_code_point_order_whatever_the_columns_collate(pg_schema: Any) -> None:
    """A database created with a language collation (en-US sorts "é" before "z") lists the ledger in
    the same order as SQLite and MemoryStore."""
    import psycopg

    from callbound.stores.postgres import PostgresStore

    store = PostgresStore(pg_schema.url)
    try:
        with psycopg.connect(pg_schema.url, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_collation WHERE collname = 'en-US-x-icu'").fetchone() is None:
                pytest.skip("this PostgreSQL has no ICU en-US collation")
            conn.execute(
                'ALTER TABLE ledger ALTER COLUMN tenant TYPE text COLLATE "en-US-x-icu", '
                'ALTER COLUMN key TYPE text COLLATE "en-US-x-icu"'
            )
        for key in ("é", "z", "K1", "k2"):
            unknown(store, key)
        assert [e.key for e in store.ledger_list()] == ["K1", "k2", "z", "é"]
    finally:
        store.close()
