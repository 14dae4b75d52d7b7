"""``calib_ci``: the confidence interval and test for the l2 expected calibration error.

One pipeline, one way through: validate the options, resolve the data
source (rows in memory, a file, a Dask frame), prepare the calibration
target (Z and U), bin the rows once (:class:`~calibtest.core.partition.Partition`),
and build one result from the bin sums and the engines that need the rows
(:func:`calibtest.ece.build_result.estimate_rows`).
"""
from __future__ import annotations

import os

from calibtest.inputs.validation import (DEFAULT_DRAWS, DEFAULT_NULL, OptionError, check_method,
                                   check_null, is_integer)
from calibtest.streams.dask_frames import dask_calib_ci
from calibtest.streams.evidence import with_stream
from calibtest.streams.files import open_data_file, stream_file
from calibtest.ece.build_result import estimate_in_memory
from calibtest.inputs.formula import resolve_env
from calibtest.streams.grouped import dask_groups, stream_file_groups
from calibtest.display.format import Call
from calibtest.ece.group_engine import by_names
from calibtest.ece.grouped_interval import (GroupedCalibrationResult, grouped_calib_ci, grouped_calib_ci_from_sums,
                              grouped_survival_calib_ci)
from calibtest.inputs.design import Design
from calibtest.inputs.front_door import bound_options
from calibtest.inputs.settings import Inputs, Settings
from calibtest.inputs.rows import is_dask
from calibtest.ece.result import CalibrationResult
from calibtest.ece.survival import survival_calib_ci

__all__ = ["calib_ci", "analyse", "calib_ci_out_of_core", "grouped_out_of_core"]


def _recorded_options(n_classes, k, n_bins, alpha, missing, method, n_resamples, rng) -> dict:
    """The options a call shows: defaults are left out."""
    return {"n_classes": n_classes, "k": k, "n_bins": n_bins, "alpha": alpha,
            "missing": missing if missing != "raise" else None,
            "method": method if method != "adjusted" else None, "n_resamples": n_resamples,
            "rng": rng if is_integer(rng) else None}


