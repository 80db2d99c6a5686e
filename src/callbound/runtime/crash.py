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


# The crash matrix's negative control (D22) runs writes without the idempotency ledger to prove the
# harness can see a double effect. Only that test's driver turns it off, in code. It used to be the
# environment variable CALLBOUND_UNSAFE_NO_LEDGER, read by every callbound process: one stray export
# (a copied .env, a CI variable) ran every write of a production worker without replay, reconcile or
# IN_PROGRESS, silently.
_ledger_bypassed = False


def bypass_ledger_for_negative_control() -> None:
    """Run every write of this process without its idempotency ledger. For the crash matrix's negative
    control only; nothing in callbound calls it."""
    global _ledger_bypassed
    _ledger_bypassed = True


def ledger_disabled() -> bool:
    return _ledger_bypassed
