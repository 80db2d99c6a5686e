"""The async Runner: drives one operation through the transition table.

One turn: model request → adapter → machine → dispatch plan → tools → binding → store. Every
transition is committed before the effect it announces, in two commits per tool round trip (D18):
C1 (turn, plan, ledger STARTED, EXECUTING) before any handler runs; C2 (envelopes, ledger outcomes,
audit, MODEL_REQUESTED) before the next model request.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any, Literal

from ..core.approvals import DEFAULT_APPROVAL_TTL, Decision, PendingApproval, record_decision, revalidate
from ..core.binding import CorrelationTable, verify_results
from ..core.canonical import canonical_json, canonical_sha256, sha256_hex
from ..core.dispatch import (
    APPROVAL_EXPIRED,
    Execute,
    NeedsApproval,
    PolicyAuthorize,
    Reject,
    TrustedOperation,
    plan_call,
    plan_turn,
)
from ..core.errors import (
    BindingMismatch,
    CanonicalizationError,
    CorrelationError,
    StoreError,
    UnknownApproval,
    UsageError,
)
from ..core.guards import (
    Budgets,
    Stop,
    check_before_model_request,
    check_running,
    check_tool_calls,
    record_turn_results,
)
from ..core.ids import IdSource, RandomIds
from ..core.machine import classify_turn
from ..core.model import ModelClient, RequestMeta
from ..core.registry import Registry
from ..core.snapshot import envelope_from_dict, turn_to_dict
from ..core.states import TERMINAL, State
from ..core.types import ModelTurn, Progress, ResultEnvelope, ToolCall, Transition, Usage, error_result
from ..stores.base import JournalRow, Store
from ..stores.memory import MemoryStore
from .clock import Clock, SystemClock
from .crash import crash_point
from .execute import run_turn, seal, trusted_for
from .operation import PLANNED, UNKNOWN, WAITING, CallRecord, CurrentTurn, Operation
from .retry import backoff_delay
from .tools import ToolExecutor

log = logging.getLogger("callbound.runtime")

SETTINGS_KEYS = frozenset(
    {"model", "tool_choice", "temperature", "max_output_tokens", "stream", "continuation", "store", "extra"}
)


class ApproverNotAllowed(UsageError):
    """This approver may not decide this approval (tenant, self-approval or the policy's hook)."""


@dataclass(frozen=True)
class Policy:
    """Runner-level rules. ``revision`` names the policy; approvals made under another revision are
    stale (D17)."""

    revision: str = "1"
    approval_ttl: timedelta = DEFAULT_APPROVAL_TTL
    allow_self_approval: bool = False
    authorize: PolicyAuthorize | None = None
    approver_allowed: Callable[[str, PendingApproval], bool] | None = None
    on_approval_expired: Literal["tell_model", "stop"] = "tell_model"


@dataclass(frozen=True)
class Price:
    """Price per million tokens, as Decimal."""

    input_per_mtok: Decimal
    output_per_mtok: Decimal


@dataclass(frozen=True)
class Outcome:
    state: State
    reason: str | None
    operation_id: str
    text: str | None
    pending_approvals: tuple[PendingApproval, ...]
    usage: Usage
    history: tuple[Transition, ...]
    refusal: str | None = None
    escalation: dict[str, Any] | None = None
    spent: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "reason": self.reason,
            "operation_id": self.operation_id,
            "text": self.text,
            "refusal": self.refusal,
            "pending_approvals": [a.to_dict() for a in self.pending_approvals],
            "usage": self.usage.to_dict(),
            "history": [t.to_dict() for t in self.history],
            "escalation": self.escalation,
            "spent": self.spent,
        }


