"""The tests of calibration as functions of rows: :func:`calib_test` and :func:`evidence`.

The public front doors (data or arrays in, through
:func:`calibtest.inputs.rows.prepare_input`) of the multi-scale test, whose
engine and result live in :mod:`calibtest.checks.multiscale`, and of the
evidence from every test, whose table and conclusion are built from a result
by :mod:`calibtest.checks.evidence_table`.

:func:`evidence` computes the adjusted interval of :func:`calibtest.calib_ci`
on the rows and builds the evidence from that result
(:func:`calibtest.checks.evidence_table.build_evidence`, which
:meth:`calibtest.CalibrationResult.evidence` also calls): the multi-scale test
of :func:`calibtest.calib_test`, the interval, Hosmer-Lemeshow (df = g,
external validation), Spiegelhalter's z, calibration-in-the-large and the
calibration slope (binary and top-1), a bin-sensitivity table and a
conclusion that states whether (the multi-scale test) and how much (the
interval) and explains disagreements.  The rules are in
:mod:`calibtest.checks.evidence_table`.
"""
from __future__ import annotations


from dataclasses import replace

import numpy as np

from calibtest.inputs.front_door import bound_options
from calibtest.inputs.validation import DEFAULT_DRAWS, check_null, is_integer, resolve_seed
from calibtest.streams.multiscale import stream_calib_test
from calibtest.streams.dask_frames import dask_calib_ci
from calibtest.streams.evidence import with_stream
from calibtest.streams.files import open_data_file, stream_file
from calibtest.streams.multiscale_by import stream_calib_test_by
from calibtest.streams.multiscale_quantiles import stream_calib_test_scales
from calibtest.checks.multiscale import (CalibrationTestResult, MultiScaleOptions, calib_test_clustered, calib_test_rows,
                                         check_grid)
from calibtest.core.partition import partition_rows
from calibtest.core.targets import PreparedData
from calibtest.ece.build_result import estimate_clustered, estimate_in_memory, estimate_rows
from calibtest.inputs.formula import resolve_env
from calibtest.ece.group_engine import (GroupAnalysis, GroupedResult, GroupOutcomes, analyse_groups, by_names, clusters_text, few_clusters_note,
                                group_labels, group_rng, grouped_result, grouping_of, label_text)
from calibtest.inputs.design import Design
from calibtest.inputs.settings import Inputs, Settings
from calibtest.inputs.rows import is_dask, is_out_of_core, prepare_input
from calibtest.options import OptionError
from calibtest.checks.evidence_table import HL_MIN_EXPECTED, ROWS, SENSITIVITY_BINS, EvidenceResult, build_evidence

__all__ = ["calib_test", "evidence", "SENSITIVITY_BINS", "HL_MIN_EXPECTED", "ROWS"]


