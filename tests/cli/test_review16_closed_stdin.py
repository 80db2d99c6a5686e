"""A closed stdin (``<&-``, so ``sys.stdin`` is None) is no terminal and no input, not a crash (review
round 16, r2 F4).

README, The command line: the demo "without a terminal, or at end of input ... saves the operation and
prints the commands to continue from any shell" (D28: WAITING_APPROVAL, exit 0). Issue 3 §5: ``parse``
gives "2 with a one-line error for input it cannot read". Both raised AttributeError on None: a
traceback and exit 1, the demo's operation left paused with no command printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .test_review16_broken_pipe import env16


def closed_stdin(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "callbound.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env16(cwd),
        preexec_fn=lambda: os.close(0),
        timeout=120,
    )


def test_parse_of_a_closed_stdin_is_one_error_line(tmp_path: Path) -> None:
    r = closed_stdin("parse", "--api", "openai-chat", "-", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert (
        r.stderr.startswith("error: cannot read standard input: it is closed") and r.stderr.count("\n") == 1
    )


def test_the_demo_with_a_closed_stdin_saves_the_pause_and_prints_the_commands(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'cb.db'}"
    r = closed_stdin("demo", "refund", "--store", store, cwd=tmp_path)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    assert "WAITING_APPROVAL" in r.stdout
    assert "callbound approvals approve apr_" in r.stdout and "callbound resume op_" in r.stdout
