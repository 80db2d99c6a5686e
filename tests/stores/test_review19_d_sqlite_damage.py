"""Review round 19 (d F3, F7): a damaged or read-only SQLite store, or a folder, is named for what it is,
with what to do.

A file that is not a SQLite database, or a callbound database whose pages are damaged, or one this
process may not write, all got the same advice: "check that the file is a callbound database that was
not edited by hand, that it is writable, and that the disk is not full" -- for a damaged file nothing
there says what to do, and for a read-only one the folder (where SQLite keeps its -wal and -shm files)
goes unmentioned. Each is now a StoreError saying which it is and what to do; the CLI exits 2 (D28)
with that one line, and nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from callbound import stores
from callbound.core.errors import StoreError
from callbound.stores.base import Commit
from callbound.stores.sqlite import SQLiteStore

from ..cli.test_cli_promises_review import cli, no_traceback
from .conftest import create, make_head


def _damaged(tmp_path: Path) -> Path:
    """A callbound database whose first page (the schema's root) is overwritten."""
    path = tmp_path / "cb.db"
    store = stores.open(f"sqlite:///{path}")
    create(store, "op1")
    store.close()
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xa5" * (4096 - 100)
    path.write_bytes(bytes(data))
    return path


def _not_a_database(tmp_path: Path) -> Path:
    path = tmp_path / "cb.db"
    path.write_bytes(b"\x00\x01 notes, not a database " * 400)
    return path


@pytest.mark.parametrize("make", [_damaged, _not_a_database], ids=["damaged", "not-a-database"])
def test_a_damaged_file_is_named_with_what_to_do(tmp_path: Path, make: object) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    before = path.read_bytes()
    with pytest.raises(StoreError) as caught:
        stores.open(f"sqlite:///{path}")
    said = str(caught.value)
    assert "is damaged or is not a SQLite database" in said and "backup" in said, said
    assert "edited by hand" not in said
    r = cli("ops", "list", "--store", f"sqlite:///{path}", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr.startswith("error:") and "is damaged or is not a SQLite database" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    no_traceback(r)
    assert path.read_bytes() == before  # nothing written


def test_a_store_that_is_read_only_says_so(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "cb.db")
    create(store, "op1")
    store._conn.execute("PRAGMA query_only = 1")  # what a file this user may not write gives
    with pytest.raises(StoreError) as caught:
        store.commit(Commit("op1", make_head("op1", state="EXECUTING")))
    said = str(caught.value)
    assert "is read-only for this process" in said and "write access to the file and to its folder" in said
    assert "committing operation op1" in said
    store._conn.execute("PRAGMA query_only = 0")
    stored = store.load_operation("op1")
    assert stored is not None and stored.head["state"] != "EXECUTING"
    store.close()


@pytest.mark.parametrize("args", [["demo", "refund"], ["ops", "list"]])
def test_a_folder_given_as_the_store_is_named_as_a_folder(tmp_path: Path, args: list[str]) -> None:
    """(d F7) `--store sqlite:///somedir` was told to "check that its folder exists and is writable"."""
    folder = tmp_path / "data"
    folder.mkdir()
    with pytest.raises(StoreError, match="it is a folder, not a file: name a database file in it"):
        SQLiteStore(folder)
    r = cli(*args, "--store", f"sqlite:///{folder}", cwd=tmp_path)
    assert r.returncode == 2 and "it is a folder, not a file" in r.stderr, (r.stdout, r.stderr)
    no_traceback(r)
    assert list(folder.iterdir()) == []
