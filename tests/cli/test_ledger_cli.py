"""``callbound ledger list | show | settle`` (D16 settling rules, D28 exit codes: 0 done, 2 usage error or
unreadable input, 3 refused with nothing written).

Most cases run in-process through typer's CliRunner; one runs ``python -m callbound.cli`` as a user would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from callbound.cli.app import app
from callbound.core.audit import next_event
from callbound.core.idempotency import SETTLED_APPLIED, LedgerEntry, LedgerStatus
from callbound.stores.base import Commit, JournalRow
from callbound.stores.sqlite import SQLiteStore

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


def head(op: str, state: str, tenant: str = "acme") -> dict[str, Any]:
    return {
        "snapshot_version": 1,
        "operation_id": op,
        "tenant": tenant,
        "subject": "user-1",
        "state": state,
        "created_at": T0.isoformat(),
        "updated_at": T0.isoformat(),
        "fence": None,
    }


def entry(key: str, op: str, status: LedgerStatus, tenant: str = "acme", **kw: Any) -> LedgerEntry:
    return LedgerEntry(key, tenant, "pay", op, status, kw.pop("result", None), 1, **kw)


class Seeded:
    """A SQLite store holding operations and ledger entries, as a stopped run would leave them."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "callbound.db"
        self.url = f"sqlite:///{self.path}"
        self.db = SQLiteStore(self.path)

    def add(self, op: str, state: str, *entries: LedgerEntry, tenant: str = "acme") -> None:
        if self.db.load_operation(op) is None:
            event = next_event(None, op, "transition", T0.isoformat(), {"state": state})
            journal = [JournalRow("transition", {"state": state})]
            self.db.commit(Commit(op, head(op, state, tenant), journal=journal, audit=[event], create=True))
        self.db.commit(Commit(op, head(op, state, tenant), ledger=list(entries)))

    def get(self, key: str, tenant: str = "acme") -> LedgerEntry | None:
        return self.db.ledger_get(tenant, key)


@pytest.fixture
def seeded(tmp_path: Path) -> Any:
    s = Seeded(tmp_path)
    s.add("op_stopped", "STOPPED", entry("ik_unknown", "op_stopped", LedgerStatus.UNKNOWN))
    s.add("op_running", "EXECUTING", entry("ik_running", "op_running", LedgerStatus.UNKNOWN))
    s.add("op_alive", "EXECUTING", entry("ik_alive", "op_alive", LedgerStatus.UNKNOWN, handler_alive=True))
    s.add(
        "op_done",
        "COMPLETED",
        entry("ik_done", "op_done", LedgerStatus.SUCCEEDED, result={"ok": True, "data": {"paid": 1}}),
    )
    s.add(
        "op_g", "STOPPED", entry("ik_unknown", "op_g", LedgerStatus.UNKNOWN, tenant="globex"), tenant="globex"
    )
    yield s
    s.db.close()


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def settle(s: Seeded, key: str, *args: str, tenant: str = "acme") -> Any:
    return run("ledger", "settle", key, "--tenant", tenant, *args, "--store", s.url)


# ---- list -------------------------------------------------------------------------------------------------


def test_list_shows_every_entry_by_tenant_and_key(seeded: Seeded) -> None:
    r = run("ledger", "list", "--store", seeded.url)
    assert r.exit_code == 0, r.output
    lines = [line for line in r.stdout.splitlines() if "ik_" in line]
    assert [line.split()[1] for line in lines] == [
        "ik_alive",
        "ik_done",
        "ik_running",
        "ik_unknown",
        "ik_unknown",
    ]
    assert "handler was still running" in r.stdout


def test_list_filters_by_status_and_tenant_as_json(seeded: Seeded) -> None:
    r = run("ledger", "list", "--status", "UNKNOWN", "--tenant", "acme", "--json", "--store", seeded.url)
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [(e["tenant"], e["key"], e["status"]) for e in rows] == [
        ("acme", "ik_alive", "UNKNOWN"),
        ("acme", "ik_running", "UNKNOWN"),
        ("acme", "ik_unknown", "UNKNOWN"),
    ]
    assert LedgerEntry.from_dict(rows[2]) == seeded.get("ik_unknown")


