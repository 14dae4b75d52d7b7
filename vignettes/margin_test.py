"""Margin (non-inferiority) test of the ECE: size at ECE = margin, power curve, and planning check.

Designs (held out: none was used to choose the method's constants):

* ``binary``: p ~ Beta(2, 5), E[y | p] = expit(a + logit p), margin 0.05;
* ``rare``: p ~ Beta(0.5, 10) (event rate about 5%), same form, margin 0.02;
* ``top1``: top-1 confidence c = 1 - 0.9 Beta(1, 8) with K = 10 (mean 0.9),
  accuracy expit(a + logit c) (a < 0: overconfident), margin 0.05;

at n = 300, 1000, 3000, 10^4, with B the package's ``auto`` bins at n.  For each
(design, n) the intercept a is tuned (Brent's method) so that the *binned*
ECE at that B, computed by numerical integration over the prediction density
(``scipy.integrate.quad`` per bin), equals the margin.

1. Size: N_SIZE studies per cell at ECE = margin; the rejection rate of the
   margin test (level 0.05) with the variance floor (the package's rule,
   se^2 = max(sigma1^2 / n, Var(T | Z))), with its Monte Carlo standard error,
   and on the same studies three alternatives: no floor (``no_floor``), the
   floor added (``sum_floor``) and the maximum with the asymptotic
   sigma0^2 / (n^2 w) instead of Var(T | Z) (``asymptotic_floor``).
2. Power curve: rejection rate at ECE = margin x {0, 0.25, 0.5, 0.75} (a tuned
   the same way; a = 0 is a calibrated model).
3. Planning: ``calib_sample_size(margin=, power=0.8)`` for the calibrated model
   of each design, then N_PLAN studies at the n it returns analysed with the
   real ``calib_ci(...).margin_test(...)``; the simulated power must be within
   0.05 of 0.8.

The studies of stages 1-2 are simulated in blocks with per-bin sums
(``np.bincount``, as the package's estimator) and analysed with
:func:`calibtest.core.margin.margin_bound`, the engine of ``margin_test``;
stage 1 also checks, on the first studies of each cell, that
``calib_ci(...).margin_test(...)`` gives the same bound (to 1e-12).

Run: ``nice -n 10 python vignettes/margin_test.py`` (about 5 minutes on one
core; seeded).  Writes ``margin_test_size.csv``, ``margin_test_power.csv`` and
``margin_test_planning.csv`` next to this file.
"""
from __future__ import annotations

import math
import os
import sys
import time

import numpy as np
import pandas as pd
from scipy import integrate, optimize, stats
from scipy.special import expit, logit

import calibtest as ct
from calibtest.core.binning import auto_n_bins, cube_indices
from calibtest.core.margin import margin_bound
from calibtest.core.null import sigma0_sq

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20261125
ALPHA = 0.05
NS = (300, 1000, 3000, 10_000)
N_SIZE = int(os.environ.get("MARGIN_N_SIZE", 4000))
N_POWER = int(os.environ.get("MARGIN_N_POWER", 1000))
N_PLAN = int(os.environ.get("MARGIN_N_PLAN", 1000))
FRACTIONS = (0.0, 0.25, 0.5, 0.75)


class Design:
    """Prediction law, support offset and miscalibration form of one design."""

    def __init__(self, name, a_, b_, scale, margin, n_classes, sign):
        self.name, self.a_, self.b_, self.scale = name, a_, b_, scale
        self.margin, self.n_classes, self.sign = margin, n_classes, sign
        self.law = stats.beta(a_, b_)

    def draw(self, rng, size):
        x = self.law.rvs(size=size, random_state=rng)
        return x if self.scale is None else 1.0 - self.scale * x

    def density_of_p(self, p):  # density of the binned prediction
        if self.scale is None:
            return self.law.pdf(p)
        return self.law.pdf((1.0 - p) / self.scale) / self.scale

    def support(self):
        return (0.0, 1.0) if self.scale is None else (1.0 - self.scale, 1.0)

    def truth(self, p, a):
        return expit(a + logit(p))

    def binned_ece(self, a, B):
        """sqrt(sum_b P_b (E[c(p) - p | b])^2) by quad over each bin."""
        lo_s, hi_s = self.support()
        total = 0.0
        for b in range(B):
            lo, hi = max(b / B, lo_s), min((b + 1) / B, hi_s)
            if hi <= lo:
                continue
            mass = integrate.quad(self.density_of_p, lo, hi, limit=200)[0]
            if mass <= 0:
                continue
            gap = integrate.quad(lambda p: (self.truth(p, a) - p) * self.density_of_p(p), lo, hi, limit=200)[0]
            total += gap * gap / mass
        return math.sqrt(total)

    def tune(self, target, B):
        """The intercept a (sign of the design) with binned ECE = target at B."""
        if target == 0:
            return 0.0
        f = lambda a: self.binned_ece(self.sign * a, B) - target
        return self.sign * optimize.brentq(f, 0.0, 5.0, xtol=1e-10)


