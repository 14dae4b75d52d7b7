"""scikit-learn entry points: a reliability display with intervals, a metric, a scorer and cross-validation.

For the users who hold a fitted scikit-learn classifier and a held-out
``X, y`` rather than a data frame and a formula.  Everything here follows
scikit-learn's conventions (``y_true``, ``y_prob``, ``sample_weight``,
``pos_label``, class labels of any type, the Display API of
:class:`sklearn.calibration.CalibrationDisplay`) and goes through
:func:`calibtest.calib_ci`, so the numbers are those of the rest of
calibtest:

* :class:`CalibrationErrorDisplay` (``from_estimator``, ``from_predictions``,
  ``plot``): the reliability curve at display bins with Wilson intervals, and
  in its legend the interval for the ECE and the verdict; ``display.result_``
  is the :class:`~calibtest.CalibrationResult` it drew.
* :func:`ece_score` and :data:`ece_scorer` (for ``cross_val_score`` and
  ``GridSearchCV``: lower is better).
* :func:`cross_validate_calibration`: an interval per test fold and one for
  the out-of-fold predictions, with its summary.

Targets.  A 1-d ``y_prob`` (``predict_proba(X)[:, 1]``), or a 2-column one,
is binary: the probability of ``pos_label`` (calibration of p itself).  A
``(n, K)`` ``y_prob`` with K > 2 is multiclass, checked through its top-1
confidence (the largest probability of a row) against the correctness of the
top-1 class (``docs/conventions.md``, "Calibration targets").

scikit-learn is an optional dependency (``pip install "calibtest[sklearn]"``):
it is imported by this module only, and ``import calibtest`` does not load it.
"""
from __future__ import annotations

import dataclasses
import inspect
import numbers
import warnings
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

try:
    from sklearn import get_config
    from sklearn.base import clone
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import check_cv
    from sklearn.utils import _safe_indexing
    from sklearn.utils.metadata_routing import (MetadataRequest, MetadataRouter, MethodMapping,
                                                 process_routing)
    from sklearn.utils.validation import _check_method_params, check_is_fitted, has_fit_parameter
except ImportError as exc:  # pragma: no cover - exercised only without scikit-learn
    raise ImportError("calibtest.sklearn needs scikit-learn >= 1.4 (make_scorer with response_method): "
                      "pip install \"calibtest[sklearn]\"") from exc

from calibtest.display.format import fmt_interval, fmt_p, interval_verdict
from calibtest.inputs.validation import check_alpha
from calibtest.api.calib_ci import calib_ci
from calibtest.checks.evidence_table import figure_verdict, short_verdict
from calibtest.options import OptionError, check_option
from calibtest.reporting.plotting import curve_bins
from calibtest.ece.result import CalibrationResult
from calibtest.display.summary import CalibSummary, ResultDisplay

__all__ = ["CalibrationErrorDisplay", "ece_score", "ece_scorer", "cross_validate_calibration",
           "CrossValidatedCalibration", "calibration_target"]


# --------------------------------------------------------------------------- labels and predictions
@dataclass(frozen=True, eq=False)
class _Target:
    """What calib_ci is given for scikit-learn's ``y_true, y_prob``: outcomes, predictions and their meaning."""

    y: np.ndarray
    probs: pd.DataFrame
    kind: str  # "binary" or "top1"
    classes: np.ndarray
    pos_label: object

    @property
    def confidence(self) -> np.ndarray:
        """The predictions drawn: p of the positive class, or the top-1 confidence."""
        p = self.probs.to_numpy(np.float64)
        return p[:, 0] if self.kind == "binary" else p.max(axis=1)

    @property
    def outcome(self) -> np.ndarray:
        """0/1: the positive class (binary) or a correct top-1 class (multiclass)."""
        if self.kind == "binary":
            return self.y.astype(np.float64)
        return (np.argmax(self.probs.to_numpy(np.float64), axis=1) == self.y).astype(np.float64)


def _default_pos_label(classes: np.ndarray, pos_label):
    """The positive class: ``pos_label``, or 1 when the labels are {0, 1} or {-1, 1} (scikit-learn's rule)."""
    if pos_label is not None:
        return pos_label
    numeric = classes.dtype.kind in "biuf"
    if numeric and (set(classes.tolist()) <= {0, 1} or set(classes.tolist()) <= {-1, 1}):
        return 1
    raise ValueError(f"y_true takes the values {classes.tolist()}: pass pos_label= (the class whose probability "
                     "y_prob gives), or code y_true as 0/1")


