"""Pointwise coverage of the flexible calibration curve's 95% band (calibtest.flexible_calibration).

Run: PYTHONPATH=. python vignettes/flexible_band.py [--reps 1000] [--csv vignettes/flexible_band.csv]
     PYTHONPATH=. python vignettes/flexible_band.py --table     (the markdown table of the CSV)
Each design draws L = logit(p) from a normal law, y ~ Bernoulli(c(p)) with a known true calibration
curve c, fits the restricted cubic spline recalibration (4 knots at Harrell's default quantiles)
and records whether the pointwise band covers c at p = the 10%, 50% and 90% quantiles of the
predictions (and at the 2% quantile, in the sparse tail).  Results are appended to the CSV one
design at a time (a cut-off run resumes at the first missing design).  Monte Carlo s.e. of a
coverage r over N data sets: sqrt(r (1 - r) / N).
"""
from __future__ import annotations

import argparse
import time
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import expit

from calibtest.checks.flexible_calibration import flexible_calibration

# name: (mean of L, sd of L, true linear predictor as a function of L, in the spline space?)
DESIGNS = {
    "calibrated": (-0.5, 1.2, lambda L: L, "yes"),
    "slope 0.7, intercept +0.3": (-0.5, 1.2, lambda L: 0.3 + 0.7 * L, "yes"),
    "curved: 0.3 + 0.75 L + 0.06 L^2": (-0.5, 1.2, lambda L: 0.3 + 0.75 * L + 0.06 * L**2, "no"),
    "bump: L + 0.6 exp(-(L + 0.5)^2 / 0.1)": (-0.5, 1.2, lambda L: L + 0.6 * np.exp(-(L + 0.5) ** 2 / 0.1), "no"),
    "rare events (2%): -0.2 + 0.9 L": (-4.3, 0.8, lambda L: -0.2 + 0.9 * L, "yes"),
}
SIZES = (200, 1000, 5000)
QUANTILES = (0.02, 0.10, 0.50, 0.90)


def run_design(name: str, n: int, reps: int) -> dict:
    mu, sd, eta, in_space = DESIGNS[name]
    rng = np.random.default_rng(zlib.crc32(f"{name}|{n}".encode()))
    # evaluation points: quantiles of the prediction law (L normal), the same in every replicate
    Lq = mu + sd * stats.norm.ppf(QUANTILES)
    grid = expit(Lq)
    truth = expit(eta(Lq))
    hits = np.zeros(len(QUANTILES))
    width = np.zeros(len(QUANTILES))
    failed = 0
    for _ in range(reps):
        L = rng.normal(mu, sd, n)
        y = (rng.random(n) < expit(eta(L))).astype(float)
        try:
            fc = flexible_calibration(expit(L), y, grid=grid)
        except ValueError:  # separation in a tiny rare-event sample: no estimate
            failed += 1
            continue
        hits += (fc.lower <= truth) & (truth <= fc.upper)
        width += fc.upper - fc.lower
    done = reps - failed
    row = {"design": name, "n": n, "reps": reps, "fits": done, "in_spline_space": in_space}
    for q, h, w in zip(QUANTILES, hits, width):
        row[f"coverage_q{int(100 * q):02d}"] = h / done
        row[f"width_q{int(100 * q):02d}"] = w / done
    return row


def table(path: Path) -> str:
    """The results as a markdown table: coverage (MC s.e.) and mean band width at each quantile."""
    df = pd.read_csv(path)
    head = ("| design | in spline space | n | fits / data sets | "
            + " | ".join(f"coverage at q{int(100 * q)} (s.e.)" for q in QUANTILES)
            + " | " + " | ".join(f"width at q{int(100 * q)}" for q in QUANTILES) + " |")
    lines = [head, "|" + "---|" * (4 + 2 * len(QUANTILES))]
    for _, r in df.iterrows():
        cells = []
        for q in QUANTILES:
            c = r[f"coverage_q{int(100 * q):02d}"]
            cells.append(f"{c:.3f} ({np.sqrt(c * (1 - c) / r['fits']):.3f})")
        cells += [f"{r[f'width_q{int(100 * q):02d}']:.3f}" for q in QUANTILES]
        lines.append(f"| {r['design']} | {r['in_spline_space']} | {r['n']} | {r['fits']} / {r['reps']} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--csv", default="vignettes/flexible_band.csv")
    ap.add_argument("--table", action="store_true", help="print the markdown table of the CSV and stop")
    args = ap.parse_args()
    path = Path(args.csv)
    if args.table:
        print(table(path))
        return
    done = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=["design", "n"])
    for name in DESIGNS:
        for n in SIZES:
            if ((done["design"] == name) & (done["n"] == n)).any():
                continue
            t0 = time.perf_counter()
            row = run_design(name, n, args.reps)
            pd.DataFrame([row]).to_csv(path, mode="a", header=not path.exists(), index=False)
            print(f"{name:40s} n={n:5d} {time.perf_counter() - t0:6.1f}s",
                  " ".join(f"{row[f'coverage_q{int(100 * q):02d}']:.3f}" for q in QUANTILES), flush=True)


if __name__ == "__main__":
    main()
