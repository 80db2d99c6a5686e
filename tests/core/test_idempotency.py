"""The idempotency ledger's rules (D13, D16) and the default intent key."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbound.core.idempotency import LedgerAction, LedgerEntry, LedgerStatus, decide
from callbound.core.ids import default_intent_key


def entry(status: LedgerStatus, **kw: Any) -> LedgerEntry:
    base: dict[str, Any] = {
        "key": "ik_1",
        "tenant": "acme",
        "tool": "refund",
        "operation_id": "op-1",
        "status": status,
        "result": None,
        "attempts": 1,
    }
    base.update(kw)
    return LedgerEntry(**base)


def test_no_entry_runs() -> None:
    assert decide(None) is LedgerAction.RUN


@pytest.mark.parametrize(
    ("status", "action"),
    [
        (LedgerStatus.FAILED, LedgerAction.RUN),  # definitely not applied: may run again
        (LedgerStatus.SUCCEEDED, LedgerAction.REPLAY),  # never run twice
        (LedgerStatus.STARTED, LedgerAction.RECONCILE),  # left by a dead process: outcome unknown
        (LedgerStatus.UNKNOWN, LedgerAction.RECONCILE),
    ],
)
def test_decide(status: LedgerStatus, action: LedgerAction) -> None:
    assert decide(entry(status)) is action


@pytest.mark.parametrize(
    ("status", "action"),
    [
        (LedgerStatus.STARTED, LedgerAction.IN_PROGRESS),  # D16/D21: its owner may be in the handler
        (LedgerStatus.UNKNOWN, LedgerAction.RECONCILE),  # its owner gave up on it: nobody runs it
        (LedgerStatus.SUCCEEDED, LedgerAction.REPLAY),
        (LedgerStatus.FAILED, LedgerAction.RUN),
    ],
)
def test_decide_entry_held_by_another_running_operation(status: LedgerStatus, action: LedgerAction) -> None:
    assert decide(entry(status), held_elsewhere=True) is action


def test_d16_an_unknown_entry_whose_handler_is_still_alive_is_in_progress_elsewhere() -> None:
    alive = replace(entry(LedgerStatus.UNKNOWN), handler_alive=True)
    assert decide(alive, held_elsewhere=True) is LedgerAction.IN_PROGRESS
    assert decide(alive) is LedgerAction.RECONCILE  # its own operation, resumed: the thread is gone
    assert LedgerEntry.from_dict(alive.to_dict()) == alive
    assert "handler_alive" not in entry(LedgerStatus.UNKNOWN).to_dict()  # rows as before unless set


def test_every_status_has_a_rule_and_only_failed_or_missing_runs() -> None:
    for status in LedgerStatus:
        action = decide(entry(status))
        assert action in set(LedgerAction)
        assert (action is LedgerAction.RUN) == (status is LedgerStatus.FAILED)


def test_statuses_and_actions_are_strings() -> None:
    assert {s.value for s in LedgerStatus} == {"STARTED", "SUCCEEDED", "FAILED", "UNKNOWN"}
    assert {a.value for a in LedgerAction} == {"RUN", "REPLAY", "RECONCILE", "IN_PROGRESS"}
    assert LedgerStatus.SUCCEEDED == "SUCCEEDED"


@pytest.mark.parametrize("status", list(LedgerStatus))
def test_entry_round_trip(status: LedgerStatus) -> None:
    e = entry(status, result={"ok": True, "data": {"refund_id": "rf_1"}}, attempts=3, lease_token=42)
    d = e.to_dict()
    assert d["status"] == status.value
    restored = LedgerEntry.from_dict(json.loads(json.dumps(d)))
    assert restored == e
    assert restored.status is status


def test_entry_round_trip_with_defaults() -> None:
    e = entry(LedgerStatus.STARTED)
    assert e.lease_token is None
    assert LedgerEntry.from_dict(e.to_dict()) == e


def test_unknown_status_in_stored_data_fails_fast() -> None:
    d = entry(LedgerStatus.STARTED).to_dict()
    d["status"] = "DONE"
    with pytest.raises(ValueError):
        LedgerEntry.from_dict(d)


# --- default intent key --------------------------------------------------------------------------

args = st.dictionaries(st.text(max_size=5), st.integers(-1000, 1000) | st.text(max_size=5), max_size=4)


@given(args)
def test_intent_key_ignores_key_order(arguments: dict[str, Any]) -> None:
    reordered = dict(reversed(list(arguments.items())))
    assert default_intent_key("refund", "v1", arguments, "op") == default_intent_key(
        "refund", "v1", reordered, "op"
    )


@given(a=args, b=args)
def test_intent_key_separates_different_intents(a: dict[str, Any], b: dict[str, Any]) -> None:
    same = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert (
        default_intent_key("refund", "v1", a, "op") == default_intent_key("refund", "v1", b, "op")
    ) == same


def test_intent_key_shape_and_inputs() -> None:
    base = default_intent_key("refund", "v1", {"order_id": "A1", "amount": 40}, "op-1")
    assert base.startswith("ik_") and len(base) == 3 + 48
    assert base == default_intent_key("refund", "v1", {"amount": 40.0, "order_id": "A1"}, "op-1")
    assert base != default_intent_key("wire", "v1", {"order_id": "A1", "amount": 40}, "op-1")
    assert base != default_intent_key("refund", "v2", {"order_id": "A1", "amount": 40}, "op-1")
    assert base != default_intent_key("refund", "v1", {"order_id": "A1", "amount": 40}, "op-2")
    assert base != default_intent_key("refund", "v1", {"order_id": "A2", "amount": 40}, "op-1")
