r"""The calibration error of a risk by a time horizon, with right-censored outcomes.

For a horizon t the outcome is Y(t) = 1{T <= t} and the prediction the
model's risk r = P(T <= t); the estimand is the binned

.. math::

    \mathrm{ECE}^2(t) = E\bigl[(P(T \le t \mid r) - r)^2\bigr],

binary ECE^2 of Y(t) on r (same bins, same debiasing; ``docs/survival.md``).

**Censoring.**  A row censored before t has Y(t) unknown.  Each row's
outcome is replaced by its inverse probability of censoring weighted (IPCW)
version Y~ = delta 1{X <= t} / G(X-) (:mod:`calibtest.core.censoring`), G
the censoring survival function estimated by Kaplan-Meier (default) or by a
Cox model of the censoring on covariates (``censoring="cox"``).  Then
U = Y~ - r has conditional mean P(T <= t | r) - r in every bin, and the
paper's debiased T on these U is unbiased for the binned ECE^2(t) given G
(the U of different rows are independent given G).

**Interval.**  The influence function of T is psi_i = 2 mu_b U_i - ||mu_b||^2
(the paper's sigma1^2 is its variance) plus, for the Kaplan-Meier G, the
influence of G-hat (:func:`calibtest.core.censoring.km_influence` with
a_i = 2 mu_b Y~_i); sigma1^2 = mean((psi - mean psi + phi)^2) with the bin
moments of psi^2 taken unbiased (U-statistics over distinct rows: the plug-in
overstates them by the fourth moment of the IPCW outcomes, large under heavy
censoring), and se = sqrt(sigma1_U^2 / n + V_0), V_0 the second-order variance
of T (:func:`calibtest.core.censoring.ipcw_first_order_variance`; both kept on
``result.survival``).  With the Cox G the se stays sqrt(sigma1^2 / n) with
the plug-in: there the corrected form was too small (sd(T) / se 1.1-1.46 at
30% dependent censoring; the plug-in's 1.0-1.34 already is), a defect of the
Cox term left open.  The result's ``sigma1_sq`` is the plug-in
mean(IF^2), the input of ``calib_compare`` and of the grouped heterogeneity
test, which correct it themselves.  With the Cox G the influence of its coefficients
and of its Breslow baseline hazard takes the place of the Kaplan-Meier term
(:func:`calibtest.core.censoring.cox_influence`).

**Test of H0: calibrated at t.**  Under H0 the U have conditional mean 0,
T is a degenerate U-statistic, and the influence of G-hat vanishes at first
order (mu_b = 0).  The test refers z0 = T / sqrt(V_0) to N(0, 1), V_0 the
calibrated-regime variance 2 sum_b (1 / (n (c_b - 1)))^2 sum_{i != j in b}
(U_i U_j)^2 estimated from the IPCW rows themselves
(:func:`calibtest.core.weighted.weighted_null_variance` with unit weights):
the paper's sigma0^2 = 1/15 assumes Var(Y | r) = r (1 - r), which the IPCW
outcome exceeds.  0 joins the interval iff this test does not reject.

**No censoring before t.**  Then Y~ = Y(t) exactly, and the result is built
by the binary path itself (:func:`calibtest.ece.build_result.estimate_rows`), so
every number (the default conditional null included) equals binary
``calib_ci`` on 1{T <= t}.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, replace

import numpy as np

from calibtest.display.format import Call, record_call
from calibtest.inputs.validation import DataError, OptionError
from calibtest.core.binning import singleton_fraction
from calibtest.core.binstats import debiased_statistic, plugin_statistic
from calibtest.core.censoring import (SurvivalData, SurvivalOutcome, censoring_km, competing_rows, cox_breslow,
                                      cox_influence, cox_survival_before, ipcw_first_order_variance, ipcw_outcome,
                                      km_influence, survival_rows, weighted_km_influence)
from calibtest.core.estimates import Estimates
from calibtest.core.intervals import adjusted_interval
from calibtest.core.null import null_test, threshold as null_threshold
from calibtest.core.partition import cell_geometry, partition_rows
from calibtest.core.targets import PreparedData, prepare_target
from calibtest.core.weighted import weighted_null_variance
from calibtest.ece.build_result import RowWeights, estimate_rows, estimate_weighted
from calibtest.inputs.formula import column_values, surv_arguments
from calibtest.ece.group_engine import by_names, group_labels
from calibtest.inputs.design import Design
from calibtest.inputs.rows import prepare_input
from calibtest.inputs.settings import Inputs, Settings
from calibtest.options import check_options
from calibtest.ece.result import Approximation, CalibrationResult
from calibtest.ece.result_parts import BinChoice, CalibrationTarget, NullChoice

__all__ = ["survival_calib_ci", "estimate_censored", "cox_censoring_before", "ipcw_influence",
           "survival_rows_result", "SurvivalInput"]

#: How the standard error accounts for the censoring weights, by censoring model.
_VARIANCE = {"km": "is sqrt(sigma1_U^2 / n + V_0): the influence-function variance with unbiased bin moments "
                   "(sigma1_U^2; sigma1^2 is the plug-in), including the influence of the Kaplan-Meier estimate of "
                   "G, plus the second-order variance V_0 of T",
             "cox": "is the influence-function one, including the influence of the Cox model's coefficients and "
                    "Breslow baseline hazard",
             "km weighted": "is the influence-function one of the weighted estimate, including the influence of "
                            "the weighted Kaplan-Meier estimate of G"}


def _survival_columns(time, event) -> np.ndarray:
    """(n, 2) float64 array of ``time=`` and ``event=`` arrays (checked for shape and type)."""
    out = []
    for values, name in ((time, "time"), (event, "event")):
        arr = column_values(values)
        if arr.ndim != 1:
            raise DataError(f"{name} must be one-dimensional, got shape {arr.shape}")
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
        out.append(arr.astype(np.float64))
    if out[0].shape != out[1].shape:
        raise DataError(f"time and event must have the same length, got {out[0].shape[0]} and {out[1].shape[0]}")
    return np.column_stack(out)


def _covariates(spec, data, kept, n_input: int) -> tuple[np.ndarray, tuple]:
    """The Cox censoring model's covariates of the kept rows, and their names."""
    if spec is None:
        raise OptionError("censoring='cox' needs censoring_covariates= (columns of data, or an (n, p) array)")
    if isinstance(spec, str):  # one column
        spec = [spec]
    if isinstance(spec, (list, tuple)) and all(isinstance(s, str) for s in spec):
        names = tuple(check_options(censoring_covariates=list(spec))["censoring_covariates"])
        if data is None:
            raise OptionError("censoring_covariates= names columns, which needs a formula with data=; with "
                              "time=/event=/probs= give an (n, p) array")
        missing = [nm for nm in names if nm not in data]
        if missing:
            raise DataError(f"censoring_covariates names {missing[0]!r}, which is not a column of data")
        values = np.column_stack([column_values(data[nm]) for nm in names])
    else:
        values = np.asarray(spec)
        values = values.reshape(-1, 1) if values.ndim == 1 else values
        names = tuple(f"x{j}" for j in range(values.shape[1]))
    if values.ndim != 2 or values.shape[0] != n_input:
        raise DataError(f"censoring_covariates must give one row per row of the data ({n_input}), got shape "
                        f"{values.shape}")
    if values.dtype.kind not in "biuf":
        raise TypeError(f"censoring_covariates must be numeric, got dtype {values.dtype}")
    values = values.astype(np.float64)
    if kept is not None:
        values = values[kept]
    if not np.all(np.isfinite(values)):
        raise DataError("censoring_covariates hold missing or infinite values")
    return values, names