def test_list_refuses_an_unknown_status(seeded: Seeded) -> None:
    r = run("ledger", "list", "--status", "LOST", "--store", seeded.url)
    assert r.exit_code == 2
    assert "unknown status 'LOST'" in r.stderr and "UNKNOWN" in r.stderr


def test_list_of_a_store_that_does_not_exist_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    r = run("ledger", "list", "--store", f"sqlite:///{missing}")
    assert r.exit_code == 2
    assert not missing.exists()


# ---- show -------------------------------------------------------------------------------------------------


def test_show_says_the_entry_may_be_settled_and_how(seeded: Seeded) -> None:
    r = run("ledger", "show", "ik_unknown", "--tenant", "acme", "--store", seeded.url)
    assert r.exit_code == 0, r.output
    assert "status: UNKNOWN" in r.stdout
    assert "operation: op_stopped (STOPPED)" in r.stdout
    assert (
        "may be settled: callbound ledger settle ik_unknown --tenant acme --applied|--not-applied" in r.stdout
    )


def test_show_says_why_an_entry_of_a_running_operation_cannot_be_settled(seeded: Seeded) -> None:
    r = run("ledger", "show", "ik_running", "--tenant", "acme", "--json", "--store", seeded.url)
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["entry"]["operation_id"] == "op_running"
    assert data["holder_state"] == "EXECUTING"
    assert "callbound resume op_running" in data["settle_refused"]


def test_show_of_a_missing_key_is_a_usage_error(seeded: Seeded) -> None:
    r = run("ledger", "show", "ik_nope", "--tenant", "acme", "--store", seeded.url)
    assert r.exit_code == 2
    assert "no ledger entry 'ik_nope' of tenant 'acme'" in r.stderr
    r = run("ledger", "show", "ik_unknown", "--tenant", "initech", "--store", seeded.url)
    assert r.exit_code == 2  # the key exists, but not for this tenant


# ---- settle -----------------------------------------------------------------------------------------------


def test_settle_applied_with_a_result(seeded: Seeded) -> None:
    r = settle(
        seeded, "ik_unknown", "--applied", "--result", '{"paid": "A1"}', "--by", "alice", "--note", "PSP"
    )
    assert r.exit_code == 0, r.output
    assert "settled SUCCEEDED by alice (was UNKNOWN, held by operation op_stopped)" in r.stdout
    assert "replays the recorded result" in r.stdout
    got = seeded.get("ik_unknown")
    assert got is not None and got.status is LedgerStatus.SUCCEEDED
    assert got.result == {"ok": True, "data": {"paid": "A1"}}
    assert got.settled is not None and (got.settled["by"], got.settled["note"]) == ("alice", "PSP")
    assert seeded.get("ik_unknown", "globex") == entry("ik_unknown", "op_g", LedgerStatus.UNKNOWN, "globex")
    shown = run("ledger", "show", "ik_unknown", "--tenant", "acme", "--store", seeded.url)
    assert "settled by alice at " in shown.stdout and ": PSP" in shown.stdout
    assert "cannot be settled now: it is settled already" in shown.stdout


def test_settle_applied_without_a_result_as_json(seeded: Seeded) -> None:
    r = settle(seeded, "ik_unknown", "--applied", "--by", "alice", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["status"] == "SUCCEEDED" and data["result"] == {"ok": True, "data": SETTLED_APPLIED}
    assert data["settled"]["was"] == "UNKNOWN" and data["settled"]["operation_id"] == "op_stopped"


def test_settle_not_applied(seeded: Seeded) -> None:
    r = settle(seeded, "ik_unknown", "--not-applied", "--by", "bob")
    assert r.exit_code == 0, r.output
    assert "runs the tool again" in r.stdout
    got = seeded.get("ik_unknown")
    assert got is not None and got.status is LedgerStatus.FAILED and got.result is None


def test_a_handler_alive_entry_of_a_running_operation_may_be_settled(seeded: Seeded) -> None:
    """D16: no operation reconciles a handler_alive entry; the operator asserts its outcome."""
    r = settle(seeded, "ik_alive", "--applied", "--by", "alice")
    assert r.exit_code == 0, r.output
    got = seeded.get("ik_alive")
    assert got is not None and got.status is LedgerStatus.SUCCEEDED and not got.handler_alive


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--applied", "--not-applied", "--by", "a"], "exactly one of --applied or --not-applied"),
        (["--by", "a"], "exactly one of --applied or --not-applied"),
        (["--not-applied", "--result", "{}", "--by", "a"], "--result goes with --applied only"),
        (["--applied", "--result", "{not json", "--by", "a"], "--result is not a JSON object"),
        (["--applied", "--result", "[1, 2]", "--by", "a"], "must be a JSON object, got list"),
        (["--applied", "--result", '{"a": 1, "a": 2}', "--by", "a"], "duplicate"),
        (["--applied", "--result", '{"a": NaN}', "--by", "a"], "--result is not a JSON object"),
        (["--applied", "--result", "  ", "--by", "a"], "--result is empty"),
        (["--applied", "--by", "  "], "non-empty"),
    ],
)
def test_bad_options_are_usage_errors_and_write_nothing(
    seeded: Seeded, args: list[str], message: str
) -> None:
    before = seeded.get("ik_unknown")
    r = settle(seeded, "ik_unknown", *args)
    assert r.exit_code == 2, r.output
    assert message in r.stderr
    assert "Traceback" not in r.output
    assert seeded.get("ik_unknown") == before


