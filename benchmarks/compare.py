"""Timing of calib_compare (paired, binary and top-k) for growing n; prints its figures.

    python benchmarks/compare.py
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import calibtest as ct  # noqa: E402


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    print(f"compare: {os.cpu_count()} CPUs, load average (1 min) {os.getloadavg()[0]:.2f}")
    rng = np.random.default_rng(0)
    print(f"{'mode':>6} {'n':>9} {'calib_ci x2 (s)':>16} {'calib_compare (s)':>18}")
    for n in (10_000, 100_000, 1_000_000):
        q = rng.uniform(0.05, 0.95, n)
        y = (rng.random(n) < q).astype(float)
        pa, pb = np.clip(q + 0.03, 0, 1), q ** 1.1
        ra, rb = ct.calib_ci(y=y, probs=pa), ct.calib_ci(y=y, probs=pb)
        t_ci = best_of(lambda: (ct.calib_ci(y=y, probs=pa), ct.calib_ci(y=y, probs=pb)))
        t_cmp = best_of(lambda: ct.calib_compare(ra, rb))
        print(f"{'binary':>6} {n:>9} {t_ci:>16.3f} {t_cmp:>18.3f}")
    K, k = 10, 3
    for n in (10_000, 100_000):
        logits = rng.normal(size=(n, K)) * 2
        P = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        Q = np.exp(0.7 * logits) / np.exp(0.7 * logits).sum(1, keepdims=True)
        lab = (rng.random(n)[:, None] > np.cumsum(P, 1)).sum(1).clip(0, K - 1)
        ra, rb = ct.calib_ci(y=lab, probs=P, k=k), ct.calib_ci(y=lab, probs=Q, k=k)
        t_ci = best_of(lambda: (ct.calib_ci(y=lab, probs=P, k=k), ct.calib_ci(y=lab, probs=Q, k=k)))
        t_cmp = best_of(lambda: ct.calib_compare(ra, rb, paired=True))
        print(f"{'top3':>6} {n:>9} {t_ci:>16.3f} {t_cmp:>18.3f}")


if __name__ == "__main__":
    main()
