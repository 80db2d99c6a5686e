"""The command line against review round 14 (h5, repros in its repro folder): D28 says 2 is a usage error
or unreadable input and 1 is kept for audit tampering, and an error is one ``error:`` line.

- r8: a StoreError (a locked or unreachable store) out of ``ops list``, ``approvals list``, ``ops show`` or
  ``audit verify`` was a traceback and exit 1 (``audit verify``: "tampered").
- r1: a byte that is not UTF-8 in an id, tenant, key, worker id or CALLBOUND_AUDIT_KEY (decoded by Python
  to a lone surrogate) was a UnicodeEncodeError traceback and exit 1.
- r4: a sqlite: URL with ``?mode=ro`` on the read-only commands, and a PostgreSQL URL with such a byte.
- r2: ``--limit 99999999999999999999`` overflowed sqlite3's integer.
- r7: ``worker --lease 1e308`` was accepted.
- r6: a repeated decision after the operation ended still printed "resume with: ...".

In-process through typer's CliRunner where possible; subprocesses where the bytes of argv or a fresh
interpreter matter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import callbound.stores
from callbound.cli.app import app
from callbound.core.errors import StoreError, UsageError
from callbound.demo.refund import make_app
from callbound.stores import open as open_store

from .test_cli_promises_review import cli, no_traceback, waiting_demo

X = "\udcff"  # the byte 0xff of argv or the environment, as Python decodes it (surrogateescape)


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def one_error_line(r: Any, code: int = 2) -> str:
    """The run ended with ``code`` and one ``error:`` line on stderr, no traceback."""
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr, r.exception)
    assert isinstance(r.exception, SystemExit), repr(r.exception)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return str(lines[0])


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[str, str, str]:
    """A SQLite store with one operation WAITING_APPROVAL: (url, operation id, approval id)."""
    url = f"sqlite:///{tmp_path / 'cb.db'}"
    st = open_store(url)
    payments = str(tmp_path / "pay.db")
    ref = {"ref": "callbound.demo.refund:make_app", "args": {"payments": payments}}
    out = (
        make_app(payments=payments)
        .runner(st, ref=ref)
        .run_sync(input="refund A1", tenant="acme", subject="customer-1")
    )
    st.close()
    return url, out.operation_id, out.pending_approvals[0].approval_id


# ---- r8: a StoreError escaping a command is exit 2, one line ---------------------------------------------


class Unreadable:
    """A store whose every read fails as PostgreSQL's did under a lock held past lock_timeout (the store
    layer's StoreError; psycopg's message carries the statement and a caret on lines of their own)."""

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise StoreError(
                f"PostgreSQL at db failed while {name}: canceling statement due to lock timeout\n"
                "LINE 1: SELECT head FROM operations\n                        ^; check that the server is up"
            )

        return fail


@pytest.mark.parametrize(
    "args",
    [
        ["ops", "list"],
        ["approvals", "list"],
        ["audit", "verify"],
        ["audit", "verify", "OP"],
        ["ops", "show", "OP"],
        ["ops", "cancel", "OP"],
        ["resume", "OP"],
        ["approvals", "approve", "APR", "--approver", "alice"],
        ["ledger", "list"],
    ],
    ids=" ".join,
)
def test_a_store_error_is_exit_2_on_one_line(
    args: list[str], seeded: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, op, apr = seeded
    monkeypatch.setattr(callbound.stores, "open", lambda url, create=True: Unreadable())
    args = [op if a == "OP" else apr if a == "APR" else a for a in args]
    line = one_error_line(run(*args, "--store", url))
    assert "lock timeout" in line and "^; check that the server is up" in line


# ---- r1: text that is not UTF-8 --------------------------------------------------------------------------


NOT_UTF8 = [
    (["audit", "verify", "op_" + X], "OPERATION_ID"),
    (["ops", "show", "op_" + X], "OPERATION_ID"),
    (["ops", "list", "--tenant", X], "--tenant"),
    (["ops", "cancel", "op_" + X], "OPERATION_ID"),
    (["resume", "op_" + X], "OPERATION_ID"),
    (["approvals", "list", "--tenant", X], "--tenant"),
    (["approvals", "approve", "apr_" + X, "--approver", "alice"], "APPROVAL_ID"),
    (["approvals", "deny", "APR", "--approver", "alice", "--reason", "no" + X], "--reason"),
    (["ledger", "show", "k" + X, "--tenant", "acme"], "KEY"),
    (["ledger", "list", "--tenant", X], "--tenant"),
    (["ledger", "settle", "k" + X, "--tenant", "acme", "--applied", "--by", "alice"], "KEY"),
    (["worker", "--app", "callbound.demo.refund:make_app", "--id", "w" + X, "--idle-exit", "0"], "--id"),
    (["demo", "refund", "--approver", "b" + X], "--approver"),
]


@pytest.mark.parametrize(("args", "named"), NOT_UTF8, ids=lambda a: " ".join(a) if isinstance(a, list) else a)
def test_a_byte_that_is_not_utf8_in_an_argument_is_a_usage_error(
    args: list[str], named: str, seeded: tuple[str, str, str]
) -> None:
    url, _, apr = seeded
    args = [apr if a == "APR" else a for a in args]
    line = one_error_line(run(*args, "--store", url))
    assert line.startswith(f"error: {named} holds the byte \\xff at position "), line
    assert "not UTF-8" in line
    assert open_store(url).get_approval(apr).status == "pending"  # type: ignore[union-attr]


@pytest.mark.parametrize("args", [["audit", "verify"], ["demo", "refund"], ["resume", "OP"]], ids=" ".join)
def test_an_audit_key_that_is_not_utf8_is_a_usage_error(
    args: list[str], seeded: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, op, _ = seeded
    monkeypatch.setenv("CALLBOUND_AUDIT_KEY", "k" + X)
    line = one_error_line(run(*[op if a == "OP" else a for a in args], "--store", url))
    assert line.startswith("error: CALLBOUND_AUDIT_KEY holds the byte \\xff at position 1"), line


def test_every_command_checks_its_text_arguments() -> None:
    """The check is one class for every command (cli/errors.py): a command added without it would
    crash on such a byte again."""
    import typer

    from callbound.cli.errors import CheckedCommand

    def leaves(command: Any) -> list[Any]:
        subs = getattr(command, "commands", None)
        return [command] if subs is None else [c for s in subs.values() for c in leaves(s)]

    commands = leaves(typer.main.get_command(app))
    assert len(commands) >= 15  # run, resume, parse, worker, demo, ops, approvals, audit, ledger
    assert all(isinstance(c, CheckedCommand) for c in commands), [
        c.name for c in commands if not isinstance(c, CheckedCommand)
    ]


def test_audit_verify_of_an_id_with_such_a_byte_is_not_reported_as_tampering(
    seeded: tuple[str, str, str], tmp_path: Path
) -> None:
    """As a user's shell runs it: argv bytes, a fresh interpreter (exit 1 meant TAMPERED to a script)."""
    url, _, _ = seeded
    r = subprocess.run(
        [sys.executable, "-m", "callbound.cli", "audit", "verify", b"op_\xff", "--store", url],
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
    )
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 2, err
    assert err.startswith("error: OPERATION_ID holds the byte \\xff") and "Traceback" not in err


