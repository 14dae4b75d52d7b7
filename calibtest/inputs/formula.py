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

import ast
import importlib
import types
from dataclasses import dataclass

import numpy as np
import pandas as pd
import patsy
from patsy import builtins as _patsy_builtins
from patsy.eval import VarLookupDict
from patsy.infix_parser import ParseNode
from patsy.origin import Origin
from patsy.parse_formula import parse_formula as _parse_tree


__all__ = ["FormulaData", "parse_formula", "column_values", "capture_env", "resolve_env", "formula_names", "formula_columns", "model_desc",
           "freeze_env", "thaw_env", "unresolved_names", "check_formula_names", "Surv", "surv_arguments",
           "is_survival_formula"]


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


def resolve_env(eval_env, depth: int = 0):
    """The evaluation environment of a public function's ``eval_env=`` argument, as an object.

    Public functions capture the environment once, where the user called
    them, and pass the object on; nothing below them counts frames.

    Parameters
    ----------
    eval_env : int, dict or patsy.EvalEnvironment
        An int is a number of frames above the public function's caller
        (patsy semantics: 0 is the caller); a dict is a namespace of
        variables; an ``EvalEnvironment`` is used as it is.
    depth : int
        Frames between this call and the user's call (0: called directly by
        the public function).

    Raises
    ------
    TypeError
        ``eval_env`` is none of these (a bool is not a frame count).
    """
    if isinstance(eval_env, patsy.EvalEnvironment):
        return eval_env
    if isinstance(eval_env, dict):
        return patsy.EvalEnvironment([eval_env])
    if isinstance(eval_env, bool) or not isinstance(eval_env, (int, np.integer)) or eval_env < 0:
        # a plain TypeError: eval_env is an argument of the Python functions only (the CLI passes a dict)
        raise TypeError(f"eval_env must be a non-negative integer (frames above the caller), a dict of "
                        f"variables or a patsy EvalEnvironment, got {eval_env!r}")
    return patsy.EvalEnvironment.capture(int(eval_env) + depth + 2)


def _single_factor(term, side: str, formula: str) -> str:
    if len(term.factors) != 1:
        raise ValueError(f"formula {formula!r}: interaction terms are not supported on the {side} "
                         f"side ({term.name()}); list probability columns with '+'")
    return term.factors[0].code


def column_values(value) -> np.ndarray:
    """A column as a numpy array; pandas' nullable dtypes give floats with NaN for ``pd.NA``.

    ``boolean``, ``Int64``, ``Float64`` and the other nullable numeric dtypes
    hold ``pd.NA`` for a missing value, which numpy sees as an object; as
    floats (0/1 for booleans) with NaN the missing-value rule applies to them
    as to any NaN.
    """
    dtype = getattr(value, "dtype", None)
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and (
            pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype)):
        return np.asarray(pd.array(value).to_numpy(dtype=np.float64, na_value=np.nan))
    return np.asarray(value.to_numpy() if isinstance(value, (pd.Series, pd.Index)) else value)


def Surv(time, event) -> np.ndarray:  # noqa: N802 (the name of R's survival::Surv, as users write it)
    """A survival outcome in a formula, ``"Surv(time, event) ~ risk"``: an (n, 2) array of times and events.

    Known inside every formula without an import (as patsy's ``I`` and
    ``Q``); the times and the 0/1 events are validated by the survival
    analysis, which also needs ``horizon=``.  ``Surv(time, status == 2)``
    declares which code is the event.
    """
    columns = [column_values(time), column_values(event)]
    for values, name in zip(columns, ("time", "event")):
        if values.ndim != 1:
            raise ValueError(f"Surv(): {name} must be one column, got shape {values.shape}")
        if values.dtype.kind not in "biuf":
            raise TypeError(f"Surv(): {name} must be numeric, got dtype {values.dtype}")
    if columns[0].shape != columns[1].shape:
        raise ValueError(f"Surv(): time and event have different lengths ({columns[0].shape[0]} and "
                         f"{columns[1].shape[0]})")
    return np.column_stack([c.astype(np.float64) for c in columns])


def surv_arguments(code: str) -> tuple[str, str] | None:
    """The codes of the time and event of an outcome ``Surv(time, event)``; None for another outcome.

    Examples
    --------
    >>> surv_arguments("Surv(futime, status == 2)")
    ('futime', 'status == 2')
    """
    try:
        node = ast.parse(code, mode="eval").body
    except SyntaxError:
        return None
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Surv"
            and len(node.args) == 2 and not node.keywords):
        return ast.unparse(node.args[0]), ast.unparse(node.args[1])
    return None


