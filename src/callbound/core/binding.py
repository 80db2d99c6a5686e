"""Result envelopes, their SHA-256 binding, and the correlation table (D10).

The binding ties a result to everything that makes it *this* call's result. It is computed when
the envelope is made and recomputed, before anything goes back to the model, from sources held apart
from the envelope: the correlation table (response id, call id, name, arguments), the operation row
(id, tenant, subject), the registry (handler, schema version, policy revision), the ledger (key) and
the result bytes. Comparing the envelope with itself would prove nothing.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .canonical import FlatRecord, canonical_sha256, sha256_hex
from .errors import BindingMismatch, CanonicalizationError, CorrelationError
from .types import ResultEnvelope, ToolCall

PROTECTED_FIELDS = (
    "provider",
    "api",
    "response_id",
    "call_id",
    "operation_id",
    "idempotency_key",
    "adapter_revision",
    "tenant",
    "subject",
    "input",
    "output",
    "effect",
    "handler",
    "producer",
    "policy_revision",
    "request_sha256",
    "result_sha256",
    "call_binding_sha256",
)


@dataclass(frozen=True, slots=True)
class TrustedCall:
    """What callbound itself knows about a call, independent of any envelope."""

    provider: str
    api: str
    adapter_revision: str
    response_id: str
    call_id: str
    tool: str
    arguments_json: str | None  # canonical; None when the arguments were unreadable
    operation_id: str
    tenant: str
    subject: str
    handler: str
    schema_version: str
    policy_revision: str
    idempotency_key: str | None
    effect: str  # none | applied | replayed | not_applied | unknown | reconciled
    producer: str  # handler | ledger | reconcile | callbound


def request_sha256(arguments_json: str | None) -> str:
    return sha256_hex(arguments_json if arguments_json is not None else "null")


# The binding object's keys in canonical (RFC 8785) order; compute_binding passes values in this order.
_BINDING = FlatRecord(
    (
        "adapter_revision",
        "api",
        "call_id",
        "effect",
        "handler",
        "idempotency_key",
        "operation_id",
        "policy_revision",
        "producer",
        "provider",
        "request_sha256",
        "response_id",
        "result_sha256",
        "schema_version",
        "subject",
        "tenant",
        "tool",
        "v",
    )
)


def compute_binding(trusted: TrustedCall, model_result: dict[str, Any], result_sha: str | None = None) -> str:
    """``result_sha`` may be passed when the caller just hashed ``model_result`` itself.

    The binding is the SHA-256 of the canonical JSON (RFC 8785) of the object with the keys of
    ``_BINDING``. It is written out field by field because this runs twice per call;
    ``tests/core/test_binding.py`` checks it against ``canonical_sha256`` of the same dict."""
    t = trusted
    return _BINDING.sha256(
        (
            t.adapter_revision,
            t.api,
            t.call_id,
            t.effect,
            t.handler,
            t.idempotency_key,
            t.operation_id,
            t.policy_revision,
            t.producer,
            t.provider,
            request_sha256(t.arguments_json),
            t.response_id,
            result_sha if result_sha is not None else canonical_sha256(model_result),
            t.schema_version,
            t.subject,
            t.tenant,
            t.tool,
            1,
        )
    )


def make_envelope(
    trusted: TrustedCall, model_result: dict[str, Any], *, output: Any = None, audit_input: Any = None
) -> ResultEnvelope:
    """Build an envelope and its binding from trusted context. ``output`` is the handler's raw return
    value (kept for audit only); ``audit_input`` the (possibly redacted) arguments."""
    result_sha = canonical_sha256(model_result)
    protected = {
        "provider": trusted.provider,
        "api": trusted.api,
        "response_id": trusted.response_id,
        "call_id": trusted.call_id,
        "operation_id": trusted.operation_id,
        "idempotency_key": trusted.idempotency_key,
        "adapter_revision": trusted.adapter_revision,
        "tenant": trusted.tenant,
        "subject": trusted.subject,
        "input": audit_input,
        "output": output,
        "effect": trusted.effect,
        "handler": trusted.handler,
        "producer": trusted.producer,
        "policy_revision": trusted.policy_revision,
        "tool": trusted.tool,
        "schema_version": trusted.schema_version,
        "request_sha256": request_sha256(trusted.arguments_json),
        "result_sha256": result_sha,
        "call_binding_sha256": compute_binding(trusted, model_result, result_sha),
    }
    return ResultEnvelope(trusted.response_id, trusted.call_id, model_result, protected)


def verify_binding(envelope: ResultEnvelope, trusted: TrustedCall) -> str:
    """Recompute the binding from ``trusted`` and the result bytes; raise ``BindingMismatch`` on any
    difference (constant-time comparison). Returns the SHA-256 of the result's canonical JSON, which
    the caller needs next (progress guard, D13) and should not compute twice."""
    try:
        result_sha = canonical_sha256(envelope.model_result)
        expected = compute_binding(trusted, envelope.model_result, result_sha)
    except CanonicalizationError as exc:
        # Fix: an altered model_result with no canonical form (NaN, a lone surrogate) raised
        # CanonicalizationError here instead of the BindingMismatch the runner handles (D4).
        raise BindingMismatch(f"result for call {trusted.call_id!r} cannot be hashed: {exc}") from exc
    # An audit record that is not an object (a row edited to a list or null) raised AttributeError,
    # which the runner does not handle as an integrity failure (D4): it binds nothing.
    audit = envelope.protected_audit
    got = audit.get("call_binding_sha256") if isinstance(audit, dict) else None
    # Fix: hmac.compare_digest raises TypeError on a non-ASCII str, so a tampered binding such as "é"
    # escaped as TypeError instead of BindingMismatch. Compare bytes.
    if not isinstance(got, str) or not hmac.compare_digest(expected.encode(), got.encode("utf-8", "replace")):
        raise BindingMismatch(
            f"result for call {trusted.call_id!r} of response {trusted.response_id!r} is not bound to it; "
            "it was produced for another call or altered after it was made"
        )
    return result_sha


class CorrelationTable:
    """Exactly one result per proposed call, keyed by (response_id, call_id). Never repairs."""

    __slots__ = ("_expected", "_order")

    def __init__(self, calls: Iterable[ToolCall]) -> None:
        self._order: list[tuple[str, str]] = []
        self._expected: set[tuple[str, str]] = set()
        for call in calls:
            key = (call.response_id, call.call_id)
            if key not in self._expected:  # duplicates within a response collapse to one expected result (D7)
                self._expected.add(key)
                self._order.append(key)

    @property
    def keys(self) -> list[tuple[str, str]]:
        return list(self._order)

    def match(self, envelopes: Sequence[ResultEnvelope]) -> list[ResultEnvelope]:
        """Return the envelopes in proposal order; raise ``CorrelationError`` on any missing, duplicate
        or unknown result."""
        by_key: dict[tuple[str, str], ResultEnvelope] = {}
        for env in envelopes:
            key = (env.response_id, env.call_id)
            if not (isinstance(key[0], str) and isinstance(key[1], str)):
                # an id edited into a list or an object raised TypeError (unhashable) out of the lookup
                raise CorrelationError(
                    f"result whose response id ({type(key[0]).__name__}) or call id "
                    f"({type(key[1]).__name__}) is not text; it answers no proposed call"
                )
            if key not in self._expected:
                raise CorrelationError(f"result for unknown call {key[1]!r} of response {key[0]!r}")
            if key in by_key:
                raise CorrelationError(f"two results for call {key[1]!r} of response {key[0]!r}")
            by_key[key] = env
        missing = [k for k in self._order if k not in by_key]
        if missing:
            raise CorrelationError(
                "no result for call(s) " + ", ".join(f"{cid!r} of response {rid!r}" for rid, cid in missing)
            )
        return [by_key[k] for k in self._order]


def verify_results(
    table: CorrelationTable, envelopes: Sequence[ResultEnvelope], trusted: dict[tuple[str, str], TrustedCall]
) -> list[ResultEnvelope]:
    """Correlate, then verify every binding. Order may change; identity may not."""
    return verify_results_hashed(table, envelopes, trusted)[0]


def verify_results_hashed(
    table: CorrelationTable, envelopes: Sequence[ResultEnvelope], trusted: dict[tuple[str, str], TrustedCall]
) -> tuple[list[ResultEnvelope], list[str]]:
    """``verify_results``, also returning each result's canonical SHA-256 (in the same order)."""
    ordered = table.match(envelopes)
    hashes = []
    for env in ordered:
        tc = trusted.get((env.response_id, env.call_id))
        if tc is None:
            raise CorrelationError(f"no trusted context for call {env.call_id!r}")
        hashes.append(verify_binding(env, tc))
    return ordered, hashes
