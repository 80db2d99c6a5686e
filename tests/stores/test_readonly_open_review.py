"""A PostgreSQL database without callbound's tables is not a store to read (acceptance review r2c,
pg_readonly.sh): ``callbound audit verify --store postgresql://.../empty_db`` said "audit verified: 0
operation(s)" (exit 0) and created callbound's tables there. Now ``stores.open(url, create=False)``,
``PostgresStore(url, create=False)`` and ``stores.missing_database(url)`` (the CLI's check for its
read-only commands) refuse it with one line naming the database and the commands that create the tables,
and nothing is created. Needs CALLBOUND_TEST_POSTGRES (see conftest), except the unreachable-server
tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import callbound as cb
from callbound import stores
from callbound.stores.schema import DB_SCHEMA_VERSION, META_KEY

from ..cli.test_cli_promises_review import cli, no_traceback
from ..cli.test_cli_review import READ_ONLY
from .conftest import PgSchema


def _tables(schema: PgSchema) -> list[str]:
    import psycopg

    with psycopg.connect(schema.dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1",
            (schema.name,),
        ).fetchall()
    return [r[0] for r in rows]


def _where(schema: PgSchema) -> str:
    from callbound.stores.postgres import _describe

    return _describe(schema.url)


def test_open_without_create_refuses_a_database_without_tables(pg_schema: PgSchema) -> None:
    with pytest.raises(cb.UsageError) as info:
        stores.open(pg_schema.url, create=False)
    message = str(info.value)
    assert "\n" not in message
    assert f"no callbound tables in the PostgreSQL database at {_where(pg_schema)}" in message
    assert "nothing was created" in message and "callbound demo, run, worker" in message
    assert _tables(pg_schema) == []


def test_postgres_store_without_create_refuses_and_creates_nothing(pg_schema: PgSchema) -> None:
    from callbound.stores.postgres import PostgresStore

    with pytest.raises(cb.UsageError, match="no callbound tables"):
        PostgresStore(pg_schema.url, create=False)
    assert _tables(pg_schema) == []


def test_once_created_the_database_opens_without_create(pg_schema: PgSchema) -> None:
    stores.open(pg_schema.url).close()  # the default creates the tables
    assert "meta" in _tables(pg_schema)
    store = stores.open(pg_schema.url, create=False)
    try:
        assert store.list_operations() == [] and store.audited_operations() == []
    finally:
        store.close()
    assert stores.missing_database(pg_schema.url) is None


def test_a_foreign_meta_table_is_not_a_callbound_schema(pg_schema: PgSchema) -> None:
    """Another application's ``meta`` table (no db_schema_version row) is still no callbound store."""
    import psycopg

    with psycopg.connect(pg_schema.url, autocommit=True) as conn:
        conn.execute("CREATE TABLE meta (key text PRIMARY KEY, value text)")
        conn.execute("INSERT INTO meta VALUES ('app_version', '7')")
    with pytest.raises(cb.UsageError, match="no callbound tables"):
        stores.open(pg_schema.url, create=False)
    assert _tables(pg_schema) == ["meta"]
    with psycopg.connect(pg_schema.url, autocommit=True) as conn:
        conn.execute("INSERT INTO meta VALUES (%s, %s)", (META_KEY, str(DB_SCHEMA_VERSION)))
    assert stores.missing_database(pg_schema.url) is None


def test_missing_database_names_the_postgres_database(pg_schema: PgSchema) -> None:
    missing = stores.missing_database(pg_schema.url)
    assert missing is not None and _where(pg_schema) in missing and "nothing was created" in missing
    assert _tables(pg_schema) == []


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda a: "-".join(a[:2]) + ("-id" if len(a) > 2 else ""))
def test_read_only_commands_refuse_an_empty_postgres_database(
    args: list[str], pg_schema: PgSchema, tmp_path: Path
) -> None:
    """The reviewer's scenario, for every command that only reads or decides what is stored."""
    r = cli(*args, "--store", pg_schema.url, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == ""
    assert r.stderr.startswith("error:") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "no callbound tables in the PostgreSQL database at" in r.stderr
    assert "callbound demo, run, worker" in r.stderr
    no_traceback(r)
    assert _tables(pg_schema) == []  # the reviewer saw six tables appear here


def test_read_only_commands_work_once_the_tables_exist(pg_schema: PgSchema, tmp_path: Path) -> None:
    stores.open(pg_schema.url).close()
    r = cli("audit", "verify", "--store", pg_schema.url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = cli("ops", "list", "--store", pg_schema.url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr


# ---- an unreachable server: the probe steps aside, the opening says why (no PostgreSQL needed) --------

UNREACHABLE = "postgresql://someone:s3cret-pw@127.0.0.1:1/db"


def test_an_unreachable_server_is_not_reported_as_missing_tables() -> None:
    pytest.importorskip("psycopg")
    assert stores.missing_database(UNREACHABLE) is None
    with pytest.raises(cb.StoreError, match="cannot connect to PostgreSQL") as info:
        stores.open(UNREACHABLE, create=False)
    assert "s3cret-pw" not in str(info.value)


def test_the_cli_reports_an_unreachable_server(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    r = cli("ops", "list", "--store", UNREACHABLE, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "cannot connect to PostgreSQL at 127.0.0.1:1/db" in r.stderr and "s3cret-pw" not in r.stderr
    no_traceback(r)


def test_checking_a_sqlite_url_never_imports_psycopg() -> None:
    code = (
        "import sys\n"
        "from callbound.stores import missing_database\n"
        "missing_database('sqlite:///no/such/file.db'); missing_database('memory:')\n"
        "assert 'psycopg' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
