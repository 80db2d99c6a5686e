"""The PostgreSQL store's one connection (a mixin of ``PostgresStore``, which owns its lock and the
translation of psycopg errors, D30).

The server may drop a session at any time: a restart, a failover, an idle timeout,
``pg_terminate_backend``. Before, the store reopened the connection only after a call had failed on the
dead one, and when that first call was the commit of a write handler's result, the result was lost: the
next drive could only reconcile it (a refund that ran once ended STOPPED(OUTCOME_UNKNOWN) for a human, a
paid model response was requested again; review round 14, h9). Now:

* each call first reads, without waiting and without a round trip, what the server sent the idle
  session unasked: a dropped one has sent its FATAL message (57P01 for a terminated backend) and closed
  the socket, and libpq then marks the connection bad, so it is reopened before it is used;
* a transaction whose statements fail because the connection broke (closed afterwards) before its
  COMMIT was sent runs once more, whole, on a fresh connection: nothing of it was committed. A failure
  during COMMIT is never retried: whether it took effect is unknown, so the caller gets a StoreError.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import conninfo as _conninfo
from psycopg.pq import TransactionStatus

from ..core.errors import StoreError
from .dsn import redact

T = TypeVar("T")
log = logging.getLogger("callbound.stores")


def describe(url: str) -> str:
    """host:port/dbname without credentials, for messages."""
    try:
        info = _conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "the configured server"
    host = info.get("host") or "localhost"
    port = info.get("port") or "5432"
    return f"{host}:{port}/{info.get('dbname') or info.get('user') or ''}"


def dropped(conn: psycopg.Connection[Any]) -> bool:
    """Whether the server has ended this idle session. ``consume_input`` (PQconsumeInput) reads only what
    is already there: the first read takes the FATAL message, the next one finds the closed socket and
    libpq marks the connection bad. About a microsecond when nothing arrived; a drop not yet delivered
    is caught by ``PgConnection._transaction`` (or fails the call, as before)."""
    if not conn.closed and conn.info.transaction_status is TransactionStatus.IDLE:
        try:
            for _ in range(2):
                conn.pgconn.consume_input()
        except psycopg.Error:
            pass  # the connection is now closed
    return conn.closed


class PgConnection:
    _url: str
    _where: str
    _connect_kwargs: dict[str, Any]
    _conn: psycopg.Connection[Any]
    _closed: bool

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self._url, **self._connect_kwargs)
        except psycopg.Error as exc:
            # libpq quotes a URL it cannot parse, password and all: the message goes to terminals, CI
            # logs and bug reports (review round 18, d F5); so would the chained error in a traceback
            said = redact(str(exc), self._url)
            error = StoreError(
                f"cannot connect to PostgreSQL at {self._where}: {said}; check the URL, that the server "
                "is running and accepts connections, and the credentials"
            )
            if said != str(exc):
                raise error from None
            raise error from exc

    def _connection(self) -> psycopg.Connection[Any]:
        """The connection, reopened if the server dropped it. Called with the store's lock held."""
        if self._closed:
            raise StoreError("this PostgresStore is closed; open a new one")
        if dropped(self._conn):
            self._conn = self._connect()
        return self._conn

    def _transaction(self, body: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``body`` in one transaction, run once more on a fresh connection when the connection broke
        before its COMMIT was sent. ``body`` must be safe to run twice: it only writes through ``conn``."""
        for last in (False, True):
            conn = self._connection()
            committing = False
            try:
                with conn.transaction():
                    result = body(conn)
                    committing = True  # leaving the block sends COMMIT: from here the outcome is unknown
                return result
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                # not a broken connection (a statement timeout, a serialization failure), a failed COMMIT,
                # or the second try: raised as before
                if committing or last or not conn.closed:
                    raise
                log.warning(
                    "PostgreSQL at %s dropped the connection before the transaction was committed (%s); "
                    "running it again on a new connection",
                    self._where,
                    str(exc).strip(),
                )
        raise AssertionError("unreachable")  # pragma: no cover
