"""Where the prevalence-adjusted estimate's bias comes from (issue 35, point 7): a diagnosis, not a fix.

``calib_ci(y=, probs=, prevalence=pi)`` reweights a case-control sample by
w = pi / pi_hat (events) and (1 - pi) / (1 - pi_hat) (non-events) and reports
the jackknife T_J of the weighted ratio T_w (``calibtest.core.weighted``).
This script measures, against the population's binned ECE^2 at the bins the
result used (by quadrature on a grid of 400,001 points):

* T_w (the ratio), T_J (the package's estimate) and a candidate,
  the split-sample extrapolation T_R = 2 T_J(n) - mean T_J(n / 2), the second
  term averaged over 4 random splits of the cases and of the controls into
  halves (it removes a residual bias of order 1/n);
* per bin, the mean contribution of T_J minus the bin's true term, with the
  mean numbers of cases and controls in the bin: where the bias lives.

Designs (cases and controls drawn i.i.d. from the super-population, 500 + 500
unless said; logit r ~ N(mu, sd^2) with mu giving the prevalence):

* ``overspread``: prevalence 0.1, sd = 1, the model p = expit(mu + 1.5 (logit r - mu))
  (predictions too extreme), the issue's design;
* ``vignette``: prevalence 0.05, sd = 1.5, p = expit(logit r - 0.5), the design of
  ``vignettes/populations.py``;
* beyond: ``underspread`` (prevalence 0.1, slope 0.7), ``overspread_n5000``
  (2500 + 2500), ``overspread_B10`` (10 bins).

R = 300 data sets per design (Monte Carlo s.e. of a mean bias: sd / sqrt(R));
modest, for a shared machine.  Run: ``nice -n 10 python vignettes/prevalence_bias.py``
(about 4 minutes on one core; seeded).  Writes ``prevalence_bias.md``.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np
import pandas as pd
from scipy import integrate, optimize, special

from calibtest.core.partition import partition_rows
from calibtest.core.targets import prepare_target
from calibtest.core.weighted import prevalence_weights, weighted_statistics

HERE = os.path.dirname(os.path.abspath(__file__))
REPS = int(os.environ.get("PREV_BIAS_REPS", 300))


def population_mu(prev: float, sd: float) -> float:
    f = lambda mu: integrate.quad(lambda x: special.expit(mu + sd * x) * np.exp(-x * x / 2) / math.sqrt(2 * math.pi),  # noqa: E731
                                  -12, 12)[0] - prev
    return float(optimize.brentq(f, -10, 5))


def case_control_sample(rng, prev: float, mu: float, sd: float, model, ncase: int):
    """``(p, y)`` of ``ncase`` cases and ``ncase`` controls: the first of each among 3 ncase / prev people of the
    population (true risk expit(mu + sd x), x standard normal), with the model's predictions ``model(risk)``."""
    x = rng.standard_normal(int(3 * ncase / prev))
    r = special.expit(mu + sd * x)
    y = rng.random(x.size) < r
    idx = np.concatenate([np.flatnonzero(y)[:ncase], np.flatnonzero(~y)[:ncase]])
    return model(r[idx]), y[idx].astype(int)


def binned_terms(mu, sd, model, B):
    """Each bin's term P(b) (E[r - p | b])^2 of the population's binned ECE^2 (B equal-width bins of p)."""
    x = np.linspace(-12, 12, 400001)
    dens = np.exp(-x * x / 2)
    dens /= dens.sum()
    r = special.expit(mu + sd * x)
    p = model(r)
    b = np.minimum((p * B).astype(int), B - 1)
    mass, num = np.bincount(b, dens, B), np.bincount(b, dens * (r - p), B)
    out = np.zeros(B)
    pos = mass > 0
    out[pos] = num[pos] ** 2 / mass[pos]
    return out


