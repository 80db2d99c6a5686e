"""Review round 20, g: the package docstring of callbound says what `import callbound` loads. It said
"the core, the runtime and pydantic only", but the runtime loads on first use of one of its names
(issue 5: import time); the docstring now names them, and a subprocess checks both halves (D30)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import callbound


def _loaded(code: str) -> list[str]:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys, json, callbound\n{code}\nprint(json.dumps(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_docstring_names_the_lazy_runtime_names() -> None:
    doc = " ".join((callbound.__doc__ or "").split())
    (listed,) = re.findall(r"loads on first use of a name it defines: (.*?)\.", doc)
    assert sorted(re.findall(r"``(\w+)``", listed)) == sorted(callbound._LAZY)
    assert "loads the core and pydantic only" in doc


def test_import_loads_no_runtime_until_a_runtime_name_is_used() -> None:
    plain = _loaded("")
    assert not [m for m in plain if m.startswith("callbound.runtime")]
    assert "asyncio" not in plain and "pydantic" in plain
    used = _loaded("callbound.Runner")
    assert "callbound.runtime.runner" in used


def test_version_is_the_package_version() -> None:
    """docs/reference.md: "`__version__` | the package version": the installed distribution's."""
    from importlib.metadata import version

    assert callbound.__version__ == version("callbound")
