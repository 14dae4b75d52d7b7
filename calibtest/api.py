"""Public entry points: thin, validating, dispatching."""
from __future__ import annotations

import numpy as np

from .binning import resolve_n_bins
from .conditional import check_null_options, with_null
from .estimation import cube_bin_stats, cube_rows, result_from_stats
from .formula import capture_env, parse_formula
from .full import full_calibration_result, is_full_request
from .inputs import MISSING_OPTIONS, array_input, check_count, check_seed, missing_mask
from .intervals import check_alpha
from .modes import prepare
from .results import CalibrationResult

__all__ = ["calib_ci"]

def _format_call(formula, data, y, probs, options: dict) -> str:
    parts = []
    if formula is not None:
        parts.append(repr(formula))
        shape = getattr(data, "shape", None)
        parts.append(f"data=<{type(data).__name__} {shape[0]}x{shape[1]}>" if shape else "data=...")
    else:
        parts.append(f"y=<array n={np.shape(y)[0]}>")
        parts.append(f"probs=<array shape={tuple(np.shape(probs))}>")
    parts += [f"{k}={v!r}" for k, v in options.items() if v is not None]
    return "calib_ci(" + ", ".join(parts) + ")"


#: Full calibration records the conditional null moments by default only up to this K.
_CONDITIONAL_BY_DEFAULT_MAX_K = 4


