"""Rows in memory from a formula or from arrays, with the missing-value rule applied.

:func:`prepare_input` is the one way in of every public function that holds
the rows (``calib_ci``, ``calib_test``, ``tcal_test``, ``evidence``,
``hosmer_lemeshow``, ``val_prob``, the grouped analyses and the command line
through them): data or arrays -> validated rows, the calibration target,
case weights, group labels and the recorded call.  :func:`read_rows` is its
first step, also used alone by the streaming backends for each chunk: one
reading of the data argument, one missing-value rule.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from calibtest.display.format import Call, record_call
from calibtest.inputs.validation import DataError, OptionError, check_missing, check_weights, row_values
from calibtest.options import check_option
from calibtest.core.targets import PreparedData, prepare_target
from calibtest.inputs.design import Design
from calibtest.inputs.formula import column_values, parse_formula, resolve_env
from calibtest.inputs.settings import Inputs, Settings

__all__ = ["Rows", "read_rows", "joint_missing", "resolve_weights", "array_input", "missing_mask", "is_dask",
           "is_out_of_core", "PreparedInput", "prepare_input", "Clusters", "resolve_clusters"]


def missing_mask(y, probs: np.ndarray, y_name: str, prob_names, missing: str):
    """Rows with a missing value; raise when ``missing='raise'``."""
    y_na = np.zeros(len(y), dtype=bool) if y.dtype.kind in "biu" else np.asarray(pd.isna(y), dtype=bool)
    if y_na.ndim == 2:  # a survival outcome: time and event
        y_na = y_na.any(axis=1)
    if probs.ndim == 1:
        p_na = np.isnan(probs)[:, None]
    else:
        # a row sum is NaN iff the row holds a NaN (or +inf and -inf): one BLAS pass,
        # then the exact per-column check on the few flagged rows only
        p_na = np.zeros(probs.shape, dtype=bool)
        flagged = np.flatnonzero(np.isnan(probs @ np.ones(probs.shape[1])))
        p_na[flagged] = np.isnan(probs[flagged])
    mask = y_na | p_na.any(axis=1)
    if mask.any() and missing == "raise":
        cols = ([y_name] if y_na.any() else []) + [nm for j, nm in enumerate(prob_names) if p_na[:, j].any()]
        raise DataError(f"{int(mask.sum())} rows have missing values (NaN) in {', '.join(map(repr, cols))}; "
                         "pass missing='drop' to drop them")
    return mask


def array_input(y, probs, survival: bool = False):
    """Arrays and names from ``y=``/``probs=`` input (the rules of :func:`calibtest.calib_ci`).

    ``survival``: ``y`` is the (n, 2) array of times and events of a survival outcome.
    """
    y_arr = column_values(y)
    if isinstance(probs, pd.DataFrame):
        p_arr = np.column_stack([column_values(probs[c]) for c in probs.columns]) if probs.shape[1] \
            else probs.to_numpy()
    else:
        p_arr = column_values(probs)
    if p_arr.dtype.kind not in "biuf":
        raise TypeError(f"probs must be numeric, got dtype {p_arr.dtype}")
    if survival and (y_arr.ndim != 2 or y_arr.shape[1] != 2):
        raise DataError(f"a survival outcome is an (n, 2) array of times and events, got shape {y_arr.shape}")
    if y_arr.ndim != 1 and not survival:
        raise DataError(f"y must be one-dimensional, got shape {y_arr.shape}")
    if p_arr.ndim not in (1, 2) or p_arr.shape[0] != y_arr.shape[0]:
        raise DataError(f"probs must have shape (n,) or (n, K) with n = len(y) = {y_arr.shape[0]}, "
                         f"got {p_arr.shape}")
    if isinstance(probs, pd.DataFrame):  # names shown as text; labels matched against the columns as given
        class_names = list(probs.columns)
        prob_names = [str(c) for c in class_names]
    else:
        prob_names = ["probs"] if p_arr.ndim == 1 else [f"probs[:, {j}]" for j in range(p_arr.shape[1])]
        class_names = None
    return y_arr, p_arr, "y" if not survival else "Surv(time, event)", prob_names, class_names


@dataclass(frozen=True, eq=False)
class Rows:
    """Outcomes and predictions read from the user's data, missing rows already removed.

    Attributes
    ----------
    y : ndarray, shape (n,)
    probs : ndarray of float64, shape (n,) or (n, K)
    y_name : str
        Name of the outcome (formula term or ``"y"``).
    prob_names : list
        Names of the probability columns.
    class_names : list or None
        Class labels in column order (probability column names), if any.
    n_dropped : int
        Rows dropped for missing values (``missing="drop"``).
    kept : ndarray of bool or None
        Which of the input rows were kept (None when none was dropped); aligns
        row-wise extras such as case weights or group labels.
    """

    y: np.ndarray
    probs: np.ndarray
    y_name: str
    prob_names: list
    class_names: list | None
    n_dropped: int
    kept: np.ndarray | None = None


def read_rows(formula, data, y, probs, env, missing: str, survival: bool = False) -> Rows:
    """Read the rows of a formula with ``data=`` or of ``y=``/``probs=`` arrays, and apply ``missing``.

    ``survival``: the outcome is ``Surv(time, event)`` (or an (n, 2) array of
    times and events), read as an (n, 2) float array; without it such an
    outcome is refused (it needs ``horizon=``).

    Raises
    ------
    ValueError
        Both input forms given, or neither; missing values with ``missing="raise"``;
        a survival outcome without ``survival`` or another outcome with it.
    """
    if formula is not None:
        if y is not None or probs is not None:
            raise OptionError("give either a formula with data, or y= and probs=, not both")
        if data is None:
            raise OptionError("a formula needs data=")
        parsed = parse_formula(formula, data, env)
        y_arr, p_arr, y_name, prob_names = parsed.y, parsed.probs, parsed.y_name, parsed.prob_names
        class_names = prob_names
        if (y_arr.ndim == 2) != survival:
            raise OptionError(f"the outcome {y_name!r} is a survival outcome: calib_ci(..., horizon=t) analyses "
                              "it, with horizon= the time t of the predicted risk P(T <= t)" if not survival else
                              f"horizon= needs a survival outcome 'Surv(time, event) ~ risk', got {y_name!r}")
    else:
        if y is None or probs is None:
            raise OptionError("give a formula with data=, or both y= and probs=")
        if data is not None:
            raise OptionError("data= is used only with a formula")
        y_arr, p_arr, y_name, prob_names, class_names = array_input(y, probs, survival)
    p_arr = np.asarray(p_arr, dtype=np.float64)
    mask = missing_mask(y_arr, p_arr, y_name, prob_names, missing)
    n_dropped = int(mask.sum())
    if n_dropped:
        y_arr, p_arr = y_arr[~mask], p_arr[~mask]
    return Rows(y_arr, p_arr, y_name, list(prob_names), class_names, n_dropped, None if not n_dropped else ~mask)


def joint_missing(formulas, data, env) -> np.ndarray:
    """Rows of ``data`` with a missing outcome or prediction in any of ``formulas`` (boolean mask).

    Several models scored on the same rows (:func:`calibtest.calib_compare`
    with ``missing="drop"``) drop such a row for every model, so the rows stay
    shared; a ``Surv(time, event)`` outcome is missing when either is.
    """
    masks = []
    for f in formulas:
        parsed = parse_formula(f, data, env)
        y_na = np.asarray(pd.isna(parsed.y), dtype=bool)
        y_na = y_na.any(axis=1) if y_na.ndim == 2 else y_na  # Surv(time, event): either missing
        masks.append(y_na | np.isnan(parsed.probs).any(axis=1))
    return np.logical_or.reduce(masks)


def is_dask(data) -> bool:
    """True for a Dask collection (recognised by its module, without importing Dask)."""
    return type(data).__module__.split(".")[0] == "dask"


def is_out_of_core(data) -> bool:
    """True for a file path (``str`` or ``os.PathLike``) or a Dask collection."""
    return isinstance(data, (str, os.PathLike)) or is_dask(data)


def resolve_weights(weights, data, rows) -> tuple:
    """(weights of the kept rows as float64, column name or None) from ``weights=`` (given: the caller asks the
    design, :attr:`calibtest.inputs.design.Design.case_weighted`)."""
    n_input = rows.y.shape[0] + rows.n_dropped
    values = check_weights(row_values(weights, data, n_input, "weights"))
    if rows.kept is not None:
        values = values[rows.kept]
        if not (values > 0).any():
            raise DataError("weights are all zero on the rows left after dropping missing values")
    return values, weights if isinstance(weights, str) else None


@dataclass(frozen=True, eq=False)
class Clusters:
    """The clusters of the kept rows (``cluster=``).

    Attributes
    ----------
    codes : ndarray of intp, shape (n,)
        Cluster of each kept row, 0..G-1 in the order of ``labels``.
    labels : ndarray, shape (G,)
        The cluster labels, sorted.
    sizes : ndarray of int64, shape (G,)
        Rows per cluster.
    name : str or None
        The cluster column (None for an array).
    """

    codes: np.ndarray
    labels: np.ndarray
    sizes: np.ndarray
    name: str | None

    @property
    def n_clusters(self) -> int:
        """G, the number of clusters."""
        return int(self.labels.shape[0])

    def of_rows(self, idx: np.ndarray) -> "Clusters":
        """The clusters of the rows ``idx`` (a group's rows), renumbered 0..G'-1.

        Raises
        ------
        ValueError
            The rows are in one cluster: a cluster-robust analysis needs at least two.
        """
        labels, codes = np.unique(self.codes[idx], return_inverse=True)
        if labels.size < 2:
            raise ValueError(f"one cluster ('{self.labels[labels[0]]}') in this group: a cluster-robust "
                             "analysis needs at least two clusters")
        sizes = np.bincount(codes.ravel(), minlength=labels.size).astype(np.int64)
        return Clusters(codes.ravel().astype(np.intp), self.labels[labels], sizes, self.name)

    def refuse_one_per_group(self, group_rows: list) -> None:
        """Raise ``OptionError`` when every group (``group_rows``: each group's row indices) is one cluster:
        ``by=`` and ``cluster=`` then name the same groups."""
        per_group = [np.unique(self.codes[rows]).size for rows in group_rows if rows.size]  # the few groups
        if per_group and max(per_group) == 1:
            raise OptionError("by= and cluster= name the same groups (every group is one cluster): to compare "
                              "the sites, analyse them as independent groups with by= without cluster= (and "
                              "pool them with calib_ci(..., by=...).meta_analysis()); cluster= with by= is for "
                              "clusters nested in the groups (e.g. by='country', cluster='site')")


def resolve_clusters(cluster, data, rows: Rows, group_values=()) -> Clusters | None:
    """The clusters of the kept rows from ``cluster=`` (a column name or one label per input row).

    Rules (``docs/clusters.md``): a missing label (NaN, None, NaT) is an error
    naming ``cluster`` (a row whose cluster is unknown cannot be placed; drop
    or fill those rows first); at least two clusters are needed (one cluster
    leaves no between-cluster variation to estimate); clusters of one row are
    allowed (an independent row is its own cluster); with ``by=`` every
    cluster must lie inside one group (a site in two groups is an error: the
    groups would share a site effect and no longer be independent).

    Raises
    ------
    DataError
        For the cases above, an unknown column or a length other than the data's.

    ``cluster`` is given: the caller asks the design (:attr:`calibtest.inputs.design.Design.clustered`).
    """
    check_option("cluster", cluster)
    n_input = rows.y.shape[0] + rows.n_dropped
    values = row_values(cluster, data, n_input, "cluster")
    if rows.kept is not None:
        values = values[rows.kept]
    missing = np.asarray(pd.isna(values), dtype=bool)
    if missing.any():
        raise DataError(f"cluster has {int(missing.sum())} missing labels (NaN or None); every row needs its "
                        "cluster: drop or fill those rows before the analysis")
    try:
        labels, codes = np.unique(values, return_inverse=True)
    except TypeError:  # labels of mixed types (e.g. str and int) do not sort: compare them as text
        labels, codes = np.unique(values.astype(str), return_inverse=True)
    codes = codes.ravel().astype(np.intp)
    if labels.shape[0] < 2:
        raise DataError(f"cluster has a single cluster ('{labels[0]}') among the {codes.shape[0]} rows: a "
                        "cluster-robust analysis needs at least two independent clusters (and is reliable only "
                        "with many more; docs/clusters.md)")
    for gname, gvalues in zip(group_names_of(group_values), group_values):
        _, gcodes = np.unique(np.asarray(gvalues).astype(str), return_inverse=True)
        gcodes = gcodes.ravel()
        low = np.full(labels.shape[0], np.iinfo(np.int64).max)
        high = np.full(labels.shape[0], -1)
        np.minimum.at(low, codes, gcodes)
        np.maximum.at(high, codes, gcodes)
        crossed = np.flatnonzero(low != high)
        if crossed.size:
            raise DataError(f"cluster and by= cross: cluster '{labels[crossed[0]]}' has rows in more than one "
                            f"group of {gname} ({crossed.size} clusters do); every cluster must lie inside one "
                            "group, so that the groups stay independent")
    sizes = np.bincount(codes, minlength=labels.shape[0]).astype(np.int64)
    return Clusters(codes, labels, sizes, cluster if isinstance(cluster, str) else None)


def group_names_of(group_values) -> list[str]:
    """Names for the grouping variables in messages (the caller passes the names with the values)."""
    return [getattr(v, "name", None) or f"by[{i}]" for i, v in enumerate(group_values)]


@dataclass(frozen=True, eq=False)
class PreparedInput:
    """What a public function works on: the rows, the target, weights, group labels and the recorded call.

    Attributes
    ----------
    rows : Rows
        Outcomes and predictions, missing rows removed.
    target : PreparedData or None
        Z and U of the calibration target (None when not asked for).
    weights : ndarray of float64 or None
        Case weights of the kept rows.
    weights_name : str or None
        The column of the weights (None for an array or no weights).
    group_names : list of str
        Names of the grouping variables of ``by=`` (empty without).
    group_values : list of ndarray
        One label per kept row for each grouping variable.
    call : Call or None
        The recorded call (None when no options were given to record).
    clusters : Clusters or None
        The clusters of the kept rows (``cluster=``), None without.
    """

    rows: Rows
    target: PreparedData | None
    weights: np.ndarray | None
    weights_name: str | None
    group_names: list
    group_values: list
    call: Call | None
    clusters: Clusters | None = None


def prepare_input(function: str, inputs: Inputs, settings: Settings, *, group_labels=None,
                  options: dict | None = None, target: bool = True, single_column: bool = False,
                  survival: bool = False) -> PreparedInput:
    """Data or arrays -> validated rows, the calibration target, weights, group labels and the recorded call.

    Parameters
    ----------
    function : str
        The public function (named in messages and in the recorded call).
    inputs : Inputs
        The rows and their roles: ``formula``, ``data``, ``y``, ``probs``,
        ``weights``, ``by`` and ``cluster`` are read (as in
        :func:`calibtest.calib_ci`; ``cluster`` read and checked by
        :func:`resolve_clusters`, against the groups of ``by``).
    settings : Settings
        ``missing`` (checked here), ``n_classes``, ``k`` and ``env``: where
        formula names that are not columns are looked up (an int counts
        frames above the caller of ``function``; a resolved environment is
        used as it is; None for arrays, resolved by the caller).
    group_labels : callable, optional
        ``group_labels(by, data, n_input) -> (names, values)``, the grouping
        engine's reading of ``by=`` (:func:`calibtest.ece.group_engine.group_labels`);
        needed with ``by``.  The labels are aligned with the kept rows here,
        so group counts are taken after ``missing="drop"``.
    options : dict, optional
        The options the recorded call shows (None: no call is recorded).  A
        ``"weights"`` entry is filled with the weights' column name (or
        ``"<array>"``) when ``weights`` is given.
    target : bool
        Whether to prepare the calibration target (Z and U).
    single_column : bool
        The function needs one probability column (binary, or top-1 with
        ``n_classes``): a matrix is refused, and the column is used as a vector.
    survival : bool
        The outcome is ``Surv(time, event)`` (or ``y`` the (n, 2) array of
        times and events): ``rows.y`` holds both columns (see :func:`read_rows`).

    Raises
    ------
    OptionError, OptionTypeError, DataError, TypeError
        For invalid options, unusable rows or columns, non-numeric data.
    """
    formula, data, weights, by, cluster = inputs.formula, inputs.data, inputs.weights, inputs.by, inputs.cluster
    missing, n_classes, k = settings.missing, settings.n_classes, settings.k
    check_missing(missing)
    env = None if settings.env is None else resolve_env(settings.env, 1)  # None: array input, resolved by the caller
    rows = read_rows(formula, data, inputs.y, inputs.probs, env, missing, survival)
    probs_arr = rows.probs
    if single_column:
        if probs_arr.ndim != 1 and probs_arr.shape[1] != 1:
            raise DataError(f"{function} needs one probability column (binary, or top-1 with n_classes)")
        probs_arr = probs_arr.reshape(-1)
    prepared = None
    if target:
        prepared = prepare_target(rows.y, probs_arr, n_classes=n_classes, k=k, class_names=rows.class_names,
                                  y_name=rows.y_name, prob_names=rows.prob_names) if not single_column else \
            prepare_target(rows.y, probs_arr, n_classes=n_classes, y_name=rows.y_name, prob_names=rows.prob_names)
    design = Design.resolve(function, inputs, settings)
    w, w_name = resolve_weights(weights, data, rows) if design.case_weighted else (None, None)
    names, values = [], []
    if design.grouped:
        if group_labels is None:
            raise OptionError(f"{function} does not take by=")
        names, values = group_labels(by, data, rows.y.shape[0] + rows.n_dropped)
        if rows.kept is not None:
            values = [v[rows.kept] for v in values]
    clusters = resolve_clusters(cluster, data, rows, [_named(v, nm) for nm, v in zip(names, values)]) \
        if design.clustered else None
    call = None
    if options is not None:
        options = dict(options)
        if design.case_weighted:
            options["weights"] = w_name if w_name else "<array>"
        if design.clustered:
            options["cluster"] = clusters.name if clusters.name else "<array>"
        call = record_call(function, formula, data, rows.y, rows.probs, options)
    return PreparedInput(rows, prepared, w, w_name, list(names), list(values), call, clusters)


def _named(values, name):
    """The labels as a Series named for messages."""
    return pd.Series(np.asarray(values), name=str(name))
