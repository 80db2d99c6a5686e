"""Scenario tests for the durability rules of issue 4 and D16-D22, each against the stores it is about.

Written from the issue text and DECISIONS.md, not from the code: every test names the rule it checks.
Store rules run against memory, SQLite and PostgreSQL ("another process" = a second store connection
and a fresh Runner); crash rules SIGKILL a subprocess (this module doubles as its driver:
``python -m tests.durability.test_rules_review STORE_URL PAYMENTS_DB OP_ID run|resume``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.core.audit import verify_chain
from callbound.core.errors import NotApplied
from callbound.core.idempotency import LedgerStatus
from callbound.core.ids import SequentialIds
from callbound.core.model import RequestMeta
from callbound.core.snapshot import SNAPSHOT_VERSION
from callbound.demo.payments import FakePayments
from callbound.runtime.tools import ToolExecutor
from callbound.runtime.verify import verify_store
from callbound.stores import open_store
from callbound.stores.memory import MemoryStore
from callbound.stores.schema import DB_SCHEMA_VERSION
from callbound.testing import FakeClock, ScriptedModel

API = "openai-responses"
ROOT = Path(__file__).resolve().parents[2]
STORES = ["memory", "sqlite", "postgres"]
DURABLE = ["sqlite", "postgres"]


# ---- stores: one database, several connections ------------------------------------------------------


class Stores:
    """Connections to one database. ``open()`` is "another process": a new connection (MemoryStore has
    none, so it returns the one instance)."""

    def __init__(self, kind: str, url: str | None) -> None:
        self.kind, self.url = kind, url
        self._memory = MemoryStore() if kind == "memory" else None
        self._opened: list[Any] = []

    def open(self) -> Any:
        if self._memory is not None:
            return self._memory
        assert self.url is not None
        store = open_store(self.url)
        self._opened.append(store)
        return store

    def close(self) -> None:
        for s in self._opened:
            s.close()


def _pg_url() -> tuple[str, Callable[[], None]]:
    from tests.stores.conftest import PgSchema

    schema = PgSchema()  # skips (or fails under CALLBOUND_REQUIRE_POSTGRES) without a server
    return schema.url, schema.drop


@pytest.fixture
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    kind = request.param
    drop: Callable[[], None] = lambda: None  # noqa: E731
    url: str | None = None
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'callbound.db'}"
    elif kind == "postgres":
        url, drop = _pg_url()
    s = Stores(kind, url)
    try:
        yield s
    finally:
        s.close()
        drop()


def all_stores(f: Any) -> Any:
    return pytest.mark.parametrize("stores", STORES, indirect=True)(f)


def durable_stores(f: Any) -> Any:
    return pytest.mark.parametrize("stores", DURABLE, indirect=True)(f)


# ---- wire bodies, tools, runners ----------------------------------------------------------------------


def fc(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


def calls(rid: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"id": rid, "object": "response", "status": "completed", "output": list(items)}


def final(rid: str, text: str = "Done.") -> dict[str, Any]:
    msg = {
        "type": "message",
        "id": f"msg_{rid}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return {"id": rid, "object": "response", "status": "completed", "output": [msg]}


def outputs_of(request: dict[str, Any]) -> dict[str, Any]:
    return {
        i["call_id"]: json.loads(i["output"])
        for i in request.get("input", [])
        if isinstance(i, dict) and i.get("type") == "function_call_output"
    }


class Order(BaseModel):
    order_id: str


class Pay(BaseModel):
    order_id: str
    amount: str


def pay_spec(
    payments: FakePayments,
    *,
    risk: str = "write",
    reconcile: bool = True,
    intent_by_order: bool = False,
    name: str = "pay",
) -> cb.ToolSpec:
    """A write (or irreversible) payment into the fake downstream service (one row per request)."""

    def pay(args: Pay, ctx: cb.CallContext) -> dict[str, Any]:
        assert ctx.idempotency_key is not None
        return payments.submit(ctx.idempotency_key, args.order_id, args.amount, "EUR")

    def find(key: str, ctx: cb.CallContext) -> dict[str, Any]:
        found = payments.lookup(key)
        if found is None:
            raise NotApplied("no payment with this key")
        return found

    def intent(args: Pay, ctx: cb.CallContext) -> str:
        return f"pay:{args.order_id}:{args.amount}"

    kw: dict[str, Any] = {}
    if reconcile:
        kw["reconcile"] = find
    if intent_by_order:
        kw["intent_key"] = intent
    return cb.ToolSpec(
        name=name,
        description="Pay an order back",
        params=Pay,
        handler=pay,
        schema_version="pay-v1",
        risk=risk,  # type: ignore[arg-type]
        timeout_ms=5000,
        **kw,
    )


def read_spec(counter: list[str] | None = None) -> cb.ToolSpec:
    seen = counter if counter is not None else []

    def get_order(args: Order, ctx: cb.CallContext) -> dict[str, Any]:
        seen.append(args.order_id)
        return {"order_id": args.order_id, "status": "shipped"}

    return cb.ToolSpec(
        name="get_order",
        description="Look up an order",
        params=Order,
        handler=get_order,
        schema_version="get-order-v1",
        risk="read",
        timeout_ms=5000,
    )


def runner(
    store: Any,
    script: list[Any],
    tools: list[cb.ToolSpec],
    *,
    clock: FakeClock | None = None,
    policy: cb.Policy | None = None,
    model: Any = None,
) -> cb.Runner:
    return cb.Runner(
        model=model if model is not None else ScriptedModel(API, script),
        registry=cb.Registry(tools),
        store=store,
        clock=clock or FakeClock(),
        policy=policy,
        settings={"model": "gpt-test"},
        ids=SequentialIds(),
        executor=ToolExecutor(grace_s=0.5),
    )


class CountingStore:
    """Forwards to a store and keeps each commit's (state, ledger statuses)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.log: list[tuple[str, list[str]]] = []

    def commit(self, commit: Any) -> None:
        self.log.append((commit.head["state"], [e.status.value for e in commit.ledger]))
        self.inner.commit(commit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def commits_of_round_trip(log: list[tuple[str, list[str]]]) -> int:
    """Commits from the one after the model turn's arrival up to and including the move back to
    MODEL_REQUESTED (the first commit of ``log`` creates the operation)."""
    states = [s for s, _ in log]
    back = states.index("MODEL_REQUESTED", 1)
    return back  # commits 1..back


# ---- D18: commit points -----------------------------------------------------------------------------


@all_stores
def test_d18_read_round_trip_commits_twice(stores: Stores, tmp_path: Path) -> None:
    """D18: a read-only round trip may skip the ledger but not C2: two commits (C1, C2)."""
    spy = CountingStore(stores.open())
    r = runner(spy, [calls("r1", fc("c1", "get_order", {"order_id": "A1"})), final("r2")], [read_spec()])
    out = r.run_sync("hi", tenant="acme", subject="u1", operation_id="op_read")
    assert out.state == "COMPLETED"
    assert commits_of_round_trip(spy.log) == 2, spy.log


@all_stores
def test_d18_write_round_trip_commits_twice_with_started_in_c1(stores: Stores, tmp_path: Path) -> None:
    """D18: "A tool round trip commits twice: C1 (the raw and normalised turn, the plan, ledger STARTED,
    EXECUTING) before any handler runs; C2 (...) before the next model request"."""
    payments = FakePayments(str(tmp_path / "payments.db"))
    spy = CountingStore(stores.open())
    script = [calls("r1", fc("c1", "pay", {"order_id": "A1", "amount": "1.00"})), final("r2")]
    out = runner(spy, script, [pay_spec(payments)]).run_sync(
        "hi", tenant="acme", subject="u1", operation_id="op_write"
    )
    assert out.state == "COMPLETED" and payments.count() == 1
    c1 = spy.log[1]
    assert c1 == ("EXECUTING", ["STARTED"]), spy.log
    assert commits_of_round_trip(spy.log) == 2, spy.log


class Peeking:
    """A model client that, before serving request ``at``, reads the store through another connection."""

    def __init__(self, inner: ScriptedModel, at: int, look: Callable[[RequestMeta], None]) -> None:
        self.inner, self.at, self.look = inner, at, look
        self.api = inner.api
        self.looked = False

    @property
    def adapter(self) -> Any:
        return self.inner.adapter

    async def complete(
        self, body: dict[str, Any], *, stream: bool, meta: RequestMeta, on_progress: Any = None
    ) -> Any:
        if meta.index == self.at:
            self.look(meta)
            self.looked = True
        return await self.inner.complete(body, stream=stream, meta=meta, on_progress=on_progress)


@all_stores
def test_d18_c2_is_durable_before_the_next_model_request(stores: Stores, tmp_path: Path) -> None:
    """D18 / issue §2: every transition is committed before the effect it announces; C2 (envelopes, ledger
    outcome, audit, MODEL_REQUESTED) is durable before the next model request is made."""
    payments = FakePayments(str(tmp_path / "payments.db"))
    other = stores.open()
    seen: dict[str, Any] = {}

    def look(meta: RequestMeta) -> None:
        stored = other.load_operation(meta.operation_id)
        assert stored is not None
        seen["state"] = stored.head["state"]
        seen["kinds"] = [row.kind for row in stored.journal]
        results = [row.data for row in stored.journal if row.kind == "results"]
        seen["results"] = results
        key = results[-1]["envelopes"][0]["protected_audit"]["idempotency_key"]
        entry = other.ledger_get("acme", key)
        seen["ledger"] = None if entry is None else entry.status
        events = other.audit_events(meta.operation_id)
        seen["chain"] = verify_chain(events)
        seen["audited"] = json.dumps([e.data for e in events])
        seen["paid"] = payments.count()

    script = [calls("r1", fc("c1", "pay", {"order_id": "A1", "amount": "1.00"})), final("r2")]
    model = Peeking(ScriptedModel(API, script), 1, look)
    out = runner(stores.open(), script, [pay_spec(payments)], model=model).run_sync(
        "hi", tenant="acme", subject="u1", operation_id="op_c2"
    )
    assert out.state == "COMPLETED" and model.looked
    assert seen["state"] == "MODEL_REQUESTED"
    assert "results" in seen["kinds"] and seen["results"][-1]["envelopes"][0]["model_result"]["ok"] is True
    assert seen["ledger"] is LedgerStatus.SUCCEEDED
    assert seen["chain"] is None and '"call_binding_sha256"' in seen["audited"]
    assert seen["paid"] == 1


@all_stores
def test_d18_history_is_appended_never_rewritten(stores: Stores, tmp_path: Path) -> None:
    """D18: rows are appended; an operation is never rewritten whole. The journal and the audit chain as
    stored at the pause are prefixes of what is stored at the end."""
    payments = FakePayments(str(tmp_path / "payments.db"))
    script = [
        calls("r1", fc("c1", "get_order", {"order_id": "A1"})),
        calls("r2", fc("c2", "pay", {"order_id": "A1", "amount": "1.00"})),
        final("r3"),
    ]
    tools = [read_spec(), pay_spec(payments, risk="irreversible")]
    first = runner(stores.open(), script, tools)
    out = first.run_sync("hi", tenant="acme", subject="u1", operation_id="op_append")
    assert out.state == "WAITING_APPROVAL"
    reader = stores.open()
    before = reader.load_operation("op_append")
    chain_before = reader.audit_events("op_append")
    second = runner(stores.open(), script, tools)
    done = second.resume_sync(
        "op_append", [cb.Decision.approve(out.pending_approvals[0].approval_id, "alice")]
    )
    assert done.state == "COMPLETED"
    after = reader.load_operation("op_append")
    chain_after = reader.audit_events("op_append")
    assert len(after.journal) > len(before.journal)
    assert after.journal[: len(before.journal)] == before.journal
    assert len(chain_after) > len(chain_before)
    assert chain_after[: len(chain_before)] == chain_before


# ---- issue §3, D17: approvals from any process -------------------------------------------------------


@all_stores
def test_approval_decided_from_other_processes_single_use_and_tenant_bound(
    stores: Stores, tmp_path: Path
) -> None:
    """Issue §3 / D17: a pause frees the process; approve/deny work from any process; an approver of
    tenant A cannot decide for tenant B; the subject may not approve its own call; a decision is single
    use (the same verdict from the same approver returns the original, anything else raises
    ApprovalAlreadyDecided); an unknown approval is a clear error; everything listed in §2 is persisted."""
    payments = FakePayments(str(tmp_path / "payments.db"))
    script = [calls("r1", fc("c1", "pay", {"order_id": "A1", "amount": "40.00"})), final("r2")]
    tools = [pay_spec(payments, risk="irreversible")]
    clock = FakeClock()
    paused = runner(stores.open(), script, tools, clock=clock).run_sync(
        "refund", tenant="tenant-a", subject="customer-1", operation_id="op_apr"
    )
    assert paused.state == "WAITING_APPROVAL" and payments.count() == 0
    (pending,) = paused.pending_approvals

    approver_side = runner(stores.open(), [], tools, clock=clock)  # another process: no model needed
    listed = approver_side.store.list_approvals(tenant="tenant-a")
    assert [a.approval_id for a in listed] == [pending.approval_id]
    stored = listed[0]
    assert stored.operation_id == "op_apr" and stored.call_id == "c1" and stored.response_id == "r1"
    assert stored.argument_digest == pending.argument_digest and len(stored.argument_digest) == 64
    assert stored.policy_revision == pending.policy_revision
    assert stored.expires_at == stored.created_at + timedelta(hours=24)  # D17 default TTL
    assert stored.status == "pending" and stored.approver is None and stored.decided_at is None

    with pytest.raises(cb.UnknownApproval):
        approver_side.approve(pending.approval_id, "alice", tenant="tenant-b")
    with pytest.raises(cb.UnknownApproval):
        approver_side.approve("apr_does_not_exist", "alice", tenant="tenant-a")
    with pytest.raises(cb.ApproverNotAllowed):
        approver_side.approve(pending.approval_id, "customer-1", tenant="tenant-a")
    assert approver_side.store.get_approval(pending.approval_id).status == "pending"

    clock.advance(60)
    decided = approver_side.approve(pending.approval_id, "alice", tenant="tenant-a", reason="ok")
    assert decided.status == "approved" and decided.approver == "alice"

    third = runner(stores.open(), [], tools, clock=clock)
    clock.advance(60)
    again = third.approve(pending.approval_id, "alice", tenant="tenant-a")
    assert again == decided  # the original decision, decided_at unchanged
    with pytest.raises(cb.ApprovalAlreadyDecided):
        third.deny(pending.approval_id, "alice", tenant="tenant-a", reason="changed my mind")
    with pytest.raises(cb.ApprovalAlreadyDecided):
        third.approve(pending.approval_id, "bob", tenant="tenant-a")
    persisted = third.store.get_approval(pending.approval_id)
    assert persisted == decided and persisted.reason == "ok" and persisted.decided_at == decided.decided_at
    assert third.store.list_approvals(tenant="tenant-a") == []

    resumed = runner(stores.open(), script, tools, clock=clock).resume_sync("op_apr")
    assert resumed.state == "COMPLETED"
    assert payments.count() == 1
    assert verify_store(stores.open(), "op_apr") == []


@all_stores
def test_denial_from_another_process_reaches_the_model_as_denied(stores: Stores, tmp_path: Path) -> None:
    """Issue §3 / D17: deny(approval_id, approver, tenant, reason) from any process; the model receives
    DENIED on resume and nothing runs; approver, decided_at and reason are persisted."""
    payments = FakePayments(str(tmp_path / "payments.db"))
    script = [calls("r1", fc("c1", "pay", {"order_id": "A1", "amount": "40.00"})), final("r2")]
    tools = [pay_spec(payments, risk="irreversible")]
    paused = runner(stores.open(), script, tools).run_sync(
        "x", tenant="acme", subject="u1", operation_id="op_deny"
    )
    approval_id = paused.pending_approvals[0].approval_id
    runner(stores.open(), [], tools).deny(approval_id, "bob", tenant="acme", reason="too much")
    stored = stores.open().get_approval(approval_id)
    assert (stored.status, stored.approver, stored.reason) == ("denied", "bob", "too much")
    assert stored.decided_at is not None
    model = ScriptedModel(API, script)
    out = runner(stores.open(), script, tools, model=model).resume_sync("op_deny")
    assert out.state == "COMPLETED"
    assert outputs_of(model.requests[-1])["c1"]["error"]["code"] == "DENIED"
    assert payments.count() == 0


@all_stores
def test_expired_approval_tells_the_model_approval_expired(stores: Stores, tmp_path: Path) -> None:
    """Issue §3 / D17: an approval can wait with no process running; past expires_at the model receives
    APPROVAL_EXPIRED, even when someone approves it late, and the call never runs."""
    payments = FakePayments(str(tmp_path / "payments.db"))
    script = [calls("r1", fc("c1", "pay", {"order_id": "A1", "amount": "40.00"})), final("r2")]
    tools = [pay_spec(payments, risk="irreversible")]
    clock = FakeClock()
    paused = runner(stores.open(), script, tools, clock=clock).run_sync(
        "x", tenant="acme", subject="u1", operation_id="op_exp"
    )
    clock.advance(timedelta(hours=25).total_seconds())
    approval_id = paused.pending_approvals[0].approval_id
    runner(stores.open(), [], tools, clock=clock).approve(approval_id, "alice", tenant="acme")
    model = ScriptedModel(API, script)
    out = runner(stores.open(), script, tools, clock=clock, model=model).resume_sync("op_exp")
    assert out.state == "COMPLETED"
    assert outputs_of(model.requests[-1])["c1"]["error"]["code"] == "APPROVAL_EXPIRED"
    assert payments.count() == 0


# ---- issue §4, D13, D16: idempotency across processes ------------------------------------------------


@all_stores
def test_same_intent_from_another_process_replays_the_recorded_result(stores: Stores, tmp_path: Path) -> None:
    """Issue §4 / D13: a second proposal of the same intent (another operation, another process, a new
    call id) returns the recorded result without a second execution; the ledger is keyed by tenant."""
    payments = FakePayments(str(tmp_path / "payments.db"))
    tools = [pay_spec(payments, intent_by_order=True)]
    args = {"order_id": "A1", "amount": "40.00"}
    first = runner(stores.open(), [calls("r1", fc("c1", "pay", args)), final("r2")], tools)
    assert first.run_sync("x", tenant="acme", subject="u1", operation_id="op_i1").state == "COMPLETED"
    assert payments.count() == 1

    model = ScriptedModel(API, [calls("s1", fc("d1", "pay", args)), final("s2")])
    second = runner(stores.open(), [], tools, model=model)
    assert second.run_sync("x", tenant="acme", subject="u2", operation_id="op_i2").state == "COMPLETED"
    assert payments.count() == 1
    replayed = outputs_of(model.requests[-1])["d1"]
    assert replayed["ok"] is True and replayed["data"]["refund_id"] == "rf_000001"
    entry = stores.open().ledger_get("acme", "ik_pay:A1:40.00")
    assert entry is not None and entry.status is LedgerStatus.SUCCEEDED and entry.attempts == 1
    assert entry.operation_id == "op_i1"

    model_b = ScriptedModel(API, [calls("t1", fc("e1", "pay", args)), final("t2")])
    other_tenant = runner(stores.open(), [], tools, model=model_b)
    assert (
        other_tenant.run_sync("x", tenant="globex", subject="u3", operation_id="op_i3").state == "COMPLETED"
    )
    assert payments.count() == 2  # another tenant's intent is its own


class _Killed(BaseException):
    """Stands for SIGKILL inside one process: nothing after the crash point runs, nothing is released."""


def _kill_at(monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    import callbound.runtime.execute as execute

    def crash(name: str, tag: str | None = None) -> None:
        if name == point:
            raise _Killed(name)

    monkeypatch.setattr(execute, "crash_point", crash)


@all_stores
@pytest.mark.parametrize("point", ["after_ledger_started", "after_effect_before_result_commit"])
def test_d21_started_entry_of_a_dead_worker_is_reconciled_only_after_its_lease_expired(
    stores: Stores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    """D21: a STARTED ledger entry becomes UNKNOWN only after its lease has expired; then (issue §4, D16)
    it goes through reconcile before any re-execution: exactly one effect. Every write carries the
    fencing token, so the dead worker's late commit is refused."""
    payments = FakePayments(str(tmp_path / "payments.db"))
    reconciles: list[str] = []
    base = pay_spec(payments)

    def counting_reconcile(key: str, ctx: cb.CallContext) -> Any:
        reconciles.append(key)
        assert base.reconcile is not None
        return base.reconcile(key, ctx)

    tools = [pay_spec(payments)]
    script = [calls("r1", fc("c1", "pay", {"order_id": "A1", "amount": "1.00"})), final("r2")]
    w1_store = stores.open()
    w1 = runner(w1_store, script, tools)
    op_id = w1.submit("x", tenant="acme", subject="u1", operation_id="op_lease")
    claimed = w1_store.claim("worker-1", 30.0)
    assert claimed is not None and claimed[0] == op_id
    stale = w1._load(op_id)
    _kill_at(monkeypatch, point)
    with pytest.raises(_Killed):
        asyncio.run(w1.resume_leased(op_id))
    monkeypatch.undo()
    other = stores.open()
    (key,) = [r.idempotency_key for r in w1._load(op_id).current.records]  # type: ignore[union-attr]
    assert other.ledger_get("acme", key).status is LedgerStatus.STARTED
    effects = payments.count()
    assert effects == (1 if point == "after_effect_before_result_commit" else 0)

    spec = pay_spec(payments)
    recovering = runner(
        other,
        script,
        [
            cb.ToolSpec(
                name=spec.name,
                description=spec.description,
                params=Pay,
                handler=spec.handler,
                schema_version=spec.schema_version,
                risk="write",
                timeout_ms=5000,
                reconcile=counting_reconcile,
            )
        ],
    )
    # the worker's lease has not expired: nobody may drive it, nothing is reconciled
    with pytest.raises(cb.OperationBusy):
        asyncio.run(recovering.resume(op_id))
    assert other.claim("worker-2", 30.0) is None
    assert reconciles == [] and other.ledger_get("acme", key).status is LedgerStatus.STARTED

    later = time.time() + 120  # past worker-1's lease
    taken = other.claim("worker-2", 30.0, now_fn=lambda: later)
    assert taken is not None and taken[0] == op_id and taken[1] > claimed[1]
    out = asyncio.run(recovering.resume_leased(op_id))
    assert out.state == "COMPLETED", out
    assert reconciles == [key]
    assert payments.count() == 1 and payments.count(key) == 1
    assert other.ledger_get("acme", key).status is LedgerStatus.SUCCEEDED
    with pytest.raises(cb.StaleLease):
        w1_store.commit(stale.take_commit())
    assert verify_store(other, op_id) == []


# ---- issue §4, §5, D16, D22: STARTED after SIGKILL, without reconcile --------------------------------


def _driver(argv: list[str]) -> int:
    """Subprocess driver: a write without reconcile into the fake payments service."""
    store_url, payments_path, op_id, phase = argv[:4]
    store = open_store(store_url)
    payments = FakePayments(payments_path)
    script = [calls("r1", fc("c1", "pay", {"order_id": "A1", "amount": "40.00"})), final("r2")]
    r = runner(store, script, [pay_spec(payments, reconcile=False)])
    if phase == "run":
        out = r.run_sync("x", tenant="acme", subject="u1", operation_id=op_id)
    else:
        out = r.resume_sync(op_id)
    print(json.dumps({"state": str(out.state), "reason": out.reason, "escalation": out.escalation}))
    store.close()
    return 0


def _phase(
    url: str, payments: str, op_id: str, phase: str, crash_at: str | None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CALLBOUND_CRASH_AT"}
    if crash_at:
        env["CALLBOUND_CRASH_AT"] = crash_at
    return subprocess.run(
        [sys.executable, "-m", "tests.durability.test_rules_review", url, payments, op_id, phase],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=ROOT,
    )


@durable_stores
@pytest.mark.parametrize("point", ["after_ledger_started:pay", "after_effect_before_result_commit:pay"])
def test_started_entry_after_sigkill_without_reconcile_stops_outcome_unknown(
    stores: Stores, tmp_path: Path, point: str
) -> None:
    """Issue §4 / D16: an entry left STARTED by a crash becomes UNKNOWN; without reconcile the operation
    ends STOPPED(OUTCOME_UNKNOWN) with an escalation record naming the key, never a blind re-run, and no
    operation reaches COMPLETED with an UNKNOWN entry. The downstream service sees at most the one
    effect the killed process made."""
    assert stores.url is not None
    payments = str(tmp_path / "payments.db")
    FakePayments(payments)
    killed = _phase(stores.url, payments, "op_kill", "run", point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    effects = FakePayments(payments).count()
    resumed = _phase(stores.url, payments, "op_kill", "resume", None)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert (result["state"], result["reason"]) == ("STOPPED", "OUTCOME_UNKNOWN")
    store = stores.open()
    head = store.load_operation("op_kill").head
    keys = head["escalation"]["idempotency_keys"]
    assert len(keys) == 1 and result["escalation"]["idempotency_keys"] == keys
    assert store.ledger_get("acme", keys[0]).status is LedgerStatus.UNKNOWN
    assert FakePayments(payments).count() == effects == (0 if point.startswith("after_ledger") else 1)
    assert verify_store(store, "op_kill") == []
    again = _phase(stores.url, payments, "op_kill", "resume", None)  # terminal: refused, nothing runs
    assert again.returncode != 0 and "UsageError" in again.stderr
    assert FakePayments(payments).count() == effects


# ---- D20: the audit chain ----------------------------------------------------------------------------


@all_stores
def test_d20_one_chain_per_operation_of_digests_only(stores: Stores, tmp_path: Path) -> None:
    """D20: one hash chain per operation (each event carries the hash of the one before, no global
    head); the chain holds digests of inputs and outputs, not the payloads, so they can be purged."""
    payments = FakePayments(str(tmp_path / "payments.db"))
    store = stores.open()
    tools = [pay_spec(payments)]
    for op_id, order in (("op_a", "SECRET-ORDER-7"), ("op_b", "SECRET-ORDER-8")):
        script = [calls("r1", fc("c1", "pay", {"order_id": order, "amount": "40.00"})), final("r2")]
        assert (
            runner(store, script, tools)
            .run_sync("my card is 4111-1111", tenant="acme", subject="u1", operation_id=op_id)
            .state
            == "COMPLETED"
        )
    reader = stores.open()
    for op_id in ("op_a", "op_b"):
        events = reader.audit_events(op_id)
        assert [e.seq for e in events] == list(range(len(events)))
        assert all(e.operation_id == op_id for e in events)
        for prev, ev in itertools.pairwise(events):
            assert ev.prev_hash == prev.hash
        assert verify_chain(events) is None
        text = json.dumps([e.data for e in events])
        assert "SECRET-ORDER" not in text and "4111" not in text and "rf_00000" not in text
    assert reader.audit_events("op_a")[0].prev_hash == reader.audit_events("op_b")[0].prev_hash
    assert verify_store(reader) == []


def _sql(stores: Stores, statement: str, params: tuple[Any, ...]) -> None:
    """Edit the database behind the store's back (what tampering is)."""
    assert stores.url is not None
    if stores.kind == "sqlite":
        import sqlite3

        conn = sqlite3.connect(stores.url.removeprefix("sqlite:///"))
        conn.execute(statement.replace("%s", "?"), params)
        conn.commit()
        conn.close()
    else:
        import psycopg

        with psycopg.connect(stores.url, autocommit=True) as pg:
            pg.execute(statement, params)


@durable_stores
@pytest.mark.parametrize("what", ["result", "audit"])
def test_tampering_with_a_stored_result_or_audit_row_is_named(
    stores: Stores, tmp_path: Path, what: str
) -> None:
    """Issue 'Done when' / §7: changing any audit row or stored result makes verification fail and name
    the row, on SQLite and on PostgreSQL; payloads purged from the journal do not."""
    payments = FakePayments(str(tmp_path / "payments.db"))
    script = [calls("r1", fc("c1", "pay", {"order_id": "A1", "amount": "40.00"})), final("r2")]
    store = stores.open()
    assert (
        runner(store, script, [pay_spec(payments)])
        .run_sync("x", tenant="acme", subject="u1", operation_id="op_t")
        .state
        == "COMPLETED"
    )
    stored = store.load_operation("op_t")
    pos = next(i for i, row in enumerate(stored.journal) if row.kind == "results")
    data = json.loads(json.dumps(stored.journal[pos].data))
    # purging the clear payloads kept beside the binding is allowed (D20)
    data["envelopes"][0]["protected_audit"]["input"] = None
    data["envelopes"][0]["protected_audit"]["output"] = None
    _sql(
        stores,
        "UPDATE journal SET data = %s WHERE operation_id = %s AND pos = %s",
        (json.dumps(data), "op_t", pos),
    )
    assert verify_store(stores.open(), "op_t") == []
    if what == "result":
        data["envelopes"][0]["model_result"]["data"]["amount"] = "4000.00"
        _sql(
            stores,
            "UPDATE journal SET data = %s WHERE operation_id = %s AND pos = %s",
            (json.dumps(data), "op_t", pos),
        )
        problems = verify_store(stores.open(), "op_t")
        assert problems and problems[0].where == "result c1 (response r1)"
    else:
        events = store.audit_events("op_t")
        ev = events[1]
        edited = json.loads(json.dumps(ev.data))
        edited["events"][0]["at"] = "2020-01-01T00:00:00+00:00"
        _sql(
            stores,
            "UPDATE audit SET data = %s WHERE operation_id = %s AND seq = %s",
            (json.dumps(edited), "op_t", ev.seq),
        )
        problems = verify_store(stores.open(), "op_t")
        assert problems and problems[0].where == f"audit seq {ev.seq}"


# ---- D19: versions -----------------------------------------------------------------------------------


@all_stores
def test_d19_operations_carry_their_snapshot_version_and_a_newer_one_is_refused_untouched(
    stores: Stores, tmp_path: Path
) -> None:
    """D19 / issue §8: a persisted operation carries its snapshot version (a number distinct from the
    database's db_schema_version); an operation saved by a newer format is refused, not changed."""
    payments = FakePayments(str(tmp_path / "payments.db"))
    script = [calls("r1", fc("c1", "pay", {"order_id": "A1", "amount": "40.00"})), final("r2")]
    tools = [pay_spec(payments, risk="irreversible")]
    store = stores.open()
    paused = runner(store, script, tools).run_sync("x", tenant="acme", subject="u1", operation_id="op_v")
    assert paused.state == "WAITING_APPROVAL"
    head = store.load_operation("op_v").head
    assert head["snapshot_version"] == SNAPSHOT_VERSION
    assert "db_schema_version" not in head
    if stores.kind == "sqlite":
        assert store.settings()["db_schema_version"] == DB_SCHEMA_VERSION

    from callbound.stores.base import Commit

    newer = {**head, "snapshot_version": SNAPSHOT_VERSION + 1}
    store.commit(Commit("op_v", newer, fence=head.get("fence")))
    approval_id = paused.pending_approvals[0].approval_id
    r = runner(stores.open(), script, tools)
    with pytest.raises(cb.UsageError, match="newer"):
        r.resume_sync("op_v", [cb.Decision.approve(approval_id, "alice")])
    after = stores.open().load_operation("op_v")
    assert (
        after.head["snapshot_version"] == SNAPSHOT_VERSION + 1 and after.head["state"] == "WAITING_APPROVAL"
    )
    assert len(after.journal) == len(store.load_operation("op_v").journal)
    assert payments.count() == 0


@durable_stores
def test_d19_frozen_snapshot_v1_resumes_on_durable_stores(stores: Stores, tmp_path: Path) -> None:
    """Issue §8: version 1 is frozen as a fixture and tests load every frozen version and resume it (the
    existing test does so on MemoryStore only)."""
    from callbound.demo.refund import make_app
    from tests.snapshots.test_snapshot_versions import frozen_files, load_into

    for path in frozen_files():
        data = json.loads(path.read_text(encoding="utf-8"))
        store = stores.open()
        op_id = load_into(store, data)
        app = make_app("happy", payments=str(tmp_path / f"{path.stem}.db"))
        app.clock = FakeClock()
        r = app.runner(stores.open())
        waiting = r.outcome(op_id)
        assert waiting.state == "WAITING_APPROVAL"
        approval = waiting.pending_approvals[0]
        out = r.resume_sync(op_id, [cb.Decision.approve(approval.approval_id, approver="alice")])
        assert out.state == "COMPLETED", out
        assert FakePayments(str(tmp_path / f"{path.stem}.db")).count() == 1
        assert verify_chain(stores.open().audit_events(op_id)) is None


# ---- issue §6, D21: submit and cancel ----------------------------------------------------------------


@all_stores
def test_submit_queues_for_workers_and_cancel_ends_it_from_another_process(
    stores: Stores, tmp_path: Path
) -> None:
    """Issue §6 / D21: Runner.submit() queues an operation without running it; a worker claims it.
    Runner.cancel(op) from another process ends it STOPPED(CANCELLED) and moves the fencing token, so
    the worker's next write fails with StaleLease."""
    model = ScriptedModel(API, [calls("r1", fc("c1", "get_order", {"order_id": "A1"})), final("r2")])
    store = stores.open()
    r = runner(store, [], [read_spec()], model=model)
    op_id = r.submit("x", tenant="acme", subject="u1", operation_id="op_sub")
    assert model.requests == []
    assert store.load_operation(op_id).head["state"] == "MODEL_REQUESTED"
    claimed = store.claim("worker-1", 30.0)
    assert claimed is not None and claimed[0] == op_id
    worker_copy = r._load(op_id)
    assert worker_copy.fence == claimed[1]

    canceller = runner(stores.open(), [], [read_spec()])
    out = canceller.cancel(op_id, "not needed")
    assert (out.state, out.reason) == ("STOPPED", "CANCELLED")
    with pytest.raises(cb.StaleLease):
        store.commit(worker_copy.take_commit())
    assert stores.open().load_operation(op_id).head["state"] == "STOPPED"
    assert store.claim("worker-2", 30.0) is None


@all_stores
@pytest.mark.parametrize("turn", ["write", "read_then_write"])
def test_cancel_racing_a_write_start_is_still_refused(stores: Stores, tmp_path: Path, turn: str) -> None:
    """Issue §6: cancel is refused while a write handler is running. The canceller reads the operation
    just before the driver commits the write's STARTED (in a turn of writes only that is C1; after a
    read it is a commit of its own) and starts its handler; the cancel commit lands after. Every
    commit links the audit chain, so the store refuses the stale cancel; the canceller reads again,
    sees the running write and refuses. The write finishes and the operation completes."""
    import threading
    from contextlib import suppress

    payments = FakePayments(str(tmp_path / "payments.db"))
    started, release = threading.Event(), threading.Event()
    base = pay_spec(payments)

    def slow_pay(args: Pay, ctx: cb.CallContext) -> Any:
        started.set()
        release.wait(5)
        return base.handler(args, ctx)

    class Lookup(BaseModel):
        order_id: str

    lookup = cb.ToolSpec(
        name="lookup",
        description="Look an order up",
        params=Lookup,
        handler=lambda args, ctx: {"order_id": args.order_id},
        schema_version="lookup-v1",
        risk="read",
    )

    spec = cb.ToolSpec(
        name="pay",
        description="Pay an order back",
        params=Pay,
        handler=slow_pay,
        schema_version="pay-v1",
        risk="write",
        timeout_ms=10_000,
        reconcile=base.reconcile,
    )
    pay = fc("c1", "pay", {"order_id": "A1", "amount": "1.00"})
    read = [fc("c0", "lookup", {"order_id": "A1"})] if turn == "read_then_write" else []
    script = [calls("r1", *read, pay), final("r2")]
    canceller = runner(stores.open(), [], [spec, lookup])
    snapshot: list[Any] = []

    class ReadJustBeforeStarted(CountingStore):
        def commit(self, commit: Any) -> None:
            if any(e.status is LedgerStatus.STARTED for e in commit.ledger) and not snapshot:
                snapshot.append(cb.Runner._load(canceller, commit.operation_id))
            super().commit(commit)

    driver = runner(ReadJustBeforeStarted(stores.open()), script, [spec, lookup])
    real_load = canceller._load
    loads: list[str] = []

    def load_stale_once(op_id: str) -> Any:
        loads.append(op_id)
        return snapshot[0] if len(loads) == 1 else real_load(op_id)

    async def scenario() -> None:
        task = asyncio.create_task(driver.run("x", tenant="acme", subject="u1", operation_id="op_race"))
        try:
            while not started.is_set():
                await asyncio.sleep(0.01)
            canceller._load = load_stale_once  # type: ignore[method-assign]
            with pytest.raises(cb.UsageError, match="running write call"):
                canceller.cancel("op_race")
            assert len(loads) == 2  # refused by the store once, then decided on a fresh read
            release.set()
            out = await task
            assert out.state == "COMPLETED"
            assert payments.count() == 1
        finally:
            release.set()
            with suppress(BaseException):
                await task

    asyncio.run(scenario())


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "callbound.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        input="",
        env={**os.environ, "COLUMNS": "200"},
        timeout=60,
    )


@durable_stores
def test_ops_cancel_cli_ends_a_waiting_operation_cancelled(stores: Stores, tmp_path: Path) -> None:
    """Issue §6 / §7, D28: `callbound ops cancel OP --store URL` ends an operation STOPPED(CANCELLED); its
    pending approval can no longer be decided (exit 2), a second cancel and a resume are usage errors
    (exit 2), and the audit chain still verifies."""
    assert stores.url is not None
    r = _cli("demo", "refund", "--json", "--store", stores.url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    waiting = json.loads(r.stdout)
    assert waiting["state"] == "WAITING_APPROVAL"
    op, approval_id = waiting["operation_id"], waiting["pending_approvals"][0]["approval_id"]
    r = _cli("ops", "cancel", op, "--store", stores.url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    head = stores.open().load_operation(op).head
    assert (head["state"], head["reason"]) == ("STOPPED", "CANCELLED")
    assert stores.open().list_approvals(operation_id=op) == []
    r = _cli("approvals", "approve", approval_id, "--approver", "alice", "--store", stores.url, cwd=tmp_path)
    assert r.returncode == 2
    assert _cli("ops", "cancel", op, "--store", stores.url, cwd=tmp_path).returncode == 2
    assert _cli("resume", op, "--store", stores.url, cwd=tmp_path).returncode == 2
    r = _cli("audit", "verify", op, "--store", stores.url, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert FakePayments(str(tmp_path / "demo-payments.db")).count() == 0


if __name__ == "__main__":
    sys.exit(_driver(sys.argv[1:]))
