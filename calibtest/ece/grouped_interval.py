r"""Calibration within subgroups: ``calib_ci(..., by=...)``, the global and the heterogeneity tests.

Each group (a level of ``by``, or a combination of levels for several
columns, crossed) gets its own :class:`~calibtest.ece.result.CalibrationResult`
with its own automatic B.  Two tests look across the groups.  The groups,
their labels, the reasons a group is not analysed, the Holm-adjusted
p-values and the result protocol come from the grouping engine shared with
``calib_test``, ``tcal_test`` and ``evidence`` (:mod:`calibtest.ece.group_engine`);
this module adds what only intervals of ECE^2 have: the pooled result, the
small-group rule and the heterogeneity test.

**Global test** (H0: calibrated in every group).  The groups are disjoint sets
of rows, so given the predictions their test statistics are independent.
Each group's p-value is taken with finite-sample size where available
(:func:`finite_sample_pvalue`): the chosen null's if it is the conditional or
Monte Carlo null, else the conditional (shifted-gamma) p-value computed
alongside the asymptotic one; ``null="monte-carlo"`` makes every group's
p-value exact given its predictions.  The global p-value is the Bonferroni min-p, min(1, G min_g p_g), the first
step of Holm's procedure: its size is at most alpha under any dependence and
whatever the group sizes, it needs no more than valid per-group p-values
(Monte Carlo p-values are conservative, which keeps it valid), and it has the
most power when one group is miscalibrated and the others are not, the
pattern a subgroup analysis looks for.  Fisher's combination
-2 sum log p_g ~ chi2(2G) and Stouffer's sum Phi^-1(1 - p_g) / sqrt(G) (both
exact for independent uniform p-values) are available in :func:`calibtest.ece.group_engine.global_test` and as
``grouped_calib_ci(global_method=)``;
``vignettes/populations.md`` measures the size and power of the three.

**Heterogeneity test** (H0: the same ECE^2 in every group).  The estimates
T_g of disjoint groups are independent.  The variance of T_g has a
second-order (degenerate U-statistic) part V2_g, the whole variance when
the group is calibrated, and a first-order (influence) part that grows with
the group's ECE^2 (the unpaired parts of
``calibtest.core.difference_variance``, ``docs/compare.md``).  The test
evaluates each variance under H0, at the common ECE^2 theta of the groups:

    v_g(theta) = V2_g + F_g max(theta, 0) / P_g,

where F_g = Var_n(psi) / n is the plug-in first-order variance and
P_g = sum_b (c_b / n) ||mu_b||^2 the plug-in estimate.  Both are quadratic
in the bin means, so their ratio is the first-order variance per unit of
ECE^2 with the group's own shape of miscalibration (which bins carry it);
theta is the inverse-variance mean T_bar = sum_g (T_g / v_g) / sum_g (1 / v_g)
at v_g(T_bar), found by fixed-point iteration from the weights 1 / V2_g.  The
Wald statistic of equal means,

    Q = sum_g (T_g - T_bar)^2 / v_g(T_bar),

is referred to chi2(G - 1) (Cochran's Q with variances restricted to H0, as
in a score test).  Each group's own, unrestricted variance
max(F_g - 2 V2_g^(c), 0) + V2_g (the corrected first-order part floored at
0) would add the floor's noise to every calibrated group's variance and made
Q conservative: sizes 0.016-0.024 at alpha = 0.05 when every group is
calibrated, and 0.09 with equal ECE^2 = 0.01 and logit-shifted groups
(``vignettes/population_tests.md``).  Weighted groups use T_w with
sigma_{1,w}^2 / n, V_0 and the weighted plug-in of
:mod:`calibtest.core.weighted` in the same places.  Each T_g estimates the
binned ECE^2 at its own B_g: for miscalibrated groups of very different
sizes the binning bias differs, and a fixed ``n_bins`` makes the groups
comparable.

References
----------
.. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
       l2 Expected Calibration Error", arXiv:2408.08998, 2024.
.. [2] Holm, "A simple sequentially rejective multiple test procedure",
       Scandinavian Journal of Statistics 6 (1979) 65-70.
.. [3] Cochran, "The combination of estimates from different experiments",
       Biometrics 10 (1954) 101-129.
.. [4] Pleiss, Raghavan, Wu, Kleinberg and Weinberger, "On fairness and
       calibration", NeurIPS 2017 (calibration within groups).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as _sps

from calibtest.checks.evidence_table import kind_flag
from calibtest.display.format import fmt, fmt_interval, fmt_p, interval_verdict, json_safe, p_equals
from calibtest.inputs.validation import check_choice, resolve_seed
from calibtest.core.difference_variance import first_order_var_single, second_order_var_single
from calibtest.core.partition import partition_rows
from calibtest.core.targets import PreparedData, Target
from calibtest.core.weighted import prevalence_weights, weighted_null_variance
from calibtest.core.binstats import BinStats
from calibtest.core.recalibration import calibration_measures_rows, oe_measures
from calibtest.ece.build_result import (RowWeights, check_weighted_options, estimate_clustered, estimate_rows, estimate_weighted,
                                  result_from_stream)
from calibtest.ece.group_engine import (GLOBAL_METHODS, GroupedResult, GroupOutcomes, analyse_counted_groups, analyse_groups, by_names,
                                few_clusters_note, global_test, group_rng, group_labels, group_table,
                                grouping_from_counts, grouping_of, holm, label_text)
from calibtest.inputs.design import Design
from calibtest.inputs.rows import prepare_input
from calibtest.inputs.settings import Inputs, Settings
from calibtest.ece.meta_analysis import MEASURES, MetaAnalysisResult, Sites, pool_sites
from calibtest.ece.result import CalibrationResult
from calibtest.ece.result_parts import BinChoice, CalibrationTarget
from calibtest.display.summary import CalibSummary, model_text, short_name
from calibtest.core.targets import prepare_target

__all__ = ["GroupedCalibrationResult", "grouped_calib_ci", "grouped_survival_calib_ci", "calibration_measures", "MEASURE_COLUMNS", "grouped_calib_ci_from_sums", "variance_from_sums",
           "global_test", "heterogeneity_test", "holm", "VarianceParts",
           "finite_sample_pvalue", "GLOBAL_METHODS", "MIN_GROUP_ROWS", "MIN_GROUP_EVENTS"]

#: Below this many rows a group is analysed with the Monte Carlo null and a note.
MIN_GROUP_ROWS = 50
#: ... or with fewer events (or non-events) than this.
MIN_GROUP_EVENTS = 5


# --------------------------------------------------------------------------- the tests across groups
def heterogeneity_test(estimates, variances, first_order=None, plugin=None, *, max_iter: int = 200
                       ) -> tuple[float, int, float, float]:
    """Cochran's Q of equal means of independent estimates, with variances restricted to H0 when given in parts.

    Parameters
    ----------
    estimates : array_like, shape (G,)
        T_g.
    variances : array_like, shape (G,)
        Each estimate's variance, or with ``first_order`` its second-order
        part V2_g (the variance at ECE^2 = 0).
    first_order, plugin : array_like, shape (G,), optional
        The plug-in first-order variances F_g and plug-in estimates P_g: the
        variance at a common ECE^2 theta is V2_g + F_g max(theta, 0) / P_g
        (module docstring), evaluated at the pooled estimate.

    Returns
    -------
    statistic, df, pvalue, pooled : float, int, float, float
        Q = sum (T_g - T_bar)^2 / v_g with the inverse-variance mean T_bar, its
        degrees of freedom G - 1 and the chi2(G - 1) p-value (NaN with fewer
        than two groups of positive variance).
    """
    t = np.asarray(estimates, dtype=float)
    v0 = np.asarray(variances, dtype=float)
    slope = np.zeros_like(v0)
    if first_order is not None:
        f, pl = np.asarray(first_order, dtype=float), np.asarray(plugin, dtype=float)
        slope = np.divide(f, pl, out=np.zeros_like(v0), where=(pl > 0) & (f > 0))
    keep = v0 > 0
    t, v0, slope = t[keep], v0[keep], slope[keep]
    if t.size < 2:
        return math.nan, 0, math.nan, math.nan

    def mean_at(theta: float) -> tuple[float, np.ndarray]:
        w = 1.0 / (v0 + slope * max(theta, 0.0))
        return float(np.sum(w * t) / np.sum(w)), w

    pooled, w = mean_at(0.0)
    for _ in range(max_iter):  # fixed point T_bar = mean at v(T_bar); a few steps (G values each)
        new, w = mean_at(pooled)
        done = abs(new - pooled) <= 1e-13 * max(abs(new), abs(pooled))
        pooled = new
        if done:
            break
    pooled, w = mean_at(pooled)
    q = float(np.sum(w * (t - pooled) ** 2))
    return q, int(t.size - 1), float(_sps.chi2.sf(q, t.size - 1)), pooled


@dataclass(frozen=True)
class VarianceParts:
    """The parts of one group's variance that the heterogeneity test uses (module docstring).

    Attributes
    ----------
    second_order : float
        V2 (V_0 for weighted rows): the variance of T when the group is calibrated.
    first_order : float
        The plug-in first-order variance Var_n(psi) / n (sigma_{1,w}^2 / n).
    plugin : float
        The plug-in estimate sum_b (c_b / n) ||mu_b||^2 (weighted: sum_b (W_b / W) ||mu_b||^2).
    bias : float
        2 V2^(c), the plug-in bias of ``first_order`` (weights 1/c_b instead of 1/(c_b - 1)).
    """

    second_order: float
    first_order: float
    plugin: float
    bias: float

    @property
    def unrestricted(self) -> float:
        """The group's own variance max(first_order - bias, 0) + second_order (as for two-sample comparisons)."""
        return max(self.first_order - self.bias, 0.0) + self.second_order


