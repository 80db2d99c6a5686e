"""PostgresStore after the server dropped its session (a restart, a failover, an idle timeout; here
``pg_terminate_backend``), review round 14 (h9, r_pg_drop_result_lost.py): the first call on the dead
connection failed, and when it was the commit of a write handler's result, the result was lost and the
refund that ran once ended STOPPED(OUTCOME_UNKNOWN). Now a drop the server already announced is found
before the call (no round trip), and a transaction whose statements meet a drop before its COMMIT was
sent runs again on a new connection; a COMMIT that fails is never repeated (stores/pg_connection.py).

Needs CALLBOUND_TEST_POSTGRES (see conftest); skipped without it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest

import callbound as cb
from callbound.core.errors import StoreError
from callbound.core.idempotency import LedgerStatus
from callbound.runtime.tools import ToolExecutor
from callbound.stores.base import Commit, JournalRow
from callbound.testing import FakeClock, ScriptedModel
from tests.runtime.helpers import API, MODEL, OrderArgs, calls, fc, final

from .conftest import T0, PgSchema, create, decide, make_approval, make_events, make_head


def _open(schema: PgSchema) -> Any:
    from callbound.stores.postgres import PostgresStore

    return PostgresStore(schema.url)


def _terminate(schema: PgSchema, pid: int) -> None:
    """End the backend ``pid`` and wait until it is gone: its FATAL message and the closed socket
    have then reached the client (loopback), as after a restart that happened while it was idle."""
    import psycopg

    with psycopg.connect(schema.dsn, autocommit=True) as admin:
        row = admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,)).fetchone()
    assert row == (True,)


def _count(schema: PgSchema, sql: str, *params: Any) -> int:
    import psycopg

    with psycopg.connect(schema.url, autocommit=True) as conn:
        row = conn.execute(sql, params).fetchone()
    assert row is not None
    return int(row[0])


def _step(store: Any, op: str, n: int) -> Commit:
    """The next commit of ``op`` (one journal row, one audit event), as a runner writes a result."""
    prev = store.audit_events(op)[-1]
    return Commit(
        op,
        make_head(op, "RESULTS_READY"),
        journal=[JournalRow("transition", {"state": "RESULTS_READY", "n": n})],
        audit=make_events(op, 1, prev=prev),
    )


def _drop_after_first_statement(store: Any, schema: PgSchema) -> list[str]:
    """The store's connection is dropped by the server right after the first statement it runs (inside
    the caller's transaction): the next statement of that transaction fails, before COMMIT is sent."""
    conn = store._conn
    real = conn.execute
    seen: list[str] = []

    def execute(query: Any, *args: Any, **kwargs: Any) -> Any:
        cur = real(query, *args, **kwargs)
        seen.append(str(query))
        if len(seen) == 1:
            _terminate(schema, conn.info.backend_pid)
        return cur

    conn.execute = execute
    return seen


@pytest.mark.parametrize("first_call", ["commit", "load_operation", "claim", "list_operations"])
def test_a_connection_the_server_dropped_while_idle_is_reopened_before_the_next_call(
    pg_schema: PgSchema, first_call: str
) -> None:
    store = _open(pg_schema)
    create(store, "op1")
    step = _step(store, "op1", 1)
    pid = store._conn.info.backend_pid
    _terminate(pg_schema, pid)
    # before: StoreError "failed while ...: server closed the connection", and only the next call worked
    if first_call == "commit":
        store.commit(step)
        assert len(store.load_operation("op1").journal) == 2
    elif first_call == "load_operation":
        assert store.load_operation("op1") is not None
    elif first_call == "claim":
        assert store.claim("w1", 30.0) is not None
    else:
        assert [o["operation_id"] for o in store.list_operations()] == ["op1"]
    assert store._conn.info.backend_pid != pid
    store.close()


def test_a_healthy_connection_is_kept(pg_schema: PgSchema) -> None:
    store = _open(pg_schema)
    create(store, "op1")
    conn, pid = store._conn, store._conn.info.backend_pid
    for _ in range(3):
        assert store.load_operation("op1") is not None
    assert store._conn is conn and conn.info.backend_pid == pid
    store.close()


def test_a_commit_whose_statements_meet_a_drop_runs_again_whole_on_a_new_connection(
    pg_schema: PgSchema, caplog: pytest.LogCaptureFixture
) -> None:
    store = _open(pg_schema)
    create(store, "op1")
    step = _step(store, "op1", 1)
    seen = _drop_after_first_statement(store, pg_schema)
    store.commit(step)  # before: StoreError, and the caller dropped the result it held
    assert len(seen) == 1 and "UPDATE operations" in seen[0]  # the head's update ran, then the drop
    assert "running it again on a new connection" in caplog.text
    # written once: the first try rolled back with its session
    assert _count(pg_schema, "SELECT count(*) FROM journal WHERE operation_id = %s", "op1") == 2
    assert _count(pg_schema, "SELECT count(*) FROM audit WHERE operation_id = %s", "op1") == 2
    assert _count(pg_schema, "SELECT journal_len FROM operations WHERE operation_id = %s", "op1") == 2
    assert [r.data for r in store.load_operation("op1").journal][-1] == {"state": "RESULTS_READY", "n": 1}
    store.close()


