"""From binned sums to a :class:`~calibtest.results.CalibrationResult` (Algorithm 1, steps 2-4).

Shared by the in-memory path (:func:`calibtest.calib_ci`) and by anything
else that produces :class:`~calibtest.stats.BinStats` (chunked files,
distributed frames): the answer depends on the data only through the sums.
"""
from __future__ import annotations

import math

from .binning import cube_indices, group_keys
from .intervals import adjusted_interval
from .modes import PreparedData
from .null import bin_volume, null_test, sigma0_sq
from .results import CalibrationResult, _threshold
from .stats import BinStats, bin_sums, debiased_statistic, plugin_statistic, sigma1_sq

__all__ = ["cube_bin_stats", "cube_rows", "result_from_stats"]


def cube_bin_stats(data: PreparedData, n_bins: int, rows=None) -> BinStats:
    """Bin the rows on the cube partition ``floor(z * B)`` and accumulate their sums.

    ``rows`` is the ``(inverse, keys)`` pair of :func:`cube_rows` when the caller
    already has it (it is computed otherwise).
    """
    inverse, keys = cube_rows(data, n_bins) if rows is None else rows
    return bin_sums(inverse, keys, data.u, data.z)


def cube_rows(data: PreparedData, n_bins: int):
    """Bin number of each row on the cube partition, and the bins' keys (see ``group_keys``)."""
    return group_keys(cube_indices(data.z, n_bins), n_bins + 1)


def result_from_stats(stats: BinStats, *, mode: str, k: int, n_classes, n_bins: int,
                      n_bins_rule: str, alpha: float, volume: float | None = None,
                      sigma0_sq_value: float | None = None, sigma1_sq_value: float | None = None,
                      **extra) -> CalibrationResult:
    """Compute T, sigma1^2, sigma0^2, the test and the adjusted interval from bin sums.

    Parameters
    ----------
    stats : BinStats
        Per-bin sums of the rows.
    mode, k, n_classes : str, int, int or None
        Calibration target (decides sigma0^2 and the bin volume).
    n_bins : int
        Bins per dimension B.
    alpha : float
        Significance level (already validated).
    volume, sigma0_sq_value : float, optional
        Override the cube volume B^-k and the cube-partition sigma0^2 (used by
        other partitions).
    sigma1_sq_value : float, optional
        sigma1^2 computed by the caller from the same sums (default:
        :func:`calibtest.stats.sigma1_sq`).
    **extra
        Further fields of the result (formula, names, data, ...).
    """
    n = stats.n
    w = bin_volume(n_bins, k) if volume is None else volume
    s0 = sigma0_sq(mode, n_classes, k) if sigma0_sq_value is None else sigma0_sq_value
    t = debiased_statistic(stats, n)
    s1 = sigma1_sq(stats, n) if sigma1_sq_value is None else sigma1_sq_value
    se = math.sqrt(s1 / n)
    threshold = _threshold(alpha, s0, n, w)
    z0, p0 = null_test(t, n, w, s0)
    iv = adjusted_interval(t, se, threshold, alpha)
    t_pos = max(t, 0.0)
    return CalibrationResult(
        estimate=t, estimate_pos=t_pos, ece=math.sqrt(t_pos),
        plugin_estimate=plugin_statistic(stats, n), sigma1_sq=s1, sigma0_sq=s0, se=se,
        threshold=threshold, null_zstat=z0, null_pvalue=p0, contains_zero=iv.contains_zero,
        ci_lower=iv.lower, ci_upper=iv.upper, ci_lower_open=iv.lower_open, ci_branch=iv.branch,
        n=n, n_bins=n_bins, n_bins_rule=n_bins_rule, bin_width=1.0 / n_bins, bin_volume=w,
        n_occupied_bins=int(stats.count.size), n_singleton_bins=int((stats.count < 2).sum()),
        k=k, n_classes=n_classes, mode=mode, alpha=alpha, bin_stats=stats, **extra)