def design(name):
    prev, sd, slope, shift, ncase, bins = 0.1, 1.0, 1.5, 0.0, 500, "auto"
    if name == "vignette":
        prev, sd, slope, shift = 0.05, 1.5, 1.0, -0.5
    elif name == "underspread":
        slope = 0.7
    elif name == "overspread_n5000":
        ncase = 2500
    elif name == "overspread_B10":
        bins = 10
    mu = population_mu(prev, sd)
    model = lambda r: special.expit(mu + shift + slope * (special.logit(r) - mu))  # noqa: E731
    return prev, sd, mu, model, ncase, bins


def t_j(inverse, u, w, m):
    return weighted_statistics(inverse, u, w, m, jackknife=True)


def run(name, reps):
    prev, sd, mu, model, ncase, bins = design(name)
    rng = np.random.default_rng([35, len(name)])
    rows, per_bin, cases_b, controls_b, terms = [], [], [], [], {}
    for _ in range(reps):
        p, yy = case_control_sample(rng, prev, mu, sd, model, ncase)
        data = prepare_target(yy, p)
        part = partition_rows(data, bins)
        B = part.n_bins
        if B not in terms:
            terms[B] = binned_terms(mu, sd, model, B)
        w, _ = prevalence_weights(yy == 1, prev)
        ws = t_j(part.inverse, data.u, w, part.m)
        halves = []
        for _ in range(4):
            c1, c0 = rng.permutation(ncase), ncase + rng.permutation(ncase)
            for h in (0, 1):
                sel = np.concatenate([c1[h::2], c0[h::2]])
                halves.append(t_j(part.inverse[sel], data.u[sel], w[sel], part.m).estimate)
        truth = float(terms[B].sum())
        rows.append({"B": B, "truth": truth, "T_w": ws.ratio_estimate, "T_J": ws.estimate,
                     "T_R": 2 * ws.estimate - float(np.mean(halves)), "se_J": math.sqrt(ws.jackknife_variance)})
        bb = np.minimum((p * B).astype(int), B - 1)
        cell_bin = np.zeros(part.m, dtype=int)
        cell_bin[part.inverse] = bb
        contrib = np.zeros(B)
        np.add.at(contrib, cell_bin, ws.contributions[:part.m])
        if B == rows[0]["B"]:
            per_bin.append(contrib - terms[B])
            cases_b.append(np.bincount(bb[yy == 1], minlength=B))
            controls_b.append(np.bincount(bb[yy == 0], minlength=B))
    df = pd.DataFrame(rows)
    return df, np.array(per_bin), np.array(cases_b), np.array(controls_b)


def summary_row(name, df):
    out = {"design": name, "R": len(df), "B": int(df.B.iloc[0]), "truth": df.truth.mean()}
    for col in ("T_w", "T_J", "T_R"):
        d = df[col] - df.truth
        out[f"{col}_mean"] = df[col].mean()
        out[f"{col}_rel"] = d.mean() / df.truth.mean()
        out[f"{col}_z"] = d.mean() / (d.std(ddof=1) / math.sqrt(len(df)))
        out[f"{col}_sd"] = df[col].std(ddof=1)
    out["se_J_over_sd"] = math.sqrt(np.mean(df.se_J ** 2)) / df.T_J.std(ddof=1)
    return out


