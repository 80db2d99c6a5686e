"""The Store contract: one suite, run against MemoryStore, SQLiteStore and PostgresStore.

MemoryStore is the reference: every durable store must behave exactly like it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from callbound.core.audit import verify_chain
from callbound.core.errors import IntentTaken, OperationExists, StaleLease, StoreError
from callbound.core.idempotency import LedgerStatus
from callbound.stores.base import Commit, JournalRow, StoredOperation

from .conftest import T0, T0_S, Backend, create, decide, make_approval, make_entry, make_events, make_head


def at(seconds: float) -> Callable[[], float]:
    """A clock for lease methods: T0 + seconds."""
    return lambda: T0_S + seconds


def snapshot(store: Any, op: str) -> tuple[Any, ...]:
    """Everything the store holds about one operation, for "nothing was written" checks."""
    return (
        store.load_operation(op),
        store.audit_events(op),
        store.list_approvals(status=None, operation_id=op),
        store.ledger_get("acme", "k1"),
    )


# ---- operations, heads and the journal ---------------------------------------------------------------


def test_create_then_load_round_trips_head_and_journal(store: Any) -> None:
    head = make_head(
        "op1",
        budgets={"max_model_turns": 8, "cost": "0.0040"},
        nested={"list": [1, 2.5, None, True, "x"], "empty": {}, "text": "naïve — 東京 ☕ \U0001f600"},
        big=2**62,
        neg=-7,
        small=1e-7,
        text=None,
    )
    journal = [
        JournalRow("transition", {"state": "MODEL_REQUESTED", "at": T0.isoformat()}),
        JournalRow("items", {"items": [{"role": "user", "content": "Where is order A1?"}]}),
        JournalRow("turn", {"turn": {"calls": [], "continuation": [{"type": "reasoning", "id": "rs_1"}]}}),
    ]
    store.commit(Commit("op1", head, journal=journal, create=True))
    loaded = store.load_operation("op1")
    assert isinstance(loaded, StoredOperation)
    assert loaded.head == head
    assert loaded.journal == journal


def test_nul_characters_and_lone_surrogates_round_trip(store: Any) -> None:
    """The runtime joins key parts with NUL ("get_order\x00{...}"); model text may carry anything."""
    head = make_head("op1", text="lone \ud800 surrogate, nul \x00, 東京", keys={"a\x00b": ["\udfff"]})
    events = [replace(e, data={"identical": ["get_order\x00{}"]}) for e in make_events("op1", 1)]
    a = make_approval("ap1", "op1")
    a = replace(a, arguments={"note": "nul \x00 here"})
    entry = make_entry("k1", "op1", result={"v": "\x00"})
    rows = [JournalRow("results", {"identical": ['get_order\x00{"order_id":"A1"}'], "x": "\ud83d"})]
    store.commit(Commit("op1", head, rows, [entry], [a], events, create=True))
    loaded = store.load_operation("op1")
    assert loaded is not None and loaded.head == head and loaded.journal == rows
    assert store.audit_events("op1") == events
    assert store.get_approval("ap1") == a
    assert store.ledger_get("acme", "k1") == entry


def test_load_and_audit_of_unknown_operation(store: Any) -> None:
    assert store.load_operation("nope") is None
    assert store.audit_events("nope") == []
    assert store.list_operations() == []


def test_create_twice_is_refused_and_changes_nothing(store: Any) -> None:
    create(store, "op1")
    before = snapshot(store, "op1")
    with pytest.raises(OperationExists, match="already exists") as info:
        store.commit(Commit("op1", make_head("op1", "FAILED"), [JournalRow("note", {})], create=True))
    assert info.value.operation_id == "op1" and "Runner.resume" in str(info.value)
    with pytest.raises(OperationExists, match="already exists"):  # checked before the audit sequence
        store.commit(Commit("op1", make_head("op1"), audit=make_events("op1", 3)[2:], create=True))
    assert snapshot(store, "op1") == before


def test_commit_to_missing_operation_is_refused(store: Any) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        store.commit(Commit("ghost", make_head("ghost"), [JournalRow("note", {})]))
    assert store.load_operation("ghost") is None
    assert store.list_operations() == []


def test_journal_is_appended_and_head_replaced(store: Any) -> None:
    create(store, "op1")
    expected = [JournalRow("transition", {"state": "MODEL_REQUESTED", "n": 0})]
    for n in range(1, 30):
        rows = [JournalRow("turn", {"n": n}), JournalRow("results", {"n": n, "k": [n] * 3})][: 1 + n % 2]
        expected += rows
        store.commit(Commit("op1", make_head("op1", "EXECUTING", commits=n), journal=rows))
    store.commit(Commit("op1", make_head("op1", "EXECUTING", commits=99)))  # a head-only commit
    loaded = store.load_operation("op1")
    assert loaded.head["commits"] == 99
    assert loaded.journal == expected


def test_operations_are_kept_apart(store: Any) -> None:
    create(store, "op1")
    create(store, "op2")
    store.commit(Commit("op2", make_head("op2", "EXECUTING"), [JournalRow("note", {"only": "op2"})]))
    assert store.load_operation("op1").journal == [
        JournalRow("transition", {"state": "MODEL_REQUESTED", "n": 0})
    ]
    assert store.load_operation("op2").journal[-1] == JournalRow("note", {"only": "op2"})
    assert store.load_operation("op1").head["state"] == "MODEL_REQUESTED"


def test_list_operations_newest_first_with_filters_and_limit(store: Any) -> None:
    for i, (tenant, state) in enumerate(
        [
            ("acme", "COMPLETED"),
            ("acme", "WAITING_APPROVAL"),
            ("globex", "WAITING_APPROVAL"),
            ("acme", "FAILED"),
        ]
    ):
        create(store, f"op{i}", state, tenant=tenant)
    assert [h["operation_id"] for h in store.list_operations()] == ["op3", "op2", "op1", "op0"]
    assert [h["operation_id"] for h in store.list_operations(tenant="acme")] == ["op3", "op1", "op0"]
    assert [h["operation_id"] for h in store.list_operations(state="WAITING_APPROVAL")] == ["op2", "op1"]
    assert [h["operation_id"] for h in store.list_operations(tenant="acme", state="WAITING_APPROVAL")] == [
        "op1"
    ]
    assert [h["operation_id"] for h in store.list_operations(limit=2)] == ["op3", "op2"]
    assert store.list_operations(limit=0) == []
    assert store.list_operations(tenant="initech") == []
    # a later commit updates the head (and its state filter) but not the order
    store.commit(Commit("op0", make_head("op0", "WAITING_APPROVAL")))
    assert [h["operation_id"] for h in store.list_operations(state="WAITING_APPROVAL")] == [
        "op2",
        "op1",
        "op0",
    ]
    assert store.list_operations(tenant="acme", limit=1)[0] == make_head("op3", "FAILED")


# ---- fencing (D21) ---------------------------------------------------------------------------------


def test_stale_fence_is_refused_and_nothing_is_written(store: Any) -> None:
    create(store, "op1", fence=3)
    before = snapshot(store, "op1")
    stale = Commit(
        "op1",
        make_head("op1", "EXECUTING", fence=2),
        journal=[JournalRow("note", {"stale": True})],
        ledger=[make_entry("k1", "op1")],
        approvals=[make_approval("ap1", "op1")],
        audit=make_events("op1", 2)[1:],
        fence=2,
    )
    with pytest.raises(StaleLease, match="stale"):
        store.commit(stale)
    assert snapshot(store, "op1") == before


def test_current_fence_and_unfenced_writes_pass(store: Any) -> None:
    create(store, "op1", fence=3)
    store.commit(Commit("op1", make_head("op1", "EXECUTING", fence=3), fence=3))
    store.commit(Commit("op1", make_head("op1", "RESULTS_READY", fence=3)))  # fence=None: not checked
    assert store.load_operation("op1").head["state"] == "RESULTS_READY"


def test_fence_is_not_checked_while_the_stored_head_has_none(store: Any) -> None:
    create(store, "op1")
    store.commit(Commit("op1", make_head("op1", "EXECUTING", fence=7), fence=7))
    assert store.load_operation("op1").head["fence"] == 7
    with pytest.raises(StaleLease):
        store.commit(Commit("op1", make_head("op1", "EXECUTING", fence=6), fence=6))


# ---- audit chain -----------------------------------------------------------------------------------


def test_audit_events_round_trip_in_order_and_verify(store: Any) -> None:
    events = make_events("op1", 6)
    store.commit(Commit("op1", make_head("op1"), audit=events[:1], create=True))
    store.commit(Commit("op1", make_head("op1"), audit=events[1:4]))
    store.commit(Commit("op1", make_head("op1")))
    store.commit(Commit("op1", make_head("op1"), audit=events[4:]))
    stored = store.audit_events("op1")
    assert stored == events
    assert verify_chain(stored) is None


@pytest.mark.parametrize("bad_seqs", [[0, 2], [2], [1, 1]])
def test_audit_sequence_gap_is_refused_and_nothing_is_written(store: Any, bad_seqs: list[int]) -> None:
    create(store, "op1")  # holds event 0
    events = make_events("op1", 4)
    batch = [replace(events[min(s, 3)], seq=s) for s in bad_seqs]
    before = snapshot(store, "op1")
    with pytest.raises(StoreError, match="audit sequence"):
        store.commit(
            Commit(
                "op1",
                make_head("op1", "EXECUTING"),
                [JournalRow("note", {})],
                [make_entry("k1", "op1")],
                [make_approval("ap1", "op1")],
                audit=batch,
            )
        )
    assert snapshot(store, "op1") == before


def test_create_with_a_bad_audit_sequence_creates_nothing(store: Any) -> None:
    events = make_events("op1", 2)
    with pytest.raises(StoreError, match="audit sequence"):
        store.commit(Commit("op1", make_head("op1"), [JournalRow("note", {})], audit=events[1:], create=True))
    assert store.load_operation("op1") is None
    assert store.audit_events("op1") == []
    assert store.list_operations() == []
    create(store, "op1")  # the id is still free
    assert len(store.audit_events("op1")) == 1


# ---- ledger ----------------------------------------------------------------------------------------


def test_ledger_upserts_by_tenant_and_key(store: Any) -> None:
    create(store, "op1")
    assert store.ledger_get("acme", "k1") is None
    started = make_entry("k1", "op1", lease_token=4)
    store.commit(Commit("op1", make_head("op1"), ledger=[started]))
    assert store.ledger_get("acme", "k1") == started
    done = replace(
        started, status=LedgerStatus.SUCCEEDED, result={"refund_id": "r_1", "amount": "40.00"}, attempts=2
    )
    other_tenant = make_entry("k1", "op1", tenant="globex")
    store.commit(Commit("op1", make_head("op1"), ledger=[done, other_tenant, make_entry("k2", "op1")]))
    assert store.ledger_get("acme", "k1") == done
    assert store.ledger_get("globex", "k1") == other_tenant
    assert store.ledger_get("acme", "k2") == make_entry("k2", "op1")
    assert store.ledger_get("initech", "k1") is None


def test_a_claim_of_an_intent_another_operation_holds_is_refused_whole(store: Any) -> None:
    """D13: two operations that both read no entry for one intent both try to claim it; the second
    claim is refused (IntentTaken) and nothing of its commit is written."""
    create(store, "op1")
    create(store, "op2")
    store.commit(Commit("op1", make_head("op1"), ledger=[replace(make_entry("k1", "op1"), claim=True)]))
    before = snapshot(store, "op2")
    late = Commit(
        "op2",
        make_head("op2", "EXECUTING"),
        journal=[JournalRow("transition", {"state": "EXECUTING", "n": 1})],
        ledger=[make_entry("k2", "op2"), replace(make_entry("k1", "op2"), claim=True)],
    )
    with pytest.raises(IntentTaken) as caught:
        store.commit(late)
    assert (caught.value.key, caught.value.holder) == ("k1", "op1")
    assert isinstance(caught.value, StoreError)
    assert snapshot(store, "op2") == before
    assert store.ledger_get("acme", "k1") == make_entry("k1", "op1")
    assert store.ledger_get("acme", "k2") is None
    # the holder's own later claims, and plain (unclaimed) upserts, still pass
    store.commit(
        Commit("op1", make_head("op1"), ledger=[replace(make_entry("k1", "op1", attempts=2), claim=True)])
    )
    store.commit(Commit("op2", make_head("op2"), ledger=[make_entry("k1", "op2", LedgerStatus.UNKNOWN)]))
    assert store.ledger_get("acme", "k1") == make_entry("k1", "op2", LedgerStatus.UNKNOWN)


def test_a_claim_over_an_entry_that_changed_since_it_was_read_is_refused(store: Any) -> None:
    """D13: a claim decided on a FAILED entry (definitely not applied, may run again) stands only while
    the key still holds that entry: of two operations that read it at the same moment, the second is
    refused, nothing of its commit is written, and the claimant's own entries never refuse it."""
    for op in ("op0", "op1", "op2"):
        create(store, op)
    failed = make_entry("k1", "op0", LedgerStatus.FAILED)
    store.commit(Commit("op0", make_head("op0"), ledger=[failed]))
    read = ("op0", "FAILED")
    store.commit(
        Commit(
            "op1", make_head("op1"), ledger=[replace(make_entry("k1", "op1"), claim=True, claim_over=read)]
        )
    )
    late = Commit(
        "op2",
        make_head("op2", "EXECUTING"),
        journal=[JournalRow("transition", {"state": "EXECUTING", "n": 1})],
        ledger=[replace(make_entry("k1", "op2"), claim=True, claim_over=read)],
    )
    before = snapshot(store, "op2")
    with pytest.raises(IntentTaken) as caught:
        store.commit(late)
    assert (caught.value.key, caught.value.holder) == ("k1", "op1")
    assert snapshot(store, "op2") == before
    assert store.ledger_get("acme", "k1") == make_entry("k1", "op1")
    # the holder going on from its own entry, then failing: a claim read on that FAILED entry stands
    store.commit(
        Commit("op1", make_head("op1"), ledger=[replace(make_entry("k1", "op1", attempts=2), claim=True)])
    )
    store.commit(Commit("op1", make_head("op1"), ledger=[make_entry("k1", "op1", LedgerStatus.FAILED)]))
    store.commit(
        Commit(
            "op2",
            make_head("op2"),
            ledger=[replace(make_entry("k1", "op2"), claim=True, claim_over=("op1", "FAILED"))],
        )
    )
    assert store.ledger_get("acme", "k1") == make_entry("k1", "op2")


