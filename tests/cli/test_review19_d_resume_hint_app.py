"""Review round 19 (d F6): the resume a stopped `callbound resume --app M:F` prints carries `--app`.

An operation created in code without an application reference (D21) is resumed with `--app`; Ctrl-C
during that resume (and a store failure mid-drive) printed `callbound resume OP --store ...` without
it, a command that fails with "no saved application". The printed resume now repeats the `--app`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "callbound.cli"]

APP = textwrap.dedent(
    """
    import os, time
    import callbound as cb
    from pydantic import BaseModel
    from callbound.runtime.app import App
    from callbound.testing import ScriptedModel

    class Empty(BaseModel):
        pass

    def step(args, ctx):
        if os.environ.get("DIE"):
            os._exit(137)  # the drive in code dies in the handler: EXECUTING, saved without an app
        open("entered", "w").close()
        for _ in range(600):  # the resume waits here until the test interrupts it
            time.sleep(0.1)
        return {"ok": 1}

    def make():
        call = {"id": "r1", "status": "completed", "output": [{"type": "function_call", "id": "fc_1",
                "call_id": "call_1", "name": "step", "arguments": "{}"}]}
        done = {"id": "r2", "status": "completed", "output": [{"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "Done."}]}]}
        registry = cb.Registry([cb.ToolSpec(name="step", description="step", params=Empty, handler=step,
                                            schema_version="1", risk="read", timeout_ms=120_000)])
        return App(registry=registry, model=ScriptedModel("openai-responses", [call, done]))

    if __name__ == "__main__":
        import sys
        from callbound import stores
        make().runner(stores.open(sys.argv[1])).run_sync(input="go", tenant="acme", subject="s",
                                                          operation_id="op_incode1")
    """
)


def test_ctrl_c_in_a_resume_with_app_prints_a_resume_with_app(tmp_path: Path) -> None:
    (tmp_path / "codeapp.py").write_text(APP)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'src'}"}
    store = f"sqlite:///{tmp_path / 'cb.db'}"
    made = subprocess.run([sys.executable, "codeapp.py", store], cwd=tmp_path, env={**env, "DIE": "1"},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert made.returncode == 137, made.stderr
    p = subprocess.Popen([*CLI, "resume", "op_incode1", "--app", "codeapp:make", "--store", store], cwd=tmp_path,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        for _ in range(300):  # until the resume took the operation over and runs the handler again
            if (tmp_path / "entered").exists():
                break
            time.sleep(0.1)
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    m = re.search(r"(callbound resume op_incode1 .*)$", " ".join(err.split()))
    assert m and "--app codeapp:make" in m.group(1), err
