"""Frozen results objects returned by :func:`calibtest.calib_ci`."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import pandas as pd

from calibtest.display.format import Call, fmt_interval
from calibtest.inputs.validation import check_alpha, check_bool, check_choice
from calibtest.checks.acceptance import AcceptanceEvaluation, MarginTestResult, evaluate_acceptance, margin_test as _margin_test
from calibtest.checks.multiscale import TestOfCalibration
from calibtest.checks.cluster_robust import ClusterRobustMeasures
from calibtest.core.binning import MAX_SINGLETON_FRACTION
from calibtest.core.binstats import BinStats
from calibtest.core.clustered import MIN_CLUSTERS
from calibtest.core.censoring import SurvivalData
from calibtest.core.estimates import Estimates
from calibtest.core.intervals import AdjustedInterval
from calibtest.core.null import AsymptoticTest, threshold as null_threshold
from calibtest.core.resampling import ResamplingInterval, clip_interval
from calibtest.core.simplex import cell_barycentres, decode_order
from calibtest.core.targets import Target
from calibtest.display.summary import ResultDisplay, build_summary, result_dict, result_notes
from calibtest.ece.kinds import AnalysisKind, kind_of
from calibtest.ece.result_parts import (AnalysedRows, BinChoice, Binning, CalibrationTarget, NullChoice, PartField,
                                        ResultInterval, ZeroTest)
from calibtest.checks.evidence_table import (EvidenceResult, conclude, figure_verdict, result_conclusion,
                                             result_hosmer_lemeshow, result_val_prob)

__all__ = ["CalibrationResult", "ConfidenceInterval", "TestOfCalibration", "raw_interval", "Approximation", "Weighting",
           "ResultInterval", "ZeroTest", "Binning", "CalibrationTarget", "AnalysedRows"]


@dataclass(frozen=True)
class Approximation:
    """Whether the interval's coverage is only approximate because of sparse cells, and why.

    Given the cell counts, T is unbiased for
    ``sum_b (c_b / n) 1{c_b >= 2} ||mu_b||^2``: the share of the binned ECE^2
    carried by rows alone in their cell cannot be estimated (no unbiased
    estimator of it exists), so T and its interval are biased down by it
    (``docs/conventions.md``, "What the interval covers").

    Attributes
    ----------
    approximate : bool
        The interval is flagged as approximate.
    reasons : tuple of str
        Why (empty when not approximate).
    singleton_fraction : float
        Fraction of the rows alone in their cell.
    max_singleton_fraction : float
        The bound above which the result is flagged.
    second_order_variance : float or None
        V2, the second-order part of Var(T | Z) added to sigma1^2 / n in the
        standard error (full calibration with K >= 3 on rows in memory; None
        otherwise, see :func:`calibtest.core.binstats.second_order_variance`).
    """

    approximate: bool
    reasons: tuple
    singleton_fraction: float
    max_singleton_fraction: float
    second_order_variance: float | None = None

    @classmethod
    def sparse_cells(cls, singleton_fraction: float, *, mode: Target, k: int, second_order_variance: float | None,
                     more_reasons: tuple = ()) -> "Approximation":
        """The sparse-cell diagnostics of a result: flagged when the interval's coverage is only approximate.

        Flagged when more than :data:`~calibtest.core.binning.MAX_SINGLETON_FRACTION`
        of the rows sit alone in their cell (their share of the binned ECE^2 is
        lost to T, which no estimator can recover), or, for full calibration with
        K >= 3, when the standard error lacks the second-order variance V2 (bin
        sums without the sums of z z^T), or for any of ``more_reasons`` (those of
        a weighted estimate).
        """
        frac = singleton_fraction
        reasons = []
        if frac > MAX_SINGLETON_FRACTION:
            reasons.append(f"{100 * frac:.3g}% of the rows sit alone in their cell (more than "
                           f"{100 * MAX_SINGLETON_FRACTION:.3g}%): T cannot use them and is biased down by their "
                           "share of the binned ECE^2")
        if Target(mode).full_calibration and k >= 3 and second_order_variance is None and frac < 1.0:
            reasons.append("the standard error lacks the second-order variance of T (the bin sums lack those of "
                           "z z^T), which is not negligible when the simplex cells hold few rows")
        reasons.extend(more_reasons)
        return cls(approximate=bool(reasons), reasons=tuple(reasons), singleton_fraction=frac,
                   max_singleton_fraction=MAX_SINGLETON_FRACTION, second_order_variance=second_order_variance)


@dataclass(frozen=True)
class ConfidenceInterval:
    """A confidence interval that unpacks as ``lower, upper``.

    Attributes
    ----------
    lower, upper : float
        Ends of the interval.
    lower_open : bool
        True when the set is ``(0, upper]``: it excludes 0 although its
        infimum is 0 (see ``docs/conventions.md``, "The interval").
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
        return fmt_interval(self.lower, self.upper, self.lower_open, 6)


@dataclass(frozen=True)
class _Failed:
    """A computation of a result's display that failed (kept so that it is not retried)."""

    error: Exception


#: A bin of a weighted result whose effective size (sum w)^2 / sum w^2 is below this is "sparse".
SPARSE_BIN_NEFF = 5.0


