"""The IPCW standard error of ``calib_ci(..., horizon=t)`` under heavy censoring: before and after.

Issue 35, point 5.  With 72-74% of the rows censored before the horizon the
spread of T across studies was 0.62-0.85 of the median reported standard
error.  The reported se was sqrt(sigma1^2 / n) with the plug-in
sigma1^2 = mean((psi - mean psi + phi)^2) (phi the influence of the
Kaplan-Meier G).  Its psi part uses the estimated bin means, and
E[mu-hat_b^2 U_i^2] carries Var(U) / c_b and the fourth moment E[U^4] / c_b^2
of the IPCW outcomes (values up to 1 / G(t-), about 10 here); the second-order
variance V_0 of T was left out.  The se is now
sqrt(sigma1_U^2 / n + V_0), sigma1_U^2 with the bin sums of psi^2 as
U-statistics over distinct rows (``calibtest.core.censoring``).  The
Kaplan-Meier term phi was right: dropping it moves the se by 1-3% here.

Both standard errors come from the same ``calib_ci`` call: "before" is
sqrt(res.sigma1_sq / n) (the plug-in, still reported as ``sigma1_sq``), its
interval ``adjusted_interval(T, se_before, threshold)``; "after" is the
result's own se and interval.  The test of ECE(t) = 0 (T / sqrt(V_0)) is the
same for both, so size and power are unchanged; coverage of a miscalibrated
model and the ratio sd(T) / median(se) are what change.

Designs (x ~ N(0, 1), horizon t = 1 unless said; risk models on the logit of
the true risk F: calibrated, ``over`` (+0.5 on the logit), ``extreme`` (slope
1.5 on the logit)):

* ``loglogistic-unif``: log-logistic times, S(s | x) = 1 / (1 + (s / a(x))^2),
  log a(x) = 0.5 - 0.8 x; censoring uniform on (0, c_max), c_max = 1.15 (about
  73% censored before t) or 1.05 (about 78%);
* ``gompertz-exp``: Gompertz times, hazard 0.3 e^{0.8 x} e^{0.5 s}; exponential
  censoring with rate 2.0 (about 75% censored before t);
* ``weibull-unif``: Weibull times, S(s | x) = exp(-(s / 2)^1.5 e^{0.8 x});
  uniform censoring on (0, 1.1) (about 77%);
* ``exp-indep60``: the design of ``survival_coverage.py`` (exponential times,
  H0(s) = 0.1 s, beta = 0.8, t = 5) with independent exponential censoring,
  60% censored before t (the designs where coverage and size must hold);
* ``exp-light30``: the same, 30% censored;
* ``exp-dep30-cox``: the same event times, censoring hazard 0.09 e^x (about
  30% censored before t, the patients at high risk leave early), analysed
  with the Cox model of the censoring on x (``censoring="cox"``), as the
  survival vignette's ``dep30`` design.

A study whose follow-up ends before t (the horizon is then refused) is
drawn again; the count is the ``redrawn`` column of the CSV.

Truth: the binned ECE^2(t) over the bins of r by ``scipy.integrate.quad`` in x
(r increasing in x, so each bin is an interval of x).

n = 300, 1000, 3000 with B = round(3 n^0.4) (n = 300 and 1000 for the last
three designs); N = 400 studies per cell (800 for the calibrated model's
size), modest for the shared machine: the Monte Carlo s.e. of a coverage near
0.95 is 0.011 and that of the ratio sd(T) / median(se) about
ratio / sqrt(2 N) = 0.035 (stated per cell from a bootstrap over the studies).

Run: ``nice -n 10 python vignettes/survival_heavy_censoring.py`` (about 3
minutes on one core; seeded; ``--tables SECONDS`` rewrites the .md from the
CSV).  Writes ``survival_heavy_censoring.csv`` and
``survival_heavy_censoring.md``.
"""
from __future__ import annotations

import math
import os
import sys
import time

import numpy as np
import pandas as pd
from scipy import integrate, stats

import calibtest as ct
from calibtest.core.intervals import adjusted_interval

HERE = os.path.dirname(os.path.abspath(__file__))
ALPHA = 0.05
N_STUDIES = int(os.environ.get("HEAVY_STUDIES", 400))
MODELS = {"calibrated": (0.0, 1.0), "over": (0.5, 1.0), "extreme": (0.0, 1.5)}


def n_bins(n: int) -> int:
    return max(2, round(3 * n ** 0.4))


# --------------------------------------------------------------------------- designs: F(t | x), times, censoring
def f_loglogistic(x, t):
    return 1.0 / (1.0 + (t / np.exp(0.5 - 0.8 * x)) ** -2.0)


