"""Spiegelhalter's z as a component of ``calib_test``: size and power, with and without it.

Run: ``PYTHONPATH=. nice -n 10 python vignettes/spiegelhalter_component.py [--part size|power|md]
[--size-reps N] [--power-reps N] [--draws R]`` (writes ``vignettes/spiegelhalter_component_{size,power}.csv``;
a cell already in its CSV is not recomputed, so a cut-off run resumes; ``--part md`` prints the
tables of ``spiegelhalter_component.md``).

Each data set is tested twice with the same seed and R label draws: by the default of
``calib_test`` on binary and top-1 targets (``spiegelhalter=None``: the max of the binned scales'
z_B and of |z_S|, Spiegelhalter's z) and by ``spiegelhalter=False`` (the binned scales alone), so the
two rejection indicators are paired and their difference has a small Monte Carlo s.e.
(sd of the per-data-set differences / sqrt(N)).

Designs: the calibrated 1-dim designs of ``calib_test_study.py`` (binary q ~ Beta(2, 5), rare events
Beta(0.5, 10), balanced Beta(2, 2), top-1 of K = 10 with confidences Beta(20, 1)) at n = 100, 500,
2000 for the size, and its seven alternatives (binary q ~ Beta(2, 5) reported, labels from
p = f(q)) at n = 200 and 500 for the power, plus the intercept and slope alternatives on rare-event
predictions q ~ Beta(0.5, 10) (``rare: ...``).  Monte Carlo s.e. of a rate r over N data sets:
sqrt(r (1 - r) / N).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import zlib

import numpy as np

import calibtest as ct

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import calib_test_study as base  # noqa: E402  (the designs and alternatives of the calib_test study)

ALPHA = 0.05
SIZE_DESIGNS = {k: v for k, v in base.SIZE_DESIGNS.items() if "top-2" not in k}  # z_S: 1-dim targets only
SIZE_NS = (100, 500, 2000)
POWER_NS = (200, 500)
RARE = {"rare: " + k: v for k, v in base.ALTERNATIVES.items()
        if k in ("intercept +0.3", "intercept -0.3", "slope 0.7", "slope 1.4")}


def rare_data(g, n, f):
    q = np.clip(g.beta(0.5, 10, n), 1e-6, 1 - 1e-6)
    p = np.clip(f(q), 0.0, 1.0)
    return {"y": (g.random(n) < p).astype(int), "probs": q}


def one(kw, draws, seed) -> tuple[float, float, float]:
    """(p-value of the default, of spiegelhalter=False, Spiegelhalter's own MC p-value), same seed."""
    new = ct.calib_test(**kw, n_draws=draws, rng=seed)
    old = ct.calib_test(**kw, n_draws=draws, rng=seed, spiegelhalter=False)
    return new.pvalue, old.pvalue, new.pvalue_spiegelhalter


def run(path, cells, reps, draws):
    done = base._done(path)
    for name, n, make in cells:
        if (name, n) in done:
            continue
        g = np.random.default_rng([zlib.crc32(name.encode()), n, 15])
        t0 = time.perf_counter()
        p = np.empty((reps, 3))
        for r in range(reps):  # one data set per iteration; each call is vectorised over rows and draws
            p[r] = one(make(g, n), draws, int(g.integers(2**31)))
        rej = p <= ALPHA
        d = rej[:, 0].astype(float) - rej[:, 1]
        row = {"design": name, "n": n, "reps": reps, "draws": draws,
               "with_spiegelhalter": float(rej[:, 0].mean()), "scales_only": float(rej[:, 1].mean()),
               "spiegelhalter_alone": float(rej[:, 2].mean()),
               "difference": float(d.mean()), "diff_se": float(d.std(ddof=1) / np.sqrt(reps)),
               "seconds": round(time.perf_counter() - t0, 1)}
        base._append(path, row)
        print(row, flush=True)


def size_cells(ns=SIZE_NS):
    return [(name, n, make) for name, make in SIZE_DESIGNS.items() for n in ns]


def power_cells(ns=POWER_NS):
    cells = [(name, n, (lambda f: lambda g, n: base.power_data(g, n, f))(f))
             for name, f in base.ALTERNATIVES.items() if name != "calibrated Beta(2,5)" for n in ns]
    # the logit-linear alternatives on rare-event predictions q ~ Beta(0.5, 10) (as equal_mass_scales.py)
    return cells + [(name, n, (lambda f: lambda g, n: rare_data(g, n, f))(f)) for name, f in RARE.items()
                    for n in ns]


def tables(prefix) -> str:
    import pandas as pd
    out = []
    for part, label in (("size", "Size (calibrated designs, nominal 0.05)"),
                        ("power", "Power (binary, q ~ Beta(2, 5) reported -- Beta(0.5, 10) for rare: -- labels from p = f(q))")):
        path = f"{prefix}_{part}.csv"
        if not os.path.exists(path):
            continue
        df = pd.read_csv(path)
        out.append(f"### {label}\n")
        out.append("| design | n | data sets | R | default (with z_S) | scales only | z_S alone (MC) "
                   "| default - scales only (s.e.) |")
        out.append("|---|---|---|---|---|---|---|---|")
        for _, r in df.iterrows():
            N = int(r["reps"])
            cells = [f"{r[c]:.3f} ({np.sqrt(r[c] * (1 - r[c]) / N):.3f})"
                     for c in ("with_spiegelhalter", "scales_only", "spiegelhalter_alone")]
            out.append(f"| {r['design']} | {int(r['n'])} | {N} | {int(r['draws'])} | " + " | ".join(cells)
                       + f" | {r['difference']:+.3f} ({r['diff_se']:.3f}) |")
        out.append("")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="all", choices=["all", "size", "power", "md"])
    ap.add_argument("--size-reps", type=int, default=500)
    ap.add_argument("--power-reps", type=int, default=300)
    ap.add_argument("--draws", type=int, default=299)
    ap.add_argument("--n", type=int, nargs="*", default=None)
    ap.add_argument("--prefix", default=os.path.join(HERE, "spiegelhalter_component"))
    a = ap.parse_args(argv)
    if a.part in ("all", "power"):
        run(f"{a.prefix}_power.csv", power_cells(a.n or POWER_NS), a.power_reps, a.draws)
    if a.part in ("all", "size"):
        run(f"{a.prefix}_size.csv", size_cells(a.n or SIZE_NS), a.size_reps, a.draws)
    print(tables(a.prefix))


if __name__ == "__main__":
    main()