# ---- approvals -------------------------------------------------------------------------------------


def test_approvals_upsert_get_and_list(store: Any) -> None:
    create(store, "op1")
    create(store, "op2", tenant="globex")
    a3 = make_approval("ap3", "op1", created_at=T0 + timedelta(seconds=3))
    a1 = make_approval("ap1", "op1", created_at=T0 + timedelta(seconds=1))
    a2 = make_approval("ap2", "op2", tenant="globex", created_at=T0 + timedelta(seconds=2))
    a0 = make_approval("ap0", "op1", created_at=T0 + timedelta(microseconds=1))  # ordering is exact
    store.commit(Commit("op1", make_head("op1", "WAITING_APPROVAL"), approvals=[a3, a1, a0]))
    store.commit(Commit("op2", make_head("op2", "WAITING_APPROVAL", tenant="globex"), approvals=[a2]))
    assert store.get_approval("ap1") == a1
    assert store.get_approval("missing") is None
    assert [a.approval_id for a in store.list_approvals()] == ["ap0", "ap1", "ap2", "ap3"]
    assert [a.approval_id for a in store.list_approvals(tenant="acme")] == ["ap0", "ap1", "ap3"]
    assert [a.approval_id for a in store.list_approvals(operation_id="op2")] == ["ap2"]
    assert [a.approval_id for a in store.list_approvals(limit=2)] == ["ap0", "ap1"]
    assert store.list_approvals(limit=0) == []
    assert store.list_approvals(status="approved") == []
    # an upsert replaces the stored approval
    denied = decide(a1, "denied", "bob")
    store.commit(Commit("op1", make_head("op1", "WAITING_APPROVAL"), approvals=[denied]))
    assert store.get_approval("ap1") == denied
    assert [a.approval_id for a in store.list_approvals()] == ["ap0", "ap2", "ap3"]
    assert [a.approval_id for a in store.list_approvals(status="denied")] == ["ap1"]
    assert [a.approval_id for a in store.list_approvals(status=None, tenant="acme")] == ["ap0", "ap1", "ap3"]
    assert store.list_approvals(status=None, tenant="acme", operation_id="op2") == []


