from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest


def store_urls(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'callbound.db'}"
    dsn = os.environ.get("CALLBOUND_TEST_POSTGRES")
    if not dsn:
        if os.environ.get("CALLBOUND_REQUIRE_POSTGRES"):
            pytest.fail("CALLBOUND_REQUIRE_POSTGRES is set but CALLBOUND_TEST_POSTGRES is not")
        pytest.skip(
            'PostgreSQL crash tests need CALLBOUND_TEST_POSTGRES (e.g. eval "$(.ci/postgres.sh start)")'
        )
    import psycopg

    schema = f"cb_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in dsn else "?"
    return f"{dsn}{sep}options=-csearch_path%3D{schema}"
