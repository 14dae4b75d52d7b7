"""Display helpers shared by every result type: numbers, JSON, model names, calls, hashes.

Results store exact numbers; these helpers round only when something is
rendered (summaries, reports, the CLI).  This module imports only numpy and
the standard library, so every layer may use it.
"""
from __future__ import annotations

import hashlib
import math
import warnings
from dataclasses import dataclass, field

import numpy as np


__all__ = ["fmt", "fmt_p", "json_safe", "model_name", "Call", "record_call", "describe_data",
           "sha256_file", "ConclusionText", "conclusion_property",
           "fmt_interval", "interval_verdict"]


def fmt(x, digits: int = 6) -> str:
    """Display a number with ``digits`` significant digits (``""`` for None, ``nan`` for NaN)."""
    if x is None:
        return ""
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if math.isnan(x):
        return "nan"
    if x == 0:
        return "0"
    return f"{x:.{digits}g}"


def fmt_interval(lower, upper, lower_open: bool = False, digits: int = 4) -> str:
    """An interval as every table and sentence shows it: ``[l, u]``, or ``(0, u]`` when it is open at 0.

    The one writer of an interval's text (``docs/conventions.md``, "The
    interval"): a set that excludes 0 although its lower end is 0 is
    ``(0, u]``, so that a table never shows a rejecting interval as if it
    held 0.  Missing ends (None, NaN) give ``"—"``.

    Examples
    --------
    >>> fmt_interval(0.0, 0.1146, lower_open=True)
    '(0, 0.1146]'
    >>> fmt_interval(0.0, 0.1146)
    '[0, 0.1146]'
    """
    if lower is None or upper is None or (isinstance(lower, float) and math.isnan(lower)):
        return "—"
    return f"{'(' if lower_open else '['}{fmt(lower, digits)}, {fmt(upper, digits)}]"


def interval_verdict(contains_zero: bool) -> str:
    """The verdict shown beside an interval of ECE^2 or ECE: ``"contains 0"`` or ``"excludes 0"``."""
    return "contains 0" if contains_zero else "excludes 0"


def fmt_p(p, digits: int = 4) -> str:
    """A p-value for display: :func:`fmt`, or ``"< 1e-300"`` when it underflowed to 0."""
    if p is not None and p == 0:
        return "< 1e-300"
    return fmt(p, digits)


def _warn_conclusion_text() -> None:
    warnings.warn("reading `conclusion` as a string is deprecated: call it, `res.conclusion()`, as on every "
                  "result (a method everywhere)", FutureWarning, stacklevel=3)


def _warning(name: str):
    plain = getattr(str, name)

    def method(self, *args, **kwargs):
        _warn_conclusion_text()
        return plain(self, *args, **kwargs)

    method.__name__ = name
    return method


class ConclusionText(str):
    """A result's conclusion: call it (``res.conclusion()``) for the text; reading it as a string is deprecated.

    ``conclusion`` is a method on every result; results where it used to be
    a string attribute or property (``EvidenceResult``, the acceptance
    results) return this, so ``res.conclusion()`` gives the plain string and
    the former ``res.conclusion`` still works as a string, with a
    ``FutureWarning`` when it is used as one (printed, formatted, compared,
    searched, concatenated, or a string method called).

    Examples
    --------
    >>> text = ConclusionText("No evidence of miscalibration.")
    >>> text()
    'No evidence of miscalibration.'
    >>> type(text()).__name__
    'str'
    """

    __slots__ = ()

    def __call__(self) -> str:
        """The conclusion as a plain string."""
        return str.__str__(self)

    def __getattribute__(self, name):
        if not name.startswith("_") and name in _STR_METHODS:
            _warn_conclusion_text()
        return str.__getattribute__(self, name)

    def __hash__(self) -> int:
        return str.__hash__(self)

    def __repr__(self) -> str:
        return str.__repr__(self)


