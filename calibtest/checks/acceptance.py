"""Acceptance tests against pre-specified limits: the ECE below a margin, and CITL, slope and O/E within limits.

A validation study that must show a model *meets* a calibration requirement
tests the requirement as the alternative:

* :func:`margin_test` (also ``CalibrationResult.margin_test``): H0: ECE >= delta
  against H1: ECE < delta, a non-inferiority test on the ECE scale of the
  result's target, decided by the one-sided (1 - alpha) upper confidence bound
  for ECE (:mod:`calibtest.core.margin` gives the formulas and the rule when
  T <= 0);
* :func:`citl_test`, :func:`slope_test`, :func:`oe_test`: two one-sided tests
  (TOST, Schuirmann 1987) that calibration-in-the-large lies within (-a, a),
  the calibration slope within (l, u) and the observed/expected ratio within
  (l, u), decided by the (1 - 2 alpha) interval lying inside the limits.

A survival result with rows censored before the horizon takes the margin test
on ECE(t) with its IPCW standard error and V_0, and CITL, slope and O/E from
the survival evidence at the horizon (:func:`calibtest.survival_calibration`:
Crowson et al.'s intercept and Cox slope on cloglog(risk), Kaplan-Meier O/E).

Every result holds the limit, the bound or interval, the statistic, the
p-value and the decision, which never disagree: the test rejects at level
alpha exactly when the bound (interval) lies within the limit, and the p-value
is the smallest alpha at which it would.  See ``docs/acceptance.md``.
"""
from __future__ import annotations

import math
import numbers
from typing import ClassVar
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from calibtest.core.targets import Target
from calibtest.display.format import conclusion_property, fmt, fmt_p, p_equals
from calibtest.inputs.validation import OptionError, OptionTypeError, check_alpha, is_bool
from calibtest.options import ACCEPTANCE_CRITERIA, ACCEPTANCE_LABELS, check_criteria, check_number, check_option, criterion_text
from calibtest.core.margin import log_oe_se, margin_bound, tost
from calibtest.display.summary import CalibSummary, ResultDisplay
from calibtest.checks.survival_calibration import SurvivalEvidence
from calibtest.checks.val_prob import ValProbResult, val_prob

__all__ = ["MarginTestResult", "EquivalenceTestResult", "margin_test", "citl_test", "slope_test", "oe_test",
           "margin_null_variance",
           "AcceptanceEvaluation", "evaluate_acceptance", "MET", "NOT_MET", "NOT_EVALUABLE"]


# ----------------------------------------------------------------------------- checks
def _check_limits(within, name: str, positive: bool = False) -> tuple[float, float]:
    if isinstance(within, (str, bytes)) or not hasattr(within, "__len__") or len(within) != 2:
        raise OptionTypeError(f"{name} must be a pair (lower, upper), got {within!r}")
    low, high = (check_number(v, name) for v in within)
    if not low < high:
        raise OptionError(f"{name} must have lower < upper, got ({low}, {high})")
    if positive and low <= 0.0:
        raise OptionError(f"{name} limits must be > 0 for a ratio, got ({low}, {high})")
    return low, high


def _level(alpha, default) -> float:
    return check_alpha(default if alpha is None else alpha)


# ----------------------------------------------------------------------------- ECE below a margin
def margin_null_variance(result) -> tuple[float, str]:
    """``(V0, source)``: the calibrated-regime variance of T a result's margin test uses as its floor.

    The exact conditional variance Var(T | Z) given the predictions when the
    result computed it (``result.conditional``), otherwise
    sigma0^2 / (n^2 w) (the paper's eq. (12)); for a weighted result the
    estimated V_0 of its weighted null (its ``sigma0_sq`` is n^2 w V_0).
    """
    kind = getattr(result, "kind", None)
    return paper_null_variance(result) if kind is None else kind.margin_null_variance()


def paper_null_variance(result) -> tuple[float, str]:
    """``(V0, source)`` of unweighted rows: the exact Var(T | Z) when computed, else sigma0^2 / (n^2 w)."""
    cond = getattr(result, "conditional", None)
    if cond is not None:
        return float(cond.variance), "conditional Var(T | Z)"
    return float(result.sigma0_sq / (result.n ** 2 * result.bin_volume)), "sigma0^2 / (n^2 w)"


