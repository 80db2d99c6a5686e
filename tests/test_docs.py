"""Docs generated from code stay in sync with it."""

from __future__ import annotations

from callbound.core.states import mermaid_diagram
from tests.recordings import REPO_ROOT


def test_state_diagram_matches_transition_table() -> None:
    doc = (REPO_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "```mermaid\n" + mermaid_diagram() + "```" in doc, (
        "docs/architecture.md is stale: regenerate the diagram from callbound.core.states.mermaid_diagram()"
    )
