"""``callbound worker`` with an option Worker or its run refuses (review round 14, h9,
r_bad_option_creates_store.py): it exited 2 but had already created the SQLite file, or callbound's
tables in an empty PostgreSQL database, because the store was opened before ``Worker()`` and ``run()``
checked the options. The options are now checked first, by the same rules (runtime/worker.py
``check_options``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from callbound.cli.app import app
from callbound.core.errors import UsageError

APP = "callbound.demo.refund:make_app"
# Named as the user typed them (review round 19, d F5: the message named Worker's parameters, lease_s ...)
BAD = [
    (["--lease", "0"], "error: --lease must be a positive"),
    (["--lease", "1e9"], "error: --lease must be at most 86400"),
    (["--lease", "nan"], "error: --lease must be a positive"),
    (["--poll", "-1"], "error: --poll must be a positive"),
    (["--max-operations", "-1"], "error: --max-operations must be an int >= 0"),
    (["--idle-exit", "-1"], "error: --idle-exit must be a number of seconds >= 0"),
]


def worker(store: str, *options: str) -> Any:
    return CliRunner().invoke(app, ["worker", "--app", APP, "--store", store, *options])


def one_error_line(r: Any) -> str:
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr, r.exception)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return str(lines[0])


@pytest.mark.parametrize(("options", "message"), BAD)
def test_a_bad_option_leaves_no_sqlite_file_behind(
    options: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the demo app's payments file goes here
    db = tmp_path / "typo.db"
    assert message in one_error_line(worker(f"sqlite:///{db}", *options))
    assert not db.exists()  # before: an empty store at the mistyped path


@pytest.mark.parametrize(("options", "message"), BAD[:1] + BAD[3:])
def test_a_bad_option_creates_no_tables_in_an_empty_postgres_database(
    options: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.stores.conftest import PgSchema

    schema = PgSchema()  # skips without CALLBOUND_TEST_POSTGRES
    try:
        monkeypatch.chdir(tmp_path)
        assert message in one_error_line(worker(schema.url, *options))
        import psycopg

        with psycopg.connect(schema.dsn, autocommit=True) as conn:
            tables = conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema.name,)
            ).fetchone()
        assert tables == (0,)  # before: callbound's tables, in a database named by mistake
    finally:
        schema.drop()


def test_good_options_still_open_the_store_and_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "cb.db"
    r = worker(
        f"sqlite:///{db}", "--lease", "86400", "--poll", "0.01", "--max-operations", "0", "--idle-exit", "0"
    )
    assert r.exit_code == 0, (r.stdout, r.stderr, r.exception)
    assert "claimed 0" in r.stdout and db.exists()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lease_s": math.inf, "poll_s": 1.0},
        {"lease_s": 30.0, "poll_s": True},
        {"lease_s": 30.0, "poll_s": 1.0, "max_operations": 1.5},
        {"lease_s": 30.0, "poll_s": 1.0, "idle_exit_s": math.nan},
    ],
)
def test_check_options_refuses_what_worker_and_run_refuse(kwargs: dict[str, Any]) -> None:
    from callbound.runtime.worker import check_options

    with pytest.raises(UsageError):
        check_options(**kwargs)


def test_a_runner_lease_or_a_worker_poll_beyond_a_day_is_a_usage_error() -> None:
    """Review round 14: Runner(lease_s=1e308) was accepted (PostgreSQL's lease intervals then fail on
    every drive) and a worker poll of 1e308 s made an idle worker sleep forever."""
    import callbound as cb
    from callbound.runtime.worker import check_options
    from callbound.testing import ScriptedModel

    with pytest.raises(UsageError, match="lease_s must be at most 86400 seconds"):
        cb.Runner(model=ScriptedModel("openai-responses", []), registry=cb.Registry([]), lease_s=1e308)
    with pytest.raises(UsageError, match="poll_s must be at most 86400 seconds"):
        check_options(30.0, 1e308)
    check_options(86_400.0, 86_400.0)  # a day is allowed
