"""Reading a provider's failure (D26, D30, D32): which HTTP statuses are retried, the wait the provider
asks for, the codes that say an account cannot pay, what error messages say where no code does (context
window, content filter, a request over its rate limit), the error object of an error body, and the part
of ``map_error`` every adapter shares."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.errors import ProtocolViolation
from ..core.types import Failure, Finish, ModelTurn, Provenance, RawFailure
from .base import body_bytes, decode_body, failure_turn, stream_cut_turn, too_large_turn
from .sse import iter_payloads


def retry_after_seconds(headers: dict[str, str]) -> float | None:
    """Retry-After (seconds or HTTP date) and the common ms variant."""
    lower = {k.lower(): v for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        from datetime import UTC, datetime

        if when.tzinfo is None:  # asctime and "-0000" dates carry no zone: HTTP dates are UTC (RFC 9110)
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())


# "Please try again in 11.054s." / "in 6ms" / "in 1m30s" / "in 20m0.5s": the wait an OpenAI rate-limit
# message states (the Responses stream fixture in openai/codex codex-api/src/sse/responses.rs; Codex
# reads it too), the only one a stream's failure event carries, having no headers.
_TRY_AGAIN = re.compile(
    r"try again in (?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+(?:\.\d+)?)ms)?\b", re.IGNORECASE
)


def retry_after_in(headers: dict[str, str], message: Any) -> float | None:
    """Retry-After from the headers (``retry_after_seconds``), else the wait the error's message states:
    both are the provider saying when to come back (D26 honours it; the deadline still bounds it, D14)."""
    delay = retry_after_seconds(headers)
    if delay is not None or not isinstance(message, str):
        return delay
    found = _TRY_AGAIN.search(message[:2000])
    if found is None or not any(found.groups()):
        return None
    hours, minutes, seconds, millis = (float(g) if g else 0.0 for g in found.groups())
    return hours * 3600 + minutes * 60 + seconds + millis / 1000


def http_retryable(status: int | None, kind: str) -> bool:
    """D26: 408, 409, 429, 5xx, 529, connection errors, timeouts and cut streams are retryable."""
    if kind in ("connection", "timeout", "stream_cut"):
        return True
    if status is None:
        return False
    return status in (408, 409, 429, 529) or 500 <= status <= 599


# Error codes that say the account cannot pay: retrying cannot help (D26), even under HTTP 429.
# billing_not_active: OpenAI answers 429 with it when billing was never set up or was turned off.
QUOTA_CODES = frozenset(
    {
        "insufficient_quota",
        "billing_hard_limit_reached",
        "billing_not_active",
        "spend_limit_reached",
        "quota_exceeded",
    }
)


# What the providers' "input too long" errors say (D1: context window exceeded is TRUNCATED, not retried),
# where no error code says it: Anthropic's invalid_request_error "prompt is too long: 200021 tokens >
# 200000 maximum" and "input length and `max_tokens` exceed context limit: ..."; Gemini's INVALID_ARGUMENT
# "The input token count (1100010) exceeds the maximum number of tokens allowed (1048575)." (Vertex:
# "Unable to submit request because the input token count is 1251952 but model only supports up to
# 1048576.", google-gemini/gemini-cli issue 19727); Mistral's
# "Prompt contains 150004 tokens ..., too large for model with 131072 maximum context length", and vLLM's
# and older OpenAI's "This model's maximum context length is 4096 tokens" (pydantic/pydantic-ai
# tests/cassettes/test_context_window_exceeded/: real HTTP 400 answers of each provider). Compatible servers
# word it their own way, as quoted in public issue threads: xAI "This model's maximum prompt length is 500000
# but the request contains 637815 tokens.", older vLLM "The decoder prompt (length 12324) is longer than the
# maximum model length of 8192", llama.cpp "request (8708 tokens) exceeds the available context size (8192
# tokens)", TGI and Together "`inputs` tokens + `max_new_tokens` must be <= 8193".
_CONTEXT_WINDOW_MESSAGE = re.compile(
    r"prompt is too long"
    r"|exceeds? (?:the )?context limit"
    r"|input token count \(?\d*\)? ?exceeds the maximum number of tokens"
    r"|input token count is \d+ but model only supports up to"
    r"|maximum prompt length is \d+"
    r"|is longer than the maximum model length"
    r"|exceeds the available context size"
    r"|tokens \+ `?max_new_tokens`? must be <="
    r"|maximum context length",
    re.IGNORECASE,
)


def says_context_window_exceeded(status: int | None, message: Any) -> bool:
    """An error whose message says the input does not fit the model's context window: an HTTP 400, 413
    or 422 (a validation error: Hugging Face TGI and Together answer 422 "`inputs` tokens +
    `max_new_tokens` must be <= 8193"), or an error event without a status. Read only where no error code
    says it already."""
    if status not in (None, 400, 413, 422) or not isinstance(message, str):
        return False
    return _CONTEXT_WINDOW_MESSAGE.search(message[:2000]) is not None


def says_request_over_rate_limit(message: Any) -> bool:
    """An OpenAI 429 (code rate_limit_exceeded) that no wait can lift: "Request too large for gpt-4o in
    organization ... on tokens per min (TPM): Limit 30000, Requested 36278. The input or output tokens
    must be reduced in order to run successfully." (as received in Aider-AI/aider issue 1880 and
    assafelovic/gpt-researcher issue 585). The request alone is over the per-minute limit, so it is read
    as a quota no retry can meet (D26), as a Gemini quota of zero is; an ordinary "Rate limit reached"
    429 still waits and retries."""
    return isinstance(message, str) and _REQUEST_TOO_LARGE.search(message[:2000]) is not None


_REQUEST_TOO_LARGE = re.compile(r"\brequest too large for\b", re.IGNORECASE)


def says_content_filtered(status: int | None, err: Any) -> bool:
    """An OpenAI-shaped error that says a content policy blocked the request: Azure OpenAI answers a
    prompt its filter stops with HTTP 400, ``code: "content_filter"`` and ``innererror.code:
    "ResponsibleAIPolicyViolation"`` (Mirascope tests/e2e cassette test_refusal/azure-openai_completions,
    recorded). That is a provider policy stop, D1's REFUSAL, as ``promptFeedback.blockReason`` is on
    Gemini and ``content_filter`` is on a 200: no retry changes it, and it is no server fault."""
    if status not in (None, 400) or not isinstance(err, dict):
        return False
    inner = err.get("innererror")
    inner_code = inner.get("code") if isinstance(inner, dict) else None
    return err.get("code") == "content_filter" or inner_code == "ResponsibleAIPolicyViolation"


# Error codes that say a safety policy stopped the request or its answer: openai-python ResponseError.code
# (the ``error`` of a ``failed`` response) lists bio_policy, misalignment_policy_violation ("blocked by the
# safety systems") and image_content_policy_violation, and its session errors cyber_policy ("rejected by a
# safety policy"). A provider policy stop, D1's REFUSAL, as Azure's content_filter is: no retry changes it.
POLICY_CODES = frozenset(
    {"bio_policy", "cyber_policy", "misalignment_policy_violation", "image_content_policy_violation"}
)


def says_policy_stop(status: int | None, code: str | None) -> bool:
    """An OpenAI-shaped error whose code names a safety policy (``POLICY_CODES``), without a status (a
    ``failed`` response, an error event) or under HTTP 400."""
    return status in (None, 400) and code in POLICY_CODES


def _first_stream_event(raw: bytes | str | dict[str, Any]) -> dict[str, Any] | None:
    """The first event of an error body framed as a stream: a streaming request can be refused with an
    HTTP error whose body is one SSE ``error`` event (Gemini Interactions answers a quota refusal with
    HTTP 429 and ``event: error`` / ``data: {"error": {"code": "quota_exceeded", ...}}``), and the
    code in it decides the retry (D26: a quota code is not retried)."""
    if isinstance(raw, dict):
        return None
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    if not text.lstrip("\ufeff \t\r\n").startswith(("event:", "data:")):
        return None
    try:
        for payload in iter_payloads([text[:1_000_000]]):
            return payload if isinstance(payload, dict) else None
    except ProtocolViolation:
        return None
    return None


def error_object(raw: bytes | str | dict[str, Any] | None) -> dict[str, Any] | None:
    """The ``error`` object of an HTTP error body, if it has one. Gemini's stream endpoints wrap the
    body in a one-element array; an HTML page from a proxy has none (it still classifies by status)."""
    if raw is None:
        return None
    try:
        data, _ = decode_body(raw)
    except ProtocolViolation:
        data = _first_stream_event(raw)
    if isinstance(data, list) and data:
        data = data[0]
    if not isinstance(data, dict):
        return None
    err = data.get("error")
    if isinstance(err, dict):
        return err
    if isinstance(err, str):
        # The message itself under "error", type and code beside it: xAI {"code": "invalid-argument",
        # "error": "This model's maximum prompt length is ..."}, Hugging Face TGI {"error": "...",
        # "error_type": "validation"} (D32 keeps the code and type beside the status)
        kind = data.get("error_type", data.get("type"))
        return {"message": err, "type": kind, "code": data.get("code")}
    if data.get("object") == "error" or (
        isinstance(data.get("message"), str) and ("type" in data or "code" in data) and "choices" not in data
    ):
        # The error's fields at the top: Mistral and vLLM {"object": "error", "type", "code", "message"},
        # Cerebras {"message", "type", "param", "code"} with no "object"
        return data
    return None


def map_failure(
    api: str,
    provenance: Provenance,
    failure: RawFailure,
    http_error: Callable[[dict[str, Any] | None, str], ModelTurn],
) -> ModelTurn:
    """The part of ``map_error`` every adapter shares (D26, D30): a cut stream is TRUNCATED and
    retryable; connection errors and timeouts are retryable API failures; an HTTP error's parsed
    ``error`` object and the body digest go to the adapter's own ``http_error`` classifier."""
    raw = failure.body
    digest = hashlib.sha256(body_bytes(raw) if raw is not None else b"").hexdigest()
    if failure.kind == "stream_cut":
        return stream_cut_turn(api, provenance, digest, None)
    if failure.kind == "too_large":  # a plain body over StreamCaps.max_body_bytes, not read further
        return too_large_turn(api, provenance, digest, None, "response_too_large", cap="max_body_bytes")
    if failure.kind == "http":
        return http_error(error_object(raw), digest)
    return failure_turn(
        api,
        provenance,
        digest,
        response_id=None,
        raw_stop_reason=failure.kind,
        reason="timeout" if failure.kind == "timeout" else "connection_error",
        failure=Failure(failure.kind, True, None, None, None, retry_after_seconds(failure.headers)),
    )


