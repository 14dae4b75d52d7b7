"""Coverage and size of ``calib_ci(..., horizon=t)`` with censored event times.

Designs (held out: none was used to build the method):

* event times given a covariate x ~ N(0, 1), S(s | x) = exp(-H0(s) exp(0.8 x)),
  exponential (H0(s) = 0.1 s) or Weibull (H0(s) = (0.1 s)^1.5), horizon t = 5;
* risk models r(x) = 1 - exp(-a H0(t) exp(b 0.8 x)): calibrated (a = b = 1),
  over-predicting (a = 1.3), under-predicting (a = 0.7), too extreme (b = 1.5);
* censoring: none; independent exponential censoring with 30% or 60% of the
  rows censored before t (``indep30``, ``indep60``); censoring that depends on
  the covariate, hazard c exp(x) with 30% censored before t (``dep30``),
  analysed with the Kaplan-Meier weights (``censoring="km"``, biased there by
  design) and with the Cox model on x (``censoring="cox"``);
* n = 300, 1000, 3000, 10^4 with B = round(3 n^0.4) (the package's rate rule,
  29, 48, 74, 120 bins), fixed so that the truth is one number per cell.

Truth: the binned ECE^2(t) = sum_b (int_b (F - r) phi dx)^2 / int_b phi dx over
the bins of r (each bin an interval of x, r increasing in x), by
``scipy.integrate.quad``; 0 for the calibrated model.

For each cell, N studies: coverage of the 95% interval (0 counts as inside
``[0, u]`` but not inside ``(0, u]``), rejection rate of the test of
H0: calibrated at t (its size for the calibrated model), the mean of T minus
the truth in units of its Monte Carlo s.e., the ratio of the mean (and of the
median) reported se to the standard deviation of T over the studies, the share
of rows censored before t and the median of the largest IPCW weight.

A second study compares the chosen IPCW estimator with pseudo-observations
(the jackknife pseudo-values of the Kaplan-Meier risk by t, Andersen, Klein and
Rosthoj 2003, used as the outcome with the same T, treating them as
independent rows) on the independent-censoring designs at n = 1000 and 3000.

Run: ``nice -n 10 python vignettes/survival_coverage.py`` (about 10 minutes on
one core; seeded).  Writes ``survival_coverage.csv`` and
``survival_pseudo.csv`` next to this file.
"""
from __future__ import annotations

import math
import os
import sys
import time

import numpy as np
import pandas as pd
from scipy import integrate, optimize, stats

import calibtest as ct
from calibtest.core.weighted import weighted_null_variance

HERE = os.path.dirname(os.path.abspath(__file__))
HORIZON, BETA, ALPHA = 5.0, 0.8, 0.05
N_STUDIES = int(os.environ.get("SURV_STUDIES", 400))
NS = (300, 1000, 3000, 10_000)
MODELS = {"calibrated": (1.0, 1.0), "over": (1.3, 1.0), "under": (0.7, 1.0), "extreme": (1.0, 1.5)}
DISTS = {"exponential": lambda s: 0.1 * s, "weibull": lambda s: (0.1 * s) ** 1.5}


def n_bins(n: int) -> int:
    return max(2, round(3 * n ** 0.4))


def risk_of(x, dist, model):
    a, b = MODELS[model]
    return 1 - np.exp(-a * DISTS[dist](HORIZON) * np.exp(b * BETA * x))


def truth(dist: str, model: str, B: int) -> float:
    """Binned ECE^2(t) over bins of r, by quadrature in x (r increasing in x)."""
    a, b = MODELS[model]
    h0 = DISTS[dist](HORIZON)
    edges_r = np.arange(1, B) / B
    edges_x = (np.log(-np.log(1 - edges_r)) - np.log(a * h0)) / (b * BETA)
    edges_x = np.concatenate(([-np.inf], edges_x, [np.inf]))
    gap = lambda x: ((1 - np.exp(-h0 * np.exp(BETA * x))) - (1 - np.exp(-a * h0 * np.exp(b * BETA * x)))) \
        * stats.norm.pdf(x)
    total = 0.0
    for lo, hi in zip(edges_x[:-1], edges_x[1:]):
        mass = stats.norm.cdf(hi) - stats.norm.cdf(lo)
        if mass < 1e-300:
            continue
        num = integrate.quad(gap, max(lo, -12), min(hi, 12), limit=200, epsabs=1e-14)[0]
        total += num * num / mass
    return total


