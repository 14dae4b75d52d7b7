"""From bin sums to one :class:`~calibtest.ece.result.CalibrationResult`, built once.

Algorithm 1 of Sun, Chaudhari, Barnett and Dobriban, steps 2-4: the debiased
estimator T of ECE^2 (eq. (6)), the plug-in sigma1^2 (eq. (8)), the
calibrated-regime test with the exact sigma0^2 (eq. (12)) and the adjusted
interval with the zero rule (eqs. (10) and (7)).  The in-memory path adds the
optional parts that need the rows: the conditional null, the Monte Carlo
null and a resampling interval; each is computed by its engine in
:mod:`calibtest.core` and nested in the result as it is built.

The answer depends on the data only through the bin sums, so the in-memory
path (:func:`estimate_rows`) and the streaming and distributed backends
(:func:`result_from_sums`) share the same last step.

References
----------
.. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
       l2 Expected Calibration Error", arXiv:2408.08998, 2024.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from calibtest.display.format import Call
from calibtest.inputs.validation import DEFAULT_DRAWS, MAX_BYTES, OptionError, check_memory, resolve_seed
from calibtest.core.binning import BinRule, fixed_rule, singleton_fraction
from calibtest.core.binstats import BinStats, debiased_statistic
from calibtest.core.clustered import cluster_cells, clustered_inference
from calibtest.core.conditional import (SHIFTED_GAMMA_MAX_SKEWNESS, MonteCarloTest, conditional_bin_sums,
                                        conditional_memory, conditional_moments, conditional_sums_from_columns,
                                        conditional_test, label_classes, monte_carlo_test, null_law)
from calibtest.core.estimates import Estimates, estimates_from_sums
from calibtest.core.intervals import adjusted_interval
from calibtest.core.null import null_test, threshold as null_threshold
from calibtest.core.partition import Partition, binned_dimension, cell_geometry, partition_rows
from calibtest.core.resampling import binned_rows, resampling_interval
from calibtest.core.targets import PreparedData
from calibtest.core.weighted import (NullLabels, expected_sparse_weight_share, null_studentized_multipliers,
                                     prevalence_event_prob, prevalence_weights, sparse_bins,
                                     studentized_adjusted_interval, weighted_influence, weighted_null_draws,
                                     weighted_statistics)
from calibtest.checks.cluster_robust import cluster_robust_measures
from calibtest.inputs.design import Design
from calibtest.inputs.rows import Clusters, prepare_input
from calibtest.inputs.settings import Inputs, Settings
from calibtest.ece.result import SPARSE_BIN_NEFF, Approximation, CalibrationResult, Clustering, Weighting
from calibtest.ece.result_parts import BinChoice, CalibrationTarget, NullChoice

__all__ = ["result_from_sums", "result_from_stream", "estimate_rows", "estimate_weighted", "RowWeights", "check_weighted_options",
           "estimate_clustered", "check_clustered_options", "clustered_null",
           "prevalence_partition", "PREVALENCE_SPARSE_SHARE",
           "null_law", "resolve_null", "estimate_in_memory", "keeps_null_sums", "streamed_null",
           "CONDITIONAL_BY_DEFAULT_MAX_DIM"]

#: With ``prevalence=``, a result is flagged approximate when more than this share of the weight lies in
#: bins of effective size below :data:`~calibtest.ece.result.SPARSE_BIN_NEFF`.
SPARSE_WEIGHT_SHARE = 0.01

#: With ``prevalence=`` and ``n_bins="auto"``, B is the largest B <= the unweighted automatic B at which at most
#: this share of the weight expected under calibration lies in bins of expected effective size below
#: :data:`~calibtest.ece.result.SPARSE_BIN_NEFF` (:func:`prevalence_partition`); half the share that flags a
#: result, so that the automatic B is seldom flagged.
PREVALENCE_SPARSE_SHARE = 0.005

#: Under the asymptotic null the conditional moments are recorded by default only while the binned
#: vector has at most this many coordinates (top-k with k <= 4, full calibration with K <= 4): they need
#: per-row d x d and d x d x d terms (20x the estimator at d = 10).
CONDITIONAL_BY_DEFAULT_MAX_DIM = 4


def result_from_sums(stats: BinStats, target: CalibrationTarget, bins: BinChoice, *, alpha: float,
                     null: NullChoice = NullChoice(), resampling=None, call: Call | None = None,
                     **extra) -> CalibrationResult:
    """T, sigma1^2, the test of H0: calibrated and the interval, from bin sums; the result built once.

    Parameters
    ----------
    stats : BinStats
        Per-bin sums of the rows.
    target : CalibrationTarget
        Calibration target (mode, k, n_classes).
    bins : BinChoice
        B and how it was chosen (and the rows' cells); with the target they
        give the cell volume w and sigma0^2
        (:func:`calibtest.core.partition.cell_geometry`).
    alpha : float
        Significance level (already validated).
    null : NullChoice
        The null law that decides the test and whether 0 joins the interval
        (``"asymptotic"``, ``"conditional"``, ``"monte-carlo"``), with the
        conditional test (required by ``"conditional"``) and the Monte Carlo
        test (required by ``"monte-carlo"``).
    resampling : ResamplingInterval, optional
        A resampling interval, which then replaces the adjusted interval
        (intersected with [0, inf), the parameter space of ECE^2).
    call : Call, optional
        The call that produced the result (with the null options already added).
    **extra
        Further fields of the result (formula, names, data, partition, ...).

    Notes
    -----
    The estimates are those of :func:`calibtest.core.estimates.estimates_from_sums`;
    the sparse-cell flags those of :meth:`calibtest.ece.result.Approximation.sparse_cells`.
    """
    estimates = estimates_from_sums(stats, mode=target.mode, k=target.k, n_classes=target.n_classes,
                                    n_bins=bins.n_bins, alpha=alpha, null=null.null, conditional=null.conditional,
                                    monte_carlo=null.monte_carlo)
    approximation = Approximation.sparse_cells(estimates.singleton_fraction, mode=target.mode, k=target.k,
                                               second_order_variance=estimates.second_order_variance)
    return CalibrationResult.from_estimates(
        stats, estimates, bins=bins, target=target, null=null, alpha=alpha, resampling=resampling,
        call_record=call, approximation=approximation, **extra)


def result_from_stream(stats: BinStats, target: CalibrationTarget, bins: BinChoice, *, alpha: float,
                       null: str = "auto", call: Call | None = None, **extra) -> CalibrationResult:
    """The result of bin sums accumulated from a stream (a file, a Dask frame, a :class:`~calibtest.BinAccumulator`).

    As :func:`result_from_sums`, with what a stream resolves from its sums
    alone: the null (``null="auto"`` included) and its conditional test from
    the sums of the conditional moments (:func:`streamed_null`), and the bin
    rule from the cell counts (:func:`calibtest.core.binning.fixed_rule`:
    B was fixed before the rows arrived).

    Parameters
    ----------
    stats : BinStats
        The merged bin sums, with ``null_sums`` when :func:`keeps_null_sums`.
    target, bins, alpha, call, **extra
        As in :func:`result_from_sums` (the rule of ``bins`` is found here).
    null : {"auto", "asymptotic", "conditional"}
        The requested null.
    """
    mode, k, n_bins = target.mode, target.k, bins.n_bins
    null, conditional = streamed_null(stats, null, stats.dim, alpha)
    bin_rule = fixed_rule(bins.n_bins_rule, n_bins, stats.n, binned_dimension(mode, k), stats.count)
    estimates = estimates_from_sums(stats, mode=mode, k=k, n_classes=target.n_classes, n_bins=n_bins, alpha=alpha,
                                    null=null, conditional=conditional)
    approximation = Approximation.sparse_cells(estimates.singleton_fraction, mode=mode, k=k,
                                               second_order_variance=estimates.second_order_variance)
    return CalibrationResult.from_estimates(
        stats, estimates, bins=BinChoice(n_bins, bins.n_bins_rule, rule=bin_rule), target=target,
        null=NullChoice(null, conditional), alpha=alpha, call_record=call, approximation=approximation, **extra)


def resolve_null(null: str, d: int, m: int) -> str:
    """The null ``null="auto"`` stands for on rows in memory; any other value is returned as is.

    ``"auto"`` is ``"conditional"`` while the binned vector has at most
    :data:`CONDITIONAL_BY_DEFAULT_MAX_DIM` coordinates (binary, top-1, top-k
    with k <= 4, full calibration with K <= 4) and the conditional moments fit
    in memory, and ``"asymptotic"`` otherwise (the per-row d x d x d terms of
    the conditional moments cost about 20 times the estimator at d = 10).

    Parameters
    ----------
    null : str
        The validated ``null=`` option.
    d : int
        Coordinates of the binned vector.
    m : int
        Occupied bins.

    Returns
    -------
    str
        ``"asymptotic"``, ``"conditional"`` or ``"monte-carlo"``.
    """
    if null != "auto":
        return null
    if d <= CONDITIONAL_BY_DEFAULT_MAX_DIM and conditional_memory(d, m) <= MAX_BYTES:
        return "conditional"
    return "asymptotic"


def keeps_null_sums(null: str, d: int) -> bool:
    """Whether a stream keeps the per-bin sums of the conditional moments (``BinStats.null_sums``).

    The rule of the in-memory path (:func:`estimate_rows`), which computes
    the conditional moments whenever the binned vector has at most
    :data:`CONDITIONAL_BY_DEFAULT_MAX_DIM` coordinates (under any null, so
    the result records them) or ``null="conditional"`` asks for them.
    """
    return d <= CONDITIONAL_BY_DEFAULT_MAX_DIM or null == "conditional"


def streamed_null(stats: BinStats, null: str, d: int, alpha: float):
    """The null of a result computed from streamed bin sums, and its conditional test.

    The same rule as for rows in memory (:func:`resolve_null`, then
    :func:`null_law`), with the conditional moments computed from the
    additive sums ``stats.null_sums`` by the same formulas
    (:func:`calibtest.core.conditional.conditional_moments`), so files, Dask
    frames and accumulators get the in-memory null and p-value up to the
    order of the floating-point additions.

    Where the rows in memory would use the conditional Monte Carlo test (the
    chosen null is conditional and the conditional skewness of T exceeds
    :data:`~calibtest.core.conditional.SHIFTED_GAMMA_MAX_SKEWNESS`, where the
    shifted gamma's size is not to be trusted), the label draws need the
    rows, which a stream does not keep: ``null="auto"`` then uses the
    paper's asymptotic test (conservative there; the summary says so and
    keeps the conditional moments for reference) and ``null="conditional"``
    raises a ValueError rather than give another answer than the rows in
    memory.

    Parameters
    ----------
    stats : BinStats
        The merged bin sums, with ``null_sums`` when :func:`keeps_null_sums`.
    null : {"auto", "asymptotic", "conditional"}
        The requested null.
    d : int
        Coordinates of the binned vector.
    alpha : float

    Returns
    -------
    (str, ConditionalTest or None)
        The null used and the conditional test (None when the sums were not kept).
    """
    if null == "monte-carlo":
        raise ValueError("null='monte-carlo' draws labels for every row and needs the rows in memory (a DataFrame "
                         "or arrays); streamed data support null='auto', 'conditional' and 'asymptotic'")
    m = int(stats.count.size)
    requested, null = null, resolve_null(null, d, m)
    if null != "asymptotic":
        check_memory(conditional_memory(d, m), f"null={null!r} (the conditional moments of T for {d} binned "
                     f"coordinates and {m} bins)", "use fewer coordinates (a smaller k) or fewer bins, or the "
                     "asymptotic null")
    if stats.null_sums is None:
        if null == "conditional":
            raise ValueError("null='conditional' needs the per-bin sums of the conditional moments, which these bin "
                             "sums lack (for more than "
                             f"{CONDITIONAL_BY_DEFAULT_MAX_DIM} binned coordinates they are kept only when the "
                             "stream is built with null='conditional')")
        return null, None
    n = stats.n
    moments = conditional_moments(conditional_sums_from_columns(stats.count, stats.null_sums), n)
    conditional = conditional_test(debiased_statistic(stats, n), moments, alpha)
    if null == "conditional" and null_law(null, conditional) == "monte carlo":
        if requested == "auto":  # the rows are gone: the paper's (conservative) test, said in the notes
            return "asymptotic", conditional
        raise ValueError(
            f"null='conditional', but the conditional skewness of T is {conditional.skewness:.3g} (above "
            f"{SHIFTED_GAMMA_MAX_SKEWNESS:g}: predictions so near 0 or 1 that a few label errors dominate T), "
            "where the shifted gamma's size is not to be trusted and rows in memory use the exact Monte Carlo "
            "test; its label draws need the rows, which streamed data do not keep. Load the formula's columns "
            "into memory (a DataFrame) for the exact test, or pass null='auto' or null='asymptotic' "
            "(BinAccumulator.result(null=...) reuses the sums without another pass)")
    return null, conditional


def _null_call(call: Call, null: str, monte_carlo, requested: str) -> Call:
    """The call with the null options that reproduce it (the drawn Monte Carlo seed included).

    The default ``null="auto"`` stays implicit: the same call resolves it the same way.
    """
    options = {} if requested == "auto" else {"null": null}
    if monte_carlo is not None:
        if monte_carlo.seed is not None and call.options.get("rng") is None:
            options["rng"] = monte_carlo.seed
        if monte_carlo.n_draws != DEFAULT_DRAWS:
            options["n_null_draws"] = monte_carlo.n_draws
    return call.with_options(**options)


def estimate_rows(data: PreparedData, partition: Partition, settings: Settings, *, call: Call | None = None,
                  **extra) -> CalibrationResult:
    """The whole in-memory estimate: bin sums, the nulls that need the rows, the interval; one result.

    Parameters
    ----------
    data : PreparedData
        Z and U of every row.
    partition : Partition
        The rows' bins, built once by :func:`calibtest.core.partition.partition_rows`.
    settings : Settings
        ``alpha``, ``null``, ``rng``, ``n_null_draws``, ``method``,
        ``n_resamples``, ``progress`` as in :func:`calibtest.calib_ci` (already
        validated; the other fields are not read).  The Monte Carlo
        null draws first, then the resampling interval: an int seed s gives
        them the independent streams ``default_rng(s)`` and ``default_rng([s, 1])``,
        a Generator is consumed by both in that order.
    call : Call, optional
    **extra
        Bookkeeping fields of the result.

    Returns
    -------
    CalibrationResult
    """
    alpha, null, rng, method = settings.alpha, settings.null, settings.rng, settings.method
    stats = partition.bin_sums(data)
    t = debiased_statistic(stats, stats.n)
    conditional = monte_carlo = resampling = None
    d = data.z.shape[1]
    requested, null = null, resolve_null(null, d, partition.m)
    if null != "asymptotic":
        check_memory(conditional_memory(d, partition.m), f"null={null!r} (the conditional moments of T for "
                     f"{d} binned coordinates and {partition.m} bins)",
                     "use fewer coordinates (a smaller k) or fewer bins, or the asymptotic null")
    if null != "asymptotic" or d <= CONDITIONAL_BY_DEFAULT_MAX_DIM:
        sums = conditional_bin_sums(data.z, partition.inverse)
        conditional = conditional_test(t, conditional_moments(sums, data.n), alpha)
    if null != "asymptotic" and null_law(null, conditional) == "monte carlo":
        monte_carlo = monte_carlo_test(data.z, partition.inverse, label_classes(data), n=data.n,
                                       n_draws=settings.n_null_draws, rng=rng, complete=data.mode.full_calibration)
    if method != "adjusted":
        resampling = resampling_interval(binned_rows(partition, data.u), method, alpha=alpha, estimate=t,
                                         n_resamples=settings.n_resamples, rng=rng, progress=settings.progress)
    if call is not None and (null != "asymptotic" or requested != "auto"):  # an explicit null is part of the call
        call = _null_call(call, null, monte_carlo, requested)
    return result_from_sums(stats, CalibrationTarget(data.mode, data.k, data.n_classes),
                            BinChoice(partition.n_bins, partition.n_bins_rule, partition.bin_rule, partition),
                            alpha=alpha, null=NullChoice(null, conditional, monte_carlo), resampling=resampling,
                            call=call, data=data, **extra)


def _read_only(values: np.ndarray) -> np.ndarray:
    """A read-only copy of an array a frozen result keeps."""
    out = np.array(values, dtype=np.float64)
    out.flags.writeable = False
    return out


@dataclasses.dataclass(frozen=True)
class RowWeights:
    """The weights of a weighted estimate, as the call gave them.

    Attributes
    ----------
    values : ndarray or None
        Case weights (validated), or None for prevalence weights alone.
    name : str, optional
        Name of the weights column, for the summary.
    reweighted : bool
        The design's ``reweighted`` (:class:`~calibtest.inputs.design.Design`): the settings' ``prevalence``
        is applied (outcome-dependent weights).  False on a survival outcome, whose design refuses
        ``prevalence=``.
    sample_prevalence : float, optional
        pi_hat to use (a subgroup uses the whole sample's); default: these rows'.
    """

    values: np.ndarray | None
    name: str | None = None
    reweighted: bool = False
    sample_prevalence: float | None = None


def estimate_weighted(data: PreparedData, partition: Partition, row_weights: RowWeights, settings: Settings, *,
                      call: Call | None = None, extra_influence=None, **extra) -> CalibrationResult:
    """The weighted estimate (case weights and/or prevalence adjustment); one result.

    T_w, its influence-function variance and the calibrated-regime variance
    V_0 (:mod:`calibtest.core.weighted`) take the places of T, sigma1^2 and
    sigma0^2 / (n^2 w): the result's ``sigma0_sq`` is n^2 w V_0, so that
    z0 = n sqrt(w) T_w / sigma0 = T_w / sqrt(V_0) and the threshold of the
    zero rule is z_alpha sqrt(V_0) at any level.

    Parameters
    ----------
    data, partition
        The prepared rows and their bins.
    weights : ndarray or None
        Case weights (validated), or None for prevalence weights alone.
    settings : Settings
        ``alpha``; ``prevalence`` (optional): pi, events (binary y = 1, top-1
        correct) get weight pi / pi_hat, non-events (1 - pi) / (1 - pi_hat),
        times the case weights; ``null``, ``rng`` and ``n_null_draws`` as below
        (the other fields are not read).
    weights_name : str, optional
        Name of the weights column, for the summary.
    sample_prevalence : float, optional
        pi_hat to use (a subgroup uses the whole sample's); default: these rows'.
    reweighted : bool, default False
        The design's ``reweighted`` (:class:`~calibtest.inputs.design.Design`): ``settings.prevalence`` is
        applied (outcome-dependent weights).  False on a survival outcome, whose design refuses ``prevalence=``.
    settings.null : {"auto", "asymptotic", "monte-carlo"}
        The requested null; the result stores the one used (``"auto"`` is
        the Monte Carlo null in the binary and top-1 modes, where one
        outcome per row is drawn, and the asymptotic null otherwise).
        ``"asymptotic"``: z0 = T_w / sqrt(V_0) ~ N(0, 1), for case weights that
        do not depend on the outcome given the prediction; its normal
        reference is too light in the upper tail of the calibrated-regime law
        (a weighted degenerate U-statistic), and it rejects 0.056-0.068 of
        calibrated samples at alpha = 0.05 with n = 1000 (five designs,
        Monte Carlo s.e. 0.005; ``vignettes/population_tests.md``), where
        the Monte Carlo null given the predictions and the weights rejects
        0.043-0.050; hence the default.  Prevalence weights
        depend on the outcome, which biases T_w under H0 by a ratio effect of
        the order of its null standard deviation when bins are small, and V_0
        misses the noise of the random denominators; so with ``prevalence=``
        (binary and top-1 modes) the calibrated-regime test is always the
        Monte Carlo test given the predictions
        (:func:`calibtest.core.weighted.weighted_null_draws`), as is
        ``null="monte-carlo"`` with case weights.
    settings.rng, settings.n_null_draws
        Seed and number R of the Monte Carlo label draws.
    call : Call, optional
    extra_influence : callable, optional
        ``extra_influence(inverse, u, w)``: influence values added to those of
        T_w in sigma_{1,w}^2 (the estimated censoring distribution of IPCW
        rows, :mod:`calibtest.ece.survival`); case weights only.
    **extra
        Bookkeeping fields of the result.

    Notes
    -----
    With ``prevalence=`` the weights depend on the outcome, so the ratio
    T_w of a bin with few rows of the up-weighted class is biased upward by
    more than its standard error; the estimate is then the iterated jackknife
    T_JJ of T_w (:func:`calibtest.core.weighted.second_order_jackknife`, O(n)
    from per-class bin sums), its standard error the jackknife se of T_J, and
    the Monte Carlo null draws T_JJ with that variance.  With case weights
    that vary within a class (no closed form over pairs of rows) the estimate
    is the delete-one jackknife T_J
    (:func:`calibtest.core.weighted.jackknife_statistic`) with its jackknife se.  The lower end
    of the adjusted interval then uses, in place of z_a and z_h, the
    1 - alpha and 1 - alpha/2 quantiles k_a, k_h of the studentized null
    draws T*/se* (at least z_a, z_h;
    :func:`calibtest.core.weighted.studentized_adjusted_interval`), recorded
    in ``weighting.interval_multipliers``.  With case weights alone (weights
    independent of the outcome given the prediction) T_w is unbiased given
    the weights and keeps the influence-function standard error.
    """
    alpha, prevalence, null, rng = settings.alpha, settings.prevalence, settings.null, settings.rng
    n_null_draws = settings.n_null_draws
    weights, weights_name, reweighted = row_weights.values, row_weights.name, row_weights.reweighted
    sample_prevalence = row_weights.sample_prevalence
    base = weights
    pi_hat = None
    if reweighted:
        if not data.mode.one_dimensional:
            raise ValueError(f"prevalence= applies to the binary and top-1 modes (an event is y = 1, or a "
                             f"correct top-1 prediction), not to mode {data.mode!r}")
        events = np.rint(data.y[:, 0]) == 1
        weights, pi_hat = prevalence_weights(events, prevalence, base, sample_prevalence)
        a_w, b_w = prevalence / pi_hat, (1.0 - prevalence) / (1.0 - pi_hat)
        case = np.ones(data.n) if base is None else base
        partition = prevalence_partition(data, partition, a_w * case, b_w * case,
                                         prevalence_event_prob(data.z[:, 0], a_w, b_w))
    kind = ("case weights" if not reweighted else
            "prevalence" if base is None else "case weights and prevalence")
    # outcome-dependent weights: the ratio T_w is biased, see below; the iterated jackknife needs one weight per
    # class, i.e. case weights that are all equal (or none)
    jackknife = 0 if not reweighted else 2 if base is None or np.ptp(base) == 0 else 1
    ws = weighted_statistics(partition.inverse, data.u, weights, partition.m, jackknife=jackknife,
                             events=events if reweighted else None)
    n = data.n
    stats = partition.bin_sums(data)
    volume, _ = cell_geometry(data.mode, data.k, data.n_classes, partition.n_bins)
    s0 = n * n * volume * ws.null_variance
    no_error = not np.any(data.u)  # every prediction 0 or 1 and every label equal to it: T_w = 0 exactly
    if not s0 > 0 and not no_error:
        raise ValueError("the weighted calibrated-regime variance is 0 (no bin holds two rows with positive "
                         "weight and non-zero errors); use fewer bins or more rows")
    t, s1 = ws.estimate, ws.sigma1_sq
    if extra_influence is not None:
        psi = weighted_influence(partition.inverse, data.u, weights, partition.m)
        influence = psi + extra_influence(partition.inverse, data.u, weights)
        s1 = float(np.mean(influence * influence))
    se = math.sqrt(ws.jackknife_variance if jackknife else s1 / n)
    if no_error:  # the null law of T_w is the point mass at 0, and T_w = 0: no evidence, p = 1
        zstat, pvalue, threshold = 0.0, 1.0, 0.0
    else:
        zstat, pvalue = null_test(t, n, volume, s0)
        threshold = null_threshold(alpha, s0, n, volume)
    p_normal = pvalue
    monte_carlo, null_method, multipliers = None, "normal", None
    threshold_rule = math.inf if no_error else threshold  # 0 joins the interval iff the test does not reject
    if null == "monte-carlo" or reweighted or (null == "auto" and data.z.shape[1] == 1):
        if data.z.shape[1] != 1:
            raise ValueError(f"the weighted Monte Carlo null draws one outcome per row (binary and top-1 "
                             f"modes), not mode {data.mode!r}; use null='asymptotic' with case weights")
        gen, seed = resolve_seed(rng)
        case = np.ones(n) if base is None else base
        if not reweighted:
            w_event = w_non = case
            q = data.z[:, 0]
        else:
            a, b = prevalence / pi_hat, (1.0 - prevalence) / (1.0 - pi_hat)
            w_event, w_non = a * case, b * case
            q = prevalence_event_prob(data.z[:, 0], a, b)
        draws = weighted_null_draws(data.z[:, 0], partition.inverse, NullLabels(w_event, w_non, q),
                                    n_draws=n_null_draws, rng=gen, m=partition.m, jackknife=jackknife,
                                    return_variance=jackknife)
        if jackknife:
            draws, draw_var = draws
            multipliers = null_studentized_multipliers(draws, draw_var, alpha)
        tol = 1e-10 * max(abs(t), float(np.abs(draws).max(initial=0.0)))
        mc_p = float((1.0 + np.count_nonzero(draws >= t - tol)) / (1.0 + draws.size))
        monte_carlo = MonteCarloTest(statistic=t, pvalue=mc_p, n_draws=int(n_null_draws),
                                     seed=seed if seed != "Generator" else None, null_draws=draws)
        pvalue, threshold, null_method = mc_p, monte_carlo.critical_value(alpha), "monte carlo"
        threshold_rule = math.inf if mc_p > alpha else -math.inf
    null = "asymptotic" if monte_carlo is None else "monte-carlo"  # the null used, never "auto"
    iv = (adjusted_interval(t, se, threshold_rule, alpha) if multipliers is None else
          studentized_adjusted_interval(t, se, threshold_rule, alpha, *multipliers))
    W_b = ws.weight_sum
    pos = np.maximum(W_b, np.finfo(float).tiny)[:, None]
    w_col = weights[:, None]
    sum_wz = np.column_stack([np.bincount(partition.inverse, weights=w_col[:, 0] * data.z[:, j],
                                          minlength=partition.m) for j in range(data.z.shape[1])])
    sum_wu = np.column_stack([np.bincount(partition.inverse, weights=w_col[:, 0] * data.u[:, j],
                                          minlength=partition.m) for j in range(data.u.shape[1])])
    sparse = sparse_bins(partition.inverse, weights, partition.m, SPARSE_BIN_NEFF)
    weighting = Weighting(kind=kind, weights_name=weights_name, n_eff=ws.n_eff, weight_total=float(W_b.sum()),
                          prevalence=prevalence, sample_prevalence=pi_hat, null_variance=ws.null_variance,
                          contributions=ws.contributions, weight_sum=W_b, mean_pred=sum_wz / pos,
                          mean_outcome=(sum_wz + sum_wu) / pos,
                          sparse_weight_share=float(W_b[sparse].sum() / W_b.sum()),
                          interval_multipliers=multipliers,
                          case_weights=None if reweighted else _read_only(weights), reweighted=reweighted)
    more_reasons = ()
    if reweighted and weighting.sparse_weight_share > SPARSE_WEIGHT_SHARE:
        more_reasons = (f"{100 * weighting.sparse_weight_share:.3g}% of the weight lies in bins whose effective "
                        f"size (sum w)^2 / sum w^2 is below {SPARSE_BIN_NEFF:g}: with prevalence weights the "
                        "interval's coverage of a small ECE is approximate there (measured in "
                        "vignettes/populations.md)",)
    estimates = Estimates(estimate=t, plugin_estimate=ws.plugin, sigma1_sq=s1, sigma0_sq=s0, se=se,
                          bin_volume=volume, test=(zstat, pvalue, threshold), interval=iv, null_method=null_method,
                          asymptotic=None if monte_carlo is None else (zstat, p_normal),
                          singleton_fraction=singleton_fraction(stats.count))
    approximation = Approximation.sparse_cells(estimates.singleton_fraction, mode=data.mode, k=data.k,
                                               second_order_variance=None, more_reasons=more_reasons)
    bin_rule = partition.bin_rule if reweighted and partition.n_bins_rule == "auto" else None
    return CalibrationResult.from_estimates(
        stats, estimates, bins=BinChoice(partition.n_bins, partition.n_bins_rule, bin_rule, partition),
        target=CalibrationTarget(data.mode, data.k, data.n_classes), null=NullChoice(null, monte_carlo=monte_carlo),
        alpha=alpha, approximation=approximation, call_record=call, data=data, weighting=weighting, **extra)


def prevalence_partition(data: PreparedData, partition: Partition, weight_event: np.ndarray,
                         weight_nonevent: np.ndarray, event_prob: np.ndarray) -> Partition:
    """The partition of prevalence-weighted rows: the automatic B reduced until the up-weighted class fills the bins.

    With ``n_bins="auto"`` (``partition.n_bins_rule == "auto"``), B is the
    largest B <= the unweighted automatic B at which at most
    :data:`PREVALENCE_SPARSE_SHARE` of the weight expected under calibration
    lies in bins of expected effective size below
    :data:`~calibtest.ece.result.SPARSE_BIN_NEFF`
    (:func:`calibtest.core.weighted.expected_sparse_weight_share`; B = 2 when
    no B qualifies), scanned downward.  In a 50/50 case-control sample of a
    rare outcome the controls carry most of the weight, and where they are few
    per bin (high predictions) no estimator sees the bin's calibration: at
    500 + 500 rows and the unweighted B = 48 the jackknife T_J averaged 0.64
    of the population's binned ECE^2 for a too-spread model and 1.54 for an
    under-predicting one (``vignettes/population_tests.md``).  The rule looks
    at the predictions and the two weights only (the law of the Monte Carlo
    null), so the partition is fixed given the predictions and the null
    stays exact.  A given B (``n_bins=`` an integer) is kept.

    Parameters
    ----------
    data : PreparedData
    partition : Partition
        The unweighted partition (its rule and B).
    weight_event, weight_nonevent, event_prob : ndarray, shape (n,)
        The weights of each row as an event and as a non-event, and its event
        probability under calibration (:func:`calibtest.core.weighted.prevalence_event_prob`).

    Returns
    -------
    Partition
        ``partition`` itself when B was given; else the partition at the
        chosen B, whose ``bin_rule`` states the rule.
    """
    if partition.n_bins_rule != "auto":
        return partition
    start = partition.n_bins

    def share(part: Partition) -> float:
        return expected_sparse_weight_share(part.inverse, part.m, weight_event, weight_nonevent, event_prob,
                                            SPARSE_BIN_NEFF)

    part, value = partition, share(partition)
    while value > PREVALENCE_SPARSE_SHARE and part.n_bins > 2:  # at most B_auto - 2 rebinnings of the rows
        part = partition_rows(data, part.n_bins - 1)
        value = share(part)
    base = partition.bin_rule
    rule = BinRule(rule="auto", n_bins=part.n_bins, rate_n_bins=base.rate_n_bins, dim=base.dim,
                   singleton_fraction=singleton_fraction(part.counts),
                   rate_singleton_fraction=base.rate_singleton_fraction,
                   max_singleton_fraction=base.max_singleton_fraction, weighted_from=start,
                   sparse_weight_share=value, max_sparse_weight_share=PREVALENCE_SPARSE_SHARE,
                   sparse_bin_neff=SPARSE_BIN_NEFF)
    return dataclasses.replace(part, n_bins_rule="auto", bin_rule=rule)


def clustered_null(null: str) -> str:
    """The clustered null ``null=`` stands for: ``"sign-flip"`` (auto, monte-carlo) or ``"asymptotic"``.

    Raises
    ------
    OptionError
        For ``null="conditional"``, whose exact moments redraw each label alone (independent rows).
    """
    if null == "conditional":
        raise OptionError("null='conditional' redraws each label independently given its prediction, which "
                          "ignores the correlation within clusters; with cluster= use null='auto' (the cluster "
                          "sign-flip test), 'monte-carlo' (the same) or 'asymptotic' (z = T_cl / sqrt(V_0))")
    return "asymptotic" if null == "asymptotic" else "sign-flip"


def check_clustered_options(method: str, weighted: bool) -> None:
    """Refuse what the clustered estimate does not support: resampling intervals, weights or a prevalence
    (``weighted``: the design's weighting)."""
    if method != "adjusted":
        raise OptionError(f"cluster= supports method='adjusted' (the cluster-robust adjusted interval), not "
                          f"method={method!r}: the resampling baselines resample independent rows")
    if weighted:
        raise OptionError("cluster= cannot be combined with weights= or prevalence= (a weighted clustered "
                          "estimator is not implemented)")


def estimate_clustered(data: PreparedData, partition: Partition, clusters: Clusters, *, alpha: float,
                       null: str = "auto", rng=None, n_null_draws: int = DEFAULT_DRAWS, call: Call | None = None,
                       **extra) -> CalibrationResult:
    """The clustered estimate (``cluster=``): T_cl, its cluster-robust interval and the clustered test; one result.

    T_cl, V_1, V_0, the sign-flip or asymptotic test and the t_{G-1}
    adjusted interval are those of :func:`calibtest.core.clustered.clustered_inference`
    (see ``docs/clusters.md``).  The result's ``sigma1_sq`` is n V_1 and its
    ``sigma0_sq`` n^2 w V_0, so that z0 = n sqrt(w) T_cl / sigma0 = T_cl / sqrt(V_0)
    and the asymptotic threshold is z_alpha sqrt(V_0) at any level; ``se`` is
    sqrt(V_1 + V_0).  For the binary and top-1 modes the result also holds
    CITL, the slope and O/E with cluster-robust intervals
    (:func:`calibtest.checks.cluster_robust.cluster_robust_measures`).

    Parameters
    ----------
    data, partition
        The prepared rows and their bins.
    clusters : Clusters
        The rows' clusters (:func:`calibtest.inputs.rows.resolve_clusters`).
    alpha : float
    null : {"auto", "asymptotic", "monte-carlo"}
        ``"auto"`` and ``"monte-carlo"``: the cluster sign-flip test; ``"asymptotic"``: z = T_cl / sqrt(V_0).
    rng, n_null_draws
        Seed and number R of the random sign patterns (every pattern is used when 2^(G-1) <= R).
    call : Call, optional
    **extra
        Bookkeeping fields of the result.
    """
    kind = clustered_null(null)
    gen, seed = resolve_seed(rng) if kind == "sign-flip" else (None, None)
    n, G = data.n, clusters.n_clusters
    cells = cluster_cells(partition.inverse, data.u, clusters.codes, partition.m, G)
    inference = clustered_inference(cells, n, alpha=alpha, null=kind, n_draws=n_null_draws, rng=gen)
    st = inference.statistics
    stats = partition.bin_sums(data)
    volume, _ = cell_geometry(data.mode, data.k, data.n_classes, partition.n_bins)
    monte_carlo = None
    if kind == "sign-flip":
        monte_carlo = MonteCarloTest(statistic=st.estimate, pvalue=inference.pvalue, n_draws=int(inference.draws.size),
                                     seed=seed if seed != "Generator" else None, null_draws=inference.draws)
    estimates = Estimates(estimate=st.estimate, plugin_estimate=st.plugin, sigma1_sq=n * st.linear_variance,
                          sigma0_sq=n * n * volume * st.null_variance, se=st.se, bin_volume=volume,
                          test=(inference.zstat, inference.pvalue, inference.threshold), interval=inference.interval,
                          null_method="normal" if kind == "asymptotic" else "monte carlo",
                          asymptotic=None if kind == "asymptotic" else (inference.zstat, inference.asymptotic_pvalue),
                          singleton_fraction=singleton_fraction(stats.count))
    measures = None
    if data.mode.one_dimensional:
        measures = cluster_robust_measures(data.y[:, 0], data.z[:, 0], clusters.codes, alpha)
    clustering = Clustering(name=clusters.name, n_clusters=G, sizes=clusters.sizes,
                            linear_variance=st.linear_variance, null_variance=st.null_variance, null=kind,
                            exact=inference.exact,
                            n_patterns=0 if inference.draws is None else int(inference.draws.size) + int(inference.exact),
                            zstat=inference.zstat, asymptotic_pvalue=inference.asymptotic_pvalue,
                            iid_estimate=debiased_statistic(stats, n), measures=measures,
                            codes=clusters.codes, labels=clusters.labels)
    approximation = Approximation.sparse_cells(estimates.singleton_fraction, mode=data.mode, k=data.k,
                                               second_order_variance=None)
    if call is not None and monte_carlo is not None and monte_carlo.seed is not None \
            and call.options.get("rng") is None:
        call = call.with_options(rng=monte_carlo.seed)
    return CalibrationResult.from_estimates(
        stats, estimates, bins=BinChoice(partition.n_bins, partition.n_bins_rule, partition.bin_rule, partition),
        target=CalibrationTarget(data.mode, data.k, data.n_classes),
        null=NullChoice("asymptotic" if kind == "asymptotic" else "monte-carlo", monte_carlo=monte_carlo),
        alpha=alpha, approximation=approximation, call_record=call, data=data, clustering=clustering, **extra)


def check_weighted_options(null: str, method: str) -> None:
    """Refuse the options the weighted estimate does not support (the conditional null, resampling)."""
    if null == "conditional" or method != "adjusted":
        raise ValueError("weights= and prevalence= support the adjusted interval (method='adjusted') with "
                         "null='asymptotic' or null='monte-carlo': the conditional null's exact moments and the "
                         "resampling intervals assume unweighted rows")


def estimate_in_memory(inputs: Inputs, settings: Settings, design: Design | None = None) -> CalibrationResult:
    """:func:`calibtest.calib_ci` on rows in memory: read them, prepare the target, bin once, estimate.

    Parameters
    ----------
    inputs : Inputs
        The data and the columns (or arrays) of its roles: ``weights`` and
        ``cluster`` as given to :func:`calibtest.calib_ci`.
    settings : Settings
        The validated options of :func:`calibtest.calib_ci`: ``env`` is the
        evaluation environment object of the formula and ``call_options`` the
        options the recorded call shows.
    design : Design, optional
        The kind of analysis (default: resolved from ``inputs`` and
        ``settings``).  A weighting (case weights, a prevalence) selects the
        weighted estimate (:func:`estimate_weighted`), which supports only the
        adjusted interval and the asymptotic and Monte Carlo nulls; clusters
        the clustered estimate (:func:`estimate_clustered`).
    """
    design = Design.resolve("calib_ci", inputs, settings) if design is None else design
    s, null = settings, settings.null
    options = dict(s.call_options)
    if design.clustered:
        check_clustered_options(s.method, design.weighted)
        clustered_null(null)
        if null != "auto":
            options["null"] = null
    if design.weighted:
        options.update({"weights": None, "prevalence": s.prevalence})  # the weights' name filled in below
    prepared = prepare_input("calib_ci", inputs.replace(by=None), s, options=options)
    rows, target, call = prepared.rows, prepared.target, prepared.call
    partition = partition_rows(target, s.n_bins)
    bookkeeping = dict(formula=inputs.formula, y_name=rows.y_name, prob_names=tuple(rows.prob_names),
                       n_dropped=rows.n_dropped)
    if design.clustered:
        return estimate_clustered(target, partition, prepared.clusters, alpha=s.alpha, null=null, rng=s.rng,
                                  n_null_draws=s.n_null_draws, call=call, **bookkeeping)
    if design.weighted:
        check_weighted_options(null, s.method)
        return estimate_weighted(target, partition, RowWeights(prepared.weights, prepared.weights_name,
                                                               design.reweighted), s, call=call, **bookkeeping)
    return estimate_rows(target, partition, s, call=call, **bookkeeping)