def cox_censoring_before(time: np.ndarray, event: np.ndarray, covariates: np.ndarray):
    """G(X_i- | x_i) of a Cox model of the censoring with the Breslow baseline hazard, and its influence.

    The censorings are the events of the model (status 1 - delta), beta its
    Breslow partial-likelihood estimate (:func:`calibtest.core.censoring.cox_breslow`,
    the estimate of statsmodels' PHReg at a fraction of its time), and
    G(s | x) = exp(-Lambda_0(s) exp(x beta)) with the Breslow cumulative
    hazard, evaluated just before each row's time (as R's
    ``basehaz(coxph(..., ties = "breslow"), centered = FALSE)``;
    tests/reference/survival_ipcw.R).

    Returns
    -------
    g_before : ndarray, shape (n,)
    influence : callable
        ``influence(a)``: phi of :func:`calibtest.core.censoring.cox_influence` for a_i Y~_i.
    """
    x = covariates - covariates.mean(axis=0)  # centred for the numerics; G does not depend on the centring
    status = 1.0 - event
    beta = cox_breslow(time, status, x)
    return cox_survival_before(time, status, x, beta), lambda a: cox_influence(time, status, x, beta, a)


def ipcw_influence(inverse: np.ndarray, m: int, u: np.ndarray, y_tilde: np.ndarray,
                   censoring_influence=None) -> np.ndarray:
    """The influence value of each row on T of the IPCW rows: psi_i - mean(psi), plus that of the estimated G.

    Parameters
    ----------
    inverse : ndarray of intp, shape (n,)
        Bin of each row.
    m : int
        Number of bins.
    u : ndarray, shape (n,)
        U = Y~ - r.
    y_tilde : ndarray, shape (n,)
        The IPCW outcomes Y~.
    censoring_influence : callable, optional
        ``censoring_influence(a)``: the influence phi of the estimated G on
        sum_i a_i Y~_i / n (Kaplan-Meier: :func:`calibtest.core.censoring.km_influence`;
        Cox: :func:`calibtest.core.censoring.cox_influence`); None: weights as known.

    Returns
    -------
    ndarray, shape (n,)
        sqrt(n) (T - theta) is about N(0, mean(IF^2)).
    """
    count = np.bincount(inverse, minlength=m).astype(np.float64)
    mu_i = (np.bincount(inverse, weights=u, minlength=m) / count)[inverse]
    psi = 2.0 * mu_i * u - mu_i * mu_i
    influence = psi - psi.mean()
    if censoring_influence is not None:
        influence += censoring_influence(2.0 * mu_i * y_tilde)
    return influence