class Runner:
    """Runs tool-calling operations. ``run``/``resume`` return an ``Outcome`` for everything the
    model, provider, tools or stored data did; only ``UsageError`` and ``StoreError`` escape (D4)."""

    def __init__(
        self,
        model: ModelClient,
        registry: Registry,
        budgets: Budgets | None = None,
        store: Store | None = None,
        clock: Clock | None = None,
        policy: Policy | None = None,
        instructions: str | None = None,
        settings: dict[str, Any] | None = None,
        *,
        messages: Sequence[dict[str, Any]] = (),
        ids: IdSource | None = None,
        prices: dict[str, Price] | None = None,
        on_progress: Callable[[str, Progress], None] | None = None,
        on_transition: Callable[[str, Transition], None] | None = None,
        audit_key: bytes | None = None,
        executor: ToolExecutor | None = None,
        app: dict[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.adapter = model.adapter
        self.registry = registry
        self.budgets = budgets or Budgets()
        self.store: Store = store if store is not None else MemoryStore()
        self.clock: Clock = clock or SystemClock()
        self.policy = policy or Policy()
        self.instructions = instructions
        self.messages = list(messages)
        self.settings = dict(settings or {})
        unknown = set(self.settings) - SETTINGS_KEYS
        if unknown:
            raise UsageError(f"unknown model settings {sorted(unknown)}; allowed: {sorted(SETTINGS_KEYS)}")
        self.ids: IdSource = ids or RandomIds()
        self.prices = dict(prices or {})
        if self.budgets.max_cost is not None and self._price() is None:
            raise UsageError(
                "Budgets.max_cost is set but no price is configured for model "
                f"{self.settings.get('model')!r}; pass prices={{model: Price(...)}} (D12)"
            )
        self.on_progress = on_progress
        self.on_transition = on_transition
        env_key = os.environ.get("CALLBOUND_AUDIT_KEY")
        self.audit_key = audit_key if audit_key is not None else (env_key.encode() if env_key else None)
        self.executor = executor or ToolExecutor()
        self.app = app  # recorded with each operation so `callbound resume` can rebuild this runner
        self._segments: dict[str, float] = {}
        self._turn_plain: tuple[ModelTurn, dict[str, Any]] | None = (
            None  # operation id -> monotonic start of the active segment
        )
        # Rendered once: raises UnsupportedSchema now rather than on the first live call (D9).
        self.tools = self.adapter.render_tools(registry.declarations())

    # ---- public API ------------------------------------------------------------------------------

    async def run(
        self, input: str | None, tenant: str, subject: str, operation_id: str | None = None
    ) -> Outcome:
        op = self._new_operation(input, tenant, subject, operation_id)
        await self._flush(op)
        return await self._drive(op)

    def submit(self, input: str | None, tenant: str, subject: str, operation_id: str | None = None) -> str:
        """Queue an operation for workers without running it (D21)."""
        op = self._new_operation(input, tenant, subject, operation_id)
        self._commit_sync(op)
        return op.operation_id

    async def resume(self, operation_id: str, decisions: Sequence[Decision] = ()) -> Outcome:
        op = self._load(operation_id)
        if op.state in TERMINAL:
            raise UsageError(
                f"operation {operation_id} is {op.state.value}; a finished operation cannot be resumed"
            )
        for decision in decisions:
            self.decide(decision, tenant=op.tenant, _op=op)
        return await self._drive(op)

    def run_sync(
        self, input: str | None, tenant: str, subject: str, operation_id: str | None = None
    ) -> Outcome:
        return _run_sync(self.run(input, tenant, subject, operation_id))

    def resume_sync(self, operation_id: str, decisions: Sequence[Decision] = ()) -> Outcome:
        return _run_sync(self.resume(operation_id, decisions))

    def decide(self, decision: Decision, *, tenant: str, _op: Operation | None = None) -> PendingApproval:
        """Record one decision (single use, D17) without resuming. Works from any process."""
        approval = self.store.get_approval(decision.approval_id)
        if (
            approval is None
            or approval.tenant != tenant
            or (_op is not None and approval.operation_id != _op.operation_id)
        ):
            raise UnknownApproval(f"no approval {decision.approval_id!r} for tenant {tenant!r}")
        self.check_approver(decision.approver, approval)
        now = self.clock.now()
        decided, changed = record_decision(approval, decision, now)
        if changed and not self.store.decide_approval(decided):
            current = self.store.get_approval(decision.approval_id)
            assert current is not None
            decided, _ = record_decision(current, decision, now)  # same verdict → original; else raises
        return decided

    def check_approver(self, approver: str, approval: PendingApproval) -> None:
        if approver == approval.subject and not self.policy.allow_self_approval:
            raise ApproverNotAllowed(
                f"{approver!r} proposed this operation and may not approve its own call (Policy.allow_self_approval)"
            )
        hook = self.policy.approver_allowed
        if hook is not None:
            try:
                allowed = bool(hook(approver, approval))
            except Exception:
                allowed = False
            if not allowed:
                raise ApproverNotAllowed(f"{approver!r} may not decide approval {approval.approval_id}")

    def cancel(self, operation_id: str, reason: str = "cancelled by a user") -> Outcome:
        """End an operation STOPPED(CANCELLED). Refused while a write handler is running, because its
        effect would be left unknown."""
        op = self._load(operation_id)
        if op.state in TERMINAL:
            raise UsageError(f"operation {operation_id} is already {op.state.value}")
        if op.current is not None:
            for rec in op.current.records:
                spec = self.registry.get(rec.tool)
                if rec.status == "running" and (spec is None or spec.is_write):
                    raise UsageError(
                        f"operation {operation_id} is running write call {rec.call_id} ({rec.tool}); "
                        "cancel it after the call finishes"
                    )
        self._stop(op, "CANCELLED", reason)
        # Take the fencing token forward: a worker still driving this operation fails its next write
        # with StaleLease instead of overwriting the cancellation (D21).
        commit = op.take_commit()
        commit.fence = op.fence
        op.fence = (op.fence or 0) + 1
        commit.head["fence"] = op.fence
        self.store.commit(commit)
        return self._outcome(op)

    def approve(
        self, approval_id: str, approver: str, tenant: str, reason: str | None = None
    ) -> PendingApproval:
        """Record an approval from any process (single use, D17); ``resume`` runs the call."""
        return self.decide(Decision.approve(approval_id, approver, reason), tenant=tenant)

    def deny(
        self, approval_id: str, approver: str, tenant: str, reason: str | None = None
    ) -> PendingApproval:
        """Record a denial; on resume the model receives DENIED."""
        return self.decide(Decision.deny(approval_id, approver, reason), tenant=tenant)

    def outcome(self, operation_id: str) -> Outcome:
        return self._outcome(self._load(operation_id))

    # ---- operation lifecycle ---------------------------------------------------------------------

    def _new_operation(
        self, input: str | None, tenant: str, subject: str, operation_id: str | None
    ) -> Operation:
        if not tenant or not subject:
            raise UsageError("run() needs a tenant and a subject")
        now = self.clock.now()
        op = Operation(
            operation_id=operation_id or self.ids.new_id("op"),
            tenant=tenant,
            subject=subject,
            api=self.adapter.api,
            created_at=now,
            budgets=self.budgets,
            settings=self.settings,
            instructions=self.instructions,
            offered=self.registry.names(),
            input=input,
            app=self.app,
        )
        op.machine.start(now)
        op.pending_journal.append(JournalRow("transition", op.machine.history[0].to_dict()))
        op.audit(
            now,
            "created",
            {"tenant": tenant, "subject": subject, "api": op.api, "input_sha256": sha256_hex(input or "")},
            self.audit_key,
        )
        op.append_items(self.adapter.initial_items(input, self.messages))
        return op

    def _load(self, operation_id: str) -> Operation:
        stored = self.store.load_operation(operation_id)
        if stored is None:
            raise UsageError(f"no operation {operation_id!r} in this store")
        events = self.store.audit_events(operation_id)
        return Operation.from_stored(stored, events[-1] if events else None)

    def _commit_sync(self, op: Operation) -> None:
        self.store.commit(op.take_commit())

    async def _flush(self, op: Operation) -> None:
        self._tick(op)
        self.store.commit(op.take_commit())

    def _tick(self, op: Operation) -> None:
        """Add active time since the last tick (D14). Time outside ``_drive`` (waiting for approval,
        no process running) is not active time."""
        now = self.clock.monotonic()
        started = self._segments.get(op.operation_id)
        if started is not None:
            op.spent.active_s += max(0.0, now - started)
            self._segments[op.operation_id] = now

    def _move(self, op: Operation, target: State, cause: str, **details: Any) -> None:
        t = op.move(target, self.clock.now(), cause, self.audit_key, **details)
        if log.isEnabledFor(logging.INFO):
            log.info(
                "transition %s -> %s (%s)",
                op.operation_id,
                target.value,
                cause,
                extra={
                    "operation_id": op.operation_id,
                    "state": target.value,
                    "cause": cause,
                    "tenant": op.tenant,
                    **{
                        k: v
                        for k, v in details.items()
                        if k in ("response_id", "call_ids", "approval_ids", "idempotency_keys", "reason")
                    },
                },
            )
        if self.on_transition is not None:
            self.on_transition(op.operation_id, t)

    def _stop(
        self, op: Operation, reason: str, detail: str, target: State = State.STOPPED, **extra: Any
    ) -> None:
        op.reason = reason
        op.escalation = {
            "reason": reason,
            "detail": detail,
            "at": self.clock.now().isoformat(),
            "operation_id": op.operation_id,
            "state_before": op.state.value,
            "tenant": op.tenant,
            "subject": op.subject,
            **extra,
        }
        self._move(op, target, reason.lower(), reason=reason)
        op.audit(self.clock.now(), "escalation", op.escalation, self.audit_key)

    async def _drive(self, op: Operation) -> Outcome:
        self._segments[op.operation_id] = self.clock.monotonic()
        try:
            while op.state not in TERMINAL:
                s = op.state
                if s is State.MODEL_REQUESTED:
                    await self._request_model(op)
                elif s is State.RETRY:
                    await self._retry(op)
                elif s is State.VALIDATING:
                    assert op.current is not None
                    self._plan(op, op.current.turn, replan=True)
                    await self._flush(op)
                elif s is State.EXECUTING:
                    await self._execute(op)
                elif s is State.WAITING_APPROVAL:
                    if not await self._approvals_ready(op):
                        crash_point("waiting_approval")  # the pause is committed; nothing runs now
                        break
                elif s is State.RESULTS_READY:
                    await self._send_results(op)
        finally:
            self._tick(op)
            self._segments.pop(op.operation_id, None)
        return self._outcome(op)

    # ---- steps -----------------------------------------------------------------------------------

    def _offered_tools(self, op: Operation) -> list[dict[str, Any]]:
        # Fix: requests always declared every tool of this runner's registry, so an operation resumed
        # by a runner with a larger registry offered the model tools it was never given (and whose
        # calls dispatch then rejects as UNKNOWN_TOOL). Declare only the operation's offered tools.
        if set(op.offered) == set(self.registry.names()):
            return list(self.tools)
        offered = set(op.offered)
        rendered: list[dict[str, Any]] = self.adapter.render_tools(
            [d for d in self.registry.declarations() if d.name in offered]
        )
        return rendered

    def _price(self) -> Price | None:
        model = self.settings.get("model")
        return self.prices.get(model) if isinstance(model, str) else None

    async def _request_model(self, op: Operation) -> None:
        verdict = check_before_model_request(op.budgets, op.spent, self.clock.now())
        if isinstance(verdict, Stop):
            self._stop(op, verdict.reason, verdict.detail)
            await self._flush(op)
            return
        continuation = op.settings.get("continuation")
        use_prev = continuation == "previous_response_id" and op.last_turn is not None
        body = self.adapter.build_request(
            items=op.transcript,
            tools=self._offered_tools(op),
            settings=op.settings,
            instructions=op.instructions,
            stream=bool(op.settings.get("stream")),
            previous_response_id=op.last_turn.response_id if use_prev and op.last_turn else None,
            new_items=op.transcript[op.new_items_start :] if use_prev else None,
        )
        meta = RequestMeta(
            op.operation_id,
            op.model_requests,
            op.last_turn,
            max(0.0, op.budgets.deadline_s - op.spent.active_s),
        )
        progress = None
        if self.on_progress is not None:
            cb, oid = self.on_progress, op.operation_id

            def progress(ev: Progress) -> None:
                cb(oid, ev)

        turn = await self.model.complete(
            body, stream=bool(op.settings.get("stream")), meta=meta, on_progress=progress
        )
        op.model_requests += 1
        self._account(op, turn)
        turn_plain = turn_to_dict(turn)
        self._turn_plain = (turn, turn_plain)  # reused by the head while this turn is under work
        op.pending_journal.append(JournalRow("turn", {"turn": turn_plain}))
        op.audit(
            self.clock.now(),
            "model_turn",
            {
                "response_id": turn.response_id,
                "finish": turn.finish.value,
                "raw_stop_reason": turn.raw_stop_reason,
                "reason": turn.reason,
                "raw_sha256": turn.raw_sha256,
                "call_ids": [c.call_id for c in turn.calls],
            },
            self.audit_key,
        )
        v = classify_turn(turn)
        ids = {"response_id": turn.response_id, "raw_stop_reason": turn.raw_stop_reason}
        if v.retryable:
            remaining = op.budgets.deadline_s - op.spent.active_s
            retry_after = turn.failure.retry_after_s if turn.failure else None
            delay = (
                backoff_delay(op.retries + 1, retry_after, remaining)
                if op.retries < op.budgets.max_retries
                else None
            )
            if delay is None:
                cut = turn.reason == "stream_interrupted"
                target = State.INCOMPLETE if cut else State.FAILED
                self._finish_failure(op, turn, target, v.reason or "API_ERROR", retries=op.retries)
            else:
                op.retries += 1
                op.retry_after_s = delay
                self._move(
                    op,
                    State.RETRY,
                    v.reason.lower() if v.reason else "retry",
                    attempt=op.retries,
                    delay_s=round(delay, 3),
                    **ids,
                )
            await self._flush(op)
            return
        op.retries = 0
        op.spent.model_turns += 1
        if v.target is State.COMPLETED:
            op.text = turn.text
            self._move(op, State.COMPLETED, "final_text", **ids)
        elif v.target is State.VALIDATING:
            self._move(
                op, State.VALIDATING, "tool_proposals", call_ids=[c.call_id for c in turn.calls], **ids
            )
            stop = check_running(op.budgets, op.spent, self.clock.now())
            if isinstance(stop, Stop):
                self._stop(op, stop.reason, stop.detail, response_id=turn.response_id)
            else:
                self._plan(op, turn)
        elif v.target is State.MODEL_REQUESTED:  # CONTINUE: resend the output unchanged
            op.append_items(self.adapter.turn_items(turn))
            op.new_items_start = len(op.transcript)
            op.last_turn = turn
            self._move(op, State.MODEL_REQUESTED, "continue", **ids)
        else:
            self._finish_failure(op, turn, v.target, v.reason or "API_ERROR")
        await self._flush(op)

    def _finish_failure(
        self, op: Operation, turn: ModelTurn, target: State, reason: str, **extra: Any
    ) -> None:
        op.reason = reason
        op.text = turn.text or None
        op.refusal = turn.refusal
        details: dict[str, Any] = {
            "response_id": turn.response_id,
            "raw_stop_reason": turn.raw_stop_reason,
            "reason": reason,
            **extra,
        }
        if turn.failure is not None:
            details.update(
                error_type=turn.failure.error_type,
                error_code=turn.failure.error_code,
                status=turn.failure.status,
            )
        self._move(op, target, reason.lower(), **details)

    def _account(self, op: Operation, turn: ModelTurn) -> None:
        usage = turn.usage
        price = self._price()
        if price is not None and usage.cost is None:
            cost = Decimal(0)
            if usage.input_tokens:
                cost += price.input_per_mtok * usage.input_tokens / Decimal(1_000_000)
            if usage.output_tokens:
                cost += price.output_per_mtok * usage.output_tokens / Decimal(1_000_000)
            usage = Usage(usage.input_tokens, usage.output_tokens, cost)
        op.usage = op.usage + usage
        op.spent.input_tokens += usage.input_tokens or 0
        op.spent.output_tokens += usage.output_tokens or 0
        if usage.cost is not None:
            op.spent.cost += usage.cost

    async def _retry(self, op: Operation) -> None:
        verdict = check_running(op.budgets, op.spent, self.clock.now())
        if isinstance(verdict, Stop):
            self._stop(op, verdict.reason, verdict.detail)
            await self._flush(op)
            return
        await self.clock.sleep(op.retry_after_s or 0.0)
        op.retry_after_s = None
        self._move(op, State.MODEL_REQUESTED, "retry", attempt=op.retries)
        await self._flush(op)

    def _trusted_op(self, op: Operation) -> TrustedOperation:
        return TrustedOperation(op.operation_id, op.tenant, op.subject, None)

    def _plan(self, op: Operation, turn: ModelTurn, replan: bool = False) -> None:
        """VALIDATING → EXECUTING | WAITING_APPROVAL | RESULTS_READY | STOPPED. Adds C1's content."""
        unique = {(c.response_id, c.call_id) for c in turn.calls}
        stop = check_tool_calls(op.budgets, op.spent, len(unique))
        if isinstance(stop, Stop):
            self._stop(
                op,
                stop.reason,
                stop.detail,
                response_id=turn.response_id,
                call_ids=[c.call_id for c in turn.calls],
            )
            return
        offered = frozenset(op.offered)
        plan = plan_turn(turn.calls, self.registry, offered, self._trusted_op(op), self.policy.authorize)
        op.spent.tool_calls += len(plan)
        records: list[CallRecord] = []
        cached = self._turn_plain
        op.current = CurrentTurn(
            turn, records, cached[1] if cached is not None and cached[0] is turn else None
        )
        now = self.clock.now()
        for item in plan:
            rec = CallRecord(
                item.call.response_id,
                item.call.call_id,
                item.call.name,
                PLANNED,
                call_arguments_json(item.call),
            )
            records.append(rec)
            if isinstance(item, Reject):
                seal(self, op, turn, rec, item.spec, error_result(item.code, item.message))
                continue
            rec.idempotency_key = item.idempotency_key
            if isinstance(item, NeedsApproval):
                approval = PendingApproval(
                    approval_id=self.ids.new_id("apr"),
                    operation_id=op.operation_id,
                    tenant=op.tenant,
                    subject=op.subject,
                    response_id=rec.response_id,
                    call_id=rec.call_id,
                    tool=item.spec.name,
                    arguments=item.spec.redact(item.call.arguments)
                    if item.spec.redact
                    else item.call.arguments,
                    argument_digest=item.argument_digest,
                    policy_revision=self.policy.revision,
                    schema_version=item.spec.schema_version,
                    tool_digest=item.spec.definition_digest(),
                    created_at=now,
                    expires_at=now + self.policy.approval_ttl,
                )
                rec.approval_id = approval.approval_id
                rec.status = WAITING
                op.pending_approvals.append(approval)
                op.audit(
                    now,
                    "approval_requested",
                    {
                        "approval_id": approval.approval_id,
                        "call_id": rec.call_id,
                        "tool": approval.tool,
                        "argument_digest": approval.argument_digest,
                        "expires_at": approval.expires_at.isoformat(),
                    },
                    self.audit_key,
                )
        self._after_plan(op)

    def _after_plan(self, op: Operation) -> None:
        assert op.current is not None
        statuses = [r.status for r in op.current.records]
        if PLANNED in statuses:
            planned = [r for r in op.current.records if r.status == PLANNED]
            self._move(
                op,
                State.EXECUTING,
                "execute",
                call_ids=[r.call_id for r in planned],
                idempotency_keys=[r.idempotency_key for r in planned if r.idempotency_key],
            )
        elif WAITING in statuses:
            self._enter_waiting(op)
        else:
            self._move(op, State.RESULTS_READY, "all_rejected")

    def _enter_waiting(self, op: Operation) -> None:
        assert op.current is not None
        self._move(
            op,
            State.WAITING_APPROVAL,
            "approval_required",
            approval_ids=[r.approval_id for r in op.current.records if r.status == WAITING],
        )

    async def _execute(self, op: Operation) -> None:
        assert op.current is not None
        if any(r.status == PLANNED for r in op.current.records) and op.pending_journal:
            await self._flush(op)  # C1 is durable before any handler runs (D18)

        async def flush() -> None:
            await self._flush(op)

        await run_turn(self, op, flush)
        records = op.current.records
        unknown = [r for r in records if r.status == UNKNOWN]
        if unknown:
            self._stop(
                op,
                "OUTCOME_UNKNOWN",
                "a write's outcome is unknown and could not be reconciled; check the downstream system "
                "for these idempotency keys before resuming by hand",
                call_ids=[r.call_id for r in unknown],
                idempotency_keys=[r.idempotency_key for r in unknown],
                tools=[r.tool for r in unknown],
            )
            await self._flush(op)
            return
        if any(r.status == WAITING for r in records):
            self._enter_waiting(op)
            await self._flush(op)
            return
        self._move(op, State.RESULTS_READY, "results_ready")

    async def _approvals_ready(self, op: Operation) -> bool:
        """In WAITING_APPROVAL: False (still waiting) or move on once every approval of the turn is
        decided or expired, re-validating each approved call (D17)."""
        assert op.current is not None
        now = self.clock.now()
        waiting = [r for r in op.current.records if r.status == WAITING]
        approvals: dict[str, PendingApproval] = {}
        for rec in waiting:
            assert rec.approval_id is not None
            a = self.store.get_approval(rec.approval_id)
            if a is None:
                raise StoreError(
                    f"approval {rec.approval_id} of operation {op.operation_id} is missing from the store"
                )
            approvals[rec.approval_id] = a
            if a.status == "pending" and now < a.expires_at:
                return False
        if op.budgets.not_after is not None and now >= op.budgets.not_after:
            self._stop(op, "DEADLINE", "not_after passed while waiting for approval")
            await self._flush(op)
            return True
        turn = op.current.turn
        calls = {(c.response_id, c.call_id): c for c in turn.calls}
        expired_stop = False
        for rec in waiting:
            assert rec.approval_id is not None
            a = approvals[rec.approval_id]
            spec = self.registry.get(rec.tool)
            code: str | None
            message: str
            if spec is None:
                code, message = "APPROVAL_STALE", f"{rec.tool} is no longer available"
            else:
                code = revalidate(
                    a,
                    now,
                    argument_digest=sha256_hex(rec.arguments_json or "null"),
                    policy_revision=self.policy.revision,
                    schema_version=spec.schema_version,
                    tool_digest=spec.definition_digest(),
                )
                message = {
                    "APPROVAL_EXPIRED": "the approval for this call expired before anyone decided; it was not run",
                    "APPROVAL_STALE": "the tool or policy changed since approval was asked; it was not run",
                    "DENIED": f"a human denied this call{': ' + a.reason if a.reason else ''}; it was not run",
                }.get(code or "", "")
                if code is None:
                    # Re-validate schema and authorization against today's registry and policy.
                    item = plan_call(
                        calls[(rec.response_id, rec.call_id)],
                        self.registry,
                        frozenset(op.offered),
                        self._trusted_op(op),
                        self.policy.authorize,
                    )
                    if isinstance(item, Reject):
                        code, message = item.code, item.message
                    elif (
                        isinstance(item, Execute | NeedsApproval)
                        and item.idempotency_key != rec.idempotency_key
                    ):
                        code, message = "APPROVAL_STALE", "the call's intent changed since approval was asked"
            op.audit(
                now,
                "approval_resolved",
                {
                    "approval_id": a.approval_id,
                    "status": a.status,
                    "approver": a.approver,
                    "result": code or "APPROVED",
                },
                self.audit_key,
            )
            if code is None:
                rec.status = PLANNED
            else:
                if code == APPROVAL_EXPIRED and self.policy.on_approval_expired == "stop":
                    expired_stop = True
                seal(self, op, turn, rec, spec, error_result(code, message))
        if expired_stop:
            self._stop(op, "APPROVAL_EXPIRED", "an approval expired and the policy stops on expiry")
            await self._flush(op)
            return True
        self._after_plan(op)
        await self._flush(op)
        crash_point("after_approval_before_execution")
        return True

    async def _send_results(self, op: Operation) -> None:
        """RESULTS_READY → MODEL_REQUESTED: correlate, verify every binding, check progress, C2."""
        assert op.current is not None
        turn = op.current.turn
        records = op.current.records
        envelopes = [envelope_from_dict(r.envelope) for r in records if r.envelope is not None]
        first_call: dict[tuple[str, str], ToolCall] = {}
        for c in turn.calls:
            first_call.setdefault((c.response_id, c.call_id), c)
        # Fix: a DUPLICATE_CALL_ID or UNKNOWN_TOOL rejection is sealed without a spec (handler "-"), but
        # the binding was recomputed with the registry's spec whenever the name was registered, so a
        # repeated call id of a real tool (or a registered tool that was not offered) ended
        # FAILED(INTEGRITY). Resolve the spec the way dispatch did, from the correlation table and the
        # offered list, never from the envelope.
        per_key = Counter((c.response_id, c.call_id) for c in turn.calls)
        offered = frozenset(op.offered)
        trusted = {}
        for rec in records:
            rejected_unbound = per_key[(rec.response_id, rec.call_id)] > 1 or rec.tool not in offered
            spec = None if rejected_unbound else self.registry.get(rec.tool)
            call = first_call.get((rec.response_id, rec.call_id))
            # D10: name and arguments come from the correlation table (the call as proposed), the key,
            # effect and producer from the call record, the rest from the operation row and registry.
            source = (
                rec
                if call is None
                else CallRecord(
                    rec.response_id,
                    rec.call_id,
                    call.name,
                    rec.status,
                    call_arguments_json(call),
                    rec.idempotency_key,
                    effect=rec.effect,
                    producer=rec.producer,
                    handler=rec.handler,
                    schema_version=rec.schema_version,
                    policy_revision=rec.policy_revision,
                )
            )
            trusted[(rec.response_id, rec.call_id)] = trusted_for(self, op, turn, source, spec)
        try:
            ordered = verify_results(CorrelationTable(turn.calls), envelopes, trusted)
        except (CorrelationError, BindingMismatch) as exc:
            self._stop(op, "INTEGRITY", str(exc), target=State.FAILED, response_id=turn.response_id)
            await self._flush(op)
            return
        hashes = [canonical_sha256(e.model_result) for e in ordered]
        verdict = record_turn_results(op.budgets, op.spent, hashes, any(r.no_progress for r in records))
        results = [(first_call[(e.response_id, e.call_id)], e.model_result) for e in ordered]
        op.pending_journal.append(
            JournalRow(
                "results",
                {
                    "response_id": turn.response_id,
                    "envelopes": [r.envelope for r in records],
                    "identical": [r.identical_key for r in records if r.identical_key],
                    "result_hashes": hashes,
                },
            )
        )
        for e in ordered:
            op.audit(self.clock.now(), "result", _audit_result(e), self.audit_key)
        if isinstance(verdict, Stop):
            self._stop(
                op,
                verdict.reason,
                verdict.detail,
                response_id=turn.response_id,
                call_ids=[r.call_id for r in records],
                tools=sorted({r.tool for r in records}),
            )
            await self._flush(op)
            return
        op.append_items(self.adapter.turn_items(turn))
        op.new_items_start = len(op.transcript)
        op.append_items(self.adapter.result_items(turn, results))
        op.last_turn = turn
        op.current = None
        self._move(op, State.MODEL_REQUESTED, "results_sent", response_id=turn.response_id)
        await self._flush(op)
        crash_point("after_result_commit")

    def _outcome(self, op: Operation) -> Outcome:
        pending: tuple[PendingApproval, ...] = ()
        if op.state is State.WAITING_APPROVAL and op.current is not None:
            found = []
            for rec in op.current.records:
                if rec.status == WAITING and rec.approval_id:
                    a = self.store.get_approval(rec.approval_id)
                    if a is not None:
                        found.append(a)
            pending = tuple(found)
        return Outcome(
            state=op.state,
            reason=op.reason,
            operation_id=op.operation_id,
            text=op.text,
            pending_approvals=pending,
            usage=op.usage,
            history=tuple(op.machine.history),
            refusal=op.refusal,
            escalation=op.escalation,
            spent=op.spent.to_dict(),
        )


def _audit_result(e: ResultEnvelope) -> dict[str, Any]:
    p = e.protected_audit
    return {
        "response_id": e.response_id,
        "call_id": e.call_id,
        "ok": e.ok,
        "error_code": e.error_code,
        "idempotency_key": p.get("idempotency_key"),
        "effect": p.get("effect"),
        "producer": p.get("producer"),
        "request_sha256": p.get("request_sha256"),
        "result_sha256": p.get("result_sha256"),
        "call_binding_sha256": p.get("call_binding_sha256"),
    }


def _run_sync(coro: Any) -> Outcome:
    """Thin synchronous facade (no second implementation)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        result: Outcome = asyncio.run(coro)
        return result
    coro.close()
    raise UsageError("run_sync/resume_sync cannot be called from a running event loop; await run()/resume()")


__all__ = ["ApproverNotAllowed", "Outcome", "Policy", "Price", "Runner"]


def call_arguments_json(call: ToolCall) -> str | None:
    """Canonical arguments of a call as proposed, or None where they are unreadable."""
    if call.arguments is None:
        return None
    try:
        return canonical_json(call.arguments)
    except CanonicalizationError:
        return None
