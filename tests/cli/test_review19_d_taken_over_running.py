"""`callbound run` and `resume` whose operation another process takes over and is still driving.

Found in review round 19 (d F1): the drive's next write failed with StaleLease and the command reported
the operation as the store held it, with exit 3 for any state but COMPLETED and WAITING_APPROVAL. D28
keeps 3 for terminal states; an operation another driver is still running (EXECUTING here) has reached
no end. The command now fails as a second driver does (OperationBusy, exit 2): it names the holder, how
to follow the operation and the resume that continues it, and the operation is kept as it was.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "callbound.cli"]

APP = textwrap.dedent(
    """
    import os
    import callbound as cb
    from pydantic import BaseModel
    from callbound.runtime.app import App
    from callbound.stores import open as open_store
    from callbound.testing import ScriptedModel

    class Empty(BaseModel):
        pass

    def step(args, ctx):
        with open(os.environ["COUNT_FILE"], "a") as f:
            f.write("x")
        with open(os.environ["COUNT_FILE"]) as f:
            n = len(f.read())
        if n == int(os.environ.get("DIE_ON", "0")):
            os._exit(137)  # the first drive dies in the handler; a resume takes the operation over at once
        if n == int(os.environ["STEAL_ON"]):  # a worker elsewhere takes the operation over meanwhile
            st = open_store(os.environ["STORE"])
            assert st.hold(ctx.operation_id, "worker-elsewhere", 300.0,
                           replacing=st.lease_holder(ctx.operation_id)) is not None
            st.close()
        return {"ok": 1}

    def make():
        call = {"id": "r1", "status": "completed", "output": [{"type": "function_call", "id": "fc_1",
                "call_id": "call_1", "name": "step", "arguments": "{}"}]}
        done = {"id": "r2", "status": "completed", "output": [{"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "Done."}]}]}
        registry = cb.Registry([cb.ToolSpec(name="step", description="step", params=Empty, handler=step,
                                            schema_version="1", risk="read")])
        return App(registry=registry, model=ScriptedModel("openai-responses", [call, done]))
    """
)


def _shell(tmp_path: Path, **env: str) -> tuple[dict[str, str], str]:
    (tmp_path / "stepapp.py").write_text(APP)
    store = f"sqlite:///{tmp_path / 'cb.db'}"
    return {
        **os.environ,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'src'}",
        "COUNT_FILE": str(tmp_path / "count"),
        "STORE": store,
        **env,
    }, store


def _cli(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=120)


def _only_op(tmp_path: Path, env: dict[str, str], store: str) -> str:
    listed = _cli(tmp_path, env, "ops", "list", "--store", store)
    return next(w for w in listed.stdout.split() if w.startswith("op_"))


def _still_running_elsewhere(tmp_path: Path, env: dict[str, str], store: str, proc: subprocess.CompletedProcess[str]) -> None:  # fmt: skip
    op_id = _only_op(tmp_path, env, store)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    said = " ".join(proc.stderr.split())
    assert f"operation {op_id} was taken over by another process" in said, said
    assert "still running (EXECUTING)" in said and "nothing is lost" in said, said
    assert "worker-elsewhere drives it" in said, said
    assert f"callbound ops show {op_id} --store" in said and f"callbound resume {op_id}" in said, said
    assert "Traceback" not in proc.stderr and "stale" not in said
    shown = _cli(tmp_path, env, "ops", "show", op_id, "--store", store)
    assert shown.returncode == 0 and "EXECUTING" in shown.stdout, shown.stdout  # kept as it was
    verified = _cli(tmp_path, env, "audit", "verify", "--store", store)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_run_taken_over_and_still_running_elsewhere_exits_2(tmp_path: Path) -> None:
    env, store = _shell(tmp_path, STEAL_ON="1")
    run = _cli(tmp_path, env, "run", "--app", "stepapp:make", "x", "--store", store)
    _still_running_elsewhere(tmp_path, env, store, run)


def test_a_resume_taken_over_and_still_running_elsewhere_exits_2(tmp_path: Path) -> None:
    env, store = _shell(tmp_path, DIE_ON="1", STEAL_ON="2")
    run = _cli(tmp_path, env, "run", "--app", "stepapp:make", "x", "--store", store)
    assert run.returncode == 137 or run.returncode < 0, (run.stdout, run.stderr)
    op_id = _only_op(tmp_path, env, store)
    resume = _cli(tmp_path, env, "resume", op_id, "--app", "stepapp:make", "--store", store)
    _still_running_elsewhere(tmp_path, env, store, resume)
    assert "--app stepapp:make" in " ".join(resume.stderr.split())