def weighted_variance(res: CalibrationResult, weights: np.ndarray) -> VarianceParts:
    """:func:`estimate_variance` of a weighted group: ``weights`` are the row weights its result used (case
    weights times the prevalence factors), in the weighted formulas of :mod:`calibtest.core.weighted`."""
    inv, u, m = res.partition.inverse, res.data.u, res.partition.m
    return VarianceParts(second_order=weighted_null_variance(inv, u, weights, m),
                         first_order=res.sigma1_sq / res.n, plugin=res.plugin_estimate,
                         bias=2.0 * weighted_null_variance(inv, u, weights, m, shift=0.0))


def estimate_variance(res: CalibrationResult) -> VarianceParts:
    """The parts of one group's variance: second-order, plug-in first-order, plug-in estimate (module docstring),
    for unweighted rows (:func:`weighted_variance` for weighted ones)."""
    inv, u = res.partition.inverse, res.data.u
    return VarianceParts(second_order=second_order_var_single(inv, u), first_order=first_order_var_single(inv, u),
                         plugin=res.plugin_estimate, bias=2.0 * second_order_var_single(inv, u, shift=0.0))


# --------------------------------------------------------------------------- the result
@dataclass(frozen=True, eq=False, repr=False, kw_only=True)
class GroupedCalibrationResult(GroupedResult):
    """Calibration within subgroups: one interval per group, the pooled result, tests across groups.

    The grouped-result protocol of :class:`calibtest.ece.group_engine.GroupedResult`
    (``groups``, ``to_frame()``, ``summary()``, ``global_pvalue``,
    ``plot_forest()``) with what only intervals of ECE^2 have: the pooled
    result and the heterogeneity test.

    Attributes
    ----------
    by, groups, reasons, group_notes, table, global_statistic, global_pvalue, global_method, alpha
        As in :class:`~calibtest.ece.group_engine.GroupedResult`; ``groups`` holds
        :class:`CalibrationResult` objects.
    pooled : CalibrationResult
        All rows together.
    heterogeneity_statistic, heterogeneity_pvalue : float
        Cochran's Q of H0: equal ECE^2 in every analysed group, and its chi2
        p-value; NaN when it is not computed (``heterogeneity_note`` says why).
    heterogeneity_df : int or None
        G - 1 (None when not computed).
    heterogeneity_pooled : float
        The inverse-variance weighted mean of the T_g (the common ECE^2 under
        H0, at which the variances are evaluated).
    heterogeneity_note : str or None
        Why the heterogeneity test was not computed (fewer than two analysed
        groups with a positive variance), in words; None when it was.
    null : str
        The null asked for (small groups use the Monte Carlo null; streamed
        data the asymptotic null there).
    source : dict or None
        For a file or a Dask frame (streamed by group), the data source as in
        ``CalibrationResult.source``; None for rows in memory.
    pooled_measures : dict
        CITL, slope and O/E of all rows together with their intervals
        (:func:`calibration_measures`; O/E only for streamed data, empty
        when not defined).
    meta : MetaAnalysisResult
        The random-effects meta-analysis of the groups' measures with the
        defaults of :meth:`meta_analysis` (REML, Wald interval), computed once.
    measure_reasons : dict
        ``"log_oe"``, ``"citl"``, ``"slope"`` -> {group label: why the analysed
        group has no such measure}, as its kind says (survival groups:
        competing risks, weighted rows, a risk of 0 or 1); the notes and the
        meta-analysis say it.
    mode, k, n_classes, formula, y_name, prob_names, call_record
        Bookkeeping.
    """

    pooled: CalibrationResult
    heterogeneity_statistic: float
    heterogeneity_pvalue: float
    heterogeneity_df: int | None
    heterogeneity_pooled: float
    heterogeneity_note: str | None = None
    null: str = "conditional"
    kind: str = "calib_ci"
    source: dict | None = None
    pooled_measures: dict = field(default_factory=dict)
    meta: MetaAnalysisResult | None = field(default=None, repr=False)
    measure_reasons: dict = field(default_factory=dict, repr=False)

    def to_frame(self) -> pd.DataFrame:
        """One row per group (a copy), indexed by the group labels (named by ``by``).

        Columns: ``n``, ``events``, ``n_bins``, ``estimate`` (T, or T_w),
        ``ece`` (sqrt T+), ``ci_lower``/``ci_upper`` (ECE^2) and
        ``ece_ci_lower``/``ece_ci_upper`` (ECE) at level 1 - alpha, ``contains_zero``
        (decided by the group's null), ``pvalue`` (test of ECE = 0 in the group,
        finite-sample where available: :func:`finite_sample_pvalue`), ``pvalue_holm``
        (Holm-adjusted over the analysed groups), ``null`` (which null gave
        ``pvalue``) and ``note`` (why a group has no result, or which null a
        small group used).  ``n`` and ``events`` count every group's rows,
        analysed or not.  Beside the ECE: ``estimate_se`` (the s.e. of T,
        sqrt(v_g) of the heterogeneity test) and every group judged by every
        measure (:data:`MEASURE_COLUMNS`): ``citl``, ``slope`` and ``oe`` with
        their s.e. (``citl_se``, ``slope_se``, ``log_oe_se`` of log(O/E)) and
        Wald intervals (``*_ci_lower``, ``*_ci_upper``), missing for weighted
        rows and several probability columns; streamed groups have O/E only;
        survival groups have the Kaplan-Meier O/E and Crowson et al.'s CITL
        and slope at the horizon (:func:`grouped_survival_calib_ci`).
        """
        return self.table.copy()

    def meta_analysis(self, measures=None, *, method: str = "REML", hartung_knapp: bool = False,
                      alpha: float | None = None) -> MetaAnalysisResult:
        """Random-effects meta-analysis of the groups' log O/E, CITL, slope and ECE^2 (the groups as sites).

        See :func:`calibtest.ece.meta_analysis.meta_analysis`; with the defaults
        it returns the analysis held in ``meta`` (computed once, with the result).

        Parameters
        ----------
        measures : str or list of str, optional
            Among ``"log_oe"``, ``"citl"``, ``"slope"``, ``"ece"`` (None: all).
        method : {"REML", "DL", "PM"}
            Estimator of the between-site variance tau^2.
        hartung_knapp : bool
            The Hartung-Knapp interval (t on k - 1 df) of the pooled estimate.
        alpha : float, optional
            1 - alpha intervals (default: the result's alpha).

        Returns
        -------
        MetaAnalysisResult
        """
        if (self.meta is not None and measures is None and method == "REML" and hartung_knapp is False
                and alpha in (None, self.alpha)):
            return self.meta
        return pool_sites(Sites.of(self.table, self.by, self.pooled, self.groups, self.measure_reasons), measures,
                          method=method, hartung_knapp=hartung_knapp, alpha=self.alpha if alpha is None else alpha)

    def pooled_ece_text(self) -> str | None:
        """Why the pooled ECE is below every group's, in one sentence (None when it is not, or fewer than 2 groups).

        The one writer of this sentence: the summary's notes and the report
        read it.  The reasons given are the two that make it happen: each
        group's bins are its own, and the pooled analysis asks about
        E[y | p] over all rows, so errors of opposite sign in different
        groups average out within its bins (named with the range of the
        groups' CITL when they differ in sign).
        """
        frame = self.table[self.table["estimate"].notna()]
        ece = frame["ece"].to_numpy(float)
        if ece.size < 2 or not np.isfinite(self.pooled.ece) or not self.pooled.ece < ece.min():
            return None
        bins = frame["n_bins"].astype(float).to_numpy()
        b_text = (f"B = {int(bins.min())}" if bins.min() == bins.max() else
                  f"B from {int(bins.min())} to {int(bins.max())}")
        citl = frame["citl"].to_numpy(float) if "citl" in frame else np.array([])
        citl = citl[np.isfinite(citl)]
        signs = ""
        if citl.size >= 2 and citl.min() < 0 < citl.max():
            signs = (f" (here the groups' calibration-in-the-large runs from {fmt(citl.min(), 3)} to "
                     f"{fmt(citl.max(), 3)}: some groups' risks are over-predicted, others' under-predicted)")
        return (f"The pooled ECE ({fmt(self.pooled.ece, 3)}) is below every group's ({fmt(ece.min(), 3)} to "
                f"{fmt(ece.max(), 3)}) because the pooled row asks whether E[y | p] = p over all rows together, on "
                f"its own B = {self.pooled.n_bins} bins (the groups': {b_text}): miscalibrations of opposite sign "
                f"in different groups average out within the pooled bins{signs}, so a small pooled ECE does not "
                "show that the model is calibrated within each group.")

    def heterogeneity_text(self) -> str:
        """The heterogeneity test in words (its statistic, or why it was not computed)."""
        if self.heterogeneity_note is not None:
            return f"Heterogeneity (equal ECE^2 in every group): not computed, {self.heterogeneity_note}."
        return (f"Heterogeneity (equal ECE^2 in every group): Cochran's Q = {fmt(self.heterogeneity_statistic, 4)} "
                f"on {self.heterogeneity_df} df, {p_equals(self.heterogeneity_pvalue, 4)} "
                + ("(variances: each group's cluster-robust se^2 of T_cl)." if kind_flag(self.pooled, "clustered")
                   else "(variances at the pooled ECE^2 of H0: second-order plus the first-order part "
                   "at that ECE^2, valid also when every group is calibrated)."))

    def notes(self) -> list[str]:
        """Notes of the summary footer."""
        notes = self._global_notes() + [self.heterogeneity_text()]
        used = set(self.table["null"].dropna())
        if kind_flag(self.pooled, "clustered"):  # clusters nested in the groups: every group's numbers are the clustered ones
            clustering = self.pooled.clustering
            what = f"column {clustering.name!r}" if clustering.name else "given as an array"
            notes.append(f"Clustered rows ({clustering.n_clusters} clusters, {what}, nested in the groups): each "
                         "group's interval and test are the clustered ones on its own clusters (T_cl, a "
                         "cluster-robust standard error, t quantiles on its clusters - 1 df, the cluster sign-flip "
                         "or asymptotic test), its CITL, slope and O/E have cluster-robust intervals (t on its "
                         "clusters - 1 df; not Wald), and the heterogeneity test and the meta-analysis use the "
                         "cluster-robust variances; the pooled row is clustered on every row.")
        elif used - {"asymptotic"}:
            notes.append("Per-group p-values come from the conditional null given the predictions where available "
                         "(exact moments with a shifted-gamma p-value, or the Monte Carlo test), which holds its "
                         "size in finite samples" + ("; groups marked 'asymptotic' use the paper's normal null."
                                                     if "asymptotic" in used else "."))
        if self.n_dropped:
            notes.append(f"{self.n_dropped} rows with missing values were dropped (missing='drop') before "
                         "grouping; n counts the rows analysed.")
        if self.source is not None:
            notes.append(f"Streamed from {self.source.get('name', self.source.get('format'))} in "
                         f"{self.source.get('passes', 1)} pass(es): per-group bin sums, no rows kept.")
        sv = self.pooled.survival
        if sv is not None:
            what = "risk P(T <= t)" if sv.cause is None else f"cumulative incidence of cause {sv.cause} by t"
            notes.append(f"Survival outcome at horizon t = {sv.horizon:g} (the {what}): each group's censoring "
                         "distribution is estimated from its own rows, so the groups' estimates are independent; "
                         "'events' counts events by t.")
        notes += self._measure_reason_notes()
        notes += self._group_notes()
        notes.append("Each group has its own bins (B in the table); the pooled row is all rows together.")
        below = self.pooled_ece_text()
        if below is not None:
            notes.append(below)
        return notes

    def _settings(self) -> dict:
        return {"Model:": model_text(self.formula, self.y_name, self.prob_names),
                "Mode:": ("survival at a horizon (binary 1{T <= t})" if kind_flag(self.pooled, "survival_outcome")
                          else Target(self.mode).text(self.k)), "Groups by:": " x ".join(self.by),
                "Groups:": f"{self.n_analysed} analysed of {self.n_groups}",
                "Alpha:": fmt(self.alpha), "Null:": self.null}

    def _tests_frame(self) -> pd.DataFrame:
        rows = {"statistic": [], "df": [], "p-value": []}
        for stat, df, p, computed in ((self.global_statistic, None, self.global_pvalue, self.n_analysed > 0),
                                      (self.heterogeneity_statistic, self.heterogeneity_df, self.heterogeneity_pvalue,
                                       self.heterogeneity_note is None)):
            rows["statistic"].append(stat if computed else "not computed")
            rows["df"].append(df if computed else None)
            rows["p-value"].append(p if computed else None)
        return pd.DataFrame(rows, index=[f"global ({self.global_method})", "heterogeneity (Q)"], dtype=object)

    def _summary(self, alpha: float | None) -> CalibSummary:
        smry = CalibSummary()
        smry.add_title("Calibration within subgroups: debiased l2-ECE per group")
        smry.add_settings(self._settings())
        cols = ["n", "events", "n_bins", "ece", "interval", "verdict", "pvalue", "pvalue_holm"]
        tab = self.table[["n", "events", "n_bins", "ece", "pvalue", "pvalue_holm"]].astype(object)
        tab.insert(4, "interval", [_interval_cell(self.groups.get(g)) for g in self.table.index])
        tab.insert(5, "verdict", [_verdict_cell(self.groups.get(g)) for g in self.table.index])
        tab.index = [", ".join(map(str, i)) if isinstance(i, tuple) else str(i) for i in tab.index]
        pooled = self.pooled
        events = _events(pooled) if pooled.data is not None else int(self.table["events"].sum())
        pooled_row = pd.DataFrame([[pooled.n, events, pooled.n_bins, pooled.ece, _interval_cell(pooled),
                                    _verdict_cell(pooled), pooled.null_pvalue, None]], columns=cols,
                                  index=["(pooled)"], dtype=object)
        tab = pd.concat([tab, pooled_row])
        tab.index = [short_name(i, 16) for i in tab.index]
        tab = tab.where(tab.notna(), None)
        level = f"{100 * (1 - self.alpha):g}%"
        p3 = lambda p: fmt_p(p, 3)  # noqa: E731
        smry.add_table(tab.rename(columns={"interval": f"{level} CI", "pvalue_holm": "p (Holm)", "pvalue": "p",
                                           "n_bins": "B"}),
                       {"n": 8, "events": 8, "B": 4, "ece": 4, "p": p3, "p (Holm)": p3})
        measures = self._measures_frame()
        if measures is not None:
            smry.add_table(measures)
        smry.add_table(self._tests_frame(), {"statistic": 4, "df": 3, "p-value": 4})
        level = f"{100 * (1 - self.alpha):g}%"
        lead = [f"ECE with its adjusted {level} interval (Algorithm 1) in each group; p tests ECE = 0."]
        if measures is not None:
            lead.append(f"{self.pooled.kind.recalibration_words()['summary']} with their {level} "
                        f"{'cluster-robust' if kind_flag(self.pooled, 'clustered') else 'Wald'} "
                        "intervals: "
                        "each group judged by every measure.")
        smry.add_notes(lead + self.notes() + self._meta_notes())
        return smry

    def _measure_reason_notes(self) -> list[str]:
        """Why analysed groups have no O/E, CITL or slope: one note per reason, naming the measures and groups."""
        by_reason: dict = {}
        for m, reasons in self.measure_reasons.items():
            for label, why in reasons.items():
                by_reason.setdefault(why, ([], []))
                names, labels = by_reason[why]
                if MEASURES[m][0] not in names:
                    names.append(MEASURES[m][0])
                if label not in labels:
                    labels.append(label)
        notes = []
        for why, (names, labels) in by_reason.items():
            which = ("every analysed group" if len(labels) == self.n_analysed else
                     "group" + ("s " if len(labels) > 1 else " ") + ", ".join(self.label_text(lb) for lb in labels))
            names = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
            notes.append(f"{names} of {which}: not computed, {why}.")
        return notes

    def _meta_notes(self) -> list[str]:
        """The summary's pointer to the meta-analysis across the groups (its pooled O/E, or ECE)."""
        meta = self.meta
        if meta is None or not meta.measures:
            return []
        m = "log_oe" if "log_oe" in meta.pooled else meta.measures[0]
        re = meta.pooled[m]
        r = re.row(natural=True)
        label = "O/E" if m == "log_oe" else MEASURES[m][2]
        pi = ("" if not np.isfinite(r["pi_lower"]) else
              f"; {100 * (1 - meta.alpha):g}% prediction interval for a new group {fmt(r['pi_lower'], 3)} to "
              f"{fmt(r['pi_upper'], 3)}")
        return [f"Across the groups as sites (meta_analysis(): random effects, REML): pooled {label} "
                f"{fmt(r['estimate'], 3)} [{fmt(r['ci_lower'], 3)}, {fmt(r['ci_upper'], 3)}], "
                f"I^2 = {fmt(100 * re.i2, 3)}%{pi}."]

    def _measures_frame(self) -> pd.DataFrame | None:
        """The summary's table of CITL, slope and O/E per group and pooled (None when none is defined)."""
        if not self.table["oe"].notna().any():
            return None

        def cell(values, name) -> str:
            v = values.get(name)
            if v is None or not np.isfinite(v):
                return ""
            lo, hi = values.get(f"{name}_ci_lower"), values.get(f"{name}_ci_upper")
            if lo is None or not np.isfinite(lo):
                return fmt(v, 3)
            return f"{fmt(v, 3)} [{fmt(lo, 3)}, {fmt(hi, 3)}]"

        records = self.table.to_dict(orient="records") + [self.pooled_measures]
        index = [short_name(", ".join(map(str, i)) if isinstance(i, tuple) else str(i), 16)
                 for i in self.table.index] + ["(pooled)"]
        return pd.DataFrame({"CITL [CI]": [cell(r, "citl") for r in records],
                             "slope [CI]": [cell(r, "slope") for r in records],
                             "O/E [CI]": [cell(r, "oe") for r in records]}, index=index)

    def _dict(self) -> dict:
        return {"by": list(self.by), "n_groups": self.n_groups, "alpha": self.alpha, "null": self.null,
                "global_method": self.global_method, "global_statistic": self.global_statistic,
                "global_pvalue": self.global_pvalue, "seed": self.seed,
                "heterogeneity_statistic": self.heterogeneity_statistic,
                "heterogeneity_df": self.heterogeneity_df, "heterogeneity_pvalue": self.heterogeneity_pvalue,
                "heterogeneity_pooled": self.heterogeneity_pooled, "heterogeneity_note": self.heterogeneity_note,
                "groups": json_safe(self._records()), "pooled": self.pooled.to_dict(),
                "pooled_measures": dict(self.pooled_measures),
                "meta_analysis": None if self.meta is None else self.meta.to_dict(), "notes": self.notes()}

    def _repr_parts(self) -> list[str]:
        het = "heterogeneity not computed" if self.heterogeneity_note is not None else \
            f"heterogeneity p={self.heterogeneity_pvalue:.4g}"
        return [f"by={'*'.join(self.by)} groups={self.n_groups}", f"global p={self.global_pvalue:.4g}", het]


