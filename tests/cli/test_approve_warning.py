"""`approvals approve` after expiry says what a resume will do under the operation's policy (D17):
with Policy(on_approval_expired="stop") the resume stops the operation, it does not tell the model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

APP = textwrap.dedent(
    """
    from datetime import timedelta
    import callbound as cb
    from pydantic import BaseModel
    from callbound.runtime.app import App
    from callbound.testing import ScriptedModel

    class Refund(BaseModel):
        order_id: str

    def make():
        call = {"id": "r1", "status": "completed", "output": [{"type": "function_call", "id": "fc_1",
                "call_id": "call_1", "name": "refund", "arguments": '{"order_id": "A1"}'}]}
        registry = cb.Registry([cb.ToolSpec(name="refund", description="Refund", params=Refund,
                                            handler=lambda a, c: {"ok": 1}, schema_version="1",
                                            risk="irreversible")])
        policy = cb.Policy(on_approval_expired="stop", approval_ttl=timedelta(seconds=1))
        return App(registry=registry, model=ScriptedModel("openai-responses", [call]), policy=policy)
    """
)


def test_the_late_approval_warning_names_the_stop(tmp_path: Path) -> None:
    (tmp_path / "stopapp.py").write_text(APP)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'src'}"}
    store = f"sqlite:///{tmp_path / 'cb.db'}"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "callbound.cli", *args], cwd=tmp_path, env=env, text=True,
                              capture_output=True, timeout=120)  # fmt: skip

    run = cli("run", "--app", "stopapp:make", "--store", store, "--json", "refund A1")
    assert run.returncode == 0, run.stderr
    approval_id = json.loads(run.stdout)["pending_approvals"][0]["approval_id"]
    time.sleep(1.2)  # past the approval's one-second lifetime
    approve = cli("approvals", "approve", approval_id, "--approver", "alice", "--store", store)
    assert approve.returncode == 0, approve.stderr
    assert "STOPPED(APPROVAL_EXPIRED)" in approve.stderr and "tells the model" not in approve.stderr


REVISED_APP = textwrap.dedent(
    """
    import os
    import callbound as cb
    from pydantic import BaseModel
    from callbound.runtime.app import App
    from callbound.testing import ScriptedModel

    class Refund(BaseModel):
        order_id: str

    def make():
        call = {"id": "r1", "status": "completed", "output": [{"type": "function_call", "id": "fc_1",
                "call_id": "call_1", "name": "refund", "arguments": '{"order_id": "A1"}'}]}
        registry = cb.Registry([cb.ToolSpec(name="refund", description="Refund", params=Refund,
                                            handler=lambda a, c: {"ok": 1}, schema_version="1",
                                            risk="irreversible")])
        policy = cb.Policy(revision=os.environ["REVIEW13_REVISION"])
        return App(registry=registry, model=ScriptedModel("openai-responses", [call]), policy=policy)
    """
)


def test_approving_under_a_new_policy_revision_warns_the_call_will_not_run(tmp_path: Path) -> None:
    """D17: a resume under another policy revision tells the model APPROVAL_STALE; "approved by alice"
    alone read as if the refund would now go ahead (as a late approval did)."""
    (tmp_path / "revapp.py").write_text(REVISED_APP)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'src'}"}
    store = f"sqlite:///{tmp_path / 'cb.db'}"

    def cli(revision: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "callbound.cli", *args], cwd=tmp_path, text=True,
                              env={**env, "REVIEW13_REVISION": revision}, capture_output=True, timeout=120)  # fmt: skip

    run = cli("rev-1", "run", "--app", "revapp:make", "--store", store, "--json", "refund A1")
    assert run.returncode == 0, run.stderr
    approval_id = json.loads(run.stdout)["pending_approvals"][0]["approval_id"]
    same = cli("rev-1", "approvals", "approve", approval_id, "--approver", "alice", "--store", store)
    assert same.returncode == 0 and "warning" not in same.stderr, same.stderr

    run = cli("rev-1", "run", "--app", "revapp:make", "--store", store, "--json", "refund A1")
    approval_id = json.loads(run.stdout)["pending_approvals"][0]["approval_id"]
    newer = cli("rev-2", "approvals", "approve", approval_id, "--approver", "alice", "--store", store)
    assert newer.returncode == 0, newer.stderr
    assert "policy revision 'rev-1'" in newer.stderr and "APPROVAL_STALE" in newer.stderr
    assert "approved by alice" in newer.stdout
