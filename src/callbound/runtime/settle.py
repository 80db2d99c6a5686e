"""Settling an idempotency-ledger entry by hand (D16): a write whose outcome nobody could tell (UNKNOWN,
or STARTED by an operation that ended) holds its key until a human who checked the downstream system
records what happened. "A timeout whose outcome is unknown is reconciled, not guessed": the human is the
reconcile of last resort.

The record of the settlement (who, when, why, and what the entry was) is kept in the ledger entry
itself, not in any operation's audit chain: the operation that left the entry may have ended, and its
chain is never appended to after its end.
"""

from __future__ import annotations

import logging
import os
from datetime import datetime
from typing import Any

from ..core.errors import SettleRefused, UnknownLedgerEntry, UsageError
from ..core.idempotency import LedgerEntry, settle, settle_refusal
from ..core.states import TERMINAL
from ..stores.base import Store

log = logging.getLogger("callbound.runtime")


def holder_ended(store: Store, operation_id: str) -> bool:
    """True when the operation has ended (a terminal state) or no longer exists (its rows were
    purged: nobody can be running it). A head without a readable state counts as running: the safe
    side, a refusal rather than a settle under a running handler."""
    stored = store.load_operation(operation_id)
    if stored is None:
        return True
    state = stored.head.get("state")
    return isinstance(state, str) and state in TERMINAL  # a StrEnum set: names match


def settle_intent(
    store: Store,
    tenant: str,
    key: str,
    *,
    applied: bool,
    result: dict[str, Any] | None = None,
    by: str,
    note: str = "",
    now: datetime,
) -> LedgerEntry:
    """Record by hand the outcome of the write held under (``tenant``, ``key``) and return the settled
    entry. ``applied``: the effect happened (the entry becomes SUCCEEDED and later proposals of the
    intent replay ``result``, or a plain "applied" record, without running the handler); otherwise it
    definitely did not (FAILED: the next proposal runs it again).

    Raises ``UnknownLedgerEntry`` (no such entry), ``UsageError`` (``applied`` not a bool, an empty or
    non-text ``by`` or ``note``, a ``now`` that is not an aware datetime, a result that is not a JSON
    object callbound can replay exactly), ``SettleRefused`` (the entry is settled already, or its operation has not ended
    and reconciles it itself: ``settle_refusal``) and ``LedgerChanged`` (the entry changed between
    this read and the write, which was not made: read it again and decide again)."""
    _check_store(store)
    _check_settle_args(applied=applied, result=result, by=by, note=note, now=now)
    if any(isinstance(v, str) and "\x00" in v for v in (tenant, key)):
        # no entry holds a NUL (dispatch refuses such intents), and PostgreSQL refuses the lookup
        # itself: a StoreError, as if the database were down, where the other stores found nothing
        raise UnknownLedgerEntry(tenant, key)
    entry = store.ledger_get(tenant, key)
    if entry is None:
        raise UnknownLedgerEntry(tenant, key)
    settled = settle(entry, applied=applied, result=result, by=by, note=note, at=now)  # usage first
    why = settle_refusal(entry, holder_ended(store, entry.operation_id))
    if why is not None:
        raise SettleRefused(tenant, key, why)
    store.settle_ledger(entry, settled)
    log.info(
        "ledger %s of tenant %s settled %s by %s (was %s, held by operation %s)",
        key,
        tenant,
        settled.status.value,
        settled.settled["by"] if settled.settled else by,
        entry.status.value,
        entry.operation_id,
    )
    return settled


def _check_store(store: object) -> None:
    """A store URL, as ``callbound ledger settle --store`` takes it, raised AttributeError ('str' object
    has no attribute 'ledger_get') (review round 16, F10)."""
    if isinstance(store, str | bytes | os.PathLike):
        raise UsageError(
            f"settle_intent(store, ...) takes a Store object, not a URL or path ({store!r}): open one with "
            "callbound.stores.open(url, create=False), e.g. callbound.stores.open('sqlite:///callbound.db', "
            "create=False)"
        )
    if not all(callable(getattr(store, m, None)) for m in ("ledger_get", "settle_ledger", "load_operation")):
        raise UsageError(
            "settle_intent(store, ...) takes a Store (MemoryStore, or callbound.stores.open(url)), not "
            f"{type(store).__name__}"
        )


def _check_settle_args(*, applied: Any, result: Any, by: Any, note: Any, now: Any) -> None:
    """The arguments' types, before anything is read or written. ``applied`` was read by its truth:
    ``applied="no"`` recorded the refund SUCCEEDED, so it was replayed as done and never made (and
    ``None`` recorded FAILED, which runs it again); a ``by`` or ``now`` of the wrong type raised
    AttributeError, a ``note`` was stored as given, and a result that is not an object (``"x"``,
    ``[1]``) was replayed to the model in place of the tool's result data, which the CLI refuses."""
    if applied is not True and applied is not False:
        raise UsageError(
            f"applied must be True (the effect happened) or False (it definitely did not), not {applied!r}"
        )
    for what, text in (("by", by), ("note", note)):
        if not isinstance(text, str):
            raise UsageError(f"{what} must be text, not {type(text).__name__} {text!r}")
        try:
            text.encode("utf-8")  # recorded in the entry and shown by `callbound ledger show`
        except UnicodeEncodeError as exc:
            raise UsageError(
                f"{what} holds a lone surrogate ({text[exc.start]!r} at {exc.start}), which cannot be "
                "recorded: a byte that is not UTF-8 (check the terminal's encoding)"
            ) from exc
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise UsageError(f"now must be a timezone-aware datetime (UTC), not {now!r}")
    if result is not None and not isinstance(result, dict):
        raise UsageError(
            f"result must be the tool's result as a JSON object (a dict) or None, not {type(result).__name__}"
        )
