"""Review round 18 (d F5): a PostgreSQL URL that libpq cannot parse is quoted whole in its error,
password and all, and callbound passed that text on: ``callbound ops list --store
'postgresql://bob:PASSWORD@[::1'`` printed the password on stderr (terminals, CI logs, bug reports),
and ``stores.open`` raised a StoreError holding it, with the psycopg error holding it chained for any
traceback. The message keeps what is wrong with the URL, without the password."""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from callbound.core.errors import StoreError

pytest.importorskip("psycopg")

REPO = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-pw"

URLS = [
    f"postgresql://bob:{SECRET}@[::1",  # an IPv6 host without its closing bracket
    f"postgresql://bob:{SECRET}@127.0.0.1:1/db?bogus_option=1",  # an unknown query parameter
    "postgresql://bob:s3cr3t%2Dpw@[::1",  # percent-encoded in the URL
    f"postgresql://bob@[::1/db?password={SECRET}",  # as a query parameter
]


@pytest.mark.parametrize("url", URLS)
def test_opening_a_malformed_url_does_not_repeat_its_password(url: str) -> None:
    secret = "s3cr3t%2Dpw" if "%2D" in url else SECRET
    from callbound import stores

    with pytest.raises(StoreError) as caught:
        stores.open(url)
    text = "".join(traceback.format_exception(caught.value))
    assert secret not in text and SECRET not in text, text
    assert "cannot connect to PostgreSQL" in str(caught.value)
    assert "URI" in str(caught.value)  # what is wrong with it is still said


def test_the_cli_does_not_print_the_password(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for args in (["ops", "list"], ["demo", "refund"]):
        r = subprocess.run(
            [sys.executable, "-m", "callbound.cli", *args, "--store", URLS[0]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            input="",
            timeout=60,
        )
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith("error: cannot connect to PostgreSQL"), r.stderr
        assert SECRET not in r.stderr, r.stderr
