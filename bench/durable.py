"""Durable loops: the in-memory loops of ``loops.py`` with their framework's SQLite persistence, and a
bare sqlite3 baseline that does only ``INSERT`` + ``COMMIT`` with ``synchronous=FULL``.

Every run writes a fresh database file in ``bench/.data`` (the project's disk, never a tmpfs). The
number of fsync'd commits per round trip is counted two ways: callbound's ``Store.commit`` calls are
counted by wrapping the method, and ``run.py`` counts fsync/fdatasync system calls with ``strace -c``
around single runs of two lengths (the difference cancels setup and teardown).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import loops

_seq = itertools.count()


class Counters:
    def __init__(self) -> None:
        self.commits = 0

    def reset(self) -> None:
        self.commits = 0


def _fresh(dbdir: str, stem: str) -> str:
    Path(dbdir).mkdir(parents=True, exist_ok=True)
    path = os.path.join(dbdir, f"{stem}-{os.getpid()}-{next(_seq)}.db")
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return path


def _cleanup(path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)


def postgres_url() -> str | None:
    return os.environ.get("CALLBOUND_TEST_POSTGRES") or None


def sqlite_store_available() -> bool:
    try:
        from callbound.stores.sqlite import SQLiteStore  # noqa: F401
    except ImportError:
        return False
    return True


def postgres_store_available() -> bool:
    try:
        from callbound.stores.postgres import PostgresStore  # noqa: F401
    except ImportError:
        return False
    return True


def _counting(store: Any, counters: Counters) -> None:
    original = store.commit

    def commit(c: Any) -> Any:
        counters.commits += 1
        return original(c)

    store.commit = commit


def build(
    impl: str, n: int, dbdir: str, *, commits_per_rt: int = 2
) -> tuple[Callable[[], tuple[float, float]], Counters]:
    """``run_once()`` returns ``(elapsed_s, wire_s)`` like the loops of loops.py. callbound runs without
    the wire step (its fake client skips the request's json.dumps): section 1 measures that step, and
    here it would only add the same amount to every callbound row."""
    counters = Counters()
    paths: list[str] = []

    def remember(path: str) -> str:
        paths.append(path)
        return path

    def wrap(run: Callable[[], tuple[float, float]]) -> Callable[[], tuple[float, float]]:
        def run_once() -> tuple[float, float]:
            try:
                return run()
            finally:
                while paths:
                    _cleanup(paths.pop())

        return run_once

    if impl == "callbound-sqlite":
        from callbound.stores.sqlite import SQLiteStore

        def sqlite_factory() -> Any:
            return SQLiteStore(remember(_fresh(dbdir, "callbound")))

        run = loops.build_callbound(
            n, 1, store_factory=sqlite_factory, on_store=lambda s: _counting(s, counters), wire=False
        )
        return wrap(run), counters

    if impl == "callbound-sqlite-normal":
        from callbound.stores.sqlite import SQLiteStore

        def normal_factory() -> Any:
            return SQLiteStore(remember(_fresh(dbdir, "callbound-normal")), synchronous="NORMAL")

        run = loops.build_callbound(
            n, 1, store_factory=normal_factory, on_store=lambda s: _counting(s, counters), wire=False
        )
        return wrap(run), counters

    if impl == "callbound-postgres":
        from callbound.stores.postgres import PostgresStore

        url = postgres_url()
        assert url is not None

        def pg_factory() -> Any:
            return PostgresStore(url)

        run = loops.build_callbound(
            n, 1, store_factory=pg_factory, on_store=lambda s: _counting(s, counters), wire=False
        )
        return wrap(run), counters

    if impl == "langgraph-sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        def saver() -> Any:
            conn = sqlite3.connect(remember(_fresh(dbdir, "langgraph")), check_same_thread=False)
            return SqliteSaver(conn)

        return wrap(loops.build_langgraph(n, 1, checkpointer_factory=saver)), counters

    if impl == "agents-sqlite":
        from agents import SQLiteSession

        def session() -> Any:
            return SQLiteSession(f"s{next(_seq)}", remember(_fresh(dbdir, "agents")))

        return wrap(loops.build_agents(n, 1, session_factory=session)), counters

    if impl == "sqlite3-bare":
        payload = json.dumps(loops.responses_body(0, 1, 1))  # a turn-sized row (~300 bytes)

        def bare() -> tuple[float, float]:
            path = remember(_fresh(dbdir, "bare"))
            conn = sqlite3.connect(path, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("CREATE TABLE journal (op TEXT, seq INTEGER, data TEXT, PRIMARY KEY (op, seq))")
            seq = 0
            t0 = time.perf_counter()
            for _ in range(n):
                for _ in range(commits_per_rt):
                    conn.execute("BEGIN")
                    conn.execute("INSERT INTO journal VALUES (?, ?, ?)", ("op", seq, payload))
                    conn.execute("COMMIT")
                    counters.commits += 1
                    seq += 1
            elapsed = time.perf_counter() - t0
            conn.close()
            return elapsed, 0.0

        return wrap(bare), counters

    raise KeyError(impl)


REQUIRES = {
    "langgraph-sqlite": "langgraph.checkpoint.sqlite",
    "agents-sqlite": "agents",
}


# ---- WAL frames per commit, by b-tree ----------------------------------------------------------------


def _wal_frames(conn: sqlite3.Connection, wal_path: str) -> dict[str, int]:
    """Frames in the WAL file, counted by the b-tree (table or index, per ``dbstat``) their page belongs
    to; "?" where ``dbstat`` is not compiled in."""
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    data = Path(wal_path).read_bytes()
    owner: dict[int, str] = {}
    with contextlib.suppress(sqlite3.Error):
        owner = {int(pageno): str(name) for name, pageno in conn.execute("SELECT name, pageno FROM dbstat")}
    frames: dict[str, int] = {}
    for off in range(32, len(data) - page_size - 23, page_size + 24):  # 32-byte header, 24 per frame
        name = owner.get(int.from_bytes(data[off : off + 4], "big"), "?")
        frames[name] = frames.get(name, 0) + 1
    return frames


def wal_frames(impl: str, n: int, dbdir: str) -> dict[str, Any]:
    """Pages written to the WAL per commit in steady state, by b-tree: three operations of ``n`` turns (or
    ``6n`` bare commits) after a warm-up operation, with automatic checkpoints off so that every frame
    stays in the file to be counted. SQLite writes each page a commit changed as one frame: the count
    is the commit's write volume, set by how many b-trees (tables and indexes) it touches."""
    path = _fresh(dbdir, f"wal-{impl}")
    try:
        if impl == "callbound-sqlite":
            from callbound.stores.sqlite import SQLiteStore

            store = SQLiteStore(path)
            # The store's own connection: autocheckpoint is a per-connection setting (measurement only).
            conn: sqlite3.Connection = store._conn  # type: ignore[attr-defined]
            conn.execute("PRAGMA wal_autocheckpoint=0")
            counters = Counters()
            _counting(store, counters)

            def operation(k: int) -> None:
                loops.build_callbound(k, 1, store_factory=lambda: store, wire=False, close_store=False)()

            operation(min(n, 20))  # a warm-up operation gives tables and indexes their first pages
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            counters.reset()
            # Operation ids are random, so an operation's rows land before or after the others' in the
            # journal and audit b-trees (keyed by operation id), and pages split differently: count
            # three operations, not one.
            for _ in range(3):
                operation(n)
            commits = counters.commits
        elif impl == "sqlite3-bare":
            payload = json.dumps(loops.responses_body(0, 1, 1))
            conn = sqlite3.connect(path, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA wal_autocheckpoint=0")
            conn.execute("CREATE TABLE journal (op TEXT, seq INTEGER, data TEXT, PRIMARY KEY (op, seq))")
            seq = itertools.count()
            for k in (40, 6 * n):
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                for _ in range(k):
                    conn.execute("BEGIN")
                    conn.execute("INSERT INTO journal VALUES (?, ?, ?)", ("op", next(seq), payload))
                    conn.execute("COMMIT")
            commits = 6 * n
        else:
            raise KeyError(impl)
        frames = _wal_frames(conn, path + "-wal")
        return {
            "commits": commits,
            "page_size": conn.execute("PRAGMA page_size").fetchone()[0],
            "frames_per_commit": {k: v / commits for k, v in sorted(frames.items(), key=lambda kv: -kv[1])},
        }
    finally:
        with contextlib.suppress(Exception):
            conn.close()
        _cleanup(path)
