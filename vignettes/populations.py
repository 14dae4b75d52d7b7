"""Subgroups, case weights and prevalence adjustment: size, power and coverage by simulation.

Measures, with ``calib_ci(..., by=...)``, ``weights=`` and ``prevalence=``:

1. **Subgroups, all calibrated** (G = 2, 4, 8 groups of 100 to 5000 rows,
   geometric sizes; p ~ U(0, 1), y ~ Bernoulli(p)): size of the global test
   (Bonferroni min-p, Fisher, Stouffer over the per-group finite-sample
   p-values, and Bonferroni over the asymptotic p-values) and of the
   heterogeneity test at alpha = 0.05 and 0.10; coverage of each group's
   95% interval (of ECE = 0).
2. **Subgroups, one miscalibrated** (G = 4: 100, 368, 1357, 5000 rows;
   y ~ Bernoulli(expit(logit p + delta)) in one group): power of the global
   and heterogeneity tests; coverage of each group's interval of its own ECE.
3. **Prevalence**: a population with prevalence 5% (logit r ~ N(mu, 1.5^2)),
   a model p = expit(logit r - delta) (delta = 0: calibrated in the
   population), and a 50/50 case-control sample of 500 cases and 500
   controls (or 2500 + 2500) drawn from it: coverage of the population's
   binned ECE^2 (at the B the result used) by the unweighted interval and by
   the prevalence-adjusted one, and the size of the adjusted test; the
   ``diag_*`` cells measure the bias of the ratio T_w and of its jackknife
   T_J and the ratio of their Monte Carlo sd to the influence-function and
   jackknife standard errors.
4. **Lognormal weights**: weights w = L exp(2 p), log L ~ N(0, 0.5^2), n = 1000,
   p ~ U(0, 1): the weighted population's ECE covered by the weighted interval
   (calibrated and delta = 0.5), the size of the weighted test, and
   Var(T_w) across data sets against the mean estimated null variance V_0.
5. **Brute force**: T_w, T_J, sigma_{1,w}^2 and V_0 against an obviously correct
   double loop over pairs on 300 random small inputs (n <= 30).

Every cell appends one CSV row per data set as it goes (``--out``, default
``vignettes/results/populations``); a rerun skips the data sets already
written, so a cut-off run resumes.  Data set r of cell c uses
``numpy.random.default_rng([cell_id, r])``.

Run: ``nice -n 10 python vignettes/populations.py [--reps 1000] [--out DIR]``;
then ``python vignettes/populations.py --tables`` prints the tables of
``populations.md``.
"""
from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import integrate, optimize, special, stats

import calibtest as ct
from calibtest.core.partition import partition_rows
from calibtest.core.targets import prepare_target
from calibtest.core.weighted import prevalence_weights, weighted_statistics
from calibtest.ece.build_result import SPARSE_WEIGHT_SHARE
from calibtest.ece.result import SPARSE_BIN_NEFF
from calibtest.ece.group_engine import global_test

ALPHAS = (0.05, 0.10)
HERE = Path(__file__).resolve().parent


def sizes_for(G: int) -> np.ndarray:
    return np.round(np.geomspace(100, 5000, G)).astype(int)


def shifted(p, delta):
    """expit(logit p + delta)."""
    return special.expit(special.logit(p) + delta)


def ece_sq_uniform(delta: float) -> float:
    """ECE^2 = int_0^1 (expit(logit p + delta) - p)^2 dp of a U(0, 1) prediction."""
    return float(integrate.quad(lambda p: (shifted(p, delta) - p) ** 2, 0, 1, limit=200)[0])