@dataclass(frozen=True, repr=False)
class MarginTestResult(ResultDisplay):
    """Test of H0: ECE >= margin against H1: ECE < margin (:func:`margin_test`).

    Attributes
    ----------
    margin : float
        delta, on the ECE scale of the result's target.
    alpha : float
        Level; the bound is one-sided at 1 - alpha.
    estimate : float
        The result's ECE estimate sqrt(T+).
    estimate_sq : float
        T, the debiased estimate of ECE^2 (may be negative).
    upper : float
        One-sided (1 - alpha) upper confidence bound for ECE, sqrt(upper_sq).
    upper_sq : float
        T+ + z_alpha se, the bound for ECE^2.
    se : float
        sqrt(max(sigma1^2 / n, V0)), the standard error of T the bound uses.
    se_sigma1 : float
        The result's own standard error (sigma1 / sqrt(n), or the weighted one).
    null_variance : float
        V0, the calibrated-regime variance of T (the floor of se^2).
    null_variance_source : str
        Where V0 came from (see :func:`margin_null_variance`).
    floor_used : bool
        V0 exceeded se_sigma1^2 (the floor set the bound).
    statistic : float
        (T+ - margin^2) / se; negative values favour ECE < margin.
    pvalue : float
        Phi(statistic), the smallest alpha at which H0 is rejected.
    reject : bool
        upper < margin: the model meets the margin at level alpha.
    n, n_bins : int
    mode : str
        The calibration target (binary, top1, topk, full).
    method : str
        The result's interval method; a resampling result is tested with the
        same normal-theory bound (its T and sigma1 are those of every method).
    target : str or None
        The target in words when the mode does not name it: a survival
        result's (``survival.target``, e.g. "survival at the horizon t = 5");
        None otherwise.
    """

    margin: float
    alpha: float
    estimate: float
    estimate_sq: float
    upper: float
    upper_sq: float
    se: float
    se_sigma1: float
    null_variance: float
    null_variance_source: str
    floor_used: bool
    statistic: float
    pvalue: float
    reject: bool
    n: int
    n_bins: int
    mode: str
    method: str
    target: str | None = None

    conclusion = conclusion_property("Call it, ``m.conclusion()``: one sentence, whether ECE < margin was shown, with the bound.")

    def _conclusion(self) -> str:
        level = f"{100 * (1 - self.alpha):g}%"
        if self.reject:
            return (f"ECE is below the margin {fmt(self.margin, 4)}: its one-sided {level} upper confidence bound "
                    f"{fmt(self.upper, 4)} is below the margin ({p_equals(self.pvalue)}).")
        return (f"ECE below the margin {fmt(self.margin, 4)} is not shown: the one-sided {level} upper confidence "
                f"bound for ECE is {fmt(self.upper, 4)} ({p_equals(self.pvalue)}).")

    def notes(self) -> list[str]:
        """The method, the variance floor and (when it applies) the resampling caveat."""
        out = [f"H0: ECE >= {fmt(self.margin, 4)} against H1: ECE < {fmt(self.margin, 4)}. The bound for ECE^2 is "
               "T+ + z_alpha se with se^2 = max(sigma1^2 / n, V0) (the miscalibrated regime at the boundary "
               f"ECE = margin > 0); V0 = {self.null_variance_source}, the noise of T under calibration, keeps the "
               "bound from collapsing when T <= 0 (docs/acceptance.md). Rejects iff the bound for ECE is below "
               "the margin; p = Phi((T+ - margin^2) / se)."]
        if self.floor_used:
            out.append("The floor V0 exceeded sigma1^2 / n and set the bound.")
        if self.method != "adjusted":
            out.append(f"The result's interval is the {self.method} one; the margin test uses the normal-theory "
                       "bound from the same T and sigma1 (a resampling quantile has no p-value that agrees "
                       "with it at every level).")
        return out

    def _repr_parts(self):
        return [f"margin={self.margin:g}", f"upper={self.upper:.4g}", f"p={self.pvalue:.4g}",
                f"reject={self.reject}"]

    def _summary(self, alpha):
        if alpha is not None and alpha != self.alpha:
            raise ValueError("a margin test's level is fixed when it is made; call margin_test(margin, alpha=...)")
        s = CalibSummary()
        s.add_title("Margin test: is the ECE below a pre-specified margin?")
        s.add_settings({"Target:": self.target or self.mode, "No. observations:": str(self.n),
                        "Bins (B):": str(self.n_bins),
                        "Margin:": fmt(self.margin), "Alpha:": fmt(self.alpha)})
        table = pd.DataFrame({"estimate": [self.estimate], "upper bound": [self.upper], "margin": [self.margin],
                              "z": [self.statistic], "p-value": [self.pvalue],
                              "ECE < margin": ["yes" if self.reject else "no"]}, index=["ECE"], dtype=object)
        s.add_table(table, {"estimate": 4, "upper bound": 4, "margin": 4, "z": 3, "p-value": fmt_p})
        s.add_text(self.conclusion())
        s.add_notes(self.notes())
        return s

    def _dict(self) -> dict:
        out = {**asdict(self), "conclusion": self.conclusion()}
        if self.target is None:
            del out["target"]
        return out


