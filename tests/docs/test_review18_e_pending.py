"""Review round 18, e F3/F4/F6: documented promises the code did not keep (e pinned them
``xfail(strict=True)``; the lead fixed them).

- F3: ``settle_intent`` on PostgreSQL with a NUL in the key or tenant raised StoreError, where memory
  and SQLite say UnknownLedgerEntry (docs/reference.md: a (tenant, key) the ledger does not hold; D4:
  StoreError means the store is unreachable). The same family as round 18 c F3's approval-id fix.
- F4: ``callbound parse`` showed TOOL_PROPOSALS with a runnable call for a body a run fails
  API_FAILURE(malformed_response) ``non_finite_number`` (cli/parse.py promises the turn a run would get
  from the same bytes; docs/stop-reasons.md).
- F6: ``Runner(rng=42)`` was accepted and the first retry raised AttributeError out of run (D4)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import callbound as cb
from callbound.runtime.settle import settle_intent
from callbound.stores import open as open_store


def _message(text: str, logprob: float) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "logprobs": [{"token": text, "logprob": logprob}]}
    return {"type": "message", "role": "assistant", "content": [part]}


def _call(call_id: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_" + call_id,
        "call_id": call_id,
        "name": "get_order",
        "arguments": json.dumps(args),
    }


@pytest.fixture
def pg_store() -> Any:
    from tests.stores.conftest import PgSchema

    schema = PgSchema()
    store = open_store(schema.url)
    try:
        yield store
    finally:
        store.close()
        schema.drop()


@pytest.mark.parametrize(("tenant", "key"), [("acme", "note:A1\x00"), ("ac\x00me", "note:A1")])
def test_settle_names_a_nul_key_unknown_on_postgres(pg_store: Any, tenant: str, key: str) -> None:
    with pytest.raises(cb.UsageError):
        settle_intent(pg_store, tenant, key, applied=False, by="alice", now=datetime.now(UTC))


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_settle_names_a_nul_key_unknown_on_the_other_stores(kind: str, tmp_path: Path) -> None:
    store = open_store("memory:" if kind == "memory" else f"sqlite:///{tmp_path / 'cb.db'}")
    with pytest.raises(cb.UnknownLedgerEntry):
        settle_intent(store, "acme", "note:A1\x00", applied=False, by="alice", now=datetime.now(UTC))


def test_parse_shows_the_non_finite_failure_a_run_gets(tmp_path: Path) -> None:
    body = {
        "id": "r1",
        "status": "completed",
        "output": [_message("Looking.", float("-inf")), _call("c1", {"order_id": "A1"})],
    }
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body), encoding="utf-8")  # -Infinity, as Python writes it
    done = subprocess.run(
        [sys.executable, "-m", "callbound.cli", "parse", "--api", "openai-responses", str(path)],
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    turn = json.loads(done.stdout)
    assert (turn["finish"], turn["reason"], turn["calls"]) == ("API_FAILURE", "malformed_response", [])


@pytest.mark.parametrize("rng", [42, "seed"])
def test_a_runner_rng_that_is_no_random_is_a_usage_error(rng: Any) -> None:
    from callbound.testing import ApiError, FakeClock, ScriptedModel

    final = {
        "id": "r1",
        "status": "completed",
        "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}
        ],
    }
    failure = ApiError(500, {"error": {"message": "try again", "type": "server_error"}})
    try:
        runner = cb.Runner(
            model=ScriptedModel("openai-responses", [failure, final]),
            registry=cb.Registry([]),
            rng=rng,
            clock=FakeClock(),
        )
    except cb.UsageError:
        return  # refused up front, as every other argument of the wrong kind is
    out = runner.run_sync(input="x", tenant="acme", subject="u1")
    assert out.state == cb.State.COMPLETED  # never reached today: AttributeError at the retry
