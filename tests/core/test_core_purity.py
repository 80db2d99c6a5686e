"""The core is sans-I/O: no event loop, sockets, databases, SDKs, CLI or higher layers, and no wall clock.

Imports are checked in a fresh interpreter, loading every ``callbound.core`` module without running
``callbound/__init__.py`` (the public package may legitimately import the runtime; the core may not).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import callbound.core

CORE_DIR = Path(callbound.core.__file__).resolve().parent
PACKAGE_DIR = CORE_DIR.parent
CORE_MODULES = sorted(
    "callbound.core" if p.stem == "__init__" else f"callbound.core.{p.stem}" for p in CORE_DIR.glob("*.py")
)
CORE_FILES = sorted(CORE_DIR.glob("*.py"))

FORBIDDEN = [
    "asyncio",
    "sqlite3",
    "socket",
    "ssl",
    "selectors",
    "http.client",
    "urllib.request",
    "subprocess",
    "httpx",
    "httpcore",
    "psycopg",
    "openai",
    "anthropic",
    "google",
    "typer",
    "click",
    "rich",
    "callbound.adapters",
    "callbound.stores",
    "callbound.runtime",
    "callbound.transports",
    "callbound.cli",
    "callbound.service",
    "callbound.testing",
]

PROBE = r"""
import importlib, json, sys, types
package = types.ModuleType("callbound")
package.__path__ = [sys.argv[1]]
sys.modules["callbound"] = package  # skip callbound/__init__.py: only the core is under test
before = set(sys.modules)
for name in json.loads(sys.argv[2]):
    importlib.import_module(name)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def imported_by(modules: list[str]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(PACKAGE_DIR), json.dumps(modules)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    loaded: list[str] = json.loads(out.stdout)
    return loaded


def offenders(loaded: list[str]) -> list[str]:
    return sorted(m for m in loaded if any(m == bad or m.startswith(bad + ".") for bad in FORBIDDEN))


def test_there_are_core_modules_to_check() -> None:
    assert "callbound.core.dispatch" in CORE_MODULES
    assert len(CORE_MODULES) >= 14


def test_importing_the_whole_core_pulls_in_nothing_forbidden() -> None:
    loaded = imported_by(CORE_MODULES)
    assert set(CORE_MODULES) <= set(loaded)  # the probe really imported them
    assert offenders(loaded) == []


@pytest.mark.parametrize("module", CORE_MODULES)
def test_each_core_module_alone(module: str) -> None:
    assert offenders(imported_by([module])) == []


def test_probe_detects_a_forbidden_import() -> None:
    # The check itself must be able to fail.
    loaded = imported_by(["callbound.core.errors", "asyncio"])
    assert "asyncio" in offenders(loaded)


# --- no wall clock, no I/O in the source ---------------------------------------------------------

CLOCK_CALLS = {
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
    ("time", "time"),
    ("time", "time_ns"),
    ("time", "monotonic"),
    ("time", "monotonic_ns"),
    ("time", "perf_counter"),
    ("time", "sleep"),
}
FORBIDDEN_IMPORTS = {"time", "asyncio", "socket", "sqlite3", "os", "io", "threading", "subprocess", "logging"}
FORBIDDEN_NAMES = {"open", "print", "input", "eval", "exec", "__import__"}


def findings(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            base = node.value
            owner = (
                base.id
                if isinstance(base, ast.Name)
                else base.attr
                if isinstance(base, ast.Attribute)
                else ""
            )
            if (owner, node.attr) in CLOCK_CALLS:
                found.append(f"{owner}.{node.attr}")
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in FORBIDDEN_IMPORTS]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] in FORBIDDEN_IMPORTS
        ):
            found.append(f"from {node.module}")
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_NAMES
        ):
            found.append(f"{node.func.id}()")
    return found


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: p.name)
def test_no_wall_clock_or_io_in_core_source(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert findings(source) == [], path.name
    # A plain text check as well, in case of aliasing tricks the AST walk would miss.
    for needle in ("datetime.now", "utcnow", "time.time", "time.monotonic", "perf_counter"):
        assert needle not in source, (path.name, needle)


@pytest.mark.parametrize(
    "snippet",
    [
        "from datetime import datetime\nx = datetime.now()",
        "import datetime\nx = datetime.datetime.now()",
        "import time\nx = time.time()",
        "from time import monotonic",
        "with open('f') as fh: pass",
        "import asyncio",
    ],
)
def test_source_check_can_fail(snippet: str) -> None:
    assert findings(snippet) != []


def test_nothing_in_core_awaits() -> None:
    # ``async def`` may appear in a Protocol that describes what the runtime calls; nothing awaits.
    for path in CORE_FILES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            assert not isinstance(node, ast.Await | ast.AsyncFor | ast.AsyncWith), (path.name, node.lineno)
