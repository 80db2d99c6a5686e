"""Dispatch planning: decide, per proposed call, whether it runs, waits for a human or is rejected.

Pure: it takes the calls, the registry and the trusted context and returns a plan. The runtime
executes the plan. Rejections are data (error envelopes for the model), never exceptions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ValidationError

from .arguments import parse_arguments
from .canonical import canonical_json, sha256_hex
from .errors import USER_CODE_FAILURES, CanonicalizationError
from .idempotency import arguments_identity, default_intent_key_json
from .registry import CallContext, Registry, ToolSpec, discard_awaitable
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
IN_PROGRESS = "IN_PROGRESS"
# No code says "outcome unknown" or "not run": a write whose outcome nobody can tell stops the operation
# STOPPED(OUTCOME_UNKNOWN) before the model hears anything (D16), and a call a stop leaves unrun is
# named in the escalation record, not sent (docs/stop-reasons.md).

PolicyAuthorize = Callable[[ToolSpec, Any, CallContext], bool]

# The longest text (UTF-8 bytes) ToolSpec.intent_key may name an intent by: every store can key its
# ledger by it, beside a tenant.
MAX_INTENT_KEY_BYTES = 1024


@dataclass(frozen=True, slots=True)
class Execute:
    call: ToolCall
    spec: ToolSpec
    args: BaseModel
    arguments_json: str  # canonical JSON of the arguments as sent (digests, audit, re-validation)
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


# D11: a rejection goes to the model as a result and, in stateless replay, again with every later
# request, so what it echoes of the model's own text (key names, locations, call ids) is bounded.
MAX_SHOWN_NAME = 64  # characters of one echoed name or location, after escaping
MAX_ERROR_MESSAGE = 1024  # UTF-8 bytes of a whole rejection message
_MAX_SHOWN_MSG = 160  # one validation error's own text (a validator's message may quote the input)
_TAIL_ROOM = 40  # kept free for "; and N more errors"
_TOKEN = re.compile(r"\s+|\S+")


def shown(text: str, limit: int = MAX_SHOWN_NAME) -> str:
    """``text`` as it may be shown back to the model: characters that do not print (controls, line
    and paragraph separators, lone surrogates) escaped as ``repr`` writes them (``\\x00``, ``\\n``,
    ``\\u2028``), then cut on a whole character after ``limit`` characters, with an ellipsis and the
    number of characters left out."""
    if len(text) <= limit and text.isprintable():
        return text
    out: list[str] = []
    used = 0
    for i, ch in enumerate(text):
        piece = ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
        if used + len(piece) > limit:
            return "".join(out) + f"…(+{len(text) - i} chars)"
        out.append(piece)
        used += len(piece)
    return "".join(out)


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _bounded(text: str, budget: int = MAX_ERROR_MESSAGE) -> str:
    """A free text that may quote the model (a parser's or an adapter's reason): each word shortened
    by ``shown``, the whole at most ``budget`` bytes of UTF-8, cut between words with an ellipsis.
    Lazy: a 200 KB key costs one regex match and a few dozen characters, not a walk of all of it."""
    out: list[str] = []
    size = 0
    for match in _TOKEN.finditer(text):
        piece = shown(match.group())
        n = _utf8_len(piece)
        if size + n > budget - 3:  # 3: the ellipsis
            out.append("…")
            break
        out.append(piece)
        size += n
    return "".join(out)


def _schema_errors(exc: ValidationError, budget: int) -> str:
    """Field paths and what was wrong, no input values (they may be sensitive); each location part
    shortened, as many errors as fit in ``budget`` bytes, then how many more there were (D11)."""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    parts: list[str] = []
    size = 0
    for n, err in enumerate(errors):
        loc = ".".join(shown(str(p)) for p in err.get("loc", ())) or "$"
        if len(loc) > 4 * MAX_SHOWN_NAME:  # deep nesting: the start says where
            loc = loc[: 4 * MAX_SHOWN_NAME] + "…"
        part = f"{loc}: {shown(str(err.get('msg', 'invalid')), _MAX_SHOWN_MSG)}"
        cost = _utf8_len(part) + 2
        if parts and size + cost > budget - _TAIL_ROOM:
            parts.append(f"and {len(errors) - n} more errors")
            break
        parts.append(part)
        size += cost
    return "; ".join(parts)


def _capped(text: str, budget: int = MAX_ERROR_MESSAGE) -> str:
    """At most ``budget`` bytes of UTF-8, cut on a whole character (a last guard: the parts are
    bounded already)."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= budget:
        return text
    return data[: budget - 3].decode("utf-8", "ignore") + "…"


def _invalid(call: ToolCall, spec: ToolSpec, message: str, arguments_json: str | None = None) -> Reject:
    return Reject(call, INVALID_ARGUMENTS, _capped(message), spec, arguments_json)


