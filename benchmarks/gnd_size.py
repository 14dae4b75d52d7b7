"""Size of the Greenwood-Nam-D'Agostino row at a calibrated model, by censoring and ties (docs/survival.md).

``python benchmarks/gnd_size.py R`` simulates R data sets per design: Weibull event times (shape 1.5) whose
risk by t = 5 is r ~ U(0.05, 0.6) (the predictions are the truth), independent uniform censoring on
(0, u), and for the ``ties`` designs the times rounded up to whole months (t = 5 years = 60 months).  It
prints, per design, the mean share of rows censored before t, the share of data sets in which the GND test
(10 groups, df = G, external validation) rejects at alpha = 0.05 with its Monte Carlo standard error, and
the share in which the row is marked unreliable (``SurvivalEvidence.gnd_unreliable``).  Seed 123.
"""
from __future__ import annotations

import math
import sys
import time

import numpy as np

from calibtest.checks.survival_calibration import survival_evidence

#: (label, n, u of the uniform censoring on (0, u), monthly ties)
DESIGNS = (("n = 300, heavy censoring", 300, 5.8, False),
           ("n = 3000, heavy censoring", 3000, 5.8, False),
           ("n = 3000, 30% censoring, monthly ties", 3000, 14.0, True),
           ("n = 3000, 30% censoring", 3000, 14.0, False),
           ("n = 300, light censoring", 300, 60.0, False),
           ("n = 3000, light censoring", 3000, 60.0, False),
           ("n = 3000, very light censoring", 3000, 200.0, False),
           ("n = 3000, no censoring", 3000, math.inf, False))


def simulate(n: int, u: float, ties: bool, rng, horizon: float = 5.0, shape: float = 1.5):
    r = rng.uniform(0.05, 0.6, n)
    t = horizon * (rng.exponential(size=n) / -np.log1p(-r)) ** (1 / shape)
    c = rng.uniform(0, u, n) if math.isfinite(u) else np.full(n, np.inf)
    time_, event = np.minimum(t, c), t <= c
    if ties:  # months, rounded up: the horizon 5 years is month 60
        return np.ceil(time_ * 12), event, r, horizon * 12
    return time_, event, r, horizon


def main(argv):
    reps = int(argv[0])
    for label, n, u, ties in DESIGNS:
        rng = np.random.default_rng(123)
        start = time.perf_counter()
        reject = flagged = reject_flagged = 0
        censored = 0.0
        for _ in range(reps):  # one data set per iteration: a simulation loop, not a hot path
            ev = survival_evidence(*simulate(n, u, ties, rng))
            rej = ev.gnd_pvalue <= 0.05
            reject += rej
            flagged += bool(ev.gnd_unreliable)
            reject_flagged += rej and not ev.gnd_unreliable
            censored += ev.n_censored / n
        size = reject / reps
        print(f"{label}: censored before t {censored / reps:.3f}; GND size {size:.4f} "
              f"(s.e. {np.sqrt(size * (1 - size) / reps):.4f}); marked unreliable {flagged / reps:.4f}; "
              f"rejects and not marked {reject_flagged / reps:.4f}; {reps} data sets, "
              f"{time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
