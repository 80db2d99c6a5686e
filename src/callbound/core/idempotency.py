"""The idempotency ledger's states and rules (D13, D16). The store keeps the entries; this decides."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from .canonical import canonical_bytes, canonical_json, sha256_hex
from .errors import USER_CODE_FAILURES, CanonicalizationError, UsageError
from .guards import identical_key
from .types import ok_result

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .registry import ToolSpec


# Default factories that give the same value every time: a field defaulted by any other (a uuid4, a
# clock, a lambda) makes the validated arguments differ from one validation to the next.
_PLAIN_FACTORIES: tuple[Any, ...] = (list, dict, tuple, str, int, float, bool)


@functools.cache
def _plain_dump(model: type[BaseModel]) -> bool:
    """Whether ``model_dump(mode="json")`` of ``model`` says everything its handler is given, the same
    way every time: no custom serializer (a ``SecretStr``, which dumps as stars, included), no field
    left out of dumps (``exclude``), no computed field, no default factory that may give another value
    on each validation. Read once per model from its core schema, definitions included."""
    stack: list[Any] = [model.__pydantic_core_schema__]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if str(key).startswith("serialization") or (key == "computed_fields" and value):
                    return False
                if key == "default_factory" and value not in _PLAIN_FACTORIES:
                    return False
                if isinstance(value, dict | list | tuple):
                    stack.append(value)
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return True


def arguments_identity(spec: ToolSpec, arguments_json: str | None, args: BaseModel | None = None) -> str:
    """What a call asks for, as canonical JSON: the arguments as the handler gets them, validated
    (``args``, else ``arguments_json`` validated again under ``spec``), defaults filled in and values
    as validators normalised them. The default intent key (D13 (1)) and the identical-call guard
    (D13 (2)) are derived from it, so ``{"amount": 40}`` and ``{"amount": 40, "currency": "USD"}``
    (the default) are one intent, not two refunds (review round 17, r2 F2).

    Falls back to ``arguments_json`` (as sent) where the validated form may not say exactly what the
    handler gets, or not the same way every time: a model whose dump leaves something out or could
    change between validations (``_plain_dump``), a set or a non-string-keyed map (``spec.can_fold``:
    a set dumps in hash order, which differs between processes), or a dump or encoding that fails.
    Never raises (D4): it runs in planning and around every handler."""
    sent = arguments_json if arguments_json is not None else "null"
    try:
        if spec.can_fold or not _plain_dump(spec.strict_params):
            return sent
        if args is None:
            args = spec.validate_json(sent)
        return canonical_json(args.model_dump(mode="json"))
    except USER_CODE_FAILURES:  # user validators and serializers, CanonicalizationError (NaN, big ints)
        return sent


def run_key(spec: ToolSpec, arguments_json: str | None, args: BaseModel | None = None) -> str:
    """D13 (2)'s (tool, schema_version, canonical arguments) of a call, its arguments as validated
    (``arguments_identity``): the spellings of one call (a default left out or sent) are one call."""
    return identical_key(spec.name, spec.schema_version, arguments_identity(spec, arguments_json, args))


def default_intent_key_json(tool: str, schema_version: str, identity: str, operation_id: str) -> str:
    """``ik_`` and a digest of the tool, its schema version, the arguments' identity
    (``arguments_identity``) and the operation id, never the call id (D13). The same text as
    ``ids.default_intent_key`` of the decoded arguments, without encoding them again."""
    text = (
        f'{{"arguments":{identity},"operation_id":{canonical_json(operation_id)},'
        f'"schema_version":{canonical_json(schema_version)},"tool":{canonical_json(tool)}}}'
    )
    return f"ik_{sha256_hex(text)[:48]}"


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
    # Set when a human settled the entry by hand (``settle``): {"by", "at" (ISO-8601 UTC), "note",
    # "was" (the status before), "operation_id" (the operation that held it then)}. Saved only when
    # set, so entries written before it existed read back unchanged.
    settled: dict[str, Any] | None = None
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
            **({"settled": self.settled} if self.settled is not None else {}),
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
            d.get("settled"),
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


# The data replayed to the model for an intent settled as applied without a result: it says the effect
# happened, and nothing about who settled it or why (names and notes stay in the ledger).
SETTLED_APPLIED: dict[str, Any] = {
    "applied": True,
    "detail": "an operator confirmed in the downstream system that this was carried out; no result "
    "details were recorded",
}


# The data replayed for a SUCCEEDED intent whose recorded result was purged (set to null for privacy,
# which D20 allows): the effect happened, and that is all that is left to say about it.
PURGED_APPLIED: dict[str, Any] = {
    "applied": True,
    "detail": "this was already carried out; its result details are no longer kept",
}


def settle_refusal(entry: LedgerEntry, holder_ended: bool) -> str | None:
    """Why a human may not settle ``entry`` now (None: they may). ``holder_ended``: the operation
    that holds it has ended (a terminal state) or no longer exists.

    Only an outcome nobody can tell is settled by hand (D16): an UNKNOWN entry, or a STARTED one left
    by an operation that ended. SUCCEEDED and FAILED are settled already. An UNKNOWN or STARTED entry
    of an operation that has not ended is that operation's to reconcile when it is driven again
    (D16, D21), except an UNKNOWN entry whose handler was still running when its operation gave up on
    it (``handler_alive``): no operation will ever reconcile it, so the human asserts its outcome."""
    held_by = f"operation {entry.operation_id}"
    if entry.status in (LedgerStatus.SUCCEEDED, LedgerStatus.FAILED):
        done = (
            "SUCCEEDED: its result is replayed to every later proposal of this intent"
            if entry.status is LedgerStatus.SUCCEEDED
            else "FAILED: definitely not applied, and the next proposal of this intent runs it again"
        )
        by = entry.settled.get("by") if entry.settled else None
        return (
            f"it is settled already ({done}"
            + (f"; settled by {by} at {entry.settled.get('at')}" if entry.settled and by else "")
            + "); there is nothing to settle"
        )
    if entry.status is LedgerStatus.UNKNOWN and entry.handler_alive:
        return None
    if holder_ended:
        return None
    if entry.status is LedgerStatus.STARTED:
        return (
            f"it is STARTED by {held_by}, which has not ended: its handler may be running right now. "
            f"Let it finish, or resume it (callbound resume {entry.operation_id}; after a crash it "
            f"reconciles the write itself), or cancel it (callbound ops cancel {entry.operation_id}), "
            "then settle the entry if it is still open"
        )
    return (
        f"it is UNKNOWN and {held_by} has not ended: that operation reconciles it when it is resumed. "
        f"Resume it (callbound resume {entry.operation_id}) or cancel it (callbound ops cancel "
        f"{entry.operation_id}) first, then settle the entry if it is still UNKNOWN"
    )


def settle(
    entry: LedgerEntry,
    *,
    applied: bool,
    result: dict[str, Any] | None,
    by: str,
    note: str,
    at: datetime,
) -> LedgerEntry:
    """``entry`` settled by hand: someone (``by``) checked the downstream system and says whether the
    effect happened. Applied: SUCCEEDED, and ``result`` (the tool's result data; None: a plain
    "applied" record) is what every later proposal of the intent replays, without running the
    handler. Not applied: FAILED, which the next proposal runs again (D16). The attempts are kept,
    the handler is no longer taken as running, and the record of who settled it, when and why is
    kept in the entry (``settled``). Pure: ``settle_refusal`` decides whether it may be done, the
    store writes it only if the entry is still the one read."""
    who = by.strip()
    if not who:
        raise UsageError("say who settles the entry: a non-empty name or identity (--by)")
    if at.tzinfo is None or at.utcoffset() is None:
        raise UsageError("the settle time must be timezone-aware (UTC)")
    if not applied and result is not None:
        raise UsageError("a result can only be recorded for an effect that was applied")
    model_result = ok_result(dict(SETTLED_APPLIED) if result is None else result) if applied else None
    if model_result is not None:
        try:
            canonical_bytes(model_result)  # replayed and hashed into bindings: it must be exact JSON
        except CanonicalizationError as exc:
            raise UsageError(f"the result is not JSON that can be replayed exactly: {exc}") from exc
    record = {
        "by": who,
        "at": at.astimezone(UTC).isoformat(),
        "note": note,
        "was": entry.status.value,
        "operation_id": entry.operation_id,
    }
    return replace(
        entry,
        status=LedgerStatus.SUCCEEDED if applied else LedgerStatus.FAILED,
        result=model_result,
        handler_alive=False,
        lease_token=None,
        settled=record,
        claim=False,
        claim_over=None,
    )