def main() -> None:
    start = time.time()
    lines = ["# The prevalence-adjusted estimate: where its bias comes from (issue 35, point 7)", "",
             "Written by `vignettes/prevalence_bias.py` (seeded). Designs and estimators in the script's "
             f"docstring; R = {REPS} data sets per design (fewer for 2500 + 2500), modest for a shared machine. "
             "**The package's estimate (T_J) is not changed by this work**: the candidate T_R below removes the "
             "bias on these designs but its standard error is not derived yet (see the end).", "",
             "| design | R | B | true binned ECE^2 | mean T_w (bias %, bias / MC s.e.) | mean T_J (package) | "
             "mean T_R (candidate) | sd T_J | sd T_R | jackknife se / sd(T_J) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    attribution = []
    for name in ("overspread", "vignette", "underspread", "overspread_B10", "overspread_n5000"):
        reps = REPS if name != "overspread_n5000" else max(REPS // 3, 50)
        df, per_bin, cb, kb = run(name, reps)
        s = summary_row(name, df)
        f = lambda c: f"{s[c + '_mean']:.3e} ({100 * s[c + '_rel']:+.0f}%, {s[c + '_z']:+.1f})"  # noqa: E731
        lines.append(f"| {name} | {s['R']} | {s['B']} | {s['truth']:.3e} | {f('T_w')} | {f('T_J')} | {f('T_R')} | "
                     f"{s['T_J_sd']:.2e} | {s['T_R_sd']:.2e} | {s['se_J_over_sd']:.2f} |")
        if name in ("overspread", "vignette"):
            bias, se = per_bin.mean(0), per_bin.std(0, ddof=1) / math.sqrt(len(per_bin))
            sparse = kb.mean(0) < 5
            # the up-weighted class: controls at prevalence < 0.5 (weight (1 - pi) / 0.5 > pi / 0.5)
            attribution.append(f"* `{name}`: bins whose mean number of controls (the up-weighted class) is below 5 "
                               f"carry {bias[sparse].sum():+.2e} of the total bias {bias.sum():+.2e} of T_J "
                               f"(they hold {100 * cb.mean(0)[sparse].sum() / (cb.mean(0).sum()):.0f}% of the cases "
                               f"and {100 * kb.mean(0)[sparse].sum() / kb.mean(0).sum():.1f}% of the controls); "
                               "the three bins of largest bias: " + ", ".join(
                                   f"bin {b} ({cb.mean(0)[b]:.1f} cases, {kb.mean(0)[b]:.1f} controls, bias "
                                   f"{bias[b]:+.1e}, {bias[b] / se[b]:+.1f} s.e.)"
                                   for b in np.argsort(-np.abs(np.where(se > 0, bias, 0.0)))[:3]))
        print(name, f"{time.time() - start:.0f} s", flush=True)
    lines += ["", "Bias % is of the true binned ECE^2; bias / MC s.e. is the mean error over its Monte Carlo s.e.", "",
              "## Where the bias lives", ""] + attribution + [
        "", "## Why the jackknife leaves it, and what is not fixed", "",
        "* In a bin where the up-weighted class (the controls, weight (1 - pi) / 0.5, 9 to 19 times a case's) "
        "has 0, 1 or 2 rows, the weighted pair ratio of the bin swings with that count: with no control the bin "
        "holds case pairs only (U = 1 - p > 0), with one control the control-case pairs dominate (ratio about "
        "-p (1 - p)), with two the control-control pair does (about p^2). The bin's term is a rational function "
        "of the controls' bin probability, which no function of a binomial count estimates without bias; its "
        "expansion in 1 / (count) does not converge when the count is O(1), so the delete-one jackknife, which "
        "removes the 1/n term of a smooth function of means, leaves a bias of order 1/n (halving the sample "
        "doubles it: the candidate T_R uses exactly that).",
        "* T_R = 2 T_J(n) - T_J(n/2) brings the mean within a few Monte Carlo s.e. of the truth here, at the "
        "price of a larger spread (sd T_R against sd T_J in the table). It is not adopted: its standard error "
        "(a delete-a-group jackknife of T_R, or a bootstrap) and the coverage of an interval built on it are not "
        "derived or measured yet, and it depends on random splits. Fewer bins (B = 10) shrink the bias, as the "
        "populations vignette showed, by putting more controls in each bin.",
        "* Follow-up at the bins the package chooses (the prevalence-weighted automatic B), 2,000 samples per "
        "design: whether the fixed case/control counts explain the bias (they explain little), an iterated "
        "jackknife and a stricter B: `prevalence_strata.md`.", ""]
    with open(os.path.join(HERE, "prevalence_bias.md"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
    print(f"done in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