def estimate_censored(target: PreparedData, partition, survival: SurvivalData, y_tilde: np.ndarray, *,
                      censoring_influence, alpha: float, call: Call | None = None, **extra) -> CalibrationResult:
    """The IPCW estimate of ECE^2(t), its interval and the test of calibration at t; one result.

    Parameters
    ----------
    target : PreparedData
        Binary target with U = Y~ - r.
    partition : Partition
        The rows' bins on the risk.
    survival : SurvivalData
        The survival part of the result.
    y_tilde : ndarray
        The IPCW outcomes.
    censoring_influence : callable or None
        The influence of the estimated G (see :func:`ipcw_influence`), which joins the standard error.
    alpha : float
    call : Call, optional
    **extra
        Bookkeeping fields of the result.
    """
    stats = partition.bin_sums(target)
    n = target.n
    t = debiased_statistic(stats, n)
    plugin = plugin_statistic(stats, n)
    influence = ipcw_influence(partition.inverse, partition.m, target.u[:, 0], y_tilde, censoring_influence)
    s1 = float(np.mean(influence * influence))  # the plug-in sigma1^2 the result reports (its consumers' input)
    v0 = weighted_null_variance(partition.inverse, target.u, np.ones(n), partition.m)
    volume, _ = cell_geometry(target.mode, target.k, target.n_classes, partition.n_bins)
    s0 = n * n * volume * v0
    if not s0 > 0:
        raise DataError("the calibrated-regime variance of the IPCW rows is 0 (no bin holds two rows with "
                        "non-zero errors); use fewer bins or more rows")
    if survival.censoring == "km":  # Kaplan-Meier G: unbiased bin moments plus V_0 (module docstring)
        s1_unbiased = ipcw_first_order_variance(partition.inverse, target.u[:, 0], partition.m, influence, t)
        se = math.sqrt(s1_unbiased / n + v0)
        survival = replace(survival, sigma1_sq_unbiased=s1_unbiased, second_order_variance=v0)
    else:  # Cox G: the plug-in (the corrected form made its se too small: vignettes/survival_heavy_censoring.md)
        se = math.sqrt(s1 / n)
    zstat, pvalue = null_test(t, n, volume, s0)
    threshold = null_threshold(alpha, s0, n, volume)
    iv = adjusted_interval(t, se, threshold, alpha)
    estimates = Estimates(estimate=t, plugin_estimate=plugin, sigma1_sq=s1, sigma0_sq=s0, se=se, bin_volume=volume,
                          test=(zstat, pvalue, threshold), interval=iv, null_method="normal", asymptotic=None,
                          singleton_fraction=singleton_fraction(stats.count))
    approximation = Approximation.sparse_cells(estimates.singleton_fraction, mode=target.mode, k=target.k,
                                               second_order_variance=None)
    return CalibrationResult.from_estimates(
        stats, estimates, bins=BinChoice(partition.n_bins, partition.n_bins_rule, partition.bin_rule, partition),
        target=CalibrationTarget(target.mode, target.k, None), null=NullChoice("asymptotic"), alpha=alpha,
        approximation=approximation, call_record=call, data=target, survival=survival, **extra)


