"""Time of the analytic calib_sample_size (the target is under 0.1 s) and of one simulation plan.

Run: ``python benchmarks/bench_planning.py`` (writes ``benchmarks/results/bench_planning.txt``); prints the
median of 5 runs for power 0.8 under slope 0.8 (Beta(2, 5) predictions, m = 5000) and for the margin test
(margin 0.05, calibrated model), then the wall and CPU time of one ``method="simulation"`` plan for the same
power (``n_sim`` studies per evaluation of the bisection), with the machine's load average.
"""
from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import numpy as np

import calibtest as ct

OUT = Path(__file__).resolve().parent / "results" / "bench_planning.txt"


def median_time(fn, repeat: int = 5) -> float:
    fn()  # warm-up (imports, caches of scipy)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    p = np.random.default_rng(0).beta(2, 5, 5000)
    lines = [f"bench_planning: {os.cpu_count()} CPUs, load average (1 min) {os.getloadavg()[0]:.2f} at the start"]
    cases = {"power 0.8, slope 0.8": lambda: ct.calib_sample_size(probs=p, slope=0.8, power=0.8),
             "margin 0.05, power 0.8": lambda: ct.calib_sample_size(probs=p, margin=0.05, power=0.8)}
    for name, fn in cases.items():
        lines.append(f"calib_sample_size ({name}): n = {fn().n}, median {median_time(fn):.3f} s")
        print(lines[-1], flush=True)
    n_sim = 1000
    w0, c0 = time.perf_counter(), time.process_time()
    res = ct.calib_sample_size(probs=p, slope=0.8, power=0.8, method="simulation", n_sim=n_sim, rng=1)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    lines.append(f"calib_sample_size (power 0.8, slope 0.8, method='simulation', n_sim = {n_sim}): n = {res.n}, "
                 f"one run: wall {wall:.1f} s, CPU {cpu:.1f} s")
    lines.append(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f}")
    text = "\n".join(lines) + "\n"
    OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