def test_approval_times_keep_their_instant(store: Any) -> None:
    from datetime import timezone

    create(store, "op1")
    paris = timezone(timedelta(hours=1))
    a = make_approval("ap1", "op1", created_at=T0.astimezone(paris))
    store.commit(Commit("op1", make_head("op1"), approvals=[a]))
    got = store.get_approval("ap1")
    assert got == a
    assert got.created_at.utcoffset() == timedelta(hours=1)


def test_decide_approval_is_compare_and_set(store: Any) -> None:
    create(store, "op1")
    a = make_approval("ap1", "op1")
    store.commit(Commit("op1", make_head("op1", "WAITING_APPROVAL"), approvals=[a]))
    approved = decide(a, "approved", "alice")
    assert store.decide_approval(approved) is True
    assert store.get_approval("ap1") == approved
    assert store.decide_approval(decide(a, "denied", "bob")) is False
    assert store.decide_approval(approved) is False  # single use, even for the same decision
    assert store.get_approval("ap1") == approved
    assert store.decide_approval(decide(make_approval("missing", "op1"), "approved", "alice")) is False
    assert store.get_approval("missing") is None
    assert [x.approval_id for x in store.list_approvals(status="approved")] == ["ap1"]
    assert store.list_approvals() == []


def test_concurrent_decisions_exactly_one_wins(backend: Backend) -> None:
    first = backend.open()
    create(first, "op1")
    approvals = [make_approval(f"ap{i}", "op1", created_at=T0 + timedelta(seconds=i)) for i in range(15)]
    first.commit(Commit("op1", make_head("op1", "WAITING_APPROVAL"), approvals=approvals))
    deciders = [backend.open() for _ in range(3)]
    for a in approvals:
        barrier = threading.Barrier(len(deciders))
        results: dict[str, bool] = {}

        def run(
            store: Any,
            who: str,
            a: Any = a,
            barrier: threading.Barrier = barrier,
            results: dict[str, bool] = results,
        ) -> None:
            barrier.wait()
            results[who] = store.decide_approval(decide(a, "approved" if who != "bob" else "denied", who))

        threads = [
            threading.Thread(target=run, args=(s, who))
            for s, who in zip(deciders, ["alice", "bob", "carol"], strict=True)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [who for who, won in results.items() if won]
        assert len(results) == 3 and len(winners) == 1, results
        stored = first.get_approval(a.approval_id)
        assert stored.approver == winners[0]
        assert stored.status == ("denied" if winners[0] == "bob" else "approved")


# ---- atomicity and durability --------------------------------------------------------------------


def _cycle() -> list[Any]:
    cycle: list[Any] = []
    cycle.append(cycle)
    return cycle


@pytest.mark.parametrize(
    "bad",
    [object(), float("nan"), float("inf"), {1j: 2}, _cycle()],
    ids=["object", "nan", "inf", "key", "cycle"],
)
def test_unstorable_data_is_a_store_error_and_writes_nothing(backend: Backend, bad: Any) -> None:
    if not backend.durable:
        pytest.skip("MemoryStore keeps Python objects and does not serialise")
    store = backend.open()
    create(store, "op1")
    before = snapshot(store, "op1")
    with pytest.raises(StoreError, match="cannot store a 'x' journal row of op1: it is not plain JSON"):
        store.commit(
            Commit(
                "op1",
                make_head("op1", "EXECUTING"),
                [JournalRow("note", {"ok": 1}), JournalRow("x", {"bad": bad})],
                [make_entry("k1", "op1")],
            )
        )
    assert snapshot(store, "op1") == before


def test_everything_survives_reopening(backend: Backend) -> None:
    if not backend.durable:
        pytest.skip("MemoryStore is lost with the process")
    store = backend.open()
    events = make_events("op1", 3)
    a = make_approval("ap1", "op1")
    store.commit(
        Commit("op1", make_head("op1"), [JournalRow("note", {"n": 1})], audit=events[:1], create=True)
    )
    store.commit(
        Commit(
            "op1",
            make_head("op1", "WAITING_APPROVAL", fence=2),
            [JournalRow("note", {"n": 2})],
            [make_entry("k1", "op1")],
            [a],
            events[1:],
        )
    )
    store.close()
    again = backend.open()
    loaded = again.load_operation("op1")
    assert loaded.head == make_head("op1", "WAITING_APPROVAL", fence=2)
    assert loaded.journal == [JournalRow("note", {"n": 1}), JournalRow("note", {"n": 2})]
    assert again.audit_events("op1") == events
    assert again.ledger_get("acme", "k1") == make_entry("k1", "op1")
    assert again.list_approvals() == [a]
    with pytest.raises(StaleLease):
        again.commit(Commit("op1", make_head("op1", fence=1), fence=1))


def test_concurrent_writers_on_distinct_operations(backend: Backend) -> None:
    stores = [backend.open() for _ in range(4)]
    errors: list[BaseException] = []

    def work(store: Any, w: int) -> None:
        try:
            for i in range(10):
                op = f"w{w}-op{i}"
                create(store, op)
                for n in range(3):
                    store.commit(Commit(op, make_head(op, "EXECUTING", n=n), [JournalRow("note", {"n": n})]))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s, w)) for w, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(stores[0].list_operations(limit=1000)) == 40
    loaded = stores[1].load_operation("w3-op9")
    assert loaded.head["n"] == 2 and len(loaded.journal) == 4