def calibration_target(y_true, y_prob, *, pos_label=None, labels=None) -> _Target:
    """Outcomes and predictions for :func:`calibtest.calib_ci` from scikit-learn's ``y_true`` and ``y_prob``.

    Parameters
    ----------
    y_true : array_like of shape (n,)
        Class labels of any type (numbers, strings, booleans); no missing values.
    y_prob : array_like of shape (n,), (n, 1), (n, 2) or (n, K)
        ``predict_proba`` output: the probability of ``pos_label`` (one
        column), the two columns of a binary problem (in the order of
        ``labels``), or K > 2 columns (multiclass).
    pos_label : object, optional
        The positive class of a binary problem (default: 1 for labels in
        {0, 1} or {-1, 1}; with two columns, the second class).
    labels : array_like, optional
        The classes in the column order of a 2-d ``y_prob`` (default: the
        sorted labels of ``y_true``, the order of ``estimator.classes_``).

    Returns
    -------
    _Target
        ``y`` (0/1 for binary, class codes 0..K-1 for multiclass), ``probs``
        (a DataFrame whose columns name the classes), ``kind``
        (``"binary"`` or ``"top1"``), ``classes`` and ``pos_label``.

    Raises
    ------
    ValueError
        Missing labels, ``y_prob`` of the wrong shape, not finite or outside
        [0, 1], labels not among ``labels``, an unknown or missing
        ``pos_label``, more than two classes with a 1-d ``y_prob``.

    Examples
    --------
    Two columns: binary, the probability of the second class (``"b"``):

    >>> from calibtest.sklearn import calibration_target
    >>> t = calibration_target(["b", "a", "b"], [[0.3, 0.7], [0.6, 0.4], [0.2, 0.8]])
    >>> t.kind, str(t.pos_label), t.y.tolist(), t.confidence.tolist()
    ('binary', 'b', [1, 0, 1], [0.7, 0.4, 0.8])

    Three columns: the top-1 confidence and whether the top-1 class is right:

    >>> t = calibration_target([0, 2, 1], [[0.5, 0.3, 0.2], [0.1, 0.2, 0.7], [0.6, 0.3, 0.1]])
    >>> t.kind, t.confidence.tolist(), t.outcome.tolist()
    ('top1', [0.5, 0.7, 0.6], [1.0, 1.0, 0.0])
    """
    y_true = np.asarray(y_true)
    if y_true.ndim == 2 and y_true.shape[1] == 1:
        y_true = y_true[:, 0]
    if y_true.ndim != 1:
        raise ValueError(f"y_true must be one-dimensional, got shape {y_true.shape}")
    if bool(pd.isna(y_true).any()):
        raise ValueError(f"y_true has {int(pd.isna(y_true).sum())} missing values; drop those rows first")
    prob = np.asarray(y_prob)
    if prob.dtype.kind not in "biuf":
        raise TypeError(f"y_prob must be numeric, got dtype {prob.dtype}")
    prob = prob.astype(np.float64)
    if prob.ndim == 2 and prob.shape[1] == 1:
        prob = prob[:, 0]
    if prob.ndim not in (1, 2) or prob.shape[0] != y_true.shape[0]:
        raise ValueError(f"y_prob must have shape (n,) or (n, K) with n = len(y_true) = {y_true.shape[0]}, got "
                         f"{prob.shape}")
    if not np.all(np.isfinite(prob)):
        raise ValueError("y_prob has NaN or infinite values")
    if prob.size and (prob.min() < 0.0 or prob.max() > 1.0):
        raise ValueError(f"y_prob must lie in [0, 1] (probabilities from predict_proba); found values in "
                         f"[{prob.min():g}, {prob.max():g}]")
    if prob.ndim == 1:
        classes = np.unique(y_true)
        if classes.size > 2:
            raise ValueError(f"y_true has {classes.size} classes but y_prob has one column: a multiclass problem "
                             "needs the (n, K) matrix of predict_proba")
        pos = _default_pos_label(classes, pos_label)
        if classes.size == 2 and pos not in classes.tolist():
            raise ValueError(f"pos_label={pos!r} is not a label of y_true {classes.tolist()}")
        y01 = (y_true == pos).astype(np.int64)
        return _Target(y01, pd.DataFrame({"y_prob": prob}), "binary", classes, pos)
    classes = np.unique(y_true) if labels is None else np.asarray(labels)
    if classes.ndim != 1 or np.unique(classes).size != classes.size:
        raise ValueError("labels must be a one-dimensional list of distinct classes")
    K = prob.shape[1]
    if classes.size != K:
        raise ValueError(f"y_prob has {K} columns but {'labels has' if labels is not None else 'y_true has'} "
                         f"{classes.size} classes {classes.tolist()}: pass labels= (the estimator's classes_, in "
                         "the column order of y_prob)")
    order = np.argsort(classes, kind="stable")
    where = np.searchsorted(classes[order], y_true)
    where = np.minimum(where, K - 1)
    codes = order[where]
    unknown = classes[codes] != y_true
    if unknown.any():
        raise ValueError(f"y_true has labels {sorted(set(y_true[unknown].tolist()))[:5]} that are not among the "
                         f"classes {classes.tolist()} of y_prob's columns")
    if K == 2:
        pos = classes[1] if pos_label is None else pos_label
        if pos not in classes.tolist():
            raise ValueError(f"pos_label={pos!r} is not one of the classes {classes.tolist()}")
        j = classes.tolist().index(pos)
        return _Target((codes == j).astype(np.int64), pd.DataFrame({"y_prob": prob[:, j]}), "binary", classes, pos)
    names = [str(c) for c in classes]
    if len(set(names)) < len(names):
        names = [f"class {j}" for j in range(K)]
    return _Target(codes.astype(np.int64), pd.DataFrame(prob, columns=names), "top1", classes, None)


def _calib(target: _Target, sample_weight, **options) -> CalibrationResult:
    """calib_ci on a target, with ``sample_weight`` as case weights."""
    weights = None
    if sample_weight is not None:
        weights = np.asarray(sample_weight)
        if weights.ndim != 1 or weights.shape[0] != target.y.shape[0]:
            raise ValueError(f"sample_weight must have one value per row ({target.y.shape[0]}), got shape "
                             f"{weights.shape}")
    # no by=: calib_ci returns one CalibrationResult (its grouped result needs by=)
    return cast(CalibrationResult, calib_ci(y=target.y, probs=target.probs, weights=weights, **options))


def _estimator_probs(estimator, X) -> tuple[np.ndarray, np.ndarray]:
    """(predict_proba(X), classes_) of a fitted classifier."""
    if not hasattr(estimator, "predict_proba"):
        raise TypeError(f"estimator must be a classifier with predict_proba; {type(estimator).__name__} has none")
    check_is_fitted(estimator)
    classes = getattr(estimator, "classes_", None)
    if classes is None:
        raise TypeError(f"estimator must be a fitted classifier with classes_; {type(estimator).__name__} has none")
    return np.asarray(estimator.predict_proba(X)), np.asarray(classes)


