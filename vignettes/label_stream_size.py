"""Size of ``calib_test`` with the eight-draws-per-word label stream, on designs that stress the stream.

Run: ``PYTHONPATH=. nice -n 10 python vignettes/label_stream_size.py`` (writes
``vignettes/label_stream_size.csv``; ``--from-csv`` prints the table of ``label_stream_size.md``).

The label draws of the multi-scale test come from one PCG64DXSM stream per block of eight draws
(``calibtest.core.counter_draws``): a row's eight bytes for eight consecutive draws are one 64-bit
word, and y = 1 iff byte + v < 256 p, v a hashed uniform used only on the tie byte = floor(256 p).
Labels drawn this way are Bernoulli(p) to 2^-53, so the test's size is exact for every R.  This
study checks it where a mistake in the stream would show: predictions on the byte grid
(p = k/256: the tie never turns a label to 1), just above it (p = k/256 + 1e-9: the tie decides
with probability 1e-9 * 256), predictions at 0 and 1, rare events, confidences near 1 and a
balanced binary design, at n = 200, 2,000 and 20,000.

Each cell: 1,000 calibrated data sets (labels drawn from the predictions with
``numpy.random.default_rng([20261125, cell, rep])``), ``calib_test`` with its defaults (adaptive
equal-width scales, Spiegelhalter's z in the max) and R = 199 draws (exact size floor(0.05 * 200) /
200 = 0.05), seed ``rng=rep``; the rejection rate at alpha = 0.05 has Monte Carlo s.e.
sqrt(0.05 * 0.95 / 1000) = 0.0069.  Also recorded: the rate at alpha = 0.10 and the mean p-value
(exact: E[p] = (R + 2) / (2 (R + 1)) = 0.5025 for a continuous statistic; ties push it up).
"""
from __future__ import annotations

import argparse
import csv
import os
import time

import numpy as np

import calibtest as ct

HERE = os.path.dirname(os.path.abspath(__file__))
CSV = os.path.join(HERE, "label_stream_size.csv")
SEED = 20261125
REPS = 1000
R = 199
SIZES = (200, 2000, 20000)
DESIGNS = ("byte grid k/256 with 0 and 1", "just above the byte grid", "rare events Beta(0.5, 10)",
           "top-1 near 1, Beta(20, 1), K = 10", "balanced Beta(2, 2)")


def predictions(design: str, n: int, g: np.random.Generator) -> dict:
    """The keyword arguments of ``calib_test`` for one calibrated data set of a design."""
    if design == "byte grid k/256 with 0 and 1":
        p = g.integers(0, 257, n) / 256.0  # 0 and 1 included
    elif design == "just above the byte grid":
        p = np.minimum(g.integers(1, 255, n) / 256.0 + 1e-9, 1.0)
    elif design == "rare events Beta(0.5, 10)":
        p = g.beta(0.5, 10.0, n)
    elif design == "top-1 near 1, Beta(20, 1), K = 10":
        conf = 0.1 + 0.9 * g.beta(20.0, 1.0, n)
        return {"y": (g.random(n) < conf).astype(int), "probs": conf, "n_classes": 10}
    else:
        p = g.beta(2.0, 2.0, n)
    return {"y": (g.random(n) < p).astype(int), "probs": p}


def run(reps: int) -> list[dict]:
    rows = []
    for cell, (design, n) in enumerate((d, n) for d in DESIGNS for n in SIZES):  # a loop over the cells
        t0 = time.perf_counter()
        pvals = np.empty(reps)
        for rep in range(reps):  # a loop over the data sets of a Monte Carlo study
            kw = predictions(design, n, np.random.default_rng([SEED, cell, rep]))
            pvals[rep] = ct.calib_test(**kw, n_draws=R, rng=rep).pvalue
        r05, r10 = float(np.mean(pvals <= 0.05)), float(np.mean(pvals <= 0.10))
        rows.append({"design": design, "n": n, "data_sets": reps, "draws": R,
                     "reject_05": r05, "se_05": float(np.sqrt(r05 * (1 - r05) / reps)),
                     "reject_10": r10, "se_10": float(np.sqrt(r10 * (1 - r10) / reps)),
                     "mean_pvalue": float(pvals.mean()), "seconds": round(time.perf_counter() - t0, 1)})
        print(rows[-1], flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| design | n | data sets | reject at 0.05 (s.e.) | reject at 0.10 (s.e.) | mean p-value |",
             "|---|---|---|---|---|---|"]
    for r in rows:  # a loop over the cells of the table
        lines.append(f"| {r['design']} | {int(r['n']):,} | {int(r['data_sets'])} | "
                     f"{float(r['reject_05']):.3f} ({float(r['se_05']):.3f}) | "
                     f"{float(r['reject_10']):.3f} ({float(r['se_10']):.3f}) | {float(r['mean_pvalue']):.3f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=REPS)
    ap.add_argument("--from-csv", action="store_true")
    args = ap.parse_args()
    if args.from_csv:
        with open(CSV, newline="") as fh:
            print(table(list(csv.DictReader(fh))))
        return
    rows = run(args.reps)
    with open(CSV, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(table(rows))


if __name__ == "__main__":
    main()
