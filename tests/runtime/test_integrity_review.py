"""D20, D2, D19, D28 (acceptance review): what the audit chain says of an operation's head row, its
journal's transitions and its approvals is held to them, by a resume before anything runs and by
``audit verify``; turns are paired with the chain's in order, so a provider that repeats a response
id in every turn verifies clean; an operation written by a newer callbound is unreadable, not
tampered.

Edits are made with SQL on a SQLite file, as anyone who can write to the database could. Each
tamper test has an untouched twin (the negative control) that verifies clean or completes.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.core.audit import GENESIS, link_hash
from callbound.core.ids import SequentialIds
from callbound.runtime.verify import Problem, verify_store
from callbound.stores import open_store
from callbound.testing import FakeClock, ScriptedModel, StreamCut

from .helpers import (
    Counter,
    calls,
    fc,
    final,
    get_order_tool,
    make,
    msg,
    rebuild,
    refund_tool,
    refusal_msg,
    response,
    write_tool,
)

KEY = b"audit-key-for-review-tests"
REFUND = {"order_id": "A1", "amount": 5.0}
Doc = dict[str, Any]


# ---- SQL edits -----------------------------------------------------------------------------------


def edit_head(db: Path, op: str, change: Callable[[Doc], None]) -> None:
    with sqlite3.connect(db) as conn:
        (text,) = conn.execute("SELECT head FROM operations WHERE operation_id = ?", (op,)).fetchone()
        head = json.loads(text)
        change(head)
        conn.execute(
            "UPDATE operations SET head = ?, state = ? WHERE operation_id = ?",
            (json.dumps(head), head.get("state"), op),
        )


def journal_rows(conn: sqlite3.Connection, op: str, kind: str) -> list[tuple[int, str]]:
    return conn.execute(
        "SELECT pos, data FROM journal WHERE operation_id = ? AND kind = ? ORDER BY pos", (op, kind)
    ).fetchall()


def edit_journal(db: Path, op: str, kind: str, change: Callable[[Doc], None], nth: int = -1) -> None:
    with sqlite3.connect(db) as conn:
        pos, text = journal_rows(conn, op, kind)[nth]
        doc = json.loads(text)
        change(doc)
        conn.execute(
            "UPDATE journal SET data = ? WHERE operation_id = ? AND pos = ?", (json.dumps(doc), op, pos)
        )


def delete_journal(db: Path, op: str, kind: str, nth: int) -> None:
    with sqlite3.connect(db) as conn:
        pos, _ = journal_rows(conn, op, kind)[nth]
        conn.execute("DELETE FROM journal WHERE operation_id = ? AND pos = ?", (op, pos))


def edit_approval(db: Path, approval_id: str, change: Callable[[Doc], None]) -> None:
    with sqlite3.connect(db) as conn:
        (text,) = conn.execute("SELECT data FROM approvals WHERE approval_id = ?", (approval_id,)).fetchone()
        doc = json.loads(text)
        change(doc)
        conn.execute(
            "UPDATE approvals SET data = ?, status = ? WHERE approval_id = ?",
            (json.dumps(doc), doc["status"], approval_id),
        )


def named(problems: list[Problem], where: str, why: str) -> bool:
    return any(where in p.where and why in p.why for p in problems)


# ---- a finished operation revived by an edit of its row (issue 1) ---------------------------------


def stopped_op(tmp_path: Path, writes: Counter) -> tuple[Any, Path, list[Any]]:
    """With CALLBOUND_AUDIT_KEY, an operation ended STOPPED(MAX_TURNS) after one turn, and a script
    whose next response would propose a write."""
    db = tmp_path / "cb.db"
    script = [
        calls("r0", fc("c0", "get_order", {"order_id": "A"})),
        calls("r9", fc("c9", "set_note", {"order_id": "Z"})),
        final("r10"),
    ]
    h = make(
        script,
        [get_order_tool(), write_tool(writes)],
        store=open_store(f"sqlite:///{db}"),
        budgets=cb.Budgets(max_model_turns=1),
        audit_key=KEY,
    )
    out = h.runner.run_sync("x", tenant="acme", subject="user-1", operation_id="op_x")
    assert (out.state, out.reason) == (cb.State.STOPPED, "MAX_TURNS")
    return h, db, script


def revive(head: Doc) -> None:
    head.update(state="MODEL_REQUESTED", reason=None, escalation=None)
    head["spent"]["model_turns"] = 0


def test_a_finished_operation_revived_by_editing_its_row_never_runs(tmp_path: Path) -> None:
    writes = Counter()
    h, db, script = stopped_op(tmp_path, writes)
    edit_head(db, "op_x", revive)
    h2 = rebuild(h, [get_order_tool(), write_tool(writes)], script=script, audit_key=KEY)
    out = h2.runner.resume_sync("op_x")
    assert (out.state, out.reason) == (cb.State.FAILED, "INTEGRITY")
    assert out.escalation is not None
    assert "its state MODEL_REQUESTED differs from the audited one (STOPPED)" in out.escalation["detail"]
    assert writes.n == 0 and h2.model.requests == []
    # the chain now records a move out of a finished state, which verify names (D2)
    problems = verify_store(h2.store, "op_x", KEY)
    assert named(problems, "audit seq", "STOPPED -> FAILED, which the transition table does not allow")


def test_verify_names_a_revived_row(tmp_path: Path) -> None:
    h, db, _ = stopped_op(tmp_path, Counter())
    assert verify_store(h.store, "op_x", KEY) == []
    edit_head(db, "op_x", revive)
    problems = verify_store(h.store, "op_x", KEY)
    assert named(problems, "operation", "its state MODEL_REQUESTED differs from the audited one (STOPPED)")
    assert named(problems, "operation", "its reason None differs from the audited one ('MAX_TURNS')")
    assert named(problems, "operation", "its escalation record differs")


# ---- a paused operation whose row or journal was edited (resume check) ---------------------------


def refund_flow(tmp_path: Path) -> tuple[Any, cb.Outcome, Counter, Path]:
    """A read and a refund in one turn: the read runs, the refund waits for approval."""
    db = tmp_path / "cb.db"
    refunds = Counter()
    script = [
        calls("resp_1", fc("call_1", "get_order", {"order_id": "A1"}), fc("call_2", "refund", REFUND)),
        final("resp_2"),
    ]
    h = make(script, [get_order_tool(), refund_tool(refunds)], store=open_store(f"sqlite:///{db}"))
    out = h.runner.run_sync("Refund A1", tenant="acme", subject="user-1")
    assert out.state == cb.State.WAITING_APPROVAL
    return h, out, refunds, db


def resume_approved(h: Any, out: cb.Outcome, refunds: Counter) -> tuple[Any, cb.Outcome]:
    (p,) = out.pending_approvals
    h2 = rebuild(h, [get_order_tool(), refund_tool(refunds)])
    return h2, h2.runner.resume_sync(out.operation_id, [cb.Decision.approve(p.approval_id, "alice")])


def test_negative_control_an_untouched_paused_operation_resumes(tmp_path: Path) -> None:
    h, out, refunds, _ = refund_flow(tmp_path)
    _, out = resume_approved(h, out, refunds)
    assert out.state == cb.State.COMPLETED and refunds.n == 1
    assert verify_store(h.store) == []


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        # skips the approval: the model would be asked again with the refund unanswered
        (lambda d: d.update(state="MODEL_REQUESTED"), "its state MODEL_REQUESTED differs"),
        (lambda d: d.update(reason="COMPLETED_BY_OPS"), "its reason 'COMPLETED_BY_OPS' differs"),
        (lambda d: d.update(escalation={"reason": "NONE"}), "its escalation record differs"),
        (lambda d: d.update(text="Refunded."), "its text differs from the last model turn's"),
    ],
)
def test_an_edited_head_of_a_paused_operation_fails_closed(
    tmp_path: Path, edit: Callable[[Doc], None], why: str
) -> None:
    h, out, refunds, db = refund_flow(tmp_path)
    edit_head(db, out.operation_id, edit)
    h2, out = resume_approved(h, out, refunds)
    assert (out.state, out.reason) == (cb.State.FAILED, "INTEGRITY")
    assert out.escalation is not None and why in out.escalation["detail"]
    assert refunds.n == 0 and h2.model.requests == []


@pytest.mark.parametrize("change", ["edit", "delete"])
def test_an_edited_journal_transition_of_a_paused_operation_fails_closed(tmp_path: Path, change: str) -> None:
    """The journal's transitions are the Outcome's history: they are held to the chain's."""
    h, out, refunds, db = refund_flow(tmp_path)
    if change == "edit":
        edit_journal(db, out.operation_id, "transition", lambda d: d.update(cause="approved_by_ops"))
    else:
        delete_journal(db, out.operation_id, "transition", 1)
    h2, out = resume_approved(h, out, refunds)
    assert (out.state, out.reason) == (cb.State.FAILED, "INTEGRITY")
    assert out.escalation is not None and "differs from the audited transition" in out.escalation["detail"]
    assert refunds.n == 0 and h2.model.requests == []