def f_gompertz(x, t):
    return 1.0 - np.exp(-0.3 * np.exp(0.8 * x) * (np.exp(0.5 * t) - 1.0) / 0.5)


def f_weibull(x, t):
    return 1.0 - np.exp(-(t / 2.0) ** 1.5 * np.exp(0.8 * x))


def f_exponential(x, t):
    return 1.0 - np.exp(-0.1 * t * np.exp(0.8 * x))


def draw_times(design, rng, x):
    q = rng.uniform(size=x.size)
    if design.startswith("loglogistic"):
        return np.exp(0.5 - 0.8 * x) * np.sqrt(q / (1 - q))
    h = -np.log1p(-q)  # unit exponential: cumulative hazard at T
    if design.startswith("gompertz"):
        return np.log1p(0.5 * h / (0.3 * np.exp(0.8 * x))) / 0.5
    if design.startswith("weibull"):
        return 2.0 * (h / np.exp(0.8 * x)) ** (1 / 1.5)
    return h / (0.1 * np.exp(0.8 * x))


DESIGNS = {  # name: (F, horizon, censoring sampler)
    "loglogistic-unif73": (f_loglogistic, 1.0, lambda rng, x: rng.uniform(0, 1.15, x.size)),
    "loglogistic-unif77": (f_loglogistic, 1.0, lambda rng, x: rng.uniform(0, 1.08, x.size)),
    "loglogistic-unif83": (f_loglogistic, 1.0, lambda rng, x: rng.uniform(0, 1.02, x.size)),
    "gompertz-exp75": (f_gompertz, 1.0, lambda rng, x: rng.exponential(1 / 2.0, x.size)),
    "weibull-unif77": (f_weibull, 1.0, lambda rng, x: rng.uniform(0, 1.1, x.size)),
    "exp-indep60": (f_exponential, 5.0, lambda rng, x: rng.exponential(1 / 0.3, x.size)),
    "exp-light30": (f_exponential, 5.0, lambda rng, x: rng.exponential(1 / 0.1, x.size)),
    "exp-dep30-cox": (f_exponential, 5.0, lambda rng, x: rng.exponential(1 / (0.09 * np.exp(x)))),
}


def risk_of(F, model):
    a, b = MODELS[model]
    lg = np.log(F / (1 - F))
    return 1.0 / (1.0 + np.exp(-(a + b * lg)))


def truth(design, model, B):
    """Binned ECE^2(t) over the B equal-width bins of r, by quadrature in x (r increasing in x)."""
    f, horizon, _ = DESIGNS[design]
    a, b = MODELS[model]
    xs = np.linspace(-9, 9, 20001)
    r = risk_of(np.clip(f(xs, horizon), 1e-15, 1 - 1e-15), model)
    increasing = r[-1] > r[0]
    total = 0.0
    edges_r = np.arange(1, B) / B
    # x at each edge of r by interpolation on the fine grid (r monotone in x)
    order = np.argsort(r)
    edges_x = np.interp(edges_r, r[order], xs[order])
    edges_x = np.concatenate(([-np.inf], np.sort(edges_x), [np.inf]))
    del increasing, a, b

    def gap(x):
        F = f(x, horizon)
        return (F - risk_of(np.clip(F, 1e-15, 1 - 1e-15), model)) * stats.norm.pdf(x)
    for lo, hi in zip(edges_x[:-1], edges_x[1:]):
        mass = stats.norm.cdf(hi) - stats.norm.cdf(lo)
        if mass < 1e-300:
            continue
        num = integrate.quad(gap, max(lo, -12), min(hi, 12), limit=200, epsabs=1e-14)[0]
        total += num * num / mass
    return total


def simulate(design, rng, n, model):
    f, horizon, cens = DESIGNS[design]
    x = rng.normal(size=n)
    t = draw_times(design, rng, x)
    c = cens(rng, x)
    time_, event = np.minimum(t, c), (t <= c).astype(float)
    F = np.clip(f(x, horizon), 1e-12, 1 - 1e-12)
    return time_, event, risk_of(F, model), horizon, x


def covers(lower, upper, open_, value):
    return (lower < value <= upper) if open_ else (lower <= value <= upper)


def ratio_se(est, se, rng, reps=400):
    """sd(T) / median(se) and its bootstrap s.e. over the studies."""
    est, se = np.asarray(est), np.asarray(se)
    idx = rng.integers(0, est.size, size=(reps, est.size))
    boot = est[idx].std(axis=1, ddof=1) / np.median(se[idx], axis=1)
    return float(est.std(ddof=1) / np.median(se)), float(boot.std(ddof=1))