def margin_test(result, margin, alpha: float | None = None) -> MarginTestResult:
    """Test that a model's ECE is below a pre-specified margin (non-inferiority on the ECE scale).

    H0: ECE >= margin against H1: ECE < margin, for the ECE of the result's
    target (binary, top-1, top-k or full calibration).  With T the debiased
    estimate of ECE^2, T+ = max(T, 0) and z_alpha = Phi^-1(1 - alpha), the
    one-sided (1 - alpha) upper confidence bound for ECE^2 is::

        U = T+ + z_alpha se,   se^2 = max(sigma1^2 / n, V0)

    (the paper's miscalibrated-regime law sqrt(n)(T - ECE^2)/sigma1 -> N(0, 1),
    which holds at the boundary ECE = margin > 0).  The test rejects iff
    sqrt(U) < margin; p = Phi((T+ - margin^2) / se) is the smallest alpha at
    which it rejects, so bound, p-value and decision agree.

    **When T <= 0**: the bound is z_alpha se.  The plug-in sigma1^2 is formed
    from the bin means and is near 0 when they are, so the floor V0 -- the
    variance of T under calibration (the exact conditional Var(T | Z) when the
    result computed it, else sigma0^2 / (n^2 w); for a weighted result its V_0)
    -- keeps the bound at least z_alpha sqrt(V0).  A maximum rather than a sum:
    in ``vignettes/margin_test.md`` it leaves size and power unchanged while the
    sum lost up to 0.58 of power.

    A weighted result uses its own standard error and V_0.  A resampling result
    (``method="bootstrap"``, ``"subsampling"``, ``"hulc"``) is tested with the
    same normal-theory bound from its T and sigma1 (identical for every method);
    the notes say so.

    Parameters
    ----------
    result : CalibrationResult
        From :func:`calibtest.calib_ci`.
    margin : float
        delta > 0 on the ECE scale.
    alpha : float, optional
        Level (default: the result's).

    Returns
    -------
    MarginTestResult

    Examples
    --------
    >>> import numpy as np, calibtest as ct
    >>> rng = np.random.default_rng(0); p = rng.beta(2, 5, 5000)
    >>> res = ct.calib_ci(y=rng.binomial(1, p), probs=p)
    >>> bool(res.margin_test(0.05).reject)
    True
    """
    for attr in ("estimate", "se", "sigma0_sq", "bin_volume", "n"):
        if not hasattr(result, attr):
            raise OptionTypeError(f"result must be a CalibrationResult (from calib_ci), got {type(result).__name__}")
    if margin is None:
        raise OptionTypeError("margin must be a number > 0 (the ECE-scale margin), got None")
    margin = check_option("margin", margin)
    alpha = _level(alpha, result.alpha)
    v0, source = margin_null_variance(result)
    mb = margin_bound(result.estimate, result.se, v0, margin, alpha)
    return MarginTestResult(margin=margin, alpha=alpha, estimate=math.sqrt(max(result.estimate, 0.0)),
                            estimate_sq=float(result.estimate), upper=mb.upper, upper_sq=mb.upper_sq, se=mb.se,
                            se_sigma1=float(result.se), null_variance=v0, null_variance_source=source,
                            floor_used=bool(v0 > result.se ** 2), statistic=mb.statistic, pvalue=mb.pvalue,
                            reject=mb.reject, n=int(result.n), n_bins=int(result.n_bins), mode=result.mode,
                            method=result.method, target=_target(result))


def _target(result) -> str | None:
    """The target in words when the mode does not name it (a survival result's; None otherwise)."""
    kind = getattr(result, "kind", None)
    return None if kind is None else kind.stated_target()


# ----------------------------------------------------------------------------- two one-sided tests
@dataclass(frozen=True, repr=False)
class EquivalenceTestResult(ResultDisplay):
    """Two one-sided tests (TOST) that a calibration measure lies within limits.

    Attributes
    ----------
    measure : str
        ``"citl"``, ``"slope"`` or ``"oe"``.
    lower_limit, upper_limit : float
        The pre-specified limits (l, u); H1: l < theta < u.
    estimate : float
        The measure's estimate (O/E as a ratio).
    se : float
        Standard error on the test's scale (log scale for O/E).
    scale : {"identity", "log"}
        The scale of the normal approximation.
    ci_lower, ci_upper : float
        The (1 - 2 alpha) two-sided interval (on the measure's scale).
    statistic_lower, statistic_upper : float
        (est - l) / se and (est - u) / se on the test's scale.
    pvalue_lower, pvalue_upper : float
        P-values of H0: theta <= l and H0: theta >= u.
    pvalue : float
        max of the two: the smallest alpha at which both reject.
    reject : bool
        The interval lies inside (l, u): the measure is within its limits.
    alpha : float
    n : int
        Rows the measure was computed on.
    method : str
        How the estimate and its standard error were obtained.
    """

    measure: str
    lower_limit: float
    upper_limit: float
    estimate: float
    se: float
    scale: str
    ci_lower: float
    ci_upper: float
    statistic_lower: float
    statistic_upper: float
    pvalue_lower: float
    pvalue_upper: float
    pvalue: float
    reject: bool
    alpha: float
    n: int
    method: str

    _LABELS = {"citl": "CITL", "slope": "Calibration slope", "oe": "O/E"}

    @property
    def label(self) -> str:
        return self._LABELS[self.measure]

    conclusion = conclusion_property("Call it, ``r.conclusion()``: one sentence, whether the measure was shown within its limits.")

    def _conclusion(self) -> str:
        level = f"{100 * (1 - 2 * self.alpha):g}%"
        lim = f"({fmt(self.lower_limit, 4)}, {fmt(self.upper_limit, 4)})"
        iv = f"[{fmt(self.ci_lower, 4)}, {fmt(self.ci_upper, 4)}]"
        if self.reject:
            return (f"{self.label} is within {lim}: its {level} interval {iv} lies inside the limits "
                    f"(TOST {p_equals(self.pvalue)}).")
        return (f"{self.label} within {lim} is not shown: its {level} interval is {iv} "
                f"(TOST {p_equals(self.pvalue)}).")

    def _repr_parts(self):
        return [f"{self.measure}={self.estimate:.4g}", f"limits=({self.lower_limit:g}, {self.upper_limit:g})",
                f"p={self.pvalue:.4g}", f"reject={self.reject}"]

    def _summary(self, alpha):
        if alpha is not None and alpha != self.alpha:
            raise ValueError("a TOST's level is fixed when it is made; call it again with alpha=...")
        s = CalibSummary()
        s.add_title(f"Two one-sided tests: is the {self.label} within its limits?")
        s.add_settings({"No. observations:": str(self.n), "Limits:": f"({fmt(self.lower_limit)}, "
                        f"{fmt(self.upper_limit)})", "Alpha:": fmt(self.alpha), "Scale:": self.scale})
        table = pd.DataFrame({"estimate": [self.estimate], "ci lower": [self.ci_lower], "ci upper": [self.ci_upper],
                              "p (lower)": [self.pvalue_lower], "p (upper)": [self.pvalue_upper],
                              "p": [self.pvalue], "within": ["yes" if self.reject else "no"]},
                             index=[self.label], dtype=object)
        s.add_table(table, {"estimate": 4, "ci lower": 4, "ci upper": 4, "p (lower)": fmt_p, "p (upper)": fmt_p,
                            "p": fmt_p})
        s.add_text(self.conclusion())
        s.add_notes([f"TOST (Schuirmann 1987) at level {fmt(self.alpha)}: H0: theta <= l or theta >= u; rejects "
                     f"iff the {100 * (1 - 2 * self.alpha):g}% interval lies inside (l, u); p = max of the two "
                     "one-sided p-values.", self.method])
        return s

    def _dict(self) -> dict:
        return {**asdict(self), "conclusion": self.conclusion()}


