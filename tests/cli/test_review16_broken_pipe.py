"""A reader that closes stdout early (``callbound ... | head``) never stops a drive, and never makes a
command exit 1 (review round 16, r2 F1). D28: 1 is kept for tampering found by ``audit verify``; the
runner's observer guard: "an observer's bug must not leave the operation half-moved (D4)".

rich's ``Console.on_broken_pipe`` raised ``SystemExit(1)`` from the timeline row printed by the runner's
``on_transition``: the drive unwound between a write handler's return and the commit recording it, so a
write with no ``reconcile`` ended STOPPED(OUTCOME_UNKNOWN) although it succeeded. The CLI's consoles now
go quiet; the drive commits, and the process exits with its outcome's code (cli/errors.py).

The helpers here (a synthetic App module written to the test's folder, ``cli16``) serve the other
``test_review16_*`` files of this folder too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from callbound.cli.consoles import CliConsole
from callbound.stores import open as open_store

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "callbound.cli"]

# A write tool without reconcile: its handler waits (up to R16_GATE_S seconds) for a file "gate" in the
# module's folder, so a test can act while it runs; each effect is one line of effects.log.
APP_SOURCE = '''
import json, os, time
from pathlib import Path

from pydantic import BaseModel

import callbound as cb
from callbound.runtime.app import App
from callbound.testing import ScriptedModel

HERE = Path(__file__).parent


class Charge(BaseModel):
    order_id: str


def charge(args, ctx):
    deadline = time.monotonic() + float(os.environ.get("R16_GATE_S", "0"))
    while not (HERE / "gate").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    with open(HERE / "effects.log", "a") as f:
        f.write(ctx.idempotency_key + "\\n")
    return {"charged": args.order_id}


def final(text):
    return {"id": "r9", "status": "completed", "output": [{"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": text}]}]}


CALL = {"id": "r1", "status": "completed", "output": [{"type": "function_call", "id": "fc_1",
        "call_id": "call_1", "name": "charge", "arguments": json.dumps({"order_id": "A1"})}]}


def registry():
    return cb.Registry([cb.ToolSpec(name="charge", description="charge an order", params=Charge,
                                    handler=charge, schema_version="c1", risk="write", timeout_ms=60000)])


def make():
    """One write, then a final text."""
    return App(registry=registry(), model=ScriptedModel("openai-responses", [CALL, final("done")]),
               policy=cb.Policy(revision="p1"), budgets=cb.Budgets(max_model_turns=8, deadline_s=3600))


def make_odd():
    """A final text holding a lone surrogate, as a provider's JSON body may ("\\\\ud800")."""
    text = json.loads('"bad \\\\ud800 text"')
    return App(registry=registry(), model=ScriptedModel("openai-responses", [final(text)]),
               policy=cb.Policy(revision="p1"))
'''


def write_app(folder: Path) -> str:
    """Write the App module to ``folder``; returns the store URL the tests use there."""
    (folder / "r16app.py").write_text(APP_SOURCE)
    return f"sqlite:///{folder / 'cb.db'}"


def env16(folder: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    paths = [str(folder), str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env.update(PYTHONPATH=os.pathsep.join(paths), COLUMNS="200", **extra)
    return env


def cli16(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], cwd=cwd, capture_output=True, text=True, input="", env=env16(cwd, **extra), timeout=120
    )


def start(*args: str, cwd: Path, **extra: str) -> subprocess.Popen[bytes]:
    """The command with SIGINT at its default action, as a terminal's foreground job has it."""
    return subprocess.Popen(
        [*CLI, *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env16(cwd, **extra),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def read_until(p: subprocess.Popen[bytes], marker: bytes) -> None:
    assert p.stdout is not None
    for line in p.stdout:
        if marker in line:
            return
    raise AssertionError(f"no line with {marker!r}; stderr: {p.stderr.read() if p.stderr else b''!r}")


def stored(url: str) -> tuple[list[Any], list[str]]:
    """(operation states, ledger statuses) as the store holds them."""
    st = open_store(url, create=False)
    try:
        states = [h["state"] for h in st.list_operations()]
        return states, [e.status.value for e in st.ledger_list()]
    finally:
        st.close()


def test_a_reader_closing_mid_drive_lets_the_write_commit(tmp_path: Path) -> None:
    """`callbound run --app ... | head -4`: the reader goes away while the write handler runs; the
    timeline rows printed after it meet a closed pipe. The drive still records the write (ledger
    SUCCEEDED), the operation COMPLETES, the effect happened once, and the exit code is COMPLETED's 0.
    Before: exit 1, the operation EXECUTING and its write STARTED."""
    store = write_app(tmp_path)
    p = start("run", "--app", "r16app:make", "go", "--store", store, cwd=tmp_path, R16_GATE_S="30")
    read_until(p, b"EXECUTING")
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # the reader leaves while the handler waits
    (tmp_path / "gate").touch()
    code = p.wait(timeout=60)
    err = p.stderr.read().decode()
    # nothing on stderr: the console did not raise (the runner's guard, which reports an observer's
    # SystemExit there, is not what saves the drive)
    assert (code, err) == (0, "")
    assert stored(store) == (["COMPLETED"], ["SUCCEEDED"])
    assert len((tmp_path / "effects.log").read_text().splitlines()) == 1


def closed_at_once(*args: str, cwd: Path) -> tuple[int, str]:
    """Run a command whose reader has gone before it prints anything."""
    p = subprocess.Popen(
        [*CLI, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env16(cwd)
    )
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()
    code = p.wait(timeout=60)
    return code, p.stderr.read().decode()


def test_every_command_exits_with_its_own_code_when_the_reader_is_gone(tmp_path: Path) -> None:
    """`--json`, `ops list`, `audit verify` and `parse` printed nothing mid-drive but still exited 1 (click
    and rich's code for EPIPE): `audit verify | head` read as tampering under pipefail."""
    store = write_app(tmp_path)
    (tmp_path / "gate").touch()
    code, err = closed_at_once("run", "--app", "r16app:make", "go", "--json", "--store", store, cwd=tmp_path)
    assert (code, err) == (0, "")
    code, err = closed_at_once("run", "--app", "r16app:make", "go", "--store", store, cwd=tmp_path)
    assert (code, err) == (0, "")
    assert stored(store) == (["COMPLETED", "COMPLETED"], ["SUCCEEDED", "SUCCEEDED"])
    for args in (["ops", "list"], ["ops", "list", "--json"], ["audit", "verify"], ["ledger", "list"]):
        assert closed_at_once(*args, "--store", store, cwd=tmp_path) == (0, ""), args
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"id": "r", "status": "completed", "output": []}))
    assert closed_at_once("parse", "--api", "openai-responses", str(body), cwd=tmp_path) == (0, "")


class _Gone:
    """A stream whose reader has gone."""

    encoding = "utf-8"

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    def isatty(self) -> bool:
        return False


def test_the_console_goes_quiet_instead_of_raising() -> None:
    """What the runner's observer guard (``except Exception``) cannot stop: rich's SystemExit."""
    console = CliConsole(file=_Gone(), soft_wrap=True, markup=False)  # type: ignore[arg-type]
    started = time.monotonic()
    console.print("a timeline row")
    console.print("another")
    assert console.quiet and console.broken_pipe
    assert time.monotonic() - started < 5
