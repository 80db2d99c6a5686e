"""How a command reports what it cannot do: one ``error:`` line and exit 2 (D28: a usage error or
unreadable input), never a traceback, and never exit 1, which ``audit verify`` keeps for tampering.

Exit codes (D28): 0 success (``run``/``resume``: COMPLETED or WAITING_APPROVAL), 1 tampering found by
``audit verify``, 2 a usage error or unreadable input (also ``OperationBusy``: another process drives
the operation, as when one took it over from ``run``/``resume`` and still runs it), 3 any other terminal
state, 130 Ctrl-C.

A reader that closes stdout early (``callbound ... | head``) changes none of them (review round 16,
r2 F1): the consoles go quiet (cli/consoles.py), the command finishes what it was doing (a drive
reaches its commit), and the process exits with the code the command's outcome gives, so
``set -o pipefail`` still reads ``audit verify | head`` right. Not 141 (a process SIGPIPE killed):
the command was not killed, and its outcome is the more useful answer. Only a write outside the
consoles that meets the closed pipe and stops a command leaves with 141; never with 1, which click
and rich used for it. Output that cannot be written for another reason (a full disk) is an error, said
on stderr once the command has finished: exit 2 where the command would have exited 0 (cli/consoles.py).

- ``fail``: print the error line, return the ``typer.Exit`` to raise.
- ``CallboundGroup``: the root command group; a ``CallboundError`` that escapes any command (a
  ``StoreError``: the store is locked, unreachable or refused a value; a ``UsageError``) ends there.
- ``guard``: every command checks its text arguments first (``check_text_params``).
- ``audit_key``: ``CALLBOUND_AUDIT_KEY`` as bytes, refused when it has no UTF-8 form.
- ``MAX_LIMIT``: the largest ``--limit`` passed on to a store.
- ``sqlite_busy_timeout``: ``CALLBOUND_SQLITE_BUSY_TIMEOUT_MS``, how long a command waits for a SQLite
  store another process holds locked (``busy_timeout_ms``, default 10000), which no ``--store`` URL
  sets (review round 16, r2 F6); a lock error names it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import typer
from rich.text import Text
from typer.core import TyperCommand, TyperGroup

from ..core.errors import CallboundError
from .consoles import CliConsole, discard
from .render import shown

# markup=False: what callbound prints holds model output, tool arguments and provider messages, whose
# square brackets Rich would read as style tags (hiding part of the arguments an approver is shown,
# or failing on "[/b]"); styled parts are built as Text instead.
# CliConsole: quiet when the reader goes away, escapes what the stream cannot encode (cli/consoles.py).
out = CliConsole(soft_wrap=True, markup=False)
err = CliConsole(stderr=True, soft_wrap=True, markup=False)


# The ceiling of --limit (ops list, ledger list), far below the 64-bit LIMIT SQLite and PostgreSQL take: a
# larger limit lists the same rows, so it is lowered to this. 99999999999999999999 raised OverflowError
# from sqlite3 and a StoreError from psycopg (review round 14, h5 r2).
MAX_LIMIT = 1_000_000_000


BUSY_ENV = "CALLBOUND_SQLITE_BUSY_TIMEOUT_MS"
_MAX_BUSY_MS = 86_400_000  # a day


def sqlite_busy_timeout() -> int | None:
    """``CALLBOUND_SQLITE_BUSY_TIMEOUT_MS`` as the SQLite store's ``busy_timeout_ms``; None if unset."""
    raw = os.environ.get(BUSY_ENV, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= _MAX_BUSY_MS:
        raise fail(
            f"{BUSY_ENV}={raw!r}: give the milliseconds to wait for a SQLite store another process holds "
            f"locked, a whole number from 0 to {_MAX_BUSY_MS} (unset: 10000)"
        )
    return value


def with_busy_timeout(store: Any, busy_timeout_ms: int) -> Any:
    """``store`` waiting ``busy_timeout_ms`` for a lock, if it is a SQLite store (opened again with it)."""
    from ..stores.sqlite import SQLiteStore

    if not isinstance(store, SQLiteStore) or store.busy_timeout_ms == busy_timeout_ms:
        return store
    path = store.path
    store.close()
    return SQLiteStore(path, busy_timeout_ms=busy_timeout_ms)


def in_memory(url: str, what: str) -> str | None:
    """Why an in-memory store, new and empty in each process, holds nothing ``what``, or None. ``ops list``
    and ``audit verify --store memory:`` printed an empty table and "audit verified: 0 operation(s)", exit
    0, and a worker polled it for ever (review round 22, c)."""
    from ..stores import sqlite_path

    if url not in ("memory", "memory:", "memory://") and sqlite_path(url) != ":memory:":
        return None
    return (
        f"the in-memory store ({url}) starts empty in every process, so it holds nothing {what}: name the "
        "store that holds the operations (--store sqlite:///path.db or postgresql://...)"
    )


def fail(message: str, code: int = 2) -> typer.Exit:
    # One line (D28, review round 14 h5 r8): a psycopg message brings the SQL and a caret on lines of
    # their own; control characters of an id or a provider's text are shown as escapes.
    message = shown(" ".join(message.split()))
    # A SQLite lock error says "raise busy_timeout_ms": a store's option in code; a command takes it from
    # the environment (r2 F6).
    message = message.replace("raise busy_timeout_ms", f"raise busy_timeout_ms (here: {BUSY_ENV}=<ms>)", 1)
    err.print(Text.assemble(("error:", "red"), f" {message}"), highlight=False)
    return typer.Exit(code)


class CallboundGroup(TyperGroup):
    """The root group. Review round 14 (h5, r8): a StoreError a command did not catch itself (a table
    locked past ``lock_timeout``, a --limit PostgreSQL refuses) left as a Rich traceback and exit 1,
    which ``audit verify`` reads as tampering; every command now ends such an error as D28 says."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except CallboundError as exc:
            raise fail(str(exc) or type(exc).__name__) from exc
        except BrokenPipeError as exc:
            # a write outside the consoles met a closed stdout and stopped the command: 141, as a
            # shell reports a process SIGPIPE killed; click would exit 1, the code of tampering
            discard(sys.stdout)
            raise typer.Exit(141) from exc


def _unencodable(text: str) -> str | None:
    """Where ``text`` has no UTF-8 form, shown as the byte it came from; None if it has one. On POSIX
    Python decodes a byte of argv or of the environment that is not UTF-8 to a lone surrogate
    (surrogateescape): U+DCFF is the byte 0xff."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        c = ord(text[exc.start])
        byte = f"byte \\x{c - 0xDC00:02x}" if 0xDC80 <= c <= 0xDCFF else f"lone surrogate \\u{c:04x}"
        return f"the {byte} at position {exc.start}"
    return None


def _text_fault(what: str, where: str) -> str:
    return (
        f"{what} holds {where}, which is not UTF-8 (Python reads it as a lone surrogate): callbound "
        "keeps ids, names, keys and URLs as UTF-8 text; check the terminal's or the script's encoding"
    )


# Parameters naming a file that is only read, never stored: the OS takes its name as bytes, so a name
# that is not UTF-8 still opens (``callbound parse --api ... FILE``).
_PATHS = frozenset({"file"})


def check_text_params(ctx: Any) -> None:
    """Refuse a text argument with no UTF-8 form before the command runs. Review round 14 (h5, r1): a
    byte that is not UTF-8 in an id, tenant, key, worker id or approver (a Latin-1 shell) raised
    UnicodeEncodeError wherever it was first hashed, sent to the database or saved: a traceback, exit
    1, which ``audit verify op_\\xff`` reported as tampering. One check for every command and option."""
    for param in ctx.command.params:
        values = ctx.params.get(param.name)
        if param.name in _PATHS or values is None:
            continue
        for value in values if isinstance(values, list | tuple) else [values]:
            where = _unencodable(value) if isinstance(value, str) else None
            if where is not None:
                opts = [o for o in getattr(param, "opts", []) if o.startswith("-")]
                raise fail(_text_fault(opts[0] if opts else str(param.name).upper(), where))


class CheckedCommand(TyperCommand):
    def invoke(self, ctx: Any) -> Any:
        check_text_params(ctx)
        return super().invoke(ctx)


def guard(app: typer.Typer) -> None:
    """Make every command of ``app`` and of its sub-apps check its text arguments first (call it once
    every command is registered)."""
    for info in app.registered_commands:
        if info.cls in (None, TyperCommand):  # what @app.command() leaves
            info.cls = CheckedCommand
    for group in app.registered_groups:
        if group.typer_instance is not None:
            guard(group.typer_instance)


def audit_key() -> bytes | None:
    """``CALLBOUND_AUDIT_KEY`` (D20) as the bytes the chain is keyed with. A value with a byte that is
    not UTF-8 (a key file in another encoding) raised UnicodeEncodeError in ``audit verify``, exit 1 as
    if tampered, and wherever a runner was built (review round 14, h5 r1): refused as a usage error."""
    key = os.environ.get("CALLBOUND_AUDIT_KEY")
    if not key:
        return None
    where = _unencodable(key)
    if where is not None:
        raise fail(_text_fault("CALLBOUND_AUDIT_KEY", where))
    return key.encode()