def _tost_result(measure: str, m: "RecalibrationMeasure", low: float, high: float,
                 alpha: float) -> EquivalenceTestResult:
    """TOST of ``measure`` within (low, high) at level ``alpha`` on the estimate, standard error, scale, row
    count, method and degrees of freedom of ``m``."""
    est, se, scale, n, method, df = m.estimate, m.se, m.scale, m.n, m.method, m.df
    if scale == "log":
        tb = tost(math.log(est) if est > 0 else -math.inf, se, math.log(low), math.log(high), alpha, df)
        lo_ci, hi_ci = math.exp(tb.lower_ci), math.exp(tb.upper_ci)
    else:
        tb = tost(est, se, low, high, alpha, df)
        lo_ci, hi_ci = tb.lower_ci, tb.upper_ci
    return EquivalenceTestResult(measure=measure, lower_limit=low, upper_limit=high, estimate=float(est),
                                 se=float(se), scale=scale, ci_lower=lo_ci, ci_upper=hi_ci,
                                 statistic_lower=tb.statistic_lower, statistic_upper=tb.statistic_upper,
                                 pvalue_lower=tb.pvalue_lower, pvalue_upper=tb.pvalue_upper, pvalue=tb.pvalue,
                                 reject=tb.reject, alpha=alpha, n=int(n), method=method)


#: Why the CITL, slope and O/E equivalence tests refuse a clustered result without cluster-robust measures.
_CLUSTERED = ("the CITL, slope and O/E equivalence tests of a clustered result (cluster=) use its cluster-robust "
              "CITL, slope and O/E (result.clustering.measures), which this result does not hold")

#: How the cluster-robust CITL, slope and O/E are tested (the tests' ``method``).
_CLUSTERED_METHOD = ("{label}, cluster-robust ({G} clusters, cluster=): the estimate of the rows with the "
                     "cluster-robust (sandwich, CR1) standard error{log} and Student's t with G - 1 = {df} degrees "
                     "of freedom, as in result.clustering.measures (cluster_robust_measures).")


@dataclass(frozen=True)
class RecalibrationMeasure:
    """One recalibration measure of a result (CITL, the slope or O/E) with its standard error: what a TOST reads.

    Written by the kind of a result (:mod:`calibtest.ece.kinds`): the
    cluster-robust measure of clustered rows, the survival evidence's at the
    horizon, val_prob's of binary rows, the row count O/E of binary or top-1
    rows.

    Attributes
    ----------
    measure : {"citl", "slope", "oe"}
    estimate, se : float
        The estimate (O/E as a ratio) and its standard error on ``scale``.
    scale : {"identity", "log"}
        The scale of the normal (or t) approximation.
    n : int
        Rows behind the estimate.
    method : str
        How it was estimated, in words (the tests' ``method``).
    alpha : float
        The level of the object it came from (the tests' default level).
    df : int or None
        Degrees of freedom of Student's t (cluster-robust), None for the normal.
    """

    measure: str
    estimate: float
    se: float
    scale: str
    n: int
    method: str
    alpha: float
    df: int | None = None

    def interval(self, alpha: float | None = None) -> tuple[float, float]:
        """The two-sided (1 - alpha) interval (default: the stored level), on the ratio scale for O/E."""
        from scipy import stats

        alpha = self.alpha if alpha is None else check_alpha(alpha)
        q = float(stats.norm.ppf(1 - alpha / 2) if self.df is None else stats.t.ppf(1 - alpha / 2, self.df))
        if self.scale == "log":
            centre = math.log(self.estimate) if self.estimate > 0 else -math.inf
            return math.exp(centre - q * self.se), math.exp(centre + q * self.se)
        return self.estimate - q * self.se, self.estimate + q * self.se


def clustered_measure(measure: str, result) -> RecalibrationMeasure:
    """The cluster-robust CITL, slope or O/E of a clustered result (``result.clustering.measures``).

    The estimate and standard error are those the summary and the report
    print; t with G - 1 degrees of freedom (on the log scale for O/E).
    """
    cm = result.clustering.measures
    if cm is None:
        raise ValueError(_CLUSTERED)
    est, se = {"citl": (cm.citl, cm.citl_se), "slope": (cm.slope, cm.slope_se), "oe": (cm.oe, cm.log_oe_se)}[measure]
    label = {"citl": "CITL", "slope": "Calibration slope", "oe": "O/E"}[measure]
    if not (math.isfinite(est) and math.isfinite(se) and se > 0 and (measure != "oe" or est > 0)):
        raise ValueError(f"the cluster-robust {label} is not defined on these rows (estimate {est:.6g}, standard "
                         f"error {se:.6g}: e.g. the outcomes are separated by the predictions, or no event)")
    method = _CLUSTERED_METHOD.format(label=label, G=cm.n_clusters, df=cm.df,
                                      log=" of log(O/E), from the cluster sums" if measure == "oe" else "")
    return RecalibrationMeasure(measure, est, se, "log" if measure == "oe" else "identity", result.n, method,
                                result.alpha, df=cm.df)