# ---- leases (D21) ----------------------------------------------------------------------------------


def test_claim_takes_the_oldest_runnable_operation_and_increments_the_fence(store: Any) -> None:
    now = at(0)
    create(store, "done", "COMPLETED")
    create(store, "stopped", "STOPPED")
    create(store, "a", "MODEL_REQUESTED", fence=4)
    create(store, "b", "EXECUTING")
    assert store.claim("w1", 30, now) == ("a", 5)
    assert store.load_operation("a").head["fence"] == 5
    assert store.claim("w2", 30, now) == ("b", 1)
    assert store.claim("w3", 30, now) is None
    assert [h["fence"] for h in store.list_operations(limit=2)] == [1, 5]


@pytest.mark.parametrize("state", ["MODEL_REQUESTED", "RETRY", "VALIDATING", "EXECUTING", "RESULTS_READY"])
def test_every_runnable_state_can_be_claimed(store: Any, state: str) -> None:
    create(store, "op1", state)
    assert store.claim("w1", 30, at(0)) == ("op1", 1)


@pytest.mark.parametrize("state", ["COMPLETED", "REFUSED", "INCOMPLETE", "FAILED", "STOPPED"])
def test_terminal_states_are_never_claimed(store: Any, state: str) -> None:
    create(store, "op1", state)
    assert store.claim("w1", 30, at(0)) is None


