"""SIGKILL at every commit of a tool loop, not only at the named crash points (issue 4 §5; D16, D18, D22).

The named points of ``test_crash_matrix`` sit in the refund demo, whose turns hold one call each. This
sweep runs a flow whose turns hold what a user's do: two reads at once, two writes in one turn (a
commit between them, D15), a mixed turn whose read runs while its refund waits for approval (D3), and
a variant whose refund applies downstream but answers after its timeout (reconcile, D16). A driver
process counts the store's commits and kills itself just BEFORE the N-th (the commit is lost) or just
AFTER it, for every N the flow reaches, in the first drive and in the resume after the approval; a fresh
process then resumes. Every write here has a reconcile, so every cell must end COMPLETED with exactly
one downstream row per intent (never two: no effect ran twice; never none: no effect was lost), the
approval kept, and the audit chain and bindings verified.

    python -m tests.durability.test_review20_d_commit_kills STORE_URL DOWNSTREAM_DB OP_ID run|resume VARIANT
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from .conftest import store_urls

ROOT = Path(__file__).resolve().parents[2]
KILL = "CALLBOUND_R20D_KILL"  # "before:N" or "after:N": this driver's own switch, not a library one


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


# ---- the sweep -----------------------------------------------------------------------------------


def _phase(
    store_url: str,
    downstream: str,
    op_id: str,
    name: str,
    variant: str,
    kill: str | None,
    unsafe: bool = False,
    crash_at: str | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in (KILL, "CALLBOUND_CRASH_AT", "CALLBOUND_UNSAFE_NO_LEDGER")
    }
    if kill:
        env[KILL] = kill
    if unsafe:
        env["CALLBOUND_UNSAFE_NO_LEDGER"] = "1"
    if crash_at:
        env["CALLBOUND_CRASH_AT"] = crash_at  # a named crash point of the library (D22)
    args = [sys.executable, "-m", "tests.durability.test_review20_d_commit_kills"]
    args += [store_url, downstream, op_id, name, variant]
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)


def _drive(
    store_url: str,
    downstream: str,
    op_id: str,
    variant: str,
    kill: str,
    in_phase: str,
    *,
    unsafe: bool = False,
) -> tuple[bool, dict[str, Any]]:
    """run (pauses for the refund's approval), then approve and resume; the kill armed in ``in_phase``.
    A killed phase is followed by a resume in a fresh process, which decides what is still pending."""
    killed = False
    last: dict[str, Any] = {}
    for name in ("run", "resume"):
        r = _phase(store_url, downstream, op_id, name, variant, kill if name == in_phase else None, unsafe)
        if r.returncode == -signal.SIGKILL:
            killed = True
            r = _phase(store_url, downstream, op_id, "resume", variant, None, unsafe)
        assert r.returncode == 0, f"{name} ({kill}) failed: {r.stderr[-3000:]}"
        last = json.loads(r.stdout.strip().splitlines()[-1])
    return killed, last


def _rows(downstream: str) -> list[tuple[Any, ...]]:
    from callbound.demo.payments import FakePayments

    return FakePayments(downstream).rows()


def _check(store_url: str, downstream: str, op_id: str, label: str) -> None:
    from callbound.runtime.verify import verify_store
    from callbound.stores import open_store

    rows = _rows(downstream)
    keys = [r[1] for r in rows]
    what = sorted(r[2] for r in rows)
    # one draft, one note, one refund: none twice, none lost
    assert what == ["dr_A1", "draft", "note"], f"{label}: downstream rows {rows}"
    assert len(set(keys)) == 3, f"{label}: {rows}"
    store = open_store(store_url)
    try:
        approvals = store.list_approvals(operation_id=op_id, status=None)
        assert [a.status for a in approvals] == ["approved"], f"{label}: {approvals}"
        assert verify_store(store, op_id) == [], label
    finally:
        store.close()


def _sweep(kind: str, variant: str, in_phase: str, tmp_path: Path) -> int:
    n = 0
    cells = 0
    while True:
        n += 1
        for when in ("before", "after"):
            cell = tmp_path / f"{in_phase}-{when}-{n}"
            cell.mkdir()
            store_url = store_urls(kind, cell)
            downstream = str(cell / "downstream.db")
            op_id = f"op_sweep_{in_phase}_{when}_{n}"
            killed, last = _drive(store_url, downstream, op_id, variant, f"{when}:{n}", in_phase)
            label = f"{kind}/{variant}: kill {when} commit {n} of {in_phase}"
            assert last == {"state": "COMPLETED", "reason": None}, f"{label}: {last}"
            _check(store_url, downstream, op_id, label)
            if not killed:
                # this phase makes fewer than n commits: every commit of it has been swept
                assert n > 2, f"{label}: the phase committed less than the flow needs"
                return cells
            cells += 1


@pytest.mark.slow
# the refund (and its timeout) runs in the resume; the first drive is the same in both variants
@pytest.mark.parametrize(
    ("store_kind", "in_phase", "variant"),
    [
        ("sqlite", "run", "plain"),
        ("sqlite", "resume", "plain"),
        ("sqlite", "resume", "timeout"),
        ("postgres", "run", "plain"),
        ("postgres", "resume", "plain"),
    ],
)
def test_a_kill_at_any_commit_runs_each_effect_once(
    store_kind: str, in_phase: str, variant: str, tmp_path: Path
) -> None:
    cells = _sweep(store_kind, variant, in_phase, tmp_path)
    assert cells >= 4  # the phase's commits were reached and killed at, each before and after


@pytest.mark.slow
def test_a_second_kill_while_recovering_a_refund_runs_it_once(tmp_path: Path) -> None:
    """The refund applied downstream, the process killed before its result commit; the process that
    recovers it (its reconcile takes the entry over, finds the refund, records it) is killed in turn at
    each of its commits, before and after; a third resumes. Still one refund, none lost (D16, D18)."""
    n = 0
    while True:
        n += 1
        for when in ("before", "after"):
            cell = tmp_path / f"{when}-{n}"
            cell.mkdir()
            store_url, downstream = store_urls("sqlite", cell), str(cell / "downstream.db")
            op_id = f"op_twice_{when}_{n}"
            label = f"second kill {when} commit {n} of the recovery"
            r = _phase(store_url, downstream, op_id, "run", "plain", None)
            assert r.returncode == 0, r.stderr[-3000:]
            first = "after_effect_before_result_commit:submit_refund"
            r = _phase(store_url, downstream, op_id, "resume", "plain", None, crash_at=first)
            assert r.returncode == -signal.SIGKILL, f"{label}: the refund's crash point was not reached"
            assert len(_rows(downstream)) == 3  # draft, note and the refund: applied, not recorded
            r = _phase(store_url, downstream, op_id, "resume", "plain", f"{when}:{n}")
            killed = r.returncode == -signal.SIGKILL
            if killed:
                r = _phase(store_url, downstream, op_id, "resume", "plain", None)
            assert r.returncode == 0, f"{label}: {r.stderr[-3000:]}"
            last = json.loads(r.stdout.strip().splitlines()[-1])
            assert last == {"state": "COMPLETED", "reason": None}, f"{label}: {last}"
            _check(store_url, downstream, op_id, label)
            if not killed:
                assert n > 2, f"{label}: the recovery committed less than it must"
                return


@pytest.mark.slow
def test_negative_control_the_sweep_sees_a_double_effect(tmp_path: Path) -> None:
    """With the ledger bypassed (D22's negative control), some kill in the resume makes a write run
    twice, and the sweep's check says so: the sweep can fail."""
    n = 0
    while True:
        n += 1
        cell = tmp_path / f"cell-{n}"
        cell.mkdir()
        store_url, downstream = store_urls("sqlite", cell), str(cell / "downstream.db")
        op_id = f"op_control_{n}"
        killed, _ = _drive(store_url, downstream, op_id, "plain", f"before:{n}", "resume", unsafe=True)
        rows = _rows(downstream)
        if len(rows) > len({r[1] for r in rows}):
            return  # an intent applied twice downstream: seen
        assert killed, f"no kill in the resume applied a write twice without the ledger: {rows}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
