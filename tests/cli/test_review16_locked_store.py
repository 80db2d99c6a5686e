"""A SQLite store another process holds locked: the error's advice can be followed from the command line,
and the wait it reports is the wait there was (review round 16, r2 F6).

The store says "retry, or raise busy_timeout_ms", an option of ``SQLiteStore`` in code that no ``--store``
URL sets; ``CALLBOUND_SQLITE_BUSY_TIMEOUT_MS`` sets it for every command, and the message names it.
``ops cancel`` reads the operation again and retries its commit, so it waited three times the 10000 ms
it reported; it now says how long it waited in all. Exit 2 and one line, as before (D28)."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_review16_broken_pipe import cli16

ENV = "CALLBOUND_SQLITE_BUSY_TIMEOUT_MS"


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """A demo operation WAITING_APPROVAL in a store held by another writer: (url, op id, approval id)."""
    url = f"sqlite:///{tmp_path / 'cb.db'}"
    r = cli16("demo", "refund", "--json", "--store", url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    holder = sqlite3.connect(tmp_path / "cb.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        yield url, data["operation_id"], data["pending_approvals"][0]["approval_id"]
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_the_busy_timeout_comes_from_the_environment_and_the_message_names_it(
    tmp_path: Path, locked: tuple[str, str, str]
) -> None:
    url, _, approval = locked
    started = time.monotonic()
    r = cli16(
        "approvals", "approve", approval, "--approver", "alice", "--store", url, cwd=tmp_path, **{ENV: "300"}
    )
    assert r.returncode == 2, r.stderr
    assert time.monotonic() - started < 8  # not the default 10 s
    (line,) = r.stderr.splitlines()
    assert "stayed locked for 300 ms" in line and f"raise busy_timeout_ms (here: {ENV}=<ms>)" in line, line


def test_ops_cancel_says_how_long_it_waited_in_all(tmp_path: Path, locked: tuple[str, str, str]) -> None:
    url, op, _ = locked
    started = time.monotonic()
    r = cli16("ops", "cancel", op, "--store", url, cwd=tmp_path, **{ENV: "1000"})
    waited = time.monotonic() - started
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.splitlines()
    m = re.search(r"ops cancel tried again on a fresh read, (\d+) s in all", line)
    assert m, line
    # the process's own start-up counts in `waited` but not in the message (slow on a loaded machine)
    assert 2 <= int(m.group(1)) <= waited + 0.5, (line, waited)


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "999999999999"])
def test_a_bad_busy_timeout_is_a_usage_error_and_creates_nothing(tmp_path: Path, value: str) -> None:
    r = cli16("demo", "refund", "--store", f"sqlite:///{tmp_path / 'new.db'}", cwd=tmp_path, **{ENV: value})
    assert r.returncode == 2 and r.stderr.startswith(f"error: {ENV}="), r.stderr
    assert not (tmp_path / "new.db").exists()
