"""A SQLite file that is not a callbound store is not a store to read (D28, README: read-only commands
refuse "so a mistyped path or database name never reads as an empty store").

Found by a reviewer: the read-only commands checked only that the file existed. Pointed at another
application's database (the demo's own callbound-payments.db beside callbound.db) or an empty file, they
answered as an empty store (exit 0, "audit verified: 0 operation(s)") and added callbound's tables to it.
PostgreSQL already refused the same case (test_readonly_open_review.py). A file without callbound's
schema key is now refused with one line, and nothing is written to it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from callbound import stores
from callbound.core.errors import UsageError
from callbound.stores.schema import META_KEY

from ..cli.test_cli_promises_review import cli, no_traceback
from ..cli.test_cli_review import READ_ONLY


def _foreign(path: Path, *, meta: bool = False) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE refunds (id INTEGER PRIMARY KEY, body TEXT)")
        if meta:
            conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
            conn.execute("INSERT INTO meta VALUES ('app_version', '7')")
    conn.close()


def _tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1").fetchall()
    conn.close()
    return [r[0] for r in rows]


@pytest.mark.parametrize("kind", ["another app's database", "its own meta table", "an empty file"])
def test_open_without_create_refuses_and_writes_nothing(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "other.db"
    if kind == "an empty file":
        path.touch()
    else:
        _foreign(path, meta=kind == "its own meta table")
    before = _tables(path)
    with pytest.raises(
        UsageError, match=r"no callbound tables in the SQLite database at .*nothing was created"
    ):
        stores.open(f"sqlite:///{path}", create=False)
    assert _tables(path) == before
    assert path.stat().st_size == 0 or kind != "an empty file"


def test_a_callbound_database_opens_without_create(tmp_path: Path) -> None:
    path = tmp_path / "cb.db"
    stores.open(f"sqlite:///{path}").close()
    store = stores.open(f"sqlite:///{path}", create=False)
    store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).fetchone() is not None
    conn.close()


def test_a_file_that_is_no_database_is_left_to_opening(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not a database" * 100)
    assert stores.missing_database(f"sqlite:///{path}") is None  # opening reports it (its own message)


@pytest.mark.parametrize("args", READ_ONLY, ids=[" ".join(a[:2]) for a in READ_ONLY])
def test_read_only_commands_refuse_a_foreign_sqlite_file(tmp_path: Path, args: list[str]) -> None:
    path = tmp_path / "callbound-payments.db"
    _foreign(path)
    r = cli(*args, "--store", f"sqlite:///{path}", cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "no callbound tables in the SQLite database" in r.stderr
    no_traceback(r)
    assert _tables(path) == ["refunds"]
