"""Ctrl-C while ``run`` drives a write says how to go on, and a second Ctrl-C is no traceback (review
round 16, r2 F5).

Before: one Ctrl-C during a write handler printed that handlers "that timed out" were still running and
to record the write with ``callbound ledger settle``, which is refused while the operation has not ended
(exit 3); ``callbound resume OP``, the way on, was never printed. A second Ctrl-C while the command
waited for the handler printed a KeyboardInterrupt traceback (cli/errors.py: never a traceback). Now
the command names the operation and its resume command, exits 130, and a second Ctrl-C exits 130 at
once with one line. The printed resume is the right next step: it takes the operation over and
resolves the write (this tool has no reconcile: STOPPED(OUTCOME_UNKNOWN), exit 3, as D16 says)."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

from .test_review16_broken_pipe import cli16, read_until, start, write_app


def interrupt(tmp_path: Path, second_after: float | None) -> tuple[int, str, str]:
    store = write_app(tmp_path)
    p = start("run", "--app", "r16app:make", "go", "--store", store, cwd=tmp_path, R16_GATE_S="60")
    read_until(p, b"EXECUTING")
    time.sleep(0.3)  # the handler is waiting for its gate
    p.send_signal(signal.SIGINT)
    if second_after is not None:
        time.sleep(second_after)
        p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    return p.returncode, err.decode(), store


def test_one_ctrl_c_during_a_write_prints_the_resume_that_continues_it(tmp_path: Path) -> None:
    code, err, store = interrupt(tmp_path, None)
    assert code == 130, err
    assert "Traceback" not in err and "timed out" not in err and "ledger settle" not in err, err
    m = re.search(
        r"interrupted: operation (op_\w+) is saved \(EXECUTING\).*?: (callbound resume \S+ --store \S+)", err
    )
    assert m, err
    assert m.group(2) == f"callbound resume {m.group(1)} --store {store}"
    r = cli16("resume", m.group(1), "--store", store, cwd=tmp_path)
    assert r.returncode == 3 and "OUTCOME_UNKNOWN" in r.stdout, (r.stdout, r.stderr)


def test_a_second_ctrl_c_exits_at_once_without_a_traceback(tmp_path: Path) -> None:
    started = time.monotonic()
    code, err, _ = interrupt(tmp_path, 0.3)
    assert code == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "interrupted again: exiting now" in err
    assert time.monotonic() - started < 30
