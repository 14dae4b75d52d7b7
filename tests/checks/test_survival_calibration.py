"""Tests of calibtest.checks.survival_calibration and its engines in calibtest.core.km_cox.

The reference numbers in ``tests/reference/survival_evidence.json`` were written by
``tests/reference/survival_evidence.R`` (R 4.2.2, survival 3.5.3, riskRegression 2022.11.28,
rms 6.5.0) on ``tests/reference/survival_evidence_data.csv`` (written by
``survival_evidence_data.py``); the numeric tests read that file and need no R (they skip
when it is absent).  ``test_rerun_r_reference`` runs the R script again (slow; skipped
without Rscript).  The other tests check the engines against slower, obviously correct
implementations: statsmodels' ``SurvfuncRight`` and ``PHReg`` and plain Python loops.
"""
from __future__ import annotations

import dataclasses
import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import stats as sps
from statsmodels.duration.hazard_regression import PHReg
from statsmodels.duration.survfunc import SurvfuncRight

from calibtest.core.km_cox import breslow_offset_at, cox_breslow, equal_size_groups, kaplan_meier_at
from calibtest.api.calib_ci import calib_ci
from calibtest.checks.flexible_calibration import harrell_knots, rcs_basis
from calibtest.checks.survival_calibration import SURVIVAL_ROWS, SurvivalEvidence, survival_evidence
from reference_helpers import load_reference, survival_set

REPO = Path(__file__).resolve().parents[2]
REF_DIR = REPO / "tests" / "reference"
REF_JSON = REF_DIR / "survival_evidence.json"
REF_DATA = REF_DIR / "survival_evidence_data.csv"
REF_SCRIPT = REF_DIR / "survival_evidence.R"
SETS = ("weibull", "ties")
TOL = 1e-6


def _reference() -> dict:
    return load_reference(REF_JSON, REF_DATA)


def _data(name: str):
    return survival_set(REF_DATA, name)


def _sim(n, seed, scale=1.0, shift=0.0, cens=12.0, horizon=5.0):
    """Exponential times with true risk r by the horizon; predicted cloglog = shift + scale * cloglog(r)."""
    rng = np.random.default_rng(seed)
    r = rng.uniform(0.05, 0.6, n)
    t = rng.exponential(horizon / -np.log1p(-r))
    c = rng.exponential(cens, n)
    risk = -np.expm1(-np.exp(shift + scale * np.log(-np.log1p(-r))))
    return np.minimum(t, c), t <= c, risk, horizon


@pytest.fixture(scope="module")
def results():
    if not REF_DATA.exists():
        pytest.skip("the reference data is absent")
    return {name: survival_evidence(*_data(name)[:3], _data(name)[3]) for name in SETS}


# --------------------------------------------------------------------------- R: survival, riskRegression, rms
@pytest.mark.parametrize("name", SETS)
def test_kaplan_meier_and_oe_match_r_survival(results, name):
    ref, ev = _reference()[name], results[name]
    assert_allclose([ev.observed, ev.observed_se], [ref["km"]["observed"], ref["km"]["se"]], rtol=TOL)
    ci = ev.conf_int()
    assert_allclose([ev.oe, ev.oe_se, ci.loc["observed_expected", "lower"], ci.loc["observed_expected", "upper"]],
                    [ref["oe"]["oe"], ref["oe"]["se_log"], ref["oe"]["lower"], ref["oe"]["upper"]], rtol=TOL)


@pytest.mark.parametrize("name", SETS)
def test_slope_and_intercept_match_r_coxph_and_glm(results, name):
    ref, ev = _reference()[name], results[name]
    assert_allclose([ev.slope, ev.slope_se], [ref["slope"]["slope"], ref["slope"]["se"]], rtol=TOL)
    # the intercept is log H_0(t) of coxph with the offset, and Crowson's Poisson intercept too
    assert_allclose([ev.citl, ev.citl, ev.citl_se], [ref["citl"]["citl"], ref["citl"]["poisson"],
                                                      ref["citl"]["se"]], rtol=TOL)


