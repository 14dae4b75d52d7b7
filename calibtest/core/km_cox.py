"""Kaplan-Meier, Nelson-Aalen and Cox (Breslow) fits for right-censored data, vectorised in numpy.

The engines of :mod:`calibtest.checks.survival_calibration`: each takes arrays and
returns arrays, sorting the rows once and working on cumulative sums, so that
n = 10^6 rows take well under a second per fit (statsmodels' ``PHReg`` took
60 s for one covariate at n = 10^6 on the development machine; its
``SurvfuncRight`` fits one group at a time).

* :func:`kaplan_meier_at` -- the Kaplan-Meier estimate of S(t) at a horizon in
  each of G groups, with Greenwood's sum, in one pass:
  ``S(t) = prod_{t_j <= t} (1 - d_j / n_j)``,
  ``Var S(t) = S(t)^2 sum_{t_j <= t} d_j / (n_j (n_j - d_j))`` (Greenwood 1926),
  the t_j the distinct event times of the group, n_j the rows at risk
  (time >= t_j) and d_j the events at t_j.
* :func:`breslow_offset_at` -- Breslow's baseline cumulative hazard at the
  horizon of a Cox model with a fixed offset, and its variance.
* :func:`cox_breslow` -- the Cox proportional hazards model by Newton-Raphson
  on the partial likelihood with Breslow's handling of ties, the inverse
  information as covariance, and Breslow's baseline cumulative hazard at a
  horizon (the estimator of R's ``coxph(ties = "breslow")`` followed by
  ``survfit``/``basehaz``; without tied event times Breslow and Efron coincide).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["time_order", "kaplan_meier_at", "breslow_offset_at", "cox_breslow", "CoxFit", "equal_size_groups"]

#: Newton-Raphson of the Cox fit: at most this many steps ...
COX_MAX_ITER = 50
#: ... stopping when the largest change of a coefficient is below this.
COX_TOL = 1e-10


def equal_size_groups(risk: np.ndarray, n_groups: int) -> np.ndarray:
    """Group index 0..G-1 of each row: G groups of (nearly) equal size by increasing risk.

    The rows are sorted by ``risk`` with a stable sort (tied risks keep their
    row order) and cut as ``numpy.array_split`` cuts: the first ``n mod G``
    groups hold one row more (the groups of :func:`calibtest.hosmer_lemeshow`).
    """
    n = risk.size
    order = np.argsort(risk, kind="stable")
    sizes = np.full(n_groups, n // n_groups) + (np.arange(n_groups) < n % n_groups)
    group = np.empty(n, dtype=np.int64)
    group[order] = np.repeat(np.arange(n_groups), sizes)
    return group


def time_order(time: np.ndarray) -> np.ndarray:
    """The stable order of the rows by increasing time (shared by the fits of one data set)."""
    return np.argsort(time, kind="stable")


def _distinct_times(time: np.ndarray, event: np.ndarray, group: np.ndarray, order=None):
    """The distinct (group, time) pairs of the rows sorted by group then time.

    ``order`` is :func:`time_order` of ``time`` when known.  Returns (order,
    pair id of each sorted row, group of each pair, time of each pair, events
    at each pair, rows at risk at each pair).
    """
    order = time_order(time) if order is None else order
    order = order[np.argsort(group[order], kind="stable")]  # by group, then by time within a group
    gs, ts = group[order], time[order]
    new = np.empty(gs.size, dtype=bool)
    new[:1] = True
    new[1:] = (gs[1:] != gs[:-1]) | (ts[1:] != ts[:-1])
    start = np.flatnonzero(new)
    pair = np.cumsum(new) - 1
    d = np.bincount(pair, weights=event[order].astype(np.float64), minlength=start.size)
    pg, pt = gs[start], ts[start]
    at_risk = (np.searchsorted(gs, pg, side="right") - start).astype(np.float64)
    return order, pair, pg, pt, d, at_risk


def kaplan_meier_at(time, event, horizon: float, group=None, n_groups: int = 1, order=None):
    """Kaplan-Meier S(horizon) and Greenwood's sum in each group.

    Parameters
    ----------
    time : ndarray of float, shape (n,)
        Follow-up times (>= 0).
    event : ndarray of bool, shape (n,)
        True for an event, False for a censored time.
    horizon : float
    group : ndarray of int, shape (n,), optional
        Group index 0..n_groups-1 of each row (default: one group).
    n_groups : int
    order : ndarray of int, optional
        :func:`time_order` of ``time`` (computed when not given).

    Returns
    -------
    surv : ndarray, shape (n_groups,)
        ``prod_{t_j <= horizon} (1 - d_j / n_j)``; 0 when every row at risk at
        some t_j fails there.
    greenwood : ndarray, shape (n_groups,)
        ``sum_{t_j <= horizon} d_j / (n_j (n_j - d_j))`` (+inf when S = 0), so
        that ``Var S = S^2 * greenwood`` and ``greenwood`` is the variance of
        the cumulative hazard ``-log S``.
    """
    g = np.zeros(time.size, dtype=np.int64) if group is None else group
    _, _, pg, pt, d, at_risk = _distinct_times(time, event, g, order)
    keep = (pt <= horizon) & (d > 0)
    pg, d, at_risk = pg[keep], d[keep], at_risk[keep]
    with np.errstate(divide="ignore"):
        log_s = np.bincount(pg, weights=np.log1p(-d / at_risk), minlength=n_groups)
        gw = np.bincount(pg, weights=d / (at_risk * (at_risk - d)), minlength=n_groups)
    return np.exp(log_s), gw


def breslow_offset_at(time, event, offset, horizon: float, order=None) -> tuple[float, float]:
    """Breslow's baseline cumulative hazard at the horizon for a Cox model with a fixed offset, and its variance.

    With log relative hazards ``offset_i`` known (no coefficient is fitted),
    ``H_0(t) = sum_{t_j <= t} d_j / S_0(t_j)`` and
    ``Var H_0(t) = sum_{t_j <= t} d_j / S_0(t_j)^2``,
    ``S_0(s) = sum_{time_i >= s} exp(offset_i)`` (Breslow 1972; the estimator
    and variance of R's ``survfit(coxph(Surv(time, event) ~ offset(o)),
    newdata = data.frame(o = 0))`` with ``ties = "breslow"``).

    Returns
    -------
    cumhaz, variance : float
    """
    order = time_order(time) if order is None else order
    t = time[order]
    ev = event[order]
    o = np.asarray(offset, dtype=np.float64)[order]
    m = float(o.max())
    first = np.searchsorted(t, t[ev & (t <= horizon)], side="left")
    s0 = _tail_sums(np.exp(o - m), first) * math.exp(m)
    return float(np.sum(1.0 / s0)), float(np.sum(1.0 / s0 ** 2))


@dataclass(frozen=True)
class CoxFit:
    """A Cox model fitted by :func:`cox_breslow`.

    Attributes
    ----------
    params : ndarray, shape (p,)
        Log hazard ratios.
    cov : ndarray, shape (p, p)
        Inverse of the observed information at ``params``.
    loglik : float
        Log partial likelihood (Breslow) at ``params``.
    center : ndarray, shape (p,)
        Column means of the design; ``baseline_cumhaz`` is for the centred design.
    baseline_cumhaz : float
        Breslow's ``H_0(horizon) = sum_{t_j <= horizon} d_j / sum_{time_i >= t_j} exp((x_i - center) b)``.
    n_iter : int
    """

    params: np.ndarray
    cov: np.ndarray
    loglik: float
    center: np.ndarray
    baseline_cumhaz: float
    n_iter: int

    def risk_at_horizon(self, x) -> np.ndarray:
        """Predicted P(T <= horizon | x) = 1 - exp(-H_0(horizon) exp((x - center) b)), rows of ``x``."""
        x = np.asarray(x, dtype=np.float64).reshape(-1, self.params.size)
        return -np.expm1(-self.baseline_cumhaz * np.exp((x - self.center) @ self.params))


def _tail_sums(a: np.ndarray, first: np.ndarray) -> np.ndarray:
    """``a[k:].sum(axis=0)`` for each k in ``first``, from one cumulative sum."""
    c = np.cumsum(a, axis=0)
    return c[-1] - c[first] + a[first]


def cox_breslow(time, event, x, horizon: float, start=None, order=None) -> CoxFit:
    """Fit the Cox model by Newton-Raphson on Breslow's partial likelihood.

    Parameters
    ----------
    time : ndarray of float, shape (n,)
    event : ndarray of bool, shape (n,)
    x : ndarray of float, shape (n, p)
        Finite covariates (no intercept: the baseline hazard absorbs it).
    horizon : float
        Where the baseline cumulative hazard is evaluated.
    start : array_like, shape (p,), optional
        Starting coefficients of Newton-Raphson (default 0).
    order : ndarray of int, optional
        :func:`time_order` of ``time`` (computed when not given).

    Returns
    -------
    CoxFit

    Raises
    ------
    ValueError
        No event; a constant covariate; or Newton-Raphson does not converge in :data:`COX_MAX_ITER`
        steps (a coefficient running off to infinity: the events are
        separated by the covariates).

    Notes
    -----
    The rows are sorted by time once; the risk-set sums
    ``S_0 = sum w``, ``S_1 = sum w x`` and ``S_2 = sum w x x'`` over
    ``time >= t`` are reverse cumulative sums read at the first row of each
    block of tied times (Breslow: tied events share one risk set).  The design
    is centred and ``exp`` is taken relative to the largest linear predictor,
    so nothing overflows.  Each step is a Newton step, halved while the log
    partial likelihood decreases.
    """
    order = time_order(time) if order is None else order
    t = time[order]
    ev = event[order]
    if not ev.any():
        raise ValueError("the Cox model needs at least one event")
    x = np.asarray(x, dtype=np.float64)[order]
    center = x.mean(axis=0)
    xc = x - center
    if np.any(np.ptp(x, axis=0) == 0):
        raise ValueError("a covariate of the Cox model is constant: its coefficient is not identified")
    p = xc.shape[1]
    first = np.searchsorted(t, t[ev], side="left")  # the risk set of each event: rows first.. n-1
    xe = xc[ev]
    iu, ju = np.triu_indices(p)
    cross = xc[:, iu] * xc[:, ju]  # the distinct products x_i x_j of the information

    def parts(beta, second=True):
        eta = xc @ beta
        m = float(eta.max())
        w = np.exp(eta - m)
        s0 = _tail_sums(w, first)
        loglik = float(np.sum(eta[ev]) - np.sum(np.log(s0)) - m * xe.shape[0])
        if not second:
            return loglik, s0, m
        s1 = _tail_sums(w[:, None] * xc, first) / s0[:, None]
        grad = np.sum(xe - s1, axis=0)
        s2 = np.sum(_tail_sums(w[:, None] * cross, first) / s0[:, None], axis=0)
        info = np.empty((p, p))
        info[iu, ju] = info[ju, iu] = s2 - np.sum(s1[:, iu] * s1[:, ju], axis=0)
        return loglik, grad, info

    beta = np.zeros(p) if start is None else np.asarray(start, dtype=np.float64).copy()
    loglik, grad, info = parts(beta)
    for it in range(1, COX_MAX_ITER + 1):
        step = np.linalg.solve(info, grad)
        for _ in range(30):  # halve the step while the log partial likelihood decreases
            new = parts(beta + step)
            if new[0] >= loglik - 1e-12 * abs(loglik):
                break
            step = step / 2.0
        beta = beta + step
        loglik, grad, info = new
        if np.max(np.abs(step)) < COX_TOL:
            break
    else:
        raise ValueError(f"the Cox model did not converge in {COX_MAX_ITER} Newton steps (coefficients "
                         f"{np.array2string(beta, precision=3)}): the covariate separates the events")
    if not np.all(np.isfinite(beta)) or np.max(np.abs(beta)) > 1e3:
        raise ValueError("the Cox model diverged: the covariate separates the events")
    _, s0, m = parts(beta, second=False)
    te = t[ev]
    base = float(np.sum(np.exp(-m) / s0[te <= horizon]))
    return CoxFit(params=beta, cov=np.linalg.inv(info), loglik=loglik, center=center, baseline_cumhaz=base,
                  n_iter=it)
