"""Formula front end: the only module that imports patsy.

``"y ~ p"`` (binary or top-1) and ``"label ~ p0 + p1 + p2"`` (a probability
matrix) are parsed with :class:`patsy.ModelDesc`; each side's factors are
evaluated with patsy's :class:`~patsy.EvalEnvironment`, so ``I(p / 100)``,
``Q("odd name")`` and functions of columns (``np.exp(logit)``) work as in
statsmodels.  The intercept is not a probability column.  Factors are
evaluated as raw values (no categorical coding, no row dropping): missing
values are the caller's decision (``missing=``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import patsy
from patsy import builtins as _patsy_builtins
from patsy.eval import VarLookupDict

__all__ = ["FormulaData", "parse_formula", "capture_env"]


@dataclass(frozen=True, eq=False)
class FormulaData:
    """Arrays evaluated from a formula.

    Attributes
    ----------
    y : ndarray, shape (n,)
        The left-hand side, as evaluated (labels in any dtype).
    probs : ndarray, shape (n, K)
        The right-hand side columns, float64.
    y_name : str
    prob_names : list of str
        The right-hand side factors as written (e.g. ``"p0"``, ``"I(p / 100)"``).
    """

    y: np.ndarray
    probs: np.ndarray
    y_name: str
    prob_names: list


def capture_env(depth: int):
    """The caller's evaluation environment, ``depth`` frames up (patsy semantics)."""
    return patsy.EvalEnvironment.capture(depth + 1)


def _single_factor(term, side: str, formula: str) -> str:
    if len(term.factors) != 1:
        raise ValueError(f"formula {formula!r}: interaction terms are not supported on the {side} "
                         f"side ({term.name()}); list probability columns with '+'")
    return term.factors[0].code


def _evaluate(code: str, env, namespace, formula: str) -> np.ndarray:
    try:
        value = env.eval(code, inner_namespace=namespace)
    except NameError as exc:
        missing = str(exc).split("'")[1] if "'" in str(exc) else code
        raise ValueError(f"formula {formula!r} names column {missing!r}, which is not in data") from exc
    except Exception as exc:  # evaluation errors inside user expressions
        raise ValueError(f"formula {formula!r}: could not evaluate {code!r}: {exc}") from exc
    arr = np.asarray(value.to_numpy() if isinstance(value, (pd.Series, pd.Index)) else value)
    return arr


def parse_formula(formula: str, data, env) -> FormulaData:
    """Evaluate ``formula`` on ``data`` (a DataFrame or mapping of columns).

    Raises
    ------
    TypeError
        ``formula`` is not a string or ``data`` is not a DataFrame or mapping.
    ValueError
        Parse errors, a missing column, more than one outcome, no probability
        column, or columns of different lengths.
    """
    if not isinstance(formula, str):
        raise TypeError(f"formula must be a string such as 'y ~ p', got {type(formula).__name__}")
    if not isinstance(data, (pd.DataFrame, dict)):
        raise TypeError(f"data must be a pandas DataFrame or a dict of columns, got {type(data).__name__}")
    try:
        desc = patsy.ModelDesc.from_formula(formula)
    except patsy.PatsyError as exc:
        raise ValueError(f"could not parse formula {formula!r}: {exc}") from exc
    lhs = [t for t in desc.lhs_termlist if t.factors]
    rhs = [t for t in desc.rhs_termlist if t.factors]
    if len(lhs) != 1:
        raise ValueError(f"formula {formula!r} must have exactly one outcome on the left of '~'")
    if not rhs:
        raise ValueError(f"formula {formula!r} names no probability column on the right of '~'")
    namespace = VarLookupDict([data, vars(_patsy_builtins)])
    y_code = _single_factor(lhs[0], "left", formula)
    prob_codes = [_single_factor(t, "right", formula) for t in rhs]
    y = _evaluate(y_code, env, namespace, formula)
    cols = [_evaluate(code, env, namespace, formula) for code in prob_codes]
    n = len(data) if isinstance(data, pd.DataFrame) else len(y)
    for code, col in zip([y_code] + prob_codes, [y] + cols):
        if col.ndim != 1 or col.shape[0] != n:
            raise ValueError(f"formula term {code!r} must give one value per row ({n}), got shape {col.shape}")
        if code != y_code and col.dtype.kind not in "iuf":
            raise TypeError(f"probability column {code!r} must be numeric, got dtype {col.dtype}")
    probs = np.column_stack([c.astype(np.float64) for c in cols])
    return FormulaData(y=y, probs=probs, y_name=y_code, prob_names=prob_codes)
