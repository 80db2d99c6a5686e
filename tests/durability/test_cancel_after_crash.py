"""Cancelling an operation whose process was SIGKILLed inside a write: the cancel is refused (the
write's effect is unknown and must be reconciled, D16), and the message says the driver is gone and
that `resume` reconciles it, rather than that the write is still running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from callbound.demo.payments import FakePayments

from .test_crash_matrix import phase
from .test_tamper_after_crash import crashed_mid_write


@pytest.mark.slow
def test_cancel_after_a_crash_mid_write_points_to_resume(tmp_path: Path) -> None:
    store_url, payments, op_id, _ = crashed_mid_write(tmp_path)
    r = subprocess.run(
        [sys.executable, "-m", "callbound.cli", "ops", "cancel", op_id, "--store", store_url],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert r.returncode == 2
    message = " ".join(r.stderr.split())
    assert "left running by a process that is gone" in message and f"callbound resume {op_id}" in message
    r = phase(store_url, payments, op_id, "resume", None, False)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["state"] == "COMPLETED"
    assert len(FakePayments(payments).rows()) == 1
