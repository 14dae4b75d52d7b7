r"""Calibration-in-the-large, calibration slope and O/E of one group's rows: vectorised logistic fits.

The numbers of :func:`calibtest.val_prob` (R's ``rms::val.prob``) for a
grouped result, where they are computed for every group and the pooled rows
at construction, so they must be cheap: two maximum-likelihood logistic fits
by Newton-Raphson in numpy (2 x 2 systems, a few passes over the rows) in
place of statsmodels' IRLS, which at 20,000 rows costs about half a second a
fit.  ``tests/ece/test_meta_analysis.py`` checks the estimates and standard
errors against statsmodels' GLM.

With L = logit(p) on the rows with 0 < p < 1 (those with p = 0 or 1 have an
infinite logit and, as in ``val.prob``, do not enter the fits):

* CITL: the intercept a of logit P(y = 1) = a + L (L an offset), with the
  Wald s.e. (sum mu (1 - mu))^(-1/2);
* slope: b of logit P(y = 1) = a + b L, with its Wald s.e. from the inverse
  of the 2 x 2 Fisher information;
* O/E = sum y / sum p over every row, with the s.e. sqrt((1 - O/n) / O) of
  log(O/E) (Debray et al. 2017, Table 1).

A fit that does not converge (complete separation, a single outcome class)
gives NaN rather than a number.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats as _sps

from calibtest.core.margin import log_oe_se

__all__ = ["logistic_fit", "calibration_measures_rows", "oe_measures"]

_TOL = 1e-10
_MAX_ITER = 100


def logistic_fit(y: np.ndarray, x: np.ndarray | None, offset: np.ndarray,
                 start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-likelihood logistic regression of ``y`` on [1, x] (or 1 alone) with ``offset``.

    Newton-Raphson (Fisher scoring, the same for the logit link) from
    ``start``, with a step longer than 0.1 halved until the log-likelihood
    rises (shorter steps are in Newton's quadratic range); the
    information matrix (1 x 1 or 2 x 2) is formed from weighted sums of the
    rows, not from matrix products (whose BLAS threads cost more than the
    fit on a busy machine).  Returns (params, covariance); NaN arrays
    when the fit does not converge or its covariance is not positive on the
    diagonal (outcomes separated by the predictions: no maximum exists, the
    steps stall where the information is numerically zero).
    """
    n_par = start.size
    xs = np.zeros(y.size) if x is None else x

    def eta_of(beta):
        return offset + beta[0] + (beta[1] * xs if n_par == 2 else 0.0)

    def loglik(beta):
        eta = eta_of(beta)
        return float(np.sum(y * eta - np.logaddexp(0.0, eta)))

    def info_score(beta):
        mu = 0.5 * (1.0 + np.tanh(0.5 * eta_of(beta)))  # expit, stable and cheap
        w, r = mu * (1.0 - mu), y - mu
        if n_par == 1:
            return np.array([[w.sum()]]), np.array([r.sum()])
        wx = w * xs
        # element-wise sums, not np.dot: a BLAS call on a busy machine can cost more than the fit
        return (np.array([[w.sum(), wx.sum()], [wx.sum(), np.sum(wx * xs)]]),
                np.array([r.sum(), np.sum(r * xs)]))

    beta = start.astype(float)
    current = None  # the log-likelihood at beta, computed when a long step needs it
    for _ in range(_MAX_ITER):
        info, score = info_score(beta)
        try:
            step = np.linalg.solve(info, score)
        except np.linalg.LinAlgError:
            break
        if np.max(np.abs(step)) > 0.1:  # a long step may overshoot: halve it until the likelihood rises
            current = loglik(beta) if current is None else current
            new = loglik(beta + step)
            for _half in range(30):
                if new >= current - 1e-12 * abs(current):
                    break
                step = step / 2.0
                new = loglik(beta + step)
        else:
            new = None  # the likelihood at the new point, computed only if a long step follows
        current = new
        beta = beta + step
        if np.max(np.abs(step)) < _TOL * (1.0 + np.max(np.abs(beta))):
            info, _ = info_score(beta)
            try:
                cov = np.linalg.inv(info)
            except np.linalg.LinAlgError:
                break
            if np.all(np.isfinite(beta)) and np.all(np.isfinite(cov)) and np.all(np.diag(cov) > 0.0):
                return beta, cov
            break  # no maximum: the outcomes are separated (the information vanishes, its inverse is noise)
    return np.full(n_par, np.nan), np.full((n_par, n_par), np.nan)


def calibration_measures_rows(p: np.ndarray, y: np.ndarray, alpha: float) -> dict:
    """CITL, slope and O/E of rows (``p`` in [0, 1], ``y`` in {0, 1}) with their Wald intervals.

    Keys: ``citl``, ``citl_se``, ``citl_ci_lower``, ``citl_ci_upper``,
    ``slope``, ``slope_se``, ``slope_ci_lower``, ``slope_ci_upper``, ``oe``,
    ``log_oe_se``, ``oe_ci_lower``, ``oe_ci_upper`` (NaN where undefined).
    """
    z = float(_sps.norm.isf(alpha / 2.0))
    fin = (p > 0.0) & (p < 1.0)
    pf, yf = p[fin], y[fin]
    logit = np.log(pf / (1.0 - pf))
    out: dict[str, float] = {}
    a, cov = logistic_fit(yf, None, logit, np.zeros(1))
    out.update(citl=float(a[0]), citl_se=math.sqrt(cov[0, 0]) if np.isfinite(cov[0, 0]) else math.nan)
    ab, cov = logistic_fit(yf, logit, np.zeros(yf.size), np.array([0.0, 1.0]))
    out.update(slope=float(ab[1]), slope_se=math.sqrt(cov[1, 1]) if np.isfinite(cov[1, 1]) else math.nan)
    for name in ("citl", "slope"):
        out[f"{name}_ci_lower"] = out[name] - z * out[f"{name}_se"]
        out[f"{name}_ci_upper"] = out[name] + z * out[f"{name}_se"]
    out.update(oe_measures(float(np.sum(y)), float(np.sum(p)), y.size, alpha))
    return out


def oe_measures(observed: float, expected: float, n: int, alpha: float) -> dict:
    """O/E, the s.e. of log(O/E) and the Wald interval exp(log(O/E) -+ z s.e.) from the sums of y and p."""
    oe = observed / expected if expected > 0 else math.nan
    if not (observed > 0 and expected > 0):
        return dict(oe=oe, log_oe_se=math.nan, oe_ci_lower=math.nan, oe_ci_upper=math.nan)
    se = float(log_oe_se(observed, n))
    half = float(_sps.norm.isf(alpha / 2.0)) * se
    return dict(oe=oe, log_oe_se=se, oe_ci_lower=math.exp(math.log(oe) - half),
                oe_ci_upper=math.exp(math.log(oe) + half))