@bound_options("calib_test", null="test_null", n_bins=None)
def calib_test(formula: str | None = None, data=None, *, y=None, probs=None, n_classes: int | None = None,
               k=None, alpha: float = 0.05, n_bins="adaptive", null: str = "auto", n_draws: int = DEFAULT_DRAWS,
               rng=None, combine: str = "max-z", partitions: str = "equal-width", spiegelhalter: bool | None = None,
               missing: str = "raise", eval_env: int = 0, by=None,
               chunksize: int | None = None, cluster=None, horizon=None) -> CalibrationTestResult | GroupedResult:
    """Multi-scale test of H0: calibrated, with exact finite-sample size given the predictions.

    Tests calibration at several bin counts at once (B = 2, 4, 8, ... up to
    the automatic B of :func:`calibtest.calib_ci`) and combines them by the
    maximum of the standardized statistics z_B = T_B / sd(T_B | Z) -- and,
    on binary and top-1 targets, of ``|z_S|``, Spiegelhalter's z
    (``spiegelhalter=``); the null law of that maximum comes from R label
    vectors drawn from the predictions, each scored at every component.  Much more powerful than the single-B test
    against smooth miscalibration (slope, intercept, p -> p^2), at the price of
    a little power against miscalibration that only fine bins see
    (``vignettes/calib_test_study.md``).

    On binary and top-1 targets ``partitions="equal-mass"`` or ``"both"``
    bins at quantiles of the predictions instead of, or as well as, the
    equal-width bins (``vignettes/equal_mass_scales.md``).

    Inputs and targets are those of :func:`calibtest.calib_ci`: binary, top-1,
    top-1-to-k (``k=``) and full calibration (``k="full"``).  ``data`` may be
    a CSV/Parquet file path or a Dask DataFrame (binary and top-1 targets,
    an int seed): the rows are read chunk by chunk and
    the label draws, keyed by the seed and each row's position, are reduced
    to additive per-draw bin sums, so the p-value is the one of the same rows
    in memory, whatever the chunk size or partitioning
    (:mod:`calibtest.streams.multiscale`); with ``by=`` (grouping
    columns) a counting pass and one pass of per-group draw sums give the
    grouped result of the rows in memory
    (:mod:`calibtest.streams.multiscale_by`); equal-mass scales take
    their exact quantile edges in one to three passes first
    (:mod:`calibtest.streams.multiscale_quantiles`; not with ``by=``).

    Parameters
    ----------
    formula, data, y, probs, n_classes, k, missing, eval_env
        As in :func:`calibtest.calib_ci` (formulas are trusted input).
    alpha : float
        Level of the test.
    n_bins : "adaptive", int or sequence of int
        ``"adaptive"`` (default): the doubling grid 2, 4, ... below the
        automatic B, then the automatic B (:func:`adaptive_grid`).  An int B:
        the single-scale Monte Carlo test at B (the p-value of
        ``calib_ci(..., n_bins=B, null="monte-carlo")`` for the same seed).
        A sequence: that grid.
    null : {"auto", "monte-carlo", "gaussian"}
        Null law of the scales.  ``"monte-carlo"``: the conditional Monte
        Carlo over every row (exact size).  ``"gaussian"`` (binary and top-1):
        the label sums of the cells holding sum p(1 - p) >= 30 drawn as
        normals with their exact moments, the rows of the other cells drawn
        exactly (:mod:`calibtest.core.gaussian_null`; seconds at 3e7 rows).
        ``"auto"`` (default): the Gaussian null at n >= 10^6 when at most
        200,000 rows are in thin cells, else the Monte Carlo null; the
        result's ``null`` names the one used
        (``vignettes/multiscale_gaussian_null.md`` measures its size).
    n_draws : int
        R, the label draws (default 999, so that (R + 1) alpha is an integer at alpha = 0.01, 0.05
        and 0.10); the p-value's resolution is 1 / (R + 1).
    rng : None, int or numpy.random.Generator
        Seed; ``None`` is the default seed 0, recorded in ``seed``.
    combine : {"max-z", "bonferroni"}
        How the scales are combined: the max of z_B calibrated by the shared
        draws (default, the more powerful in the study), or
        min(1, L min_B p_B).
    partitions : {"equal-width", "equal-mass", "both"}
        The families of bins at each B of the grid.  ``"equal-width"``: the
        bins [i/B, (i+1)/B) of ``calib_ci``.  ``"equal-mass"``: edges at the
        j/B quantiles of the predictions, ``e_j = np.quantile(p, j / B)``,
        row a in bin #{j : e_j <= p_a} (ties share a bin; empty bins are
        dropped, so a heavily tied prediction may leave fewer than B bins).
        ``"both"``: both families, one row of ``scales`` each, the max taken
        over all of them (the scales are the grid's B in each family).
        Default ``"equal-width"``: the equal-mass scales bought at most
        0.04 of power in the study and lost up to 0.09 on rare events
        (``vignettes/equal_mass_scales.md``).  Top-k (k >= 2) and full
        calibration refuse ``"equal-mass"`` and ``"both"`` (no quantiles in
        dimension >= 2).  Every choice keeps the exact size.
    spiegelhalter : bool, optional
        Add Spiegelhalter's z to the combination (binary and top-1 targets):
        z_S = sum (y - p)(1 - 2p) / sqrt(sum (1 - 2p)^2 p (1 - p)), and the
        statistic becomes ``max(max_B z_B, |z_S|)``, its null law from the same
        label draws (``combine="bonferroni"``: one more component).  None
        (default): True for binary and top-1 targets with ``n_bins``
        "adaptive" or a sequence; False for top-k (k >= 2) and full
        calibration (Spiegelhalter's z needs one probability per row) and
        for an int ``n_bins`` (the single-scale test, equal to calib_ci's
        Monte Carlo p-value).  True on a top-k or full target raises
        ValueError.  Measured (``vignettes/spiegelhalter_component.md``): it
        adds power against a calibration slope (0.24 -> 0.38 at slope 0.7,
        n = 200, R = 399) and loses at most 0.006 (2 s.e.) elsewhere; the
        size stays exact.

    by : str, list of str or array_like, optional
        Subgroups (a column of ``data``, several columns crossed, or one label
        per row): the test is run on each group's rows (after
        ``missing="drop"``) and a :class:`~calibtest.ece.group_engine.GroupedResult`
        is returned: ``groups`` (label -> result), ``to_frame()`` (indexed by
        the labels: ``n``, ``statistic``, ``pvalue``, ``pvalue_holm`` (Holm
        over the groups), ``note``), ``summary()``, ``global_pvalue`` (the
        Bonferroni min-p test of calibration in every group) and
        ``plot_forest()``.  Group number g (in the table's order, empty
        groups counted) draws from ``numpy.random.default_rng([s, g])``, s the
        seed (:mod:`calibtest.ece.group_engine`).
    chunksize : int, optional
        Rows per chunk when ``data`` is a file path (default
        :data:`~calibtest.options.DEFAULT_CHUNKSIZE`); the p-value does not
        depend on it.  Refused for any other ``data``.
    cluster : str or array_like, optional
        Clusters of correlated rows (a column of ``data`` or one label per
        row; clusters independent): the test becomes the clustered one
        (:func:`calibtest.checks.multiscale.calib_test_clustered`): T_cl and
        sqrt(V_0) per scale, and ``n_draws`` sign flips of whole clusters in
        place of label draws (every pattern when 2^(G-1) - 1 <= n_draws, an
        exact randomization test; with G clusters no p-value is below
        2^-(G-1)).  Rows in memory; with ``by=`` (clusters nested in the
        groups) each group's clustered test on its own clusters; see
        ``docs/clusters.md``.
    horizon : None
        Not taken: the test draws binary labels, which rows censored
        before a horizon do not have.  Given (or with a ``Surv(...)``
        formula) it raises ``OptionError`` naming the survival analysis
        to use instead, ``calib_ci(..., horizon=t)``.

    Returns
    -------
    CalibrationTestResult
        Or :class:`~calibtest.ece.group_engine.GroupedResult` with ``by=``.

    References
    ----------
    .. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
           l2 Expected Calibration Error", arXiv:2408.08998, 2024, eq. (6)
           (the debiased binned estimator T).
    .. [2] Lee, Huang, Hassani and Dobriban, "T-Cal: An optimal test for the
           calibration of predictive models", JMLR 24 (2023) (the dyadic grid).
    .. [3] Hosmer and Lemeshow, "Goodness of fit tests for the multiple
           logistic regression model", Comm. Statist. A 9 (1980) 1035-1060
           (bins at quantiles of the predictions: "deciles of risk").
    .. [4] Spiegelhalter, "Probabilistic prediction in patient management and
           clinical trials", Statistics in Medicine 5 (1986) 421-433.

    Examples
    --------
    >>> import calibtest as ct
    >>> res = ct.calib_test("y ~ p", data=ct.load_demo(), rng=1)
    >>> round(res.pvalue, 3), res.scales["n_bins"].tolist()
    (0.827, [2, 4, 8, 16, 32, 64, 76])
    """
    design = Design.resolve("calib_test", Inputs(formula, data, y=y, probs=probs, by=by, cluster=cluster),
                            Settings(n_classes=n_classes, k=k, null=null, chunksize=chunksize,
                                     horizon=horizon)).check()
    grid, R = check_grid(n_bins), n_draws  # the table's options are checked by @bound_options
    if is_out_of_core(data):  # the caller's namespace is captured here, where the user called
        return _calib_test_stream(Inputs(formula, data, by=by), design,
                                  Settings(env=resolve_env(eval_env), chunksize=chunksize, n_bins=n_bins,
                                           missing=missing, n_classes=n_classes, k=k, rng=rng),
                                  MultiScaleOptions(alpha=alpha, n_draws=R, combine=combine, partitions=partitions,
                                                    spiegelhalter=spiegelhalter, null=null))
    gen, seed = resolve_seed(rng)
    prepared = prepare_input("calib_test", Inputs(formula=formula, data=data, y=y, probs=probs, by=by,
                                                  cluster=cluster),
                             Settings(env=resolve_env(eval_env), missing=missing, n_classes=n_classes, k=k),
                             options=
                       {"n_classes": n_classes, "k": k, "n_bins": None if grid is None else list(grid),
                        "alpha": alpha, "null": None if null == "auto" else null,
                        "n_draws": None if R == DEFAULT_DRAWS else R,
                        "combine": None if combine == "max-z" else combine,
                        "partitions": None if partitions == "equal-width" else partitions,
                        "spiegelhalter": None if spiegelhalter is None else bool(spiegelhalter),
                        "missing": missing if missing != "raise" else None,
                        "rng": seed if is_integer(seed) else None,
                        "by": (by if by_names(by) else "<array>") if design.grouped else None},
                             group_labels=group_labels)
    rows, target, call = prepared.rows, prepared.target, prepared.call
    if spiegelhalter is None and grid is not None and np.ndim(n_bins) == 0:
        spiegelhalter = False  # an int B: the single-scale test of calib_ci
    options = MultiScaleOptions(grid=grid, alpha=alpha, n_draws=R, combine=combine, partitions=partitions,
                                spiegelhalter=spiegelhalter, null=null)
    if design.grouped:
        return _calib_test_by(grouping_of(prepared.group_names, prepared.group_values), rows, target, call, options,
                              rng=rng, seed=seed, formula=formula, clusters=prepared.clusters)
    bookkeeping = dict(formula=formula, y_name=rows.y_name, prob_names=tuple(rows.prob_names),
                       n_dropped=rows.n_dropped, call_record=call)
    if design.clustered:
        return calib_test_clustered(target, prepared.clusters.codes, prepared.clusters.n_clusters, options, rng=gen,
                                    seed=seed, **bookkeeping)
    return calib_test_rows(target, options, rng=gen, seed=seed, **bookkeeping)