def _events(res: CalibrationResult) -> int:
    """Rows whose (first) outcome indicator is 1 (a survival result: its events by the horizon, not IPCW outcomes)."""
    if res.kind.survival_outcome:
        return int(res.survival.n_events)
    return int(np.rint(res.data.y[:, 0]).sum()) if res.data is not None else -1


# --------------------------------------------------------------------------- the analysis
def finite_sample_pvalue(res: CalibrationResult) -> tuple[float, str]:
    """(p-value, null) of a group's test of ECE = 0 with finite-sample size where available.

    The chosen null's p-value unless it is the asymptotic one; then the
    conditional (shifted-gamma) p-value computed alongside it when reliable;
    otherwise the asymptotic p-value (weighted rows, skewed conditional law
    under the asymptotic null, or more than 4 binned coordinates).
    """
    if res.null != "asymptotic":
        return res.null_pvalue, "monte-carlo" if res.null_method == "monte carlo" else res.null
    if res.conditional is not None and res.conditional.reliable:
        return res.conditional.pvalue, "conditional"
    return res.null_pvalue, "asymptotic"


def heterogeneity_note(n_analysed: int, n_positive: int) -> str | None:
    """Why Cochran's Q cannot be computed, in words (None when it can: two or more groups of positive variance)."""
    if n_positive >= 2:
        return None
    if n_analysed < 2:
        return ("it needs at least two analysed groups and "
                + ("only one group was analysed" if n_analysed == 1 else "no group was analysed"))
    return (f"it needs at least two groups whose estimate has a positive variance, and only {n_positive} of the "
            f"{n_analysed} analysed groups has one")