@bound_options("calib_ci", censoring_covariates=None)
def calib_ci(formula: str | None = None, data=None, *, y=None, probs=None, n_classes: int | None = None,
             k: int | None = None, n_bins="auto", alpha: float = 0.05, missing: str = "raise",
             eval_env=0, method: str = "adjusted", n_resamples: int | None = None,
             null: str = DEFAULT_NULL, rng=None, n_null_draws: int = DEFAULT_DRAWS,
             chunksize: int | None = None, progress: bool | None = None, weights=None,
             prevalence: float | None = None, by=None, cluster=None, horizon: float | None = None, time=None, event=None,
             censoring: str = "km", censoring_covariates=None,
             cause: int | None = None) -> CalibrationResult | GroupedCalibrationResult:
    """Confidence interval and test for the l2 expected calibration error.

    Implements Algorithm 1 of Sun, Chaudhari, Barnett & Dobriban, "A Confidence
    Interval for the l2 Expected Calibration Error" [1]_: the debiased binned
    estimator T of ECE^2, its two asymptotic regimes (calibrated: n sqrt(w) T /
    sigma0 -> N(0, 1); miscalibrated: sqrt(n)(T - E T) / sigma1 -> N(0, 1)),
    and the adjusted interval that respects ECE >= 0, with the zero rule.

    Parameters
    ----------
    formula : str, optional
        ``"y ~ p"`` (binary: p = P(y = 1)), ``"correct ~ confidence"`` with
        ``n_classes`` (top-1 confidence), or ``"label ~ p0 + p1 + ..."`` (a
        probability matrix, one column per class).  Parsed with patsy, so
        ``I(p / 100)`` and functions of columns work; the intercept is ignored.
        Labels are integer codes 0..K-1 in column order or values equal to the
        probability columns' names.  Formulas are evaluated by patsy and can
        run any Python expression (as in statsmodels): they are trusted input,
        never text from an untrusted source.
    data : pandas.DataFrame, dict, path or dask DataFrame, optional
        Data for the formula.  A path (``str`` or ``pathlib.Path``) to a
        ``.csv`` (possibly compressed) or ``.parquet`` file is streamed in
        chunks of ``chunksize`` rows, reading only the formula's columns, with
        memory bounded by the chunk size; a ``dask.dataframe.DataFrame`` is
        reduced partition by partition on the active Dask scheduler (a
        ``dask.distributed`` cluster if a ``Client`` exists).  Both give the
        in-memory answer from the additive per-bin sums, with ``data=None`` and
        provenance in ``result.source`` (see ``docs/scale.md``).
    y, probs : array_like, optional
        Array input instead of a formula: ``probs`` is (n,) or (n, K).
    n_classes : int, optional
        K for a single confidence column (top-1 mode); without it a single
        column is the binary mode.
    k : int or "full", optional
        Top-1-to-k calibration for a probability matrix, 1 <= k < K (default 1).
        ``k="full"`` (or ``k=K``) is full (canonical) calibration: U = Y - Z on
        the whole probability vector, binned into B^(K-1) equal-volume simplices
        (:mod:`calibtest.core.simplex`; ``n_bins="auto"`` uses d = K - 1).
    n_bins : int or "auto"
        Bins per dimension B over [0, 1] (the paper's mK).  ``"auto"``:
        ``max(2, round(6 / (d + 1) * n ** (2 / (4 + d))))``.
    alpha : float
        Significance level in (0, 1); the interval has level 1 - alpha.
    missing : {"raise", "drop"}
        Rows with NaN raise a ValueError by default; ``"drop"`` drops them and
        the summary reports how many.
    eval_env : int, dict or patsy.EvalEnvironment
        Where formula names that are not columns of ``data`` are looked up:
        an int counts frames above the caller (patsy semantics; 0 is the
        caller), a dict is a namespace, an ``EvalEnvironment`` is used as is.
    method : {"adjusted", "bootstrap", "subsampling", "hulc"}
        How the interval is made.  ``"adjusted"`` (default) is the paper's
        Algorithm 1.  The others are the resampling baselines of the paper's
        simulations (``calibtest.core.resampling``): percentile bootstrap [4]_,
        subsampling [3]_ with b = floor(sqrt(n)) rows, and adaptive HulC
        (Kuchibhotla, Balakrishnan and Wasserman 2024 [2]_).  They resample the
        rows on the same bins; the estimate and the calibrated-regime z test
        are unchanged.
    n_resamples : int, optional
        Resamples / subsamples (default 500; HulC uses them to estimate its
        median bias).  Only for resampling methods.
    rng : None, int or numpy.random.Generator
        Seed of the resampling (recorded as ``res.seed``; ``None`` is the
        default seed 0, recorded, so the same data give the same numbers in
        any process) and of the Monte Carlo null (``mc_seed``).
        An int seed s gives the Monte Carlo null ``default_rng(s)`` and the
        resampling ``default_rng([s, 1])``: independent streams.  A Generator
        is consumed by both, in that order.
    progress : bool, optional
        Progress bar (needs tqdm) for long resampling runs and for files; by
        default only in an interactive terminal and never when the ``CI``
        variable is set; ``False`` never, ``True`` always.
    null : {"auto", "asymptotic", "conditional", "monte-carlo"}
        Null law of the test of H0: calibrated, which also decides whether 0
        joins the interval (iff that test does not reject at level alpha).
        ``"asymptotic"`` is the paper's calibrated-regime test,
        z0 = n sqrt(w) T / sigma0 ~ N(0, 1) (eq. (12) of [1]_);
        ``"conditional"`` uses the exact mean, variance and third moment of T
        given the predictions under H0 and the p-value of the moment-matched
        shifted gamma; ``"monte-carlo"`` redraws the labels from the
        predictions ``n_null_draws`` times (see :mod:`calibtest.core.conditional`).
        ``"conditional"`` falls back to the Monte Carlo test when the
        conditional skewness exceeds 3 (the shifted gamma fails for nearly
        degenerate label noise; ``res.null_method`` says which was used).

        ``"auto"`` (default) is ``"conditional"`` when the binned vector has
        at most 4 coordinates (binary, top-1, top-k with k <= 4, full
        calibration with K <= 4), and ``"asymptotic"`` for more coordinates
        (their conditional moments need per-row d x d x d terms), whatever
        the source: the conditional moments are additive per-bin sums, which
        files, Dask frames and :class:`~calibtest.BinAccumulator` accumulate
        in the same pass as the estimator's, so they give the same null and
        p-value as the rows in memory (up to the order of floating-point
        additions).  ``"monte-carlo"`` needs the rows in memory, and so does
        the Monte Carlo fallback of the conditional null: where rows in memory
        would use it (conditional skewness above 3), a file or Dask frame
        uses the asymptotic null under ``"auto"`` (a note says so) and raises
        a ValueError naming the skewness under ``"conditional"``.
        ``res.null`` records the null actually used.  The default follows a
        size and power study over every target, rare events, predictions
        near 1 and n = 100 to 10^5 (``vignettes/default_null.md``,
        ``docs/conventions.md``): the asymptotic null's size ranged from
        almost 0 (rare events, confidences near 1, peaked probability
        vectors) to above alpha (balanced predictions at small n); the
        conditional null stayed close to alpha in every target (somewhat
        conservative for rare events and confidences near 1 at n <= 300,
        where ``null="monte-carlo"`` is exact) and was the more powerful
        where the asymptotic test was conservative.  The paper's numbers
        reproduce with ``null="asymptotic"``, whose p-value the summary shows
        whatever the null (``res.asymptotic``).  The conditional moments are recorded under
        the asymptotic null too, except for binned vectors of more than 4
        coordinates, where they are computed only when ``null`` asks for them.
    n_null_draws : int
        Label draws R of the Monte Carlo null (default 999: (R + 1) alpha is an integer at
        alpha = 0.01, 0.05 and 0.10).
    chunksize : int, optional
        Rows per chunk for a file (default 1,000,000).
    weights : str or array_like, optional
        Case weights (survey or inverse-probability weights): a column of
        ``data`` (formula use) or one value per row; finite, non-negative, not
        all zero.  The estimate becomes the weighted T_w of ECE^2 for the
        population the weights describe, with its influence-function standard
        error and the weighted calibrated-regime test (``res.weighting``; see
        ``docs/populations.md``).  With unit weights T_w = T.  Under
        ``null="auto"`` the weighted test is the Monte Carlo test given the
        predictions and the weights in the binary and top-1 modes (the
        normal test z0 = T_w / sqrt(V_0), ``null="asymptotic"``, rejects
        about 0.06 of calibrated samples at alpha = 0.05), and the
        asymptotic one in the other modes.
    prevalence : float, optional
        Population prevalence pi in (0, 1) for an enriched (e.g. case-control)
        sample, binary and top-1 modes: events (y = 1, or a correct top-1
        prediction) are weighted by pi / pi_hat and non-events by
        (1 - pi) / (1 - pi_hat), pi_hat the sample prevalence, so the interval
        is for the population with prevalence pi; its test is always the
        Monte Carlo test given the predictions.  Weights and prevalence need
        rows in memory and ``method="adjusted"`` (not the conditional null).
    by : str, list of str or array_like, optional
        Subgroups: a column of ``data`` (or one label per row), or several
        columns (crossed).  Returns a
        :class:`~calibtest.ece.grouped_interval.GroupedCalibrationResult`: one result per
        group with its own automatic B, the pooled result, the global test of
        calibration in every group and the heterogeneity test (see
        :mod:`calibtest.ece.grouped_interval`).  Small groups use the Monte Carlo null; the
        global test combines finite-sample per-group p-values (the
        conditional null's, computed alongside the asymptotic one).  A file
        or a Dask frame is streamed by group (column names only): a counting
        pass, then one pass of per-group bin sums, giving the in-memory
        result up to rounding, except that small groups use the asymptotic
        null with a note (the Monte Carlo draws need the rows) and are left
        unanalysed under ``null="conditional"`` (``docs/populations.md``).
        ``weights=`` and ``prevalence=`` need rows in memory.
    cluster : str or array_like, optional
        Clusters of correlated rows (the site of a multicentre validation, the
        patient of repeated rows): a column of ``data`` or one label per row.
        Clusters are taken as independent and rows within one as possibly
        correlated; the estimand is the ECE^2 of the population of sites'
        patients.  The estimate becomes T_cl (pairs of rows of different
        clusters only, so a shared site effect does not bias it), its standard
        error cluster-robust (cluster-summed influence values plus the
        between-cluster quadratic part), the interval's quantiles t with
        G - 1 degrees of freedom, and the test of ECE = 0 the cluster
        sign-flip test (``null="auto"`` or ``"monte-carlo"``; every sign
        pattern when 2^(G-1) <= ``n_null_draws``) or z = T_cl / sqrt(V_0)
        (``null="asymptotic"``); ``null="conditional"`` is refused (it
        redraws labels independently).  Binary and top-1 results also hold
        CITL, the slope and O/E with cluster-robust intervals
        (``res.clustering.measures``).  Needs rows in memory and
        ``method="adjusted"``; not with ``weights=``, ``prevalence=`` or
        ``by=``.  A missing label or a single cluster is an error; clusters
        of one row are allowed.  The summary states the number of clusters
        and warns below 20 (``docs/clusters.md``,
        ``vignettes/clustered_coverage.md``).
    horizon : float, optional
        A survival outcome's horizon t > 0: with ``"Surv(time, event) ~ risk"``
        (``Surv`` is known in every formula) or ``time=``, ``event=`` and
        ``probs=`` (the risk P(T <= t)), the estimand is
        ECE^2(t) = E[(P(T <= t | risk) - risk)^2], binned as for a binary
        outcome.  Rows censored before t enter through inverse probability of
        censoring weights, with a standard error that includes the estimated
        censoring distribution and the test of calibration at t referred to
        N(0, 1) with the null variance estimated from the weighted rows; with
        nothing censored before t every number is binary ``calib_ci`` on
        1{T <= t} (``docs/survival.md``; ``res.survival`` holds the times,
        events and censoring summary).  Rows in memory only; ``prevalence=``
        and resampling methods are refused.  With ``by=``, one survival
        result per group, the censoring distribution estimated within each
        group; with ``weights=`` (case weights), the weighted estimate of the
        IPCW rows with the weighted Kaplan-Meier of the censoring.
    time, event : array_like, optional
        Array input of a survival outcome (with ``probs=`` and ``horizon=``):
        times >= 0 and events coded 1 (event) / 0 (censored).
    censoring : {"km", "cox"}
        The censoring distribution of the weights: Kaplan-Meier (default,
        censoring independent of the risk and the event time) or a Cox model
        on ``censoring_covariates`` (statsmodels' PHReg).
    censoring_covariates : list of str or array_like, optional
        Covariates of the Cox censoring model: columns of ``data`` or an (n, p) array.
    cause : int, optional
        Competing risks: ``event`` holds 0 (censored) and cause codes 1, 2,
        ...; the risk is the cumulative incidence of ``cause`` by the
        horizon.  A competing event before t has outcome 0 and is not a
        censoring of the weights (Aalen-Johansen weights).

    Returns
    -------
    CalibrationResult
        Or :class:`~calibtest.ece.grouped_interval.GroupedCalibrationResult` with ``by=``.

    References
    ----------
    .. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
           l2 Expected Calibration Error", arXiv:2408.08998, 2024.
    .. [2] Kuchibhotla, Balakrishnan and Wasserman, "The HulC: confidence
           regions from convex hulls", Journal of the Royal Statistical
           Society Series B 86, 2024.
    .. [3] Politis and Romano, "Large sample confidence regions based on
           subsamples under minimal assumptions", Annals of Statistics
           22:2031-2050, 1994.
    .. [4] Efron, "Bootstrap methods: another look at the jackknife", Annals
           of Statistics 7:1-26, 1979.

    Examples
    --------
    >>> import calibtest as ct
    >>> res = ct.calib_ci("y ~ p", data=ct.load_demo())
    >>> res.n, res.n_bins, res.null
    (3183, 76, 'conditional')
    >>> print(f"T = {res.estimate:.3g}, ECE = {res.ece:.4f}, p = {res.null_pvalue:.3f}")
    T = 0.000202, ECE = 0.0142, p = 0.368
    >>> lo, hi = res.conf_int(scale="ece")       # the adjusted 95% interval, ECE scale
    >>> print(f"[{lo:.3f}, {hi:.4f}]")
    [0.000, 0.0484]
    >>> res.conclusion()[0]
    'no evidence'

    ``print(res.summary())`` prints the evidence table, the conclusion, the
    interval and the notes.
    """
    check_null(null, n_null_draws, rng)  # the table's options are checked by @bound_options; these combinations
    check_method(method, n_resamples, rng, progress)  # here
    env = resolve_env(eval_env)
    inputs = Inputs(formula, data, y=y, probs=probs, weights=weights, by=by, cluster=cluster, time=time, event=event,
                    censoring_covariates=censoring_covariates)
    settings = Settings(n_classes=n_classes, k=k, n_bins=n_bins, alpha=alpha, missing=missing, env=env, null=null,
                        rng=rng, n_null_draws=n_null_draws, method=method, n_resamples=n_resamples,
                        progress=progress, chunksize=chunksize, prevalence=prevalence, horizon=horizon,
                        censoring=censoring, cause=cause,
                        call_options=_recorded_options(n_classes, k, n_bins, alpha, missing, method, n_resamples,
                                                       rng))
    return analyse(inputs, Design.resolve("calib_ci", inputs, settings).check(), settings)