def test_tenant_and_by_are_required(seeded: Seeded) -> None:
    r = run("ledger", "settle", "ik_unknown", "--applied", "--by", "a", "--store", seeded.url)
    assert r.exit_code == 2 and "--tenant" in r.output
    r = run("ledger", "settle", "ik_unknown", "--tenant", "acme", "--applied", "--store", seeded.url)
    assert r.exit_code == 2 and "--by" in r.output


def test_settling_a_missing_key_is_a_usage_error(seeded: Seeded) -> None:
    r = settle(seeded, "ik_nope", "--applied", "--by", "alice")
    assert r.exit_code == 2
    assert "no ledger entry for key ik_nope of tenant acme" in r.stderr


def test_settling_twice_is_refused_the_second_time(seeded: Seeded) -> None:
    assert settle(seeded, "ik_unknown", "--not-applied", "--by", "alice").exit_code == 0
    first = seeded.get("ik_unknown")
    r = settle(seeded, "ik_unknown", "--applied", "--by", "bob")
    assert r.exit_code == 3, r.output
    assert "refused:" in r.stderr and "settled already (FAILED" in r.stderr and "settled by alice" in r.stderr
    assert seeded.get("ik_unknown") == first


def test_settling_an_entry_its_running_operation_will_reconcile_is_refused(seeded: Seeded) -> None:
    """D16: an UNKNOWN entry of an operation that has not ended is that operation's to reconcile."""
    before = seeded.get("ik_running")
    r = settle(seeded, "ik_running", "--applied", "--by", "alice")
    assert r.exit_code == 3, r.output
    assert "callbound resume op_running" in r.stderr and "callbound ops cancel op_running" in r.stderr
    assert seeded.get("ik_running") == before


def test_control_characters_are_shown_escaped(seeded: Seeded) -> None:
    key = "ik_\x1b[2J\nforged"
    seeded.add("op_stopped", "STOPPED", entry(key, "op_stopped", LedgerStatus.UNKNOWN))
    r = settle(seeded, key, "--applied", "--by", "eve\x1b[31m", "--note", "line1\x07")
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.stdout and "\\x1b[2J\\x0aforged" in r.stdout and "eve\\x1b[31m" in r.stdout
    r = run("ledger", "list", "--store", seeded.url)
    assert "\x1b" not in r.stdout and "\\x1b[2J\\x0aforged" in r.stdout
    r = run("ledger", "show", key, "--tenant", "acme", "--store", seeded.url)
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "line1\\x07" in r.stdout


def test_the_command_line_registers_ledger_and_exits_3_on_a_refusal(seeded: Seeded, tmp_path: Path) -> None:
    """As a user runs it: a subprocess, the exit code D28 documents."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "200"}
    cmd = [sys.executable, "-m", "callbound.cli", "ledger", "settle", "ik_done", "--tenant", "acme"]
    r = subprocess.run(
        [*cmd, "--applied", "--by", "alice", "--store", seeded.url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 3, r.stderr
    assert "settled already (SUCCEEDED" in r.stderr and "Traceback" not in r.stderr
