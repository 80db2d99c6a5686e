"""Review round 18, e: every command and option the docs' command-line synopses name exists (D28).

README.md's "The command line" block and docs/durability.md's ledger block are what a user copies;
a command or option renamed in the CLI and left in the docs would read as a usage error (exit 2). Each
line is read as its synopsis: the command (``callbound ops list``, alternatives after `` | `` that start
with a bare word are further subcommands of the same group) and every ``--option`` after it, which the
command's ``--help`` must list."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from callbound.cli.app import app
from tests.recordings import REPO_ROOT

GROUPS = ("demo", "ops", "approvals", "audit", "ledger")


def _block(path: str, after: str) -> str:
    text = (REPO_ROOT / path).read_text(encoding="utf-8")
    return text.split(after, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]


def synopses() -> list[tuple[tuple[str, ...], frozenset[str]]]:
    """(command words, options) for every command the two blocks name."""
    text = _block("README.md", "## The command line") + _block(
        "docs/durability.md", "### Settling an unknown"
    )
    out: dict[tuple[str, ...], set[str]] = {}
    last: tuple[str, ...] = ()
    for raw in text.splitlines():
        line = raw.split("  #", 1)[0].rstrip()
        if not line.strip():
            continue
        if line.startswith("callbound "):
            words = line.split()
            group = words[1]
            rest = " ".join(words[2:])
            segments = rest.split(" | ")
            if group in GROUPS:
                first, *others = segments
                sub, _, first_rest = first.partition(" ")
                last = (group, sub)
                out.setdefault(last, set()).update(re.findall(r"--[a-z][a-z-]*", first_rest))
                for seg in others:
                    if seg.startswith(group + " "):  # "ops list ... | ops show OP"
                        seg = seg[len(group) + 1 :]
                    head = seg.split(" ", 1)[0]
                    if re.fullmatch(r"[a-z]+", head) and not seg.startswith("-"):
                        last = (group, head)
                    out.setdefault(last, set()).update(re.findall(r"--[a-z][a-z-]*", seg))
            else:
                last = (group,)
                out.setdefault(last, set()).update(re.findall(r"--[a-z][a-z-]*", rest))
        elif raw.startswith(" ") and last:  # a synopsis wrapped onto the next line
            out[last].update(re.findall(r"--[a-z][a-z-]*", line))
    return sorted((k, frozenset(v)) for k, v in out.items())


def test_the_blocks_name_every_command_group() -> None:
    named = {words[0] for words, _ in synopses()}
    assert {"demo", "parse", "approvals", "resume", "ops", "audit", "ledger", "worker", "run"} <= named


@pytest.mark.parametrize(("words", "options"), synopses(), ids=[" ".join(w) for w, _ in synopses()])
def test_each_command_and_option_exists(words: tuple[str, ...], options: frozenset[str]) -> None:
    result = CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0, f"callbound {' '.join(words)} is not a command: {result.output}"
    listed = set(re.findall(r"--[a-z][a-z-]*", result.output))
    assert sorted(options - listed) == [], f"callbound {' '.join(words)} has no such option"


@pytest.mark.parametrize(
    ("words", "option"),
    [
        (("worker",), "--idle-exit"),
        (("worker",), "--max-operations"),
        (("resume",), "--app"),
        (("approvals", "approve"), "--app"),
        (("approvals", "deny"), "--app"),
        (("ops", "cancel"), "--app"),
    ],
)
def test_the_options_the_readme_prose_names_exist(words: tuple[str, ...], option: str) -> None:
    """README: `callbound worker` runs until `--idle-exit SECONDS` or `--max-operations N`; resume,
    approvals approve|deny and ops cancel take `--app module:factory`."""
    result = CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0
    assert option in set(re.findall(r"--[a-z][a-z-]*", result.output))
