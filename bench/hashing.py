"""Canonical hashing: ``callbound.core.canonical.canonical_sha256`` (RFC 8785) against
``json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` + SHA-256, on payloads of
three sizes shaped like tool results (strings, ints, floats, nesting, a few non-ASCII characters).
Throughput is canonical bytes hashed per second."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from _common import median


def _order(i: int) -> dict[str, Any]:
    return {
        "order_id": f"A{i:06d}",
        "status": ["shipped", "pending", "refunded"][i % 3],
        "total": round(19.99 + i * 0.37, 2),
        "items": [{"sku": f"SKU-{i}-{j}", "qty": j + 1, "price_cents": 499 * (j + 1)} for j in range(3)],
        "customer": {"name": "Zoë Müller", "city": "Zürich", "vip": i % 7 == 0},
        "notes": None,
    }


PAYLOADS = {
    "small (one order)": _order(1),
    "medium (40 orders)": {"orders": [_order(i) for i in range(40)]},
    "large (4,000 orders)": {"orders": [_order(i) for i in range(4000)]},
}


def stdlib_sha256(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _rate(fn: Any, value: Any, budget_s: float) -> float:
    """Median seconds per call over batches filling ``budget_s``."""
    fn(value)
    t0 = time.perf_counter()
    fn(value)
    one = max(time.perf_counter() - t0, 1e-7)
    per_batch = max(1, int(budget_s / 7 / one))
    batches = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(per_batch):
            fn(value)
        batches.append((time.perf_counter() - t) / per_batch)
    return median(batches)


def measure(quick: bool) -> list[dict[str, Any]]:
    from callbound.core.canonical import canonical_bytes, canonical_sha256

    budget = 0.2 if quick else 1.0
    out = []
    for name, value in PAYLOADS.items():
        size = len(canonical_bytes(value))
        cb_s = _rate(canonical_sha256, value, budget)
        std_s = _rate(stdlib_sha256, value, budget)
        out.append(
            {
                "payload": name,
                "bytes": size,
                "callbound_mb_s": size / cb_s / 1e6,
                "stdlib_mb_s": size / std_s / 1e6,
                "callbound_us": cb_s * 1e6,
                "stdlib_us": std_s * 1e6,
            }
        )
    return out
