"""Logistic calibration fits shared by :mod:`calibtest.checks.val_prob` and :mod:`calibtest.checks.flexible_calibration`.

``as_1d_float`` checks a numeric 1-D input; ``fit_logistic_glm`` is the
maximum-likelihood logistic GLM (statsmodels) both modules fit, with a
fallback for IRLS overshooting on extreme data.
"""
from __future__ import annotations

import numpy as np

from calibtest.display.format import fmt

__all__ = ["as_1d_float", "fit_logistic_glm", "direction_sentence"]


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

    # Scale of each score component sum_i x_ij (y_i - mu_i): sum_i |x_ij|.
    score_scale = np.maximum(np.sum(np.abs(X), axis=0), 1.0)

    def ok(res) -> bool:
        # IRLS can report "converged" at a saturated point (mu = 0 or 1), so also
        # require the score X'(y - mu) to vanish.
        if not (np.all(np.isfinite(res.params)) and np.all(np.isfinite(res.bse))):
            return False
        score = np.asarray(model.score(np.asarray(res.params)), dtype=float)
        return bool(np.all(np.abs(score) <= 1e-9 * score_scale))

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
