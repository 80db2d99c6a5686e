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


class _Shell:
    """The slow app in ``tmp_path``, its store, and the CLI run from there, as a user's shells would."""

    def __init__(self, tmp_path: Path) -> None:
        (tmp_path / "slowapp.py").write_text(APP)
        self.cwd, self.go, self.entered = tmp_path, tmp_path / "go", tmp_path / "entered"
        self.env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'src'}", "GO_FILE": str(self.go),
                    "ENTERED_FILE": str(self.entered)}  # fmt: skip
        self.store = f"sqlite:///{tmp_path / 'cb.db'}"

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([*CLI, *args, "--store", self.store], cwd=self.cwd, env=self.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip

    def executing(self) -> str:
        for _ in range(200):
            listed = subprocess.run([*CLI, "ops", "list", "--store", self.store], cwd=self.cwd, env=self.env,
                                    text=True, capture_output=True)  # fmt: skip
            if listed.returncode == 0 and "EXECUTING" in listed.stdout:
                return next(w for w in listed.stdout.split() if w.startswith("op_"))
            time.sleep(0.1)
        raise AssertionError("the operation never reached its handler")

    def entered_times(self, n: int) -> None:
        for _ in range(300):
            if self.entered.exists() and len(self.entered.read_text()) >= n:
                return
            time.sleep(0.1)
        raise AssertionError(f"the handler was not entered {n} times")

    def cancel(self, op_id: str) -> None:
        cancel = subprocess.run([*CLI, "ops", "cancel", op_id, "--store", self.store], cwd=self.cwd, env=self.env,
                                text=True, capture_output=True)  # fmt: skip
        assert cancel.returncode == 0 and "CANCELLED" in cancel.stdout, cancel.stderr


CLI = [sys.executable, "-m", "callbound.cli"]


def _reports_the_cancellation(proc: subprocess.Popen[str]) -> None:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, (out, err)
    assert "STOPPED (CANCELLED)" in out
    assert "taken over by another process" in err and "stale" not in err


def test_a_run_cancelled_meanwhile_reports_the_cancellation(tmp_path: Path) -> None:
    sh = _Shell(tmp_path)
    run = sh.start("run", "--app", "slowapp:make", "x")
    try:
        sh.cancel(sh.executing())
    finally:
        sh.go.write_text("go")
    _reports_the_cancellation(run)


def test_a_resume_cancelled_meanwhile_reports_the_cancellation(tmp_path: Path) -> None:
    """The same for `callbound resume` (found by a later reviewer: resume_cmd still turned the StaleLease
    into exit 2). The first drive is killed in the handler; resume takes the operation over at once,
    enters the handler again, and is cancelled there."""
    sh = _Shell(tmp_path)
    run = sh.start("run", "--app", "slowapp:make", "x")
    op_id = sh.executing()
    run.kill()
    run.communicate(timeout=30)
    resume = sh.start("resume", op_id, "--app", "slowapp:make")
    try:
        sh.entered_times(2)  # resume took the dead drive's operation over and is in the handler again
        sh.cancel(op_id)
    finally:
        sh.go.write_text("go")
    _reports_the_cancellation(resume)
