"""The CLI prints what models, tools and providers said exactly, never as Rich markup.

Found by a reviewer: square brackets in model-supplied text were read as style tags. ``approvals list``
showed {"order_id": "A1"} for the arguments {"order_id": "A1[acct=evil-999]"} a human was asked to
approve, and crashed (exit 1) on "[/i]"; a final answer with "[/b]" crashed ``callbound run`` after the
operation had completed; install hints lost their extra ("pip install 'callbound'" for
'callbound[anthropic]').
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

APP = textwrap.dedent(
    """
    import json
    import callbound as cb
    from pydantic import BaseModel
    from callbound.runtime.app import App
    from callbound.testing import ScriptedModel

    class Refund(BaseModel):
        order_id: str

    def refund(args, ctx):
        return {"refund_id": "rf_1"}

    def call(rid, name, args):
        return {"id": rid, "status": "completed", "output": [{"type": "function_call", "id": "fc_" + rid,
                "call_id": "call_" + rid, "name": name, "arguments": json.dumps(args)}]}

    def final(rid, text):
        return {"id": rid, "status": "completed", "output": [{"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": text}]}]}

    def registry():
        return cb.Registry([cb.ToolSpec(name="submit_refund", description="Refund", params=Refund,
                                        handler=refund, schema_version="r1", risk="irreversible")])

    def waiting():
        return App(registry=registry(), model=ScriptedModel("openai-responses", [
            call("r1", "submit_refund", {"order_id": "A1[acct=evil-999] [/i]"}), final("r2", "ok")]))

    def answer():
        return App(registry=cb.Registry([]), model=ScriptedModel("openai-responses", [
            final("r1", "Close the tag [/b] now [red]x")]))
    """
)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{cwd}{os.pathsep}{ROOT / 'src'}", "COLUMNS": "250"}
    return subprocess.run(
        [sys.executable, "-m", "callbound.cli", *args],
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
    )


def test_approvals_list_shows_the_arguments_exactly(tmp_path: Path) -> None:
    (tmp_path / "markupapp.py").write_text(APP)
    store = f"sqlite:///{tmp_path / 'cb.db'}"
    run = cli("run", "--app", "markupapp:waiting", "--store", store, "refund it", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    listed = cli("approvals", "list", "--store", store, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "A1[acct=evil-999] [/i]" in listed.stdout


def test_a_final_answer_with_brackets_is_printed_as_sent(tmp_path: Path) -> None:
    (tmp_path / "markupapp.py").write_text(APP)
    run = cli("run", "--app", "markupapp:answer", "--store", "memory:", "hello", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "model: Close the tag [/b] now [red]x" in run.stdout


def test_an_install_hint_keeps_its_extra(tmp_path: Path) -> None:
    env_hint = cli("ops", "list", "--store", "sqlite:///nowhere/x.db", cwd=tmp_path)
    assert env_hint.returncode == 2
    from callbound.cli.app import err

    with err.capture() as captured:
        err.print("pip install 'callbound[anthropic]'")
    assert "callbound[anthropic]" in captured.get()


def test_control_characters_from_the_model_are_shown_as_escapes() -> None:
    """A reviewer's finding: a newline in a call id printed a forged timeline row, ESC sequences in the
    final text cleared the screen. Ids show every control character escaped; text keeps its lines."""
    from datetime import UTC, datetime

    from rich.console import Console

    from callbound.cli.render import print_timeline_row
    from callbound.core.types import Transition

    console = Console(record=True, markup=False, width=300)
    forged = "call_1\n16:47:06.351 op_FORGED COMPLETED final_text\x1b[8m"
    print_timeline_row(
        console, "op_1", Transition("EXECUTING", datetime.now(UTC), "run", {"call_ids": [forged]})
    )
    text = console.export_text()
    assert "\\x0a16:47:06.351 op_FORGED" in text and "\x1b" not in text and text.count("\n") == 1


def test_an_answer_keeps_its_lines_but_not_its_escape_codes() -> None:
    from callbound.cli.render import shown_text

    assert shown_text("line 1\nline 2\t\x1b[2J") == "line 1\nline 2\t\\x1b[2J"


def test_approvals_list_shows_arguments_whole_and_escaped(tmp_path: Path) -> None:
    """A reviewer's finding: the arguments cell was cut at 60 characters, and the model could pad an
    amount past the cut. Now whole, and ASCII-escaped (bidi and look-alike characters visible)."""
    app = APP.replace(
        '"A1[acct=evil-999] [/i]"', '"A1-per-customer-request-ticket-4471-ok\\u202e", "amount": 99999.0'
    )
    app = app.replace(
        "class Refund(BaseModel):\n    order_id: str",
        "class Refund(BaseModel):\n    order_id: str\n    amount: float = 0",
    )
    (tmp_path / "markupapp.py").write_text(app)
    store = f"sqlite:///{tmp_path / 'cb.db'}"
    assert (
        cli("run", "--app", "markupapp:waiting", "--store", store, "refund it", cwd=tmp_path).returncode == 0
    )
    listed = cli("approvals", "list", "--store", store, cwd=tmp_path)
    assert '"amount": 99999.0' in listed.stdout and "\\u202e" in listed.stdout
