"""Reading back the JSON documents a SQL store keeps, and naming the row when one does not read.

A row edited by hand (or damaged) into text that is not JSON, into JSON of the wrong shape (a list where
the head is an object), or into an object a ledger entry or an approval cannot be read from, is an
``UnreadableRow``: a ``StoreError`` naming its table and key, never a bare ``JSONDecodeError``,
``TypeError``, ``ValueError`` or ``KeyError`` (review round 14). ``audit verify`` names it as a finding
for its operation and goes on with the others (runtime/verify.py); any other command stops there and
nothing runs. The documents are decoded as before; the work of naming the row is done only after a failure.

SQLite gives the documents back as text (``text=True``); psycopg has already decoded PostgreSQL's json
columns, which refuse text that is not JSON, so there only the shape can be wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ..core.approvals import PendingApproval
from ..core.audit import AuditEvent
from ..core.errors import StoreError
from ..core.idempotency import LedgerEntry
from .base import JournalRow, StoredOperation
from .schema import with_fence

T = TypeVar("T")
Row = tuple[Any, ...]

# What decoding a document, or reading a ledger entry or an approval out of it, raises on an edited row:
# JSONDecodeError and UnicodeDecodeError are ValueErrors, as are a bad status or timestamp; a list or a
# string where an object belongs is a TypeError; a missing field a KeyError; a deep nest a RecursionError.
FAILURES = (ValueError, TypeError, KeyError, AttributeError, RecursionError)


class UnreadableRow(StoreError):
    """A stored document that does not decode, or not into what its table holds. ``where`` names the
    row as ``audit verify`` does ("journal pos 6", "ledger KEY"); ``why`` says what is wrong with it."""

    def __init__(
        self, where: str, why: str, operation_id: str | None = None, columns: dict[str, Any] | None = None
    ) -> None:
        self.where = where
        self.why = why
        self.operation_id = operation_id
        # A listing's damaged row (``damaged=``): what the row's own columns say (its approval id, or
        # tenant and key; its operation and status), and its place among the rows the listing read.
        self.columns: dict[str, Any] = dict(columns or {})
        self.index: int | None = None
        of = "" if operation_id is None else f" of operation {operation_id}"
        super().__init__(
            f"the stored {where}{of} cannot be loaded: {why}; it was edited by hand or is damaged "
            "(callbound audit verify names every such row)"
        )


# ``damaged=`` of ``Store.list_approvals`` and ``Store.ledger_list``: None raises on a damaged row, a list
# collects it.
Damaged = list[UnreadableRow] | None


def _why(exc: BaseException | None, value: Any = None, noun: str = "what its table holds") -> str:
    if exc is None:
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
            type(value), "a number"
        )
        return f"it holds {kind} where a JSON object belongs"
    if isinstance(exc, json.JSONDecodeError):
        return f"it is not JSON ({exc})"
    if isinstance(exc, KeyError):
        return f"it has no {exc.args[0]!r} field"
    if isinstance(exc, RecursionError):
        return "it is nested too deeply to read"
    return f"it does not read as {noun} ({type(exc).__name__}: {exc})"


def unreadable(exc: BaseException, where: str, operation_id: str | None, noun: str) -> UnreadableRow:
    """The ``UnreadableRow`` for a decoded document that ``exc`` shows is not ``noun`` (a field missing,
    a value of the wrong type), for readers above the store (``Operation.from_stored``)."""
    return UnreadableRow(where, _why(exc, noun=noun), operation_id)


def document(value: Any, where: str, operation_id: str | None = None, *, text: bool) -> dict[str, Any]:
    """One stored JSON object, or ``UnreadableRow``."""
    try:
        doc = json.loads(value) if text else value
    except FAILURES as exc:
        raise UnreadableRow(where, _why(exc), operation_id) from exc
    if type(doc) is not dict:
        raise UnreadableRow(where, _why(None, doc), operation_id)
    return doc


def read(value: Any, where: str, make: Callable[[dict[str, Any]], T], noun: str, *, text: bool) -> T:
    """``make`` (``LedgerEntry.from_dict``, ``PendingApproval.from_dict``) of one stored document."""
    try:
        return make(json.loads(value) if text else value)
    except FAILURES as exc:
        document(value, where, text=text)  # not JSON, or not an object: says so
        raise UnreadableRow(where, _why(exc, noun=noun)) from exc


def head(row: Row, *, text: bool) -> dict[str, Any]:
    """A listed head from ``(operation_id, head, fence)``."""
    doc = document(row[1], "operation row", row[0], text=text)
    _names_its_row(doc, row[0])
    return with_fence(doc, row[2])


def _names_its_row(doc: dict[str, Any], operation_id: str) -> None:
    """A head whose ``operation_id`` names another operation (a row edited, or copied from another):
    listed, it showed that other id twice; resumed, the runner acted on and wrote under the other id.
    Damaged, as a head lacking the field is (a head without it is named where it is read)."""
    named = doc.get("operation_id", operation_id)
    if named != operation_id:
        shown = repr(named) if isinstance(named, str) and len(named) <= 80 else type(named).__name__
        raise UnreadableRow(
            "operation row", f"its operation_id field names another operation ({shown})", operation_id
        )


def ledger(tenant: str, key: str) -> str:
    return f"ledger {key} (tenant {tenant})"


def operation(
    operation_id: str, stored_head: Any, fence: int | None, journal: list[Row], *, text: bool
) -> StoredOperation:
    """The head and the ``(pos, kind, data)`` journal rows of one operation. Resume and every commit read
    these: decoded in one comprehension as before, a row that is not an object is left out and counted."""
    doc: Any = None
    try:
        doc = json.loads(stored_head) if text else stored_head
        if text:
            rows = [JournalRow(k, d) for _, k, t in journal if type(d := json.loads(t)) is dict]
        else:
            rows = [JournalRow(k, d) for _, k, d in journal if type(d) is dict]
    except FAILURES:
        rows = []  # named below
    if type(doc) is not dict or len(rows) != len(journal):
        # find the row: the head first, then the journal in order
        document(stored_head, "operation row", operation_id, text=text)
        for pos, _, data in journal:
            document(data, f"journal pos {pos}", operation_id, text=text)
        raise UnreadableRow("operation row", "it does not read", operation_id)  # not reached
    _names_its_row(doc, operation_id)
    return StoredOperation(with_fence(doc, fence), rows)


def audit_events(operation_id: str, stored: list[Row], *, text: bool) -> list[AuditEvent]:
    """The ``(seq, kind, at, data, prev_hash, hash)`` rows of one chain, as ``operation`` reads a journal."""
    try:
        if text:
            events = [
                AuditEvent(operation_id, seq, kind, at, d, prev, h)
                for seq, kind, at, t, prev, h in stored
                if type(d := json.loads(t)) is dict
            ]
        else:
            events = [
                AuditEvent(operation_id, seq, kind, at, d, prev, h)
                for seq, kind, at, d, prev, h in stored
                if type(d) is dict
            ]
    except FAILURES:
        events = []  # named below
    if len(events) != len(stored):
        for row in stored:
            document(row[3], f"audit seq {row[0]}", operation_id, text=text)
        raise UnreadableRow("audit chain", "it does not read", operation_id)  # not reached
    return events


def ledger_entry(value: Any, tenant: str, key: str, *, text: bool) -> LedgerEntry:
    where = ledger(tenant, key)
    entry = read(value, where, LedgerEntry.from_dict, "a ledger entry", text=text)
    if (entry.tenant, entry.key) != (tenant, key):
        raise UnreadableRow(
            where, f"it names another entry ({_named(entry.key)} of tenant {_named(entry.tenant)})"
        )
    return entry


def approval(value: Any, approval_id: str, *, text: bool) -> PendingApproval:
    a = read(value, f"approval {approval_id}", PendingApproval.from_dict, "an approval", text=text)
    if a.approval_id != approval_id:
        # A row edited, or copied from another approval: listed, the other was shown twice and this one
        # not at all, and deciding this id met "decision is for another approval" (review round 21, b)
        raise UnreadableRow(
            f"approval {approval_id}",
            f"its approval_id field names another approval ({_named(a.approval_id)})",
        )
    return a


def _named(value: Any) -> str:
    return repr(value) if isinstance(value, str) and len(value) <= 80 else type(value).__name__


def listed(rows: Iterable[Row], one: Callable[[Row], T], damaged: list[UnreadableRow] | None) -> list[T]:
    """``one`` of each row. A row that does not read raises ``UnreadableRow``, or with ``damaged`` (a
    list) is appended to it, its ``index`` the row's place in ``rows``, and the others are read on: a
    listing of 10,000 paused approvals with one damaged row still shows the rest (review round 21, b)."""
    out: list[T] = []
    for i, row in enumerate(rows):
        try:
            out.append(one(row))
        except UnreadableRow as exc:
            if damaged is None:
                raise
            exc.index = i
            damaged.append(exc)
    return out


def ledger_entries(
    rows: Iterable[Row], *, text: bool, damaged: list[UnreadableRow] | None = None
) -> list[LedgerEntry]:
    """``(tenant, key, operation_id, status, entry)`` rows."""

    def one(row: Row) -> LedgerEntry:
        tenant, key, operation_id, status, entry = row
        try:
            return ledger_entry(entry, tenant, key, text=text)
        except UnreadableRow as exc:
            cols = {"tenant": tenant, "key": key, "operation_id": operation_id, "status": status}
            raise UnreadableRow(exc.where, exc.why, operation_id, cols) from exc

    return listed(rows, one, damaged)


def approvals(
    rows: Iterable[Row], *, text: bool, damaged: list[UnreadableRow] | None = None
) -> list[PendingApproval]:
    """``(approval_id, operation_id, tenant, status, data)`` rows."""

    def one(row: Row) -> PendingApproval:
        approval_id, operation_id, tenant, status, data = row
        try:
            return approval(data, approval_id, text=text)
        except UnreadableRow as exc:
            cols = {
                "approval_id": approval_id,
                "operation_id": operation_id,
                "tenant": tenant,
                "status": status,
            }
            raise UnreadableRow(exc.where, exc.why, operation_id, cols) from exc

    return listed(rows, one, damaged)


def schema_version(value: Any, where: str) -> int:
    """The meta table's db_schema_version (D19). Not a number: the store cannot be read at all."""
    try:
        return int(value)
    except (ValueError, TypeError) as exc:
        raise StoreError(
            f"the db_schema_version row of the meta table in {where} holds {value!r}, not a version "
            "number: it was edited by hand or is damaged; restore the database from a backup"
        ) from exc
