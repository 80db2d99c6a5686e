"""Review round 16: the runtime's misuse refusals and rules the mutation review found untested.

- A runner whose model client speaks another API than the operation's is refused before anything is
  recorded or run: the approved refund was paid, then no request could be built (UsageError).
- ``resume(op, [d1, d2])`` checks every decision before it records any (D17: decisions are single use).
- ``Runner(ids=..., executor=...)`` and a client whose ``adapter`` is no adapter, ``cancel``/``outcome`` given
  an Outcome, ``run(operation_id="")``: UsageError, not an AttributeError or a store error later.
- An observer that raises SystemExit (rich does when the reader of a pipe has gone) cannot abort a
  step between a write's effect and its commit (D4).
- D13 (2) for writes: runs of identical arguments are counted when each proposal is its own intent.
- D17: a new deploy whose intent_key names the approved call's intent differently gets APPROVAL_STALE.
- D11: a result of exactly the cap goes back; one byte over is RESULT_TOO_LARGE.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import callbound as cb
from callbound.core.canonical import canonical_bytes
from callbound.testing import ScriptedModel

from .helpers import (
    Counter,
    calls,
    error_code,
    fc,
    final,
    last_outputs,
    make,
    rebuild,
    refund_tool,
    stream_events,
    write_tool,
)


async def _paused(counter: Counter) -> tuple[Any, cb.Outcome]:
    h = make(
        [calls("r1", fc("c1", "refund", {"order_id": "A1", "amount": 5.0})), final("r2")],
        [refund_tool(counter)],
    )
    out = await h.run()
    assert out.state is cb.State.WAITING_APPROVAL
    return h, out


async def test_a_runner_for_another_api_cannot_resume_the_operation() -> None:
    counter = Counter()
    h, out = await _paused(counter)
    other = ScriptedModel("anthropic-messages", [])
    runner = cb.Runner(
        model=other, registry=cb.Registry([refund_tool(counter)]), store=h.store, clock=h.clock
    )
    approval = out.pending_approvals[0].approval_id
    with pytest.raises(cb.UsageError, match=r"created for openai-responses.*anthropic-messages"):
        await runner.resume(out.operation_id, [cb.Decision.approve(approval, approver="alice")])
    assert counter.n == 0 and other.requests == []
    stored = h.store.get_approval(approval)
    assert stored is not None and stored.status == "pending"  # nothing recorded
    assert h.runner.outcome(out.operation_id).state is cb.State.WAITING_APPROVAL
    # the operation's own API still resumes it
    done = await h.runner.resume(out.operation_id, [cb.Decision.approve(approval, approver="alice")])
    assert done.state is cb.State.COMPLETED and counter.n == 1


async def test_resume_checks_every_decision_before_it_records_any() -> None:
    counter = Counter()
    script = [
        calls(
            "r1",
            fc("c1", "refund", {"order_id": "A1", "amount": 5.0}),
            fc("c2", "refund", {"order_id": "A2", "amount": 6.0}),
        ),
        final("r2"),
    ]
    h = make(script, [refund_tool(counter)])
    out = await h.run()
    a1, a2 = (p.approval_id for p in out.pending_approvals)
    with pytest.raises(cb.UnknownApproval):
        await h.runner.resume(
            out.operation_id,
            [cb.Decision.approve(a1, approver="alice"), cb.Decision.approve("apr_typo", "alice")],
        )
    with pytest.raises(cb.ApproverNotAllowed):  # the operation's own subject may not approve it
        await h.runner.resume(
            out.operation_id,
            [cb.Decision.deny(a2, approver="alice"), cb.Decision.approve(a1, approver="user-1")],
        )
    with pytest.raises(cb.UsageError, match="twice"):
        await h.runner.resume(
            out.operation_id,
            [cb.Decision.approve(a1, approver="alice"), cb.Decision.deny(a1, approver="alice")],
        )
    for approval_id in (a1, a2):
        stored = h.store.get_approval(approval_id)
        assert stored is not None and stored.status == "pending", "a refused list records nothing"
    assert counter.n == 0
    done = await h.runner.resume(
        out.operation_id, [cb.Decision.approve(a1, approver="alice"), cb.Decision.deny(a2, approver="alice")]
    )
    assert done.state is cb.State.COMPLETED and counter.n == 1


class _NoAdapter:
    adapter = "openai-responses"

    async def complete(self, body: Any, *, stream: bool, meta: Any, on_progress: Any = None) -> Any:
        raise AssertionError("never asked")


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"ids": 5}, "Runner\\(ids=...\\)"),
        ({"executor": 5}, "Runner\\(executor=...\\)"),
        ({"model": _NoAdapter()}, "adapter must be a callbound adapter"),
    ],
)
def test_runner_arguments_of_the_wrong_kind_are_refused_at_once(kw: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"model": ScriptedModel("openai-responses", []), "registry": cb.Registry([])}
    args.update(kw)
    with pytest.raises(cb.UsageError, match=match):
        cb.Runner(**args)


async def test_an_outcome_passed_for_its_id_and_an_empty_id_are_usage_errors() -> None:
    h = make([final("r1")], [])
    out = await h.run()
    with pytest.raises(cb.UsageError, match="operation_id"):
        h.runner.cancel(out)  # type: ignore[arg-type]
    with pytest.raises(cb.UsageError, match="operation_id"):
        h.runner.outcome(out)  # type: ignore[arg-type]
    with pytest.raises(cb.UsageError, match="operation_id is empty"):
        await h.run(operation_id="")


@pytest.mark.parametrize("hook", ["on_transition", "on_progress"])
async def test_an_observer_raising_system_exit_does_not_cut_a_write_from_its_commit(hook: str) -> None:
    counter = Counter()

    seen: list[Any] = []

    def observer(*args: Any) -> None:
        seen.append(args)
        raise SystemExit(1)

    script: list[Any] = [stream_events(calls("r1", fc("c1", "set_note", {"order_id": "A1"}))), final("r2")]
    h = make(script, [write_tool(counter)], **{hook: observer})
    out = await h.run()
    assert (out.state, counter.n) == (cb.State.COMPLETED, 1) and seen
    [entry] = h.store.ledger_list()
    assert entry.status.value == "SUCCEEDED"


class _Msg(BaseModel):
    to: str
    text: str


async def test_identical_write_runs_are_counted_when_each_proposal_is_its_own_intent() -> None:
    """D13 (2): run number max_identical_calls + 1 gets NO_PROGRESS without running, writes included."""
    sent: list[str] = []
    tool = cb.ToolSpec(
        "send_message",
        "Send a message",
        _Msg,
        lambda a, c: sent.append(a.text) or {"sent": True},
        "send-v1",
        risk="write",
        intent_key=lambda a, c: f"{c.operation_id}:{c.call_id}",
    )
    args = {"to": "bob", "text": "hi"}
    script = [calls(f"r{i}", fc(f"c{i}", "send_message", args)) for i in (1, 2, 3)] + [final("r4")]
    h = make(script, [tool], budgets=cb.Budgets(max_identical_calls=2, max_no_progress_turns=10))
    out = await h.run()
    assert len(sent) == 2
    assert error_code(last_outputs(h.model)["c3"]) == "NO_PROGRESS"
    assert out.state in (cb.State.COMPLETED, cb.State.STOPPED)


async def test_an_approval_goes_stale_when_a_new_deploy_names_the_intent_differently() -> None:
    """D17: the approved call must not run under an intent nobody approved."""
    counter = Counter()
    h = make(
        [calls("r1", fc("c1", "refund", {"order_id": "A1", "amount": 5.0})), final("r2")],
        [refund_tool(counter, intent_key=lambda a, c: f"refund:{a.order_id}")],
    )
    out = await h.run()
    approval = out.pending_approvals[0].approval_id
    h2 = rebuild(h, [refund_tool(counter, intent_key=lambda a, c: f"refund:{a.order_id}:{a.amount}")])
    done = await h2.runner.resume(out.operation_id, [cb.Decision.approve(approval, approver="alice")])
    assert counter.n == 0
    assert error_code(last_outputs(h2.model)["c1"]) == "APPROVAL_STALE"
    assert done.state is cb.State.COMPLETED


class _Q(BaseModel):
    q: str


@pytest.mark.parametrize(("extra", "code"), [(0, None), (1, "RESULT_TOO_LARGE")])
async def test_a_result_of_exactly_the_cap_goes_back_and_one_byte_more_does_not(
    extra: int, code: str | None
) -> None:
    """D11: the cap is on the canonical JSON; only a result over it is RESULT_TOO_LARGE."""
    cap = 100
    data = {"s": "x" * (cap - len(canonical_bytes({"s": ""})) + extra)}
    assert len(canonical_bytes(data)) == cap + extra
    tool = cb.ToolSpec("lookup", "Look up", _Q, lambda a, c: data, "lookup-v1", max_result_bytes=cap)
    h = make(
        [calls("r1", fc("c1", "lookup", {"q": "a"})), final("r2")],
        [tool],
        budgets=cb.Budgets(max_result_bytes=cap),
    )
    out = await h.run()
    assert out.state is cb.State.COMPLETED
    assert error_code(last_outputs(h.model)["c1"]) == code
