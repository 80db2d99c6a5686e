"""Instructions per in-memory round trip, counted by valgrind's callgrind: a figure that does not move
with the machine's load, for comparing two versions of callbound (or a compiled build) side by side.

    python bench/instructions.py                      # the checked-out src/
    python bench/instructions.py --src /tmp/old/src   # another tree (e.g. `git archive REV src | tar -x`)

It runs section 1's in-memory loop (``loops.build_callbound``: one ``get_order`` call per turn, stateless
replay, no wire step, async handler unless ``--sync``) once at N and once at 3N turns, each in a fresh
interpreter under callgrind, and prints (Ir(3N) - Ir(N)) / 2N: the start-up, imports and the first
turns cancel out. PYTHONHASHSEED is fixed so two runs of one tree agree to a few instructions.
Needs ``valgrind`` (``apt-get install valgrind``); one count takes a minute or two at the default N.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")
_ONE_RUN = (
    "import sys; sys.path.insert(0, sys.argv[1]); import loops; "
    "loops.build_callbound(int(sys.argv[2]), 1, wire=False, async_handler=sys.argv[3] == 'async')()"
)


def instructions(src: Path, n: int, mode: str) -> int:
    """Instructions callgrind counts for one whole process running ``n`` turns."""
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(src))
    proc = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-c",
            _ONE_RUN,
            str(BENCH_DIR),
            str(n),
            mode,
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    found = _COLLECTED.search(proc.stderr)
    if proc.returncode != 0 or found is None:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise SystemExit(f"callgrind run of {n} turns failed (exit {proc.returncode}):\n{tail}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--src", type=Path, default=BENCH_DIR.parent / "src", help="the src/ directory to measure"
    )
    parser.add_argument(
        "--n", type=int, default=100, help="turns of the shorter run (the longer one runs 3N)"
    )
    parser.add_argument("--sync", action="store_true", help="a sync handler (a worker-thread hop per call)")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    if not (args.src / "callbound" / "__init__.py").is_file():
        print(f"{args.src} holds no callbound package (pass the src/ directory)", file=sys.stderr)
        return 2
    if args.n < 10:
        print("--n must be at least 10", file=sys.stderr)
        return 2
    mode = "sync" if args.sync else "async"
    with ThreadPoolExecutor(2) as pool:  # two processes: one per core on the 2-core machines this runs on
        short_run = pool.submit(instructions, args.src, args.n, mode)
        long_run = pool.submit(instructions, args.src, 3 * args.n, mode)
        short, long = short_run.result(), long_run.result()
    per_round_trip = (long - short) / (2 * args.n)
    print(
        f"{args.src}: {per_round_trip:,.0f} instructions per round trip ({mode} handler, N={args.n} and {3 * args.n})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