def survival_measure(measure: str, sev: SurvivalEvidence) -> RecalibrationMeasure:
    """CITL, the slope or the Kaplan-Meier O/E at the horizon of a survival evidence; ValueError when not computed."""
    if measure == "oe":  # Kaplan-Meier 1 - S(t) over the mean risk, Greenwood standard error
        return RecalibrationMeasure(
            "oe", sev.oe, sev.oe_se, "log", sev.n,
            f"O/E at t = {fmt(sev.horizon)}: Kaplan-Meier 1 - S(t) = {sev.observed:.6g} over the mean risk "
            f"{sev.expected:.6g}; log-scale interval, se(log O/E) = Greenwood se of S(t) / (1 - S(t)) "
            "(survival_calibration).", sev.alpha)
    est, se = (sev.citl, sev.citl_se) if measure == "citl" else (sev.slope, sev.slope_se)
    if est is None:
        raise ValueError(f"the survival {'CITL' if measure == 'citl' else 'calibration slope'} at the horizon was "
                         f"not computed: {sev.scope}")
    return RecalibrationMeasure(measure, est, se, "identity", sev.n, _SURVIVAL_METHOD[measure], sev.alpha)


#: How the survival CITL and slope are defined (the tests' ``method``).
_SURVIVAL_METHOD = {
    "citl": "CITL at t: intercept a of the Poisson model log E[events by t] = a + log(expected cumulative hazard) "
            "(Crowson et al. 2016), a = log of Breslow's H_0(t) with offset cloglog(risk); Breslow's variance "
            "(survival_calibration).",
    "slope": "Slope at t: b of the Cox model with log relative hazard b cloglog(risk), follow-up censored at t "
             "(Crowson et al. 2016); Wald standard error (survival_calibration).",
}

#: What oe_test needs of a result.
OE_NEEDS = ("oe_test needs a binary or top-1 CalibrationResult holding its rows (computed in memory), or probs= "
            "and y=")

def valprob_needs(result) -> OptionTypeError:
    """The refusal of CITL and slope for an object that is neither val_prob's nor a binary result with rows."""
    return OptionTypeError("result must be a ValProbResult (from val_prob) or a binary CalibrationResult holding "
                           f"its rows, got {type(result).__name__}")


def valprob_measure(measure: str, vp: ValProbResult) -> RecalibrationMeasure:
    """CITL or the slope of val_prob's fits (rows with an infinite logit left out, as R's val.prob)."""
    if measure == "oe":
        raise ValueError(OE_NEEDS)
    return RecalibrationMeasure(measure, getattr(vp, measure), getattr(vp, f"{measure}_se"), "identity",
                                vp.n - vp.n_infinite_logit, _VALPROB_METHOD[measure], vp.alpha)


def rows_valprob(y, probs, alpha: float) -> ValProbResult:
    """val_prob of binary rows (0/1 outcomes rounded from the stored floats)."""
    return val_prob(y=np.rint(y).astype(np.int64), probs=probs, alpha=alpha)


def rows_oe_measure(p: np.ndarray, yy: np.ndarray, alpha: float) -> RecalibrationMeasure:
    """O/E = sum y / sum p of rows, with se(log O/E) = sqrt((1 - O/n) / O)."""
    n = p.size
    observed, expected = float(yy.sum()), float(p.sum())
    if observed == 0 or expected == 0:
        raise ValueError(f"O/E needs at least one event and a positive expected count (O = {observed:g}, "
                         f"E = {expected:g})")
    se = float(log_oe_se(observed, n))
    return RecalibrationMeasure("oe", observed / expected, se, "log", n,
                                f"O/E = {observed:g} / {expected:.6g}; log-scale interval, se(log O/E) = "
                                "sqrt((1 - O/n) / O) (Debray et al. 2017; Riley et al. 2021).", alpha)


#: How the CITL and the slope of a binary or top-1 result are estimated (val_prob's fits).
_VALPROB_METHOD = {
    "citl": "CITL: a0 of logit P(y = 1) = a0 + logit(p) (offset), Wald standard error (val_prob).",
    "slope": "Slope: b of logit P(y = 1) = a + b logit(p) (val.prob's joint fit), Wald standard error.",
}

#: The measures of the objects other than a result: val_prob's and survival_calibration's.
_MEASURES = {SurvivalEvidence: lambda measure, obj: survival_measure(measure, obj),
             ValProbResult: lambda measure, obj: valprob_measure(measure, obj)}


def recalibration_measure(measure: str, result) -> RecalibrationMeasure:
    """The measure a TOST of ``result`` reads: a result's kind supplies its own (:mod:`calibtest.ece.kinds`)."""
    own = _MEASURES.get(type(result))
    if own is not None:
        return own(measure, result)
    kind = getattr(result, "kind", None)
    if kind is None:
        if measure == "oe":
            raise ValueError(OE_NEEDS)
        raise valprob_needs(result)
    return kind.recalibration_measure(measure)


def _recalibration_test(measure: str, result, low: float, high: float, alpha) -> EquivalenceTestResult:
    """TOST of CITL, the slope or O/E (``measure``) within (low, high), on the measure the result supplies."""
    m = recalibration_measure(measure, result)
    return _tost_result(measure, m, low, high, _level(alpha, m.alpha))