DESIGNS = (Design("binary", 2, 5, None, 0.05, None, +1),
           Design("rare", 0.5, 10, None, 0.02, None, +1),
           Design("top1", 1, 8, 0.9, 0.05, 10, -1))


def draw_studies(design, a, n, r, rng):
    """Predictions and labels of r studies of n rows, arrays (r, n)."""
    p = design.draw(rng, (r, n))
    y = (rng.random((r, n)) < design.truth(p, a)).astype(np.int64)
    return p, y


def studies_t_sigma1(p, y):
    """T (eq. (6)), the plug-in sigma1^2 (eq. (8)) and the conditional-null Var(T | Z) of each row of (p, y), with per-bin sums."""
    r, n = p.shape
    B = auto_n_bins(n, 1)
    nb = B + 1
    u = (y - p).ravel()
    key = (cube_indices(p.reshape(-1, 1), B)[:, 0] + nb * np.repeat(np.arange(r), n)).astype(np.intp)
    size = r * nb
    c = np.bincount(key, minlength=size).reshape(r, nb).astype(float)
    S = np.bincount(key, weights=u, minlength=size).reshape(r, nb)
    Q = np.bincount(key, weights=u * u, minlength=size).reshape(r, nb)
    keep = c >= 2
    t = np.where(keep, (S * S - Q) / np.where(keep, c - 1.0, 1.0), 0.0).sum(1) / n
    cc = np.where(c > 0, c, 1.0)
    mu = S / cc
    var = Q / cc - mu * mu
    w = c / n
    s1 = np.sum(w * mu**4, 1) - np.sum(w * mu**2, 1) ** 2 + 4.0 * np.sum(w * mu * var * mu, 1)
    v = (p * (1.0 - p)).ravel()  # Var(T | Z) under calibration: (2/n^2) sum [(sum v)^2 - sum v^2] / (c - 1)^2
    sv = np.bincount(key, weights=v, minlength=size).reshape(r, nb)
    sv2 = np.bincount(key, weights=v * v, minlength=size).reshape(r, nb)
    vc = 2.0 * np.where(keep, (sv * sv - sv2) / np.where(keep, c - 1.0, 1.0) ** 2, 0.0).sum(1) / n**2
    return t, np.maximum(s1, 0.0), vc


