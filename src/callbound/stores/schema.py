"""The database schema of the durable stores, and its versions (D19).

``DB_SCHEMA_VERSION`` is the version this code writes. It is a different number from the snapshot
format (``core.snapshot.SNAPSHOT_VERSION``): this one changes when tables, columns or indexes change.
Each backend has one migration per version (``SQLITE_MIGRATIONS[n]`` takes a database from version
``n - 1`` to ``n``; version 1 creates everything), and the ``meta`` table records the version reached.
A database newer than this code is refused with ``SchemaVersionError`` before anything is written.

Version 1 is frozen in ``tests/stores/data/db_schema_v1_*.sql``; a test fails when the number changes
without a new frozen fixture and a migration.

Layout (both backends):

- ``meta(key, value)``: ``db_schema_version``.
- ``operations``: one row per operation. ``head`` is the JSON head, replaced on every commit; ``tenant``,
  ``state``, ``created_at``, ``updated_at`` are copied out of it for queries. ``journal_len`` and
  ``audit_len`` count the appended rows, so a commit never counts or rewrites history. ``fence`` is
  the fencing token: a commit sets it from ``head["fence"]``, a claim increments it, and reads return
  it as ``head["fence"]`` (so a claim never rewrites the head); ``lease_owner``/``lease_expires_at``
  hold the worker lease (D21).
  ``wake_us``/``wake_at`` is the earliest expiry among the operation's pending approvals (0 /
  -infinity when none is pending), kept exact whenever approvals are written or decided, so workers
  find the WAITING_APPROVAL operations that became runnable without scanning all the paused ones.
- ``journal(operation_id, pos, kind, data)``: append-only, ``pos`` counts from 0 per operation.
- ``audit(operation_id, seq, ...)``: the per-operation hash chain (D20).
- ``ledger(tenant, key, ...)``: the idempotency ledger, one entry per intent.
- ``approvals``: one row per approval; ``status``, ``tenant``, ``created_at``, ``expires_at`` indexed.

Documents are JSON text in SQLite and ``json`` (not ``jsonb``) in PostgreSQL: the runtime's values may
hold NUL characters (``\\u0000``), which ``jsonb`` refuses, and the stores never query inside a document.
``json`` also keeps the text exactly as written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from ..core.errors import StoreError
from .base import Commit

DB_SCHEMA_VERSION = 1
META_KEY = "db_schema_version"

# A migration receives ``execute(sql)`` inside the transaction that also records the new version.
Migration = Callable[[Callable[[str], object]], None]


def split_statements(script: str) -> list[str]:
    """The statements of a DDL script (no semicolons inside statements, by construction)."""
    return [s.strip() for s in script.split(";") if s.strip()]


# ---- SQLite -------------------------------------------------------------------------------------
# Times: approvals keep microseconds since the Unix epoch (UTC) as integers, so ordering is exact;
# leases keep seconds since the epoch as REAL, compared with the database's clock.

SQLITE_V1 = """\
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE operations (
    id INTEGER PRIMARY KEY,
    operation_id TEXT NOT NULL UNIQUE,
    tenant TEXT,
    state TEXT,
    created_at TEXT,
    updated_at TEXT,
    head TEXT NOT NULL,
    journal_len INTEGER NOT NULL DEFAULT 0,
    audit_len INTEGER NOT NULL DEFAULT 0,
    fence INTEGER,
    lease_owner TEXT,
    lease_expires_at REAL,
    wake_us INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX operations_tenant ON operations (tenant, id);
CREATE INDEX operations_state ON operations (state, id);
CREATE INDEX operations_wake ON operations (state, wake_us);
CREATE TABLE journal (
    operation_id TEXT NOT NULL,
    pos INTEGER NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (operation_id, pos)
) WITHOUT ROWID;
CREATE TABLE audit (
    operation_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    at TEXT NOT NULL,
    data TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (operation_id, seq)
) WITHOUT ROWID;
CREATE TABLE ledger (
    tenant TEXT NOT NULL,
    key TEXT NOT NULL,
    operation_id TEXT NOT NULL,
    status TEXT NOT NULL,
    entry TEXT NOT NULL,
    PRIMARY KEY (tenant, key)
) WITHOUT ROWID;
CREATE TABLE approvals (
    id INTEGER PRIMARY KEY,
    approval_id TEXT NOT NULL UNIQUE,
    operation_id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    status TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    expires_us INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX approvals_status_tenant_created ON approvals (status, tenant, created_us, id);
CREATE INDEX approvals_status_created ON approvals (status, created_us, id);
CREATE INDEX approvals_tenant_created ON approvals (tenant, created_us, id);
CREATE INDEX approvals_status_expires ON approvals (status, expires_us);
CREATE INDEX approvals_operation ON approvals (operation_id, status);
"""


def _sqlite_v1(execute: Callable[[str], object]) -> None:
    for statement in split_statements(SQLITE_V1):
        execute(statement)


SQLITE_MIGRATIONS: dict[int, Migration] = {1: _sqlite_v1}


# ---- PostgreSQL ---------------------------------------------------------------------------------

POSTGRES_V1 = """\
CREATE TABLE meta (
    key text PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE operations (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    operation_id text NOT NULL UNIQUE,
    tenant text,
    state text,
    created_at text,
    updated_at text,
    head json NOT NULL,
    journal_len integer NOT NULL DEFAULT 0,
    audit_len integer NOT NULL DEFAULT 0,
    fence bigint,
    lease_owner text,
    lease_expires_at timestamptz,
    wake_at timestamptz NOT NULL DEFAULT '-infinity'
);
CREATE INDEX operations_tenant ON operations (tenant, id);
CREATE INDEX operations_state ON operations (state, id);
CREATE INDEX operations_wake ON operations (state, wake_at);
CREATE TABLE journal (
    operation_id text NOT NULL,
    pos integer NOT NULL,
    kind text NOT NULL,
    data json NOT NULL,
    PRIMARY KEY (operation_id, pos)
);
CREATE TABLE audit (
    operation_id text NOT NULL,
    seq integer NOT NULL,
    kind text NOT NULL,
    at text NOT NULL,
    data json NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    PRIMARY KEY (operation_id, seq)
);
CREATE TABLE ledger (
    tenant text NOT NULL,
    key text NOT NULL,
    operation_id text NOT NULL,
    status text NOT NULL,
    entry json NOT NULL,
    PRIMARY KEY (tenant, key)
);
CREATE TABLE approvals (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    approval_id text NOT NULL UNIQUE,
    operation_id text NOT NULL,
    tenant text NOT NULL,
    status text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    data json NOT NULL
);
CREATE INDEX approvals_status_tenant_created ON approvals (status, tenant, created_at, id);
CREATE INDEX approvals_status_created ON approvals (status, created_at, id);
CREATE INDEX approvals_tenant_created ON approvals (tenant, created_at, id);
CREATE INDEX approvals_status_expires ON approvals (status, expires_at);
CREATE INDEX approvals_operation ON approvals (operation_id, status);
"""


def _postgres_v1(execute: Callable[[str], object]) -> None:
    for statement in split_statements(POSTGRES_V1):
        execute(statement)


POSTGRES_MIGRATIONS: dict[int, Migration] = {1: _postgres_v1}


def newer_than_code(found: int, where: str) -> str:
    return (
        f"{where} has database schema version {found}, but this callbound knows versions up to "
        f"{DB_SCHEMA_VERSION}; upgrade callbound (pip install -U callbound) to open it. "
        "Nothing was changed."
    )


def check_migrations(migrations: dict[int, Migration]) -> None:
    missing = [v for v in range(1, DB_SCHEMA_VERSION + 1) if v not in migrations]
    if missing:  # pragma: no cover - caught by tests/stores/test_schema_versions.py
        raise RuntimeError(f"no migration for database schema version(s) {missing}")


# ---- row encoding shared by both backends -------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


# One encoder for every document: compact, ``ensure_ascii=False``, no NaN or infinities. Circular
# references are not tracked (the runtime's documents are trees; a cycle, or nesting too deep for
# the stack, ends as RecursionError, refused like any other unstorable value).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, check_circular=False)
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False, check_circular=False)
UNSTORABLE = (TypeError, ValueError, RecursionError)


def _c_encode() -> Callable[[object], str] | None:
    """``_ENCODER.encode`` without its per-call set-up: the C encoder ``JSONEncoder.encode`` itself
    builds on every call (same arguments), built once. None when this Python has no C encoder or it
    does not produce exactly ``_ENCODER``'s text."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has it
        return None
    try:
        iterencode = make(
            None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
        )
        join = "".join

        def encode(value: object) -> str:
            return join(iterencode(value, 0))

        probe = {"a": [1, -2.5, 1e300, None, True, False, 'é\x00\u2028"\\'], "b": {"c": {}, "d": []}, "e": ""}
        if encode(probe) != _ENCODER.encode(probe) or encode("x") != _ENCODER.encode("x"):
            return None  # pragma: no cover - a Python whose C encoder changed
    except Exception:  # pragma: no cover - a Python whose C encoder changed
        return None
    return encode


_encode: Callable[[object], str] = _c_encode() or _ENCODER.encode


def encode(value: object) -> str:
    """Compact JSON text of ``value`` (``dumps`` without the message): raises one of ``UNSTORABLE``
    for a value JSON cannot hold. Text that UTF-8 cannot carry (lone surrogates) is written with
    ASCII escapes instead."""
    text = _encode(value)
    if not text.isascii():  # O(1) for str; only non-ASCII text can hold a lone surrogate
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = _ASCII_ENCODER.encode(value)
    return text


def dumps(value: object, what: str) -> str:
    """Compact JSON text; a value JSON cannot hold (NaN and infinities included, as in canonical
    JSON) is a StoreError that names the part. Text that UTF-8 cannot carry (lone surrogates) is
    written with ASCII escapes instead."""
    try:
        return encode(value)
    except UNSTORABLE as exc:
        raise StoreError(f"cannot store {what}: it is not plain JSON data ({exc})") from exc


def encode_commit(commit: Commit) -> tuple[str, list[str], list[str], list[str], list[str]]:
    """The documents of one commit, in one pass: the head, then the data of each journal row, audit
    event, ledger entry and approval. A part JSON cannot hold is a StoreError that names it (the
    first such part, in that order); the names are built only then."""
    try:
        return (
            encode(commit.head),
            [encode(row.data) for row in commit.journal],
            # the event's data as written while hashing it (AuditEvent.data_json): no second encoding
            [encode(ev.data) if ev.data_json is None else ev.data_json for ev in commit.audit],
            [encode(e.to_dict()) for e in commit.ledger],
            [encode(a.to_dict()) for a in commit.approvals],
        )
    except UNSTORABLE:
        pass
    op = commit.operation_id
    dumps(commit.head, f"the head of operation {op}")
    for row in commit.journal:
        dumps(row.data, f"a {row.kind!r} journal row of {op}")
    for ev in commit.audit:
        dumps(ev.data, f"audit event {ev.seq} of {op}")
    for e in commit.ledger:
        dumps(e.to_dict(), f"ledger entry {e.key}")
    for a in commit.approvals:
        dumps(a.to_dict(), f"approval {a.approval_id}")
    raise StoreError(f"cannot store operation {op}: it is not plain JSON data")  # pragma: no cover


def utc(dt: datetime) -> datetime:
    """An aware UTC datetime; a naive one is taken to be UTC already."""
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def epoch_us(dt: datetime) -> int:
    """Exact microseconds since the Unix epoch, so integer order equals datetime order."""
    return (utc(dt) - _EPOCH) // _MICROSECOND


def with_fence(head: dict[str, Any], fence: int | None) -> dict[str, Any]:
    """The head as read: the fence column (moved on by claims) is the head's ``fence``."""
    if fence is not None:
        head["fence"] = fence
    return head