def _calib_test_stream(inputs: Inputs, design: Design, settings: Settings,
                       options: MultiScaleOptions) -> CalibrationTestResult | GroupedResult:
    """:func:`calib_test` on a file path or a Dask DataFrame (:mod:`calibtest.streams.multiscale`); ``design`` is
    the call's (grouped or not); the Gaussian null only on the equal-width scales without ``by=`` (the other
    streams draw labels)."""
    formula, data, n_bins, partitions = inputs.formula, inputs.data, settings.n_bins, options.partitions
    if options.null == "gaussian" and (partitions != "equal-width" or design.grouped):
        raise OptionError("null='gaussian' on a file or Dask DataFrame is available for the equal-width scales "
                          "without by=; use null='monte-carlo' or 'auto', or read the rows into memory")
    if formula is None:
        raise TypeError("calib_test on a file path or Dask DataFrame needs a formula naming its columns, "
                        "e.g. 'y ~ p'")
    if partitions != "equal-width" and design.grouped:
        raise OptionError(f"partitions={partitions!r} with by= is not available on a file or Dask DataFrame (each "
                          "group's equal-mass bins need the quantiles of its predictions): use "
                          "partitions='equal-width' with by=, or test each group's rows (a file per group, or "
                          "the Dask frame filtered to the group) with partitions={partitions!r}")
    if options.spiegelhalter is None and np.ndim(n_bins) == 0 and n_bins != "adaptive":
        options = replace(options, spiegelhalter=False)  # an int B: the single-scale test
    bundles = (settings, replace(options, null="auto"))
    if partitions != "equal-width":  # exact quantile edges in a few passes, then the draws
        return stream_calib_test_scales(data, formula, *bundles)
    if design.grouped:
        return stream_calib_test_by(data, formula, _by_columns(inputs.by), *bundles)
    s = settings
    return stream_calib_test(data, formula, env=s.env, chunksize=s.chunksize, n_bins=n_bins, missing=s.missing,
                             n_classes=s.n_classes, k=s.k, rng=s.rng, alpha=options.alpha, n_draws=options.n_draws,
                             combine=options.combine, spiegelhalter=options.spiegelhalter,
                             null=options.null)