# ---- OpenAI-shaped error objects (openai-responses, openai-chat and compatible servers) ------------------

# Error codes and types saying the input exceeds the model's context window (D1: TRUNCATED, not an API
# failure). llama.cpp's server names it by its type, under HTTP 400 or, in some versions, 500
# (ggml-org/llama.cpp PR 15780): no retry makes the input fit, whatever the status says.
CONTEXT_WINDOW_CODES = frozenset({"context_length_exceeded"})
CONTEXT_WINDOW_TYPES = frozenset({"exceed_context_size_error"})


@dataclass(frozen=True, slots=True)
class ErrorReading:
    """What an OpenAI-shaped error object says, with or without an HTTP status."""

    finish: Finish
    reason: str
    retryable: bool
    error_type: str | None
    error_code: str | None
    raw_stop_reason: str  # the status if there is one, else the code or type as sent (D32)
    retry_after_s: float | None


def error_fields(err: Any) -> tuple[str | None, str | None]:
    """(type, code) of an error object; an int code is an HTTP status sent as a number (OpenRouter:
    ``{"error": {"code": 400, ...}}``)."""
    if not isinstance(err, dict):
        return None, None
    etype, code = err.get("type"), err.get("code")
    if type(code) is int:
        code = str(code)
    return (etype if isinstance(etype, str) and etype else None), (
        code if isinstance(code, str) and code else None
    )


