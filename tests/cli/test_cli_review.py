"""The command line against the fourth acceptance review: self-approval under another spelling of the
subject (D17), read-only commands on a SQLite path that does not exist (D28: exit 2, nothing created),
expired approvals no longer listed as pending (docs/durability.md), and a cancel that reports a decision
it keeps. Every command runs as a subprocess, as a user would run it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import callbound as cb
from callbound.stores import open as open_store

from .test_cli_promises_review import cli, no_traceback, waiting_demo


def _approvals(store: str, tmp_path: Path, *extra: str) -> list[dict[str, object]]:
    r = cli("approvals", "list", "--json", *extra, "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    listed: list[dict[str, object]] = json.loads(r.stdout)
    return listed


# ---- D17: the subject may not approve its own call under another spelling ------------------------------


def test_the_subject_may_not_approve_in_other_case_or_width(tmp_path: Path) -> None:
    """The reviewer's p4: the demo's subject is customer-1, and `--approver CUSTOMER-1` approved it."""
    store, _, approval_id = waiting_demo(tmp_path)
    for name in ["CUSTOMER-1", " Customer-1 ", "\uff43\uff55\uff53\uff54\uff4f\uff4d\uff45\uff52-1"]:
        r = cli("approvals", "approve", approval_id, "--approver", name, "--store", store, cwd=tmp_path)
        assert r.returncode == 2, (name, r.stdout, r.stderr)
        assert "may not approve its own call" in r.stderr
        no_traceback(r)
    assert [a["status"] for a in _approvals(store, tmp_path)] == ["pending"]
    r = cli("approvals", "approve", approval_id, "--approver", "alice", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr


# ---- D28: a read-only command never creates a database ----------------------------------------------


READ_ONLY = [
    ["audit", "verify"],
    ["audit", "verify", "op_x"],
    ["ops", "list"],
    ["ops", "show", "op_x"],
    ["ops", "cancel", "op_x"],
    ["approvals", "list"],
    ["approvals", "list", "--all"],
    ["approvals", "approve", "apr_x", "--approver", "alice"],
    ["approvals", "deny", "apr_x", "--approver", "alice"],
    ["resume", "op_x"],
]


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda a: "-".join(a[:2]) + ("-id" if len(a) > 2 else ""))
def test_a_missing_sqlite_file_is_a_usage_error_and_is_not_created(args: list[str], tmp_path: Path) -> None:
    """The reviewer's p5: `audit verify --store sqlite:///typo.db` created an empty database and said
    "audit verified" (exit 0)."""
    db = tmp_path / "sub" / "typo.db"
    db.parent.mkdir()
    r = cli(*args, "--store", f"sqlite:///{db}", cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == ""
    assert r.stderr.startswith("error:") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert str(db) in r.stderr and "nothing was created" in r.stderr
    assert "callbound demo" in r.stderr  # how to create one
    assert list(db.parent.iterdir()) == []  # no database, no -wal or -shm file either


@pytest.mark.parametrize("args", [["ops", "list"], ["approvals", "list"], ["audit", "verify"]])
def test_the_default_store_is_not_created_by_a_read(args: list[str], tmp_path: Path) -> None:
    r = cli(*args, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert str(tmp_path / "callbound.db") in r.stderr
    assert not (tmp_path / "callbound.db").exists()


def test_a_named_operation_is_named_in_the_message(tmp_path: Path) -> None:
    r = cli("ops", "show", "op_x", "--store", f"sqlite:///{tmp_path / 'none.db'}", cwd=tmp_path)
    assert r.returncode == 2 and "no operation 'op_x' in this store: no SQLite database" in r.stderr


def test_stores_open_without_create_refuses_a_missing_file(tmp_path: Path) -> None:
    """The library side of the rule (docs/durability.md): ``open(url, create=False)``."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with pytest.raises(cb.UsageError, match="no SQLite database at"):
        open_store(url, create=False)
    assert not (tmp_path / "x.db").exists()
    open_store(url).close()  # the default creates it
    open_store(url, create=False).close()  # and now it is there to read
    open_store("memory:", create=False).close()  # nothing to be missing


def test_commands_that_start_work_still_create_the_database(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    r = cli("demo", "refund", "--approve", "--store", f"sqlite:///{db}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert db.exists()
    assert cli("audit", "verify", "--store", f"sqlite:///{db}", cwd=tmp_path).returncode == 0
    assert cli("ops", "list", "--store", f"sqlite:///{db}", cwd=tmp_path).returncode == 0


# ---- docs/durability.md: an expired approval is no longer listed as pending ----------------------------


def test_an_expired_approval_is_not_listed_after_the_operation_completed(tmp_path: Path) -> None:
    """The reviewer's p2: the approval-expired demo COMPLETED, yet its approval stayed `pending`."""
    store = f"sqlite:///{tmp_path / 'cb.db'}"
    r = cli("demo", "refund", "--scenario", "approval-expired", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ops = json.loads(cli("ops", "list", "--json", "--store", store, cwd=tmp_path).stdout)
    assert [o["state"] for o in ops] == ["COMPLETED"]
    assert _approvals(store, tmp_path) == []
    (withdrawn,) = _approvals(store, tmp_path, "--all")
    assert withdrawn["status"] == "withdrawn" and withdrawn["approver"] is None
    assert "expired" in str(withdrawn["reason"]) and "APPROVAL_EXPIRED" in str(withdrawn["reason"])
    r = cli(
        "approvals",
        "approve",
        str(withdrawn["approval_id"]),
        "--approver",
        "alice",
        "--store",
        store,
        cwd=tmp_path,
    )
    assert r.returncode == 2 and "withdrawn" in r.stderr


# ---- a cancel keeps a decision and says so -----------------------------------------------------------


def test_ops_cancel_reports_a_decision_it_keeps(tmp_path: Path) -> None:
    """Approved but not resumed, then cancelled: the decision stays as recorded, and the cancel's output
    says the call does not run."""
    store, op, approval_id = waiting_demo(tmp_path)
    r = cli("approvals", "approve", approval_id, "--approver", "alice", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = cli("ops", "cancel", op, "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "STOPPED (CANCELLED)" in r.stdout
    assert f"approval {approval_id} was approved by alice" in r.stdout and "call does not run" in r.stdout
    (kept,) = _approvals(store, tmp_path, "--all")
    assert (kept["status"], kept["approver"]) == ("approved", "alice")