def test_waiting_approval_is_claimed_once_every_approval_is_decided_or_expired(store: Any) -> None:
    create(store, "op1", "WAITING_APPROVAL")
    a1 = make_approval("ap1", "op1", ttl=timedelta(hours=1))
    a2 = make_approval("ap2", "op1", ttl=timedelta(hours=2))
    store.commit(Commit("op1", make_head("op1", "WAITING_APPROVAL"), approvals=[a1, a2]))
    assert store.claim("w1", 30, at(60)) is None
    assert store.decide_approval(decide(a1, "approved", "alice"))
    assert store.claim("w1", 30, at(60)) is None  # ap2 is still pending
    assert store.claim("w1", 30, at(2 * 3600 + 1)) == ("op1", 1)  # ap2 expired: the model is told
    create(store, "op2", "WAITING_APPROVAL")
    a3 = make_approval("ap3", "op2")
    store.commit(Commit("op2", make_head("op2", "WAITING_APPROVAL"), approvals=[a3]))
    assert store.claim("w1", 30, at(60)) is None
    assert store.decide_approval(decide(a3, "denied", "bob"))
    assert store.claim("w1", 30, at(60)) == ("op2", 1)


def test_one_expired_approval_does_not_wake_an_operation_still_waiting_on_another(store: Any) -> None:
    """D17: an expired approval is resolved on resume (APPROVAL_EXPIRED to the model), and the runtime
    resumes a turn only once every approval of it is decided or expired (planning.approvals_ready). So
    after the first of two approvals expires, the operation still waits for the second: claim() leaves
    it (a worker would take it, find it waiting and hold a lease for nothing), yet claims other work
    behind it; it wakes when the second expires or is decided."""
    create(store, "op1", "WAITING_APPROVAL")
    a1 = make_approval("ap1", "op1", ttl=timedelta(hours=1))
    a2 = make_approval("ap2", "op1", ttl=timedelta(hours=2))
    store.commit(Commit("op1", make_head("op1", "WAITING_APPROVAL"), approvals=[a1, a2]))
    assert store.claim("w1", 30, at(3599)) is None
    assert store.claim("w1", 30, at(3600)) is None  # ap1 expired (at its expires_at), ap2 pending
    create(store, "op2")
    assert store.claim("w1", 10**6, at(3601)) == ("op2", 1)  # newer work is still found
    assert store.claim("w1", 30, at(2 * 3600 - 1)) is None
    assert store.claim("w1", 30, at(2 * 3600)) == ("op1", 1)  # both expired: resume tells the model
    # the second decided after the first expired: runnable at once, before the second's expiry
    create(store, "op3", "WAITING_APPROVAL")
    a3 = make_approval("ap3", "op3", ttl=timedelta(hours=1))
    a4 = make_approval("ap4", "op3", ttl=timedelta(hours=2))
    store.commit(Commit("op3", make_head("op3", "WAITING_APPROVAL"), approvals=[a3, a4]))
    assert store.claim("w2", 30, at(3600 + 60)) is None
    assert store.decide_approval(decide(a4, "approved", "alice", T0 + timedelta(minutes=61)))
    assert store.claim("w2", 30, at(3600 + 61)) == ("op3", 1)


