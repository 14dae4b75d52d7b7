"""Logistic calibration fits shared by :mod:`calibtest.checks.val_prob` and :mod:`calibtest.checks.flexible_calibration`.

``as_1d_float`` checks a numeric 1-D input; ``fit_logistic_glm`` is the
maximum-likelihood logistic GLM (statsmodels) both modules fit, with a
fallback for IRLS overshooting on extreme data.

val_prob's two fits (CITL and the calibration slope) start where they nearly
end: ``logit_cell_sums`` bins the rows on a fixed grid of L = logit(p) (cells
of width :data:`START_CELL`; the grid is fixed, so the sums of chunks of rows
add), ``binned_starts`` fits the same two models to the cells (each cell's
rows at their mean L; statsmodels' binomial GLM on the cell counts), whose
estimates differ from the rows' maximum-likelihood estimates by O(h^2) for
cells of width h (about 1e-6 here), and ``fit_logistic_newton`` finishes on
the rows with statsmodels' ``Logit`` by Newton-Raphson from there: one step,
confirmed by the next step computed from the score and information
statsmodels returns at the estimate, the standard errors from that
information.  The estimates and standard errors are those of
statsmodels' converged fit to 1e-10 (``tests/checks/test_logistic_fits.py``);
``fit_logistic_glm``'s standard errors, IRLS's weights at the iterate before
its estimate, can differ from them by about 1e-8 (relative).
"""
from __future__ import annotations

import numpy as np

from calibtest.display.format import fmt

__all__ = ["as_1d_float", "fit_logistic_glm", "fit_logistic_newton", "logit_cell_sums", "binned_starts",
           "direction_sentence", "START_CELL", "START_RANGE"]

#: Width of the cells of logit(p) whose sums give val_prob's two logistic fits their starting values.
START_CELL = 1e-3

#: The cells cover logit(p) in [-START_RANGE, START_RANGE]; a row beyond is counted in the end cell (with
#: its own logit in that cell's mean).
START_RANGE = 40.0

#: A Newton step below this (relative to 1 + |beta|) ends val_prob's fits.
NEWTON_TOL = 1e-12

#: The default starting values (val.prob's): a = 0, b = 1 for the joint fit, a0 = 0 for CITL.
DEFAULT_STARTS = (np.array([0.0, 1.0]), np.array([0.0]))


