"""Validate labels and probabilities and turn them into (Z, U) for a calibration target.

Three targets (``docs/conventions.md``, "Calibration targets"):

* ``binary``: one probability column ``p = P(y = 1)``; Z = p, U = y - p.
* ``top1``: one confidence column with ``n_classes = K``; Z = conf, U = correct - conf.
  A K-column matrix with ``k = 1`` gives the same target (confidence = row maximum).
* ``topk`` (1 < k < K): Z is the top-k probabilities sorted in non-increasing
  order, ties broken by the lower class index first (stable), and U is the
  label indicators of those k classes minus Z (paper, Section 2.2).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from fractions import Fraction

import numpy as np

from calibtest.options import OPTIONS, OptionError, check_option, is_integer

#: The ``k`` of top-k mode: the table's ``k`` option without ``'full'`` (full mode is prepared apart) and None.
_TOP_K = replace(OPTIONS["k"], choices=(), nullable=False)

__all__ = ["Target", "PreparedData", "prepare", "prepare_full", "is_full_request", "prepare_target",
           "ROW_SUM_TOL"]

#: Rows of a probability matrix must sum to 1 within this absolute tolerance.
ROW_SUM_TOL = 1e-6


class Target(str, Enum):
    """The calibration target of an analysis: what a consumer asks of it, decided here and nowhere else.

    A ``str`` (it equals ``"binary"``, ``"top1"``, ``"topk"`` or ``"full"``,
    and prints, formats, hashes and serialises to JSON as that string), so
    every text and ``to_dict()`` stays what it was; consumers ask its
    properties (:attr:`one_dimensional`, :attr:`full_calibration`, ...) in
    place of comparing strings.
    """

    BINARY = "binary"
    TOP1 = "top1"
    TOPK = "topk"
    FULL = "full"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    def __repr__(self) -> str:
        return repr(self.value)

    @property
    def binary(self) -> bool:
        """p = P(y = 1) of a binary outcome: the target of CITL, the calibration slope and val.prob."""
        return self is Target.BINARY

    @property
    def top1(self) -> bool:
        """The top-1 confidence of a K-class prediction (a binary outcome: the prediction is correct)."""
        return self is Target.TOP1

    @property
    def topk(self) -> bool:
        """The sorted top-k probabilities (1 < k < K)."""
        return self is Target.TOPK

    @property
    def full_calibration(self) -> bool:
        """The whole probability vector (k = K): the simplex partition, the complete label law of each row."""
        return self is Target.FULL

    @property
    def one_dimensional(self) -> bool:
        """One probability of a binary event (binary or top-1): the tests of binary outcomes apply (O/E, the
        Hosmer-Lemeshow test, the multi-scale test, label draws of one Bernoulli per row)."""
        return self in (Target.BINARY, Target.TOP1)

    @property
    def cube(self) -> bool:
        """Binned on the unit cube (binary, top-1, top-k), not on the simplex."""
        return self is not Target.FULL

    @property
    def has_recalibration_measures(self) -> bool:
        """CITL and the calibration slope exist (a binary outcome modelled by p)."""
        return self is Target.BINARY

    @classmethod
    def of(cls, mode: "str | Target") -> "Target":
        """The target named ``mode`` (a ``Target`` or its string); ``ValueError`` naming it otherwise."""
        try:
            return cls(mode)
        except ValueError:
            raise ValueError(f"unknown mode {mode!r}") from None

    def sorted_support(self, n_classes: int | None, k: int = 1) -> "tuple[int, Fraction]":
        """``(d, lower)``: the target's vector lives on {z_1 >= ... >= z_d >= 0, lower <= sum z <= 1}.

        The truncated Weyl chamber Delta(K, k) of the paper's eq. (5): binary
        d = 1, lower = 0 (the whole of [0, 1]); top-1 d = 1, lower = 1/K;
        top-k d = k, lower = k/K.  Full calibration lives on the simplex
        instead (``ValueError``).
        """
        if self is Target.FULL:
            raise ValueError("full calibration lives on the simplex, not on a truncated Weyl chamber")
        if self is Target.BINARY:
            return 1, Fraction(0)
        if n_classes is None:
            raise ValueError("n_classes is required for the top-1 and top-k modes")
        d = 1 if self is Target.TOP1 else k
        return d, Fraction(d, n_classes)

    def binned_dimension(self, k: int) -> int:
        """Dimension d of the binned space: K - 1 on the simplex (full calibration, k = K), k on the cube."""
        return k - 1 if self is Target.FULL else k

    def text(self, k: int | None = None) -> str:
        """The target's short name (summaries), with ``(k = ...)`` for top-k."""
        return _TARGET_WORDS[self][0] + (f" (k = {k})" if self is Target.TOPK else "")

    @property
    def description(self) -> str:
        """The sentence describing the target (reports)."""
        return _TARGET_WORDS[self][1]

    @property
    def event_words(self) -> str:
        """What an event of the target is, in words (binary and top-1)."""
        return "events (y = 1)" if self is Target.BINARY else "events (top-1 prediction correct)"


