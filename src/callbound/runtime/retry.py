"""Backoff for retryable API failures (D26): exponential with full jitter, honouring Retry-After,
never past the remaining deadline; and the failed turn of a model client that raised."""

from __future__ import annotations

import logging
import random
from typing import Any

from ..core.types import ModelTurn, RawFailure

log = logging.getLogger("callbound.runtime")


def raised_turn(adapter: Any, model: Any, operation_id: str, exc: Exception) -> ModelTurn:
    """D4: a model client reports failures as turns; one that raises anyway (an error type its
    transport does not map, a bug) is a failed request, retried like a broken connection, never a
    crash that leaves the operation half-way. Only the type is logged: messages of HTTP errors can
    carry URLs, and URLs can carry keys."""
    log.warning(
        "operation %s: the model client raised %s.%s; treated as a failed connection",
        operation_id,
        type(exc).__module__,
        type(exc).__name__,
    )
    failure = RawFailure("connection", body=f"the model client raised {type(exc).__name__}")
    turn: ModelTurn = adapter.map_error(failure, model=model if isinstance(model, str) else None)
    return turn


def backoff_delay(
    attempt: int,
    retry_after_s: float | None,
    remaining_s: float,
    *,
    base_s: float = 0.5,
    cap_s: float = 30.0,
    rng: random.Random | None = None,
) -> float | None:
    """Seconds to wait before retry number ``attempt`` (1-based), or None when the wait would not fit
    in the remaining active time."""
    r = rng or random
    delay = r.uniform(0, min(cap_s, base_s * (2 ** (attempt - 1))))
    if retry_after_s is not None:
        delay = max(delay, retry_after_s)
    if delay >= remaining_s:
        return None
    return delay
