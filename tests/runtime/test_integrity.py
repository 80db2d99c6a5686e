"""Integrity (D4, D10): a result that is not bound to its call ends the operation FAILED(INTEGRITY) with
an escalation, never an exception; nothing of ``protected_audit`` ever reaches a provider payload."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import callbound as cb
from callbound.core.audit import audit_entries
from callbound.core.binding import PROTECTED_FIELDS
from callbound.core.canonical import canonical_sha256
from callbound.runtime.operation import Operation

from .helpers import (
    Counter,
    Harness,
    OrderArgs,
    calls,
    error_code,
    fc,
    final,
    get_order_tool,
    make,
    outputs,
    rebuild,
    refund_tool,
    stream_events,
    write_tool,
)

A1, B2 = {"order_id": "A1"}, {"order_id": "B2"}


def two_reads() -> list[Any]:
    return [calls("resp_1", fc("call_1", "get_order", A1), fc("call_2", "get_order", B2)), final("resp_2")]


def tamper_before_results(h: Harness, edit: Callable[[Operation], None]) -> None:
    """Edit the in-memory call records right before RESULTS_READY is processed (as a bug or an attacker
    inside the process could)."""
    original: Callable[[Operation], Awaitable[None]] = h.runner._send_results

    async def wrapped(op: Operation) -> None:
        edit(op)
        await original(op)

    h.runner._send_results = wrapped  # type: ignore[method-assign]


def assert_integrity_failure(h: Harness, out: cb.Outcome, requests_before: int = 1) -> None:
    assert out.state == cb.State.FAILED
    assert out.reason == "INTEGRITY"
    assert out.escalation is not None and out.escalation["reason"] == "INTEGRITY"
    assert out.escalation["operation_id"] == out.operation_id
    assert len(h.model.requests) == requests_before  # the unbound results never went to the model
    stored = h.runner.outcome(out.operation_id)
    assert stored.state == cb.State.FAILED and stored.reason == "INTEGRITY"
    assert "escalation" in [e.kind for e in audit_entries(h.store.audit_events(out.operation_id))]


def _envs(op: Operation) -> list[dict[str, Any]]:
    assert op.current is not None
    envs = [r.envelope for r in op.current.records]
    assert all(e is not None for e in envs)
    return envs  # type: ignore[return-value]


async def test_swapped_model_results_fail_closed() -> None:
    h = make(two_reads(), [get_order_tool()])

    def swap(op: Operation) -> None:
        e1, e2 = _envs(op)
        e1["model_result"], e2["model_result"] = e2["model_result"], e1["model_result"]

    tamper_before_results(h, swap)
    out = await h.run()
    assert_integrity_failure(h, out)


async def test_swapped_results_with_their_protected_audit_fail_closed() -> None:
    """Moving a whole result (with its own binding) to another call is caught: the binding names the call."""
    h = make(two_reads(), [get_order_tool()])

    def swap(op: Operation) -> None:
        e1, e2 = _envs(op)
        for k in ("model_result", "protected_audit"):
            e1[k], e2[k] = e2[k], e1[k]

    tamper_before_results(h, swap)
    out = await h.run()
    assert_integrity_failure(h, out)


async def test_edited_result_fails_closed() -> None:
    h = make(two_reads(), [get_order_tool()])

    def edit(op: Operation) -> None:
        _envs(op)[0]["model_result"]["data"]["status"] = "refunded"

    tamper_before_results(h, edit)
    out = await h.run()
    assert_integrity_failure(h, out)


async def test_recomputed_result_hash_is_not_enough() -> None:
    """Fixing up result_sha256 after an edit does not help: the binding is recomputed from trusted context."""
    h = make(two_reads(), [get_order_tool()])

    def edit(op: Operation) -> None:
        env = _envs(op)[0]
        env["model_result"] = {"ok": True, "data": {"order_id": "A1", "status": "lost"}}
        env["protected_audit"]["result_sha256"] = canonical_sha256(env["model_result"])

    tamper_before_results(h, edit)
    out = await h.run()
    assert_integrity_failure(h, out)


async def test_missing_result_fails_closed() -> None:
    h = make(two_reads(), [get_order_tool()])

    def drop(op: Operation) -> None:
        assert op.current is not None
        op.current.records[1].envelope = None

    tamper_before_results(h, drop)
    out = await h.run()
    assert_integrity_failure(h, out)


async def test_result_for_an_unknown_call_fails_closed() -> None:
    h = make(two_reads(), [get_order_tool()])

    def relabel(op: Operation) -> None:
        _envs(op)[1]["call_id"] = "call_999"

    tamper_before_results(h, relabel)
    out = await h.run()
    assert_integrity_failure(h, out)


async def test_changed_idempotency_key_fails_closed() -> None:
    h = make([calls("resp_1", fc("call_1", "set_note", A1)), final("resp_2")], [write_tool()])

    def edit(op: Operation) -> None:
        assert op.current is not None
        op.current.records[0].idempotency_key = "ik_someone_elses_refund"

    tamper_before_results(h, edit)
    out = await h.run()
    assert_integrity_failure(h, out)


async def test_tampered_store_while_waiting_fails_closed_on_resume() -> None:
    """Someone swaps two saved results in the database while a mixed turn waits for approval."""
    reads = Counter()
    script = [
        calls(
            "resp_1",
            fc("call_1", "get_order", A1),
            fc("call_2", "get_order", B2),
            fc("call_3", "refund", {"order_id": "A1", "amount": 5.0}),
        ),
        final("resp_2"),
    ]
    refunds = Counter()
    h = make(script, [get_order_tool(reads), refund_tool(refunds)])
    out = await h.run()
    assert out.state == cb.State.WAITING_APPROVAL
    head = h.store._heads[out.operation_id]  # the backing row of the MemoryStore
    r1, r2 = head["current"]["records"][:2]
    r1["envelope"]["model_result"], r2["envelope"]["model_result"] = (
        r2["envelope"]["model_result"],
        r1["envelope"]["model_result"],
    )
    (p,) = out.pending_approvals
    h2 = rebuild(h, [get_order_tool(reads), refund_tool(refunds)])
    out = await h2.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.FAILED and out.reason == "INTEGRITY"
    assert out.escalation is not None
    assert h2.model.requests == []
    assert reads.n == 2
    assert refunds.n == 0  # found before the approved refund runs (review round 17, r2 F1)


async def test_integrity_failure_is_not_raised_from_resume() -> None:
    h = make(two_reads(), [get_order_tool()])

    def swap(op: Operation) -> None:
        e1, e2 = _envs(op)
        e1["model_result"], e2["model_result"] = e2["model_result"], e1["model_result"]

    tamper_before_results(h, swap)
    out = await h.run()  # no exception
    with pytest.raises(cb.UsageError):  # and it is terminal
        await h.runner.resume(out.operation_id)


async def test_untampered_envelopes_verify() -> None:
    """The negative control: the same hook without an edit completes."""
    h = make(two_reads(), [get_order_tool()])
    tamper_before_results(h, lambda op: None)
    out = await h.run()
    assert out.state == cb.State.COMPLETED


# ---- no protected_audit value in any provider payload ---------------------------------------------

TENANT, SUBJECT = "tenant-q7xw3", "subject-z9kd1"
SCANNED = (
    "call_binding_sha256",
    "result_sha256",
    "request_sha256",
    "idempotency_key",
    "tenant",
    "subject",
    "handler",
    "operation_id",
    "adapter_revision",
    "schema_version",
)


def _payment_tools(payments: list[str]) -> list[cb.ToolSpec]:
    def pay(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        payments.append(ctx.idempotency_key or "")
        time.sleep(0.1 if args.order_id == "SLOW" else 0)
        return {"paid": args.order_id}

    def reconcile(key: str, ctx: cb.CallContext) -> Any:
        return {"paid": "found"} if key in payments else None

    def boom(args: OrderArgs, ctx: cb.CallContext) -> Any:
        raise RuntimeError("internal detail")

    return [
        get_order_tool(),
        refund_tool(),
        write_tool(name="pay", handler=pay, timeout_ms=20, reconcile=reconcile),
        get_order_tool(name="boom", handler=boom),
        get_order_tool(name="guarded", authorize=lambda a, c: False),
    ]


async def _scenario_reads(payments: list[str]) -> list[Harness]:
    h = make(
        [calls("resp_1", fc("call_1", "get_order", A1), fc("call_2", "get_order", B2)), final("r2")],
        _payment_tools(payments),
    )
    await h.run(tenant=TENANT, subject=SUBJECT)
    return [h]


async def _scenario_errors(payments: list[str]) -> list[Harness]:
    body = calls(
        "resp_1",
        fc("call_1", "nope", A1),
        fc("call_2", "get_order", raw='{"order_id": 1}'),
        fc("call_3", "boom", A1),
        fc("call_4", "guarded", A1),
        fc("call_5", "get_order", A1),
        fc("call_5", "get_order", B2),
    )
    h = make([body, final("r2")], _payment_tools(payments))
    await h.run(tenant=TENANT, subject=SUBJECT)
    return [h]


async def _scenario_writes(payments: list[str]) -> list[Harness]:
    script = [
        calls("resp_1", fc("call_1", "pay", A1)),
        calls("resp_2", fc("call_2", "pay", A1), fc("call_3", "pay", {"order_id": "SLOW"})),
        final("r3"),
    ]
    h = make(script, _payment_tools(payments), grace_s=1.0)
    out = await h.run(tenant=TENANT, subject=SUBJECT)
    assert out.state == cb.State.COMPLETED, out.escalation
    return [h]


async def _scenario_approval(payments: list[str]) -> list[Harness]:
    script = [
        calls(
            "resp_1", fc("call_1", "get_order", A1), fc("call_2", "refund", {"order_id": "A1", "amount": 9.5})
        ),
        final("r2"),
    ]
    h = make(script, _payment_tools(payments))
    out = await h.run(tenant=TENANT, subject=SUBJECT)
    (p,) = out.pending_approvals
    h2 = rebuild(h, _payment_tools(payments))
    out = await h2.runner.resume(out.operation_id, [cb.Decision.approve(p.approval_id, approver="alice")])
    assert out.state == cb.State.COMPLETED
    return [h, h2]


async def _scenario_stream(payments: list[str]) -> list[Harness]:
    script = [stream_events(calls("resp_1", fc("call_1", "pay", B2))), stream_events(final("r2"))]
    h = make(script, _payment_tools(payments), settings={"stream": True})
    await h.run(tenant=TENANT, subject=SUBJECT)
    return [h]


async def _scenario_previous_response_id(payments: list[str]) -> list[Harness]:
    script = [calls("resp_1", fc("call_1", "pay", {"order_id": "C3"})), final("r2")]
    h = make(script, _payment_tools(payments), settings={"continuation": "previous_response_id"})
    await h.run(tenant=TENANT, subject=SUBJECT)
    return [h]


def _protected_values(h: Harness) -> set[str]:
    values: set[str] = set()
    for head in h.store.list_operations(limit=100):
        stored = h.store.load_operation(head["operation_id"])
        assert stored is not None
        values.add(head["operation_id"])
        for row in stored.journal:
            if row.kind != "results":
                continue
            for env in row.data["envelopes"]:
                if env is None:
                    continue
                for name in SCANNED:
                    v = env["protected_audit"].get(name)
                    if isinstance(v, str) and v not in ("-",):
                        values.add(v)
        for ap in h.store.list_approvals(status=None, operation_id=head["operation_id"]):
            values.add(ap.approval_id)
            values.add(ap.argument_digest)
        for ev in h.store.audit_events(head["operation_id"]):
            values.add(ev.hash)
    values |= {TENANT, SUBJECT}
    return values


@pytest.mark.parametrize(
    "scenario",
    [
        _scenario_reads,
        _scenario_errors,
        _scenario_writes,
        _scenario_approval,
        _scenario_stream,
        _scenario_previous_response_id,
    ],
)
async def test_no_protected_audit_value_reaches_a_provider_payload(scenario: Any) -> None:
    payments: list[str] = []
    harnesses = await scenario(payments)
    store_values: set[str] = set()
    requests: list[dict[str, Any]] = []
    for h in harnesses:
        store_values |= _protected_values(h)
        requests.extend(h.model.requests)
    assert requests
    # the scan is not vacuous: hashes, keys, refs and the handler were all collected
    assert any(v.startswith("tests.runtime") for v in store_values)
    assert len(store_values) > 5
    n_outputs = 0
    for req in requests:
        wire = json.dumps(req, ensure_ascii=False)
        for v in store_values:
            assert v not in wire, f"protected value {v!r} leaked into a request"
        for field in ("protected_audit", "call_binding", "idempotency"):
            assert field not in wire
        for out in outputs(req):
            n_outputs += 1
            result = out["result"]
            assert set(result) <= {"ok", "data", "error"}  # only model_result text
            if not result["ok"]:
                assert set(result["error"]) == {"code", "message"}
    assert n_outputs > 0
    assert "internal detail" not in json.dumps(requests)


def test_protected_fields_are_what_the_scan_covers() -> None:
    assert set(SCANNED) <= set(PROTECTED_FIELDS) | {"schema_version"}


async def test_error_codes_in_the_errors_scenario() -> None:
    payments: list[str] = []
    (h,) = await _scenario_errors(payments)
    got = {o["call_id"]: error_code(o["result"]) for o in outputs(h.model.requests[-1])}
    assert got == {
        "call_1": "UNKNOWN_TOOL",
        "call_2": "INVALID_ARGUMENTS",
        "call_3": "HANDLER_ERROR",
        "call_4": "DENIED",
        "call_5": "DUPLICATE_CALL_ID",
    }
