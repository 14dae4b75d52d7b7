"""Riley et al. (2021) sample sizes for precise O/E, CITL, calibration slope and C (calibtest/core/precision.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit, logit

from calibtest.core.precision import (anticipated_precision, c_statistic_se, concordance, precision_size,
                                      PRECISION_MEASURES)


def slow_concordance(z, q):
    """C over ordered pairs i != j with explicit loops: sum q_i (1 - q_j) (1{z_i > z_j} + 1{z_i = z_j} / 2) / sum q_i (1 - q_j)."""
    num = den = 0.0
    for i in range(z.size):
        for j in range(z.size):
            if i != j:
                w = q[i] * (1 - q[j])
                num += w * (1.0 if z[i] > z[j] else 0.5 if z[i] == z[j] else 0.0)
                den += w
    return num / den


def test_concordance_against_the_pairs_with_ties():
    rng = np.random.default_rng(1)
    z = np.round(rng.beta(2, 3, 60), 1)  # many ties
    q = expit(0.3 + 0.8 * logit(np.clip(z, 0.05, 0.95)))
    assert concordance(z, q) == pytest.approx(slow_concordance(z, q), rel=1e-12)


def test_slope_and_citl_information_against_r_glm():
    """s1 of the slope and of CITL against R's model-based standard errors of the population fit.

    R (the population as weighted binary rows: (y = 1, weight q), (y = 0, weight 1 - q)):
      z <- seq(0.02, 0.98, length.out = 49); lp <- qlogis(z); q <- plogis(0.2 + 0.7 * lp)
      d <- data.frame(y = rep(c(1, 0), each = 49), lp = rep(lp, 2), w = c(q, 1 - q))
      ctl <- glm.control(epsilon = 1e-14, maxit = 100)
      f <- glm(y ~ lp, binomial, d, weights = w, control = ctl)
      g <- glm(y ~ 1 + offset(lp), binomial, d, weights = w, control = ctl)
      c(coef(f)[2], sqrt(49 * vcov(f)[2, 2]), coef(g)[1], sqrt(49 * vcov(g)[1, 1]))
      # 0.700000000000 1.723480425173 0.232639169205 2.431940813558
    """
    z = np.linspace(0.02, 0.98, 49)
    q = expit(0.2 + 0.7 * logit(z))
    slope = anticipated_precision(z, q, "slope")
    citl = anticipated_precision(z, q, "citl")
    assert slope.value == pytest.approx(0.7, abs=1e-9)
    assert slope.s1 == pytest.approx(1.723480425173, rel=1e-9)
    assert citl.value == pytest.approx(0.232639169205, rel=1e-9)
    assert citl.s1 == pytest.approx(2.431940813558, rel=1e-9)


def test_sizes_by_hand():
    """O/E: n = ceil((1 - phi) / (phi se^2)); slope on a two-point linear predictor: the 2x2 information by hand."""
    z = np.array([0.2, 0.6])
    q = z.copy()  # calibrated: a* = 0, b* = 1
    phi = q.mean()
    oe = anticipated_precision(z, q, "oe")
    assert oe.value == 1.0 and precision_size(oe, 0.1) == math.ceil((1 - phi) / (phi * 0.01))
    w = q * (1 - q)
    lp = np.log(z / (1 - z))
    info = np.array([[w.mean(), (w * lp).mean()], [(w * lp).mean(), (w * lp * lp).mean()]])
    s1_sq = np.linalg.inv(info)[1, 1]
    slope = anticipated_precision(z, q, "slope")
    assert slope.s1 ** 2 == pytest.approx(s1_sq, rel=1e-12)
    assert precision_size(slope, 0.2) == math.ceil(s1_sq / 0.04)


@pytest.mark.parametrize("c, phi, se", [(0.7, 0.3, 0.025), (0.85, 0.1, 0.03), (0.6, 0.5, 0.02)])
def test_c_size_is_the_smallest_n_of_newcombes_formula(c, phi, se):
    from calibtest.core.precision import MeasurePrecision
    prec = MeasurePrecision("c", c, math.nan, phi)
    n = precision_size(prec, se)
    ns = np.arange(2, 4 * n)
    first = int(ns[np.argmax(c_statistic_se(c, phi, ns) <= se)])  # Newcombe's SE decreases in n
    assert n == first


def _logistic_fits(lp, y, offset_only):
    """Newton-Raphson fits of y on (1, lp) (or 1 with offset lp) for every study at once (rows of lp, y)."""
    reps = y.shape[0]
    beta = np.zeros((reps, 1)) if offset_only else np.tile([0.0, 1.0], (reps, 1))
    x = np.ones(lp.shape + (1,)) if offset_only else np.stack([np.ones_like(lp), lp], axis=2)
    off = lp if offset_only else 0.0
    for _ in range(30):
        p = expit(off + np.einsum("rnk,rk->rn", x, beta))
        info = np.einsum("rn,rnk,rnl->rkl", p * (1 - p), x, x)
        beta = beta + np.linalg.solve(info, np.einsum("rnk,rn->rk", x, y - p)[..., None])[..., 0]
    return beta[:, -1]


def _c_statistics(z, y):
    """Mann-Whitney C of every study (rows), ties counting 1/2, by mid-ranks."""
    from scipy.stats import rankdata
    r = rankdata(z, axis=1)
    n1 = y.sum(axis=1)
    n0 = y.shape[1] - n1
    return ((r * y).sum(axis=1) - n1 * (n1 + 1) / 2) / (n1 * n0)


@pytest.mark.slow
@pytest.mark.parametrize("measure, se", [("oe", 0.05), ("citl", 0.08), ("slope", 0.1), ("c", 0.03)])
def test_empirical_precision_at_the_planned_n(measure, se):
    """At the planned n the standard deviation of the estimates over 2000 simulated studies is within 5% of the
    target (Monte Carlo s.e. of the ratio sqrt(1 / (2 (R - 1))) = 0.016).

    ln(O/E): the standard error a study reports, sqrt((1 - O/n) / O) (Riley's, which treats E as fixed), is
    within 5% of the target on average; the standard deviation of ln(O/E) across studies is smaller (about 0.95
    of it here: O and E = sum of the drawn predictions move together), so Riley's size is conservative for it.
    """
    rng = np.random.default_rng(20 + PRECISION_MEASURES.index(measure))
    pop = rng.beta(2, 5, 20000)
    true = expit(0.1 + 0.8 * logit(pop))
    n = precision_size(anticipated_precision(pop, true, measure), se)
    reps = 2000
    idx = rng.integers(0, pop.size, size=(reps, n))
    z = pop[idx]
    y = (rng.random((reps, n)) < true[idx]).astype(float)
    if measure == "oe":
        observed = y.sum(axis=1)
        reported = np.sqrt((1 - observed / n) / observed)
        assert abs(reported.mean() / se - 1) < 0.05
        est = np.log(observed / z.sum(axis=1))
        assert est.std(ddof=1) / se < 1.05
        return
    elif measure == "c":
        est = _c_statistics(z, y)
    else:
        est = _logistic_fits(logit(z), y, measure == "citl")
    ratio = est.std(ddof=1) / se
    assert abs(ratio - 1) < 0.05, (n, ratio)
