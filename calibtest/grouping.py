"""Group labels and the combination of per-group p-values, shared by the grouped analyses.

``calibtest.groups`` (``calib_ci(..., by=)``), ``calib_test(..., by=)`` and
``tcal_test(..., by=)`` read the grouping variables and combine the groups'
p-values here: the Bonferroni min-p (Holm's first step), Fisher's and
Stouffer's combinations, and Holm-adjusted per-group p-values
(``statsmodels.stats.multitest.multipletests``).

References
----------
.. [1] Holm, "A simple sequentially rejective multiple test procedure",
       Scandinavian Journal of Statistics 6 (1979) 65-70.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from scipy import stats as _sps
from statsmodels.stats.multitest import multipletests

from calibtest._validation import row_values

__all__ = ["GLOBAL_METHODS", "group_labels", "levels", "by_names", "global_test", "holm", "grouped_tests"]

#: How the per-group p-values are combined into the global test.
GLOBAL_METHODS = ("bonferroni", "fisher", "stouffer")


# --------------------------------------------------------------------------- group labels
def by_names(by) -> list:
    if isinstance(by, str):
        return [by]
    if isinstance(by, (list, tuple)) and by and all(isinstance(b, str) for b in by):
        return list(by)
    return []


def group_labels(by, data, n_input: int) -> tuple[list[str], list[np.ndarray]]:
    """Names and values of the grouping variables (one array per variable, n_input rows).

    ``by`` is a column name, a list of column names (crossed), an array
    (``y=``/``probs=`` input; name ``"group"``) or a list of arrays.

    Raises
    ------
    ValueError
        Unknown column, wrong length, missing group labels, an empty list.
    """
    names = by_names(by)
    if names:
        values = [row_values(nm, data, n_input, "by") for nm in names]
    elif isinstance(by, (list, tuple)) and by and not np.isscalar(by[0]) and np.ndim(by[0]) == 1:
        values = [row_values(b, data, n_input, "by") for b in by]
        names = [getattr(b, "name", None) or f"group{i + 1}" for i, b in enumerate(by)]
    elif isinstance(by, (list, tuple)) and not by:
        raise ValueError("by must name at least one column")
    else:
        values = [row_values(by, data, n_input, "by")]
        names = [getattr(by, "name", None) or "group"]
    for nm, v in zip(names, values):
        if pd.isna(pd.Series(v)).any():
            raise ValueError(f"by column {nm!r} has missing values; give them a level of their own "
                             "(e.g. 'unknown') or drop those rows")
    return [str(nm) for nm in names], values


def levels(values) -> tuple[np.ndarray, list]:
    """Integer codes and levels of one grouping variable (categorical: all its categories, in order)."""
    series = pd.Series(values)
    if isinstance(series.dtype, pd.CategoricalDtype):
        return series.cat.codes.to_numpy(np.int64), list(series.cat.categories)
    codes, uniques = pd.factorize(series, sort=True)
    return codes.astype(np.int64), list(uniques)


def global_test(pvalues, method: str = "bonferroni") -> tuple[float, float]:
    """(statistic, p-value) of H0: calibrated in every group, from independent per-group p-values.

    ``"bonferroni"``: statistic min p, p-value min(1, G min p) (valid under any
    dependence; Holm's first step).  ``"fisher"``: -2 sum log p ~ chi2(2G).
    ``"stouffer"``: sum Phi^-1(1 - p) / sqrt(G) ~ N(0, 1).  The last two assume
    independent, uniform p-values under H0 (disjoint groups given the predictions).
    """
    p = np.asarray(pvalues, dtype=float)
    if p.size == 0:
        return math.nan, math.nan
    if method == "bonferroni":
        return float(p.min()), float(min(1.0, p.size * p.min()))
    p = np.clip(p, np.finfo(float).tiny, 1.0)
    stat, pval = _sps.combine_pvalues(p, method=method)
    return float(stat), float(pval)


def holm(pvalues) -> np.ndarray:
    """Holm-adjusted p-values of the finite entries (NaN stays NaN)."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method="holm")[1]
    return out


def grouped_tests(test, formula, data, *, by, y=None, probs=None, **options) -> pd.DataFrame:
    """Run a test of calibration (``calib_test``, ``tcal_test``) in each group; one row per group.

    Columns ``n``, ``statistic``, ``pvalue`` and ``pvalue_holm`` (Holm over the
    groups), and ``note`` (why a group was not tested: no rows, one row, a
    single outcome class, or the error the test raised).  ``DataFrame.attrs``
    holds the Bonferroni global p-value (``"global_pvalue"``) and the grouping
    names (``"by"``).
    """
    n_input = len(data) if formula is not None else len(y)
    names, values = group_labels(by, data, n_input)
    coded = [levels(v) for v in values]
    records = []
    for combo_codes in itertools.product(*[range(len(levels)) for _, levels in coded]):
        mask = np.ones(n_input, dtype=bool)
        for (codes, _), c in zip(coded, combo_codes):
            mask &= codes == c
        rec = {nm: levels[c] for nm, (_, levels), c in zip(names, coded, combo_codes)}
        rec.update(n=int(mask.sum()), statistic=np.nan, pvalue=np.nan, note="")
        if mask.sum() < 2:
            rec["note"] = "no rows" if not mask.any() else "a single row"
        else:
            try:
                if formula is not None:
                    res = test(formula, data[mask] if hasattr(data, "iloc") else
                               {key: np.asarray(v)[mask] for key, v in data.items()}, **options)
                else:
                    res = test(y=np.asarray(y)[mask], probs=np.asarray(probs)[mask], **options)
                rec.update(statistic=res.statistic, pvalue=res.pvalue)
            except ValueError as exc:
                rec["note"] = str(exc)
        records.append(rec)
    table = pd.DataFrame(records)
    p = table["pvalue"].to_numpy(float)
    ok = np.isfinite(p)
    table.insert(table.columns.get_loc("pvalue") + 1, "pvalue_holm", holm(p))
    table = table.set_index(names if len(names) > 1 else names[0])
    table.attrs["global_pvalue"] = global_test(p[ok], "bonferroni")[1]
    table.attrs["by"] = list(names)
    return table
