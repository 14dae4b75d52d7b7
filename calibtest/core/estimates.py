"""Every estimate of Algorithm 1 from the bin sums, in one step: the bundle a result is built from.

Steps 2-4 of Algorithm 1 of Sun, Chaudhari, Barnett and Dobriban [1]_: the
debiased estimator T of ECE^2 (eq. (6)), the plug-in sigma1^2 (eq. (8)), the
calibrated-regime test with the exact sigma0^2 (eq. (12)), the chosen null's
test and the adjusted interval with the zero rule (eqs. (10) and (7)), plus
the sparse-cell figures (singleton fraction, second-order variance) that
decide whether the interval is flagged as approximate.  Every path that
builds a :class:`~calibtest.ece.result.CalibrationResult` from bin sums (rows in
memory, files, Dask frames, accumulators) computes them here; the weighted
estimate fills the same bundle from its own engine
(:mod:`calibtest.core.weighted`).

References
----------
.. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
       l2 Expected Calibration Error", arXiv:2408.08998, 2024.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from calibtest.core.binning import singleton_fraction
from calibtest.core.binstats import (BinStats, debiased_statistic, plugin_statistic, second_order_from_sums,
                                     sigma1_sq, sigma1_sq_quadratic)
from calibtest.core.conditional import ConditionalTest, MonteCarloTest, null_law
from calibtest.core.intervals import AdjustedInterval, adjusted_interval
from calibtest.core.null import null_test, threshold as null_threshold
from calibtest.core.partition import cell_geometry
from calibtest.core.targets import Target

__all__ = ["Estimates", "estimates_from_sums"]


@dataclass(frozen=True)
class Estimates:
    """The estimates of one result, before it is built.

    Attributes
    ----------
    estimate, plugin_estimate : float
        T (or T_w) and the plug-in T_m.
    sigma1_sq, sigma0_sq : float
        sigma1^2 and sigma0^2 (a weighted estimate: n^2 w V_0).
    se : float
        Standard error of the estimate.
    bin_volume : float
        The cell volume w.
    test : tuple of float
        ``(zstat, pvalue, threshold)`` of the chosen null's test of ECE = 0.
    interval : AdjustedInterval
        The adjusted interval with the chosen null's zero rule.
    null_method : {"normal", "point mass", "shifted gamma", "monte carlo"}
        How the chosen null's p-value was computed.
    asymptotic : tuple of float or None
        ``(zstat, pvalue)`` of the asymptotic test, kept next to a finite-sample null.
    singleton_fraction : float
        Fraction of the rows alone in their cell.
    second_order_variance : float or None
        V2, the second-order part of Var(T | Z) in the standard error (full
        calibration with K >= 3 and the sums of z z^T), else None.
    """

    estimate: float
    plugin_estimate: float
    sigma1_sq: float
    sigma0_sq: float
    se: float
    bin_volume: float
    test: tuple
    interval: AdjustedInterval
    null_method: str
    asymptotic: tuple | None
    singleton_fraction: float
    second_order_variance: float | None = None


def estimates_from_sums(stats: BinStats, *, mode: str, k: int, n_classes, n_bins: int, alpha: float,
                        null: str = "asymptotic", conditional: ConditionalTest | None = None,
                        monte_carlo: MonteCarloTest | None = None) -> Estimates:
    """T, sigma1^2, the test of H0: calibrated and the interval, from bin sums.

    Parameters
    ----------
    stats : BinStats
        Per-bin sums of the rows.
    mode, k, n_classes : str, int, int or None
        Calibration target.
    n_bins : int
        B; with the target it gives the cell volume w and sigma0^2
        (:func:`calibtest.core.partition.cell_geometry`).
    alpha : float
        Significance level (already validated).
    null : {"asymptotic", "conditional", "monte-carlo"}
        The null law that decides the test and whether 0 joins the interval.
    conditional : ConditionalTest, optional
        The conditional test given the predictions (required by ``null="conditional"``).
    monte_carlo : MonteCarloTest, optional
        The Monte Carlo test (required when the conditional null falls back to it).

    Returns
    -------
    Estimates

    Notes
    -----
    With T the debiased statistic, se = sigma1 / sqrt(n) and the chosen
    null's p-value p, zero joins the interval iff p > alpha; the asymptotic
    null's threshold is z_alpha sigma0 / (n sqrt(w)).
    """
    null_method = null_law(null, conditional)
    n = stats.n
    second_order = None
    full = Target.of(mode).full_calibration
    if full and k >= 3 and stats.sum_zz is not None:
        # V2, the second-order part of Var(T | Z) (core.binstats.second_order_variance): se^2 = sigma1^2/n + V2
        second_order = second_order_from_sums(stats.count, stats.sum_z, stats.sum_zz, stats.sum_tr, n)
    t = debiased_statistic(stats, n)
    s1 = sigma1_sq_quadratic(stats) if full else sigma1_sq(stats, n)
    plugin = plugin_statistic(stats, n)
    se = math.sqrt(s1 / n + (second_order or 0.0))
    volume, sigma0_sq = cell_geometry(mode, k, n_classes, n_bins)
    z_asym, p_asym = null_test(t, n, volume, sigma0_sq)
    zstat, pvalue, threshold = z_asym, p_asym, null_threshold(alpha, sigma0_sq, n, volume)
    if null_method != "normal" and conditional is None:
        raise ValueError(f"null={null!r} needs the conditional test of the rows (conditional=)")
    if null_method in ("shifted gamma", "point mass"):
        assert conditional is not None  # checked above; for the type checker
        zstat, pvalue, threshold = conditional.zstat, conditional.pvalue, conditional.threshold
    elif null_method == "monte carlo":
        if monte_carlo is None:
            raise ValueError("the Monte Carlo null needs its label draws (monte_carlo=)")
        assert conditional is not None  # checked above; for the type checker
        zstat, pvalue, threshold = conditional.zstat, monte_carlo.pvalue, monte_carlo.critical_value(alpha)
    threshold_rule = threshold if null == "asymptotic" else (math.inf if pvalue > alpha else -math.inf)
    return Estimates(estimate=t, plugin_estimate=plugin, sigma1_sq=s1, sigma0_sq=sigma0_sq, se=se,
                     bin_volume=volume, test=(zstat, pvalue, threshold),
                     interval=adjusted_interval(t, se, threshold_rule, alpha), null_method=null_method,
                     asymptotic=None if conditional is None else (z_asym, p_asym),
                     singleton_fraction=singleton_fraction(stats.count), second_order_variance=second_order)
