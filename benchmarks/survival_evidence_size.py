"""Size of the rows of calibtest.checks.survival_calibration for a calibrated model (the table of docs/survival_evidence.md).

``python benchmarks/survival_evidence_size.py N R [G] [VALIDATION]`` simulates R data sets of n = N rows:
Weibull event times (shape 1.5) whose risk by t = 5 is r ~ U(0.05, 0.6) (the predictions are the truth),
independent uniform censoring on (0, 14) (about 30% censored before t), and prints the share of data
sets in which each row rejects at alpha = 0.05 (G risk groups, default 10; validation default "external"),
with the Monte Carlo standard error of a size of 0.05.  Seed 123.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from calibtest.checks.survival_calibration import SURVIVAL_ROWS, survival_evidence


def simulate(n: int, rng, horizon: float = 5.0, shape: float = 1.5):
    r = rng.uniform(0.05, 0.6, n)
    t = horizon * (rng.exponential(size=n) / -np.log1p(-r)) ** (1 / shape)
    c = rng.uniform(0, 14, n)
    return np.minimum(t, c), t <= c, r, horizon


def main(argv):
    n, reps = int(argv[0]), int(argv[1])
    groups = int(argv[2]) if len(argv) > 2 else 10
    validation = argv[3] if len(argv) > 3 else "external"
    rng = np.random.default_rng(123)
    start = time.perf_counter()
    rejects = np.zeros(len(SURVIVAL_ROWS))
    censored = 0.0
    for _ in range(reps):  # one data set per iteration: a simulation loop, not a hot path
        ev = survival_evidence(*simulate(n, rng), n_groups=groups, validation=validation)
        rejects += ev.rows().loc[list(SURVIVAL_ROWS), "reject"].to_numpy(bool)
        censored += ev.n_censored / n
    print(f"n = {n}, {reps} data sets, G = {groups}, {validation}, censored before t {censored / reps:.3f}; "
          f"Monte Carlo s.e. at 0.05: {np.sqrt(0.05 * 0.95 / reps):.4f}; {time.perf_counter() - start:.0f} s")
    for key, share in zip(SURVIVAL_ROWS, rejects / reps):
        print(f"  {key:18s} {share:.4f}")


if __name__ == "__main__":
    main(sys.argv[1:])
