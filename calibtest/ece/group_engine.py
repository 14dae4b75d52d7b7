r"""The grouping engine and the grouped-result protocol shared by every analysis with ``by=``.

:func:`calibtest.calib_ci`, :func:`calibtest.calib_test`,
:func:`calibtest.tcal_test` and :func:`calibtest.evidence` with ``by=`` all
group the rows here, once, and return a :class:`GroupedResult` (``calib_ci``
its subclass :class:`calibtest.ece.grouped_interval.GroupedCalibrationResult`, which adds
the pooled result and the heterogeneity of ECE^2).  The engine owns what is
the same whatever the statistic:

* the group labels (:func:`make_grouping`): one grouping column, several
  (crossed: every combination of their levels), or arrays of labels; every
  level of a categorical column (unused categories too); a column listed
  twice is refused by name; labels are read after ``missing="drop"``, so the
  counts are of the rows analysed;
* the labels live in the index of :meth:`GroupedResult.to_frame` (a named
  ``Index``, or a ``MultiIndex`` for crossed groups), apart from the
  statistics' columns, so no column name can collide with a grouping name;
* the groups that cannot be analysed and why (:func:`skip_reason`: no rows,
  one row, a single outcome class where the statistic needs both);
* the seed rule: with ``rng=s`` (an int, or None, which is s = 0, recorded)
  group number g (its position in the index, empty groups counted) draws
  from ``numpy.random.default_rng([s, g])``, so group g is the single-group
  function on the group's rows with that Generator; a Generator is shared by
  the groups in index order;
* Holm-adjusted per-group p-values (:func:`holm`) and the global test of
  calibration in every group (:func:`global_test`).

The statistic-specific part is one function applied to each group's rows
(:func:`analyse_groups`) and one function turning its result into a table
row.  ``calibtest.ece.grouped_interval`` holds the ``calib_ci`` kind (intervals of ECE^2,
pooled result, heterogeneity); this module the generic protocol.

References
----------
.. [1] Holm, "A simple sequentially rejective multiple test procedure",
       Scandinavian Journal of Statistics 6 (1979) 65-70.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd
from scipy import stats as _sps
from statsmodels.stats.multitest import multipletests

from calibtest.display.format import Call, fmt, json_safe, p_equals
from calibtest.inputs.validation import OptionError, row_values
from calibtest.core.clustered import MIN_CLUSTERS
from calibtest.core.targets import PreparedData, Target
from calibtest.display.summary import CalibSummary, ResultDisplay, model_text, short_name

__all__ = ["GLOBAL_METHODS", "Grouping", "GroupedResult", "make_grouping", "grouping_of", "group_labels", "levels",
           "by_names", "skip_reason", "skip_reason_counts", "subset_rows", "analyse_groups",
           "analyse_counted_groups", "check_group_labels", "grouping_index", "grouping_from_counts", "group_table",
           "grouped_result", "GroupOutcomes", "GroupAnalysis", "group_rng",
           "label_text", "global_test", "global_text", "holm"]

#: How the per-group p-values are combined into the global test.
GLOBAL_METHODS = ("bonferroni", "fisher", "stouffer")


# --------------------------------------------------------------------------- group labels
def by_names(by) -> list:
    """The column names of ``by`` when it names columns (a str or a list of str), else []."""
    if isinstance(by, str):
        return [by]
    if isinstance(by, (list, tuple)) and by and all(isinstance(b, str) for b in by):
        return list(by)
    return []


def _categories(spec, data):
    """The categories of a categorical grouping variable (a column of ``data`` or a Series), else None."""
    values = spec
    if isinstance(spec, str):
        try:
            values = data[spec]
        except (KeyError, IndexError, TypeError):
            return None
    dtype = getattr(values, "dtype", None)
    if isinstance(dtype, pd.CategoricalDtype):
        return list(dtype.categories)
    return None


def group_labels(by, data, n_input: int) -> tuple[list[str], list]:
    """Names and values of the grouping variables (one array of ``n_input`` labels per variable).

    ``by`` is a column name, a list of column names (crossed), an array
    (``y=``/``probs=`` input; name ``"group"``) or a list of arrays.  The
    values of a categorical variable are a ``pandas.Categorical`` (so its
    unused categories are kept), the others a numpy array.

    Raises
    ------
    ValueError
        Unknown column, a column listed twice (an ``OptionError``), wrong
        length, an empty list.
    """
    names = by_names(by)
    if names:
        specs = names
    elif isinstance(by, (list, tuple)) and by and not np.isscalar(by[0]) and np.ndim(by[0]) == 1:
        specs = list(by)
        names = [getattr(b, "name", None) or f"group{i + 1}" for i, b in enumerate(by)]
    elif isinstance(by, (list, tuple)) and not by:
        raise OptionError("by must name at least one column")
    else:
        specs = [by]
        names = [getattr(by, "name", None) or "group"]
    names = [str(nm) for nm in names]
    twice = [nm for nm, count in Counter(names).items() if count > 1]
    if twice:
        raise OptionError(f"by lists the grouping column {twice[0]!r} more than once; give each grouping "
                          "column once")
    values = []
    for spec in specs:
        v = row_values(spec, data, n_input, "by")
        cats = _categories(spec, data)
        values.append(v if cats is None else pd.Categorical(v, categories=cats))
    return names, values


def levels(values) -> tuple[np.ndarray, list]:
    """Integer codes and levels of one grouping variable (categorical: all its categories, in order)."""
    series = pd.Series(values)
    if isinstance(series.dtype, pd.CategoricalDtype):
        return series.cat.codes.to_numpy(np.int64), list(series.cat.categories)
    codes, uniques = pd.factorize(series, sort=True)
    return codes.astype(np.int64), list(uniques)


@dataclass(frozen=True, eq=False)
class Grouping:
    """The groups of the analysed rows: every label, in order, and the rows of each.

    Attributes
    ----------
    names : tuple of str
        The grouping variables.
    index : pandas.Index
        Every group label (empty groups too), named by ``names``: an ``Index``
        for one variable, the ``MultiIndex`` of every combination for several.
    labels : tuple
        The entries of ``index`` (a level, or a tuple of levels).
    order, starts : ndarray
        Group g's rows (positions among the analysed rows) are
        ``order[starts[g]:starts[g + 1]]``, in their original order.
    """

    names: tuple
    index: pd.Index
    labels: tuple
    order: np.ndarray
    starts: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    def rows(self, g: int) -> np.ndarray:
        """Positions of group ``g``'s rows among the analysed rows."""
        return self.order[self.starts[g]:self.starts[g + 1]]

    @property
    def counts(self) -> np.ndarray:
        """Rows of each group."""
        return np.diff(self.starts)


