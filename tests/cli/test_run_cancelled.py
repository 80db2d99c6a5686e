"""`callbound run` whose operation is cancelled from another shell while a handler works.

Found by a reviewer: the run's next write failed with StaleLease (the cancel moved the fencing token)
and the command exited 2 with "lease token 1 is stale ... another worker owns it now", although the
operation was simply STOPPED(CANCELLED). It now reports the operation as the store holds it (exit 3,
D28), with a note that another process took it over.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

APP = textwrap.dedent(
    """
    import json, os, time
    import callbound as cb
    from pydantic import BaseModel
    from callbound.runtime.app import App
    from callbound.testing import ScriptedModel

    class Empty(BaseModel):
        pass

    def slow(args, ctx):
        with open(os.environ.get("ENTERED_FILE", os.devnull), "a") as entered:
            entered.write("x")
        go = os.environ["GO_FILE"]
        for _ in range(300):  # until the test has cancelled the operation (30 s at most)
            if os.path.exists(go):
                break
            time.sleep(0.1)
        return {"ok": 1}

    def make():
        call = {"id": "r1", "status": "completed", "output": [{"type": "function_call", "id": "fc_1",
                "call_id": "call_1", "name": "slow", "arguments": "{}"}]}
        done = {"id": "r2", "status": "completed", "output": [{"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "Done."}]}]}
        registry = cb.Registry([cb.ToolSpec(name="slow", description="slow", params=Empty, handler=slow,
                                            schema_version="1", risk="read", timeout_ms=60_000)])
        return App(registry=registry, model=ScriptedModel("openai-responses", [call, done]))
    """
)


def test_a_run_cancelled_meanwhile_reports_the_cancellation(tmp_path: Path) -> None:
    (tmp_path / "slowapp.py").write_text(APP)
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'src'}", "GO_FILE": str(go)}
    store = f"sqlite:///{tmp_path / 'cb.db'}"
    cli = [sys.executable, "-m", "callbound.cli"]
    run = subprocess.Popen(
        [*cli, "run", "--app", "slowapp:make", "--store", store, "x"],
        cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        op_id = None
        for _ in range(200):
            listed = subprocess.run([*cli, "ops", "list", "--store", store], cwd=tmp_path, env=env, text=True,
                                    capture_output=True)  # fmt: skip
            if listed.returncode == 0 and "EXECUTING" in listed.stdout:
                op_id = next(w for w in listed.stdout.split() if w.startswith("op_"))
                break
            time.sleep(0.1)
        assert op_id is not None, "the operation never reached its handler"
        cancel = subprocess.run([*cli, "ops", "cancel", op_id, "--store", store], cwd=tmp_path, env=env,
                                text=True, capture_output=True)  # fmt: skip
        assert cancel.returncode == 0 and "CANCELLED" in cancel.stdout, cancel.stderr
    finally:
        go.write_text("go")
    out, err = run.communicate(timeout=60)
    assert run.returncode == 3, (out, err)
    assert "STOPPED (CANCELLED)" in out
    assert "taken over by another process" in err and "stale" not in err


def test_a_resume_cancelled_meanwhile_reports_the_cancellation(tmp_path: Path) -> None:
    """The same for `callbound resume` (found by a later reviewer: resume_cmd still turned the StaleLease
    into exit 2). The first drive is killed in the handler; resume takes the operation over at once,
    enters the handler again, and is cancelled there."""
    (tmp_path / "slowapp.py").write_text(APP)
    go, entered = tmp_path / "go", tmp_path / "entered"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'src'}", "GO_FILE": str(go),
           "ENTERED_FILE": str(entered)}  # fmt: skip
    store = f"sqlite:///{tmp_path / 'cb.db'}"
    cli = [sys.executable, "-m", "callbound.cli"]

    def executing() -> str | None:
        for _ in range(200):
            listed = subprocess.run([*cli, "ops", "list", "--store", store], cwd=tmp_path, env=env, text=True,
                                    capture_output=True)  # fmt: skip
            if listed.returncode == 0 and "EXECUTING" in listed.stdout:
                return next(w for w in listed.stdout.split() if w.startswith("op_"))
            time.sleep(0.1)
        return None

    run = subprocess.Popen([*cli, "run", "--app", "slowapp:make", "--store", store, "x"], cwd=tmp_path, env=env,
                           text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    op_id = executing()
    run.kill()
    run.communicate(timeout=30)
    assert op_id is not None, "the operation never reached its handler"
    resume = subprocess.Popen([*cli, "resume", op_id, "--app", "slowapp:make", "--store", store], cwd=tmp_path,
                              env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        for _ in range(300):  # resume takes the dead drive's operation over and enters the handler again
            if entered.exists() and len(entered.read_text()) >= 2:
                break
            time.sleep(0.1)
        assert len(entered.read_text()) >= 2, "resume never reached the handler"
        cancel = subprocess.run([*cli, "ops", "cancel", op_id, "--store", store], cwd=tmp_path, env=env,
                                text=True, capture_output=True)  # fmt: skip
        assert cancel.returncode == 0 and "CANCELLED" in cancel.stdout, cancel.stderr
    finally:
        go.write_text("go")
    out, err = resume.communicate(timeout=60)
    assert resume.returncode == 3, (out, err)
    assert "STOPPED (CANCELLED)" in out
    assert "taken over by another process" in err and "stale" not in err
