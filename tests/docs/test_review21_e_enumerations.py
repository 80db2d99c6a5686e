"""Review round 21, e: lists the docs keep of something the code enumerates, held to the code.

- Every environment variable callbound reads (a ``CALLBOUND_``, ``OPENAI_``, ``ANTHROPIC_``, ``GOOGLE_``
  or ``GEMINI_`` name written in src) is named in README.md or docs/. ``CALLBOUND_UNSAFE_NO_LEDGER``,
  which turned the idempotency ledger off for every write of a process (the crash matrix's negative
  control, D22), was named nowhere a user reads (callbound no longer reads it: the control's driver
  turns the ledger off in code).
- The ``Finish`` row of docs/reference.md lists every ``Finish``; docs/durability.md lists every ledger
  status (``LedgerStatus``).
- docs/durability.md's crash-point table (D22) lists exactly the crash points the runtime defines
  (``callbound.runtime.crash.CRASH_POINTS``), each one the code calls, and the crash matrix runs every
  row of it."""

from __future__ import annotations

import re

import callbound as cb
from callbound.core.idempotency import LedgerStatus
from callbound.runtime.crash import CRASH_POINTS
from tests.durability.test_crash_matrix import CRASH_POINTS as MATRIX
from tests.recordings import REPO_ROOT

SRC = REPO_ROOT / "src" / "callbound"
ENV_NAME = re.compile(r"""["']((?:CALLBOUND|OPENAI|ANTHROPIC|GOOGLE|GEMINI)_[A-Z0-9_]+)["']""")


def _docs() -> str:
    pages = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    return "".join(p.read_text(encoding="utf-8") for p in pages)


def _source() -> str:
    return "".join(p.read_text(encoding="utf-8") for p in sorted(SRC.rglob("*.py")))


def test_every_environment_variable_the_code_reads_is_documented() -> None:
    source = _source()
    # a constant's own name in an ``__all__`` (``"OPENAI_HEADER_ENV"``) is no variable
    names = sorted(n for n in set(ENV_NAME.findall(source)) if not re.search(rf"^{n}\b.*=", source, re.M))
    assert {"CALLBOUND_AUDIT_KEY", "CALLBOUND_SQLITE_BUSY_TIMEOUT_MS", "OPENAI_API_KEY"} <= set(names)
    docs = _docs()
    assert [n for n in names if f"`{n}" not in docs] == []


def _table_points() -> list[str]:
    text = (REPO_ROOT / "docs" / "durability.md").read_text(encoding="utf-8")
    section = text.split("## Crash safety, proven", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_:]+)` \|", section, re.M)


def test_the_crash_point_table_lists_the_runtime_crash_points() -> None:
    documented = _table_points()
    assert [p.split(":", 1)[0] for p in documented] == list(CRASH_POINTS)
    called = set(re.findall(r"""crash_point\(\s*["'](\w+)["']""", _source()))
    assert called == set(CRASH_POINTS)
    assert documented == list(MATRIX)


def test_the_finish_row_lists_every_finish() -> None:
    text = (REPO_ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    row = re.findall(r"^\| `Finish` \| how a turn ended: (.*?) \(", text, re.M)[0]
    assert re.findall(r"`([A-Z_]+)`", row) == list(cb.Finish.__members__)


def test_the_ledger_statuses_durability_lists_are_the_ledgers() -> None:
    text = " ".join((REPO_ROOT / "docs" / "durability.md").read_text(encoding="utf-8").split())
    listed = re.findall(r"The ledger entry \(((?:`[A-Z]+`,? ?)+)\)", text)[0]
    assert re.findall(r"`([A-Z]+)`", listed) == list(LedgerStatus.__members__)
