"""Hosmer–Lemeshow test for the 1-dim modes, next to the plug-in and debiased estimates.

The HL statistic is computed by ``statsmodels.stats.diagnostic_gen.test_chisquare_binning``
on the two outcome columns (y, 1 - y) against (p, 1 - p), i.e.

    HL = sum_g [(O_g - E_g)^2 / E_g + (n_g - O_g - (n_g - E_g))^2 / (n_g - E_g)],

with g groups of (nearly) equal size formed from the rows sorted by the prediction
(stable sort, so tied predictions keep their row order; ``numpy.array_split``
gives the first ``n mod g`` groups one extra row).

Reference distribution, chosen by ``validation=``:

* ``"external"`` (default): chi-squared with df = g.  The predictions were not
  fitted on these rows (held-out or external validation data, what calibtest
  is for), so no degrees of freedom are spent on estimation; Hosmer, Lemeshow
  & Sturdivant (2013, Applied Logistic Regression, 3rd ed., chapter 5) refer
  the statistic to chi2(g) for external validation (Stata's ``estat gof,
  outsample``).
* ``"development"``: chi-squared with df = g - 2, Hosmer & Lemeshow's (1980)
  reference for the data the logistic model was fitted on.

A group whose expected count of events (or of non-events) is 0 -- every
prediction in it exactly 0 (or 1) -- contributes the limit of (O - E)^2 / E:
0 when it observes none, +inf when it observes some (then HL = +inf and
p = 0: such a label has probability 0 under the predictions).  With case
weights the same holds for the weighted expected counts sum w p and
sum w (1 - p).

Both p-values are kept on the result (``pvalue_df_groups``, df = g, and
``pvalue_df_groups_minus_2``, df = g - 2); ``pvalue`` and ``df`` are those of
the chosen reference.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd
from scipy import stats as _sps
from statsmodels.stats.diagnostic_gen import test_chisquare_binning

from calibtest.inputs.front_door import bound_options
from calibtest.inputs.design import Design
from calibtest.inputs.settings import Inputs, Settings
from calibtest.display.format import fmt, fmt_p
from calibtest.inputs.validation import OptionTypeError, is_integer
from calibtest.core.binstats import bin_sums, debiased_statistic, plugin_statistic
from calibtest.core.partition import partition_rows
from calibtest.core.weighted import weighted_statistics
from calibtest.inputs.formula import resolve_env
from calibtest.inputs.rows import prepare_input
from calibtest.options import check_option
from calibtest.display.summary import CalibSummary, ResultDisplay, model_text

__all__ = ["HosmerLemeshowResult", "hosmer_lemeshow"]


@dataclass(frozen=True, eq=False, repr=False)
class HosmerLemeshowResult(ResultDisplay):
    """Hosmer–Lemeshow goodness-of-fit test with debiased and plug-in ECE^2.

    Unpacks as ``statistic, pvalue = result``.

    Attributes
    ----------
    statistic : float
        HL chi-square statistic.
    pvalue : float
        Upper tail of chi2(df), the chosen reference.
    df : int
        ``groups`` for ``validation="external"`` (the default), ``groups - 2``
        for ``validation="development"``.
    pvalue_df_groups : float
        p-value with df = groups (reference for external validation data),
        whatever ``validation`` is.
    pvalue_df_groups_minus_2 : float
        p-value with df = groups - 2 (reference for the development data),
        whatever ``validation`` is.
    validation : str
        ``"external"`` or ``"development"``: which reference ``pvalue`` and
        ``df`` use.
    groups : int
    table : pandas.DataFrame
        Per group: ``n``, ``mean_pred``, ``observed`` (events), ``expected``
        (sum of p), ``observed_rate``, ``chi2`` contribution.
    plugin_estimate, debiased_estimate : float
        T_m (paper eq. (2)) and T on the result's B cubes.
    plugin_estimate_groups, debiased_estimate_groups : float
        The same two estimators on the HL groups.
    n, n_bins, mode : int, int, str
        Rows, bins per dimension B of the plug-in and debiased estimates, target.
    formula, y_name, prob_names, n_dropped
        The model as given (for the summary) and rows dropped for missing values.
    weighted : bool
        Case weights were given: ``observed`` and ``expected`` are weighted
        sums, the statistic is sum_g (O_g - E_g)^2 / (sum_g w^2 pbar_g (1 - pbar_g))
        and the estimates are the weighted T_w and its plug-in.
    """

    _iter_fields: ClassVar[tuple] = ("statistic", "pvalue")

    statistic: float
    pvalue: float
    df: int
    pvalue_df_groups: float
    pvalue_df_groups_minus_2: float
    validation: str
    groups: int
    table: pd.DataFrame = field(repr=False)
    plugin_estimate: float
    debiased_estimate: float
    plugin_estimate_groups: float
    debiased_estimate_groups: float
    n: int | None = None
    n_bins: int | None = None
    mode: str = "binary"
    formula: str | None = None
    y_name: str = "y"
    prob_names: tuple = ()
    n_dropped: int = 0
    weighted: bool = False

    def __iter__(self):
        return iter(getattr(self, f) for f in self._iter_fields)

    def _dict(self) -> dict:
        """Flat: the scalars, then the group table as one list per column (``table_n``, ...)."""
        out = {k: getattr(self, k) for k in ("statistic", "pvalue", "df", "validation", "pvalue_df_groups",
                                               "pvalue_df_groups_minus_2", "groups",
                                               "plugin_estimate", "debiased_estimate",
                                               "plugin_estimate_groups", "debiased_estimate_groups",
                                               "n", "n_bins", "mode", "formula", "y_name", "n_dropped",
                                               "weighted")}
        out["prob_names"] = list(self.prob_names)
        out.update({f"table_{c}": self.table[c].tolist() for c in self.table.columns})
        return out

    def _summary(self, alpha: float | None) -> CalibSummary:
        smry = CalibSummary()
        smry.add_title("Hosmer-Lemeshow goodness-of-fit test")
        settings = {"Model:": model_text(self.formula, self.y_name, self.prob_names), "Mode:": self.mode,
                    "No. observations:": fmt(self.n), "Groups (g):": fmt(self.groups),
                    "Bins (B):": fmt(self.n_bins),
                    "Reference:": f"chi2({self.df}), df = {_DF_TEXT[self.validation]} ({self.validation})"}
        if alpha is not None:
            settings["Alpha:"] = fmt(alpha)
        smry.add_settings(settings)
        refs = [("external", self.groups, self.pvalue_df_groups),
                ("development", self.groups - 2, self.pvalue_df_groups_minus_2)]
        tests = {"chi2": [self.statistic] * 2, "df": [df for _, df, _ in refs],
                 "p-value": [pv for _, _, pv in refs]}
        if alpha is not None:
            tests["reject"] = [pv <= alpha for _, _, pv in refs]
        index = [f"HL, df = {_DF_TEXT[v]} ({v})" + (" [used]" if v == self.validation else "")
                 for v, _, _ in refs]
        smry.add_table(pd.DataFrame(tests, index=index, dtype=object),
                       {"chi2": 6, "df": 6, "p-value": fmt_p})
        smry.add_table(pd.DataFrame({"plug-in T_m": [self.plugin_estimate, self.plugin_estimate_groups],
                                     "debiased T": [self.debiased_estimate, self.debiased_estimate_groups]},
                                    index=[f"on the B = {self.n_bins} bins", f"on the {self.groups} HL groups"],
                                    dtype=object), {"plug-in T_m": 6, "debiased T": 6})
        t = self.table
        groups = pd.DataFrame({"n": t["n"].tolist(), "mean pred": t["mean_pred"].tolist(),
                               "observed": t["observed"].tolist(), "expected": t["expected"].tolist(),
                               "obs. rate": t["observed_rate"].tolist(), "chi2": t["chi2"].tolist()},
                              index=[f"group {g}" for g in t["group"]], dtype=object)
        smry.add_table(groups, {"n": 6, "mean pred": 4, "observed": 6, "expected": 6, "obs. rate": 4,
                                "chi2": 4})
        notes = ["Groups of (nearly) equal size by sorted prediction. p-value: chi2 with "
                 f"df = {_DF_TEXT[self.validation]} = {self.df} (validation='{self.validation}'). df = g is the "
                 "reference for external (held-out) validation data, df = g - 2 for the data the model was "
                 "fitted on (Hosmer & Lemeshow 1980; Hosmer, Lemeshow & Sturdivant 2013).",
                 "T_m and T estimate ECE^2; T_m (the HL statistic's unweighted analogue / n) is biased "
                 "upwards by about (number of groups) var / n, T is not."]
        if self.n_dropped:
            notes.append(f"{self.n_dropped} rows with missing values were dropped (missing='drop').")
        if self.weighted:
            notes.append("Case weights: observed and expected are weighted sums O_g = sum w y and E_g = sum w p; "
                         "the statistic is sum_g (O_g - E_g)^2 / (sum w^2 pbar_g (1 - pbar_g)), pbar_g = E_g / "
                         "sum w, whose chi-squared reference assumes weights that do not depend on the outcome "
                         "given the prediction; T_m and T are the weighted estimates.")
        smry.add_notes(notes)
        return smry

    def _repr_parts(self) -> list[str]:
        return [f"g={self.groups}: HL={self.statistic:.6g}", f"df={self.df} ({self.validation})",
                f"p={self.pvalue:.4g}"]


_DF_TEXT = {"external": "g", "development": "g - 2"}


@bound_options("hosmer_lemeshow", groups="hl_groups")
def hosmer_lemeshow(formula=None, data=None, *, y=None, probs=None, groups: int = 10,
                    validation: str = "external", n_classes: int | None = None, n_bins="auto",
                    missing: str = "raise", eval_env=0, weights=None, horizon=None) -> HosmerLemeshowResult:
    """Hosmer–Lemeshow test of a binary (or top-1) probability model, next to the ECE^2 estimates.

    Inputs follow :func:`calibtest.calib_ci`: a formula with ``data=``
    (``hosmer_lemeshow("y ~ p", data=df, groups=10)``) or ``y=``/``probs=``
    arrays (``hosmer_lemeshow(y=y, probs=p)``).

    Parameters
    ----------
    formula : str, optional
        ``"y ~ p"`` (binary), or ``"correct ~ confidence"`` with ``n_classes``
        (top-1).  For backward compatibility a
        :class:`~calibtest.CalibrationResult` is accepted here (then the
        second positional argument is ``groups``).  Formulas are evaluated
        by patsy and can run any Python expression: trusted input only.
    data : DataFrame or dict, optional
        Data for the formula.
    y, probs : array_like, optional
        Outcomes and predicted probabilities, shape (n,), instead of a formula.
    groups : int
        Number of groups g (3 <= g <= n), default 10 (deciles of the prediction).
    validation : {"external", "development"}
        Reference distribution of ``pvalue`` and ``df``.  ``"external"``
        (default): chi-squared with g degrees of freedom, for predictions
        validated on data they were not fitted on (held-out, external
        validation; Hosmer, Lemeshow & Sturdivant 2013 [2]_).
        ``"development"``: g - 2 degrees of freedom, Hosmer and Lemeshow's
        (1980) [1]_ reference for the data the logistic model was fitted on.
        Both p-values are on the result whatever the choice
        (``pvalue_df_groups``, ``pvalue_df_groups_minus_2``).  Before this
        argument existed ``pvalue`` and ``df`` always used g - 2; pass
        ``validation="development"`` for those numbers.
    n_classes : int, optional
        K for a top-1 confidence column.
    n_bins : int or "auto"
        Bins B of the plug-in and debiased estimates shown next to the test.
    missing : {"raise", "drop"}
    eval_env : int, dict or patsy.EvalEnvironment
        As in :func:`calibtest.calib_ci`.
    weights : str or array_like, optional
        Case weights (a column of ``data`` or one value per row; finite,
        non-negative, not all zero).  The groups stay the g groups of equal
        row counts by sorted prediction; O_g = sum w y, E_g = sum w p and the
        statistic is sum_g (O_g - E_g)^2 / (sum_{i in g} w_i^2 pbar_g (1 - pbar_g))
        with pbar_g = E_g / sum_{i in g} w_i, the usual HL statistic for unit
        weights.  Under calibration with weights that do not depend on the
        outcome given the prediction, Var(O_g - E_g) = sum w^2 p (1 - p),
        approximated by the group mean as in the unweighted test, and the
        same chi-squared references apply (approximately).  Prevalence
        weights depend on the outcome and have no such reference: use
        ``calib_ci(..., prevalence=pi)``.

    horizon : None
        Not taken: a survival outcome (``horizon=`` or a ``Surv(...)`` formula) is refused with the reason
        (rows censored before the horizon have no binary outcome); use
        ``calib_ci("Surv(time, event) ~ risk", data=..., horizon=t)`` and its evidence.

    Returns
    -------
    HosmerLemeshowResult
        Unpacks as ``statistic, pvalue``.

    References
    ----------
    .. [1] Hosmer, D. W. and Lemeshow, S. (1980). "Goodness of fit tests for
       the multiple logistic regression model." *Communications in
       Statistics - Theory and Methods* A10, 1043-1069.
    .. [2] Hosmer, D. W., Lemeshow, S. and Sturdivant, R. X. (2013).
       *Applied Logistic Regression*, 3rd ed., Wiley.

    Examples
    --------
    >>> import calibtest as ct
    >>> hl = ct.hosmer_lemeshow("y ~ p", data=ct.load_demo(), groups=10)
    >>> stat, pvalue = hl
    >>> round(stat, 2), round(pvalue, 3)
    (8.62, 0.569)
    """
    design = Design.resolve("hosmer_lemeshow", Inputs(formula, weights=weights), Settings(horizon=horizon)).check()
    if not (formula is None or isinstance(formula, str)):  # the earlier form hosmer_lemeshow(result, groups)
        if data is not None:
            groups = data
        return _from_result(formula, groups, validation)
    validation = check_option("validation", validation)
    check_option("hl_groups", groups, "groups")
    prepared = prepare_input("hosmer_lemeshow", Inputs(formula=formula, data=data, y=y, probs=probs,
                                                       weights=weights),
                             Settings(env=resolve_env(eval_env), missing=missing, n_classes=n_classes),
                             single_column=True)
    rows, target, w = prepared.rows, prepared.target, prepared.weights
    partition = partition_rows(target, n_bins)
    return _hosmer_lemeshow(target, partition.bin_sums(target), partition.n_bins, groups, validation,
                            formula=formula, weights=w, weighted=design.weighted, partition=partition,
                            y_name=rows.y_name, prob_names=tuple(rows.prob_names), n_dropped=rows.n_dropped)


def _from_result(result, groups: int, validation: str = "external") -> HosmerLemeshowResult:
    """Hosmer–Lemeshow test on the rows of a 1-dim ``result`` (binary or top-1) of calib_ci."""
    validation = check_option("validation", validation)
    if result.data is None:
        raise ValueError("hosmer_lemeshow needs the rows; this result was computed from bin sums only")
    weights = partition = None
    weighted = getattr(getattr(result, "kind", None), "weighted", False)
    if weighted:
        weighting = result.weighting
        if weighting.case_weights is None:
            raise ValueError("this result is weighted by prevalence: its weights depend on the outcome, so the "
                             "Hosmer-Lemeshow statistic has no chi-squared reference")
        weights, partition = weighting.case_weights, result.partition
    return _hosmer_lemeshow(result.data, result.bin_stats, result.n_bins, groups, validation, weights=weights,
                            weighted=weighted,
                            partition=partition, formula=result.formula,
                            y_name=result.y_name, prob_names=tuple(result.prob_names),
                            n_dropped=result.n_dropped)


def _hosmer_lemeshow(data, stats, n_bins: int, groups: int, validation: str, weights=None, partition=None,
                     weighted: bool = False, **bookkeeping) -> HosmerLemeshowResult:
    """The test on the rows ``data`` of a 1-dim target; ``stats`` are their sums on the B cubes."""
    if data.k != 1 or not data.mode.one_dimensional:
        raise ValueError("hosmer_lemeshow needs a 1-dim mode (binary or top-1)")
    if not is_integer(groups):
        raise OptionTypeError(f"groups must be an integer, got {groups!r}")
    n = data.n
    if not 3 <= groups <= n:
        raise ValueError(f"groups must be between 3 and n = {n}, got {groups}")
    p = data.z[:, 0]
    y = data.y[:, 0].round()
    with np.errstate(divide="ignore", invalid="ignore"):  # expected counts of 0: fixed just below
        res = test_chisquare_binning(np.column_stack([y, 1 - y]), np.column_stack([p, 1 - p]),
                                     sort_var=p, bins=groups, df=groups - 2, sort_method="stable")
    chi2_groups, statistic, p_dev = res.chi2_stat_groups, float(res.statistic), float(res.pvalue)
    if np.any(res.probs == 0):  # (O - E)^2 / E with E = 0: its limit, 0 when O = 0, else +inf
        cells = np.zeros(res.probs.shape)
        ok = res.probs > 0
        cells[ok] = (res.freqs[ok] - res.probs[ok]) ** 2 / res.probs[ok]
        cells[~ok & (res.freqs != res.probs)] = np.inf
        chi2_groups = cells.sum(axis=1)
        statistic = float(chi2_groups.sum())
        p_dev = float(_sps.chi2.sf(statistic, groups - 2))
    sizes = np.array([len(ix) for ix in res.indices])
    group_of_row = np.repeat(np.arange(groups), sizes)
    inverse = np.empty(n, dtype=np.intp)
    inverse[np.concatenate(res.indices)] = group_of_row
    gstats = bin_sums(inverse, np.arange(groups)[:, None], data.u, data.z)
    table = pd.DataFrame({
        "group": np.arange(1, groups + 1),
        "n": sizes,
        "mean_pred": gstats.sum_z[:, 0] / sizes,
        "observed": res.freqs[:, 0],
        "expected": res.probs[:, 0],
        "observed_rate": res.freqs[:, 0] / sizes,
        "chi2": chi2_groups,
    })
    estimates = dict(plugin_estimate=plugin_statistic(stats, n), debiased_estimate=debiased_statistic(stats, n),
                     plugin_estimate_groups=plugin_statistic(gstats, n),
                     debiased_estimate_groups=debiased_statistic(gstats, n))
    if weighted:  # case weights of the rows (the design's or the result's kind)
        w_g = np.bincount(inverse, weights=weights, minlength=groups)
        w2_g = np.bincount(inverse, weights=weights * weights, minlength=groups)
        obs = np.bincount(inverse, weights=weights * y, minlength=groups)
        exp_ = np.bincount(inverse, weights=weights * p, minlength=groups)
        pbar = np.divide(exp_, w_g, out=np.zeros(groups), where=w_g > 0)
        var = w2_g * pbar * (1.0 - pbar)
        contrib = np.divide((obs - exp_) ** 2, var, out=np.zeros(groups), where=var > 0)
        # the limit where every p of the group is exactly 0 (1) and it observes an event (non-event)
        exp_non = np.bincount(inverse, weights=weights * (1.0 - p), minlength=groups)
        obs_non = np.bincount(inverse, weights=weights * (1.0 - y), minlength=groups)
        contrib[((exp_ == 0) & (obs > 0)) | ((exp_non == 0) & (obs_non > 0))] = np.inf
        statistic = float(contrib.sum())
        p_dev = float(_sps.chi2.sf(statistic, groups - 2))
        table["observed"], table["expected"], table["chi2"] = obs, exp_, contrib
        table["observed_rate"] = np.divide(obs, w_g, out=np.full(groups, np.nan), where=w_g > 0)
        table["weight"], table["mean_pred"] = w_g, pbar
        full = weighted_statistics(partition.inverse, data.u, weights, partition.m)
        grouped = weighted_statistics(inverse, data.u, weights, groups)
        estimates = dict(plugin_estimate=full.plugin, debiased_estimate=full.estimate,
                         plugin_estimate_groups=grouped.plugin, debiased_estimate_groups=grouped.estimate)
    p_ext = float(_sps.chi2.sf(statistic, groups))
    external = validation == "external"
    return HosmerLemeshowResult(
        statistic=statistic, pvalue=p_ext if external else p_dev,
        df=groups if external else groups - 2, pvalue_df_groups=p_ext, pvalue_df_groups_minus_2=p_dev,
        validation=validation, groups=groups, table=table, **estimates, n=n, n_bins=n_bins, mode=data.mode,
        weighted=weighted, **bookkeeping)
