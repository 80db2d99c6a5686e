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
from ..core.states import State
from ..core.types import Transition, Usage


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
