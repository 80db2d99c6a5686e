"""D19: every frozen snapshot version loads and resumes; the version number cannot change silently."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import callbound as cb
from callbound.core.approvals import PendingApproval
from callbound.core.audit import AuditEvent, verify_chain
from callbound.core.errors import UsageError
from callbound.core.idempotency import LedgerEntry
from callbound.core.snapshot import MIGRATIONS, SNAPSHOT_VERSION, migrate_head
from callbound.demo.payments import FakePayments
from callbound.demo.refund import make_app
from callbound.stores.base import Commit, JournalRow
from callbound.stores.memory import MemoryStore
from callbound.testing import FakeClock

HERE = Path(__file__).parent


def frozen_files() -> list[Path]:
    return sorted(HERE.glob("snapshot_v*.json"), key=lambda p: int(re.findall(r"\d+", p.name)[0]))


def load_into(store: MemoryStore, data: dict) -> str:  # type: ignore[type-arg]
    head = data["head"]
    store.commit(
        Commit(
            operation_id=head["operation_id"],
            head=head,
            journal=[JournalRow(r["kind"], r["data"]) for r in data["journal"]],
            ledger=[LedgerEntry.from_dict(e) for e in data["ledger"]],
            approvals=[PendingApproval.from_dict(a) for a in data["approvals"]],
            audit=[AuditEvent.from_dict(e) for e in data["audit"]],
            create=True,
        )
    )
    return str(head["operation_id"])


def test_every_version_up_to_current_is_frozen_with_a_migration_between() -> None:
    versions = [int(re.findall(r"\d+", p.name)[0]) for p in frozen_files()]
    assert versions == list(range(1, SNAPSHOT_VERSION + 1)), (
        "SNAPSHOT_VERSION changed without a frozen fixture: run `python -m tests.snapshots.freeze` and add a "
        "migration to core.snapshot.MIGRATIONS"
    )
    assert sorted(MIGRATIONS) == list(range(1, SNAPSHOT_VERSION))


@pytest.mark.parametrize("path", frozen_files(), ids=lambda p: p.stem)
def test_frozen_snapshot_resumes_to_completion(path: Path, tmp_path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    store = MemoryStore()
    op_id = load_into(store, data)
    assert verify_chain(store.audit_events(op_id)) is None
    app = make_app("happy", payments=str(tmp_path / "payments.db"))
    clock = FakeClock()  # the frozen approval was made at 2026-01-01T00:00Z and expires a day later
    app.clock = clock
    runner = app.runner(store)
    waiting = runner.outcome(op_id)
    assert waiting.state == "WAITING_APPROVAL"
    approval = waiting.pending_approvals[0]
    outcome = runner.resume_sync(op_id, [cb.Decision.approve(approval.approval_id, approver="alice")])
    assert outcome.state == "COMPLETED", outcome
    assert FakePayments(str(tmp_path / "payments.db")).count() == 1
    assert verify_chain(store.audit_events(op_id)) is None


def test_a_newer_snapshot_is_refused() -> None:
    head = json.loads(frozen_files()[-1].read_text(encoding="utf-8"))["head"]
    head["snapshot_version"] = SNAPSHOT_VERSION + 1
    with pytest.raises(UsageError, match="newer callbound"):
        migrate_head(head)
