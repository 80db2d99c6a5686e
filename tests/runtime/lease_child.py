"""One drive of a payment operation in its own process, for the drive-lease tests (D21).

    python -m tests.runtime.lease_child DB PAYMENTS_DB OP_ID run|resume MARKER

The ``pay`` handler records the payment in PAYMENTS_DB (its own SQLite file, keyed by idempotency
key), touches MARKER, and in the ``run`` phase then blocks, so the test can look at the operation
while this process is inside the handler and then SIGKILL it. Prints the final state as JSON.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import callbound as cb
from callbound.stores.sqlite import SQLiteStore
from callbound.testing import ScriptedModel

from .helpers import API, MODEL, OrderArgs, calls, fc, final

SCRIPT = [calls("resp_1", fc("call_1", "pay", {"order_id": "A1"})), final("resp_2")]


def payments(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE IF NOT EXISTS payments (key TEXT, order_id TEXT)")
    return conn


def runner(db: str, payments_db: str, marker: str, block: bool) -> cb.Runner:
    def pay(args: OrderArgs, ctx: cb.CallContext) -> dict[str, Any]:
        payments(payments_db).execute(
            "INSERT INTO payments VALUES (?, ?)", (ctx.idempotency_key, args.order_id)
        )
        Path(marker).write_text("inside")
        if block:
            time.sleep(120)  # killed here
        return {"paid": args.order_id}

    def reconcile(key: str, ctx: cb.CallContext) -> Any:
        row = payments(payments_db).execute("SELECT order_id FROM payments WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise cb.NotApplied("no payment with this key")
        return {"paid": row[0]}

    spec = cb.ToolSpec(
        name="pay",
        description="Pay an order",
        params=OrderArgs,
        handler=pay,
        schema_version="pay-v1",
        risk="write",
        timeout_ms=300_000,
        reconcile=reconcile,
    )
    return cb.Runner(
        model=ScriptedModel(API, list(SCRIPT)),
        registry=cb.Registry([spec]),
        store=SQLiteStore(db),
        settings={"model": MODEL},
    )


def main(argv: list[str]) -> int:
    db, payments_db, op_id, phase, marker = argv[:5]
    r = runner(db, payments_db, marker, block=phase == "run")
    if phase == "run":
        out = r.run_sync("Pay order A1", tenant="acme", subject="user-1", operation_id=op_id)
    else:
        out = r.resume_sync(op_id)
    print(json.dumps({"state": out.state.value, "reason": out.reason}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
