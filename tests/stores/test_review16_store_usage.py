"""A closed SQLiteStore says so, and ``stores.open(create=...)`` takes a bool (review round 16, F11, F12).

- Every call on a closed ``SQLiteStore`` raised ``StoreError`` with sqlite3's "Cannot operate on a closed
  database" followed by advice about the file (edited by hand? writable? disk full?), none of it the
  cause. Now it says the store is closed and to open a new one, as ``PostgresStore`` does.
- ``stores.open(url, create="no")`` was read by its truth and created the database it was meant to
  refuse; the neighbouring APIs insist on a bool (``settle_intent(applied=...)``). Now a ``UsageError``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import callbound.stores as stores
from callbound.core.errors import StoreError, UsageError
from callbound.stores.sqlite import SQLiteStore


def _closed(tmp_path: Path) -> SQLiteStore:
    store = SQLiteStore(str(tmp_path / "cb.db"))
    store.close()
    return store


@pytest.mark.parametrize(
    "use",
    [
        lambda s: s.load_operation("op_x"),
        lambda s: s.list_operations(),
        lambda s: s.ledger_get("acme", "ik_x"),
        lambda s: s.audit_events("op_x"),
        lambda s: s.claim("w1", 30.0),
        lambda s: s.settings(),
    ],
    ids=["load", "list", "ledger", "audit", "claim", "settings"],
)
def test_a_closed_sqlite_store_says_it_is_closed(tmp_path: Path, use: Any) -> None:
    store = _closed(tmp_path)
    with pytest.raises(StoreError) as info:
        use(store)
    text = str(info.value)
    assert "is closed (its close() was called)" in text and "open a new one" in text
    assert "edited by hand" not in text and "disk is not full" not in text


def test_a_runner_on_a_closed_sqlite_store_is_told_it_is_closed(tmp_path: Path) -> None:
    import callbound as cb
    from callbound.testing import ScriptedModel

    store = _closed(tmp_path)
    body = {
        "id": "r1",
        "status": "completed",
        "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}
        ],
    }
    runner = cb.Runner(model=ScriptedModel("openai-responses", [body]), registry=cb.Registry([]), store=store)
    with pytest.raises(StoreError, match=r"is closed \(its close\(\) was called\), so committing operation"):
        asyncio.run(runner.run("hi", tenant="acme", subject="u"))


def test_an_open_sqlite_store_keeps_its_file_advice(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "cb.db"))
    try:
        store._conn.execute("DROP TABLE operations")  # a file edited by hand
        with pytest.raises(StoreError, match="not edited by hand"):
            store.list_operations()
    finally:
        store.close()


@pytest.mark.parametrize("create", ["no", 0, 1, None, "False"])
def test_open_with_a_create_that_is_not_a_bool_is_a_usage_error_and_creates_nothing(
    tmp_path: Path, create: Any
) -> None:
    path = tmp_path / "new.db"
    with pytest.raises(UsageError, match=r"create=\.\.\.\) takes True .* or False"):
        stores.open(f"sqlite:///{path}", create=create)
    assert not path.exists()


def test_open_with_a_bool_create_still_works(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    with pytest.raises(UsageError, match="no SQLite database"):
        stores.open(f"sqlite:///{path}", create=False)
    stores.open(f"sqlite:///{path}", create=True).close()
    assert path.exists()
