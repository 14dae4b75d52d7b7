"""Benchmark of ``calibtest.tcal_test`` at n = 10^5 and 10^6 (binary, default options: R = 3000 draws).

Target: measured on every release (issue 27: 177 s at 10^6 rows).  Where
the time goes: every resample of n rows makes about five random reads per
row into tables of 2n entries (the alias cell's prob and alias, then the
chosen pair's sq, U* and bin); at 10^5 rows the tables fit in the caches
and fresh work arrays (page faults) cost as much as the reads, so the draws
reuse theirs (CPU 9.7 s -> 7.6 s, the same numbers); at 10^6 rows each read
is a cache miss (8-11 ms per read per resample) and the run stays near
3000 x 65 ms.  Packing the tables row-wise (one read per cell and per pair)
was tried and was slower in numpy (the copies out of the packed rows cost
more than the misses saved).  Prints the CPU time of the process and
the wall clock (one run each at 10^6, best of 2 at 10^5), the machine's
load, and where the time goes: the share of the label draws
(``core.tcal._draw_pairs``) and of the per-bin statistics of each resample
(``core.resampling.multiset_statistics``), from a profile of the 10^5 run.

Run: ``python benchmarks/bench_tcal.py`` (writes ``benchmarks/results/bench_tcal.txt``);
``--quick`` skips 10^6.
"""
from __future__ import annotations

import cProfile
import os
import platform
import pstats
import sys
import time
from pathlib import Path

import numpy as np

import calibtest as ct

OUT = Path(__file__).resolve().parent / "results" / "bench_tcal.txt"


def binary(n: int, seed: int = 0):
    g = np.random.default_rng(seed)
    p = g.beta(2, 5, n)
    return {"y": (g.random(n) < p).astype(np.int8), "probs": p}


def timed(kwargs, repeat: int) -> tuple[float, float, object]:
    """(best CPU seconds, best wall seconds, the result) over ``repeat`` calls."""
    cpu, wall, res = [], [], None
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        res = ct.tcal_test(**kwargs, rng=1, progress=False)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return min(cpu), min(wall), res


def profile_shares(n: int) -> list[str]:
    """Seconds and share of the total in the functions that dominate one call at ``n`` rows."""
    prof = cProfile.Profile()
    prof.runcall(ct.tcal_test, **binary(n), rng=1, progress=False)
    st = pstats.Stats(prof)
    total = st.total_tt
    wanted = {"_draw_pairs": "label draws (alias tables, buffered)",
              "multiset_statistics": "statistic of each resample (gathers + bincounts)",
              "_pair_tables": "alias tables and pair columns (once)",
              "_mc_decision": "threshold and p-value (once)"}
    lines = [f"profile at n = {n}: {total:.2f} s in all"]
    for (file, _, name), (_, _, _, cum, _) in st.stats.items():  # a loop over the profiled functions
        if name in wanted and "calibtest" in file:
            lines.append(f"  {name:22} {cum:8.2f} s  {100 * cum / total:5.1f}%  {wanted[name]}")
    return lines


def main(quick: bool = False) -> str:
    lines = [f"tcal_test benchmark (binary, p ~ Beta(2, 5), default n_bins and draws); numpy {np.__version__}, "
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}",
             f"{'n':>9} {'R':>6} {'CPU s':>8} {'wall s':>8}  p-value"]
    ct.tcal_test(**binary(1000), rng=1)  # imports and first-call costs out of the timings
    for n in (10**5,) if quick else (10**5, 10**6):  # a loop over the two sizes
        cpu, wall, res = timed(binary(n), 2 if n <= 10**5 else 1)
        lines.append(f"{n:>9} {res.n_draws:>6} {cpu:>8.2f} {wall:>8.2f}  {res.pvalue:.4f}")
        print(lines[-1], flush=True)
    lines += profile_shares(10**5)
    text = "\n".join(lines) + "\n"
    if not quick:
        OUT.write_text(text)
    return text


if __name__ == "__main__":
    print(main(quick="--quick" in sys.argv[1:]))
