"""Which null should ``calib_ci`` use by default?  Size and power of its test of H0: calibrated.

Run: ``PYTHONPATH=. nice -n 10 python vignettes/default_null.py [--reps 1000] [--reps-large 200]``
(writes ``vignettes/default_null_size.csv``, ``default_null_power.csv`` and ``default_null.md``;
a cell already in a CSV is not recomputed, so a cut-off run resumes where it stopped).

Every data set is calibrated by construction under H0: the labels are drawn from the
predictions.  One ``calib_ci(..., null="conditional")`` call per data set gives both p-values:
``res.asymptotic`` holds the paper's (z0 = n sqrt(w) T / sigma0 ~ N(0, 1)) and
``res.null_pvalue`` the conditional null's (shifted gamma, or the conditional Monte Carlo test
when the conditional skewness exceeds 3).  In the cells marked ``mc`` the call uses
``null="monte-carlo"`` instead, which records all three p-values (R = ``--draws`` label draws).

Monte Carlo s.e. of a rejection rate r over N data sets: sqrt(r (1 - r) / N).
"""
from __future__ import annotations

import argparse
import csv
import os
import time
import zlib

import numpy as np

import calibtest as ct

HERE = os.path.dirname(os.path.abspath(__file__))
ALPHAS = (0.05, 0.10)
NS = (100, 300, 1000, 10_000, 100_000)


def expit(x):
    return 1.0 / (1.0 + np.exp(-x))


def logit(p):
    return np.log(p) - np.log1p(-p)


def draw_class(g, P):
    """One label per row from the rows of the probability matrix P (inverse-cdf, vectorised)."""
    c = np.cumsum(P, axis=1)
    c[:, -1] = 1.0
    return (c < g.random((P.shape[0], 1))).sum(axis=1)


def softmax(a):
    a = a - a.max(axis=1, keepdims=True)
    e = np.exp(a)
    return e / e.sum(axis=1, keepdims=True)


# ----------------------------------------------------------------------------- designs
# Each design: (target label, maker(g, n, shift) -> kwargs of calib_ci).  shift = 0 is calibrated;
# the power designs use a nonzero shift (strength of a smooth miscalibration).
def binary(dist):
    def make(g, n, shift=0.0):
        p = dist(g, n)
        return {"y": (g.random(n) < p).astype(int), "probs": p}
    return make


def top1(dist, K=10):
    def make(g, n, shift=0.0):
        c = dist(g, n)
        return {"y": (g.random(n) < c).astype(int), "probs": c, "n_classes": K}
    return make


def multiclass(alpha, K, k):
    def make(g, n, shift=0.0):
        P = g.dirichlet(np.full(K, alpha), n)
        return {"y": draw_class(g, P), "probs": P, "k": k}
    return make


DESIGNS = {
    "binary, balanced p ~ Beta(2, 2)": ("binary", binary(lambda g, n: g.beta(2, 2, n))),
    "binary, rare events p ~ Beta(0.5, 10)": ("binary", binary(lambda g, n: np.maximum(g.beta(0.5, 10, n), 1e-12))),
    "binary, near-degenerate p ~ U[0, 0.003]": ("binary", binary(lambda g, n: g.uniform(0, 0.003, n))),
    "top-1 (K = 10), confidence ~ Beta(20, 1)": ("top-1", top1(lambda g, n: np.maximum(g.beta(20, 1, n), 0.1))),
    "top-1 (K = 10), confidence ~ U[0.1, 1]": ("top-1", top1(lambda g, n: g.uniform(0.1, 1, n))),
    "top-2 of K = 5, Dirichlet(1)": ("top-2", multiclass(1.0, 5, 2)),
    "top-2 of K = 5, Dirichlet(0.2)": ("top-2", multiclass(0.2, 5, 2)),
    "full K = 3, Dirichlet(1)": ("full", multiclass(1.0, 3, "full")),
    "full K = 3, Dirichlet(0.3)": ("full", multiclass(0.3, 3, "full")),
}


# power: the model reports q, the truth is p (labels drawn from p); each alternative has a calibrated twin
# (labels drawn from q itself) that measures every null's size on the same predictions
def _rare_intercept(g, n, calibrated=False):
    p = np.maximum(g.beta(0.5, 10, n), 1e-12)
    q = expit(logit(p) - 0.3)  # under-predicts: true log-odds 0.3 above the reported
    return {"y": (g.random(n) < (q if calibrated else p)).astype(int), "probs": q}


