"""Speed of full calibration and of the T-Cal test (issue 3 targets).

* ``calib_ci(..., k="full")`` with K = 10, B = 10 (10^9 possible cells, only the
  non-empty ones are stored), n = 1,000,000: target under 3 seconds;
* one ``tcal_test`` with 1000 consistency-resampling draws at n = 10,000:
  target under 2 seconds (binary mode, the paper's Setting 1; also full
  calibration with K = 2, 3 and 10 for reference).

Run: ``python benchmarks/bench_full.py``.  Prints the median wall time and the
median CPU time (``time.process_time``) of repeated runs; on a shared machine
the CPU time is the steadier figure.
"""
from __future__ import annotations

import os
import time

import numpy as np
from scipy import special

import calibtest as ct


def timed(fn, repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``repeat`` calls."""
    wall, cpu = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return float(np.median(wall)), float(np.median(cpu))


def draw_labels(rng, Q):
    return np.minimum((rng.random(Q.shape[0])[:, None] >= np.cumsum(Q, axis=1)).sum(axis=1), Q.shape[1] - 1)


def report(name: str, wall: float, cpu: float, target: float | None = None) -> None:
    tail = f"  (target < {target:g} s)" if target else ""
    print(f"{name:58s} wall {wall:6.3f} s   cpu {cpu:6.3f} s{tail}")


def main() -> None:
    print(f"bench_full: {os.cpu_count()} CPUs, load average (1 min) {os.getloadavg()[0]:.2f}")
    rng = np.random.default_rng(0)

    n = 1_000_000
    P = rng.dirichlet(np.ones(10), size=n)
    labels = draw_labels(rng, P)
    res = ct.calib_ci(y=labels, probs=P, k="full", n_bins=10)
    report(f"calib_ci full, K=10, B=10, n=1e6 ({res.n_occupied_bins} cells)",
           *timed(lambda: ct.calib_ci(y=labels, probs=P, k="full", n_bins=10), 5), target=3)

    n = 10_000
    z1 = rng.random(n)
    y1 = (rng.random(n) < special.expit(0.8 * special.logit(z1))).astype(int)
    report("tcal_test binary, n=1e4, B=auto, 1000 draws",
           *timed(lambda: ct.tcal_test(y=y1, probs=z1, n_draws=1000, rng=1), 5), target=2)
    P2 = np.column_stack([z1, 1 - z1])
    report("tcal_test full K=2, n=1e4, B=auto, 1000 draws",
           *timed(lambda: ct.tcal_test(y=1 - y1, probs=P2, k="full", n_draws=1000, rng=1), 5), target=2)
    P3 = rng.dirichlet(np.ones(3), size=n)
    l3 = draw_labels(rng, P3)
    report("tcal_test full K=3, n=1e4, B=auto, 1000 draws",
           *timed(lambda: ct.tcal_test(y=l3, probs=P3, k="full", n_draws=1000, rng=1), 3))
    P10 = rng.dirichlet(np.ones(10), size=n)
    l10 = draw_labels(rng, P10)
    report("tcal_test full K=10, n=1e4, B=auto, 1000 draws",
           *timed(lambda: ct.tcal_test(y=l10, probs=P10, k="full", n_draws=1000, rng=1), 3))
    report("tcal_test binary adaptive, n=1e4 (23 scales), 1000 draws",
           *timed(lambda: ct.tcal_test(y=y1, probs=z1, adaptive=True, n_draws=1000, rng=1), 1))


if __name__ == "__main__":
    main()
