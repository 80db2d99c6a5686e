"""One operation's working state in the runtime, and how it is saved and rebuilt.

The head row holds what changes every commit (state, counters, the turn under work); the journal
holds what only grows (transitions, turns, transcript items, results). ``Operation.from_stored``
folds the journal back into the in-memory state, so a fresh process resumes exactly where the last
commit left off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..core.approvals import PendingApproval
from ..core.audit import AuditEvent, items_digest, next_event
from ..core.errors import UsageError
from ..core.guards import Budgets, Spent
from ..core.idempotency import LedgerEntry
from ..core.machine import Machine
from ..core.snapshot import SNAPSHOT_VERSION, migrate_head, turn_from_dict, turn_to_dict
from ..core.states import State
from ..core.types import ModelTurn, Transition, Usage
from ..stores.base import Commit, JournalRow, StoredOperation
from ..stores.rows import FAILURES, unreadable

# Call statuses (D2): outside the transition table, one per call of the current turn.
PLANNED = "planned"
WAITING = "waiting"
RUNNING = "running"
DONE = "done"
UNKNOWN = "unknown"


@dataclass(slots=True)
class CallRecord:
    response_id: str
    call_id: str
    tool: str
    status: str
    arguments_json: str | None = None
    idempotency_key: str | None = None
    approval_id: str | None = None
    envelope: dict[str, Any] | None = None
    effect: str = "none"
    producer: str = "callbound"
    no_progress: bool = False  # refused as a repeat (D13)
    identical_key: str | None = None  # counted as a successful run of this (tool, args)
    # Fix: the handler, schema version and policy revision a result was sealed under. Results saved
    # before WAITING_APPROVAL were re-verified against the resuming runner's registry and policy, so a
    # new policy revision or tool version (which must make the *waiting* call APPROVAL_STALE) turned the
    # turn's already-run calls into FAILED(INTEGRITY). None for records saved before this field existed.
    handler: str | None = None
    schema_version: str | None = None
    policy_revision: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "response_id": self.response_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "status": self.status,
            "arguments_json": self.arguments_json,
            "idempotency_key": self.idempotency_key,
            "approval_id": self.approval_id,
            "envelope": self.envelope,
            "effect": self.effect,
            "producer": self.producer,
            "no_progress": self.no_progress,
            "identical_key": self.identical_key,
            "handler": self.handler,
            "schema_version": self.schema_version,
            "policy_revision": self.policy_revision,
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> CallRecord:
        return CallRecord(**d)

    def restore(self, saved: CallRecord) -> None:
        """Take back every field of ``saved`` (a ``copy.copy`` of this record): see ``Operation.rewind``."""
        for name in CallRecord.__slots__:
            setattr(self, name, getattr(saved, name))


@dataclass(slots=True)
class CurrentTurn:
    turn: ModelTurn
    records: list[CallRecord]
    # The turn is frozen: its plain form is made once and shared by the journal row and every head.
    turn_dict: dict[str, Any] | None = None

    def plain_turn(self) -> dict[str, Any]:
        if self.turn_dict is None:
            self.turn_dict = turn_to_dict(self.turn)
        return self.turn_dict

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.plain_turn(), "records": [r.to_dict() for r in self.records]}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> CurrentTurn:
        return CurrentTurn(
            turn_from_dict(d["turn"]), [CallRecord.from_dict(r) for r in d["records"]], d["turn"]
        )


@dataclass(slots=True)
class Operation:
    operation_id: str
    tenant: str
    subject: str
    api: str
    created_at: datetime
    budgets: Budgets
    settings: dict[str, Any]
    instructions: str | None
    offered: list[str]
    input: str | None
    app: dict[str, Any] | None = (
        None  # {"ref": "module:factory", "args": {...}} to rebuild the runner elsewhere (D21)
    )
    machine: Machine = field(default_factory=Machine)
    spent: Spent = field(default_factory=Spent)
    usage: Usage = field(default_factory=Usage)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    new_items_start: int = 0
    last_turn: ModelTurn | None = None
    current: CurrentTurn | None = None
    model_requests: int = 0
    retries: int = 0
    retry_after_s: float | None = None
    reason: str | None = None
    text: str | None = None
    refusal: str | None = None
    escalation: dict[str, Any] | None = None
    fence: int | None = None
    commits: int = 0
    audit_tail: AuditEvent | None = None
    # what the next commit writes
    pending_journal: list[JournalRow] = field(default_factory=list)
    pending_ledger: list[LedgerEntry] = field(default_factory=list)
    pending_approvals: list[PendingApproval] = field(default_factory=list)
    pending_audit: list[AuditEvent] = field(default_factory=list)
    # Audit entries made since the last commit; take_commit chains them as ONE event (D20), so the
    # chain grows by one link per commit, not per transition.
    pending_audit_items: list[dict[str, Any]] = field(default_factory=list)
    # Records sealed since the last commit whose results are not yet audited as sent: a commit before
    # C2 audits their bindings ("sealed"), so a result saved across a pause is vouched for (D20).
    unaudited_seals: list[CallRecord] = field(default_factory=list)
    audited_items: int = 0  # transcript items the chain vouches for (all of them after each commit)
    pending_plan: list[Any] | None = None  # [response id, digest of its planned calls] for the next link
    audit_key: bytes | None = None
    _budgets_cache: tuple[Budgets, dict[str, Any]] | None = None
    # ISO texts the head repeats on every commit: created_at never changes, and the last transition's
    # time was already formatted for its journal row.
    _created_iso: str | None = None
    _updated_iso: str | None = None
    created: bool = False

    @property
    def state(self) -> State:
        return self.machine.state

    def move(
        self, target: State, at: datetime, cause: str, audit_key: bytes | None, **details: Any
    ) -> Transition:
        t = self.machine.move(target, at, cause, **details)
        row = t.to_dict()
        self._updated_iso = row["at"]
        self.pending_journal.append(JournalRow("transition", row))
        self.audit(
            at, "transition", {"state": target._value_, "cause": cause, **details}, audit_key, row["at"]
        )
        return t

    def audit(
        self, at: datetime, kind: str, data: dict[str, Any], key: bytes | None, at_iso: str | None = None
    ) -> None:
        self.pending_audit_items.append(
            {"kind": kind, "at": at_iso if at_iso is not None else at.isoformat(), "data": data}
        )
        self.audit_key = key

    def _seal_audit(self) -> None:
        """Chain what this commit records as one link: its entries, and (D20) the plan of the turn it
        holds and the digest of the transcript items it appends. Those two sit on the link itself
        rather than as entries of their own: they are on every round trip, and an entry costs two
        dicts more for every commit an operation keeps in memory."""
        if (
            not self.pending_audit_items
            and self.pending_plan is None
            and len(self.transcript) == self.audited_items
        ):
            return
        at = self._latest_iso()
        items = self.pending_audit_items
        self.pending_audit_items = []
        data: dict[str, Any] = {"events": items}
        if self.pending_plan is not None:
            data["plan"] = self.pending_plan
            self.pending_plan = None
        if len(self.transcript) > self.audited_items:
            start = self.audited_items
            added = self.transcript[start:]
            data["transcript"] = [start, len(added), items_digest(added)]
            self.audited_items = len(self.transcript)
        ev = next_event(self.audit_tail, self.operation_id, "commit", at, data, self.audit_key)
        self.audit_tail = ev
        self.pending_audit.append(ev)

    def append_items(self, items: list[dict[str, Any]]) -> None:
        if items:
            self.transcript.extend(items)
            self.pending_journal.append(JournalRow("items", {"items": items}))

    def _latest_iso(self) -> str:
        """When the latest thing this commit records happened (entries that follow from it, such as
        transcript items, carry its time rather than reading the clock again)."""
        if self.pending_audit_items:
            at: str = self.pending_audit_items[-1]["at"]
            return at
        return self._updated_at_iso() or self._created_at_iso()

    def _audit_seals(self) -> None:
        for rec in self.unaudited_seals:
            env = rec.envelope
            if env is not None:
                data = {
                    "response_id": rec.response_id,
                    "call_id": rec.call_id,
                    "call_binding_sha256": env["protected_audit"].get("call_binding_sha256"),
                }
                self.pending_audit_items.append({"kind": "sealed", "at": self._latest_iso(), "data": data})
        self.unaudited_seals = []

    def head(self) -> dict[str, Any]:
        return {
            "snapshot_version": SNAPSHOT_VERSION,
            "operation_id": self.operation_id,
            "tenant": self.tenant,
            "subject": self.subject,
            "api": self.api,
            "created_at": self._created_at_iso(),
            "state": self.machine.state._value_,
            "reason": self.reason,
            "text": self.text,
            "refusal": self.refusal,
            "input": self.input,
            "app": self.app,
            "budgets": self._budgets_dict(),
            "settings": self.settings,
            "instructions": self.instructions,
            "offered": self.offered,
            "spent": self.spent.to_dict(),
            "usage": self.usage.to_dict(),
            "new_items_start": self.new_items_start,
            "current": None if self.current is None else self.current.to_dict(),
            "model_requests": self.model_requests,
            "retries": self.retries,
            "retry_after_s": self.retry_after_s,
            "escalation": self.escalation,
            "fence": self.fence,
            "commits": self.commits,
            "updated_at": self._updated_at_iso(),
            # The chain's last link as of this commit (written in the same transaction as it), so
            # `audit verify` sees events deleted from the end of the chain.
            "audit_seq": None if self.audit_tail is None else self.audit_tail.seq,
            "audit_hash": None if self.audit_tail is None else self.audit_tail.hash,
        }

    def _created_at_iso(self) -> str:
        if self._created_iso is None:
            self._created_iso = self.created_at.isoformat()
        return self._created_iso

    def _updated_at_iso(self) -> str | None:
        if self._updated_iso is None and self.machine.history:
            self._updated_iso = self.machine.history[-1].at.isoformat()
        return self._updated_iso

    def _budgets_dict(self) -> dict[str, Any]:
        # Budgets are frozen: serialise once, not on every commit.
        cached = self._budgets_cache
        if cached is None or cached[0] is not self.budgets:
            cached = (self.budgets, self.budgets.to_dict())
            self._budgets_cache = cached
        return cached[1]

    def mark(self) -> tuple[Any, ...]:
        """What queueing and ``take_commit`` consume, for ``rewind`` when the store refuses the commit
        whole (``IntentTaken``): the answered turn and its usage stay in memory, to go out with the next
        commit, instead of a reload back to MODEL_REQUESTED that re-asks the model (D12, D27; review 14)."""
        return (
            list(self.pending_journal),
            list(self.pending_ledger),
            list(self.pending_approvals),
            list(self.pending_audit),
            list(self.pending_audit_items),
            list(self.unaudited_seals),
            self.pending_plan,
            self.audit_tail,
            self.audited_items,
            self.created,
            self.commits,
        )

    def rewind(self, mark: tuple[Any, ...]) -> None:
        """Back to ``mark``: nothing queued or chained since (a refused commit's audit link included)."""
        (
            self.pending_journal,
            self.pending_ledger,
            self.pending_approvals,
            self.pending_audit,
            self.pending_audit_items,
            self.unaudited_seals,
            self.pending_plan,
            self.audit_tail,
            self.audited_items,
            self.created,
            self.commits,
        ) = mark

    def take_commit(self) -> Commit:
        if self.unaudited_seals:
            self._audit_seals()
        self._seal_audit()
        c = Commit(
            operation_id=self.operation_id,
            head=self.head(),
            journal=self.pending_journal,
            ledger=self.pending_ledger,
            approvals=self.pending_approvals,
            audit=self.pending_audit,
            fence=self.fence,
            create=not self.created,
        )
        self.pending_journal = []
        self.pending_ledger = []
        self.pending_approvals = []
        self.pending_audit = []
        self.created = True
        self.commits += 1
        c.head["commits"] = self.commits
        return c

    @staticmethod
    def from_stored(stored: StoredOperation, audit_tail: AuditEvent | None) -> Operation:
        """The operation as its last commit left it. A head or journal row that does not read as one (a
        field missing or of the wrong type: edited by hand, or damaged) is ``UnreadableRow``, a
        ``StoreError`` naming the row, as the stores name a row that is not JSON (review round 14)."""
        h = migrate_head(dict(stored.head))
        try:
            op = Operation(
                operation_id=h["operation_id"],
                tenant=h["tenant"],
                subject=h["subject"],
                api=h["api"],
                created_at=datetime.fromisoformat(h["created_at"]),
                budgets=Budgets.from_dict(h["budgets"]),
                settings=h["settings"],
                instructions=h["instructions"],
                offered=list(h["offered"]),
                input=h.get("input"),
                app=h.get("app"),
            )
            op.spent = Spent.from_dict(h["spent"])
            op.usage = Usage.from_dict(h["usage"])
            op.new_items_start = h["new_items_start"]
            op.current = None if h["current"] is None else CurrentTurn.from_dict(h["current"])
            op.model_requests = h["model_requests"]
            op.retries = h["retries"]
            op.retry_after_s = h.get("retry_after_s")
            op.reason = h["reason"]
            op.text = h["text"]
            op.refusal = h.get("refusal")
            op.escalation = h["escalation"]
            op.fence = h.get("fence")
            op.commits = h.get("commits", 0)
            state = State(h["state"])
        except (*FAILURES, UsageError) as exc:  # UsageError: budgets that do not read as Budgets
            op_id = h.get("operation_id")
            raise unreadable(
                exc, "operation row", op_id if isinstance(op_id, str) else None, "an operation"
            ) from exc
        op.created = True
        op.audit_tail = audit_tail
        history: list[Transition] = []
        pos = 0
        try:
            for pos, row in enumerate(stored.journal):  # noqa: B007 - pos names the row that fails
                if row.kind == "transition":
                    d = row.data
                    history.append(
                        Transition(
                            d["state"], datetime.fromisoformat(d["at"]), d["cause"], d.get("details", {})
                        )
                    )
                elif row.kind == "items":
                    op.transcript.extend(row.data["items"])
                elif row.kind == "turn":
                    turn = turn_from_dict(row.data["turn"])
                    if turn.finish.value in ("TOOL_PROPOSALS", "CONTINUE"):
                        op.last_turn = turn
                elif row.kind == "results":
                    for key in row.data.get("identical", []):
                        op.spent.identical[key] = op.spent.identical.get(key, 0) + 1
                    op.spent.seen_results.update(row.data.get("result_hashes", []))
        except FAILURES as exc:
            raise unreadable(exc, f"journal pos {pos}", op.operation_id, "a journal row") from exc
        # Fix: runs of the turn under work (a mixed turn's reads, saved before WAITING_APPROVAL) are
        # not in a "results" row yet, so a new process forgot them and let the model repeat an
        # identical call beyond max_identical_calls (D13). Count them from the saved call records.
        if op.current is not None:
            for rec in op.current.records:
                if rec.identical_key:
                    op.spent.identical[rec.identical_key] = op.spent.identical.get(rec.identical_key, 0) + 1
        op.machine = Machine(state, history)
        op.audited_items = len(op.transcript)
        return op
