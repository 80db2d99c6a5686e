"""Approvals: what a pause records, how a decision is recorded (single use), and re-validation (D17)."""

from __future__ import annotations

import hashlib
import hmac
import json
import unicodedata
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from .errors import ApprovalAlreadyDecided, UsageError

# "withdrawn": the operation ended (cancelled, out of time, stopped) while the approval was pending, or
# it expired undecided and the runtime told the model so; no decision can take effect any more, and the
# store stops listing it as pending. Only a pending approval can be withdrawn: the stores refuse a
# commit that would withdraw a decided one (ApprovalChanged), so a decision is never overwritten.
ApprovalStatus = Literal["pending", "approved", "denied", "withdrawn"]
DEFAULT_APPROVAL_TTL = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class PendingApproval:
    approval_id: str
    operation_id: str
    tenant: str
    subject: str
    response_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any] | None  # shown to the approver; may be redacted by the tool
    argument_digest: str
    policy_revision: str
    schema_version: str
    tool_digest: str
    created_at: datetime
    expires_at: datetime
    status: ApprovalStatus = "pending"
    approver: str | None = None
    decided_at: datetime | None = None
    reason: str | None = None
    # The seal of a decision recorded by callbound (``decision_seal``): a status edited to "approved"
    # in the database carries none that verifies (D20, review round 17, r3 F1).
    decision_seal: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {
            "approval_id": self.approval_id,
            "operation_id": self.operation_id,
            "tenant": self.tenant,
            "subject": self.subject,
            "response_id": self.response_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "argument_digest": self.argument_digest,
            "policy_revision": self.policy_revision,
            "schema_version": self.schema_version,
            "tool_digest": self.tool_digest,
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "status": self.status,
            "approver": self.approver,
            "decided_at": None if self.decided_at is None else self.decided_at.isoformat(),
            "reason": self.reason,
        }
        if self.decision_seal is not None:  # rows without one keep their stored shape
            d["decision_seal"] = self.decision_seal
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> PendingApproval:
        return PendingApproval(
            approval_id=d["approval_id"],
            operation_id=d["operation_id"],
            tenant=d["tenant"],
            subject=d["subject"],
            response_id=d["response_id"],
            call_id=d["call_id"],
            tool=d["tool"],
            arguments=d.get("arguments"),
            argument_digest=d["argument_digest"],
            policy_revision=d["policy_revision"],
            schema_version=d["schema_version"],
            tool_digest=d["tool_digest"],
            created_at=datetime.fromisoformat(d["created_at"]),
            expires_at=datetime.fromisoformat(d["expires_at"]),
            status=d["status"],
            approver=d.get("approver"),
            decided_at=None if d.get("decided_at") is None else datetime.fromisoformat(d["decided_at"]),
            reason=d.get("reason"),
            decision_seal=d.get("decision_seal"),
        )


# The HMAC key of a seal made without CALLBOUND_AUDIT_KEY: such a seal finds a naive edit of a decided
# row (its status set to "approved" by hand), as the unkeyed chain finds naive edits (D20); a writer who
# also recomputes it gets through, as with the chain. With the key, they do not.
_UNKEYED = b"callbound decision seal v1"


def decision_seal(approval: PendingApproval, key: bytes | None) -> str:
    """HMAC-SHA256 of what a decision says and which call it lets run: the approval and its operation,
    tenant, call and argument digest, the verdict, approver, time and reason. Recorded by whoever
    decides (``Runner.decide``, ``callbound approvals approve|deny``, a resume's decisions) and checked
    by a resume before the decision takes effect, and by ``audit verify``."""
    a = approval
    said = [
        a.approval_id,
        a.operation_id,
        a.tenant,
        a.call_id,
        a.argument_digest,
        a.status,
        a.approver,
        None if a.decided_at is None else a.decided_at.isoformat(),
        a.reason,
    ]
    body = json.dumps(said, ensure_ascii=True, separators=(",", ":")).encode()
    return hmac.new(key or _UNKEYED, body, hashlib.sha256).hexdigest()


def seal_holds(approval: PendingApproval, key: bytes | None) -> bool:
    """True if the approval's decision carries the seal of what it says (constant-time comparison)."""
    got = approval.decision_seal
    if not isinstance(got, str):
        return False
    return hmac.compare_digest(decision_seal(approval, key).encode(), got.encode("utf-8", "replace"))


def identity(name: str) -> str:
    """The form in which two names of a person compare: Unicode NFKC-normalised, case-folded and
    stripped, so "CUSTOMER-1", "customer-1 " and a full-width "ｃｕｓｔｏｍｅｒ-1" are one identity.
    Compared as typed, they let an operation's own subject approve its own call (D17). NFKC runs again
    after case folding, which can leave text that is no longer normalised."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold()).strip()


def same_identity(a: str | None, b: str | None) -> bool:
    """True if ``a`` and ``b`` name the same person (see ``identity``); a missing name matches none."""
    return a is not None and b is not None and identity(a) == identity(b)


def _named(approver: object) -> bool:
    # Fix: a blank approver ("  ") or a non-string passed the old ``if not approver`` check, leaving a
    # decision with nobody accountable for it in the audit trail.
    return isinstance(approver, str) and bool(approver.strip())


def _unencodable(text: str) -> str | None:
    """Where ``text`` holds a lone surrogate (no UTF-8 form), shown as an escape; None if it has none.
    Local, since core may not import runtime's ``check_text``: the same rule."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"{text[exc.start]!r} at {exc.start}"
    return None


