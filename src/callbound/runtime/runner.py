"""The async Runner: drives one operation through the transition table.

One turn: model request → adapter → machine → dispatch plan → tools → binding → store. Every
transition is committed before the effect it announces, in two commits per tool round trip (D18):
C1 (turn, plan, ledger STARTED, EXECUTING) before any handler runs; C2 (envelopes, ledger outcomes,
audit, MODEL_REQUESTED) before the next model request.
"""

from __future__ import annotations

import copy
import logging
import os
import random
from collections.abc import Callable, Sequence
from typing import Any

from ..adapters.base import readable_turn
from ..core.approvals import Decision, PendingApproval
from ..core.audit import AuditEvent
from ..core.canonical import sha256_hex
from ..core.dispatch import TrustedOperation
from ..core.errors import IntentTaken, OperationBusy, StoreError, UsageError
from ..core.guards import (
    Budgets,
    Stop,
    check_after_turn,
    check_before_model_request,
    remaining_s,
    settings_for_request,
)
from ..core.ids import IdSource, RandomIds
from ..core.machine import classify_turn
from ..core.model import ModelClient, RequestMeta
from ..core.registry import Registry
from ..core.snapshot import turn_to_dict
from ..core.states import TERMINAL, State
from ..core.types import ModelTurn, Progress, Transition
from ..stores.base import JournalRow, Store, StoredOperation
from ..stores.memory import MemoryStore
from .cancel import cancel
from .checks import (
    app_reference,
    check_messages,
    check_model_name,
    check_new_operation,
    check_operation_id,
    check_runner_args,
    check_settings_for,
    check_tenant,
    check_text,
    check_tool_choice,
    check_turn_usage,
    checked_decisions,
    checked_settings,
)
from .clock import Clock, SystemClock
from .crash import crash_point
from .decisions import check_approver, record, record_all, withdraw_pending
from .escalation import escalate, turn_calls
from .executing import execute_step, writes_only
from .integrity import created_entry, load_to_drive, refuse_if_finished
from .lease import driving, outcome_after_claim
from .operation import Operation
from .outcome import ApproverNotAllowed, Outcome, Policy, Price, outcome_of, priced, with_turn
from .planning import approvals_ready, plan
from .pricing import required_price
from .results import send_results
from .retry import after_retryable, chain_lost, raised_turn, replayable, retry_step
from .storable import storable_turn
from .sync import run_blocking
from .tools import ToolExecutor