def conclusion_property(summary: str) -> property:
    """The ``conclusion`` of a result whose sentence is written by its ``_conclusion()``: a
    :class:`ConclusionText`, so that ``r.conclusion()`` is the text (and reading it as a string still works,
    with a ``FutureWarning``); ``summary`` is the property's first line."""
    return property(lambda self: ConclusionText(self._conclusion()),
                    doc=f"{summary}\n\nA method, as on every result (reading it as a string still works, with a "
                        "``FutureWarning``).")


_STR_METHODS = frozenset(name for name in dir(str) if not name.startswith("_"))
for _name in ("__str__", "__format__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__contains__",
              "__add__", "__radd__", "__mod__", "__mul__", "__len__", "__getitem__", "__iter__"):
    if hasattr(str, _name):
        setattr(ConclusionText, _name, _warning(_name))
del _name


def p_equals(p, digits: int = 4) -> str:
    """A p-value in a sentence: ``"p = 0.0312"``, or ``"p < 1e-300"`` when it underflowed to 0.

    The one writer of "p = ..." in text, so that :func:`fmt_p`'s ``"< 1e-300"``
    never follows an equals sign ("p = < 1e-300").
    """
    text = fmt_p(p, digits)
    return "p " + text if text.startswith("<") else "p = " + text


def json_safe(v):
    """A JSON-safe copy: numpy scalars to Python, NaN and infinities to None, containers recursively."""
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        v = float(v)
        return None if math.isnan(v) or math.isinf(v) else v
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    if isinstance(v, dict):
        return {str(k): json_safe(x) for k, x in v.items()}
    return v


def model_name(formula: str | None, prob_names=(), default: str = "model", name: str | None = None) -> str:
    """A model's display name: ``name`` if given, else the right-hand side of its formula, else its columns.

    Array input without column names (``probs``, ``probs[:, 0]``, ...) is shown as ``probs``.
    ``name`` is the name a caller gave the model (a result's ``model_label``).
    """
    if name:
        return str(name)
    if formula and "~" in formula:
        return formula.split("~", 1)[1].strip()
    names = [str(nm) for nm in prob_names or ()]
    if names and all(nm.startswith("probs[") for nm in names):
        return "probs"
    return " + ".join(names) if names else default


def describe_data(data) -> str:
    """How a call's data argument is shown: ``<DataFrame 3183x2>``, a file name, or ``...``."""
    shape = getattr(data, "shape", None)
    if shape is not None and len(shape) == 2:
        return f"<{type(data).__name__} {shape[0]}x{shape[1]}>"
    return "..."


@dataclass(frozen=True)
class Call:
    """The call that produced a result, stored as data and rendered on demand.

    Attributes
    ----------
    function : str
        ``"calib_ci"``, ``"tcal_test"``, ``"BinAccumulator"``, ...
    inputs : tuple of str
        The data arguments as displayed (``"'y ~ p'"``, ``"data=<DataFrame 100x2>"``).
    options : dict
        Options the user set (name to value); ``None`` values are not shown.
    """

    function: str
    inputs: tuple = ()
    options: dict = field(default_factory=dict)

    def with_options(self, **options) -> "Call":
        """The call with ``options`` added (or replaced)."""
        return Call(self.function, self.inputs, {**self.options, **options})

    def __str__(self) -> str:
        parts = list(self.inputs) + [f"{k}={v!r}" for k, v in self.options.items() if v is not None]
        return f"{self.function}(" + ", ".join(parts) + ")"


def sha256_file(path, stop=None, block: int = 1 << 22) -> str | None:
    """SHA-256 hex digest of a file, read in ``block``-byte pieces (None if the event ``stop`` is set first)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            if stop is not None and stop.is_set():
                return None
            buf = fh.read(block)
            if not buf:
                return h.hexdigest()
            h.update(buf)


def record_call(function: str, formula, data, y, probs, options: dict) -> Call:
    """The call of a public function as data: its inputs as displayed and the options the user set."""
    if formula is not None:
        inputs = (repr(formula), f"data={describe_data(data)}")
    else:
        inputs = (f"y=<array n={np.shape(y)[0]}>", f"probs=<array shape={tuple(np.shape(probs))}>")
    return Call(function, inputs, dict(options))