def make_grouping(by, data, n_input: int, kept=None) -> Grouping:
    """The groups of the rows from ``by=`` (see the module docstring).

    Parameters
    ----------
    by : str, list of str, array_like or list of arrays
    data : DataFrame, dict or None
    n_input : int
        Rows of the input before missing rows were dropped.
    kept : ndarray of bool, optional
        The rows kept by ``missing="drop"`` (None: every row).

    Raises
    ------
    ValueError
        As :func:`group_labels`, and a missing group label on an analysed row.
    """
    names, values = group_labels(by, data, n_input)
    if kept is not None:
        values = [v[kept] for v in values]
    return grouping_of(names, values)


def grouping_of(names, values) -> Grouping:
    """The groups of the analysed rows from the labels of :func:`group_labels` aligned with those rows.

    Raises
    ------
    ValueError
        A missing group label.
    """
    check_group_labels(names, values)
    coded = [levels(v) for v in values]
    shape = tuple(max(len(lv), 1) for _, lv in coded)
    flat = np.ravel_multi_index(tuple(c for c, _ in coded), shape) if coded[0][0].size else np.zeros(0, int)
    order = np.argsort(flat, kind="stable")
    starts = np.searchsorted(flat[order], np.arange(int(np.prod(shape)) + 1))
    index = grouping_index(names, [lv for _, lv in coded])
    return Grouping(names=tuple(names), index=index, labels=tuple(index), order=order, starts=starts)


