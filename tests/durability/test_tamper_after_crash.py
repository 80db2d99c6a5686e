"""D20 with SIGKILL: a refund whose process died after its ledger STARTED commit is resumed by a fresh
process. When someone edited the refund's arguments in the database meanwhile, the resume ends
FAILED(INTEGRITY) and the payments service sees no request; untouched, it refunds exactly once."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from callbound.demo.payments import FakePayments
from callbound.runtime.verify import verify_store
from callbound.stores import open_store

from .conftest import store_urls
from .test_crash_matrix import phase

CRASH = "after_ledger_started:submit_refund"


def crashed_mid_write(tmp_path: Path) -> tuple[str, str, str, Path]:
    store_url = store_urls("sqlite", tmp_path)
    payments = str(tmp_path / "payments.db")
    op_id = "op_tamper_after_crash"
    assert phase(store_url, payments, op_id, "run", None, False).returncode == 0
    assert phase(store_url, payments, op_id, "approve", None, False).returncode == 0
    r = phase(store_url, payments, op_id, "resume", CRASH, False)
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    return store_url, payments, op_id, tmp_path / "callbound.db"


def _retarget(value: Any) -> Any:
    """The draft the refund submits, swapped for another everywhere the call is stored."""
    return json.loads(json.dumps(value).replace("dr_A1", "dr_B9"))


@pytest.mark.slow
def test_negative_control_untouched_crash_resumes_to_one_refund(tmp_path: Path) -> None:
    store_url, payments, op_id, _ = crashed_mid_write(tmp_path)
    r = phase(store_url, payments, op_id, "resume", None, False)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["state"] == "COMPLETED"
    assert len(FakePayments(payments).rows()) == 1


@pytest.mark.slow
def test_arguments_edited_after_a_crash_are_never_sent(tmp_path: Path) -> None:
    store_url, payments, op_id, db = crashed_mid_write(tmp_path)
    conn = sqlite3.connect(db)
    (text,) = conn.execute("SELECT head FROM operations WHERE operation_id = ?", (op_id,)).fetchone()
    head = json.loads(text)
    assert head["state"] == "EXECUTING" and "dr_A1" in json.dumps(head["current"])
    head["current"] = _retarget(head["current"])
    conn.execute("UPDATE operations SET head = ? WHERE operation_id = ?", (json.dumps(head), op_id))
    rows = conn.execute(
        "SELECT pos, data FROM journal WHERE operation_id = ? AND kind = 'turn'", (op_id,)
    ).fetchall()
    pos, data = rows[-1]
    conn.execute(
        "UPDATE journal SET data = ? WHERE operation_id = ? AND pos = ?",
        (json.dumps(_retarget(json.loads(data))), op_id, pos),
    )
    conn.commit()
    conn.close()
    r = phase(store_url, payments, op_id, "resume", None, False)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"state": "FAILED", "reason": "INTEGRITY"}
    assert FakePayments(payments).rows() == []  # neither the edited refund nor a reconcile guess
    store = open_store(store_url)
    try:
        assert any("audited plan" in p.why for p in verify_store(store, op_id))
    finally:
        store.close()
