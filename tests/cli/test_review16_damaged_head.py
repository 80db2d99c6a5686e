"""One damaged operation row (its head lacks a field, or is not JSON) is one clean error for the commands
about that operation and a marked row in ``ops list`` (review round 16, r2 F3).

Before, a head without ``state`` (or ``tenant``, ``created_at``, ``api``, ``subject``) raised KeyError:
a traceback and exit 1 from ``ops list``, ``ops show``, ``resume`` and ``ops cancel``, and ``ops list``
listed no operation at all. D28: 2 means unreadable input, 1 is kept for tampering; cli/errors.py: never
a traceback. A head that is not JSON already gave one ``error:`` line, exit 2; now ``ops list`` lists
the other operations around it as well."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from callbound.cli.app import app
from callbound.demo.refund import make_app
from callbound.stores import open as open_store


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def two_operations(tmp_path: Path) -> tuple[str, str, str, str]:
    """A store with a COMPLETED operation and one WAITING_APPROVAL: (url, completed id, waiting id,
    its approval id)."""
    url = f"sqlite:///{tmp_path / 'cb.db'}"
    st = open_store(url)
    payments = str(tmp_path / "pay.db")
    ref = {"ref": "callbound.demo.refund:make_app", "args": {"payments": payments}}
    runner = make_app(payments=payments).runner(st, ref=ref)
    done = runner.run_sync(input="refund A1", tenant="acme", subject="customer-1")
    from callbound.core.approvals import Decision

    done = runner.resume_sync(
        done.operation_id, [Decision.approve(done.pending_approvals[0].approval_id, "al")]
    )
    assert done.state == "COMPLETED"
    waiting = runner.run_sync(input="refund A1 again", tenant="acme", subject="customer-1")
    st.close()
    return url, done.operation_id, waiting.operation_id, waiting.pending_approvals[0].approval_id


def damage(url: str, operation_id: str, head: str | None = None, drop: str | None = None) -> None:
    """Replace the head of ``operation_id`` with ``head``, or drop its field ``drop``."""
    c = sqlite3.connect(url.removeprefix("sqlite:///"))
    (stored,) = c.execute("SELECT head FROM operations WHERE operation_id = ?", (operation_id,)).fetchone()
    if drop is not None:
        doc = json.loads(stored)
        del doc[drop]
        head = json.dumps(doc)
    c.execute("UPDATE operations SET head = ? WHERE operation_id = ?", (head, operation_id))
    c.commit()
    c.close()


def one_error_line(r: Any) -> str:
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr, r.exception)
    assert isinstance(r.exception, SystemExit), repr(r.exception)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return str(lines[0])


@pytest.mark.parametrize("field", ["state", "tenant", "created_at", "api", "subject"])
def test_a_head_without_a_field_is_one_error_line_and_listed_as_damaged(tmp_path: Path, field: str) -> None:
    url, done, op, approval = two_operations(tmp_path)
    damage(url, op, drop=field)

    r = run("ops", "list", "--store", url)
    assert r.exit_code == 0, (r.stderr, r.exception)
    rows = [line for line in r.stdout.splitlines() if "op_" in line]
    assert any(done in line and "COMPLETED" in line for line in rows), r.stdout
    if field in ("state", "tenant", "created_at"):  # what the list shows
        assert any(op in line and "DAMAGED" in line and repr(field) in line for line in rows), r.stdout
        assert f"operation {op} cannot be loaded: it has no {field!r} field" in r.stderr
    else:
        assert any(op in line and "WAITING_APPROVAL" in line for line in rows), r.stdout

    r = run("ops", "list", "--json", "--store", url)
    assert r.exit_code == 0
    listed = {o["operation_id"]: o for o in json.loads(r.stdout)}
    assert set(listed) == {done, op} and "damaged" not in listed[done]

    for args in (
        ["resume", op],
        ["ops", "cancel", op],
        ["approvals", "approve", approval, "--approver", "alice"],
    ):
        line = one_error_line(run(*args, "--store", url))
        assert f"operation {op} cannot be loaded" in line and repr(field) in line, (args, line)
    r = run("ops", "show", op, "--store", url)
    if field in ("state", "tenant", "api", "subject"):  # what the show prints
        assert repr(field) in one_error_line(r)
    else:
        assert r.exit_code == 0
    assert run("ops", "show", op, "--json", "--store", url).exit_code == 0  # as stored
    assert run("ops", "show", done, "--store", url).exit_code == 0


def test_a_head_that_is_not_json_leaves_the_others_listed(tmp_path: Path) -> None:
    url, done, op, _ = two_operations(tmp_path)
    damage(url, op, head="{oops")
    r = run("ops", "list", "--store", url)
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert any(done in line and "COMPLETED" in line for line in r.stdout.splitlines())
    assert any(op in line and "DAMAGED" in line for line in r.stdout.splitlines()), r.stdout
    assert "it is not JSON" in r.stderr
    r = run("ops", "list", "--json", "--store", url)
    listed = {o["operation_id"]: o for o in json.loads(r.stdout)}
    assert listed[done]["state"] == "COMPLETED" and "it is not JSON" in listed[op]["damaged"]
    r = run("ops", "list", "--json", "--state", "COMPLETED", "--store", url)  # the row's column filters
    assert [o["operation_id"] for o in json.loads(r.stdout)] == [done]
    assert "it is not JSON" in one_error_line(run("resume", op, "--store", url))