def _by_columns(by) -> list:
    """The grouping columns of a streamed ``by=``: names, each once."""
    names = by_names(by)
    if not names:
        raise OptionError("by= on a file or Dask DataFrame must name its grouping columns (a column name or "
                          "a list of names), not arrays of labels")
    if len(set(names)) < len(names):
        twice = next(nm for nm in names if names.count(nm) > 1)
        raise OptionError(f"by lists the grouping column {twice!r} more than once; give each grouping "
                          "column once")
    return names


def _calib_test_by(grouping, rows, target: PreparedData, call, options: MultiScaleOptions, *, rng, seed, formula,
                   clusters=None) -> GroupedResult:
    """:func:`calib_test` with ``by=``: :func:`calib_test_rows` on each group's rows (:mod:`calibtest.ece.group_engine`),
    or with ``clusters`` (nested in the groups) :func:`calib_test_clustered` on each group's rows and clusters.

    Group number g draws from ``default_rng([seed, g])``, so its result is
    ``calib_test`` on the group's rows with ``rng=np.random.default_rng([seed, g])``.
    """
    bookkeeping = dict(formula=formula, y_name=rows.y_name, prob_names=tuple(rows.prob_names))
    group_notes: dict = {}
    if clusters is not None:
        clusters.refuse_one_per_group([grouping.rows(g) for g in range(len(grouping))])

    def analyse(g, label, idx, sub):
        own_rng, own_call = group_rng(rng, seed, g), call.with_options(group=label_text(grouping.names, label))
        if clusters is None:
            return calib_test_rows(sub, options, rng=own_rng, call_record=own_call, **bookkeeping)
        own = clusters.of_rows(idx)
        group_notes.update(few_clusters_note(label, own.n_clusters))
        return calib_test_clustered(sub, own.codes, own.n_clusters, options, rng=own_rng, call_record=own_call,
                                    **bookkeeping)

    groups, reasons = analyse_groups(grouping, target, analyse, single_class=False)
    kept_notes = {lb: nt for lb, nt in group_notes.items() if groups[lb]}
    return grouped_result(grouping, target, GroupOutcomes(groups, reasons, kept_notes),
                          GroupAnalysis("calib_test", lambda res: {"statistic": res.statistic, "pvalue": res.pvalue},
                                        ["statistic", "pvalue"], options.alpha), seed=seed,
                          n_dropped=rows.n_dropped, call_record=call, clusters=clusters_text(clusters),
                          **bookkeeping)


