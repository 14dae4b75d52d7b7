"""val_prob's logistic fits from the binned start (calibtest.checks.logistic_fits).

The references: statsmodels' own converged fit, its GLM (IRLS) from its
default start (``start_params=None``) iterated until the estimates change by
less than 1e-14; the inverse information sum_i mu_i (1 - mu_i) x_i x_i' at
that estimate, computed here in numpy; and ``fit_logistic_glm`` from
val.prob's start (0, 1) / 0, the fit val_prob made before it started from the
binned fit.  Estimates and standard errors agree with the first two to 1e-10.
``fit_logistic_glm`` stops when the deviance changes by less than 1e-13, and
its standard errors are those of IRLS's last weights, the information at the
iterate before the estimate, which that criterion leaves up to about 1e-8
from the estimate: its estimates agree to 1e-10, its standard errors to 1e-8
(relative; the case "repeated predictions" differs by 4.6e-9, where the
binned start's standard errors equal the inverse information at the estimate
to 1e-15).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from calibtest.checks import logistic_fits as lf


def _statsmodels_default(y, X, offset):
    """statsmodels' binomial GLM from its own start, iterated until the estimates change by less than 1e-14."""
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_linear_model import GLM

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GLM(y, X, family=Binomial(), offset=offset).fit(tol=1e-14, tol_criterion="params", maxiter=200)


def _inverse_information_se(y, X, offset, params):
    """sqrt(diag(I^-1)) with I = sum_i mu_i (1 - mu_i) x_i x_i' at ``params`` (numpy, by hand)."""
    eta = X @ params + (0.0 if offset is None else offset)
    mu = 1.0 / (1.0 + np.exp(-eta))
    info = (X * (mu * (1.0 - mu))[:, None]).T @ X
    return np.sqrt(np.diag(np.linalg.inv(info)))


def _cases():
    g = np.random.default_rng(36)
    out = {}
    p = g.beta(2, 5, 200_000)
    out["calibrated"] = (p, (g.random(p.size) < p).astype(float))
    p = g.beta(2, 5, 200_000)
    out["too extreme (slope 0.6)"] = (p, (g.random(p.size) < 1 / (1 + np.exp(-0.3 - 0.6 * np.log(p / (1 - p)))))
                                      .astype(float))
    p = np.round(g.beta(1, 8, 100_000), 2)  # few distinct values: the binned fit is the rows' fit
    p = np.clip(p, 0.01, 0.99)
    out["repeated predictions"] = (p, (g.random(p.size) < p ** 0.8).astype(float))
    p = g.beta(0.2, 0.2, 5_000)  # logits beyond the cells' range (+-40) and near 0 and 1
    p = np.clip(p, 1e-300, 1 - 1e-16)
    out["extreme logits"] = (p, (g.random(p.size) < p).astype(float))
    p = g.beta(2, 2, 150)
    out["small n"] = (p, (g.random(p.size) < p).astype(float))
    return out


@pytest.mark.parametrize("case", list(_cases()))
def test_newton_from_the_binned_start_agrees_with_statsmodels_converged_fits(case):
    p, y = _cases()[case]
    logit = np.log(p / (1.0 - p))
    n = p.size
    joint_start, citl_start = lf.binned_starts(lf.logit_cell_sums(y, logit))
    designs = {"joint": (np.column_stack([np.ones(n), logit]), None, joint_start, lf.DEFAULT_STARTS[0]),
               "citl": (np.ones((n, 1)), logit, citl_start, lf.DEFAULT_STARTS[1])}
    for name, (X, offset, start, fallback) in designs.items():
        fast = lf.fit_logistic_newton(y, X, offset, start, fallback)
        converged, today = _statsmodels_default(y, X, offset), lf.fit_logistic_glm(y, X, offset, fallback)
        for ref in (converged, today):
            assert np.asarray(fast.params) == pytest.approx(np.asarray(ref.params), rel=1e-10, abs=1e-10), name
        assert np.asarray(fast.bse) == pytest.approx(np.asarray(converged.bse), rel=1e-10), name
        by_hand = _inverse_information_se(y, X, offset, np.asarray(converged.params))
        assert np.asarray(fast.bse) == pytest.approx(by_hand, rel=1e-10), name
        assert np.asarray(fast.bse) == pytest.approx(np.asarray(today.bse), rel=1e-8), name