def cell(rng, design, n, model, value, studies):
    B = n_bins(n)
    est, se_old, se_new, cov_old, cov_new, rej, cens = [], [], [], [], [], [], []
    redrawn = 0
    for _ in range(studies):
        time_, event, risk, horizon, x = simulate(design, rng, n, model)
        while time_.max() < horizon:  # no follow-up beyond t (possible at 83% censored, n = 300): redraw
            redrawn += 1
            time_, event, risk, horizon, x = simulate(design, rng, n, model)
        cox = {"censoring": "cox", "censoring_covariates": x} if design.endswith("cox") else {}
        res = ct.calib_ci(time=time_, event=event, probs=risk, horizon=horizon, n_bins=B, alpha=ALPHA, **cox)
        old = math.sqrt(res.sigma1_sq / res.n)
        iv = adjusted_interval(res.estimate, old, res.threshold, ALPHA)
        est.append(res.estimate)
        se_old.append(old)
        se_new.append(res.se)
        cov_old.append(covers(iv.lower, iv.upper, iv.lower_open, value))
        cov_new.append(covers(res.ci_lower, res.ci_upper, res.ci_lower_open, value))
        rej.append(res.null_pvalue <= ALPHA)
        cens.append(res.survival.n_censored / res.n)
    boot = np.random.default_rng(len(est))
    r_old, r_old_se = ratio_se(est, se_old, boot)
    r_new, r_new_se = ratio_se(est, se_new, boot)
    k = len(est)
    return {"design": design, "model": model, "n": n, "B": B, "truth": value, "studies": k,
            "censored": float(np.mean(cens)), "ratio_before": r_old, "ratio_before_se": r_old_se,
            "ratio_after": r_new, "ratio_after_se": r_new_se,
            "coverage_before": float(np.mean(cov_old)), "coverage_after": float(np.mean(cov_new)),
            "coverage_se": math.sqrt(0.95 * 0.05 / k), "reject": float(np.mean(rej)),
            "reject_se": math.sqrt(max(np.mean(rej) * (1 - np.mean(rej)), 0.05 * 0.95) / k),
            "bias_z": (np.mean(est) - value) / (np.std(est, ddof=1) / math.sqrt(k)), "redrawn": redrawn}


def plan():
    out = []
    for design in ("loglogistic-unif73", "loglogistic-unif77", "gompertz-exp75", "weibull-unif77"):
        for n in (300, 1000, 3000):
            out += [(design, n, m) for m in MODELS]
    out += [("loglogistic-unif83", n, m) for n in (300, 1000) for m in MODELS]
    for design in ("exp-indep60", "exp-light30", "exp-dep30-cox"):
        out += [(design, n, m) for n in (300, 1000) for m in MODELS]
    return out


def fmt(v, se):
    return f"{v:.3f} ({se:.3f})"


def _beyond(df: pd.DataFrame) -> str:
    far = df[df.censored > 0.80]
    if far.empty:
        return "no cell was run."
    return (f"at {far.censored.min():.2f}-{far.censored.max():.2f} censored before t (G(t-) about 0.02), the ratio "
            f"after is {far.ratio_after.min():.2f}-{far.ratio_after.max():.2f}: the se is now too small there "
            "(a few rows with weights near 50 carry the fourth moments, which the U-statistics estimate with "
            f"large noise); coverage stays {far.coverage_after.min():.3f}-{far.coverage_after.max():.3f} because "
            "the lower end of the interval is set by the test.")


def _cox(df: pd.DataFrame) -> str:
    cox = df[df.design.str.endswith("cox")]
    if cox.empty:
        return ""
    return (f"* With the Cox model of the censoring the se is unchanged (the plug-in): its ratio is "
            f"{cox.ratio_after.min():.2f}-{cox.ratio_after.max():.2f}, i.e. the se is up to "
            f"{100 * (cox.ratio_after.max() - 1):.0f}% too small at 30% dependent censoring (the corrected form "
            "made it worse, up to 1.46, so it is applied to the Kaplan-Meier G only); coverage "
            f"{cox.coverage_after.min():.3f}-{cox.coverage_after.max():.3f} holds through the test's lower end. A "
            "defect of the Cox term left open.")


