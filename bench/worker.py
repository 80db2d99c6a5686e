"""One measurement in a fresh interpreter: ``python bench/worker.py TASK 'JSON params'``.

Prints one JSON line with the result. Run by ``run.py``; fresh processes keep imports, peak RSS and
the SDKs' quadratic code from disturbing other measurements.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import peak_rss_mb


def _profile(fn: Any, path: str) -> None:
    """Profile one call of ``fn`` with pyinstrument if installed, else cProfile; text to ``path``."""
    try:
        from pyinstrument import Profiler  # type: ignore[import-not-found]
    except ImportError:
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        fn()
        prof.disable()
        buf = io.StringIO()
        stats = pstats.Stats(prof, stream=buf)
        stats.sort_stats("cumulative").print_stats(60)
        stats.sort_stats("tottime").print_stats(40)
        Path(path).write_text(buf.getvalue())
        return
    profiler = Profiler(interval=0.0002, async_mode="enabled")
    profiler.start()
    fn()
    profiler.stop()
    Path(path).write_text(profiler.output_text(unicode=False, color=False, show_all=False))


def _profile_top(fn: Any, top: int = 14) -> dict[str, Any]:
    """cProfile one call of ``fn``: callbound's functions by cumulative share of the run, and the
    functions (any module, builtins included) with the most self time. Percentages of the whole run."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    stats = pstats.Stats(prof)
    entries = stats.stats  # type: ignore[attr-defined]
    total = max(sum(v[2] for v in entries.values()), 1e-12)  # sum of self times = profiled time

    def label(key: tuple[str, int, str]) -> str:
        path, line, name = key
        if "callbound/" in path:
            path = "callbound/" + path.split("callbound/", 1)[1]
        elif path.startswith("~") or path == "~":
            return name
        else:
            path = Path(path).name
        return f"{path}:{line}({name})"

    cum = sorted(
        ((k, v) for k, v in entries.items() if "/callbound/" in k[0]), key=lambda kv: kv[1][3], reverse=True
    )
    # drop the outer drivers (run_sync, _drive, ...): they cover nearly everything and say nothing
    drivers = {"run", "_drive", "run_sync", "_run_sync", "resume", "resume_sync"}
    cum = [(k, v) for k, v in cum if not (k[0].endswith("runner.py") and k[2] in drivers)][:top]
    own = sorted(entries.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    return {
        "cumulative": [{"fn": label(k), "pct": 100 * v[3] / total, "calls": v[1]} for k, v in cum],
        "self": [{"fn": label(k), "pct": 100 * v[2] / total, "calls": v[1]} for k, v in own],
    }


def task_loop(p: dict[str, Any]) -> dict[str, Any]:
    import loops

    impls = loops.IMPLS if p.get("wire", True) else loops.IMPLS_NO_WIRE
    t0 = time.perf_counter()
    run_once = impls[p["impl"]](p["n"], p["par"])
    setup_s = time.perf_counter() - t0
    # Warm-up: one operation of at most 50 turns (imports done, caches and code paths warm). A full-length
    # warm-up would add minutes to the frameworks whose cost grows with the history and change nothing.
    for _ in range(p.get("warmup", 1)):
        impls[p["impl"]](min(p["n"], 50), p["par"])()
    samples, wire, gc_s = [], [], []
    pause = {"total": 0.0, "start": 0.0}

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            pause["start"] = time.perf_counter()
        else:
            pause["total"] += time.perf_counter() - pause["start"]

    gc.callbacks.append(on_gc)  # time spent in cyclic garbage collection during each timed run
    for _ in range(p["runs"]):
        pause["total"] = 0.0
        elapsed, wire_s = run_once()
        samples.append(elapsed)
        wire.append(wire_s)
        gc_s.append(pause["total"])
    gc.callbacks.remove(on_gc)
    out = {"samples_s": samples, "wire_s": wire, "gc_s": gc_s, "setup_s": setup_s, "rss_mb": peak_rss_mb()}
    if p.get("profile"):
        _profile(run_once, p["profile"])
    if p.get("profile_top"):
        out["profile_top"] = _profile_top(run_once)
    return out


def task_durable(p: dict[str, Any]) -> dict[str, Any]:
    """Runs of several implementations, interleaved round-robin so that each sees the same disk
    weather. ``sqlite3-bare`` does as many commits per round trip as the first implementation did in
    its warm-up run (callbound's count when it comes first)."""
    import durable

    n, per_rt = p["n"], p.get("commits_per_rt", 2)
    built: dict[str, Any] = {}
    for impl in p["impls"]:
        if impl == "sqlite3-bare" and built:
            first = next(iter(built.values()))
            per_rt = max(1, round(first[1].commits / n)) if first[1].commits else per_rt
        run_once, counters = durable.build(impl, n, p["dbdir"], commits_per_rt=per_rt)
        if p.get("warmup", 1):
            # a short warm-up operation, then one full run to count commits (not timed)
            durable.build(impl, min(n, 50), p["dbdir"], commits_per_rt=per_rt)[0]()
            if impl != "sqlite3-bare" and not built and "sqlite3-bare" in p["impls"]:
                run_once()
        built[impl] = (run_once, counters)
    for _, counters in built.values():
        counters.reset()
    samples: dict[str, list[float]] = {impl: [] for impl in built}
    wire: dict[str, list[float]] = {impl: [] for impl in built}
    for _ in range(p["runs"]):
        for impl, (run_once, _) in built.items():
            elapsed, wire_s = run_once()
            samples[impl].append(elapsed)
            wire[impl].append(wire_s)
    out: dict[str, Any] = {
        impl: {"samples_s": samples[impl], "wire_s": wire[impl], "commits": c.commits / max(1, p["runs"])}
        for impl, (_, c) in built.items()
    }
    out["bare_commits_per_rt"] = per_rt
    out["rss_mb"] = peak_rss_mb()
    if p.get("profile"):
        _profile(built[p["impls"][0]][0], p["profile"])
    if p.get("profile_top"):
        out["profile_top"] = _profile_top(built[p["impls"][0]][0])
    return out


def task_wal_frames(p: dict[str, Any]) -> dict[str, Any]:
    import durable

    return durable.wal_frames(p["impl"], p["n"], p["dbdir"])


def task_durable_once(p: dict[str, Any]) -> dict[str, Any]:
    """One run, nothing else (for strace): the fsync count is taken around it."""
    import durable

    run_once, counters = durable.build(
        p["impl"], p["n"], p["dbdir"], commits_per_rt=p.get("commits_per_rt", 2)
    )
    elapsed, _ = run_once()
    return {"elapsed_s": elapsed, "commits": counters.commits}


def task_stream_cb(p: dict[str, Any]) -> dict[str, Any]:
    import streaming

    return streaming.measure_callbound(p["api"], p["size"], p["runs"])


def task_stream_sdk(p: dict[str, Any]) -> dict[str, Any]:
    import streaming

    return streaming.measure_sdk(p["sdk"], p["size"])


def task_stream_profile(p: dict[str, Any]) -> dict[str, Any]:
    import streaming

    evs, _ = streaming.events(p["api"], p["size"])
    chunks = streaming.reads(streaming.sse_bytes(evs))
    del evs

    def once() -> None:
        streaming.assemble_callbound(p["api"], chunks)

    once()
    return {"profile_top": _profile_top(once)}


def task_firstuse(p: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    import loops

    run_once = loops.build_callbound(1, 1)
    run_once()
    return {"elapsed_s": time.perf_counter() - t0}


def task_thread_hop(p: dict[str, Any]) -> dict[str, Any]:
    """The bare cost of what callbound does per sync handler call: hand a no-op function to a thread
    pool from the event loop and await it (median µs per hop over batches)."""
    import asyncio
    import concurrent.futures
    import statistics

    def noop() -> int:
        return 1

    async def measure() -> list[float]:
        loop = asyncio.get_running_loop()
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=4)
        for _ in range(200):
            await loop.run_in_executor(pool, noop)
        batches = []
        for _ in range(p.get("batches", 7)):
            t0 = time.perf_counter()
            for _ in range(1000):
                await loop.run_in_executor(pool, noop)
            batches.append((time.perf_counter() - t0) / 1000 * 1e6)
        pool.shutdown()
        return batches

    batches = asyncio.run(measure())
    return {"hop_us": statistics.median(batches), "batches_us": batches}


def task_phases(p: dict[str, Any]) -> dict[str, Any]:
    import loops

    return loops.phase_breakdown(p["n"])


def task_paused(p: dict[str, Any]) -> dict[str, Any]:
    import paused

    return paused.measure(p["backend"], p["ops"], p["samples"], p["dbdir"])


TASKS = {
    "loop": task_loop,
    "durable": task_durable,
    "durable_once": task_durable_once,
    "stream_cb": task_stream_cb,
    "stream_sdk": task_stream_sdk,
    "stream_profile": task_stream_profile,
    "firstuse": task_firstuse,
    "paused": task_paused,
    "thread_hop": task_thread_hop,
    "phases": task_phases,
    "wal_frames": task_wal_frames,
}


def main() -> None:
    task, params = sys.argv[1], json.loads(sys.argv[2])
    result = TASKS[task](params)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
