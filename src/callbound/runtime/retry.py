"""Backoff for retryable API failures (D26): exponential with full jitter, honouring Retry-After,
never past the remaining deadline."""

from __future__ import annotations

import random


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
