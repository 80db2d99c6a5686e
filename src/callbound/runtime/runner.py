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

from ..core.approvals import Decision, PendingApproval
from ..core.audit import AuditEvent
from ..core.canonical import sha256_hex
from ..core.dispatch import TrustedOperation
from ..core.errors import IntentTaken, OperationBusy, UsageError
from ..core.guards import (
    Budgets,
)
from ..core.ids import IdSource, RandomIds
from ..core.model import ModelClient
from ..core.registry import Registry
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
    checked_decisions,
    checked_settings,
)
from .clock import Clock, SystemClock
from .crash import crash_point
from .decisions import check_approver, record, record_all, withdraw_pending
from .escalation import escalate
from .executing import execute_step
from .integrity import created_entry, load_to_drive, refuse_if_finished
from .lease import driving, outcome_after_claim
from .operation import Operation
from .outcome import ApproverNotAllowed, Outcome, Policy, Price, outcome_of
from .planning import approvals_ready, plan
from .pricing import required_price
from .requesting import finish_failure, request_step
from .results import send_results
from .retry import retry_step
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
        """Start a new operation for ``tenant`` and ``subject`` and drive it until it ends or waits for
        approval. ``input`` is the user's message (``None``: none, when the runner's ``messages`` or
        ``instructions`` say it all); the runner's instructions, messages, budgets and model settings
        are saved with the operation (D25); ``operation_id`` names it (``None``: a new random id).

        The operation is committed before the first model request, and every transition before the
        effect it announces (D18). The run holds the operation's lease while it drives (D21); a worker
        that claims the new operation first drives it instead, and the run returns the worker's Outcome
        once it has paused or ended it. Active time counts against ``Budgets.deadline_s`` from here, and
        ``not_after`` ends it regardless (D14).

        Returns the ``Outcome``: ``COMPLETED`` with the text, ``WAITING_APPROVAL`` with the pending
        approvals (decide them, then ``resume``), or another terminal state with its ``reason`` and
        escalation record; everything the model, the provider, the tools or the stored data did is
        reported there, never raised (D4). ``callbound run`` exits 0 on the first two, 3 otherwise (D28).

        Raises ``UsageError`` for misuse, before anything is stored: ``input``, ``tenant``, ``subject``
        or ``operation_id`` of the wrong type or empty; ``OperationExists`` (also a ``StoreError``) for
        an id the store already holds. Once under way, a ``UsageError`` leaves the operation resumable
        where it stopped: ``ScriptExhausted`` when a ``ScriptedModel`` has no response for the request
        (D24), a model client that returned no ``ModelTurn``, a ``max_cost`` without a price for the
        model (D12). ``StoreError`` when the store fails: ``StaleLease`` when another process took the
        operation over, ``IntentTaken`` when another operation kept claiming a write's intent."""
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
        """Create an operation, as ``run`` does, and queue it for ``callbound worker`` without running it
        (D21): nothing is sent to the model and no lease is taken; a worker claims it and drives it with
        the application saved with it (``Runner(app=...)``), or its own ``--app``. The operation, with
        the runner's instructions, messages, budgets and settings (D25), is committed before this
        returns (D18); its active time starts when a worker drives it (D14).

        Returns the operation id (``Runner.outcome(id)`` reads its state later). Raises ``UsageError``
        for the arguments ``run`` refuses, ``OperationExists`` for an id the store already holds, and
        ``StoreError`` when the store fails."""
        op = self._new_operation(input, tenant, subject, operation_id)
        self._commit_sync(op)
        self._announce(op, op.machine.history[0], {})
        return op.operation_id

    async def resume(self, operation_id: str, decisions: Sequence[Decision] | Decision = ()) -> Outcome:
        """Record ``decisions`` (a single ``Decision`` is a list of one, D17) and drive the operation on
        from where the store holds it, with the budgets, settings and instructions saved with it (D25)
        and the active time it has used (D14). Holds its lease meanwhile, so two drives never run one
        operation at once; a drive of this host whose process is gone is taken over at once, anyone
        else's lease must expire first (D21). A write left ``STARTED`` by a crash is reconciled before
        anything runs again (D16, D18); a ``ScriptedModel`` continues its script (D24).

        Returns the ``Outcome``, as ``run`` does (D28: ``callbound resume`` exits 0 on ``COMPLETED`` or
        ``WAITING_APPROVAL``, 3 otherwise); an operation whose stored rows differ from its audit chain
        ends ``FAILED(INTEGRITY)`` before any decision is recorded or anything runs (D20).

        Raises ``UsageError`` before any decision is recorded: an ``operation_id`` that is not a
        non-empty ``str`` or that the store does not hold, a finished operation, decisions that are not
        ``Decision`` objects, ``UnknownApproval``, ``ApprovalAlreadyDecided`` or ``ApproverNotAllowed``
        for a decision (all are checked before any is recorded), a chain written under another
        ``CALLBOUND_AUDIT_KEY``, a saved ``max_cost`` this runner has no price for; once under way, as
        ``run`` (``ScriptExhausted``, D24). Raises ``OperationBusy`` (a ``StoreError``) while another drive or worker holds the lease,
        ``StaleLease`` when another process takes it over, and ``StoreError`` when the store fails."""
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
        """``run`` for synchronous code: the same arguments, Outcome and errors (D14, D18, D21, D24,
        D25, D28), on an event loop of its own (``runtime/sync.run_blocking``). Raises ``UsageError``
        when called from a running event loop (``await run()`` there). When the run ends, handler
        threads and tasks still running are waited for at most ``ToolExecutor.grace_s``, then left
        with a warning, so a hung handler cannot keep the call from returning (D16). Ctrl-C cancels
        the drive (``KeyboardInterrupt``); ``resume_sync`` continues it."""
        return run_blocking(self.run(input, tenant, subject, operation_id), self.executor.grace_s)

    def resume_sync(self, operation_id: str, decisions: Sequence[Decision] | Decision = ()) -> Outcome:
        """``resume`` for synchronous code: the same arguments, Outcome and errors (D14, D17, D18, D21,
        D24, D25, D28), on an event loop of its own, closed as ``run_sync``'s is. Raises ``UsageError``
        when called from a running event loop (``await resume()`` there)."""
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

    def _price(self, op: Operation) -> Price | None:
        """The price of the model ``op`` asks for; ``UsageError`` when its saved budgets set max_cost
        and this runner has none (runtime/pricing.py): such a turn would never count against it."""
        return required_price(self.prices, op.budgets, op.settings, op.operation_id)

    async def _request_model(self, op: Operation) -> None:
        """MODEL_REQUESTED → the turn's next state (runtime/requesting.py)."""
        await request_step(self, op)

    def _finish_failure(
        self, op: Operation, turn: ModelTurn, target: State, reason: str, **extra: Any
    ) -> None:
        """End ``op`` in ``target`` with ``turn``'s failure (runtime/requesting.py; retry.py too)."""
        finish_failure(self, op, turn, target, reason, **extra)

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
