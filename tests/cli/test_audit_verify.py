"""``callbound audit verify`` recomputes the chain and every binding; changing any stored audit row or
result makes it exit 1 and name the row (durability §7, D20)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "callbound.cli"]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def completed_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A completed demo refund that verifies clean, made once for the module: (its directory, op id)."""
    where = tmp_path_factory.mktemp("completed")
    store = f"sqlite:///{where / 'cb.db'}"
    r = cli("demo", "refund", "--approve", "--json", "--store", store, cwd=where)
    assert r.returncode == 0, r.stderr
    op = json.loads(r.stdout)["operation_id"]
    ok = cli("audit", "verify", op, "--store", store, cwd=where)
    assert ok.returncode == 0, ok.stderr
    return where, op


@pytest.fixture
def completed(completed_once: tuple[Path, str], tmp_path: Path) -> tuple[Path, str, str]:
    """That store, copied into this test's directory (every file the demo left), for the test to
    tamper with: (database, store URL, op id)."""
    where, op = completed_once
    for f in where.iterdir():
        shutil.copy2(f, tmp_path / f.name)
    db = tmp_path / "cb.db"
    return db, f"sqlite:///{db}", op


def test_tampered_result_is_named(completed: tuple[Path, str, str], tmp_path: Path) -> None:
    db, store, op = completed
    with sqlite3.connect(db) as conn:
        pos, data = conn.execute(
            "SELECT pos, data FROM journal WHERE operation_id = ? AND kind = 'results' ORDER BY pos LIMIT 1",
            (op,),
        ).fetchone()
        row = json.loads(data)
        row["envelopes"][0]["model_result"]["data"]["status"] = "refunded twice"
        conn.execute(
            "UPDATE journal SET data = ? WHERE operation_id = ? AND pos = ?", (json.dumps(row), op, pos)
        )
    r = cli("audit", "verify", "--store", store, cwd=tmp_path)
    assert r.returncode == 1
    assert "TAMPERED" in r.stderr and op in r.stderr and "result" in r.stderr


def test_tampered_audit_row_is_named(completed: tuple[Path, str, str], tmp_path: Path) -> None:
    db, store, op = completed
    with sqlite3.connect(db) as conn:
        seq, data = conn.execute(
            "SELECT seq, data FROM audit WHERE operation_id = ? ORDER BY seq LIMIT 1 OFFSET 2", (op,)
        ).fetchone()
        doc = json.loads(data)
        doc["tampered"] = True
        conn.execute(
            "UPDATE audit SET data = ? WHERE operation_id = ? AND seq = ?", (json.dumps(doc), op, seq)
        )
    r = cli("audit", "verify", op, "--store", store, cwd=tmp_path)
    assert r.returncode == 1
    assert f"audit seq {seq}" in r.stderr


def test_deleted_audit_row_is_named(completed: tuple[Path, str, str], tmp_path: Path) -> None:
    db, store, op = completed
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM audit WHERE operation_id = ? AND seq = 1", (op,))
    r = cli("audit", "verify", op, "--store", store, cwd=tmp_path)
    assert r.returncode == 1
    assert "audit seq 1" in r.stderr


