"""Uno's IPCW time-dependent AUC at a horizon (cumulative cases, dynamic controls) and its standard error.

The engine of the discrimination row of :mod:`calibtest.checks.survival_calibration`.  At a
horizon t the cases are the rows with an event at or before t (``T_i <= t``, ``delta_i = 1``) and
the controls the rows still event-free after t (``T_j > t``); rows censored at or before t are
neither.  Each case is weighted by ``1 / G(T_i-)``, G the Kaplan-Meier estimate of the censoring
survival function (the "reverse" Kaplan-Meier: a censoring is its event, the rows with follow-up
``>= u`` its risk set), and each control by ``1 / G(t)`` (Uno et al. 2007; the estimator of
``timeROC::timeROC(weighting = "marginal")`` and ``riskRegression::Score(metrics = "auc")``).  The
controls' common weight cancels, so

    AUC(t) = sum_i sum_j a_i b_j K(r_i, r_j) / G(T_i-)  /  ( sum_i a_i / G(T_i-) * sum_j b_j ),

``a_i`` the case indicator, ``b_j`` the control indicator and ``K(r, s) = 1{r > s} + 1{r = s} / 2``
(a tied risk counts one half).

Standard error: the influence-function (iid) representation of Blanche, Dartigues and
Jacqmin-Gadda (2013), which riskRegression also uses.  Writing ``AUC = A / (B C)`` with
``A = n^-2 sum_ij a_i b_j K_ij g_i``, ``B = n^-1 sum_i a_i g_i``, ``C = n^-1 sum_j b_j`` and
``g_i = 1 / G(T_i-)``, the influence of row k is

    IF_k = (IF_k(A) - AUC (C IF_k(B) + B IF_k(C))) / (B C),

where each of A and B has its direct term (the U-statistic's Hajek projection for A) plus the
influence of the estimated G through ``g_i``: the influence of ``1 / G(s-)`` is
``(1 / G(s-)) int_{u < s} dM^C_k(u) / pi(u)``, ``M^C_k`` the censoring martingale of row k
(``dN^C_k(u) - 1{X_k >= u} dLambda_C(u)``, ``dLambda_C`` the Nelson-Aalen increment of the
censoring) and ``pi(u) = Y_C(u) / n`` the share of rows at risk of censoring.  Then ``se = sd(IF) / sqrt(n)`` (the sample
standard deviation of the n influence values, as riskRegression).
An event and a censoring at the same time: the event comes first, so the censoring's risk set at u,
``Y_C(u)``, holds the rows with ``X > u`` and those censored at u (the convention of prodlim's reverse
Kaplan-Meier in riskRegression), and the weight of a case uses only the censorings strictly before its time.

References
----------
.. [1] Uno, Cai, Tian and Wei, "Evaluating prediction rules for t-year survivors with censored
       regression models", Journal of the American Statistical Association 102:527-537, 2007.
.. [2] Blanche, Dartigues and Jacqmin-Gadda, "Estimating and comparing time-dependent areas under
       receiver operating characteristic curves for censored event times with competing risks",
       Statistics in Medicine 32:5381-5397, 2013.
.. [3] Gerds and Schumacher, "Consistent estimation of the expected Brier score in general survival
       models with right-censored event times", Biometrical Journal 48:1029-1040, 2006.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["TimeAUC", "time_auc"]


@dataclass(frozen=True)
class TimeAUC:
    """Uno's IPCW AUC at a horizon (see :func:`time_auc`).

    Attributes
    ----------
    auc, se : float
        The estimate and its influence-function standard error (NaN without a case or a control).
    n_cases, n_controls : int
        Events at or before the horizon; rows event-free after it.
    """

    auc: float
    se: float
    n_cases: int
    n_controls: int


def _below_and_tied(sorted_values: np.ndarray, cum_weights: np.ndarray, x: np.ndarray) -> np.ndarray:
    """sum of the weights of the sorted values below x plus half of those equal to x, for each x."""
    lo = np.searchsorted(sorted_values, x, side="left")
    hi = np.searchsorted(sorted_values, x, side="right")
    c = np.r_[0.0, cum_weights]
    return c[lo] + 0.5 * (c[hi] - c[lo])


def time_auc(time: np.ndarray, event: np.ndarray, risk: np.ndarray, horizon: float) -> TimeAUC:
    """Uno's IPCW cumulative/dynamic AUC(t) and its influence-function standard error.

    Parameters
    ----------
    time : ndarray of float, shape (n,)
        Follow-up times (not censored at the horizon: the controls are the rows with ``time > horizon``).
    event : ndarray of bool, shape (n,)
        True for an event.
    risk : ndarray of float, shape (n,)
        The marker: the predicted risk by the horizon (a higher risk should mean an earlier event).
    horizon : float

    Returns
    -------
    TimeAUC
        The formulas are in the module docstring.
    """
    n = time.size
    case = event & (time <= horizon)
    control = time > horizon
    n_cases, n_controls = int(case.sum()), int(control.sum())
    if n_cases == 0 or n_controls == 0:
        return TimeAUC(math.nan, math.nan, n_cases, n_controls)
    # the reverse Kaplan-Meier at the distinct times u_m: c_m censorings at u_m, at risk of censoring the rows
    # with X > u_m or censored at u_m (an event at u_m comes first: riskRegression's and prodlim's convention)
    u, inverse = np.unique(time, return_inverse=True)
    at_risk = n - np.r_[0, np.cumsum(np.bincount(inverse, minlength=u.size))[:-1]]
    cens = np.bincount(inverse, weights=~event, minlength=u.size)
    at_risk_c = at_risk - np.bincount(inverse, weights=event, minlength=u.size)
    hazard_c = np.divide(cens, at_risk_c, out=np.zeros(u.size), where=cens > 0)  # dLambda_C(u_m)
    with np.errstate(divide="ignore"):  # G = 0 after a last time that is a censoring
        log_g = np.cumsum(np.log1p(-hazard_c))  # log G(u_m), censorings up to and at u_m
    g_before = np.exp(np.r_[0.0, log_g[:-1]])  # G(u_m-)
    g = 1.0 / g_before[inverse]  # 1 / G(X_i-)
    # the pairs: for each case, the controls below it (ties one half); for each control, the weighted cases above
    r_ctrl = np.sort(risk[control])
    below = _below_and_tied(r_ctrl, np.arange(1.0, n_controls + 1), risk[case])  # sum_j b_j K(r_i, r_j)
    case_order = np.argsort(-risk[case], kind="stable")
    r_case_desc = -risk[case][case_order]
    above = _below_and_tied(r_case_desc, np.cumsum(g[case][case_order]), -risk[control])  # sum_i a_i g_i K_ik
    a_sum = float(g[case] @ below) / n ** 2
    b_sum = float(g[case].sum()) / n
    c_sum = n_controls / n
    auc = a_sum / (b_sum * c_sum)
    # direct terms of A (Hajek projection), B and C
    if_a = np.zeros(n)
    if_a[case] += g[case] * below / n
    if_a[control] += above / n
    if_a -= 2.0 * a_sum
    if_b = np.where(case, g, 0.0) - b_sum
    if_c = control - c_sum
    # the censoring terms: int f(u) / pi_C(u) dM^C_k(u) with f(u) = n^-1 sum_{cases, T_i > u} q_i, pi_C = Y_C / n
    case_idx = inverse[case]
    for q, target in ((g[case] * below / n, if_a), (g[case], if_b)):
        mass = np.bincount(case_idx, weights=q, minlength=u.size) / n
        f = mass[::-1].cumsum()[::-1] - mass  # cases with T_i > u_m strictly
        h = np.divide(f * n, at_risk_c, out=np.zeros(u.size), where=at_risk_c > 0)
        step = h * hazard_c
        comp = np.cumsum(step)[inverse] - np.where(event, step[inverse], 0.0)  # an event at u_m is not at risk
        target += np.where(event, 0.0, h[inverse]) - comp
    infl = (if_a - auc * (c_sum * if_b + b_sum * if_c)) / (b_sum * c_sum)
    se = float(np.std(infl, ddof=1) / math.sqrt(n))  # sd(IF) / sqrt(n), as riskRegression
    return TimeAUC(float(auc), se, n_cases, n_controls)
