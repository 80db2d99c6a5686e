"""A SQLite store's errors name its file by its absolute path (review round 22, c).

``--store sqlite:///junk.db`` that is no database said "'junk.db' is damaged or is not a SQLite database":
a script's or a service's working directory is not where the operator reads the message from, and the
missing-file message (``stores.missing_database``) already named the absolute path."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbound.cli.app import app
from callbound.core.errors import StoreError
from callbound.stores import open as open_store


def test_a_file_that_is_no_database_is_named_by_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "junk.db").write_text("hello, not a database\n")
    with pytest.raises(StoreError) as caught:
        open_store("sqlite:///junk.db")
    assert repr(str(tmp_path / "junk.db")) in str(caught.value), caught.value

    r = CliRunner().invoke(app, ["ops", "list", "--store", "sqlite:///junk.db"])
    assert r.exit_code == 2 and repr(str(tmp_path / "junk.db")) in r.stderr, r.stderr


def test_a_folder_is_named_by_its_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    r = CliRunner().invoke(app, ["demo", "refund", "--approve", "--store", "sqlite:///d"])
    assert r.exit_code == 2 and repr(str(tmp_path / "d")) in r.stderr, r.stderr
