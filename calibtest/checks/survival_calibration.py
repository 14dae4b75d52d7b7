"""The classical evidence on the calibration of a risk model at a time horizon, with censored outcomes.

:func:`survival_evidence` takes follow-up times, event indicators and the
predicted risks ``r_i = P(T_i <= t)`` of a model at a horizon t, and gives
the measures a biostatistician validating a survival model reports next to
the ECE at t:

1. **Observed / expected** at t: ``O = 1 - S_KM(t)`` (Kaplan-Meier) against
   ``E = mean(r_i)``, ``O/E`` with a Wald interval on the log scale,
   ``log(O/E) +/- z se``, ``se = sqrt(Var_Greenwood S(t)) / O`` (the delta
   method on ``log(1 - S)``; E is a fixed function of the predictions).
2. **Calibration intercept and slope** (Crowson, Atkinson & Therneau 2016):
   the intercept (calibration-in-the-large) ``a`` of the Poisson model
   ``log E[d_i] = a + log e_i``, with d_i the event indicator by t and e_i
   the model's expected cumulative hazard over the follow-up
   ``min(T_i, t)``; ``exp(a) = sum d_i / sum e_i`` is the standardized
   incidence ratio.  A model that predicts only the risk at t does not give
   its cumulative hazard before t; under its proportional hazards
   ``H_i(s) = H_0(s) exp(x_i)``, ``x_i = cloglog(r_i) = log(-log(1 - r_i))``,
   the shape ``H_0(s) / H_0(t)`` is estimated by Breslow's baseline of the Cox
   model with the *fixed* offset ``x_i``, ``e_i = exp(x_i) H_0(min(T_i, t)) /
   H_0(t)``.  Then ``sum e_i = (events by t) / H_0(t)`` exactly, so
   ``a = log H_0(t)``: the log of Breslow's cumulative hazard at t with the
   offset (0 when the predicted cumulative hazards are right in level), with
   standard error ``sqrt(sum_{t_j <= t} d_j / S_0(t_j)^2) / H_0(t)``
   (Breslow's variance; the Poisson model's ``1 / sqrt(events)`` treats the
   e_i as known).  The slope ``b`` is the coefficient of the Cox model
   ``h_i(s) = h_0(s) exp(b x_i)`` (Crowson et al.'s Cox approach; b = 1 for a
   calibrated proportional hazards model; the free baseline absorbs a shift
   of x).
3. **A flexible calibration curve** at t (Austin, Harrell & van Klaveren
   2020): the Cox model on a restricted cubic spline of ``cloglog(r)`` with 3
   knots at Harrell's default quantiles (``rms::rcs``), the observed risk
   ``1 - exp(-H_0(t) exp(f(cloglog r_i)))`` (Breslow's baseline) against
   ``r_i``, summarized by ICI = mean |observed - r|, E50 (median) and E90
   (90th percentile), and tested by the Wald test of ``f(x) = x`` (linear
   part 1, spline part 0; chi-squared, 2 df).
4. **The reliability diagram's data**: Kaplan-Meier ``1 - S_g(t)`` in G
   groups of equal size by increasing risk, with Greenwood standard errors and
   log-log intervals (R's ``survfit(conf.type = "log-log")``), against the
   group's mean risk.
5. **The Greenwood-Nam-D'Agostino test** (D'Agostino & Nam 2003; Demler,
   Paynter & Cook 2015): ``GND = sum_g (O_g - E_g)^2 / Var_Greenwood(S_g(t))``
   over the G groups, referred to chi-squared with G df for external
   validation (the predictions were not fitted on these rows: G independent
   z^2 terms under calibration, as for :func:`calibtest.hosmer_lemeshow`'s
   ``validation="external"``) and with G - 1 df, D'Agostino & Nam's and
   Demler et al.'s reference, for ``validation="development"``.  A group with no
   event by t has Greenwood variance 0 and contributes 0 (Demler et al.'s
   convention); they recommend at least 5 events per group (the summary says
   which groups have fewer).

Every regression (2, 3) uses the follow-up censored at t (an event after t
counts as censored at t), so that each number is about calibration at t; the
Kaplan-Meier estimates at t are the same with or without that censoring.  The
Cox models use Breslow's partial likelihood (R's ``coxph(ties = "breslow")``;
without tied event times it equals R's default, Efron's) and are fitted by
:func:`calibtest.core.km_cox.cox_breslow`.

:meth:`SurvivalEvidence.rows` gives the evidence-table rows, in the shape of
:attr:`calibtest.EvidenceResult.table` (columns ``name``, ``null``,
``statistic``, ``pvalue``, ``lower``, ``upper``, ``reject``, ``verdict``;
keys ``observed_expected``, ``citl``, ``slope``, ``flexible``, ``gnd``): the
keys ``citl`` and ``slope`` name the same measures as the binary rows, so the
conclusion's rules on them ("spread", "level", "logit_linear") read them
unchanged, ``gnd`` stands where ``hosmer_lemeshow`` stands, and
:meth:`SurvivalEvidence.direction` gives the sentence
:meth:`calibtest.ValProbResult.direction` gives for binary outcomes.
``docs/survival_evidence.md`` has the formulas, the R cross-checks and the
measured size of each row.

References
----------
.. [1] Crowson, Atkinson and Therneau, "Assessing calibration of prognostic
       risk scores", Statistical Methods in Medical Research 25:1692-1706, 2016.
.. [2] Austin, Harrell and van Klaveren, "Graphical calibration curves and the
       integrated calibration index (ICI) for survival models", Statistics in
       Medicine 39:2714-2742, 2020.
.. [3] D'Agostino and Nam, "Evaluation of the performance of survival
       analysis models: discrimination and calibration measures", Handbook of
       Statistics 23:1-25, 2003.
.. [4] Demler, Paynter and Cook, "Tests of calibration and goodness-of-fit in
       the survival setting", Statistics in Medicine 34:1659-1680, 2015.
.. [5] Greenwood, "The natural duration of cancer", Reports on Public Health
       and Medical Subjects 33, 1926.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as sps

from calibtest.display.format import fmt, fmt_p
from calibtest.inputs.validation import DataError, check_alpha, check_count, finite_vector
from calibtest.core.time_auc import time_auc
from calibtest.core.km_cox import breslow_offset_at, cox_breslow, equal_size_groups, kaplan_meier_at, time_order
from calibtest.checks.flexible_calibration import harrell_knots, rcs_basis
from calibtest.options import check_number, check_option
from calibtest.display.summary import CalibSummary, ResultDisplay

__all__ = ["SurvivalEvidence", "SurvivalCurve", "survival_evidence", "survival_calibration",
           "result_survival_evidence", "SURVIVAL_ROWS",
           "MIN_GROUP_EVENTS", "DESCRIPTIVE_ROWS", "GND_CENSORING_LIMIT"]

#: Row keys of :meth:`SurvivalEvidence.rows`, in order.
SURVIVAL_ROWS = ("observed_expected", "citl", "slope", "flexible", "gnd", "auc")

#: Rows that describe but do not test calibration: never decisive in the conclusion.
DESCRIPTIVE_ROWS = ("auc",)

#: Events by the horizon below which a GND group is flagged (Demler et al. 2015 collapse such groups).
MIN_GROUP_EVENTS = 5

#: Share of the rows censored before the horizon above which the GND row is marked unreliable: 0, any
#: censoring before t.  Its size at a calibrated model (alpha = 0.05) was measured at 0.075 with 2% of the rows
#: censored before t (n = 3000), 0.077 with 7%, 0.075 with 30%, 0.118 with 74% and 0.317 with 74% at n = 300
#: (``docs/survival.md``, ``benchmarks/gnd_size.py``).
GND_CENSORING_LIMIT = 0.0

#: Knots of the flexible curve's restricted cubic spline (Austin et al. 2020 use 3).
N_KNOTS = 3

#: Points of the flexible curve kept for plotting (at quantiles of the predicted risks).
GRID_SIZE = 101


# --------------------------------------------------------------------------- input
def _survival_arrays(time, event, risk, horizon):
    """(time, event as bool, risk, horizon) checked: the data errors name the argument."""
    time = finite_vector(time, "time")
    ev = np.asarray(event)
    if ev.dtype.kind == "b":
        event = ev.astype(bool)
        if event.ndim != 1:
            raise DataError(f"event must be one-dimensional, got shape {event.shape}")
    else:
        ev = finite_vector(ev, "event")
        codes = np.unique(ev)
        if not np.isin(codes, (0.0, 1.0)).all():
            other = [fmt(c) for c in codes if c not in (0.0, 1.0)][:5]
            raise DataError(f"event must be coded 0 (censored) or 1 (event); found {', '.join(other)}")
        event = ev == 1.0
    risk = finite_vector(risk, "risk")
    if not (time.size == event.size == risk.size):
        raise DataError(f"time, event and risk must have the same length, got {time.size}, {event.size} and "
                        f"{risk.size}")
    if time.size == 0:
        raise DataError("time, event and risk are empty")
    if (time < 0).any():
        bad = np.flatnonzero(time < 0)
        raise DataError(f"time has {bad.size} negative follow-up times (first at row {int(bad[0])}: "
                        f"{fmt(time[bad[0]])})")
    if ((risk < 0) | (risk > 1)).any():
        bad = np.flatnonzero((risk < 0) | (risk > 1))
        raise DataError(f"risk must lie in [0, 1] (a predicted P(T <= horizon)); {bad.size} values do not "
                        f"(first at row {int(bad[0])}: {fmt(risk[bad[0]])})")
    horizon = check_number(horizon, "horizon")
    if horizon <= 0:
        raise DataError(f"horizon must be positive, got {fmt(horizon)}")
    if horizon > time.max():
        raise DataError(f"horizon = {fmt(horizon)} is beyond the last follow-up time ({fmt(time.max())}): "
                        "the Kaplan-Meier estimate at the horizon is undefined")
    if not (event & (time <= horizon)).any():
        raise DataError(f"no event at or before the horizon {fmt(horizon)}: calibration at the horizon "
                        "cannot be assessed")
    return time, event, risk, horizon


# --------------------------------------------------------------------------- results
@dataclass(frozen=True, eq=False, repr=False)
class SurvivalCurve:
    """The flexible calibration curve at the horizon (Austin, Harrell & van Klaveren 2020).

    Attributes
    ----------
    knots : ndarray
        Knots of the restricted cubic spline on ``cloglog(risk)`` (Harrell's defaults).
    params, cov : ndarray
        Cox coefficients of ``[x, S_1(x)]`` (``x = cloglog(risk)``, Harrell's
        basis as in :func:`calibtest.checks.flexible_calibration.rcs_basis`) and their covariance.
    baseline_cumhaz : float
        Breslow's H_0(t) for the centred design.
    wald, df, pvalue : float, int, float
        Wald test of ``(1, 0)`` for ``params`` (the curve is the identity).
    ici, e50, e90, emax : float
        Mean, median, 90th percentile (numpy's default, R's type 7) and
        maximum of ``|observed_i - risk_i|`` over the rows.
    grid : pandas.DataFrame
        ``risk`` (at 101 quantiles of the predicted risks) and ``observed``,
        the curve there.
    """

    knots: np.ndarray
    params: np.ndarray
    cov: np.ndarray
    baseline_cumhaz: float
    wald: float
    df: int
    pvalue: float
    ici: float
    e50: float
    e90: float
    emax: float
    grid: pd.DataFrame = field(repr=False)


@dataclass(frozen=True, eq=False, repr=False)
class SurvivalEvidence(ResultDisplay):
    """The classical evidence on calibration at a horizon (see :func:`survival_evidence`).

    Attributes
    ----------
    horizon, alpha : float
    n, n_events, n_censored : int
        Rows, events at or before the horizon, rows censored before it.
    observed, observed_se : float
        Kaplan-Meier ``1 - S(t)`` and its Greenwood standard error.
    expected : float
        Mean predicted risk.
    oe, oe_se : float
        ``observed / expected`` and the standard error of ``log(O/E)``.
    citl, citl_se : float or None
        The calibration intercept ``a`` (log standardized incidence ratio,
        the log of Breslow's H_0(t) with offset cloglog(risk)) and its
        standard error; None when some risk is 0 or 1 (``scope`` says so).
    slope, slope_se : float or None
        The Cox calibration slope on ``cloglog(risk)`` and its standard error.
    curve : SurvivalCurve or None
        The flexible calibration curve, ICI, E50, E90 and its Wald test.
    groups : pandas.DataFrame
        One row per risk group: ``n``, ``events``, ``censored``,
        ``mean_risk``, ``observed`` (Kaplan-Meier 1 - S_g(t)), ``se``
        (Greenwood), ``lower``/``upper`` (log-log interval at ``alpha``; NaN
        when S_g(t) is 0 or 1), ``gnd`` (the group's GND term; 0 where the
        Greenwood variance is 0 or undefined, and then ``se`` is 0).
    gnd_statistic, gnd_df, gnd_pvalue : float, int, float
        The Greenwood-Nam-D'Agostino test (df = G for external validation,
        G - 1 for development data).
    validation : str
        ``"external"`` or ``"development"``: which reference ``gnd_df`` uses.
    scope : str
        Rows that could not be computed, and why.
    """

    horizon: float
    alpha: float
    n: int
    n_events: int
    n_censored: int
    observed: float
    observed_se: float
    expected: float
    oe: float
    oe_se: float
    citl: float | None
    citl_se: float | None
    slope: float | None
    slope_se: float | None
    curve: SurvivalCurve | None
    groups: pd.DataFrame = field(repr=False)
    gnd_statistic: float = math.nan
    gnd_df: int = 0
    gnd_pvalue: float = math.nan
    validation: str = "external"
    scope: str = ""
    max_tied_events: int = 1
    auc: float = math.nan
    auc_se: float = math.nan

    def decisive_rows(self) -> tuple:
        """The keys of :meth:`rows` on which the conclusion may rest: not AUC (discrimination, not a test of
        calibration), and not GND when :attr:`gnd_unreliable` gives a reason."""
        return tuple(k for k in SURVIVAL_ROWS if k not in DESCRIPTIVE_ROWS and not (k == "gnd" and
                                                                                 self.gnd_unreliable))

    @property
    def gnd_unreliable(self) -> str:
        """Why the GND row's chi-squared reference cannot be trusted here ("" when it can).

        Its size at a calibrated model exceeds alpha under censoring and with tied event times (measured in
        ``docs/survival.md``): the row is marked unreliable when the share of rows censored before t
        exceeds :data:`GND_CENSORING_LIMIT` (0: any row censored before t), when more than one event falls
        on one time by t, or when a risk group has fewer than :data:`MIN_GROUP_EVENTS` events by t; the
        conclusion then never rests on it.
        """
        reasons = []
        share = self.n_censored / self.n
        if share > GND_CENSORING_LIMIT:
            reasons.append(f"{self.n_censored} of the {self.n} rows are censored before t"
                           + (f" (more than {100 * GND_CENSORING_LIMIT:g}%)" if GND_CENSORING_LIMIT > 0 else ""))
        if self.max_tied_events > 1:
            reasons.append(f"up to {self.max_tied_events} events share one time by t (tied event times)")
        few = int((self.groups["events"] < MIN_GROUP_EVENTS).sum())
        if few:
            reasons.append(f"{few} risk group{'s have' if few > 1 else ' has'} fewer than {MIN_GROUP_EVENTS} "
                           "events by t")
        return "; ".join(reasons)

    # ----------------------------------------------------------------- numbers
    def conf_int(self, alpha: float | None = None) -> pd.DataFrame:
        """Wald intervals of O/E (on the log scale), the intercept and the slope at level ``1 - alpha``.

        Returns
        -------
        pandas.DataFrame
            Index ``observed_expected``, ``citl``, ``slope`` (the last two
            NaN when not computed) and ``auc`` (Wald, ``AUC +/- z se``, as
            riskRegression's ``Score``; NaN without a case or a control);
            columns ``lower``, ``upper``.
        """
        alpha = self.alpha if alpha is None else check_alpha(alpha)
        z = sps.norm.isf(alpha / 2)
        nan = math.nan
        rows = {"observed_expected": (self.oe * math.exp(-z * self.oe_se), self.oe * math.exp(z * self.oe_se)),
                "citl": ((self.citl - z * self.citl_se, self.citl + z * self.citl_se) if self.citl is not None
                         else (nan, nan)),
                "slope": ((self.slope - z * self.slope_se, self.slope + z * self.slope_se)
                          if self.slope is not None else (nan, nan)),
                "auc": (self.auc - z * self.auc_se, self.auc + z * self.auc_se)}
        return pd.DataFrame(rows, index=["lower", "upper"]).T

    def direction(self, alpha: float | None = None) -> str:
        """The direction of the miscalibration at the horizon, in words, from the intercept and the slope.

        The survival analogue of :meth:`calibtest.ValProbResult.direction`
        (the sentence the evidence conclusion shows): an intercept ``a > 0``
        (observed cumulative hazard above the predicted one) means the risks
        are too low on average, ``a < 0`` too high; a slope ``b < 1`` means
        they are too extreme, ``b > 1`` not extreme enough.  A direction is
        stated only where the Wald ``1 - alpha`` interval excludes the null
        value; without the intercept and slope (a risk of 0 or 1) the level
        comes from O/E.
        """
        alpha = self.alpha if alpha is None else check_alpha(alpha)
        ci = self.conf_int(alpha)
        level = f"{100 * (1 - alpha):g}%"

        def text(key, name, value):
            return (f"{name} = {fmt(value, 3)}, {level} CI [{fmt(ci.loc[key, 'lower'], 3)}, "
                    f"{fmt(ci.loc[key, 'upper'], 3)}]")

        key, null, name, value = (("citl", 0.0, "CITL", self.citl) if self.citl is not None
                                  else ("observed_expected", 1.0, "O/E", self.oe))
        lo, hi = ci.loc[key, "lower"], ci.loc[key, "upper"]
        level_off = not lo <= null <= hi
        level_words = (f"too {'low' if value > null else 'high'} on average ({text(key, name, value)}, "
                       f"excludes {fmt(null)})")
        if self.slope is None:
            return (f"Direction: the risks by t are {level_words}." if level_off else
                    f"Direction: the risks by t are not shown to be off on average ({text(key, name, value)} "
                    f"includes {fmt(null)}); the slope was not computed.")
        s_lo, s_hi = ci.loc["slope", "lower"], ci.loc["slope", "upper"]
        spread_off = not s_lo <= 1.0 <= s_hi
        slope_text = text("slope", "slope", self.slope)
        spread_words = f"too {'extreme' if self.slope < 1 else 'moderate'} ({slope_text}, excludes 1)"
        if level_off and spread_off:
            return f"Direction: the risks by t are {level_words} and {spread_words}."
        if level_off:
            return (f"Direction: the risks by t are {level_words}; their spread is not shown to be off "
                    f"({slope_text} includes 1).")
        if spread_off:
            return (f"Direction: the risks by t are {spread_words}; their level on average is not shown to be "
                    f"off ({text(key, name, value)} includes {fmt(null)}).")
        return (f"Direction: neither the level ({text(key, name, value)}) nor the spread ({slope_text}) is shown "
                "to be off.")

    def _pvalues(self) -> dict:
        two = lambda z: float(2 * sps.norm.sf(abs(z)))  # noqa: E731
        return {"observed_expected": two(math.log(self.oe) / self.oe_se) if self.oe > 0 else 0.0,
                "citl": None if self.citl is None else two(self.citl / self.citl_se),
                "slope": None if self.slope is None else two((self.slope - 1.0) / self.slope_se),
                "flexible": None if self.curve is None else self.curve.pvalue,
                "gnd": self.gnd_pvalue, "auc": None}

    def to_frame(self) -> pd.DataFrame:
        """Every measure as numbers: ``estimate``, ``se``, ``lower``, ``upper``, ``null_value``, ``pvalue``.

        One row per key of :data:`SURVIVAL_ROWS` (O/E's ``se`` is that of
        log(O/E); the flexible row's estimate is ICI and its p-value the Wald
        test's; GND's estimate is its statistic; AUC has no null value and no
        p-value: it measures discrimination).  Rows not computed hold NaN.
        """
        ci = self.conf_int()
        pv = self._pvalues()
        nan = math.nan
        val = lambda v: nan if v is None else float(v)  # noqa: E731
        table = {
            "observed_expected": (self.oe, self.oe_se, ci.loc["observed_expected", "lower"],
                                  ci.loc["observed_expected", "upper"], 1.0),
            "citl": (val(self.citl), val(self.citl_se), ci.loc["citl", "lower"], ci.loc["citl", "upper"], 0.0),
            "slope": (val(self.slope), val(self.slope_se), ci.loc["slope", "lower"], ci.loc["slope", "upper"], 1.0),
            "flexible": (nan if self.curve is None else self.curve.ici, nan, nan, nan, 0.0),
            "gnd": (self.gnd_statistic, nan, nan, nan, nan),
            "auc": (self.auc, self.auc_se, ci.loc["auc", "lower"], ci.loc["auc", "upper"], nan),
        }
        out = pd.DataFrame(table, index=["estimate", "se", "lower", "upper", "null_value"]).T
        out["pvalue"] = [val(pv[k]) for k in out.index]
        return out

    def rows(self) -> pd.DataFrame:
        """The evidence-table rows, in the shape of :attr:`calibtest.EvidenceResult.table`.

        Returns
        -------
        pandas.DataFrame
            Index: the computed keys of :data:`SURVIVAL_ROWS`; columns ``name``,
            ``null`` (the null hypothesis in words), ``statistic``, ``pvalue``,
            ``lower``, ``upper`` (None without an interval), ``reject`` (bool:
            the interval excludes the null value, or the p-value is at most
            alpha; False for AUC, which tests nothing) and ``verdict``
            (``"rejects"`` or ``"does not reject"``; ``"unreliable"`` for GND
            when :attr:`gnd_unreliable` gives a reason, whatever its p-value;
            ``"not a test"`` for AUC).
        """
        level = f"{100 * (1 - self.alpha):g}%"
        t = fmt(self.horizon)
        ci = self.conf_int()
        pv = self._pvalues()
        records = {"observed_expected": (
            f"O/E at t = {t} {level} CI",
            "O/E = 1: the Kaplan-Meier risk by t equals the mean predicted risk (Wald on log O/E, Greenwood "
            "variance)", self.oe, pv["observed_expected"], *ci.loc["observed_expected"], 1.0)}
        if self.citl is not None:
            records["citl"] = (f"CITL {level} CI", "a = 0 in the Poisson model log E[events by t] = a + log "
                               "(expected cumulative hazard) (Crowson et al.)", self.citl, pv["citl"],
                               *ci.loc["citl"], 0.0)
        if self.slope is not None:
            records["slope"] = (f"slope {level} CI", "b = 1 in the Cox model with log relative hazard "
                                "b cloglog(risk), follow-up censored at t", self.slope, pv["slope"],
                                *ci.loc["slope"], 1.0)
        if self.curve is not None:
            records["flexible"] = ("flexible curve ICI", "the Cox calibration curve on a spline of cloglog(risk) "
                                   f"is the identity (Wald chi2 = {fmt(self.curve.wald, 4)}, df = "
                                   f"{self.curve.df}; statistic: ICI)", self.curve.ici, self.curve.pvalue,
                                   None, None, None)
        unreliable = self.gnd_unreliable
        records["gnd"] = ("Greenwood-Nam-D'Agostino", f"observed = expected risk by t in each of the "
                          f"{len(self.groups)} risk groups (chi2, df = {self.gnd_df})"
                          + (f"; unreliable here ({unreliable}): not counted in the conclusion" if unreliable
                             else ""), self.gnd_statistic, self.gnd_pvalue, None, None, None)
        if math.isfinite(self.auc):
            records["auc"] = (f"AUC(t) {level} CI", "none: discrimination, not calibration "
                              "(Uno's IPCW AUC at t: events by t against rows event-free after t; Wald interval, "
                              "influence-function se)", self.auc, None, *ci.loc["auc"], None)
        out = []
        for key, (name, null, stat, p, lo, hi, null_value) in records.items():
            if key in DESCRIPTIVE_ROWS:
                reject, verdict = False, "not a test"
            else:
                reject = (not (lo <= null_value <= hi)) if null_value is not None else bool(p <= self.alpha)
                verdict = "rejects" if reject else "does not reject"
                if key == "gnd" and unreliable:
                    verdict = "unreliable"
            out.append({"name": name, "null": null, "statistic": float(stat), "pvalue": None if p is None else
                        float(p), "lower": None if lo is None else float(lo), "upper": None if hi is None else
                        float(hi), "reject": bool(reject), "verdict": verdict})
        return pd.DataFrame(out, index=list(records), dtype=object)

    # ----------------------------------------------------------------- display
    def notes(self) -> list[str]:
        """The footer notes: how each number is defined, sparse groups, rows not computed."""
        notes = [f"Follow-up is censored at t = {fmt(self.horizon)} for the regressions (an event after t is "
                 "censored at t); Cox models by Breslow's partial likelihood.",
                 "O/E: Kaplan-Meier 1 - S(t) over the mean predicted risk; interval exp(log(O/E) +/- z se), se = "
                 "Greenwood se of S(t) / (1 - S(t)).",
                 "CITL: Poisson intercept with offset log e_i, e_i = -log(1 - risk_i) H_0(min(T_i, t)) / "
                 "H_0(t), H_0 Breslow's baseline with offset cloglog(risk); equals log H_0(t); exp(CITL) = "
                 "events / expected; se by Breslow's variance.",
                 f"Flexible curve: Cox on a restricted cubic spline of cloglog(risk) with {N_KNOTS} knots "
                 "(Harrell's defaults); ICI, E50, E90 over the rows."
                 + (f" ICI = {fmt(self.curve.ici, 4)}, E50 = {fmt(self.curve.e50, 4)}, E90 = "
                    f"{fmt(self.curve.e90, 4)}, Emax = {fmt(self.curve.emax, 4)}." if self.curve else ""),
                 f"GND: chi-squared with df = {self.gnd_df} ("
                 + ("G, external validation: the predictions were not fitted on these rows; G - 1 holds for "
                    "development data" if self.validation == "external" else
                    "G - 1, development data (D'Agostino & Nam)")
                 + "); a group without an event by t adds 0."]
        if self.gnd_unreliable:
            notes.append(f"GND is unreliable here ({self.gnd_unreliable}): its size at a calibrated model was "
                         "measured well above alpha under censoring and tied times (docs/survival.md), so the "
                         "conclusion does not rest on it.")
        if math.isfinite(self.auc):
            notes.append(f"AUC(t) (discrimination, not calibration): Uno's IPCW cumulative/dynamic AUC at t, cases "
                         f"the {self.n_events} events by t weighted by 1 / G(T-), controls the rows event-free "
                         "after t (G: Kaplan-Meier of the censoring); a tied risk counts 1/2; se = sd of the "
                         "influence function (Blanche et al. 2013, including the estimated G) / sqrt(n); Wald "
                         f"interval. AUC = {fmt(self.auc, 4)} (se {fmt(self.auc_se, 4)}).")
        flat = self.groups.index[self.groups["se"] == 0].tolist()
        if flat:
            notes.append(f"Risk group{'s' if len(flat) > 1 else ''} {', '.join(map(str, flat))} "
                         f"{'have' if len(flat) > 1 else 'has'} Greenwood variance 0 or undefined (no event by "
                         "t, or Kaplan-Meier 0): the GND term is set to 0 (Demler et al.'s convention) and there "
                         "is no interval.")
        few = self.groups.index[self.groups["events"] < MIN_GROUP_EVENTS].tolist()
        if few:
            which = (f"risk group {few[0]} has" if len(few) == 1 else
                     f"{len(few)} of {len(self.groups)} risk groups (groups {', '.join(map(str, few))}) have")
            notes.append(f"{which[0].upper()}{which[1:]} fewer than {MIN_GROUP_EVENTS} events by t: the GND "
                         "chi-squared reference is unreliable; use fewer groups (n_groups=).")
        if self.scope:
            notes.append(self.scope)
        return notes

    def _summary(self, alpha):
        if alpha is not None and alpha != self.alpha:
            raise ValueError(f"this evidence was computed at alpha = {self.alpha:g}; call survival_evidence(..., "
                             "alpha=...) for another level")
        smry = CalibSummary()
        smry.add_title(f"Calibration at the horizon t = {fmt(self.horizon)}: the classical survival evidence")
        smry.add_settings({"No. observations:": str(self.n), "Horizon t:": fmt(self.horizon),
                           "Events by t:": str(self.n_events), "Censored before t:": str(self.n_censored),
                           "Observed risk (KM):": fmt(self.observed, 4), "Mean predicted:": fmt(self.expected, 4),
                           "Alpha:": fmt(self.alpha), "Risk groups:": str(len(self.groups))})
        r = self.rows()
        ivs = ["" if r.loc[k, "lower"] is None else f"[{fmt(r.loc[k, 'lower'], 3)}, {fmt(r.loc[k, 'upper'], 3)}]"
               for k in r.index]
        smry.add_table(pd.DataFrame({"statistic": list(r["statistic"]), "p-value": list(r["pvalue"]),
                                     "interval": ivs, "verdict": list(r["verdict"])}, index=list(r["name"]),
                                    dtype=object), {"statistic": 4, "p-value": fmt_p})
        smry.add_settings({"Direction:": self.direction().removeprefix("Direction: ")})
        g = self.groups
        smry.add_table(pd.DataFrame({"n": g["n"], "events": g["events"], "mean risk": g["mean_risk"],
                                     "observed": g["observed"],
                                     "interval": [f"[{fmt(lo, 3)}, {fmt(hi, 3)}]" for lo, hi in
                                                  zip(g["lower"], g["upper"])], "GND term": g["gnd"]}),
                       {"mean risk": 4, "observed": 4, "GND term": 4})
        smry.add_notes(self.notes())
        return smry

    def _dict(self) -> dict:
        out = {"method": "survival_evidence", "horizon": self.horizon, "alpha": self.alpha, "n": self.n,
               "n_events": self.n_events, "n_censored": self.n_censored, "observed": self.observed,
               "observed_se": self.observed_se, "expected": self.expected, "scope": self.scope}
        frame = self.to_frame()
        for key, row in frame.iterrows():
            for col in frame.columns:
                out[f"{key}_{col}"] = float(row[col])
        out["gnd_df"] = self.gnd_df
        out["gnd_unreliable"] = self.gnd_unreliable
        out["validation"] = self.validation
        if self.curve is not None:
            out.update({"e50": self.curve.e50, "e90": self.curve.e90, "emax": self.curve.emax,
                        "flexible_wald": self.curve.wald, "knots": self.curve.knots.tolist()})
        for col in self.groups.columns:
            out[f"groups_{col}"] = self.groups[col].tolist()
        return out

    def _repr_parts(self) -> list[str]:
        parts = [f"n={self.n} t={fmt(self.horizon)}", f"O/E={fmt(self.oe, 4)}"]
        if self.slope is not None:
            parts.append(f"slope={fmt(self.slope, 4)}")
        if self.curve is not None:
            parts.append(f"ICI={fmt(self.curve.ici, 4)}")
        parts.append(f"GND p={fmt_p(self.gnd_pvalue)}")
        return parts


# --------------------------------------------------------------------------- the engine
def _loglog_interval(surv: np.ndarray, greenwood: np.ndarray, z: float):
    """(lower, upper) of the risk 1 - S from the log-log interval of S (NaN where S is 0 or 1)."""
    inside = (surv > 0) & (surv < 1)
    s = np.where(inside, surv, 0.5)
    se = np.sqrt(np.where(inside, greenwood, 0.0)) / np.abs(np.log(s))
    s_low, s_high = s ** np.exp(z * se), s ** np.exp(-z * se)
    return np.where(inside, 1.0 - s_high, np.nan), np.where(inside, 1.0 - s_low, np.nan)


def _flexible_curve(t_h, ev_h, risk, cll, horizon, order) -> SurvivalCurve:
    try:
        knots = harrell_knots(cll, N_KNOTS)
    except ValueError:  # its message names the binary curve's p and its knots= option
        n_distinct = np.unique(cll).size
        raise ValueError(f"the risks take {n_distinct} distinct value{'s' if n_distinct > 1 else ''}, too few for "
                         f"the {N_KNOTS} knots of the spline on cloglog(risk)") from None
    x = rcs_basis(cll, knots)
    fit = cox_breslow(t_h, ev_h, x, horizon, start=np.r_[1.0, np.zeros(x.shape[1] - 1)], order=order)
    observed = fit.risk_at_horizon(x)
    diff = np.abs(observed - risk)
    dev = fit.params - np.r_[1.0, np.zeros(x.shape[1] - 1)]
    wald = float(dev @ np.linalg.solve(fit.cov, dev))
    df = int(x.shape[1])
    grid = np.quantile(risk, np.linspace(0.0, 1.0, GRID_SIZE))
    grid_obs = fit.risk_at_horizon(rcs_basis(np.log(-np.log1p(-grid)), knots))
    return SurvivalCurve(knots=knots, params=fit.params, cov=fit.cov, baseline_cumhaz=fit.baseline_cumhaz,
                         wald=wald, df=df, pvalue=float(sps.chi2.sf(wald, df)), ici=float(diff.mean()),
                         e50=float(np.median(diff)), e90=float(np.quantile(diff, 0.9)), emax=float(diff.max()),
                         grid=pd.DataFrame({"risk": grid, "observed": grid_obs}))


def _max_tied_events(t_h: np.ndarray, ev_h: np.ndarray) -> int:
    """The largest number of events by the horizon at one follow-up time."""
    _, counts = np.unique(t_h[ev_h], return_counts=True)
    return int(counts.max())


def survival_evidence(time, event, risk, horizon, *, alpha=0.05, n_groups=10,
                      validation="external") -> SurvivalEvidence:
    """The classical evidence on calibration at a time horizon, for censored outcomes.

    Parameters
    ----------
    time : array_like, shape (n,)
        Follow-up times (finite, >= 0).
    event : array_like, shape (n,)
        1 (or True) for an event, 0 (or False) for a censored time.
    risk : array_like, shape (n,)
        Predicted probability of an event by the horizon, P(T <= horizon), in [0, 1].
    horizon : float
        The time t at which calibration is assessed (positive, at most the
        last follow-up time).
    alpha : float
        Level of every test and interval.
    n_groups : int
        Risk groups G of the reliability diagram and of the GND test (at
        least 2; the rows sorted by risk and cut into G groups of equal size).
    validation : {"external", "development"}
        Reference of the GND test: chi-squared with G df when the predictions
        were not fitted on these rows (the default), G - 1 df (D'Agostino &
        Nam) on the model's development data.

    Returns
    -------
    SurvivalEvidence
        O/E, the calibration intercept and slope, the flexible curve (ICI,
        E50, E90), the groups' Kaplan-Meier estimates and the GND test;
        ``rows()`` gives them as evidence-table rows.  The intercept, the
        slope and the curve need ``0 < risk < 1`` (the complementary log-log);
        with a risk of exactly 0 or 1 they are None and ``scope`` says so.

    Raises
    ------
    TypeError
        Non-numeric time, event or risk.
    ValueError
        Missing, infinite or negative times; event codes other than 0/1;
        risks outside [0, 1]; arrays of different lengths; a horizon that is
        not positive or beyond the last follow-up; no event by the horizon;
        a Kaplan-Meier estimate of 0 at the horizon; fewer rows than
        ``n_groups``.

    Notes
    -----
    The formulas are in the module docstring of
    :mod:`calibtest.checks.survival_calibration` and in ``docs/survival_evidence.md``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> risk = rng.uniform(0.05, 0.6, 2000)
    >>> t = rng.exponential(5 / -np.log1p(-risk))      # calibrated at t = 5
    >>> c = rng.exponential(20, 2000)
    >>> ev = survival_evidence(np.minimum(t, c), t <= c, risk, horizon=5)
    >>> ev.rows()["verdict"].tolist()  # doctest: +SKIP
    """
    alpha = check_alpha(alpha)
    n_groups = check_count(n_groups, "n_groups", minimum=2)
    validation = check_option("validation", validation)
    time, event, risk, horizon = _survival_arrays(time, event, risk, horizon)
    n = time.size
    if n_groups > n:
        raise DataError(f"n_groups = {n_groups} is more than the {n} rows")
    z = float(sps.norm.isf(alpha / 2))
    ev_h = event & (time <= horizon)
    t_h = np.minimum(time, horizon)  # every fit uses the follow-up censored at t (same KM at t)
    order = time_order(t_h)

    # 1. observed / expected
    surv, gw = kaplan_meier_at(t_h, ev_h, horizon, order=order)
    if surv[0] == 0:
        raise DataError(f"the Kaplan-Meier estimate at the horizon {fmt(horizon)} is 0 (every row still at risk "
                        "at some event time had the event there), so its variance is undefined; choose an "
                        "earlier horizon")
    observed = 1.0 - float(surv[0])
    observed_se = float(surv[0] * math.sqrt(gw[0]))
    expected = float(risk.mean())
    if expected == 0:
        raise DataError("every risk is 0 while events occur by the horizon: O/E is infinite")
    oe = observed / expected
    oe_se = observed_se / observed

    # 4-5. the groups and GND
    group = equal_size_groups(risk, n_groups)
    s_g, gw_g = kaplan_meier_at(t_h, ev_h, horizon, group, n_groups, order)
    size = np.bincount(group, minlength=n_groups)
    mean_risk = np.bincount(group, weights=risk, minlength=n_groups) / size
    obs_g = 1.0 - s_g
    with np.errstate(invalid="ignore"):
        var_g = s_g ** 2 * gw_g
    defined = np.isfinite(var_g) & (var_g > 0)
    term = np.zeros(n_groups)
    term[defined] = (obs_g[defined] - mean_risk[defined]) ** 2 / var_g[defined]
    lower, upper = _loglog_interval(s_g, gw_g, z)
    groups = pd.DataFrame({"n": size, "events": np.bincount(group, weights=ev_h, minlength=n_groups).astype(int),
                           "censored": np.bincount(group, weights=~event & (time < horizon),
                                                   minlength=n_groups).astype(int),
                           "mean_risk": mean_risk, "observed": obs_g, "se": np.sqrt(np.where(defined, var_g, 0.0)),
                           "lower": lower, "upper": upper, "gnd": term},
                          index=pd.RangeIndex(1, n_groups + 1, name="group"))
    gnd = float(term.sum())
    df = n_groups if validation == "external" else n_groups - 1

    # 2-3. the regressions on cloglog(risk), follow-up censored at the horizon
    citl = citl_se = slope = slope_se = curve = None
    missing = []
    inside = (risk > 0) & (risk < 1)
    if not inside.all():
        missing.append(f"The calibration intercept, slope and flexible curve need 0 < risk < 1 (the "
                       f"complementary log-log); {int((~inside).sum())} risks are exactly 0 or 1, so they were "
                       "not computed.")
    else:
        cll = np.log(-np.log1p(-risk))
        base, base_var = breslow_offset_at(t_h, ev_h, cll, horizon, order)
        citl, citl_se = math.log(base), math.sqrt(base_var) / base
        try:
            fit = cox_breslow(t_h, ev_h, cll[:, None], horizon, start=[1.0], order=order)
            slope, slope_se = float(fit.params[0]), float(math.sqrt(fit.cov[0, 0]))
        except ValueError as exc:
            missing.append(f"The calibration slope was not computed: {exc}.")
        try:
            curve = _flexible_curve(t_h, ev_h, risk, cll, horizon, order)
        except ValueError as exc:
            missing.append(f"The flexible calibration curve was not computed: {exc}.")
    auc = time_auc(time, event, risk, horizon)  # 6. discrimination at t (the controls: time > t)
    return SurvivalEvidence(
        horizon=horizon, alpha=alpha, n=n, n_events=int(ev_h.sum()),
        n_censored=int((~event & (time < horizon)).sum()), observed=observed, observed_se=observed_se,
        expected=expected, oe=oe, oe_se=oe_se, citl=citl, citl_se=citl_se, slope=slope, slope_se=slope_se,
        curve=curve, groups=groups, gnd_statistic=gnd, gnd_df=df, gnd_pvalue=float(sps.chi2.sf(gnd, df)),
        validation=validation, scope=" ".join(missing), max_tied_events=_max_tied_events(t_h, ev_h),
        auc=auc.auc, auc_se=auc.se)


#: The public name of :func:`survival_evidence` (``calibtest.survival_calibration``; the package's public names
#: never shadow a module, and ``calibtest.checks.survival_calibration`` is this module).
survival_calibration = survival_evidence


def result_survival_evidence(res, alpha: float | None = None) -> SurvivalEvidence:
    """:func:`calibtest.survival_calibration` on the rows of a survival result, computed once per result and level.

    Its times, events and horizon (``res.survival``) and its risks
    (``res.data``), with 10 risk groups and the external-validation GND
    reference; the evidence table, the acceptance criteria and the report
    share it.

    Raises
    ------
    ValueError
        For a result without a survival outcome or without its rows, and when
        the survival evidence cannot be computed (its message says why).
    """
    if not getattr(getattr(res, "kind", None), "survival_outcome", False) or res.data is None:
        raise ValueError("the survival evidence needs a survival result (horizon=) holding its rows")
    alpha = res.alpha if alpha is None else check_alpha(alpha)
    surv = res.survival
    return res._memo(("survival_evidence", alpha),
                     lambda: survival_evidence(surv.time, surv.event, res.data.z[:, 0], surv.horizon, alpha=alpha))