def as_1d_float(x, name: str) -> np.ndarray:
    """Convert ``x`` to a 1-D float64 array or raise naming ``name``."""
    try:
        arr = np.asarray(x)
    except Exception as exc:  # pragma: no cover - exotic containers
        raise TypeError(f"{name} must be array-like of numbers") from exc
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise TypeError(f"{name} must be array-like of numbers, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    return arr.astype(np.float64, copy=False)


def fit_logistic_glm(y: np.ndarray, X: np.ndarray, offset: np.ndarray | None, start: np.ndarray):
    """Maximum-likelihood logistic GLM (statsmodels), robust to IRLS overshooting.

    IRLS (Fisher scoring = Newton for the logit link) from ``start`` converges
    quadratically when it converges, but a full Newton step can overshoot on
    extreme data (a few probabilities within 1e-4 of 0 or 1).  If it fails, the
    fit is redone by L-BFGS on the log-likelihood and then polished by IRLS from
    that point, so the estimate is still the IRLS fixed point.
    """
    import warnings

    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_linear_model import GLM
    from statsmodels.tools.sm_exceptions import ConvergenceWarning

    model = GLM(y, X, family=Binomial(), offset=offset)

    def ok(res) -> bool:
        # IRLS can report "converged" at a saturated point (mu = 0 or 1), so also
        # require the score X'(y - mu) to vanish.
        return _at_maximum(model.score(np.asarray(res.params)), X, res)

    with warnings.catch_warnings(), np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        res = model.fit(start_params=start, tol=1e-13, maxiter=100)
        if ok(res):
            return res
        rough = model.fit(method="lbfgs", start_params=start, maxiter=1000)
        res = model.fit(start_params=np.asarray(rough.params), tol=1e-13, maxiter=100)
    if not ok(res):
        raise RuntimeError("the logistic calibration fit did not converge")
    return res


def _at_maximum(score: np.ndarray, X: np.ndarray, res) -> bool:
    """Whether fit ``res`` has finite estimates and standard errors and a vanishing ``score`` X'(y - mu) there.

    Each score component sum_i x_ij (y_i - mu_i) must be within 1e-9 of its
    scale sum_i |x_ij| (at least 1).
    """
    if not (np.all(np.isfinite(res.params)) and np.all(np.isfinite(res.bse))):
        return False
    score_scale = np.maximum(np.sum(np.abs(X), axis=0), 1.0)
    return bool(np.all(np.abs(np.asarray(score, dtype=float)) <= 1e-9 * score_scale))


def fit_logistic_newton(y: np.ndarray, X: np.ndarray, offset: np.ndarray | None, start: np.ndarray,
                        fallback: np.ndarray):
    """Maximum-likelihood logistic regression (statsmodels' ``Logit``, Newton-Raphson) from a start near the estimate.

    One Newton step from ``start`` (for instance :func:`binned_starts`),
    beta_1 = beta_0 + I(beta_0)^-1 X'(y - mu(beta_0)) with the information
    I(beta) = sum_i mu_i (1 - mu_i) x_i x_i'; statsmodels returns the score
    and the information at beta_1, and beta_1 is the estimate where the next
    step I(beta_1)^-1 X'(y - mu(beta_1)) is below :data:`NEWTON_TOL` (1 +
    |beta_1|) in every component (Newton's error is about its next step, so
    beta_1 is then that close to the maximum).  Otherwise statsmodels' Newton
    continues from beta_1 until a step is below 1e-10.  The covariance is
    I(estimate)^-1.  From a start within 1e-6 of the estimate the first
    step's error is about 1e-12 and one step suffices (two passes of score and
    information over the rows).  Where Newton fails (no convergence, a
    non-finite estimate or standard error, a score X'(y - mu) that does not
    vanish), the fit is :func:`fit_logistic_glm` from ``fallback``
    (statsmodels' IRLS, with its L-BFGS fallback).
    """
    import warnings

    from statsmodels.discrete.discrete_model import Logit

    with warnings.catch_warnings(), np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")  # convergence, separation and Hessian warnings: the checks below decide
        try:
            # the rank is full (val_prob's checks); saturation is caught by the score check, not by a
            # per-step callback
            model = Logit(y, X, offset=offset, check_rank=False)
            options = dict(method="newton", disp=0, callback=_no_callback)
            res = model.fit(start_params=start, maxiter=1, **options)
            if not _newton_done(res):
                res = model.fit(start_params=np.asarray(res.params), maxiter=100, tol=1e-10, **options)
                res = res if res.mle_retvals.get("converged", False) else None
            # the optimiser's score and Hessian are those of -loglik / n
            if res is not None and _at_maximum(-y.size * res.mle_retvals["score"], X, res):
                return res
        except (ValueError, ArithmeticError, np.linalg.LinAlgError):
            pass
    return fit_logistic_glm(y, X, offset, fallback)


def _newton_done(res) -> bool:
    """Whether Newton's next step from the fit's estimate (from its score and Hessian there) is below NEWTON_TOL."""
    retvals, beta = res.mle_retvals, np.asarray(res.params, dtype=float)
    step = np.linalg.solve(retvals["Hessian"], retvals["score"])
    return bool(np.all(np.isfinite(step)) and np.all(np.abs(step) <= NEWTON_TOL * (1.0 + np.abs(beta))))


def _no_callback(params) -> None:
    """No per-step check in :func:`fit_logistic_newton` (the score at the estimate is checked instead)."""


def logit_cell_sums(y: np.ndarray, logit: np.ndarray) -> dict:
    """Rows, events and the sum of L = logit(p) in each cell of a fixed grid of L.

    Cell ``k`` holds the rows with ``-START_RANGE + k h <= L < -START_RANGE
    + (k + 1) h`` (``h`` = :data:`START_CELL`; rows beyond the range in the
    end cells).  Keys ``count``, ``events``, ``logit``: arrays of one length,
    so that the sums of chunks of rows add.
    """
    cells = int(round(2.0 * START_RANGE / START_CELL))
    k = ((np.clip(logit, -START_RANGE, START_RANGE) + START_RANGE) * (1.0 / START_CELL)).astype(np.intp)
    np.minimum(k, cells - 1, out=k)
    return {"count": np.bincount(k, minlength=cells).astype(np.float64),
            "events": np.bincount(k, weights=y, minlength=cells),
            "logit": np.bincount(k, weights=logit, minlength=cells)}


def binned_starts(cells: dict) -> tuple[np.ndarray, np.ndarray]:
    """Starting values of the joint fit (a, b) and of CITL (a0), from the cell sums of :func:`logit_cell_sums`.

    The same two logistic fits, ``logit P(y = 1) = a + b L`` and ``a0 + L``
    (L an offset), on the occupied cells: ``events`` of ``count`` rows at
    the cell's mean ``L`` (statsmodels' binomial GLM on the cell counts).
    Exact where every cell's rows share one L; otherwise within O(h^2) of the
    rows' estimates.  A fit that fails (or a single occupied cell, where the
    slope is not identified) gives val.prob's start, (0, 1) or 0.
    """
    import warnings

    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_linear_model import GLM

    joint0, citl0 = DEFAULT_STARTS
    used = cells["count"] > 0
    count, events = cells["count"][used], cells["events"][used]
    mean = cells["logit"][used] / count
    endog = np.column_stack([events, count - events])
    starts = []
    for exog, offset, default in ((np.column_stack([np.ones(mean.size), mean]), None, joint0),
                                  (np.ones((mean.size, 1)), mean, citl0)):  # the two fits
        params = None
        if mean.size >= exog.shape[1] + 1:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                try:
                    params = np.asarray(GLM(endog, exog, family=Binomial(), offset=offset)
                                        .fit(start_params=default, tol=1e-12, tol_criterion="params").params, dtype=float)
                except (ValueError, ArithmeticError, np.linalg.LinAlgError):
                    params = None
        starts.append(params if params is not None and np.all(np.isfinite(params)) else default.copy())
    return starts[0], starts[1]


def direction_sentence(citl: float, citl_ci: tuple, slope: float, slope_ci: tuple, alpha: float) -> str:
    """The direction of a logit-linear miscalibration, in words, from CITL and the slope and their intervals.

    CITL ``a0 > 0`` (observed log-odds above the predicted ones) means the
    predictions are too low on average, ``a0 < 0`` too high; slope ``b < 1``
    means they are too extreme, ``b > 1`` not extreme enough.  A direction is
    stated only where the ``1 - alpha`` interval excludes the null value (0
    for CITL, 1 for the slope).  Shared by
    :meth:`calibtest.checks.val_prob.ValProbResult.direction` (Wald intervals) and
    :meth:`calibtest.checks.cluster_robust.ClusterRobustMeasures.direction`
    (cluster-robust intervals).
    """
    level = f"{100 * (1 - alpha):g}%"
    c_lo, c_hi = float(citl_ci[0]), float(citl_ci[1])
    s_lo, s_hi = float(slope_ci[0]), float(slope_ci[1])
    citl_text = f"CITL = {fmt(citl, 3)}, {level} CI [{fmt(c_lo, 3)}, {fmt(c_hi, 3)}]"
    slope_text = f"slope = {fmt(slope, 3)}, {level} CI [{fmt(s_lo, 3)}, {fmt(s_hi, 3)}]"
    level_off = c_lo > 0 or c_hi < 0
    spread_off = s_lo > 1 or s_hi < 1
    level_words = f"too {'low' if citl > 0 else 'high'} on average ({citl_text}, excludes 0)"
    spread_words = (f"too extreme ({slope_text}, excludes 1)" if slope < 1
                    else f"not extreme enough ({slope_text}, excludes 1)")
    if level_off and spread_off:
        return f"Direction: the predictions are {level_words} and {spread_words}."
    if level_off:
        return (f"Direction: the predictions are {level_words}; their spread is not shown to be off "
                f"({slope_text} includes 1).")
    if spread_off:
        return (f"Direction: the predictions are {spread_words}; their level on average is not shown to be "
                f"off ({citl_text} includes 0).")
    return (f"Direction: neither calibration-in-the-large ({citl_text} includes 0) nor the slope "
            f"({slope_text} includes 1) shows a direction of miscalibration.")
