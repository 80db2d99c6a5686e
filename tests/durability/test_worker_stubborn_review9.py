"""D14, D16: `callbound worker` does not wait, after its operation, for an async handler that ignores
cancellation (asyncio.run would: it waits for every task left when it closes its loop)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from callbound.stores import open_store
from tests.durability.stubborn_app import HOLD_S, make_app

from .test_workers import ROOT

REF = "tests.durability.stubborn_app:make_app"


@pytest.mark.slow
def test_the_worker_exits_without_the_abandoned_handler(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'cb.db'}"
    store = open_store(store_url)
    op = make_app().runner(store, ref={"ref": REF, "args": {}}).submit("Where?", tenant="acme", subject="u1")
    args = ["-m", "callbound.cli", "worker", "--app", REF, "--store", store_url, "--max-operations", "1"]
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        text=True,
        capture_output=True,
        timeout=HOLD_S + 30,
    )
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    assert "finished 1" in p.stdout
    stored = store.load_operation(op)
    assert stored is not None and stored.head["state"] == "COMPLETED"
    assert took < HOLD_S / 2, f"the worker waited {took:.1f}s for the abandoned handler"
    store.close()