@bound_options("evidence")
def evidence(formula: str | None = None, data=None, *, y=None, probs=None, n_classes: int | None = None, k=None,
             n_bins="auto", alpha: float = 0.05, null: str = "conditional", rng=None, missing: str = "raise",
             eval_env=0, by=None, chunksize: int | None = None, cluster=None,
             horizon=None) -> EvidenceResult | GroupedResult:
    """Every calibration test of a model on the same rows, and a conclusion from all of them.

    Equivalent to ``calib_ci(..., null=null, rng=rng).evidence()``: the
    interval for ECE^2 (at ``n_bins``, with ``null``), the multi-scale test of
    :func:`calibtest.calib_test` (``rng=`` seeds its label draws), and for one
    probability column (binary, or top-1 with ``n_classes``)
    :func:`calibtest.hosmer_lemeshow` (g = 10, ``validation="external"``,
    df = g) and :func:`calibtest.val_prob` (Spiegelhalter's z, CITL and the
    calibration slope with their Wald intervals); then the single-scale test
    and interval at B = 5, 10, 20, 35 (those below the interval's B) and the
    interval's B.  The multi-scale test answers *whether* there is
    miscalibration, the interval *how much*; disagreements are explained
    (rules in :mod:`calibtest.checks.evidence_table`).

    Parameters
    ----------
    formula, data, y, probs, n_classes, k, n_bins, missing, eval_env
        As in :func:`calibtest.calib_ci`.  For top-1, val_prob and
        Hosmer-Lemeshow treat (correct, confidence) as a binary outcome and
        its probability; for top-k (k >= 2) and full calibration the
        evidence is the multi-scale test and the interval.  ``data`` may be
        a CSV/Parquet file path or a Dask DataFrame (binary and top-1
        targets, an int seed, no ``by=``): the rows are read in passes
        (:mod:`calibtest.streams.evidence`) and every row of the
        table, the bin-sensitivity table and the conclusion are those of the
        same rows in memory; val_prob's C index and its lowess and loess
        curves, which need every row at once, are not computed (the
        result's ``scope`` says so).
    alpha : float
        Level of every test and interval.
    null : {"conditional", "asymptotic", "monte-carlo"}
        The null of the interval's test (default ``"conditional"``: its size
        holds in finite samples).
    rng : None, int or numpy.random.Generator
        Seed of the Monte Carlo draws (multi-scale test; the interval's null
        when it draws).  An int s is passed as ``rng=s`` to every part, so
        direct calls with ``rng=s`` give the same numbers.
    by : str, list of str or array_like, optional
        Subgroups (a column of ``data``, several columns crossed, or one label
        per row): the evidence of each group's rows (after ``missing="drop"``)
        in a :class:`~calibtest.ece.group_engine.GroupedResult`: ``groups`` (label ->
        :class:`EvidenceResult`), ``to_frame()`` (indexed by the labels:
        ``n``, ``ece`` with ``ece_ci_lower``/``ece_ci_upper`` (the adjusted
        interval), ``pvalue`` (the multi-scale test), ``pvalue_holm``,
        ``verdict``, ``note``), ``summary()``, ``global_pvalue`` (Bonferroni
        min-p of the multi-scale tests) and ``plot_forest()``.  Group number g
        (in the table's order, empty groups counted) uses
        ``rng=numpy.random.default_rng([s, g])``, s the seed; a group with a
        single outcome class is listed, not analysed.
    cluster : str or array_like, optional
        Clusters of correlated rows (a column of ``data`` or one label per
        row; clusters independent; rows in memory; with ``by=``, clusters
        nested in the groups, each group's clustered evidence): the evidence
        of ``calib_ci(..., cluster=)`` (:mod:`calibtest.checks.evidence_clustered`),
        every row in its clustered version -- the clustered multi-scale test
        (sign flips of whole clusters), the cluster-robust interval and its
        test, the design-based F-adjusted Hosmer-Lemeshow test (Archer,
        Lemeshow and Hosmer 2007; with more clusters than its 10 groups),
        Spiegelhalter's z from cluster sums, and CITL, the slope and O/E
        with cluster-robust intervals.  The default ``null="conditional"``
        (which redraws each label alone) becomes the cluster sign-flip null;
        see ``docs/clusters.md``.

    chunksize : int, optional
        Rows per chunk when ``data`` is a file path (default
        :data:`~calibtest.options.DEFAULT_CHUNKSIZE`); the numbers do not
        depend on it.  Refused for any other ``data``.
    horizon : None
        Not taken: the test draws and tests binary labels, which rows censored
        before a horizon do not have.  Given (or with a ``Surv(...)``
        formula) it raises ``OptionError`` naming the survival analysis
        to use instead, ``calib_ci(..., horizon=t)``, whose
        ``evidence()`` is the survival evidence.

    Returns
    -------
    EvidenceResult
        Or :class:`~calibtest.ece.group_engine.GroupedResult` with ``by=``.

    References
    ----------
    .. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for
           the l2 Expected Calibration Error", arXiv:2408.08998, 2024.

    Examples
    --------
    >>> import calibtest as ct
    >>> ev = ct.evidence("y ~ p", data=ct.load_demo(), rng=1)
    >>> ev.verdict
    'no evidence'

    ``print(ev.summary())`` prints the evidence table and its conclusion.
    """
    inputs = Inputs(formula, data, y=y, probs=probs, by=by, cluster=cluster)
    settings = Settings(n_classes=n_classes, k=k, n_bins=n_bins, missing=missing, null=null, rng=rng,
                        chunksize=chunksize, horizon=horizon)
    design = Design.resolve("evidence", inputs, settings).check()
    check_null(null, DEFAULT_DRAWS, rng)  # the combination; the table's options are checked by @bound_options
    settings = settings.replace(alpha=alpha, env=resolve_env(eval_env))
    if not design.in_memory:
        return _evidence_stream(inputs, settings)
    gen, seed = resolve_seed(rng)
    sub_rng = gen if seed == "Generator" else seed
    settings = settings.replace(call_options={
        "n_classes": n_classes, "k": k, "n_bins": n_bins, "alpha": alpha,
        "missing": missing if missing != "raise" else None, "null": null,
        "rng": sub_rng if is_integer(sub_rng) else None})
    if design.grouped:
        return _evidence_by(inputs, design, settings)
    if design.clustered:
        res = estimate_in_memory(inputs, settings.replace(
            null="auto" if null == "conditional" else null, rng=sub_rng,
            call_options=settings.options(cluster=cluster if isinstance(cluster, str) else "<array>")), design)
        return res.evidence(alpha, rng=sub_rng)
    res = estimate_in_memory(inputs, settings.replace(rng=sub_rng), design)
    return build_evidence(res, alpha, rng=sub_rng)


