"""SIGKILL at every commit of a tool loop, not only at the named crash points (issue 4 §5; D16, D18, D22).

The named points of ``test_crash_matrix`` sit in the refund demo, whose turns hold one call each. This
sweep runs a flow whose turns hold what a user's do: two reads at once, two writes in one turn (a
commit between them, D15), a mixed turn whose read runs while its refund waits for approval (D3), and
a variant whose refund applies downstream but answers after its timeout (reconcile, D16). A driver
process counts the store's commits and kills itself just BEFORE the N-th (the commit is lost) or just
AFTER it, for every N the flow reaches, in the first drive and in the resume after the approval; a fresh
process then resumes. Every write here has a reconcile, so every cell must end COMPLETED with exactly
one downstream row per intent (never two: no effect ran twice; never none: no effect was lost), the
approval kept, and the audit chain and bindings verified.

The driver process is tests/durability/commit_kill_driver.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .commit_kill_driver import KILL
from .conftest import store_urls

ROOT = Path(__file__).resolve().parents[2]


# ---- the sweep -----------------------------------------------------------------------------------


def _phase(
    store_url: str,
    downstream: str,
    op_id: str,
    name: str,
    variant: str,
    kill: str | None,
    unsafe: bool = False,
    crash_at: str | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in (KILL, "CALLBOUND_CRASH_AT", "CALLBOUND_UNSAFE_NO_LEDGER")
    }
    if kill:
        env[KILL] = kill
    if unsafe:
        env["CALLBOUND_UNSAFE_NO_LEDGER"] = "1"
    if crash_at:
        env["CALLBOUND_CRASH_AT"] = crash_at  # a named crash point of the library (D22)
    args = [sys.executable, "-m", "tests.durability.commit_kill_driver"]
    args += [store_url, downstream, op_id, name, variant]
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)


def _drive(
    store_url: str,
    downstream: str,
    op_id: str,
    variant: str,
    kill: str,
    in_phase: str,
    *,
    unsafe: bool = False,
    phases: tuple[str, ...] = ("run", "resume"),
) -> tuple[bool, dict[str, Any]]:
    """run (pauses for the refund's approval), then approve and resume; the kill armed in ``in_phase``.
    A killed phase is followed by a resume in a fresh process, which decides what is still pending.
    ``phases=("resume",)`` when the cell starts from a copy of a run already made (``_copy_cell``)."""
    killed = False
    last: dict[str, Any] = {}
    for name in phases:
        r = _phase(store_url, downstream, op_id, name, variant, kill if name == in_phase else None, unsafe)
        if r.returncode == -signal.SIGKILL:
            killed = True
            r = _phase(store_url, downstream, op_id, "resume", variant, None, unsafe)
        assert r.returncode == 0, f"{name} ({kill}) failed: {r.stderr[-3000:]}"
        last = json.loads(r.stdout.strip().splitlines()[-1])
    return killed, last


def _copy_cell(source: Path, cell: Path) -> None:
    """Give ``cell`` the SQLite files (the store and the downstream database, each with its -wal and
    -shm) that the phases run in ``source`` left: what a fresh process would find there, had those
    phases run in ``cell``. No process has them open. The phases before the armed one are never armed,
    so they do the same in every cell; running them once spares the sweep a process per cell."""
    for f in source.iterdir():
        shutil.copy2(f, cell / f.name)


def _last(r: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert r.returncode == 0, r.stderr[-3000:]
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def _rows(downstream: str) -> list[tuple[Any, ...]]:
    from callbound.demo.payments import FakePayments

    return FakePayments(downstream).rows()


def _check(store_url: str, downstream: str, op_id: str, label: str) -> None:
    from callbound.runtime.verify import verify_store
    from callbound.stores import open_store

    rows = _rows(downstream)
    keys = [r[1] for r in rows]
    what = sorted(r[2] for r in rows)
    # one draft, one note, one refund: none twice, none lost
    assert what == ["dr_A1", "draft", "note"], f"{label}: downstream rows {rows}"
    assert len(set(keys)) == 3, f"{label}: {rows}"
    store = open_store(store_url)
    try:
        approvals = store.list_approvals(operation_id=op_id, status=None)
        assert [a.status for a in approvals] == ["approved"], f"{label}: {approvals}"
        assert verify_store(store, op_id) == [], label
    finally:
        store.close()


def _sweep(kind: str, variant: str, in_phase: str, tmp_path: Path) -> int:
    ran: Path | None = None  # sweeping the resume on SQLite: the run, made once, copied into each cell
    if in_phase == "resume" and kind == "sqlite":
        ran = tmp_path / "ran"
        ran.mkdir()
        r = _phase(store_urls(kind, ran), str(ran / "downstream.db"), "op_sweep", "run", variant, None)
        assert _last(r) == {"state": "WAITING_APPROVAL", "reason": None}
    n = 0
    cells = 0
    while True:
        n += 1
        for when in ("before", "after"):
            cell = tmp_path / f"{in_phase}-{when}-{n}"
            cell.mkdir()
            store_url = store_urls(kind, cell)
            downstream = str(cell / "downstream.db")
            op_id = f"op_sweep_{in_phase}_{when}_{n}"
            phases: tuple[str, ...] = ("run", "resume")
            if ran is not None:
                _copy_cell(ran, cell)
                op_id, phases = "op_sweep", ("resume",)
            killed, last = _drive(
                store_url, downstream, op_id, variant, f"{when}:{n}", in_phase, phases=phases
            )
            label = f"{kind}/{variant}: kill {when} commit {n} of {in_phase}"
            assert last == {"state": "COMPLETED", "reason": None}, f"{label}: {last}"
            _check(store_url, downstream, op_id, label)
            if not killed:
                # this phase makes fewer than n commits: every commit of it has been swept
                assert n > 2, f"{label}: the phase committed less than the flow needs"
                return cells
            cells += 1


@pytest.mark.slow
# the refund (and its timeout) runs in the resume; the first drive is the same in both variants
@pytest.mark.parametrize(
    ("store_kind", "in_phase", "variant"),
    [
        ("sqlite", "run", "plain"),
        ("sqlite", "resume", "plain"),
        ("sqlite", "resume", "timeout"),
        ("postgres", "run", "plain"),
        ("postgres", "resume", "plain"),
    ],
)
def test_a_kill_at_any_commit_runs_each_effect_once(
    store_kind: str, in_phase: str, variant: str, tmp_path: Path
) -> None:
    cells = _sweep(store_kind, variant, in_phase, tmp_path)
    assert cells >= 4  # the phase's commits were reached and killed at, each before and after


@pytest.mark.slow
def test_a_second_kill_while_recovering_a_refund_runs_it_once(tmp_path: Path) -> None:
    """The refund applied downstream, the process killed before its result commit; the process that
    recovers it (its reconcile takes the entry over, finds the refund, records it) is killed in turn at
    each of its commits, before and after; a third resumes. Still one refund, none lost (D16, D18)."""
    # the run and the first kill, the same for every cell: made once, copied into each (_copy_cell)
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    store_url, downstream, op_id = store_urls("sqlite", crashed), str(crashed / "downstream.db"), "op_twice"
    assert _last(_phase(store_url, downstream, op_id, "run", "plain", None))["state"] == "WAITING_APPROVAL"
    first = "after_effect_before_result_commit:submit_refund"
    r = _phase(store_url, downstream, op_id, "resume", "plain", None, crash_at=first)
    assert r.returncode == -signal.SIGKILL, "the refund's crash point was not reached"
    assert len(_rows(downstream)) == 3  # draft, note and the refund: applied, not recorded
    n = 0
    while True:
        n += 1
        for when in ("before", "after"):
            cell = tmp_path / f"{when}-{n}"
            cell.mkdir()
            _copy_cell(crashed, cell)
            store_url, downstream = store_urls("sqlite", cell), str(cell / "downstream.db")
            label = f"second kill {when} commit {n} of the recovery"
            r = _phase(store_url, downstream, op_id, "resume", "plain", f"{when}:{n}")
            killed = r.returncode == -signal.SIGKILL
            if killed:
                r = _phase(store_url, downstream, op_id, "resume", "plain", None)
            assert r.returncode == 0, f"{label}: {r.stderr[-3000:]}"
            last = json.loads(r.stdout.strip().splitlines()[-1])
            assert last == {"state": "COMPLETED", "reason": None}, f"{label}: {last}"
            _check(store_url, downstream, op_id, label)
            if not killed:
                assert n > 2, f"{label}: the recovery committed less than it must"
                return


@pytest.mark.slow
def test_negative_control_the_sweep_sees_a_double_effect(tmp_path: Path) -> None:
    """With the ledger bypassed (D22's negative control), some kill in the resume makes a write run
    twice, and the sweep's check says so: the sweep can fail."""
    n = 0
    while True:
        n += 1
        cell = tmp_path / f"cell-{n}"
        cell.mkdir()
        store_url, downstream = store_urls("sqlite", cell), str(cell / "downstream.db")
        op_id = f"op_control_{n}"
        killed, _ = _drive(store_url, downstream, op_id, "plain", f"before:{n}", "resume", unsafe=True)
        rows = _rows(downstream)
        if len(rows) > len({r[1] for r in rows}):
            return  # an intent applied twice downstream: seen
        assert killed, f"no kill in the resume applied a write twice without the ledger: {rows}"
