"""Review round 21, e: the README's command-line synopsis names every command and every option the CLI
has (D28), the other way round from ``test_review18_e_cli_synopsis`` (which holds each option the docs
name to the CLI).

The synopsis left out ``--json`` of five commands, ``--tenant`` of ``approvals approve|deny``,
``--approver`` of ``demo refund``, ``--id``, ``--lease`` and ``--poll`` of ``worker``, and
``--transport``, ``--base-url``, ``--stream``, ``--tenant``, ``--subject`` and ``--json`` of ``run``:
options a user could learn of only from ``--help``. A command or option added to the typer app and
left out of the docs fails here. ``--store``, which every command but ``parse`` takes, is said once in
prose; that sentence is held to the app too."""

from __future__ import annotations

from typing import Any

import typer

from callbound.cli.app import app
from tests.docs.test_review18_e_cli_synopsis import synopses
from tests.recordings import REPO_ROOT


def _commands() -> dict[tuple[str, ...], set[str]]:
    """Every leaf command of the CLI, by its words, with its options (``--help`` left out)."""
    found: dict[tuple[str, ...], set[str]] = {}

    def walk(command: Any, words: tuple[str, ...]) -> None:
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, (*words, name))
            return
        options = {o for p in command.params for o in getattr(p, "opts", ()) if o.startswith("--")}
        found[words] = options - {"--help"}

    walk(typer.main.get_command(app), ())
    return found


def test_the_cli_has_the_commands_the_walk_expects() -> None:
    commands = _commands()
    assert ("ledger", "settle") in commands and ("run",) in commands and ("parse",) in commands
    assert "--not-applied" in commands[("ledger", "settle")]


def test_the_synopsis_names_every_command_and_option() -> None:
    documented = dict(synopses())
    missing = {
        " ".join(words): sorted(options - {"--store"} - documented.get(words, frozenset()))
        for words, options in _commands().items()
    }
    assert {c: o for c, o in missing.items() if o} == {}
    assert sorted(set(_commands()) - set(documented)) == []


def test_every_command_but_parse_takes_store_as_the_readme_says() -> None:
    text = REPO_ROOT.joinpath("README.md").read_text(encoding="utf-8")
    assert "Every command but `parse` takes `--store URL`" in text
    without = sorted(" ".join(w) for w, options in _commands().items() if "--store" not in options)
    assert without == ["parse"]