def simulate(design, a, n, reps, rng, block=None):
    """T and sigma1^2 of ``reps`` studies (blocks of about 2e6 rows)."""
    block = block or max(1, 2_000_000 // n)
    out = [studies_t_sigma1(*draw_studies(design, a, n, min(block, reps - s), rng)) for s in range(0, reps, block)]
    return tuple(np.concatenate([o[j] for o in out]) for j in range(3))


def null_var(design, n):
    """V0 = sigma0^2 / (n^2 w) of the design's target at the auto B."""
    mode = "binary" if design.n_classes is None else "top1"
    return sigma0_sq(mode, design.n_classes, 1) * auto_n_bins(n, 1) / (n * n)


def check_against_calib_ci(design, a, n, rng, reps=3):
    """Largest |difference| of the ECE bound between the vectorised engine and calib_ci(...).margin_test."""
    p, y = draw_studies(design, a, n, reps, rng)
    t, s1, vc = studies_t_sigma1(p, y)
    mine = margin_bound(t, np.sqrt(s1 / n), vc, design.margin, ALPHA).upper
    worst = 0.0
    for i in range(reps):
        res = ct.calib_ci(y=y[i], probs=p[i], n_classes=design.n_classes, rng=0)
        worst = max(worst, abs(res.margin_test(design.margin).upper - mine[i]))
    return worst


def size_and_power(rng):
    """Stages 1 and 2: rejection rates at ECE = margin x (1, 0.75, 0.5, 0.25, 0)."""
    size_rows, power_rows = [], []
    for design in DESIGNS:
        for n in NS:
            B = auto_n_bins(n, 1)
            for frac in (1.0,) + FRACTIONS[::-1][:-1] + (0.0,):
                t0 = time.perf_counter()
                a = design.tune(design.margin * frac, B)
                reps = N_SIZE if frac == 1.0 else N_POWER
                t, s1, vc = simulate(design, a, n, reps, rng)
                se = np.sqrt(s1 / n)
                rule = margin_bound(t, se, vc, design.margin, ALPHA).reject.mean()
                row = {"design": design.name, "n": n, "n_bins": B, "margin": design.margin,
                       "fraction": frac, "ece_binned": design.margin * frac, "intercept": a, "reps": reps, "reject": rule,
                       "mc_se": math.sqrt(max(rule * (1 - rule), 1e-12) / reps)}
                row.update(no_floor=margin_bound(t, se, 0.0, design.margin, ALPHA).reject.mean(),
                           sum_floor=margin_bound(t, np.sqrt(s1 / n + vc), 0.0, design.margin, ALPHA).reject.mean(),
                           asymptotic_floor=margin_bound(t, se, null_var(design, n), design.margin,
                                                         ALPHA).reject.mean())
                if frac == 1.0:
                    row.update(share_t_nonpositive=float(np.mean(t <= 0)),
                               mean_t=float(t.mean()), ece_sq_target=design.margin**2,
                               check_calib_ci=check_against_calib_ci(design, a, n, rng))
                    row["within_alpha_3se"] = bool(rule <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / reps))
                    size_rows.append(row)
                else:
                    power_rows.append(row)
                print(design.name, n, frac, f"{rule:.3f}", f"({time.perf_counter() - t0:.1f} s)", flush=True)
    return pd.DataFrame(size_rows), pd.DataFrame(power_rows)


#: (design, intercept of the anticipated calibration): calibrated, and a miscalibration below the margin.
PLAN_CASES = (("binary", 0.0), ("rare", 0.0), ("top1", 0.0), ("binary", 0.1), ("top1", -0.15))


def planning_check(rng):
    """Stage 3: calib_sample_size(margin=, power=0.8) against the real margin_test on simulated studies."""
    rows = []
    by_name = {d.name: d for d in DESIGNS}
    for name, a in PLAN_CASES:
        design = by_name[name]
        sample = design.draw(rng, 20_000)
        t0 = time.perf_counter()
        plan = ct.calib_sample_size(probs=sample, intercept=a, margin=design.margin, power=0.8,
                                    n_classes=design.n_classes)
        t_plan = time.perf_counter() - t0
        n = plan.n
        rejects = 0
        for _ in range(N_PLAN):
            p, y = draw_studies(design, a, n, 1, rng)
            res = ct.calib_ci(y=y[0], probs=p[0], n_classes=design.n_classes, rng=int(rng.integers(2**31)))
            rejects += res.margin_test(design.margin).reject
        sim = rejects / N_PLAN
        rows.append({"design": design.name, "intercept": a, "ece_binned_at_n": math.sqrt(plan.ece_sq_binned),
                     "margin": design.margin, "n": n, "n_bins": plan.n_bins,
                     "analytic_power": plan.achieved_power, "simulated_power": sim,
                     "mc_se": math.sqrt(sim * (1 - sim) / N_PLAN), "reps": N_PLAN,
                     "within_0.05": abs(sim - 0.8) <= 0.05, "plan_seconds": t_plan})
        print(rows[-1], flush=True)
    return pd.DataFrame(rows)


def main() -> None:
    rng = np.random.default_rng(SEED)
    t0 = time.perf_counter()
    size, power = size_and_power(rng)
    size.to_csv(os.path.join(HERE, "margin_test_size.csv"), index=False)
    power.to_csv(os.path.join(HERE, "margin_test_power.csv"), index=False)
    plan = planning_check(rng)
    plan.to_csv(os.path.join(HERE, "margin_test_planning.csv"), index=False)
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(size.round(4).to_string(index=False))
        print(power.pivot_table(index=["design", "n"], columns="fraction", values="reject").round(3))
        print(plan.round(4).to_string(index=False))
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
