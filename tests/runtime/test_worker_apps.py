"""Workers and saved applications (D21): each claimed operation runs with the application it was saved
with; a failing operation is retried once per lease period, never re-claimed at once, and a worker
whose store holds only failing operations still exits after ``idle_exit_s``; a factory that raises is
a usage error (D28)."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import callbound as cb
from callbound.cli.app import app as cli
from callbound.core.errors import UsageError
from callbound.runtime.app import App, load_app
from callbound.runtime.verify import verify_store
from callbound.runtime.worker import Worker
from callbound.stores import open_store
from callbound.testing import ScriptedModel
from tests.durability.conftest import store_urls

from .helpers import API, EchoArgs, calls, fc, final

HERE = "tests.runtime.test_worker_apps"
FACTORY_CALLS: list[tuple[str, dict[str, Any]]] = []


def _echo_tool() -> cb.ToolSpec:
    def echo(args: EchoArgs, ctx: cb.CallContext) -> dict[str, Any]:
        return {"n": args.n}

    return cb.ToolSpec(
        name="echo",
        description="Echo a number",
        params=EchoArgs,
        handler=echo,
        schema_version="echo-v1",
        risk="read",
        timeout_ms=2000,
    )


def factory(label: str = "own") -> App:
    """Answers at once with its label, so the outcome tells which application ran."""
    FACTORY_CALLS.append(("factory", {"label": label}))
    return App(registry=cb.Registry([]), model=ScriptedModel(API, [final("resp_1", f"answer from {label}")]))


def tool_factory() -> App:
    """Another application: calls its ``echo`` tool first, which ``factory``'s registry lacks."""
    FACTORY_CALLS.append(("tool_factory", {}))
    script = [calls("resp_1", fc("call_1", "echo", {"n": 7})), final("resp_2", "echoed")]
    return App(registry=cb.Registry([_echo_tool()]), model=ScriptedModel(API, script))


def needs_args(required: str) -> App:
    return factory(required)


def empty_script() -> App:
    """Its model has no responses: every drive ends in ScriptExhausted, a UsageError."""
    return App(registry=cb.Registry([]), model=ScriptedModel(API, []))


def ref(name: str, **args: Any) -> dict[str, Any]:
    return {"ref": f"{HERE}:{name}", "args": args}


def open_kind(kind: str, tmp_path: Path) -> Any:
    return open_store("memory:" if kind == "memory" else store_urls(kind, tmp_path))


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
async def test_worker_drives_each_operation_with_its_saved_app(kind: str, tmp_path: Path) -> None:
    store = open_kind(kind, tmp_path)
    own = ref("factory")
    ops = {
        "a": factory("a").runner(store, ref=ref("factory", label="a")).submit("q", "acme", "u1"),
        "a2": factory("a").runner(store, ref=ref("factory", label="a")).submit("q", "acme", "u1"),
        "tool": tool_factory().runner(store, ref=ref("tool_factory")).submit("q", "acme", "u1"),
        "own": factory().runner(store, ref=own).submit("q", "acme", "u1"),
        "unsaved": factory("ignored").runner(store).submit("q", "acme", "u1"),
    }
    worker = Worker(factory(), store, app_ref=own, lease_s=5, poll_s=0.01)
    FACTORY_CALLS.clear()
    stats = await worker.run(idle_exit_s=0)
    assert stats.errors == 0 and stats.finished == len(ops)
    outcomes = {name: worker.runner.outcome(op) for name, op in ops.items()}
    assert {n: (o.state.value, o.text) for n, o in outcomes.items()} == {
        "a": ("COMPLETED", "answer from a"),
        "a2": ("COMPLETED", "answer from a"),
        "tool": ("COMPLETED", "echoed"),
        "own": ("COMPLETED", "answer from own"),
        "unsaved": ("COMPLETED", "answer from own"),
    }
    # One build per distinct saved application; the worker's own is never rebuilt.
    assert sorted(FACTORY_CALLS, key=repr) == [("factory", {"label": "a"}), ("tool_factory", {})]
    assert verify_store(store) == []
    store.close()


async def test_unloadable_saved_app_is_the_operations_error(caplog: pytest.LogCaptureFixture) -> None:
    store = open_store("memory:")
    bad = factory().runner(store, ref=ref("needs_args")).submit("q", "acme", "u1")
    good = factory("g").runner(store, ref=ref("factory", label="g")).submit("q", "acme", "u1")
    worker = Worker(factory(), store, app_ref=ref("factory"), lease_s=5, poll_s=0.01)
    with caplog.at_level(logging.ERROR, logger="callbound.worker"):
        stats = await worker.run(idle_exit_s=0.2)
    assert stats.errors == 1 and stats.outcomes == {good: "COMPLETED"}
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert bad in record.getMessage() and "needs_args" in record.getMessage()
    assert "required" in record.getMessage()


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
async def test_failing_operation_waits_out_its_lease_and_worker_exits_idle(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_kind(kind, tmp_path)
    op = empty_script().runner(store, ref=ref("empty_script")).submit("q", "acme", "u1")
    lease_s, idle_exit_s = 0.5, 1.2
    worker = Worker(empty_script(), store, app_ref=ref("empty_script"), lease_s=lease_s, poll_s=0.02)
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="callbound.worker"):
        # max_operations only bounds a regression that re-claims at once; the worker must stop on idle.
        stats = await asyncio.wait_for(worker.run(max_operations=50, idle_exit_s=idle_exit_s), 30)
    elapsed = time.monotonic() - started
    assert idle_exit_s <= elapsed < idle_exit_s + 5
    # Claimed at most once per lease period (plus the first claim), each failure logged once.
    assert 1 <= stats.claimed <= int(elapsed / lease_s) + 1, (stats, elapsed)
    assert stats.errors == stats.claimed and stats.finished == 0
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == stats.claimed
    assert all(op in m and "ScriptedModel has 0 responses" in m for m in errors)
    store.close()


async def test_failed_claim_keeps_the_lease_from_other_workers() -> None:
    store = open_store("memory:")
    op = factory().runner(store, ref=ref("empty_script")).submit("q", "acme", "u1")
    worker = Worker(factory(), store, app_ref=ref("factory"), lease_s=0.3, poll_s=0.01)
    claim = store.claim("w1", 0.3)
    assert claim is not None and claim[0] == op
    assert await worker.handle(*claim) is False
    assert store.claim("w2", 0.3) is None  # not re-claimable at once, by anyone
    await asyncio.sleep(0.35)
    again = store.claim("w2", 0.3)
    assert again is not None and again[0] == op


async def test_worker_on_empty_store_exits_after_idle_exit() -> None:
    worker = Worker(factory(), open_store("memory:"), poll_s=0.02)
    started = time.monotonic()
    stats = await asyncio.wait_for(worker.run(idle_exit_s=0.2), 10)
    assert 0.2 <= time.monotonic() - started < 3 and stats.claimed == 0


def test_load_app_with_raising_factory_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as err:
        load_app(f"{HERE}:needs_args")
    assert f"{HERE}:needs_args" in str(err.value) and "required" in str(err.value)
    with pytest.raises(UsageError, match="unknown scenario"):
        load_app("callbound.demo.refund:make_app", {"scenario": "nope"})


def test_worker_cli_with_raising_factory_exits_2() -> None:
    result = CliRunner().invoke(cli, ["worker", "--app", f"{HERE}:needs_args", "--store", "memory:"])
    assert result.exit_code == 2, result.output
