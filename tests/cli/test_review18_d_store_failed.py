"""Review round 18 (d F3): a store that fails while ``run`` or ``resume`` drives an operation.

A SQLite store locked past its busy timeout (or a database server gone) after a write was applied
ended the command with the store's one line: "... stayed locked ...; retry, or raise busy_timeout_ms".
Running ``callbound run`` again, as "retry" reads, starts another operation: the refund the first one
made was made again under a new intent. The operation was saved at its last commit (D18: C1 before
the handler), and ``callbound resume`` finishes it with no second effect (its ledger entry is STARTED,
so the write is reconciled). The line now says so, and names that resume (still one line, exit 2: D28).

The application below locks the store from inside its write handler, after the payment, and holds the
lock until the process exits, so the commit of the result (C2) times out.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from callbound.core.errors import NotApplied
from callbound.core.guards import Budgets
from callbound.core.registry import CallContext, Registry, ToolSpec
from callbound.demo.payments import FakePayments
from callbound.runtime.app import App
from callbound.runtime.runner import Policy
from tests.durability.worker_app import PerOperationModel

REPO = Path(__file__).resolve().parents[2]
APP = "tests.cli.test_review18_d_store_failed:make_app"
LOCK_ENV = "CALLBOUND_TEST_LOCK_STORE"
_held: list[sqlite3.Connection] = []


class OrderArgs(BaseModel):
    order_id: str


def make_app() -> App:
    payments = FakePayments(os.environ["CALLBOUND_TEST_PAYMENTS"])

    def get_order(args: OrderArgs, ctx: CallContext) -> dict[str, Any]:
        return {"order_id": args.order_id, "total": "10.00"}

    def submit_refund(args: OrderArgs, ctx: CallContext) -> dict[str, Any]:
        assert ctx.idempotency_key is not None
        receipt = payments.submit(ctx.idempotency_key, args.order_id, "10.00", "EUR")
        lock = os.environ.get(LOCK_ENV)
        if lock:  # another writer takes the store now, and keeps it while this process lives
            conn = sqlite3.connect(lock, isolation_level=None)
            conn.execute("BEGIN EXCLUSIVE")
            _held.append(conn)
        return receipt

    def reconcile(key: str, ctx: CallContext) -> dict[str, Any]:
        found = payments.lookup(key)
        if found is None:
            raise NotApplied("not found downstream")
        return found

    tools = [
        ToolSpec(
            name="get_order",
            description="Look up an order",
            params=OrderArgs,
            handler=get_order,
            schema_version="1",
            risk="read",
            timeout_ms=5_000,
        ),
        ToolSpec(
            name="submit_refund",
            description="Refund an order",
            params=OrderArgs,
            handler=submit_refund,
            schema_version="1",
            risk="write",
            timeout_ms=5_000,
            intent_key=lambda a, c: f"refund:{a.order_id}",
            reconcile=reconcile,
        ),
    ]
    return App(
        registry=Registry(tools),
        model=PerOperationModel(),
        policy=Policy(revision="r18d"),
        budgets=Budgets(max_model_turns=6),
    )


def cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "CALLBOUND_TEST_PAYMENTS": str(cwd / "payments.db"),
        "CALLBOUND_SQLITE_BUSY_TIMEOUT_MS": "300",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "callbound.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        input="",
        env=full,
        timeout=120,
    )


def _only_operation(db: Path) -> tuple[str, str]:
    with sqlite3.connect(db) as conn:
        ((op, state),) = conn.execute("SELECT operation_id, state FROM operations").fetchall()
    conn.close()
    return op, state


def test_run_names_the_saved_operation_and_its_resume_when_the_store_fails_mid_drive(tmp_path: Path) -> None:
    db = tmp_path / "cb.db"
    url = f"sqlite:///{db}"
    r = cli("run", "Refund my order", "--app", APP, "--store", url, cwd=tmp_path, **{LOCK_ENV: str(db)})
    assert r.returncode == 2, (r.stdout, r.stderr)
    (line,) = r.stderr.strip().splitlines()
    op, state = _only_operation(db)
    assert state == "EXECUTING"
    assert line.startswith("error:") and "stayed locked for 300 ms" in line, line
    assert f"operation {op} is saved (EXECUTING)" in line, line
    assert f"callbound resume {op} --store {url}" in line, line
    assert "running callbound run again would start another operation" in line, line

    # what the line says to do finishes it, with the one refund
    r = cli("resume", op, "--store", url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert _only_operation(db) == (op, "COMPLETED")
    assert [row[1] for row in FakePayments(str(tmp_path / "payments.db")).rows()] == [f"ik_refund:{op}"]


def test_resume_names_the_operation_and_its_resume_when_the_store_fails_mid_drive(tmp_path: Path) -> None:
    db = tmp_path / "cb.db"
    url = f"sqlite:///{db}"
    # a process killed inside the write, before its effect: the resume runs the handler again
    r = cli(
        "run",
        "Refund my order",
        "--app",
        APP,
        "--store",
        url,
        cwd=tmp_path,
        CALLBOUND_CRASH_AT="after_ledger_started:submit_refund",
    )
    assert r.returncode == -9, (r.stdout, r.stderr)
    op, _ = _only_operation(db)
    r = cli("resume", op, "--store", url, cwd=tmp_path, **{LOCK_ENV: str(db)})
    assert r.returncode == 2, (r.stdout, r.stderr)
    # before it, the log line of taking over from the killed process
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert "stayed locked for 300 ms" in line, line
    assert f"operation {op} is saved (EXECUTING)" in line and f"callbound resume {op} --store {url}" in line
    assert "again would start another operation" not in line, line
    r = cli("resume", op, "--store", url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert _only_operation(db) == (op, "COMPLETED")
    assert len(FakePayments(str(tmp_path / "payments.db")).rows()) == 1


def test_a_store_that_fails_before_anything_is_saved_says_nothing_ran(tmp_path: Path) -> None:
    db = tmp_path / "cb.db"
    url = f"sqlite:///{db}"
    r = cli("ops", "list", "--store", url, cwd=tmp_path)  # nothing there yet: refused, nothing created
    assert r.returncode == 2 and not db.exists()
    from callbound.stores import open as open_store

    open_store(url).close()  # an empty store
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        r = cli("run", "Refund my order", "--app", APP, "--store", url, cwd=tmp_path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert r.returncode == 2, (r.stdout, r.stderr)
    (line,) = r.stderr.strip().splitlines()
    assert "was not saved and no tool ran: run callbound run again" in line, line
    assert FakePayments(str(tmp_path / "payments.db")).rows() == []