def test_an_approval_expiry_moved_later_never_lets_a_late_decision_run(tmp_path: Path) -> None:
    """D17: a decision after expires_at never runs the call. The audited expiry holds, not the row's."""
    h, out, refunds, db = refund_flow(tmp_path)
    (p,) = out.pending_approvals
    edit_approval(db, p.approval_id, lambda d: d.update(expires_at="2099-01-01T00:00:00+00:00"))
    h.clock.advance(2 * 86400)  # past the real expiry
    h2, out = resume_approved(h, out, refunds)
    assert (out.state, out.reason) == (cb.State.FAILED, "INTEGRITY")
    assert (
        out.escalation is not None
        and "its expiry differs from the audited request" in out.escalation["detail"]
    )
    assert refunds.n == 0 and h2.model.requests == []


def test_an_approval_expiry_moved_earlier_only_withholds_the_call(tmp_path: Path) -> None:
    """The fail-safe direction: resume tells the model APPROVAL_EXPIRED (as it does when time passes);
    verify still names the edit."""
    h, out, refunds, db = refund_flow(tmp_path)
    (p,) = out.pending_approvals
    edit_approval(db, p.approval_id, lambda d: d.update(expires_at="2001-01-01T00:00:00+00:00"))
    _, out = resume_approved(h, out, refunds)
    assert out.state == cb.State.COMPLETED and refunds.n == 0
    assert named(verify_store(h.store), f"approval {p.approval_id}", "its expiry differs")


