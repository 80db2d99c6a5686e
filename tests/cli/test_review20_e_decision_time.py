"""``approvals approve|deny`` print the decision's time as ISO 8601, as ``approvals list --json``, the
expiry column and the error of a repeated decision do (review round 20, e): ``str(datetime)`` printed
"2026-12-02 09:47:17.517624+00:00", with a space, beside "2026-12-02T09:47:17.517624+00:00" everywhere
else, so the time read back from the store did not match the one the approver was shown."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from callbound.cli.app import app


def test_the_decision_time_is_printed_as_stored(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cb.db'}"
    runner = CliRunner()
    paused = runner.invoke(app, ["demo", "refund", "--json", "--store", url])
    assert paused.exit_code == 0, paused.output
    approval_id = json.loads(paused.output)["pending_approvals"][0]["approval_id"]
    decided = runner.invoke(app, ["approvals", "approve", approval_id, "--approver", "alice", "--store", url])
    assert decided.exit_code == 0, decided.output
    listed = runner.invoke(app, ["approvals", "list", "--all", "--json", "--store", url])
    (stored,) = json.loads(listed.output)
    assert "T" in stored["decided_at"]
    first = decided.output.splitlines()[0]
    assert first == f"approval {approval_id}: approved by alice at {stored['decided_at']}"
    again = runner.invoke(app, ["approvals", "approve", approval_id, "--approver", "alice", "--store", url])
    assert (
        again.output.splitlines()[0]
        == f"approval {approval_id}: already approved by alice at {stored['decided_at']}"
    )