def citl_test(result, within, alpha: float | None = None) -> EquivalenceTestResult:
    """TOST that calibration-in-the-large lies within (-a, a) (or a given (l, u)).

    CITL is a0 of logit P(y = 1) = a0 + logit(p) (offset, slope fixed at 1) with
    its Wald standard error, as :func:`calibtest.val_prob` computes it.  Rejects
    at level alpha iff the (1 - 2 alpha) Wald interval a0 -/+ z_alpha se lies
    inside the limits.

    Parameters
    ----------
    result : ValProbResult, CalibrationResult or SurvivalEvidence
        From :func:`calibtest.val_prob`, or a binary ``calib_ci`` result holding
        its rows (val_prob is then run on them).  A survival ``calib_ci``
        result with rows censored before the horizon, or a
        :func:`calibtest.survival_calibration` result, is tested on the
        survival CITL at the horizon (Crowson et al.'s log standardized
        incidence ratio, not the logit intercept; ``docs/acceptance.md``).
    within : float or (float, float)
        a > 0 for (-a, a), or the pair (l, u).
    alpha : float, optional
        Level of each one-sided test (default: the result's).

    Returns
    -------
    EquivalenceTestResult

    Examples
    --------
    >>> import calibtest as ct
    >>> res = ct.calib_ci("y ~ p", data=ct.load_demo())
    >>> test = ct.citl_test(res, 0.2)            # H1: -0.2 < CITL < 0.2
    >>> round(test.estimate, 3), bool(test.reject)
    (-0.02, True)
    """
    if isinstance(within, numbers.Real) and not is_bool(within):
        a = check_number(within, "within")
        if a <= 0:
            raise OptionError(f"within must be > 0 for (-a, a), got {a}")
        low, high = -a, a
    else:
        low, high = _check_limits(within, "within")
    return _recalibration_test("citl", result, low, high, alpha)


def slope_test(result, within, alpha: float | None = None) -> EquivalenceTestResult:
    """TOST that the calibration slope lies within (l, u).

    The slope b of logit P(y = 1) = a + b logit(p) (val.prob's joint fit) with
    its Wald standard error; rejects iff b -/+ z_alpha se lies inside (l, u).

    Parameters
    ----------
    result : ValProbResult, CalibrationResult or SurvivalEvidence
        As in :func:`citl_test`; survival results are tested on the Cox
        calibration slope on cloglog(risk) at the horizon.
    within : (float, float)
        The limits (l, u), e.g. (0.8, 1.25).
    alpha : float, optional

    Returns
    -------
    EquivalenceTestResult

    Examples
    --------
    >>> import calibtest as ct
    >>> res = ct.calib_ci("y ~ p", data=ct.load_demo())
    >>> test = ct.slope_test(res, (0.8, 1.25))
    >>> round(test.estimate, 3), bool(test.reject)
    (0.963, True)
    """
    low, high = _check_limits(within, "within")
    return _recalibration_test("slope", result, low, high, alpha)


def oe_test(result=None, within=None, alpha: float | None = None, *, probs=None, y=None) -> EquivalenceTestResult:
    """TOST that the observed/expected events ratio O/E lies within (l, u).

    O = sum y (events; correct top-1 predictions for a top-1 result) and
    E = sum p (the sum of the predictions).  Treating E as fixed and
    O ~ Binomial(n, O/n), log(O/E) has standard error sqrt((1 - O/n) / O)
    (Debray et al. 2017, BMJ 356:i6460; Riley et al. 2021, Stat Med 40:4230);
    the test runs on the log scale against (log l, log u) and the interval is
    exp(log(O/E) -/+ z_alpha se).

    Parameters
    ----------
    result : CalibrationResult or SurvivalEvidence, optional
        A binary or top-1 ``calib_ci`` result holding its rows; or give
        ``probs`` and ``y``.  A survival ``calib_ci`` result with rows
        censored before the horizon, or a :func:`calibtest.survival_calibration`
        result, is tested on the Kaplan-Meier O/E at the horizon (Greenwood
        standard error of log O/E).
    within : (float, float)
        Limits (l, u) with 0 < l < u, e.g. (0.8, 1.25).
    alpha : float, optional
        Level (default: the result's, else 0.05).
    probs, y : array_like, optional
        Predictions in [0, 1] and 0/1 outcomes (instead of ``result``).

    Returns
    -------
    EquivalenceTestResult

    Examples
    --------
    >>> import calibtest as ct
    >>> df = ct.load_demo()
    >>> test = ct.oe_test(probs=df["p"], y=df["y"], within=(0.8, 1.25))
    >>> round(test.estimate, 4), bool(test.reject)
    (0.9886, True)
    """
    low, high = _check_limits(within, "within", positive=True)
    if result is not None:
        if probs is not None or y is not None:
            raise ValueError("give result or probs= and y=, not both")
        return _recalibration_test("oe", result, low, high, alpha)
    if probs is None or y is None:
        raise ValueError("give result, or both probs= and y=")
    p = np.asarray(probs, dtype=float).ravel()
    yy = np.asarray(y, dtype=float).ravel()
    if p.shape != yy.shape:
        raise ValueError(f"probs and y must have the same length, got {p.size} and {yy.size}")
    if p.size == 0 or not np.all(np.isfinite(p)) or p.min() < 0 or p.max() > 1:
        raise ValueError("probs must be non-empty and in [0, 1]")
    if not np.all((yy == 0) | (yy == 1)):
        raise ValueError("y must hold 0/1 outcomes")
    return _oe_rows_test(p, yy, low, high, alpha)


