"""Input checks shared by every front end: array input, missing-value rules, seeds and counts."""
from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

__all__ = ["MISSING_OPTIONS", "array_input", "missing_mask", "check_seed", "check_count"]

MISSING_OPTIONS = ("raise", "drop")


def missing_mask(y, probs: np.ndarray, y_name: str, prob_names, missing: str):
    """Rows with a missing value; raise when ``missing='raise'``."""
    y_na = np.zeros(len(y), dtype=bool) if y.dtype.kind in "biu" else np.asarray(pd.isna(y), dtype=bool)
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
        raise ValueError(f"{int(mask.sum())} rows have missing values (NaN) in {', '.join(map(repr, cols))}; "
                         "pass missing='drop' to drop them")
    return mask


def array_input(y, probs):
    """Arrays and names from ``y=``/``probs=`` input (the rules of :func:`calibtest.calib_ci`)."""
    y_arr = y.to_numpy() if isinstance(y, (pd.Series, pd.Index)) else np.asarray(y)
    p_arr = probs.to_numpy() if isinstance(probs, (pd.Series, pd.DataFrame)) else np.asarray(probs)
    if p_arr.dtype.kind not in "biuf":
        raise TypeError(f"probs must be numeric, got dtype {p_arr.dtype}")
    if y_arr.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got shape {y_arr.shape}")
    if p_arr.ndim not in (1, 2) or p_arr.shape[0] != y_arr.shape[0]:
        raise ValueError(f"probs must have shape (n,) or (n, K) with n = len(y) = {y_arr.shape[0]}, "
                         f"got {p_arr.shape}")
    if isinstance(probs, pd.DataFrame):
        prob_names = class_names = list(probs.columns)
    else:
        prob_names = ["probs"] if p_arr.ndim == 1 else [f"probs[:, {j}]" for j in range(p_arr.shape[1])]
        class_names = None
    return y_arr, p_arr, "y", prob_names, class_names


def check_seed(rng):
    """Check an ``rng=`` argument: None, a non-negative int seed or a numpy Generator; return it."""
    if rng is None or isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (bool, np.bool_)) or not isinstance(rng, numbers.Integral):
        raise TypeError(f"rng must be None, an int seed or a numpy.random.Generator, got {type(rng).__name__}")
    if rng < 0:
        raise ValueError(f"rng must be a non-negative integer seed, got {rng}")
    return rng


def check_count(value, name: str, minimum: int = 1) -> int:
    """Check a count argument (an integer >= ``minimum``, not a bool) and return it as an int."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)