@dataclass(frozen=True, eq=False)
class Weighting:
    """How the rows of a weighted result were weighted (``weights=``, ``prevalence=``).

    The estimate, interval and test are for the population the weights
    describe (see ``docs/populations.md`` and :mod:`calibtest.core.weighted`).

    Attributes
    ----------
    kind : {"case weights", "prevalence", "case weights and prevalence"}
    weights_name : str or None
        The weights column (formula use), or None for an array.
    n_eff : float
        Kish's effective sample size (sum w)^2 / sum w^2.
    weight_total : float
        sum w.
    prevalence, sample_prevalence : float or None
        pi (the target population's event rate) and pi_hat (the sample's, weighted by
        the case weights if any); None without ``prevalence=``.
    null_variance : float
        V_0, the estimated calibrated-regime variance of T_w (the test uses
        z0 = T_w / sqrt(V_0); ``sigma0_sq`` of the result is n^2 w V_0).
    contributions : ndarray
        Each bin's term of T_w (in the order of ``bin_stats``); with
        ``prevalence=``, each bin's share of the jackknife estimate (T_JJ, or
        T_J with case weights that vary within a class).
    weight_sum : ndarray
        Sum of the weights per bin.
    mean_pred, mean_outcome : ndarray, shape (m, d)
        Weighted mean prediction and outcome per bin.
    sparse_weight_share : float
        Share of the total weight in bins whose effective size (sum w)^2 / sum w^2
        is below :data:`SPARSE_BIN_NEFF`; above 1% the summary warns that T_w is
        biased upward there (ratios of few weighted pairs).
    case_weights : ndarray or None
        The case weights of the analysed rows (``weights=``; None with
        ``prevalence=``, whose weights depend on the outcome): what the
        case-weighted Hosmer–Lemeshow test of ``res.hosmer_lemeshow()`` needs.
    reweighted : bool
        Re-weighted to a prevalence (``prevalence=``): the weights depend on the outcome (the
        :class:`~calibtest.inputs.design.Design`'s ``reweighted``, recorded by the estimate).
    interval_multipliers : tuple of float or None
        With ``prevalence=``: (k_a, k_h), the quantiles of the studentized
        Monte Carlo null draws that replace z_a and z_h at the lower end of
        the interval (``docs/populations.md``); None otherwise.
    """

    kind: str
    weights_name: str | None
    n_eff: float
    weight_total: float
    prevalence: float | None
    sample_prevalence: float | None
    null_variance: float
    contributions: np.ndarray = field(repr=False)
    weight_sum: np.ndarray = field(repr=False)
    mean_pred: np.ndarray = field(repr=False)
    mean_outcome: np.ndarray = field(repr=False)
    sparse_weight_share: float = 0.0
    interval_multipliers: tuple | None = None
    case_weights: np.ndarray | None = field(default=None, repr=False)
    reweighted: bool = field(default=False, repr=False)

    def description(self, n: int | None = None) -> str:
        """How the rows were weighted and for which population the numbers hold, with pi, pi_hat and n_eff (of
        ``n`` rows when given): the summary's first note and the report's paragraph, in one wording."""
        parts = []
        if self.kind != "prevalence":
            parts.append("weighted by case weights"
                         + (f" (column {self.weights_name})" if self.weights_name else " (given as an array)"))
        if self.reweighted:
            pi, pi_hat = self.prevalence, self.sample_prevalence
            parts.append(f"re-weighted to a population prevalence pi = {pi:.4g} (sample prevalence pi_hat = "
                         f"{pi_hat:.4g}" + (", weighted by the case weights" if parts else "")
                         + f"; events weighted by pi / pi_hat = {pi / pi_hat:.4g}, non-events by (1 - pi) / "
                         f"(1 - pi_hat) = {(1 - pi) / (1 - pi_hat):.4g})")
        return ("The rows were " + " and ".join(parts) + ": the estimate, interval and test are for the population "
                f"the weights describe. Effective sample size (Kish) n_eff = (sum w)^2 / sum w^2 = {self.n_eff:.4g}"
                + ("" if n is None else f" of n = {n} rows") + ". The weighted estimator T_w, its "
                "influence-function standard error and the calibrated-regime variance V_0 estimated from "
                "the weighted rows (docs/populations.md) replace T, sigma1^2 and sigma0^2"
                + (" (with prevalence weights: the iterated jackknife estimate T_JJ, or T_J with case weights "
                   "that vary within a class, and its jackknife standard error, the interval's lower end from "
                   "the studentized Monte Carlo null draws)."
                   if self.reweighted else ".")
                + (" Because prevalence weights depend on the outcome, the test of ECE = 0 is the Monte Carlo "
                   "test given the predictions: outcomes redrawn with the sample's event probability of a "
                   "population-calibrated model, the weights following them." if self.reweighted
                   else ""))

    def notes(self, n: int | None = None) -> list[str]:
        """Summary notes: :meth:`description` and, when much of the weight lies in sparse bins, a warning."""
        return [self.description(n)] + ([
            f"{100 * self.sparse_weight_share:.3g}% of the weight lies in bins whose effective size "
            f"(sum w)^2 / sum w^2 is below {SPARSE_BIN_NEFF:g} (e.g. few rows of an up-weighted class): "
            + ("there the bin ratios rest on a few rows of the up-weighted class; the jackknife estimate "
               "removes most of their upward bias and the Monte Carlo null sets the interval's lower end, but "
               "coverage of a small ECE is only approximate in this regime (docs/populations.md); fewer bins "
               "(n_bins=) or more rows make it firmer." if self.reweighted else
               "there the bin ratios rest on few effective rows and their standard error is less reliable; "
               "use fewer bins (n_bins=) or more rows (docs/populations.md).")] if self.sparse_weight_share > 0.01
            else [])

    def to_dict(self) -> dict:
        """The scalar fields, flat (keys prefixed by their meaning)."""
        return {"weighting": self.kind, "weights_name": self.weights_name, "n_eff": self.n_eff,
                "weight_total": self.weight_total, "prevalence": self.prevalence,
                "sample_prevalence": self.sample_prevalence, "weighted_null_variance": self.null_variance,
                "sparse_weight_share": self.sparse_weight_share,
                "interval_multipliers": None if self.interval_multipliers is None else list(self.interval_multipliers)}