#: The measures beside the ECE in every group's row: CITL, slope and O/E with their Wald intervals at the
#: result's level (``log_oe_se`` is the s.e. of log(O/E)).
MEASURE_COLUMNS = ["citl", "citl_se", "citl_ci_lower", "citl_ci_upper", "slope", "slope_se", "slope_ci_lower",
                   "slope_ci_upper", "oe", "log_oe_se", "oe_ci_lower", "oe_ci_upper"]


def calibration_measures(res: CalibrationResult) -> dict:
    """CITL, slope and O/E of a result's rows with their Wald intervals (:data:`MEASURE_COLUMNS`).

    The definitions of :func:`calibtest.val_prob`: the intercept of
    logit P(y = 1) = a + logit p (CITL), the slope b of a + b logit p, and
    O/E = sum y / sum p with the s.e. sqrt((1 - O/n) / O) of log(O/E), by the
    vectorised fits of :mod:`calibtest.core.recalibration`.  Empty (missing in
    the table) for weighted rows, several probability columns and streamed
    groups (whose rows were not kept).
    """
    if res.data is None or res.data.z.shape[1] != 1 or res.kind.weighted:
        return {}
    return calibration_measures_rows(res.data.z[:, 0], np.rint(res.data.y[:, 0]), res.alpha)