# --------------------------------------------------------------------------- metric and scorer
def ece_score(y_true, y_prob, *, sample_weight=None, pos_label=None, labels=None, n_bins="auto",
              squared: bool = False) -> float:
    """The debiased l2 expected calibration error of probabilistic predictions (lower is better).

    The estimate of :func:`calibtest.calib_ci` (T, the debiased binned
    estimator of ECE^2, paper eq. (6)) for scikit-learn's ``y_true`` and
    ``y_prob``; for its interval and test use :func:`calibtest.calib_ci` or
    :class:`CalibrationErrorDisplay` (``display.result_``).

    Parameters
    ----------
    y_true : array_like of shape (n,)
        True labels (any type).
    y_prob : array_like of shape (n,) or (n, K)
        Probability of ``pos_label`` (binary), or ``predict_proba`` output
        (K = 2: binary via the column of ``pos_label``; K > 2: top-1).
    sample_weight : array_like of shape (n,), optional
        Case weights: the weighted estimate T_w (``docs/populations.md``).
    pos_label : object, optional
        Positive class of a binary problem (default: 1 for labels in {0, 1}
        or {-1, 1}; with two columns, the second class).
    labels : array_like, optional
        Classes in the column order of a 2-d ``y_prob`` (default: sorted
        labels of ``y_true``).
    n_bins : int or "auto"
        Bins B of the estimator (``"auto"``: the rule of ``docs/conventions.md``).
    squared : bool
        False (default): the ECE, ``sqrt(max(T, 0))``.  True: T itself, an
        unbiased estimate of ECE^2 that may be negative (average T, not the
        ECE, over folds: the ECE of a fold is biased up by the square root
        and the truncation at 0).

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from calibtest.sklearn import ece_score
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(size=500)
    >>> y = (rng.uniform(size=500) < p).astype(int)
    >>> round(ece_score(y, p), 4)
    0.0347
    >>> round(ece_score(y, p, squared=True), 6)
    0.001202
    """
    squared = check_option("squared", squared)
    target = calibration_target(y_true, y_prob, pos_label=pos_label, labels=labels)
    res = _calib(target, sample_weight, n_bins=n_bins, null="asymptotic")
    return float(res.estimate if squared else res.ece)


_scorer = make_scorer(ece_score, response_method="predict_proba", greater_is_better=False)


class _ECEScorer(type(_scorer)):  # type: ignore[misc]  # scikit-learn's scorer class: its repr and sign unchanged
    """``-ece_score`` with ``-0.0`` returned as ``0.0`` (a fold whose ECE estimate is 0 printed as ``-0.``)."""

    def _score(self, *args, **kwargs):
        return super()._score(*args, **kwargs) + 0.0  # -0.0 + 0.0 == 0.0; every other value unchanged


#: A scorer for ``cross_val_score``, ``cross_validate`` and ``GridSearchCV``: ``-ece_score`` on
#: ``predict_proba`` (scikit-learn maximises scores, so the sign is flipped: closer to 0 is better).
#: Labels other than {0, 1} or {-1, 1} need ``make_scorer(ece_score, response_method="predict_proba",
#: greater_is_better=False, pos_label=...)``.
#:
#: Examples
#: --------
#: >>> from sklearn.datasets import make_classification
#: >>> from sklearn.linear_model import LogisticRegression
#: >>> from sklearn.model_selection import cross_val_score
#: >>> from calibtest.sklearn import ece_scorer
#: >>> X, y = make_classification(n_samples=2000, random_state=0)
#: >>> cross_val_score(LogisticRegression(), X, y, cv=3, scoring=ece_scorer).round(4)
#: array([-0.0304, -0.0422, -0.065 ])
ece_scorer = _ECEScorer.__new__(_ECEScorer)
ece_scorer.__dict__.update(vars(_scorer))
del _scorer


# --------------------------------------------------------------------------- the display
#: Marks a deprecated keyword that was not passed.
_UNSET = object()

#: The display's strategies (those of :func:`sklearn.calibration.calibration_curve`).
STRATEGIES = ("uniform", "quantile")


def _errorbar_keywords() -> frozenset:
    """The keyword arguments :meth:`matplotlib.axes.Axes.errorbar` takes: its parameters and Line2D's properties."""
    from matplotlib.artist import ArtistInspector
    from matplotlib.axes import Axes
    from matplotlib.lines import Line2D

    named = set(inspect.signature(Axes.errorbar).parameters) - {"self", "x", "y", "xerr", "yerr", "data", "kwargs"}
    lines = ArtistInspector(Line2D)
    aliases = {alias for names in lines.aliasd.values() for alias in names}
    return frozenset(named | set(lines.get_setters()) | aliases)


def _check_plot_kwargs(method: str, kwargs: dict) -> None:
    """Refuse, by name and before anything is computed or drawn, a keyword that Axes.errorbar does not take."""
    unknown = sorted(set(kwargs) - _errorbar_keywords())
    if unknown:
        raise TypeError(f"{method}() got unexpected keyword argument{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(map(repr, unknown))}: the keywords other than the display's own are passed "
                        "to matplotlib's Axes.errorbar (its parameters and Line2D's properties; yerr and xerr are "
                        "the display's)")


def _display_options(method: str, n_bins, strategy, ece_bins, display_bins, kwargs) -> tuple[int, str, object]:
    """(n_bins, strategy, ece_bins) checked, with the deprecated ``display_bins`` and ``n_bins="auto"`` mapped."""
    _check_plot_kwargs(method, kwargs)
    if isinstance(n_bins, str) and n_bins == "auto":  # the former meaning of n_bins: the estimator's B
        warnings.warn(f"{method}(n_bins='auto'): n_bins now counts the display bins, as in scikit-learn's "
                      "CalibrationDisplay; the estimator's bins are ece_bins= (n_bins='auto' is read as "
                      "ece_bins='auto', n_bins=5)", FutureWarning, stacklevel=3)
        n_bins, ece_bins = 5, "auto"
    if display_bins is not _UNSET:
        if n_bins != 5 or strategy != "uniform":
            raise TypeError(f"{method}(): pass n_bins= and strategy= (display_bins is their deprecated former "
                            "name), not both")
        warnings.warn(f"{method}(display_bins=...) is deprecated and will be removed: use n_bins= and strategy= "
                      "as in scikit-learn's CalibrationDisplay (display_bins=k is n_bins=k, strategy='uniform'; "
                      "display_bins=None is n_bins=10, strategy='quantile')", FutureWarning, stacklevel=3)
        n_bins, strategy = (10, "quantile") if display_bins is None else (display_bins, "uniform")
    if isinstance(n_bins, bool) or not isinstance(n_bins, numbers.Integral) or n_bins < 1:
        raise OptionError(f"n_bins must be an integer >= 1 (the display bins), got {n_bins!r}")
    if strategy not in STRATEGIES:
        raise OptionError(f"strategy must be 'uniform' or 'quantile' (as in scikit-learn's calibration_curve), "
                          f"got {strategy!r}")
    return int(n_bins), strategy, ece_bins


