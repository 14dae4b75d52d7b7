"""Display helpers shared by every result type: numbers, JSON, mode names, model names, calls, hashes.

Results store exact numbers; these helpers round only when something is
rendered (summaries, reports, the CLI).  This module imports only numpy and
the standard library, so every layer may use it.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np


__all__ = ["fmt", "fmt_p", "json_safe", "MODES", "mode_text", "mode_description", "model_name", "Call", "record_call", "describe_data", "sha256_file"]

#: Each calibration target: a short name (summaries) and a sentence (reports).
MODES = {
    "binary": ("binary (E[y | p] = p)", "calibration of p = P(y = 1): E[y | p] = p"),
    "top1": ("top-1 confidence", "confidence calibration: P(correct | confidence) = confidence"),
    "topk": ("top-1-to-k", "top-1-to-k calibration of the sorted top-k probability vector"),
    "full": ("full (canonical, k = K)", "full (canonical) calibration of the whole probability vector"),
}


def mode_text(mode: str, k: int | None = None) -> str:
    """The short name of a target, with ``(k = ...)`` for top-k."""
    return MODES[mode][0] + (f" (k = {k})" if mode == "topk" else "") if mode in MODES else mode


def mode_description(mode: str) -> str:
    """The sentence describing a target (reports)."""
    return MODES[mode][1] if mode in MODES else mode


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


def fmt_p(p, digits: int = 4) -> str:
    """A p-value for display: :func:`fmt`, or ``"< 1e-300"`` when it underflowed to 0."""
    if p is not None and p == 0:
        return "< 1e-300"
    return fmt(p, digits)


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
