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

from calibtest._format import Call, record_call
from calibtest._validation import DataError, OptionError, check_missing, check_weights, row_values
from calibtest.core.targets import PreparedData, prepare_target
from calibtest.formula import column_values, parse_formula, resolve_env

__all__ = ["Rows", "read_rows", "resolve_weights", "array_input", "missing_mask", "is_dask", "is_out_of_core",
           "PreparedInput", "prepare_input"]


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


def is_dask(data) -> bool:
    """True for a Dask collection (recognised by its module, without importing Dask)."""
    return type(data).__module__.split(".")[0] == "dask"


def is_out_of_core(data) -> bool:
    """True for a file path (``str`` or ``os.PathLike``) or a Dask collection."""
    return isinstance(data, (str, os.PathLike)) or is_dask(data)


def resolve_weights(weights, data, rows) -> tuple:
    """(weights of the kept rows as float64, column name or None) from ``weights=``; (None, None) without."""
    if weights is None:
        return None, None
    n_input = rows.y.shape[0] + rows.n_dropped
    values = check_weights(row_values(weights, data, n_input, "weights"))
    if rows.kept is not None:
        values = values[rows.kept]
        if not (values > 0).any():
            raise DataError("weights are all zero on the rows left after dropping missing values")
    return values, weights if isinstance(weights, str) else None


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
    """

    rows: Rows
    target: PreparedData | None
    weights: np.ndarray | None
    weights_name: str | None
    group_names: list
    group_values: list
    call: Call | None


def prepare_input(function: str, formula, data, y, probs, *, eval_env=0, missing: str = "raise",
                  n_classes=None, k=None, weights=None, by=None, group_labels=None, options: dict | None = None,
                  target: bool = True, single_column: bool = False, survival: bool = False) -> PreparedInput:
    """Data or arrays -> validated rows, the calibration target, weights, group labels and the recorded call.

    Parameters
    ----------
    function : str
        The public function (named in messages and in the recorded call).
    formula, data, y, probs, n_classes, k, weights, by, missing
        As in :func:`calibtest.calib_ci` (``missing`` checked here).
    group_labels : callable, optional
        ``group_labels(by, data, n_input) -> (names, values)``, the grouping
        engine's reading of ``by=`` (:func:`calibtest.grouping.group_labels`);
        needed with ``by``.  The labels are aligned with the kept rows here,
        so group counts are taken after ``missing="drop"``.
    eval_env : int, dict or patsy.EvalEnvironment
        Where formula names that are not columns are looked up; an int counts
        frames above the caller of ``function`` (a resolved environment is
        used as it is).
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
    check_missing(missing)
    env = None if eval_env is None else resolve_env(eval_env, 1)  # None: array input, resolved by the caller
    rows = read_rows(formula, data, y, probs, env, missing, survival)
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
    w, w_name = resolve_weights(weights, data, rows)
    names, values = [], []
    if by is not None:
        if group_labels is None:
            raise OptionError(f"{function} does not take by=")
        names, values = group_labels(by, data, rows.y.shape[0] + rows.n_dropped)
        if rows.kept is not None:
            values = [v[rows.kept] for v in values]
    call = None
    if options is not None:
        options = dict(options)
        if weights is not None:
            options["weights"] = w_name if w_name else "<array>"
        call = record_call(function, formula, data, rows.y, rows.probs, options)
    return PreparedInput(rows, prepared, w, w_name, list(names), list(values), call)