log = logging.getLogger("callbound.runtime")


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
        app: dict[str, Any] | str | None = None,
        rng: random.Random | None = None,
        lease_s: float = 30.0,
    ) -> None:
        check_runner_args(
            model=model,
            registry=registry,
            budgets=budgets,
            store=store,
            clock=clock,
            policy=policy,
            prices=prices,
            instructions=instructions,
            lease_s=lease_s,
            audit_key=audit_key,
            hooks={"on_progress": on_progress, "on_transition": on_transition},
            ids=ids,
            executor=executor,
            rng=rng,
        )
        self.model = model
        self.adapter = model.adapter
        self.registry = registry
        self.budgets = budgets or Budgets()
        self.store: Store = store if store is not None else MemoryStore()
        self.clock: Clock = clock or SystemClock()
        self.policy = policy or Policy()
        self.instructions = instructions
        self.messages = check_messages(messages)
        self.settings = checked_settings(settings)
        check_model_name(model, self.settings)
        self.ids: IdSource = ids or RandomIds()
        self.prices = dict(prices or {})
        required_price(self.prices, self.budgets, self.settings)  # D12: max_cost needs a price
        self.on_progress = on_progress
        self.on_transition = on_transition
        env_key = os.environ.get("CALLBOUND_AUDIT_KEY")
        self.audit_key = audit_key if audit_key is not None else (env_key.encode() if env_key else None)
        self.executor = executor or ToolExecutor()
        # recorded with each operation so `callbound resume` can rebuild this runner (D21); its shape
        # is checked now (a plain "module:factory" becomes {"ref": ..., "args": {}})
        self.app = app_reference(app)
        # Backoff jitter (D26) draws from this; pass a seeded Random for reproducible retry timing.
        self.rng = rng if rng is not None else random.Random()
        # run/resume hold the operation's lease for this long past each renewal (D21, runtime/lease.py)
        self.lease_s = lease_s
        self._segments: dict[str, float] = {}  # operation id -> monotonic start of the active segment
        self._turn_plain: tuple[ModelTurn, dict[str, Any]] | None = None
        self._unchained: set[str] = set()  # operations whose chained response the provider lost (retry.py)
        # Rendered once: raises UnsupportedSchema now rather than on the first live call (D9); so do
        # settings the adapter refuses, a UsageError (runtime/checks.py).
        check_text("Runner(instructions=...)", instructions)
        for decl in registry.declarations():
            check_text(f"the description of tool {decl.name!r}", decl.description)
        self.tools = self.adapter.render_tools(registry.declarations())
        check_tool_choice(self.settings.get("tool_choice"), frozenset(registry.names()))
        check_settings_for(self.adapter, self.tools, self.settings, instructions)

    # ---- public API ------------------------------------------------------------------------------

    async def run(
        self, input: str | None, tenant: str, subject: str, operation_id: str | None = None
    ) -> Outcome:
        op = self._new_operation(input, tenant, subject, operation_id)
        await self._flush(op)
        self._announce(op, op.machine.history[0], {})  # once stored: a refused run was never created
        try:
            async with driving(self.store, op.operation_id, self.lease_s) as fence:
                if fence is not None:
                    op.fence = fence
                return await self._drive(op)
        except OperationBusy:
            # A worker claimed the new operation between its creation and our lease (D21): it drives
            # it now. The caller still gets its Outcome, once the worker has paused or ended it.
            return await outcome_after_claim(self, op.operation_id)

    def submit(self, input: str | None, tenant: str, subject: str, operation_id: str | None = None) -> str:
        """Queue an operation for workers without running it (D21)."""
        op = self._new_operation(input, tenant, subject, operation_id)
        self._commit_sync(op)
        self._announce(op, op.machine.history[0], {})
        return op.operation_id

    async def resume(self, operation_id: str, decisions: Sequence[Decision] | Decision = ()) -> Outcome:
        """Record ``decisions`` (a single ``Decision`` is a list of one) and drive the operation on.
        Holds its lease meanwhile, so two drives never run one operation at once (``OperationBusy``);
        a drive of this host whose process is gone is taken over at once, anyone else's lease must
        expire first (D21)."""
        check_operation_id(operation_id)
        decisions = checked_decisions(decisions)  # all of them, before the lease and any record
        refuse_if_finished(self.store, operation_id)  # before the lease: a refusal writes nothing
        async with driving(self.store, operation_id, self.lease_s) as fence:
            return await self.resume_leased(operation_id, decisions, fence=fence)

    async def resume_leased(
        self, operation_id: str, decisions: Sequence[Decision] | Decision = (), *, fence: int | None = None
    ) -> Outcome:
        """``resume`` for a caller that already holds the operation's lease (a worker's claim), whose
        token is ``fence``: ``StaleLease`` if the lease was taken over before the operation was read."""
        check_operation_id(operation_id)
        decisions = checked_decisions(decisions)
        op, ended = await load_to_drive(self, operation_id, fence)
        if ended is not None:
            return ended  # its stored rows differ from its audit chain: FAILED(INTEGRITY) (D20)
        self._price(op)  # its saved max_cost needs this runner's price: refuse before any decision
        record_all(self, decisions, op.tenant, op)  # all checked before any is recorded (D17)
        return await self._drive(op)

    def run_sync(
        self, input: str | None, tenant: str, subject: str, operation_id: str | None = None
    ) -> Outcome:
        return run_blocking(self.run(input, tenant, subject, operation_id), self.executor.grace_s)

    def resume_sync(self, operation_id: str, decisions: Sequence[Decision] | Decision = ()) -> Outcome:
        return run_blocking(self.resume(operation_id, decisions), self.executor.grace_s)

    def decide(self, decision: Decision, *, tenant: str, _op: Operation | None = None) -> PendingApproval:
        """Record one decision (single use, D17) without resuming. Works from any process."""
        check_tenant(tenant)
        [decision] = checked_decisions([decision])
        return record(self, decision, tenant, _op)

    def check_approver(self, approver: str, approval: PendingApproval) -> None:
        """Raise ``ApproverNotAllowed`` unless ``approver`` may decide ``approval`` under the policy."""
        check_approver(self.policy, approver, approval)

    def cancel(self, operation_id: str, reason: str = "cancelled by a user") -> Outcome:
        """End an operation STOPPED(CANCELLED). Refused while a write handler is running, because its
        effect would be left unknown."""
        check_operation_id(operation_id)  # an Outcome passed for its id: a UsageError, not a store error
        if not isinstance(reason, str) or not reason.strip():
            raise UsageError(f"cancel(reason=...) takes a non-empty str, not {reason!r}")
        check_text("cancel(reason=...)", reason)
        return cancel(self, operation_id, reason)

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
        check_operation_id(operation_id)
        return self._outcome(self._load(operation_id))

    # ---- operation lifecycle ---------------------------------------------------------------------

    def _new_operation(
        self, input: str | None, tenant: str, subject: str, operation_id: str | None
    ) -> Operation:
        check_new_operation(input, tenant, subject, operation_id, bool(self.messages or self.instructions))
        now = self.clock.now()
        op = Operation(
            operation_id=operation_id or self.ids.new_id("op"),
            tenant=tenant,
            subject=subject,
            api=self.adapter.api,
            created_at=now,
            budgets=self.budgets,
            # its own copy: the audit records its digest (D20), and a later change to the runner's
            # settings must not change an operation already under way
            settings=copy.deepcopy(self.settings),
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
            created_entry(op, sha256_hex(input or "")),
            self.audit_key,
        )
        op.append_items(self.adapter.initial_items(input, self.messages))
        return op

    def _load(self, operation_id: str) -> Operation:
        stored, events = self._stored(operation_id)
        return Operation.from_stored(stored, events[-1] if events else None)

    def _stored(self, operation_id: str) -> tuple[StoredOperation, list[AuditEvent]]:
        stored = self.store.load_operation(operation_id)
        if stored is None:
            raise UsageError(f"no operation {operation_id!r} in this store")
        return stored, self.store.audit_events(operation_id)

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
        if target in TERMINAL:
            # From WAITING_APPROVAL, or from EXECUTING in a mixed turn (D3) whose other calls stop the
            # operation while some still wait: no approval may stay pending on an ended operation.
            withdraw_pending(
                self, op, f"the operation ended {target.value}({details.get('reason') or cause})"
            )
        t = op.move(target, self.clock.now(), cause, self.audit_key, **details)
        self._announce(op, t, details)

    def _announce(self, op: Operation, t: Transition, details: dict[str, Any]) -> None:
        """D29: every transition, the first (created) included, is logged and shown to ``on_transition``."""
        if log.isEnabledFor(logging.INFO):
            log.info(
                "transition %s -> %s (%s)",
                op.operation_id,
                t.state,
                t.cause,
                extra={
                    "operation_id": op.operation_id,
                    "state": t.state,
                    "cause": t.cause,
                    "tenant": op.tenant,
                    "subject": op.subject,
                    **{
                        k: v
                        for k, v in details.items()
                        if k in ("response_id", "call_ids", "approval_ids", "idempotency_keys", "reason")
                    },
                },
            )
        if self.on_transition is not None:
            try:
                self.on_transition(op.operation_id, t)
            # An observer's bug must not leave the operation half-moved (D4); nor may its SystemExit
            # (rich raises one when the reader of a pipe has gone): raised between a write's effect and
            # its commit, it left the write unrecorded. KeyboardInterrupt still cancels the drive.
            except (Exception, SystemExit) as exc:
                log.warning(
                    "on_transition observer raised %s; ignored",
                    type(exc).__name__,
                    extra={"operation_id": op.operation_id, "state": t.state},
                )

    def _stop(
        self,
        op: Operation,
        reason: str,
        detail: str,
        target: State = State.STOPPED,
        ended_by: str | None = None,
        **extra: Any,
    ) -> None:
        """``ended_by``: the turn whose text ``op`` keeps (an answer over a budget): on the transition (D20).
        The escalation record names the turn last handled unless ``extra`` names one (escalation.py)."""
        escalate(self, op, reason, detail, target, ended_by, extra)

    async def _drive(self, op: Operation) -> Outcome:
        self._segments[op.operation_id] = self.clock.monotonic()
        taken = 0
        try:
            while op.state not in TERMINAL:
                try:
                    if not await self._step(op):
                        crash_point("waiting_approval")  # the pause is committed; nothing runs now
                        break
                except IntentTaken:
                    # Another operation claimed one of this turn's write intents between our ledger
                    # read and our commit. A write's own STARTED claim is taken back and decided again
                    # where it is made, keeping the answered turn (claims.Claim), as is a reconcile's
                    # takeover; this is the rest (a claim refused more than CLAIM_TRIES times): the
                    # store refused the commit whole, so no handler ran; carry on from what
                    # the store holds, where the write is decided again and sees the other operation's
                    # entry (IN_PROGRESS, or its result to replay).
                    taken += 1
                    if taken > 3:
                        raise
                    fence = op.fence
                    op = self._load(op.operation_id)
                    op.fence = fence if fence is not None else op.fence
        finally:
            self._tick(op)
            self._segments.pop(op.operation_id, None)
        return self._outcome(op)

    async def _step(self, op: Operation) -> bool:
        """One state's work; False when the operation waits for approvals (the drive pauses)."""
        s = op.state
        if s is State.MODEL_REQUESTED:
            await self._request_model(op)
        elif s is State.RETRY:
            await self._retry(op)
        elif s is State.VALIDATING:
            assert op.current is not None
            plan(self, op, op.current.turn, replan=True)
            await self._flush(op)
        elif s is State.EXECUTING:
            await self._execute(op)
        elif s is State.WAITING_APPROVAL:
            return await approvals_ready(self, op)
        elif s is State.RESULTS_READY:
            await self._send_results(op)
        return True

    # ---- steps -----------------------------------------------------------------------------------

    def _offered_tools(self, op: Operation) -> list[dict[str, Any]]:
        # Only the operation's offered tools: a resuming runner's registry may be larger (D4).
        offered = set(op.offered)
        if offered == set(self.registry.names()):
            return list(self.tools)
        decls = [d for d in self.registry.declarations() if d.name in offered]
        rendered: list[dict[str, Any]] = self.adapter.render_tools(decls)
        return rendered

    def _price(self, op: Operation) -> Price | None:
        """The price of the model ``op`` asks for; ``UsageError`` when its saved budgets set max_cost
        and this runner has none (runtime/pricing.py): such a turn would never count against it."""
        return required_price(self.prices, op.budgets, op.settings, op.operation_id)

    async def _request_model(self, op: Operation) -> None:
        price = self._price(op)  # before the request: a turn that cannot be priced is never paid for
        verdict = check_before_model_request(op.budgets, op.spent, self.clock.now())
        if isinstance(verdict, Stop):
            self._stop(op, verdict.reason, verdict.detail)
            await self._flush(op)
            return
        continuation = op.settings.get("continuation")
        use_prev = (
            continuation == "previous_response_id"
            and op.last_turn is not None
            and op.operation_id not in self._unchained
        )
        body = self.adapter.build_request(
            items=op.transcript,
            tools=self._offered_tools(op),
            settings=settings_for_request(op.settings, op.spent.tool_calls),
            instructions=op.instructions,
            stream=bool(op.settings.get("stream")),
            previous_response_id=op.last_turn.response_id if use_prev and op.last_turn else None,
            new_items=op.transcript[op.new_items_start :] if use_prev else None,
        )
        # the request's timeout: the time left, not_after included (D14, D26)
        meta = RequestMeta(
            op.operation_id,
            op.model_requests,
            op.last_turn,
            remaining_s(op.budgets, op.spent, self.clock.now()),
        )
        progress = None
        if self.on_progress is not None:
            cb, oid = self.on_progress, op.operation_id

            def progress(ev: Progress) -> None:
                try:
                    cb(oid, ev)
                except (Exception, SystemExit) as exc:  # an observer's bug is not a model failure (D4)
                    log.warning("on_progress observer raised %s; ignored", type(exc).__name__)

        try:
            turn = await self.model.complete(
                body, stream=bool(op.settings.get("stream")), meta=meta, on_progress=progress
            )
        except (UsageError, StoreError):
            raise
        except Exception as exc:  # D4: a failed request, never a crash half-way
            turn = raised_turn(self.adapter, self.settings.get("model"), op.operation_id, exc)
        if not isinstance(turn, ModelTurn):
            # a custom client's bug, not a provider failure: nothing of it is recorded, and the
            # operation stays where it was (resumable once the client is fixed)
            raise UsageError(
                f"{type(self.model).__name__}.complete() returned a {type(turn).__name__}, not a ModelTurn: "
                "build it with the adapter (self.adapter.parse_response(body) or its stream_assembler)"
            )
        check_turn_usage(self.model, turn.usage)
        turn = storable_turn(readable_turn(turn))  # unhashable ids, unstorable numbers: not a crash (D4)
        # The request's own time counts first: one that used up the deadline stops its calls (D14).
        self._tick(op)
        op.model_requests += 1
        self._account(op, turn, price)
        turn_plain = turn_to_dict(turn)
        self._turn_plain = (turn, turn_plain)  # reused by the head while this turn is under work
        op.pending_journal.append(JournalRow("turn", {"turn": turn_plain}))
        op.audit(
            self.clock.now(),
            "model_turn",
            {
                "response_id": turn.response_id,
                "finish": turn.finish._value_,
                "raw_stop_reason": turn.raw_stop_reason,
                "reason": turn.reason,
                "raw_sha256": turn.raw_sha256,
                "call_ids": [c.call_id for c in turn.calls],
            },
            self.audit_key,
        )
        if use_prev and chain_lost(turn):  # sent again replayed in full, once (retry.py)
            self._unchained.add(op.operation_id)
            turn = replayable(turn)
        v = classify_turn(turn)
        ids = {"response_id": turn.response_id, "raw_stop_reason": turn.raw_stop_reason}
        if v.retryable:
            after_retryable(self, op, turn, v.reason)  # RETRY, or an end: retries or time used up
            await self._flush(op)
            return
        op.retries = 0
        self._unchained.discard(op.operation_id)  # a new response to chain to
        op.spent.model_turns += 1
        # A turn that answers or goes on: the deadline and not_after (D14), usage a budget needs but the
        # provider did not report (USAGE_UNKNOWN, D12/D27), its own tokens and cost (issue 2 §5).
        after = (
            check_after_turn(op.budgets, op.spent, turn.usage, self.clock.now())
            if v.target in (State.COMPLETED, State.VALIDATING, State.MODEL_REQUESTED)
            else None
        )
        if v.target is State.COMPLETED:
            if isinstance(after, Stop):  # the answer came, but over a limit: its text is kept
                op.text = turn.text or None
                self._stop(
                    op, after.reason, after.detail, ended_by=turn.response_id, response_id=turn.response_id
                )
            else:
                op.text = turn.text
                self._move(op, State.COMPLETED, "final_text", **ids)
        elif v.target is State.VALIDATING:
            self._move(
                op, State.VALIDATING, "tool_proposals", call_ids=[c.call_id for c in turn.calls], **ids
            )
            if isinstance(after, Stop):  # none of its calls runs: the escalation names them
                self._stop(op, after.reason, after.detail, response_id=turn.response_id, **turn_calls(turn))
            else:
                plan(self, op, turn)
        elif isinstance(after, Stop):  # CONTINUE whose turn trips a guard
            self._stop(op, after.reason, after.detail, response_id=turn.response_id)
        elif v.target is State.MODEL_REQUESTED:  # CONTINUE: resend the output unchanged
            op.append_items(self.adapter.turn_items(turn))
            op.new_items_start = len(op.transcript)
            op.last_turn = turn
            self._move(op, State.MODEL_REQUESTED, "continue", **ids)
        else:
            self._finish_failure(op, turn, v.target, v.reason or "API_ERROR")
        if op.state is State.EXECUTING and writes_only(self, op):
            return  # C1 goes out with the first write's ledger STARTED (D18)
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

    def _account(self, op: Operation, turn: ModelTurn, price: Price | None) -> None:
        usage = priced(turn.usage, price)
        op.usage = with_turn(op.usage, turn, usage, first=op.model_requests == 1)
        op.spent.input_tokens += usage.input_tokens or 0
        op.spent.output_tokens += usage.output_tokens or 0
        if usage.cost is not None:
            op.spent.cost += usage.cost

    async def _retry(self, op: Operation) -> None:
        await retry_step(self, op)  # runtime/retry.py

    def _trusted_op(self, op: Operation) -> TrustedOperation:
        return TrustedOperation(op.operation_id, op.tenant, op.subject, None)

    async def _execute(self, op: Operation) -> None:
        """EXECUTING → RESULTS_READY | WAITING_APPROVAL | STOPPED (runtime/executing.py)."""
        await execute_step(self, op)

    async def _send_results(self, op: Operation) -> None:
        """RESULTS_READY → MODEL_REQUESTED (runtime/results.py); a method so tests can interpose."""
        await send_results(self, op)

    def _outcome(self, op: Operation) -> Outcome:
        return outcome_of(self.store, op)


__all__ = ["ApproverNotAllowed", "Outcome", "Policy", "Price", "Runner"]
