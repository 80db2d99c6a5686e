"""What a handler's or a reconcile hook's value becomes for the model (D11), and counting a run (D13 (2)).

Split from execute.py, which runs the calls; these shape their values. A result over the cap is a
RESULT_TOO_LARGE envelope, never truncated (D11), and what the audit keeps of it is its size and digest
(``omitted``), not the body; a replayed result is held to the replaying operation's cap.
"""

from __future__ import annotations

from typing import Any

from ..core.canonical import canonical_bytes, canonical_sha256
from ..core.dispatch import HANDLER_ERROR, RESULT_TOO_LARGE
from ..core.errors import USER_CODE_FAILURES
from ..core.guards import result_cap
from ..core.idempotency import run_key
from ..core.registry import ToolSpec
from ..core.types import error_result, ok_result
from .operation import CallRecord, Operation
from .tools import json_result


def result_for(spec: ToolSpec, op: Operation, value: Any) -> tuple[dict[str, Any], Any]:
    """(model_result, output). Enforces the result-size cap (D11) on the canonical JSON, under the
    budgets saved with the operation, like every other guard (not the resuming runner's)."""
    try:
        # Returned pydantic models are dumped here: user code (a computed field, a custom serializer)
        # may raise anything, which must become an envelope, never escape the loop (D4).
        data, size = json_result(value)
    except USER_CODE_FAILURES:  # CanonicalizationError, PydanticSerializationError, a computed field's
        applied = " The effect was applied." if spec.is_write else ""
        return error_result(HANDLER_ERROR, "the tool returned a value that is not JSON." + applied), None
    cap = result_cap(op.budgets, spec.max_result_bytes)
    if size > cap:
        return too_large(size, cap, spec.is_write), omitted(data, size)
    return ok_result(data), data


def omitted(data: Any, size: int) -> dict[str, Any]:
    """The audit output of a result over the cap (D11, D20): its canonical size and SHA-256, not the body.
    The cap bounds what is kept as well as what is sent: the whole value went into the journal's results
    row (and, across an approval pause, the operation row rewritten on every commit), so a handler
    returning 50 MB wrote 50 MB per call (review round 21, d). Whoever kept the value can prove it is
    the one the call produced; the chain vouches for this record like for any output."""
    return {"omitted": RESULT_TOO_LARGE, "bytes": size, "sha256": canonical_sha256(data)}


def too_large(size: int, cap: int, applied: bool) -> dict[str, Any]:
    """D11's envelope; ``audit verify`` reads the size back from a replayed one (verify._TOO_LARGE)."""
    also = " The effect was applied; do not repeat the call." if applied else ""
    return error_result(RESULT_TOO_LARGE, f"the result is {size} bytes, over the {cap}-byte limit." + also)


def replayed(op: Operation, spec: ToolSpec | None, recorded: dict[str, Any]) -> dict[str, Any]:
    """A result the ledger replays (D13 (1)) under this operation's cap (D11): it was recorded under the
    budgets and tool of the operation that ran the effect, which may have allowed more. Over the cap,
    the model is told the effect was applied, as when the handler's own result is too large."""
    if recorded.get("ok") is not True:
        return recorded
    cap = result_cap(op.budgets, spec.max_result_bytes if spec is not None else None)
    size = len(canonical_bytes(recorded.get("data")))
    return recorded if size <= cap else too_large(size, cap, applied=True)


def count_run(op: Operation, rec: CallRecord, spec: ToolSpec, args: Any = None) -> None:
    key = run_key(spec, rec.arguments_json, args)
    op.spent.identical[key] = op.spent.identical.get(key, 0) + 1
    rec.identical_key = key