def _status_code(code: str | None) -> int | None:
    """A code that is itself an HTTP status ("500", "429": a proxy's response.failed, Azure's code)."""
    return int(code) if code is not None and len(code) == 3 and code.isascii() and code.isdigit() else None


def read_openai_error(
    err: Any, status: int | None, headers: dict[str, str], retryable_codes: frozenset[str]
) -> ErrorReading:
    """One reading of an OpenAI-shaped error, the same failure whether it came as an HTTP error body, a
    200 body, a stream's error event or chunk, or a ``failed`` response:
    - a context-window error (a code, llama.cpp's type, or a message that says it) is TRUNCATED,
      not retried (D1);
    - a content filter (Azure's ``content_filter`` 400) is a REFUSAL (D1), and so is a code that names
      a safety policy (``POLICY_CODES``: ``bio_policy``, ...), whose reason is that code;
    - a quota code, or a request alone over its per-minute limit, is not retried (D26);
    - otherwise the status decides (D26), or, without one, a retryable code or type, or a code that is
      itself a retryable status; a 429, or ``rate_limit_exceeded`` without a status, reads rate_limited."""
    etype, code = error_fields(err)
    message = err.get("message") if isinstance(err, dict) else None
    quota = code in QUOTA_CODES or etype in QUOTA_CODES or says_request_over_rate_limit(message)
    code_status = _status_code(code)
    if status is not None:
        retryable = http_retryable(status, "http") and not quota
        raw = str(status)
        limited = status == 429
    else:
        retryable = (
            code in retryable_codes
            or etype in retryable_codes
            or (code_status is not None and http_retryable(code_status, "http"))
        ) and not quota
        raw = code or etype or "error"
        limited = code_status == 429 or "rate_limit_exceeded" in (code, etype)
    reason = "quota_exceeded" if quota else "rate_limited" if limited else "api_error"
    finish = Finish.API_FAILURE
    if (
        code in CONTEXT_WINDOW_CODES
        or etype in CONTEXT_WINDOW_TYPES
        or (not quota and says_context_window_exceeded(status, message))
    ):
        # the input no longer fits, which no retry fixes and which is no server fault (pydantic/pydantic-ai
        # tests/cassettes/test_context_window_exceeded/: HTTP 400, code context_length_exceeded, on both
        # OpenAI APIs; OpenAI streams it as an error event, then response.failed)
        finish, reason, retryable = Finish.TRUNCATED, "context_window_exceeded", False
    elif says_content_filtered(status, err):
        finish, reason, retryable = Finish.REFUSAL, "content_filter", False
    elif says_policy_stop(status, code):
        finish, reason, retryable = Finish.REFUSAL, str(code), False
    return ErrorReading(finish, reason, retryable, etype, code, raw, retry_after_in(headers, message))
