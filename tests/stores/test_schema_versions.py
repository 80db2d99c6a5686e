"""Database schema versions (D19): every version has a frozen fixture and a migration, and every
frozen version migrates to the current schema. Bumping ``DB_SCHEMA_VERSION`` therefore needs
``tests/stores/data/db_schema_v<N>_{sqlite,postgres}.sql`` and ``SQLITE_MIGRATIONS[N]`` /
``POSTGRES_MIGRATIONS[N]``; editing a released version's DDL fails here."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from pathlib import Path

import pytest

from callbound.stores.base import Commit, JournalRow
from callbound.stores.schema import (
    DB_SCHEMA_VERSION,
    META_KEY,
    POSTGRES_MIGRATIONS,
    POSTGRES_V1,
    SQLITE_MIGRATIONS,
    SQLITE_V1,
    split_statements,
)
from callbound.stores.sqlite import SQLiteStore

from .conftest import make_head

DATA = Path(__file__).parent / "data"
BACKENDS = ("sqlite", "postgres")
VERSIONS = list(range(1, DB_SCHEMA_VERSION + 1))

# Released fixtures never change. A new version adds a line here, it never edits one.
FROZEN_SHA256 = {
    ("sqlite", 1): "ffb74304b2ebfdee1d2203a4f96fc4d6062cb0253ae72f486d0842266248a997",
    ("postgres", 1): "c06ed369a5b979d383f80e64f42944381af4d1d2d294706190611eaf384d5675",
}


def fixture_path(version: int, backend: str) -> Path:
    return DATA / f"db_schema_v{version}_{backend}.sql"


def fixture_body(version: int, backend: str) -> str:
    """The fixture without its leading comment lines."""
    lines = fixture_path(version, backend).read_text(encoding="utf-8").splitlines(keepends=True)
    return "".join(line for line in lines if not line.startswith("--"))


def sqlite_schema(path: Path) -> str:
    """The schema SQLite holds, in the fixture's format: each statement as written, then ";"."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid").fetchall()
    finally:
        conn.close()
    return "".join(f"{sql};\n" for (sql,) in rows)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_version_has_a_frozen_fixture_and_a_migration(backend: str) -> None:
    found = sorted(
        int(m.group(1))
        for p in DATA.glob(f"db_schema_v*_{backend}.sql")
        if (m := re.match(r"db_schema_v(\d+)_", p.name))
    )
    assert found == VERSIONS, (
        f"DB_SCHEMA_VERSION is {DB_SCHEMA_VERSION} but the frozen {backend} fixtures are versions {found}: "
        f"add tests/stores/data/db_schema_v{DB_SCHEMA_VERSION}_{backend}.sql (and a migration)"
    )
    migrations = SQLITE_MIGRATIONS if backend == "sqlite" else POSTGRES_MIGRATIONS
    assert sorted(migrations) == VERSIONS, f"{backend}: one migration per version 1..{DB_SCHEMA_VERSION}"
    for version in VERSIONS:
        assert (backend, version) in FROZEN_SHA256, f"pin the sha256 of the {backend} v{version} fixture here"


@pytest.mark.parametrize(("backend", "version"), sorted(FROZEN_SHA256))
def test_released_fixtures_are_never_edited(backend: str, version: int) -> None:
    digest = hashlib.sha256(fixture_path(version, backend).read_bytes()).hexdigest()
    assert digest == FROZEN_SHA256[(backend, version)], f"{fixture_path(version, backend).name} was edited"


def test_version_1_ddl_in_the_code_is_the_frozen_one() -> None:
    assert fixture_body(1, "sqlite") == "".join(f"{s};\n" for s in split_statements(SQLITE_V1))
    assert fixture_body(1, "postgres") == POSTGRES_V1


def test_a_new_sqlite_database_has_exactly_the_current_frozen_schema(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "new.db").close()
    assert sqlite_schema(tmp_path / "new.db") == fixture_body(DB_SCHEMA_VERSION, "sqlite")


@pytest.mark.parametrize("version", VERSIONS)
def test_each_frozen_sqlite_version_migrates_to_the_current_schema(tmp_path: Path, version: int) -> None:
    path = tmp_path / f"v{version}.db"
    conn = sqlite3.connect(path)
    conn.executescript(fixture_path(version, "sqlite").read_text(encoding="utf-8"))
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (META_KEY, str(version)))
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    try:
        assert store.settings()["db_schema_version"] == DB_SCHEMA_VERSION
        store.commit(Commit("op1", make_head("op1"), [JournalRow("note", {"v": version})], create=True))
        loaded = store.load_operation("op1")
        assert loaded is not None and loaded.journal == [JournalRow("note", {"v": version})]
    finally:
        store.close()
    assert sqlite_schema(path) == fixture_body(DB_SCHEMA_VERSION, "sqlite")
