"""Model text with a lone surrogate is printed, not a crash (review round 16, r2 F2).

A provider's JSON may carry ``"\\ud800"``; the operation COMPLETES and the store holds the text as read.
``run``, ``run --json`` and ``ops show --json`` raised UnicodeEncodeError writing it: a traceback and exit
1 (D28 keeps 1 for tampering; cli/errors.py: never a traceback). Now it is written as its escape, as
``callbound parse`` does (cli/parse.py): the JSON output loads back to the same text, exit 0."""

from __future__ import annotations

import json
from pathlib import Path

from .test_review16_broken_pipe import cli16, write_app


def test_run_and_ops_show_write_a_lone_surrogate_as_its_escape(tmp_path: Path) -> None:
    store = write_app(tmp_path)
    r = cli16("run", "--app", "r16app:make_odd", "go", "--store", store, cwd=tmp_path)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    assert "model: bad \\ud800 text" in r.stdout

    r = cli16("run", "--app", "r16app:make_odd", "go", "--json", "--store", store, cwd=tmp_path)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    data = json.loads(r.stdout)
    assert data["state"] == "COMPLETED"
    assert data["text"] == "bad \ud800 text"  # the escape loads back to the text as read

    op = data["operation_id"]
    r = cli16("ops", "show", op, "--json", "--store", store, cwd=tmp_path)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    assert json.loads(r.stdout)["head"]["text"] == "bad \ud800 text"
    r = cli16("ops", "show", op, "--store", store, cwd=tmp_path)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr


def test_an_ascii_stdout_gets_escapes_too(tmp_path: Path) -> None:
    """The escape follows the output's encoding: with PYTHONIOENCODING=ascii an accented text is not a
    crash either."""
    store = write_app(tmp_path)
    r = cli16(
        "run",
        "--app",
        "r16app:make_odd",
        "go",
        "--json",
        "--store",
        store,
        cwd=tmp_path,
        PYTHONIOENCODING="ascii",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["text"] == "bad \ud800 text"
