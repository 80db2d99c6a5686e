"""Approvals (D17): single-use decisions, re-validation on resume, and approval ids (D17, D23)."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbound.core.approvals import (
    DEFAULT_APPROVAL_TTL,
    Decision,
    PendingApproval,
    is_expired,
    record_decision,
    revalidate,
)
from callbound.core.errors import ApprovalAlreadyDecided, UsageError
from callbound.core.ids import RandomIds, SequentialIds

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
EXPIRES = T0 + DEFAULT_APPROVAL_TTL


def pending(**kw: Any) -> PendingApproval:
    base: dict[str, Any] = {
        "approval_id": "apr_1",
        "operation_id": "op-1",
        "tenant": "acme",
        "subject": "user-1",
        "response_id": "resp_1",
        "call_id": "call_1",
        "tool": "wire",
        "arguments": {"order_id": "A1", "amount": 40},
        "argument_digest": "d" * 64,
        "policy_revision": "policy-7",
        "schema_version": "wire-v1",
        "tool_digest": "t" * 64,
        "created_at": T0,
        "expires_at": EXPIRES,
    }
    base.update(kw)
    return PendingApproval(**base)


CURRENT = {
    "argument_digest": "d" * 64,
    "policy_revision": "policy-7",
    "schema_version": "wire-v1",
    "tool_digest": "t" * 64,
}


def decided(
    verdict: str = "approve", approver: str = "alice", at: datetime = T0 + timedelta(hours=1)
) -> PendingApproval:
    d = Decision.approve("apr_1", approver) if verdict == "approve" else Decision.deny("apr_1", approver)
    out, changed = record_decision(pending(), d, at)
    assert changed
    return out


def test_default_ttl_is_24_hours() -> None:
    assert timedelta(hours=24) == DEFAULT_APPROVAL_TTL


# --- Decision ------------------------------------------------------------------------------------


def test_decision_constructors() -> None:
    a = Decision.approve("apr_1", "alice", "looks right")
    assert (a.approval_id, a.verdict, a.approver, a.reason, a.status) == (
        "apr_1",
        "approve",
        "alice",
        "looks right",
        "approved",
    )
    d = Decision.deny("apr_1", "bob")
    assert (d.verdict, d.approver, d.reason, d.status) == ("deny", "bob", None, "denied")


@pytest.mark.parametrize("approver", ["", None, "   ", "\t\n"])
@pytest.mark.parametrize("build", [Decision.approve, Decision.deny])
def test_decisions_require_an_approver(build: Any, approver: Any) -> None:
    with pytest.raises(UsageError):
        build("apr_1", approver)


# --- record_decision -----------------------------------------------------------------------------


def test_recording_a_decision() -> None:
    at = T0 + timedelta(minutes=5)
    out, changed = record_decision(pending(), Decision.approve("apr_1", "alice", "ok"), at)
    assert changed
    assert (out.status, out.approver, out.decided_at, out.reason) == ("approved", "alice", at, "ok")
    # Everything else is as it was.
    assert (
        dataclasses.replace(out, status="pending", approver=None, decided_at=None, reason=None) == pending()
    )


def test_denial_is_recorded() -> None:
    out = decided("deny", "bob")
    assert (out.status, out.approver) == ("denied", "bob")


@pytest.mark.parametrize("verdict", ["approve", "deny"])
def test_same_verdict_same_approver_returns_the_original(verdict: str) -> None:
    first = decided(verdict, "alice", T0 + timedelta(hours=1))
    again = (
        Decision.approve("apr_1", "alice", "again")
        if verdict == "approve"
        else Decision.deny("apr_1", "alice")
    )
    out, changed = record_decision(first, again, T0 + timedelta(hours=5))
    assert not changed
    assert out is first or out == first
    assert out.decided_at == T0 + timedelta(hours=1)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("approve", "alice"), ("deny", "alice")),
        (("deny", "alice"), ("approve", "alice")),
        (("approve", "alice"), ("approve", "mallory")),
        (("deny", "alice"), ("deny", "mallory")),
        (("approve", "alice"), ("deny", "mallory")),
    ],
)
def test_any_other_decision_on_a_decided_approval_raises(
    first: tuple[str, str], second: tuple[str, str]
) -> None:
    done = decided(*first)
    build = Decision.approve if second[0] == "approve" else Decision.deny
    with pytest.raises(ApprovalAlreadyDecided):
        record_decision(done, build("apr_1", second[1]), T0 + timedelta(hours=2))


def test_approval_already_decided_is_a_usage_error() -> None:
    assert issubclass(ApprovalAlreadyDecided, UsageError)


def test_decision_for_another_approval_is_refused() -> None:
    with pytest.raises(UsageError):
        record_decision(pending(), Decision.approve("apr_2", "alice"), T0)


# --- revalidate ----------------------------------------------------------------------------------


def test_approved_and_unchanged_may_run() -> None:
    assert revalidate(decided(), T0 + timedelta(hours=2), **CURRENT) is None


def test_approved_in_time_runs_even_if_resumed_later() -> None:
    assert (
        revalidate(decided(at=EXPIRES - timedelta(seconds=1)), EXPIRES + timedelta(hours=1), **CURRENT)
        is None
    )


@pytest.mark.parametrize("offset", [timedelta(0), timedelta(microseconds=1), timedelta(days=3)])
def test_decided_at_or_after_expiry_is_expired(offset: timedelta) -> None:
    for verdict in ("approve", "deny"):
        p = decided(verdict, at=EXPIRES + offset)
        assert revalidate(p, EXPIRES + offset, **CURRENT) == "APPROVAL_EXPIRED"


def test_undecided_past_expiry_is_expired() -> None:
    assert revalidate(pending(), EXPIRES, **CURRENT) == "APPROVAL_EXPIRED"
    assert is_expired(pending(), EXPIRES)
    assert not is_expired(pending(), EXPIRES - timedelta(microseconds=1))


@pytest.mark.parametrize("field", sorted(CURRENT))
def test_changed_context_is_stale(field: str) -> None:
    now = T0 + timedelta(hours=2)
    assert revalidate(decided(), now, **{**CURRENT, field: "changed"}) == "APPROVAL_STALE"


def test_denied_is_denied() -> None:
    assert revalidate(decided("deny"), T0 + timedelta(hours=2), **CURRENT) == "DENIED"


def test_expiry_wins_over_staleness_and_denial() -> None:
    p = decided("deny", at=EXPIRES)
    assert revalidate(p, EXPIRES, **{**CURRENT, "policy_revision": "policy-8"}) == "APPROVAL_EXPIRED"


def test_staleness_wins_over_approval() -> None:
    # An approval given for 40 EUR does not cover 4000 EUR.
    p = decided("approve")
    assert (
        revalidate(p, T0 + timedelta(hours=2), **{**CURRENT, "argument_digest": "e" * 64}) == "APPROVAL_STALE"
    )


@given(
    status=st.sampled_from(["approve", "deny"]),
    decided_after=st.timedeltas(min_value=timedelta(0), max_value=timedelta(hours=48)),
    resume_after=st.timedeltas(min_value=timedelta(0), max_value=timedelta(hours=48)),
    changed=st.sets(st.sampled_from(sorted(CURRENT))),
)
def test_revalidate_property(
    status: str, decided_after: timedelta, resume_after: timedelta, changed: set[str]
) -> None:
    decided_at = T0 + decided_after
    p = decided(status, at=decided_at)
    now = decided_at + resume_after
    code = revalidate(p, now, **{k: ("x" if k in changed else v) for k, v in CURRENT.items()})
    if decided_at >= EXPIRES:
        assert code == "APPROVAL_EXPIRED"
    elif changed:
        assert code == "APPROVAL_STALE"
    elif status == "deny":
        assert code == "DENIED"
    else:
        assert code is None


# --- serialisation -------------------------------------------------------------------------------


def test_pending_round_trip() -> None:
    for p in [pending(), decided(), decided("deny", "bob"), pending(arguments=None, reason="why")]:
        d = p.to_dict()
        assert PendingApproval.from_dict(d) == p
        assert d["created_at"] == T0.isoformat()
        # decision_seal is written only where there is one: rows without it keep their stored shape
        assert set(d) == {f.name for f in dataclasses.fields(PendingApproval)} - {"decision_seal"}
    sealed = dataclasses.replace(decided(), decision_seal="ab" * 32)
    assert PendingApproval.from_dict(sealed.to_dict()) == sealed


def test_round_trip_through_json() -> None:
    import json

    p = decided()
    assert PendingApproval.from_dict(json.loads(json.dumps(p.to_dict()))) == p


# --- ids -----------------------------------------------------------------------------------------


def test_random_ids_carry_128_random_bits() -> None:
    ids = RandomIds()
    seen = set()
    for _ in range(200):
        value = ids.new_id("apr")
        assert re.fullmatch(r"apr_[0-9a-f]{32}", value), value
        seen.add(value)
    assert len(seen) == 200
    # The hex digits vary in every position (not a counter or a timestamp with a random tail).
    samples = [ids.new_id("x")[2:] for _ in range(200)]
    for pos in range(32):
        assert len({s[pos] for s in samples}) > 1, pos


def test_sequential_ids_are_deterministic() -> None:
    a, b = SequentialIds(), SequentialIds()
    first = [a.new_id("op") for _ in range(3)]
    assert first == [b.new_id("op") for _ in range(3)]
    assert first[0] == "op_" + "0" * 31 + "1"
    assert len(set(first)) == 3
    assert SequentialIds(start=10).new_id("apr") == "apr_" + f"{10:032x}"