def event_times(rng, n, dist):
    x = rng.normal(size=n)
    e = rng.exponential(size=n) / np.exp(BETA * x)  # H0(T) = E / exp(beta x)
    t = e / 0.1 if dist == "exponential" else (e ** (1 / 1.5)) / 0.1
    return x, t


def censoring_rate(dist: str, share: float, dependent: bool) -> float:
    """The censoring hazard c giving ``share`` of the rows censored before t (on 400,000 simulated rows)."""
    rng = np.random.default_rng(12345)
    x, t = event_times(rng, 400_000, dist)
    e = rng.exponential(size=x.size)
    scale = np.exp(x) if dependent else 1.0

    def gap(log_c):
        c = e / (math.exp(log_c) * scale)
        return np.mean(c < np.minimum(t, HORIZON)) - share
    return math.exp(optimize.brentq(gap, -10, 5))


def simulate(rng, n, dist, model, cens):
    x, t = event_times(rng, n, dist)
    if cens == "none":
        c = np.full(n, np.inf)
    else:
        rate, dependent = CENS_RATES[(dist, cens)], cens.startswith("dep")
        c = rng.exponential(size=n) / (rate * (np.exp(x) if dependent else 1.0))
    time_ = np.minimum(t, c)
    event = (t <= c).astype(float)
    return time_, event, risk_of(x, dist, model), x


def pseudo_values(time_, event, horizon):
    """Jackknife pseudo-values n F(t) - (n - 1) F_-i(t) of the Kaplan-Meier risk by t, vectorised."""
    n = time_.size
    times, index, counts = np.unique(time_, return_inverse=True, return_counts=True)
    d = np.bincount(index, weights=event, minlength=times.size)
    r = (n - np.cumsum(counts) + counts).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        full = np.log1p(-d / r)
        minus = np.where(r > 1, np.log1p(-np.where(r > 1, d / (r - 1), 0.0)), 0.0)  # R_k - 1 at risk
    last = np.searchsorted(times, horizon, side="right")  # times[:last] <= horizon
    full, minus = full[:last], minus[:last]
    s_full = math.exp(full.sum())
    cum_minus = np.concatenate(([0.0], np.cumsum(minus)))
    cum_full = np.concatenate(([0.0], np.cumsum(full)))
    k = index
    inside = k < last
    log_s = np.full(n, cum_minus[last])  # X_i > t: every risk set before t loses row i
    ki = k[inside]
    own = np.where(r[ki] > 1, np.log1p(-np.where(r[ki] > 1, (d[ki] - event[inside]) / (r[ki] - 1), 0.0)), 0.0)
    log_s[inside] = cum_minus[ki] + own + (cum_full[last] - cum_full[ki + 1])
    return n * (1 - s_full) - (n - 1) * (1 - np.exp(log_s))


def pseudo_interval(pv, risk, B):
    """T on pseudo-value rows, se from the plain influence (rows as independent), the data-based V_0 test."""
    n = pv.size
    u = pv - risk
    bins = np.minimum(np.floor(risk * B + 1e-9).astype(int), B)
    m = B + 1
    c = np.bincount(bins, minlength=m).astype(float)
    s = np.bincount(bins, weights=u, minlength=m)
    q = np.bincount(bins, weights=u * u, minlength=m)
    keep = c >= 2
    t = float(np.sum((s[keep] ** 2 - q[keep]) / (c[keep] - 1)) / n)
    mu = np.divide(s, c, out=np.zeros(m), where=c > 0)[bins]
    psi = 2 * mu * u - mu * mu
    se = math.sqrt(np.mean((psi - psi.mean()) ** 2) / n)
    v0 = weighted_null_variance(bins, u[:, None], np.ones(n), m)
    reject = t / math.sqrt(v0) > stats.norm.isf(ALPHA)
    z_h, z_a = stats.norm.isf(ALPHA / 2), stats.norm.isf(ALPHA)
    tp = max(t, 0.0)
    upper = tp + z_h * se
    if not reject:
        lower, open_ = 0.0, False
    elif tp / 2 <= tp - z_h * se:
        lower, open_ = tp - z_h * se, False
    elif tp - z_a * se < tp / 2:
        lower, open_ = max(0.0, tp - z_a * se), max(0.0, tp - z_a * se) == 0.0
    else:
        lower, open_ = tp / 2, False
    return t, se, lower, upper, open_, reject