# ---- audit verify on finished operations (issue 2) -------------------------------------------------


def finished_ops(tmp_path: Path) -> tuple[Any, Path, str]:
    """A refund approved and completed, a STOPPED(NO_PROGRESS), an INCOMPLETE(MAX_TOKENS) and a
    REFUSED operation."""
    db = tmp_path / "cb.db"
    store: Any = open_store(f"sqlite:///{db}")
    refunds = Counter()
    script = [
        calls(
            "r1",
            fc("c1", "get_order", {"order_id": "A"}),
            fc("c2", "refund", {"order_id": "A", "amount": 5.0}),
        ),
        final("r2", "Refunded 5."),
    ]
    h = make(script, [get_order_tool(), refund_tool(refunds)], store=store)
    out = h.runner.run_sync("x", tenant="acme", subject="user-1", operation_id="op_refund")
    aid = out.pending_approvals[0].approval_id
    out = h.runner.resume_sync("op_refund", [cb.Decision.approve(aid, approver="boss")])
    assert out.state == cb.State.COMPLETED and refunds.n == 1
    repeats = [calls(f"r{i}", fc(f"c{i}", "get_order", {"order_id": "A"})) for i in range(5)]
    out = make(repeats, [get_order_tool()], store=store).runner.run_sync(
        "x", tenant="acme", subject="user-1", operation_id="op_stop"
    )
    assert (out.state, out.reason) == (cb.State.STOPPED, "NO_PROGRESS")
    cut = response("r1", [msg("partial")], status="incomplete", incomplete_reason="max_output_tokens")
    out = make([cut], [get_order_tool()], store=store).runner.run_sync(
        "x", tenant="acme", subject="user-1", operation_id="op_inc"
    )
    assert (out.state, out.reason, out.text) == (cb.State.INCOMPLETE, "MAX_TOKENS", "partial")
    out = make([response("r1", [refusal_msg("No.")])], [get_order_tool()], store=store).runner.run_sync(
        "x", tenant="acme", subject="user-1", operation_id="op_ref"
    )
    assert (out.state, out.refusal) == (cb.State.REFUSED, "No.")
    assert verify_store(store) == []
    return store, db, aid


