"""Time to collect the test suite (``pytest --collect-only``), cold and warm, and the heavy modules it imports.

    python benchmarks/bench_collection.py

Cold: the first collection of a fresh checkout (pytest rewrites every test module's asserts; with
``PYTHONDONTWRITEBYTECODE`` set every collection is cold).  Warm: a second collection, reading the rewritten
modules from ``__pycache__``.  Prints wall and CPU seconds of each, the machine's load, and which of the heavy
optional modules (Dask, distributed, ``statsmodels.api``, hypothesis, ``matplotlib.pyplot``) the collection imported.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("dask", "dask.dataframe", "distributed", "statsmodels.api", "hypothesis", "matplotlib.pyplot")


def _collect(env: dict) -> tuple[float, float, str]:
    before = os.times()
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "pytest", "--collect-only", "-q", "-s",
                          "-p", "no:cacheprovider"], cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    return wall, cpu, ", ".join(m for m in HEAVY if m in imported) or "none"


def main() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for cache in ROOT.joinpath("tests").rglob("__pycache__"):
        shutil.rmtree(cache)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    for label in ("cold", "warm"):
        wall, cpu, heavy = _collect(env)
        print(f"{label}: {wall:5.1f} s wall, {cpu:5.1f} s CPU; heavy modules imported: {heavy}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
