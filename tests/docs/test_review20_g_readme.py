"""Review round 20, g: what a new user copies from README.md works as written.

- the README's approval walkthrough (``callbound demo refund``, ``approvals approve``, ``resume``) run
  word for word, default store and all, prints what its comments say, and pays once;
- the commands the README says refuse a SQLite file that does not exist do, each of them (``ledger``
  was missing from the list);
- the README's setup commands name what the project ships (the console script, the ``dev`` extra,
  pytest-xdist for ``-n auto``, ``.ci/postgres.sh``'s usage: ``eval "$(.ci/postgres.sh start)"``, where
  the README said to run it bare, which sets nothing; and ``.ci/run`` running the same test command);
- every file a doc names exists;
- a handler result that is a ``Decimal`` or a ``datetime`` reaches the model as ``HANDLER_ERROR``, as
  the quickstart's prose says (D4: never an exception that kills the loop)."""

from __future__ import annotations

import datetime as dt
import importlib
import json
import os
import re
import subprocess
import sys
import tomllib
from decimal import Decimal
from pathlib import Path

import pytest

import callbound as cb
from callbound.demo.payments import FakePayments
from callbound.demo.refund import SCENARIOS
from callbound.testing import ScriptedModel
from tests.docs.order_script import ANSWER, call_response, registry
from tests.recordings import REPO_ROOT

README = REPO_ROOT / "README.md"
DOCS = [README, *sorted((REPO_ROOT / "docs").glob("*.md"))]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "callbound.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        timeout=120,
    )