# --------------------------------------------------------------------------- cells
def subgroup_cell(G: int, miscal_group: int | None, delta: float, null: str = "asymptotic"):
    sizes = sizes_for(G)
    labels = np.repeat(np.arange(G), sizes)
    truth = np.zeros(G)
    if miscal_group is not None:
        truth[miscal_group] = ece_sq_uniform(delta)

    def run(rng):
        p = rng.uniform(size=labels.size)
        q = p.copy()
        if miscal_group is not None:
            sel = labels == miscal_group
            q[sel] = shifted(p[sel], delta)
        y = (rng.random(labels.size) < q).astype(int)
        extra = {} if null == "asymptotic" else {"null": null, "n_null_draws": 499, "rng": rng}
        res = ct.calib_ci(y=y, probs=p, by=labels, **extra)
        frame = res.to_frame()
        p_fin = frame["pvalue"].to_numpy(float)
        p_asy = np.array([res.groups[g].null_pvalue for g in range(G)])
        out = {"global_bonferroni": global_test(p_fin, "bonferroni")[1],
               "global_fisher": global_test(p_fin, "fisher")[1],
               "global_stouffer": global_test(p_fin, "stouffer")[1],
               "global_bonferroni_asymptotic": global_test(p_asy, "bonferroni")[1],
               "heterogeneity": res.heterogeneity_pvalue}
        for g in range(G):
            r = res.groups[g]
            lo, hi = r.ci_lower, r.ci_upper
            covered = (r.contains_zero if truth[g] == 0 else
                       (lo < truth[g] <= hi if r.ci_lower_open else lo <= truth[g] <= hi))
            out[f"cover_{g}"] = int(covered)
            out[f"p_{g}"] = p_fin[g]
        return out
    return run


def _population_mu(prevalence: float, sd: float) -> float:
    f = lambda mu: integrate.quad(lambda x: special.expit(mu + sd * x) * np.exp(-x * x / 2) / math.sqrt(2 * math.pi),
                                  -12, 12)[0] - prevalence
    return float(optimize.brentq(f, -10, 0))


def population_ece_sq(mu: float, sd: float, delta: float) -> float:
    """E[(r - p)^2] with r = expit(mu + sd X), p = expit(logit r - delta), X ~ N(0, 1)."""
    g = lambda x: ((special.expit(mu + sd * x) - special.expit(mu + sd * x - delta)) ** 2
                   * np.exp(-x * x / 2) / math.sqrt(2 * math.pi))
    return float(integrate.quad(g, -12, 12, limit=200)[0])


PREV, PREV_SD = 0.05, 1.5


def population_binned_ece_sq(mu: float, sd: float, delta: float, n_bins: int, n_grid: int = 400_001) -> float:
    """sum_b P(b) (E[r - p | b])^2 over the B equal-width bins of p, by quadrature on a grid of X."""
    x = np.linspace(-12.0, 12.0, n_grid)
    dens = np.exp(-x * x / 2)
    dens /= dens.sum()
    r = special.expit(mu + sd * x)
    p = special.expit(mu + sd * x - delta)
    b = np.minimum((p * n_bins).astype(int), n_bins - 1)
    mass = np.bincount(b, weights=dens, minlength=n_bins)
    num = np.bincount(b, weights=dens * (r - p), minlength=n_bins)
    pos = mass > 0
    return float(np.sum(num[pos] ** 2 / mass[pos]))


def prevalence_cell(delta: float, n_cases: int = 500, n_controls: int = 500, n_bins="auto"):
    mu = _population_mu(PREV, PREV_SD)
    truth = population_ece_sq(mu, PREV_SD, delta)
    pool = int(3 * n_cases / PREV)
    binned = {}   # B -> the population's binned ECE^2 (the estimand at that B)

    def binned_truth(B: int) -> float:
        if B not in binned:
            binned[B] = population_binned_ece_sq(mu, PREV_SD, delta, B) if delta else 0.0
        return binned[B]

    def run(rng):
        x = rng.standard_normal(pool)
        r = special.expit(mu + PREV_SD * x)
        y = rng.random(pool) < r
        cases = rng.choice(np.flatnonzero(y), n_cases, replace=False)
        controls = rng.choice(np.flatnonzero(~y), n_controls, replace=False)
        idx = np.concatenate([cases, controls])
        p = special.expit(special.logit(r[idx]) - delta)
        yy = y[idx].astype(int)
        out = {"truth": truth}
        for name, kw in (("unweighted", {}), ("adjusted", {"prevalence": PREV, "n_null_draws": 999, "rng": rng})):
            res = ct.calib_ci(y=yy, probs=p, n_bins=n_bins, **kw)
            lo, hi = res.ci_lower, res.ci_upper
            tb = binned_truth(res.n_bins)
            out[f"{name}_cover"] = int(lo < tb <= hi if res.ci_lower_open else lo <= tb <= hi)
            out[f"{name}_p"] = res.null_pvalue
            out[f"{name}_ece"] = res.ece
            if name == "adjusted":
                out["n_eff"] = res.weighting.n_eff
                out["n_bins"] = res.n_bins
                out["truth_binned"] = tb
                out["estimate"] = res.estimate
                out["se"] = res.se
        return out
    return run, truth


