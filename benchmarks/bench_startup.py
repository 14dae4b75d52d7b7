"""Start-up time: bare Python, ``import calibtest``, ``calibtest --version`` and ``calibtest --help``.

Each command runs in a fresh interpreter (the Python running this script, with
this checkout first on ``PYTHONPATH``) ``--repeat`` times (default 7); the median
wall time is printed, and, for every command but the first, its excess over
bare Python.  Target (issue "One source of truth", point 6): ``--version`` and
``--help`` within 0.3 s of ``python -c pass``.

Run: ``python benchmarks/bench_startup.py [--repeat 7]``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (label, arguments after the interpreter)
COMMANDS = [
    ("python -c pass", ["-c", "pass"]),
    ("python -c 'import calibtest'", ["-c", "import calibtest"]),
    ("calibtest --version", ["-m", "calibtest.cli", "--version"]),
    ("calibtest --help", ["-m", "calibtest.cli", "--help"]),
]

#: The issue's budget over bare Python for --version and --help, in seconds.
BUDGET = 0.3


def wall_times(args: list[str], repeat: int, env: dict) -> list[float]:
    """Wall times of ``repeat`` runs of ``python ARGS`` (the output is discarded; a failure raises)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, *args], env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs per command (the median is shown)")
    opts = parser.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    print(f"Python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; "
          f"median of {opts.repeat} runs")
    base = None
    for label, args in COMMANDS:
        median = statistics.median(wall_times(args, opts.repeat, env))
        if base is None:
            base = median
            print(f"  {label:<30} {median:6.3f} s")
            continue
        excess = median - base
        verdict = ""
        if "--version" in args or "--help" in args:
            verdict = "  within budget" if excess <= BUDGET else f"  OVER the {BUDGET} s budget"
        print(f"  {label:<30} {median:6.3f} s  (+{excess:.3f} s){verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
