"""The README's quickstart runs as written and prints what it says it prints."""

from __future__ import annotations

import contextlib
import io
import re

from tests.recordings import REPO_ROOT


def test_quickstart_runs_and_completes() -> None:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README has no python quickstart"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(blocks[0], "README.md", "exec"), {"__name__": "readme"})
    assert buf.getvalue().strip() == "COMPLETED None Refund submitted."


def test_readme_opens_with_the_two_commands() -> None:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"```sh\n(.*?)\n```", text, re.S)
    assert "callbound demo refund" in commands[0]
    assert "pytest" in commands[1]