@dataclass(frozen=True, eq=False)
class Clustering:
    """How a clustered result allowed for correlation within clusters (``cluster=``).

    The estimate is T_cl (pairs of rows of different clusters), its standard
    error sqrt(V_1 + V_0) (cluster-robust linear part and the quadratic
    part), the interval's quantiles t_{G-1}, and the test of ECE = 0 the
    cluster sign-flip test or z = T_cl / sqrt(V_0) (see ``docs/clusters.md``
    and :mod:`calibtest.core.clustered`).

    Attributes
    ----------
    name : str or None
        The cluster column (None for an array).
    n_clusters : int
        G.
    sizes : ndarray of int64, shape (G,)
        Rows per cluster (in the order of the sorted labels).
    linear_variance, null_variance : float
        V_1 and V_0.
    null : {"sign-flip", "asymptotic"}
        The null of the test.
    exact : bool
        The sign-flip null enumerated every sign pattern (2^(G-1) of them).
    n_patterns : int
        Sign patterns drawn or enumerated (0 under the asymptotic null).
    zstat, asymptotic_pvalue : float
        z = T_cl / sqrt(V_0) and its normal p-value (kept under either null).
    iid_estimate : float
        The paper's T on the same bins, which also counts the pairs of rows of one cluster.
    measures : ClusterRobustMeasures or None
        CITL, slope and O/E with cluster-robust intervals (binary and top-1).
    codes : ndarray of intp, shape (n,) or None
        Cluster of each analysed row, 0..G-1 (what a clustered comparison needs).
    labels : ndarray, shape (G,) or None
        The cluster labels, in the order of the codes.
    """

    name: str | None
    n_clusters: int
    sizes: np.ndarray = field(repr=False)
    linear_variance: float
    null_variance: float
    null: str
    exact: bool
    n_patterns: int
    zstat: float
    asymptotic_pvalue: float
    iid_estimate: float
    measures: ClusterRobustMeasures | None = field(default=None, repr=False)
    codes: np.ndarray | None = field(default=None, repr=False)
    labels: np.ndarray | None = field(default=None, repr=False)

    @property
    def few(self) -> bool:
        """Fewer clusters than :data:`MIN_CLUSTERS`."""
        return self.n_clusters < MIN_CLUSTERS

    def _patterns_text(self) -> str:
        return (f"all {self.n_patterns} sign patterns, exact" if self.exact else
                f"{self.n_patterns} random sign patterns")

    def notes(self) -> list[str]:
        """The clusters, how the interval and test allow for them, and a warning when few: the summary's notes and
        the report's paragraph, in one wording."""
        sizes = np.asarray(self.sizes)
        what = f"column {self.name}" if self.name else "given as an array"
        null = (f"the cluster sign-flip test ({self._patterns_text()})"
                if self.null == "sign-flip" else "the asymptotic test z = T_cl / sqrt(V_0)")
        notes = [f"The {int(sizes.sum())} rows come from {self.n_clusters} clusters ({what}; {int(sizes.min())} to "
                 f"{int(sizes.max())} rows, median {float(np.median(sizes)):g}), assumed independent, rows within a "
                 "cluster possibly correlated: "
                 "the estimate T_cl averages U_i.U_j over pairs of rows of different clusters (the paper's T "
                 f"on these bins, {self.iid_estimate:.4g}, also counts pairs within a cluster), its standard error "
                 "sqrt(V_1 + V_0) is cluster-robust (cluster-summed influence values plus the between-cluster "
                 f"quadratic part), the interval uses t quantiles with {self.n_clusters - 1} degrees of freedom, and "
                 f"the test of ECE = 0 is {null} (docs/clusters.md)."]
        if self.few:
            notes.append(f"Only {self.n_clusters} clusters (fewer than {MIN_CLUSTERS}): the clustered interval and "
                         "test are unreliable with few clusters: the test has little power and its size is only "
                         "approximately held, and the interval is wide (vignettes/clustered_coverage.md)"
                         + (f"; with {self.n_clusters} clusters the sign-flip p-value cannot be below "
                            f"{1 / self.n_patterns:.3g}" if self.exact and self.null == "sign-flip" else "")
                         + ". Report them as exploratory, or analyse more sites.")
        return notes

    def to_dict(self) -> dict:
        """The scalar fields, flat (keys prefixed by their meaning)."""
        out = {"cluster": self.name, "n_clusters": self.n_clusters, "cluster_size_min": int(np.min(self.sizes)),
               "cluster_size_max": int(np.max(self.sizes)), "cluster_linear_variance": self.linear_variance,
               "cluster_null_variance": self.null_variance, "cluster_null": self.null,
               "cluster_null_exact": self.exact, "cluster_null_patterns": self.n_patterns,
               "cluster_zstat": self.zstat, "cluster_asymptotic_pvalue": self.asymptotic_pvalue,
               "iid_estimate": self.iid_estimate, "few_clusters": self.few}
        if self.measures is not None:
            out.update({f"cluster_robust_{k}": v for k, v in self.measures.to_dict().items()})
        return out


