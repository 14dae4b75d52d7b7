"""The analytic planning engine: the power and expected width of a planned study at given sizes n.

:class:`AnalyticPlanner` holds a population (binned predictions z and their
anticipated true probabilities q), the ``n_bins`` rule, alpha, the null and an
optional margin, and evaluates the analytic power and expected ECE-scale width
at any n (:mod:`calibtest.core.power` gives the formulas).  It is the engine of
:func:`calibtest.calib_power` and :func:`calibtest.calib_sample_size`, and
lets an analysis plan recompute its sample-size calculation at the achieved n
without the estimation layer.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import expit, ndtri

from calibtest.core import power as _pw
from calibtest.core.binning import resolve_n_bins
from calibtest.core.conditional import SHIFTED_GAMMA_MAX_SKEWNESS
from calibtest.core.null import bin_volume, sigma0_sq, threshold as null_threshold

__all__ = ["AnalyticPlanner", "CensoredPlanner", "logistic_recalibration", "SPARSE_LIMIT", "SMALL_N", "MAX_SKEWNESS",
           "ipcw_second_moment", "ipcw_inflation", "planned_null", "planned_censoring"]

#: The analytic power is flagged unreliable (a warning recommends ``method="simulation"``) when more
#: than this share of the occupied bins is expected to hold a single row, or n < 100.
SPARSE_LIMIT = 0.15
#: Below this n the analytic answer is flagged unreliable whatever the bins.
SMALL_N = 100
#: Above this skewness of T the three-moment (shifted gamma) law is not trusted (as for the conditional null).
MAX_SKEWNESS = SHIFTED_GAMMA_MAX_SKEWNESS


def logistic_recalibration(p: np.ndarray, intercept: float, slope: float) -> np.ndarray:
    """expit(a + b logit p), with p = 0 and p = 1 mapped to their limits (b > 0: 0 and 1).

    a = 0, b = 1 (a calibrated model) gives p itself, exactly.
    """
    if intercept == 0.0 and slope == 1.0:
        return p.copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        lp = np.log(p) - np.log1p(-p)
        eta = intercept + slope * lp
    edge = (p == 0.0) | (p == 1.0)
    if slope == 0.0:
        eta = np.where(edge, intercept, eta)
    return expit(eta)


def ipcw_second_moment(q: np.ndarray, censored_fraction: float) -> np.ndarray:
    r"""E[Y~^2 | q] of the IPCW outcome Y~ = delta 1{X <= t} / G(X-) under the planning model.

    The planning model: given the risk, exponential event times with
    P(T <= t) = q (hazard a / t, a = -log(1 - q)) and independent exponential
    censoring with P(C <= t) = f (hazard b / t, b = -log(1 - f)), G known.
    Then

    .. math::

        E[\tilde Y^2 \mid q] = \int_0^t \frac{f_T(s)}{G(s)} ds
        = \frac{a}{a - b} \bigl(1 - e^{-(a - b)}\bigr) \quad (a = b: a),

    and E[Y~ | q] = q, so Var(Y~ | q) = E[Y~^2 | q] - q^2 >= q (1 - q), with
    equality at f = 0.

    Parameters
    ----------
    q : ndarray
        Anticipated true risks by the horizon, in [0, 1).
    censored_fraction : float
        f in [0, 1): the share of patients censored before the horizon in the
        absence of events.
    """
    q = np.asarray(q, dtype=np.float64)
    a = -np.log1p(-q)
    b = -math.log1p(-censored_fraction)
    d = a - b
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(np.abs(d) > 1e-12, -np.expm1(-d) / d, 1.0 + d * (-0.5 + d / 6.0))
    return a * ratio


def ipcw_inflation(q: np.ndarray, censored_fraction: float) -> float:
    """kappa = sum Var(Y~ | q) / sum q (1 - q): the IPCW inflation of the label variance over a population.

    The censored study of n rows is planned as the uncensored study of n /
    kappa rows (at the bins of n): the first-order variance sigma1^2 / n and
    the null variance of T, of orders Var / n and (Var / n)^2, both match
    (exactly when the inflation is the same in every bin).  With G known;
    estimating G by Kaplan-Meier lowers the variance (Robins and Rotnitzky
    1992), so the plan is conservative.
    """
    q = np.asarray(q, dtype=np.float64).reshape(-1)
    base = q * (1.0 - q)
    return float(np.sum(ipcw_second_moment(q, censored_fraction) - q * q) / np.sum(base))


class AnalyticPlanner:
    """Population, bins per n and the analytic quantities (cached per B).

    Parameters
    ----------
    z, q : ndarray, shape (m, d)
        Binned predictions and their anticipated true probabilities.
    mode : str
        The target (``binary``, ``top1``, ``topk``).
    n_classes, k : int or None, int
        As in the prepared data (``d = k``).
    n_bins : int or "auto"
        The study's ``n_bins`` rule.
    alpha : float
    null : str
        The resolved null (``asymptotic``, ``conditional`` or ``monte-carlo``).
    margin : float or None
        Plan a margin test.
    """

    def __init__(self, z, q, mode, n_classes, k, n_bins, alpha, null, margin=None):
        self.z, self.q = z, q
        self.d = k
        self.n_bins, self.alpha, self.null = n_bins, alpha, null
        self.margin = margin
        self.s0 = sigma0_sq(mode, n_classes, k)
        self._bins = {}

    def bins(self, B: int) -> _pw.PopulationBins:
        if B not in self._bins:
            self._bins[B] = _pw.population_bins(self.z, self.q, B)
        return self._bins[B]

    def B(self, n: int) -> int:
        return resolve_n_bins(self.n_bins, int(n), self.d)[0]

    def analytic(self, n: int) -> dict:
        """The analytic power, expected width and moments at one n (:meth:`analytic_many`)."""
        return self.analytic_many([int(n)])[0]

    def analytic_many(self, ns) -> list[dict]:
        """:meth:`analytic` at every n of ``ns``, with the scipy laws and the quadrature vectorised across n.

        The per-n moments are computed as in :meth:`analytic`; thresholds,
        powers and expected widths are then evaluated on arrays by the
        elementwise versions of the same functions, so every value equals
        :meth:`analytic`'s (``tests/api/test_sample_size.py`` checks it).
        """
        rows, parts = self._moments(ns)
        if not rows:
            return rows
        ns = [row["n"] for row in rows]
        mean, var, skew, s1_hat = (np.array([p[j] for p in parts]) for j in range(4))
        if self.null == "asymptotic":
            thr = np.array([p[4][0] for p in parts])
        else:
            thr = _pw.shifted_gamma_isf_many(self.alpha, [p[4][1] for p in parts], [p[4][2] for p in parts])
        power: np.ndarray | list[float]
        if self.margin is None:
            power = _pw.shifted_gamma_sf_many(thr - mean, var, skew)
        else:
            power = [_pw.margin_power(m_, v_, g_, s_ / n, p[5][0], self.margin, self.alpha, p[5][1])
                     for m_, v_, g_, s_, n, p in zip(mean, var, skew, s1_hat, ns, parts)]
        width = _pw.expected_width_many(mean, var, s1_hat, np.array(ns, dtype=float), thr, self.alpha)
        for row, t_, p_, w_ in zip(rows, thr, power, width):
            row.update(power=float(p_), expected_width=float(w_), threshold=float(t_))
        return rows

    def _moments(self, ns) -> tuple[list[dict], list[tuple]]:
        """``(rows, parts)`` at every n: the rows without power, width and threshold, and per n the tuple
        ``(E T, Var T, skewness, E sigma1_hat^2, (threshold, null variance, null skewness), margin floor)``,
        the margin floor ``(V0, plug-in slope)`` or None without a margin."""
        ns = [int(v) for v in ns]
        Bs = {n: self.B(n) for n in ns}
        missing = sorted(set(Bs.values()) - set(self._bins))
        if missing:
            self._bins.update(_pw.population_bins_many(self.z, self.q, missing))
        pbs = [self._bins[Bs[n]] for n in ns]
        grid = _pw.analytic_grid(ns, pbs, null_moments=self.null != "asymptotic" or self.margin is not None)
        rows, parts = [], []
        for n, pb, g in zip(ns, pbs, grid):
            mean, var, skew, s1_hat = g["mean"], g["variance"], g["skewness"], g["sigma1_sq_hat"]
            occ = g["occupied"]
            sparse = g["e1_sum"] / occ if occ > 0 else 1.0
            if self.null == "asymptotic":
                thr_parts = (null_threshold(self.alpha, self.s0, n, bin_volume(pb.n_bins, self.d)), 0.0, 0.0)
                v0 = self.s0 / (n * n * bin_volume(pb.n_bins, self.d))
            else:
                thr_parts = (math.nan, g["null_variance"], g["null_skewness"])
                v0 = g["null_variance"]
            floor = None if self.margin is None else (v0, g["kappa"])
            parts.append((mean, var, skew, s1_hat, thr_parts, floor))
            rows.append({"n": n, "n_bins": pb.n_bins, "power": None, "expected_width": None,
                         "ece_sq_binned": g["ece_sq_binned"], "sigma1_sq": g["sigma1_sq"],
                         "threshold": None, "t_mean": mean, "t_sd": math.sqrt(var), "t_skewness": skew,
                         "sparse_share": sparse,
                         "reliable": bool(n >= SMALL_N and sparse <= SPARSE_LIMIT and skew <= MAX_SKEWNESS)})
        return rows, parts


class CensoredPlanner(AnalyticPlanner):
    """The plan of a survival study at a horizon with censoring: the uncensored plan at n / kappa rows.

    With censoring before the horizon, :func:`calibtest.calib_ci` analyses
    the IPCW outcomes Y~, whose conditional variance exceeds the label
    variance q (1 - q) (:func:`ipcw_second_moment` under exponential event
    and censoring times).  The first-order variance of T (order Var / n)
    and its null variance (order (Var / n)^2) are those of an uncensored
    study of n / kappa rows, kappa the population's inflation
    (:func:`ipcw_inflation`); the bins stay those of the n rows analysed.
    T's law (mean, variance, skewness) is that of the n / kappa uncensored
    rows; the threshold is the survival test's (the IPCW asymptotic one),
    z_alpha sqrt(V_0), with V_0 the expected null variance that the test
    estimates from the IPCW rows (:meth:`null_variance`).

    Parameters
    ----------
    z, q, mode, n_classes, k, n_bins, alpha
        As in :class:`AnalyticPlanner` (one risk column: ``mode="binary"``).
    censored_fraction : float
        The share of patients censored before the horizon in the absence of events.
    """

    def __init__(self, z, q, mode, n_classes, k, n_bins, alpha, censored_fraction: float, margin=None):
        super().__init__(z, q, mode, n_classes, k, n_bins, alpha, "asymptotic", margin)
        self.censored_fraction = censored_fraction
        self.kappa = ipcw_inflation(q[:, 0], censored_fraction)
        # E[U^2 | z] = Var(Y~ | q) + (q - z)^2 of each population point
        self.second_moment = ipcw_second_moment(q[:, 0], censored_fraction) - q[:, 0] ** 2 + (q[:, 0] - z[:, 0]) ** 2

    def B(self, n: int) -> int:
        return super().B(int(round(n * self.kappa)))  # n here is n / kappa: the bins of the n rows analysed

    def null_variance(self, n: int, pb) -> float:
        """E V_0 of the survival test at n rows: (2/n^2) sum_b E[c_b/(c_b - 1); c_b >= 2] m2_b^2, m2_b = E[U^2 | b].

        The test estimates V_0 from the IPCW rows, whose U^2 carries the
        IPCW variance and, under a miscalibrated model, (q - z)^2 (the
        count moments of :func:`calibtest.core.power.count_moments`).
        """
        count = np.bincount(pb.inverse, minlength=pb.pi.size).astype(np.float64)
        m2 = np.bincount(pb.inverse, weights=self.second_moment, minlength=pb.pi.size) / count
        e2 = _pw.count_moments(int(n), pb.pi)[1]
        return float(2.0 * np.sum(e2 * m2 * m2) / (n * n))

    def analytic_many(self, ns) -> list[dict]:
        """The uncensored plan at n / kappa rows, with the survival test's threshold z_alpha sqrt(V_0) at n.

        With a margin, the power is that of the survival result's margin test
        (:func:`calibtest.core.power.margin_power`): T's law and the plug-in
        E sigma1_hat^2 / (n / kappa) with its slope on T are those of the
        n / kappa uncensored rows, and the floor is V_0, the null variance
        the survival result estimates from its n IPCW rows (:meth:`null_variance`).
        """
        ns = [int(v) for v in ns]
        effective = [max(2, int(round(n / self.kappa))) for n in ns]
        rows, parts = self._moments(effective)
        if not rows:
            return rows
        v0 = np.array([self.null_variance(n, self.bins(r["n_bins"])) for n, r in zip(ns, rows)])
        thr = ndtri(1.0 - self.alpha) * np.sqrt(v0)
        mean = np.array([r["t_mean"] for r in rows])
        var = np.array([r["t_sd"] ** 2 for r in rows])
        skew = np.array([r["t_skewness"] for r in rows])
        if self.margin is None:
            power = _pw.shifted_gamma_sf_many(thr - mean, var, skew)
        else:
            power = np.array([_pw.margin_power(p[0], p[1], p[2], p[3] / n_eff, v, self.margin, self.alpha, p[5][1])
                              for p, n_eff, v in zip(parts, effective, v0)])
        width = _pw.expected_width_many(mean, var, np.array([r["sigma1_sq"] for r in rows]),
                                        np.array(effective, dtype=float), thr, self.alpha)
        for row, n, n_eff, t_, p_, w_ in zip(rows, ns, effective, thr, power, width):
            row.update(n=n, n_effective=n_eff, threshold=float(t_), power=float(p_), expected_width=float(w_),
                       reliable=bool(row["reliable"] and n_eff >= SMALL_N))
        return rows


def planned_null(null: str, censoring: dict | None) -> str:
    """The null of a planned study as summaries and plans name it (a survival study's: IPCW asymptotic)."""
    return "IPCW asymptotic" if censoring is not None else null


def planned_censoring(censoring: dict) -> str:
    """A survival study's anticipated censoring (``PlanningInputs.censoring``) in one phrase."""
    return (f"{censoring['censored_fraction']:.0%} of the patients censored before the horizon (exponential event "
            f"and censoring times; IPCW variance inflation kappa = {censoring['kappa']:.4g})")
