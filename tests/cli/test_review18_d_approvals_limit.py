"""Review round 18 (d F4): ``approvals list`` past 1000 approvals.

The command passed no limit, so the stores' default of 1000 cut the list, oldest first, without a word:
once a store had seen 1000 approvals, ``approvals list --all`` (where ``ApprovalAlreadyDecided`` sends
the reader, docs/reference.md) never showed the newest decisions, and there was no option to see them.
Now ``--limit`` sets how many, and a note on stderr says when there are more (stdout stays the list).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from callbound.stores.base import Commit
from callbound.stores.sqlite import SQLiteStore
from tests.stores.conftest import T0, decide, make_approval, make_head

REPO = Path(__file__).resolve().parents[2]
N = 1003


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "callbound.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _store(tmp_path: Path) -> str:
    """N approvals, one a second, of one operation; the newest still pending, the others approved."""
    db = tmp_path / "cb.db"
    store = SQLiteStore(db)
    approvals = [
        make_approval(f"apr_{i:05d}", "op_many", created_at=T0 + timedelta(seconds=i)) for i in range(N)
    ]
    approvals[:-1] = [decide(a, "approved", "alice") for a in approvals[:-1]]
    store.commit(
        Commit("op_many", make_head("op_many", "WAITING_APPROVAL"), approvals=approvals, create=True)
    )
    store.close()
    return f"sqlite:///{db}"


def test_all_approvals_can_be_listed_and_a_cut_list_says_so(tmp_path: Path) -> None:
    url = _store(tmp_path)
    r = cli("approvals", "list", "--all", "--json", "--limit", "2000", "--store", url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ids = [a["approval_id"] for a in json.loads(r.stdout)]
    assert ids == [f"apr_{i:05d}" for i in range(N)] and r.stderr == ""

    r = cli("approvals", "list", "--all", "--json", "--store", url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)) == 1000  # the default, oldest first
    assert "there are more: pass --limit" in r.stderr, r.stderr

    r = cli("approvals", "list", "--json", "--limit", "1", "--store", url, cwd=tmp_path)  # the pending one
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert [a["approval_id"] for a in json.loads(r.stdout)] == [f"apr_{N - 1:05d}"]
