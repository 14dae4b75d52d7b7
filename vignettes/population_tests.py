"""The population tests at their size: the heterogeneity test, the weighted test and the prevalence estimate.

Measures, before and after the changes of issue 26 point 4 (``population_tests.md``):

1. **Heterogeneity** (Cochran's Q of equal ECE^2 across groups): size when
   every group is calibrated and when every group has the same non-zero
   binned ECE^2, and power with one group off, for the previous variances
   (each group's own first- plus second-order variance, the corrected
   first-order part floored at 0) and the variances restricted to H0 (the
   first-order part scaled to the pooled ECE^2; :mod:`calibtest.ece.grouped_interval`).
   Both statistics are computed on the same data sets from the same parts
   (:func:`calibtest.ece.grouped_interval.estimate_variance`'s parts by the core
   functions); the first data sets of each cell are checked against
   ``calib_ci(..., by=)``.
2. **Weighted test** (``weights=`` with inverse inclusion probabilities,
   calibrated population): size of the asymptotic test z0 = T_w / sqrt(V_0)
   (the previous default) and of the Monte Carlo test given the predictions
   and the weights (the new default in the binary and top-1 modes) at n = 1000,
   and of the asymptotic test at n = 3000 and 10,000.
3. **Prevalence** (50/50 case-control sample of a population with prevalence
   5%): mean T_J against the population's binned ECE^2 at the B used, with the
   unweighted automatic B (before) and the prevalence-weighted automatic B
   (after); coverage and size of ``calib_ci(..., prevalence=0.05)`` before
   (B = the unweighted automatic B, given) and after (``n_bins="auto"``).

Each cell writes one CSV row per data set to ``vignettes/results/population_tests/<cell>.csv`` (a cell whose
file holds enough rows is skipped).  Data set r of a cell uses ``numpy.random.default_rng([cell seed, r])``.

Run: ``nice -n 10 python vignettes/population_tests.py [--cells ...] [--reps R]``, then
``python vignettes/population_tests.py --tables`` for the tables of ``population_tests.md``.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import integrate, optimize, special, stats

import calibtest as ct
from calibtest.core.binning import auto_n_bins
from calibtest.core.difference_variance import first_order_var_single, second_order_var_single
from calibtest.core.partition import partition_rows
from calibtest.core.targets import prepare_target
from calibtest.core.weighted import (NullLabels, prevalence_event_prob, prevalence_weights, weighted_null_draws,
                                     weighted_statistics)
from calibtest.ece.build_result import prevalence_partition
from calibtest.ece.grouped_interval import heterogeneity_test

OUT = Path(__file__).resolve().parent / "results" / "population_tests"


def rate_se(rate: float, reps: int) -> float:
    """Monte Carlo s.e. sqrt(max(rate (1 - rate), 0.25 / R) / R) (floored so that 0 and 1 show one)."""
    return math.sqrt(max(rate * (1 - rate), 0.25 / reps) / reps)


# --------------------------------------------------------------------------- 1. heterogeneity
SIZES = [50, 150, 400, 1000, 2000]
SHAPES = [(1, 3), (2, 2), (3, 1), (1, 1), (0.5, 0.5)]
SIZES8 = list(np.round(np.geomspace(100, 5000, 8)).astype(int))
SHAPES8 = [(1, 3), (2, 2), (3, 1), (1, 1), (0.5, 0.5), (2, 5), (5, 2), (1.5, 1.5)]


def binned_logit_ece(delta: float, a: float, b: float, B: int) -> float:
    """Binned ECE^2 at B equal-width bins of p ~ Beta(a, b) for q = expit(logit p + delta), by quadrature."""
    edges = np.linspace(0, 1, B + 1)
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        mass = stats.beta.cdf(hi, a, b) - stats.beta.cdf(lo, a, b)
        if mass <= 0:
            continue
        err = integrate.quad(lambda p: (special.expit(special.logit(p) + delta) - p) * stats.beta.pdf(p, a, b),
                             lo, hi, limit=100)[0]
        total += err * err / mass
    return total


def heterogeneity_cell(kind: str, level: float, sizes=SIZES, shapes=SHAPES, off: int | None = None):
    """kind "shift": p = 0.05 + 0.85 Beta, q = p + level (exactly the same binned ECE^2 = level^2 at every B);
    kind "logit": p ~ Beta, q = expit(logit p + delta_g), delta_g giving the binned ECE^2 ``level`` at the
    group's automatic B.  ``off``: only that group is miscalibrated (power), by ``level`` (shift or delta)."""
    deltas = [0.0] * len(sizes)
    if kind == "logit" and level > 0 and off is None:
        deltas = [optimize.brentq(lambda d: binned_logit_ece(d, a, b, auto_n_bins(n, 1)) - level, 1e-4, 5)
                  for n, (a, b) in zip(sizes, shapes)]

    def draw(rng):
        ys, ps = [], []
        for g, (n, (a, b)) in enumerate(zip(sizes, shapes)):
            if kind == "shift":
                p = 0.05 + 0.85 * rng.beta(a, b, n)
                q = p + (level if off is None or g == off else 0.0)
            else:
                p = np.clip(rng.beta(a, b, n), 1e-6, 1 - 1e-6)
                d = deltas[g] if off is None else (level if g == off else 0.0)
                q = special.expit(special.logit(p) + d)
            ys.append((rng.random(n) < q).astype(int))
            ps.append(p)
        return ys, ps

    def run(rng, check: bool):
        ys, ps = draw(rng)
        t, v2, f, pl, unrestricted = [], [], [], [], []
        for y, p in zip(ys, ps):
            data = prepare_target(y, p)
            part = partition_rows(data, "auto")
            inv, u = part.inverse, data.u
            c = np.bincount(inv).astype(float)
            s = np.bincount(inv, weights=u[:, 0])
            sq = np.bincount(inv, weights=u[:, 0] ** 2)
            keep = c >= 2
            t.append(float(np.sum((s[keep] ** 2 - sq[keep]) / (c[keep] - 1)) / data.n))
            pl.append(float(np.sum(s * s / c) / data.n))
            f.append(first_order_var_single(inv, u))
            v2.append(second_order_var_single(inv, u))
            unrestricted.append(max(f[-1] - 2.0 * second_order_var_single(inv, u, shift=0.0), 0.0) + v2[-1])
        before = heterogeneity_test(t, unrestricted)[2]
        after, pooled = heterogeneity_test(t, v2, f, pl)[2:]
        restricted = [v + (fi / pi * max(pooled, 0.0) if pi > 0 else 0.0) for v, fi, pi in zip(v2, f, pl)]
        if check:  # the package's grouped result gives the "after" p-value on the same rows
            res = ct.calib_ci(y=np.concatenate(ys), probs=np.concatenate(ps),
                              by=np.repeat(np.arange(len(sizes)), sizes), null="asymptotic")
            assert abs(res.heterogeneity_pvalue - after) <= 1e-9 * after + 1e-12, (res.heterogeneity_pvalue, after)
        out = {"p_before": before, "p_after": after}
        for g in range(len(sizes)):
            out.update({f"t_{g}": t[g], f"v_before_{g}": unrestricted[g], f"v_after_{g}": restricted[g]})
        return out
    return run