def survival_calib_ci(inputs: Inputs, design: Design, settings: Settings):
    """:func:`calibtest.calib_ci` with a survival outcome at ``horizon`` (see the module docstring).

    Parameters
    ----------
    inputs : Inputs
        ``formula`` (``"Surv(time, event) ~ risk"``) with ``data``, or the
        arrays ``time``, ``event`` and ``probs``; ``weights`` (case weights),
        ``by`` (subgroups, as in :func:`calibtest.calib_ci`: the validated rows
        and group labels are returned as a :class:`SurvivalInput`, which
        :func:`calibtest.ece.grouped_interval.grouped_survival_calib_ci`
        analyses group by group) and ``censoring_covariates`` (the Cox
        censoring model's covariates, ``censoring="cox"``).
    design : Design
        The kind of analysis (a survival outcome; grouped or not, weighted or not).
    settings : Settings
        The options of :func:`calibtest.calib_ci` (validated by it); ``horizon``
        (t > 0), ``censoring`` (``"km"`` or ``"cox"``, the censoring model of
        the IPCW weights) and ``cause`` (competing risks: the event holds codes
        0 (censored), 1, 2, ... and the risk is the cumulative incidence of
        ``cause`` by the horizon; rows of a competing event before t have
        outcome 0 and are not censorings of G, Aalen-Johansen weights,
        ``docs/survival.md``) are checked here; ``env`` is the caller's environment.

    Returns
    -------
    CalibrationResult, or SurvivalInput with ``by=``.

    Raises
    ------
    OptionError, DataError, TypeError
        Unsupported options, unusable times, events, risks or horizon.
    """
    s = settings
    opts = check_options(horizon=s.horizon, censoring=s.censoring, cause=s.cause)
    s = s.replace(horizon=opts["horizon"], censoring=opts["censoring"], cause=opts["cause"])
    design.check()  # horizon= given; the options a survival outcome does not take: prevalence=, cluster=, ...
    formula, data, by, covariate_spec = inputs.formula, inputs.data, inputs.by, inputs.censoring_covariates
    if s.censoring == "km" and covariate_spec is not None:
        raise OptionError("censoring_covariates= is used by censoring='cox'; the Kaplan-Meier censoring "
                          "distribution (censoring='km') takes no covariates")
    options = s.options(horizon=s.horizon, censoring=s.censoring if s.censoring != "km" else None,
                        censoring_covariates=(list(covariate_spec) if isinstance(covariate_spec, (list, tuple)) else
                                              None if covariate_spec is None else "<array>"))
    if s.cause is not None:
        options["cause"] = s.cause
    if design.grouped:
        options["by"] = by if by_names(by) else "<array>"
    if formula is not None:
        if inputs.time is not None or inputs.event is not None or inputs.probs is not None:
            raise OptionError("give either a formula 'Surv(time, event) ~ risk' with data, or time=, event= and "
                              "probs=, not both")
        y = None
    else:
        if inputs.time is None or inputs.event is None or inputs.probs is None:
            raise OptionError("a survival outcome needs a formula 'Surv(time, event) ~ risk' with data=, or all "
                              "of time=, event= and probs=")
        y = _survival_columns(inputs.time, inputs.event)
    prepared = prepare_input("calib_ci", Inputs(formula=formula, data=data, y=y, probs=inputs.probs,
                                                weights=inputs.weights, by=by),
                             Settings(env=s.env, missing=s.missing), target=False, single_column=True,
                             survival=True, group_labels=group_labels if design.grouped else None)
    rows = prepared.rows
    covariates, cov_names = (None, ())
    if s.censoring == "cox":
        covariates, cov_names = _covariates(covariate_spec, data, rows.kept, rows.y.shape[0] + rows.n_dropped)
    if formula is not None:
        names = surv_arguments(rows.y_name) or ("time", "event")
        call = record_call("calib_ci", formula, data, rows.y, rows.probs, options)
    else:
        names = ("time", "event")
        n_in = rows.y.shape[0] + rows.n_dropped
        call = Call("calib_ci", (f"time=<array n={n_in}>", f"event=<array n={n_in}>",
                                 f"probs=<array shape={(n_in,)}>"), options)
    bookkeeping = dict(formula=formula, y_name=rows.y_name, prob_names=tuple(rows.prob_names),
                       n_dropped=rows.n_dropped)
    if s.cause is None:
        t_obs, ev = survival_rows(rows.y[:, 0], rows.y[:, 1], s.horizon, *names)
    else:
        t_obs, ev = competing_rows(rows.y[:, 0], rows.y[:, 1], s.horizon, s.cause, *names)
    rows_in = SurvivalInput(t_obs, ev, rows.probs.reshape(-1), covariates, prepared.weights, call, s, bookkeeping,
                            SurvivalNames(*names, cov_names, prepared.weights_name), prepared.group_names,
                            prepared.group_values, design=design)
    return rows_in if design.grouped else survival_rows_result(rows_in)