@dataclass(frozen=True, slots=True)
class Decision:
    """A human's verdict on one approval. Build with ``Decision.approve`` or ``Decision.deny``."""

    approval_id: str
    verdict: Literal["approve", "deny"]
    approver: str
    reason: str | None = None

    def __post_init__(self) -> None:
        # The plain constructor is checked like approve() and deny(): a verdict is approve or deny
        # (anything else is no decision at all), and someone named is accountable for it. The name is
        # kept without surrounding whitespace, so " alice" and "alice" are one approver (D17: a padded
        # subject name must not pass for someone else).
        if self.verdict not in ("approve", "deny"):
            raise UsageError(f"Decision verdict must be 'approve' or 'deny', not {self.verdict!r}")
        if not _named(self.approver):
            raise UsageError(f"Decision.{self.verdict} needs an approver name")
        # The reason and the name are recorded on the approval, hashed into the audit chain and sent
        # to the model with a denial. A reason that is not text (reason=5), or text with a lone
        # surrogate (a Latin-1 byte from the shell, read under surrogateescape), was recorded, and then
        # every resume raised; the decision being single use (D17), the operation was stuck in
        # WAITING_APPROVAL. Refused here, before anything is recorded.
        if self.reason is not None and not isinstance(self.reason, str):
            raise UsageError(
                f"Decision reason must be text or None, not {type(self.reason).__name__} {self.reason!r}"
            )
        for what, text in (("approver name", self.approver), ("reason", self.reason)):
            where = None if text is None else _unencodable(text)
            if where is not None:
                raise UsageError(
                    f"the decision's {what} holds a lone surrogate ({where}), which cannot be recorded: "
                    "a byte that is not UTF-8 (check the terminal's encoding) or half of a character "
                    "outside the BMP"
                )
        object.__setattr__(self, "approver", self.approver.strip())

    @staticmethod
    def approve(approval_id: str, approver: str, reason: str | None = None) -> Decision:
        if not _named(approver):
            raise UsageError("Decision.approve needs an approver name")
        return Decision(approval_id, "approve", approver, reason)

    @staticmethod
    def deny(approval_id: str, approver: str, reason: str | None = None) -> Decision:
        if not _named(approver):
            raise UsageError("Decision.deny needs an approver name")
        return Decision(approval_id, "deny", approver, reason)

    @property
    def status(self) -> ApprovalStatus:
        return "approved" if self.verdict == "approve" else "denied"


def record_decision(
    pending: PendingApproval, decision: Decision, now: datetime
) -> tuple[PendingApproval, bool]:
    """Apply a decision. Returns (approval, changed). Single use (D17): the same verdict from the same
    approver returns the original decision unchanged; anything else on a decided approval raises."""
    if decision.approval_id != pending.approval_id:
        raise UsageError("decision is for another approval")
    if pending.status == "withdrawn":
        raise ApprovalAlreadyDecided(
            f"approval {pending.approval_id} was withdrawn at "
            f"{pending.decided_at.isoformat() if pending.decided_at else '?'} ({pending.reason}); "
            "its operation has ended and cannot run the call"
        )
    if pending.status != "pending":
        # The same approver as compared everywhere else: "Alice" repeating alice's approval gets the
        # original back rather than an error about a decision that is hers.
        if pending.status == decision.status and same_identity(pending.approver, decision.approver):
            return pending, False
        raise ApprovalAlreadyDecided(
            f"approval {pending.approval_id} was already {pending.status} by {pending.approver} "
            f"at {pending.decided_at.isoformat() if pending.decided_at else '?'}"
        )
    decided = replace(
        pending, status=decision.status, approver=decision.approver, decided_at=now, reason=decision.reason
    )
    return decided, True


def withdraw(pending: PendingApproval, now: datetime, why: str) -> PendingApproval:
    """The approval of an operation that ended before anyone decided it: no longer pending, and no
    decision can be recorded on it."""
    return replace(pending, status="withdrawn", decided_at=now, reason=why)


def expire(pending: PendingApproval, now: datetime, told: str | None) -> PendingApproval:
    """An approval nobody decided before ``expires_at``, resolved by the runtime (the model was told
    ``told``, APPROVAL_EXPIRED as a rule; None: the operation stopped instead, under
    ``Policy(on_approval_expired="stop")``, and nothing was sent): withdrawn, since no decision can take
    effect any more, and so no longer listed as pending once its operation has moved on."""
    then = "the operation stopped STOPPED(APPROVAL_EXPIRED)" if told is None else f"the model was told {told}"
    return withdraw(
        pending, now, f"expired at {pending.expires_at.isoformat()} before anyone decided; {then}"
    )


def is_expired(pending: PendingApproval, now: datetime) -> bool:
    return now >= pending.expires_at


def revalidate(
    pending: PendingApproval,
    now: datetime,
    *,
    argument_digest: str,
    policy_revision: str,
    schema_version: str,
    tool_digest: str,
) -> str | None:
    """On resume, before executing an approved call: None if it may run, else the error code for the
    model. Expiry wins: an approval decided after it expired still expired."""
    decided_at = pending.decided_at or now
    if decided_at >= pending.expires_at or (pending.status == "pending" and now >= pending.expires_at):
        return "APPROVAL_EXPIRED"
    if (
        argument_digest != pending.argument_digest
        or policy_revision != pending.policy_revision
        or schema_version != pending.schema_version
        or tool_digest != pending.tool_digest
    ):
        return "APPROVAL_STALE"
    if pending.status != "approved":  # denied, or withdrawn (never resumed; fail closed all the same)
        return "DENIED"
    return None
