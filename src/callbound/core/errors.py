"""callbound's error tree.

::

    CallboundError                 base of every error callbound raises on purpose
    ├── UsageError                 the caller misused the API (fix your code)
    │   ├── UnsupportedSchema      a tool schema a provider cannot express (raised when binding, D9)
    │   ├── ScriptExhausted        ScriptedModel has no response k (D24)
    │   ├── ApprovalAlreadyDecided another decision was recorded first (D17)
    │   ├── UnknownApproval        no approval with this id (or it belongs to another tenant)
    │   ├── UnknownLedgerEntry     no idempotency-ledger entry for this tenant and key
    │   ├── SettleRefused          the ledger entry may not be settled by hand now (D16)
    │   └── OperationExists        run()/submit() named an operation id the store already has (also a
    │                              StoreError: the store raises it)
    ├── ProtocolViolation          the model or provider broke its wire contract
    │   └── EventTooLarge          a stream event outgrew StreamCaps.max_body_bytes
    ├── CorrelationError           results do not pair one-to-one with the proposed calls
    ├── BindingMismatch            a result's binding does not match its trusted context
    ├── IllegalTransition          a state change the transition table does not allow
    ├── CanonicalizationError      a value RFC 8785 cannot represent exactly (D6; also a ValueError)
    ├── StoreError                 the store is unreachable or refused a write
    │   ├── SchemaVersionError     the database is newer than this code (D19)
    │   ├── StaleLease             a fenced write lost its lease (D21)
    │   ├── ApprovalChanged        a commit would withdraw an approval someone has just decided (D17)
    │   ├── OperationBusy          another driver holds the operation's lease; wait, then resume (D21)
    │   ├── IntentTaken            another operation claimed the same intent first; decided again (D13)
    │   ├── LedgerChanged          a ledger entry changed between a settle's read and its write (D13)
    │   └── OperationExists        (see UsageError)
    └── NotApplied                 raised by a write handler: the effect definitely did not happen (D16)

Only ``UsageError`` and ``StoreError`` escape ``Runner.run``/``Runner.resume`` (D4); everything the model,
provider or tools do ends up in the returned ``Outcome``.
"""

from __future__ import annotations


class CallboundError(Exception):
    """Base of every error callbound raises on purpose."""


class UsageError(CallboundError):
    """The caller used the API in a way it does not support. The message says what to change."""


class UnsupportedSchema(UsageError):
    """A tool's JSON Schema cannot be expressed for a provider (D9)."""


class ScriptExhausted(UsageError):
    """ScriptedModel was asked for a response it does not have (D24)."""


class ApprovalAlreadyDecided(UsageError):
    """A different decision was already recorded for this approval (D17)."""


class UnknownApproval(UsageError):
    """No approval with this id exists (or it belongs to another tenant)."""


class UnknownLedgerEntry(UsageError):
    """The idempotency ledger holds no entry for this (tenant, key): a mistyped key or tenant, or an
    intent never started."""

    def __init__(self, tenant: str, key: str) -> None:
        self.tenant, self.key = tenant, key
        super().__init__(
            f"no ledger entry for key {key} of tenant {tenant}; check the key and the tenant "
            "(callbound ledger list shows them, the escalation record names the keys)"
        )


class SettleRefused(UsageError):
    """A ledger entry may not be settled by hand in its present state (D16): it is settled already,
    or the operation that holds it has not ended and is the one to reconcile it. ``reason`` says why
    and what to do instead."""

    def __init__(self, tenant: str, key: str, reason: str) -> None:
        self.tenant, self.key, self.reason = tenant, key, reason
        super().__init__(f"ledger entry {key} of tenant {tenant} was not settled: {reason}")


class ProtocolViolation(CallboundError):
    """The model or provider sent something its own wire contract forbids."""


class EventTooLarge(ProtocolViolation):
    """One stream event, or a line not yet ended, grew past ``StreamCaps.max_body_bytes`` before it was
    complete. The stream reader raises it; ``StreamFeed`` (which transports, ``ScriptedModel`` and
    ``callbound parse`` read streams through) catches it and stops reading, and the turn is
    TRUNCATED(response_too_large) with its failure's ``error_code`` ``max_body_bytes``: the setting to
    raise, which a run's history and ``callbound parse`` show. This message says the same to a caller
    of the reader itself."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"a stream event grew past {limit} characters before it ended; raise StreamCaps.max_body_bytes "
            "if the provider really sends events this large"
        )
        self.limit = limit


class CorrelationError(CallboundError):
    """Results do not pair one-to-one with proposed calls (missing, duplicate or unknown)."""


class BindingMismatch(CallboundError):
    """A result envelope's binding differs from the one recomputed from trusted context."""


