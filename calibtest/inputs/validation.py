"""Argument checks shared by every public function, one copy of each.

Modelled on statsmodels' ``tools/validation`` and scipy's ``_iv`` helpers:
each check takes the value and the argument's name, returns the value in
canonical form (a Python ``int``/``float``/``bool``), and raises a
``TypeError`` for a value of the wrong kind or a ``ValueError`` for a value
out of range, with a message that names the argument.  Booleans are never
accepted as numbers (``True`` is an ``int`` in Python, but ``n_bins=True`` is
a mistake).

The checks that need no numpy live with the table of options
(:mod:`calibtest.options`, which the core engines use); this module adds
those that read arrays (weights, row-wise arguments, seeds to Generators)
and re-exports the others, so a front end imports its checks from one place.
"""
from __future__ import annotations

import numpy as np

from calibtest.options import (DEFAULT_DRAWS, DEFAULT_NULL, DEFAULT_SEED, MAX_BYTES, METHODS, MISSING_OPTIONS, NULLS,
                               RESAMPLING_METHODS, DataError, OptionError, OptionTypeError, check_alpha, check_bool,
                               check_choice, check_count, check_memory, check_method, check_missing, check_null,
                               check_option, check_seed, format_bytes, is_bool, is_integer)

__all__ = ["OptionError", "OptionTypeError", "DataError", "is_bool", "is_integer", "check_alpha", "check_count", "finite_vector",
           "check_seed", "resolve_seed", "check_bool", "check_choice",
           "check_missing", "check_null", "check_method", "MISSING_OPTIONS", "NULLS", "DEFAULT_NULL", "METHODS", "row_values",
           "DEFAULT_DRAWS", "DEFAULT_SEED",
           "RESAMPLING_METHODS", "MAX_BYTES", "check_memory", "format_bytes",
           "check_weights", "check_prevalence"]

def resolve_seed(rng):
    """``(Generator, seed to record)`` from an ``rng=`` argument, for results that must be reproducible.

    ``None`` is the default seed :data:`calibtest.options.DEFAULT_SEED` (0),
    recorded, so a call left at its default gives the same numbers in any
    process; an int seed s gives ``default_rng(s)``; a Generator is used as it
    is and recorded as ``"Generator"``.
    """
    rng = check_seed(rng)
    if rng is None:
        rng = DEFAULT_SEED
    if isinstance(rng, np.random.Generator):
        return rng, "Generator"
    return np.random.default_rng(int(rng)), int(rng)


def finite_vector(values, name: str) -> np.ndarray:
    """``values`` as a one-dimensional float64 array of finite numbers.

    Raises
    ------
    TypeError
        Non-numeric (or boolean) values.
    DataError (a ValueError)
        More than one dimension, or NaN or infinite values (naming ``name``, the count and the first row).
    """
    arr = np.asarray(values)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != 1:
        raise DataError(f"{name} must be one-dimensional, got shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        kind = "missing (NaN)" if np.isnan(arr[bad]).any() else "infinite"
        raise DataError(f"{name} has {int(bad.sum())} {kind} values (first at row {int(np.flatnonzero(bad)[0])}); "
                        "it must be finite")
    return arr


def check_weights(weights, name: str = "weights") -> np.ndarray:
    """Case weights as a float64 array: one-dimensional, finite, non-negative, not all zero.

    Raises
    ------
    TypeError
        Non-numeric (or boolean) weights.
    DataError (a ValueError)
        NaN, infinite or negative weights, or all weights zero (naming ``name``).
    """
    arr = finite_vector(weights, name)
    if (arr < 0).any():
        raise DataError(f"{name} must be non-negative: {int((arr < 0).sum())} values are negative "
                         f"(first at row {int(np.flatnonzero(arr < 0)[0])})")
    if not (arr > 0).any():
        raise DataError(f"{name} are all zero")
    return arr


def check_prevalence(prevalence, name: str = "prevalence"):
    """A population prevalence in the open interval (0, 1), or None (the option is nullable)."""
    return check_option("prevalence", prevalence, name)


def row_values(spec, data, n_input: int, name: str):
    """Values of a row-wise extra argument (``weights=``, ``by=``): a column of ``data`` or an array.

    Parameters
    ----------
    spec : str or array_like
        A column name of ``data`` (formula use) or one value per input row.
    data : DataFrame, dict or None
    n_input : int
        Rows of the input before missing rows were dropped.
    name : str
        The argument's name, for messages.

    Raises
    ------
    DataError (a ValueError)
        An unknown column, or a length other than ``n_input``.
    """
    if isinstance(spec, str):
        if data is None or not hasattr(data, "__getitem__"):
            raise DataError(f"{name}={spec!r} names a column, which needs a formula with data=; "
                             f"with y=/probs= give {name} as an array")
        try:
            values = data[spec]
        except (KeyError, IndexError, TypeError):
            raise DataError(f"{name}={spec!r} is not a column of data") from None
    else:
        values = spec
    values = np.asarray(values.to_numpy() if hasattr(values, "to_numpy") else values)
    if values.ndim != 1 or values.shape[0] != n_input:
        raise DataError(f"{name} must have one value per row of the data ({n_input}), got shape {values.shape}")
    return values
