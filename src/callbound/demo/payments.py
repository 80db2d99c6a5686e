"""A fake downstream payments service that keeps its own SQLite file.

It appends one row per request with no uniqueness constraint (D22), so a double refund is visible
as two rows with the same idempotency key. ``lookup`` serves reconcile.
"""

from __future__ import annotations

import sqlite3
from typing import Any


class FakePayments:
    def __init__(self, path: str) -> None:
        self.path = path
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS refunds (seq INTEGER PRIMARY KEY AUTOINCREMENT, idempotency_key TEXT, "
                "draft_id TEXT, amount TEXT, currency TEXT)"
            )

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        return db

    def submit(self, key: str, draft_id: str, amount: str, currency: str) -> dict[str, Any]:
        with self._connect() as db:
            cur = db.execute(
                "INSERT INTO refunds (idempotency_key, draft_id, amount, currency) VALUES (?, ?, ?, ?)",
                (key, draft_id, amount, currency),
            )
            seq = cur.lastrowid
        return {"refund_id": f"rf_{seq:06d}", "status": "submitted", "amount": amount, "currency": currency}

    def lookup(self, key: str) -> dict[str, Any] | None:
        with self._connect() as db:
            row = db.execute(
                "SELECT seq, amount, currency FROM refunds WHERE idempotency_key = ? ORDER BY seq LIMIT 1",
                (key,),
            ).fetchone()
        if row is None:
            return None
        return {"refund_id": f"rf_{row[0]:06d}", "status": "submitted", "amount": row[1], "currency": row[2]}

    def count(self, key: str | None = None) -> int:
        with self._connect() as db:
            if key is None:
                return int(db.execute("SELECT COUNT(*) FROM refunds").fetchone()[0])
            return int(
                db.execute("SELECT COUNT(*) FROM refunds WHERE idempotency_key = ?", (key,)).fetchone()[0]
            )

    def rows(self) -> list[tuple[Any, ...]]:
        with self._connect() as db:
            return list(
                db.execute(
                    "SELECT seq, idempotency_key, draft_id, amount, currency FROM refunds ORDER BY seq"
                )
            )