def test_a_new_operation_whose_insert_met_a_drop_is_created_once(pg_schema: PgSchema) -> None:
    store = _open(pg_schema)
    store.load_operation("warm-up")
    _drop_after_first_statement(store, pg_schema)
    create(store, "op1")  # the INSERT ran, then the drop: again on a new connection, no OperationExists
    assert _count(pg_schema, "SELECT count(*) FROM operations WHERE operation_id = %s", "op1") == 1
    assert _count(pg_schema, "SELECT count(*) FROM journal WHERE operation_id = %s", "op1") == 1
    store.close()


def test_a_decision_whose_transaction_met_a_drop_is_recorded(pg_schema: PgSchema) -> None:
    store = _open(pg_schema)
    pending = make_approval("ap1", "op1", ttl=timedelta(hours=1))
    store.commit(
        Commit(
            "op1",
            make_head("op1", "WAITING_APPROVAL"),
            journal=[JournalRow("transition", {"state": "WAITING_APPROVAL", "n": 0})],
            audit=make_events("op1", 1),
            approvals=[pending],
            create=True,
        )
    )
    _drop_after_first_statement(store, pg_schema)
    assert store.decide_approval(decide(pending, "approved", "alice")) is True  # before: StoreError
    got = store.get_approval("ap1")
    assert got is not None and got.status == "approved"
    # the wake time was refreshed too (the second statement of the same transaction)
    assert store.claim("w1", 30.0, now_fn=lambda: (T0 + timedelta(minutes=10)).timestamp()) is not None
    store.close()


def test_a_failed_commit_statement_is_never_repeated(pg_schema: PgSchema) -> None:
    """The drop happens after the transaction's statements, as COMMIT is sent: whether it took effect
    is unknown to the client, so the transaction is not run again and the caller gets a StoreError."""
    store = _open(pg_schema)
    create(store, "op1")
    step = _step(store, "op1", 1)
    conn = store._conn
    real = conn.transaction
    opened: list[int] = []

    @contextmanager
    def transaction(*args: Any, **kwargs: Any) -> Iterator[Any]:
        opened.append(1)
        with real(*args, **kwargs) as tx:
            yield tx
            _terminate(pg_schema, conn.info.backend_pid)  # the body is done: COMMIT is next

    conn.transaction = transaction
    with pytest.raises(StoreError, match="failed while committing operation op1"):
        store.commit(step)
    assert opened == [1]
    assert store.load_operation("op1") is not None  # the store reconnects for the next call
    store.close()


def test_an_error_that_leaves_the_connection_open_is_not_retried(pg_schema: PgSchema) -> None:
    """A statement timeout (QueryCanceled, an OperationalError) is not a dropped connection."""
    import psycopg

    store = _open(pg_schema)
    create(store, "op1")
    step = _step(store, "op1", 1)
    conn = store._conn
    tries: list[int] = []

    def execute(*args: Any, **kwargs: Any) -> Any:
        tries.append(1)
        raise psycopg.errors.QueryCanceled("canceling statement due to statement timeout")

    conn.execute = execute
    with pytest.raises(StoreError, match="statement timeout"):
        store.commit(step)
    assert tries == [1] and store._conn is conn and not conn.closed
    store.close()


async def test_a_write_result_survives_a_drop_while_its_handler_runs(pg_schema: PgSchema) -> None:
    """The recording's shape: the session is dropped while a write handler runs; the handler's result
    is committed on a new connection and the operation completes (before: STOPPED(OUTCOME_UNKNOWN) after
    a failed drive, for a human)."""
    store = _open(pg_schema)
    ran: list[str] = []

    def refund(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        ran.append(args.order_id)
        _terminate(pg_schema, store._conn.info.backend_pid)  # a restart while the refund runs
        return {"refunded": args.order_id}

    tool = cb.ToolSpec(
        name="refund",
        description="Refund an order",
        params=OrderArgs,
        handler=refund,
        schema_version="refund-v1",
        risk="write",
        timeout_ms=10_000,
    )
    model = ScriptedModel(API, [calls("resp_1", fc("call_1", "refund", {"order_id": "A1"})), final("resp_2")])
    runner = cb.Runner(
        model=model,
        registry=cb.Registry([tool]),
        store=store,
        clock=FakeClock(),
        settings={"model": MODEL},
        executor=ToolExecutor(grace_s=0.5),
    )
    out = await runner.run("Refund A1", tenant="acme", subject="user-1")
    assert out.state == cb.State.COMPLETED and ran == ["A1"]
    (entry,) = store.ledger_list()
    assert entry.status is LedgerStatus.SUCCEEDED
    store.close()