def _balanced_slope(g, n, calibrated=False):
    p = g.beta(2, 2, n)
    q = expit(logit(p) / 0.75)  # over-confident: calibration slope 0.75
    return {"y": (g.random(n) < (q if calibrated else p)).astype(int), "probs": q}


def _top1_overconfident(g, n, calibrated=False):
    c = np.maximum(g.beta(20, 1, n), 0.1)
    truth = c if calibrated else c ** 1.6  # accuracy below the confidence, near 1
    return {"y": (g.random(n) < truth).astype(int), "probs": c, "n_classes": 10}


def _top2_temperature(g, n, calibrated=False):
    a = g.normal(size=(n, 5)) * 1.5
    P = softmax(a)
    Q = softmax(a * 1.25)  # reported probabilities sharpened (temperature 0.8)
    return {"y": draw_class(g, Q if calibrated else P), "probs": Q, "k": 2}


POWER = {
    "binary rare events, intercept +0.3": ("binary", _rare_intercept),
    "binary balanced, slope 0.75": ("binary", _balanced_slope),
    "top-1 near 1, accuracy = confidence^1.6": ("top-1", _top1_overconfident),
    "top-2 of K = 5, temperature 0.8": ("top-2", _top2_temperature),
}
POWER_NS = (300, 1000)
MC_CELLS = {("binary, balanced p ~ Beta(2, 2)", 100), ("binary, balanced p ~ Beta(2, 2)", 300),
            ("binary, rare events p ~ Beta(0.5, 10)", 100), ("binary, rare events p ~ Beta(0.5, 10)", 300),
            ("top-1 (K = 10), confidence ~ Beta(20, 1)", 100), ("top-1 (K = 10), confidence ~ Beta(20, 1)", 300),
            ("top-2 of K = 5, Dirichlet(0.2)", 100), ("top-2 of K = 5, Dirichlet(0.2)", 300)}


def run_cell(make, n, reps, seed, mc, draws):
    """p-values of the nulls over ``reps`` data sets: columns asym, cond, gamma, mc (nan if not run)."""
    g = np.random.default_rng(seed)
    out = np.full((reps, 6), np.nan)
    for r in range(reps):  # one data set per iteration: each calib_ci call is vectorised over rows
        kw = make(g, n)
        res = ct.calib_ci(**kw, null="monte-carlo" if mc else "conditional", n_null_draws=draws,
                          rng=int(g.integers(2**31)))
        cond = res.conditional
        p_mc = res.monte_carlo.pvalue if res.monte_carlo is not None else np.nan
        p_cond = cond.pvalue if cond.reliable else p_mc  # what null="conditional" reports
        out[r] = (res.asymptotic[1], p_cond, cond.pvalue if mc else np.nan, p_mc if mc else np.nan,
                  float(not cond.reliable), res.n_bins)
    return out


SIZE_FIELDS = ["design", "target", "n", "reps", "B", "fallback_share", "mc_draws",
               "asym_05", "cond_05", "mc_05", "asym_10", "cond_10", "mc_10", "seconds"]
POWER_FIELDS = ["design", "target", "n", "reps", "B", "asym_05", "cond_05", "asym_10", "cond_10", "seconds"]


def _done(path):
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as fh:
        return {(r["design"], int(r["n"])): r for r in csv.DictReader(fh)}


