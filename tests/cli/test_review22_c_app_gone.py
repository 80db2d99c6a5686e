"""A command that rebuilds an operation's runner says what to do when its saved application no longer
imports (review round 22, c).

``ops cancel``, ``resume`` and ``approvals approve|deny`` load the application saved with the operation
(D21). When that module is gone (a deploy renamed it, another virtualenv), the error was only "cannot
import 'x' for --app: No module named 'x'": nothing said the name came from the operation, nor that
``--app`` gives another, so an operator could not even cancel the operation."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from callbound.cli.app import app
from callbound.demo.refund import make_app
from callbound.stores import open as open_store


def test_a_saved_application_that_no_longer_imports(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cb.db'}"
    st = open_store(url)
    runner = make_app(payments=str(tmp_path / "pay.db")).runner(
        st, ref={"ref": "no_such_module_r22c:make_app", "args": {}}
    )
    o = runner.run_sync(input="refund A1", tenant="acme", subject="customer-1")
    st.close()
    (pending,) = o.pending_approvals
    for command in (
        ["ops", "cancel", o.operation_id],
        ["resume", o.operation_id],
        ["approvals", "approve", pending.approval_id, "--approver", "alice"],
    ):
        r = CliRunner().invoke(app, [*command, "--store", url])
        assert r.exit_code == 2, (command, r.stderr, r.exception)
        assert "No module named 'no_such_module_r22c'" in r.stderr, r.stderr
        assert f"operation {o.operation_id} was saved with --app no_such_module_r22c:make_app" in r.stderr
        assert "pass --app module:factory" in r.stderr, r.stderr
    r = CliRunner().invoke(
        app, ["ops", "cancel", o.operation_id, "--app", "callbound.demo.refund:make_app", "--store", url]
    )
    assert r.exit_code == 0 and "CANCELLED" in r.stdout, (r.stderr, r.exception)