def test_waiting_operations_wake_however_their_approvals_are_written(store: Any) -> None:
    """Approvals written with the creating commit, re-written by later commits (decided, or twice in
    one commit), or added later: claim always follows the approvals actually stored."""
    a1, a2 = make_approval("ap1", "op1"), make_approval("ap2", "op2")
    store.commit(Commit("op1", make_head("op1", "WAITING_APPROVAL"), approvals=[a1], create=True))
    store.commit(
        Commit(
            "op2",
            make_head("op2", "WAITING_APPROVAL"),
            approvals=[a2, decide(a2, "denied", "bob")],
            create=True,
        )
    )
    assert store.claim("w", 10**6, at(60)) == ("op2", 1)  # its only approval was decided in the same commit
    assert store.claim("w", 10**6, at(60)) is None
    store.commit(
        Commit("op1", make_head("op1", "WAITING_APPROVAL"), approvals=[decide(a1, "approved", "alice")])
    )
    assert store.claim("w", 10**6, at(60)) == ("op1", 1)  # decided by a commit, not by decide_approval
    assert store.release("op1", 1)
    a3 = make_approval("ap3", "op1", created_at=T0 + timedelta(minutes=1))
    store.commit(Commit("op1", make_head("op1", "WAITING_APPROVAL", fence=1), approvals=[a3]))
    assert store.claim("w", 10**6, at(120)) is None  # paused again on a new approval
    assert store.claim("w", 10**6, at(24 * 3600 + 61)) == ("op1", 2)  # which expired


