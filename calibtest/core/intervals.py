"""The adjusted confidence interval of Algorithm 1, step 4, with the zero rule.

All functions are pure and vectorised over arrays of estimates, so the same
code serves one result and a simulation study of thousands of data sets.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy import stats as _sps

__all__ = ["AdjustedInterval", "adjusted_interval", "normal_isf"]


@dataclass(frozen=True)
class AdjustedInterval:
    """The interval for ECE^2 and the quantities that decided it.

    Attributes
    ----------
    lower, upper : float
        Reported interval for ECE^2 (``lower`` is 0 when zero belongs or the
        interval is open at 0).
    contains_zero : bool
        Zero belongs to the set: T+ < threshold.
    lower_open : bool
        The set is ``(0, upper]``: zero was removed (paper: C_{m,n,1} \\ {0})
        and not added back by the zero rule.
    branch : int
        Which case of the paper's eq. (10) gave the lower end: 1 (symmetric),
        2 (one-sided, ``max(0, T+ - z_a se)``) or 3 (``T+/2``).
    """

    lower: float
    upper: float
    contains_zero: bool
    lower_open: bool
    branch: int


@functools.lru_cache(maxsize=256)
def normal_isf(p: float) -> float:
    """z_p = Phi^-1(1 - p), ``scipy.stats.norm.isf(p)`` as a float, cached per p (the same double;
    a simulation study asks for the same few levels on every data set)."""
    return float(_sps.norm.isf(p))


def adjusted_interval(estimate, se, threshold, alpha, *, multipliers=None):
    """Adjusted interval for ECE^2 (paper eqs. (10) and (7); ``docs/conventions.md``, "The interval").

    With T+ = max(T, 0), z_a = Phi^-1(1 - alpha), z_h = Phi^-1(1 - alpha/2)::

        upper = T+ + z_h se
        lower = T+ - z_h se               if T+/2 <= T+ - z_h se   (branch 1)
              = max(0, T+ - z_a se)       if T+ - z_a se < T+/2    (branch 2)
              = T+/2                      otherwise                (branch 3)

    Zero belongs to the set iff T+ < threshold; the reported interval is then
    ``[0, upper]``.  Otherwise it is ``[lower, upper]``, open at 0 when
    ``lower == 0``.

    Parameters
    ----------
    estimate, se, threshold : float or array_like
        T, sigma1/sqrt(n) and z_a sigma0 / (n sqrt(w)).
    alpha : float
        Significance level in (0, 1).
    multipliers : tuple of float, optional
        ``(k_upper, k_h, k_a)`` in place of ``(z_h, z_h, z_a)``: t quantiles
        for clustered rows (:func:`calibtest.core.clustered.t_adjusted_interval`),
        the studentized null quantiles of prevalence weights for the lower end
        (:func:`calibtest.core.weighted.studentized_adjusted_interval`).

    Returns
    -------
    AdjustedInterval
        With float fields for scalar input, arrays for array input.
    """
    t_pos = np.maximum(np.asarray(estimate, dtype=float), 0.0)
    se = np.asarray(se, dtype=float)
    if multipliers is None:
        z_h = normal_isf(alpha / 2.0)
        multipliers = (z_h, z_h, normal_isf(alpha))
    k_upper, k_h, k_a = multipliers
    upper = t_pos + k_upper * se
    symmetric = t_pos - k_h * se
    one_sided = t_pos - k_a * se
    branch1 = t_pos / 2.0 <= symmetric
    branch2 = ~branch1 & (one_sided < t_pos / 2.0)
    lower = np.where(branch1, symmetric, np.where(branch2, np.maximum(0.0, one_sided), t_pos / 2.0))
    branch = np.where(branch1, 1, np.where(branch2, 2, 3))
    contains_zero = t_pos < np.asarray(threshold, dtype=float)
    lower_open = ~contains_zero & (lower <= 0.0)
    lower = np.where(contains_zero, 0.0, lower)
    if lower.ndim == 0:
        return AdjustedInterval(float(lower), float(upper), bool(contains_zero), bool(lower_open), int(branch))
    return AdjustedInterval(lower, upper, contains_zero, lower_open, branch)
