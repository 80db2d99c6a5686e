"""Review 9b (f4): ``Worker(app_ref=...)`` takes the application reference in every shape the Runner does.

D21: workers, ``run`` and ``resume`` take ``module:factory``; ``Runner(app=...)`` and ``App.runner(store,
ref=...)`` accept a plain ``"module:factory"`` string as ``{"ref": ..., "args": {}}`` (runtime/checks.py).
``Worker`` read ``app_ref.get(...)`` itself, so that string was an ``AttributeError``; it now uses the
runner's normalised reference. A malformed one is a ``UsageError`` (D4), and an operation saved by an
older build with a plain string still runs with the application it names.
"""

from __future__ import annotations

import pytest

import callbound as cb
from callbound.runtime.worker import Worker
from callbound.stores import open_store

from .test_worker_apps import FACTORY_CALLS, HERE, factory, tool_factory


async def test_a_plain_module_factory_string_is_the_workers_own_application() -> None:
    store = open_store("memory:")
    own = factory().runner(store, ref=f"{HERE}:factory").submit("q", "acme", "u1")
    worker = Worker(factory(), store, app_ref=f"{HERE}:factory", lease_s=5, poll_s=0.01)
    assert worker.runner.app == {"ref": f"{HERE}:factory", "args": {}}
    FACTORY_CALLS.clear()
    stats = await worker.run(idle_exit_s=0)
    assert stats.errors == 0 and stats.outcomes == {own: "COMPLETED"}
    assert FACTORY_CALLS == []  # its own application: not rebuilt
    assert worker.runner.outcome(own).text == "answer from own"


@pytest.mark.parametrize("bad", ["no-colon", {"ref": 3}, {"ref": "m:f", "args": [1]}, 7])
def test_a_malformed_app_ref_is_a_usage_error(bad: object) -> None:
    with pytest.raises(cb.UsageError):
        Worker(factory(), open_store("memory:"), app_ref=bad)  # type: ignore[arg-type]


async def test_an_operation_saved_with_a_plain_string_runs_with_that_application() -> None:
    """What an older build stored (the string as given) is read as the same reference."""
    store = open_store("memory:")
    op = tool_factory().runner(store, ref=f"{HERE}:tool_factory").submit("q", "acme", "u1")
    store._heads[op]["app"] = f"{HERE}:tool_factory"  # as an older build saved it
    worker = Worker(factory(), store, app_ref=f"{HERE}:factory", lease_s=5, poll_s=0.01)
    runner = worker.runner_for(op)
    assert runner is not worker.runner and runner.app == {"ref": f"{HERE}:tool_factory", "args": {}}
    assert worker.runner_for(op) is runner  # cached under the normalised key