def test_hmac_key_protects_against_a_rewritten_chain(tmp_path: Path) -> None:
    """With CALLBOUND_AUDIT_KEY the chain cannot be recomputed by someone who can only write the database."""
    import os

    env = {**os.environ, "CALLBOUND_AUDIT_KEY": "k-123"}
    store = f"sqlite:///{tmp_path / 'cb.db'}"
    r = subprocess.run(
        [*CLI, "demo", "refund", "--approve", "--json", "--store", store],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    ok = subprocess.run(
        [*CLI, "audit", "verify", "--store", store],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    without_key = cli("audit", "verify", "--store", store, cwd=tmp_path)
    assert without_key.returncode == 1  # plain SHA-256 links do not match HMAC links
    # the report names the likely cause, a missing or different key, not only "hash does not match"
    assert "CALLBOUND_AUDIT_KEY" in without_key.stderr


def _head(conn: sqlite3.Connection, op: str) -> dict[str, object]:
    doc: dict[str, object] = json.loads(
        conn.execute("SELECT head FROM operations WHERE operation_id = ?", (op,)).fetchone()[0]
    )
    return doc


def test_events_deleted_from_the_end_of_the_chain_are_named(
    completed: tuple[Path, str, str], tmp_path: Path
) -> None:
    """The chain's last links removed leave the chain itself intact; the operation row records its end."""
    db, store, op = completed
    with sqlite3.connect(db) as conn:
        (last,) = conn.execute("SELECT max(seq) FROM audit WHERE operation_id = ?", (op,)).fetchone()
        assert _head(conn, op)["audit_seq"] == last
        conn.execute("DELETE FROM audit WHERE operation_id = ? AND seq = ?", (op, last))
    r = cli("audit", "verify", op, "--store", store, cwd=tmp_path)
    assert r.returncode == 1
    assert "audit chain end" in r.stderr and f"seq {last}" in r.stderr


@pytest.mark.parametrize(
    ("kind", "why"),
    [("results", "journal has no result"), ("turn", "missing from the journal")],
)
def test_journal_rows_deleted_under_the_chain_are_named(
    completed: tuple[Path, str, str], tmp_path: Path, kind: str, why: str
) -> None:
    db, store, op = completed
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM journal WHERE operation_id = ? AND kind = ?", (op, kind))
    r = cli("audit", "verify", op, "--store", store, cwd=tmp_path)
    assert r.returncode == 1
    assert why in r.stderr


def test_an_edited_final_text_is_named(completed: tuple[Path, str, str], tmp_path: Path) -> None:
    db, store, op = completed
    with sqlite3.connect(db) as conn:
        head = _head(conn, op)
        head["text"] = "Refund of 1,000,000 approved."
        conn.execute("UPDATE operations SET head = ? WHERE operation_id = ?", (json.dumps(head), op))
    r = cli("audit", "verify", op, "--store", store, cwd=tmp_path)
    assert r.returncode == 1
    assert "final text" in r.stderr


def test_an_unknown_operation_is_a_usage_error_not_tampering(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'cb.db'}"
    r = cli("audit", "verify", "op_nope", "--store", store, cwd=tmp_path)
    assert r.returncode == 2
    assert "no operation" in r.stderr and "TAMPERED" not in r.stderr


def test_a_deleted_operation_row_is_named_by_the_whole_store_check(
    completed: tuple[Path, str, str], tmp_path: Path
) -> None:
    """Its audit chain is still there: the operation it belongs to is missing, which is tampering."""
    db, store, op = completed
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM operations WHERE operation_id = ?", (op,))
    r = cli("audit", "verify", "--store", store, cwd=tmp_path)
    assert r.returncode == 1
    assert op in r.stderr and "missing from the store" in r.stderr


def test_tampered_ledger_result_is_named(completed: tuple[Path, str, str], tmp_path: Path) -> None:
    """The ledger's recorded result is what a retry of the same intent replays to the model: an edit
    to it is named, not left to reach the model with a fresh, valid binding (D16, D20)."""
    db, store, op = completed
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT tenant, key, entry FROM ledger WHERE operation_id = ? AND status = 'SUCCEEDED'", (op,)
        ).fetchall()
        assert rows, "the demo's refund records its result in the ledger"
        tenant, key, entry = rows[0]
        doc = json.loads(entry)
        doc["result"] = {"ok": True, "data": {"refund_id": "forged", "status": "refunded"}}
        conn.execute(
            "UPDATE ledger SET entry = ? WHERE tenant = ? AND key = ?", (json.dumps(doc), tenant, key)
        )
    r = cli("audit", "verify", op, "--store", store, cwd=tmp_path)
    assert r.returncode == 1
    assert f"ledger {key}" in r.stderr and "recorded result differs" in r.stderr


def test_an_operation_a_newer_callbound_wrote_is_unreadable_not_tampered(
    completed: tuple[Path, str, str], tmp_path: Path
) -> None:
    """D19, D28: verify cannot read it, which is exit 2 (unreadable input), not tampering (exit 1);
    tampering found in another operation still exits 1."""
    db, store, op = completed
    r = cli("demo", "refund", "--approve", "--json", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    other = json.loads(r.stdout)["operation_id"]
    with sqlite3.connect(db) as conn:
        head = _head(conn, op)
        head["snapshot_version"] = int(str(head["snapshot_version"])) + 1
        conn.execute("UPDATE operations SET head = ? WHERE operation_id = ?", (json.dumps(head), op))
    for args in ((), (op,)):
        r = cli("audit", "verify", *args, "--store", store, cwd=tmp_path)
        assert r.returncode == 2, r.stderr
        assert "TAMPERED" not in r.stderr and "newer callbound" in r.stderr and op in r.stderr
    with sqlite3.connect(db) as conn:
        head = _head(conn, other)
        head["text"] = "Refund of 1,000,000 approved."
        conn.execute("UPDATE operations SET head = ? WHERE operation_id = ?", (json.dumps(head), other))
    r = cli("audit", "verify", "--store", store, cwd=tmp_path)
    assert r.returncode == 1
    assert f"TAMPERED operation {other}" in r.stderr and "newer callbound" in r.stderr