#: Why a group's CITL or slope is missing although the group was analysed.
UNESTIMABLE_MEASURE = ("no maximum-likelihood logistic fit exists on its rows (the outcomes are separated by "
                       "the predictions, as happens in small groups), so the table leaves it empty")


def add_measure_notes(table: pd.DataFrame, group_notes: dict) -> None:
    """Name, in ``group_notes`` and the table's ``note`` column, every analysed group whose CITL or slope is NaN.

    A group with rows and a result has finite O/E; its CITL or slope is NaN
    only when the logistic fit has no maximum (:func:`calibtest.core.recalibration.logistic_fit`), which
    the note says instead of leaving an unexplained gap.
    """
    if "slope" not in table or "citl" not in table:
        return
    for label in table.index[table["estimate"].notna() & (table["slope"].isna() | table["citl"].isna())]:
        missing = " and ".join(nm for nm in ("citl", "slope") if pd.isna(table.at[label, nm]))
        text = f"{missing.replace('citl', 'CITL')} not estimable: {UNESTIMABLE_MEASURE}."
        group_notes[label] = f"{group_notes[label]} {text}" if group_notes.get(label) else text
        table.at[label, "note"] = group_notes[label]


def _interval_cell(res) -> str | None:
    """A group's ECE interval as the tables show it (``(0, u]`` when open at 0), None without a result."""
    if res is None:
        return None
    iv = res.conf_int(scale="ece")
    return fmt_interval(iv.lower, iv.upper, iv.lower_open, 3)


def _verdict_cell(res) -> str | None:
    """``"excludes 0"`` or ``"contains 0"`` beside a group's interval, None without a result."""
    return None if res is None else interval_verdict(res.conf_int(scale="ece").contains_zero)


def _row(res: CalibrationResult) -> dict:
    ci = res.conf_int(scale="ece")
    p, null = finite_sample_pvalue(res)
    return dict(n_bins=res.n_bins, estimate=res.estimate, ece=res.ece, ci_lower=res.ci_lower, ci_upper=res.ci_upper,
                ece_ci_lower=ci.lower, ece_ci_upper=ci.upper, contains_zero=res.contains_zero, pvalue=p, null=null,
                **calibration_measures(res))


_COLUMNS = ["n_bins", "estimate", "ece", "ci_lower", "ci_upper", "ece_ci_lower", "ece_ci_upper", "contains_zero",
            "pvalue", "null", *MEASURE_COLUMNS]


def grouped_calib_ci(inputs: Inputs, design: Design, settings: Settings, *,
                     global_method: str = "bonferroni") -> GroupedCalibrationResult:
    """:func:`calibtest.calib_ci` with ``by=``: one result per group (see the module docstring).

    Parameters
    ----------
    inputs : Inputs
        The data, with ``by``: grouping column(s) of ``data`` (several:
        crossed, every combination of the levels listed, empty ones with the
        reason) or arrays of labels (:func:`calibtest.ece.group_engine.make_grouping`);
        ``weights`` and ``cluster`` as below.
    design : Design
        The kind of analysis: weighted (case weights or a prevalence), clustered or neither.
    settings : Settings
        The options of :func:`calibtest.calib_ci` (already validated).
    settings.null : {"auto", "asymptotic", "conditional", "monte-carlo"} or None
        Null of every group's interval and test, as in :func:`calibtest.calib_ci`;
        None is ``"conditional"`` (for weighted rows ``"auto"``: the Monte
        Carlo null in the binary and top-1 modes, else the asymptotic one).  Groups
        with fewer than :data:`MIN_GROUP_ROWS` rows or :data:`MIN_GROUP_EVENTS`
        events or non-events use ``"monte-carlo"`` (unweighted rows) and get a
        note.  The global test and the Holm-adjusted p-values use each
        group's finite-sample p-value (:func:`finite_sample_pvalue`) whatever
        the null.
    global_method : {"bonferroni", "fisher", "stouffer"}
        Combination of the per-group p-values (module docstring).
    inputs.cluster : str or array_like, optional
        Clusters nested in the groups (e.g. ``by="country"``,
        ``cluster="site"``): every group's result is the clustered one
        (:func:`calibtest.ece.build_result.estimate_clustered` on the group's rows
        and clusters), its variance in the heterogeneity test and the
        meta-analysis the cluster-robust se^2, and its CITL, slope and O/E
        those with cluster-robust intervals; the pooled result is clustered
        on every row.  A group with one cluster is listed, not analysed (the
        reason says so); when every group is one cluster (``by=`` and
        ``cluster=`` the same partition, e.g. both the site) an
        :class:`OptionError` points to ``by=`` alone and ``meta_analysis()``.
        A cluster in two groups is a :class:`DataError`.

    Returns
    -------
    GroupedCalibrationResult
    """
    global_method = check_choice(global_method, "global_method", GLOBAL_METHODS)
    s, null, by = settings, settings.null, inputs.by
    if design.clustered:
        return _grouped_clustered(inputs, s.replace(null="auto" if null is None else null), global_method)
    weighted = design.weighted
    if null is None:
        null = "auto" if weighted else "conditional"
    if weighted:
        check_weighted_options(null, s.method)
    rng, n_bins, n_null_draws, prevalence, alpha = s.rng, s.n_bins, s.n_null_draws, s.prevalence, s.alpha
    _, seed = resolve_seed(rng)
    options = s.options(by=by if by_names(by) else "<array>", null=null if null != "asymptotic" else None,
                        rng=seed if seed != "Generator" else None)  # the seed of any Monte Carlo null used
    prepared = prepare_input("calib_ci", inputs.replace(cluster=None), s, group_labels=group_labels,
                             options=options)
    rows, target, call, w_all, w_name = (prepared.rows, prepared.target, prepared.call, prepared.weights,
                                         prepared.weights_name)
    grouping = grouping_of(prepared.group_names, prepared.group_values)
    pi_hat = None
    if design.reweighted:  # the design's sampling fractions: the whole sample's prevalence
        if not target.mode.one_dimensional:
            raise ValueError(f"prevalence= applies to the binary and top-1 modes, not to mode {target.mode!r}")
        pi_hat = prevalence_weights(np.rint(target.y[:, 0]) == 1, prevalence, w_all)[1]
    bookkeeping = dict(formula=inputs.formula, y_name=rows.y_name, prob_names=tuple(rows.prob_names))

    def one(sub, part, sub_w, group_null, gen, sub_call):
        own = s.replace(null=group_null, rng=gen)
        if weighted:
            return estimate_weighted(sub, part, RowWeights(sub_w, w_name, design.reweighted, pi_hat), own,
                                     call=sub_call, **bookkeeping)
        return estimate_rows(sub, part, own, call=sub_call, **bookkeeping)

    group_notes, variances = {}, {}

    def analyse(g, label, idx, sub):
        group_null = null
        events = int(np.rint(sub.y[:, 0]).sum())
        small = sub.n < MIN_GROUP_ROWS or min(events, sub.n - events) < MIN_GROUP_EVENTS
        note = None
        if small and (not weighted or sub.z.shape[1] == 1):
            group_null = "monte-carlo"
            note = (f"small group ({sub.n} rows, {events} events): the asymptotic approximations "
                    "are unreliable, so the Monte Carlo null given the predictions decides its "
                    f"test ({n_null_draws} label draws); its interval is approximate.")
        elif small:
            note = (f"small group ({sub.n} rows, {events} events): the weighted asymptotic "
                    "approximations are unreliable here; read its interval and test with care.")
        sub_w = None if w_all is None else w_all[idx]
        if sub_w is not None and not (sub_w > 0).any():
            raise ValueError("every weight is zero")
        if note is not None:
            group_notes[label] = note
        res = one(sub, partition_rows(sub, n_bins), sub_w, group_null, group_rng(rng, seed, g),
                  call.with_options(group=label_text(grouping.names, label)))
        final = _final_weights(sub, sub_w, prevalence, pi_hat) if design.reweighted else sub_w
        variances[label] = weighted_variance(res, final) if weighted else estimate_variance(res)
        return res

    groups, reasons = analyse_groups(grouping, target, analyse)
    pooled = one(target, partition_rows(target, n_bins), w_all, null, group_rng(rng, seed, len(grouping)),
                 call.with_options(by=None))
    table = group_table(grouping, target, groups, reasons,
                        {lb: note for lb, note in group_notes.items() if groups[lb] is not None}, _row, _COLUMNS,
                        events=True)
    add_measure_notes(table, group_notes)
    return _grouped_result(grouping, GroupOutcomes(groups, reasons, group_notes), variances, pooled, table,
                           global_method=global_method, alpha=alpha, null=null, seed=seed, mode=target.mode,
                           k=target.k, n_classes=target.n_classes, formula=inputs.formula, y_name=rows.y_name,
                           prob_names=tuple(rows.prob_names), n_dropped=rows.n_dropped, call_record=call)


