"""Review round 19, c F2: ``ToolExecutor``'s arguments are refused with callbound's ``UsageError`` when
it is built. ``max_threads=0`` raised a bare ``ValueError``; ``True`` and ``2.5`` were taken as thread
counts; a NaN, infinite or too large ``grace_s`` was accepted and raised ValueError or OverflowError
later, in a cancelled run's lease hold (``time.sleep``), and a string one a TypeError at a timeout."""

from __future__ import annotations

from typing import Any

import pytest

import callbound as cb
from callbound.runtime.tools import ToolExecutor


@pytest.mark.parametrize("value", [0, -1, True, 2.5, "4", None])
def test_tool_executor_max_threads_must_be_a_positive_int(value: Any) -> None:
    with pytest.raises(cb.UsageError, match=r"ToolExecutor\(max_threads=...\) must be an integer >= 1"):
        ToolExecutor(max_threads=value)


@pytest.mark.parametrize("value", [-0.5, float("nan"), float("inf"), 1e300, "2", True, None])
def test_tool_executor_grace_must_be_a_bounded_number_of_seconds(value: Any) -> None:
    with pytest.raises(cb.UsageError, match=r"ToolExecutor\(grace_s=...\) must be a number of seconds"):
        ToolExecutor(grace_s=value)


def test_tool_executor_takes_its_documented_arguments() -> None:
    for kw in ({}, {"max_threads": 1, "grace_s": 0}, {"max_threads": 64, "grace_s": 0.25}):
        ToolExecutor(**kw).shutdown()