def _oe_rows_test(p, yy, low: float, high: float, alpha) -> EquivalenceTestResult:
    m = rows_oe_measure(p, yy, 0.05)
    return _tost_result("oe", m, low, high, _level(alpha, m.alpha))  # m: log scale, the normal (df None)


# ----------------------------------------------------------------------------- the plan's criteria
#: The verdicts of :func:`evaluate_acceptance`.
MET, NOT_MET, NOT_EVALUABLE = "met", "not met", "not evaluable"


@dataclass(frozen=True, repr=False)
class AcceptanceEvaluation:
    """The verdict on each pre-specified acceptance criterion (:func:`evaluate_acceptance`).

    Attributes
    ----------
    table : pandas.DataFrame
        One row per criterion, in the plan's order (the primary first):
        ``criterion`` (key), ``label`` (the criterion and its limit in
        words), ``quantity`` (the measure it limits with its scale, as the
        result's kind names it: for a survival result censored before the
        horizon, CITL is log(O/E) of the cumulative hazard at t), ``primary`` (bool), ``lower_limit``, ``upper_limit`` (NaN
        where one-sided), ``estimate``, ``ci_lower``, ``ci_upper`` (the bound
        or interval that decides the test; ``ci_lower`` is NaN for the
        one-sided bound of the margin test), ``interval`` (which interval, in
        words), ``test`` (the function of :mod:`calibtest.checks.acceptance`),
        ``pvalue``, ``verdict`` (``"met"``, ``"not met"`` or
        ``"not evaluable"``) and ``reason`` (why a criterion is not
        evaluable; empty otherwise).
    sentence : str
        One sentence for a Summary of findings: the model meets all
        criteria, or which it does not meet and which could not be evaluated.
    alpha : float
        Level of every test.
    primary : str or None
        The primary criterion.
    model : str
        The model's name in the sentence.
    tests : tuple
        The test results (:class:`MarginTestResult` / :class:`EquivalenceTestResult`,
        None where not evaluable), in the order of ``table``.
    """

    NOT_EVALUABLE: ClassVar[str] = NOT_EVALUABLE  # the verdict of a criterion the result cannot be tested on

    table: pd.DataFrame
    sentence: str
    alpha: float
    primary: str | None
    model: str
    tests: tuple

    @property
    def all_met(self) -> bool:
        """Every criterion evaluated and met."""
        return bool((self.table["verdict"] == MET).all())

    def __repr__(self) -> str:
        counts = self.table["verdict"].value_counts()
        parts = ", ".join(f"{counts.get(v, 0)} {v}" for v in (MET, NOT_MET, NOT_EVALUABLE))
        return f"<AcceptanceEvaluation {self.model}: {parts} (alpha={self.alpha:g})>"

    def to_dict(self) -> dict:
        """The table's rows (JSON values; NaN as None), the sentence and the level."""
        rows = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
                for row in self.table.to_dict(orient="records")]
        return {"model": self.model, "alpha": self.alpha, "primary": self.primary, "sentence": self.sentence,
                "criteria": rows}


def _not_evaluable_reason(key: str, result) -> str:
    """Why ``result`` cannot be tested on criterion ``key`` before running the test ('' when it can be tried)."""
    if key == "ece_below":
        if not hasattr(result, "sigma0_sq"):
            return f"the margin test needs a calib_ci result, got {type(result).__name__}"
        return ""
    kind = getattr(result, "kind", None)
    if kind is None:
        return applicability_reason(key, getattr(result, "mode", None), getattr(result, "data", None) is not None)
    return kind.acceptance_reason(key)


#: The measure each recalibration criterion tests, in words.
CRITERION_MEASURES = {"citl_within": "CITL", "slope_within": "the calibration slope", "oe_within": "O/E"}


def applicability_reason(key: str, mode, has_rows: bool, weighted: bool = False) -> str:
    """Why a result of target ``mode`` cannot be tested on the recalibration criterion ``key`` ('' when it can).

    CITL and the slope need a binary outcome, O/E a binary or top-1 target;
    each needs the rows and unweighted rows.
    """
    what = CRITERION_MEASURES[key]
    target = Target(mode)
    if not (target.one_dimensional if key == "oe_within" else target.has_recalibration_measures):
        target = {"top1": "top-1", "topk": "top-k", "full": "full calibration"}.get(target.value)
        needs = "a binary or top-1 target" if key == "oe_within" else "a binary outcome (one probability column)"
        return f"{what} is defined for {needs}; this result's target is {target}"
    if not has_rows:
        return f"{what} needs the rows, and this result does not hold them (it was computed from a stream)"
    if weighted:
        return f"the test of {what} is for unweighted rows; this result is weighted"
    return ""


