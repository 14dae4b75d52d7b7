"""The default number of label draws R of ``calib_test``: R = 999 against R = 1999 on the same data sets.

Run: ``PYTHONPATH=. nice -n 10 python vignettes/default_draws.py`` (writes
``vignettes/default_draws.csv``; about 4 minutes on one core).

Four designs, binary predictions q ~ Beta(2, 5): calibrated (n = 500), logistic recalibration
with slope 0.7 (n = 200) and with intercept +0.3 (n = 500), and p = q^1.5 (n = 200).  Each of
1000 data sets per design is tested by ``calib_test`` (adaptive grid, alpha = 0.05) with R = 999
and R = 1999 label draws and the same seed, so the two tests are paired; the difference of the
rejection rates has the Monte Carlo s.e. sd(d) / sqrt(1000) of the paired differences d.
"""
from __future__ import annotations

import csv
import os

import numpy as np

import calibtest as ct

HERE = os.path.dirname(os.path.abspath(__file__))
DESIGNS = (("calibrated", 500), ("slope 0.7", 200), ("intercept +0.3", 500), ("p = q^1.5", 200))
N_SETS = 1000
DRAWS = (999, 1999)


def truth(design: str, q: np.ndarray) -> np.ndarray:
    """P(y = 1 | q) of each design."""
    logit = np.log(q) - np.log1p(-q)
    if design == "slope 0.7":
        return 1.0 / (1.0 + np.exp(-0.7 * logit))
    if design == "intercept +0.3":
        return 1.0 / (1.0 + np.exp(-(logit + 0.3)))
    if design == "p = q^1.5":
        return q ** 1.5
    return q


def main() -> None:
    rows = []
    for d_index, (design, n) in enumerate(DESIGNS):  # a loop over the four designs
        reject = np.zeros((len(DRAWS), N_SETS), dtype=bool)
        for s in range(N_SETS):  # a loop over the data sets of a Monte Carlo study
            g = np.random.default_rng([7, d_index, s])
            q = g.beta(2.0, 5.0, n)
            y = (g.random(n) < truth(design, q)).astype(int)
            for j, R in enumerate(DRAWS):
                reject[j, s] = ct.calib_test(y=y, probs=q, n_draws=R, rng=s, spiegelhalter=False).reject
        diff = reject[0].astype(float) - reject[1]
        rows.append({"design": design, "n": n, "data_sets": N_SETS,
                     "reject_R999": reject[0].mean(), "reject_R1999": reject[1].mean(),
                     "difference": diff.mean(), "difference_se": diff.std(ddof=1) / np.sqrt(N_SETS)})
        print(rows[-1], flush=True)
    with open(os.path.join(HERE, "default_draws.csv"), "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