# --------------------------------------------------------------------------- 2. weighted test
def weighted_sample(design: str, n: int, rng):
    """A sample of n rows with inverse-inclusion-probability weights from a calibrated population."""
    if design == "lognormal":   # the earlier vignette's design: w = L exp(2p)
        p = rng.uniform(size=n)
        return rng.random(n) < p, p, rng.lognormal(0, 0.5, n) * np.exp(2 * p)
    N = 40 * n
    if design == "risk":        # inclusion grows with the risk (oversampling high-risk patients)
        p = rng.beta(1.5, 6, N)
        pi = 0.05 + 0.95 * p
        q = p
    elif design == "strata":    # two strata of an auxiliary variable, independent of y given p
        p = rng.beta(2, 5, N)
        pi = np.where(rng.random(N) < 0.3, 0.8, 0.1)
        q = p
    elif design == "aux":       # strata that carry information on y given p (population still calibrated)
        p = rng.uniform(0.1, 0.9, N)
        x = rng.random(N) < 0.5
        pi = np.where(x, 0.8, 0.1)
        q = p + np.where(x, 0.08, -0.08)
    elif design == "rare":      # rare outcome, inclusion proportional to risk (weights up to 50)
        p = rng.beta(1, 12, N)
        pi = np.clip(0.02 + 2 * p, 0, 1)
        q = p
    else:
        raise ValueError(design)
    y = rng.random(N) < q
    keep = np.flatnonzero(rng.random(N) < pi)[:n]
    return y[keep], p[keep], 1.0 / pi[keep]


