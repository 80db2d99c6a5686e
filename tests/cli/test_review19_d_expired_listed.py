"""Review round 19 (d F4): `callbound approvals list` showed an approval past its expiry as `pending`.

Until a resume withdraws it, its stored status stays pending, and the list (titled "Pending approvals")
offered it to an operator like any other: approving it records a decision that can never let the call
run (D17; the approve command then warns). The table now says `pending (expired)` for it; `--json`
keeps the stored fields (status and expires_at say the same).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
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
        return App(registry=registry, model=ScriptedModel("openai-responses", [call]),
                   policy=cb.Policy(approval_ttl=timedelta(seconds=5)))
    """
)


def test_an_expired_approval_is_listed_as_expired(tmp_path: Path) -> None:
    (tmp_path / "expapp.py").write_text(APP)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'src'}", "COLUMNS": "250"}
    store = f"sqlite:///{tmp_path / 'cb.db'}"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "callbound.cli", *args, "--store", store], cwd=tmp_path,
                              env=env, text=True, capture_output=True, timeout=120)  # fmt: skip

    run = cli("run", "--app", "expapp:make", "--json", "refund A1")
    assert run.returncode == 0, run.stderr
    pending = json.loads(run.stdout)["pending_approvals"][0]
    approval_id, expires = pending["approval_id"], datetime.fromisoformat(pending["expires_at"])
    fresh = cli("approvals", "list")
    if datetime.now(UTC) < expires - timedelta(seconds=1):  # (a loaded machine may take 5 s to get here)
        row = next(line for line in fresh.stdout.splitlines() if approval_id in line)
        assert " pending " in row and "expired" not in row, row
    time.sleep(max(0.0, (expires - datetime.now(UTC)).total_seconds()) + 0.2)  # past its lifetime
    late = cli("approvals", "list")
    assert late.returncode == 0, late.stderr
    row = next(line for line in late.stdout.splitlines() if approval_id in line)
    assert "pending (expired)" in row, row
    listed = json.loads(cli("approvals", "list", "--json").stdout)
    assert [a["status"] for a in listed] == ["pending"]  # the stored fields, as before