def calib_ci(formula: str | None = None, data=None, *, y=None, probs=None, n_classes: int | None = None,
             k: int | None = None, n_bins="auto", alpha: float = 0.05, missing: str = "raise",
             eval_env: int = 0, method: str = "adjusted", n_resamples: int | None = None,
             null: str = "asymptotic", rng=None, n_null_draws: int = 2000,
             chunksize: int | None = None, progress: bool | None = None) -> CalibrationResult:
    """Confidence interval and test for the l2 expected calibration error.

    Implements Algorithm 1 of Sun, Chaudhari, Barnett & Dobriban, "A Confidence
    Interval for the l2 Expected Calibration Error": the debiased binned
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
        probability columns' names.
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
        (:mod:`calibtest.simplex`; ``n_bins="auto"`` uses d = K - 1).
    n_bins : int or "auto"
        Bins per dimension B over [0, 1] (the paper's mK).  ``"auto"``:
        ``max(2, round(6 / (d + 1) * n ** (2 / (4 + d))))``.
    alpha : float
        Significance level in (0, 1); the interval has level 1 - alpha.
    missing : {"raise", "drop"}
        Rows with NaN raise a ValueError by default; ``"drop"`` drops them and
        the summary reports how many.
    eval_env : int
        Frames above the caller in which formula names not in ``data`` are
        looked up (patsy semantics; 0 is the caller).
    method : {"adjusted", "bootstrap", "subsampling", "hulc"}
        How the interval is made.  ``"adjusted"`` (default) is the paper's
        Algorithm 1.  The others are the resampling baselines of the paper's
        simulations (``calibtest.resampling``): percentile bootstrap,
        subsampling with b = floor(sqrt(n)) rows, and adaptive HulC
        (Kuchibhotla, Balakrishnan and Wasserman 2024).  They resample the
        rows on the same bins; the estimate and the calibrated-regime z test
        are unchanged.
    n_resamples : int, optional
        Resamples / subsamples (default 500; HulC uses them to estimate its
        median bias).  Only for resampling methods.
    rng : None, int or numpy.random.Generator
        Seed of the resampling (recorded as ``res.seed``; with ``None`` a fresh
        seed is drawn and recorded) and of the Monte Carlo null (``mc_seed``).
        An int seed s gives the Monte Carlo null ``default_rng(s)`` and the
        resampling ``default_rng([s, 1])``: independent streams.  A Generator
        is consumed by both, in that order.
    progress : bool, optional
        Progress bar (needs tqdm) for long resampling runs and for files; by
        default only in an interactive terminal and never when the ``CI``
        variable is set; ``False`` never, ``True`` always.
    null : {"asymptotic", "conditional", "monte-carlo"}
        Null law of the test of H0: calibrated, which also decides whether 0
        joins the interval (iff that test does not reject at level alpha).
        ``"asymptotic"`` (default) is the paper's n sqrt(w) T / sigma0 ~ N(0, 1);
        ``"conditional"`` uses the exact moments of T given the predictions
        and a skewness-corrected (shifted gamma) p-value; ``"monte-carlo"``
        redraws the labels from the predictions ``n_null_draws`` times
        (see :mod:`calibtest.conditional`).  The summary always shows the
        asymptotic and the conditional p-values, except for full calibration
        with K > 4 under the default null, where the conditional moments (per-row
        K x K x K terms) are computed only when ``null`` asks for them.
    n_null_draws : int
        Label draws R of the Monte Carlo null (default 2000).
    chunksize : int, optional
        Rows per chunk for a file (default 1,000,000).

    Returns
    -------
    CalibrationResult

    Examples
    --------
    >>> import calibtest as ct
    >>> res = ct.calib_ci("y ~ p", data=ct.load_demo())  # doctest: +SKIP
    >>> print(res.summary())                              # doctest: +SKIP
    """
    alpha = check_alpha(alpha)
    check_null_options(null, n_null_draws, rng)
    _check_method(method, n_resamples, rng, progress)
    if missing not in MISSING_OPTIONS:
        raise ValueError(f"missing must be one of {MISSING_OPTIONS}, got {missing!r}")
    from .outofcore import calib_ci_out_of_core, is_out_of_core
    if is_out_of_core(data):
        if null != "asymptotic":
            raise ValueError(f"null={null!r} needs the rows in memory (a DataFrame or arrays); files and "
                             "Dask frames support the default null='asymptotic'")
        return calib_ci_out_of_core(formula, data, env=capture_env(eval_env + 1), y=y, probs=probs,
                                    n_classes=n_classes, k=k, n_bins=n_bins, alpha=alpha, missing=missing,
                                    chunksize=chunksize, progress=progress, method=method)
    if chunksize is not None:
        raise ValueError("chunksize= applies only to data given as a file path")
    if formula is not None:
        if y is not None or probs is not None:
            raise ValueError("give either a formula with data, or y= and probs=, not both")
        if data is None:
            raise ValueError("a formula needs data=")
        parsed = parse_formula(formula, data, capture_env(eval_env + 1))
        y_arr, p_arr, y_name, prob_names = parsed.y, parsed.probs, parsed.y_name, parsed.prob_names
        class_names = prob_names
    else:
        if y is None or probs is None:
            raise ValueError("give a formula with data=, or both y= and probs=")
        if data is not None:
            raise ValueError("data= is used only with a formula")
        y_arr, p_arr, y_name, prob_names, class_names = array_input(y, probs)
    p_arr = np.asarray(p_arr, dtype=np.float64)
    mask = missing_mask(y_arr, p_arr, y_name, prob_names, missing)
    n_dropped = int(mask.sum())
    if n_dropped:
        y_arr, p_arr = y_arr[~mask], p_arr[~mask]
    if is_full_request(k, p_arr):  # full calibration, k = K: equal-volume simplex bins
        res = full_calibration_result(
            y_arr, p_arr, n_bins=n_bins, alpha=alpha, class_names=class_names, n_classes=n_classes,
            y_name=y_name, prob_names=prob_names, formula=formula, n_dropped=n_dropped,
            call=_format_call(formula, data, y_arr, p_arr, {"n_classes": n_classes, "k": k, "n_bins": n_bins,
                                                              "alpha": alpha, "missing": missing if missing != "raise" else None,
                                                              "method": method if method != "adjusted" else None,
                                                              "n_resamples": n_resamples,
                                                              "rng": rng if isinstance(rng, (int, np.integer)) else None}))
        if null != "asymptotic" or res.k <= _CONDITIONAL_BY_DEFAULT_MAX_K:
            # the conditional moments need per-row K x K and K x K x K terms: recorded by
            # default only for small K, always computed when a non-asymptotic null is asked for
            from .tcal import row_bins
            res = with_null(res, res.data, res.n_bins, null=null, rng=rng, n_null_draws=n_null_draws,
                            inverse=row_bins(res.data, res.n_bins))
        if method != "adjusted":
            from .resampling import resampled_result, row_bin_index
            res = resampled_result(res, row_bin_index(res.data, res.n_bins), method, n_resamples=n_resamples,
                                   rng=rng, progress=progress)
        return res
    prepared = prepare(y_arr, p_arr, n_classes=n_classes, k=k, class_names=class_names,
                       y_name=y_name, prob_names=prob_names)
    B, rule = resolve_n_bins(n_bins, prepared.n, prepared.k)
    rows = cube_rows(prepared, B)
    stats = cube_bin_stats(prepared, B, rows)
    call = _format_call(formula, data, y_arr, p_arr,
                        {"n_classes": n_classes, "k": k, "n_bins": n_bins, "alpha": alpha,
                         "missing": missing if missing != "raise" else None,
                         "method": method if method != "adjusted" else None, "n_resamples": n_resamples,
                         "rng": rng if isinstance(rng, (int, np.integer)) else None})
    res = result_from_stats(
        stats, mode=prepared.mode, k=prepared.k, n_classes=prepared.n_classes, n_bins=B,
        n_bins_rule=rule, alpha=alpha, formula=formula, y_name=y_name, prob_names=tuple(prob_names),
        n_dropped=n_dropped, call=call, data=prepared)
    res = with_null(res, prepared, B, null=null, rng=rng, n_null_draws=n_null_draws, inverse=rows[0])
    if method != "adjusted":
        from .resampling import resampled_result, row_bin_index
        res = resampled_result(res, row_bin_index(prepared, B), method, n_resamples=n_resamples, rng=rng,
                               progress=progress)
    return res


def _check_method(method, n_resamples, rng=None, progress=None) -> None:
    """Validate ``method=``, ``n_resamples=``, ``rng=`` and ``progress=`` of :func:`calib_ci`."""
    from .resampling import METHODS
    allowed = ("adjusted",) + METHODS
    if not isinstance(method, str) or method not in allowed:
        raise ValueError(f"method must be one of {allowed}, got {method!r}")
    if n_resamples is not None:
        if method == "adjusted":
            raise ValueError("n_resamples applies only to the resampling methods "
                             "(method='bootstrap', 'subsampling' or 'hulc')")
        check_count(n_resamples, "n_resamples", 2)
    check_seed(rng)
    if progress is not None and not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"progress must be None, True or False, got {progress!r}")