def analyse(inputs: Inputs, design: Design, settings: Settings) -> CalibrationResult | GroupedCalibrationResult:
    """:func:`calib_ci` once its options are validated: the analysis its design names.

    Parameters
    ----------
    inputs : Inputs
        The data and the roles of its columns.
    design : Design
        The kind of analysis (checked against :data:`calibtest.inputs.design.RULES`).
    settings : Settings
        The validated options.
    """
    if not design.in_memory:
        return (grouped_out_of_core if design.grouped else calib_ci_out_of_core)(inputs, settings)
    if design.survival:
        res = survival_calib_ci(inputs, design, settings)
        return grouped_survival_calib_ci(res, alpha=settings.alpha) if design.grouped else res
    if design.grouped:
        return grouped_calib_ci(inputs, design, settings)
    return estimate_in_memory(inputs, settings, design)


# --------------------------------------------------------------------------- data not in memory
def _what(data) -> str:
    """How messages name a file or a Dask ``data`` (its combinations with arrays, a missing formula and resampling
    methods are refused by the call's :class:`~calibtest.inputs.design.Design`)."""
    return f"a Dask {type(data).__name__}" if is_dask(data) else f"the file {os.fspath(data)!r}"


def calib_ci_out_of_core(inputs: Inputs, settings: Settings) -> CalibrationResult:
    """:func:`calibtest.calib_ci` for a file path or a Dask DataFrame.

    Parameters
    ----------
    inputs : Inputs
        ``formula`` (required: it names the columns to read) and ``data``: a
        ``.csv`` (optionally compressed) or ``.parquet`` file, streamed in
        chunks of ``settings.chunksize`` rows; or a Dask DataFrame, reduced with Dask.
    settings : Settings
        The validated options; ``env`` is the caller's environment for names
        that are not columns.
    """
    formula, data = inputs.formula, inputs.data
    if is_dask(data):
        res = dask_calib_ci(data, formula, settings)
    else:
        data = open_data_file(data, formula, settings.env, settings.chunksize)  # read again by res.evidence()
        res = stream_file(data, formula, settings)
    # the rows, to be read again by res.evidence() and the summary (binary and top-1 targets)
    return with_stream(res, data, formula, settings)


