"""The commands that only read what is stored refuse an in-memory store (review round 22, c).

``memory:`` (and ``sqlite:///:memory:``) is new and empty in every process. ``ops list``, ``approvals
list``, ``ledger list`` and ``audit verify --store memory:`` printed an empty table or "audit verified: 0
operation(s), chains and bindings intact" and exited 0, as if a store had been read: an operator whose
configuration fell back to ``memory:`` read "nothing waiting, audit clean". A worker on it polled for ever
for operations no other process can submit there. Now each is a usage error (exit 2, D28) saying why and
what to give instead, as a SQLite path that does not exist is; ``demo`` and ``run`` still take it."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from callbound.cli.app import app


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize("store", ["memory:", "memory", "sqlite:///:memory:"])
@pytest.mark.parametrize(
    "command",
    [
        ["ops", "list"],
        ["ops", "show", "op_1"],
        ["ops", "cancel", "op_1"],
        ["resume", "op_1"],
        ["approvals", "list"],
        ["approvals", "approve", "apr_1", "--approver", "alice"],
        ["ledger", "list"],
        ["ledger", "show", "ik_1", "--tenant", "acme"],
        ["audit", "verify"],
        ["worker", "--app", "callbound.demo.refund:make_app", "--idle-exit", "0.1"],
    ],
)
def test_reading_an_in_memory_store_is_a_usage_error(command: list[str], store: str) -> None:
    r = run(*command, "--store", store)
    assert r.exit_code == 2, (r.stdout, r.stderr, r.exception)
    assert "starts empty in every process" in r.stderr and "--store sqlite:///" in r.stderr, r.stderr
    assert r.stdout == "", r.stdout


def test_the_demo_still_runs_in_memory() -> None:
    r = run("demo", "refund", "--approve", "--store", "memory:")
    assert r.exit_code == 0, (r.stderr, r.exception)