def survival_variance(res: CalibrationResult, weights: np.ndarray | None = None) -> VarianceParts:
    """:func:`estimate_variance` of a survival result (``calib_ci(..., horizon=)``).

    Without censoring before the horizon the result is the binary one
    (weighted with case ``weights``), and so is its variance.  With
    censoring, the first-order part is the result's own sigma1^2 / n, whose
    influence values include the estimated censoring distribution's, less
    the plug-in bias 2 V_0(shift 0), plus the second-order part V_0, both
    from the IPCW rows (the weighted formulas of :mod:`calibtest.core.weighted`,
    with w = 1 for unweighted rows).  ``weights`` are those of a case-weighted result (``res.kind.weighted``).
    """
    if res.kind.weighted:
        return weighted_variance(res, weights)
    if not res.kind.censored:
        return estimate_variance(res)
    return weighted_variance(res, np.ones(res.n))


#: The table's columns of each measure a kind supplies: (estimate, s.e., lower, upper); the meta-analysis's name.
_KIND_COLUMNS = {"citl": (("citl", "citl_se", "citl_ci_lower", "citl_ci_upper"), "citl"),
                 "slope": (("slope", "slope_se", "slope_ci_lower", "slope_ci_upper"), "slope"),
                 "oe": (("oe", "log_oe_se", "oe_ci_lower", "oe_ci_upper"), "log_oe")}


def kind_measure_columns(measures: dict, alpha: float) -> tuple[dict, dict]:
    """The :data:`MEASURE_COLUMNS` of a kind's O/E, CITL and slope, and why any is missing.

    ``measures`` is :meth:`calibtest.ece.kinds.AnalysisKind.site_recalibration`
    (measure -> :class:`~calibtest.checks.acceptance.RecalibrationMeasure` or
    the reason it does not exist).  Returns (columns, reasons): each measure's
    estimate, standard error (of log(O/E) for O/E) and interval at level
    1 - ``alpha`` (``measure.interval(alpha)``: Wald, on the log scale for
    O/E), and meta-analysis measure name -> reason for those missing.
    """
    columns, reasons = {}, {}
    for measure, ((est, se, lo, hi), meta_name) in _KIND_COLUMNS.items():
        m = measures.get(measure)
        if isinstance(m, str) or m is None:
            reasons[meta_name] = m or f"no {measure}"
            continue
        lower, upper = m.interval(alpha)
        columns.update({est: float(m.estimate), se: float(m.se), lo: float(lower), hi: float(upper)})
    return columns, reasons


def _survival_row(res: CalibrationResult, measures: dict) -> dict:
    """A survival group's row: the ECE columns and the measures its kind supplies (:func:`kind_measure_columns`
    of ``measures``)."""
    ci = res.conf_int(scale="ece")
    p, null = finite_sample_pvalue(res)
    return dict(n_bins=res.n_bins, estimate=res.estimate, ece=res.ece, ci_lower=res.ci_lower, ci_upper=res.ci_upper,
                ece_ci_lower=ci.lower, ece_ci_upper=ci.upper, contains_zero=res.contains_zero, pvalue=p, null=null,
                **kind_measure_columns(measures, res.alpha)[0])


def grouped_survival_calib_ci(rows, *, alpha: float = 0.05,
                              global_method: str = "bonferroni") -> GroupedCalibrationResult:
    """:func:`calibtest.calib_ci` with a survival outcome (``horizon=``) and ``by=``: one survival result per group.

    Each group's result is the survival result of the group's rows
    (``rows.fit_rows``), with the censoring distribution (Kaplan-Meier, or
    the Cox model) estimated **within the group**: censoring may differ
    between groups (sites, periods), and the groups' estimates are then
    independent, as the global and heterogeneity tests need.  A group
    without censoring before the horizon is the binary result of
    1{T <= t} (with its finite-sample conditional p-value).  A group
    without an event by the horizon is listed with the reason.

    The global test combines the groups' p-values as for binary groups; the
    heterogeneity test (Cochran's Q) carries over with the variance of
    :func:`survival_variance`, which includes the influence of each group's
    estimated censoring distribution.  Small groups (fewer than
    :data:`MIN_GROUP_ROWS` rows or :data:`MIN_GROUP_EVENTS` events by t)
    get a note: the Monte Carlo null of binary groups draws Bernoulli
    labels, which rows censored before t do not have.

    Each group's O/E, CITL and slope are read from its kind
    (:meth:`calibtest.ece.kinds.AnalysisKind.site_recalibration`, with the
    pooled result's kind): with censoring before t in the rows together, the
    measures at the horizon of
    :func:`calibtest.checks.survival_calibration.survival_evidence` on the
    group's rows (Kaplan-Meier O/E = (1 - S(t)) / mean risk with
    se(log O/E) = Greenwood se of S(t) / (1 - S(t)); Crowson et al.'s CITL
    log H_0(t) with Breslow's se; the Cox slope on cloglog risk), for every
    group, so that they are one estimand; without, the binary measures of
    1{T <= t}.  They fill :data:`MEASURE_COLUMNS` and ``pooled_measures``,
    and the meta-analysis pools them.  Weighted groups and competing risks
    have none; ``measure_reasons`` and the notes say why.

    Parameters
    ----------
    rows : calibtest.ece.survival.SurvivalInput
        The validated rows and labels (:func:`calibtest.ece.survival.survival_calib_ci` with ``by=``).
    alpha : float
    global_method : {"bonferroni", "fisher", "stouffer"}

    Returns
    -------
    GroupedCalibrationResult
        Its ``groups`` are survival results (``res.survival``), its ``pooled``
        the survival result of all rows.
    """
    global_method = check_choice(global_method, "global_method", GLOBAL_METHODS)
    settings, bookkeeping, call = rows.settings, rows.bookkeeping, rows.call
    rng, weights = settings.rng, rows.weights
    _, seed = resolve_seed(rng)
    grouping = grouping_of(rows.group_names, rows.group_values)
    cause, horizon = settings.cause, settings.horizon
    event = rows.event == (1.0 if cause is None else float(cause))
    target = prepare_target((event & (rows.time <= horizon)).astype(np.float64), rows.risk,
                            y_name=bookkeeping["y_name"], prob_names=list(bookkeeping["prob_names"]))
    group_notes, variances = {}, {}

    def analyse(g, label, idx, sub):
        events = int(np.rint(sub.y[:, 0]).sum())
        sub_w = weights[idx] if rows.design.case_weighted else None
        if sub_w is not None and not (sub_w > 0).any():
            raise ValueError("every weight is zero")
        res = rows.fit_rows(idx, call=call.with_options(group=label_text(grouping.names, label)),
                            bookkeeping={**bookkeeping, "n_dropped": 0}, rng=group_rng(rng, seed, g))
        if sub.n < MIN_GROUP_ROWS or events < MIN_GROUP_EVENTS:
            group_notes[label] = (f"small group ({sub.n} rows, {events} events by the horizon): the asymptotic "
                                  "approximations are unreliable here; read its interval and test with care.")
        variances[label] = survival_variance(res, sub_w)
        return res

    groups, reasons = analyse_groups(grouping, target, analyse)
    pooled = rows.fit_rows(call=call.with_options(by=None), bookkeeping=bookkeeping,
                           rng=group_rng(rng, seed, len(grouping)))
    # every group's O/E, CITL and slope as its kind gives them, one estimand across the groups (pooled.kind)
    measures = {id(res): res.kind.site_recalibration(pooled.kind) for res in groups.values() if res is not None}
    measure_reasons: dict = {}
    for label, res in groups.items():
        for name, why in (kind_measure_columns(measures[id(res)], alpha)[1].items() if res is not None else ()):
            measure_reasons.setdefault(name, {})[label] = why
    table = group_table(grouping, target, groups, reasons,
                        {lb: note for lb, note in group_notes.items() if groups[lb] is not None},
                        lambda res: _survival_row(res, measures[id(res)]), _COLUMNS, events=True)
    pooled_measures = kind_measure_columns(pooled.kind.site_recalibration(pooled.kind), alpha)[0]
    return _grouped_result(grouping, GroupOutcomes(groups, reasons, group_notes, pooled_measures, measure_reasons),
                           variances, pooled, table, global_method=global_method, alpha=alpha, null=settings.null,
                           seed=seed, mode="binary", k=1, n_classes=None, call_record=call, **bookkeeping)