class CalibrationErrorDisplay:
    """Reliability diagram with Wilson intervals, the ECE interval and the verdict (scikit-learn's Display API).

    Use :meth:`from_estimator` or :meth:`from_predictions`; the constructor
    takes the computed values, as :class:`sklearn.calibration.CalibrationDisplay`
    does.  The points are *display bins*, ``n_bins`` and ``strategy`` as in
    :func:`sklearn.calibration.calibration_curve` (the same ``prob_true`` and
    ``prob_pred``): mean prediction against observed frequency, with a Wilson
    interval.  The estimator of the ECE bins the same rows separately, into
    ``ece_bins`` bins (B, often dozens; ``result_.bin_table()``).

    Parameters
    ----------
    prob_true, prob_pred : ndarray of shape (m,)
        Observed frequency and mean prediction per non-empty display bin.
    lower, upper : ndarray of shape (m,)
        The Wilson interval of ``prob_true`` at level ``1 - alpha`` (Kish's
        effective size with ``sample_weight``).
    counts : ndarray of shape (m,)
        Rows per display bin.
    y_prob : ndarray of shape (n,)
        The predictions drawn: the probability of the positive class, or the
        top-1 confidence.
    result : CalibrationResult
        The interval and test of the same rows (kept as ``result_``).
    estimator_name : str, optional
        Name in the legend.
    pos_label : object, optional
        Positive class (binary), shown in the axis labels.

    Attributes
    ----------
    result_ : CalibrationResult
        What the legend reports: ``result_.conf_int(scale="ece")``,
        ``result_.summary()``.
    line_ : matplotlib Line2D
        The reliability curve (set by :meth:`plot`).
    errorbar_ : matplotlib ErrorbarContainer
        The curve with its intervals.
    ax_ : matplotlib Axes
    figure_ : matplotlib Figure

    Examples
    --------
    From predictions already made (:meth:`from_estimator` asks a fitted classifier for them):

    >>> import numpy as np
    >>> from matplotlib.figure import Figure
    >>> from calibtest.sklearn import CalibrationErrorDisplay
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(size=1000)
    >>> disp = CalibrationErrorDisplay.from_predictions(rng.binomial(1, p), p, n_bins=10, strategy="quantile",
    ...                                                 ax=Figure().subplots())
    >>> disp.counts.tolist()  # deciles of the predictions
    [100, 100, 100, 100, 100, 100, 100, 100, 100, 100]
    >>> print(disp.verdict_text())
    ECE 0.0187, 95% CI [0, 0.073]
    no evidence of miscalibration

    Without ``ax`` the display draws on a new pyplot figure;
    ``disp.result_.summary()`` gives the full interval and test.
    """

    def __init__(self, prob_true, prob_pred, y_prob, *, lower, upper, counts, result, estimator_name=None,
                 pos_label=None):
        self.prob_true = np.asarray(prob_true, dtype=np.float64)
        self.prob_pred = np.asarray(prob_pred, dtype=np.float64)
        self.y_prob = np.asarray(y_prob, dtype=np.float64)
        self.lower = np.asarray(lower, dtype=np.float64)
        self.upper = np.asarray(upper, dtype=np.float64)
        self.counts = np.asarray(counts)
        if not isinstance(result, CalibrationResult):
            raise TypeError(f"result must be a CalibrationResult, got {type(result).__name__}")
        self.result_ = result
        self.estimator_name = estimator_name
        self.pos_label = pos_label

    def verdict_text(self) -> str:
        """The legend's text: the ECE with its interval, and on a second line the verdict (with the direction of
        a top-1 result; :func:`calibtest.checks.evidence_table.figure_verdict`)."""
        return figure_verdict(self.result_)

    def plot(self, *, ax=None, name=None, ref_line=True, **kwargs):
        """Draw the reliability curve with its intervals; the legend gives the ECE interval and the verdict.

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Where to draw (default: a new pyplot figure).
        name : str, optional
            The curve's name in the legend (default: ``estimator_name``).
        ref_line : bool
            Draw the diagonal of perfect calibration (once per Axes).
        **kwargs
            Passed to :meth:`matplotlib.axes.Axes.errorbar` (its parameters
            and the properties of a Line2D); another name raises ``TypeError``
            before anything is drawn.

        Returns
        -------
        CalibrationErrorDisplay
            ``self``, with ``line_``, ``errorbar_``, ``ax_`` and ``figure_`` set.

        Examples
        --------
        Two models on one Axes (the diagonal is drawn once):

        >>> import numpy as np
        >>> from matplotlib.figure import Figure
        >>> from calibtest.sklearn import CalibrationErrorDisplay
        >>> rng = np.random.default_rng(1)
        >>> p = rng.uniform(size=800)
        >>> y = (rng.uniform(size=800) < p).astype(int)
        >>> ax = Figure().subplots()
        >>> first = CalibrationErrorDisplay.from_predictions(y, p, name="calibrated", ax=ax)
        >>> second = CalibrationErrorDisplay.from_predictions(y, p ** 2, name="squared", ax=ax)
        >>> again = second.plot(ax=Figure().subplots(), name="squared, redrawn")
        >>> sum(label == "perfect calibration" for label in ax.get_legend_handles_labels()[1])
        1
        >>> again.ax_ is not ax
        True
        """
        _check_plot_kwargs("plot", kwargs)
        if ax is None:
            import matplotlib.pyplot as plt

            _, ax = plt.subplots()
        name = self.estimator_name if name is None else name
        ref_label = "perfect calibration"
        if ref_line and ref_label not in ax.get_legend_handles_labels()[1]:
            ax.plot([0, 1], [0, 1], linestyle="--", color="0.45", linewidth=1, label=ref_label)
        yerr = np.maximum(np.vstack([self.prob_true - self.lower, self.upper - self.prob_true]), 0.0)
        label = (f"{name}\n" if name else "") + self.verdict_text()
        style = {"fmt": "s-", "markersize": 4, "linewidth": 1, "elinewidth": 0.8, "capsize": 2, "label": label}
        from matplotlib.cbook import normalize_kwargs
        from matplotlib.lines import Line2D

        style.update(normalize_kwargs(kwargs, Line2D))  # lw= replaces the default linewidth, not clashes with it
        self.errorbar_ = ax.errorbar(self.prob_pred, self.prob_true, yerr=yerr, **style)
        self.line_ = self.errorbar_.lines[0]
        top1 = self.result_.mode.top1
        info = f" (positive class: {self.pos_label})" if self.pos_label is not None and not top1 else ""
        level = f"{100 * (1 - self.result_.alpha):g}%"
        ax.set(xlabel="top-1 confidence" if top1 else f"mean predicted probability{info}",
               ylabel=(f"accuracy ({level} Wilson CI)" if top1 else f"fraction of positives{info}"),
               xlim=(-0.02, 1.02), ylim=(-0.02, 1.02))
        ax.grid(True, linewidth=0.4, alpha=0.5)
        ax.legend(loc="best", fontsize="small", frameon=False)
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def _from_target(cls, target: _Target, sample_weight, ece_options: dict, *, n_bins, strategy, name, ax,
                     ref_line, kwargs):
        """The display of ``target``: ``calib_ci`` with ``ece_options`` (its ``n_bins``, ``alpha``, ``null``,
        ``rng``), the curve's ``n_bins`` bins by ``strategy``, drawn on ``ax`` with ``kwargs``."""
        res = _calib(target, sample_weight, **ece_options)
        if name is not None:  # the Display's name goes with its result into comparisons and reports
            res = res.with_parts(target=dataclasses.replace(res.target, name=str(name)))
        z, y = target.confidence, target.outcome
        w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        pts = curve_bins(z, y, n_bins=n_bins, strategy=strategy, alpha=res.alpha, weights=w)
        disp = cls(pts["observed"], pts["pred"], z, lower=pts["lower"], upper=pts["upper"], counts=pts["count"],
                   result=res, estimator_name=name, pos_label=target.pos_label)
        return disp.plot(ax=ax, ref_line=ref_line, **kwargs)

    @classmethod
    def from_estimator(cls, estimator, X, y, *, n_bins=5, strategy="uniform", pos_label=None, name=None, ax=None,
                       ref_line=True, sample_weight=None, ece_bins="auto", alpha: float = 0.05, null: str = "auto",
                       rng=None, display_bins=_UNSET, **kwargs):
        """Reliability display of a fitted classifier on ``X, y``, with the ECE interval and the verdict.

        Parameters
        ----------
        estimator : fitted classifier
            With ``predict_proba`` and ``classes_``.
        X : array_like or DataFrame
            Held-out features.
        y : array_like of shape (n,)
            Their labels (any type, as the estimator was fitted on).
        pos_label : object, optional
            The positive class of a binary classifier (default:
            ``estimator.classes_[1]``, the column ``predict_proba(X)[:, 1]``).
            Multiclass estimators are checked through their top-1
            confidence and its correctness (``pos_label`` is not used).
        sample_weight : array_like of shape (n,), optional
            Case weights of the rows (the weighted interval of
            :func:`calibtest.calib_ci`, ``weights=``; the display bins show
            weighted means with Kish's effective size).
        n_bins : int
            Number of display bins, as in
            :class:`sklearn.calibration.CalibrationDisplay` (default 5).
        strategy : {"uniform", "quantile"}
            How the display bins are cut, as in
            :func:`sklearn.calibration.calibration_curve`: equal widths of
            [0, 1], or equal counts (quantiles of the predictions).
        ece_bins : int or "auto"
            Bins B of the estimator of the ECE (``n_bins`` of
            :func:`calibtest.calib_ci`; ``"auto"``: the rule of
            ``docs/conventions.md``).  The display bins do not change it.
        alpha : float
            Level of the interval, the test and the Wilson intervals.
        null, rng
            As in :func:`calibtest.calib_ci`.
        name : str, optional
            Legend name (default: the estimator's class name).
        ax : matplotlib Axes, optional
        ref_line : bool
            Draw the diagonal.
        display_bins : int or None
            Deprecated: ``display_bins=k`` is ``n_bins=k`` (``strategy="uniform"``),
            ``display_bins=None`` is ``n_bins=10, strategy="quantile"``.
        **kwargs
            Passed to :meth:`matplotlib.axes.Axes.errorbar`; a name it does
            not take raises ``TypeError`` before anything is computed.

        Returns
        -------
        CalibrationErrorDisplay

        Raises
        ------
        TypeError
            An unknown keyword argument (named).
        ValueError
            ``n_bins`` not an integer >= 1, ``strategy`` other than
            ``"uniform"`` or ``"quantile"``.

        Examples
        --------
        >>> from matplotlib.figure import Figure
        >>> from sklearn.datasets import make_classification
        >>> from sklearn.linear_model import LogisticRegression
        >>> from calibtest.sklearn import CalibrationErrorDisplay
        >>> X, y = make_classification(n_samples=2000, random_state=0)
        >>> clf = LogisticRegression().fit(X[:1000], y[:1000])
        >>> disp = CalibrationErrorDisplay.from_estimator(clf, X[1000:], y[1000:], n_bins=5,
        ...                                               ax=Figure().subplots())
        >>> disp.result_.n, int(disp.counts.sum()), len(disp.prob_true)
        (1000, 1000, 5)
        >>> disp.ax_.get_xlabel()
        'mean predicted probability (positive class: 1)'
        """
        n_bins, strategy, ece_bins = _display_options("from_estimator", n_bins, strategy, ece_bins, display_bins,
                                                      kwargs)
        probs, classes = _estimator_probs(estimator, X)
        if probs.ndim == 2 and probs.shape[1] == 2 and pos_label is None:
            pos_label = classes[1]
        target = calibration_target(y, probs, pos_label=pos_label, labels=classes)
        name = type(estimator).__name__ if name is None else name
        return cls._from_target(target, sample_weight, dict(n_bins=ece_bins, alpha=alpha, null=null, rng=rng),
                                n_bins=n_bins, strategy=strategy, name=name, ax=ax, ref_line=ref_line, kwargs=kwargs)

    @classmethod
    def from_predictions(cls, y_true, y_prob, *, n_bins=5, strategy="uniform", pos_label=None, name=None, ax=None,
                         ref_line=True, labels=None, sample_weight=None, ece_bins="auto", alpha: float = 0.05,
                         null: str = "auto", rng=None, display_bins=_UNSET, **kwargs):
        """Reliability display of predicted probabilities, with the ECE interval and the verdict.

        Parameters
        ----------
        y_true : array_like of shape (n,)
            True labels (any type).
        y_prob : array_like of shape (n,) or (n, K)
            Probability of ``pos_label``, or ``predict_proba`` output
            (K = 2: binary through the column of ``pos_label``; K > 2: top-1
            confidence and correctness).
        pos_label : object, optional
            The positive class (default: 1 for labels in {0, 1} or {-1, 1};
            with two columns the second class of ``labels``).
        labels : array_like, optional
            Classes in the column order of a 2-d ``y_prob`` (default: the
            sorted labels of ``y_true``).
        Other parameters
            As in :meth:`from_estimator`.

        Returns
        -------
        CalibrationErrorDisplay

        Examples
        --------
        String labels with ``pos_label``, five equal-width display bins (scikit-learn's default):

        >>> import numpy as np
        >>> from matplotlib.figure import Figure
        >>> from calibtest.sklearn import CalibrationErrorDisplay
        >>> rng = np.random.default_rng(0)
        >>> p = rng.uniform(size=1000)
        >>> y = np.where(rng.uniform(size=1000) < p, "yes", "no")
        >>> disp = CalibrationErrorDisplay.from_predictions(y, p, pos_label="yes", n_bins=5,
        ...                                                 ax=Figure().subplots())
        >>> disp.prob_pred.round(2).tolist()
        [0.11, 0.31, 0.5, 0.7, 0.9]
        >>> disp.result_.n
        1000
        """
        n_bins, strategy, ece_bins = _display_options("from_predictions", n_bins, strategy, ece_bins, display_bins,
                                                      kwargs)
        target = calibration_target(y_true, y_prob, pos_label=pos_label, labels=labels)
        return cls._from_target(target, sample_weight, dict(n_bins=ece_bins, alpha=alpha, null=null, rng=rng),
                                n_bins=n_bins, strategy=strategy, name=name, ax=ax, ref_line=ref_line, kwargs=kwargs)


