r"""Calibration within subgroups: ``calib_ci(..., by=...)``, the global and the heterogeneity tests.

Each group (a level of ``by``, or a combination of levels for several
columns, crossed) gets its own :class:`~calibtest.results.CalibrationResult`
with its own automatic B.  Two tests look across the groups.

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
exact for independent uniform p-values) are available in :func:`calibtest.grouping.global_test` and as
``grouped_calib_ci(global_method=)``;
``vignettes/populations.md`` measures the size and power of the three.

**Heterogeneity test** (H0: the same ECE^2 in every group).  The estimates
T_g of disjoint groups are independent, with variance (the unpaired part of
``calibtest.core.difference_variance``, ``docs/compare.md``)

    v_g = max(sigma1_g^2 / n_g - 2 V2_g^(c), 0) + V2_g,

the first-order (influence) variance corrected for the noise of the bin means
plus the second-order (degenerate U-statistic) variance V2_g, which is the
whole variance when the groups are calibrated, where the first-order part
vanishes.  The Wald statistic of equal means,

    Q = sum_g (T_g - T_bar)^2 / v_g,   T_bar = sum_g (T_g / v_g) / sum_g (1 / v_g),

is referred to chi2(G - 1) (Cochran's Q).  Weighted groups use T_w with
sigma_{1,w}^2 and V_0 of :mod:`calibtest.core.weighted` in the same places.
Each T_g estimates the binned ECE^2 at its own B_g: for miscalibrated groups
of very different sizes the binning bias differs, and a fixed ``n_bins``
makes the groups comparable.

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

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as _sps

from calibtest._format import Call, fmt, json_safe, mode_text, record_call
from calibtest._validation import DEFAULT_DRAWS, check_choice, resolve_seed
from calibtest.core.difference_variance import first_order_var_single, second_order_var_single
from calibtest.core.partition import partition_rows
from calibtest.core.targets import PreparedData, prepare_target
from calibtest.core.weighted import prevalence_weights, weighted_null_variance
from calibtest.estimation import check_weighted_options, estimate_rows, estimate_weighted
from calibtest.grouping import GLOBAL_METHODS, by_names, global_test, group_labels, holm, levels
from calibtest.inputs import read_rows, resolve_weights
from calibtest.results import CalibrationResult
from calibtest.summary import CalibSummary, ResultDisplay, model_text, short_name

__all__ = ["GroupedCalibrationResult", "grouped_calib_ci", "global_test", "heterogeneity_test",
           "finite_sample_pvalue", "GLOBAL_METHODS", "MIN_GROUP_ROWS", "MIN_GROUP_EVENTS"]

#: Below this many rows a group is analysed with the Monte Carlo null and a note.
MIN_GROUP_ROWS = 50
#: ... or with fewer events (or non-events) than this.
MIN_GROUP_EVENTS = 5


# --------------------------------------------------------------------------- the tests across groups
def heterogeneity_test(estimates, variances) -> tuple[float, int, float, float]:
    """Cochran's Q of equal means of independent estimates with known variances.

    Returns
    -------
    statistic, df, pvalue, pooled : float, int, float, float
        Q = sum (T_g - T_bar)^2 / v_g with the inverse-variance mean T_bar, its
        degrees of freedom G - 1 and the chi2(G - 1) p-value (NaN with fewer
        than two groups of positive variance).
    """
    t = np.asarray(estimates, dtype=float)
    v = np.asarray(variances, dtype=float)
    keep = v > 0
    t, v = t[keep], v[keep]
    if t.size < 2:
        return math.nan, 0, math.nan, math.nan
    w = 1.0 / v
    pooled = float(np.sum(w * t) / np.sum(w))
    q = float(np.sum(w * (t - pooled) ** 2))
    return q, int(t.size - 1), float(_sps.chi2.sf(q, t.size - 1)), pooled


def estimate_variance(res: CalibrationResult, weights: np.ndarray | None = None) -> float:
    """Variance of one group's estimate: corrected first-order part plus second-order part (module docstring).

    ``weights`` are the row weights a weighted result used (case weights times
    the prevalence factors).
    """
    inv, u, m = res.partition.inverse, res.data.u, res.partition.m
    if weights is not None:
        v2 = weighted_null_variance(inv, u, weights, m)
        bias = 2.0 * weighted_null_variance(inv, u, weights, m, shift=0.0)
        return max(res.sigma1_sq / res.n - bias, 0.0) + v2
    v2 = second_order_var_single(inv, u)
    bias = 2.0 * second_order_var_single(inv, u, shift=0.0)
    return max(first_order_var_single(inv, u) - bias, 0.0) + v2


# --------------------------------------------------------------------------- the result
@dataclass(frozen=True, eq=False, repr=False)
class GroupedCalibrationResult(ResultDisplay):
    """Calibration within subgroups: one result per group, the pooled result, tests across groups.

    Attributes
    ----------
    by : tuple of str
        The grouping variables (several: crossed).
    groups : dict
        Group label (a level, or a tuple of levels) -> :class:`CalibrationResult`,
        or None for a group that could not be analysed (see ``reasons``).
    reasons : dict
        Group label -> why it has no result (no rows, one row, a single outcome class).
    group_notes : dict
        Group label -> note (e.g. the Monte Carlo null used for a small group).
    pooled : CalibrationResult
        All rows together.
    table : pandas.DataFrame
        One row per group (see :meth:`to_frame`).
    global_statistic, global_pvalue : float
        Test of H0: calibrated in every analysed group (``global_method``).
    global_method : {"bonferroni", "fisher", "stouffer"}
    heterogeneity_statistic, heterogeneity_pvalue : float
        Cochran's Q of H0: equal ECE^2 in every analysed group, and its chi2 p-value.
    heterogeneity_df : int
        G - 1.
    heterogeneity_pooled : float
        The inverse-variance weighted mean of the T_g.
    alpha : float
    null : str
        The null asked for (small groups use the Monte Carlo null).
    mode, k, n_classes : str, int, int or None
    formula, y_name, prob_names, call_record
        Bookkeeping.
    """

    by: tuple
    groups: dict
    reasons: dict
    group_notes: dict
    pooled: CalibrationResult
    table: pd.DataFrame = field(repr=False)
    global_statistic: float
    global_pvalue: float
    global_method: str
    heterogeneity_statistic: float
    heterogeneity_pvalue: float
    heterogeneity_df: int
    heterogeneity_pooled: float
    alpha: float
    null: str
    mode: str
    k: int
    n_classes: int | None
    formula: str | None = None
    y_name: str = "y"
    prob_names: tuple = ()
    call_record: Call | None = field(default=None, repr=False)

    def __post_init__(self):
        self.table.flags.allows_duplicate_labels = False

    @property
    def n_groups(self) -> int:
        """Groups listed (analysed or not)."""
        return len(self.groups)

    def to_frame(self) -> pd.DataFrame:
        """One row per group (a copy).

        Columns: ``n``, ``events``, ``n_bins``, ``estimate`` (T, or T_w),
        ``ece`` (sqrt T+), ``ci_lower``/``ci_upper`` (ECE^2) and
        ``ece_ci_lower``/``ece_ci_upper`` (ECE) at level 1 - alpha, ``contains_zero``
        (decided by the group's null), ``pvalue`` (test of ECE = 0 in the group,
        finite-sample where available: :func:`finite_sample_pvalue`), ``pvalue_holm``
        (Holm-adjusted over the analysed groups), ``null`` (which null gave
        ``pvalue``) and ``note`` (why a group has no result, or which null a
        small group used).
        """
        return self.table.copy()

    def notes(self) -> list[str]:
        """Notes of the summary footer."""
        g = int(self.table["estimate"].notna().sum())
        how = {"bonferroni": f"Bonferroni min-p, min(1, {g} x min p)",
               "fisher": f"Fisher's -2 sum log p ~ chi2({2 * g})",
               "stouffer": "Stouffer's sum Phi^-1(1 - p) / sqrt(G) ~ N(0, 1)"}[self.global_method]
        notes = [f"Global test of calibration in every group: {how} over the {g} analysed groups' p-values, "
                 f"p = {fmt(self.global_pvalue, 4)}. Per-group p-values are also shown Holm-adjusted "
                 "(family-wise error over the groups).",
                 f"Heterogeneity (equal ECE^2 in every group): Cochran's Q = {fmt(self.heterogeneity_statistic, 4)} "
                 f"on {self.heterogeneity_df} df, p = {fmt(self.heterogeneity_pvalue, 4)} (variances: first-order "
                 "plus second-order, valid also when every group is calibrated)."]
        used = set(self.table["null"].dropna())
        if used - {"asymptotic"}:
            notes.append("Per-group p-values come from the conditional null given the predictions where available "
                         "(exact moments with a shifted-gamma p-value, or the Monte Carlo test), which holds its "
                         "size in finite samples" + ("; groups marked 'asymptotic' use the paper's normal null."
                                                     if "asymptotic" in used else "."))
        for label, reason in self.reasons.items():
            notes.append(f"Group {_label_text(self.by, label)}: not analysed ({reason}).")
        for label, note in self.group_notes.items():
            notes.append(f"Group {_label_text(self.by, label)}: {note}")
        notes.append("Each group has its own bins (B in the table); the pooled row is all rows together.")
        return notes

    def _summary(self, alpha: float | None) -> CalibSummary:
        smry = CalibSummary()
        smry.add_title("Calibration within subgroups: debiased l2-ECE per group")
        smry.add_settings({
            "Model:": model_text(self.formula, self.y_name, self.prob_names),
            "Mode:": mode_text(self.mode, self.k), "Groups by:": " x ".join(self.by),
            "Groups:": f"{int(self.table['estimate'].notna().sum())} analysed of {self.n_groups}",
            "Alpha:": fmt(self.alpha), "Null:": self.null,
        })
        cols = ["n", "events", "n_bins", "ece", "ece_ci_lower", "ece_ci_upper", "pvalue", "pvalue_holm"]
        tab = self.table[cols].copy()
        tab.index = [", ".join(map(str, i)) if isinstance(i, tuple) else str(i) for i in tab.index]
        pooled = self.pooled
        ci = pooled.conf_int(scale="ece")
        tab.loc["(pooled)"] = [pooled.n, _events(pooled), pooled.n_bins, pooled.ece, ci.lower, ci.upper,
                               pooled.null_pvalue, None]
        tab.index = [short_name(i, 16) for i in tab.index]
        tab = tab.astype(object).where(tab.notna(), None)
        smry.add_table(tab.rename(columns={"ece_ci_lower": "lower", "ece_ci_upper": "upper",
                                           "pvalue_holm": "p (Holm)", "pvalue": "p"}),
                       {"n": 8, "events": 8, "n_bins": 4, "ece": 4, "lower": 4, "upper": 4, "p": 3,
                        "p (Holm)": 3})
        tests = pd.DataFrame({"statistic": [self.global_statistic, self.heterogeneity_statistic],
                              "df": [None, self.heterogeneity_df],
                              "p-value": [self.global_pvalue, self.heterogeneity_pvalue]},
                             index=[f"global ({self.global_method})", "heterogeneity (Q)"], dtype=object)
        smry.add_table(tests, {"statistic": 4, "df": 3, "p-value": 4})
        level = f"{100 * (1 - self.alpha):g}%"
        smry.add_notes([f"ECE with its adjusted {level} interval (Algorithm 1) in each group; p tests ECE = 0."]
                       + self.notes())
        return smry

    def _dict(self) -> dict:
        rows = self.table.reset_index().astype(object).where(self.table.reset_index().notna(), None)
        rows["group"] = [_label_text(self.by, lb) for lb in self.table.index]
        return {"by": list(self.by), "n_groups": self.n_groups, "alpha": self.alpha, "null": self.null,
                "global_method": self.global_method, "global_statistic": self.global_statistic,
                "global_pvalue": self.global_pvalue, "heterogeneity_statistic": self.heterogeneity_statistic,
                "heterogeneity_df": self.heterogeneity_df, "heterogeneity_pvalue": self.heterogeneity_pvalue,
                "heterogeneity_pooled": self.heterogeneity_pooled,
                "groups": json_safe(rows.drop(columns=[c for c in self.by if c in rows.columns]
                                              ).to_dict(orient="records")),
                "pooled": self.pooled.to_dict(), "notes": self.notes()}

    def _repr_parts(self) -> list[str]:
        return [f"by={'*'.join(self.by)} groups={self.n_groups}", f"global p={self.global_pvalue:.4g}",
                f"heterogeneity p={self.heterogeneity_pvalue:.4g}"]

    def plot_forest(self, ax=None, **kwargs):
        """Forest plot of the per-group intervals with the pooled one (:func:`calibtest.reporting.forest.plot_forest`)."""
        from calibtest.reporting.forest import plot_forest
        return plot_forest(self, ax=ax, **kwargs)


def _label_text(by, label) -> str:
    if len(by) == 1:
        return f"{by[0]}={label}"
    return ", ".join(f"{b}={v}" for b, v in zip(by, label))


def _events(res: CalibrationResult) -> int:
    """Rows whose (first) outcome indicator is 1."""
    return int(np.rint(res.data.y[:, 0]).sum()) if res.data is not None else -1


# --------------------------------------------------------------------------- the analysis
def _subset(target: PreparedData, idx: np.ndarray) -> PreparedData:
    return PreparedData(target.z[idx], target.u[idx], target.mode, target.k, target.n_classes)


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


def _skip_reason(sub: PreparedData) -> str | None:
    if sub.n == 0:
        return "no rows"
    if sub.n == 1:
        return "a single row"
    if sub.z.shape[1] == 1 or sub.mode in ("binary", "top1"):
        events = int(np.rint(sub.y[:, 0]).sum())
        if events in (0, sub.n):
            outcome = "1" if events else "0"
            what = "correct" if sub.mode == "top1" else "outcome"
            return (f"a single outcome class: every {what} is {outcome} in {sub.n} rows, so the group's "
                    "calibration cannot be separated from its predictions' level")
    return None


def grouped_calib_ci(formula, data, y, probs, *, by, env, n_classes=None, k=None, n_bins="auto",
                     alpha: float = 0.05, missing: str = "raise", null: str | None = None, rng=None,
                     n_null_draws: int = DEFAULT_DRAWS, method: str = "adjusted", n_resamples=None, progress=None,
                     weights=None, prevalence=None, global_method: str = "bonferroni",
                     call_options: dict | None = None) -> GroupedCalibrationResult:
    """:func:`calibtest.calib_ci` with ``by=``: one result per group (see the module docstring).

    Parameters
    ----------
    by : str, list of str, array_like or list of arrays
        Grouping column(s) of ``data`` (several: crossed, every combination of
        the levels listed, empty ones with the reason) or arrays of labels.
    null : {"asymptotic", "conditional", "monte-carlo"} or None
        Null of every group's interval and test, as in :func:`calibtest.calib_ci`;
        None is ``"conditional"`` (``"asymptotic"`` for weighted rows).  Groups
        with fewer than :data:`MIN_GROUP_ROWS` rows or :data:`MIN_GROUP_EVENTS`
        events or non-events use ``"monte-carlo"`` (unweighted rows) and get a
        note.  The global test and the Holm-adjusted p-values use each
        group's finite-sample p-value (:func:`finite_sample_pvalue`) whatever
        the null.
    global_method : {"bonferroni", "fisher", "stouffer"}
        Combination of the per-group p-values (module docstring).
    Other parameters as in :func:`calibtest.calib_ci` (already validated).

    Returns
    -------
    GroupedCalibrationResult
    """
    global_method = check_choice(global_method, "global_method", GLOBAL_METHODS)
    weighted = weights is not None or prevalence is not None
    if null is None:
        null = "asymptotic" if weighted else "conditional"
    if weighted:
        check_weighted_options(null, method)
    rows = read_rows(formula, data, y, probs, env, missing)
    n_input = rows.y.shape[0] + rows.n_dropped
    names, values = group_labels(by, data, n_input)
    if rows.kept is not None:
        values = [v[rows.kept] for v in values]
    target = prepare_target(rows.y, rows.probs, n_classes=n_classes, k=k, class_names=rows.class_names,
                            y_name=rows.y_name, prob_names=rows.prob_names)
    w_all, w_name = resolve_weights(weights, data, rows)
    pi_hat = None
    if prevalence is not None:  # the design's sampling fractions: the whole sample's prevalence
        if target.mode not in ("binary", "top1"):
            raise ValueError(f"prevalence= applies to the binary and top-1 modes, not to mode {target.mode!r}")
        pi_hat = prevalence_weights(np.rint(target.y[:, 0]) == 1, prevalence, w_all)[1]
    coded = [levels(v) for v in values]
    shape = tuple(max(len(levels), 1) for _, levels in coded)
    flat = np.ravel_multi_index(tuple(c for c, _ in coded), shape) if coded[0][0].size else np.zeros(0, int)
    order = np.argsort(flat, kind="stable")
    starts = np.searchsorted(flat[order], np.arange(int(np.prod(shape)) + 1))
    _, seed = resolve_seed(rng)
    options = dict(call_options or {})
    options.update({"by": by if by_names(by) else "<array>", "null": null if null != "asymptotic" else None,
                    "rng": seed if seed != "Generator" else None})  # the seed of any Monte Carlo null used
    call = record_call("calib_ci", formula, data, rows.y, rows.probs, options)
    bookkeeping = dict(formula=formula, y_name=rows.y_name, prob_names=tuple(rows.prob_names))

    def one(sub, part, sub_w, group_null, gen, sub_call):
        if weighted:
            return estimate_weighted(sub, part, sub_w, alpha=alpha, prevalence=prevalence, weights_name=w_name,
                                     sample_prevalence=pi_hat, null=group_null, rng=gen,
                                     n_null_draws=n_null_draws, call=sub_call, **bookkeeping)
        return estimate_rows(sub, part, alpha=alpha, null=group_null, rng=gen, n_null_draws=n_null_draws,
                             method=method, n_resamples=n_resamples, progress=progress, call=sub_call,
                             **bookkeeping)

    groups, reasons, group_notes, variances = {}, {}, {}, {}
    label_list = list(itertools.product(*[levels for _, levels in coded]))
    for g, combo in enumerate(label_list):  # a loop over the few groups, not rows
        label = combo[0] if len(combo) == 1 else tuple(combo)
        idx = order[starts[g]:starts[g + 1]]
        sub = _subset(target, idx)
        reason = _skip_reason(sub)
        if reason is not None:
            groups[label], reasons[label] = None, reason
            continue
        group_null = null
        events = int(np.rint(sub.y[:, 0]).sum())
        small = sub.n < MIN_GROUP_ROWS or min(events, sub.n - events) < MIN_GROUP_EVENTS
        if small and (not weighted or sub.z.shape[1] == 1):
            group_null = "monte-carlo"
            group_notes[label] = (f"small group ({sub.n} rows, {events} events): the asymptotic approximations "
                                  "are unreliable, so the Monte Carlo null given the predictions decides its "
                                  f"test ({n_null_draws} label draws); its interval is approximate.")
        elif small:
            group_notes[label] = (f"small group ({sub.n} rows, {events} events): the weighted asymptotic "
                                  "approximations are unreliable here; read its interval and test with care.")
        sub_w = None if w_all is None else w_all[idx]
        if sub_w is not None and not (sub_w > 0).any():
            groups[label], reasons[label] = None, "every weight is zero"
            continue
        gen = np.random.default_rng([seed, g]) if seed is not None and seed != "Generator" else rng
        res = one(sub, partition_rows(sub, n_bins), sub_w, group_null, gen,
                  call.with_options(group=_label_text(names, label)))
        groups[label] = res
        variances[label] = estimate_variance(res, _final_weights(sub, sub_w, prevalence, pi_hat)
                                             if weighted else None)
    pooled = one(target, partition_rows(target, n_bins), w_all, null,
                 np.random.default_rng([seed, len(label_list)]) if seed is not None and seed != "Generator"
                 else rng, call.with_options(by=None))
    table = _group_table(names, label_list, groups, reasons, group_notes, alpha)
    analysed = [lb for lb, r in groups.items() if r is not None]
    gstat, gp = global_test([finite_sample_pvalue(groups[lb])[0] for lb in analysed], global_method)
    q, df, qp, qpooled = heterogeneity_test([groups[lb].estimate for lb in analysed],
                                            [variances[lb] for lb in analysed])
    return GroupedCalibrationResult(
        by=tuple(names), groups=groups, reasons=reasons, group_notes=group_notes, pooled=pooled, table=table,
        global_statistic=gstat, global_pvalue=gp, global_method=global_method, heterogeneity_statistic=q,
        heterogeneity_pvalue=qp, heterogeneity_df=df, heterogeneity_pooled=qpooled, alpha=alpha, null=null,
        mode=target.mode, k=target.k, n_classes=target.n_classes, formula=formula, y_name=rows.y_name,
        prob_names=tuple(rows.prob_names), call_record=call)


def _final_weights(sub: PreparedData, sub_w, prevalence, pi_hat) -> np.ndarray:
    """The weights the weighted estimate of a group used (case weights times prevalence factors)."""
    if prevalence is None:
        return sub_w
    events = np.rint(sub.y[:, 0]) == 1
    return prevalence_weights(events, prevalence, sub_w, pi_hat)[0]


def _group_table(names, label_list, groups, reasons, group_notes, alpha) -> pd.DataFrame:
    records = []
    for combo in label_list:
        label = combo[0] if len(combo) == 1 else tuple(combo)
        res = groups[label]
        rec = dict(zip(names, combo))
        if res is None:
            rec.update(n=np.nan, events=np.nan, n_bins=np.nan, estimate=np.nan, ece=np.nan, ci_lower=np.nan,
                       ci_upper=np.nan, ece_ci_lower=np.nan, ece_ci_upper=np.nan, contains_zero=None,
                       pvalue=np.nan, null=None, note=reasons[label])
        else:
            ci = res.conf_int(scale="ece")
            rec.update(n=res.n, events=_events(res), n_bins=res.n_bins, estimate=res.estimate, ece=res.ece,
                       ci_lower=res.ci_lower, ci_upper=res.ci_upper, ece_ci_lower=ci.lower, ece_ci_upper=ci.upper,
                       contains_zero=res.contains_zero, pvalue=finite_sample_pvalue(res)[0],
                       null=finite_sample_pvalue(res)[1],
                       note=group_notes.get(label, ""))
        records.append(rec)
    table = pd.DataFrame(records)
    table.insert(table.columns.get_loc("pvalue") + 1, "pvalue_holm", holm(table["pvalue"].to_numpy(float)))
    for col in ("n", "events", "n_bins"):
        table[col] = table[col].astype("Int64")
    table = table.set_index(names if len(names) > 1 else names[0])
    return table
