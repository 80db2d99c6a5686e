"""Persistence backends. ``open(url)`` lives at the edge (CLI, users); the core never imports it."""

from __future__ import annotations

from .base import Commit, JournalRow, Store, StoredOperation
from .memory import MemoryStore

__all__ = ["Commit", "JournalRow", "MemoryStore", "Store", "StoredOperation", "open", "open_store"]


def open(url: str | None) -> Store:  # the documented name (D30): callbound.stores.open(url)
    """Open a store by URL: ``memory:``, ``sqlite:///path`` (default ``./callbound.db``) or
    ``postgresql://...`` (needs the ``postgres`` extra)."""
    from ..core.errors import UsageError

    if url is None or url == "":
        url = "sqlite:///callbound.db"
    if url in ("memory", "memory:", "memory://"):
        return MemoryStore()
    if url.startswith("sqlite:"):
        try:
            from .sqlite import SQLiteStore
        except ImportError as exc:  # pragma: no cover - shipped with callbound
            raise UsageError("the SQLite store is not available in this build") from exc
        # SQLAlchemy's convention: sqlite:///relative.db, sqlite:////absolute/path.db
        rest = url[len("sqlite:") :]
        path = rest[3:] if rest.startswith("///") else rest[2:] if rest.startswith("//") else rest
        return SQLiteStore(path or "callbound.db")
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from .postgres import PostgresStore
        except ImportError as exc:
            raise UsageError(
                "PostgreSQL needs the postgres extra: pip install 'callbound[postgres]'"
            ) from exc
        return PostgresStore(url)
    raise UsageError(f"unknown store URL {url!r}; use sqlite:///path, postgresql://... or memory:")


# The earlier name, kept so existing code keeps working.
open_store = open