def is_survival_formula(formula) -> bool:
    """Whether ``formula`` is a string whose outcome is ``Surv(...)`` (a survival outcome).

    Examples
    --------
    >>> is_survival_formula("Surv(time, event) ~ risk"), is_survival_formula("y ~ p")
    (True, False)
    """
    if not isinstance(formula, str) or "~" not in formula:
        return False
    try:
        node = ast.parse(formula.split("~", 1)[0].strip(), mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Surv"


def _evaluate(code: str, env, namespace, formula: str) -> np.ndarray:
    try:
        value = env.eval(code, inner_namespace=namespace)
    except NameError as exc:
        missing = str(exc).split("'")[1] if "'" in str(exc) else code
        raise ValueError(f"formula {formula!r} names column {missing!r}, which is not in data") from exc
    except Exception as exc:  # evaluation errors inside user expressions
        raise ValueError(f"formula {formula!r}: could not evaluate {code!r}: {exc}") from exc
    return column_values(value)


def _balanced(node):
    """``node`` with every chain of binary ``+`` rebuilt as a balanced tree of the same operands, in order.

    patsy parses ``a + b + c + ...`` into a left-deep tree, one level per
    ``+``, and evaluates it recursively: a probability matrix of a few
    hundred columns exceeds Python's recursion limit.  ``+`` of terms is
    associative in patsy (terms concatenated in order, first occurrence kept;
    the intercept is that of the last operand that sets one), except that
    ``x + 0`` removes the intercept only when ``0`` is the right operand of
    its own ``+``: a chain holding a ``0`` operand is left as it is.  The
    chain is walked with a loop, so its length costs no recursion; the depth
    of the balanced tree is log2 of the number of terms.
    """
    if not isinstance(node, ParseNode):
        return node
    if node.type != "+" or len(node.args) != 2:
        return ParseNode(node.type, node.token, [_balanced(a) for a in node.args], node.origin)
    operands = []
    cur = node
    while isinstance(cur, ParseNode) and cur.type == "+" and len(cur.args) == 2:
        operands.append(cur.args[1])
        cur = cur.args[0]
    operands.append(cur)
    operands = [_balanced(o) for o in reversed(operands)]
    if any(isinstance(o, ParseNode) and o.type == "ZERO" for o in operands):
        return ParseNode(node.type, node.token, [_balanced(a) for a in node.args], node.origin)
    while len(operands) > 1:  # pair neighbours level by level: the order of the operands is kept
        paired = [ParseNode("+", node.token, [left, right], Origin.combine([left.origin, right.origin]))
                  for left, right in zip(operands[::2], operands[1::2])]
        operands = paired + operands[len(paired) * 2:]
    return operands[0]


def model_desc(formula: str) -> patsy.ModelDesc:
    """patsy's :class:`~patsy.ModelDesc` of ``formula``, for any number of ``+`` terms.

    patsy's own ``ModelDesc.from_formula`` recurses once per ``+`` and fails
    with a RecursionError between 300 and 500 terms; the same parse tree with
    its sums balanced (:func:`_balanced`) gives the same description.

    Raises
    ------
    TypeError
        ``formula`` is not a string.
    ValueError
        ``formula`` does not parse.
    """
    if not isinstance(formula, str):
        raise TypeError(f"formula must be a string such as 'y ~ p', got {type(formula).__name__}")
    try:
        return patsy.ModelDesc.from_formula(_balanced(_parse_tree(formula)))
    except patsy.PatsyError as exc:
        raise ValueError(f"could not parse formula {formula!r}: {exc}") from exc


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
    desc = model_desc(formula)
    lhs = [t for t in desc.lhs_termlist if t.factors]
    rhs = [t for t in desc.rhs_termlist if t.factors]
    if len(lhs) != 1:
        raise ValueError(f"formula {formula!r} must have exactly one outcome on the left of '~'")
    if not rhs:
        raise ValueError(f"formula {formula!r} names no probability column on the right of '~'")
    # columns first, then the caller's variables, then patsy's builtins (I, Q, ...) last,
    # as patsy itself does: a caller variable named like a builtin is not hidden
    namespace = VarLookupDict([data])
    env = env.with_outer_namespace({**vars(_patsy_builtins), "Surv": Surv})
    y_code = _single_factor(lhs[0], "left", formula)
    prob_codes = [_single_factor(t, "right", formula) for t in rhs]
    y = _evaluate(y_code, env, namespace, formula)
    cols = [_evaluate(code, env, namespace, formula) for code in prob_codes]
    n = len(data) if isinstance(data, pd.DataFrame) else len(y)
    survival = surv_arguments(y_code) is not None and y.ndim == 2 and y.shape[1] == 2
    for code, col in zip([y_code] + prob_codes, [y] + cols):
        if code == y_code and survival:  # Surv(time, event): two columns
            col = col[:, 0]
        if col.ndim != 1 or col.shape[0] != n:
            raise ValueError(f"formula term {code!r} must give one value per row ({n}), got shape {col.shape}")
        if code != y_code and col.dtype.kind not in "iuf":
            raise TypeError(f"probability column {code!r} must be numeric, got dtype {col.dtype}")
    probs = np.column_stack([c.astype(np.float64) for c in cols])
    return FormulaData(y=y, probs=probs, y_name=y_code, prob_names=prob_codes)


def _factor_codes(formula: str) -> list[str]:
    """The factor codes of both sides of ``formula`` (no evaluation)."""
    desc = model_desc(formula)
    return [f.code for t in list(desc.lhs_termlist) + list(desc.rhs_termlist) for f in t.factors]


def formula_names(formula: str) -> list[str]:
    """Every name a formula refers to (each once), without evaluating it.

    Python names in the factor codes (``"np"`` and ``"x"`` in ``np.log(x)``)
    and the column names quoted with patsy's ``Q("odd name")``; the ``Q``
    itself is not listed.  Used to read only the needed columns of a file and
    to ship only the needed variables of the caller's environment to workers.
    """
    names: list[str] = []
    for code in _factor_codes(formula):
        quoted_calls = set()  # ast.walk is breadth-first: a call is seen before its function name
        for node in ast.walk(ast.parse(code, mode="eval")):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Q"
                    and len(node.args) == 1 and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)):
                quoted_calls.add(id(node.func))
                names.append(node.args[0].value)
            elif isinstance(node, ast.Name) and id(node) not in quoted_calls:
                names.append(node.id)
    return list(dict.fromkeys(names))