@dataclass(frozen=True, eq=False, repr=False)
class CalibrationResult(ResultDisplay):
    """Confidence interval and test for the l2 expected calibration error.

    Computed once by :func:`calibtest.calib_ci`; every attribute is exact
    (rounding happens only when a summary is rendered).  The headline
    numbers are fields; the rest is grouped into typed, frozen parts
    (:mod:`calibtest.ece.result_parts`), as scipy's ``BootstrapResult``
    nests its ``confidence_interval``.  Every field of a part is also read
    under its flat name (``res.ci_lower`` is ``res.ci.lower``; see Notes).

    Attributes
    ----------
    estimate : float
        The debiased estimator T of ECE^2 (paper eq. (6)); may be negative.
    plugin_estimate : float
        The biased plug-in estimate T_m (paper eq. (2)) on the same bins.
    sigma1_sq : float
        Plug-in variance of the miscalibrated regime (paper eq. (8)).
    se : float
        sigma1 / sqrt(n).
    alpha : float
        Significance level.
    ci : ResultInterval
        The interval for ECE^2 at level 1 - alpha (``lower``, ``upper``,
        ``lower_open``, ``contains_zero``, ``branch``) and how it was made
        (``method``, ``resampling``).
    zero_test : ZeroTest
        The test of H0: ECE = 0 under the null law used (``null``, ``method``,
        ``zstat``, ``pvalue``, ``threshold``, ``sigma0_sq``) and the tests kept
        next to it (``asymptotic``, ``conditional``, ``monte_carlo``).
    binning : Binning
        B (``n_bins``, ``n_bins_rule``), the cell volume, the occupied and
        single-row cells, the bin rule, the bin sums and the partition.
    target : CalibrationTarget
        ``mode``, ``k``, ``n_classes``, ``formula``, ``y_name``, ``prob_names``,
        ``model_label``.
    rows : AnalysedRows
        ``n``, ``n_dropped``, and the rows (``data``, ``source``, ``stream``).
    call_record : Call or None
        The call that produced the result, as data; ``call`` renders it.
    approximation : Approximation or None
        Sparse-cell diagnostics; ``approximate`` is its flag.
    weighting : Weighting or None
        Case weights or prevalence adjustment (``weights=``, ``prevalence=``):
        then ``estimate`` is the weighted T_w, ``se`` its influence-function
        standard error and the test uses the weighted null variance; None
        for unweighted rows.
    clustering : Clustering or None
        Clustered rows (``cluster=``): then ``estimate`` is T_cl (pairs of rows
        of different clusters), ``se`` its cluster-robust standard error, the
        interval uses t_{G-1} quantiles and the test is the cluster one
        (``docs/clusters.md``); None for independent rows.
    survival : SurvivalData or None
        A survival outcome at a horizon (``horizon=``): times, events, the
        horizon, the censoring counts and model (``docs/survival.md``); with
        censoring before the horizon ``estimate`` is T of the IPCW outcomes.
        None for a binary or multi-class outcome.
    estimate_pos : float
        T+ = max(T, 0) (computed from ``estimate``).
    ece : float
        sqrt(T+), the point estimate on the ECE scale (computed from ``estimate``).

    Notes
    -----
    The flat, read-only names of the parts' fields (each returns the part's
    very object):

    ============================================  ==========================================
    ``ci_lower``, ``ci_upper``                    ``ci.lower``, ``ci.upper``
    ``ci_lower_open``, ``ci_branch``              ``ci.lower_open``, ``ci.branch``
    ``contains_zero``, ``method``                 ``ci.contains_zero``, ``ci.method``
    ``resampling``                                ``ci.resampling``
    ``null``, ``null_method``                     ``zero_test.null``, ``zero_test.method``
    ``null_zstat``, ``null_pvalue``               ``zero_test.zstat``, ``zero_test.pvalue``
    ``threshold``, ``sigma0_sq``                  ``zero_test.threshold``, ``zero_test.sigma0_sq``
    ``asymptotic``, ``conditional``               ``zero_test.asymptotic``, ``zero_test.conditional``
    ``monte_carlo``                               ``zero_test.monte_carlo``
    ``n_bins``, ``n_bins_rule``, ``bin_width``    ``binning.n_bins``, ``binning.n_bins_rule``, ``binning.width``
    ``bin_volume``, ``bin_rule``                  ``binning.volume``, ``binning.rule``
    ``n_occupied_bins``, ``n_singleton_bins``     ``binning.n_occupied``, ``binning.n_singleton``
    ``bin_stats``, ``partition``                  ``binning.stats``, ``binning.partition``
    ``mode``, ``k``, ``n_classes``                ``target.mode``, ``target.k``, ``target.n_classes``
    ``formula``, ``y_name``, ``prob_names``       ``target.formula``, ``target.y_name``, ``target.prob_names``
    ``model_label``                               ``target.name``
    ``n``, ``n_dropped``                          ``rows.n``, ``rows.n_dropped``
    ``data``, ``source``, ``stream``              ``rows.data``, ``rows.source``, ``rows.stream``
    ============================================  ==========================================

    Each optional part is one nested object (``asymptotic``, ``conditional``,
    ``monte_carlo``, ``resampling``, ``weighting``, ``clustering``): e.g.
    ``res.conditional.pvalue``, ``res.monte_carlo.seed``,
    ``res.resampling.n_resamples``.  ``to_dict()`` flattens them.
    :meth:`with_parts` makes a changed copy.
    """

    estimate: float
    plugin_estimate: float
    sigma1_sq: float
    se: float
    alpha: float
    ci: ResultInterval
    zero_test: ZeroTest
    binning: Binning
    target: CalibrationTarget
    rows: AnalysedRows
    call_record: Call | None = field(default=None, repr=False)
    approximation: Approximation | None = field(default=None, repr=False)
    weighting: Weighting | None = field(default=None, repr=False)
    clustering: Clustering | None = field(default=None, repr=False)
    survival: SurvivalData | None = field(default=None, repr=False)
    #: What the displays show, computed on first use and kept (see :meth:`_memo`); not part of the result.
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    # ----------------------------------------------------------------- the parts' fields, by their flat names
    ci_lower = PartField[float]("ci", "lower")
    ci_upper = PartField[float]("ci", "upper")
    ci_lower_open = PartField[bool]("ci", "lower_open")
    ci_branch = PartField[int]("ci", "branch")
    contains_zero = PartField[bool]("ci", "contains_zero")
    method = PartField[str]("ci", "method")
    resampling = PartField["ResamplingInterval | None"]("ci", "resampling")
    null = PartField[str]("zero_test", "null")
    null_method = PartField[str]("zero_test", "method")
    null_zstat = PartField[float]("zero_test", "zstat")
    null_pvalue = PartField[float]("zero_test", "pvalue")
    threshold = PartField[float]("zero_test", "threshold")
    sigma0_sq = PartField[float]("zero_test", "sigma0_sq")
    asymptotic = PartField["AsymptoticTest | None"]("zero_test", "asymptotic")
    conditional = PartField["ConditionalTest | None"]("zero_test", "conditional")
    monte_carlo = PartField["MonteCarloTest | None"]("zero_test", "monte_carlo")
    n_bins = PartField[int]("binning", "n_bins")
    n_bins_rule = PartField[str]("binning", "n_bins_rule")
    bin_width = PartField[float]("binning", "width")
    bin_volume = PartField[float]("binning", "volume")
    n_occupied_bins = PartField[int]("binning", "n_occupied")
    n_singleton_bins = PartField[int]("binning", "n_singleton")
    bin_rule = PartField["BinRule | None"]("binning", "rule")
    bin_stats = PartField["BinStats | None"]("binning", "stats")
    partition = PartField["Partition | None"]("binning", "partition")
    mode = PartField[str]("target", "mode")
    k = PartField[int]("target", "k")
    n_classes = PartField["int | None"]("target", "n_classes")
    formula = PartField["str | None"]("target", "formula")
    y_name = PartField[str]("target", "y_name")
    prob_names = PartField[tuple]("target", "prob_names")
    model_label = PartField["str | None"]("target", "name")
    n = PartField[int]("rows", "n")
    n_dropped = PartField[int]("rows", "n_dropped")
    data = PartField["PreparedData | None"]("rows", "data")
    source = PartField["dict | None"]("rows", "source")
    stream = PartField["object | None"]("rows", "stream")

    @property
    def estimate_pos(self) -> float:
        """T+ = max(T, 0)."""
        return max(self.estimate, 0.0)

    @property
    def ece(self) -> float:
        """sqrt(T+), the point estimate on the ECE scale."""
        return math.sqrt(self.estimate_pos)

    @classmethod
    def from_estimates(cls, stats: BinStats, estimates: Estimates, *, bins: BinChoice, target: CalibrationTarget,
                       null: NullChoice, alpha: float, resampling: ResamplingInterval | None = None,
                       **fields) -> "CalibrationResult":
        """The one constructor of a result, used by every path (rows in memory, weighted, streamed, Dask).

        The estimation paths compute the statistics; this fills in what
        follows from them (n and the bin counts from the bin sums, the
        interval's fields, a resampling interval in place of the adjusted one),
        checks that the null is one that was used, and nests the fields into
        their parts.

        Parameters
        ----------
        stats : BinStats
            The bin sums (n, the occupied and single-row bins).
        estimates : Estimates
            T (or T_w), T_m, sigma1^2, sigma0^2 (a weighted result: n^2 w V_0),
            the standard error, the cell volume, the chosen null's test
            ``(zstat, pvalue, threshold)`` and how it was computed, the adjusted
            interval with its zero rule, and the asymptotic test kept next to a
            finite-sample null (:func:`calibtest.core.estimates.estimates_from_sums`).
        bins : BinChoice
            B, how it was chosen and the rows' cells (the :class:`Binning`
            is made of it with ``stats`` and the cell volume).
        target : CalibrationTarget
            The calibration target (mode, k, n_classes); the model's names
            ``formula``, ``y_name`` and ``prob_names`` given in ``fields``
            replace its own.
        null : NullChoice
            The null that decided the test (never ``"auto"``) and the tests
            given the predictions (:class:`ZeroTest`).
        alpha : float
            Level.
        resampling : ResamplingInterval, optional
            A resampling interval, which then replaces the adjusted one
            (intersected with [0, inf)).
        **fields
            ``formula``, ``y_name``, ``prob_names`` (:class:`CalibrationTarget`);
            ``n_dropped``, ``data``, ``source``, ``stream`` (:class:`AnalysedRows`);
            and the result's other fields: ``call_record``, ``approximation``,
            ``weighting``, ``clustering``, ``survival``.
        """
        names = {name: fields.pop(name) for name in ("formula", "y_name", "prob_names") if name in fields}
        rows = {name: fields.pop(name) for name in ("n_dropped", "data", "source", "stream", "impossible")
                if name in fields}
        null, conditional, monte_carlo = null.null, null.conditional, null.monte_carlo
        if null not in ("asymptotic", "conditional", "monte-carlo"):
            raise ValueError(f"a result stores the null it used (asymptotic, conditional or monte-carlo), got {null!r}")
        asymptotic = estimates.asymptotic
        zstat, pvalue, threshold = estimates.test
        return cls(
            estimate=estimates.estimate, plugin_estimate=estimates.plugin_estimate, sigma1_sq=estimates.sigma1_sq,
            se=estimates.se, alpha=alpha, ci=_stored_interval(estimates, resampling),
            zero_test=ZeroTest(null=null, method=estimates.null_method, zstat=zstat, pvalue=pvalue,
                               threshold=threshold, sigma0_sq=estimates.sigma0_sq,
                               asymptotic=None if asymptotic is None else AsymptoticTest(*asymptotic),
                               conditional=conditional, monte_carlo=monte_carlo),
            binning=bins.binning(stats, estimates.bin_volume),
            target=dataclasses.replace(target, **names) if names else target,
            rows=AnalysedRows(n=stats.n, **rows), **fields)

    def with_parts(self, **changes) -> "CalibrationResult":
        """A copy of the result with some fields changed (a new result, with nothing computed yet).

        Parameters
        ----------
        **changes
            Fields by name: a field of the result (``ci=``, ``rows=``,
            ``weighting=``, ...), or a field of a part by its flat name
            (``ci_lower=``, ``null_pvalue=``, ``stream=``), which replaces that
            field in a copy of its part.  A part and one of its flat names
            cannot both be given.

        Raises
        ------
        TypeError
            For a name that is not a field (``estimate_pos``, ``ece`` and
            ``bin_width`` are computed from other fields).
        """
        fields = {f.name for f in dataclasses.fields(self) if f.init}
        direct = {name: value for name, value in changes.items() if name in fields}
        by_part: dict[str, dict] = {}
        for name in changes.keys() - direct.keys():
            forward = vars(CalibrationResult).get(name)
            if not isinstance(forward, PartField) or forward.name == "width":
                raise TypeError(f"with_parts: {name!r} is not a field of CalibrationResult or of one of its parts")
            by_part.setdefault(forward.part, {})[forward.name] = changes[name]
        for part, values in by_part.items():
            if part in direct:
                raise TypeError(f"with_parts: give {part}= or its fields ({', '.join(sorted(values))}), not both")
            direct[part] = dataclasses.replace(getattr(self, part), **values)
        return dataclasses.replace(self, **direct)

    @property
    def censored(self) -> bool:
        """A survival result with rows censored before the horizon (its outcomes are IPCW-weighted)."""
        return self.kind.censored

    @property
    def kind(self) -> AnalysisKind:
        """The kind of the analysis (:mod:`calibtest.ece.kinds`): what every consumer reads of it."""
        return self._memo("kind", lambda: kind_of(self))

    @property
    def n_events(self) -> int | None:
        """Rows with the event: of a survival result, the events (of the cause) at or before the horizon.

        A survival result counts its rows with the event at or before the
        horizon (``survival.n_events``), never its IPCW outcomes; a binary or
        top-1 result holding its rows counts the rows with y = 1 (unweighted,
        case weights or not); None otherwise (bin sums only, top-k, full).
        """
        return self.kind.events()

    @property
    def approximate(self) -> bool:
        """The interval is flagged as approximate (``approximation.reasons`` says why)."""
        return self.approximation is not None and self.approximation.approximate

    # ----------------------------------------------------------------- computed once, on first use
    def _memo(self, key, compute):
        """The value kept under ``key``, computed by ``compute()`` on first use.

        The result is frozen: its fields never change.  What its displays
        show (the evidence suite, Hosmer-Lemeshow, val_prob, the bin table,
        the dict) is computed once per result and key, so that a second
        ``summary()``, ``_repr_html_`` and a report format it without
        computing it again.  A computation that fails with an error about the
        data (ValueError, RuntimeError) is not retried: the error is kept and
        raised again.
        """
        try:
            value = self._cache[key]
        except KeyError:
            try:
                value = compute()
            except (ValueError, RuntimeError) as exc:  # deterministic: the same rows fail the same way
                self._cache[key] = _Failed(exc)
                raise
            self._cache[key] = value
            return value
        if isinstance(value, _Failed):
            raise value.error
        return value

    # ----------------------------------------------------------------- nested parts, flat names
    def _interval(self, alpha: float) -> AdjustedInterval:
        threshold = null_threshold(alpha, self.sigma0_sq, self.n, self.bin_volume)
        if self.null != "asymptotic":  # zero joins iff the chosen null's test does not reject
            threshold = math.inf if self.null_pvalue > alpha else -math.inf
        return self.kind.interval(threshold, alpha)

    def asymptotic_threshold(self, alpha: float | None = None) -> float:
        """The paper's calibrated-regime critical value of T, z_alpha sigma0 / (n sqrt(w)), at ``alpha``."""
        alpha = self.alpha if alpha is None else check_alpha(alpha)
        return null_threshold(alpha, self.sigma0_sq, self.n, self.bin_volume)

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
        check_choice(scale, "scale", ("squared", "ece"))
        if alpha == self.alpha:
            lower, upper = self.ci_lower, self.ci_upper
            open_, zero = self.ci_lower_open, self.contains_zero
        elif self.method != "adjusted":
            lower, upper, zero = clip_interval(*raw_interval(self, alpha))
            open_ = False
        else:
            iv = self._interval(alpha)
            lower, upper, open_, zero = iv.lower, iv.upper, iv.lower_open, iv.contains_zero
        if scale == "ece":
            lower, upper = math.sqrt(lower), math.sqrt(upper)
        return ConfidenceInterval(lower, upper, open_, zero, 1.0 - alpha, scale)

    def margin_test(self, margin: float, alpha: float | None = None) -> MarginTestResult:
        """Test H0: ECE >= margin against H1: ECE < margin (the model meets a pre-specified margin).

        Rejects at level alpha exactly when the one-sided (1 - alpha) upper
        confidence bound for ECE, sqrt(T+ + z_alpha se) with
        se^2 = max(sigma1^2 / n, V0), is below ``margin``; V0, the variance of T
        under calibration, is a floor that keeps the bound from collapsing when
        T <= 0.  See :func:`calibtest.checks.acceptance.margin_test` and ``docs/acceptance.md``.
        """
        return _margin_test(self, margin, alpha)

    def acceptance(self, criteria: dict, alpha: float | None = None, primary: str | None = None,
                   model: str = "The model") -> AcceptanceEvaluation:
        """This result against pre-specified acceptance criteria: a verdict per criterion and one sentence.

        ``criteria`` as :func:`calibtest.plan` takes them (``ece_below``,
        ``citl_within``, ``slope_within``, ``oe_within``); see
        :func:`calibtest.checks.acceptance.evaluate_acceptance`.  Computed once per
        criteria, level, primary criterion and subject (a report uses the same one).
        """
        key = ("acceptance", tuple(sorted((k, v if isinstance(v, (int, float)) else tuple(v))
                                          for k, v in dict(criteria).items())), alpha, primary, model)
        return self._memo(key, lambda: evaluate_acceptance(self, criteria, alpha=alpha, primary=primary, model=model))

    # ----------------------------------------------------------------- tables
    def bin_table(self) -> pd.DataFrame:
        """One row per non-empty bin.

        Columns: ``bin`` (the integer cube indices as a tuple), ``lower_j`` and
        ``upper_j`` edges per coordinate, ``count``, ``mean_pred_j`` and
        ``mean_outcome_j`` per coordinate, and ``contribution``, the bin's term
        (||S_b||^2 - Q_b) / (n (c_b - 1)) of T (0 for a single-row bin), so the
        column sums to ``estimate`` (for a clustered result, to the paper's T on
        the same bins, ``clustering.iid_estimate``).  A weighted result adds ``weight`` (sum of
        the weights) and the weighted means ``mean_pred_weighted_j`` and
        ``mean_outcome_weighted_j``, and ``contribution`` is the bin's term of T_w.
        Computed once per result; each call returns a copy.
        """
        return self._memo("bin_table", lambda: bin_table(self)).copy()

    def hosmer_lemeshow(self, groups: int = 10, validation: str = "external"):
        """Hosmer–Lemeshow test next to the plug-in and debiased estimates.

        ``validation="external"`` (default) refers the statistic to chi2(g),
        for predictions not fitted on these data; ``"development"`` to
        chi2(g - 2).  See :func:`calibtest.checks.hosmer_lemeshow.hosmer_lemeshow`.
        Computed once per result, ``groups`` and ``validation`` (the evidence
        table and the report use the same one).
        """
        self._binary_outcomes("the Hosmer-Lemeshow test")
        return result_hosmer_lemeshow(self, groups, validation)

    def _binary_outcomes(self, what: str) -> None:
        """Refuse a test of binary outcomes on a survival result with rows censored before the horizon."""
        if self.censored:
            raise ValueError(f"{what} needs binary outcomes; {self.survival.n_censored} rows of this survival "
                             "result are censored before the horizon (their outcomes are IPCW-weighted): see "
                             "docs/survival.md")

    def val_prob(self, alpha: float | None = None):
        """:func:`calibtest.val_prob` on this result's rows (binary or top-1): CITL, slope, C, Brier, E_max, ...

        Computed once per result and level (the evidence table and the report
        use the same one).

        Raises
        ------
        ValueError
            For a result without rows (bin sums) or with more than one probability column,
            or a survival result with rows censored before the horizon.
        """
        self._binary_outcomes("val_prob")
        return result_val_prob(self, alpha)

    def conclusion(self, alpha: float | None = None) -> tuple[str, str, tuple]:
        """The verdict, sentence and reasons of this interval and its own test of ECE = 0.

        What a summary opens with when there is no evidence table (weighted
        results, bin sums, ``summary(evidence=False)``); with the evidence,
        ``res.evidence().conclusion()`` is the conclusion from every test.  Both
        are written by :func:`calibtest.checks.evidence_table.conclude`.
        """
        return conclude(self, alpha)

    def figure_verdict(self, alpha: float | None = None, sep: str = "\n") -> str:
        """What a figure of this result says: the ECE with its interval, ``sep``, and the verdict in a few words.

        Written by :func:`calibtest.checks.evidence_table.figure_verdict` (with the
        direction of a top-1 result: "overconfident" or "underconfident"),
        so a plot reads it from the result.
        """
        return figure_verdict(self, alpha, sep=sep)

    # ----------------------------------------------------------------- evidence
    def evidence(self, alpha: float | None = None, rng=None) -> EvidenceResult:
        """Every test of calibration on this result's rows, side by side, and one conclusion.

        The multi-scale test of :func:`calibtest.calib_test` (whether), this
        interval (how much), and for one probability column Hosmer-Lemeshow
        (df = g), Spiegelhalter's z, CITL and the calibration slope, plus a
        bin-sensitivity table; see :func:`calibtest.checks.evidence_table.build_evidence`
        and the conclusion rules of :mod:`calibtest.checks.evidence_table`.  Deterministic:
        the multi-scale test's label draws are seeded by the result's
        recorded seed (the Monte Carlo null's, the resampling's or the call's
        integer ``rng=``; :data:`calibtest.checks.evidence_table.EVIDENCE_SEED` when none
        was recorded), so two calls give the same numbers; it is computed
        once per level and integer seed and kept (the summary, the notebook
        display and the report show the same evidence object).

        A survival result with rows censored before the horizon gives the
        IPCW interval and the classical survival evidence at the horizon
        (O/E, CITL, slope, flexible curve, Greenwood-Nam-D'Agostino; see
        :func:`calibtest.checks.evidence_table.build_survival_evidence`); without
        censoring before the horizon its outcome is binary and its evidence
        is the binary one.

        Parameters
        ----------
        alpha : float, optional
            Level of every test and interval (default: the stored one).
        rng : None, int or numpy.random.Generator
            Another seed for the label draws (None: the recorded one; not
            used by the survival evidence, which draws nothing).

        Returns
        -------
        EvidenceResult

        Raises
        ------
        ValueError
            When the result holds neither rows nor a way to read them again (a
            BinAccumulator's, or a top-k or full target from a file or a Dask
            DataFrame), or is weighted (its tests would ignore the weights).
            A binary or top-1 result of a file or a Dask DataFrame reads its
            rows again (``stream``): every row of the evidence table is
            computed in passes over them, and what cannot be is said in the
            evidence's ``scope``.
        """
        return self.kind.evidence(alpha, rng)  # clustered, survival, weighted: calibtest.ece.kinds

    # ----------------------------------------------------------------- output
    def _summary(self, alpha: float | None):
        return self.summary(alpha)

    def summary(self, alpha: float | None = None, evidence: bool = True):
        """A statsmodels-style summary (``print`` it; ``.as_html()``, ``.as_latex()``).

        ``alpha`` (default: the stored one) sets the level of everything shown:
        the interval, the thresholds of the tests and the notes.

        With rows in memory and ``evidence=True`` (default) the summary opens
        with the evidence table of :meth:`evidence` and its conclusion, and
        shows the bin-sensitivity table.  The evidence (the multi-scale test
        with 999 label draws and, for one probability column,
        Hosmer-Lemeshow and val_prob) is computed by the first summary at a
        level and kept: a second summary, the notebook display and a report
        of the result format it without computing it again.
        ``evidence=False`` skips that work (large n).  A binary or top-1
        result of a file or a Dask DataFrame reads its rows again for the
        evidence (several passes; :mod:`calibtest.streams.evidence`);
        one computed from bin sums alone shows the interval, its test and
        their conclusion only.
        """
        alpha = None if alpha is None else check_alpha(alpha)
        if check_bool(evidence, "evidence"):
            shown, note = self._summary_evidence(alpha)
        else:
            shown, note = None, ("The evidence table (multi-scale test and the other tests on these rows) was "
                                 "not computed: summary(evidence=False).")
        return build_summary(self, alpha, evidence=shown, evidence_note=note,
                             conclusion=result_conclusion(self, alpha, shown))

    def _summary_evidence(self, alpha: float | None) -> tuple[EvidenceResult | None, str | None]:
        """(the evidence the summary shows, or None and the reason it is not shown): the kind's."""
        return self.kind.summary_evidence(alpha)

    def notes(self) -> list[str]:
        """Plain-text notes shown in the summary footer."""
        return result_notes(self)

    def _dict(self) -> dict:
        return self._memo("dict", lambda: result_dict(self))  # to_dict() copies it (json_safe)

    def plot_reliability(self, ax=None, **kwargs):
        """Reliability diagram at display bins with Wilson intervals, over a strip of the rows per 1/B.

        The points are deciles of the predictions (``n_bins=2..15``: equal-width
        bins; ``n_bins="estimator"``: the estimator's B bins), from the rows or,
        for a result of a file or a Dask frame, from its bin sums.  See
        :func:`calibtest.reporting.plotting.plot_reliability` (returns the Axes, or an
        array of Axes with one panel per coordinate for top-k/full modes).
        """
        self.kind.refuse_reliability_plot()  # weighted rows, censored survival rows
        from calibtest.reporting.plotting import plot_reliability
        return plot_reliability(self, ax=ax, **kwargs)

    def report(self, path, **kwargs):
        """Write an HTML or PDF validation report; see :func:`calibtest.report`."""
        from calibtest.reporting.html import report
        return report(self, path, **kwargs)

    def _repr_parts(self) -> list[str]:
        return [self.kind.repr_head(), f"{100 * (1 - self.alpha):g}% CI {self.conf_int()}",
                f"p(ECE=0)={self.null_pvalue:.4g}"]