#: Each calibration target: a short name (summaries) and a sentence (reports).
_TARGET_WORDS = {
    Target.BINARY: ("binary (E[y | p] = p)", "calibration of p = P(y = 1): E[y | p] = p"),
    Target.TOP1: ("top-1 confidence", "confidence calibration: P(correct | confidence) = confidence"),
    Target.TOPK: ("top-1-to-k", "top-1-to-k calibration of the sorted top-k probability vector"),
    Target.FULL: ("full (canonical, k = K)", "full (canonical) calibration of the whole probability vector"),
}


@dataclass(frozen=True, eq=False)
class PreparedData:
    """Binned vectors and errors of every row, ready for binning.

    Attributes
    ----------
    z : ndarray, shape (n, d)
        The binned prediction vector (p, the confidence, or the sorted top-k).
    u : ndarray, shape (n, d)
        U = Y - Z.
    mode : Target
        ``binary``, ``top1``, ``topk`` or ``full`` (a string given is made a :class:`Target`).
    k : int
        Dimension d of the binned vector (1 for binary and top-1).
    n_classes : int or None
        K (None in binary mode).
    """

    z: np.ndarray
    u: np.ndarray
    mode: Target
    k: int
    n_classes: int | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", Target(self.mode))

    @property
    def n(self) -> int:
        return self.z.shape[0]

    @property
    def y(self) -> np.ndarray:
        """The label indicators Y = U + Z (exact 0/1 up to rounding)."""
        return self.u + self.z