def prevalence_diagnosis_cell(delta: float, n_cases: int, n_bins="auto"):
    """T_w and T_J of a case-control sample with prevalence weights, their IF and jackknife se (no test)."""
    mu = _population_mu(PREV, PREV_SD)
    pool = int(3 * n_cases / PREV)
    binned = {}

    def run(rng):
        x = rng.standard_normal(pool)
        r = special.expit(mu + PREV_SD * x)
        y = rng.random(pool) < r
        idx = np.concatenate([rng.choice(np.flatnonzero(y), n_cases, replace=False),
                              rng.choice(np.flatnonzero(~y), n_cases, replace=False)])
        p = special.expit(special.logit(r[idx]) - delta)
        yy = y[idx].astype(int)
        data = prepare_target(yy, p)
        part = partition_rows(data, n_bins)
        w, _ = prevalence_weights(yy == 1, PREV)
        ws = weighted_statistics(part.inverse, data.u, w, part.m, jackknife=True)
        if part.n_bins not in binned:
            binned[part.n_bins] = population_binned_ece_sq(mu, PREV_SD, delta, part.n_bins) if delta else 0.0
        W_b = np.bincount(part.inverse, weights=w, minlength=part.m)
        P_b = np.bincount(part.inverse, weights=w * w, minlength=part.m)
        share = float(W_b[W_b * W_b < SPARSE_BIN_NEFF * P_b].sum() / W_b.sum())
        return {"n_bins": part.n_bins, "truth_binned": binned[part.n_bins], "ratio": ws.ratio_estimate,
                "jackknife": ws.estimate, "if_var": ws.sigma1_sq / w.size, "jack_var": ws.jackknife_variance,
                "sparse_weight_share": share, "flagged": int(share > SPARSE_WEIGHT_SHARE)}
    return run


def prevalence_normal_cell(n_cases: int = 500, n_controls: int = 500):
    """The normal test z0 = T_w / sqrt(V_0) on prevalence weights, with the ratio T_w (what the Monte Carlo null replaces)."""
    mu = _population_mu(PREV, PREV_SD)
    pool = int(3 * n_cases / PREV)

    def run(rng):
        x = rng.standard_normal(pool)
        r = special.expit(mu + PREV_SD * x)
        y = rng.random(pool) < r
        idx = np.concatenate([rng.choice(np.flatnonzero(y), n_cases, replace=False),
                              rng.choice(np.flatnonzero(~y), n_controls, replace=False)])
        yy = y[idx].astype(int)
        data = prepare_target(yy, r[idx])
        part = partition_rows(data, "auto")
        w, _ = prevalence_weights(yy == 1, PREV)
        ws = weighted_statistics(part.inverse, data.u, w, part.m)   # the ratio T_w, no jackknife
        return {"p_normal": float(stats.norm.sf(ws.estimate / math.sqrt(ws.null_variance))), "estimate": ws.estimate,
                "null_variance": ws.null_variance}
    return run


def weights_truth(delta: float) -> float:
    num = integrate.quad(lambda p: np.exp(2 * p) * (shifted(p, delta) - p) ** 2, 0, 1, limit=200)[0]
    return float(num / integrate.quad(lambda p: np.exp(2 * p), 0, 1)[0])