@pytest.mark.parametrize("name", SETS)
def test_flexible_curve_matches_r_rms_and_coxph(results, name):
    ref, cv = _reference()[name]["flexible"], results[name].curve
    assert_allclose(cv.knots, ref["knots"], rtol=TOL)
    assert_allclose(cv.params, ref["coef"], rtol=TOL)
    assert_allclose([cv.ici, cv.e50, cv.e90, cv.emax, cv.wald],
                    [ref["ici"], ref["e50"], ref["e90"], ref["emax"], ref["wald"]], rtol=TOL)
    assert cv.pvalue == pytest.approx(sps.chi2.sf(ref["wald"], 2), rel=TOL)


@pytest.mark.parametrize("name", SETS)
def test_groups_and_gnd_match_r(results, name):
    ref, ev = _reference()[name], results[name]
    g, rg = ev.groups, ref["groups"]
    for col in ("observed", "se", "lower", "upper", "mean_risk"):
        assert_allclose(g[col].to_numpy(float), rg[col], rtol=TOL, err_msg=col)
    assert_allclose(ev.gnd_statistic, rg["gnd"], rtol=TOL)
    assert ev.gnd_df == 10 and ev.gnd_pvalue == pytest.approx(sps.chi2.sf(rg["gnd"], 10), rel=TOL)
    # Demler et al.'s reference (df = G - 1) is that of development data
    dev = survival_evidence(*_data(name), validation="development")
    assert dev.gnd_df == 9 and dev.gnd_pvalue == pytest.approx(rg["gnd_p"], rel=TOL)
    assert dev.gnd_statistic == ev.gnd_statistic


def test_deciles_match_risk_regression_plot_calibration(results):
    # riskRegression's quantile groups coincide with the equal-size groups when no decile cut falls on a tie
    ref, ev = _reference()["weibull"]["riskRegression"], results["weibull"]
    assert_allclose(ev.groups["mean_risk"].to_numpy(float), ref["pred"], rtol=TOL)
    assert_allclose(ev.groups["observed"].to_numpy(float), ref["obs"], rtol=TOL)


@pytest.mark.slow
def test_rerun_r_reference(tmp_path):
    if shutil.which("Rscript") is None:
        pytest.skip("Rscript not found")
    stored = _reference()
    out = tmp_path / "ref.json"
    subprocess.run(["Rscript", str(REF_SCRIPT), str(out)], cwd=REPO, check=True, capture_output=True, timeout=600)
    fresh = json.loads(out.read_text())
    for name in SETS:
        assert_allclose(fresh[name]["oe"]["oe"], stored[name]["oe"]["oe"], rtol=1e-12)
        assert_allclose(fresh[name]["slope"]["slope"], stored[name]["slope"]["slope"], rtol=1e-9)
        assert_allclose(fresh[name]["groups"]["gnd"], stored[name]["groups"]["gnd"], rtol=1e-12)


