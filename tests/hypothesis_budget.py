"""How many examples a costly property tries in one run.

A few differential properties (tests/adapters/test_stream_fast_path.py) draw a whole hostile stream per
example, hundreds of choices each, and took a third of the suite's hypothesis time. Every run draws new
examples (nothing pins a seed), so a local run tries half of each property's number and the runs add up;
with ``CI=true`` (as CI services set it) each tries its full number.
"""

from __future__ import annotations

import os

FULL = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def examples(full: int) -> int:
    """``full`` examples under ``CI=true``, half of them (at least 100) otherwise."""
    return full if FULL else max(100, full // 2)
