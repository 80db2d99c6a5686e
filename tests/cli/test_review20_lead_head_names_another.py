"""A head whose operation_id names another operation is a damaged row (review round 20, lead; found by
e). A head row edited to hold another operation's id (or copied from another row) was read as that
other operation: ``ops list`` showed the other id twice, and ``resume`` of the row acted on, and wrote
under, the other id. Only ``audit verify`` noticed. Now it is damaged like a head that lacks a field:
marked ``DAMAGED`` in ``ops list`` (the other operation listed once), one error line and exit 2 from the
commands about it, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from callbound.core.approvals import Decision
from callbound.demo.refund import make_app
from callbound.stores import open as open_store
from callbound.stores.rows import UnreadableRow

from ..stores.conftest import PgSchema
from .test_review16_damaged_head import one_error_line, run


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":
        schema = PgSchema()
        try:
            yield schema.url
        finally:
            schema.drop()
        return
    yield f"sqlite:///{tmp_path / 'cb.db'}"


def _two_operations(url: str, tmp_path: Path) -> tuple[str, str]:
    """(a COMPLETED operation, one WAITING_APPROVAL)."""
    st = open_store(url)
    payments = str(tmp_path / "pay.db")
    ref = {"ref": "callbound.demo.refund:make_app", "args": {"payments": payments}}
    runner = make_app(payments=payments).runner(st, ref=ref)
    done = runner.run_sync(input="refund A1", tenant="acme", subject="customer-1")
    done = runner.resume_sync(
        done.operation_id, [Decision.approve(done.pending_approvals[0].approval_id, "al")]
    )
    assert done.state == "COMPLETED"
    waiting = runner.run_sync(input="refund A1 again", tenant="acme", subject="customer-1")
    st.close()
    return done.operation_id, waiting.operation_id


def _name_another(url: str, operation_id: str, other: str) -> None:
    """Edit the head of ``operation_id`` to say it is ``other``."""
    if url.startswith("sqlite:"):
        c = sqlite3.connect(url.removeprefix("sqlite:///"))
        (stored,) = c.execute(
            "SELECT head FROM operations WHERE operation_id = ?", (operation_id,)
        ).fetchone()
        doc = json.loads(stored)
        doc["operation_id"] = other
        c.execute("UPDATE operations SET head = ? WHERE operation_id = ?", (json.dumps(doc), operation_id))
        c.commit()
        c.close()
        return
    import psycopg

    with psycopg.connect(url) as c:
        c.execute(
            "UPDATE operations SET head = jsonb_set(head::jsonb, '{operation_id}', to_jsonb(%s::text))::json WHERE operation_id = %s",
            (other, operation_id),
        )


def test_a_head_naming_another_operation_is_damaged(url: str, tmp_path: Path) -> None:
    done, waiting = _two_operations(url, tmp_path)
    _name_another(url, waiting, done)

    st = open_store(url)
    try:
        with pytest.raises(UnreadableRow, match="names another operation"):
            st.load_operation(waiting)
        assert st.load_operation(done) is not None
    finally:
        st.close()

    r = run("ops", "list", "--store", url)
    assert r.exit_code == 0, (r.stderr, r.exception)
    rows = [line for line in r.stdout.splitlines() if "op_" in line]
    first = [line.split("│")[1].strip() for line in rows if "│" in line]
    assert first.count(done) == 1, r.stdout  # the other operation listed once
    assert any(waiting in line and "DAMAGED" in line for line in rows), r.stdout

    for args in (("resume", waiting), ("ops", "show", waiting), ("ops", "cancel", waiting)):
        line = one_error_line(run(*args, "--store", url))
        assert "names another operation" in line and waiting in line, line


def test_json_output_marks_it_damaged(url: str, tmp_path: Path) -> None:
    done, waiting = _two_operations(url, tmp_path)
    _name_another(url, waiting, done)
    r = run("ops", "list", "--store", url, "--json")
    assert r.exit_code == 0, (r.stderr, r.exception)
    listed: list[dict[str, Any]] = json.loads(r.stdout)
    assert [o["operation_id"] for o in listed].count(done) == 1
    (marked,) = [o for o in listed if o["operation_id"] == waiting]
    assert "damaged" in marked and "names another operation" in marked["damaged"]
