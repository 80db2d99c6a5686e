"""The driver process of ``test_review20_d_commit_kills``: one phase of its flow, killed at a commit.

    python -m tests.durability.commit_kill_driver STORE_URL DOWNSTREAM_DB OP_ID run|resume VARIANT

``CALLBOUND_R20D_KILL`` ("before:N" or "after:N", this driver's own switch, not a library one) kills the
process just before or just after the store's N-th commit. Prints the final state as JSON. Kept apart
from the test module so each of the sweep's few hundred processes loads callbound, not pytest.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

from pydantic import BaseModel

KILL = "CALLBOUND_R20D_KILL"


class OrderArgs(BaseModel):
    order_id: str


class DraftArgs(BaseModel):
    order_id: str
    amount: str


class NoteArgs(BaseModel):
    order_id: str
    text: str


class SubmitArgs(BaseModel):
    draft_id: str


def _fc(n: int, i: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{n}_{i}",
        "call_id": f"call_{n}_{i}",
        "name": name,
        "arguments": json.dumps(args),
        "status": "completed",
    }


def _body(n: int, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": f"resp_{n}",
        "object": "response",
        "status": "completed",
        "model": "sweep-model",
        "output": output,
        "usage": {"input_tokens": 10 * n, "output_tokens": 5},
    }


def script() -> list[dict[str, Any]]:
    final = {
        "type": "message",
        "id": "msg_5",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Refunded.", "annotations": []}],
    }
    return [
        # two reads at once
        _body(1, [_fc(1, 0, "get_order", {"order_id": "A1"}), _fc(1, 1, "get_customer", {"order_id": "A1"})]),
        # two writes in one turn: one at a time, the first's outcome committed before the second starts
        _body(
            2,
            [
                _fc(2, 0, "create_draft", {"order_id": "A1", "amount": "40.00"}),
                _fc(2, 1, "add_note", {"order_id": "A1", "text": "refund drafted"}),
            ],
        ),
        # a mixed turn: the read runs and is saved, then the refund waits for its approval (D3)
        _body(
            3, [_fc(3, 0, "submit_refund", {"draft_id": "dr_A1"}), _fc(3, 1, "get_order", {"order_id": "A1"})]
        ),
        # the same refund proposed again under a new call id: replayed from the ledger (D13 (1))
        _body(4, [_fc(4, 0, "submit_refund", {"draft_id": "dr_A1"})]),
        _body(5, [final]),
    ]


def make_app(downstream: str, variant: str) -> Any:
    import callbound as cb
    from callbound.core.errors import NotApplied
    from callbound.demo.payments import FakePayments
    from callbound.runtime.app import App
    from callbound.runtime.tools import ToolExecutor
    from callbound.testing import ScriptedModel

    service = FakePayments(downstream)

    def effect(key: str, what: str) -> dict[str, Any]:
        return service.submit(key, what, "40.00", "EUR")

    def reconcile(key: str, ctx: cb.CallContext) -> dict[str, Any]:
        found = service.lookup(key)
        if found is None:
            raise NotApplied("nothing downstream under this key")
        return found

    def get_order(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        return {"order_id": args.order_id, "total": "40.00"}

    def get_customer(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        return {"order_id": args.order_id, "customer": "c-1"}

    def create_draft(args: DraftArgs, ctx: cb.CallContext) -> dict[str, Any]:
        assert ctx.idempotency_key is not None
        effect(ctx.idempotency_key, "draft")
        return {"draft_id": f"dr_{args.order_id}"}

    def add_note(args: NoteArgs, ctx: cb.CallContext) -> dict[str, Any]:
        assert ctx.idempotency_key is not None
        effect(ctx.idempotency_key, "note")
        return {"noted": True}

    def submit_refund(args: SubmitArgs, ctx: cb.CallContext) -> dict[str, Any]:
        assert ctx.idempotency_key is not None
        receipt = effect(ctx.idempotency_key, args.draft_id)
        if variant == "timeout":
            time.sleep(0.4)  # applied downstream, but the answer comes after the timeout
        return receipt

    def spec(name: str, params: type[BaseModel], handler: Any, risk: str, **kw: Any) -> cb.ToolSpec:
        return cb.ToolSpec(
            name=name,
            description=name,
            params=params,
            handler=handler,
            schema_version=f"{name}-v1",
            risk=risk,  # type: ignore[arg-type]
            timeout_ms=kw.pop("timeout_ms", 5_000),
            **kw,
        )

    registry = cb.Registry(
        [
            spec("get_order", OrderArgs, get_order, "read"),
            spec("get_customer", OrderArgs, get_customer, "read"),
            spec("create_draft", DraftArgs, create_draft, "write", reconcile=reconcile),
            spec("add_note", NoteArgs, add_note, "write", reconcile=reconcile),
            spec(
                "submit_refund",
                SubmitArgs,
                submit_refund,
                "irreversible",
                reconcile=reconcile,
                timeout_ms=200 if variant == "timeout" else 5_000,
            ),
        ]
    )
    return App(
        registry=registry,
        model=ScriptedModel("openai-responses", script()),
        policy=cb.Policy(revision="sweep-1"),
        budgets=cb.Budgets(max_model_turns=8),
        settings={"model": "sweep-model"},
        instructions="You handle refunds.",
        runner_options={"executor": ToolExecutor(grace_s=1.0)},
    )


def _arm(store: Any) -> None:
    """Kill this process just before or just after the store's N-th commit (this process's count)."""
    wanted = os.environ.get(KILL)
    if not wanted:
        return
    when, n = wanted.split(":")
    target = int(n)
    commit = store.commit
    seen = 0

    def counted(c: Any) -> None:
        nonlocal seen
        seen += 1
        if seen == target and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        commit(c)
        if seen == target and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)

    store.commit = counted


def main(argv: list[str]) -> int:
    import callbound as cb
    from callbound.core.states import TERMINAL
    from callbound.stores import open_store

    store_url, downstream, op_id, phase, variant = argv[:5]
    if (
        os.environ.get("CALLBOUND_UNSAFE_NO_LEDGER") == "1"
    ):  # the negative control; callbound reads no such variable
        from callbound.runtime.crash import bypass_ledger_for_negative_control

        bypass_ledger_for_negative_control()
    store = open_store(store_url)
    _arm(store)
    runner = make_app(downstream, variant).runner(store)
    if phase == "run" or store.load_operation(op_id) is None:  # killed before it was first saved
        outcome = runner.run_sync("Refund order A1.", tenant="acme", subject="customer-1", operation_id=op_id)
    elif phase == "resume":
        # the approval, decided by alice from this process, then the resume
        for a in store.list_approvals(operation_id=op_id, status="pending"):
            runner.decide(cb.Decision.approve(a.approval_id, approver="alice"), tenant="acme")
        # killed just after its last commit, the operation may already have ended
        ended = runner.outcome(op_id)
        outcome = ended if ended.state in TERMINAL else runner.resume_sync(op_id)
    else:
        raise SystemExit(f"unknown phase {phase}")
    print(json.dumps({"state": str(outcome.state), "reason": outcome.reason}))
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
