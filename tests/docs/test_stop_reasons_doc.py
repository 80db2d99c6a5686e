"""Every row of docs/stop-reasons.md is checked against the adapter: one test per row.

A row names an API and a case (the raw stop reason, with ``+calls``, ``+refusal``, ``+blocked``... for
the shape around it); tests/docs/stop_reason_bodies.py builds the body, the adapter parses it, and
finish, state and both reasons must be what the row says.
"""

from __future__ import annotations

import re

import pytest

from callbound.adapters import get
from callbound.core.machine import classify_turn
from tests.recordings import REPO_ROOT

from .stop_reason_bodies import BUILDERS

DOC = REPO_ROOT / "docs" / "stop-reasons.md"
ROW = re.compile(
    r"^\| `(?P<api>[a-z-]+)` \| `(?P<case>[^`]+)` \| `(?P<raw>[^`]+)` \| (?P<finish>[A-Z_]+) \| (?P<state>[A-Z_]+) \| "
    r"(?P<reason>`[a-z_]+`|—) \| (?P<code>`[A-Z_]+`|—) \|"
)


def rows() -> list[tuple[str, str, str, str, str, str | None, str | None]]:
    out = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            reason = None if m["reason"] == "—" else m["reason"].strip("`")
            code = None if m["code"] == "—" else m["code"].strip("`")
            out.append((m["api"], m["case"], m["raw"], m["finish"], m["state"], reason, code))
    return out


def test_the_doc_covers_every_api_and_has_rows() -> None:
    found = {r[0] for r in rows()}
    assert found == set(BUILDERS), f"rows missing for {set(BUILDERS) - found}"
    assert len(rows()) >= 60


@pytest.mark.parametrize(
    ("api", "case", "raw", "finish", "state", "reason", "code"),
    rows(),
    ids=[f"{r[0]}:{r[1]}" for r in rows()],
)
def test_row(
    api: str, case: str, raw: str, finish: str, state: str, reason: str | None, code: str | None
) -> None:
    body = BUILDERS[api](case)
    turn = get(api).parse_response(body)
    verdict = classify_turn(turn)
    assert turn.finish.value == finish
    assert verdict.target.value == state
    assert turn.reason == reason
    assert verdict.reason == code
    assert turn.raw_stop_reason == raw, "the raw stop reason is kept exactly as sent"
    if finish != "TOOL_PROPOSALS":
        assert not turn.executable, "calls in a non-proposal turn never run"
