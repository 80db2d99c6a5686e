"""A damaged ``db_schema_version`` (D19) names the database on PostgreSQL as it does on SQLite (review
round 20, e): SQLite's error named its file, PostgreSQL's said only "the PostgreSQL database", which
does not tell a reader with several servers or search paths which one to restore."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from callbound.core.errors import StoreError
from callbound.stores.postgres import PostgresStore
from callbound.stores.sqlite import SQLiteStore
from tests.stores.conftest import PgSchema


def test_sqlite_names_its_file(tmp_path: Path) -> None:
    path = tmp_path / "cb.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE meta SET value = 'abc'")
    with pytest.raises(StoreError) as info:
        SQLiteStore(path)
    assert f"the SQLite database {str(path)!r} holds 'abc'" in str(info.value)


def test_postgres_names_its_server_and_database(pg_schema: PgSchema) -> None:
    import psycopg

    PostgresStore(pg_schema.url).close()
    with psycopg.connect(pg_schema.dsn, autocommit=True) as raw:
        raw.execute(f"UPDATE {pg_schema.name}.meta SET value = 'abc'")
    with pytest.raises(StoreError) as info:
        PostgresStore(pg_schema.url)
    info_dict = psycopg.conninfo.conninfo_to_dict(pg_schema.dsn)
    where = f"{info_dict.get('host') or 'localhost'}:{info_dict.get('port') or '5432'}/"
    assert f"the PostgreSQL database at {where}" in str(info.value), str(info.value)
    assert "holds 'abc', not a version number" in str(info.value)
