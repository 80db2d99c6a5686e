"""Review round 19 (d F2): the commands printed a PostgreSQL store URL whole, password and all.

``callbound demo refund --store postgresql://bob:PASSWORD@host/db`` showed the password in its banner
(``store=...``) and in every command it suggests (approve, resume; ``approvals approve``'s "resume
with"; the hints after Ctrl-C or a store failure), on stdout: terminals' scrollback, CI logs, bug
reports. Round 18 (d F5) kept it out of error messages; these now show it as ``***`` too, with a line
saying so, and every other URL as it was.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from callbound.cli.render import password_note, resume_hint, store_flag
from callbound.stores.dsn import shown_url

from ..cli.test_cli_promises_review import cli, no_traceback
from .conftest import PgSchema

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"postgresql://bob:{SECRET}@db.example:5432/app", "postgresql://bob:***@db.example:5432/app"),
        (f"postgres://bob:{SECRET}@h/app?sslmode=require", "postgres://bob:***@h/app?sslmode=require"),
        (f"postgresql://bob@h/app?sslmode=require&password={SECRET}", "postgresql://bob@h/app?sslmode=require&password=***"),
        (f"postgresql://bob:{SECRET}@[::1]:5432/app?password={SECRET}", "postgresql://bob:***@[::1]:5432/app?password=***"),
        ("postgresql://bob:p%40ss@h/app", "postgresql://bob:***@h/app"),
        ("postgresql://bob:p@ss@h/app", "postgresql://bob:***@h/app"),
        ("postgresql://bob@h/app", "postgresql://bob@h/app"),
        ("postgresql://h/app?options=-csearch_path%3Ds", "postgresql://h/app?options=-csearch_path%3Ds"),
        ("sqlite:///user:name@dir/cb.db", "sqlite:///user:name@dir/cb.db"),
        ("memory:", "memory:"),
    ],
)  # fmt: skip
def test_a_store_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert shown_url(url) == shown
    assert SECRET not in store_flag(url) and SECRET not in resume_hint("op_1", url, None)
    assert (password_note(url) != "") == (shown != url)


def _with_password(url: str) -> str:
    """The test server's URL with a password in it (the server trusts the test user: it is not checked)."""
    parts = urlsplit(url)
    user = parts.username or "postgres"
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{user}:{SECRET}@{host}"))


def test_the_demo_and_the_approval_never_print_the_password(pg_schema: PgSchema, tmp_path: Path) -> None:
    url = _with_password(pg_schema.url)
    demo = cli("demo", "refund", "--store", url, cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    no_traceback(demo)
    assert SECRET not in demo.stdout + demo.stderr, demo.stdout
    assert "store=postgresql://postgres:***@" in demo.stdout
    assert "password is shown as ***" in demo.stdout
    listed = cli("approvals", "list", "--json", "--store", url, cwd=tmp_path)
    approval_id = json.loads(listed.stdout)[0]["approval_id"]
    approve = cli("approvals", "approve", approval_id, "--approver", "alice", "--store", url, cwd=tmp_path)
    assert approve.returncode == 0, approve.stderr
    assert SECRET not in approve.stdout + approve.stderr, approve.stdout
    assert "--store 'postgresql://postgres:***@" in approve.stdout
