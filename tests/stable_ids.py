"""Test ids that are the same in every process."""

from __future__ import annotations

import re
from typing import Any


def stable_id(value: Any) -> str:
    """``repr`` without memory addresses. pytest-xdist refuses to run when its workers collect
    different test ids, and ``repr(object())`` differs from process to process."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))
