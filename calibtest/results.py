"""Frozen results objects returned by :func:`calibtest.calib_ci`."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import pandas as pd
from scipy import stats as _sps

from .intervals import AdjustedInterval, adjusted_interval, check_alpha
from .modes import PreparedData
from .stats import BinStats

__all__ = ["CalibrationResult", "ConfidenceInterval"]


@dataclass(frozen=True)
class ConfidenceInterval:
    """A confidence interval that unpacks as ``lower, upper``.

    Attributes
    ----------
    lower, upper : float
        Ends of the interval.
    lower_open : bool
        True when the set is ``(0, upper]``: it excludes 0 although its
        infimum is 0 (see ``SPEC.md``, "The interval").
    contains_zero : bool
        Zero belongs to the set (the calibrated-regime test does not reject).
    level : float
        Confidence level 1 - alpha.
    scale : str
        ``"squared"`` (ECE^2) or ``"ece"``.
    """

    lower: float
    upper: float
    lower_open: bool
    contains_zero: bool
    level: float
    scale: str

    def __iter__(self) -> Iterator[float]:
        return iter((self.lower, self.upper))

    def __len__(self) -> int:
        return 2

    def __getitem__(self, i):
        return (self.lower, self.upper)[i]

    def __str__(self) -> str:
        left = "(" if self.lower_open else "["
        return f"{left}{self.lower:.6g}, {self.upper:.6g}]"


def _threshold(alpha: float, sigma0_sq: float, n: int, volume: float) -> float:
    """threshold = z_alpha sigma0 / (n sqrt(w)) (Algorithm 1, step 4)."""
    return float(_sps.norm.isf(alpha) * math.sqrt(sigma0_sq) / (n * math.sqrt(volume)))


@dataclass(frozen=True, eq=False)
class CalibrationResult:
    """Confidence interval and test for the l2 expected calibration error.

    Computed once by :func:`calibtest.calib_ci`; every attribute is exact
    (rounding happens only when a summary is rendered).

    Attributes
    ----------
    estimate : float
        The debiased estimator T of ECE^2 (paper eq. (debiased_estimator)); may be negative.
    estimate_pos : float
        T+ = max(T, 0).
    ece : float
        sqrt(T+), the point estimate on the ECE scale.
    plugin_estimate : float
        The biased plug-in estimate T_m (paper eq. (Hosmer_Lemeshow_version)) on the same bins.
    sigma1_sq : float
        Plug-in variance of the miscalibrated regime (paper eq. (sigma1_plug_in_estimator)).
    sigma0_sq : float
        Exact variance constant of the calibrated regime (paper eq. (var_calibrated)).
    se : float
        sigma1 / sqrt(n).
    threshold : float
        z_alpha sigma0 / (n sqrt(w)); zero joins the interval iff T+ < threshold.
    null_zstat, null_pvalue : float
        Calibrated-regime test of H0: ECE = 0, z0 = n sqrt(w) T / sigma0, p = 1 - Phi(z0).
    contains_zero : bool
        Zero belongs to the interval.
    ci_lower, ci_upper : float
        The adjusted interval for ECE^2 at level 1 - alpha.
    ci_lower_open : bool
        The interval is ``(0, ci_upper]``.
    ci_branch : int
        Case of the paper's eq. (aci) that gave the lower end (1, 2 or 3).
    n : int
        Rows used.
    n_bins : int
        Bins per dimension B; ``bin_width`` = 1/B, ``bin_volume`` = w.
    n_bins_rule : str
        ``"auto"`` or ``"user"``.
    n_occupied_bins, n_singleton_bins : int
        Non-empty bins, and those holding a single row (they do not enter T).
    k, n_classes, mode : int, int or None, str
        Calibration target.
    alpha : float
        Significance level.
    method : str
        How the interval was made (``"adjusted"``: Algorithm 1).
    formula : str or None
    y_name : str
    prob_names : tuple of str
    n_dropped : int
        Rows dropped for missing values (``missing="drop"``).
    null : str
        The null law that decided ``null_zstat``, ``null_pvalue``, ``threshold`` and
        the zero rule: ``"asymptotic"`` (the paper), ``"conditional"`` (exact
        conditional moments, shifted-gamma p-value) or ``"monte-carlo"``
        (see :mod:`calibtest.conditional`).
    asymptotic_zstat, asymptotic_pvalue : float or None
        The paper's calibrated-regime test whatever the chosen null.
    conditional_variance, conditional_skewness : float or None
        Var(T | Z) and the skewness of T given the predictions, under H0.
    conditional_zstat, conditional_pvalue, conditional_threshold : float or None
        T / sd(T | Z), the shifted-gamma p-value and critical value of T at ``alpha``.
    mc_pvalue : float or None
        Conditional Monte Carlo p-value (``null="monte-carlo"``).
    mc_draws : int or None
        Number of label draws R.
    mc_seed : int or None
        Seed that reproduces the draws (None when a Generator was passed).
    n_resamples : int or None
        Resampling methods: resamples (bootstrap), subsamples (subsampling) or
        median-bias subsamples (HulC).
    seed : int, str or None
        Resampling methods: the int seed that reproduces the interval
        (``rng=seed``; drawn from OS entropy when ``rng=None``), or
        ``"Generator"`` when a ``numpy.random.Generator`` was passed.
    resample_size : int or None
        Rows per resample: n (bootstrap), b = floor(sqrt(n)) (subsampling),
        round(n^(2/3)) (HulC's median-bias subsamples).
    hulc_splits, hulc_median_bias : int, float or None
        HulC's number of splits (None when it would exceed n) and estimated median bias.
    resample_estimates : ndarray or None
        Read-only resampled statistics (bootstrap T*, subsample T_b, or the
        HulC split estimates), from which ``conf_int(alpha)`` recomputes a
        bootstrap or subsampling interval at another level.
    """

    estimate: float
    estimate_pos: float
    ece: float
    plugin_estimate: float
    sigma1_sq: float
    sigma0_sq: float
    se: float
    threshold: float
    null_zstat: float
    null_pvalue: float
    contains_zero: bool
    ci_lower: float
    ci_upper: float
    ci_lower_open: bool
    ci_branch: int
    n: int
    n_bins: int
    n_bins_rule: str
    bin_width: float
    bin_volume: float
    n_occupied_bins: int
    n_singleton_bins: int
    k: int
    n_classes: int | None
    mode: str
    alpha: float
    method: str = "adjusted"
    formula: str | None = None
    y_name: str = "y"
    prob_names: tuple = ()
    n_dropped: int = 0
    call: str | None = None
    source: dict | None = field(default=None, repr=False)
    bin_stats: BinStats | None = field(default=None, repr=False)
    data: PreparedData | None = field(default=None, repr=False)
    null: str = "asymptotic"
    asymptotic_zstat: float | None = None
    asymptotic_pvalue: float | None = None
    conditional_variance: float | None = None
    conditional_skewness: float | None = None
    conditional_zstat: float | None = None
    conditional_pvalue: float | None = None
    conditional_threshold: float | None = None
    mc_pvalue: float | None = None
    mc_draws: int | None = None
    mc_seed: int | None = None
    n_resamples: int | None = None
    seed: int | str | None = None
    resample_size: int | None = None
    hulc_splits: int | None = None
    hulc_median_bias: float | None = None
    resample_estimates: np.ndarray | None = field(default=None, repr=False)

    # ----------------------------------------------------------------- intervals
    def _interval(self, alpha: float) -> AdjustedInterval:
        threshold = _threshold(alpha, self.sigma0_sq, self.n, self.bin_volume)
        if self.null != "asymptotic":  # zero joins iff the chosen null's test does not reject
            threshold = math.inf if self.null_pvalue > alpha else -math.inf
        return adjusted_interval(self.estimate, self.se, threshold, alpha)

    def conf_int(self, alpha: float | None = None, scale: str = "squared") -> ConfidenceInterval:
        """Adjusted confidence interval (Algorithm 1 with the zero rule), or the resampling interval.

        Parameters
        ----------
        alpha : float, optional
            Significance level; defaults to the stored ``alpha``.  Another
            level is recomputed from the stored T, sigma1^2 and sigma0^2
            (adjusted), or from the stored resampled statistics (bootstrap,
            subsampling; HulC raises ``ValueError`` because its number of
            splits depends on alpha).  Resampling intervals are intersected
            with [0, inf).
        scale : {"squared", "ece"}
            ``"squared"`` for ECE^2, ``"ece"`` for ECE (square roots of both ends).

        Returns
        -------
        ConfidenceInterval
            Unpacks as ``lower, upper``; ``lower_open`` says when 0 is excluded.
        """
        alpha = self.alpha if alpha is None else check_alpha(alpha)
        if scale not in ("squared", "ece"):
            raise ValueError(f"scale must be 'squared' or 'ece', got {scale!r}")
        if alpha == self.alpha:
            lower, upper = self.ci_lower, self.ci_upper
            open_, zero = self.ci_lower_open, self.contains_zero
        elif self.method != "adjusted":
            from .resampling import clip_interval, raw_interval
            lower, upper, zero = clip_interval(*raw_interval(self, alpha))
            open_ = False
        else:
            iv = self._interval(alpha)
            lower, upper, open_, zero = iv.lower, iv.upper, iv.lower_open, iv.contains_zero
        if scale == "ece":
            lower, upper = math.sqrt(lower), math.sqrt(upper)
        return ConfidenceInterval(lower, upper, open_, zero, 1.0 - alpha, scale)

    # ----------------------------------------------------------------- tables
    def bin_table(self) -> pd.DataFrame:
        """One row per non-empty bin.

        Columns: ``bin`` (the integer cube indices as a tuple), ``lower_j`` and
        ``upper_j`` edges per coordinate, ``count``, ``mean_pred_j`` and
        ``mean_outcome_j`` per coordinate, and ``contribution``, the bin's term
        (||S_b||^2 - Q_b) / (n (c_b - 1)) of T (0 for a single-row bin), so the
        column sums to ``estimate``.
        """
        from .tables import bin_table
        return bin_table(self)

    def hosmer_lemeshow(self, groups: int = 10):
        """Hosmer–Lemeshow test next to the plug-in and debiased estimates.

        See :func:`calibtest.hosmer_lemeshow.hosmer_lemeshow`.
        """
        from .hosmer_lemeshow import hosmer_lemeshow
        return hosmer_lemeshow(self, groups=groups)

    # ----------------------------------------------------------------- output
    def summary(self, alpha: float | None = None):
        """A statsmodels-style summary (``print`` it; ``.as_html()``, ``.as_latex()``)."""
        from .summary import build_summary
        return build_summary(self, alpha=alpha)

    def notes(self) -> list[str]:
        """Plain-text notes shown in the summary footer."""
        from .summary import result_notes
        return result_notes(self)

    def to_dict(self) -> dict:
        """All scalar results as a JSON-safe dict (no arrays, no NaN: NaN becomes None)."""
        from .summary import result_dict
        return result_dict(self)

    def plot_reliability(self, ax=None, **kwargs):
        """Reliability diagram with Wilson intervals and a bin-count strip.

        See :func:`calibtest.plotting.plot_reliability` (returns the Axes, or an
        array of Axes with one panel per coordinate for top-k/full modes).
        """
        from .plotting import plot_reliability
        return plot_reliability(self, ax=ax, **kwargs)

    def report(self, path, **kwargs):
        """Write an HTML or PDF validation report; see :func:`calibtest.reporting.report`."""
        from .reporting import report
        return report(self, path, **kwargs)

    def __repr__(self) -> str:
        ci = self.conf_int()
        return (f"<CalibrationResult mode={self.mode} k={self.k} n={self.n} B={self.n_bins}: "
                f"ECE^2={self.estimate:.6g}, {100 * (1 - self.alpha):g}% CI {ci}, "
                f"p(ECE=0)={self.null_pvalue:.4g}>")
