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


def crash_point(name: str) -> None:
    if os.environ.get("CALLBOUND_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