class IllegalTransition(CallboundError):
    """The transition table in ``core.states`` does not allow this state change."""

    def __init__(self, source: str, target: str, cause: str = "") -> None:
        self.source = source
        self.target = target
        self.cause = cause
        super().__init__(f"illegal transition {source} -> {target}" + (f" ({cause})" if cause else ""))


class CanonicalizationError(CallboundError, ValueError):
    """A value has no exact RFC 8785 representation (NaN, Infinity, huge integers, lone surrogates)."""


class StoreError(CallboundError):
    """The store is unreachable or refused an operation."""


class SchemaVersionError(StoreError):
    """The database was written by a newer callbound; refuse to touch it (D19)."""


class StaleLease(StoreError):
    """A write carried a fencing token that is no longer current (D21)."""


class ApprovalChanged(StoreError):
    """A commit would mark an approval as no longer pending (withdrawn when its operation ends, or
    expired), but the approval is not pending any more: an approver's decision was recorded after the
    writer read it. The store refused the commit whole, so the decision stands (the approver was told
    it was recorded); the writer reads the operation again and decides again."""

    def __init__(self, approval_id: str, status: str | None) -> None:
        self.approval_id, self.status = approval_id, status
        super().__init__(
            f"approval {approval_id} is no longer pending (it is {status or 'gone'}): a decision was "
            "recorded after this commit read it, so the commit was refused and the decision kept; "
            "reload the operation and retry"
        )


class OperationBusy(StoreError):
    """Another process, worker or drive holds the operation's lease (D21): it may be running one of
    its calls right now, so this one must not drive it too. Wait for it to finish, or for its lease
    to expire, then resume."""

    def __init__(self, operation_id: str, holder: str | None) -> None:
        self.operation_id = operation_id
        self.holder = holder
        who = f" ({holder})" if holder else ""
        super().__init__(
            f"operation {operation_id} is being driven elsewhere{who}; wait for it to finish or for its "
            "lease to expire (a lease lasts lease_s seconds after its holder's last renewal), then resume it"
        )


class IntentTaken(StoreError):
    """Another operation claimed the same intent (tenant, idempotency key) between this operation's
    ledger read and its STARTED commit. The commit was refused, so nothing of it was written and no
    handler ran; the runner takes back that claim and decides the write again, keeping the answered
    turn (the other operation's entry now says IN_PROGRESS or replays its result), so a refund never
    runs twice (D13, D16)."""

    def __init__(self, tenant: str, key: str, holder: str) -> None:
        self.tenant, self.key, self.holder = tenant, key, holder
        super().__init__(
            f"intent {key} of tenant {tenant} was just started by operation {holder}; resume this "
            "operation to see that operation's outcome"
        )


class LedgerChanged(StoreError):
    """A settle compares the ledger entry it decided on with the stored one and writes only if they
    are equal; they were not (another operation claimed the intent, or recorded its outcome, or
    someone settled it first). Nothing was written: read the entry again and decide again."""

    def __init__(self, tenant: str, key: str) -> None:
        self.tenant, self.key = tenant, key
        super().__init__(
            f"ledger entry {key} of tenant {tenant} changed since it was read, so nothing was written; "
            "read it again (callbound ledger show) and decide again"
        )


class OperationExists(UsageError, StoreError):
    """A new operation was given an id the store already holds: the caller's mistake (a UsageError,
    D4), raised by the store (so also a StoreError, as before). Resume that operation
    (``Runner.resume``) or start a new one with another id (or none: callbound makes one)."""

    def __init__(self, operation_id: str) -> None:
        self.operation_id = operation_id
        super().__init__(
            f"operation {operation_id} already exists; resume it with Runner.resume({operation_id!r}) "
            "or start a new operation with another operation_id"
        )


class NotApplied(CallboundError):
    """Raised by a write handler to say its effect definitely did not happen (D16)."""


# What code of the user's (a hook, a validator in a tool's params, a serializer of a returned model) may
# raise as its own failure, which becomes that call's verdict or error envelope, never an exception out
# of run() (D4): every Exception, and SystemExit (sys.exit() in code it calls: a wrapped command-line
# program, argparse on bad input). KeyboardInterrupt still ends the run.
USER_CODE_FAILURES: tuple[type[BaseException], ...] = (Exception, SystemExit)