def weighted_cell(design: str, n: int, draws: int):
    def run(rng, check: bool):
        y, p, w = weighted_sample(design, n, rng)
        data = prepare_target(y.astype(int), p)
        part = partition_rows(data, "auto")
        ws = weighted_statistics(part.inverse, data.u, w, part.m)
        out = {"p_asymptotic": float(stats.norm.sf(ws.estimate / math.sqrt(ws.null_variance))),
               "n_eff": ws.n_eff, "estimate": ws.estimate, "null_variance": ws.null_variance}
        if draws:
            d = weighted_null_draws(data.z[:, 0], part.inverse, NullLabels(w, w, data.z[:, 0]), n_draws=draws,
                                    rng=rng, m=part.m)
            out["p_monte_carlo"] = float((1 + np.sum(d >= ws.estimate)) / (1 + draws))
        return out
    return run


# --------------------------------------------------------------------------- 3. prevalence
PREV, PREV_SD = 0.05, 1.5


def population_mu(prevalence: float = PREV, sd: float = PREV_SD) -> float:
    f = lambda mu: integrate.quad(lambda x: special.expit(mu + sd * x) * np.exp(-x * x / 2) / math.sqrt(2 * math.pi),
                                  -12, 12)[0] - prevalence
    return float(optimize.brentq(f, -10, 0))


def model(r, design: str):
    """The model's prediction: "spread" p = expit(1.2 + 1.4 logit r) (too spread); a number delta:
    p = expit(logit r - delta) (under-predicting; 0: calibrated in the population)."""
    if design == "spread":
        return special.expit(1.2 + 1.4 * special.logit(r))
    return special.expit(special.logit(r) - float(design))


def population_binned(mu: float, design: str, B: int, n_grid: int = 400_001) -> float:
    """The population's binned ECE^2: sum_b P(b) (E[r - p | b])^2 over B equal-width bins of p, by quadrature."""
    x = np.linspace(-12.0, 12.0, n_grid)
    dens = np.exp(-x * x / 2)
    dens /= dens.sum()
    r = special.expit(mu + PREV_SD * x)
    p = model(r, design)
    k = np.minimum((p * B).astype(int), B - 1)
    mass = np.bincount(k, weights=dens, minlength=B)
    num = np.bincount(k, weights=dens * (r - p), minlength=B)
    return float(np.sum(num[mass > 0] ** 2 / mass[mass > 0]))


def case_control(rng, mu: float, design: str, n_each: int):
    r = special.expit(mu + PREV_SD * rng.standard_normal(int(3 * n_each / PREV)))
    y = rng.random(r.size) < r
    idx = np.concatenate([rng.choice(np.flatnonzero(y), n_each, replace=False),
                          rng.choice(np.flatnonzero(~y), n_each, replace=False)])
    return y[idx].astype(int), model(r[idx], design)


def prevalence_bias_cell(design: str, n_each: int):
    mu = population_mu()
    truth = {}

    def binned(B):
        if B not in truth:
            truth[B] = population_binned(mu, design, B) if design != "0" else 0.0
        return truth[B]

    def run(rng, check: bool):
        y, p = case_control(rng, mu, design, n_each)
        data = prepare_target(y, p)
        w, pi_hat = prevalence_weights(y == 1, PREV)
        a, b = PREV / pi_hat, (1 - PREV) / (1 - pi_hat)
        before = partition_rows(data, "auto")
        after = prevalence_partition(data, before, np.full(y.size, a), np.full(y.size, b),
                                     prevalence_event_prob(p, a, b))
        out = {}
        for name, part in (("before", before), ("after", after)):
            ws = weighted_statistics(part.inverse, data.u, w, part.m, jackknife=True)
            out.update({f"B_{name}": part.n_bins, f"T_{name}": ws.estimate, f"truth_{name}": binned(part.n_bins)})
        if check:
            assert ct.calib_ci(y=y, probs=p, prevalence=PREV, n_null_draws=19, rng=1).n_bins == after.n_bins
        return out
    return run


def prevalence_coverage_cell(design: str, n_each: int, draws: int):
    mu = population_mu()
    truth = {}

    def binned(B):
        if B not in truth:
            truth[B] = population_binned(mu, design, B) if design != "0" else 0.0
        return truth[B]

    def run(rng, check: bool):
        y, p = case_control(rng, mu, design, n_each)
        b0 = ct.calib_ci(y=y, probs=p).n_bins     # the unweighted automatic B, which prevalence= used before
        out = {}
        for name, nb in (("before", b0), ("after", "auto")):
            res = ct.calib_ci(y=y, probs=p, prevalence=PREV, n_bins=nb, n_null_draws=draws, rng=rng)
            tb = binned(res.n_bins)
            lo, hi = res.ci_lower, res.ci_upper
            covered = res.contains_zero if tb == 0 else (lo < tb <= hi if res.ci_lower_open else lo <= tb <= hi)
            out.update({f"B_{name}": res.n_bins, f"cover_{name}": int(covered), f"p_{name}": res.null_pvalue,
                        f"T_{name}": res.estimate, f"truth_{name}": tb, f"approx_{name}": int(res.approximate)})
        return out
    return run


