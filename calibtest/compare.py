"""Two-model (and pairwise) comparison of calibration errors: ``calib_compare``.

Estimand: Delta = ECE_A^2 - ECE_B^2, estimated by T_A - T_B (the paper's
debiased estimator for each model on its own bins).  The z test and normal
interval use the variance of ``calibtest.compare_variance`` (first-order
influence part plus second-order degenerate part; derivation in
``docs/compare.md``), which accounts for the correlation of the two estimates
when both models are scored on the same rows.

Paired or not
-------------
Paired means *the same rows in the same order*.  ``paired=None`` decides:

* formula form (``calib_compare("y ~ p_a", "y ~ p_b", data=df)``): both
  models are evaluated on the rows of ``data``, so the comparison is paired;
* results with different ``n``: unpaired;
* binary results with equal ``n``: paired when the outcome vectors
  y = U + Z are identical row by row, unpaired otherwise;
* top-1 / top-k results with equal ``n``: the results hold only each model's
  own indicators (``correct`` of the top-1 class, or of the top-k classes),
  which differ between models on the same rows, so the rows cannot be
  recognised: a ``ValueError`` asks for ``paired=True`` or ``paired=False``
  (or use the formula form).

``paired=True`` with different ``n`` raises a ``ValueError``; ``paired=True``
with equal ``n`` is trusted (the outcomes may legitimately differ, e.g. top-1
``correct`` of two models on the same images).
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from .compare_results import ALTERNATIVES, ComparisonResult, PairwiseComparisonResult, z_interval, z_pvalue
from .compare_variance import difference_variance, row_bins
from .formula import capture_env, parse_formula
from .intervals import check_alpha
from .results import CalibrationResult

__all__ = ["calib_compare"]

_VARIANCES = ("corrected", "plugin")
_CUBE_MODES = ("binary", "top1", "topk")


def _check_options(paired, alternative, variance):
    if paired is not None and not isinstance(paired, (bool, np.bool_)):
        raise TypeError(f"paired must be None, True or False, got {paired!r}")
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {ALTERNATIVES}, got {alternative!r}")
    if variance not in _VARIANCES:
        raise ValueError(f"variance must be one of {_VARIANCES}, got {variance!r}")


def _model_name(res: CalibrationResult, default: str) -> str:
    if res.formula and "~" in res.formula:
        return res.formula.split("~", 1)[1].strip()
    if res.prob_names:
        return " + ".join(res.prob_names)
    return default


def _rows(res: CalibrationResult, which: str):
    """Bin number and U of every row of a result (recomputed from ``res.data``)."""
    if not isinstance(res, CalibrationResult):
        raise TypeError(f"{which} must be a CalibrationResult from calib_ci (or a formula string), "
                        f"got {type(res).__name__}")
    if res.data is None:
        raise ValueError(f"{which} holds no row-level data (result.data is None); calib_compare needs the "
                         "rows, so pass a result of calib_ci computed in memory")
    if res.mode not in _CUBE_MODES:
        raise ValueError(f"{which}: calib_compare supports the modes {_CUBE_MODES}, got {res.mode!r}")
    inverse, m = row_bins(res.data.z, res.n_bins)
    if res.bin_stats is not None and (m != res.bin_stats.count.size or
                                      not np.array_equal(np.bincount(inverse, minlength=m), res.bin_stats.count)):
        raise ValueError(f"{which}: its bins are not the cube partition floor(z * B) with B = {res.n_bins}")
    return inverse, res.data.u


def _outcomes(res: CalibrationResult) -> np.ndarray:
    return np.rint(res.data.u[:, 0] + res.data.z[:, 0])


def _decide_pairing(a: CalibrationResult, b: CalibrationResult, paired) -> tuple[bool, str]:
    """(paired, reason) for two results; see the module docstring."""
    same_n = a.n == b.n
    if paired is True:
        if not same_n:
            raise ValueError(f"paired=True needs the same rows in the same order, but the results have "
                             f"different numbers of rows (n_a = {a.n}, n_b = {b.n})")
        return True, "caller"
    if paired is False:
        return False, "caller"
    if not same_n:
        return False, "different n"
    if a.mode == "binary":
        if np.array_equal(_outcomes(a), _outcomes(b)):
            return True, "identical outcomes"
        return False, "outcomes differ"
    raise ValueError(
        f"cannot tell whether two {a.mode} results with the same n = {a.n} share their rows: they hold only "
        "each model's own correctness indicators, which differ between models on the same rows. Pass "
        "paired=True (same rows, same order) or paired=False (independent evaluation sets), or use the "
        "formula form calib_compare('y ~ p_a', 'y ~ p_b', data=df), which is paired")


def _check_compatible(a: CalibrationResult, b: CalibrationResult):
    if a.mode != b.mode:
        raise ValueError(f"the two results have different modes ({a.mode!r} and {b.mode!r}); "
                         "compare calibration errors of the same target")
    if a.k != b.k:
        raise ValueError(f"the two results have different k ({a.k} and {b.k}); compare the same top-k target")
    if a.n_classes != b.n_classes:
        raise ValueError(f"the two results have different numbers of classes (n_classes = {a.n_classes} and "
                         f"{b.n_classes})")


def _compare_two(a, b, *, paired, pairing, alpha, alternative, variance, names) -> ComparisonResult:
    inv_a, u_a = _rows(a, "a")
    inv_b, u_b = _rows(b, "b")
    var = difference_variance(inv_a, u_a, inv_b, u_b, paired=paired)
    v1, v2 = var.first_order(variance), var.second_order
    se = float(np.sqrt(v1 + v2))
    est = float(a.estimate - b.estimate)
    if se > 0:
        stat = est / se
    else:
        stat = 0.0 if est == 0 else float(np.copysign(np.inf, est))
    pvalue = float(z_pvalue(stat, alternative))
    lower, upper = z_interval(est, se, alpha, alternative)
    return ComparisonResult(
        estimate=est, estimate_a=float(a.estimate), estimate_b=float(b.estimate), se=se,
        se_first_order=float(np.sqrt(v1)), se_second_order=float(np.sqrt(v2)),
        se_first_order_plugin=float(np.sqrt(var.first_order_plugin)), statistic=float(stat), pvalue=pvalue,
        alternative=alternative, alpha=alpha, ci_lower=float(lower), ci_upper=float(upper), paired=bool(paired),
        pairing=pairing, variance=variance, name_a=names[0], name_b=names[1], n_a=a.n, n_b=b.n,
        n_bins_a=a.n_bins, n_bins_b=b.n_bins, mode=a.mode, k=a.k, n_classes=a.n_classes,
        result_a=a, result_b=b)


def _names(results, names) -> list[str]:
    if names is not None:
        names = [str(v) for v in names]
        if len(names) != len(results):
            raise ValueError(f"names must give one name per model ({len(results)}), got {len(names)}")
        if len(set(names)) != len(names):
            raise ValueError(f"names must be distinct, got {names}")
        return names
    letters = [chr(ord("A") + i) if i < 26 else f"M{i + 1}" for i in range(len(results))]
    out = [_model_name(r, letter) if isinstance(r, CalibrationResult) else letter
           for r, letter in zip(results, letters)]
    if len(set(out)) != len(out):
        out = [f"{letter}: {name}" for letter, name in zip(letters, out)]
    return out


def _fit_formulas(formulas, data, *, n_classes, k, n_bins, missing, env, eval_env):
    """calib_ci for each formula on the same rows (rows with NaN in any formula dropped jointly)."""
    from .api import calib_ci
    if data is None:
        raise ValueError("the formula form needs data=")
    if missing not in ("raise", "drop"):
        raise ValueError(f"missing must be one of ('raise', 'drop'), got {missing!r}")
    if missing == "drop":
        masks = []
        for f in formulas:
            parsed = parse_formula(f, data, env)
            y_na = np.asarray(pd.isna(parsed.y), dtype=bool)
            masks.append(y_na | np.isnan(parsed.probs).any(axis=1))
        mask = np.logical_or.reduce(masks)
        if mask.any():
            if isinstance(data, pd.DataFrame):
                data = data.loc[~mask]
            else:
                data = {key: np.asarray(val)[~mask] for key, val in data.items()}
    # calib_ci looks names up eval_env frames above its caller (this frame); the user's frame is
    # two above it (this function <- calib_compare <- user), plus the user's own eval_env.
    # (A plain loop: a comprehension is a frame of its own before Python 3.12.)
    results = []
    for f in formulas:
        results.append(calib_ci(f, data=data, n_classes=n_classes, k=k, n_bins=n_bins, eval_env=eval_env + 2))
    return results


def calib_compare(a, b=None, *, data=None, paired=None, alpha: float = 0.05, alternative: str = "two-sided",
                  variance: str = "corrected", names=None, n_classes=None, k=None, n_bins="auto",
                  missing: str = "raise", eval_env: int = 0):
    """Test whether two models' l2 calibration errors differ: H0 Delta = ECE_A^2 - ECE_B^2 = 0.

    Parameters
    ----------
    a, b : CalibrationResult or str
        Two results of :func:`calibtest.calib_ci` with the same mode, k and
        number of classes, or two formulas (``"y ~ p_a"``, ``"y ~ p_b"``)
        evaluated on ``data``.  A list of three or more results (or formulas)
        as ``a`` with ``b=None`` gives all pairwise comparisons.
    data : DataFrame or dict, optional
        Data for the formula form (both formulas use the same rows: paired).
    paired : bool or None
        Same rows in the same order (True), independent evaluation sets
        (False), or decide from the data (None; see the module docstring).
        ``paired=True`` with different numbers of rows raises ``ValueError``.
    alpha : float
        Significance level of the interval (and of Holm's rejections).
    alternative : {"two-sided", "less", "greater"}
        "greater": H1 Delta > 0, model A worse calibrated than model B.
    variance : {"corrected", "plugin"}
        ``"corrected"`` (default): first-order influence variance with its
        plug-in bias removed, plus the second-order part; ``"plugin"``: the
        uncorrected plug-in first order plus the second order (conservative
        near calibration).  See ``docs/compare.md`` and the vignette.
    names : sequence of str, optional
        Model names (default: the right-hand sides of the formulas).
    n_classes, k, n_bins, missing, eval_env
        As in :func:`calibtest.calib_ci`, for the formula form.  With
        ``missing="drop"`` a row with a missing value in any formula is
        dropped for all models, so the rows stay shared.

    Returns
    -------
    ComparisonResult or PairwiseComparisonResult

    Notes
    -----
    z = (T_A - T_B) / se with se^2 = V1 + V2: V1 the first-order variance from
    the influence values psi_i = ||mu(b_i)||^2 + 2 mu(b_i)^T (U_i - mu(b_i))
    (the decomposition behind the paper's sigma1^2, eq. sigma1_plug_in_estimator),
    paired Var_n(psi^A - psi^B)/n; V2 the variance of the degenerate
    U-statistic parts, including their covariance on shared rows.

    Examples
    --------
    >>> cmp = calib_compare("y ~ p_old", "y ~ p_new", data=df)   # doctest: +SKIP
    >>> print(cmp.summary())                                      # doctest: +SKIP
    >>> calib_compare([r1, r2, r3]).table                         # doctest: +SKIP
    """
    alpha = check_alpha(alpha)
    _check_options(paired, alternative, variance)
    if b is None:
        if not isinstance(a, (list, tuple)):
            raise TypeError("give two models (a, b), or a list of models as a with b=None")
        models = list(a)
        if len(models) < 2:
            raise ValueError(f"need at least two models to compare, got {len(models)}")
    else:
        if isinstance(a, (list, tuple)):
            raise TypeError("a list of models goes in a alone (b=None)")
        models = [a, b]
    kinds = {isinstance(m, str) for m in models}
    if kinds == {True}:
        if paired is False:
            raise ValueError("the formula form evaluates all models on the same rows of data, so it is paired; "
                             "pass paired=None or True")
        results = _fit_formulas(models, data, n_classes=n_classes, k=k, n_bins=n_bins, missing=missing,
                                env=capture_env(eval_env + 1), eval_env=eval_env)
        forced = (True, "formula")
    else:
        if data is not None:
            raise ValueError("data= is used only with formulas")
        for i, m in enumerate(models):
            if not isinstance(m, CalibrationResult):
                raise TypeError(f"model {i + 1} must be a CalibrationResult or a formula string, "
                                f"got {type(m).__name__}")
        results, forced = models, None
    for r in results[1:]:
        _check_compatible(results[0], r)
    labels = _names(results, names)

    def one(i, j):
        pair = forced if forced is not None else _decide_pairing(results[i], results[j], paired)
        return _compare_two(results[i], results[j], paired=pair[0], pairing=pair[1], alpha=alpha,
                            alternative=alternative, variance=variance, names=(labels[i], labels[j]))

    if len(results) == 2 and b is not None:
        return one(0, 1)
    return _pairwise([one(i, j) for i, j in itertools.combinations(range(len(results)), 2)],
                     labels, alpha, alternative)


def _pairwise(comparisons, labels, alpha, alternative) -> PairwiseComparisonResult:
    from statsmodels.stats.multitest import multipletests
    pvals = np.array([c.pvalue for c in comparisons])
    reject, p_holm, _, _ = multipletests(pvals, alpha=alpha, method="holm")
    table = pd.DataFrame({
        "model_a": [c.name_a for c in comparisons], "model_b": [c.name_b for c in comparisons],
        "estimate": [c.estimate for c in comparisons], "se": [c.se for c in comparisons],
        "statistic": [c.statistic for c in comparisons], "pvalue": pvals, "pvalue_holm": p_holm,
        "reject": reject, "ci_lower": [c.ci_lower for c in comparisons],
        "ci_upper": [c.ci_upper for c in comparisons], "paired": [c.paired for c in comparisons]})
    return PairwiseComparisonResult(table=table, comparisons=tuple(comparisons), names=tuple(labels),
                                    alpha=alpha, alternative=alternative)