def check_group_labels(names, values) -> None:
    """Raise a ValueError naming the first grouping variable with a missing label."""
    for nm, v in zip(names, values):
        if np.asarray(pd.isna(v if isinstance(v, pd.Categorical) else np.asarray(v))).any():
            raise ValueError(f"by column {nm!r} has missing values; give them a level of their own "
                             "(e.g. 'unknown') or drop those rows")


def grouping_index(names, level_lists) -> pd.Index:
    """The index of every group label: the levels of one variable, or every combination of several."""
    if len(names) == 1:
        return pd.Index(level_lists[0], name=names[0], tupleize_cols=False)
    return pd.MultiIndex.from_product(list(level_lists), names=list(names))


def grouping_from_counts(names, level_lists, counts: dict) -> Grouping:
    """The groups of rows that were counted, not kept (a file or a Dask frame streamed by group).

    ``level_lists`` are the levels of each variable (as :func:`levels` orders
    them) and ``counts`` maps a group label to its rows (absent: none).  The
    result has the index, labels and counts of :func:`grouping_of` on the same
    rows, but no row positions (``order`` is empty): the rows were not kept.
    """
    index = grouping_index(names, level_lists)
    labels = tuple(index)
    sizes = np.array([int(counts.get(lb, 0)) for lb in labels], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(sizes)))
    return Grouping(names=tuple(names), index=index, labels=labels, order=np.zeros(0, np.int64), starts=starts)


def label_text(by, label) -> str:
    """A group label as ``name=level`` text (crossed groups: comma-separated)."""
    if len(by) == 1:
        return f"{by[0]}={label}"
    return ", ".join(f"{b}={v}" for b, v in zip(by, label))


def _short_label(label) -> str:
    return ", ".join(map(str, label)) if isinstance(label, tuple) else str(label)


# --------------------------------------------------------------------------- the groups' rows
def subset_rows(target: PreparedData, idx: np.ndarray) -> PreparedData:
    """The prepared rows ``idx`` of ``target``."""
    return PreparedData(target.z[idx], target.u[idx], target.mode, target.k, target.n_classes)


def _events(sub: PreparedData) -> int | None:
    """Rows whose (first) outcome indicator is 1 (binary and top-1 targets; None for the others)."""
    if sub.z.shape[1] == 1 or sub.mode.one_dimensional:
        return int(np.rint(sub.y[:, 0]).sum())
    return None


def skip_reason(sub: PreparedData, single_class: bool = True) -> str | None:
    """Why a group's rows cannot be analysed (None when they can).

    No rows, one row, and with ``single_class`` (an interval of the ECE,
    which cannot separate calibration from the predictions' level without
    both outcomes) a single outcome class on a binary or top-1 target.
    """
    return skip_reason_counts(sub.n, _events(sub) if sub.n else None, sub.mode, single_class)


def skip_reason_counts(n: int, events: int | None, mode: Target, single_class: bool = True) -> str | None:
    """:func:`skip_reason` from a group's row and event counts (``events`` None: not a binary or top-1 target)."""
    if n == 0:
        return "no rows"
    if n == 1:
        return "a single row"
    if single_class and events is not None and events in (0, n):
        outcome = "1" if events else "0"
        what = "correct" if Target(mode).top1 else "outcome"
        return (f"a single outcome class: every {what} is {outcome} in {n} rows, so the group's "
                "calibration cannot be separated from its predictions' level")
    return None


def group_rng(rng, seed, g: int):
    """The random source of group ``g``: ``default_rng([seed, g])``, or the Generator ``rng`` itself."""
    return np.random.default_rng([seed, g]) if seed is not None and seed != "Generator" else rng