# --------------------------------------------------------------------------- cross-validation
@dataclass(frozen=True, eq=False, repr=False)
class CrossValidatedCalibration(ResultDisplay):
    """Calibration of an estimator under cross-validation: one interval per test fold and one out of fold.

    Attributes
    ----------
    folds : pandas.DataFrame
        One row per fold: ``n``, ``estimate`` (T of ECE^2), ``lower`` and
        ``upper`` (its interval), ``ece``, ``ece_lower``, ``ece_upper``,
        ``lower_open`` (the interval is ``(0, upper]``: it excludes 0 although
        its lower end is 0), ``pvalue`` (the test of ECE = 0) and ``verdict``.
    fold_results : tuple of CalibrationResult
        The result of each test fold.
    out_of_fold : CalibrationResult
        The interval of all rows, each predicted by the model fitted
        without its fold (``cross_val_predict``'s predictions).
    oof_prob : ndarray
        Those predictions (``predict_proba`` columns in the order of ``classes``).
    classes : ndarray
        The classes of ``y``.
    pos_label : object or None
        The positive class (binary).
    alpha : float
    estimator_name : str
    fit_params : tuple of str
        The names passed to each fold's ``fit`` (``"sample_weight"`` when
        the fits were weighted, and the keys of ``fit_params``).

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.linear_model import LogisticRegression
    >>> from calibtest.sklearn import cross_validate_calibration
    >>> X, y = make_classification(n_samples=2000, random_state=0)
    >>> cvr = cross_validate_calibration(LogisticRegression(), X, y, cv=3)
    >>> cvr
    <CrossValidatedCalibration LogisticRegression, folds=3, out-of-fold ECE=0.03444 95% CI [0, 0.0489675]>
    >>> cvr.folds[["n", "ece", "ece_lower", "ece_upper"]].round(4)
            n     ece  ece_lower  ece_upper
    fold
    1     667  0.0304     0.0000     0.0626
    2     667  0.0422     0.0000     0.0661
    3     666  0.0650     0.0459     0.0805
    >>> cvr.out_of_fold.n
    2000
    """

    folds: pd.DataFrame
    fold_results: tuple
    out_of_fold: CalibrationResult
    oof_prob: np.ndarray
    classes: np.ndarray
    pos_label: object
    alpha: float
    estimator_name: str
    fit_params: tuple = ()

    def _summary(self, alpha):
        if alpha is not None and alpha != self.alpha:
            raise ValueError(f"the folds were computed at alpha={self.alpha:g}; call cross_validate_calibration "
                             "again for another level")
        res = self.out_of_fold
        level = f"{100 * (1 - self.alpha):g}%"
        s = CalibSummary()
        s.add_title(f"Cross-validated calibration of {self.estimator_name}: {len(self.fold_results)} folds")
        settings = {"Target:": "binary" if res.mode.binary else f"top-1 of {res.n_classes} classes",
                    "No. observations:": res.n, "Level:": level}
        if res.mode.binary:
            settings["Positive class:"] = self.pos_label
        s.add_settings(settings)
        rows = [*self.fold_results, res]
        intervals = [r.conf_int(scale="ece") for r in rows]
        table = pd.DataFrame({"n": [r.n for r in rows], "B": [r.n_bins for r in rows], "ECE": [r.ece for r in rows],
                              f"{level} CI for ECE": [fmt_interval(iv.lower, iv.upper, iv.lower_open)
                                                      for iv in intervals],
                              "verdict": [interval_verdict(iv.contains_zero) for iv in intervals],
                              "p-value": [r.null_pvalue for r in rows]},
                             index=[f"fold {i + 1}" for i in range(len(self.fold_results))] + ["out of fold"],
                             dtype=object)
        s.add_table(table, {"n": 0, "B": 0, "ECE": 4, "p-value": fmt_p})
        s.add_settings({"Out of fold:": res.conclusion()[1]})
        s.add_notes([
            f"Each fold's interval ({level}) is that of calib_ci on its test rows, predicted by the model fitted "
            "on the other folds, with its own automatic B; the p-value is that of its test of ECE = 0.",
            "The out-of-fold interval pools every row's prediction from the model fitted without its fold: it "
            "describes the fitting procedure (a different model per fold), not one fitted model; refit on all "
            "rows and validate on new data for the model itself.",
            _fit_note(self.fit_params, self.estimator_name),
        ])
        return s

    def _dict(self) -> dict:
        return {"estimator": self.estimator_name, "alpha": self.alpha, "n_folds": len(self.fold_results),
                "fit_params": list(self.fit_params),
                "folds": self.folds.to_dict(orient="records"), "out_of_fold": self.out_of_fold.to_dict()}

    def _repr_parts(self) -> list[str]:
        iv = self.out_of_fold.conf_int(scale="ece")
        return [f"{self.estimator_name}", f"folds={len(self.fold_results)}",
                f"out-of-fold ECE={self.out_of_fold.ece:.4g} {100 * (1 - self.alpha):g}% CI {iv}"]