def evaluate_acceptance(result, acceptance: dict, alpha: float | None = None, primary: str | None = None,
                        model: str = "The model") -> AcceptanceEvaluation:
    """Test a result against pre-specified acceptance criteria and state the verdict once.

    Each criterion is decided by its test at level ``alpha``: ``ece_below``
    by :func:`margin_test` (met iff the one-sided (1 - alpha) upper
    confidence bound for ECE is below the margin), ``citl_within``,
    ``slope_within`` and ``oe_within`` by :func:`citl_test`,
    :func:`slope_test` and :func:`oe_test` (met iff the (1 - 2 alpha)
    interval lies inside the limits).  A criterion the result cannot be
    tested on (CITL or slope of a top-k result, a result without its rows, a
    weighted result for CITL, slope and O/E) is ``"not evaluable"`` with the
    reason (not "not met": the sentence lists it apart, as could not be
    evaluated), and counts against "meets all criteria" (a criterion not
    shown met is not met by the intersection-union rule).  A clustered result
    (``cluster=``) is tested on its cluster-robust CITL, slope and O/E
    (``result.clustering.measures``, the numbers its summary prints; t with
    G - 1 degrees of freedom), and the table and sentence say so.

    Parameters
    ----------
    result : CalibrationResult
        From :func:`calibtest.calib_ci`.
    acceptance : dict
        Criteria as :func:`calibtest.plan` takes them (checked by
        :func:`calibtest.options.check_criteria`).
    alpha : float, optional
        Level (default: the result's); a report passes the plan's.
    primary : str, optional
        The primary criterion (a key of ``acceptance``); listed first and
        named in the sentence.
    model : str
        The subject of the sentence.

    Returns
    -------
    AcceptanceEvaluation
    """
    criteria = check_criteria(acceptance, "acceptance")
    if primary is not None and primary not in criteria:
        raise OptionError(f"primary must be one of the acceptance criteria ({', '.join(criteria)}), got {primary!r}")
    if not isinstance(model, str) or not model:
        raise OptionTypeError(f"model must be a non-empty string, got {model!r}")
    alpha = _level(alpha, getattr(result, "alpha", 0.05))
    order = ([primary] if primary else []) + [key for key in criteria if key != primary]
    rows, tests = [], []
    kind = getattr(result, "kind", None)
    robust = "" if kind is None else kind.acceptance_interval_words()
    for key in order:
        limit = criteria[key]
        quantity = (kind.acceptance_quantity(key) if kind is not None else
                    ACCEPTANCE_LABELS[key].removesuffix(" below").removesuffix(" within"))
        row = {"criterion": key, "label": criterion_text(key, limit), "quantity": quantity, "primary": key == primary,
               "lower_limit": math.nan if key == "ece_below" else float(limit[0]),
               "upper_limit": float(limit) if key == "ece_below" else float(limit[1]),
               "estimate": math.nan, "ci_lower": math.nan, "ci_upper": math.nan, "interval": "",
               "test": ACCEPTANCE_CRITERIA[key][1], "pvalue": math.nan, "verdict": NOT_EVALUABLE, "reason": ""}
        reason = _not_evaluable_reason(key, result)
        test = None
        if not reason:
            try:
                if key == "ece_below":
                    test = margin_test(result, limit, alpha)
                elif key == "citl_within":
                    test = citl_test(result, limit, alpha)
                elif key == "slope_within":
                    test = slope_test(result, limit, alpha)
                else:
                    test = oe_test(result, limit, alpha)
            except (ValueError, TypeError) as exc:  # the test's own refusal, stated as the reason
                reason = str(exc)
        if test is None:
            row["reason"] = reason
        elif key == "ece_below":
            row.update(estimate=test.estimate, ci_upper=test.upper, pvalue=test.pvalue,
                       interval=f"one-sided {100 * (1 - alpha):g}% upper bound",
                       verdict=MET if test.reject else NOT_MET)
        else:
            row.update(estimate=test.estimate, ci_lower=test.ci_lower, ci_upper=test.ci_upper, pvalue=test.pvalue,
                       interval=f"{100 * (1 - 2 * alpha):g}% {robust}interval, TOST",
                       verdict=MET if test.reject else NOT_MET)
        rows.append(row)
        tests.append(test)
    table = pd.DataFrame(rows)
    sentence = _acceptance_sentence(table, model, alpha) + _kind_sentence(table, kind)
    return AcceptanceEvaluation(table=table, sentence=sentence, alpha=alpha, primary=primary, model=model,
                                tests=tuple(tests))


def _kind_sentence(table: pd.DataFrame, kind) -> str:
    """What the kind of the result says of the recalibration measures that were tested ('' for most kinds)."""
    tested = table["criterion"].isin(list(CRITERION_MEASURES)) & (table["verdict"] != NOT_EVALUABLE)
    if kind is None or not tested.any():
        return ""
    return kind.acceptance_sentence([CRITERION_MEASURES[key] for key in table["criterion"][tested]])


def join_words(words: list) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _acceptance_sentence(table: pd.DataFrame, model: str, alpha: float) -> str:
    total = len(table)
    words = table["label"].str.replace("Calibration slope", "calibration slope", regex=False)
    met = words[table["verdict"] == MET].tolist()
    failed = words[table["verdict"] == NOT_MET].tolist()
    unknown = words[table["verdict"] == NOT_EVALUABLE].tolist()
    primary = table["primary"].to_numpy(dtype=bool)
    tail = ""
    if primary.any():
        state = {MET: "is met", NOT_MET: "is not met", NOT_EVALUABLE: "could not be evaluated"}
        tail = f"; the primary criterion, {words[primary].iloc[0]}, {state[table['verdict'][primary].iloc[0]]}"
    if not failed and not unknown:
        return (f"{model} meets all pre-specified acceptance criteria ({total} of {total} met at "
                f"alpha = {alpha:g}){tail}.")
    parts = []
    if failed:
        parts.append(f"it does not meet {join_words(failed)}")
    if unknown:
        parts.append(f"{join_words(unknown)} could not be evaluated")
    return (f"{model} does not meet all pre-specified acceptance criteria: {', and '.join(parts)} ({len(met)} of "
            f"{total} met at alpha = {alpha:g}){tail}.")