def formula_columns(formula: str, columns) -> list[str]:
    """The entries of ``columns`` (a file's or frame's column names) that ``formula`` uses.

    Examples
    --------
    >>> formula_columns("correct ~ I(conf / 100)", ["id", "conf", "correct"])
    ['correct', 'conf']
    """
    available = {str(c): c for c in columns}
    return [available[nm] for nm in formula_names(formula) if nm in available]


@dataclass(frozen=True)
class _ModuleRef:
    """A module in a frozen namespace, by name (modules do not pickle; ``np`` is re-imported on thawing)."""

    name: str


def freeze_env(formula: str, env, columns=()) -> dict:
    """A picklable namespace: the variables of ``env`` that ``formula`` uses and ``columns`` do not hold.

    patsy's ``EvalEnvironment`` cannot be pickled; this dict can be shipped to
    workers (standard ``pickle`` or Dask's) and turned back into an environment
    with :func:`thaw_env`.  Modules such as ``np`` travel by name and are
    imported again there; functions travel as pickle sends them (by reference).
    """
    skip = {str(c) for c in columns}  # columns shadow the environment
    out = {}
    for nm in formula_names(formula):
        if nm in skip:
            continue
        try:
            value = env.namespace[nm]
        except KeyError:
            continue  # a Python builtin (abs, round) or a name that will fail to evaluate with a clear error
        out[nm] = _ModuleRef(value.__name__) if isinstance(value, types.ModuleType) else value
    return out


def thaw_env(namespace: dict):
    """An evaluation environment made of ``namespace`` only (inverse of :func:`freeze_env`)."""
    return patsy.EvalEnvironment([{nm: importlib.import_module(v.name) if isinstance(v, _ModuleRef) else v
                                   for nm, v in namespace.items()}])


def unresolved_names(formula: str, columns, env) -> list[str]:
    """Formula names that are neither in ``columns``, nor patsy or Python builtins, nor variables of ``env``."""
    import builtins
    known = ({str(c) for c in columns} | set(vars(_patsy_builtins)) | {"Surv"}
             | set(freeze_env(formula, env, columns)))
    return [nm for nm in formula_names(formula) if nm not in known and not hasattr(builtins, nm)]


def check_formula_names(formula: str, columns, env, where: str) -> None:
    """Raise a ValueError naming the first formula name that is neither a column nor a variable."""
    bad = unresolved_names(formula, columns, env)
    if bad:
        shown = ", ".join(map(repr, list(columns)[:20])) + (", ..." if len(columns) > 20 else "")
        raise ValueError(f"formula {formula!r} names column {bad[0]!r}, which is not in {where} "
                         f"(columns: {shown})")