def _horizon_rows(t_obs, ev, risk, horizon, cause, n_bins, bookkeeping) -> tuple:
    """(event of the cause (0/1), not censored (0/1), the binary target of 1{T <= t, cause} with the risks, its
    partition) of survival rows.

    With ``cause`` the event codes' other causes are observed (not censored) with outcome 0.

    Raises
    ------
    DataError
        No event (of the cause) at or before the horizon.
    """
    event = ev if cause is None else (ev == cause).astype(np.float64)
    observed = ev if cause is None else (ev != 0.0).astype(np.float64)  # not censored
    y_t = ((event == 1.0) & (t_obs <= horizon)).astype(np.float64)
    if not np.any(y_t):
        raise DataError(f"no event{'' if cause is None else f' of cause {cause}'} at or before horizon={horizon:g}: "
                        "the calibration of the risk by the horizon cannot be estimated")
    binary = prepare_target(y_t, risk, y_name=bookkeeping["y_name"], prob_names=list(bookkeeping["prob_names"]))
    return event, observed, binary, partition_rows(binary, n_bins)


def _survival_weighted(rows: "SurvivalInput") -> CalibrationResult:
    r"""The case-weighted survival result: T_w of the IPCW rows with the weighted Kaplan-Meier G.

    Y~_i = 1{X_i <= t, cause} / G_w(X_i-), G_w the Kaplan-Meier of the
    censorings with the case weights in its risk sets; T_w, V_0 and the
    interval are those of weighted rows (:mod:`calibtest.core.weighted`),
    and the influence of row j gains the weighted Kaplan-Meier term
    w_j [(1 - delta_j) A(X_j) / R_w(X_j) - sum_{u <= X_j} A(u) dC_w(u) / R_w(u)^2] with
    a_i = 2 mu_b (n w_i / W) Y~_i, the derivative of n T_w in Y~_i.  Without
    censoring before t the result is the weighted binary one of 1{T <= t}.
    """
    t_obs, ev, risk, weights, s = rows.time, rows.event, rows.risk, rows.weights, rows.settings
    horizon, null = s.horizon, s.null
    event, observed, binary, partition = _horizon_rows(t_obs, ev, risk, horizon, s.cause, s.n_bins,
                                                       rows.bookkeeping)
    km = censoring_km(t_obs, observed, weights)
    censored_before = bool(np.any((observed == 0.0) & (t_obs < horizon) & (weights > 0)))
    outcome = rows.names.outcome(s)
    if not censored_before:  # the weighted binary call, its null resolution ("auto": Monte Carlo) included
        survival = SurvivalData.build(t_obs, ev, outcome, km=km, max_weight=1.0,
                                      variance="is that of the weighted binary outcome")
        return estimate_weighted(binary, partition, RowWeights(weights, rows.names.weights), s, call=rows.call,
                                 survival=survival, **rows.bookkeeping)
    null = "asymptotic" if null == "auto" else null  # no Bernoulli labels to draw for rows censored before t
    if s.censoring != "km":
        raise OptionError("weights= with censoring before the horizon takes the weighted Kaplan-Meier censoring "
                          "distribution (censoring='km'); a weighted Cox model of the censoring is not available")
    if null != "asymptotic":
        raise OptionError(f"null={null!r} draws Bernoulli outcomes, which rows censored before the horizon do not "
                          "have; with censoring the test of calibration at t is the asymptotic one")
    y_tilde = ipcw_outcome(t_obs, event, horizon, km.before(t_obs))
    n = t_obs.size

    def censoring_term(inverse, u, w):
        m = partition.m
        w_b = np.bincount(inverse, weights=w, minlength=m)
        mu = np.divide(np.bincount(inverse, weights=w * u[:, 0], minlength=m), w_b, out=np.zeros(m),
                       where=w_b > 0)
        a = 2.0 * mu[inverse] * (n * w / w_b.sum()) * y_tilde
        return weighted_km_influence(km, observed, w, a)

    cases = y_tilde > 0
    survival = SurvivalData.build(t_obs, ev, outcome, km=km, max_weight=float(y_tilde[cases].max()),
                                  variance=_VARIANCE["km weighted"])
    target = PreparedData(z=binary.z, u=(y_tilde - risk)[:, None], mode="binary", k=1, n_classes=None)
    return estimate_weighted(target, partition, RowWeights(weights, rows.names.weights), s.replace(null=null),
                             call=rows.call, extra_influence=censoring_term, survival=survival, **rows.bookkeeping)


