"""Operation data ⇄ plain JSON dicts, with a format version (D19).

Stores persist only what this module produces: plain dicts of str/int/float/bool/None/list/dict.
``SNAPSHOT_VERSION`` changes whenever the shape of a head row or a journal row changes; a migration
from every older version lives in ``MIGRATIONS`` and a frozen fixture of each version is kept in the
tests, which fail when the number changes without both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import UsageError
from .types import Failure, Finish, ModelTurn, Provenance, ResultEnvelope, ToolCall, Usage

SNAPSHOT_VERSION = 1

# version n -> function migrating a head dict from n to n + 1
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def call_to_dict(c: ToolCall) -> dict[str, Any]:
    return {
        "provider": c.provider,
        "api": c.api,
        "response_id": c.response_id,
        "call_id": c.call_id,
        "name": c.name,
        "arguments_raw": c.arguments_raw,
        "arguments": c.arguments,
        "arguments_error": c.arguments_error,
        "output_index": c.output_index,
        "synthetic_id": c.synthetic_id,
    }


def call_from_dict(d: dict[str, Any]) -> ToolCall:
    return ToolCall(
        d["provider"],
        d["api"],
        d["response_id"],
        d["call_id"],
        d["name"],
        d["arguments_raw"],
        d["arguments"],
        d["arguments_error"],
        int(d["output_index"]),
        bool(d.get("synthetic_id", False)),
    )


def turn_to_dict(t: ModelTurn) -> dict[str, Any]:
    f = t.failure
    p = t.provenance
    return {
        "api": t.api,
        "response_id": t.response_id,
        "finish": t.finish._value_,
        "raw_stop_reason": t.raw_stop_reason,
        "reason": t.reason,
        "calls": [call_to_dict(c) for c in t.calls],
        "text": t.text,
        "refusal": t.refusal,
        "usage": t.usage.to_dict(),
        "continuation": list(t.continuation),
        "provenance": {
            "provider": p.provider,
            "api": p.api,
            "model": p.model,
            "adapter_revision": p.adapter_revision,
            "sdk_version": p.sdk_version,
        },
        "raw_sha256": t.raw_sha256,
        "failure": None
        if f is None
        else {
            "kind": f.kind,
            "retryable": f.retryable,
            "status": f.status,
            "error_type": f.error_type,
            "error_code": f.error_code,
            "retry_after_s": f.retry_after_s,
        },
    }


def turn_from_dict(d: dict[str, Any]) -> ModelTurn:
    p = d["provenance"]
    f = d.get("failure")
    return ModelTurn(
        api=d["api"],
        response_id=d["response_id"],
        finish=Finish(d["finish"]),
        raw_stop_reason=d["raw_stop_reason"],
        reason=d["reason"],
        calls=tuple(call_from_dict(c) for c in d["calls"]),
        text=d["text"],
        refusal=d["refusal"],
        usage=Usage.from_dict(d["usage"]),
        continuation=tuple(d["continuation"]),
        provenance=Provenance(
            p["provider"], p["api"], p["model"], p["adapter_revision"], p.get("sdk_version")
        ),
        raw_sha256=d["raw_sha256"],
        failure=None
        if f is None
        else Failure(
            f["kind"], f["retryable"], f["status"], f["error_type"], f["error_code"], f["retry_after_s"]
        ),
    )


def envelope_to_dict(e: ResultEnvelope) -> dict[str, Any]:
    return {
        "response_id": e.response_id,
        "call_id": e.call_id,
        "model_result": e.model_result,
        "protected_audit": e.protected_audit,
    }


def envelope_from_dict(d: dict[str, Any]) -> ResultEnvelope:
    return ResultEnvelope(d["response_id"], d["call_id"], d["model_result"], d["protected_audit"])


def migrate_head(head: dict[str, Any]) -> dict[str, Any]:
    """Bring a stored head to ``SNAPSHOT_VERSION``; refuse a newer one (fail fast, D19)."""
    version = int(head.get("snapshot_version", 0))
    if version > SNAPSHOT_VERSION:
        raise UsageError(
            f"operation {head.get('operation_id')} was saved by a newer callbound (snapshot_version {version}, "
            f"this code knows up to {SNAPSHOT_VERSION}); upgrade callbound to resume it"
        )
    if version < 1:
        raise UsageError(
            f"operation {head.get('operation_id')} has no snapshot_version; it was not saved by callbound"
        )
    while version < SNAPSHOT_VERSION:
        head = MIGRATIONS[version](head)
        version += 1
        head["snapshot_version"] = version
    return head