# --------------------------------------------------------------------------- the cells
CELLS = {
    # heterogeneity: (seed, factory, default reps)
    "het_calibrated": (1, lambda: heterogeneity_cell("logit", 0.0), 2000),
    "het_calibrated_shifted_laws": (2, lambda: heterogeneity_cell("shift", 0.0), 2000),
    "het_equal_logit_0.0025": (3, lambda: heterogeneity_cell("logit", 0.0025), 2000),
    "het_equal_logit_0.01": (4, lambda: heterogeneity_cell("logit", 0.01), 2000),
    "het_equal_shift_0.05": (5, lambda: heterogeneity_cell("shift", 0.05), 2000),
    "het_G8_calibrated": (6, lambda: heterogeneity_cell("logit", 0.0, SIZES8, SHAPES8), 1000),
    "het_G8_equal_shift_0.05": (7, lambda: heterogeneity_cell("shift", 0.05, SIZES8, SHAPES8), 1000),
    "het_power_shift0.1_n150": (8, lambda: heterogeneity_cell("shift", 0.1, off=1), 1000),
    "het_power_shift0.04_n2000": (9, lambda: heterogeneity_cell("shift", 0.04, off=4), 1000),
    "het_power_logit0.5_n400": (10, lambda: heterogeneity_cell("logit", 0.5, off=2), 1000),
    "het_G8_power_logit0.4_n535": (11, lambda: heterogeneity_cell("logit", 0.4, SIZES8, SHAPES8, off=3), 1000),
    # weighted test
    "w_risk_n1000": (21, lambda: weighted_cell("risk", 1000, 199), 2000),
    "w_strata_n1000": (22, lambda: weighted_cell("strata", 1000, 199), 2000),
    "w_aux_n1000": (23, lambda: weighted_cell("aux", 1000, 199), 2000),
    "w_rare_n1000": (24, lambda: weighted_cell("rare", 1000, 199), 2000),
    "w_lognormal_n1000": (25, lambda: weighted_cell("lognormal", 1000, 199), 2000),
    "w_strata_n3000_asymptotic": (26, lambda: weighted_cell("strata", 3000, 0), 1500),
    "w_rare_n3000_asymptotic": (27, lambda: weighted_cell("rare", 3000, 0), 1500),
    "w_strata_n10000_asymptotic": (28, lambda: weighted_cell("strata", 10000, 0), 1000),
    "w_rare_n10000_asymptotic": (29, lambda: weighted_cell("rare", 10000, 0), 1000),
    # prevalence
    "prev_bias_spread_500": (41, lambda: prevalence_bias_cell("spread", 500), 1000),
    "prev_bias_spread_1500": (42, lambda: prevalence_bias_cell("spread", 1500), 400),
    "prev_bias_delta0.5_500": (43, lambda: prevalence_bias_cell("0.5", 500), 1000),
    "prev_bias_delta1_500": (44, lambda: prevalence_bias_cell("1", 500), 600),
    "prev_bias_delta0.5_1500": (45, lambda: prevalence_bias_cell("0.5", 1500), 400),
    "prev_cover_spread_500": (51, lambda: prevalence_coverage_cell("spread", 500, 499), 400),
    "prev_cover_delta0.5_500": (52, lambda: prevalence_coverage_cell("0.5", 500, 499), 400),
    "prev_cover_calibrated_500": (53, lambda: prevalence_coverage_cell("0", 500, 499), 400),
}


def run_cell(name: str, reps: int | None) -> None:
    seed, factory, default = CELLS[name]
    reps = default if reps is None else reps
    path = OUT / f"{name}.csv"
    done = pd.read_csv(path) if path.exists() else pd.DataFrame()
    if len(done) >= reps:
        return
    run = factory()
    rows, start = [], time.time()
    for r in range(len(done), reps):
        row = run(np.random.default_rng([seed, r]), check=r < 3)
        rows.append({"rep": r, **row})
    frame = pd.concat([done, pd.DataFrame(rows)], ignore_index=True)
    OUT.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    print(f"{name}: {reps} data sets ({time.time() - start:.0f} s)", flush=True)


# --------------------------------------------------------------------------- tables
def _rate(x, level):
    x = np.asarray(x, dtype=float)
    r = float(np.mean(x < level))
    return f"{r:.3f} ({rate_se(r, x.size):.3f})"


