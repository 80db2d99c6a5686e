"""The idempotency ledger's states and rules (D13, D16). The store keeps the entries; this decides."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class LedgerStatus(StrEnum):
    STARTED = "STARTED"  # committed before the handler runs (D18 C1)
    SUCCEEDED = "SUCCEEDED"  # the effect happened; ``result`` is the model_result to replay
    FAILED = "FAILED"  # definitely not applied (NotApplied); may run again
    UNKNOWN = "UNKNOWN"  # timeout, exception or crash: must be reconciled, never blindly re-run


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    key: str
    tenant: str
    tool: str
    operation_id: str
    status: LedgerStatus
    result: dict[str, Any] | None
    attempts: int
    lease_token: int | None = None
    # UNKNOWN because its sync handler timed out and was still alive after the grace period: the effect
    # may still land at any moment, so no other operation may reconcile or re-run it (D16); only a
    # human, or the operation itself once resumed elsewhere, settles it.
    handler_alive: bool = False
    # Not saved: this entry takes the intent over (a fresh attempt's STARTED, or the UNKNOWN a
    # reconcile starts with), decided on the entry read before it: ``claim_over`` is that entry's
    # (operation_id, status), None when the ledger held nothing. The store refuses the commit
    # (IntentTaken) unless the key still holds that entry, or an entry of this operation
    # (``claim_refused``): two operations that read one FAILED entry at the same moment cannot both
    # run the effect again.
    claim: bool = field(default=False, compare=False)
    claim_over: tuple[str, str] | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "tenant": self.tenant,
            "tool": self.tool,
            "operation_id": self.operation_id,
            "status": self.status.value,
            "result": self.result,
            "attempts": self.attempts,
            "lease_token": self.lease_token,
            **({"handler_alive": True} if self.handler_alive else {}),
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> LedgerEntry:
        return LedgerEntry(
            d["key"],
            d["tenant"],
            d["tool"],
            d["operation_id"],
            LedgerStatus(d["status"]),
            d.get("result"),
            int(d["attempts"]),
            d.get("lease_token"),
            bool(d.get("handler_alive", False)),
        )


def claim_refused(entry: LedgerEntry, held: tuple[str, str] | None) -> bool:
    """True when a store must refuse the claim ``entry`` (``entry.claim``) because the key's entry
    changed since the claim was decided. ``held`` is the key's current (operation_id, status), None if
    there is none (never written, or purged: nobody holds it). The claiming operation's own entry
    never refuses it: only that operation writes over its own entries once it holds the key."""
    if held is None or held[0] == entry.operation_id:
        return False
    return held != entry.claim_over


class LedgerAction(StrEnum):
    RUN = "RUN"  # no entry, or FAILED: run the handler
    REPLAY = "REPLAY"  # SUCCEEDED: return the recorded result, do not run
    RECONCILE = "RECONCILE"  # UNKNOWN, or STARTED left by a dead process: ask the tool's reconcile
    IN_PROGRESS = "IN_PROGRESS"  # STARTED by another operation that may be running it now: hands off


def decide(entry: LedgerEntry | None, *, held_elsewhere: bool = False) -> LedgerAction:
    """What to do with a proposal of an intent, given its ledger entry.

    A STARTED entry of the proposing operation itself was left by a process that died mid-call (the
    operation is being driven again, so that process is gone): its outcome is unknown, so it is
    reconciled, never re-run blindly. A STARTED entry of another operation that has not ended
    (``held_elsewhere``) may be inside its handler right now: reconciling would find nothing yet and
    run the effect a second time, so it is left alone (D16: never reconcile while the original may
    still be running; D21: only its own operation's recovery, after its lease expired, settles it).
    An UNKNOWN entry of another operation whose handler was still alive when that operation gave up on
    it (``handler_alive``) is held elsewhere the same way, whether or not that operation has ended."""
    if entry is None or entry.status is LedgerStatus.FAILED:
        return LedgerAction.RUN
    if entry.status is LedgerStatus.SUCCEEDED:
        return LedgerAction.REPLAY
    if held_elsewhere and (
        entry.status is LedgerStatus.STARTED or (entry.status is LedgerStatus.UNKNOWN and entry.handler_alive)
    ):
        return LedgerAction.IN_PROGRESS
    return LedgerAction.RECONCILE
