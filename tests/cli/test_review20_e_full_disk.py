"""Output that cannot be written (a full disk) is an error the command says, exit 2, never a traceback
with exit 1 (review round 20, e).

rich let the ``OSError`` of a write to a full device out of every command: a traceback and exit 1, the
code D28 keeps for tampering found by ``audit verify`` (``callbound audit verify > report`` on a full
disk read as tampering). Now the console goes quiet, the command finishes what it was doing, and the
process says on stderr that its output is incomplete and exits 2 where it would have exited 0."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from callbound.stores import open as open_store
from tests.cli.test_review16_broken_pipe import CLI, env16

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")


def to_full(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``callbound ARGS`` with stdout on /dev/full (every write fails with ENOSPC)."""
    with open("/dev/full", "w") as full:
        p = subprocess.run(
            [*CLI, *args],
            cwd=cwd,
            stdout=full,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env16(cwd),
            timeout=120,
        )
    return p.returncode, p.stderr


def said_so(stderr: str) -> bool:
    return stderr.startswith("error: the output could not be written to standard output") and (
        "Traceback" not in stderr
    )


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'cb.db'}"
    done = subprocess.run(
        [*CLI, "demo", "refund", "--approve", "--json", "--store", url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env16(tmp_path),
        timeout=120,
    )
    assert done.returncode == 0 and json.loads(done.stdout)["state"] == "COMPLETED", done.stderr
    return url


@pytest.mark.parametrize(
    "args",
    [["ops", "list"], ["ops", "list", "--json"], ["audit", "verify"], ["ledger", "list", "--json"]],
    ids=" ".join,
)
def test_a_command_whose_output_cannot_be_written_exits_2_and_says_why(
    args: list[str], store: str, tmp_path: Path
) -> None:
    code, err = to_full([*args, "--store", store], tmp_path)
    assert code == 2 and said_so(err), err


def test_help_and_parse_too(tmp_path: Path) -> None:
    code, err = to_full(["--help"], tmp_path)
    assert code == 2 and said_so(err), err
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"id": "r", "status": "completed", "output": []}))
    code, err = to_full(["parse", "--api", "openai-responses", str(body)], tmp_path)
    assert code == 2 and said_so(err), err


def test_a_drive_still_finishes_when_its_output_cannot_be_written(tmp_path: Path) -> None:
    """The demo's timeline rows meet the full disk from the first one; the operation still ends as its
    scenario says (stored COMPLETED, one refund), and the error is said once it has."""
    url = f"sqlite:///{tmp_path / 'cb.db'}"
    code, err = to_full(["demo", "refund", "--approve", "--store", url], tmp_path)
    assert code == 2 and said_so(err), err
    st = open_store(url, create=False)
    try:
        assert [h["state"] for h in st.list_operations()] == ["COMPLETED"]
        assert {e.status.value for e in st.ledger_list()} == {"SUCCEEDED"}
    finally:
        st.close()


def test_a_usage_error_keeps_its_own_line_and_code(tmp_path: Path) -> None:
    """Nothing was written to stdout: only the command's own error, exit 2."""
    code, err = to_full(["ops", "show", "op_missing", "--store", "memory:"], tmp_path)
    (line,) = err.splitlines()
    assert code == 2 and line.startswith(
        "error: no operation 'op_missing' in this store: the in-memory store"
    )