def _approver(d: Doc) -> None:
    d["approver"] = "mallory"


def _denied(d: Doc) -> None:
    d["status"] = "denied"


TAMPERED: dict[str, tuple[Callable[[Path, str], None], str, str, str]] = {
    "state INCOMPLETE -> COMPLETED": (
        lambda db, _: edit_head(db, "op_inc", lambda d: d.update(state="COMPLETED", reason=None)),
        "op_inc",
        "operation",
        "its state COMPLETED differs from the audited one (INCOMPLETE)",
    ),
    "reason": (
        lambda db, _: edit_head(db, "op_stop", lambda d: d.update(reason="MAX_TURNS")),
        "op_stop",
        "operation",
        "its reason 'MAX_TURNS' differs from the audited one ('NO_PROGRESS')",
    ),
    "escalation edited": (
        lambda db, _: edit_head(db, "op_stop", lambda d: d["escalation"].update(detail="all fine")),
        "op_stop",
        "operation",
        "its escalation record differs from the audited one",
    ),
    "escalation removed": (
        lambda db, _: edit_head(db, "op_stop", lambda d: d.update(escalation=None)),
        "op_stop",
        "operation",
        "its escalation record differs from the audited one",
    ),
    "text of an INCOMPLETE operation": (
        lambda db, _: edit_head(db, "op_inc", lambda d: d.update(text="All done, fully.")),
        "op_inc",
        "operation",
        "its text differs from the last model turn's",
    ),
    "refusal": (
        lambda db, _: edit_head(db, "op_ref", lambda d: d.update(refusal=None)),
        "op_ref",
        "operation",
        "its refusal differs from the last model turn's",
    ),
    "journal transition edited": (
        lambda db, _: edit_journal(db, "op_refund", "transition", lambda d: d.update(state="STOPPED")),
        "op_refund",
        "transition",
        "differs from the audited transition",
    ),
    "journal transition deleted": (
        lambda db, _: delete_journal(db, "op_refund", "transition", 2),
        "op_refund",
        "transition 2",
        "differs from the audited transition",
    ),
    "journal creation deleted": (
        lambda db, _: delete_journal(db, "op_refund", "transition", 0),
        "op_refund",
        "transition 0",
        "does not start with the operation's creation",
    ),
    "approver": (
        lambda db, aid: edit_approval(db, aid, _approver),
        "op_refund",
        "approval",
        "its approver differs from the audited decision",
    ),
    "approval status": (
        lambda db, aid: edit_approval(db, aid, _denied),
        "op_refund",
        "approval",
        "its status denied differs from the audited decision (approved)",
    ),
    "approval argument digest": (
        lambda db, aid: edit_approval(db, aid, lambda d: d.update(argument_digest="0" * 64)),
        "op_refund",
        "approval",
        "its call, tool or argument digest differs from the audited request",
    ),
    "approval deleted": (
        lambda db, aid: _sql(db, "DELETE FROM approvals WHERE approval_id = ?", aid),
        "op_refund",
        "approval",
        "audited but missing from the store",
    ),
    "approval added": (
        lambda db, aid: _sql(
            db,
            "INSERT INTO approvals (approval_id, operation_id, tenant, status, created_us, expires_us, data) "
            "SELECT 'apr_forged', operation_id, tenant, status, created_us, expires_us, "
            "replace(data, approval_id, 'apr_forged') FROM approvals WHERE approval_id = ?",
            aid,
        ),
        "op_refund",
        "approval apr_forged",
        "in the store but not in the audit chain",
    ),
}


