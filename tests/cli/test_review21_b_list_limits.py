"""``ops list`` and ``ledger list`` say when ``--limit`` cut the list (review round 21, b).

They cut at 50 and 100 rows by default without a word: an operator looking for the UNKNOWN ledger
entries to settle among thousands, or for a paused operation among the newest, took the first page for
all there is. ``approvals list`` has said so since review round 18 (d F4); now the three listings read
one row more than asked and, when there are more, print a note on stderr that says so and what to pass
(``--json`` stays one array on stdout). Exit 0 either way (D28)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from callbound.stores import open as open_store
from tests.cli.test_review21_b_damaged_listed import run, three_paused

MORE = "there are more: pass --limit to list more"


@pytest.mark.parametrize(
    ("command", "noun"),
    [(["ops", "list"], "operations"), (["ledger", "list"], "entries"), (["approvals", "list"], "approvals")],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v,
)
def test_a_cut_list_says_so(tmp_path: Path, command: list[str], noun: str) -> None:
    url = f"sqlite:///{tmp_path / 'cb.db'}"
    st = open_store(url)
    three_paused(st, tmp_path)
    st.close()
    for limit, cut in (("2", True), ("3", False), ("4", False)):
        r = run(*command, "--limit", limit, "--json", "--store", url)
        assert r.exit_code == 0, (r.stderr, r.exception)
        assert len(json.loads(r.stdout)) == min(int(limit), 3)
        if cut:
            (note,) = r.stderr.strip().splitlines()
            assert note.startswith("note: listed ") and f"2 {noun}" in note and MORE in note, note
        else:
            assert r.stderr == "", r.stderr
        r = run(*command, "--limit", limit, "--store", url)
        assert r.exit_code == 0 and (MORE in r.stderr) is cut, r.stderr
