"""A blank ``--approver`` is a usage error said in the command's own words, before anything is stored
(review round 20, e).

``callbound demo refund --approve --approver ""`` created the store, drove the operation to its pause and
saved it, then exited 2 with "Decision.approve needs an approver name" (a library call the user never
made) and without the commands that continue the saved operation. ``approvals approve|deny`` gave the
same message once it had found the approval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbound.cli.app import app

MESSAGE = "error: --approver needs a name: who decides (recorded with the decision and in the audit chain)"


@pytest.mark.parametrize("approver", ["", "   "])
@pytest.mark.parametrize("verdict", ["--approve", "--deny"])
def test_the_demo_refuses_a_blank_approver_before_it_stores_anything(
    tmp_path: Path, approver: str, verdict: str
) -> None:
    db = tmp_path / "cb.db"
    r = CliRunner().invoke(
        app, ["demo", "refund", verdict, "--approver", approver, "--store", f"sqlite:///{db}"]
    )
    assert r.exit_code == 2
    assert r.output.strip() == MESSAGE
    assert not db.exists()


@pytest.mark.parametrize("command", [["approve"], ["deny", "--reason", "no"]])
def test_deciding_with_a_blank_approver_names_the_option_and_records_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'cb.db'}"
    runner = CliRunner()
    paused = runner.invoke(app, ["demo", "refund", "--json", "--store", url])
    assert paused.exit_code == 0, paused.output
    approval_id = json.loads(paused.output)["pending_approvals"][0]["approval_id"]
    r = runner.invoke(
        app, ["approvals", *command[:1], approval_id, "--approver", " ", *command[1:], "--store", url]
    )
    assert r.exit_code == 2
    assert r.output.strip() == MESSAGE
    listed = runner.invoke(app, ["approvals", "list", "--json", "--store", url])
    assert [a["status"] for a in json.loads(listed.output)] == ["pending"]
