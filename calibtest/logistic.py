"""Logistic calibration fits shared by :mod:`calibtest.valprob` and :mod:`calibtest.flexible`.

``as_1d_float`` checks a numeric 1-D input; ``fit_logistic_glm`` is the
maximum-likelihood logistic GLM (statsmodels) both modules fit, with a
fallback for IRLS overshooting on extreme data.
"""
from __future__ import annotations

import numpy as np

__all__ = ["as_1d_float", "fit_logistic_glm"]


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