# --------------------------------------------------------------------------- helpers
def _stored_interval(estimates: Estimates, resampling: ResamplingInterval | None) -> ResultInterval:
    """The interval at the result's level: the adjusted one with its zero rule, or the resampling one in [0, inf)."""
    if resampling is None:
        iv = estimates.interval
        return ResultInterval(lower=iv.lower, upper=iv.upper, lower_open=iv.lower_open,
                              contains_zero=iv.contains_zero, branch=iv.branch)
    lower, upper, zero = clip_interval(resampling.lower, resampling.upper)
    return ResultInterval(lower=lower, upper=upper, lower_open=False, contains_zero=zero, branch=0,
                          method=resampling.method, resampling=resampling)


def raw_interval(result, alpha: float | None = None) -> tuple[float, float]:
    """The resampling interval of a result as the method defines it (ends may be negative).

    ``result.ci_lower`` and ``result.ci_upper`` hold this interval intersected
    with [0, inf), the parameter space of ECE^2.
    """
    if result.resampling is None:
        raise ValueError(f"result was made with method={result.method!r}, not a resampling method")
    return result.resampling.at_level(alpha)



def bin_table(result) -> pd.DataFrame:
    """One row per non-empty bin of ``result`` (see ``CalibrationResult.bin_table``).

    For the cube partition, bin key ``i`` covers ``[i/B, (i+1)/B)`` on each
    coordinate; the key ``B`` (a coordinate exactly 1.0) covers the point 1.
    ``mean_outcome_j`` is the mean of the label indicator Y_j = U_j + Z_j.
    """
    stats = result.bin_stats
    if stats is None:
        raise ValueError("this result holds no bin sums")
    if result.mode.full_calibration:
        return _simplex_bin_table(result)
    B = result.n_bins
    c = stats.count
    d = stats.dim
    keys = stats.keys
    table = {"bin": [tuple(int(v) for v in row) for row in keys]}
    for j in range(d):
        suffix = "" if d == 1 else f"_{j + 1}"
        table[f"lower{suffix}"] = keys[:, j] / B
        table[f"upper{suffix}"] = np.minimum(keys[:, j] + 1, B) / B
    table["count"] = c.astype(np.int64)
    for j in range(d):
        suffix = "" if d == 1 else f"_{j + 1}"
        mean_pred = stats.sum_z[:, j] / c
        table[f"mean_pred{suffix}"] = mean_pred
        table[f"mean_outcome{suffix}"] = mean_pred + stats.sum_u[:, j] / c
    num = np.einsum("bi,bi->b", stats.sum_u, stats.sum_u) - stats.sum_sq
    with np.errstate(divide="ignore", invalid="ignore"):
        contrib = np.where(c >= 2, num / (result.n * (c - 1.0)), 0.0)
    if result.kind.weighted:  # weighted result: weighted means, the terms of T_w
        wt = result.weighting
        table["weight"] = wt.weight_sum
        for j in range(d):
            suffix = "" if d == 1 else f"_{j + 1}"
            table[f"mean_pred_weighted{suffix}"] = wt.mean_pred[:, j]
            table[f"mean_outcome_weighted{suffix}"] = wt.mean_outcome[:, j]
        contrib = wt.contributions
    table["contribution"] = contrib
    df = pd.DataFrame(table)
    return df.sort_values("bin", kind="stable").reset_index(drop=True)


