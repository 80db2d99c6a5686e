"""Review round 21, e: each public data type's row in docs/reference.md's "Public names" table names
every field the type has. ``PendingApproval`` (its tenant, subject, policy revision, schema version,
creation time and reason, and which statuses there are), ``ModelTurn`` (``failure``, whose
``error_code`` the stop-reasons page keeps citing, ``api``, ``response_id``, ``provenance``,
``raw_sha256``) and ``ToolCall`` (``provider``, ``api``, ``output_index``) left fields out; a field added
to one of them and left out of its row fails here."""

from __future__ import annotations

import dataclasses
import re
from typing import get_args

import callbound as cb
from callbound.core.approvals import ApprovalStatus
from tests.recordings import REPO_ROOT

# CallContext has a table of its own (tests/docs/test_reference_review9.py holds it).
ELSEWHERE: dict[str, set[str]] = {"CallContext": set()}


def _rows() -> dict[str, str]:
    text = (REPO_ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    section = text.split("## Public names", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for names, what in re.findall(r"^\| ((?:`\w+`(?:, )?)+) \| (.*) \|$", section, re.M):
        for name in re.findall(r"`(\w+)`", names):
            rows[name] = what
    return rows


def test_every_field_of_a_public_data_type_is_named_in_its_row() -> None:
    rows = _rows()
    missing = {}
    for name in cb.__all__:
        obj = getattr(cb, name)
        if not (isinstance(obj, type) and dataclasses.is_dataclass(obj)) or name == "CallContext":
            continue
        fields = {f.name for f in dataclasses.fields(obj) if f.init} - ELSEWHERE.get(name, set())
        # named in backticks, or as a word of the row (``CallStarted(call_id, name)``, "name, description")
        gone = sorted(f for f in fields if not re.search(rf"\b{f}\b", rows[name]))
        if gone:
            missing[name] = gone
    assert missing == {}


def test_the_pending_approval_row_lists_every_status() -> None:
    row = _rows()["PendingApproval"]
    statuses = get_args(ApprovalStatus)
    assert len(statuses) == 4
    assert all(f"`{s}`" in row for s in statuses)