# --------------------------------------------------------------------------- engines against slow references
def _tied(n=300, seed=3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    t = np.round(rng.exponential(np.exp(-x @ [0.6, -0.4])), 1)
    c = np.round(rng.exponential(2.0, n), 1)
    return np.minimum(t, c), t <= c, x


def test_kaplan_meier_matches_statsmodels_survfunc_per_group():
    time, event, x = _tied()
    group = equal_size_groups(x[:, 0], 4)
    surv, gw = kaplan_meier_at(time, event, 0.8, group, 4)
    for g in range(4):  # a loop over four groups: the slow reference
        sf = SurvfuncRight(time[group == g], event[group == g].astype(float))
        i = np.searchsorted(sf.surv_times, 0.8, side="right") - 1
        assert surv[g] == pytest.approx(sf.surv_prob[i], rel=1e-12)
        assert surv[g] * math.sqrt(gw[g]) == pytest.approx(sf.surv_prob_se[i], rel=1e-10)


def test_equal_size_groups_are_those_of_array_split():
    risk = np.array([0.3, 0.1, 0.3, 0.2, 0.1, 0.5, 0.3])
    group = equal_size_groups(risk, 3)
    expected = np.empty(7, int)
    for g, rows in enumerate(np.array_split(np.argsort(risk, kind="stable"), 3)):
        expected[rows] = g
    assert group.tolist() == expected.tolist() == [1, 0, 1, 0, 0, 2, 2]


def test_cox_matches_statsmodels_phreg_breslow_with_ties():
    time, event, x = _tied()
    fit = cox_breslow(time, event, x, horizon=1.0)
    ref = PHReg(time, x, status=event.astype(float), ties="breslow").fit()
    assert_allclose(fit.params, ref.params, rtol=1e-8)
    assert_allclose(fit.cov, ref.cov_params(), rtol=1e-6)
    assert fit.loglik == pytest.approx(ref.llf, rel=1e-10)
    # Breslow's baseline at 1.0 (statsmodels' coefficients, the estimator's definition as a loop)
    h0 = _breslow_loop(time, event, x, ref.params, 1.0)
    assert_allclose(fit.risk_at_horizon(x[:5]), -np.expm1(-h0 * np.exp(x[:5] @ ref.params)), rtol=1e-8)


def _breslow_loop(time, event, x, beta, horizon):
    """H_0(horizon) = sum over events by the horizon of 1 / sum_{time >= t_i} exp(x beta), one event at a time."""
    lp = np.exp(x @ beta)
    return sum(1.0 / lp[time >= time[i]].sum() for i in np.flatnonzero(event & (time <= horizon)))


def test_breslow_offset_matches_a_loop_over_event_times():
    time, event, x = _tied(120, 5)
    off = 0.7 * x[:, 0]
    h, var = breslow_offset_at(time, event, off, 0.9)
    slow_h = slow_v = 0.0
    for i in np.flatnonzero(event & (time <= 0.9)):  # one term per event: the definition
        s0 = np.exp(off[time >= time[i]]).sum()
        slow_h += 1 / s0
        slow_v += 1 / s0 ** 2
    assert (h, var) == pytest.approx((slow_h, slow_v), rel=1e-12)


def test_gnd_and_groups_match_a_loop_with_survfunc():
    time, event, risk, horizon = _sim(900, 11, scale=1.2)
    ev = survival_evidence(time, event, risk, horizon, n_groups=6)
    order = np.argsort(risk, kind="stable")
    stat = 0.0
    for g, rows in enumerate(np.array_split(order, 6)):
        sf = SurvfuncRight(time[rows], event[rows].astype(float))
        i = np.searchsorted(sf.surv_times, horizon, side="right") - 1
        obs, se = 1 - sf.surv_prob[i], sf.surv_prob_se[i]
        assert ev.groups["observed"].iloc[g] == pytest.approx(obs, rel=1e-12)
        assert ev.groups["n"].iloc[g] == rows.size
        assert ev.groups["events"].iloc[g] == int(np.sum(event[rows] & (time[rows] <= horizon)))
        stat += (obs - risk[rows].mean()) ** 2 / se ** 2
    assert ev.gnd_statistic == pytest.approx(stat, rel=1e-10)
    assert ev.gnd_pvalue == pytest.approx(sps.chi2.sf(stat, 6), rel=1e-10)


def test_without_censoring_the_kaplan_meier_numbers_are_binomial():
    # nothing censored before t: 1 - S(t) is the share of events by t and Greenwood's variance O(1 - O)/n
    rng = np.random.default_rng(4)
    n = 500
    risk = rng.uniform(0.1, 0.5, n)
    t = rng.exponential(2 / -np.log1p(-risk))
    ev = survival_evidence(t, np.ones(n, bool), risk, 2.0)
    o = np.mean(t <= 2.0)
    assert ev.observed == pytest.approx(o, rel=1e-12)
    assert ev.observed_se == pytest.approx(math.sqrt(o * (1 - o) / n), rel=1e-10)
    assert ev.oe == pytest.approx(o / risk.mean(), rel=1e-12)
    assert ev.n_censored == 0 and ev.n_events == int(np.sum(t <= 2.0))


def test_flexible_curve_is_the_cox_fit_on_the_spline():
    time, event, risk, horizon = _sim(700, 12, scale=0.8)
    ev = survival_evidence(time, event, risk, horizon)
    cll = np.log(-np.log1p(-risk))
    x = rcs_basis(cll, harrell_knots(cll, 3))
    th, dh = np.minimum(time, horizon), event & (time <= horizon)
    ref = PHReg(th, x, status=dh.astype(float), ties="breslow").fit()
    assert_allclose(ev.curve.params, ref.params, rtol=1e-7)
    observed = -np.expm1(-_breslow_loop(th, dh, x, ref.params, horizon) * np.exp(x @ ref.params))
    diff = np.abs(observed - risk)
    assert_allclose([ev.curve.ici, ev.curve.e50, ev.curve.e90], [diff.mean(), np.median(diff),
                                                                np.quantile(diff, 0.9)], rtol=1e-6)


# --------------------------------------------------------------------------- behaviour
def test_a_calibrated_model_is_not_rejected_and_a_miscalibrated_one_is():
    good = survival_evidence(*_sim(20000, 1))
    assert abs(good.slope - 1) < 3 * good.slope_se and abs(good.citl) < 3 * good.citl_se
    assert abs(math.log(good.oe)) < 3 * good.oe_se and good.curve.ici < 0.01
    bad = survival_evidence(*_sim(20000, 1, scale=1.4, shift=0.6))  # too extreme and too high
    assert bad.rows()["reject"].drop("auc").all() and not bad.rows().loc["auc", "reject"]  # AUC tests nothing
    assert bad.slope < 1 and bad.citl < 0 and bad.oe < 1
    # too extreme but right on average: the slope, the curve and GND see it, O/E and the intercept do not
    assert bad.direction().startswith("Direction: the risks by t are too high on average (CITL = ")
    assert "and too extreme (slope = " in bad.direction()
    spread = survival_evidence(*_sim(20000, 1, scale=1.4, shift=0.3))
    assert spread.rows()["reject"].to_dict() == {"observed_expected": False, "citl": False, "slope": True,
                                                 "flexible": True, "gnd": True, "auc": False}
    assert spread.direction().startswith("Direction: the risks by t are too extreme (slope = ")
    assert "neither the level" in good.direction()


def test_too_few_distinct_risks_leave_the_curve_out_with_a_reason():
    time, event, _, horizon = _sim(300, 13)
    risk = np.where(np.arange(300) % 2 == 0, 0.2, 0.4)
    ev = survival_evidence(time, event, risk, horizon, n_groups=2)
    assert ev.curve is None and ev.slope is not None
    assert ev.scope == ("The flexible calibration curve was not computed: the risks take 2 distinct values, "
                        "too few for the 3 knots of the spline on cloglog(risk).")
    one = survival_evidence(time, event, np.full(300, 0.3), horizon, n_groups=2)
    assert one.slope is None and one.curve is None and one.citl is not None
    assert one.scope.startswith("The calibration slope was not computed: a covariate of the Cox model is constant")
    assert tuple(one.rows().index) == ("observed_expected", "citl", "gnd", "auc")


def test_rows_have_the_shape_of_the_evidence_table(results):
    ev = results["weibull"]
    rows = ev.rows()
    rng = np.random.default_rng(0)
    p = rng.uniform(0.1, 0.9, 300)
    binary = calib_ci(y=(rng.uniform(size=300) < p).astype(int), probs=p).evidence().table
    assert list(rows.columns) == list(binary.columns)
    assert rows.dtypes.tolist() == binary.dtypes.tolist()
    assert {type(v) for v in rows["reject"]} == {type(v) for v in binary["reject"]} == {bool}
    # the shared keys name the same measures, so the conclusion's rules on CITL and the slope apply
    assert set(rows.index) & set(binary.index) == {"citl", "slope"}
    assert tuple(rows.index) == SURVIVAL_ROWS
    ci = ev.conf_int()
    for key, null in (("observed_expected", 1.0), ("citl", 0.0), ("slope", 1.0)):
        lo, hi = ci.loc[key, "lower"], ci.loc[key, "upper"]
        assert rows.loc[key, "lower"] == lo and rows.loc[key, "upper"] == hi
        assert rows.loc[key, "reject"] == (not lo <= null <= hi)
        assert rows.loc[key, "verdict"] == ("rejects" if rows.loc[key, "reject"] else "does not reject")
    assert rows.loc["gnd", "reject"] == (ev.gnd_pvalue <= ev.alpha)
    assert rows.loc["flexible", "statistic"] == ev.curve.ici and rows.loc["flexible", "lower"] is None
    # the Wald p-value of a row agrees with its interval
    frame = ev.to_frame()
    for key in ("observed_expected", "citl", "slope"):
        assert (frame.loc[key, "pvalue"] <= ev.alpha) == rows.loc[key, "reject"]


def test_summary_to_dict_and_frozen(results):
    ev = results["ties"]
    text = str(ev.summary())
    assert all(len(line) == 78 for line in text.splitlines())
    assert "Greenwood-Nam-D'Agostino" in text and "Events by t:" in text
    d = ev.to_dict()
    json.dumps(d)
    assert d["gnd_estimate"] == ev.gnd_statistic and d["slope_estimate"] == ev.slope
    assert d["groups_observed"] == ev.groups["observed"].tolist()
    assert "<table" in ev._repr_html_()
    with pytest.raises(dataclasses.FrozenInstanceError):
        ev.alpha = 0.1
    with pytest.raises(ValueError, match="alpha = 0.05"):
        ev.summary(alpha=0.1)
    # another level: the same estimates, wider intervals
    wide = ev.conf_int(0.01)
    assert (wide["lower"] < ev.conf_int()["lower"]).all()


def test_sparse_groups_are_named_in_the_notes():
    time, event, risk, horizon = _sim(300, 8, cens=2.0)
    ev = survival_evidence(time, event, risk, horizon, n_groups=20)
    few = ev.groups.index[ev.groups["events"] < 5].tolist()
    assert few, "the design must give sparse groups"
    listed = ", ".join(map(str, few))
    assert any(f"risk groups (groups {listed}) have fewer than 5 events" in note for note in ev.notes())


def test_groups_without_events_add_zero_and_are_named():
    time, event, risk, horizon = _sim(400, 14)
    low = np.argsort(risk, kind="stable")[:40]  # the first of 10 groups: no event by t
    event = event.copy()
    event[low] = False
    ev = survival_evidence(time, event, risk, horizon)
    g = ev.groups.loc[1]
    assert g["events"] == 0 and g["observed"] == 0 and g["se"] == 0 and g["gnd"] == 0
    assert np.isnan(g["lower"]) and np.isnan(g["upper"])
    assert ev.gnd_statistic == pytest.approx(ev.groups["gnd"].iloc[1:].sum(), rel=1e-12)
    assert any(note.startswith("Risk group 1 has Greenwood variance 0") for note in ev.notes())


def test_a_kaplan_meier_estimate_of_zero_at_the_horizon_is_refused():
    time = np.array([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="Kaplan-Meier estimate at the horizon 4 is 0"):
        survival_evidence(time, [0, 1, 0, 1], [0.2, 0.3, 0.4, 0.5], 4.0, n_groups=2)


def test_risks_of_exactly_zero_or_one_leave_the_regressions_out():
    time, event, risk, horizon = _sim(400, 9)
    risk = risk.copy()
    risk[:3] = 0.0
    ev = survival_evidence(time, event, risk, horizon)
    assert ev.citl is None and ev.slope is None and ev.curve is None
    assert "exactly 0 or 1" in ev.scope
    assert tuple(ev.rows().index) == ("observed_expected", "gnd", "auc")
    assert np.isnan(ev.to_frame().loc["slope", "estimate"])
    assert "exactly 0 or 1" in str(ev.summary())


@pytest.mark.parametrize("change, exc, words", [
    (lambda a: a.update(time=np.r_[-1.0, a["time"][1:]]), ValueError, "time has 1 negative"),
    (lambda a: a.update(time=np.r_[np.nan, a["time"][1:]]), ValueError, "time has 1 missing"),
    (lambda a: a.update(time=a["time"].astype(str)), TypeError, "time must be numeric"),
    (lambda a: a.update(event=np.r_[2, a["event"][1:]]), ValueError, "event must be coded 0"),
    (lambda a: a.update(risk=np.r_[1.2, a["risk"][1:]]), ValueError, r"risk must lie in \[0, 1\]"),
    (lambda a: a.update(risk=a["risk"][1:]), ValueError, "same length"),
    (lambda a: a.update(horizon=1e6), ValueError, "beyond the last follow-up"),
    (lambda a: a.update(horizon=-1.0), ValueError, "horizon must be positive"),
    (lambda a: a.update(horizon=1e-9), ValueError, "no event at or before the horizon"),
    (lambda a: a.update(n_groups=1), ValueError, "n_groups"),
    (lambda a: a.update(n_groups=10 ** 6), ValueError, "n_groups = 1000000 is more than"),
    (lambda a: a.update(alpha=1.5), ValueError, "alpha"),
    (lambda a: a.update(risk=np.zeros(200)), ValueError, "every risk is 0"),
    (lambda a: a.update(validation="internal"), ValueError, "validation"),
])
def test_bad_input_names_the_argument(change, exc, words):
    time, event, risk, horizon = _sim(200, 10)
    args = {"time": time, "event": event.astype(int), "risk": risk, "horizon": horizon}
    change(args)
    with pytest.raises(exc, match=words):
        survival_evidence(**args)


def test_plot_draws_what_the_result_holds(results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from calibtest.reporting import plot_survival_calibration

    ev = results["weibull"]
    ax = plot_survival_calibration(ev)
    points = ax.lines[0].get_xydata()
    assert_allclose(points, np.column_stack([ev.groups["mean_risk"], ev.groups["observed"]]))
    assert_allclose(ax.lines[-2].get_xydata(), ev.curve.grid[["risk", "observed"]].to_numpy())
    plt.close(ax.figure)
    with pytest.raises(TypeError, match="SurvivalEvidence"):
        plot_survival_calibration(object())


@pytest.mark.slow
def test_size_of_the_regression_rows_under_calibration():
    # 200 calibrated data sets (n = 2000, Weibull times, 30% censored before t; benchmarks/
    # survival_evidence_size.py): O/E, the intercept, the slope and the curve's Wald test keep alpha = 0.05
    # within 3 Monte Carlo standard errors; GND is liberal at this n (docs/survival_evidence.md)
    rng = np.random.default_rng(7)
    reps, n = 200, 2000
    rejects = np.zeros(4)
    for _ in range(reps):  # one data set per iteration
        r = rng.uniform(0.05, 0.6, n)
        t = 5.0 * (rng.exponential(size=n) / -np.log1p(-r)) ** (1 / 1.5)
        c = rng.uniform(0, 14, n)
        rows = survival_evidence(np.minimum(t, c), t <= c, r, 5.0).rows()
        rejects += rows.loc[["observed_expected", "citl", "slope", "flexible"], "reject"].to_numpy(bool)
    se = math.sqrt(0.05 * 0.95 / reps)
    assert np.all(np.abs(rejects / reps - 0.05) <= 3 * se), rejects / reps


def test_result_type():
    assert isinstance(survival_evidence(*_sim(300, 2)), SurvivalEvidence)


# --------------------------------------------------------------------------- GND marked unreliable
def test_gnd_is_unreliable_with_censoring_ties_or_sparse_groups_and_reliable_otherwise():
    from calibtest.checks.survival_calibration import GND_CENSORING_LIMIT, MIN_GROUP_EVENTS

    rng = np.random.default_rng(3)
    n = 3000
    r = rng.uniform(0.2, 0.6, n)
    t = 5.0 * rng.exponential(size=n) / -np.log1p(-r)
    clean = survival_evidence(t, np.ones(n), r, 5.0)  # no censoring, continuous times, >= 5 events a group
    assert clean.n_censored == 0 and clean.max_tied_events == 1
    assert (clean.groups["events"] >= MIN_GROUP_EVENTS).all()
    assert clean.gnd_unreliable == "" and "gnd" in clean.decisive_rows()
    assert clean.rows().loc["gnd", "verdict"] in ("rejects", "does not reject")
    # censoring before t: the count is the reason
    c = rng.uniform(0, 40, n)
    cens = survival_evidence(np.minimum(t, c), (t <= c).astype(float), r, 5.0)
    share = cens.n_censored / n
    assert share > GND_CENSORING_LIMIT
    assert f"{cens.n_censored} of the {n} rows are censored before t" in cens.gnd_unreliable
    assert "gnd" not in cens.decisive_rows() and cens.rows().loc["gnd", "verdict"] == "unreliable"
    # tied event times: the largest number of events at one time, counted here by numpy
    months = np.ceil(t * 12) / 12
    tied = survival_evidence(months, np.ones(n), r, 5.0)
    _, counts = np.unique(months[months <= 5.0], return_counts=True)
    assert tied.max_tied_events == counts.max() > 1
    assert f"up to {counts.max()} events share one time by t" in tied.gnd_unreliable
    # a sparse group: low risks, few events in the lowest group
    low = rng.uniform(0.001, 0.02, 400)
    tl = 5.0 * rng.exponential(size=400) / -np.log1p(-low)
    tl[:40] = np.linspace(0.1, 4.9, 40)  # some events by t in every run
    sparse = survival_evidence(tl, np.ones(400), low, 5.0)
    few = int((sparse.groups["events"] < MIN_GROUP_EVENTS).sum())
    assert few > 0 and f"{few} risk group" in sparse.gnd_unreliable
    # AUC is never decisive
    assert "auc" not in clean.decisive_rows() and clean.rows().loc["auc", "verdict"] == "not a test"