@dataclass(frozen=True)
class SurvivalNames:
    """How a survival result names its columns: the time, the event, the Cox covariates and the case weights."""

    time: str
    event: str
    covariates: tuple
    weights: str | None

    def outcome(self, settings: Settings) -> SurvivalOutcome:
        """What :meth:`~calibtest.core.censoring.SurvivalData.build` reads of the outcome, whatever the rows."""
        return SurvivalOutcome(horizon=settings.horizon, censoring=settings.censoring, covariates=self.covariates,
                               time_name=self.time, event_name=self.event, cause=settings.cause)


@dataclass(frozen=True)
class SurvivalInput:
    """The validated rows of a survival outcome before analysis (what ``by=`` splits into groups).

    Attributes
    ----------
    time, event, risk : ndarray, shape (n,)
        Times, events (codes with ``cause``) and risks of the kept rows.
    covariates : ndarray or None
        The Cox censoring model's covariates of the kept rows.
    weights : ndarray or None
        The case weights of the kept rows.
    call : Call
        The recorded call.
    settings : Settings
        The call's options (``horizon``, ``censoring`` and ``cause`` checked).
    bookkeeping : dict
        Bookkeeping fields of the result.
    names : SurvivalNames
        The names of the time, event, covariate and weight columns.
    group_names, group_values : list
        The grouping columns' names and labels (``by=``).
    design : Design
        The call's design: whether the rows carry case weights (``case_weighted``).
    """

    time: np.ndarray
    event: np.ndarray
    risk: np.ndarray
    covariates: np.ndarray | None
    weights: np.ndarray | None
    call: Call
    settings: Settings
    bookkeeping: dict
    names: SurvivalNames
    group_names: list
    group_values: list
    design: Design

    def fit_rows(self, idx=None, *, call: Call | None = None, bookkeeping: dict | None = None,
                 rng=None) -> CalibrationResult:
        """The survival result of the rows ``idx`` (all rows when None): :func:`survival_rows_result` on them.

        The censoring distribution is estimated from those rows alone (with
        ``by=``, each group its own).  ``call``, ``bookkeeping`` and ``rng``
        replace the stored ones (a group's label, its row count, its seed).
        """
        pick = slice(None) if idx is None else idx
        subset = dataclasses.replace(
            self, time=self.time[pick], event=self.event[pick], risk=self.risk[pick],
            covariates=None if self.covariates is None else self.covariates[pick],
            weights=self.weights[pick] if self.design.case_weighted else None,
            call=self.call if call is None else call, bookkeeping=self.bookkeeping if bookkeeping is None else bookkeeping,
            settings=self.settings if rng is None else self.settings.replace(rng=rng))
        return survival_rows_result(subset)


