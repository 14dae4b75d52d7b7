"""Equal-width, equal-mass and both families of scales in ``calib_test``: size and power.

Run: ``PYTHONPATH=. nice -n 10 python vignettes/equal_mass_scales.py [--reps N] [--draws R] [--part size|power|md]``
(writes ``vignettes/equal_mass_scales_{size,power}.csv``; a cell already in its CSV is not
recomputed, so a cut-off run resumes; ``--part md`` prints the tables of ``equal_mass_scales.md``).

Each data set is tested once, by ``calib_test(..., partitions="both")`` with R label draws: the z*
of every scale of both families come from the *same* R draws, so the max-z p-values of the three
variants are read off the one result -- equal-width only (the max over the equal-width rows of
``scales`` / ``null_draws``), equal-mass only, and both -- each an exact conditional Monte Carlo test
(the observed labels and the R draws are exchangeable given the predictions whatever subset of
scales is maximised over).  The equal-width p-value has the law of
``calib_test(..., partitions="equal-width")`` (not its bits: that call draws labels only for the
rows its own partitions use).  Spiegelhalter's z (``val_prob``) is the reference.

Designs: the calibrated designs and the alternatives of ``calib_test_study.py`` (binary
predictions q ~ Beta(2, 5), truth p = f(q)), plus the slope/intercept alternatives on rare-event
predictions q ~ Beta(0.5, 10).  Monte Carlo s.e. of a rate r over N data sets: sqrt(r (1 - r) / N).
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
VARIANTS = ("equal-width", "equal-mass", "both")
SIZE_DESIGNS = {k: v for k, v in base.SIZE_DESIGNS.items() if "top-2" not in k}  # equal-mass: 1-dim only
SIZE_NS = (100, 500, 2000)
POWER_NS = (200, 500)
RARE = {"rare: " + k: v for k, v in base.ALTERNATIVES.items()
        if k in ("intercept +0.3", "intercept -0.3", "slope 0.7", "slope 1.4")}


def rare_data(g, n, f):
    q = np.clip(g.beta(0.5, 10, n), 1e-6, 1 - 1e-6)
    p = np.clip(f(q), 0.0, 1.0)
    return {"y": (g.random(n) < p).astype(int), "probs": q}


def _pvalue(obs, null):
    """(1 + #{null >= obs}) / (R + 1), with the tolerance of ``calib_test``."""
    tol = 100 * np.finfo(np.float64).eps * abs(obs)
    return (1.0 + np.count_nonzero(null >= obs - tol)) / (1.0 + null.size)


def variant_pvalues(res) -> dict:
    """Max-z p-values of equal-width only, equal-mass only and both, from one ``partitions="both"`` result."""
    fam = res.scales["partition"].to_numpy()
    z = res.scales["z"].to_numpy()
    out = {}
    for v in VARIANTS:
        rows = np.ones(fam.size, bool) if v == "both" else fam == v
        out[v] = _pvalue(z[rows].max(), res.null_draws[rows].max(axis=0))
    assert out["both"] == res.pvalue_max_z
    return out


def one(kw, draws, seed):
    res = ct.calib_test(**kw, n_draws=draws, rng=seed, partitions="both", spiegelhalter=False)
    p = variant_pvalues(res)
    try:
        p["spiegelhalter"] = float(ct.val_prob(y=kw["y"], probs=kw["probs"]).spiegelhalter_p)
    except ValueError as err:  # no event, or p separates y: val_prob refuses; counted as no rejection
        print(f"val_prob refused a data set: {str(err)[:60]}", flush=True)
        p["spiegelhalter"] = np.nan
    return p


def run(path, cells, reps, draws):
    done = base._done(path)
    for name, n, make in cells:
        if (name, n) in done:
            continue
        g = np.random.default_rng([zlib.crc32(name.encode()), n, 14])
        t0 = time.perf_counter()
        cols = VARIANTS + ("spiegelhalter",)
        p = np.empty((reps, len(cols)))
        for r in range(reps):  # one data set per iteration; each call is vectorised over rows and draws
            kw = make(g, n)
            res = one(kw, draws, int(g.integers(2**31)))
            p[r] = [res[c] for c in cols]
        rej = (p <= ALPHA).mean(axis=0)
        d = (p[:, 2] <= ALPHA).astype(float) - (p[:, 0] <= ALPHA)
        row = {"design": name, "n": n, "reps": reps, "draws": draws,
               **{c: float(x) for c, x in zip(cols, rej)},
               "both_minus_width": float(d.mean()), "diff_se": float(d.std(ddof=1) / np.sqrt(reps)),
               "seconds": round(time.perf_counter() - t0, 1)}
        base._append(path, row)
        print(row, flush=True)


def size_cells(designs=None, ns=SIZE_NS):
    return [(name, n, make) for name, make in SIZE_DESIGNS.items() for n in ns
            if designs is None or name in designs]


def power_cells(designs=None, ns=POWER_NS):
    cells = [(name, n, (lambda f: lambda g, n: base.power_data(g, n, f))(f))
             for name, f in base.ALTERNATIVES.items() if name != "calibrated Beta(2,5)" for n in ns]
    cells += [(name, n, (lambda f: lambda g, n: rare_data(g, n, f))(f)) for name, f in RARE.items() for n in ns]
    return [c for c in cells if designs is None or c[0] in designs]


def tables(prefix) -> str:
    import pandas as pd
    out = []
    for part, label in (("size", "Size (calibrated designs, nominal 0.05)"), ("power", "Power")):
        path = f"{prefix}_{part}.csv"
        if not os.path.exists(path):
            continue
        df = pd.read_csv(path)
        out.append(f"### {label}\n")
        out.append("| design | n | data sets | equal-width | equal-mass | both | Spiegelhalter "
                   "| both - equal-width (s.e.) |")
        out.append("|---|---|---|---|---|---|---|---|")
        for _, r in df.iterrows():
            N = int(r["reps"])
            cells = [f"{r[c]:.3f} ({np.sqrt(r[c] * (1 - r[c]) / N):.3f})"
                     for c in VARIANTS + ("spiegelhalter",)]
            out.append(f"| {r['design']} | {int(r['n'])} | {N} | " + " | ".join(cells)
                       + f" | {r['both_minus_width']:+.3f} ({r['diff_se']:.3f}) |")
        out.append("")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="all", choices=["all", "size", "power", "md"])
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--n", type=int, nargs="*", default=None)
    ap.add_argument("--designs", default=None, help="';'-separated design names (default: all)")
    ap.add_argument("--prefix", default=os.path.join(HERE, "equal_mass_scales"))
    a = ap.parse_args(argv)
    designs = None if a.designs is None else set(a.designs.split(";"))
    if a.part in ("all", "size"):
        run(f"{a.prefix}_size.csv", size_cells(designs, a.n or SIZE_NS), a.reps, a.draws)
    if a.part in ("all", "power"):
        run(f"{a.prefix}_power.csv", power_cells(designs, a.n or POWER_NS), a.reps, a.draws)
    print(tables(a.prefix))


if __name__ == "__main__":
    main()
