"""``callbound audit verify`` recomputes the chain and every binding; changing any stored audit row or
result makes it exit 1 and name the row (durability §7, D20)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "callbound.cli"]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def completed(tmp_path: Path) -> tuple[Path, str, str]:
    db = tmp_path / "cb.db"
    store = f"sqlite:///{db}"
    r = cli("demo", "refund", "--approve", "--json", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    op = json.loads(r.stdout)["operation_id"]
    ok = cli("audit", "verify", op, "--store", store, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    return db, store, op


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