def tables() -> str:
    out = []
    load = lambda n: pd.read_csv(OUT / f"{n}.csv") if (OUT / f"{n}.csv").exists() else None
    out.append("| cell | data sets | before, 0.05 | after, 0.05 | before, 0.10 | after, 0.10 |\n"
               "|---|---|---|---|---|---|")
    for name in [c for c in CELLS if c.startswith("het_")]:
        f = load(name)
        if f is not None:
            out.append(f"| {name} | {len(f)} | {_rate(f.p_before, .05)} | {_rate(f.p_after, .05)} | "
                       f"{_rate(f.p_before, .10)} | {_rate(f.p_after, .10)} |")
    out.append("\nVariance of T_g: Monte Carlo variance over the data sets against the mean estimated variance, "
               "per group (smallest group first).\n\n| cell | Var(T_g) x 1e6 | mean before / Var(T_g) | "
               "mean after / Var(T_g) |\n|---|---|---|---|")
    for name in [c for c in CELLS if c.startswith("het_") and "power" not in c]:
        f = load(name)
        if f is None or "t_0" not in f:
            continue
        G = sum(1 for c in f.columns if c.startswith("t_"))
        var = [f[f"t_{g}"].var() for g in range(G)]
        fmt3 = lambda xs: ", ".join(f"{x:.2f}" for x in xs)
        out.append(f"| {name} | {', '.join(f'{1e6 * v:.3g}' for v in var)} | "
                   f"{fmt3([f[f'v_before_{g}'].mean() / var[g] for g in range(G)])} | "
                   f"{fmt3([f[f'v_after_{g}'].mean() / var[g] for g in range(G)])} |")
    out.append("\n| cell | data sets | asymptotic, 0.05 | Monte Carlo, 0.05 | asymptotic, 0.10 | Monte Carlo, 0.10 | "
               "Var(T_w) / mean V_0 | mean n_eff |\n|---|---|---|---|---|---|---|---|")
    for name in [c for c in CELLS if c.startswith("w_")]:
        f = load(name)
        if f is not None:
            mc = "p_monte_carlo" in f
            out.append(f"| {name} | {len(f)} | {_rate(f.p_asymptotic, .05)} | "
                       f"{_rate(f.p_monte_carlo, .05) if mc else '–'} | {_rate(f.p_asymptotic, .10)} | "
                       f"{_rate(f.p_monte_carlo, .10) if mc else '–'} | "
                       f"{f.estimate.var() / f.null_variance.mean():.3f} | {f.n_eff.mean():.0f} |")
    out.append("\n| cell | data sets | B before | mean T_J / binned ECE² before | B after (range) | "
               "mean T_J / binned ECE² after |\n|---|---|---|---|---|---|")
    for name in [c for c in CELLS if c.startswith("prev_bias")]:
        f = load(name)
        if f is None:
            continue
        cells = []
        for k in ("before", "after"):
            if f[f"truth_{k}"].mean() > 0:
                ratio = f[f"T_{k}"].mean() / f[f"truth_{k}"].mean()
                se = f[f"T_{k}"].std() / f[f"truth_{k}"].mean() / math.sqrt(len(f))
                cells.append(f"{ratio:.3f} ({se:.3f})")
            else:
                cells.append(f"mean T_J {f[f'T_{k}'].mean():.2e}")
        out.append(f"| {name} | {len(f)} | {int(f.B_before.median())} | {cells[0]} | "
                   f"{int(f.B_after.median())} ({int(f.B_after.min())}-{int(f.B_after.max())}) | {cells[1]} |")
    out.append("\n| cell | data sets | B before | coverage before | rejects ECE = 0 (0.05) before | flagged before | "
               "B after (median) | coverage after | rejects (0.05) after | flagged after |\n"
               "|---|---|---|---|---|---|---|---|---|---|")
    for name in [c for c in CELLS if c.startswith("prev_cover")]:
        f = load(name)
        if f is None:
            continue
        cov = lambda k: f"{f[f'cover_{k}'].mean():.3f} ({rate_se(f[f'cover_{k}'].mean(), len(f)):.3f})"
        out.append(f"| {name} | {len(f)} | {int(f.B_before.median())} | {cov('before')} | {_rate(f.p_before, .05)} | "
                   f"{f.approx_before.mean():.2f} | {int(f.B_after.median())} | {cov('after')} | "
                   f"{_rate(f.p_after, .05)} | {f.approx_after.mean():.2f} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", nargs="*", default=list(CELLS))
    ap.add_argument("--reps", type=int, default=None, help="data sets per cell (default: each cell's own)")
    ap.add_argument("--tables", action="store_true")
    args = ap.parse_args(argv)
    if args.tables:
        print(tables())
        return 0
    for name in args.cells:
        run_cell(name, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