def hook_verdict(fn: Callable[[], object]) -> tuple[bool, str | None]:
    """Run a user hook that answers yes or no: ``(answer, None)`` when it returned a real bool, else
    ``(False, why)``. Fail closed: only ``True`` is a yes. Its answer's truth value is never taken, so
    a truthy non-bool (a denial reason string, a coroutine) cannot allow a call, and an answer whose
    ``__bool__`` raises (an array) cannot escape the loop (D4). ``why`` names the type, never a value."""
    try:
        result = fn()
    except USER_CODE_FAILURES as exc:  # hooks are user code
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
        name = call.name if isinstance(call.name, str) else repr(call.name)
        return Reject(
            call, UNKNOWN_TOOL, f"unknown tool {name[:100]!r}; call one of the tools you were given"
        )
    if call.arguments_error is not None:
        return _invalid(call, spec, _bounded(f"arguments rejected: {call.arguments_error}"))
    # Fix: ``call.arguments`` was trusted as given, so a ToolCall carrying a DuplicateKeyDict (object-style
    # arguments read with loads_body) ran with the last duplicate's value. Dispatch is the gate: check the
    # parsed dict the same way as raw arguments (D5).
    arguments, why = parse_arguments(call.arguments if call.arguments is not None else call.arguments_raw)
    if arguments is None:
        return _invalid(call, spec, _bounded(f"arguments rejected: {why}"))
    try:
        arguments_json = canonical_json(arguments)
    except CanonicalizationError as exc:
        return _invalid(call, spec, _bounded(f"arguments rejected: {exc}"))
    prefix = "arguments do not match the schema: "
    try:
        # Validate the values as sent, not their canonical text: RFC 8785 writes 1.0 as 1, which an
        # int field would accept although the model sent a float (D5). The parser kept 1.0 a float.
        args = spec.validate_json(json.dumps(arguments))
    except ValidationError as exc:
        try:
            mismatch: str | None = _schema_errors(exc, MAX_ERROR_MESSAGE - len(prefix))
        except USER_CODE_FAILURES:  # a validator's message whose text cannot be read
            mismatch = "the arguments are not valid"
    except USER_CODE_FAILURES as exc:
        # g19: a validator in the user's model raised something pydantic does not wrap (a KeyError from
        # a lookup): the call is rejected, never an exception out of run() or resume() (D4). Its type
        # only: its text may hold secrets, or be huge.
        message = f"arguments could not be validated: the tool's schema raised {shown(type(exc).__name__)}"
        return _invalid(call, spec, message, arguments_json)
    else:
        try:
            # a set or an int-keyed map that dropped what was sent; its text names the sent keys
            folded = spec.folded(args, arguments)
            mismatch = None if folded is None else _bounded(folded, MAX_ERROR_MESSAGE - len(prefix))
        except USER_CODE_FAILURES as exc:  # it walks the user's validated model (D4)
            kind = shown(type(exc).__name__)
            message = f"arguments could not be checked: reading the validated arguments raised {kind}"
            return _invalid(call, spec, message, arguments_json)
    if mismatch is not None:
        return _invalid(call, spec, prefix + mismatch, arguments_json)
    key: str | None = None
    base_ctx = CallContext(op.operation_id, op.tenant, op.subject, call.call_id, spec.name, None, op.deadline)
    if spec.is_write:
        if spec.intent_key is not None:
            try:
                raw_key = spec.intent_key(args, base_ctx)
                # a coroutine's text differs on every call: no intent could ever be found again. Only
                # text names an intent (reference.md: "ik_ and the text of ToolSpec.intent_key"): an
                # int 5 became the key "ik_5", shared with a hook returning "5", and an object's
                # str() could carry its address (a new intent on every run) (review round 16, F12).
                unusable = discard_awaitable(raw_key) or not isinstance(raw_key, str)
                named = "" if unusable else raw_key
                # The key is hashed into the audit chain and bound in SQL: a lone surrogate (text
                # decoded with surrogateescape) raised UnicodeEncodeError out of run() (D4). Such a
                # key names no intent: rejected like a hook that raised, before anything runs.
                if len(named.encode("utf-8")) > MAX_INTENT_KEY_BYTES:
                    # PostgreSQL keys the ledger by (tenant, key) in a btree whose rows hold at most
                    # 2704 bytes: a longer key failed the commit with a StoreError after the paid turn,
                    # on every resume; the other stores took it (one intent, one form on every store)
                    named = ""
                if "\x00" in named:
                    # nor a NUL, which PostgreSQL cannot hold in the ledger's key: a StoreError out of
                    # run() after the paid turn, on every resume; on the other stores a key of its own
                    # (one intent, one form on every store; review round 18, c F3)
                    named = ""
            except USER_CODE_FAILURES:  # user code (and UnicodeEncodeError): fail closed, no internals
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
            # D13 (1): from the arguments as validated (defaults filled in), which the handler runs on,
            # not as sent: a default left out and the same default sent are one refund (review 17, r2 F2)
            identity = arguments_identity(spec, arguments_json, args)
            key = default_intent_key_json(spec.name, spec.schema_version, identity, op.operation_id)
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
                    f"call id '{shown(str(call.call_id))}' was used by {counts[call.call_id]} calls; none ran",
                )
            )
            continue
        plan.append(plan_call(call, registry, offered, op, policy_authorize))
    return plan
