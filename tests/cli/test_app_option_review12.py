"""`--app` is checked before a store is opened, and it takes the App's own model (D21, D28).

Found by a reviewer: `callbound run --app nomod:f` and `worker --app nomod:f` exited 2 but had already
created the SQLite file (or callbound's tables in PostgreSQL); and `run --app ... --api openai-chat` ran
the App's model, ignoring `--api` without a word.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_cli_promises_review import cli, no_traceback


@pytest.mark.parametrize("command", [["run", "--app", "nomod:f", "hello"], ["worker", "--app", "nomod:f"]])
def test_a_bad_app_leaves_no_store_behind(tmp_path: Path, command: list[str]) -> None:
    r = cli(*command, "--store", f"sqlite:///{tmp_path / 'cb.db'}", cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    no_traceback(r)
    assert not (tmp_path / "cb.db").exists()


@pytest.mark.parametrize(
    "extra", [["--api", "openai-chat"], ["--model", "gpt-x"], ["--base-url", "http://x"]]
)
def test_app_with_model_options_is_refused(tmp_path: Path, extra: list[str]) -> None:
    r = cli(
        "run", "--app", "nomod:f", *extra, "--store", f"sqlite:///{tmp_path / 'cb.db'}", "hello", cwd=tmp_path
    )
    assert r.returncode == 2 and "--app takes the model" in r.stderr, (r.stdout, r.stderr)
    assert not (tmp_path / "cb.db").exists()
