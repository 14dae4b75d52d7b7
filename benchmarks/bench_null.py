"""Benchmark of the finite-sample nulls (issue 8).

Targets:
* the exact conditional moments (always computed by ``calib_ci``) add at most
  2x to a ``calib_ci`` call at n = 10^6 (top-1 and top-2 of K = 10);
* the conditional Monte Carlo test with R = 2000 label draws at n = 10,000
  runs in under 1 second.

Run: ``python benchmarks/bench_null.py``.  Timings are the best of several
runs (wall clock); the machine's load is printed with them.
"""
from __future__ import annotations

import os
import time

import numpy as np

import calibtest as ct
from calibtest.core.conditional import conditional_bin_sums, conditional_moments, label_classes, monte_carlo_test


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def dirichlet_data(n: int, K: int, seed: int):
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(K), n)
    labels = (rng.random(n)[:, None] >= np.cumsum(P, axis=1)).sum(axis=1).clip(max=K - 1)
    return labels, P


def _moments_share(call, repeat: int) -> tuple[float, float]:
    """(the call's time, the time of its conditional moments alone): the bin sums of the conditional law and
    the moments from them, recomputed on the call's own rows and bins."""
    full = best_of(call, repeat)
    res = call()
    part = res.partition
    moments = best_of(lambda: conditional_moments(conditional_bin_sums(res.data.z, part.inverse, part.m), res.n),
                      repeat)
    return full, moments


def bench_moments(n: int = 10**6, repeat: int = 3) -> list[tuple]:
    rows = []
    labels, P = dirichlet_data(n, 10, 0)
    for k in (1, 2):
        full, moments = _moments_share(lambda: ct.calib_ci(y=labels, probs=P, k=k), repeat)
        rows.append((f"calib_ci top-{k} of K=10, n={n:,}", full - moments, full, full / (full - moments)))
    rng = np.random.default_rng(3)  # a single confidence column: the cheapest baseline
    conf = 0.1 + 0.9 * rng.random(n)
    correct = (rng.random(n) < conf).astype(int)
    full, moments = _moments_share(lambda: ct.calib_ci(y=correct, probs=conf, n_classes=10), repeat)
    rows.append((f"calib_ci top-1 column, n={n:,}", full - moments, full, full / (full - moments)))
    return rows


def bench_monte_carlo(n: int = 10_000, R: int = 2000, repeat: int = 5) -> list[tuple]:
    rows = []
    rng = np.random.default_rng(1)
    p = rng.random(n)
    y = (rng.random(n) < p).astype(int)
    labels, P = dirichlet_data(n, 10, 2)
    cases = [("binary", dict(y=y, probs=p)), ("top-1 of K=10", dict(y=labels, probs=P, k=1)),
             ("top-2 of K=10", dict(y=labels, probs=P, k=2))]
    for name, kw in cases:
        res = ct.calib_ci(**kw)
        data = res.data
        inverse = res.partition.inverse
        obs = label_classes(data)
        mc = best_of(lambda: monte_carlo_test(data.z, inverse, obs, n_draws=R, rng=0), repeat)
        whole = best_of(lambda: ct.calib_ci(**kw, null="monte-carlo", rng=0, n_null_draws=R), repeat)
        rows.append((f"{name}, n={n:,}, B={res.n_bins}", mc, whole))
    return rows


def main() -> None:
    print(f"calibtest {ct.__version__}; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print("\nConditional moments inside calib_ci (target: ratio <= 2; 'without' is the call less the moments\n"
          "recomputed alone on its rows and bins)")
    print(f"{'case':40s} {'without [s]':>12s} {'with [s]':>10s} {'ratio':>7s}")
    for name, base, full, ratio in bench_moments():
        print(f"{name:40s} {base:12.3f} {full:10.3f} {ratio:7.2f}")
    print("\nMonte Carlo null, R = 2000 draws (target: < 1 s)")
    print(f"{'case':40s} {'MC test [s]':>12s} {'calib_ci [s]':>13s}")
    for name, mc, whole in bench_monte_carlo():
        print(f"{name:40s} {mc:12.3f} {whole:13.3f}")


if __name__ == "__main__":
    main()
