"""Hosmer–Lemeshow test for the 1-dim modes, next to the plug-in and debiased estimates.

The HL statistic is computed by ``statsmodels.stats.diagnostic_gen.test_chisquare_binning``
on the two outcome columns (y, 1 - y) against (p, 1 - p), i.e.

    HL = sum_g [(O_g - E_g)^2 / E_g + (n_g - O_g - (n_g - E_g))^2 / (n_g - E_g)],

with g groups of (nearly) equal size formed from the rows sorted by the prediction
(stable sort, so tied predictions keep their row order; ``numpy.array_split``
gives the first ``n mod g`` groups one extra row).  Convention: df = g - 2, the
in-sample (development data) reference of Hosmer & Lemeshow; for a model
validated on independent data some authors use df = g (Stata's outsample
option) — the p-value with df = g is reported too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd
from scipy import stats as _sps
from statsmodels.stats.diagnostic_gen import test_chisquare_binning

from calibtest.core.binstats import bin_sums, debiased_statistic, plugin_statistic

__all__ = ["HosmerLemeshowResult", "hosmer_lemeshow"]


@dataclass(frozen=True, eq=False)
class HosmerLemeshowResult:
    """Hosmer–Lemeshow goodness-of-fit test with debiased and plug-in ECE^2.

    Unpacks as ``statistic, pvalue = result``.

    Attributes
    ----------
    statistic : float
        HL chi-square statistic.
    pvalue : float
        Upper tail of chi2(df).
    df : int
        groups - 2.
    pvalue_df_groups : float
        p-value with df = groups (reference for independent validation data).
    groups : int
    table : pandas.DataFrame
        Per group: ``n``, ``mean_pred``, ``observed`` (events), ``expected``
        (sum of p), ``observed_rate``, ``chi2`` contribution.
    plugin_estimate, debiased_estimate : float
        T_m (paper eq. (Hosmer_Lemeshow_version)) and T on the result's B cubes.
    plugin_estimate_groups, debiased_estimate_groups : float
        The same two estimators on the HL groups.
    """

    _iter_fields: ClassVar[tuple] = ("statistic", "pvalue")

    statistic: float
    pvalue: float
    df: int
    pvalue_df_groups: float
    groups: int
    table: pd.DataFrame = field(repr=False)
    plugin_estimate: float
    debiased_estimate: float
    plugin_estimate_groups: float
    debiased_estimate_groups: float

    def __iter__(self):
        return iter(getattr(self, f) for f in self._iter_fields)

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in ("statistic", "pvalue", "df", "pvalue_df_groups", "groups",
                                               "plugin_estimate", "debiased_estimate",
                                               "plugin_estimate_groups", "debiased_estimate_groups")}
        out["table"] = self.table.to_dict(orient="list")
        return out


def hosmer_lemeshow(result, groups: int = 10) -> HosmerLemeshowResult:
    """Hosmer–Lemeshow test on the rows of a 1-dim ``result`` (binary or top-1).

    Parameters
    ----------
    result : CalibrationResult
        Must hold its rows (in-memory input) and have ``k == 1``.
    groups : int
        Number of groups g (3 <= g <= n), default 10 (deciles of the prediction).
    """
    if result.k != 1 or result.mode not in ("binary", "top1"):
        raise ValueError("hosmer_lemeshow needs a 1-dim mode (binary or top-1)")
    if result.data is None:
        raise ValueError("hosmer_lemeshow needs the rows; this result was computed from bin sums only")
    if isinstance(groups, (bool, np.bool_)) or not isinstance(groups, (int, np.integer)):
        raise TypeError(f"groups must be an integer, got {groups!r}")
    n = result.n
    if not 3 <= groups <= n:
        raise ValueError(f"groups must be between 3 and n = {n}, got {groups}")
    p = result.data.z[:, 0]
    y = result.data.y[:, 0].round()
    res = test_chisquare_binning(np.column_stack([y, 1 - y]), np.column_stack([p, 1 - p]),
                                 sort_var=p, bins=groups, df=groups - 2, sort_method="stable")
    sizes = np.array([len(ix) for ix in res.indices])
    group_of_row = np.repeat(np.arange(groups), sizes)
    inverse = np.empty(n, dtype=np.intp)
    inverse[np.concatenate(res.indices)] = group_of_row
    gstats = bin_sums(inverse, np.arange(groups)[:, None], result.data.u, result.data.z)
    table = pd.DataFrame({
        "group": np.arange(1, groups + 1),
        "n": sizes,
        "mean_pred": gstats.sum_z[:, 0] / sizes,
        "observed": res.freqs[:, 0],
        "expected": res.probs[:, 0],
        "observed_rate": res.freqs[:, 0] / sizes,
        "chi2": res.chi2_stat_groups,
    })
    return HosmerLemeshowResult(
        statistic=float(res.statistic), pvalue=float(res.pvalue), df=groups - 2,
        pvalue_df_groups=float(_sps.chi2.sf(res.statistic, groups)), groups=groups, table=table,
        plugin_estimate=result.plugin_estimate, debiased_estimate=result.estimate,
        plugin_estimate_groups=plugin_statistic(gstats, n),
        debiased_estimate_groups=debiased_statistic(gstats, n))