def test_one_newton_step_from_the_binned_start_at_a_million_rows():
    """The binned start is within about 1e-6 of the estimate, so statsmodels' Newton takes one step."""
    g = np.random.default_rng(7)
    p = g.beta(2, 5, 1_000_000)
    y = (g.random(p.size) < p ** 1.1).astype(float)
    logit = np.log(p / (1.0 - p))
    X = np.column_stack([np.ones(p.size), logit])
    joint_start, citl_start = lf.binned_starts(lf.logit_cell_sums(y, logit))
    ref = _statsmodels_default(y, X, None)
    assert 0 < np.max(np.abs(joint_start - ref.params)) < 1e-5  # near, not at, the estimate
    fast = lf.fit_logistic_newton(y, X, None, joint_start, lf.DEFAULT_STARTS[0])
    assert fast.mle_retvals["iterations"] == 1
    assert np.asarray(fast.params) == pytest.approx(np.asarray(ref.params), rel=1e-10, abs=1e-10)
    assert np.asarray(fast.bse) == pytest.approx(np.asarray(ref.bse), rel=1e-10)
    citl = lf.fit_logistic_newton(y, np.ones((p.size, 1)), logit, citl_start, lf.DEFAULT_STARTS[1])
    assert citl.mle_retvals["iterations"] == 1


def test_binned_starts_are_the_rows_fit_when_the_rows_of_a_cell_share_one_prediction():
    """Rows with equal p have equal logits: the binned likelihood is the rows' likelihood, up to a constant."""
    g = np.random.default_rng(3)
    p = g.choice([0.05, 0.1, 0.2, 0.35, 0.5, 0.7], size=40_000)
    y = (g.random(p.size) < np.sqrt(p)).astype(float)
    logit = np.log(p / (1.0 - p))
    joint_start, citl_start = lf.binned_starts(lf.logit_cell_sums(y, logit))
    joint = _statsmodels_default(y, np.column_stack([np.ones(p.size), logit]), None)
    citl = _statsmodels_default(y, np.ones((p.size, 1)), logit)
    assert joint_start == pytest.approx(np.asarray(joint.params), abs=1e-9)
    assert citl_start == pytest.approx(np.asarray(citl.params), abs=1e-9)


def test_logit_cell_sums_of_chunks_add_to_the_sums_of_all_rows():
    g = np.random.default_rng(5)
    logit = np.concatenate([g.normal(0, 3, 10_000), [-500.0, 45.0, -40.0, 40.0]])
    y = (g.random(logit.size) < 0.4).astype(float)
    whole = lf.logit_cell_sums(y, logit)
    parts = [lf.logit_cell_sums(y[s], logit[s]) for s in (slice(0, 3000), slice(3000, None))]
    for key in ("count", "events", "logit"):
        assert np.allclose(parts[0][key] + parts[1][key], whole[key], rtol=1e-14, atol=1e-10)
    # every row in one cell; the cell of each row by its definition (end cells hold the rows beyond the range)
    assert whole["count"].sum() == logit.size
    k = np.clip(np.floor((logit + lf.START_RANGE) / lf.START_CELL), 0, whole["count"].size - 1).astype(int)
    assert np.array_equal(whole["count"], np.bincount(k, minlength=whole["count"].size))


def test_a_failed_newton_fit_falls_back_to_irls_from_the_default_start():
    """A start where Newton's steps overflow: the fit is fit_logistic_glm's from (0, 1)."""
    p = np.array([0.99991, 0.99992, 0.99993, 0.99994, 0.3, 0.6])
    y = np.array([0, 1, 0, 1, 0, 1], dtype=float)
    logit = np.log(p / (1.0 - p))
    X = np.column_stack([np.ones(p.size), logit])
    ref = lf.fit_logistic_glm(y, X, None, lf.DEFAULT_STARTS[0])
    fast = lf.fit_logistic_newton(y, X, None, np.array([1e6, -1e6]), lf.DEFAULT_STARTS[0])
    assert np.array_equal(np.asarray(fast.params), np.asarray(ref.params))
    assert np.array_equal(np.asarray(fast.bse), np.asarray(ref.bse))
