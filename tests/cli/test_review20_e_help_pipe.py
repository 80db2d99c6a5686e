"""Help and usage errors keep their exit codes when the reader is gone (review round 20, e).

README: a reader that closes the output early (``callbound ... | head``) changes none of the exit codes.
typer prints help and usage errors through rich consoles of its own, whose ``on_broken_pipe`` raises
``SystemExit(1)``: ``callbound --help | head -1`` exited 1 (the code of tampering, D28) instead of 0, and a
usage error whose reader had gone exited 1 instead of 2."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cli.test_review16_broken_pipe import CLI, env16


def run_closed(args: list[str], cwd: Path, *, stream: str) -> int:
    """Run ``callbound ARGS`` with ``stream`` (stdout or stderr) a pipe whose reader has gone."""
    p = subprocess.Popen(
        [*CLI, *args],
        cwd=cwd,
        stdout=subprocess.PIPE if stream == "stdout" else subprocess.DEVNULL,
        stderr=subprocess.PIPE if stream == "stderr" else subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=env16(cwd),
    )
    pipe = p.stdout if stream == "stdout" else p.stderr
    assert pipe is not None
    pipe.close()
    return p.wait(timeout=60)


@pytest.mark.parametrize(
    "args",
    [["--help"], ["ops", "list", "--help"], ["ledger", "settle", "--help"], ["demo", "refund", "--help"]],
    ids=" ".join,
)
def test_help_to_a_closed_pipe_exits_0(args: list[str], tmp_path: Path) -> None:
    assert run_closed(args, tmp_path, stream="stdout") == 0


@pytest.mark.parametrize(
    "args",
    [["bogus"], ["ops", "list", "--limit", "x"], ["approvals", "approve", "apr_1"]],
    ids=" ".join,
)
def test_a_usage_error_to_a_closed_pipe_exits_2(args: list[str], tmp_path: Path) -> None:
    assert run_closed(args, tmp_path, stream="stderr") == 2


def test_help_without_arguments_to_a_closed_pipe_is_still_a_usage_error(tmp_path: Path) -> None:
    """``callbound`` alone prints its help and exits 2 (no command given), closed pipe or not."""
    plain = subprocess.run([*CLI], cwd=tmp_path, capture_output=True, env=env16(tmp_path), timeout=60)
    assert plain.returncode == 2
    assert run_closed([], tmp_path, stream="stdout") == 2
