"""Runs one phase of the refund demo in its own process, for the crash matrix (D22).

    python -m tests.durability.crash_driver STORE_URL PAYMENTS_DB OP_ID run|resume|approve [--stream]

``CALLBOUND_CRASH_AT`` (set by the test) makes the process SIGKILL itself at a named point.
Prints the final state as JSON on success.
"""

from __future__ import annotations

import json
import os
import sys

import callbound as cb
from callbound.demo.refund import make_app
from callbound.stores import open_store


def main(argv: list[str]) -> int:
    store_url, payments, op_id, phase = argv[:4]
    if (
        os.environ.get("CALLBOUND_UNSAFE_NO_LEDGER") == "1"
    ):  # the negative control; callbound reads no such variable
        from callbound.runtime.crash import bypass_ledger_for_negative_control

        bypass_ledger_for_negative_control()
    stream = "--stream" in argv
    store = open_store(store_url)
    app = make_app("happy", payments=payments, stream=stream)
    runner = app.runner(
        store,
        ref={
            "ref": "callbound.demo.refund:make_app",
            "args": {"scenario": "happy", "payments": payments, "stream": stream},
        },
    )
    if phase == "run":
        outcome = runner.run_sync(
            "My kettle from order A1 arrived broken.", tenant="acme", subject="customer-1", operation_id=op_id
        )
    elif phase == "resume":
        outcome = runner.resume_sync(op_id)
    elif phase == "approve":
        pending = store.list_approvals(operation_id=op_id, status=None)
        for a in pending:
            runner.decide(cb.Decision.approve(a.approval_id, approver="alice"), tenant="acme")
        outcome = runner.outcome(op_id)
    else:
        raise SystemExit(f"unknown phase {phase}")
    print(json.dumps({"state": str(outcome.state), "reason": outcome.reason}))
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
