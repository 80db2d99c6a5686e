"""Gemini Interactions failure codes (``gemini-interactions``, WIRE.md 5.4 and 5.8): which string codes
and google.rpc.Codes are retried (D26), which are rate limits or quotas, and the failure an interaction's
``errors[]`` or a ``model_output`` step's ``error`` (a google.rpc.Status) stands for. Split from
gemini_interactions.py, which imports it."""

from __future__ import annotations

from typing import Any

from ..core.types import Failure
from .failures import http_retryable

RETRYABLE_CODES = frozenset(
    {
        "internal",
        "unavailable",
        "overloaded",
        "deadline_exceeded",
        # the server's own deadline ran out ("Deadline expired before operation could complete.",
        # the streaming error event in Google's Interactions streaming docs): a timeout, retried (D26)
        "gateway_timeout",
        "aborted",
        "resource_exhausted",
        "server_error",
        # Google's Interactions error codes (ai.google.dev/gemini-api/docs/api-errors): 429, "wait and
        # retry with exponential backoff"; google-genai's retry tests send "too_many_requests". Without
        # an HTTP status (an SSE error event, a failed interaction) the code alone says it (D26).
        "rate_limit_exceeded",
        "too_many_requests",
    }
)
# The codes that mean "too many requests now" (not quota): reason rate_limited as an HTTP 429 is.
RATE_CODES = frozenset({"rate_limit_exceeded", "too_many_requests", "resource_exhausted"})
# google.rpc.Code numbers (a model_output step's ``error`` is a google.rpc.Status, whose int code is
# one of these, not an HTTP status): read by name, so 14 is unavailable (retried), not HTTP 14.
RPC_CODES = {
    1: "cancelled",
    2: "unknown",
    3: "invalid_argument",
    4: "deadline_exceeded",
    5: "not_found",
    6: "already_exists",
    7: "permission_denied",
    8: "resource_exhausted",
    9: "failed_precondition",
    10: "aborted",
    11: "out_of_range",
    12: "unimplemented",
    13: "internal",
    14: "unavailable",
    15: "data_loss",
    16: "unauthenticated",
}
QUOTA_CODES = frozenset({"quota_exceeded", "insufficient_quota", "billing_disabled", "billing_not_active"})


def lower_code(value: Any) -> str | None:
    return value.lower().replace("-", "_").replace(" ", "_") if isinstance(value, str) and value else None


def first_error(inter: dict[str, Any]) -> dict[str, Any]:
    errors = inter.get("errors")
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        return errors[0]
    return inter["error"] if isinstance(inter.get("error"), dict) else {}


def first_step_error(items: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The ``error`` of the first model_output step that carries one (google-genai ``ModelOutputStep.error``,
    a google.rpc.Status), else None."""
    for item in items:
        if item.get("type") == "model_output" and isinstance(item.get("error"), dict):
            return item["error"]  # type: ignore[no-any-return]
    return None


def status_failure(err: dict[str, Any], *, rpc: bool) -> tuple[str | None, str, Failure]:
    """(raw stop reason or None, reason, Failure) for an interaction that failed with ``err``. ``rpc``:
    an int code is a google.rpc.Code (a step's Status), else an HTTP status (``errors[]``, WIRE.md 5.8)."""
    code = err.get("code")
    int_code = code if isinstance(code, int) and not isinstance(code, bool) else None
    if isinstance(code, str):
        name = lower_code(code)
    elif rpc and int_code is not None:
        name = RPC_CODES.get(int_code) or lower_code(err.get("status"))
    else:
        name = lower_code(err.get("status"))
    retryable = name in RETRYABLE_CODES or (
        not rpc and int_code is not None and http_retryable(int_code, "http")
    )
    if name in QUOTA_CODES:
        retryable = False
    reason = (
        "quota_exceeded" if name in QUOTA_CODES else ("rate_limited" if name in RATE_CODES else "api_error")
    )
    raw = code if isinstance(code, str) and code else None
    return raw, reason, Failure("status", retryable, None, None, name)
