"""Simulation study of calib_compare: size, coverage and power.

Run from the repository root::

    python vignettes/compare_study.py            # 1000 replications per point (about 15 minutes)
    python vignettes/compare_study.py --reps 100 # quick look

Writes ``vignettes/compare_study.md`` (all numbers with Monte Carlo standard
errors) and ``vignettes/compare_study_power.png``.

Designs (y ~ Bernoulli(q) throughout, binary mode, automatic bins):

1. size at equal ECE: q ~ U(0.1, 0.9); A predicts q + 0.05, B predicts q - 0.05 (same rows);
2. size, both calibrated: p ~ U(0, 1); A predicts p, B the midpoint of p's fifth;
3. coverage of the interval for Delta when the ECEs differ: A = expit(1.5 logit q)
   (over-confident) against B = q + 0.02, and against the calibrated B = q; the true
   Delta by numerical integration;
4. power: A = expit(beta logit q) against B = expit(1.2 logit q), beta from 1.2 to 1.8.

Methods compared: the paired z test (``variance="corrected"``, the default), the
same with ``variance="plugin"`` (first order + second order without the bias
correction), the z test ignoring the pairing (``paired=False``), the naive rule
"the two adjusted 95% intervals of calib_ci do not overlap", and a paired
bootstrap of T_A - T_B (200 resamples of the shared rows, vectorised): its
percentile interval, and the normal interval with the bootstrap standard error.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import integrate
from scipy.special import expit, logit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import calibtest as ct  # noqa: E402

ALPHA = 0.05
Z_HALF = 1.959963984540054
N_BOOT = 200
METHODS = ("paired", "plugin", "unpaired", "naive", "bootstrap", "boot_se")
LABELS = {"paired": "paired z (corrected, default)", "plugin": "paired z (plug-in V1 + V2)",
          "unpaired": "z ignoring pairing", "naive": "non-overlapping intervals",
          "bootstrap": "paired bootstrap (percentile)", "boot_se": "paired bootstrap (normal, bootstrap s.e.)"}


# ------------------------------------------------------------------ designs
def shift_design(delta_a, delta_b):
    def make(rng, n):
        q = rng.uniform(0.1, 0.9, n)
        y = (rng.random(n) < q).astype(float)
        return y, q + delta_a, q + delta_b
    return make


def calibrated_design(rng, n):
    p = rng.uniform(0.0, 1.0, n)
    y = (rng.random(n) < p).astype(float)
    return y, p, (np.floor(p * 5) + 0.5) / 5


def overconfident_design(beta, shift_b, beta_b=None):
    """A = expit(beta logit q); B = q + shift_b, or expit(beta_b logit q) when beta_b is given."""
    def make(rng, n):
        q = rng.uniform(0.1, 0.9, n)
        y = (rng.random(n) < q).astype(float)
        pb = q + shift_b if beta_b is None else expit(beta_b * logit(q))
        return y, expit(beta * logit(q)), pb
    return make


def true_ece_sq_overconfident(beta):
    """ECE^2 of expit(beta logit q) for q ~ U(0.1, 0.9): (1/0.8) int (expit(beta logit q) - q)^2 dq."""
    return integrate.quad(lambda q: (expit(beta * logit(q)) - q) ** 2, 0.1, 0.9)[0] / 0.8


# ------------------------------------------------------------------ bootstrap
def _boot_T(inv, u, idx, m):
    """Debiased T on each bootstrap resample (rows idx[r]); bins are fixed by each row's prediction."""
    R, n = idx.shape
    key = (np.arange(R)[:, None] * m + inv[idx]).ravel()
    uu = u[idx].ravel()
    c = np.bincount(key, minlength=R * m).reshape(R, m)
    s = np.bincount(key, weights=uu, minlength=R * m).reshape(R, m)
    q = np.bincount(key, weights=uu * uu, minlength=R * m).reshape(R, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(c >= 2, (s * s - q) / (c - 1.0), 0.0)
    return term.sum(axis=1) / n


def paired_bootstrap(res_a, res_b, rng, n_boot=N_BOOT):
    """T_A* - T_B* over resamples of the shared rows (and the resample indices)."""
    inv_a, m_a = res_a.partition.inverse, res_a.partition.m
    inv_b, m_b = res_b.partition.inverse, res_b.partition.m
    idx = rng.integers(0, res_a.n, size=(n_boot, res_a.n))
    diff = _boot_T(inv_a, res_a.data.u[:, 0], idx, m_a) - _boot_T(inv_b, res_b.data.u[:, 0], idx, m_b)
    return diff, idx


def check_bootstrap(rng):
    """The vectorised resample statistic equals calib_ci on the explicitly resampled rows."""
    y, pa, _ = shift_design(0.05, -0.02)(rng, 300)
    ra = ct.calib_ci(y=y, probs=pa)
    inv, m = ra.partition.inverse, ra.partition.m
    idx = rng.integers(0, 300, size=(3, 300))
    fast = _boot_T(inv, ra.data.u[:, 0], idx, m)
    for r in range(3):
        slow = ct.calib_ci(y=y[idx[r]], probs=pa[idx[r]], n_bins=ra.n_bins).estimate
        assert abs(fast[r] - slow) < 1e-12, (fast[r], slow)


# ------------------------------------------------------------------ one design point
def run_point(make, n, reps, seed, true_delta):
    rng = np.random.default_rng(seed)
    reject = {m: np.zeros(reps, bool) for m in METHODS}
    cover = {m: np.zeros(reps, bool) for m in ("paired", "plugin", "unpaired", "bootstrap", "boot_se")}
    length = {m: np.zeros(reps) for m in cover}
    est = np.zeros(reps)
    var = {m: np.zeros(reps) for m in ("paired", "plugin", "unpaired")}
    for r in range(reps):
        y, pa, pb = make(rng, n)
        ra, rb = ct.calib_ci(y=y, probs=pa), ct.calib_ci(y=y, probs=pb)
        est[r] = ra.estimate - rb.estimate
        for m, opts in (("paired", {}), ("plugin", {"variance": "plugin"}), ("unpaired", {"paired": False})):
            c = ct.calib_compare(ra, rb, **opts)
            reject[m][r] = c.pvalue < ALPHA
            cover[m][r] = c.ci_lower <= true_delta <= c.ci_upper
            length[m][r] = c.ci_upper - c.ci_lower
            var[m][r] = c.se ** 2
        reject["naive"][r] = (ra.ci_lower > rb.ci_upper) or (rb.ci_lower > ra.ci_upper)
        boot, _ = paired_bootstrap(ra, rb, rng)
        intervals = {"bootstrap": np.quantile(boot, [ALPHA / 2, 1 - ALPHA / 2]),
                     "boot_se": est[r] + np.array([-1.0, 1.0]) * Z_HALF * boot.std(ddof=1)}
        for m, (lo, hi) in intervals.items():
            reject[m][r] = not (lo <= 0.0 <= hi)
            cover[m][r] = lo <= true_delta <= hi
            length[m][r] = hi - lo
    return {"reject": {m: v.mean() for m, v in reject.items()},
            "cover": {m: v.mean() for m, v in cover.items()},
            "length": {m: v.mean() for m, v in length.items()},
            "var_ratio": {m: v.mean() / est.var(ddof=1) for m, v in var.items()},
            "mean_est": est.mean(), "sd_est": est.std(ddof=1), "reps": reps}


def se_rate(p, reps):
    return np.sqrt(max(p * (1 - p), 1e-12) / reps)


def fmt_rate(p, reps):
    return f"{p:.3f} ({se_rate(p, reps):.3f})"


# ------------------------------------------------------------------ study
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args(argv)
    reps = args.reps
    check_bootstrap(np.random.default_rng(args.seed))
    t0 = time.perf_counter()
    ns = (500, 2000)
    seeds = iter(np.random.SeedSequence(args.seed).generate_state(64))
    lines = ["# Comparing two models' calibration: size, coverage and power of `calib_compare`", "",
             f"Generated by `python vignettes/compare_study.py --reps {reps}` (seed {args.seed}); "
             f"{reps} replications per point. Monte Carlo standard errors in parentheses. "
             "The derivation of the variance is in `docs/compare.md`.", "",
             "Methods: " + "; ".join(f"**{m}** = {LABELS[m]}" for m in METHODS) + ". The bootstrap uses "
             f"{N_BOOT} resamples of the shared rows (fixed bins) and rejects when 0 is outside its "
             "95% percentile interval, or outside T_A - T_B -/+ 1.96 x (bootstrap s.d.); the naive rule rejects when the two adjusted 95% intervals of "
             "`calib_ci` do not overlap.", ""]

    # 1-2: size
    size_designs = [("equal ECE: A = q + 0.05, B = q - 0.05", shift_design(0.05, -0.05)),
                    ("both calibrated: A = p, B = coarsened p (fifths)", calibrated_design)]
    lines += ["## Size (true Delta = 0), nominal 0.05", "",
              "| design | n | " + " | ".join(METHODS) + " | E[se^2]/Var (paired) | E[se^2]/Var (plugin) |",
              "|---|---|" + "---|" * len(METHODS) + "---|---|"]
    for name, make in size_designs:
        for n in ns:
            res = run_point(make, n, reps, next(seeds), 0.0)
            lines.append(f"| {name} | {n} | " + " | ".join(fmt_rate(res["reject"][m], reps) for m in METHODS)
                         + f" | {res['var_ratio']['paired']:.2f} | {res['var_ratio']['plugin']:.2f} |")
            print(name, n, res["reject"], f"{time.perf_counter() - t0:.0f}s", flush=True)
    lines += ["", f"Pass criterion: rejection rate <= 0.05 + 3 s.e. = "
              f"{ALPHA + 3 * se_rate(ALPHA, reps):.3f}. `E[se^2]/Var` is the mean estimated variance over the "
              "Monte Carlo variance of T_A - T_B (1 = unbiased).", ""]

    # 3: coverage
    beta = 1.5
    ece_a = true_ece_sq_overconfident(beta)
    cov_designs = [(f"A = expit({beta} logit q), B = q + 0.02", overconfident_design(beta, 0.02), ece_a - 0.02**2),
                   (f"A = expit({beta} logit q), B = q (calibrated)", overconfident_design(beta, 0.0), ece_a)]
    cov_methods = ("paired", "plugin", "unpaired", "bootstrap", "boot_se")
    lines += ["## Coverage of the 95% interval for Delta when the ECEs differ", "",
              f"True ECE_A^2 = {ece_a:.6f} by numerical integration (`scipy.integrate.quad`).", "",
              "| design | true Delta | n | " + " | ".join(f"coverage {m}" for m in cov_methods)
              + " | " + " | ".join(f"length {m}" for m in cov_methods) + " | power (paired) |",
              "|---|---|---|" + "---|" * (2 * len(cov_methods)) + "---|"]
    for name, make, delta in cov_designs:
        for n in ns:
            res = run_point(make, n, reps, next(seeds), delta)
            lines.append(f"| {name} | {delta:.6f} | {n} | "
                         + " | ".join(fmt_rate(res["cover"][m], reps) for m in cov_methods) + " | "
                         + " | ".join(f"{res['length'][m]:.5f}" for m in cov_methods)
                         + f" | {fmt_rate(res['reject']['paired'], reps)} |")
            print(name, n, res["cover"], f"{time.perf_counter() - t0:.0f}s", flush=True)
    lines += ["", f"Pass criterion: coverage >= 0.95 - 3 s.e. = {1 - ALPHA - 3 * se_rate(ALPHA, reps):.3f}.", ""]

    # 4: power
    betas = (1.2, 1.3, 1.4, 1.5, 1.6, 1.8)
    ece_b = true_ece_sq_overconfident(1.2)
    deltas = [true_ece_sq_overconfident(b) - ece_b for b in betas]
    power = {n: {m: [] for m in METHODS} for n in ns}
    lines += ["## Power: A = expit(beta logit q) against B = expit(1.2 logit q)", "",
              "Both models are over-confident (beta > 1), so their errors are positively correlated on the "
              "shared rows (the typical case of a model and a partly recalibrated version of it). True Delta "
              f"= ECE^2(beta) - ECE^2(1.2) by numerical integration (ECE^2(1.2) = {ece_b:.6f}). At beta = 1.2 "
              "the models are identical, T_A - T_B = 0 exactly and no method rejects. (In the equal-ECE "
              "size design the models err in opposite directions and the correlation of their errors is "
              "negative.)", "",
              "| n | beta | Delta | " + " | ".join(METHODS) + " |", "|---|---|---|" + "---|" * len(METHODS)]
    for n in ns:
        for beta, delta in zip(betas, deltas):
            res = run_point(overconfident_design(beta, None, 1.2), n, reps, next(seeds), delta)
            for m in METHODS:
                power[n][m].append(res["reject"][m])
            lines.append(f"| {n} | {beta} | {delta:.5f} | "
                         + " | ".join(fmt_rate(res["reject"][m], reps) for m in METHODS) + " |")
            print("power", n, beta, res["reject"], f"{time.perf_counter() - t0:.0f}s", flush=True)
    lines += ["", "![power](compare_study_power.png)", ""]
    _plot(power, deltas, ns, reps)

    lines += _real_data_section()
    lines += ["", f"Total run time: {time.perf_counter() - t0:.0f} s.", ""]
    (HERE / "compare_study.md").write_text("\n".join(lines))
    print("wrote", HERE / "compare_study.md")


def _plot(power, deltas, ns, reps):
    """Power against the true Delta, one panel per n."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    x = np.asarray(deltas)
    fig, axes = plt.subplots(1, len(ns), figsize=(10, 4), sharey=True)
    for ax, n in zip(axes, ns):
        for m in METHODS:
            p = np.array(power[n][m])
            ax.errorbar(x, p, yerr=2 * np.sqrt(p * (1 - p) / reps), marker="o", ms=3, capsize=2, label=LABELS[m])
        ax.axhline(ALPHA, color="grey", lw=0.8, ls="--")
        ax.set_title(f"n = {n}")
        ax.set_xlabel("Delta = ECE_A^2 - ECE_B^2")
    axes[0].set_ylabel("rejection rate (+/- 2 MC s.e.)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(HERE / "compare_study_power.png", dpi=110)
    plt.close(fig)


def _real_data_section():
    import pandas as pd
    tcal = HERE.parents[1] / "shared" / "data" / "tcal"
    if not tcal.is_dir():
        return ["## Real classifiers", "", "(shared/data/tcal not available: section skipped)"]
    out = ["## Real classifiers (T-Cal data, top-1 calibration)", "",
           "The CSV files do not document that their rows are the same test images in the same order, "
           "so these comparisons are **unpaired** (`paired=False`), which is valid either way.", ""]
    for prefix, K in (("cifar10", 10), ("cifar100", 100)):
        files = sorted(tcal.glob(f"{prefix}_*.csv"))
        results = [ct.calib_ci("correct ~ confidence", data=pd.read_csv(f), n_classes=K) for f in files]
        names = [f.stem.replace(prefix + "_", "") for f in files]
        pw = ct.calib_compare(results, paired=False, names=names)
        t = pw.table
        out += [f"**{prefix.upper()}** (K = {K}, n = {results[0].n} each); ECE^2 estimates: "
                + ", ".join(f"{nm} {r.estimate:.5f}" for nm, r in zip(names, results)), "",
                "| A | B | Delta | se | z | p | p (Holm) |", "|---|---|---|---|---|---|---|"]
        out += [f"| {r.model_a} | {r.model_b} | {r.estimate:.5f} | {r.se:.5f} | {r.statistic:.2f} | "
                f"{r.pvalue:.3g} | {r.pvalue_holm:.3g} |" for r in t.itertuples()]
        out.append("")
    return out


if __name__ == "__main__":
    main()
