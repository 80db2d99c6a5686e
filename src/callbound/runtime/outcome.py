"""What ``Runner.run`` returns, and the runner-level policy and price types."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any, Literal

from ..core.approvals import DEFAULT_APPROVAL_TTL, PendingApproval
from ..core.dispatch import PolicyAuthorize
from ..core.errors import UsageError
from ..core.guards import money_amount
from ..core.registry import is_async_callable
from ..core.states import State
from ..core.types import ModelTurn, Transition, Usage
from .operation import WAITING, Operation

# An expiry must stay a datetime: far beyond any real approval, well inside datetime's range.
_MAX_TTL = timedelta(days=365 * 1000)


class ApproverNotAllowed(UsageError):
    """This approver may not decide this approval: the operation's own subject (unless
    ``Policy(allow_self_approval=True)``), or ``Policy.approver_allowed`` did not answer ``True``. An
    approver of another tenant gets ``UnknownApproval`` instead."""


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

    def __post_init__(self) -> None:
        # Fix: fields were not checked. A truthy string (allow_self_approval="false", read from an
        # environment variable) let a subject approve its own call (D17), and approval_ttl=3600 raised
        # TypeError out of run_sync after the model was paid (D4). Each field is checked here.
        if not isinstance(self.revision, str) or not self.revision:
            raise UsageError(f"Policy.revision must be a non-empty str, not {self.revision!r}")
        ttl = self.approval_ttl
        # 0 is allowed: every approval expires at once (the demo's approval-expired scenario)
        if not isinstance(ttl, timedelta) or not timedelta(0) <= ttl <= _MAX_TTL:
            raise UsageError(
                f"Policy.approval_ttl must be a timedelta >= 0 (e.g. timedelta(hours=24)), not {ttl!r}"
            )
        if not isinstance(self.allow_self_approval, bool):
            raise UsageError(
                f"Policy.allow_self_approval must be True or False, not {self.allow_self_approval!r}"
            )
        for hook in ("authorize", "approver_allowed"):
            fn = getattr(self, hook)
            if fn is not None and not callable(fn):
                raise UsageError(f"Policy.{hook} must be a function or None, not {type(fn).__name__}")
            # Called without await while planning and recording decisions: an async hook would
            # return a coroutine, which is truthy, and so allow everything.
            if is_async_callable(fn):
                raise UsageError(f"Policy.{hook} must be a plain (sync) function, not async")
        if self.on_approval_expired not in ("tell_model", "stop"):
            raise UsageError(
                f"Policy.on_approval_expired must be 'tell_model' or 'stop', not {self.on_approval_expired!r}"
            )


@dataclass(frozen=True)
class Price:
    """Price per million tokens, as Decimal."""

    input_per_mtok: Decimal
    output_per_mtok: Decimal

    def __post_init__(self) -> None:
        # Fix: floats were kept, and the first priced turn raised TypeError (float / Decimal) out of
        # run_sync after the model was paid, losing the paid response (D4). Numbers are converted
        # through their text (3.0 -> Decimal("3.0"), D27: cost is a Decimal); what is not a finite
        # amount >= 0 is refused here, like Budgets.max_cost.
        for name in ("input_per_mtok", "output_per_mtok"):
            object.__setattr__(self, name, _amount(name, getattr(self, name)))


def _amount(name: str, value: Any) -> Decimal:
    refused = UsageError(
        f"Price.{name} must be a finite amount >= 0 per million tokens (a Decimal or a number), not {value!r}"
    )
    return money_amount(value, refused)


def priced(usage: Usage, price: Price | None) -> Usage:
    """The usage with its cost from ``price`` where the provider gave none. Missing usage stays null,
    never a cost of 0 (D27): where either count is missing, so is the cost, since pricing the half
    that came would report a part as the whole (as ``guards.check_usage_known`` says for budgets)."""
    if price is None or usage.cost is not None or usage.input_tokens is None or usage.output_tokens is None:
        return usage
    cost = Decimal(0)
    if usage.input_tokens:
        cost += price.input_per_mtok * usage.input_tokens / Decimal(1_000_000)
    if usage.output_tokens:
        cost += price.output_per_mtok * usage.output_tokens / Decimal(1_000_000)
    return Usage(usage.input_tokens, usage.output_tokens, cost)


def with_turn(total: Usage, turn: ModelTurn, usage: Usage, *, first: bool) -> Usage:
    """The operation's usage once ``turn`` (its usage priced: ``usage``) is counted; ``first``: it is
    the operation's first model request, so ``total`` holds no turn yet and the sum starts at zero.
    D27: a count a counted turn lacks makes the operation's count unknown (None) from then on, and so
    does a missing cost (``Usage.__add__``), never the sum of the turns that had one.

    A failed request that reported no usage at all (an HTTP error, a refused connection, a timeout
    before any usage came) is not counted: there is no response whose usage is missing. Budgets do
    not ask it for usage either (``check_after_turn`` runs only on turns that answer or go on), and
    counted as unknown, one retried 429 would leave every later total null. A failed turn that did
    report some usage (a stream cut after its usage event, docs/reference.md) is counted, a count it
    lacks unknown."""
    before = Usage(0, 0, Decimal(0)) if first else total
    if turn.failure is not None and usage == Usage():
        return before
    return before + usage


@dataclass(frozen=True, repr=False)
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

    def __repr__(self) -> str:
        # A summary, not every transition: the generated repr of a long operation is megabytes, and
        # asyncio.run formats the main task (result included) each time it restores the SIGINT
        # handler, so run_sync paid for that repr on every call (~27 µs per round trip
        # at 1,000 turns).
        return (
            f"Outcome(state={self.state.value}, reason={self.reason!r}, operation_id={self.operation_id!r}, "
            f"text={_clip(self.text)}, pending_approvals={len(self.pending_approvals)}, "
            f"transitions={len(self.history)})"
        )

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


def _clip(text: str | None, limit: int = 60) -> str:
    if text is None or len(text) <= limit:
        return repr(text)
    return repr(text[:limit]) + f"…(+{len(text) - limit})"


def outcome_of(store: Any, op: Operation) -> Outcome:
    """The Outcome of an operation as it stands. ``pending_approvals`` lists only the approvals still
    waiting for a decision: in a turn with several, one decided early waits for the rest silently."""
    pending: tuple[PendingApproval, ...] = ()
    if op.state is State.WAITING_APPROVAL and op.current is not None:
        found = []
        for rec in op.current.records:
            if rec.status == WAITING and rec.approval_id:
                a = store.get_approval(rec.approval_id)
                if a is not None and a.status == "pending":
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
