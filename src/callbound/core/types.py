"""Frozen value types shared by every layer: what a model turn is, what a call is, what a result is."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any, Literal

JSON = Any  # a value that json.loads could return

Risk = Literal["read", "write", "irreversible"]


class Finish(StrEnum):
    """How a model turn ended (D1). Only FINAL_TEXT and TOOL_PROPOSALS are progress."""

    FINAL_TEXT = "FINAL_TEXT"
    TOOL_PROPOSALS = "TOOL_PROPOSALS"
    REFUSAL = "REFUSAL"
    TRUNCATED = "TRUNCATED"
    API_FAILURE = "API_FAILURE"
    CONTINUE = "CONTINUE"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model proposed, as the adapter read it. Arguments are never repaired."""

    provider: str
    api: str
    response_id: str
    call_id: str
    name: str
    arguments_raw: str | dict[str, Any] | None
    arguments: dict[str, Any] | None
    arguments_error: str | None
    output_index: int
    # True when callbound made the id up (D7); it is then never sent back to the provider.
    synthetic_id: bool = False


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one turn or a whole operation (D27). ``None`` means the provider did not say."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: Decimal | None = None

    def __add__(self, other: Usage) -> Usage:
        """The usage of both. A count (or cost) one of them lacks is unknown in the sum, None: the
        other's count alone would report a part as the whole (D27: missing usage is null, never 0)."""

        def add(a: Any, b: Any) -> Any:
            return None if a is None or b is None else a + b

        return Usage(
            add(self.input_tokens, other.input_tokens),
            add(self.output_tokens, other.output_tokens),
            add(self.cost, other.cost),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": None if self.cost is None else str(self.cost),
        }

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Usage:
        cost = data.get("cost")
        return Usage(
            data.get("input_tokens"), data.get("output_tokens"), None if cost is None else Decimal(cost)
        )


@dataclass(frozen=True, slots=True)
class Provenance:
    provider: str
    api: str
    model: str | None
    adapter_revision: str
    sdk_version: str | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    """A provider failure, classified by the adapter's ``map_error`` (D26, D30, D32)."""

    kind: str  # "http" | "error_event" | "error_body" | "connection" | "timeout" | "stream_cut" | "byte_cap"
    retryable: bool
    status: int | None = None
    error_type: str | None = None
    error_code: str | None = None
    retry_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class ModelTurn:
    """One model response, normalised. ``continuation`` holds the provider's own items exactly as
    received; they are appended unchanged to the next request (D8)."""

    api: str
    response_id: str
    finish: Finish
    raw_stop_reason: str | None
    reason: str | None
    calls: tuple[ToolCall, ...]
    text: str
    refusal: str | None
    usage: Usage
    continuation: tuple[dict[str, Any], ...]
    provenance: Provenance
    raw_sha256: str
    failure: Failure | None = None

    @property
    def executable(self) -> bool:
        """Calls run only from a TOOL_PROPOSALS turn; never from a truncated, refused or failed one."""
        return self.finish is Finish.TOOL_PROPOSALS


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class ResultEnvelope:
    """A call's result. ``model_result`` is the only part that may enter a provider payload;
    ``protected_audit`` stays outside the model and carries the binding."""

    response_id: str
    call_id: str
    model_result: dict[str, Any]
    protected_audit: dict[str, Any]

    @property
    def ok(self) -> bool:
        return bool(self.model_result.get("ok"))

    @property
    def error_code(self) -> str | None:
        if self.ok:
            return None
        return str(self.model_result["error"]["code"])


@dataclass(frozen=True, slots=True)
class Transition:
    state: str
    at: datetime
    cause: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "at": self.at.isoformat(), "cause": self.cause, "details": self.details}


def ok_result(data: Any) -> dict[str, Any]:
    return {"ok": True, "data": data}


def error_result(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message}}


# Progress events for user interfaces while a stream is assembled. None of them claims execution:
# a call may still be rejected, truncated or refused after CallReady.


@dataclass(frozen=True, slots=True)
class CallStarted:
    call_id: str
    name: str


@dataclass(frozen=True, slots=True)
class ArgumentsProgress:
    call_id: str
    bytes: int  # cumulative bytes of argument text received for this call


@dataclass(frozen=True, slots=True)
class CallReady:
    call_id: str


Progress = CallStarted | ArgumentsProgress | CallReady


@dataclass(frozen=True, slots=True)
class RawFailure:
    """A failure as a transport saw it, before any classification (D30). ``adapter.map_error`` alone
    decides what it means."""

    kind: str  # "http" | "connection" | "timeout" | "stream_cut" | "too_large" (a body over max_body_bytes)
    status: int | None = None
    body: bytes | str | dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
