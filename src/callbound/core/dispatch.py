"""Dispatch planning: decide, per proposed call, whether it runs, waits for a human or is rejected.

Pure: it takes the calls, the registry and the trusted context and returns a plan. The runtime
executes the plan. Rejections are data (error envelopes for the model), never exceptions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ValidationError

from .arguments import parse_arguments
from .canonical import canonical_json, sha256_hex
from .errors import CanonicalizationError
from .ids import default_intent_key
from .registry import CallContext, Registry, ToolSpec, discard_awaitable, format_validation_error
from .types import ToolCall

# Error codes the model may receive. Stable: users match on them.
DUPLICATE_CALL_ID = "DUPLICATE_CALL_ID"
UNKNOWN_TOOL = "UNKNOWN_TOOL"
INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
DENIED = "DENIED"
HANDLER_ERROR = "HANDLER_ERROR"
TIMEOUT = "TIMEOUT"
RESULT_TOO_LARGE = "RESULT_TOO_LARGE"
NO_PROGRESS = "NO_PROGRESS"
APPROVAL_EXPIRED = "APPROVAL_EXPIRED"
APPROVAL_STALE = "APPROVAL_STALE"
OUTCOME_UNKNOWN = "OUTCOME_UNKNOWN"
NOT_RUN = "NOT_RUN"
IN_PROGRESS = "IN_PROGRESS"

PolicyAuthorize = Callable[[ToolSpec, Any, CallContext], bool]


@dataclass(frozen=True, slots=True)
class Execute:
    call: ToolCall
    spec: ToolSpec
    args: BaseModel
    arguments_json: str  # canonical JSON of the arguments as sent
    idempotency_key: str | None
    ctx: CallContext

    @property
    def argument_digest(self) -> str:
        return sha256_hex(self.arguments_json)


@dataclass(frozen=True, slots=True)
class NeedsApproval:
    call: ToolCall
    spec: ToolSpec
    args: BaseModel
    arguments_json: str
    idempotency_key: str | None
    ctx: CallContext

    @property
    def argument_digest(self) -> str:
        return sha256_hex(self.arguments_json)


@dataclass(frozen=True, slots=True)
class Reject:
    call: ToolCall
    code: str
    message: str
    spec: ToolSpec | None = None
    arguments_json: str | None = None


PlanItem = Execute | NeedsApproval | Reject


@dataclass(frozen=True, slots=True)
class TrustedOperation:
    """Facts about the operation that come from its own row, never from the model."""

    operation_id: str
    tenant: str
    subject: str
    deadline: datetime | None


def hook_verdict(fn: Callable[[], object]) -> tuple[bool, str | None]:
    """Run a user hook that answers yes or no: ``(answer, None)`` when it returned a real bool, else
    ``(False, why)``. Fail closed: only ``True`` is a yes. Its answer's truth value is never taken, so
    a truthy non-bool (a denial reason string, a coroutine) cannot allow a call, and an answer whose
    ``__bool__`` raises (an array) cannot escape the loop (D4). ``why`` names the type, never a value."""
    try:
        result = fn()
    except Exception as exc:  # hooks are user code
        return False, f"raised {type(exc).__name__}"
    if result is True or result is False:
        return result, None
    if discard_awaitable(result):
        # a sync function that hands back a coroutine (a lambda around an async def)
        return False, "returned an awaitable instead of True or False"
    return False, f"returned {type(result).__name__}, not True or False"


def _denied(why: str | None) -> str:
    """The end of a denial message: what the hook answered, when it was not a plain False."""
    return "" if why is None else f" (the hook {why}; only True allows)"


def plan_call(
    call: ToolCall,
    registry: Registry,
    offered: frozenset[str] | None,
    op: TrustedOperation,
    policy_authorize: PolicyAuthorize | None = None,
) -> PlanItem:
    """Plan one call whose id is unique within its response."""
    spec = registry.get(call.name)
    if spec is None or (offered is not None and call.name not in offered):
        # Never echo an arbitrary model string back unbounded.
        shown = call.name if isinstance(call.name, str) else repr(call.name)
        return Reject(
            call, UNKNOWN_TOOL, f"unknown tool {shown[:100]!r}; call one of the tools you were given"
        )
    if call.arguments_error is not None:
        return Reject(call, INVALID_ARGUMENTS, f"arguments rejected: {call.arguments_error}", spec)
    # Fix: ``call.arguments`` was trusted as given, so a ToolCall carrying a DuplicateKeyDict (object-style
    # arguments read with loads_body) ran with the last duplicate's value. Dispatch is the gate: check the
    # parsed dict the same way as raw arguments (D5).
    arguments, why = parse_arguments(call.arguments if call.arguments is not None else call.arguments_raw)
    if arguments is None:
        return Reject(call, INVALID_ARGUMENTS, f"arguments rejected: {why}", spec)
    try:
        arguments_json = canonical_json(arguments)
    except CanonicalizationError as exc:
        return Reject(call, INVALID_ARGUMENTS, f"arguments rejected: {exc}", spec)
    try:
        # Validate the values as sent, not their canonical text: RFC 8785 writes 1.0 as 1, which an
        # int field would accept although the model sent a float (D5). The parser kept 1.0 a float.
        args = spec.validate_json(json.dumps(arguments))
    except ValidationError as exc:
        mismatch: str | None = format_validation_error(exc)
    else:
        mismatch = spec.folded(args, arguments)  # a set or an int-keyed map that dropped what was sent
    if mismatch is not None:
        return Reject(
            call, INVALID_ARGUMENTS, f"arguments do not match the schema: {mismatch}", spec, arguments_json
        )
    key: str | None = None
    base_ctx = CallContext(op.operation_id, op.tenant, op.subject, call.call_id, spec.name, None, op.deadline)
    if spec.is_write:
        if spec.intent_key is not None:
            try:
                raw_key = spec.intent_key(args, base_ctx)
                # a coroutine's text differs on every call: no intent could ever be found again
                named = "" if discard_awaitable(raw_key) else str(raw_key or "")
            except Exception:  # user code: fail closed, do not leak internals
                named = ""
            if not named:
                return Reject(
                    call,
                    HANDLER_ERROR,
                    "the tool could not name the intent of this call",
                    spec,
                    arguments_json,
                )
            # Always prefixed, so the mapping from the hook's text to the key is one-to-one: keeping a
            # text that already began with "ik_" made "ik_A1:40.0" (an order the model named "ik_A1")
            # and "A1:40.0" one intent, and the second refund replayed the first one's result (D13).
            key = f"ik_{named}"
        else:
            key = default_intent_key(spec.name, spec.schema_version, arguments, op.operation_id)
    ctx = CallContext(op.operation_id, op.tenant, op.subject, call.call_id, spec.name, key, op.deadline)
    if spec.authorize is not None:
        allowed, why = hook_verdict(lambda: spec.authorize(args, ctx))  # type: ignore[misc]
        if not allowed:
            message = f"not allowed to call {spec.name} with these arguments{_denied(why)}"
            return Reject(call, DENIED, message, spec, arguments_json)
    if policy_authorize is not None:
        allowed, why = hook_verdict(lambda: policy_authorize(spec, args, ctx))
        if not allowed:
            message = f"policy does not allow {spec.name} here{_denied(why)}"
            return Reject(call, DENIED, message, spec, arguments_json)
    needs, err = hook_verdict(lambda: spec.needs_approval(args, ctx))
    if err is not None:
        # Cannot tell whether a human must look: ask one (needs_approval itself answers True for a
        # rule that returned something other than a bool; this covers a rule that raised).
        needs = True
    if needs:
        return NeedsApproval(call, spec, args, arguments_json, key, ctx)
    return Execute(call, spec, args, arguments_json, key, ctx)


def plan_turn(
    calls: Sequence[ToolCall],
    registry: Registry,
    offered: frozenset[str] | None,
    op: TrustedOperation,
    policy_authorize: PolicyAuthorize | None = None,
) -> list[PlanItem]:
    """Plan every call of one response, in proposal order.

    A call id repeated within the response is ambiguous: none of those calls runs and exactly one
    ``DUPLICATE_CALL_ID`` rejection stands for that id (D7).
    """
    counts: dict[str, int] = {}
    for c in calls:  # a plain dict: Counter costs more than the rest of planning for one call
        counts[c.call_id] = counts.get(c.call_id, 0) + 1
    plan: list[PlanItem] = []
    seen_dup: set[str] = set()
    for call in calls:
        if counts[call.call_id] > 1:
            if call.call_id in seen_dup:
                continue
            seen_dup.add(call.call_id)
            plan.append(
                Reject(
                    call,
                    DUPLICATE_CALL_ID,
                    f"call id {call.call_id!r} was used by {counts[call.call_id]} calls; none ran",
                )
            )
            continue
        plan.append(plan_call(call, registry, offered, op, policy_authorize))
    return plan
