"""Margin (non-inferiority) test of the ECE and two one-sided tests (TOST) of the classical measures.

Pure numpy/scipy engines behind :mod:`calibtest.checks.acceptance`; vectorised over
arrays so that one call serves a result and a simulation study.

**ECE below a margin.**  H0: ECE >= delta against H1: ECE < delta (delta > 0),
on the ECE scale of the result's target, i.e. ECE^2 >= delta^2.  At the
boundary ECE^2 = delta^2 > 0 the model is miscalibrated, and the paper's
miscalibrated-regime law sqrt(n)(T - ECE^2) / sigma1 -> N(0, 1) applies.  The
one-sided (1 - alpha) upper confidence bound for ECE^2 is

    U = T+ + z_alpha se_m,    se_m^2 = max(sigma1^2 / n, V0),

with T+ = max(T, 0), z_alpha = Phi^-1(1 - alpha), sigma1^2 the plug-in of the
paper's eq. (8) and V0 the variance of T under the calibrated-regime null the
result used: Var(T | Z), the exact conditional variance given the predictions,
when it was computed, otherwise sigma0^2 / (n^2 w) (the paper's eq. (12)); for
a weighted result its estimated V_0.  The test rejects at level alpha iff
U < delta^2 (the bound for ECE, sqrt(U), is below delta); its p-value is

    p = Phi((T+ - delta^2) / se_m),

the smallest alpha at which it rejects, so the bound, the p-value and the
decision never disagree.

**T <= 0.**  Then T+ = 0 and U = z_alpha se_m.  The plug-in sigma1^2 is formed
from the bin means; when they are all near 0 it is near 0 too, and a bound
z_alpha sigma1_hat / sqrt(n) alone could fall below any margin on the samples
that look best by chance.  V0 is a floor: U >= z_alpha sqrt(V0), the noise
level of T when the model is calibrated, so T <= 0 rejects only when that
noise is small compared with delta^2.  The floor is a maximum, not a sum: the
plug-in already carries the second-order noise of the bin means (its
expectation exceeds sigma1^2 by about 4 sum_b tr(Sigma_b^2) / n), so adding V0
would count it twice; in ``vignettes/margin_test.md`` the sum costs up to 0.58
of power (rare events, n = 10^4) for no gain in size, while the maximum has the
size and power of sigma1 alone in every cell and only removes the degenerate
case.

**Two one-sided tests** (Schuirmann 1987) of a parameter theta with an
asymptotically normal estimate and standard error: H0: theta <= l or theta >= u
against H1: l < theta < u.  p = max(Phi((l - est) / se), Phi((est - u) / se));
it rejects at level alpha iff the (1 - 2 alpha) two-sided Wald interval lies
inside (l, u), equivalently p < alpha.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as _sps

__all__ = ["MarginBound", "margin_bound", "TostBound", "tost", "log_oe_se"]


@dataclass(frozen=True)
class MarginBound:
    """Bound, statistic, p-value and decision of the margin test (arrays for array input).

    Attributes
    ----------
    upper_sq : float or ndarray
        One-sided (1 - alpha) upper confidence bound for ECE^2, T+ + z_alpha se_m.
    upper : float or ndarray
        sqrt(upper_sq), the bound for ECE.
    se : float or ndarray
        se_m = sqrt(max(sigma1^2 / n, V0)).
    statistic : float or ndarray
        (T+ - delta^2) / se_m (negative values favour ECE < delta).
    pvalue : float or ndarray
        Phi(statistic).
    reject : bool or ndarray
        upper_sq < delta^2 (equivalently pvalue < alpha).
    """

    upper_sq: object
    upper: object
    se: object
    statistic: object
    pvalue: object
    reject: object


def margin_bound(estimate, se, null_variance, margin, alpha) -> MarginBound:
    """The margin test of H0: ECE >= margin (module docstring).

    Parameters
    ----------
    estimate : float or array_like
        T, the debiased estimate of ECE^2 (may be negative).
    se : float or array_like
        sigma1 / sqrt(n) (for a weighted result its influence-function standard error).
    null_variance : float or array_like
        V0, the calibrated-regime variance of T, a floor for se^2 (0 for none).
    margin : float
        delta > 0 on the ECE scale.
    alpha : float
        Level in (0, 1).

    Returns
    -------
    MarginBound
    """
    t_pos = np.maximum(np.asarray(estimate, dtype=float), 0.0)
    se_m = np.sqrt(np.maximum(np.asarray(se, dtype=float) ** 2, np.asarray(null_variance, dtype=float)))
    m2 = float(margin) ** 2
    upper_sq = t_pos + _sps.norm.isf(alpha) * se_m
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.where(se_m > 0, (t_pos - m2) / np.where(se_m > 0, se_m, 1.0),
                        np.where(t_pos < m2, -np.inf, np.inf))
    pvalue = _sps.norm.cdf(stat)
    reject = upper_sq < m2
    out = (upper_sq, np.sqrt(upper_sq), se_m, stat, pvalue, reject)
    if np.ndim(upper_sq) == 0:
        return MarginBound(*(bool(v) if isinstance(v, np.bool_) else float(v) for v in out))
    return MarginBound(*out)


@dataclass(frozen=True)
class TostBound:
    """Two one-sided tests of l < theta < u (floats for scalar input).

    Attributes
    ----------
    lower_ci, upper_ci : float
        The (1 - 2 alpha) two-sided Wald interval est -/+ z_alpha se.
    statistic_lower, statistic_upper : float
        (est - l) / se and (est - u) / se.
    pvalue_lower, pvalue_upper : float
        P-values of H0: theta <= l (1 - Phi(statistic_lower)) and of
        H0: theta >= u (Phi(statistic_upper)).
    pvalue : float
        The larger of the two.
    reject : bool
        l < lower_ci and upper_ci < u (equivalently pvalue < alpha).
    """

    lower_ci: object
    upper_ci: object
    statistic_lower: object
    statistic_upper: object
    pvalue_lower: object
    pvalue_upper: object
    pvalue: object
    reject: object


def tost(estimate, se, low, high, alpha, df=None) -> TostBound:
    """Two one-sided tests of ``low < theta < high`` for an estimate with a normal standard error.

    With ``df`` the reference law is Student's t with ``df`` degrees of
    freedom instead of N(0, 1) (a cluster-robust standard error from G
    clusters: df = G - 1, the law of its intervals).

    Parameters
    ----------
    estimate, se : float or array_like
        The estimate and its standard error (> 0).
    low, high : float
        The equivalence limits, low < high.
    alpha : float
        Level of each one-sided test (and of the TOST).
    df : int, optional
        Degrees of freedom of a Student t reference law (None: normal).

    Returns
    -------
    TostBound
    """
    est = np.asarray(estimate, dtype=float)
    se = np.asarray(se, dtype=float)
    law = _sps.norm if df is None else _sps.t(df)
    z = law.isf(alpha)
    lo_ci, hi_ci = est - z * se, est + z * se
    s_lo, s_hi = (est - low) / se, (est - high) / se
    p_lo, p_hi = law.sf(s_lo), law.cdf(s_hi)
    p = np.maximum(p_lo, p_hi)
    reject = (lo_ci > low) & (hi_ci < high)
    out = (lo_ci, hi_ci, s_lo, s_hi, p_lo, p_hi, p, reject)
    if np.ndim(p) == 0:
        return TostBound(*(bool(v) if isinstance(v, np.bool_) else float(v) for v in out))
    return TostBound(*out)


def log_oe_se(observed, n) -> float:
    """Standard error of log(O/E) treating E as fixed: sqrt((1 - O/n) / O).

    O ~ Binomial(n, phi) gives Var(log O) ~ (1 - phi) / (n phi) by the delta
    method (Debray et al. 2017, BMJ 356:i6460, Table 1; Riley et al. 2021,
    Stat Med 40:4230, eq. (3)).  Infinite when O = 0.
    """
    observed = np.asarray(observed, dtype=float)
    with np.errstate(divide="ignore"):
        return np.sqrt((1.0 - observed / n) / observed)