def _clustered_measures(res: CalibrationResult) -> dict:
    """CITL, slope and O/E of a clustered result with its cluster-robust intervals (:data:`MEASURE_COLUMNS`)."""
    m = res.clustering.measures
    if m is None:
        return {}
    (c_lo, c_hi), (s_lo, s_hi), (o_lo, o_hi) = m.citl_ci(), m.slope_ci(), m.oe_ci()
    return dict(citl=m.citl, citl_se=m.citl_se, citl_ci_lower=c_lo, citl_ci_upper=c_hi, slope=m.slope,
                slope_se=m.slope_se, slope_ci_lower=s_lo, slope_ci_upper=s_hi, oe=m.oe, log_oe_se=m.log_oe_se,
                oe_ci_lower=o_lo, oe_ci_upper=o_hi)


def _clustered_row(res: CalibrationResult) -> dict:
    return {**_row(res), **_clustered_measures(res)}


def _grouped_clustered(inputs: Inputs, settings: Settings, global_method: str) -> GroupedCalibrationResult:
    """:func:`grouped_calib_ci` with clusters nested in the groups (see its ``cluster`` parameter)."""
    s, by, cluster, formula = settings, inputs.by, inputs.cluster, inputs.formula
    rng, null, n_bins, alpha, n_null_draws = s.rng, s.null, s.n_bins, s.alpha, s.n_null_draws
    _, seed = resolve_seed(rng)
    options = s.options(by=by if by_names(by) else "<array>", null=null if null != "asymptotic" else None,
                        rng=seed if seed != "Generator" else None,
                        cluster=cluster if isinstance(cluster, str) else "<array>")
    prepared = prepare_input("calib_ci", inputs.replace(weights=None), s, group_labels=group_labels,
                             options=options)
    rows, target, call, clusters = prepared.rows, prepared.target, prepared.call, prepared.clusters
    grouping = grouping_of(prepared.group_names, prepared.group_values)
    clusters.refuse_one_per_group([grouping.rows(g) for g in range(len(grouping))])
    bookkeeping = dict(formula=formula, y_name=rows.y_name, prob_names=tuple(rows.prob_names))
    group_notes, variances = {}, {}

    def analyse(g, label, idx, sub):
        sub_clusters = clusters.of_rows(idx)
        res = estimate_clustered(sub, partition_rows(sub, n_bins), sub_clusters, alpha=alpha, null=null,
                                 rng=group_rng(rng, seed, g), n_null_draws=n_null_draws,
                                 call=call.with_options(group=label_text(grouping.names, label)), **bookkeeping)
        if res.clustering.few:
            group_notes.update(few_clusters_note(label, sub_clusters.n_clusters, "interval and test are"))
        # the cluster-robust variance of T_cl, used whole by the heterogeneity test (no part restricted to H0)
        variances[label] = VarianceParts(second_order=res.se ** 2, first_order=0.0, plugin=0.0, bias=0.0)
        return res

    groups, reasons = analyse_groups(grouping, target, analyse)
    pooled = estimate_clustered(target, partition_rows(target, n_bins), clusters, alpha=alpha, null=null,
                                rng=group_rng(rng, seed, len(grouping)), n_null_draws=n_null_draws,
                                call=call.with_options(by=None), **bookkeeping)
    table = group_table(grouping, target, groups, reasons,
                        {lb: note for lb, note in group_notes.items() if groups[lb] is not None}, _clustered_row,
                        _COLUMNS, events=True)
    return _grouped_result(grouping, GroupOutcomes(groups, reasons, group_notes, _clustered_measures(pooled)),
                           variances, pooled, table, global_method=global_method, alpha=alpha, null=pooled.null,
                           seed=seed, mode=target.mode, k=target.k, n_classes=target.n_classes, formula=formula,
                           y_name=rows.y_name, prob_names=tuple(rows.prob_names), n_dropped=rows.n_dropped,
                           call_record=call)


def _grouped_result(grouping, outcomes: GroupOutcomes, variances: dict, pooled: CalibrationResult,
                    table: pd.DataFrame, *, global_method: str, null: str, **fields) -> GroupedCalibrationResult:
    """The grouped result from the per-group results: the global and heterogeneity tests across them
    (``outcomes.measure_reasons``: as :attr:`GroupedCalibrationResult.measure_reasons`)."""
    groups, reasons = outcomes.groups, outcomes.reasons
    group_notes = {lb: note for lb, note in outcomes.notes.items() if groups[lb] is not None}
    table["n_bins"] = table["n_bins"].astype("Int64")
    table.insert(table.columns.get_loc("estimate") + 1, "estimate_se",
                 [math.sqrt(variances[lb].unrestricted) if groups[lb] is not None and lb in variances else math.nan
                  for lb in grouping.labels])
    analysed = [lb for lb, r in groups.items() if r is not None]
    gstat, gp = global_test([finite_sample_pvalue(groups[lb])[0] for lb in analysed], global_method)
    parts = [variances[lb] for lb in analysed]
    v = np.array([vp.second_order for vp in parts], dtype=float)
    q, df, qp, qpooled = heterogeneity_test([groups[lb].estimate for lb in analysed], v,
                                            [vp.first_order for vp in parts], [vp.plugin for vp in parts])
    het_note = heterogeneity_note(len(analysed), int(np.sum(v > 0)))
    return GroupedCalibrationResult(
        by=grouping.names, groups=groups, reasons=reasons, group_notes=group_notes, pooled=pooled, table=table,
        global_statistic=gstat, global_pvalue=gp, global_method=global_method, heterogeneity_statistic=q,
        heterogeneity_pvalue=qp, heterogeneity_df=None if het_note else df, heterogeneity_pooled=qpooled,
        heterogeneity_note=het_note, null=pooled.null if null == "auto" else null,
        pooled_measures=(outcomes.pooled_measures if outcomes.pooled_measures is not None
                         else calibration_measures(pooled)),
        meta=pool_sites(Sites.of(table, grouping.names, pooled, groups, outcomes.measure_reasons),
                        alpha=fields["alpha"]),
        measure_reasons=dict(outcomes.measure_reasons), **fields)


