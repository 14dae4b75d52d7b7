"""The flexible calibration curve: logistic recalibration on a restricted cubic spline of logit(p).

:func:`flexible_calibration` estimates the calibration curve
``c(p) = P(y = 1 | p)`` of predicted probabilities ``p`` by the logistic
regression

    logit c(p) = b0 + b1 L + sum_{j=1}^{K-2} g_j S_j(L),      L = logit(p),

where ``S_j`` are the non-linear terms of Harrell's restricted cubic spline
(natural cubic spline: cubic between the knots, linear beyond the outer knots)
with K knots on the logit scale, fitted by maximum likelihood (statsmodels
GLM, Binomial family, logit link).  This is the curve of R's
``rms::lrm(y ~ rcs(qlogis(p), K))`` and of the "flexible calibration curve"
of Van Calster et al. (2016), with a pointwise ``1 - alpha`` band from the
delta method on the linear predictor.

Why Harrell's basis with his default knots rather than patsy's ``cr(x, df=K)``:
both span natural cubic splines, but patsy's ``cr`` puts its K knots at
equally spaced quantiles *including the minimum and maximum* of L, so the
curve's linear tails start at the most extreme predictions, which are the
least stable; Harrell's defaults (the 5, 35, 65 and 95 % quantiles for four
knots) make the curve linear in the outer 5 % of each tail, and they are what
R users of ``rms``/``CalibrationCurves`` compare against.  Given the same
knots, patsy's ``cr(L, knots=..., lower_bound=..., upper_bound=...)`` spans the
same space and gives the same fitted curve (the tests check this).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as sps
from scipy.special import expit

from calibtest.inputs.validation import OptionError, check_alpha
from calibtest.options import check_option
from calibtest.display.summary import CalibSummary, ResultDisplay
from calibtest.checks.logistic_fits import as_1d_float, fit_logistic_glm

__all__ = ["FlexibleCalibration", "flexible_calibration", "rcs_basis", "harrell_knots"]

#: Number of points of the default grid.
GRID_SIZE = 200

#: A fitted linear predictor beyond +/- this (probability within 1e-13 of 0 or 1) means separation.
_SATURATED = 30.0

#: Hmisc's ``fractied``: share of the rows at the smallest or largest value that moves an outer knot.
_FRACTIED = 0.05

#: Harrell's default knot quantiles (``rms::rcspline.eval``) for 3 to 7 knots.
_OUTER = {3: 0.10, 4: 0.05, 5: 0.05, 6: 0.05, 7: 0.025}


def harrell_knots(x, n_knots: int) -> np.ndarray:
    """Harrell's default knot positions of a restricted cubic spline (Hmisc ``rcspline.eval``).

    The knots are the quantiles (R type 7, numpy's default ``linear``) at
    ``linspace(q, 1 - q, K)``, ``q = 0.1`` for K = 3, 0.05 for K = 4, 5, 6
    and 0.025 for K = 7 (so 5, 35, 65, 95 % for four knots); with fewer than
    100 values the outer knots are moved to the 5th smallest and 5th largest
    value.  Ties follow Hmisc (``fractied = 0.05``): when the smallest (or
    largest) value holds at least 5 % of the rows and no interior value does,
    the second smallest (largest) value becomes a knot and the other knots
    are placed among the values strictly inside; when the quantiles coincide,
    2K quantiles are tried; with at most K + 2 distinct values the interior
    distinct values are the knots.  Duplicate knots are merged, so fewer than
    K knots can result.

    Parameters
    ----------
    x : ndarray, shape (n,)
        Values (here logit(p)); at least 6.
    n_knots : int
        K, 3 to 7.

    Returns
    -------
    ndarray
        Strictly increasing knots (at least 3).

    Raises
    ------
    ValueError
        Fewer than 6 values, or fewer than 3 distinct knots.

    References
    ----------
    .. [1] Harrell, F. E. (2015). *Regression Modeling Strategies*, 2nd ed.,
       Springer, Section 2.4.6 (Table 2.3).
    .. [2] Harrell, F. E. ``rcspline.eval``, R package Hmisc
       (https://CRAN.R-project.org/package=Hmisc).
    """
    xx = np.sort(np.asarray(x, dtype=np.float64))
    n = xx.size
    if n < 6:
        raise ValueError(f"p: Harrell's default knots need at least 6 rows with 0 < p < 1, got {n}")
    xu, freq = np.unique(xx, return_counts=True)
    nxu = xu.size
    if nxu - 2 <= n_knots:
        knots = xu[1:-1]
    else:
        outer = _OUTER[n_knots]
        nke = n_knots
        first = last = np.empty(0)
        override_first = override_last = False
        f = freq / n
        if f[1:-1].max() < _FRACTIED:
            if f[0] >= _FRACTIED:
                first = xx[xx > xx[0]][:1]
                xx = xx[xx > first[0]]
                nke -= 1
                override_first = True
            if f[-1] >= _FRACTIED:
                last = xx[xx < xx[-1]][-1:]
                xx = xx[xx < last[0]]
                nke -= 1
                override_last = True
        if nke == 1:
            knots = np.array([np.median(xx)])
        else:
            if nxu <= nke:
                knots = xu.copy()
            else:
                q = np.linspace(0.5, 1.0 - outer, nke) if nke == 2 else np.linspace(outer, 1.0 - outer, nke)
                knots = np.quantile(xx, q)
                if np.unique(knots).size < min(nke, 3):
                    knots = np.quantile(xx, np.linspace(outer, 1.0 - outer, 2 * nke))
                    if first.size and np.unique(knots).size < 3:
                        mid = (first[0] + last[0]) / 2 if last.size else np.median(xx)
                        top = last if last.size else np.quantile(xx, [1.0 - outer])
                        knots = np.sort(np.concatenate([first, [mid], top]))
            if xx.size < 100:
                if not override_first:
                    knots[0] = xx[4]
                if not override_last:
                    knots[nke - 1] = xx[xx.size - 5]
        knots = np.concatenate([first, knots, last])
    knots = np.unique(knots)
    if knots.size < 3:
        raise ValueError(f"p: fewer than 3 distinct knots ({knots.size}) from {nxu} distinct predictions; "
                         "give the knot positions")
    return knots


def rcs_basis(x, knots) -> np.ndarray:
    """Design matrix ``[L, S_1(L), ..., S_{K-2}(L)]`` of Harrell's restricted cubic spline (no intercept).

    ``S_j(x) = (x - t_j)_+^3 - (x - t_{K-1})_+^3 (t_K - t_j)/(t_K - t_{K-1})
    + (x - t_K)_+^3 (t_{K-1} - t_j)/(t_K - t_{K-1})``, each divided by
    ``(t_K - t_1)^2`` (``rcspline.eval(..., inclx=TRUE, norm=2)``, the scaling
    of ``rms::rcs``, so coefficients are comparable with R's).  The terms are
    linear in x beyond ``t_K``.

    Parameters
    ----------
    x : array_like, shape (n,)
    knots : array_like, shape (K,)
        Strictly increasing, K >= 3.

    Returns
    -------
    ndarray, shape (n, K - 1)

    References
    ----------
    .. [1] Harrell, F. E. (2015). *Regression Modeling Strategies*, 2nd ed.,
       Springer, Eq. (2.25).
    """
    x = np.asarray(x, dtype=np.float64)
    t = np.asarray(knots, dtype=np.float64)
    kd = (t[-1] - t[0]) ** (2.0 / 3.0)
    tj = t[:-2]
    pos = lambda v: np.maximum(v, 0.0) ** 3  # noqa: E731
    xs = x[:, None]
    nonlin = (pos((xs - tj) / kd)
              + ((t[-2] - tj) * pos((xs - t[-1]) / kd) - (t[-1] - tj) * pos((xs - t[-2]) / kd)) / (t[-1] - t[-2]))
    return np.column_stack([x, nonlin])


@dataclass(frozen=True, repr=False, eq=False)
class FlexibleCalibration(ResultDisplay):
    """A flexible calibration curve with its pointwise band (see :func:`flexible_calibration`).

    Attributes
    ----------
    grid : ndarray, shape (m,)
        Predicted probabilities at which the curve is evaluated.
    fitted : ndarray, shape (m,)
        Estimated ``P(y = 1 | p)`` at ``grid``: ``expit(eta)``.
    lower, upper : ndarray, shape (m,)
        Pointwise ``1 - alpha`` band: ``expit(eta -/+ z se(eta))``.
    knots : ndarray, shape (K,)
        Knots on the logit scale.
    method : str
        The model in words.
    alpha : float
    n : int
        Rows given.
    n_fit : int
        Rows used by the fit (0 < p < 1).
    n_infinite_logit : int
        Rows with p exactly 0 or 1, left out of the fit (infinite logit).
    n_events : int
        Events among the fitted rows.
    params : ndarray, shape (K,)
        Coefficients (intercept, L, S_1, ..., S_{K-2}).
    cov_params : ndarray, shape (K, K)
        Their estimated covariance (inverse Fisher information).
    """

    grid: np.ndarray
    fitted: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    knots: np.ndarray
    method: str
    alpha: float
    n: int
    n_fit: int
    n_infinite_logit: int
    n_events: int
    params: np.ndarray = field(repr=False)
    cov_params: np.ndarray = field(repr=False)

    def to_frame(self) -> pd.DataFrame:
        """The curve as a DataFrame with columns ``p``, ``fitted``, ``lower``, ``upper``."""
        return pd.DataFrame({"p": self.grid, "fitted": self.fitted, "lower": self.lower, "upper": self.upper})

    def _dict(self) -> dict:
        return {"method": self.method, "alpha": self.alpha, "n": self.n, "n_fit": self.n_fit,
                "n_infinite_logit": self.n_infinite_logit, "n_events": self.n_events,
                "knots": self.knots.tolist(), "params": self.params.tolist(),
                "grid": self.grid.tolist(), "fitted": self.fitted.tolist(),
                "lower": self.lower.tolist(), "upper": self.upper.tolist()}

    def _summary(self, alpha, digits: int = 3) -> CalibSummary:
        if alpha is not None and alpha != self.alpha:
            raise OptionError(f"alpha: the band was computed at alpha = {self.alpha:g}; "
                              "call flexible_calibration(..., alpha=) for another level")
        s = CalibSummary()
        s.add_title("Flexible calibration curve")
        s.add_settings({"Model": self.method, "Rows": self.n, "Rows fitted": self.n_fit,
                        "Events": self.n_events, "Band": f"pointwise {100 * (1 - self.alpha):g}%"})
        frame = self.to_frame()
        idx = np.unique(np.linspace(0, len(frame) - 1, min(len(frame), 11)).round().astype(int))
        s.add_table(frame.iloc[idx].reset_index(drop=True), formats=dict.fromkeys(frame.columns, digits),
                    index=False)
        notes = ["Logistic recalibration logit P(y=1) = b0 + b1 L + sum g_j S_j(L), L = logit(p), on "
                 "Harrell's restricted cubic spline with knots at L = "
                 + ", ".join(f"{k:.3f}" for k in self.knots) + "; band by the delta method on the "
                 "linear predictor."]
        if self.n_infinite_logit:
            notes.append(f"{self.n_infinite_logit} rows with p exactly 0 or 1 (infinite logit) are left out "
                         "of the fit.")
        s.add_notes(notes)
        return s

    def _repr_parts(self) -> list[str]:
        return [f"knots={self.knots.size}", f"n_fit={self.n_fit}", f"alpha={self.alpha:g}"]


def flexible_calibration(p, y, *, knots=4, alpha: float = 0.05, grid=None) -> FlexibleCalibration:
    """Flexible calibration curve: logistic recalibration on a restricted cubic spline of logit(p).

    Fits, by maximum likelihood (statsmodels GLM, Binomial, logit link),

    .. math:: \\operatorname{logit} P(y=1 \\mid p) = \\eta(L) = b_0 + b_1 L + \\sum_{j=1}^{K-2} g_j S_j(L),
              \\qquad L = \\operatorname{logit}(p),

    with Harrell's restricted cubic spline terms ``S_j`` (:func:`rcs_basis`),
    and returns ``expit(eta)`` on a grid with the pointwise band
    ``expit(eta -/+ z_{1-alpha/2} sqrt(x(L)' V x(L)))``, V the inverse Fisher
    information (delta method on the linear predictor, then the monotone map
    expit, so the band stays in (0, 1)).  The model is R's
    ``rms::lrm(y ~ rcs(qlogis(p), K))``.  A calibrated model has
    ``P(y=1 | p) = p``: the curve on the identity line.

    Parameters
    ----------
    p : array_like, shape (n,)
        Predicted probabilities in [0, 1].  Rows with p exactly 0 or 1 have
        an infinite logit; as in R's ``val.prob`` they are left out of the fit
        and counted in ``n_infinite_logit``.
    y : array_like, shape (n,)
        Outcomes 0/1 (bool, int or float), both present among the fitted rows.
    knots : int or sequence of float
        Number of knots K (3 to 7; Harrell's default positions,
        :func:`harrell_knots`, on the logit of the fitted rows: heavily tied
        predictions can give fewer, distinct knots, as in R), or the knot
        positions on the logit scale.  Default 4.
    alpha : float
        The band has pointwise level ``1 - alpha``.
    grid : array_like, optional
        Probabilities in (0, 1) at which to evaluate the curve (default: 200
        points equally spaced between the smallest and largest fitted p).

    Returns
    -------
    FlexibleCalibration

    Raises
    ------
    TypeError
        Non-numeric ``p``, ``y``, ``grid`` or ``knots``.
    ValueError
        ``p`` outside [0, 1] or not finite, ``y`` not 0/1, lengths differ,
        ``y`` constant among the fitted rows, fewer fitted rows than
        ``K + 1`` (the K coefficients and one residual degree of freedom), fewer
        than 3 distinct knots (too few distinct predictions), ``grid`` outside (0, 1), or a
        fit without a finite maximum-likelihood estimate (separation).

    References
    ----------
    .. [1] Harrell, F. E. (2015). *Regression Modeling Strategies*, 2nd ed.,
       Springer, Sections 2.4.5-2.4.6 and 10.9.
    .. [2] Van Calster, B., Nieboer, D., Vergouwe, Y., De Cock, B., Pencina,
       M. J. and Steyerberg, E. W. (2016). "A calibration hierarchy for risk
       models was defined: from utopia to empirical data." *Journal of
       Clinical Epidemiology* 74, 167-176. doi:10.1016/j.jclinepi.2015.12.005
    .. [3] Austin, P. C. and Steyerberg, E. W. (2014). "Graphical assessment
       of internal and external calibration of logistic regression models by
       using loess smoothers." *Statistics in Medicine* 33, 517-535.

    Examples
    --------
    >>> from calibtest.datasets import load_demo
    >>> d = load_demo()
    >>> fc = flexible_calibration(d["p"], d["y"])
    >>> fc.knots.size, fc.n_fit == len(d)
    (4, True)
    """
    alpha = check_alpha(alpha)
    if isinstance(knots, (list, tuple, np.ndarray)):  # positions: data on the logit scale
        knots = as_1d_float(knots, "knots")
        if knots.size < 3 or not np.all(np.isfinite(knots)) or np.any(np.diff(knots) <= 0):
            raise OptionError("knots must be an integer 3..7 or at least 3 finite, strictly increasing "
                              "positions on the logit scale")
    else:  # a number of knots: the table's ``knots`` option
        knots = check_option("knots", knots)
    p = as_1d_float(p, "p")
    y = as_1d_float(y, "y")
    if p.shape != y.shape:
        raise ValueError(f"p and y must have the same length, got {p.size} and {y.size}")
    if not np.all(np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError("p must be probabilities in [0, 1] (finite)")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("y must contain only 0 and 1")
    fin = (p > 0.0) & (p < 1.0)
    n_inf = int(p.size - np.count_nonzero(fin))
    pf, yf = p[fin], y[fin]
    where = (f" among the {pf.size} rows with 0 < p < 1 ({n_inf} rows with p exactly 0 or 1 are left out)"
             if n_inf else "")
    n_par = knots if isinstance(knots, int) else knots.size
    if pf.size <= max(n_par, 5):
        raise ValueError(f"p: {pf.size} rows{where} for {n_par} coefficients; need more rows than "
                         "coefficients and at least 6 (use fewer knots)")
    n1 = int(np.count_nonzero(yf))
    if n1 in (0, pf.size):
        raise ValueError(f"y is constant{where}: the calibration curve is not estimable")
    p1, p0 = pf[yf == 1], pf[yf == 0]
    if p1.min() >= p0.max() or p1.max() <= p0.min():
        raise ValueError("p separates y" + where + " (every event has p >= every non-event, or <=): the "
                         "flexible calibration curve has no finite maximum-likelihood estimate")
    L = np.log(pf) - np.log1p(-pf)
    t = harrell_knots(L, knots) if isinstance(knots, int) else knots
    if pf.size <= t.size:
        raise ValueError(f"p: {pf.size} rows{where} for {t.size} coefficients; need more rows than coefficients")
    X = np.column_stack([np.ones(pf.size), rcs_basis(L, t)])
    start = np.zeros(X.shape[1])
    start[1] = 1.0
    from statsmodels.tools.sm_exceptions import HessianInversionWarning, PerfectSeparationWarning

    try:
        # separation (and the overflow it causes in the link) is reported below as a ValueError
        with warnings.catch_warnings(), np.errstate(over="ignore"):
            warnings.simplefilter("ignore", PerfectSeparationWarning)
            warnings.simplefilter("ignore", HessianInversionWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            fit = fit_logistic_glm(yf, X, None, start)
    except RuntimeError as exc:
        fit = None
        cause: RuntimeError | None = exc
    else:
        cause = None
    if fit is None or np.max(np.abs(X @ np.asarray(fit.params))) > _SATURATED:
        raise ValueError("the spline of logit(p) separates y" + where + " (fitted probabilities reach 0 or 1): "
                         "the flexible calibration curve has no finite maximum-likelihood estimate; use "
                         "fewer knots") from cause
    if grid is None:
        g = np.linspace(pf.min(), pf.max(), GRID_SIZE)
    else:
        g = as_1d_float(grid, "grid")
        if g.size == 0 or not np.all((g > 0) & (g < 1)):
            raise ValueError("grid must hold probabilities strictly between 0 and 1")
    Lg = np.log(g) - np.log1p(-g)
    G = np.column_stack([np.ones(g.size), rcs_basis(Lg, t)])
    beta = np.asarray(fit.params, dtype=np.float64)
    V = np.asarray(fit.cov_params(), dtype=np.float64)
    eta = G @ beta
    se = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", G, V, G), 0.0))
    z = sps.norm.isf(alpha / 2)
    method = (f"logistic recalibration on a restricted cubic spline of logit(p), {t.size} knots"
              + (" (Harrell's default quantiles)" if isinstance(knots, int) else ""))
    return FlexibleCalibration(grid=g, fitted=expit(eta), lower=expit(eta - z * se), upper=expit(eta + z * se),
                               knots=t, method=method, alpha=alpha, n=int(p.size), n_fit=int(pf.size),
                               n_infinite_logit=n_inf, n_events=n1, params=beta, cov_params=V)
