"""Settings for the whole suite.

Hypothesis times each example (200 ms by default) and checks that generating data is not too slow.
Both measure the machine, not callbound: under ``pytest -n auto`` on a shared two-core machine an
example can take longer than that for no fault of the code, and the test fails by chance. Timings are
benchmarks' job (bench/), never assertions in tests; a test's own ``@settings`` still wins where it
sets these.

Hundreds of tests start a fresh interpreter (the CLI, crash and worker processes). Under
``PYTHONDONTWRITEBYTECODE`` (set by .ci/run) each of them compiled every callbound module from source
again, a quarter of its start-up; here those processes keep their bytecode in one cache outside the
working tree instead (``PYTHONPYCACHEPREFIX``), so the tree stays free of ``__pycache__`` as that
setting wants, and each module is compiled once, not once per process.
"""

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from callbound.stores import open as open_store
from callbound.stores.base import Store

settings.register_profile(
    "callbound", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile("callbound")

if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):  # read by the processes the tests start, and xdist's
    os.environ.setdefault(
        "PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / f"callbound-tests-pycache-{os.getuid()}")
    )


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def each_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh store of each kind, for a rule that must hold on every store alike; the PostgreSQL one in
    a schema of its own (skips without CALLBOUND_TEST_POSTGRES, as every PostgreSQL test does)."""
    if request.param == "postgres":
        from tests.stores.conftest import PgSchema

        schema = PgSchema()
        opened = open_store(schema.url)
        try:
            yield opened
        finally:
            opened.close()
            schema.drop()
        return
    opened = open_store("memory:" if request.param == "memory" else f"sqlite:///{tmp_path / 'cb.db'}")
    yield opened
    opened.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked ``slow`` (crash sweeps, workers: up to a minute each) run first, in the order
    they were collected, the rest after them as before. pytest-xdist hands tests out in this order, so
    the long ones are shared between the workers at the start instead of one of them ending the run
    alone on a sweep that came up last."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
