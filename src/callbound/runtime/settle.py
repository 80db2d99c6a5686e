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
from datetime import datetime
from typing import Any

from ..core.errors import SettleRefused, UnknownLedgerEntry
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

    Raises ``UnknownLedgerEntry`` (no such entry), ``UsageError`` (an empty ``by``, a result that is
    not exact JSON), ``SettleRefused`` (the entry is settled already, or its operation has not ended
    and reconciles it itself: ``settle_refusal``) and ``LedgerChanged`` (the entry changed between
    this read and the write, which was not made: read it again and decide again)."""
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