def _evidence_by(inputs: Inputs, design: Design, settings: Settings) -> GroupedResult:
    """:func:`evidence` with ``by=``: the interval and its evidence on each group's rows (:mod:`calibtest.ece.group_engine`);
    with ``cluster=`` (clusters nested in the groups) the clustered interval and evidence on each group's rows
    and clusters."""
    s, by, cluster, formula = settings, inputs.by, inputs.cluster, inputs.formula
    alpha, null, n_bins = s.alpha, s.null, s.n_bins
    gen, seed = resolve_seed(s.rng)
    options = s.options(rng=seed if is_integer(seed) else None, by=by if by_names(by) else "<array>")
    if design.clustered:
        options["cluster"] = cluster if isinstance(cluster, str) else "<array>"
    prepared = prepare_input("evidence", inputs.replace(weights=None), s, options=options,
                             group_labels=group_labels)
    rows, target, call, clusters = prepared.rows, prepared.target, prepared.call, prepared.clusters
    grouping = grouping_of(prepared.group_names, prepared.group_values)
    bookkeeping = dict(formula=formula, y_name=rows.y_name, prob_names=tuple(rows.prob_names))
    group_notes: dict = {}
    if clusters is not None:
        clusters.refuse_one_per_group([grouping.rows(g) for g in range(len(grouping))])

    def analyse(g, label, idx, sub):
        group_gen = group_rng(gen, seed, g)
        group_call = call.with_options(group=label_text(grouping.names, label))
        if clusters is None:
            res = estimate_rows(sub, partition_rows(sub, n_bins), s.replace(rng=group_gen), call=group_call,
                                **bookkeeping)
            return build_evidence(res, alpha, rng=group_gen)
        own = clusters.of_rows(idx)
        group_notes.update(few_clusters_note(label, own.n_clusters, "interval and test are"))
        res = estimate_clustered(sub, partition_rows(sub, n_bins), own, alpha=alpha,
                                 null="auto" if null == "conditional" else null, rng=group_gen, call=group_call,
                                 **bookkeeping)
        return res.evidence(alpha, rng=group_gen)

    def row(ev):
        ci = ev.interval.conf_int(scale="ece")
        return {"ece": ev.interval.ece, "ece_ci_lower": ci.lower, "ece_ci_upper": ci.upper,
                "pvalue": ev.test.pvalue, "verdict": ev.verdict}

    groups, reasons = analyse_groups(grouping, target, analyse)
    kept_notes = {lb: nt for lb, nt in group_notes.items() if groups[lb]}
    return grouped_result(grouping, target, GroupOutcomes(groups, reasons, kept_notes),
                          GroupAnalysis("evidence", row, ["ece", "ece_ci_lower", "ece_ci_upper", "pvalue", "verdict"],
                                        alpha), seed=seed, n_dropped=rows.n_dropped, call_record=call,
                          clusters=clusters_text(clusters), **bookkeeping)


def _evidence_stream(inputs: Inputs, settings: Settings) -> EvidenceResult:
    """:func:`evidence` on a file path or a Dask DataFrame: the streamed interval, then its evidence in passes."""
    formula, data, rng, alpha = inputs.formula, inputs.data, settings.rng, settings.alpha
    if rng is not None and not is_integer(rng):
        raise TypeError(f"rng must be None or an int seed for a file or Dask DataFrame (the label draws are keyed "
                        f"by the seed and each row's position), got {type(rng).__name__}")
    if is_dask(data):
        res = dask_calib_ci(data, formula, settings)
    else:  # one first read for the interval and the evidence
        data = open_data_file(data, formula, settings.env, settings.chunksize)
        res = stream_file(data, formula, settings)
    res = with_stream(res, data, formula, settings)
    if res.stream is None:
        raise ValueError(f"evidence on a file or Dask DataFrame needs a binary or top-1 target; for "
                         f"{res.mode} the multi-scale test needs the rows in memory: read the columns into a "
                         "pandas DataFrame")
    seed = resolve_seed(rng)[1] if rng is None else int(rng)
    return res.evidence(alpha, seed)