def _sh_block_after(text: str, marker: str) -> list[str]:
    block = text.split(marker, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_the_readme_approval_walkthrough_runs_word_for_word(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    lines = _sh_block_after(text, "prints the commands to continue from any")
    assert len(lines) == 3, lines
    ids: dict[str, str] = {}
    outputs = []
    for line in lines:
        command, _, said = line.partition("#")
        words = command.split()
        assert words[0] == "callbound", line
        words = [ids.get(w, w) for w in words[1:]]
        result = _cli(*words, cwd=tmp_path)
        assert result.returncode == 0, (line, result.stdout, result.stderr)
        outputs.append((said, result.stdout))
        if not ids:
            approval = re.findall(r"\bapr_[0-9a-f]+", result.stdout)
            operation = re.findall(r"\bop_[0-9a-f]+", result.stdout)
            assert approval and operation, result.stdout
            ids = {"apr_...": approval[0], "op_...": operation[0]}
    (said, shown), _, (said_last, shown_last) = outputs
    assert "WAITING_APPROVAL" in said and "prints the approval id" in said
    assert "WAITING_APPROVAL" in shown and ids["apr_..."] in shown
    assert "COMPLETED" in said_last and "exactly one refund downstream" in said_last
    assert re.search(r"^COMPLETED\b", shown_last, re.M), shown_last
    # the default store (./callbound.db) and its demo payments service beside it
    assert FakePayments(str(tmp_path / "callbound-payments.db")).count() == 1


def _refusing_commands() -> list[str]:
    text = " ".join(README.read_text(encoding="utf-8").split())
    (listed,) = re.findall(
        r"the commands that only read or decide what is stored \(([^)]*)\) refuse one", text
    )
    return re.findall(r"`([^`]+)`", listed)


COMMAND_ARGS = {
    "ops": [["ops", "list"], ["ops", "show", "op_x"], ["ops", "cancel", "op_x"]],
    "approvals": [["approvals", "list"], ["approvals", "approve", "apr_x", "--approver", "alice"]],
    "ledger": [
        ["ledger", "list"],
        ["ledger", "show", "ik_x", "--tenant", "acme"],
        ["ledger", "settle", "ik_x", "--tenant", "acme", "--not-applied", "--by", "alice"],
    ],
    "resume": [["resume", "op_x"]],
    "audit verify": [["audit", "verify"]],
}


def test_the_readme_lists_every_command_that_refuses_a_missing_store() -> None:
    assert sorted(_refusing_commands()) == sorted(COMMAND_ARGS)


@pytest.mark.parametrize("command", sorted(COMMAND_ARGS))
def test_each_listed_command_refuses_a_sqlite_file_that_does_not_exist(command: str, tmp_path: Path) -> None:
    path = tmp_path / "mistyped.db"
    for args in COMMAND_ARGS[command]:
        result = _cli(*args, "--store", f"sqlite:///{path}", cwd=tmp_path)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "no SQLite database" in result.stderr, result.stderr
        assert not path.exists(), args


def test_the_readme_setup_commands_name_what_the_project_ships() -> None:
    text = README.read_text(encoding="utf-8")
    demo, tests = re.findall(r"```sh\n(.*?)\n```", text, re.S)[:2]
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert ".venv/bin/callbound demo refund" in demo and "callbound" in project["scripts"]
    (extra,) = re.findall(r"-e '\.\[(\w+)\]'", tests)
    extras = project["optional-dependencies"][extra]
    assert "-n auto" in tests and any(d.startswith("pytest-xdist") for d in extras)
    (pg,) = re.findall(r'`(eval "\$\(\.ci/postgres\.sh start\)")`', text)
    assert pg in (REPO_ROOT / ".ci" / "postgres.sh").read_text(encoding="utf-8")
    # "`.ci/run` is what CI runs: ... the test command above"
    command = tests.rsplit("&& ", 1)[1]
    assert command in (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_every_file_the_docs_name_exists() -> None:
    roots = [REPO_ROOT, REPO_ROOT / "src", REPO_ROOT / "src" / "callbound"]
    named = set()
    for doc in DOCS:
        for path in re.findall(
            r"`([\w./-]+\.(?:py|md|sh|toml))`|`(\.ci/\w+)`", doc.read_text(encoding="utf-8")
        ):
            named.add(next(p for p in path if p))
    named = {p for p in named if "/" in p or p.endswith(".md")}
    assert named, "no file names found: the pattern drifted"
    missing = sorted(p for p in named if not any((root / p).exists() for root in roots))
    # DECISIONS.md and ARCHITECTURE.md are the shared design, outside the repository (named bare or by a
    # path out of it, ../shared/design/...): a checkout elsewhere does not have them beside it
    outside = ("DECISIONS.md", "ARCHITECTURE.md")
    assert [p for p in missing if p not in outside and not p.startswith("../")] == []


@pytest.mark.parametrize("value", [Decimal("40.00"), dt.datetime(2026, 1, 1, tzinfo=dt.UTC)])
def test_a_decimal_or_datetime_result_reaches_the_model_as_handler_error(value: object) -> None:
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "(a `Decimal` or `datetime` result reaches the model as `HANDLER_ERROR`)" in text
    model = ScriptedModel("openai-responses", [call_response("r1"), ANSWER])
    outcome = cb.Runner(model=model, registry=registry({"total": value})).run_sync(
        input="Where is A1?", tenant="acme", subject="user-1"
    )
    assert outcome.state == "COMPLETED"
    sent = [
        json.loads(i["output"]) for i in model.requests[1]["input"] if i.get("type") == "function_call_output"
    ]
    assert [r["error"]["code"] for r in sent] == ["HANDLER_ERROR"]


def test_the_readme_says_how_each_demo_scenario_ends() -> None:
    """README: `demo` exits 0 when "the scenario ended as documented"; the ends were in the shared
    design's D28 table only, outside the repository. Its table must be the demo's own (SCENARIOS, which
    tests/cli/test_demo.py runs through the console script)."""
    text = README.read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z-]+)` \| `([A-Z_]+)`(?: \(`([A-Z_]+)`\))?", text, re.M)
    documented = {scenario: (state, reason or None) for scenario, state, reason in rows}
    synopsis = re.findall(r"--scenario ([a-z|-]+)\]", text)[0].split("|")
    assert documented == SCENARIOS
    assert synopsis == list(SCENARIOS)


SYNOPSIS_GROUPS = ("approvals", "resume", "ops", "audit", "ledger")


def _top_level(text: str) -> str:
    """``text`` without what brackets and parentheses hold (optional, or one of several)."""
    while True:
        stripped = re.sub(r"\[[^\[\]()]*\]|\([^\[\]()]*\)", "", text)
        if stripped == text:
            return text
        text = stripped


def _synopsis_options() -> list[tuple[tuple[str, ...], str, bool]]:
    """(command, option, shown as required) for the README's synopses of the commands that read or
    decide what is stored; the other lines of the block are examples (`run --api ... --model ...`)."""
    block = README.read_text(encoding="utf-8").split("## The command line", 1)[1]
    block = block.split("```sh\n", 1)[1].split("```", 1)[0]
    out = []
    for raw in block.splitlines():
        line = raw.split("  #", 1)[0].strip()
        words = line.split()
        if len(words) < 2 or words[0] != "callbound" or words[1] not in SYNOPSIS_GROUPS:
            continue
        group = words[1]
        for n, segment in enumerate(re.split(r" \| (?![^\[(]*[\])])", " ".join(words[2:]))):
            segment = segment.removeprefix(group + " ")
            head = segment.split(" ", 1)[0]
            if group in ("resume", "audit") and n == 0:
                command = (group,) if group == "resume" else (group, head)
            else:
                command = (group, head)
            required = set(re.findall(r"--[a-z-]+", _top_level(segment)))
            for option in re.findall(r"--[a-z-]+", segment):
                out.append((command, option, option in required))
    return out


def test_a_synopsis_option_is_bracketed_exactly_when_it_is_optional() -> None:
    """The README showed `approvals deny ID --approver NAME --reason TEXT`: --reason is optional
    (default "denied"), so it reads as a required option a user must invent a reason for."""
    from typer.testing import CliRunner

    from callbound.cli.app import app

    found = _synopsis_options()
    assert ((("approvals", "deny"), "--reason", False)) in found
    wrong = []
    for command, option, shown_required in found:
        result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "250", "NO_COLOR": "1"})
        assert result.exit_code == 0, command
        required = re.search(r"^\W*\*\s+" + re.escape(option) + r"\b", result.output, re.M) is not None
        if required != shown_required:
            wrong.append((" ".join(command), option, "required" if required else "optional"))
    assert wrong == []


def test_the_readme_says_how_to_reach_the_bare_callbound_it_prints() -> None:
    """The setup runs `.venv/bin/callbound`, the demo then prints bare `callbound ...` commands to go on
    with, and the README's walkthrough uses them: in a fresh shell they were "command not found"."""
    text = README.read_text(encoding="utf-8")
    demo = re.findall(r"```sh\n(.*?)\n```", text, re.S)[0]
    assert ".venv/bin/callbound" in demo
    after = text.split(demo, 1)[1].split("```", 2)[1]
    assert "`. .venv/bin/activate` puts\n`callbound` on your `PATH`" in after


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_dotted_callbound_name_the_docs_write_exists() -> None:
    """`callbound.stores.open`, `callbound.runtime.settle.settle_intent`, ...: a module or function
    renamed and left in a doc would send a user to an ImportError."""
    named = sorted(
        {m for doc in DOCS for m in re.findall(r"`(callbound(?:\.\w+)+)", doc.read_text(encoding="utf-8"))}
    )
    assert len(named) > 10, named
    assert [n for n in named if not _resolves(n)] == []
