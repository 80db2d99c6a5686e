"""The commands callbound suggests work from any directory (review round 22, c).

A SQLite store was printed as given: the default store not at all, ``sqlite:///rel.db`` relative. The
demo says "From any shell:", but ``callbound resume op_...`` run from another directory opened that
directory's ``./callbound.db``: "no SQLite database at ..." at best, another store at worst. Now every
suggested command (``render.store_flag``: the demo's and ``run``'s approve and resume, ``approvals
approve|deny``'s resume, text and ``--json``, the resume after Ctrl-C or a failed store, ``ledger
show``'s settle, which named no store at all) and the banners name a SQLite store by its absolute path;
other URLs are printed as given (a PostgreSQL password as ``***``)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbound.cli.app import app
from callbound.cli.render import resume_command, shown_store, store_flag
from callbound.core.idempotency import LedgerStatus
from tests.cli.test_ledger_cli import Seeded, entry

CLI = [sys.executable, "-m", "callbound.cli"]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def suggested(stdout: str) -> list[list[str]]:
    return [
        shlex.split(line.strip())
        for line in stdout.splitlines()
        if line.strip().startswith(("callbound approvals ", "callbound resume "))
    ]


def test_the_demos_commands_work_from_another_directory(tmp_path: Path) -> None:
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    r = cli("demo", "refund", cwd=here)  # the default store, ./callbound.db
    assert r.returncode == 0, r.stderr
    approve, resume = suggested(r.stdout)
    db = str(here / "callbound.db")
    assert approve[-2:] == resume[-2:] == ["--store", f"sqlite:///{db}"], r.stdout
    a = cli(*approve[1:], cwd=elsewhere)
    assert a.returncode == 0, a.stderr
    (again,) = suggested(a.stdout.replace("resume with: ", ""))
    assert again == resume, a.stdout
    done = cli(*resume[1:], "--json", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["state"] == "COMPLETED"
    assert not (elsewhere / "callbound.db").exists()


def test_a_relative_store_is_printed_absolute(tmp_path: Path) -> None:
    r = cli("demo", "refund", "--store", "sqlite:///rel.db", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    absolute = f"sqlite:///{tmp_path / 'rel.db'}"
    assert f"store={absolute}" in r.stdout.splitlines()[0], r.stdout  # the banner
    for command in suggested(r.stdout):
        assert command[-2:] == ["--store", absolute], command
    approval = next(w for w in r.stdout.split() if w.startswith("apr_")).rstrip(":")
    d = cli(
        "approvals",
        "deny",
        approval,
        "--approver",
        "alice",
        "--json",
        "--store",
        "sqlite:///rel.db",
        cwd=tmp_path,
    )
    assert d.returncode == 0, d.stderr
    assert json.loads(d.stdout)["resume"].endswith(f"--store {absolute}"), d.stdout


def test_ledger_show_names_the_store_in_its_settle_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded = Seeded(tmp_path)
    seeded.add(
        "op_stopped",
        "STOPPED",
        entry("ik_unknown", "op_stopped", LedgerStatus.UNKNOWN, "acme corp"),
        tenant="acme corp",
    )
    monkeypatch.chdir(tmp_path)  # CliRunner runs in this process
    relative = f"sqlite:///{Path(seeded.url.removeprefix('sqlite:///')).name}"
    shown = CliRunner().invoke(
        app, ["ledger", "show", "ik_unknown", "--tenant", "acme corp", "--store", relative]
    )
    assert shown.exit_code == 0, shown.stderr
    (hint,) = [line for line in shown.stdout.splitlines() if "ledger settle" in line]
    assert "--tenant 'acme corp'" in hint and hint.endswith(store_flag(seeded.url)), hint
    assert store_flag(seeded.url) == f" --store {seeded.url}"


def test_store_flag_of_every_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert store_flag("sqlite:///callbound.db") == f" --store sqlite:///{tmp_path / 'callbound.db'}"
    assert store_flag("sqlite:x.db") == f" --store sqlite:///{tmp_path / 'x.db'}"
    assert store_flag("sqlite:////abs/cb.db") == " --store sqlite:////abs/cb.db"
    assert store_flag("sqlite:///a b.db") == " --store " + shlex.quote(f"sqlite:///{tmp_path / 'a b.db'}")
    assert store_flag("memory:") == " --store memory:"
    assert shown_store("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    assert (
        resume_command("op_1", "sqlite:///cb.db", None)
        == f"callbound resume op_1 --store sqlite:///{tmp_path / 'cb.db'}"
    )