def analyse_groups(grouping: Grouping, target: PreparedData, analyse: Callable, *,
                   single_class: bool = True) -> tuple[dict, dict]:
    """Apply ``analyse(g, label, idx, sub)`` to every group that can be analysed.

    Returns ``(groups, reasons)``: label -> result (None when not analysed)
    and label -> why not.  A group whose analysis raises ``ValueError`` (not
    an option error, which is the caller's) is listed with the message as
    its reason; :func:`skip_reason` decides the others.  A loop over the
    few groups, not over rows.
    """
    groups, reasons = {}, {}
    for g, label in enumerate(grouping.labels):
        idx = grouping.rows(g)
        sub = subset_rows(target, idx)
        _analyse_one(groups, reasons, label, skip_reason(sub, single_class), lambda: analyse(g, label, idx, sub))
    return groups, reasons


def analyse_counted_groups(grouping: Grouping, events, mode: str, analyse: Callable, *,
                           single_class: bool = True) -> tuple[dict, dict]:
    """:func:`analyse_groups` for groups known by their counts, not their rows (streamed data).

    ``events`` holds each group's rows with outcome 1 (None entries for
    targets other than binary and top-1); ``analyse(g, label)`` is applied to
    every group that :func:`skip_reason_counts` lets through, with the same
    rule for the errors it raises.
    """
    groups, reasons = {}, {}
    for g, (label, n) in enumerate(zip(grouping.labels, grouping.counts)):
        reason = skip_reason_counts(int(n), events[g], mode, single_class)
        _analyse_one(groups, reasons, label, reason, lambda: analyse(g, label))
    return groups, reasons


def _analyse_one(groups: dict, reasons: dict, label, reason, run: Callable) -> None:
    """One group of :func:`analyse_groups`: its result, or why it has none."""
    res = None
    if reason is None:
        try:
            res = run()
        except OptionError:
            raise
        except ValueError as exc:
            reason = " ".join(str(exc).split())
    groups[label] = res
    if res is None:
        reasons[label] = reason


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def group_table(grouping: Grouping, target: PreparedData | None, groups: dict, reasons: dict, group_notes: dict,
                row: Callable, columns: list, *, events=False) -> pd.DataFrame:
    """One row per group, indexed by the group labels (``grouping.index``).

    ``n`` (and with ``events`` the rows with outcome 1) of every group,
    analysed or not; then ``columns``, filled from ``row(result)`` (a dict)
    for the analysed groups and missing for the others, with
    ``pvalue_holm`` (Holm over the analysed groups) after ``pvalue``; then
    ``note`` (why a group was not analysed, or its note).  ``events`` may
    also be the list of each group's events (streamed groups, whose rows
    were not kept; ``target`` is then None).
    """
    counts = [int(c) for c in grouping.counts]
    records = []
    for g, label in enumerate(grouping.labels):
        res = groups[label]
        rec = row(res) if res is not None else {}
        records.append([rec.get(c) for c in columns])
    table = pd.DataFrame(records, columns=list(columns), index=grouping.index)
    for col in columns:  # numbers (missing for the groups not analysed) as float; flags and text as they are
        if all(v is None or _is_number(v) for v in table[col]):
            table[col] = table[col].astype(float)
    lead = {"n": counts}
    if isinstance(events, (list, tuple, np.ndarray)):
        lead["events"] = list(events)
    elif events:
        lead["events"] = [_events(subset_rows(target, grouping.rows(g))) for g in range(len(grouping))]
    for i, (col, values) in enumerate(lead.items()):
        table.insert(i, col, pd.array(values, dtype="Int64"))
    if "pvalue" in table.columns:
        table.insert(table.columns.get_loc("pvalue") + 1, "pvalue_holm", holm(table["pvalue"].to_numpy(float)))
    table["note"] = [reasons[lb] if groups[lb] is None else group_notes.get(lb, "") for lb in grouping.labels]
    return table


