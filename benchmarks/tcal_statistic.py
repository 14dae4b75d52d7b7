"""T-Cal's statistic (divisor c_b) against the debiased one (c_b - 1): power, size and timing.

Real CIFAR-10 top-1 confidences (``../shared/data/tcal/cifar10_resnet50.csv``,
n = 10,000) with labels redrawn: under the alternative Y ~ Bernoulli(max(p - 0.02, 0))
(over-confident by 2 points), under H0 Y ~ Bernoulli(p).  Each data set is
tested with both statistics on the same bins (B = 50, sparse at the low
confidences) with the same seed, i.e. the same resampled data sets (common
random numbers).  Rejection rates carry the Monte Carlo standard error
sqrt(r (1 - r) / N); the paired difference its s.e. from the discordant pairs.

Usage: PYTHONPATH=. python benchmarks/tcal_statistic.py [n_datasets] [n_draws]
Output: benchmarks/tcal_statistic.txt (committed).
"""
from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import calibtest as ct

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "tcal" / "cifar10_resnet50.csv"


def rates(reject: np.ndarray) -> str:
    N = reject.shape[0]
    out = []
    for j, name in enumerate(("tcal", "debiased")):
        r = reject[:, j].mean()
        out.append(f"{name}: {100 * r:.1f}% (s.e. {100 * math.sqrt(r * (1 - r) / N):.1f})")
    d = reject[:, 0].astype(int) - reject[:, 1].astype(int)
    se = math.sqrt(max(np.mean(d ** 2) - np.mean(d) ** 2, 0.0) / N)
    out.append(f"difference tcal - debiased: {100 * d.mean():+.1f} points (paired s.e. {100 * se:.1f}; "
               f"discordant: {int((d > 0).sum())} tcal only, {int((d < 0).sum())} debiased only)")
    return "\n  ".join(out)


def main(n_datasets: int = 200, n_draws: int = 1000, B: int = 50, alpha: float = 0.05) -> str:
    if not DATA.exists():
        return f"{DATA} not available"
    p = pd.read_csv(DATA).confidence.to_numpy()
    n = len(p)
    lines = [f"T-Cal statistic comparison on {DATA.name}: n = {n}, B = {B}, alpha = {alpha}, "
             f"{n_draws} draws per test, {n_datasets} data sets per row; {os.cpu_count()} CPUs, load average "
             f"(1 min) {os.getloadavg()[0]:.2f} at the start",
             f"bins of the data: {int((np.bincount(np.floor(B * p).astype(int)) > 0).sum())} non-empty of {B}"]
    t0 = time.perf_counter()
    for label, shift in (("power, labels at p - 0.02", 0.02), ("size, labels at p (calibrated)", 0.0)):
        reject = np.zeros((n_datasets, 2), dtype=bool)
        for i in range(n_datasets):  # loop over the simulated data sets
            gen = np.random.default_rng([2024, int(shift * 100), i])
            y = (gen.random(n) < np.maximum(p - shift, 0.0)).astype(int)
            seed = int(gen.integers(2**62))
            for j, statistic in enumerate(("tcal", "debiased")):
                reject[i, j] = ct.tcal_test(y=y, probs=p, n_bins=B, alpha=alpha, n_draws=n_draws, rng=seed,
                                            statistic=statistic).reject
        lines.append(f"{label}:\n  " + rates(reject))
    lines.append(f"wall time of the comparison: {time.perf_counter() - t0:.0f} s")
    # timing of the new defaults
    gen = np.random.default_rng(1)
    y = (gen.random(n) < p).astype(int)
    for kw, text in ((dict(), "tcal_test defaults (B=auto, n_draws=None -> 3000)"),
                     (dict(n_draws=1000), "tcal_test B=auto, n_draws=1000 (bench_full target < 2 s)"),
                     (dict(adaptive=True), "adaptive, alpha=0.05 (23 scales, n_draws=None -> 3000)"),
                     (dict(adaptive=True, alpha=0.01), "adaptive, alpha=0.01 (23 scales, n_draws=None -> 4599)")):
        t = time.perf_counter()
        res = ct.tcal_test(y=y, probs=p, rng=1, **kw)
        lines.append(f"timing: {text}: {time.perf_counter() - t:.2f} s (R = {res.n_draws}, "
                     f"{len(res.scales)} scale(s), finite thresholds: {all(map(math.isfinite, res.thresholds))})")
    lines.append(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    text = main(*args)
    print(text)
    (Path(__file__).with_suffix(".txt")).write_text(text + "\n")