def lognormal_cell(delta: float, n: int = 1000):
    truth = weights_truth(delta) if delta else 0.0

    def run(rng):
        p = rng.uniform(size=n)
        y = (rng.random(n) < shifted(p, delta)).astype(int)
        w = rng.lognormal(0.0, 0.5, n) * np.exp(2 * p)
        res = ct.calib_ci(y=y, probs=p, weights=w)
        lo, hi = res.ci_lower, res.ci_upper
        covered = res.contains_zero if truth == 0 else (lo < truth <= hi if res.ci_lower_open else lo <= truth <= hi)
        return {"truth": truth, "estimate": res.estimate, "null_variance": res.weighting.null_variance,
                "se": res.se, "p": res.null_pvalue, "cover": int(covered), "n_eff": res.weighting.n_eff}
    return run


# --------------------------------------------------------------------------- brute force
def brute_force(inverse, u, w):
    """T_w, sigma_{1,w}^2 and V_0 by double loops over rows (obviously correct, slow)."""
    n = len(w)
    W = w.sum()
    bins = sorted(set(inverse.tolist()))
    T, V0, plug = 0.0, 0.0, 0.0
    mu = {}
    for b in bins:
        rows = [i for i in range(n) if inverse[i] == b]
        Wb = sum(w[i] for i in rows)
        num = den = pairs = 0.0
        for i in rows:
            for j in rows:
                if i != j:
                    num += w[i] * w[j] * float(u[i] @ u[j])
                    den += w[i] * w[j]
                    pairs += (w[i] * w[j] * float(u[i] @ u[j])) ** 2
        mu[b] = sum(w[i] * u[i] for i in rows) / Wb if Wb > 0 else np.zeros(u.shape[1])
        plug += Wb / W * float(mu[b] @ mu[b])
        if den > 0:
            T += Wb / W * num / den
            V0 += 2.0 * (Wb / (W * den)) ** 2 * pairs
    s1 = 0.0
    for i in range(n):
        m = mu[inverse[i]]
        s1 += (w[i] * n / W * (2 * float(m @ u[i]) - float(m @ m) - plug)) ** 2
    return T, s1 / n, V0


def brute_force_jackknife(inverse, u, w):
    """T_J = n T_w - (n-1)/n sum_i T_w(without row i), each T_w recomputed by the double loop.

    Convention: if row i's bin keeps no weighted pair without it, that bin's
    ratio stays at its full-bin value.
    """
    n = len(w)

    def ratio_total(keep):
        W = w[keep].sum()
        total, ratios = 0.0, {}
        for b in sorted(set(inverse[keep].tolist())):
            rows = [i for i in range(n) if keep[i] and inverse[i] == b]
            num = sum(w[i] * w[j] * float(u[i] @ u[j]) for i in rows for j in rows if i != j)
            den = sum(w[i] * w[j] for i in rows for j in rows if i != j)
            ratios[b] = num / den if den > 1e-12 * sum(w[i] for i in rows) ** 2 else 0.0
            total += sum(w[i] for i in rows) * ratios[b]
        return total, W, ratios

    total, W, R = ratio_total(np.ones(n, bool))
    T = total / W
    loo = []
    for i in range(n):  # each deletion, recomputed from scratch
        keep = np.arange(n) != i
        if w[keep].sum() <= 1e-12 * W:
            loo.append(T)
            continue
        own = w[keep & (inverse == inverse[i])]
        if own.sum() ** 2 - (own ** 2).sum() > 1e-12 * own.sum() ** 2:
            t_i, W_i, _ = ratio_total(keep)
            loo.append(t_i / W_i)
        else:
            others = keep & (inverse != inverse[i])
            t_o = ratio_total(others)[0] if others.any() else 0.0
            loo.append((t_o + own.sum() * R[inverse[i]]) / w[keep].sum())
    loo = np.array(loo)
    return n * T - (n - 1) * loo.mean()


