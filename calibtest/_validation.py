"""Argument checks shared by every public function, one copy of each.

Modelled on statsmodels' ``tools/validation`` and scipy's ``_iv`` helpers:
each check takes the value and the argument's name, returns the value in
canonical form (a Python ``int``/``float``/``bool``), and raises a
``TypeError`` for a value of the wrong kind or a ``ValueError`` for a value
out of range, with a message that names the argument.  Booleans are never
accepted as numbers (``True`` is an ``int`` in Python, but ``n_bins=True`` is
a mistake).

This module imports only numpy: every layer of the package may use it.
"""
from __future__ import annotations

import numpy as np

from calibtest.options import (OPTIONS, DataError, Option, OptionError, OptionTypeError, check_option, is_bool,
                               is_integer)

__all__ = ["OptionError", "OptionTypeError", "DataError", "is_bool", "is_integer", "check_alpha", "check_count",
           "check_seed", "resolve_seed", "check_bool", "check_choice",
           "check_missing", "check_null", "check_method", "MISSING_OPTIONS", "NULLS", "DEFAULT_NULL", "METHODS", "row_values",
           "DEFAULT_DRAWS",
           "RESAMPLING_METHODS", "MAX_BYTES", "check_memory", "format_bytes",
           "check_weights", "check_prevalence"]

# The option values below are those of the table of options (calibtest.options), not copies.
MISSING_OPTIONS = OPTIONS["missing"].choices
#: The options of ``null=``; :data:`DEFAULT_NULL` is the default of every function that takes it.
NULLS = OPTIONS["null"].choices
DEFAULT_NULL = OPTIONS["null"].default
#: Default number R of label draws of every conditional Monte Carlo test (``n_draws``, ``n_null_draws``).
#: With R = 999, (R + 1) alpha is an integer at alpha = 0.01, 0.05 and 0.10, so the Monte Carlo p-value
#: (1 + #{T*_r >= T}) / (R + 1) rejects with probability exactly alpha under H0 there; its Monte Carlo
#: standard error at p = 0.05 is 0.0069, and against R = 1999 the measured power differed by at most
#: 0.3 points (s.e. 0.3) on four designs (``vignettes/calib_test_study.md``).
DEFAULT_DRAWS = OPTIONS["n_draws"].default
METHODS = OPTIONS["method"].choices
RESAMPLING_METHODS = tuple(m for m in METHODS if m != "adjusted")


def check_alpha(alpha, name: str = "alpha") -> float:
    """Validate a significance level in the open interval (0, 1) and return it as a float."""
    return check_option("alpha", alpha, name)


def check_count(value, name: str, minimum: int = 1) -> int:
    """Check a count argument (an integer >= ``minimum``, not a bool) and return it as an int."""
    return Option(name, "count", None, "", minimum=minimum).check(value)


def check_seed(rng, name: str = "rng"):
    """Check a seed argument: None, a non-negative int seed or a ``numpy.random.Generator``; return it."""
    if rng is None or isinstance(rng, np.random.Generator):
        return rng
    return check_option("rng", rng, name)


def resolve_seed(rng):
    """``(Generator, seed to record)`` from an ``rng=`` argument, for results that must be reproducible.

    ``None`` draws a 63-bit seed from OS entropy and records it (``rng=seed``
    reproduces the run); an int seed s gives ``default_rng(s)``; a Generator is
    used as it is and recorded as ``"Generator"``.
    """
    rng = check_seed(rng)
    if rng is None:
        seed = int(np.random.SeedSequence().entropy) >> 65
        return np.random.default_rng(seed), seed
    if isinstance(rng, np.random.Generator):
        return rng, "Generator"
    return np.random.default_rng(int(rng)), int(rng)


def check_bool(value, name: str, *, allow_none: bool = False):
    """Check a flag: ``True`` or ``False`` (or ``None`` when ``allow_none``); return it as a bool."""
    return Option(name, "flag", None, "", nullable=allow_none).check(value)


def check_choice(value, name: str, choices) -> str:
    """Check that ``value`` is one of the strings ``choices`` and return it."""
    return Option(name, "choice", None, "", choices=tuple(choices)).check(value)


def check_missing(missing) -> str:
    """The missing-value rule: ``"raise"`` or ``"drop"``."""
    return check_option("missing", missing)


def check_null(null, n_null_draws=DEFAULT_DRAWS, rng=None) -> None:
    """Validate ``null=``, ``n_null_draws=`` and ``rng=`` of the finite-sample nulls."""
    check_option("null", null)
    check_option("n_null_draws", n_null_draws)
    check_memory(8.0 * n_null_draws, f"n_null_draws={n_null_draws} (one statistic per label draw)",
                 "lower n_null_draws: the Monte Carlo p-value's resolution is 1 / (n_null_draws + 1)")
    check_seed(rng)


def check_method(method, n_resamples, rng=None, progress=None) -> None:
    """Validate ``method=``, ``n_resamples=``, ``rng=`` and ``progress=`` of an interval."""
    check_option("method", method)
    if n_resamples is not None:
        if method == "adjusted":
            raise OptionError("n_resamples applies only to the resampling methods "
                              "(method='bootstrap', method='subsampling' or method='hulc')")
        check_option("n_resamples", n_resamples)
        check_memory(16.0 * n_resamples, f"n_resamples={n_resamples} (the resampled statistics)",
                     "lower n_resamples")
    check_seed(rng)
    check_bool(progress, "progress", allow_none=True)


#: Largest working memory a single step may ask for before it is refused (2 GiB).
MAX_BYTES = 2 ** 31


def format_bytes(nbytes: float) -> str:
    """``1.9 GiB``, ``340 MiB``, ... for messages."""
    for unit, size in (("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{int(nbytes)} bytes"


def check_memory(nbytes: float, what: str, how: str) -> None:
    """Refuse a step whose estimated memory exceeds :data:`MAX_BYTES`, saying how to lower it.

    Raises
    ------
    OptionError
        With the estimated size, the step (``what``) and the remedy (``how``).
    """
    if nbytes > MAX_BYTES:
        raise OptionError(f"{what} would need about {format_bytes(nbytes)} of memory (the limit is "
                          f"{format_bytes(MAX_BYTES)}); {how}")


def check_weights(weights, name: str = "weights") -> np.ndarray:
    """Case weights as a float64 array: one-dimensional, finite, non-negative, not all zero.

    Raises
    ------
    TypeError
        Non-numeric (or boolean) weights.
    DataError (a ValueError)
        NaN, infinite or negative weights, or all weights zero (naming ``name``).
    """
    arr = np.asarray(weights)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != 1:
        raise DataError(f"{name} must be one-dimensional, got shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise DataError(f"{name} must be finite: {int(bad.sum())} values are NaN or infinite "
                         f"(first at row {int(np.flatnonzero(bad)[0])})")
    if (arr < 0).any():
        raise DataError(f"{name} must be non-negative: {int((arr < 0).sum())} values are negative "
                         f"(first at row {int(np.flatnonzero(arr < 0)[0])})")
    if not (arr > 0).any():
        raise DataError(f"{name} are all zero")
    return arr


def check_prevalence(prevalence, name: str = "prevalence"):
    """A population prevalence in the open interval (0, 1), or None."""
    if prevalence is None:
        return None
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