def grouped_out_of_core(inputs: Inputs, settings: Settings) -> GroupedCalibrationResult:
    """:func:`calibtest.calib_ci` with ``by=`` for a file path or a Dask DataFrame, streamed by group.

    A counting pass (only the ``by`` columns, or with ``missing="drop"`` the
    formula's too) gives every group's n and so its automatic B; one pass
    then reduces each chunk (partition) to per-group bin sums
    (:mod:`calibtest.streams.grouped`), from which
    :func:`calibtest.ece.grouped_interval.grouped_calib_ci_from_sums` builds the grouped
    result of the rows in memory.

    Parameters
    ----------
    inputs : Inputs
        As in :func:`calib_ci_out_of_core`, with ``by`` the grouping column(s)
        of the file or frame (several: crossed).
    settings : Settings
        As in :func:`calib_ci_out_of_core`.
    """
    formula, data, by, s = inputs.formula, inputs.data, inputs.by, settings
    names = by_names(by)
    if not names:
        raise OptionError(f"by= must name grouping columns of {_what(data)} (a column name or a list of names), "
                          "not arrays of labels")
    if len(set(names)) < len(names):
        twice = next(nm for nm in names if names.count(nm) > 1)
        raise OptionError(f"by lists the grouping column {twice!r} more than once; give each grouping column once")
    options = s.options(by=by, null=s.null if s.null != "auto" else None, rng=None)
    if is_dask(data):
        if s.chunksize is not None:
            raise ValueError("chunksize= applies to files; a Dask DataFrame is processed by partition "
                             "(use ddf.repartition to change their size)")
        sums = dask_groups(data, formula, names, s)
        shown = f"data=<dask DataFrame npartitions={data.npartitions}>"
    else:
        sums = stream_file_groups(data, formula, names, s)
        shown = f"data={sums.source['name']!r}"
        options["chunksize"] = s.chunksize
    call = Call("calib_ci", (repr(formula), shown), options)
    return grouped_calib_ci_from_sums(sums, formula=formula, alpha=s.alpha, null=s.null, call=call)
