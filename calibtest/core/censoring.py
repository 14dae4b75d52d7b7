r"""The censoring distribution, inverse probability of censoring weights and their influence functions.

Rows i = 1..n hold an observed time X_i = min(T_i, C_i) >= 0 and an event
indicator delta_i = 1{T_i <= C_i}; the outcome at a horizon t is
Y_i(t) = 1{T_i <= t}, unobserved for rows censored before t.

**IPCW outcome.**  With G(s) = P(C > s) the censoring survival function,

.. math::

    \tilde Y_i = \frac{\delta_i 1\{X_i \le t\}}{G(X_i-)}

has E[\tilde Y | risk] = P(T <= t | risk) when censoring is independent of
the event time given the risk (Kaplan-Meier G: independent of everything;
Cox G: given the covariates of the censoring model).  Rows censored before t
and rows still event-free at t have \tilde Y = 0.  With no censoring before
t, G(s-) = 1 for every s <= t and \tilde Y = Y(t) exactly.

**Kaplan-Meier of the censoring distribution** (the "reverse" Kaplan-Meier,
censorings as events): over the distinct observed times u_1 < ... < u_K with
R_k = #{X >= u_k} at risk and d^C_k censorings at u_k,
G(s) = prod_{u_k <= s} (1 - d^C_k / R_k).  An event and a censoring at the
same time: the event comes first (the censored row was at risk for it), so
an event at u uses G(u-), which excludes the censorings at u.  This is the
convention of R's ``survival`` and of ``riskRegression::ipcw``.

**Influence of the estimated G.**  A statistic T(G) of the \tilde Y_i whose
derivative in \tilde Y_i is a_i / n (for ECE^2: a_i = 2 mu_b(i) + O(1/c_b))
changes, when Kaplan-Meier's G-hat replaces G, by

.. math::

    T(\hat G) - T(G) \approx \frac{1}{n}\sum_j \phi_j, \qquad
    \phi_j = \int \frac{H(u)}{y(u)}\, dM^C_j(u), \qquad
    H(u) = \frac{1}{n}\sum_i a_i \tilde Y_i 1\{X_i > u\},

with y(u) = P(X >= u) and M^C_j the censoring martingale of row j,
since G-hat(s-) / G(s-) - 1 = -(1/n) sum_j int_{[0, s)} dM^C_j / y + o_P(n^{-1/2})
(the Kaplan-Meier influence function).  With y(u_k) = R_k / n and
A_k = sum_i a_i \tilde Y_i 1{X_i > u_k}:

.. math::

    \phi_j = (1 - \delta_j) \frac{A(X_j)}{R(X_j)} - \sum_{u_k \le X_j} \frac{A_k d^C_k}{R_k^2},

computed for all rows with one sort and two cumulative sums
(:func:`km_influence`).  Estimating G by its nonparametric MLE makes the
IPCW estimator more efficient than with G known (Robins and Rotnitzky
1992; Tsiatis 2006, ch. 9), so the term usually lowers the variance.

**Variance of T.**  Var(T) is the first-order (linear) part sigma_1^2 / n
plus the second-order part V_0 of the degenerate U-statistic (the rows'
noise paired within a bin), as in ``calibtest.core.difference_variance``.
The plug-in sigma_1^2 = mean(IF^2) with the estimated bin means
mu-hat_b overstates the first-order part: E[mu-hat_b^2 U_i^2] carries
Var(U) / c_b and the fourth moment E[U^4] / c_b^2, and IPCW outcomes
(values up to 1 / G(t-)) have a large fourth moment when censoring before t
is heavy.  At 73% censored before t (log-logistic times, uniform censoring)
the plug-in se was 1.2 to 1.5 times the spread of T, although the
Kaplan-Meier term was right (it moved the se by 1-3%).  The per-bin sums
of psi_i^2 = (2 mu_b U_i - mu_b^2)^2 are therefore taken as U-statistics
over distinct rows (:func:`unbiased_psi_square_sums`), unbiased for
sum_i E[psi_i^2] when the rows of a bin share their mean, and V_0 is added
(:func:`ipcw_first_order_variance`; ``vignettes/survival_heavy_censoring.md``).

References
----------
.. [1] Robins and Rotnitzky, "Recovery of information and adjustment for
       dependent censoring using surrogate markers", AIDS Epidemiology, 1992.
.. [2] Gerds and Schumacher, "Consistent estimation of the expected Brier
       score in general survival models with right-censored event times",
       Biometrical Journal 48, 2006.
.. [3] Tsiatis, "Semiparametric Theory and Missing Data", Springer, 2006.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["CensoringKM", "censoring_km", "ipcw_outcome", "km_influence", "survival_rows",
           "SurvivalData", "SurvivalOutcome", "event_km_risk", "cox_breslow", "cox_survival_before", "cox_influence",
           "competing_rows", "aalen_johansen_cif", "weighted_km_influence", "unbiased_psi_square_sums",
           "ipcw_first_order_variance"]


@dataclass(frozen=True, eq=False)
class CensoringKM:
    """Kaplan-Meier estimate of the censoring survival function G(s) = P(C > s).

    Attributes
    ----------
    times : ndarray, shape (K,)
        Distinct observed times u_1 < ... < u_K.
    at_risk : ndarray, shape (K,)
        R_k = #{X >= u_k}.
    censored : ndarray, shape (K,)
        d^C_k, censorings at u_k.
    events : ndarray, shape (K,)
        Events at u_k.
    surv : ndarray, shape (K,)
        G(u_k).
    index : ndarray of int, shape (n,)
        The position of each row's time in ``times``.
    """

    times: np.ndarray
    at_risk: np.ndarray
    censored: np.ndarray
    events: np.ndarray
    surv: np.ndarray
    index: np.ndarray = field(repr=False)

    def before(self, s) -> np.ndarray:
        """G(s-), the censoring survival just before ``s`` (1 before the first time)."""
        pos = np.searchsorted(self.times, np.asarray(s, dtype=np.float64), side="left") - 1
        return np.where(pos >= 0, self.surv[np.maximum(pos, 0)], 1.0)

    def at(self, s) -> np.ndarray:
        """G(s), the censoring survival at ``s`` (right-continuous)."""
        pos = np.searchsorted(self.times, np.asarray(s, dtype=np.float64), side="right") - 1
        return np.where(pos >= 0, self.surv[np.maximum(pos, 0)], 1.0)

    def median(self) -> float:
        """The median of the censoring distribution (reverse Kaplan-Meier median follow-up); NaN if not reached."""
        below = np.flatnonzero(self.surv <= 0.5)
        return float(self.times[below[0]]) if below.size else math.nan


def censoring_km(time: np.ndarray, event: np.ndarray, weights: np.ndarray | None = None) -> CensoringKM:
    """Kaplan-Meier of the censoring distribution (censorings as events; events first at tied times).

    Parameters
    ----------
    time : ndarray of float, shape (n,)
        Observed times X_i >= 0.
    event : ndarray of float or bool, shape (n,)
        delta_i (1: event, 0: censored).
    weights : ndarray, shape (n,), optional
        Case weights: the weighted Kaplan-Meier, with R_k = sum of the
        weights of the rows at risk and d^C_k that of the censorings at u_k
        (integer weights: the Kaplan-Meier of the rows repeated).

    Returns
    -------
    CensoringKM
    """
    times, index, counts = np.unique(time, return_inverse=True, return_counts=True)
    index = index.reshape(-1)
    m = times.size
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        total = np.bincount(index, weights=w, minlength=m)
        ev = np.bincount(index, weights=w * np.asarray(event, dtype=np.float64), minlength=m)
        at_risk = total[::-1].cumsum()[::-1]
        cens = total - ev
        surv = np.cumprod(1.0 - np.divide(cens, at_risk, out=np.zeros(m), where=at_risk > 0))
        return CensoringKM(times=times, at_risk=at_risk, censored=cens, events=ev, surv=surv, index=index)
    ev = np.bincount(index, weights=np.asarray(event, dtype=np.float64), minlength=m)
    cens = counts - ev
    at_risk = (time.size - np.cumsum(counts) + counts).astype(np.float64)
    surv = np.cumprod(1.0 - cens / at_risk)
    return CensoringKM(times=times, at_risk=at_risk, censored=cens, events=ev, surv=surv, index=index)


def event_km_risk(km: CensoringKM, horizon: float) -> float:
    """1 - S(t), the Kaplan-Meier risk of an event by ``horizon``, from the same risk sets."""
    keep = km.times <= horizon
    return float(1.0 - np.prod(1.0 - km.events[keep] / km.at_risk[keep]))


def ipcw_outcome(time: np.ndarray, event: np.ndarray, horizon: float, g_before: np.ndarray) -> np.ndarray:
    """The IPCW outcome delta 1{X <= t} / G(X-) (0 for rows censored before t or event-free at t).

    Parameters
    ----------
    time, event : ndarray, shape (n,)
    horizon : float
    g_before : ndarray, shape (n,)
        G(X_i-) of each row (Kaplan-Meier or a model), positive for events before t.
    """
    case = (np.asarray(event) == 1) & (time <= horizon)
    out = np.zeros(time.shape[0])
    out[case] = 1.0 / g_before[case]
    return out


def km_influence(km: CensoringKM, event: np.ndarray, a: np.ndarray) -> np.ndarray:
    """phi_j, the influence of Kaplan-Meier's G on sum_i a_i Y~_i / n (see the module docstring).

    Parameters
    ----------
    km : CensoringKM
        The censoring Kaplan-Meier of the rows (with each row's time index).
    event : ndarray, shape (n,)
        delta_i.
    a : ndarray, shape (n,)
        a_i Y~_i, the derivative of n T in each row's IPCW outcome times that outcome.

    Returns
    -------
    ndarray, shape (n,)
        phi_j; T(G-hat) - T(G) is about mean(phi).
    """
    m = km.times.size
    by_time = np.bincount(km.index, weights=a, minlength=m)
    # A_k = sum of a over rows with X > u_k: the total minus the cumulative sum up to and including u_k
    above = by_time.sum() - np.cumsum(by_time)
    ratio = above / km.at_risk
    compensator = np.cumsum(ratio * km.censored / km.at_risk)
    censored = 1.0 - np.asarray(event, dtype=np.float64)
    return censored * ratio[km.index] - compensator[km.index]


def weighted_km_influence(km: CensoringKM, event: np.ndarray, weights: np.ndarray, a: np.ndarray) -> np.ndarray:
    """phi_j of a weighted Kaplan-Meier G (:func:`censoring_km` with ``weights``) on sum_i a_i Y~_i / n.

    With R_w and d^C_w the weighted risk sets and censorings, G-hat(s-) / G(s-) - 1 is
    -sum_j w_j int_{[0, s)} dM^C_j / R_w to first order (M^C_j with the
    compensator d^C_w / R_w), so that row j's influence is w_j times the
    unweighted expression of :func:`km_influence` with the weighted sums:
    phi_j = w_j [(1 - delta_j) A(X_j) / R_w(X_j) - sum_{u_k <= X_j} A_k d^C_wk / R_wk^2]
    (invariant to the scale of the weights; unit weights give :func:`km_influence`).
    """
    return np.asarray(weights, dtype=np.float64) * km_influence(km, event, a)


def unbiased_psi_square_sums(inverse: np.ndarray, u: np.ndarray, m: int) -> np.ndarray:
    r"""Per bin, an unbiased estimate of sum_{i in b} (2 mu_b U_i - mu_b^2)^2 from the rows' U alone.

    With the power sums p_k = sum_{i in b} U_i^k and the sums over distinct
    rows S_{211} = sum_{i,j,k distinct} U_i^2 U_j U_k and
    S_{1111} = sum_{i,j,k,l distinct} U_i U_j U_k U_l,

    .. math::

        \Psi_b = \frac{4 S_{211}}{(c - 1)(c - 2)} - \frac{3 S_{1111}}{(c - 1)(c - 2)(c - 3)},

    since E[U_i^2 U_j U_k] = E[U_i^2] mu^2 and E[U_i U_j U_k U_l] = mu^4 for
    distinct independent rows of mean mu.  Bins with fewer than four rows
    take the plug-in sum with mu-hat_b = p_1 / c.

    Parameters
    ----------
    inverse : ndarray of intp, shape (n,)
        Bin of each row.
    u : ndarray, shape (n,)
        U_i.
    m : int
        Number of bins.

    Returns
    -------
    ndarray, shape (m,)
    """
    c = np.bincount(inverse, minlength=m).astype(np.float64)
    p1, p2, p3, p4 = (np.bincount(inverse, weights=u ** k, minlength=m) for k in (1, 2, 3, 4))
    s211 = p2 * p1 * p1 - p2 * p2 - 2.0 * p3 * p1 + 2.0 * p4
    s1111 = p1 ** 4 - 6.0 * p1 * p1 * p2 + 3.0 * p2 * p2 + 8.0 * p1 * p3 - 6.0 * p4
    big = c >= 4
    cc = np.where(big, c, 4.0)
    unbiased = 4.0 * s211 / ((cc - 1) * (cc - 2)) - 3.0 * s1111 / ((cc - 1) * (cc - 2) * (cc - 3))
    mu = np.divide(p1, c, out=np.zeros(m), where=c > 0)
    plugin = 4.0 * mu * mu * p2 - 4.0 * mu ** 3 * p1 + c * mu ** 4
    return np.where(big, unbiased, plugin)


def ipcw_first_order_variance(inverse: np.ndarray, u: np.ndarray, m: int, influence: np.ndarray,
                              estimate: float) -> float:
    """sigma_1^2 of T on IPCW rows with the bin moments of psi^2 taken unbiased (module docstring).

    ``influence`` is psi - mean(psi) + phi (:func:`calibtest.ece.survival.ipcw_influence`, phi the
    influence of the estimated G); its mean square is the plug-in sigma_1^2.  The plug-in
    mean((psi - mean psi)^2) is replaced by sum_b Psi_b / n - T^2 (:func:`unbiased_psi_square_sums`),
    the cross term and phi's square kept: sigma_1^2 = max(mean(IF^2) - var(psi) + sum_b Psi_b / n - T^2, 0).
    The noise of mu-hat_b in the cross term and in phi is left in: it moved the variance by 1-3% at 73%
    censored before t.
    """
    n = u.shape[0]
    count = np.bincount(inverse, minlength=m).astype(np.float64)
    mu = np.divide(np.bincount(inverse, weights=u, minlength=m), count, out=np.zeros(m), where=count > 0)[inverse]
    psi = 2.0 * mu * u - mu * mu
    plugin = float(np.mean(influence * influence))
    value = plugin - float(np.var(psi)) + float(unbiased_psi_square_sums(inverse, u, m).sum()) / n - estimate ** 2
    return max(value, 0.0)


def _risk_set_sums(index: np.ndarray, m: int, x: np.ndarray, eta: np.ndarray):
    """S0, S1, S2: sums of exp(eta), x exp(eta) and x x^T exp(eta) over the rows with X >= u_k, per time."""
    w = np.exp(eta - eta.max())  # a common factor: cancels in every ratio
    p = x.shape[1]
    s0 = np.bincount(index, weights=w, minlength=m)[::-1].cumsum()[::-1]
    s1 = np.column_stack([np.bincount(index, weights=w * x[:, j], minlength=m) for j in range(p)])[::-1].cumsum(
        axis=0)[::-1]
    outer = (x[:, :, None] * x[:, None, :]).reshape(-1, p * p) * w[:, None]
    s2 = np.column_stack([np.bincount(index, weights=outer[:, j], minlength=m) for j in range(p * p)])[::-1].cumsum(
        axis=0)[::-1].reshape(m, p, p)
    return s0, s1, s2


def cox_breslow(time: np.ndarray, status: np.ndarray, x: np.ndarray, *, tol: float = 1e-10,
                max_iter: int = 50) -> np.ndarray:
    """Coefficients of a Cox model by Newton's method on the Breslow partial likelihood (ties: Breslow).

    The same estimate as statsmodels' ``PHReg(..., ties="breslow")`` and R's
    ``coxph(..., ties = "breslow")`` (tests/reference/survival_ipcw.R), with
    the risk-set sums of all distinct times from one sort and reverse
    cumulative sums: O(n p^2) per iteration (PHReg takes 1.6 s at n = 10^4).

    Parameters
    ----------
    time : ndarray, shape (n,)
    status : ndarray, shape (n,)
        1 for the model's events (here: the censorings), 0 otherwise.
    x : ndarray, shape (n, p)
        Covariates (centred by the caller for the numerics).

    Raises
    ------
    ValueError
        When the partial likelihood has no maximum (e.g. a covariate that
        separates the events from the rest).
    """
    times, index = np.unique(time, return_inverse=True)
    index = index.reshape(-1)
    m, p = times.size, x.shape[1]
    d = np.bincount(index, weights=status, minlength=m)
    score_fixed = status @ x
    beta = np.zeros(p)
    for _ in range(max_iter):
        s0, s1, s2 = _risk_set_sums(index, m, x, x @ beta)
        keep = d > 0
        mean = s1[keep] / s0[keep, None]
        grad = score_fixed - d[keep] @ mean
        info = np.einsum("k,kij->ij", d[keep], s2[keep] / s0[keep, None, None]) - np.einsum(
            "k,ki,kj->ij", d[keep], mean, mean)
        try:
            step = np.linalg.solve(info, grad)
        except np.linalg.LinAlgError:
            raise ValueError("the Cox model of the censoring has a singular information matrix (a constant or "
                             "collinear covariate in censoring_covariates)") from None
        beta = beta + step
        if not np.all(np.isfinite(beta)):
            break
        if np.max(np.abs(step)) < tol * (1.0 + np.max(np.abs(beta))):
            return beta
    raise ValueError("the Cox model of the censoring did not converge (a covariate may separate the censored "
                     "rows from the others); check censoring_covariates")


def cox_survival_before(time: np.ndarray, status: np.ndarray, x: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """exp(-Lambda_0(X_i-) exp(x_i beta)): the Cox model's survival just before each row's time, with the
    Breslow cumulative hazard Lambda_0(s) = sum_{u <= s} d(u) / sum_{X_j >= u} exp(x_j beta)."""
    times, index = np.unique(time, return_inverse=True)
    index = index.reshape(-1)
    m = times.size
    risk = np.exp(x @ beta)
    d = np.bincount(index, weights=status, minlength=m)
    at_risk = np.bincount(index, weights=risk, minlength=m)[::-1].cumsum()[::-1]
    cumhaz = np.cumsum(d / at_risk)
    before = np.concatenate(([0.0], cumhaz[:-1]))[index]
    return np.exp(-before * risk)


def cox_influence(time: np.ndarray, status: np.ndarray, x: np.ndarray, beta: np.ndarray, a: np.ndarray) -> np.ndarray:
    r"""phi_j, the influence of a Cox-model G (beta and the Breslow Lambda_0 estimated) on sum_i a_i Y~_i / n.

    With G(s | x) = exp(-Lambda_0(s) e^{x beta}), a change of the estimates
    moves Y~_i = 1 / G(X_i- | x_i) by Y~_i e^{eta_i} (dLambda_0(X_i-) + Lambda_0(X_i-) x_i^T dbeta).
    The Breslow estimator's influence is
    dLambda_0(s) = (1/n) sum_j int_0^s dM_j / s0 - dbeta^T int_0^s xbar dLambda_0 and
    beta's is I^{-1} sum_j r_j (r_j the score residual of row j,
    M_j its martingale of the censoring model), so that

    .. math::

        \phi_j = \int rac{K(u)}{S_0(u)} dM_j(u) + c^	op I^{-1} r_j,\quad
        K(u) = \sum_i a_i 	ilde Y_i e^{\eta_i} 1\{X_i > u\},\quad
        c = \sum_i a_i 	ilde Y_i e^{\eta_i} \Bigl(\Lambda_0(X_i-) x_i - \int_{[0, X_i)} ar x\, d\Lambda_0\Bigr),

    with S_0(u) = sum_{X_j >= u} e^{eta_j}, I the observed information.  All
    from one sort and cumulative sums per distinct time.

    Parameters
    ----------
    time, status : ndarray, shape (n,)
        Times and the model's events (the censorings: 1 - delta).
    x : ndarray, shape (n, p)
        Covariates as fitted (centred).
    beta : ndarray, shape (p,)
    a : ndarray, shape (n,)
        a_i Y~_i as in :func:`km_influence`.
    """
    times, index = np.unique(time, return_inverse=True)
    index = index.reshape(-1)
    m, p = times.size, x.shape[1]
    eta = x @ beta
    risk = np.exp(eta)
    scale = math.exp(float(eta.max()))  # _risk_set_sums divides every term by it
    s0, s1, s2 = (v * scale for v in _risk_set_sums(index, m, x, eta))
    d = np.bincount(index, weights=status, minlength=m)
    xbar = s1 / s0[:, None]
    dlam = d / s0
    cum_lam = np.cumsum(dlam)
    cum_xlam = np.cumsum(xbar * dlam[:, None], axis=0)
    lam_before = np.concatenate(([0.0], cum_lam[:-1]))
    xlam_before = np.vstack((np.zeros((1, p)), cum_xlam[:-1]))
    weight = a * risk
    by_time = np.bincount(index, weights=weight, minlength=m)
    above = by_time.sum() - np.cumsum(by_time)  # K(u_k): rows with X > u_k
    ratio = above / s0
    compensator = np.cumsum(ratio * dlam)
    phi = status * ratio[index] - risk * compensator[index]
    c = weight @ (lam_before[index][:, None] * x - xlam_before[index])
    keep = d > 0
    info = np.einsum("k,kij->ij", d[keep], s2[keep] / s0[keep, None, None]) - np.einsum(
        "k,ki,kj->ij", d[keep], xbar[keep], xbar[keep])
    score = status[:, None] * (x - xbar[index]) - risk[:, None] * (x * cum_lam[index][:, None] - cum_xlam[index])
    return phi + score @ np.linalg.solve(info, c)


def survival_rows(time: np.ndarray, event: np.ndarray, horizon: float, time_name: str = "time",
                        event_name: str = "event") -> tuple[np.ndarray, np.ndarray]:
    """Validated float64 times and 0/1 events of a survival outcome at ``horizon``.

    Raises
    ------
    TypeError
        Non-numeric times or events.
    ValueError
        A negative or infinite time, an event code other than 0/1, a horizon
        beyond the last follow-up time, or no event at or before the horizon.
    """
    for values, name in ((time, time_name), (event, event_name)):
        if values.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be numeric, got dtype {values.dtype}")
    time = time.astype(np.float64, copy=False)
    bad = np.flatnonzero(~np.isfinite(time) | (time < 0))
    if bad.size:
        raise ValueError(f"{time_name} must hold finite non-negative times; found {float(time[bad[0]])!r} at row "
                         f"{int(bad[0])} ({bad.size} such rows)")
    ev = event.astype(np.float64, copy=False)
    bad = np.flatnonzero((ev != 0.0) & (ev != 1.0))
    if bad.size:
        codes = np.unique(ev[bad])[:5].tolist()
        raise ValueError(f"{event_name} must be coded 0 (censored) / 1 (event); found codes {codes}. For other "
                         f"codes, declare the event in the formula, e.g. Surv(time, status == 2), or give "
                         "cause= for competing risks (0 censored, 1, 2, ... the causes)")
    last = float(time.max())
    if horizon > last:
        raise ValueError(f"horizon={horizon:g} is beyond the last follow-up time ({last:g}): P(T <= t) is not "
                         "estimable there; choose a horizon within follow-up")
    if not np.any((ev == 1.0) & (time <= horizon)):
        raise ValueError(f"no event at or before horizon={horizon:g} (in {event_name}): the calibration of the "
                         "risk by the horizon cannot be estimated")
    return time, ev


def competing_rows(time: np.ndarray, event: np.ndarray, horizon: float, cause: int, time_name: str = "time",
                   event_name: str = "event") -> tuple[np.ndarray, np.ndarray]:
    """Validated float64 times and event codes of a competing-risks outcome (0 censored, k > 0 cause k).

    Raises the errors of :func:`survival_rows` (on the events of ``cause``), and a ``ValueError`` for event codes
    that are not non-negative integers or a ``cause`` absent from the codes.
    """
    if event.dtype.kind not in "biuf":
        raise TypeError(f"{event_name} must be numeric, got dtype {event.dtype}")
    ev = event.astype(np.float64, copy=False)
    bad = np.flatnonzero(~np.isfinite(ev) | (ev < 0) | (ev != np.round(ev)))
    if bad.size:
        raise ValueError(f"{event_name} must hold competing-risks codes 0 (censored), 1, 2, ... (the causes); found "
                         f"{float(ev[bad[0]])!r} at row {int(bad[0])} ({bad.size} such rows)")
    if not np.any(ev == cause):
        codes = np.unique(ev).astype(int).tolist()[:6]
        raise ValueError(f"cause={cause} is not an event code of {event_name} (codes found: {codes})")
    time, _ = survival_rows(time, (ev == cause).astype(np.float64), horizon, time_name, event_name)
    return time, ev


def aalen_johansen_cif(time: np.ndarray, event: np.ndarray, cause: int, horizon: float) -> float:
    """The Aalen-Johansen cumulative incidence of ``cause`` by ``horizon``: sum_{u_k <= t} S(u_k-) d_ck / R_k.

    S is the Kaplan-Meier of any event (codes > 0), d_ck the events of the
    cause at u_k and R_k the rows at risk; without competing events it is
    1 - S(t).
    """
    times, index, counts = np.unique(time, return_inverse=True, return_counts=True)
    index = index.reshape(-1)
    m = times.size
    at_risk = (time.size - np.cumsum(counts) + counts).astype(np.float64)
    d_any = np.bincount(index, weights=(event > 0).astype(np.float64), minlength=m)
    d_cause = np.bincount(index, weights=(event == cause).astype(np.float64), minlength=m)
    surv = np.cumprod(1.0 - d_any / at_risk)
    before = np.concatenate(([1.0], surv[:-1]))
    keep = times <= horizon
    return float(np.sum((before * d_cause / at_risk)[keep]))


def _read_only(values: np.ndarray) -> np.ndarray:
    out = np.array(values, dtype=np.float64)
    out.flags.writeable = False
    return out


@dataclass(frozen=True)
class SurvivalOutcome:
    """How a survival outcome is read, whatever its rows: the horizon, the censoring model, the names, the cause.

    Attributes
    ----------
    horizon : float
        The horizon t.
    censoring : {"km", "cox"}
        The censoring model.
    covariates : tuple of str
        The Cox censoring model's covariates (empty for Kaplan-Meier).
    time_name, event_name : str
        The columns of the times and the events.
    cause : int or None
        Competing risks: the cause of interest.
    """

    horizon: float
    censoring: str = "km"
    covariates: tuple = ()
    time_name: str = "time"
    event_name: str = "event"
    cause: int | None = None


@dataclass(frozen=True, eq=False)
class SurvivalData:
    """The survival outcome of a result at its horizon, and how censoring was handled.

    Attributes
    ----------
    time, event : ndarray, shape (n,)
        Observed times and event indicators (1 event, 0 censored) of the analysed rows.
    horizon : float
        The horizon t; the outcome is Y(t) = 1{T <= t} and the prediction P(T <= t).
    censoring : {"km", "cox"}
        The model of the censoring distribution of the IPCW weights.
    covariates : tuple of str
        The covariates of the Cox censoring model (empty for Kaplan-Meier).
    n_events : int
        Events at or before the horizon.
    n_censored : int
        Rows censored before the horizon (their Y(t) is unknown).
    n_event_free : int
        Rows known event-free at the horizon (time >= t without an event before).
    median_followup : float
        Median follow-up by the reverse Kaplan-Meier (NaN if not reached).
    km_risk : float
        1 - S(t), the Kaplan-Meier risk by the horizon.
    max_weight : float
        The largest IPCW weight 1 / G(X-) of an event before the horizon (1 without censoring).
    variance : str
        How the standard error accounts for the censoring weights.
    time_name, event_name : str
        Names of the time and event columns.
    cause : int or None
        Competing risks: the event code of the predicted cause (``event``
        then holds the codes: 0 censored, other positive codes competing
        events; ``n_events`` counts the cause and ``km_risk`` is its
        Aalen-Johansen cumulative incidence by the horizon); None: one event type.
    sigma1_sq_unbiased : float or None
        With censoring before t: the first-order variance constant of the
        standard error, sigma1^2 with unbiased bin moments
        (:func:`ipcw_first_order_variance`); the result's ``sigma1_sq`` stays
        the plug-in mean(IF^2).  None without censoring before t.
    second_order_variance : float or None
        With censoring before t: V_0, the second-order variance of T added in
        the standard error, se = sqrt(sigma1_sq_unbiased / n + V_0).
    """

    time: np.ndarray = field(repr=False)
    event: np.ndarray = field(repr=False)
    horizon: float
    censoring: str
    covariates: tuple
    n_events: int
    n_censored: int
    n_event_free: int
    median_followup: float
    km_risk: float
    max_weight: float
    variance: str
    time_name: str = "time"
    event_name: str = "event"
    cause: int | None = None
    sigma1_sq_unbiased: float | None = None
    second_order_variance: float | None = None

    @classmethod
    def build(cls, time, event, outcome: "SurvivalOutcome", *, km: CensoringKM, max_weight: float,
              variance: str) -> "SurvivalData":
        """The survival part of a result (counts before the horizon, follow-up, KM risk or cause's CIF).

        ``outcome`` gives the horizon, the censoring model, its covariates, the
        names and the cause; ``km`` the censoring's Kaplan-Meier (the median
        follow-up), ``max_weight`` the largest IPCW weight and ``variance``
        how the standard error was computed, in words.
        """
        horizon, cause = outcome.horizon, outcome.cause
        censoring, covariates = outcome.censoring, outcome.covariates
        time_name, event_name = outcome.time_name, outcome.event_name
        before = time < horizon
        code = 1 if cause is None else cause
        risk = event_km_risk(km, horizon) if cause is None else aalen_johansen_cif(time, event, cause, horizon)
        return cls(time=_read_only(time), event=_read_only(event), horizon=float(horizon), censoring=censoring,
                   covariates=tuple(covariates), n_events=int(np.count_nonzero((event == code) & (time <= horizon))),
                   n_censored=int(np.count_nonzero((event == 0) & before)),
                   n_event_free=int(np.count_nonzero((time > horizon) | ((time == horizon) & (event == 0)))),
                   median_followup=km.median(), km_risk=risk, max_weight=float(max_weight),
                   variance=variance, time_name=time_name, event_name=event_name, cause=cause)

    @property
    def target(self) -> str:
        """The calibration target in words: the risk at the horizon (of the cause)."""
        return f"survival at the horizon t = {self.horizon:g}" + ("" if self.cause is None else f", cause {self.cause}")

    @property
    def estimand(self) -> str:
        """The estimand in words."""
        if self.cause is not None:
            return (f"ECE^2(t) = E[(P(T <= t, cause {self.cause} | risk) - risk)^2] at t = {self.horizon:g} "
                    "(binned; competing risks)")
        return f"ECE^2(t) = E[(P(T <= t | risk) - risk)^2] at t = {self.horizon:g} (binned)"

    def notes(self) -> list[str]:
        """Summary notes: the estimand, the horizon, the censoring counts and method."""
        follow = ("not reached" if math.isnan(self.median_followup) else f"{self.median_followup:.4g}")
        head = (f"Survival outcome at horizon t = {self.horizon:g}: the estimand is {self.estimand}, the "
                f"prediction is the risk P(T <= t). {self.n_events} events at or before t, {self.n_censored} rows "
                f"censored before t, {self.n_event_free} known event-free at t; median follow-up (reverse "
                f"Kaplan-Meier) {follow}; Kaplan-Meier risk by t {self.km_risk:.4g}.")
        if self.cause is not None:
            competing = int(np.count_nonzero((self.event > 0) & (self.event != self.cause)
                                             & (self.time <= self.horizon)))
            head = (f"Competing risks at horizon t = {self.horizon:g}: the estimand is {self.estimand}, the "
                    f"prediction is the cumulative incidence P(T <= t, cause {self.cause}). {self.n_events} events "
                    f"of cause {self.cause} and {competing} competing events at or before t (outcome 0; not "
                    f"censorings for G), {self.n_censored} rows censored before t; median follow-up (reverse "
                    f"Kaplan-Meier) {follow}; Aalen-Johansen cumulative incidence by t {self.km_risk:.4g}.")
        if self.n_censored == 0:
            return [head + " Nothing is censored before t, so every number is that of the binary outcome "
                           "1{T <= t} (docs/survival.md)."]
        model = ("Kaplan-Meier of the censoring distribution" if self.censoring == "km" else
                 "a Cox model of the censoring on " + ", ".join(self.covariates))
        return [head + f" Censoring is handled by inverse probability of censoring weights ({model}; largest "
                f"weight {self.max_weight:.4g}): the outcome of an event before t is 1 / G(time-), of other "
                f"rows 0. The standard error {self.variance}; the test of ECE(t) = 0 refers "
                "T / sqrt(V_0) to N(0, 1), V_0 estimated from the weighted rows (docs/survival.md)."]

    def to_dict(self) -> dict:
        """The scalar fields, flat."""
        return {"horizon": self.horizon, "censoring": self.censoring, "censoring_covariates": list(self.covariates),
                "n_events_before_horizon": self.n_events, "n_censored_before_horizon": self.n_censored,
                "n_event_free_at_horizon": self.n_event_free,
                "median_followup": None if math.isnan(self.median_followup) else self.median_followup,
                "km_risk_at_horizon": self.km_risk, "max_ipcw_weight": self.max_weight,
                "survival_variance": self.variance, **({} if self.cause is None else {"cause": self.cause}),
                **({} if self.sigma1_sq_unbiased is None else {"sigma1_sq_unbiased": self.sigma1_sq_unbiased,
                                                                "second_order_variance": self.second_order_variance})}