def _simplex_bin_table(result) -> pd.DataFrame:
    """Bin table of full calibration: one row per non-empty simplex cell.

    Columns: ``bin`` (the cell key ``(a_1, ..., a_{K-1}, code)`` of
    :func:`calibtest.core.simplex.simplex_cells`), ``floor`` (the integer parts
    a = floor(s)), ``order`` (the ranks of the fractional parts of s),
    ``barycentre_j`` (the barycentre of the cell's part of the simplex, per
    class), ``count``, ``mean_pred_j``, ``mean_outcome_j`` and ``contribution``
    (the cell's term of T; the column sums to ``estimate``).
    """
    stats = result.bin_stats
    keys = stats.keys
    c = stats.count
    K = stats.dim
    d = keys.shape[1] - 1
    ranks = decode_order(keys[:, d], d)
    bary = cell_barycentres(keys, result.n_bins)
    table = {"bin": [tuple(int(v) for v in row) for row in keys],
             "floor": [tuple(int(v) for v in row) for row in keys[:, :d]],
             "order": [tuple(int(v) for v in row) for row in ranks]}
    for j in range(K):
        table[f"barycentre_{j + 1}"] = bary[:, j]
    table["count"] = c.astype(np.int64)
    for j in range(K):
        mean_pred = stats.sum_z[:, j] / c
        table[f"mean_pred_{j + 1}"] = mean_pred
        table[f"mean_outcome_{j + 1}"] = mean_pred + stats.sum_u[:, j] / c
    num = np.einsum("bi,bi->b", stats.sum_u, stats.sum_u) - stats.sum_sq
    with np.errstate(divide="ignore", invalid="ignore"):
        table["contribution"] = np.where(c >= 2, num / (result.n * (c - 1.0)), 0.0)
    df = pd.DataFrame(table)
    return df.sort_values("bin", kind="stable").reset_index(drop=True)