# --------------------------------------------------------------------------- the tests across groups
def global_test(pvalues, method: str = "bonferroni") -> tuple[float, float]:
    """(statistic, p-value) of H0: calibrated in every group, from independent per-group p-values.

    ``"bonferroni"``: statistic min p, p-value min(1, G min p) (valid under any
    dependence; Holm's first step).  ``"fisher"``: -2 sum log p ~ chi2(2G).
    ``"stouffer"``: sum Phi^-1(1 - p) / sqrt(G) ~ N(0, 1).  The last two assume
    independent, uniform p-values under H0 (disjoint groups given the predictions).
    NaN for no p-value.
    """
    p = np.asarray(pvalues, dtype=float)
    if p.size == 0:
        return math.nan, math.nan
    if method == "bonferroni":
        return float(p.min()), float(min(1.0, p.size * p.min()))
    p = np.clip(p, np.finfo(float).tiny, 1.0)
    stat, pval = _sps.combine_pvalues(p, method=method)
    return float(stat), float(pval)


def global_text(method: str, g: int) -> str:
    """How the global test combines ``g`` p-values, in words."""
    return {"bonferroni": f"Bonferroni min-p, min(1, {g} x min p)",
            "fisher": f"Fisher's -2 sum log p ~ chi2({2 * g})",
            "stouffer": "Stouffer's sum Phi^-1(1 - p) / sqrt(G) ~ N(0, 1)"}[method]


