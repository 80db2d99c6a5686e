"""Named crash points for the crash-safety tests (D22).

``crash_point("after_ledger_started")`` SIGKILLs the current process when the environment variable
``CALLBOUND_CRASH_AT`` names that point. Outside those tests the variable is unset and this is a dict
lookup.
"""

from __future__ import annotations

import os
import signal

CRASH_POINTS = (
    "after_ledger_started",
    "after_effect_before_result_commit",
    "after_result_commit",
    "waiting_approval",
    "after_approval_before_execution",
    "mid_stream",
)


def crash_point(name: str, tag: str | None = None) -> None:
    """``CALLBOUND_CRASH_AT`` may name the point (``after_ledger_started``) or the point for one tool
    (``after_ledger_started:submit_refund``)."""
    wanted = os.environ.get("CALLBOUND_CRASH_AT")
    if wanted is None:
        return
    if wanted == name or (tag is not None and wanted == f"{name}:{tag}"):
        os.kill(os.getpid(), signal.SIGKILL)


def ledger_disabled() -> bool:
    """The crash matrix's negative control (D22) bypasses the idempotency ledger to prove the harness
    can see a double effect. Never set ``CALLBOUND_UNSAFE_NO_LEDGER`` outside that test."""
    return os.environ.get("CALLBOUND_UNSAFE_NO_LEDGER") == "1"