def _append(path, fields, row):
    new = not os.path.exists(path)
    with open(path, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        if new:
            w.writeheader()
        w.writerow(row)


def rates(p, alpha):
    ok = ~np.isnan(p)
    return float(np.mean(p[ok] <= alpha)) if ok.any() else float("nan")


def run(reps, reps_large, draws, size_csv, power_csv, designs=None, ns=NS, power=True):
    done = _done(size_csv)
    for name, (target, make) in DESIGNS.items():
        if designs is not None and name not in designs:
            continue
        for n in ns:
            if (name, n) in done:
                continue
            N = reps if n < 100_000 else reps_large
            mc = (name, n) in MC_CELLS
            t0 = time.perf_counter()
            out = run_cell(make, n, N, [zlib.crc32(name.encode()), n], mc, draws)
            row = {"design": name, "target": target, "n": n, "reps": N, "B": int(np.median(out[:, 5])),
                   "fallback_share": float(out[:, 4].mean()), "mc_draws": draws if mc else "",
                   "seconds": round(time.perf_counter() - t0, 1)}
            for a, tag in ((0.05, "05"), (0.10, "10")):
                row[f"asym_{tag}"] = rates(out[:, 0], a)
                row[f"cond_{tag}"] = rates(out[:, 1], a)
                row[f"mc_{tag}"] = rates(out[:, 3], a) if mc else ""
            _append(size_csv, SIZE_FIELDS, row)
            print(row, flush=True)
    if not power:
        return
    done = _done(power_csv)
    cells = [(name, target, make, False) for name, (target, make) in POWER.items()]
    cells += [(name + " [calibrated twin]", target, make, True) for name, (target, make) in POWER.items()]
    for name, target, make, twin in cells:
        for n in POWER_NS:
            if (name, n) in done:
                continue
            t0 = time.perf_counter()
            out = run_cell(lambda g, n, make=make, twin=twin: make(g, n, twin), n, reps,
                           [zlib.crc32(name.encode()), n, 1], False, draws)
            row = {"design": name, "target": target, "n": n, "reps": reps, "B": int(np.median(out[:, 5])),
                   "seconds": round(time.perf_counter() - t0, 1)}
            for a, tag in ((0.05, "05"), (0.10, "10")):
                row[f"asym_{tag}"] = rates(out[:, 0], a)
                row[f"cond_{tag}"] = rates(out[:, 1], a)
            _append(power_csv, POWER_FIELDS, row)
            print(row, flush=True)


# ----------------------------------------------------------------------------- write-up
def _se(r, N):
    return float(np.sqrt(r * (1 - r) / N))


def _flag(r, alpha, N):
    """``*`` when r lies outside alpha +- 3 Monte Carlo s.e. (s.e. at the nominal rate)."""
    return " *" if abs(r - alpha) > 3 * _se(alpha, N) else ""


def write_md(size_csv, power_csv, md):
    import pandas as pd

    size = pd.read_csv(size_csv)
    size = size.sort_values(["design", "n"], key=lambda s: s.map(list(DESIGNS).index) if s.name == "design" else s)
    power = pd.read_csv(power_csv) if os.path.exists(power_csv) else None
    L = ["# The default null of `calib_ci`: asymptotic or conditional?", "",
         "Generated by `vignettes/default_null.py` (seeded; the CSVs next to this file hold the raw rates).",
         "Each data set is calibrated by construction (labels drawn from the predictions), so every",
         "rejection is a false positive. One `calib_ci(..., null=\"conditional\")` call per data set gives",
         "the asymptotic p-value (`res.asymptotic`, the paper's z0 = n sqrt(w) T / sigma0 ~ N(0, 1)) and the",
         "conditional one (`res.null_pvalue`: shifted gamma with the exact conditional moments of T, or the",
         "conditional Monte Carlo test when the conditional skewness exceeds 3, the `fallback` column).",
         "In the cells with a `Monte Carlo` entry the call used `null=\"monte-carlo\"` "
         f"(R = {int(size['mc_draws'].dropna().iloc[0]) if size['mc_draws'].notna().any() else 0} label draws).",
         "Automatic B throughout (the median B of the cell is shown).", ""]
    for alpha, tag in ((0.05, "05"), (0.10, "10")):
        L += [f"## Size at nominal alpha = {alpha:g}", "",
              "Rejection rate over N calibrated data sets; `*` = outside alpha +- 3 s.e., "
              f"s.e. = sqrt(alpha (1 - alpha) / N) = {_se(alpha, 1000):.4f} at N = 1000, "
              f"{_se(alpha, 200):.4f} at N = 200.", "",
              "| design | n | N | B | fallback | asymptotic | conditional | Monte Carlo |",
              "|---|---|---|---|---|---|---|---|"]
        for _, r in size.iterrows():
            N = int(r["reps"])
            a, c = r[f"asym_{tag}"], r[f"cond_{tag}"]
            m = r[f"mc_{tag}"]
            mtxt = "" if pd.isna(m) or m == "" else f"{float(m):.3f}{_flag(float(m), alpha, N)}"
            L.append(f"| {r['design']} | {int(r['n'])} | {N} | {int(r['B'])} | {r['fallback_share']:.2f} | "
                     f"{a:.3f}{_flag(a, alpha, N)} | {c:.3f}{_flag(c, alpha, N)} | {mtxt} |")
        L.append("")
    L += ["## Summary of the size cells", ""]
    for alpha, tag in ((0.05, "05"), (0.10, "10")):
        for col, label in (("asym", "asymptotic"), ("cond", "conditional")):
            dev = (size[f"{col}_{tag}"] - alpha) / np.sqrt(alpha * (1 - alpha) / size["reps"])
            out = int((dev.abs() > 3).sum())
            L.append(f"* alpha = {alpha:g}, {label}: rates {size[f'{col}_{tag}'].min():.3f}-"
                     f"{size[f'{col}_{tag}'].max():.3f}; {out} of {len(size)} cells outside alpha +- 3 s.e.; "
                     f"largest deviation {dev.abs().max():.1f} s.e. ({dev.min():+.1f} to {dev.max():+.1f}).")
    for alpha, tag in ((0.05, "05"), (0.10, "10")):
        for col, label in (("asym", "asymptotic"), ("cond", "conditional")):
            dev = (size[f"{col}_{tag}"] - alpha) / np.sqrt(alpha * (1 - alpha) / size["reps"])
            bad = size[dev.abs() > 3]
            cells = "; ".join(f"{r['design']}, n = {int(r['n'])}: {r[f'{col}_{tag}']:.3f}"
                              for _, r in bad.iterrows())
            L.append(f"* outside the band, alpha = {alpha:g}, {label}: {cells or 'none'}.")
    L.append("")
    if power is not None:
        twin = power[power["design"].str.endswith("[calibrated twin]")].copy()
        twin["design"] = twin["design"].str.replace(" [calibrated twin]", "", regex=False)
        alt = power[~power["design"].str.endswith("[calibrated twin]")]
        both = alt.merge(twin, on=["design", "n"], how="left", suffixes=("", "_twin"))
        for alpha, tag in ((0.05, "05"), (0.10, "10")):
            L += [f"## Power at alpha = {alpha:g} (smooth alternatives, automatic B)", "",
                  "Rejection rates over N data sets (s.e. sqrt(r (1 - r) / N) <= 0.016 at N = 1000). `size` = the "
                  "same test on the alternative's calibrated twin (the same predictions, labels drawn from them), "
                  "so that power is read next to the size it was bought with.", "",
                  "| alternative | n | N | B | size asymptotic | size conditional | power asymptotic | "
                  "power conditional |", "|---|---|---|---|---|---|---|---|"]
            for _, r in both.iterrows():
                sa = r.get(f"asym_{tag}_twin", np.nan)
                sc = r.get(f"cond_{tag}_twin", np.nan)
                L.append(f"| {r['design']} | {int(r['n'])} | {int(r['reps'])} | {int(r['B'])} | {sa:.3f} | {sc:.3f} | "
                         f"{r[f'asym_{tag}']:.3f} | {r[f'cond_{tag}']:.3f} |")
            L.append("")
    secs = size["seconds"].sum() + (0 if power is None else power["seconds"].sum())
    L += [f"Run time: {secs / 60:.1f} wall-clock minutes in all (sum of the cells' times on a shared 2-core "
          "machine under heavy load from other jobs, so well above the CPU time).", ""]
    return "\n".join(L)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--reps-large", type=int, default=200, help="data sets per cell at n = 100000")
    ap.add_argument("--draws", type=int, default=400, help="label draws of the Monte Carlo null")
    ap.add_argument("--prefix", default=os.path.join(HERE, "default_null"))
    ap.add_argument("--designs", default=None, help="semicolon-separated subset (smoke tests)")
    ap.add_argument("--n", default=None, help="comma-separated sample sizes (smoke tests)")
    ap.add_argument("--no-power", action="store_true")
    ap.add_argument("--md", action="store_true", help="only (re)write the markdown tables from the CSVs")
    args = ap.parse_args(argv)
    size_csv, power_csv = args.prefix + "_size.csv", args.prefix + "_power.csv"
    if not args.md:
        run(args.reps, args.reps_large, args.draws, size_csv, power_csv,
            designs=None if args.designs is None else args.designs.split(";"),
            ns=NS if args.n is None else tuple(int(v) for v in args.n.split(",")), power=not args.no_power)
    text = write_md(size_csv, power_csv, md=None)
    return text


if __name__ == "__main__":
    print(main())
