"""Validation metrics of a binary-outcome probability model, as R's ``rms::val.prob``.

:func:`val_prob` computes, from predicted probabilities ``p`` and outcomes
``y``, the statistics that Frank Harrell's ``val.prob`` (R package ``rms``)
prints, with the same definitions, so that numbers can be compared one for one
(``tests/checks/test_val_prob.py`` checks them against rms 6.5.0), plus a few
that ``val.prob`` does not give: the exact C index, the calibration-in-the-large
intercept with the slope fixed at 1, and Wald confidence intervals.

Notation: ``n`` rows, ``L_i = logit(p_i) = log(p_i / (1 - p_i))``, ``n1`` events,
``n0 = n - n1`` non-events.  Predictions exactly 0 or 1 are accepted; their
logit is infinite, and, as in R's ``val.prob`` (``i <- !is.infinite(logit)``,
``lrm.fit(logit[i], y[i])``), those rows are left out of everything computed
from the logistic fits -- intercept, slope, CITL, ``D``, ``U``, ``Q``, ``R2``
and val.prob's ``C (ROC)``/``Dxy`` -- which therefore use the ``n_f``
finite-logit rows (``n`` is replaced by ``n_f`` in the formulas below).  Brier,
Spiegelhalter's ``Z``, the exact C index ``auc`` and Emax/E90/Eavg use every
row.  Deviances are ``-2 log-likelihood`` of the Bernoulli model:

* ``L0  = -2 [n1 log(n1/n) + n0 log(n0/n)]``, the intercept-only model;
* ``L01 = -2 sum [y_i log p_i + (1 - y_i) log(1 - p_i)]``, the predictions as
  they are (intercept 0, slope 1 on ``L``);
* ``Lrc``, the minimum over ``(a, b)`` of the deviance of
  ``logit P(y = 1) = a + b L`` (the logistic recalibration).

The generalised linear models are fitted with ``statsmodels`` (GLM, Binomial
family, logit link), distributions come from ``scipy.stats`` and the smoother
is ``statsmodels``' port of Cleveland's LOWESS, which is the algorithm of R's
``stats::lowess``.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as sps

from calibtest.inputs.front_door import bound_options
from calibtest.inputs.design import Design
from calibtest.inputs.settings import Inputs, Settings
from calibtest.display.format import fmt
from calibtest.core.recalibration import oe_measures
from calibtest.inputs.validation import OptionTypeError, check_alpha, check_missing, is_integer
from calibtest.inputs.formula import resolve_env
from calibtest.inputs.rows import prepare_input
from calibtest.checks.logistic_fits import (DEFAULT_STARTS, as_1d_float, binned_starts, direction_sentence,
                                           fit_logistic_newton, logit_cell_sums)
from calibtest.display.summary import CalibSummary, ResultDisplay, model_text

__all__ = ["ValProbResult", "val_prob", "FIELDS", "LAZY_STATISTICS"]

#: Number of cells into which rms's ``lrm.fit`` (Fortran ``lrmfit``) sorts the
#: predicted probabilities before counting concordant pairs for its C index.
_LRM_C_CELLS = 5000

#: rms's ``lrm.fit`` bounds the linear predictor to [-30, 30] before ``plogis``.
_LRM_LP_BOUND = 30.0

# (field, label printed by R's val.prob) in val.prob's order.
_VALPROB_LABELS = (
    ("dxy", "Dxy"),
    ("c_statistic", "C (ROC)"),
    ("r2", "R2"),
    ("d", "D"),
    ("d_chisq", "D:Chi-sq"),
    ("d_p", "D:p"),
    ("u", "U"),
    ("u_chisq", "U:Chi-sq"),
    ("u_p", "U:p"),
    ("q", "Q"),
    ("brier", "Brier"),
    ("intercept", "Intercept"),
    ("slope", "Slope"),
    ("emax", "Emax"),
    ("e90", "E90"),
    ("eavg", "Eavg"),
    ("spiegelhalter_z", "S:z"),
    ("spiegelhalter_p", "S:p"),
)


#: Every statistic and record of a :class:`ValProbResult`, in the order of ``to_dict()``.
FIELDS = ("n", "n_events", "n_infinite_logit", "alpha", "auc", "c_statistic", "dxy", "r2", "d", "d_chisq", "d_p",
          "u", "u_chisq", "u_p", "q", "brier", "intercept", "slope", "intercept_se", "slope_se", "intercept_ci",
          "slope_ci", "citl", "citl_se", "citl_ci", "emax", "e90", "eavg", "spiegelhalter_z", "spiegelhalter_p",
          "formula", "y_name", "prob_names", "n_dropped",
          "auc_se", "auc_ci", "observed_rate", "mean_predicted", "oe", "oe_se", "oe_ci",
          "loess_e50", "loess_e90", "loess_ici", "loess_emax")

#: The statistics :func:`val_prob` computes on first access, by part: the evidence table
#: (Spiegelhalter's z, CITL, the slope) reads none of them.
LAZY_STATISTICS = {
    "discrimination": ("auc", "c_statistic", "dxy"),
    "likelihood": ("r2", "d", "d_chisq", "d_p", "u", "u_chisq", "u_p", "q"),
    "smooth": ("emax", "e90", "eavg"),
    "auc_interval": ("auc_se", "auc_ci"),
    "observed_expected": ("observed_rate", "mean_predicted", "oe", "oe_se", "oe_ci"),
    "loess": ("loess_e50", "loess_e90", "loess_ici", "loess_emax"),
}
_PART_OF = {name: part for part, names in LAZY_STATISTICS.items() for name in names}


class _LazyParts:
    """The parts of a :class:`ValProbResult` computed on first access, each once, then kept.

    ``compute`` maps a part of :data:`LAZY_STATISTICS` to a function of no
    arguments returning that part's statistics as a dict; once every part is
    computed the functions (and the rows they hold) are released.  Pickling
    or copying computes every part first, so a copy holds numbers only.
    """

    __slots__ = ("_compute", "_values")

    def __init__(self, compute: dict):
        self._compute = dict(compute)
        self._values = {}

    def get(self, name: str) -> float:
        part = _PART_OF[name]
        if part not in self._values:
            self._values[part] = self._compute[part]()
            del self._compute[part]
        return self._values[part][name]

    def __getstate__(self):
        for part in LAZY_STATISTICS:
            self.get(LAZY_STATISTICS[part][0])
        return {"_compute": {}, "_values": self._values}

    def __setstate__(self, state):
        self._compute, self._values = state["_compute"], state["_values"]


def _lazy_statistic(name: str) -> property:
    """A read-only attribute of :class:`ValProbResult` computed on first access (see its docstring)."""
    def get(self) -> float:
        if self._parts is None:
            raise AttributeError(f"{name} is computed by val_prob(): this ValProbResult was not built by it")
        return self._parts.get(name)

    return property(get, doc=f"{name}: computed on first access and kept (see the class docstring).")


@dataclass(frozen=True, repr=False)
class ValProbResult(ResultDisplay):
    """Validation statistics of predicted probabilities (see :func:`val_prob`).

    Values are stored exactly as computed (float64); rounding happens only in
    :meth:`summary`.  Every ``*_ci`` is a ``(lower, upper)`` tuple.

    The fits (intercept, slope, CITL, their intervals), Brier and
    Spiegelhalter's z are computed by :func:`val_prob`; the C indexes
    (``auc``, ``c_statistic``, ``dxy``), the deviance statistics (``r2``,
    ``d``, ``u``, ``q`` and their chi-squares and p-values) and the lowess
    errors (``emax``, ``e90``, ``eavg``) on first access, each part once
    (:data:`LAZY_STATISTICS`), by the same code on the same rows, and kept.
    The evidence table reads none of the latter.  ``to_dict()``, ``==``,
    ``summary()``, pickling and copying compute them.

    Attributes
    ----------
    n : int
        Number of rows.
    n_events : int
        Number of rows with ``y = 1``.
    n_infinite_logit : int
        Rows with ``p`` exactly 0 or 1 (infinite logit).  As in R's
        ``val.prob``, they are left out of the logistic fits and of every
        statistic taken from them (``c_statistic``, ``dxy``, ``r2``, ``d``,
        ``d_chisq``, ``d_p``, ``u``, ``u_chisq``, ``u_p``, ``q``,
        ``intercept``, ``slope`` and their intervals, ``citl``), which use the
        ``n - n_infinite_logit`` other rows; ``auc``, ``brier``, ``emax``,
        ``e90``, ``eavg`` and Spiegelhalter's ``Z`` use all ``n`` rows.
    alpha : float
        The intervals have level ``1 - alpha``.
    auc : float
        Exact C index (area under the ROC curve) of ``p`` on all ``n`` rows
        (rows with ``p`` = 0 or 1 included):
        ``C = [#{(i, j): y_i = 1, y_j = 0, p_i > p_j} + #{... p_i = p_j} / 2] / (n1 n0)``,
        the Mann-Whitney U statistic over ``n1 n0``.  Equals ``Hmisc::somers2``'s C.
    c_statistic : float
        val.prob's ``C (ROC)``: the same C index computed by rms's
        ``lrm.fit`` on the probabilities of the finite-logit rows (val.prob
        takes it from ``lrm.fit(logit[i], y[i])``, so rows with ``p`` = 0 or 1
        are not in it) grouped into 5000 cells,
        ``cell_i = floor(5000 * plogis(min(max(L_i, -30), 30)) + 1)``, pairs in the
        same cell counting 1/2.  It differs from :attr:`auc` by at most the
        share of event/non-event pairs that share a cell (about 1e-6 when the
        probabilities are spread out; much more when many are within 2e-4 of 1).
    dxy : float
        val.prob's Somers' ``Dxy = 2 (c_statistic - 1/2)``.
    r2 : float
        Nagelkerke's R^2 of the predictions (val.prob's ``R2``):
        ``(1 - exp(-d_chisq / n)) / (1 - exp(-L0 / n))``.
    d : float
        Discrimination index ``D = (d_chisq - 1) / n``.
    d_chisq : float
        ``L0 - L01``, the likelihood-ratio chi-square of the predictions
        against the constant model (val.prob's ``D:Chi-sq``).
    d_p : float
        ``P(chi2_1 > d_chisq)``.  R's ``val.prob`` prints ``NA`` here (its fit
        is given starting values, for which ``lrm.fit`` reports no p-value);
        this is the 1-d.f. p-value of the same statistic.
    u : float
        Unreliability index ``U = (u_chisq - 2) / n``.
    u_chisq : float
        ``L01 - Lrc``, the likelihood-ratio chi-square of "intercept 0 and
        slope 1" (val.prob's ``U:Chi-sq``).
    u_p : float
        ``P(chi2_2 > u_chisq)`` by the survival function (val.prob computes
        ``1 - pchisq``, which is 0 below about 1e-16).
    q : float
        Quality index ``Q = D - U``.
    brier : float
        Brier score ``mean((p - y)^2)``.
    intercept : float
        val.prob's ``Intercept``: ``a`` of the joint recalibration fit
        ``logit P(y = 1) = a + b L`` (``lrm(y ~ L)``), estimated together with
        the slope.  It is *not* calibration-in-the-large; see :attr:`citl`.
    slope : float
        val.prob's ``Slope``: ``b`` of the same joint fit.
    intercept_se, slope_se : float
        Standard errors of ``a`` and ``b`` (inverse observed information).
    intercept_ci, slope_ci : tuple of float
        Wald intervals ``estimate -/+ z_{1-alpha/2} se``.
    citl : float
        Calibration-in-the-large: the intercept ``a0`` of
        ``logit P(y = 1) = a0 + L`` (offset ``L``, slope fixed at 1); 0 for
        predictions whose mean log-odds level is right.  Not printed by val.prob.
    citl_se : float
        Standard error of ``a0``.
    citl_ci : tuple of float
        Wald interval for ``a0``.
    emax, e90, eavg : float
        Maximum, 0.9 quantile (R's type 7, numpy's default ``linear``) and mean
        of ``|p_i - s(p_i)|`` where ``s`` is the LOWESS smooth of ``y`` on ``p``
        with span 2/3, no robustness iterations and
        ``delta = 0.01 (max p - min p)`` (val.prob's ``lowess(p, y, iter = 0)``).
    spiegelhalter_z : float
        Spiegelhalter's
        ``Z = sum (y - p)(1 - 2p) / sqrt(sum (1 - 2p)^2 p (1 - p))``.
    spiegelhalter_p : float
        Two-sided ``2 Phi(-|Z|)``.
    auc_se, auc_ci : float, tuple of float
        DeLong's standard error of :attr:`auc` (DeLong, DeLong and
        Clarke-Pearson 1988: ``Var = s10^2 / n1 + s01^2 / n0`` with ``s10^2``,
        ``s01^2`` the sample variances of the placement values
        ``V10_i = mean_j psi(p_i, p_j)`` over events and
        ``V01_j = mean_i psi(p_i, p_j)`` over non-events, ``psi`` = 1, 1/2, 0
        for ``>``, ``=``, ``<``) and the Wald interval
        ``auc -/+ z_{1-alpha/2} se`` (pROC's ``ci.auc(method = "delong")``),
        cut to [0, 1].
    observed_rate, mean_predicted : float
        ``O / n`` (events per row) and ``E / n = mean(p)``.
    oe, oe_se, oe_ci : float, float, tuple of float
        Observed over expected events ``O / E = sum y / sum p``, the standard
        error of ``log(O / E)``, ``sqrt((1 - O/n) / O)`` (E treated as fixed;
        Debray et al. 2017), and the interval
        ``exp(log(O/E) -/+ z_{1-alpha/2} se)``; NaN when O = 0.
    loess_e50, loess_e90, loess_ici, loess_emax : float
        Median, 0.9 quantile (type 7), mean (the Integrated Calibration Index)
        and maximum of ``|p_i - c(p_i)|`` where ``c`` is the loess
        calibration curve of Austin and Steyerberg (2019), R's
        ``loess(y ~ p)`` defaults (span 0.75, degree 2, tricube weights,
        Gaussian family, the default ``surface = "interpolate"``: exact local
        fits at the vertices of R's k-d tree, cubic Hermite interpolation in
        between; see :func:`loess_fit`), the smoother of
        ``CalibrationCurves::val.prob.ci.2``.  NaN where the local quadratic
        is not identified (fewer than three distinct ``p`` near a vertex).
    formula, y_name, prob_names, n_dropped
        The model as given (for the summary) and rows dropped for missing values.
    """

    n: int
    n_events: int
    n_infinite_logit: int
    alpha: float
    brier: float
    intercept: float
    slope: float
    intercept_se: float
    slope_se: float
    intercept_ci: tuple[float, float]
    slope_ci: tuple[float, float]
    citl: float
    citl_se: float
    citl_ci: tuple[float, float]
    spiegelhalter_z: float
    spiegelhalter_p: float
    formula: str | None = None
    y_name: str = "y"
    prob_names: tuple = ("p",)
    n_dropped: int = 0
    #: The statistics computed on first access (:data:`LAZY_STATISTICS`); not part of the comparison.
    _parts: "_LazyParts | None" = field(default=None, repr=False, compare=False)

    auc = _lazy_statistic("auc")
    c_statistic = _lazy_statistic("c_statistic")
    dxy = _lazy_statistic("dxy")
    r2 = _lazy_statistic("r2")
    d = _lazy_statistic("d")
    d_chisq = _lazy_statistic("d_chisq")
    d_p = _lazy_statistic("d_p")
    u = _lazy_statistic("u")
    u_chisq = _lazy_statistic("u_chisq")
    u_p = _lazy_statistic("u_p")
    q = _lazy_statistic("q")
    emax = _lazy_statistic("emax")
    e90 = _lazy_statistic("e90")
    eavg = _lazy_statistic("eavg")
    auc_se = _lazy_statistic("auc_se")
    auc_ci = _lazy_statistic("auc_ci")
    observed_rate = _lazy_statistic("observed_rate")
    mean_predicted = _lazy_statistic("mean_predicted")
    oe = _lazy_statistic("oe")
    oe_se = _lazy_statistic("oe_se")
    oe_ci = _lazy_statistic("oe_ci")
    loess_e50 = _lazy_statistic("loess_e50")
    loess_e90 = _lazy_statistic("loess_e90")
    loess_ici = _lazy_statistic("loess_ici")
    loess_emax = _lazy_statistic("loess_emax")

    def __eq__(self, other) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in FIELDS)

    def _dict(self) -> dict:
        return dict(zip(FIELDS, self._values()))

    def to_dict(self) -> dict:
        """All fields as a JSON-safe dict (Python floats/ints, lists; NaN/inf as None)."""
        return ResultDisplay.to_dict(self)

    def valprob_dict(self) -> dict:
        """The 18 statistics under the names R's ``val.prob`` gives them, in its order."""
        return {label: getattr(self, name) for name, label in _VALPROB_LABELS}

    def conf_int(self, alpha: float | None = None) -> pd.DataFrame:
        """Wald intervals of the intercept, slope and CITL at level 1 - alpha (estimate -/+ z se)."""
        if alpha is None or alpha == self.alpha:
            cis = (self.intercept_ci, self.slope_ci, self.citl_ci)
        else:
            q = float(sps.norm.isf(alpha / 2.0))
            cis = tuple((est - q * se, est + q * se) for est, se in (
                (self.intercept, self.intercept_se), (self.slope, self.slope_se), (self.citl, self.citl_se)))
        return pd.DataFrame(cis, index=["intercept", "slope", "citl"], columns=["lower", "upper"])

    def direction(self, alpha: float | None = None) -> str:
        """The direction of a logit-linear miscalibration, in words, from CITL and the slope.

        CITL ``a0 > 0`` (observed log-odds above the predicted ones) means the
        predictions are too low on average, ``a0 < 0`` too high; slope
        ``b < 1`` means they are too extreme (too close to 0 and 1), ``b > 1``
        not extreme enough.  A direction is stated only where the Wald
        ``1 - alpha`` interval excludes the null value (0 for CITL, 1 for the
        slope); otherwise the sentence says that the interval includes it.
        The one sentence the evidence conclusion and the report show.
        """
        alpha = self.alpha if alpha is None else check_alpha(alpha)
        ci = self.conf_int(alpha)
        return direction_sentence(self.citl, (ci.loc["citl", "lower"], ci.loc["citl", "upper"]), self.slope,
                                  (ci.loc["slope", "lower"], ci.loc["slope", "upper"]), alpha)

    def summary(self, alpha: float | None = None, digits: int = 3) -> CalibSummary:
        """A statsmodels-style summary; statistics rounded to ``digits`` decimals.

        ``alpha`` (default: the stored one) sets the level of the Wald intervals.
        """
        if not is_integer(digits):
            raise OptionTypeError(f"digits must be an int, got {type(digits).__name__}")
        if digits < 0:
            raise ValueError(f"digits must be >= 0, got {digits}")
        return self._summary(None if alpha is None else check_alpha(alpha), int(digits))

    def _summary(self, alpha: float | None, digits: int = 3) -> CalibSummary:
        alpha = self.alpha if alpha is None else alpha
        dec = lambda v: f"{v:.{digits}f}"
        smry = CalibSummary()
        smry.add_title("Validation of predicted probabilities (rms::val.prob)")
        smry.add_settings({"Model:": model_text(self.formula, self.y_name, self.prob_names),
                           "No. observations:": fmt(self.n), "Events:": fmt(self.n_events),
                           "p = 0 or 1 (not in fits):": fmt(self.n_infinite_logit),
                           "Alpha:": fmt(alpha)})
        labels = [("auc", "C (exact)")] + [(n, lb) for n, lb in _VALPROB_LABELS
                                          if n not in ("intercept", "slope")]
        half = (len(labels) + 1) // 2
        left, right = labels[:half], labels[half:] + [(None, "")] * (2 * half - len(labels))
        stats = pd.DataFrame({"value": [getattr(self, n) for n, _ in left],
                              " ": [lb for _, lb in right],
                              "value ": [None if n is None else getattr(self, n) for n, _ in right]},
                             index=[lb for _, lb in left], dtype=object)
        smry.add_table(stats, {"value": dec, "value ": dec})
        ci = self.conf_int(alpha)
        level = f"{100 * (1 - alpha):g}%"
        fits = pd.DataFrame({"estimate": [self.intercept, self.slope, self.citl],
                             "std err": [self.intercept_se, self.slope_se, self.citl_se],
                             "ci lower": list(ci["lower"]), "ci upper": list(ci["upper"])},
                            index=["Intercept (joint fit)", "Slope (joint fit)", "CITL (slope = 1)"],
                            dtype=object)
        smry.add_table(fits, {c: dec for c in fits.columns})
        smry.add_notes([
            f"Intervals: Wald {level}, estimate -/+ z se. Intercept and slope: logit P(y = 1) = a + b logit(p) "
            "(val.prob's); CITL: logit P(y = 1) = a0 + logit(p), slope fixed at 1.",
            "C (exact) is the Mann-Whitney C index; C (ROC) and Dxy are val.prob's (5000 probability cells).",
            "Emax, E90, Eavg: |p - lowess(y ~ p)|; S:z, S:p: Spiegelhalter's test."]
            + ([f"{self.n_infinite_logit} of {self.n} rows have p exactly 0 or 1 (infinite logit) and are left "
                "out of the logistic fits, as in R's val.prob: Intercept, Slope, CITL, C (ROC), Dxy, R2, D, U and "
                f"Q use the other {self.n - self.n_infinite_logit} rows; C (exact), Brier, Emax, E90, Eavg and "
                "S:z use all rows."] if self.n_infinite_logit else [])
            + ([f"{self.n_dropped} rows with missing values were dropped (missing='drop')."]
               if self.n_dropped else []))
        return smry

    def _repr_parts(self) -> list[str]:
        return [f"n={self.n} events={self.n_events}: C={self.auc:.4g}", f"slope={self.slope:.4g}",
                f"CITL={self.citl:.4g}", f"Brier={self.brier:.4g}"]


def _fmt_ci(ci: tuple[float, float], digits: int) -> str:
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def _validate(p, y, alpha) -> tuple[np.ndarray, np.ndarray, float]:
    alpha = check_alpha(alpha)
    p = as_1d_float(p, "p")
    y = as_1d_float(y, "y")
    if p.shape != y.shape:
        raise ValueError(f"p and y must have the same length, got {p.size} and {y.size}")
    if p.size < 3:
        raise ValueError(f"p and y need at least 3 rows, got {p.size}")
    if not np.all(np.isfinite(p)):
        raise ValueError("p must be finite (no NaN or inf)")
    if not np.all(np.isfinite(y)):
        raise ValueError("y must be finite (no NaN or inf)")
    if np.any((p < 0) | (p > 1)):
        raise ValueError("p must be probabilities in [0, 1]")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("y must contain only 0 and 1")
    n1 = np.count_nonzero(y)
    if n1 == 0 or n1 == y.size:
        raise ValueError("y must contain both 0 and 1: the C index and the calibration fits are undefined")
    if np.all(p == p[0]):
        raise ValueError("p has a single distinct value: the calibration slope is not identifiable")
    # The logistic fits use the rows with a finite logit (0 < p < 1), as R's val.prob.
    fin = (p > 0) & (p < 1)
    k = int(p.size - np.count_nonzero(fin))
    where = (f" among the {int(np.count_nonzero(fin))} rows with 0 < p < 1 (the {k} rows with p exactly "
             "0 or 1 have an infinite logit and are left out of the logistic fits)") if k else ""
    pf, yf = p[fin], y[fin]
    if pf.size == 0 or np.count_nonzero(yf) in (0, yf.size):
        raise ValueError("y must contain both 0 and 1" + (where or "")
                         + ": the calibration intercept and slope are undefined")
    if np.all(pf == pf[0]):
        raise ValueError("p has a single distinct value" + where
                         + ": the calibration slope is not identifiable")
    p1, p0 = pf[yf == 1], pf[yf == 0]
    if p1.min() >= p0.max() or p1.max() <= p0.min():
        raise ValueError(
            "p separates y" + where + " (completely or quasi-completely: every event has p >= every "
            "non-event, or <=): the calibration intercept and slope have no finite "
            "maximum-likelihood estimate"
        )
    return p, y, alpha


def _auc(score: np.ndarray, y: np.ndarray) -> float:
    """C index of ``score`` for ``y``: Mann-Whitney U / (n1 n0), ties counting 1/2."""
    pos = score[y == 1]
    neg = score[y == 0]
    u = sps.mannwhitneyu(pos, neg, alternative="two-sided", use_continuity=False, method="asymptotic").statistic
    return float(u) / (pos.size * neg.size)


@bound_options("val_prob")
def val_prob(formula=None, data=None, *, y=None, probs=None, alpha: float = 0.05, missing: str = "raise",
             eval_env=0, weights=None, horizon=None) -> ValProbResult:
    """Validation statistics of predicted probabilities, with R ``rms::val.prob``'s definitions.

    Inputs follow :func:`calibtest.calib_ci`: a formula with ``data=``
    (``val_prob("y ~ p", data=df)``) or ``y=``/``probs=`` arrays
    (``val_prob(y=y, probs=p)``); ``missing="drop"`` drops rows with NaN and
    ``eval_env`` says where formula names are looked up.  Binary outcomes only.
    The earlier form ``val_prob(p, y, alpha=...)`` (two positional arrays,
    probabilities first) still works.

    Parameters
    ----------
    formula : str, optional
        ``"y ~ p"``: outcome on the left, one probability column on the right.
        Formulas are evaluated by patsy and can run any Python expression:
        trusted input only.
    data : DataFrame or dict, optional
        Data for the formula.
    y : array_like, shape (n,)
        Observed outcomes, 0 or 1 (bool, int or float), both present.
    probs : array_like, shape (n,)
        Predicted probabilities of ``y = 1`` (called ``p`` below), in [0, 1].
        Rows with ``p`` exactly 0 or 1 (infinite logit) are left out of the
        logistic fits and the statistics based on them, as in R's
        ``val.prob``, and counted in ``n_infinite_logit``.
    missing : {"raise", "drop"}
        Rows with missing values raise (default) or are dropped.
    eval_env : int, dict or patsy.EvalEnvironment
        As in :func:`calibtest.calib_ci`.
    p : array_like, shape (n,)
        (Earlier positional form only.) Predicted probabilities of ``y = 1``, in [0, 1]
        (0 and 1 are not clipped: those rows are left out of the logistic fits, as in R).
    alpha : float, optional
        The Wald intervals have level ``1 - alpha`` (default 0.05).

    weights : None
        Not supported: passing weights raises a ``ValueError`` (val.prob's
        statistics have no weighted definition to match); weighted calibration
        is in :func:`calibtest.calib_ci` and :func:`calibtest.hosmer_lemeshow`.

    horizon : None
        Refused with the reason, as a ``Surv(...)`` formula is: val.prob's statistics need a binary outcome for
        every row.

    Returns
    -------
    ValProbResult
        See its Attributes for every formula.  In brief, with ``L = logit(p)``:

        * discrimination: ``auc`` (exact C), ``c_statistic`` and
          ``dxy = 2 (C - 1/2)`` (val.prob's, probabilities in 5000 cells);
        * likelihood: ``d_chisq = L0 - L01``, ``D = (d_chisq - 1)/n``,
          ``u_chisq = L01 - Lrc``, ``U = (u_chisq - 2)/n``, ``Q = D - U``,
          Nagelkerke ``R2 = (1 - exp(-d_chisq/n)) / (1 - exp(-L0/n))``;
        * ``brier = mean((p - y)^2)``;
        * calibration: ``(intercept, slope)`` of the joint fit
          ``logit P(y=1) = a + b L`` (what val.prob prints), and ``citl``, the
          intercept of ``logit P(y=1) = a0 + L`` (offset, slope 1), each with a
          Wald ``1 - alpha`` interval;
        * ``emax``, ``e90``, ``eavg`` of ``|p - lowess(y ~ p)|`` (span 2/3,
          no robustness iterations, ``delta = 0.01 range(p)``);
        * Spiegelhalter
          ``Z = sum (y - p)(1 - 2p) / sqrt(sum (1 - 2p)^2 p (1 - p))`` and
          ``2 Phi(-|Z|)``.

    Raises
    ------
    TypeError
        If ``p`` or ``y`` is not numeric, or ``alpha`` is not a real number.
    ValueError
        If ``p`` and ``y`` are not 1-D of one length (at least 3), contain
        NaN/inf, ``p`` is outside [0, 1], ``y`` is not 0/1 or has a single
        class, ``p`` is constant, or, on the rows with 0 < p < 1 used by the
        logistic fits, ``y`` has a single class, ``p`` is constant or ``p``
        separates the classes (so the logistic recalibration has no finite
        estimate), or ``alpha`` is outside (0, 1).

    Notes
    -----
    Differences from R's ``val.prob`` (rms 6.5.0), all deliberate: rows with
    missing values are rejected rather than dropped; case weights and the
    ``group`` option are not supported; ``d_p`` is the chi-square(1) p-value
    where val.prob prints ``NA``; ``u_p`` uses the chi-square survival function
    where val.prob computes ``1 - pchisq`` (equal above ~1e-15); constant ``p``
    is rejected (val.prob returns a special vector there).  The GLMs are
    solved to full convergence, whereas ``lrm.fit`` stops once the deviance
    changes by less than 0.025; the coefficients agree to ~1e-12.

    Predictions exactly 0 or 1 follow R's ``val.prob``, which computes
    ``logit <- qlogis(p)``, ``i <- !is.infinite(logit)`` and fits
    ``lrm.fit(logit[i], y[i])`` (warning "observations deleted from logistic
    calibration due to probs. of 0 or 1"): C (ROC), Dxy, R2, D, U, Q,
    intercept and slope (and here CITL and the Wald intervals) use the rows
    with 0 < p < 1, with ``n`` the number of those rows; Brier
    ``mean((p - y)^2)``, Spiegelhalter's ``Spi(p, y)`` and the lowess
    ``Emax/E90/Eavg`` use every row, and so does ``auc`` (calibtest's exact
    C, which is Hmisc ``somers2(p, y)``'s C).  One deliberate difference:
    R computes L01 as ``-2 * sum(y * logit - log(1 + exp(logit)), na.rm =
    TRUE)`` over *all* rows, so a row with ``p = 0`` and ``y = 1`` adds
    ``+Inf`` (U:Chi-sq = U = Inf, Q = -Inf) while one with ``p = 1`` and
    ``y = 0`` gives ``NaN`` and is silently dropped; calibtest computes L01 on
    the same finite-logit rows as the fits in both cases (so U and Q stay
    finite), which is what R gives whenever no ``p = 0`` row has ``y = 1``.

    The smoother is statsmodels' LOWESS, which with ``delta = 0`` reproduces R's
    ``clowess`` to ~1e-8.  With val.prob's ``delta = 0.01 range(p)`` the two
    programs fit exactly at slightly different anchor points (statsmodels adds
    one next to the largest ``p``) and interpolate linearly in between, so the
    smooth near the ends can differ by ~1e-5 and ``emax``/``e90``/``eavg`` agree
    with R to about 1e-5 relative rather than to rounding error.

    References
    ----------
    .. [1] Harrell, F. E. ``val.prob``, in R package ``rms``: Regression
       Modeling Strategies (https://CRAN.R-project.org/package=rms); see also
       Harrell, F. E. (2015), *Regression Modeling Strategies*, 2nd ed., Springer.
    .. [2] Spiegelhalter, D. J. (1986). "Probabilistic prediction in patient
       management and clinical trials." *Statistics in Medicine* 5, 421-433.
    .. [3] Cox, D. R. (1958). "Two further applications of a model for binary
       regression." *Biometrika* 45, 562-565.
    .. [4] Austin, P. C. and Steyerberg, E. W. (2019). "The Integrated
       Calibration Index (ICI) and related metrics." *Statistics in Medicine*
       38, 4051-4065.

    Examples
    --------
    >>> from calibtest.datasets import load_demo
    >>> d = load_demo()
    >>> r = val_prob("y ~ p", data=d)
    >>> round(r.slope, 3), round(r.citl, 3)
    (0.963, -0.02)
    """
    Design.resolve("val_prob", Inputs(formula, weights=weights), Settings(horizon=horizon)).check()
    if formula is not None and not isinstance(formula, str):  # earlier form val_prob(p, y)
        if y is not None or probs is not None:
            raise ValueError("give val_prob(p, y) positionally, or y= and probs=, not both")
        p, y = formula, data
        return _val_prob(*_validate(p, y, alpha))
    check_missing(missing)
    env = resolve_env(eval_env)
    if formula is None and y is not None and probs is not None and data is None:
        as_1d_float(probs, "probs")
    rows = prepare_input("val_prob", Inputs(formula=formula, data=data, y=y, probs=probs),
                         Settings(env=env, missing=missing), target=False).rows
    p = rows.probs
    if p.ndim != 1:
        if p.shape[1] != 1:
            raise ValueError(f"val_prob needs one probability column (binary outcomes), got {p.shape[1]}")
        p = p[:, 0]
    res = _val_prob(*_validate(p, rows.y, alpha))
    return dataclasses.replace(res, formula=formula, y_name=rows.y_name, prob_names=tuple(rows.prob_names),
                               n_dropped=rows.n_dropped)


def _val_prob(p: np.ndarray, y: np.ndarray, alpha: float) -> ValProbResult:
    """val_prob on validated arrays.

    The two logistic fits (intercept and slope; CITL: statsmodels' Newton
    from the fits to the rows binned on logit(p),
    :func:`calibtest.checks.logistic_fits.fit_logistic_newton`) and
    Spiegelhalter's z, which the evidence table reads, are computed here; the C indexes, the
    deviance statistics and the lowess errors (:data:`LAZY_STATISTICS`) on
    first access, by the same code on the same arrays, so that each number is
    the one an eager computation gives.
    """
    n = p.size
    n1 = int(np.count_nonzero(y))
    pf, yf, logit = _finite_logit_rows(p, y)
    nf = pf.size

    # Joint recalibration fit a + b L (val.prob's lrm.fit(logit[i], y[i])), from the fit to the rows binned on L.
    joint_start, citl_start = binned_starts(logit_cell_sums(yf, logit))
    joint = fit_logistic_newton(yf, np.column_stack([np.ones(nf), logit]), None, joint_start, DEFAULT_STARTS[0])
    a, b = (float(v) for v in joint.params)
    a_se, b_se = (float(v) for v in joint.bse)
    ci = np.asarray(joint.conf_int(alpha=alpha))
    # Calibration in the large: a0 + offset L.
    citl_fit = fit_logistic_newton(yf, np.ones((nf, 1)), logit, citl_start, DEFAULT_STARTS[1])
    citl_ci = np.asarray(citl_fit.conf_int(alpha=alpha))[0]

    # Spiegelhalter's Z.
    w = 1.0 - 2.0 * p
    z = float(np.sum((y - p) * w) / np.sqrt(np.sum(w * w * p * (1.0 - p))))

    # the deferred parts keep the rows p, y and the joint fit's estimates, not the fitted results (whose
    # models hold about a dozen arrays of n rows)
    params = np.array(joint.params, dtype=np.float64)
    parts = _LazyParts({"likelihood": lambda: _likelihood_part(p, y, params),
                        "discrimination": lambda: _discrimination_part(p, y),
                        "smooth": lambda: _smooth_part(p, y),
                        "auc_interval": lambda: _auc_interval_part(p, y, alpha),
                        "observed_expected": lambda: _observed_expected_part(float(np.sum(y)), float(np.sum(p)),
                                                                            p.size, alpha),
                        "loess": lambda: _loess_part(p, y)})
    return ValProbResult(
        n=int(n),
        n_events=n1,
        n_infinite_logit=int(n - nf),
        alpha=alpha,
        brier=float(np.mean((p - y) ** 2)),
        intercept=a,
        slope=b,
        intercept_se=a_se,
        slope_se=b_se,
        intercept_ci=(float(ci[0, 0]), float(ci[0, 1])),
        slope_ci=(float(ci[1, 0]), float(ci[1, 1])),
        citl=float(citl_fit.params[0]),
        citl_se=float(citl_fit.bse[0]),
        citl_ci=(float(citl_ci[0]), float(citl_ci[1])),
        spiegelhalter_z=z,
        spiegelhalter_p=float(2.0 * sps.norm.sf(abs(z))),
        _parts=parts,
    )


def _finite_logit_rows(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``p``, ``y`` and ``logit(p)`` on the rows with 0 < p < 1.

    R: ``i <- !is.infinite(logit)``; the logistic fits (``lrm.fit``) and every
    statistic taken from them (C (ROC), Dxy, R2, D, U, Q, intercept, slope)
    use rows ``i`` only.
    """
    fin = (p > 0.0) & (p < 1.0)
    pf, yf = p[fin], y[fin]
    return pf, yf, np.log(pf / (1.0 - pf))  # R's qlogis(p) on the finite-logit rows


def _likelihood_part(p: np.ndarray, y: np.ndarray, params: np.ndarray) -> dict:
    """R2, D, U, Q and their chi-squares from the deviances on the finite-logit rows.

    L0 (intercept only: the joint fit's null deviance), L01 (``p`` as given)
    and Lrc (the joint fit, whose estimates are ``params``).  The joint fit's
    statsmodels results are rebuilt at ``params`` on the same model (its
    deviance and null deviance depend on the model and ``params`` only), so
    they are the fitted results' numbers.
    """
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_linear_model import GLM, GLMResults

    pf, yf, logit = _finite_logit_rows(p, y)
    nf = pf.size
    model = GLM(yf, np.column_stack([np.ones(nf), logit]), family=Binomial())  # the joint fit's GLM
    joint = GLMResults(model, params, None, 1.0)
    dev_null = float(joint.null_deviance)
    dev_p = float(-2.0 * Binomial().loglike(yf, pf))
    dev_recal = float(joint.deviance)
    d_chisq = dev_null - dev_p
    u_chisq = dev_p - dev_recal
    d_index = (d_chisq - 1.0) / nf
    u_index = (u_chisq - 2.0) / nf
    r2 = -math.expm1(-d_chisq / nf) / -math.expm1(-dev_null / nf)
    return {"r2": float(r2), "d": float(d_index), "d_chisq": float(d_chisq), "d_p": float(sps.chi2.sf(d_chisq, 1)),
            "u": float(u_index), "u_chisq": float(u_chisq), "u_p": float(sps.chi2.sf(u_chisq, 2)),
            "q": float(d_index - u_index)}


def _discrimination_part(p: np.ndarray, y: np.ndarray) -> dict:
    """The exact C on every row; lrm.fit's C on 5000 probability cells of the finite-logit rows.

    val.prob's C (ROC) and Dxy come from lrm.fit on the rows with a finite logit.
    """
    _, yf, logit = _finite_logit_rows(p, y)
    auc = _auc(p, y)
    lrm_prob = 1.0 / (1.0 + np.exp(-np.clip(logit, -_LRM_LP_BOUND, _LRM_LP_BOUND)))
    cells = np.floor(_LRM_C_CELLS * lrm_prob + 1.0)
    c_stat = _auc(cells, yf)
    return {"auc": auc, "c_statistic": c_stat, "dxy": 2.0 * (c_stat - 0.5)}


def _smooth_part(p: np.ndarray, y: np.ndarray) -> dict:
    """Emax, E90, Eavg of ``|p - lowess(y ~ p)|`` (R: ``lowess(p, y, iter = 0)``; approx at p)."""
    from statsmodels.nonparametric.smoothers_lowess import lowess

    delta = 0.01 * float(np.ptp(p))
    smooth = lowess(y, p, frac=2.0 / 3.0, it=0, delta=delta, return_sorted=False)
    err = np.abs(p - smooth)
    return {"emax": float(np.max(err)), "e90": float(np.quantile(err, 0.9)), "eavg": float(np.mean(err))}


def delong_placements(score: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """DeLong's placement values from mid-ranks (Sun and Xu 2014): ``V10`` of the events, ``V01`` of the non-events.

    ``V10_i`` is the share of non-events scored below event ``i`` (ties
    counting 1/2) and ``V01_j`` the share of events scored above non-event
    ``j`` (ties 1/2); with ``R`` the mid-ranks in the pooled sample and
    ``R1``, ``R0`` those within the events and within the non-events,
    ``V10 = (R - R1) / n0`` and ``V01 = 1 - (R - R0) / n1``.  Both average to the C index.
    """
    pos, neg = score[y == 1], score[y == 0]
    n1, n0 = pos.size, neg.size
    pooled = sps.rankdata(np.concatenate([pos, neg]))
    v10 = (pooled[:n1] - sps.rankdata(pos)) / n0
    v01 = 1.0 - (pooled[n1:] - sps.rankdata(neg)) / n1
    return v10, v01


def _auc_interval_part(p: np.ndarray, y: np.ndarray, alpha: float) -> dict:
    """DeLong's standard error of the exact C and its Wald interval, cut to [0, 1]."""
    v10, v01 = delong_placements(p, y)
    auc = float(np.mean(v10))
    se = float(np.sqrt(np.var(v10, ddof=1) / v10.size + np.var(v01, ddof=1) / v01.size))
    half = float(sps.norm.isf(alpha / 2.0)) * se
    return {"auc_se": se, "auc_ci": (max(auc - half, 0.0), min(auc + half, 1.0))}


def _observed_expected_part(observed: float, expected: float, n: int, alpha: float) -> dict:
    """O/E from the sums of y and p over n rows, with the log-scale standard error and Wald interval of
    :func:`calibtest.core.recalibration.oe_measures` (the rows in memory and the streamed sums alike)."""
    m = oe_measures(observed, expected, n, alpha)
    return {"observed_rate": observed / n, "mean_predicted": expected / n, "oe": m["oe"], "oe_se": m["log_oe_se"],
            "oe_ci": (m["oe_ci_lower"], m["oe_ci_upper"])}


def _local_quadratic(x: np.ndarray, y: np.ndarray, at: np.ndarray, q: int) -> tuple[np.ndarray, np.ndarray]:
    """Value and slope at each ``at`` of the tricube-weighted local quadratic fit on the ``q`` nearest ``x``.

    Bandwidth ``h``: the distance from ``x0`` to its q-th nearest ``x``;
    weights ``(1 - (|x - x0| / h)^3)^3``, 0 beyond ``h``; the weighted least
    squares fit of ``y`` on ``(1, x - x0, (x - x0)^2)`` (its first two
    coefficients are the value and the slope at ``x0``).  NaN where fewer than
    three distinct ``x`` carry weight (the quadratic is not identified).
    """
    d = x[None, :] - at[:, None]
    dist = np.abs(d)
    h = np.partition(dist, q - 1, axis=1)[:, q - 1:q]
    w = (1.0 - np.clip(dist / h, 0.0, 1.0) ** 3) ** 3
    s = [np.sum(w * d ** k, axis=1) for k in range(5)]
    t = [np.sum(w * y[None, :] * d ** k, axis=1) for k in range(3)]
    a = np.stack([np.stack(s[k:k + 3], -1) for k in range(3)], -2)
    b = np.stack(t, -1)[..., None]
    out = np.full((at.size, 2), np.nan)
    ok = np.array([np.unique(x[row > 0]).size >= 3 for row in w], dtype=bool)  # one row per vertex (few)
    if np.any(ok):
        out[ok] = np.linalg.solve(a[ok], b[ok])[:, :2, 0]
    return out[:, 0], out[:, 1]


def loess_vertices(x: np.ndarray, span: float = 0.75, cell: float = 0.2) -> np.ndarray:
    """The vertices of R's loess k-d tree in one dimension (``surface = "interpolate"``).

    The bounding box ``[min x - mu, max x + mu]`` with
    ``mu = 0.005 max(range, 1e-10 max|x| + 1e-30)``; a cell holding more than
    ``fc = floor(n span cell)`` points is split at its median point
    ``x_(m)``, ``m = floor((l + u) / 2)`` (1-based ranks; moved to the nearest
    rank whose value differs from the next when there are ties, tried at
    offsets 0, +1, -1, +2, ...) unless that value is a vertex of the cell.
    """
    xs = np.sort(x)
    n = xs.size
    fc = int(math.floor(n * span * cell))
    lo, hi = float(xs[0]), float(xs[-1])
    mu = 0.005 * max(hi - lo, 1e-10 * max(abs(lo), abs(hi)) + 1e-30)
    vertices = [lo - mu, hi + mu]
    cells = [(0, n - 1, lo - mu, hi + mu)]  # 0-based first and last rank, the cell's two vertices
    while cells:
        first, last, v_lo, v_hi = cells.pop()
        if last - first + 1 <= fc:
            continue
        m = (first + last + 2) // 2 - 1
        offset = 0
        while first <= m + offset < last:
            if xs[m + offset] != xs[m + offset + 1]:
                m += offset
                break
            offset = -offset + (1 if offset <= 0 else 0)
        if xs[m] == v_lo or xs[m] == v_hi:
            continue
        vertices.append(float(xs[m]))
        cells += [(first, m, v_lo, float(xs[m])), (m + 1, last, float(xs[m]), v_hi)]
    return np.sort(np.array(vertices))


def loess_fit(x, y, span: float = 0.75, cell: float = 0.2) -> np.ndarray:
    """R's ``loess(y ~ x)`` fitted values (degree 2, Gaussian family, default ``surface = "interpolate"``).

    The local quadratic fit (:func:`_local_quadratic`, ``q = floor(n span)``
    neighbours) is computed exactly at the vertices of R's k-d tree
    (:func:`loess_vertices`), and the curve between two vertices is the cubic
    Hermite interpolant of the values and slopes there, as R's ``ehg128``
    does in one dimension.  The cost is O(n) per vertex (about 2 / (span
    cell) vertices), so any n is cheap.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    q = int(math.floor(x.size * span))
    v = loess_vertices(x, span, cell)
    value, slope = _local_quadratic(x, y, v, q)
    k = np.clip(np.searchsorted(v, x, side="right") - 1, 0, v.size - 2)
    h = v[k + 1] - v[k]
    t = (x - v[k]) / h
    return ((1.0 - t) ** 2 * (1.0 + 2.0 * t) * value[k] + t ** 2 * (3.0 - 2.0 * t) * value[k + 1]
            + (t * (1.0 - t) ** 2 * slope[k] - t ** 2 * (1.0 - t) * slope[k + 1]) * h)


def _loess_part(p: np.ndarray, y: np.ndarray) -> dict:
    """E50, E90, ICI and Emax of ``|p - loess(y ~ p)|`` (Austin and Steyerberg 2019)."""
    err = np.abs(p - loess_fit(p, y))
    return {"loess_e50": float(np.median(err)), "loess_e90": float(np.quantile(err, 0.9)),
            "loess_ici": float(np.mean(err)), "loess_emax": float(np.max(err))}