def _sql(db: Path, sql: str, *args: Any) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(sql, args)


@pytest.mark.parametrize("name", list(TAMPERED))
def test_verify_names_an_edit_the_chain_vouches_for(tmp_path: Path, name: str) -> None:
    store, db, aid = finished_ops(tmp_path)
    edit, op, where, why = TAMPERED[name]
    edit(db, aid)
    problems = verify_store(store)
    assert named(problems, where, why), problems
    assert {p.operation_id for p in problems} == {op}


def test_usage_and_spent_counters_are_not_in_the_chain(tmp_path: Path) -> None:
    """Documented in docs/durability.md: the chain does not vouch for them, and verify does not
    pretend to."""
    store, db, _ = finished_ops(tmp_path)
    edit_head(db, "op_refund", lambda d: d["usage"].update(input_tokens=1))
    edit_head(db, "op_refund", lambda d: d["spent"].update(tool_calls=0))
    assert verify_store(store) == []


# ---- a provider that repeats its response and call ids (issue 3) ----------------------------------


def chat(rid: str, tool_calls: list[tuple[str, str, Doc]] | None = None, text: str | None = None) -> Doc:
    message: Doc = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for cid, n, a in tool_calls
        ]
    return {
        "id": rid,
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }


def chat_runner(script: list[Any], tools: list[cb.ToolSpec], store: Any, model: Any = None) -> cb.Runner:
    return cb.Runner(
        model=model or ScriptedModel("openai-chat", script),
        registry=cb.Registry(tools),
        store=store,
        clock=FakeClock(),
        settings={"model": "m"},
        ids=SequentialIds(),
    )


SAME_IDS = [
    chat("chatcmpl-1", [("call_0", "get_order", {"order_id": "A"})]),
    chat("chatcmpl-1", [("call_0", "set_note", {"order_id": "B"})]),
    chat("chatcmpl-1", text="done"),
]


def same_ids_op(tmp_path: Path) -> tuple[Any, Path, str, Counter]:
    db = tmp_path / "cb.db"
    store: Any = open_store(f"sqlite:///{db}")
    notes = Counter()
    out = chat_runner(SAME_IDS, [get_order_tool(), write_tool(notes)], store).run_sync(
        "hi", tenant="t", subject="s"
    )
    assert out.state == cb.State.COMPLETED and out.text == "done" and notes.n == 1
    return store, db, out.operation_id, notes


def test_repeated_response_and_call_ids_verify_clean(tmp_path: Path) -> None:
    store, _, _, _ = same_ids_op(tmp_path)
    assert verify_store(store) == []


def test_tampering_in_an_operation_with_repeated_ids_is_still_found(tmp_path: Path) -> None:
    store, db, op, _ = same_ids_op(tmp_path)

    def second_result(doc: Doc) -> None:
        doc["envelopes"][0]["model_result"]["data"]["noted"] = "Z"

    edit_journal(db, op, "results", second_result, nth=1)
    assert named(verify_store(store), "result call_0 (response chatcmpl-1)", "result_sha256")

    def first_arguments(doc: Doc) -> None:
        doc["turn"]["calls"][0]["arguments"] = {"order_id": "Q"}

    edit_journal(db, op, "turn", first_arguments, nth=0)
    assert named(verify_store(store), "model turn chatcmpl-1", "differ from the audited plan")


