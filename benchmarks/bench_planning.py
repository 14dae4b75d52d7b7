"""Time of the analytic calib_sample_size (the target is under 0.1 s).

Run: ``python benchmarks/bench_planning.py``; prints the median of 5 runs for
power 0.8 under slope 0.8 (Beta(2, 5) predictions, m = 5000), and for the
margin test (margin 0.05, calibrated model).
"""
from __future__ import annotations

import statistics
import time

import numpy as np

import calibtest as ct


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
    cases = {"power 0.8, slope 0.8": lambda: ct.calib_sample_size(probs=p, slope=0.8, power=0.8),
             "margin 0.05, power 0.8": lambda: ct.calib_sample_size(probs=p, margin=0.05, power=0.8)}
    for name, fn in cases.items():
        print(f"calib_sample_size ({name}): n = {fn().n}, median {median_time(fn):.3f} s")


if __name__ == "__main__":
    main()