def survival_rows_result(rows: SurvivalInput) -> CalibrationResult:
    """The survival result of validated rows: times, events (or codes with ``cause``), risks, covariates.

    The censoring distribution (Kaplan-Meier or Cox) is estimated from
    these rows alone, so with ``by=`` each group has its own.  With
    ``cause`` the outcome is 1{T <= t, cause}: the rows of a competing
    event are not censorings of G (their outcome, 0, is known).  With case
    ``weights`` the estimate is the weighted T_w of the IPCW rows
    (:func:`calibtest.ece.build_result.estimate_weighted`), G the weighted
    Kaplan-Meier and the influence of G-hat
    (:func:`calibtest.core.censoring.weighted_km_influence`) added to T_w's
    (:func:`_survival_weighted`).
    """
    if rows.design.case_weighted:
        return _survival_weighted(rows)
    t_obs, ev, risk, s, bookkeeping = rows.time, rows.event, rows.risk, rows.settings, rows.bookkeeping
    horizon, censoring, null = s.horizon, s.censoring, s.null
    event, observed, binary, partition = _horizon_rows(t_obs, ev, risk, horizon, s.cause, s.n_bins, bookkeeping)
    km = censoring_km(t_obs, observed)
    censored_before = bool(np.any((observed == 0.0) & (t_obs < horizon)))
    outcome = rows.names.outcome(s)
    if not censored_before:  # Y~ = 1{T <= t}: the binary path, every number identical
        survival = SurvivalData.build(t_obs, ev, outcome, km=km, max_weight=1.0,
                                      variance="is that of the binary outcome")
        return estimate_rows(binary, partition, s, call=rows.call, survival=survival, **bookkeeping)
    if null not in ("auto", "asymptotic"):
        raise OptionError(f"null={null!r} draws or conditions on Bernoulli outcomes, which rows censored before the "
                          "horizon do not have; with censoring the test of calibration at t is the asymptotic one "
                          "(null='auto' or 'asymptotic'; docs/survival.md)")
    if censoring == "km":
        g_before = km.before(t_obs)
        influence = lambda a: km_influence(km, observed, a)  # noqa: E731
    else:
        g_before, influence = cox_censoring_before(t_obs, observed, rows.covariates)
    y_tilde = ipcw_outcome(t_obs, event, horizon, g_before)
    cases = y_tilde > 0
    survival = SurvivalData.build(t_obs, ev, outcome, km=km, max_weight=float(y_tilde[cases].max()),
                                  variance=_VARIANCE[censoring])
    u = (y_tilde - risk)[:, None]
    target = PreparedData(z=binary.z, u=u, mode="binary", k=1, n_classes=None)
    return estimate_censored(target, partition, survival, y_tilde, censoring_influence=influence, alpha=s.alpha,
                             call=rows.call, **bookkeeping)