def holm(pvalues) -> np.ndarray:
    """Holm-adjusted p-values of the finite entries (NaN stays NaN)."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method="holm")[1]
    return out


# --------------------------------------------------------------------------- the grouped result
#: Per kind of grouped result: the summary's title, its table columns (column -> (header, digits)) and
#: what its p-value tests.
KINDS = {
    "calib_test": ("Multi-scale test of calibration within subgroups",
                   {"n": ("n", 8), "statistic": ("statistic", 4), "pvalue": ("p", 3), "pvalue_holm": ("p (Holm)", 3)},
                   "the multi-scale Monte Carlo test of calibration (calib_test) in the group"),
    "tcal_test": ("T-Cal test of calibration within subgroups",
                  {"n": ("n", 8), "statistic": ("statistic", 4), "pvalue": ("p", 3), "pvalue_holm": ("p (Holm)", 3)},
                  "the T-Cal test of calibration (tcal_test) in the group"),
    "evidence": ("Evidence on calibration within subgroups",
                 {"n": ("n", 8), "ece": ("ece", 4), "ece_ci_lower": ("lower", 4), "ece_ci_upper": ("upper", 4),
                  "pvalue": ("p", 3), "pvalue_holm": ("p (Holm)", 3), "verdict": ("verdict", None)},
                 "the multi-scale test of calibration (calib_test) in the group; ece and its adjusted interval "
                 "(calib_ci) say how much; verdict is the group's evidence verdict"),
}


@dataclass(frozen=True, eq=False, repr=False, kw_only=True)
class GroupedResult(ResultDisplay):
    """One analysis per group, the per-group table and the global test: the protocol of every ``by=``.

    ``calib_test``, ``tcal_test`` and ``evidence`` with ``by=`` return this
    class; ``calib_ci`` its subclass
    :class:`~calibtest.ece.grouped_interval.GroupedCalibrationResult`.

    Attributes
    ----------
    by : tuple of str
        The grouping variables (several: crossed).
    groups : dict
        Group label (a level, or a tuple of levels; the entries of
        ``to_frame().index``) -> the result of the single-group function on
        the group's rows, or None for a group that was not analysed.
    reasons : dict
        Group label -> why it was not analysed (no rows, one row, a single
        outcome class, or the error the analysis raised).
    group_notes : dict
        Group label -> note on an analysed group.
    table : pandas.DataFrame
        One row per group (see :meth:`to_frame`).
    global_statistic, global_pvalue : float
        Test of H0: calibrated in every analysed group (``global_method``);
        NaN when no group was analysed.
    global_method : {"bonferroni", "fisher", "stouffer"}
    alpha : float
    kind : {"calib_test", "tcal_test", "evidence", "calib_ci"}
        The function applied to each group.
    seed : int, str or None
        The seed s of the groups' draws (group g: ``default_rng([s, g])``;
        ``"Generator"``: one Generator shared in index order).
    mode, k, n_classes : str, int, int or None
    formula, y_name, prob_names, n_dropped, call_record
        Bookkeeping (``n_dropped``: rows dropped by ``missing="drop"``
        before grouping).
    clusters : str or None
        With ``cluster=`` (clusters nested in the groups), what they are
        (e.g. ``"24 clusters, column 'site'"``): each group's analysis is the
        clustered one on its own clusters.
    source : dict or None
        For a file or a Dask frame (streamed by group), the data source as in
        ``CalibrationResult.source``; None for rows in memory.
    """

    by: tuple
    groups: dict
    reasons: dict
    group_notes: dict
    table: pd.DataFrame = field(repr=False)
    global_statistic: float
    global_pvalue: float
    global_method: str = "bonferroni"
    alpha: float = 0.05
    kind: str = "calib_test"
    seed: int | str | None = None
    mode: str = "binary"
    k: int = 1
    n_classes: int | None = None
    formula: str | None = None
    y_name: str = "y"
    prob_names: tuple = ()
    n_dropped: int = 0
    call_record: Call | None = field(default=None, repr=False)
    clusters: str | None = None
    source: dict | None = field(default=None, repr=False)

    def __post_init__(self):
        self.table.flags.allows_duplicate_labels = False

    @property
    def n_groups(self) -> int:
        """Groups listed (analysed or not)."""
        return len(self.groups)

    @property
    def n_analysed(self) -> int:
        """Groups analysed."""
        return sum(r is not None for r in self.groups.values())

    def to_frame(self) -> pd.DataFrame:
        """One row per group (a copy), indexed by the group labels.

        The index is named by the grouping variables (a ``MultiIndex`` for
        crossed groups), so the group labels never mix with the statistics.
        Columns: ``n`` (rows of the group, after ``missing="drop"``), the
        kind's statistics (``calib_test``/``tcal_test``: ``statistic``;
        ``evidence``: ``ece``, ``ece_ci_lower``, ``ece_ci_upper``, ``verdict``;
        ``calib_ci``: see :class:`~calibtest.ece.grouped_interval.GroupedCalibrationResult`),
        ``pvalue``, ``pvalue_holm`` (Holm over the analysed groups) and
        ``note`` (why a group was not analysed, or its note).
        """
        return self.table.copy()

    def summary_frame(self) -> pd.DataFrame:
        """The per-group table (statsmodels' name; the same as :meth:`to_frame`)."""
        return self.to_frame()

    def label_text(self, label) -> str:
        """A group label as ``name=level`` text."""
        return label_text(self.by, label)

    def _global_notes(self) -> list[str]:
        g = self.n_analysed
        if g == 0:
            return ["Global test of calibration in every group: not computed, no group could be analysed."]
        whose = "groups'" if g != 1 else "group's"
        return [f"Global test of calibration in every group: {global_text(self.global_method, g)} over the {g} "
                f"analysed {whose} p-values, {p_equals(self.global_pvalue, 4)}. Per-group p-values are also "
                "shown Holm-adjusted (family-wise error over the groups)."]

    def _group_notes(self) -> list[str]:
        notes = [f"Group {self.label_text(lb)}: not analysed ({reason})." for lb, reason in self.reasons.items()]
        notes += [f"Group {self.label_text(lb)}: {note}" for lb, note in self.group_notes.items()]
        return notes

    def notes(self) -> list[str]:
        """Notes of the summary footer."""
        notes = self._global_notes()
        notes.append(f"p: the p-value of {KINDS[self.kind][2]}.")
        if self.clusters is not None:
            notes.append(f"Clustered rows ({self.clusters}, nested in the groups): each group's multi-scale test is "
                         "the clustered one on its own clusters (T_cl and sqrt(V_0) per scale, sign flips of "
                         "whole clusters in place of label draws)"
                         + ("; its interval, CITL, slope and O/E are cluster-robust and its Hosmer-Lemeshow "
                            "test design-based." if self.kind == "evidence" else "."))
        if self.seed is not None:
            notes.append(f"The i-th group (i = 0, 1, ... in the table's order, empty groups counted) draws from "
                         f"numpy.random.default_rng([{self.seed}, i])." if self.seed != "Generator" else
                         "The groups' draws share the Generator passed as rng, in the table's order.")
        if self.n_dropped:
            notes.append(f"{self.n_dropped} rows with missing values were dropped (missing='drop') before "
                         "grouping; n counts the rows analysed.")
        return notes + self._group_notes()

    def _table_for_summary(self, columns: dict) -> pd.DataFrame:
        tab = self.table[list(columns)].copy()
        tab.index = [short_name(_short_label(i), 16) for i in self.table.index]
        return tab

    def _tests_frame(self) -> pd.DataFrame:
        if self.n_analysed == 0:
            return pd.DataFrame({"statistic": ["not computed"], "p-value": [None]},
                                index=[f"global ({self.global_method})"], dtype=object)
        return pd.DataFrame({"statistic": [self.global_statistic], "p-value": [self.global_pvalue]},
                            index=[f"global ({self.global_method})"], dtype=object)

    def _settings(self) -> dict:
        return {"Model:": model_text(self.formula, self.y_name, self.prob_names),
                "Groups by:": " x ".join(self.by), "Groups:": f"{self.n_analysed} analysed of {self.n_groups}",
                "Alpha:": fmt(self.alpha)}

    def _summary(self, alpha: float | None) -> CalibSummary:
        title, columns, _ = KINDS[self.kind]
        smry = CalibSummary()
        smry.add_title(title)
        smry.add_settings(self._settings())
        tab = self._table_for_summary(columns)
        tab = tab.astype(object).where(tab.notna(), None)
        smry.add_table(tab.rename(columns={c: h for c, (h, _) in columns.items()}),
                       {h: d for h, d in columns.values()})
        smry.add_table(self._tests_frame(), {"statistic": 4, "p-value": 4})
        smry.add_notes(self.notes())
        return smry

    def _records(self) -> list[dict]:
        records = self.table.astype(object).where(self.table.notna(), None).to_dict(orient="records")
        for rec, label in zip(records, self.table.index):
            rec["group"] = self.label_text(label)
        return records

    def _dict(self) -> dict:
        return {"kind": self.kind, "by": list(self.by), "n_groups": self.n_groups, "n_analysed": self.n_analysed,
                "alpha": self.alpha, "global_method": self.global_method,
                "global_statistic": self.global_statistic, "global_pvalue": self.global_pvalue,
                "seed": self.seed,
                "n_dropped": self.n_dropped, "groups": json_safe(self._records()), "notes": self.notes()}

    def _repr_parts(self) -> list[str]:
        return [f"kind={self.kind}", f"by={'*'.join(self.by)} groups={self.n_groups}",
                f"global p={self.global_pvalue:.4g}"]

    def meta_analysis(self, *args, **kwargs):
        """Random-effects meta-analysis across the groups: defined for ``calib_ci(..., by=)`` results.

        :meth:`calibtest.GroupedCalibrationResult.meta_analysis` pools the
        groups' log O/E, CITL, slope and ECE^2, which need each group's
        estimate and standard error; the other kinds hold tests or verdicts.

        Raises
        ------
        TypeError
            Always, for a grouped result other than ``calib_ci``'s.
        """
        raise TypeError(f"meta_analysis() pools each group's estimates and standard errors, which a {self.kind!r} "
                        "result with by= does not hold; run calib_ci(..., by=) with the same grouping and call "
                        "its meta_analysis()")

    def plot_forest(self, ax=None, **kwargs):
        """Forest plot of the groups (:func:`calibtest.reporting.forest.plot_forest`).

        Intervals of the ECE for ``calib_ci`` and ``evidence``; the p-value
        and its Holm adjustment (log scale) for ``calib_test`` and ``tcal_test``.
        ``measure="citl"``, ``"slope"`` or ``"oe"`` draws that measure of a
        ``calib_ci`` result instead of the ECE.
        """
        from calibtest.reporting.forest import plot_forest
        return plot_forest(self, ax=ax, **kwargs)


def clusters_text(clusters) -> str | None:
    """What the clusters of a grouped analysis are (``"24 clusters, column 'site'"``), None without them."""
    if clusters is None:
        return None
    what = f"column {clusters.name!r}" if clusters.name else "given as an array"
    return f"{clusters.n_clusters} clusters, {what}"


def few_clusters_note(label, n_clusters: int, what: str = "test is") -> dict:
    """``{label: note}`` when a group has fewer than :data:`calibtest.core.clustered.MIN_CLUSTERS` clusters
    (``what``: the clustered analyses the note names, with their verb)."""
    if n_clusters >= MIN_CLUSTERS:
        return {}
    return {label: f"only {n_clusters} clusters (fewer than {MIN_CLUSTERS}): its clustered {what} exploratory."}


@dataclass(frozen=True, eq=False)
class GroupOutcomes:
    """What the analysis of each group gave, the three travelling together.

    Attributes
    ----------
    groups : dict
        Each group's result, None where the group was not analysed.
    reasons : dict
        Why each group left out was not analysed.
    notes : dict
        Notes on analysed groups (e.g. few clusters).
    pooled_measures : dict, optional
        The pooled rows' O/E, CITL and slope columns where the kind computes them apart (None: from the
        pooled result).
    measure_reasons : dict
        Measure -> {group label: why the analysed group has no estimate of it}.
    """

    groups: dict
    reasons: dict
    notes: dict = field(default_factory=dict)
    pooled_measures: dict | None = None
    measure_reasons: dict = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class GroupAnalysis:
    """How a grouped result of per-group tests is tabulated and combined.

    Attributes
    ----------
    kind : str
        The public function (``"calib_test"``, ``"tcal_test"``, ``"evidence"``).
    row : callable
        ``row(result) -> dict`` of a group's entries in ``columns``.
    columns : list of str
        The table's columns read from ``row``.
    alpha : float
        Significance level.
    events : bool or list
        As in :func:`group_table`.
    global_method : str
        One of :data:`GLOBAL_METHODS`.
    """

    kind: str
    row: Callable
    columns: list
    alpha: float
    events: Any = False
    global_method: str = "bonferroni"


def grouped_result(grouping: Grouping, target: PreparedData, outcomes: GroupOutcomes, analysis: GroupAnalysis, *,
                   seed, **bookkeeping) -> GroupedResult:
    """A :class:`GroupedResult` of ``analysis.kind`` from the per-group results (table, Holm, global test)."""
    groups, reasons, group_notes = outcomes.groups, outcomes.reasons, dict(outcomes.notes or {})
    table = group_table(grouping, target, groups, reasons, group_notes, analysis.row, analysis.columns,
                        events=analysis.events)
    p = table["pvalue"].to_numpy(float)
    gstat, gp = global_test(p[np.isfinite(p)], analysis.global_method)
    return GroupedResult(by=grouping.names, groups=groups, reasons=reasons, group_notes=group_notes, table=table,
                         global_statistic=gstat, global_pvalue=gp, global_method=analysis.global_method,
                         alpha=analysis.alpha, kind=analysis.kind, seed=seed, mode=target.mode, k=target.k,
                         n_classes=target.n_classes, **bookkeeping)