def write_md(df: pd.DataFrame, seconds: float) -> None:
    lines = ["# Survival: the IPCW standard error under heavy censoring (issue 35, point 5)", "",
             "Written by `vignettes/survival_heavy_censoring.py` (seeded; "
             f"{seconds / 60:.1f} minutes on one shared core). Designs, truth and the two standard errors are "
             "described in the script's docstring. N = "
             f"{N_STUDIES} studies per cell (twice that for the calibrated model): modest, for a shared machine; "
             "Monte Carlo s.e. in parentheses (coverage: sqrt(0.95 * 0.05 / N); ratio: bootstrap over the "
             "studies).", "",
             "**Before**: se = sqrt(plug-in sigma1^2 / n). **After**: se = sqrt(sigma1_U^2 / n + V_0) (unbiased bin "
             "moments of psi^2 plus the second-order variance of T). The ratio is sd(T) across studies over the "
             "median reported se (target 0.85-1.15). The test of ECE(t) = 0 is the same before and after "
             "(T / sqrt(V_0)): its rejection rate is the size for the calibrated model, the power otherwise.", "",
             "| design | n | censored before t | model | sd(T) / median se, before | after | coverage before | "
             "after | rejection rate | (T - truth) / MC s.e. |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in df.iterrows():
        lines.append(f"| {r.design} | {r.n} | {r.censored:.2f} | {r.model} | "
                     f"{fmt(r.ratio_before, r.ratio_before_se)} | {fmt(r.ratio_after, r.ratio_after_se)} | "
                     f"{fmt(r.coverage_before, r.coverage_se)} | {fmt(r.coverage_after, r.coverage_se)} | "
                     f"{fmt(r['reject'], r.reject_se)} | {r.bias_z:+.1f} |")
    heavy = df[(df.censored >= 0.70) & (df.censored <= 0.80)]
    outside = heavy[(heavy.ratio_after < 0.85) | (heavy.ratio_after > 1.15)]
    lines += ["", "## Summary", "",
              f"* At 70-80% censored before t ({len(heavy)} cells): the ratio before ranged "
              f"{heavy.ratio_before.min():.2f}-{heavy.ratio_before.max():.2f}, after "
              f"{heavy.ratio_after.min():.2f}-{heavy.ratio_after.max():.2f} (each with the bootstrap s.e. of its "
              f"row); {len(outside)} cell(s) outside 0.85-1.15 after.",
              f"* Coverage after: {df.coverage_after.min():.3f} at the lowest (criterion: at least 0.95 - 3 s.e. "
              f"= {0.95 - 3 * df.coverage_se.max():.3f}); before: {df.coverage_before.min():.3f}-"
              f"{df.coverage_before.max():.3f}.",
              f"* Size (calibrated model, same test before and after): "
              f"{df[df.model == 'calibrated']['reject'].min():.3f}-{df[df.model == 'calibrated']['reject'].max():.3f}.",
              "", "## Where the method still loses", "",
              "* Power is that of the test T / sqrt(V_0), which this change leaves alone: at n = 300 with ~75% "
              "censored it stays low (see the rejection rates of `over` and `extreme`); only the interval's "
              "width, not the test, gains.",
              f"* Beyond the band, {_beyond(df)}",
              _cox(df),
              "* The corrected first-order part can be 0 (floored) when T is near 0 and the bins are small, so "
              "that se = sqrt(V_0); the plug-in's noise in the cross term and in the Kaplan-Meier term phi is "
              "left in (1-3% of the variance here).",
              "* Within-bin spread of the true risk makes the U-statistics biased (they assume the rows of a "
              "bin share their mean), as for every binned variance; weighted survival results (`weights=`) keep "
              "the plug-in influence variance (not changed here).", ""]
    with open(os.path.join(HERE, "survival_heavy_censoring.md"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))


def main() -> None:
    if "--tables" in sys.argv:  # rewrite the .md from the CSV of the last run
        write_md(pd.read_csv(os.path.join(HERE, "survival_heavy_censoring.csv")), float(sys.argv[-1]))
        return
    start = time.time()
    rng = np.random.default_rng(20261127)
    rows = []
    truths = {}
    for design, n, model in plan():
        key = (design, model, n_bins(n))
        if key not in truths:
            truths[key] = 0.0 if model == "calibrated" else truth(design, model, n_bins(n))
        studies = 2 * N_STUDIES if model == "calibrated" else N_STUDIES
        rows.append(cell(rng, design, n, model, truths[key], studies))
        r = rows[-1]
        print(f"{design:20s} n={n:5d} {model:10s} cens {r['censored']:.2f} ratio {r['ratio_before']:.3f} -> "
              f"{r['ratio_after']:.3f} cov {r['coverage_before']:.3f} -> {r['coverage_after']:.3f} "
              f"rej {r['reject']:.3f} [{time.time() - start:.0f} s]", flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(os.path.join(HERE, "survival_heavy_censoring.csv"), index=False)
    write_md(df, time.time() - start)
    print(f"done in {time.time() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