def _as_float(values, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must be real, got dtype {arr.dtype}")
    return arr.astype(np.float64, copy=False)


def _check_probabilities(p: np.ndarray, name: str) -> None:
    lo, hi = p.min(), p.max()  # NaN propagates, inf exceeds 1: one check covers all
    if lo >= 0.0 and hi <= 1.0:
        return
    if not np.all(np.isfinite(p)):
        bad = np.argwhere(~np.isfinite(p))[0]
        what = "NaN" if np.isnan(p[tuple(bad)]) else "an infinite value"
        raise ValueError(f"{name} contains {what} (first at row {bad[0]})"
                         + ("; use missing='drop' to drop rows with NaN" if what == "NaN" else
                            "; infinite values are not missing values and cannot be dropped"))
    outside = np.argwhere((p < 0.0) | (p > 1.0))[0]
    hint = ""
    if lo >= 0.0 and hi <= 100.0:  # probabilities in percent
        hint = (f"; if these are percentages, divide by 100: I({name} / 100) in a formula (with arrays, pass "
                f"{name} / 100)")
    raise ValueError(f"{name} must lie in [0, 1]; found {float(p[tuple(outside)])!r} at row {outside[0]} "
                     f"(values range over [{float(lo)!r}, {float(hi)!r}])" + hint)


def _binary_labels(y, name: str, n: int) -> np.ndarray:
    arr = np.asarray(y)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{name} must be one-dimensional with {n} rows, got shape {arr.shape}")
    if arr.dtype == object or arr.dtype.kind in "USO":
        raise TypeError(f"{name} must hold 0/1 outcomes, got dtype {arr.dtype}" + _coding_hint(arr, name))
    if arr.dtype.kind in "biu":  # integers: a range check suffices
        if arr.size and (arr.min() < 0 or arr.max() > 1):
            bad = np.unique(arr[(arr != 0) & (arr != 1)])[:5]
            raise ValueError(f"{name} must be binary (0/1) in this mode; found values {bad.tolist()}"
                             + _coding_hint(arr, name))
        return arr.astype(np.float64)
    arr = _as_float(arr, name)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values; use missing='drop' to drop rows with NaN")
    if not np.all((arr == 0.0) | (arr == 1.0)):
        bad = np.unique(arr[(arr != 0.0) & (arr != 1.0)])[:5]
        raise ValueError(f"{name} must be binary (0/1) in this mode; found values {bad.tolist()}"
                         + _coding_hint(arr, name))
    return arr


def _coding_hint(arr: np.ndarray, name: str) -> str:
    """How to code an outcome with two values (yes/no, 1/2, ...) as 0/1: a clause for the error message.

    calibtest does not guess which value is the event: the message says how
    to name it, in a formula (``I(y == "yes")``) and for arrays.
    """
    try:
        values = np.unique(arr.astype(str) if arr.dtype == object else arr)
    except TypeError:  # mixed types that cannot be sorted
        return ""
    if values.size != 2:
        return (f" ({values.size} distinct values); code the event as 0/1, e.g. I({name} == <event value>) on the "
                "left of a formula") if values.size > 2 else ""
    event = values[1].item() if hasattr(values[1], "item") else values[1]
    return (f"; {name} takes the two values {[v.item() if hasattr(v, 'item') else v for v in values]}: name the "
            f"event, e.g. I({name} == {event!r}) on the left of a formula (with arrays, pass y == {event!r})")


def _class_codes(y, n: int, class_names, name: str) -> np.ndarray:
    """Integer class codes 0..K-1 from codes or from values equal to the column names."""
    K = len(class_names)
    arr = np.asarray(y)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{name} must be one-dimensional with {n} rows, got shape {arr.shape}")
    if arr.dtype == bool:
        raise TypeError(f"{name} holds True/False, but with a probability matrix it must hold class labels: "
                        f"integer codes 0..{K - 1} in column order, or values equal to the column names")
    if arr.dtype.kind in "USO":
        lookup = {str(c): j for j, c in enumerate(class_names)}
        uniq, inv = np.unique(arr.astype(str), return_inverse=True)
        codes = np.array([lookup.get(u, -1) for u in uniq], dtype=np.int64)[inv.ravel()]
        if np.any(codes < 0):
            bad = sorted(set(uniq[[lookup.get(u, -1) < 0 for u in uniq]].tolist()))[:5]
            raise ValueError(f"{name} has labels {bad} that are not among the probability columns "
                             f"{[str(c) for c in class_names]}")
        return codes
    arr = _as_float(arr, name)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values; use missing='drop' to drop rows with NaN")
    if not np.all(arr == np.round(arr)):
        raise ValueError(f"{name} must hold integer class codes 0..{K - 1}")
    if arr.min() < 0 or arr.max() > K - 1:
        raise ValueError(f"{name} has class codes outside 0..{K - 1} (found {arr.min():g}..{arr.max():g})")
    return arr.astype(np.int64)


def top_k_classes(P: np.ndarray, k: int) -> np.ndarray:
    """Classes of the k largest probabilities per row, in non-increasing order.

    Ties are broken by the lower class index first (``docs/conventions.md``,
    "Calibration targets").  For small k,
    k passes of ``argmax`` (which returns the first maximum) over a working copy
    whose chosen entries are set to -inf; otherwise a stable argsort.
    """
    if k > 4:
        return np.argsort(-P, axis=1, kind="stable")[:, :k]
    work = P.copy()
    rows = np.arange(P.shape[0])
    order = np.empty((P.shape[0], k), dtype=np.intp)
    for j in range(k):  # loop over the k ranks, not over rows
        order[:, j] = np.argmax(work, axis=1)
        work[rows, order[:, j]] = -np.inf
    return order


def check_k(k, n_classes: int) -> int:
    """Validate k for a K-column probability matrix (1 <= k < K).

    The integer >= 1 is the table's ``k`` option; this adds its interplay with K.
    """
    k = _TOP_K.check(k)
    if k >= n_classes:
        raise OptionError(f"k must be < K = {n_classes} (the number of probability columns) in top-k mode, "
                          f"got k={k}")
    return k


def prepare(y, probs, *, n_classes=None, k=None, class_names=None,
            y_name: str = "y", prob_names=None) -> PreparedData:
    """Validate inputs and compute the binned vector Z and the error U per row.

    Parameters
    ----------
    y : array_like, shape (n,)
        Outcomes: 0/1 in binary and top-1 modes; class codes 0..K-1 (or values
        equal to the column names ``class_names``) for a probability matrix.
    probs : array_like, shape (n,) or (n, K)
        One probability/confidence column or a K-column probability matrix whose
        rows sum to 1 within ``ROW_SUM_TOL`` = 1e-6.
    n_classes : int, optional
        K for a single confidence column (top-1 mode).  Without it a single
        column is the binary mode.
    k : int, optional
        Number of top classes for a probability matrix (default 1).
    """
    P = _as_float(probs, "probs")
    if P.ndim == 2 and P.shape[1] == 1:
        P = P[:, 0]
    if P.ndim not in (1, 2):
        raise ValueError(f"probs must be of shape (n,) or (n, K), got shape {P.shape}")
    n = P.shape[0]
    if n < 2:
        raise ValueError(f"need at least n = 2 rows, got {n}")
    if P.ndim == 1:
        return _prepare_one_column(y, P, n_classes, k, y_name, prob_names)
    return _prepare_matrix(y, P, n_classes, k, class_names, y_name, prob_names)


def _prepare_one_column(y, p, n_classes, k, y_name, prob_names) -> PreparedData:
    pname = prob_names[0] if prob_names else "probs"
    _check_probabilities(p, pname)
    if k not in (None, 1):
        raise ValueError(f"k={k!r} needs a probability matrix with one column per class; "
                         "a single column supports only k=1")
    yy = _binary_labels(y, y_name, p.shape[0])
    if n_classes is None:
        mode = "binary"
    else:
        n_classes = check_option("n_classes", n_classes)
        floor = 1.0 / n_classes
        if p.min() < floor - 1e-12:
            raise ValueError(
                f"{pname}: a top-1 confidence of a {n_classes}-class prediction cannot be below 1/K = "
                f"{floor:.6g} (found {p.min():.6g}); to check calibration of these numbers as "
                "probabilities of the outcome, omit n_classes (binary mode)")
        mode = "top1"
    z = p[:, None]
    return PreparedData(z=z, u=yy[:, None] - z, mode=Target(mode), k=1,
                        n_classes=None if n_classes is None else int(n_classes))


def _prepare_matrix(y, P, n_classes, k, class_names, y_name, prob_names) -> PreparedData:
    n, K = P.shape
    if K < 2:
        raise ValueError("probs needs at least 2 columns")
    if n_classes is not None and n_classes != K:
        raise ValueError(f"n_classes={n_classes} does not match the {K} probability columns")
    _check_probabilities(P, "probs" if not prob_names else "probability columns " + ", ".join(prob_names))
    dev = np.abs(P @ np.ones(K) - 1.0)
    if dev.max() > ROW_SUM_TOL:
        row = int(np.argmax(dev))
        raise ValueError(f"rows of the probability matrix must sum to 1 (tolerance {ROW_SUM_TOL:g}); "
                         f"row {row} sums to {P[row].sum():.10g}")
    k = check_k(1 if k is None else k, K)
    names = list(class_names) if class_names is not None else list(range(K))
    codes = _class_codes(y, n, names, y_name)
    order = top_k_classes(P, k)
    z = np.take_along_axis(P, order, axis=1)
    yk = (order == codes[:, None]).astype(np.float64)
    return PreparedData(z=z, u=yk - z, mode=Target.TOP1 if k == 1 else Target.TOPK, k=k, n_classes=K)


def is_full_request(k, probs: np.ndarray) -> bool:
    """True when ``k`` asks for full calibration (``"full"`` or K for K probability columns).

    Raises
    ------
    ValueError
        ``k="full"`` with a single probability column, or an unknown string.
    """
    if isinstance(k, str):
        if k != "full":
            raise ValueError(f"k must be an integer or 'full', got {k!r}")
        if np.ndim(probs) == 1 or (np.ndim(probs) == 2 and np.shape(probs)[1] == 1):
            raise ValueError(
                "k='full' needs a probability matrix with one column per class (K >= 2). With a single "
                "column p = P(y = 1), binary mode already is full calibration for K = 2: omit k (the "
                "paper's K = 2 full ECE^2 is twice the binary ECE^2)")
        return True
    if not is_integer(k):
        return False
    return np.ndim(probs) == 2 and np.shape(probs)[1] >= 2 and int(k) == np.shape(probs)[1]


def prepare_full(y, probs, *, n_classes=None, class_names=None, y_name: str = "y",
                 prob_names=None) -> PreparedData:
    """Validate a K-column probability matrix and labels; Z = probs, U = onehot(y) - Z.

    Parameters
    ----------
    y : array_like, shape (n,)
        Class codes 0..K-1 in column order, or values equal to ``class_names``.
    probs : array_like, shape (n, K)
        Probability rows summing to 1 within ``ROW_SUM_TOL``.
    n_classes : int, optional
        Must equal K when given.
    """
    P = np.asarray(probs, dtype=np.float64)
    if P.ndim != 2 or P.shape[1] < 2:
        raise ValueError(f"full calibration needs a probability matrix of shape (n, K) with K >= 2, "
                         f"got shape {P.shape}")
    n, K = P.shape
    if n < 2:
        raise ValueError(f"need at least n = 2 rows, got {n}")
    if n_classes is not None and n_classes != K:
        raise ValueError(f"n_classes={n_classes} does not match the {K} probability columns")
    _check_probabilities(P, "probs" if not prob_names else "probability columns " + ", ".join(map(str, prob_names)))
    dev = np.abs(P.sum(axis=1) - 1.0)
    if dev.max() > ROW_SUM_TOL:
        row = int(np.argmax(dev))
        raise ValueError(f"rows of the probability matrix must sum to 1 (tolerance {ROW_SUM_TOL:g}); "
                         f"row {row} sums to {P[row].sum():.10g}")
    names = list(class_names) if class_names is not None else list(range(K))
    codes = _class_codes(y, n, names, y_name)
    onehot = (codes[:, None] == np.arange(K)[None, :]).astype(np.float64)
    return PreparedData(z=P, u=onehot - P, mode=Target.FULL, k=K, n_classes=K)


def prepare_target(y, probs, *, n_classes=None, k=None, class_names=None, y_name: str = "y",
                   prob_names=()) -> PreparedData:
    """Z and U of the calibration target that ``k`` and the shape of ``probs`` ask for.

    Full calibration (``k="full"`` or k = K for a K-column matrix, see
    :func:`is_full_request`) goes to :func:`prepare_full`, every other target
    (binary, top-1, top-k) to :func:`prepare`.
    """
    if is_full_request(k, probs):
        return prepare_full(y, probs, n_classes=n_classes, class_names=class_names, y_name=y_name,
                            prob_names=prob_names)
    return prepare(y, probs, n_classes=n_classes, k=k, class_names=class_names, y_name=y_name,
                   prob_names=prob_names)
