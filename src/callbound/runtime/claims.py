"""The ledger side of one write call: queueing its entries and claims (D13), telling whether another
operation holds its intent (D16, D21), and committing its claims (D16, D18)."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..core.errors import IntentTaken
from ..core.idempotency import LedgerEntry, LedgerStatus
from ..core.registry import ToolSpec
from ..core.states import TERMINAL
from ..stores.rows import UnreadableRow
from .crash import ledger_disabled
from .operation import CallRecord, Operation

if TYPE_CHECKING:
    from .runner import Runner

# How often one call decides again after the store refused its claim before giving up (the drive then
# reloads the operation, runner._drive): each refusal means another operation's entry landed meanwhile.
CLAIM_TRIES = 3


def queue(
    op: Operation,
    rec: CallRecord,
    spec: ToolSpec,
    status: LedgerStatus,
    result: dict[str, Any] | None,
    attempts: int,
    handler_alive: bool = False,
    *,
    claim: bool = False,
    read: LedgerEntry | None = None,
) -> LedgerEntry:
    """Queue a ledger write. ``claim``: this write takes the intent over, decided on the entry ``read``
    (None: the ledger held nothing); the store refuses it if the key moved on since (D13). Without it:
    a write by the operation that already holds the intent."""
    assert rec.idempotency_key is not None
    claim = claim and not ledger_disabled()
    entry = LedgerEntry(
        rec.idempotency_key,
        op.tenant,
        spec.name,
        op.operation_id,
        status,
        result,
        attempts,
        op.fence,
        handler_alive=handler_alive,
        claim=claim,
        claim_over=None if read is None else (read.operation_id, read.status.value),
    )
    op.pending_ledger.append(entry)
    return entry


def held_elsewhere(runner: Runner, op: Operation, entry: LedgerEntry | None) -> bool:
    """True when ``entry`` is STARTED by another operation that has not ended: its driver may be
    inside the handler right now. An operation whose head cannot be read is taken as running (the
    safe side: a refusal, never a second effect)."""
    if entry is None or entry.operation_id == op.operation_id:
        return False
    if entry.status is LedgerStatus.UNKNOWN and entry.handler_alive:
        return True  # its thread may still apply the effect, ended operation or not (D16)
    if entry.status is not LedgerStatus.STARTED:
        return False
    try:
        stored = runner.store.load_operation(entry.operation_id)
    except UnreadableRow:
        # Its head or journal is damaged: taken as running, as promised above. Raised, it failed the
        # drive of *this* operation with a StoreError about another one's row (review round 18, d F2).
        return True
    if stored is None:
        return False  # no such operation (its rows were purged): nobody can be running it
    state = stored.head.get("state")
    return not (isinstance(state, str) and state in TERMINAL)  # a StrEnum set: names match


class Claim:
    """One write's claims (its fresh attempt's STARTED, or the takeover a reconcile starts with), each
    committed before what it guards runs, and taken back alone if the store refuses it."""

    __slots__ = ("_flush", "_mark", "_rec", "_saved", "refused")

    def __init__(self, op: Operation, rec: CallRecord, flush: Callable[[], Awaitable[None]]) -> None:
        self._flush, self._rec, self.refused = flush, rec, 0
        self._mark, self._saved = op.mark(), copy.copy(rec)

    async def commit(self, op: Operation) -> bool:
        """Commit the queued claim (for a turn of writes only, with C1: D18). False when the store
        refused it (``IntentTaken``: another operation's entry landed between our ledger read and this
        commit, and nothing of the commit was written): everything queued since the last commit of this
        write is taken back, but not the answered turn, its usage and plan, which go out with the next
        commit, and the caller decides the write again on the entry that is there now (IN_PROGRESS, or
        its result replayed: D13, D16). Reloading the operation instead went back to before the turn
        (MODEL_REQUESTED for a turn of writes only): the paid turn's tokens, cost and model turn were
        lost from Spent (D12, D27) and the model was asked again (review round 14)."""
        try:
            await self._flush()
        except IntentTaken:
            if self.refused >= CLAIM_TRIES:
                raise
            self.refused += 1
            op.rewind(self._mark)
            self._rec.restore(self._saved)
            return False
        # Durable: a later refusal of this write (its fresh attempt after a reconcile said "not
        # applied") takes back only what was queued after this commit.
        self._mark, self._saved = op.mark(), copy.copy(self._rec)
        return True
