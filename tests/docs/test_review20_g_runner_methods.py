"""Review round 20, g: docs/reference.md's Runner row gives each method's arguments and what it
returns; it named the methods alone, so what `submit` returns or how `decide` takes its tenant was to be
found in the source. Each signature the row writes is held to the method's own."""

from __future__ import annotations

import inspect
import re

import pytest

import callbound as cb
from tests.recordings import REPO_ROOT

METHODS = ("run", "resume", "submit", "decide", "approve", "deny", "cancel", "outcome")


def _row() -> str:
    text = (REPO_ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    (row,) = [line for line in text.splitlines() if line.startswith("| `Runner` |")]
    return row


def _written(name: str) -> str:
    (args,) = re.findall(rf"`{name}\((.*?)\)`", _row())
    return args


def _actual(name: str) -> str:
    parts = []
    for p in list(inspect.signature(getattr(cb.Runner, name)).parameters.values())[1:]:
        if p.name.startswith("_"):
            continue
        if p.kind is p.KEYWORD_ONLY and "*" not in parts:
            parts.append("*")
        default = (
            ""
            if p.default is p.empty
            else "=" + ('"' + p.default + '"' if isinstance(p.default, str) else repr(p.default))
        )
        parts.append(p.name + default)
    return ", ".join(parts)


@pytest.mark.parametrize("name", METHODS)
def test_the_row_writes_each_method_as_it_is(name: str) -> None:
    assert _written(name) == _actual(name)


def test_the_sync_forms_take_what_the_async_ones_take() -> None:
    assert "`run_sync` and `resume_sync` take the same" in _row()
    for name in ("run", "resume"):
        sync = inspect.signature(getattr(cb.Runner, name + "_sync")).parameters
        assert list(sync) == list(inspect.signature(getattr(cb.Runner, name)).parameters)


def test_what_each_returns() -> None:
    hints = {name: inspect.signature(getattr(cb.Runner, name)).return_annotation for name in METHODS}
    assert {n for n, h in hints.items() if h == "Outcome"} == {"run", "resume", "cancel", "outcome"}
    assert {n for n, h in hints.items() if h == "PendingApproval"} == {"decide", "approve", "deny"}
    assert hints["submit"] == "str" and "returns its id" in _row()