def brute_force_check(n_sets: int = 300, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_sets):  # small inputs, one at a time (the check itself)
        n = int(rng.integers(2, 31))
        d = int(rng.integers(1, 3))
        u = rng.normal(size=(n, d))
        w = rng.lognormal(0, 1, n)
        w[rng.random(n) < 0.1] = 0.0
        if w.sum() == 0:
            w[0] = 1.0
        inverse = rng.integers(0, max(1, n // 4), n)
        _, inverse = np.unique(inverse, return_inverse=True)
        fast = weighted_statistics(inverse, u, w, jackknife=True)
        T, s1, V0 = brute_force(inverse, u, w)
        T_J = brute_force_jackknife(inverse, u, w)
        rows.append({"n": n, "d": d, "T_err": abs(fast.ratio_estimate - T) / max(abs(T), 1e-300),
                     "T_J_err": abs(fast.estimate - T_J) / max(abs(T_J), 1e-300),
                     "sigma1_err": abs(fast.sigma1_sq - s1) / max(s1, 1e-300),
                     "V0_err": abs(fast.null_variance - V0) / max(V0, 1e-300)})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- runner
CELLS = {
    "sub_G2": (1, lambda: subgroup_cell(2, None, 0.0)),
    "sub_G4": (2, lambda: subgroup_cell(4, None, 0.0)),
    "sub_G8": (3, lambda: subgroup_cell(8, None, 0.0)),
    "power_G4_n368": (4, lambda: subgroup_cell(4, 1, 0.5)),
    "power_G4_n5000": (5, lambda: subgroup_cell(4, 3, 0.15)),
    "sub_G4_montecarlo": (14, lambda: subgroup_cell(4, None, 0.0, "monte-carlo")),
    "prev_calibrated": (6, lambda: prevalence_cell(0.0)[0]),
    "prev_delta0.5": (7, lambda: prevalence_cell(0.5)[0]),
    "prev_delta1": (8, lambda: prevalence_cell(1.0)[0]),
    "prev_delta0.5_B10": (11, lambda: prevalence_cell(0.5, n_bins=10)[0]),
    "prev_delta0.5_n5000": (12, lambda: prevalence_cell(0.5, 2500, 2500)[0]),
    "prev_calibrated_n5000": (13, lambda: prevalence_cell(0.0, 2500, 2500)[0]),
    "prev_calibrated_normal_test": (15, lambda: prevalence_normal_cell()),
    "diag_delta0.5_n1000_auto": (16, lambda: prevalence_diagnosis_cell(0.5, 500)),
    "diag_delta0.5_n1000_B10": (17, lambda: prevalence_diagnosis_cell(0.5, 500, 10)),
    "diag_delta0.5_n5000_auto": (18, lambda: prevalence_diagnosis_cell(0.5, 2500)),
    "diag_delta0.5_n5000_B10": (19, lambda: prevalence_diagnosis_cell(0.5, 2500, 10)),
    "lognormal_calibrated": (9, lambda: lognormal_cell(0.0)),
    "lognormal_delta0.5": (10, lambda: lognormal_cell(0.5)),
}


def run_cell(name: str, reps: int, out: Path) -> None:
    cell_id, make = CELLS[name]
    path = out / f"{name}.csv"
    done = set()
    if path.exists():
        done = set(pd.read_csv(path)["rep"].astype(int))
    todo = [r for r in range(reps) if r not in done]
    if not todo:
        return
    run = make()
    t0 = time.time()
    with open(path, "a", newline="") as fh:
        writer = None
        for r in todo:  # one data set per replicate (the unit of the study)
            row = {"rep": r, **run(np.random.default_rng([cell_id, r]))}
            if writer is None:
                writer = csv.DictWriter(fh, fieldnames=list(row))
                if not done:
                    writer.writeheader()
            writer.writerow(row)
            fh.flush()
    print(f"{name}: {len(todo)} data sets in {time.time() - t0:.0f} s", file=sys.stderr)


def mc_se(p: float, reps: int) -> float:
    return math.sqrt(max(p * (1 - p), 0.25 / reps) / reps)


def tables(out: Path) -> str:
    lines = []
    rate = lambda x: f"{x.mean():.3f} ({mc_se(x.mean(), x.size):.3f})"
    lines.append("### Subgroups: size (all groups calibrated) and power (one group miscalibrated)\n")
    lines.append("| cell | data sets | alpha | Bonferroni | Fisher | Stouffer | Bonferroni, asymptotic p | heterogeneity |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for name in ("sub_G2", "sub_G4", "sub_G8", "sub_G4_montecarlo", "power_G4_n368", "power_G4_n5000"):
        path = out / f"{name}.csv"
        if not path.exists():
            continue
        df = pd.read_csv(path)
        for a in ALPHAS:
            lines.append(f"| {name} | {len(df)} | {a:g} | " + " | ".join(
                rate(df[c] <= a) for c in ("global_bonferroni", "global_fisher", "global_stouffer",
                                           "global_bonferroni_asymptotic", "heterogeneity")) + " |")
    lines.append("\n### Subgroups: coverage of each group's 95% interval\n")
    lines.append("| cell | group sizes | coverage per group (MC s.e.) |")
    lines.append("|---|---|---|")
    for name in ("sub_G2", "sub_G4", "sub_G8", "sub_G4_montecarlo", "power_G4_n368", "power_G4_n5000"):
        path = out / f"{name}.csv"
        if not path.exists():
            continue
        df = pd.read_csv(path)
        G = len([c for c in df.columns if c.startswith("cover_")])
        lines.append(f"| {name} | {', '.join(map(str, sizes_for(G)))} | " + ", ".join(
            rate(df[f"cover_{g}"]) for g in range(G)) + " |")
    lines.append("\n### Prevalence: 50/50 case-control sample from a population with prevalence 5%\n")
    lines.append("Coverage is of the population's binned ECE² at the B the result used (0 for the calibrated "
                 "model).\n")
    lines.append("| cell | data sets | B | population binned ECE | unweighted coverage | adjusted coverage | "
                 "adjusted rejects ECE = 0 (0.05) | unweighted rejects (0.05) | mean T_J / ECE² | corr(T_J, se) | mean n_eff |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")

    def prevalence_row(name, df):
        tb = df["truth_binned"]
        ratio = f"{df['estimate'].mean() / tb.mean():.2f}" if tb.mean() > 0 else "–"
        return (f"| {name} | {len(df)} | {int(df['n_bins'].median())} | {math.sqrt(tb.mean()):.4f} | "
                f"{rate(df['unweighted_cover'])} | {rate(df['adjusted_cover'])} | {rate(df['adjusted_p'] <= 0.05)} | "
                f"{rate(df['unweighted_p'] <= 0.05)} | {ratio} | {np.corrcoef(df['estimate'], df['se'])[0, 1]:.2f} | "
                f"{df['n_eff'].mean():.0f} |")

    for name in ("prev_calibrated", "prev_delta0.5", "prev_delta1", "prev_delta0.5_B10", "prev_calibrated_n5000",
                 "prev_delta0.5_n5000"):
        path = out / f"{name}.csv"
        if path.exists():
            lines.append(prevalence_row(name, pd.read_csv(path)))
    older = out / "jackknife_only"
    if older.exists():
        lines.append("\nThe same cells with T_J and its jackknife se but the normal quantiles z_a, z_h at the "
                     "lower end (the intermediate version, files in `jackknife_only/`):\n")
        lines.append("| cell | data sets | B | population binned ECE | unweighted coverage | adjusted coverage | "
                     "adjusted rejects ECE = 0 (0.05) | unweighted rejects (0.05) | mean T_J / ECE² | corr(T_J, se) | mean n_eff |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for path in sorted(older.glob("prev_*.csv")):
            lines.append(prevalence_row(path.stem, pd.read_csv(path)))
    lines.append("\n### Prevalence: bias and standard errors of T_w and T_J (500 + 500 and 2500 + 2500, delta = 0.5)\n")
    lines.append("bias in units of the Monte Carlo sd of the estimator; se ratio = Monte Carlo sd / root mean "
                 "estimated variance (1 = right, > 1 = se too small).\n")
    lines.append("| cell | data sets | B | binned ECE² | mean T_w | mean T_J | bias/sd T_w | bias/sd T_J | "
                 "se ratio T_w, IF se | se ratio T_J, IF se | se ratio T_J, jackknife se | flagged approximate |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in ("diag_delta0.5_n1000_auto", "diag_delta0.5_n1000_B10", "diag_delta0.5_n5000_auto",
                 "diag_delta0.5_n5000_B10"):
        path = out / f"{name}.csv"
        if not path.exists():
            continue
        df = pd.read_csv(path)
        tb = df["truth_binned"].mean()
        sd_r, sd_j = df["ratio"].std(), df["jackknife"].std()
        se_if, se_j = math.sqrt(df["if_var"].mean()), math.sqrt(df["jack_var"].mean())
        lines.append(f"| {name} | {len(df)} | {int(df['n_bins'].median())} | {tb:.2e} | {df['ratio'].mean():.2e} | "
                     f"{df['jackknife'].mean():.2e} | {(df['ratio'].mean() - tb) / sd_r:.2f} | "
                     f"{(df['jackknife'].mean() - tb) / sd_j:.2f} | {sd_r / se_if:.2f} | {sd_j / se_if:.2f} | "
                     f"{sd_j / se_j:.2f} | {rate(df['flagged']) if 'flagged' in df else '–'} |")
    path = out / "prev_calibrated_normal_test.csv"
    if path.exists():
        df = pd.read_csv(path)
        ratio = df["estimate"].var() / df["null_variance"].mean()
        lines.append(f"\nNormal test z0 = T_w / sqrt(V_0) with prevalence weights, population-calibrated model, "
                     f"500 + 500 (the test the Monte Carlo null replaces), {len(df)} data sets: rejects at 0.05 in "
                     f"{rate(df['p_normal'] <= 0.05)}; mean T_w / sd(T_w) = {df['estimate'].mean() / df['estimate'].std():.2f}; "
                     f"Var(T_w) / mean V_0 = {ratio:.2f}.")
    lines.append("\n### Lognormal weights w = L exp(2p), n = 1000\n")
    lines.append("| model | data sets | weighted-population ECE | coverage | rejects (0.05) | rejects (0.10) | "
                 "Var(T_w) / mean V_0 | mean n_eff |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for name in ("lognormal_calibrated", "lognormal_delta0.5"):
        path = out / f"{name}.csv"
        if not path.exists():
            continue
        df = pd.read_csv(path)
        ratio = df["estimate"].var() / df["null_variance"].mean()
        # delta-method s.e. of a variance ratio: var of sample variance ~ 2 var^2 / (R - 1) (normal approx.)
        ratio_se = ratio * math.sqrt(2.0 / (len(df) - 1))
        lines.append(f"| {name} | {len(df)} | {math.sqrt(df['truth'].iloc[0]):.4f} | {rate(df['cover'])} | "
                     f"{rate(df['p'] <= 0.05)} | {rate(df['p'] <= 0.10)} | {ratio:.3f} ({ratio_se:.3f}) | "
                     f"{df['n_eff'].mean():.0f} |")
    bf = out / "brute_force.csv"
    if bf.exists():
        df = pd.read_csv(bf)
        lines.append(f"\nBrute force: {len(df)} random inputs (n = 2..30, d = 1..2, lognormal weights, 10% zero): "
                     f"largest relative error T_w {df['T_err'].max():.2e}, T_J {df['T_J_err'].max():.2e}, "
                     f"sigma_1w^2 {df['sigma1_err'].max():.2e}, "
                     f"V_0 {df['V0_err'].max():.2e}.")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "populations")
    ap.add_argument("--cells", nargs="*", default=list(CELLS))
    ap.add_argument("--tables", action="store_true")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.tables:
        print(tables(args.out))
        return 0
    if not (args.out / "brute_force.csv").exists():
        brute_force_check().to_csv(args.out / "brute_force.csv", index=False)
    for name in args.cells:
        run_cell(name, args.reps, args.out)
    print(tables(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