def variance_from_sums(stats: BinStats, fourth: np.ndarray) -> VarianceParts:
    """:func:`estimate_variance` of an unweighted group from its bin sums (streamed rows).

    The influence values psi_i = 2 mu_b^T U_i - ||mu_b||^2 have
    sum_b c_b ||mu_b||^2 and sum_b (4 mu_b^T M_b mu_b - 3 c_b ||mu_b||^4) as
    their sum and sum of squares, and the distinct pairs of bin b give
    sum_{i != j} (U_i.U_j)^2 = ||M_b||_F^2 - sum_i ||U_i||^4, where
    ``fourth`` holds sum_i ||U_i||^4 per bin: the same variance as from the
    rows, up to the order of floating-point additions.
    """
    c = stats.count
    n = stats.n
    mu = stats.sum_u / c[:, None]
    mu2 = np.einsum("bi,bi->b", mu, mu)
    quad = np.einsum("bi,bij,bj->b", mu, stats.sum_uu, mu)
    mean = np.sum(c * mu2) / n
    first = max(np.sum(4.0 * quad - 3.0 * c * mu2 ** 2) / n - mean ** 2, 0.0) / n
    pairs = np.einsum("bij,bij->b", stats.sum_uu, stats.sum_uu) - fourth

    def second(shift: float) -> float:
        w = np.where(c >= 2, 1.0 / np.where(c >= 2, c - shift, 1.0), 0.0)
        return float(2.0 / n ** 2 * np.sum(pairs * w ** 2))

    return VarianceParts(second_order=second(1.0), first_order=float(first), plugin=float(mean),
                         bias=2.0 * second(0.0))


def grouped_calib_ci_from_sums(sums, *, formula: str, alpha: float = 0.05, null: str = "auto",
                               global_method: str = "bonferroni", call=None) -> GroupedCalibrationResult:
    """:func:`calibtest.calib_ci` with ``by=`` on streamed data: the grouped result from per-group bin sums.

    Parameters
    ----------
    sums : calibtest.streams.grouped.GroupSums
        Every group's bin sums (with those of the conditional moments and of
        ||U||^4), counts and events, and the pooled sums, from one pass over a
        file or a Dask frame.
    formula : str
    alpha : float
    null : {"auto", "asymptotic", "conditional"}
        As for rows in memory, group by group
        (:func:`calibtest.ece.build_result.result_from_stream`).  A group below
        :data:`MIN_GROUP_ROWS` rows or :data:`MIN_GROUP_EVENTS` events or
        non-events, which rows in memory analyse with the Monte Carlo null,
        uses the asymptotic null with a note (its p-value, the one the
        global test and Holm use, is the asymptotic one: the label draws
        need the rows); with ``null="conditional"`` such a group is not
        analysed and the reason says why.
    global_method : {"bonferroni", "fisher", "stouffer"}
    call : Call, optional
        The call, recorded on the result (each group's with ``group=``).

    Returns
    -------
    GroupedCalibrationResult
        The in-memory grouped result up to the order of floating-point
        additions, with ``data=None`` in every group and ``source`` set.
    """
    global_method = check_choice(global_method, "global_method", GLOBAL_METHODS)
    mode, k, n_classes, y_name, prob_names = sums.target
    grouping = grouping_from_counts(sums.names, sums.level_lists, sums.counts)
    events = [int(sums.events.get(lb, 0)) for lb in grouping.labels]
    binary = Target(mode).one_dimensional or sums.pooled.dim == 1
    bookkeeping = dict(formula=formula, y_name=y_name, prob_names=tuple(prob_names))
    group_notes, variances = {}, {}

    def analyse(g, label):
        stats, (n_bins, rule) = sums.stats[label], sums.n_bins[label]
        n, ev = int(grouping.counts[g]), events[g]
        group_null = null
        if n < MIN_GROUP_ROWS or min(ev, n - ev) < MIN_GROUP_EVENTS:
            if null == "conditional":
                raise ValueError(f"small group ({n} rows, {ev} events): rows in memory decide its test with the "
                                 "Monte Carlo null, whose label draws need the rows, which a stream does not "
                                 "keep, and null='conditional' was asked for; load its rows into memory (a "
                                 "DataFrame) for the exact test, or pass null='auto' (the asymptotic null)")
            group_null = "asymptotic"
            stats = dataclasses.replace(stats, null_sums=None)  # its finite-sample p-value is not the conditional
            group_notes[label] = (f"small group ({n} rows, {ev} events): rows in memory would decide its test "
                                  "with the Monte Carlo null, whose label draws need the rows, which a stream does "
                                  "not keep; its test and the p-value it gives the global test use the paper's "
                                  "asymptotic null (conservative there) and its interval is approximate.")
        res = result_from_stream(stats, CalibrationTarget(mode, k, n_classes), BinChoice(n_bins, rule),
                                 alpha=alpha, null=group_null,
                                 call=None if call is None else call.with_options(
                                     group=label_text(grouping.names, label)), **bookkeeping)
        variances[label] = variance_from_sums(sums.stats[label], sums.fourth[label])
        return res

    groups, reasons = analyse_counted_groups(grouping, events if binary else [None] * len(events), mode, analyse)
    pooled = result_from_stream(sums.pooled, CalibrationTarget(mode, k, n_classes), BinChoice(*sums.pooled_bins),
                                alpha=alpha, null=null,
                                call=None if call is None else call.with_options(by=None), source=sums.source,
                                **bookkeeping)
    table = group_table(grouping, None, groups, reasons,
                        {lb: note for lb, note in group_notes.items() if groups[lb] is not None}, _row, _COLUMNS,
                        events=events if binary else [None] * len(events))
    pooled_measures = {}
    if sums.pooled.dim == 1:  # O/E from the sums of y and p; CITL and slope need the rows
        for g, label in enumerate(grouping.labels):
            if groups[label] is not None:
                for col, value in _oe_of_sums(sums.stats[label], alpha).items():
                    table.loc[label, col] = value
        pooled_measures = _oe_of_sums(sums.pooled, alpha)
    return _grouped_result(grouping, GroupOutcomes(groups, reasons, group_notes, pooled_measures), variances,
                           pooled, table, global_method=global_method, alpha=alpha, null=null, seed=None, mode=mode,
                           k=k, n_classes=n_classes, n_dropped=sums.n_dropped, call_record=call,
                           source=sums.source, **bookkeeping)


def _oe_of_sums(stats: BinStats, alpha: float) -> dict:
    """:func:`calibtest.core.recalibration.oe_measures` of a group's bin sums (y = U + p, so O = sum U + sum p)."""
    expected = float(stats.sum_z.sum())
    return oe_measures(float(stats.sum_u.sum()) + expected, expected, int(stats.count.sum()), alpha)


def _final_weights(sub: PreparedData, sub_w, prevalence, pi_hat) -> np.ndarray:
    """The weights the weighted estimate of a group re-weighted to a prevalence used (case weights times
    prevalence factors)."""
    events = np.rint(sub.y[:, 0]) == 1
    return prevalence_weights(events, prevalence, sub_w, pi_hat)[0]