def test_lease_expiry_lets_another_worker_take_over_and_fences_the_first(store: Any) -> None:
    create(store, "op1")
    op, fence1 = store.claim("w1", 10, at(0))
    assert (op, fence1) == ("op1", 1)
    assert store.claim("w2", 10, at(9)) is None  # still held
    assert store.renew("op1", "w1", fence1, 10, at(9)) is True  # now held until 19
    assert store.claim("w2", 10, at(18)) is None
    assert store.claim("w2", 10, at(19)) == ("op1", 2)  # expired: taken over with a new token
    # the first worker is fenced out everywhere
    with pytest.raises(StaleLease):
        store.commit(
            Commit("op1", make_head("op1", "EXECUTING", fence=fence1), [JournalRow("note", {})], fence=fence1)
        )
    assert store.renew("op1", "w1", fence1, 10, at(20)) is False
    assert store.release("op1", fence1) is False
    # the second worker writes, renews and releases
    store.commit(
        Commit("op1", make_head("op1", "EXECUTING", fence=2), [JournalRow("note", {"w": 2})], fence=2)
    )
    assert store.load_operation("op1").head["fence"] == 2
    assert store.renew("op1", "w2", 2, 10, at(20)) is True
    assert store.renew("op1", "w1", 2, 10, at(20)) is False  # right token, wrong owner
    assert store.release("op1", 2) is True
    assert store.release("op1", 2) is False
    assert store.renew("op1", "w2", 2, 10, at(20)) is False  # released: nothing to renew
    assert store.claim("w3", 10, at(20)) == ("op1", 3)  # free at once, token never goes back


def test_a_stale_fence_never_renews_even_for_the_same_owner(store: Any) -> None:
    """D21: the fence, not the owner name, says whose lease it is. An owner that took the operation
    again (a second hold, or a worker claiming what its own expired lease left) holds a new token; a
    heartbeat still carrying the old one must not keep the lease alive."""
    create(store, "op1")
    old = store.hold("op1", "d1", 10, now_fn=at(0))
    new = store.hold("op1", "d1", 10, now_fn=at(1))  # the same owner takes it again
    assert (old, new) == (1, 2)
    assert store.renew("op1", "d1", old, 10, at(2)) is False
    assert store.lease_holder("op1", at(11)) is None  # the refused renewal did not extend the lease
    assert store.release("op1", old) is False
    create(store, "op2")
    assert store.claim("w1", 10, at(20)) == ("op1", 3)
    assert store.claim("w1", 10, at(20)) == ("op2", 1)
    assert store.claim("w1", 10, at(30)) == ("op1", 4)  # its own lease expired: the same worker again
    assert store.renew("op1", "w1", 3, 10, at(31)) is False
    assert store.renew("op1", "w1", 4, 10, at(31)) is True
    assert store.release("op1", 3) is False
    assert store.lease_holder("op1", at(40)) == "w1"  # held until 41 by fence 4


def test_audited_operations_lists_every_chain(store: Any) -> None:
    assert store.audited_operations() == []
    create(store, "op1")  # with its first audit event
    store.commit(Commit("op2", make_head("op2"), [JournalRow("transition", {})], create=True))  # none
    assert store.audited_operations() == ["op1"]


def test_hold_takes_one_operation_for_a_direct_drive_and_moves_the_fence(store: Any) -> None:
    """D21 for Runner.run/resume: one holder at a time; the fence moves so an earlier holder's
    writes fail; a worker's claim respects the hold, and a hold respects a worker's claim."""
    create(store, "op1", fence=3)
    create(store, "op2")
    assert store.hold("missing", "d1", 10, now_fn=at(0)) is None
    assert store.lease_holder("op1", at(0)) is None
    assert store.hold("op1", "d1", 10, now_fn=at(0)) == 4
    assert store.load_operation("op1").head["fence"] == 4
    assert store.lease_holder("op1", at(5)) == "d1"
    assert store.hold("op1", "d2", 10, now_fn=at(5)) is None  # held by d1
    assert store.claim("w1", 10, at(5)) == ("op2", 1)  # a worker skips the held operation
    assert store.hold("op2", "d2", 10, now_fn=at(5)) is None  # and a hold skips the claimed one
    assert store.hold("op1", "d1", 10, now_fn=at(5)) == 5  # the holder itself may take it again
    assert store.hold("op1", "d2", 10, now_fn=at(5), replacing="d1") == 6  # d1 was found gone
    assert store.lease_holder("op1", at(5)) == "d2"
    assert store.hold("op1", "d3", 10, now_fn=at(5), replacing="d1") is None  # d2 holds it now
    with pytest.raises(StaleLease):
        store.commit(Commit("op1", make_head("op1", "EXECUTING", fence=5), [JournalRow("n", {})], fence=5))
    assert store.renew("op1", "d2", 6, 10, at(14)) is True  # held until 24
    assert store.hold("op1", "d3", 10, now_fn=at(23)) is None
    assert store.lease_holder("op1", at(24)) is None  # expired
    assert store.hold("op1", "d3", 10, now_fn=at(24)) == 7
    assert store.release("op1", 7) is True
    assert store.lease_holder("op1", at(25)) is None
    assert store.hold("op1", "d4", 10, now_fn=at(25)) == 8  # released: free at once