def _fit_note(names: tuple, estimator_name: str) -> str:
    """The summary's sentence on what each fold's fit was given."""
    if not names:
        return f"Each fold's {estimator_name} was fitted on its training rows without weights or fit parameters."
    return (f"Each fold's {estimator_name} was fitted on its training rows with "
            + ", ".join(names) + " (the rows of its training folds).")


def _fit_routing(estimator, sample_weight, fit_params: dict) -> dict:
    """What each fold's ``fit`` is given, for all rows (indexed per fold later), as ``cross_validate`` does.

    With scikit-learn's metadata routing enabled, the estimator's requests
    decide (``set_fit_request``; an unset request for a metadata passed is
    an error, as in scikit-learn).  Otherwise ``fit_params`` all go to
    ``fit`` and ``sample_weight`` goes to ``fit`` when its signature accepts
    it (:func:`sklearn.utils.validation.has_fit_parameter`); when it does
    not, the fits are unweighted and a warning says so.
    """
    if "sample_weight" in fit_params:
        raise ValueError("pass the weights once, as sample_weight= (it weights the fits and the evaluation), "
                         "not in fit_params")
    if get_config().get("enable_metadata_routing", False):
        evaluation = MetadataRequest(owner="cross_validate_calibration")  # the intervals consume the weights
        evaluation.fit.add_request(param="sample_weight", alias=True)
        router = MetadataRouter(owner="cross_validate_calibration").add_self_request(evaluation).add(
            estimator=estimator, method_mapping=MethodMapping().add(caller="fit", callee="fit"))
        given = dict(fit_params) if sample_weight is None else {**fit_params, "sample_weight": sample_weight}
        return dict(process_routing(router, "fit", **given).estimator.fit)
    params = inspect.signature(estimator.fit).parameters
    var_kw = any(q.kind is inspect.Parameter.VAR_KEYWORD for q in params.values())
    unknown = [key for key in fit_params if key not in params and not var_kw]
    if unknown:
        raise TypeError(f"fit_params: {type(estimator).__name__}.fit does not accept {unknown} (its parameters: "
                        f"{[key for key in params if key not in ('X', 'y')]})")
    routed = dict(fit_params)
    if sample_weight is not None:
        if has_fit_parameter(estimator, "sample_weight"):
            routed["sample_weight"] = sample_weight
        else:
            warnings.warn(f"sample_weight: {type(estimator).__name__}.fit does not accept sample_weight, so the "
                          "fits are unweighted; the evaluation (every interval) is weighted", UserWarning,
                          stacklevel=3)
    return routed


