"""Benchmark of the multi-scale test ``calibtest.calib_test`` (default options: adaptive grid, 999 draws).

Targets: one call at n = 10^5 (binary) well under a second; at n = 10^6 under 2 s on 2 cores.

Timings at n = 10^3, 10^4, 10^5 and 10^6 for a binary model (p ~ Beta(2, 5),
calibrated) and a top-1 model (K = 10, confidence in [1/K, 1], calibrated).
Both the CPU time of the process (``time.process_time``: what the call
costs, little affected by other jobs on a shared machine) and the wall clock
are printed, best of ``repeat`` runs (3, and 5 at n = 10^6) with the median
wall clock, and the machine's load; the first call of the process (n = 1000)
is left out of the timings.  Then, in three fresh processes (after the imports and a 1000-row call),
the first 10^6-row call, whose arrays are the first the process touches (their page faults are part
of its time), and the second.

Peak memory: the label draws are made in blocks of rows and draws and reduced to per-draw bin sums, so
the test's own peak (``tracemalloc``, numpy's allocations included; the data's arrays excluded) is
O(R x bins + rows per block x draws per block), not O(R x n): measured at n = 10^6 and 10^7 in a fresh
process each.  The streamed test (a Parquet file read in chunks) is timed at n = 10^6 and must give the
p-value of the rows in memory for the same seed.

Run: ``python benchmarks/bench_calib_test.py`` (writes
``benchmarks/results/bench_calib_test.txt``).
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import calibtest as ct

OUT = Path(__file__).resolve().parent / "results" / "bench_calib_test.txt"


def binary(n: int, seed: int = 0):
    g = np.random.default_rng(seed)
    p = g.beta(2, 5, n)
    return {"y": (g.random(n) < p).astype(np.int8), "probs": p}


def top1(n: int, seed: int = 0, K: int = 10):
    g = np.random.default_rng(seed)
    conf = 1 / K + (1 - 1 / K) * g.beta(5, 2, n)
    return {"y": (g.random(n) < conf).astype(np.int8), "probs": conf, "n_classes": K}


def timed(kwargs, repeat: int) -> tuple[float, float, float, object]:
    """(best CPU seconds, best wall seconds, median wall seconds, the result) over ``repeat`` calls."""
    cpu, wall, res = [], [], None
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        res = ct.calib_test(**kwargs, rng=1)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return min(cpu), min(wall), float(np.median(wall)), res


def main() -> str:
    from calibtest.core.counter_draws import DRAW_THREADS
    lines = [f"calib_test benchmark (default options: n_bins='adaptive', n_draws={ct.calib_test.__kwdefaults__['n_draws']}); numpy {np.__version__}, "
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {DRAW_THREADS} draw threads, "
             f"load {os.getloadavg()[0]:.2f}",
             f"{'target':8} {'n':>9} {'scales':>7} {'CPU s':>8} {'wall s':>8} {'median':>8}  grid"]
    ct.calib_test(**binary(1000), rng=1)  # imports and first-call costs out of the timings
    for name, make in (("binary", binary), ("top-1", top1)):
        for n in (10**3, 10**4, 10**5, 10**6):  # a loop over the few sizes
            cpu, wall, med, res = timed(make(n), 3 if n <= 10**5 else 5)
            lines.append(f"{name:8} {n:>9} {len(res.n_bins):>7} {cpu:>8.3f} {wall:>8.3f} {med:>8.3f}  {list(res.n_bins)}")
            print(lines[-1], flush=True)
    lines.append("a fresh process (imports and a 1000-row call first), binary n = 10^6: the first call (memory not yet "
                 "touched by the process) and the second:")
    for _ in range(3):  # three fresh processes
        lines.append("  " + subprocess.run([sys.executable, "-c", COLD], capture_output=True, text=True, check=True,
                                           env=dict(os.environ)).stdout.strip())
        print(lines[-1], flush=True)
    lines.append("peak memory of calib_test (tracemalloc, the data's arrays excluded; default options):")
    for n in (10**6, 10**7):  # a fresh process each
        lines.append("  " + subprocess.run([sys.executable, "-c", PEAK.format(n=n)], capture_output=True, text=True,
                                           check=True, env=dict(os.environ)).stdout.strip())
        print(lines[-1], flush=True)
    lines.append(streamed(10**6))
    print(lines[-1], flush=True)
    lines.append(f"load after the runs {os.getloadavg()[0]:.2f}")
    return "\n".join(lines) + "\n"


COLD = """
import time
import numpy as np
import calibtest as ct
g = np.random.default_rng(0)
p = g.beta(2, 5, 10**6)
y = (g.random(10**6) < p).astype(np.int8)
ct.calib_test(y=y[:1000], probs=p[:1000], rng=1)
walls = []
for _ in range(2):
    t0 = time.perf_counter()
    ct.calib_test(y=y, probs=p, rng=1)
    walls.append(time.perf_counter() - t0)
print(f"first call {walls[0]:.3f} s, second {walls[1]:.3f} s")
"""


PEAK = """
import time, tracemalloc
import numpy as np
import calibtest as ct
g = np.random.default_rng(0)
p = g.beta(2, 5, {n})
y = (g.random({n}) < p).astype(np.int8)
ct.calib_test(y=y[:1000], probs=p[:1000], rng=1)
tracemalloc.start()
t0 = time.perf_counter()
res = ct.calib_test(y=y, probs=p, rng=1)
wall = time.perf_counter() - t0
peak = tracemalloc.get_traced_memory()[1]
print(f"n = {n:>9}: peak {{peak / 2**20:8.1f}} MiB over the data (R x n bytes would be {{999 * {n} / 2**20:8.0f}} MiB), "
      f"wall {{wall:.1f}} s (under tracemalloc), p = {{res.pvalue}}")
"""


def streamed(n: int) -> str:
    """calib_test on a Parquet file of n rows read in chunks against the same rows in memory."""
    import pandas as pd
    data = binary(n)
    frame = pd.DataFrame({"y": data["y"], "p": data["probs"]})
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "d.parquet")
        frame.to_parquet(path)
        w0 = time.perf_counter()
        res = ct.calib_test("y ~ p", data=path, rng=1)
        wall = time.perf_counter() - w0
    mem = ct.calib_test("y ~ p", data=frame, rng=1)
    return (f"streamed from Parquet, n = {n}: wall {wall:.2f} s, p = {res.pvalue} (in memory: p = {mem.pvalue}; "
            f"max |z - z_mem| = {abs(res.scales['z'] - mem.scales['z']).max():.1e})")


if __name__ == "__main__":
    text = main()
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)
    print(text)