class _DiesOnRequest:
    """A model client whose process dies on request ``at``: the operation stays as last committed."""

    def __init__(self, inner: Any, at: int) -> None:
        self.inner, self.at, self.n = inner, at, 0

    @property
    def adapter(self) -> Any:
        return self.inner.adapter

    async def complete(self, body: Doc, **kw: Any) -> Any:
        self.n += 1
        if self.n == self.at:
            raise KeyboardInterrupt
        return await self.inner.complete(body, **kw)


def test_an_operation_with_repeated_ids_resumes_after_a_crash(tmp_path: Path) -> None:
    """Turn 1 proposes a call, turn 2 is a cut stream under the same id, and the process dies on the
    retry: the turn the next request continues from is turn 1, not the last turn of that id."""
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "par"}, "finish_reason": None}],
    }
    script: list[Any] = [SAME_IDS[0], [chunk, StreamCut()], chat("chatcmpl-1", text="done")]
    store: Any = open_store(f"sqlite:///{tmp_path / 'cb.db'}")
    first = chat_runner(script, [get_order_tool()], store)
    first.model = _DiesOnRequest(first.model, at=3)
    with pytest.raises(KeyboardInterrupt):
        first.run_sync("hi", tenant="t", subject="s")
    (op,) = [o["operation_id"] for o in store.list_operations()]
    out = chat_runner(script, [get_order_tool()], store).resume_sync(op)
    assert out.state == cb.State.COMPLETED and out.text == "done", out.escalation
    assert verify_store(store) == []


# ---- operations saved before the chain had digests ------------------------------------------------


def test_an_operation_saved_before_digests_still_verifies_and_resumes(tmp_path: Path) -> None:
    """Without the ``digests: 1`` marker only the chain itself and the bindings are checked, as before."""
    h, out, refunds, db = refund_flow(tmp_path)
    op = out.operation_id
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT seq, kind, at, data FROM audit WHERE operation_id = ? ORDER BY seq", (op,)
        ).fetchall()
        prev = GENESIS
        for seq, kind, at, text in rows:
            data = json.loads(text)
            for item in data.get("events", []):
                if item["kind"] == "created":
                    for name in (
                        "digests",
                        "offered",
                        "instructions_sha256",
                        "budgets_sha256",
                        "settings_sha256",
                    ):
                        item["data"].pop(name, None)
            link = link_hash(prev, op, seq, kind, at, data, None)
            conn.execute(
                "UPDATE audit SET data = ?, prev_hash = ?, hash = ? WHERE operation_id = ? AND seq = ?",
                (json.dumps(data), prev, link, op, seq),
            )
            prev = link
        (head_text,) = conn.execute("SELECT head FROM operations WHERE operation_id = ?", (op,)).fetchone()
        head = json.loads(head_text)
        head["audit_hash"] = prev
        conn.execute("UPDATE operations SET head = ? WHERE operation_id = ?", (json.dumps(head), op))
    assert verify_store(h.store, op) == []
    _, out = resume_approved(h, out, refunds)
    assert out.state == cb.State.COMPLETED and refunds.n == 1
    assert verify_store(h.store, op) == []


# ---- an operation a newer callbound wrote (issue 4) -------------------------------------------------


def test_an_operation_of_a_newer_snapshot_version_is_unreadable_not_tampered(tmp_path: Path) -> None:
    h, out, _, db = refund_flow(tmp_path)
    edit_head(db, out.operation_id, lambda d: d.update(snapshot_version=d["snapshot_version"] + 1))
    problems = verify_store(h.store)
    assert len(problems) == 1 and problems[0].unreadable
    assert "newer callbound" in problems[0].why