def _fold_row(res: CalibrationResult) -> dict:
    iv = res.conf_int()
    ece = res.conf_int(scale="ece")
    return {"n": res.n, "n_bins": res.n_bins, "estimate": res.estimate, "lower": iv.lower, "upper": iv.upper,
            "ece": res.ece, "ece_lower": ece.lower, "ece_upper": ece.upper, "lower_open": ece.lower_open,
            "pvalue": res.null_pvalue,
            "verdict": short_verdict(res)}


def cross_validate_calibration(estimator, X, y, *, cv=5, groups=None, pos_label=None, sample_weight=None,
                               fit_params=None, n_bins="auto", alpha: float = 0.05, null: str = "auto",
                               rng=None) -> CrossValidatedCalibration:
    """Cross-validate a classifier's calibration: an ECE interval per test fold and one out of fold.

    Each fold's clone of ``estimator`` is fitted on the other folds and
    predicts its test rows (``predict_proba``); :func:`calibtest.calib_ci`
    gives the interval of each fold and of all out-of-fold predictions.

    Parameters
    ----------
    estimator : classifier
        An unfitted (or fitted: it is cloned) classifier with ``predict_proba``.
    X : array_like or DataFrame
    y : array_like of shape (n,)
        Labels (any type).
    cv : int, cross-validation generator or iterable
        As in :func:`sklearn.model_selection.cross_validate` (an int: a
        stratified K-fold).  The test folds must partition the rows (each row
        tested exactly once), as for ``cross_val_predict``.
    groups : array_like, optional
        Group labels for a group splitter.
    pos_label : object, optional
        Positive class of a binary problem (default: the second of the sorted
        classes, ``estimator.classes_[1]``).
    sample_weight : array_like of shape (n,), optional
        Case weights.  They weight every interval (``weights=`` of
        :func:`calibtest.calib_ci`) and, as in
        :func:`sklearn.model_selection.cross_validate` with
        ``params={"sample_weight": ...}``, each fold's fit on its training
        rows: when the estimator's ``fit`` accepts ``sample_weight`` (its
        signature), or, with metadata routing enabled
        (``sklearn.set_config(enable_metadata_routing=True)``), as the
        estimator requests it (``set_fit_request(sample_weight=True)``;
        ``False`` keeps the fits unweighted).  An estimator whose ``fit``
        does not take it is fitted unweighted, with a warning.
    fit_params : dict, optional
        Further parameters of ``fit`` (``cross_validate``'s ``params=``):
        arrays of length n are indexed by each fold's training rows, other
        values passed as they are; routed by the estimator's requests when
        metadata routing is enabled.
    n_bins : int or "auto"
        Bins B of each interval (``"auto"``: per fold, from its size).
    alpha : float
        Level of every interval and test.
    null, rng
        As in :func:`calibtest.calib_ci`.

    Returns
    -------
    CrossValidatedCalibration
        ``folds`` (one row per fold), ``fold_results``, ``out_of_fold`` (a
        :class:`~calibtest.CalibrationResult`, with its ``summary()``) and
        ``summary()`` of them all.

    Examples
    --------
    Weighted fits and a weighted evaluation (``LogisticRegression.fit``
    takes ``sample_weight``):

    >>> import numpy as np
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.linear_model import LogisticRegression
    >>> from calibtest.sklearn import cross_validate_calibration
    >>> X, y = make_classification(n_samples=2000, random_state=0)
    >>> w = np.where(y == 1, 2.0, 1.0)
    >>> cvr = cross_validate_calibration(LogisticRegression(), X, y, cv=3, sample_weight=w)
    >>> cvr.fit_params
    ('sample_weight',)
    >>> cvr.folds["n"].tolist()
    [667, 667, 666]
    >>> print(cvr.summary())  # doctest: +ELLIPSIS
    Cross-validated calibration of LogisticRegression: 3 folds
    ...
    """
    alpha = check_alpha(alpha)
    if not hasattr(estimator, "predict_proba"):
        raise TypeError(f"estimator must be a classifier with predict_proba; {type(estimator).__name__} has none")
    y_arr = np.asarray(y)
    if y_arr.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got shape {y_arr.shape}")
    n = y_arr.shape[0]
    classes = np.unique(y_arr)
    if classes.size < 2:
        raise ValueError(f"y has a single class {classes.tolist()}; calibration needs two or more")
    if classes.size == 2:
        pos_label = classes[1] if pos_label is None else pos_label
        if pos_label not in classes.tolist():
            raise ValueError(f"pos_label={pos_label!r} is not a label of y {classes.tolist()}")
    weights = None if sample_weight is None else np.asarray(sample_weight)
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != n):
        raise ValueError(f"sample_weight must have one value per row ({n}), got shape {weights.shape}")
    if fit_params is not None and not isinstance(fit_params, dict):
        raise TypeError(f"fit_params must be a dict of fit's parameters, got {type(fit_params).__name__}")
    routed = _fit_routing(estimator, weights, dict(fit_params or {}))
    splitter = check_cv(cv, y_arr, classifier=True)
    oof = np.full((n, classes.size), np.nan)
    tested = np.zeros(n, dtype=np.int64)
    fold_results = []
    for train, test in splitter.split(X, y_arr, groups):  # one loop step per fold
        model = clone(estimator).fit(_safe_indexing(X, train), y_arr[train],
                                     **_check_method_params(X, params=routed, indices=train))
        probs, fitted = _estimator_probs(model, _safe_indexing(X, test))
        block = np.zeros((test.size, classes.size))
        block[:, np.searchsorted(classes, fitted)] = probs  # classes missing from a fold's training rows: 0
        oof[test] = block
        tested[test] += 1
        target = calibration_target(y_arr[test], block, pos_label=pos_label, labels=classes)
        fold_results.append(_calib(target, None if weights is None else weights[test], n_bins=n_bins, alpha=alpha,
                                   null=null, rng=rng))
    if not np.all(tested == 1):
        raise ValueError(f"cv must test every row exactly once (a partition, as for cross_val_predict); "
                         f"{int(np.sum(tested != 1))} rows were tested {'never or ' if (tested == 0).any() else ''}"
                         "more than once")
    target = calibration_target(y_arr, oof, pos_label=pos_label, labels=classes)
    pooled = _calib(target, weights, n_bins=n_bins, alpha=alpha, null=null, rng=rng)
    folds = pd.DataFrame([_fold_row(r) for r in fold_results])
    folds.index = pd.RangeIndex(1, len(folds) + 1, name="fold")
    return CrossValidatedCalibration(folds=folds, fold_results=tuple(fold_results), out_of_fold=pooled,
                                     oof_prob=oof, classes=classes, pos_label=pos_label if classes.size == 2 else None,
                                     alpha=alpha, estimator_name=type(estimator).__name__,
                                     fit_params=tuple(routed))
