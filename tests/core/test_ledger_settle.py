"""Settling a ledger entry by hand: the pure rules (D13, D16).

D16: an outcome nobody could tell is never guessed: only a human who checked the downstream system may
record it, and only for an entry no operation will reconcile itself. D13: a settled entry is what every
later proposal of the intent replays (SUCCEEDED) or runs again (FAILED).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from callbound.core.errors import UsageError
from callbound.core.idempotency import (
    SETTLED_APPLIED,
    LedgerAction,
    LedgerEntry,
    LedgerStatus,
    decide,
    settle,
    settle_refusal,
)
from callbound.core.types import ok_result

AT = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)


def entry(status: LedgerStatus = LedgerStatus.UNKNOWN, **kw: Any) -> LedgerEntry:
    base: dict[str, Any] = {
        "key": "ik_pay-A1",
        "tenant": "acme",
        "tool": "pay",
        "operation_id": "op-1",
        "status": status,
        "result": None,
        "attempts": 2,
        "lease_token": 7,
    }
    base.update(kw)
    return LedgerEntry(**base)


def settled(e: LedgerEntry | None = None, **kw: Any) -> LedgerEntry:
    args: dict[str, Any] = {"applied": True, "result": None, "by": "alice", "note": "PSP ticket 9", "at": AT}
    args.update(kw)
    return settle(e or entry(), **args)


# ---- settle_refusal: who may be settled (D16) ---------------------------------------------------------


@pytest.mark.parametrize("holder_ended", [True, False])
@pytest.mark.parametrize("status", [LedgerStatus.SUCCEEDED, LedgerStatus.FAILED])
def test_a_settled_outcome_is_not_settled_again(status: LedgerStatus, holder_ended: bool) -> None:
    """D13/D16: SUCCEEDED is replayed and FAILED runs again; neither is an unknown outcome."""
    why = settle_refusal(entry(status, result=ok_result({"x": 1})), holder_ended)
    assert why is not None
    assert "settled already" in why and status.value in why and "nothing to settle" in why


def test_a_second_settle_names_who_settled_first() -> None:
    first = settled()
    why = settle_refusal(first, holder_ended=True)
    assert why is not None and "settled by alice at 2025-03-01T09:30:00+00:00" in why


@pytest.mark.parametrize("status", [LedgerStatus.UNKNOWN, LedgerStatus.STARTED])
def test_an_unknown_outcome_of_an_ended_operation_may_be_settled(status: LedgerStatus) -> None:
    """D16: nobody will reconcile it any more (its operation ended, or its rows are gone)."""
    assert settle_refusal(entry(status), holder_ended=True) is None


def test_an_unknown_entry_of_a_running_operation_is_that_operations_to_reconcile() -> None:
    """D16: the operation reconciles its own UNKNOWN entry when it is resumed; the human is told so."""
    why = settle_refusal(entry(LedgerStatus.UNKNOWN), holder_ended=False)
    assert why is not None
    assert "op-1 has not ended" in why
    assert "callbound resume op-1" in why and "callbound ops cancel op-1" in why


def test_a_started_entry_of_a_running_operation_may_be_inside_its_handler() -> None:
    """D16, D21: never settle (nor reconcile) while the original may still be running."""
    why = settle_refusal(entry(LedgerStatus.STARTED), holder_ended=False)
    assert why is not None
    assert "STARTED by operation op-1, which has not ended" in why
    assert "callbound resume op-1" in why and "callbound ops cancel op-1" in why


@pytest.mark.parametrize("holder_ended", [True, False])
def test_a_handler_alive_entry_may_be_settled_whether_or_not_its_operation_ended(holder_ended: bool) -> None:
    """D16: no operation ever reconciles a handler_alive entry; the operator asserts its outcome."""
    assert settle_refusal(entry(LedgerStatus.UNKNOWN, handler_alive=True), holder_ended) is None


# ---- settle: the entry produced -------------------------------------------------------------------------


def test_applied_without_a_result_replays_a_plain_applied_record() -> None:
    before = entry(handler_alive=True)
    after = settled(before)
    assert after.status is LedgerStatus.SUCCEEDED
    assert after.result == ok_result(SETTLED_APPLIED)
    assert after.result is not None and after.result["ok"] is True
    # the model sees that it happened, not who settled it or why
    text = json.dumps(after.result)
    assert "alice" not in text and "PSP" not in text
    assert decide(after) is LedgerAction.REPLAY  # D13: later proposals replay, never run
    assert decide(after, held_elsewhere=True) is LedgerAction.REPLAY


def test_applied_with_a_result_replays_that_result_as_a_model_envelope() -> None:
    after = settled(result={"refund_id": "rf_1", "amount": 40.0})
    assert after.result == {"ok": True, "data": {"refund_id": "rf_1", "amount": 40.0}}


def test_not_applied_is_failed_and_runs_again() -> None:
    after = settled(applied=False)
    assert after.status is LedgerStatus.FAILED
    assert after.result is None
    assert decide(after) is LedgerAction.RUN  # D16: FAILED means definitely not applied


def test_settle_keeps_the_identity_and_attempts_and_clears_the_rest() -> None:
    before = entry(LedgerStatus.UNKNOWN, handler_alive=True, claim=True, claim_over=("op-0", "FAILED"))
    after = settled(before)
    assert (after.key, after.tenant, after.tool, after.operation_id) == ("ik_pay-A1", "acme", "pay", "op-1")
    assert after.attempts == 2
    assert after.handler_alive is False
    assert after.lease_token is None
    assert after.claim is False and after.claim_over is None  # a settle is no claim
    assert after.settled == {
        "by": "alice",
        "at": "2025-03-01T09:30:00+00:00",
        "note": "PSP ticket 9",
        "was": "UNKNOWN",
        "operation_id": "op-1",
    }
    assert before.status is LedgerStatus.UNKNOWN and before.settled is None  # pure: a new entry


def test_settle_records_a_started_entry_as_was_started() -> None:
    assert settled(entry(LedgerStatus.STARTED)).settled == {
        "by": "alice",
        "at": "2025-03-01T09:30:00+00:00",
        "note": "PSP ticket 9",
        "was": "STARTED",
        "operation_id": "op-1",
    }


def test_the_settle_time_is_stored_in_utc() -> None:
    paris = timezone(timedelta(hours=1))
    after = settled(at=datetime(2025, 3, 1, 10, 30, tzinfo=paris))
    assert after.settled is not None and after.settled["at"] == "2025-03-01T09:30:00+00:00"


def test_by_is_stripped() -> None:
    after = settled(by="  alice@example.com \n")
    assert after.settled is not None and after.settled["by"] == "alice@example.com"


@pytest.mark.parametrize("by", ["", "   ", "\n\t"])
def test_by_must_name_someone(by: str) -> None:
    with pytest.raises(UsageError, match="non-empty"):
        settled(by=by)


def test_a_naive_settle_time_is_refused() -> None:
    with pytest.raises(UsageError, match="timezone-aware"):
        settled(at=datetime(2025, 3, 1, 9, 30))


def test_a_result_for_an_effect_that_did_not_happen_is_refused() -> None:
    with pytest.raises(UsageError, match="applied"):
        settled(applied=False, result={"refund_id": "rf_1"})


@pytest.mark.parametrize("bad", [{"x": float("nan")}, {"x": 2**60}, {"x": object()}])
def test_a_result_that_cannot_be_replayed_exactly_is_refused(bad: dict[str, Any]) -> None:
    """D6: the replayed result is hashed into every binding; it must be exact JSON."""
    with pytest.raises(UsageError, match="replayed exactly"):
        settled(result=bad)


def test_the_default_applied_record_is_not_shared_between_entries() -> None:
    a, b = settled(), settled()
    assert a.result is not None and b.result is not None
    a.result["data"]["detail"] = "changed"
    assert b.result["data"] == SETTLED_APPLIED


# ---- to_dict / from_dict ----------------------------------------------------------------------------------


def test_a_settled_entry_round_trips_through_json() -> None:
    after = settled(result={"refund_id": "rf_1"})
    data = json.loads(json.dumps(after.to_dict()))
    assert data["settled"]["by"] == "alice"
    assert LedgerEntry.from_dict(data) == after


def test_an_entry_never_settled_saves_no_settled_key() -> None:
    """Entries written before settling existed, and every entry the runtime writes, look as before."""
    e = entry(LedgerStatus.SUCCEEDED, result=ok_result({"x": 1}))
    assert "settled" not in e.to_dict()


def test_an_old_entry_without_settled_reads_back() -> None:
    old = {
        "key": "ik_pay-A1",
        "tenant": "acme",
        "tool": "pay",
        "operation_id": "op-1",
        "status": "UNKNOWN",
        "result": None,
        "attempts": 1,
        "lease_token": 3,
        "handler_alive": True,
    }
    e = LedgerEntry.from_dict(old)
    assert e.settled is None and e.handler_alive and e.status is LedgerStatus.UNKNOWN
    assert e.to_dict() == old


def test_settled_takes_part_in_equality() -> None:
    """The store's compare-and-set compares whole entries: a settle record is part of what was read."""
    a = settled()
    b = LedgerEntry.from_dict({**a.to_dict(), "settled": {**(a.settled or {}), "by": "mallory"}})
    assert a != b