def test_a_file_name_that_is_not_utf8_is_still_parsed(tmp_path: Path) -> None:
    """`parse FILE` only reads the file, whose name the OS takes as bytes: it is not refused."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4.1-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    }
    path = os.path.join(os.fsencode(tmp_path), b"resp\xff.json")
    with open(path, "wb") as f:
        f.write(json.dumps(body).encode())
    r = run("parse", "--api", "openai-chat", os.fsdecode(path))
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["finish"] == "FINAL_TEXT"


# ---- r4: store URLs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["ops", "list"], ["audit", "verify"], ["approvals", "list"]], ids=" ".join)
def test_a_sqlite_url_with_a_query_is_a_usage_error_on_the_read_only_commands(
    args: list[str], seeded: tuple[str, str, str]
) -> None:
    url, _, _ = seeded
    line = one_error_line(run(*args, "--store", url + "?mode=ro"))
    assert "takes no query options" in line


def test_a_store_url_that_is_not_utf8_is_refused_by_stores_open() -> None:
    """The CLI refuses it as an argument first; stores.open refuses it for code (psycopg's connect raised
    UnicodeEncodeError)."""
    for url in ("postgresql://postgres@127.0.0.1:1/x" + X, "sqlite:///cb" + X + ".db"):
        with pytest.raises(UsageError, match="not UTF-8"):
            open_store(url)
        with pytest.raises(UsageError, match="not UTF-8"):
            open_store(url, create=False)
    r = run("ops", "list", "--store", "postgresql://postgres@127.0.0.1:1/x" + X)
    assert one_error_line(r).startswith("error: --store holds the byte \\xff")


# ---- r2: --limit ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["ops", "list", "--json"], ["ledger", "list", "--json"]], ids=" ".join)
def test_a_huge_limit_lists_everything(args: list[str], tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'cb.db'}"
    r = cli("demo", "refund", "--approve", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run(*args, "--limit", "99999999999999999999", "--store", store)
    assert r.exit_code == 0, (r.stderr, r.exception)
    everything = run(*args, "--store", store)
    assert json.loads(r.stdout) == json.loads(everything.stdout) != []


# ---- r7: worker --lease -----------------------------------------------------------------------------------


def test_a_lease_beyond_a_day_is_a_usage_error(seeded: tuple[str, str, str]) -> None:
    url, _, _ = seeded
    for lease in ("1e308", "86401"):
        r = run(
            "worker",
            "--app",
            "callbound.demo.refund:make_app",
            "--lease",
            lease,
            "--idle-exit",
            "0",
            "--store",
            url,
        )
        assert "--lease must be at most 86400 seconds" in one_error_line(r)  # named as typed (r19 d F5)
    r = run(
        "worker",
        "--app",
        "callbound.demo.refund:make_app",
        "--lease",
        "86400",
        "--max-operations",
        "0",
        "--store",
        url,
    )
    assert r.exit_code == 0, r.stderr


def test_worker_refuses_a_lease_beyond_a_day(tmp_path: Path) -> None:
    from callbound.runtime.worker import Worker

    st = open_store(f"sqlite:///{tmp_path / 'cb.db'}")
    demo = make_app(payments=str(tmp_path / "pay.db"))
    with pytest.raises(UsageError, match="at most 86400"):
        Worker(demo, st, lease_s=1e308)  # type: ignore[arg-type]
    assert Worker(demo, st, lease_s=86_400).lease_s == 86_400  # type: ignore[arg-type]
    st.close()


# ---- r6: a repeated decision --------------------------------------------------------------------------------


def test_a_second_denial_with_another_reason_says_it_was_not_recorded_and_no_resume_is_suggested(
    tmp_path: Path,
) -> None:
    """D17: the same verdict from the same approver returns the original decision, its reason included;
    the CLI says the new reason was not recorded (it printed "denied by alice" as if it were)."""
    store, op, apr = waiting_demo(tmp_path)
    deny = ["approvals", "deny", apr, "--approver", "alice", "--store", store]
    r = cli(*deny, "--reason", "wrong amount", cwd=tmp_path)
    assert r.returncode == 0 and "resume with: callbound resume" in r.stdout, r.stderr
    assert cli("resume", op, "--store", store, cwd=tmp_path).returncode == 0

    r = cli(*deny, "--reason", "fraud suspected: escalate to security", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "the reason given now was not recorded" in r.stderr and "'wrong amount'" in r.stderr
    assert f"approval {apr}: already denied by alice" in r.stdout
    no_traceback(r)

    r = cli(*deny, "--reason", "wrong amount", cwd=tmp_path)  # the same decision: the original, exit 0
    assert r.returncode == 0, r.stderr
    assert "not recorded" not in r.stderr
    assert f"approval {apr}: already denied by alice" in r.stdout
    assert f"operation {op} has ended COMPLETED: there is nothing to resume" in r.stdout
    assert "resume with" not in r.stdout
    listed = json.loads(cli("approvals", "list", "--all", "--json", "--store", store, cwd=tmp_path).stdout)
    assert [a["reason"] for a in listed] == ["wrong amount"]


def test_a_locked_postgresql_store_is_exit_2_on_one_line(tmp_path: Path) -> None:
    """r8 as the reviewer ran it: another session holds the tables past the CLI's lock_timeout."""
    from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

    from tests.stores.conftest import PgSchema

    schema = PgSchema()  # skips without CALLBOUND_TEST_POSTGRES
    try:
        import psycopg

        parts = urlsplit(schema.dsn)
        options = f"-csearch_path={schema.name} -clock_timeout=300"
        query = urlencode([*parse_qsl(parts.query), ("options", options)], quote_via=quote)  # %20, not +
        url = urlunsplit(parts._replace(query=query))
        st = open_store(url)
        payments = str(tmp_path / "pay.db")
        ref = {"ref": "callbound.demo.refund:make_app", "args": {"payments": payments}}
        op = (
            make_app(payments=payments)
            .runner(st, ref=ref)
            .run_sync(input="refund A1", tenant="acme", subject="customer-1")
            .operation_id
        )
        st.close()
        with psycopg.connect(url) as locker:
            locker.execute(
                "LOCK TABLE operations, approvals, audit, journal, ledger IN ACCESS EXCLUSIVE MODE"
            )
            for args in (["ops", "list"], ["approvals", "list"], ["audit", "verify"], ["ops", "show", op]):
                line = one_error_line(run(*args, "--store", url))
                assert "lock timeout" in line, (args, line)
            locker.rollback()
    finally:
        schema.drop()


@pytest.mark.parametrize("table", ["operations", "journal"])
def test_audit_verify_of_one_operation_whose_row_does_not_load_names_it_as_tampering(
    tmp_path: Path, table: str
) -> None:
    """D28: a row edited into text that is not JSON is tampering, exit 1 naming it, for `audit verify OP`
    as for `audit verify` (the check that the id exists read the row first and exited 2)."""
    import sqlite3

    store, op, _ = waiting_demo(tmp_path)
    column = "head" if table == "operations" else "data"
    with sqlite3.connect(tmp_path / "demo.db") as conn:
        conn.execute(f"UPDATE {table} SET {column} = '{{' WHERE operation_id = ?", (op,))
    for args in (["audit", "verify", op], ["audit", "verify"]):
        r = cli(*args, "--store", store, cwd=tmp_path)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        assert "TAMPERED" in r.stderr and "cannot be loaded" in r.stderr, r.stderr
        no_traceback(r)
