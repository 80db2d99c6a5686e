"""Freeze the current snapshot format as ``snapshot_v{N}.json`` (D19).

Run once when SNAPSHOT_VERSION is raised (together with a migration from N-1), never to rewrite an
existing file: ``python -m tests.snapshots.freeze``. The frozen operation waits for approval in the
refund demo, so the test can resume it to completion.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from callbound.core.ids import SequentialIds
from callbound.core.snapshot import SNAPSHOT_VERSION
from callbound.demo.refund import make_app
from callbound.stores.memory import MemoryStore
from callbound.testing import FakeClock

HERE = Path(__file__).parent


def dump(store: MemoryStore, operation_id: str) -> dict[str, object]:
    stored = store.load_operation(operation_id)
    assert stored is not None
    return {
        "snapshot_version": SNAPSHOT_VERSION,
        "head": stored.head,
        "journal": [{"kind": r.kind, "data": r.data} for r in stored.journal],
        "approvals": [a.to_dict() for a in store.list_approvals(operation_id=operation_id, status=None)],
        "ledger": [],
        "audit": [e.to_dict() for e in store.audit_events(operation_id)],
    }


def main() -> None:
    target = HERE / f"snapshot_v{SNAPSHOT_VERSION}.json"
    if target.exists():
        sys.exit(f"{target} exists; frozen fixtures are never rewritten")
    with tempfile.TemporaryDirectory() as tmp:
        app = make_app("happy", payments=str(Path(tmp) / "p.db"))
        app.clock = FakeClock()
        store = MemoryStore()
        runner = app.runner(
            store, ref={"ref": "callbound.demo.refund:make_app", "args": {"scenario": "happy"}}
        )
        runner.ids = SequentialIds()
        outcome = runner.run_sync(
            "My kettle from order A1 arrived broken.", tenant="acme", subject="customer-1"
        )
        assert outcome.state == "WAITING_APPROVAL"
        data = dump(store, outcome.operation_id)
        ledger = []
        for row in data["journal"]:  # type: ignore[attr-defined]
            for env in row["data"].get("envelopes", []) if row["kind"] == "results" else []:
                key = env["protected_audit"].get("idempotency_key")
                entry = store.ledger_get("acme", key) if key else None
                if entry is not None:
                    ledger.append(entry.to_dict())
        data["ledger"] = ledger
    target.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