def test_concurrent_holds_of_one_operation_are_exclusive(backend: Backend) -> None:
    first = backend.open()
    create(first, "op1")
    stores = [backend.open() for _ in range(4)]
    barrier = threading.Barrier(len(stores))
    got: list[int | None] = []
    lock = threading.Lock()

    def work(store: Any, name: str) -> None:
        barrier.wait()
        fence = store.hold("op1", name, 60)
        with lock:
            got.append(fence)

    threads = [threading.Thread(target=work, args=(s, f"d{i}")) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got, key=lambda f: f or 0) == [None, None, None, 1]


def test_lease_times_come_from_the_store_clock(store: Any) -> None:
    create(store, "op1")
    assert store.claim("w1", 30) == ("op1", 1)
    assert store.claim("w2", 30) is None
    assert store.release("op1", 1)
    assert store.claim("w2", 0.05) == ("op1", 2)
    time.sleep(0.3)
    assert store.claim("w3", 30) == ("op1", 3)


def test_concurrent_claims_are_exclusive(backend: Backend) -> None:
    first = backend.open()
    for i in range(24):
        create(first, f"op{i:02d}")
    workers = [backend.open() for _ in range(4)]
    claimed: list[tuple[str, str, int]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(workers))

    def work(store: Any, name: str) -> None:
        barrier.wait()
        while (got := store.claim(name, 60)) is not None:
            with lock:
                claimed.append((got[0], name, got[1]))

    threads = [threading.Thread(target=work, args=(s, f"w{i}")) for i, s in enumerate(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(op for op, _, _ in claimed) == [f"op{i:02d}" for i in range(24)]
    assert {fence for _, _, fence in claimed} == {1}


def test_concurrent_claims_over_one_failed_entry_let_exactly_one_through(backend: Backend) -> None:
    """D13, on real connections: eight operations that all read one FAILED entry claim it at the same
    moment, 10 keys in a row; exactly one claim per key stands and the others get IntentTaken."""
    first = backend.open()
    ops = [f"op{i}" for i in range(8)]
    for op in ["op_failed", *ops]:
        create(first, op)
    keys = [f"k{n}" for n in range(10)]
    first.commit(
        Commit(
            "op_failed",
            make_head("op_failed"),
            ledger=[make_entry(k, "op_failed", LedgerStatus.FAILED) for k in keys],
        )
    )
    stores = [backend.open() for _ in ops]
    won: list[tuple[str, str]] = []
    refused: list[tuple[str, str]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(ops))

    def work(store: Any, op: str) -> None:
        for k in keys:
            barrier.wait()
            claim = replace(make_entry(k, op), claim=True, claim_over=("op_failed", "FAILED"))
            try:
                store.commit(Commit(op, make_head(op), ledger=[claim]))
            except IntentTaken:
                with lock:
                    refused.append((k, op))
            else:
                with lock:
                    won.append((k, op))

    threads = [threading.Thread(target=work, args=(s, op)) for s, op in zip(stores, ops, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(k for k, _ in won) == keys  # one winner per key
    assert len(refused) == len(keys) * (len(ops) - 1)
    for k, op in won:
        assert first.ledger_get("acme", k) == make_entry(k, op)


def test_audit_data_is_stored_as_chained_not_as_changed_later(store: Any) -> None:
    """Every store keeps what the digest covered: a later change to the event's data dict (an object
    the runtime may still hold) must not reach the stored chain, which would then fail to verify."""
    events = make_events("op1", 2)
    store.commit(Commit("op1", make_head("op1"), audit=events, create=True))
    events[1].data["state"] = "CHANGED"
    events[1].data["extra"] = [1.5]
    stored = store.audit_events("op1")
    assert [e.data for e in stored] == [{"i": 0, "state": "X"}, {"i": 1, "state": "X"}]
    assert verify_chain(stored) is None


def test_audit_event_without_json_data_is_a_store_error_and_writes_nothing(store: Any) -> None:
    """An event not chained by ``next_event`` (no text of its own) is encoded by the store, and data
    JSON cannot hold is refused as for any other part of a commit."""
    create(store, "op1")
    before = snapshot(store, "op1")
    bad = replace(make_events("op1", 2)[1], data={"when": object()})
    with pytest.raises(StoreError, match="not plain JSON"):
        store.commit(Commit("op1", make_head("op1", "EXECUTING"), [JournalRow("note", {})], audit=[bad]))
    assert snapshot(store, "op1") == before
