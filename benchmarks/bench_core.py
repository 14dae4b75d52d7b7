"""Speed of the core engine (issue 2 targets).

* one ``calib_ci`` on n = 1,000,000 top-1 rows: at most 5x one
  ``np.bincount(np.floor(z*B).astype(int), weights=u)`` pass over the same data;
* top-1-to-2 of K = 10 at n = 1,000,000: under one second.

Run: ``python benchmarks/bench_core.py``.  Prints median wall times of repeated runs.
"""
from __future__ import annotations

import os
import time

import numpy as np

import calibtest as ct


def median_time(fn, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> None:
    print(f"bench_core: {os.cpu_count()} CPUs, load average (1 min) {os.getloadavg()[0]:.2f}")
    rng = np.random.default_rng(0)
    n, B = 1_000_000, 50
    conf = rng.uniform(0.1, 1.0, size=n)
    correct = (rng.uniform(size=n) < conf**1.2).astype(np.int8)
    u = correct - conf
    floor = median_time(lambda: np.bincount(np.floor(conf * B).astype(int), weights=u))
    top1 = median_time(lambda: ct.calib_ci(y=correct, probs=conf, n_classes=10, n_bins=B))
    print(f"bincount pass, n=1e6:            {floor * 1e3:8.1f} ms")
    print(f"calib_ci top-1, n=1e6, B=50:      {top1 * 1e3:8.1f} ms  ({top1 / floor:.1f}x the bincount pass;"
          f" target <= 5x)")

    P = rng.dirichlet(np.ones(10), size=n)
    cdf = P.cumsum(axis=1)
    labels = (rng.uniform(size=(n, 1)) > cdf).sum(axis=1).clip(max=9)
    top2 = median_time(lambda: ct.calib_ci(y=labels, probs=P, k=2, n_bins=20), repeat=3)
    print(f"calib_ci top-2 of K=10, n=1e6:    {top2 * 1e3:8.1f} ms  (target < 1000 ms)")


if __name__ == "__main__":
    main()
