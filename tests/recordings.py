"""Access to the shared real recordings (never copied into this repository).

``CALLBOUND_FIXTURES`` overrides the default ``../shared/fixtures`` (relative to the repository root).
Tests that need them call :func:`fixtures_dir`, which skips with a clear message when absent.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent


def fixtures_dir() -> Path:
    configured = os.environ.get("CALLBOUND_FIXTURES")
    path = Path(configured) if configured else REPO_ROOT.parent / "shared" / "fixtures"
    if not path.is_dir():
        pytest.skip(f"shared recordings not found at {path} (set CALLBOUND_FIXTURES to their folder)")
    return path


def fixture_path(relative: str) -> Path:
    path = fixtures_dir() / relative
    if not path.exists():
        pytest.skip(f"recording {relative} not found under {fixtures_dir()}")
    return path


def read_bytes(relative: str) -> bytes:
    return fixture_path(relative).read_bytes()


def load_cassette(relative: str) -> list[dict[str, Any]]:
    """The interactions of a VCR cassette: each has request.parsed_body (or body) and response with
    parsed_body (plain JSON) or body.string (a raw stream), and response.status.code."""
    with fixture_path(relative).open(encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    interactions: list[dict[str, Any]] = data["interactions"]
    return interactions


def response_body(interaction: dict[str, Any]) -> dict[str, Any] | str:
    """The parsed JSON body, or the raw body string (SSE) of one cassette interaction."""
    resp = interaction["response"]
    if "parsed_body" in resp:
        body: dict[str, Any] | str = resp["parsed_body"]
        return body
    return str(resp["body"]["string"])


def request_body(interaction: dict[str, Any]) -> Any:
    req = interaction["request"]
    if "parsed_body" in req:
        return req["parsed_body"]
    import json

    return json.loads(req["body"])


def status_code(interaction: dict[str, Any]) -> int:
    return int(interaction["response"]["status"]["code"])
