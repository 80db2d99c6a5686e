"""Shared helpers for the benchmark suite: statistics, subprocess workers, machine facts, tables.

Nothing here imports callbound or a framework: the orchestrator (``run.py``) stays light and every
measurement that could disturb another (imports, peak RSS, quadratic SDK code) runs in its own process.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
WORKER = BENCH_DIR / "worker.py"
# Databases go on the disk the project lives on (never a tmpfs, where fsync costs nothing).
DATA_DIR = BENCH_DIR / ".data"


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def percentile(xs: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    s = sorted(xs)
    if not s:
        return math.nan
    k = max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s)) - 1))
    return s[k]


def loglog_slope(sizes: Sequence[float], times: Sequence[float]) -> float:
    """Least-squares slope of log(time) against log(size): the growth exponent."""
    xs = [math.log(s) for s in sizes]
    ys = [math.log(t) for t in times]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def have(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@dataclass
class WorkerResult:
    ok: bool
    data: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    timed_out: bool = False
    wall_s: float = 0.0


def bench_env() -> dict[str, str]:
    """The environment of every measured child process. Bytecode caching is on for all of them, in
    one cache under bench/.data (so a PYTHONDONTWRITEBYTECODE shell does not make the import-time rows
    compile callbound from source while the frameworks load pip's precompiled files)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(DATA_DIR / "pycache")
    env.setdefault("PYTHONHASHSEED", "0")
    if _SNAPSHOT["path"]:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_SNAPSHOT["path"], env.get("PYTHONPATH", "")) if p)
    return env


_SNAPSHOT: dict[str, str] = {"path": ""}


def snapshot_source() -> dict[str, str]:
    """Copy ``src/callbound`` to bench/.data/src-snapshot and make every measured process (and this one)
    import callbound from the copy, so a long run measures one version of the code even while the working
    tree changes. Returns the git revision and whether src/ had uncommitted changes."""
    dest = DATA_DIR / "src-snapshot"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(
        ROOT / "src" / "callbound", dest / "callbound", ignore=shutil.ignore_patterns("__pycache__")
    )
    _SNAPSHOT["path"] = str(dest)
    sys.path.insert(0, str(dest))
    for name in [m for m in sys.modules if m == "callbound" or m.startswith("callbound.")]:
        del sys.modules[name]

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], capture_output=True, text=True, cwd=str(ROOT), check=False
            ).stdout.strip()
        except OSError:
            return ""

    return {
        "revision": git("rev-parse", "--short", "HEAD") or "unknown",
        "dirty": "yes" if git("status", "--porcelain", "--", "src") else "no",
    }


def run_worker(
    task: str, params: dict[str, Any], *, timeout: float = 900.0, prefix: Sequence[str] = ()
) -> WorkerResult:
    """Run ``worker.py TASK PARAMS`` in a fresh interpreter; its last stdout line is JSON."""
    cmd = [*prefix, sys.executable, str(WORKER), task, json.dumps(params)]
    env = bench_env()
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        return WorkerResult(False, error=f"> {timeout:g} s", timed_out=True, wall_s=time.perf_counter() - t0)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return WorkerResult(False, error=" | ".join(tail) or f"exit {proc.returncode}", wall_s=wall)
    lines = [ln for ln in proc.stdout.strip().splitlines() if ln.startswith("{")]
    if not lines:
        return WorkerResult(False, error="worker printed no result", wall_s=wall)
    data = json.loads(lines[-1])
    data["_stderr"] = proc.stderr
    return WorkerResult(True, data, wall_s=wall)


def time_fresh_process(code: str, repeat: int, python: str | None = None) -> list[float]:
    """Wall time of ``python -c CODE`` in ``repeat`` fresh processes (after one unmeasured run)."""
    cmd = [python or sys.executable, "-c", code]
    env = bench_env()
    # Two unmeasured runs: the first writes the bytecode cache, the second warms the page cache.
    for _ in range(2):
        subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=str(ROOT))
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=str(ROOT))
        out.append(time.perf_counter() - t0)
    return out


def import_self_times(code: str, repeat: int = 5) -> dict[str, float]:
    """Median self time (µs) of every module imported by ``python -X importtime -c CODE``."""
    env = bench_env()
    runs: dict[str, list[float]] = {}
    for _ in range(repeat):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", code],
            capture_output=True,
            text=True,
            env=env,
            cwd=str(ROOT),
        )
        for line in proc.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            parts = [p.strip() for p in line.split(":", 1)[1].split("|")]
            if len(parts) == 3 and parts[0].isdigit():
                runs.setdefault(parts[2], []).append(float(parts[0]))
    return {m: statistics.median(v) for m, v in runs.items()}


def machine_info() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    fs = ""
    try:
        out = subprocess.run(
            ["df", "-T", str(BENCH_DIR)], capture_output=True, text=True, check=False
        ).stdout.splitlines()
        if len(out) > 1:
            fs = out[1].split()[1]
    except OSError:
        pass
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "memory": mem,
        "python": platform.python_version() + " (" + platform.python_implementation() + ")",
        "platform": platform.platform(),
        "data_fs": fs,
        "strace": "yes" if shutil.which("strace") else "no",
    }


def versions(modules: Sequence[str]) -> dict[str, str]:
    from importlib import metadata

    out = {}
    for m in modules:
        try:
            out[m] = metadata.version(m)
        except metadata.PackageNotFoundError:
            out[m] = "not installed"
    return out


# ---- formatting -----------------------------------------------------------------------------------


def fmt(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def ratio(x: float | None, base: float | None) -> str:
    if x is None or base is None or base == 0 or math.isnan(x) or math.isnan(base):
        return "-"
    return f"{x / base:.2f}×"


class Table:
    """A table that prints as aligned text and renders as Markdown."""

    def __init__(self, title: str, headers: Sequence[str], note: str = "") -> None:
        self.title = title
        self.headers = list(headers)
        self.rows: list[list[str]] = []
        self.note = note

    def add(self, *cells: Any) -> None:
        row = [str(c) for c in cells]
        row += [""] * (len(self.headers) - len(row))
        self.rows.append(row)

    def text(self) -> str:
        widths = [len(h) for h in self.headers]
        for r in self.rows:
            widths = [max(w, len(c)) for w, c in zip(widths, r, strict=False)]
        lines = [self.title, "  ".join(h.ljust(w) for h, w in zip(self.headers, widths, strict=True))]
        lines.append("  ".join("-" * w for w in widths))
        for r in self.rows:
            lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)

    def markdown(self) -> str:
        def esc(c: str) -> str:
            return c.replace("|", "\\|")

        out = ["| " + " | ".join(esc(h) for h in self.headers) + " |"]
        out.append("|" + "|".join(" --- " for _ in self.headers) + "|")
        for r in self.rows:
            out.append("| " + " | ".join(esc(c) for c in r) + " |")
        if self.note:
            out += ["", self.note]
        return "\n".join(out)