def covers(lower, upper, open_, value):
    return (lower < value <= upper) if open_ else (lower <= value <= upper)


def cell(rng, n, dist, model, cens, method, true_value):
    B = n_bins(n)
    est, ses, cov, rej, censored, weight = [], [], [], [], [], []
    for _ in range(N_STUDIES):
        time_, event, risk, x = simulate(rng, n, dist, model, cens)
        censored.append(np.mean((event == 0) & (time_ < HORIZON)))
        kwargs = {"censoring": "cox", "censoring_covariates": x} if method == "cox" else {}
        if method == "pseudo":
            t, se, lo, up, open_, reject = pseudo_interval(pseudo_values(time_, event, HORIZON), risk, B)
        else:
            res = ct.calib_ci(time=time_, event=event, probs=risk, horizon=HORIZON, n_bins=B, alpha=ALPHA,
                              **kwargs)
            t, se, lo, up, open_, reject = (res.estimate, res.se, res.ci_lower, res.ci_upper, res.ci_lower_open,
                                            res.null_pvalue <= ALPHA)
            weight.append(res.survival.max_weight)
        est.append(t)
        ses.append(se)
        cov.append(covers(lo, up, open_, true_value))
        rej.append(reject)
    est = np.array(est)
    return {"dist": dist, "model": model, "censoring": cens, "method": method, "n": n, "B": B,
            "truth": true_value, "studies": N_STUDIES, "coverage": np.mean(cov), "reject": np.mean(rej),
            "bias_z": (est.mean() - true_value) / (est.std(ddof=1) / math.sqrt(N_STUDIES)),
            "se_ratio": np.mean(ses) / est.std(ddof=1), "se_ratio_median": np.median(ses) / est.std(ddof=1),
            "censored": np.mean(censored), "max_weight_median": np.median(weight) if weight else math.nan}


CENS_RATES = {}


def main() -> None:
    start = time.time()
    for dist in DISTS:
        CENS_RATES[(dist, "indep30")] = censoring_rate(dist, 0.30, False)
        CENS_RATES[(dist, "indep60")] = censoring_rate(dist, 0.60, False)
        CENS_RATES[(dist, "dep30")] = censoring_rate(dist, 0.30, True)
    truths = {(d, m, n): truth(d, m, n_bins(n)) for d in DISTS for m in MODELS for n in NS}
    rng = np.random.default_rng(20251125)
    plan = [(c, "km") for c in ("none", "indep30", "indep60", "dep30")] + [("dep30", "cox")]
    rows = []
    for dist in DISTS:
        for cens, method in plan:
            for n in NS:
                for model in MODELS:
                    rows.append(cell(rng, n, dist, model, cens, method, truths[(dist, model, n)]))
                r = rows[-4:]
                print(f"{dist:11s} {cens:8s} {method:4s} n={n:5d} " + "  ".join(
                    f"{x['model']}: cov {x['coverage']:.3f} rej {x['reject']:.3f}" for x in r),
                      f"[{time.time() - start:.0f} s]", flush=True)
    pd.DataFrame(rows).to_csv(os.path.join(HERE, "survival_coverage.csv"), index=False)
    pseudo = []
    for dist in DISTS:
        for cens in ("indep30", "indep60"):
            for n in (1000, 3000):
                for j, model in enumerate(MODELS):
                    for method in ("km", "pseudo"):  # the same studies (the same seed) for both methods
                        seed = [n, list(DISTS).index(dist), int(cens[-2:]), j]
                        pseudo.append(cell(np.random.default_rng(seed), n, dist, model, cens, method,
                                           truths[(dist, model, n)]))
                print(f"pseudo {dist} {cens} n={n} [{time.time() - start:.0f} s]", flush=True)
    pd.DataFrame(pseudo).to_csv(os.path.join(HERE, "survival_pseudo.csv"), index=False)
    print(f"done in {time.time() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
