"""Survival results in the evidence, the summary, the acceptance criteria, the report and the command line.

Every number is checked against an independent call: ``survival_calibration``
on the same times, events and risks, the binary ``calib_ci`` on 1{T <= t}
without censoring before t, the margin bound and the TOST intervals by hand.
"""
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

import calibtest as ct
from calibtest.display.format import fmt
from calibtest.cli import main
from calibtest.checks.survival_calibration import SURVIVAL_ROWS, survival_evidence

HORIZON = 5.0


def simulate(n, seed, *, scale=1.0, censoring=15.0):
    """Exponential event times given the risk at t = 5 (times the cumulative hazard by ``scale``: 1 calibrated)
    and exponential censoring with mean ``censoring`` (None: none before the horizon)."""
    rng = np.random.default_rng(seed)
    risk = rng.uniform(0.05, 0.6, n)
    t = rng.exponential(HORIZON / (-np.log1p(-risk) * scale))
    c = rng.exponential(censoring, n) if censoring else np.full(n, 100.0)
    return np.minimum(t, c), (t <= c).astype(float), risk


@pytest.fixture(scope="module")
def censored():
    time, event, risk = simulate(1500, 3)
    df = pd.DataFrame({"time": time, "event": event, "risk": risk})
    return df, ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=HORIZON)


def test_public_name_does_not_shadow_its_module():
    assert ct.survival_calibration is survival_evidence
    assert ct.SurvivalEvidence.__name__ == "SurvivalEvidence"


def test_evidence_is_the_ipcw_row_and_the_survival_rows(censored):
    df, res = censored
    assert res.censored
    ev = res.evidence()
    assert ev is res.evidence() and ev is res.evidence(rng=5)  # kept with the result; nothing is drawn
    assert list(ev.table.index) == ["calib_ci", *SURVIVAL_ROWS]
    sev = ct.survival_calibration(df["time"], df["event"], df["risk"], HORIZON)  # independent call
    rows = sev.rows()
    for key in SURVIVAL_ROWS:
        for col in ("statistic", "pvalue", "lower", "upper", "reject"):
            assert ev.table.loc[key, col] == rows.loc[key, col], (key, col)
    iv = res.conf_int()
    ci = ev.table.loc["calib_ci"]
    assert (ci["statistic"], ci["pvalue"], ci["lower"], ci["upper"]) == (res.estimate, res.null_pvalue, iv.lower,
                                                                       iv.upper)
    assert ci["reject"] == (not iv.contains_zero)
    assert ev.survival.oe == sev.oe and ev.test is None and ev.hl is None and ev.valprob is None


def test_conclusion_follows_the_table_and_states_the_direction(censored):
    _, res = censored
    ev = res.evidence()
    rej = ev.table["reject"].astype(bool)
    expected = ("evidence" if rej["calib_ci"] else "mixed" if rej.drop("calib_ci").any() else "no evidence")
    assert ev.verdict == expected
    assert ev.survival.direction() in ev.conclusion()
    assert str(res.summary()).count(ev.conclusion().split(": ")[0]) == 1  # the summary opens with it
    # too high risks (cumulative hazard halved in truth): the level is off, and the conclusion says which way
    time, event, risk = simulate(3000, 4, scale=0.5)
    over = ct.calib_ci(time=time, event=event, probs=risk, horizon=HORIZON).evidence()
    assert over.verdict in ("evidence", "mixed") and "too high on average" in over.conclusion()
    assert over.table.loc["observed_expected", "reject"] and over.table.loc["observed_expected", "statistic"] < 1


def test_summary_shows_the_survival_evidence_once(censored):
    _, res = censored
    text = str(res.summary())
    ev = res.evidence()
    assert "O/E at t = 5 95% CI" in text and "Greenwood-Nam-D'Agostino" in text and "multi-scale" not in \
        text.split("Notes:")[0]
    assert text.count("Conclusion:") == 1
    assert ev.survival.direction().removeprefix("Direction: ")[:40].split()[0] in text
    assert "B = 5 " not in text  # no bin-sensitivity table for IPCW rows
    assert "survival n=1500" in repr(ev) and ev.to_dict()["horizon"] == HORIZON
    assert "Evidence on calibration" in str(ev.summary())


def test_without_censoring_before_t_the_evidence_stays_binary():
    time, event, risk = simulate(800, 5, censoring=None)
    res = ct.calib_ci(time=time, event=event, probs=risk, horizon=HORIZON)
    assert not res.censored
    y_t = ((event == 1) & (time <= HORIZON)).astype(float)
    binary = ct.calib_ci(y=y_t, probs=risk).evidence()
    ev = res.evidence()
    assert list(ev.table.index) == list(binary.table.index) and "calib_test" in ev.table.index
    assert ev.table["statistic"].tolist() == binary.table["statistic"].tolist()
    assert ev.conclusion() == binary.conclusion()


def test_acceptance_criteria_come_from_the_survival_evidence(censored):
    df, res = censored
    sev = ct.survival_calibration(df["time"], df["event"], df["risk"], HORIZON)
    crit = {"ece_below": 0.1, "citl_within": 0.3, "slope_within": [0.7, 1.4], "oe_within": [0.8, 1.25]}
    acc = res.acceptance(crit)
    table = acc.table.set_index("criterion")
    z = sps.norm.isf(0.05)  # the (1 - 2 alpha) interval of the TOST
    assert table.loc["citl_within", "estimate"] == sev.citl
    assert math.isclose(table.loc["citl_within", "ci_lower"], sev.citl - z * sev.citl_se, rel_tol=1e-12)
    assert table.loc["slope_within", "estimate"] == sev.slope
    assert math.isclose(table.loc["slope_within", "ci_upper"], sev.slope + z * sev.slope_se, rel_tol=1e-12)
    assert table.loc["oe_within", "estimate"] == sev.oe
    assert math.isclose(table.loc["oe_within", "ci_lower"], sev.oe * math.exp(-z * sev.oe_se), rel_tol=1e-12)
    assert (table["verdict"] != "not evaluable").all()
    assert ct.oe_test(sev, (0.8, 1.25)).ci_upper == ct.oe_test(res, (0.8, 1.25)).ci_upper
    # the margin test on ECE(t): the IPCW standard error (sigma1_U^2 / n + V_0) with the IPCW V_0 as its floor
    mt = res.margin_test(0.1)
    v0 = res.sigma0_sq / (res.n ** 2 * res.bin_volume)
    assert res.se ** 2 == pytest.approx(res.survival.sigma1_sq_unbiased / res.n + v0, rel=1e-12)
    se = math.sqrt(max(res.se ** 2, v0))
    assert math.isclose(mt.upper, math.sqrt(max(res.estimate, 0.0) + z * se), rel_tol=1e-12)
    assert "IPCW" in str(mt.summary())


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_report_formats_what_the_result_holds(censored, tmp_path):
    _, res = censored
    html = open(res.report(tmp_path / "surv.html"), encoding="utf-8").read()
    surv, sev = res.survival, res.evidence().survival
    assert "Follow-up and censoring at the horizon" in html
    for value in (surv.n_events, surv.n_censored, surv.n_event_free):
        assert f"<td>{fmt(value)}</td>" in html
    assert f"<td>{fmt(surv.median_followup, 4)}</td>" in html and f"<td>{fmt(surv.max_weight, 4)}</td>" in html
    assert "Kaplan–Meier of the censoring times" in html
    for observed in sev.groups["observed"]:
        assert f"<td>{fmt(observed, 4)}</td>" in html
    assert "Reliability diagram of risk at the horizon t = 5" in html
    assert "Greenwood-Nam-D&#39;Agostino" in html or "Greenwood-Nam-D'Agostino" in html
    assert "Bin sensitivity of" not in html  # no such table for IPCW rows
    assert "Survival outcomes are analysed at a horizon t" in html  # Methods
    assert "censoring is independent of the event time" in html  # Limitations
    binary = open(ct.calib_ci("y ~ p", data=ct.load_demo()).report(tmp_path / "b.html"), encoding="utf-8").read()
    assert "Survival outcomes are analysed" not in binary and "Follow-up and censoring" not in binary


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_report_of_an_uncensored_survival_result_says_the_outcome_is_binary(tmp_path):
    time, event, risk = simulate(600, 6, censoring=None)
    res = ct.calib_ci(time=time, event=event, probs=risk, horizon=HORIZON)
    html = open(res.report(tmp_path / "u.html"), encoding="utf-8").read()
    assert "the outcome 1{T ≤ t} is binary" in html and f"<td>{fmt(res.survival.n_events)}</td>" in html


def test_cli_ci_equals_the_python_call(censored, tmp_path, capsys):
    df, res = censored
    path = tmp_path / "surv.csv"
    df.to_csv(path, index=False)
    assert main(["ci", str(path), "--formula", "Surv(time, event) ~ risk", "--horizon", "5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    again = ct.calib_ci("Surv(time, event) ~ risk", data=pd.read_csv(path), horizon=5)
    expected = json.loads(json.dumps(again.to_dict()))
    for key in ("estimate", "se", "ci_lower", "ci_upper", "null_pvalue", "n_censored_before_horizon", "horizon"):
        assert out[key] == expected[key], key
    assert main(["ci", str(path), "--formula", "Surv(time, event) ~ risk", "--horizon", "5"]) == 0
    assert "O/E at t = 5" in capsys.readouterr().out
    cox = ["ci", str(path), "--formula", "Surv(time, event) ~ risk", "--horizon", "5", "--censoring", "cox",
           "--censoring-covariates", "risk", "--json"]
    assert main(cox) == 0
    by_cox = ct.calib_ci("Surv(time, event) ~ risk", data=pd.read_csv(path), horizon=5, censoring="cox",
                         censoring_covariates=["risk"])
    assert json.loads(capsys.readouterr().out)["se"] == by_cox.se


def test_cli_refuses_survival_where_it_does_not_apply(censored, tmp_path, capsys):
    df, _ = censored
    path = tmp_path / "surv.csv"
    df.to_csv(path, index=False)
    for argv in (["test", str(path), "--formula", "Surv(time, event) ~ risk"],
                 ["tcal", str(path), "--formula", "Surv(time, event) ~ risk"],
                 ["ci", str(path), "--formula", "event ~ risk", "--censoring", "cox"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("calibtest: error:") and err.count("\n") == 1 and "Traceback" not in err
    assert main(["report", str(path), "--formula", "Surv(time, event) ~ risk", "--horizon", "5", "--chunksize",
                 "100", "-o", str(tmp_path / "r.html")]) == 2
    assert "--horizon needs its rows" in capsys.readouterr().err


def test_cli_report_writes_the_survival_sections(censored, tmp_path, capsys):
    df, res = censored
    path = tmp_path / "surv.csv"
    df.to_csv(path, index=False)
    out = tmp_path / "r.html"
    assert main(["report", str(path), "--formula", "Surv(time, event) ~ risk", "--horizon", "5", "-o",
                 str(out)]) == 0
    html = out.read_text()
    assert "Follow-up and censoring at the horizon" in html and f"<td>{fmt(res.survival.n_censored)}</td>" in html


def _competing_risks_frame(n=1500, seed=3):
    rng = np.random.default_rng(seed)
    risk = rng.uniform(0.05, 0.5, n)
    t1 = rng.exponential(1 / (-np.log(1 - risk)))
    t2, c = rng.exponential(2.0, n), rng.exponential(3.0, n)
    time = np.minimum.reduce([t1, t2, c])
    status = np.select([t1 == time, t2 == time], [1, 2], 0)
    return pd.DataFrame({"time": time, "status": status, "risk": risk})


def test_cli_cause_equals_the_python_call(tmp_path, capsys):
    df = _competing_risks_frame()
    path = tmp_path / "cr.csv"
    df.to_csv(path, index=False)
    assert main(["ci", str(path), "--formula", "Surv(time, status) ~ risk", "--horizon", "1", "--cause", "1",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    res = ct.calib_ci("Surv(time, status) ~ risk", data=pd.read_csv(path), horizon=1, cause=1)
    assert out["estimate"] == pytest.approx(res.estimate, rel=1e-12)
    # without --cause a code 2 is an error that names the way out
    assert main(["ci", str(path), "--formula", "Surv(time, status) ~ risk", "--horizon", "1"]) != 0
    assert "--cause" in capsys.readouterr().err  # the flag, as the command line spells it
    # --cause without --horizon is refused in one line
    assert main(["ci", str(path), "--formula", "Surv(time, status) ~ risk", "--cause", "1"]) != 0
    assert "--horizon" in capsys.readouterr().err


def test_cli_sample_size_censored_fraction_equals_the_python_call(tmp_path, capsys):
    df = _competing_risks_frame()
    path = tmp_path / "p.csv"
    df.to_csv(path, index=False)
    assert main(["sample-size", str(path), "--formula", "~ risk", "--power", "0.8", "--slope", "0.8",
                 "--censored-fraction", "0.4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    res = ct.calib_sample_size(probs=df["risk"].to_numpy(), slope=0.8, power=0.8, censored_fraction=0.4)
    uncensored = ct.calib_sample_size(probs=df["risk"].to_numpy(), slope=0.8, power=0.8)
    assert out["n"] == res.n > uncensored.n


# ----------------------------------------------------------------------------- a survival study against its plan
def _page_text(path) -> str:
    """The report's visible text, one space between words."""
    import html as html_lib
    import re

    raw = open(path, encoding="utf-8").read()
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", raw)).split())


@pytest.fixture(scope="module")
def survival_plan(tmp_path_factory):
    """A small censored study (n = 343), a plan for a slope of 0.8 with 30% censoring, and its report."""
    folder = tmp_path_factory.mktemp("survival-plan")
    time, event, risk = simulate(343, 11)
    df = pd.DataFrame({"time": time, "event": event, "risk": risk})
    res = ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=HORIZON)
    probs = np.random.default_rng(1).uniform(0.05, 0.6, 3000)  # the development risks standing for the population
    ss = ct.calib_sample_size(probs=probs, slope=0.8, power=0.8, censored_fraction=0.3)
    ct.plan(folder / "plan.json", sample_size=ss)
    page = _page_text(ct.report(res, folder / "r.html", plan=folder / "plan.json"))  # the plan read from its file
    return {"df": df, "res": res, "probs": probs, "ss": ss, "plan": ct.AnalysisPlan.read(folder / "plan.json"),
            "text": page}


def test_plan_sentence_counts_the_events_by_the_horizon_not_the_ipcw_outcomes(survival_plan):
    df, res, text = survival_plan["df"], survival_plan["res"], survival_plan["text"]
    by_hand = int(((df["event"] == 1) & (df["time"] <= HORIZON)).sum())  # events at or before t, from the data
    assert res.censored and not math.isclose(res.data.y[:, 0].sum(), by_hand)  # the IPCW outcomes sum to another number
    ss = survival_plan["ss"]
    assert f"the study has n = 343 with {by_hand} events, {ss.n - 343} fewer" in text
    assert f"events by the horizon t; censored before t {fmt(343)}; {fmt(by_hand)};" in text  # the same count
    assert res.n_events == by_hand


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_weighted_binary_plan_sentence_counts_the_rows_with_y_1(tmp_path):
    demo = ct.load_demo()
    weights = np.random.default_rng(2).uniform(0.5, 2.0, len(demo))
    res = ct.calib_ci("y ~ p", data=demo, weights=weights)
    ct.plan(tmp_path / "plan.json", sample_size=ct.calib_sample_size(probs=demo["p"].to_numpy(), slope=0.8,
                                                                     power=0.8))
    text = _page_text(ct.report(res, tmp_path / "w.html", plan=tmp_path / "plan.json"))
    ones = int((demo["y"] == 1).sum())
    assert f"the study has n = {len(demo)} with {ones} events" in text and res.n_events == ones


def test_survival_plan_is_recomputed_with_its_censoring(survival_plan):
    from calibtest.inputs.plan import planned_curve, planned_vs_achieved, sample_size_rows

    ss, record, probs, text = survival_plan["ss"], survival_plan["plan"].sample_size, survival_plan["probs"], \
        survival_plan["text"]
    rows = dict(sample_size_rows(record))
    at_planned = planned_vs_achieved(record, ss.n)
    assert rows["Power at n"] == at_planned.value_text(at_planned.achieved_value) == f"{ss.achieved_power:.3f}"
    assert rows["Power at n"] == "0.800"
    direct = ct.calib_power(343, probs=probs, slope=0.8, censored_fraction=0.3).power  # from the original risks
    uncensored = ct.calib_power(343, probs=probs, slope=0.8).power
    assert f"{direct:.3f}" != f"{uncensored:.3f}"  # what the report printed before
    assert f"the power for the planned alternative is {direct:.3f} at n = 343" in text
    assert "0.05, IPCW asymptotic, analytic" in text and "conditional" not in rows["Alpha, null, method"]
    assert rows["Censoring (survival study)"].startswith("30% of the patients censored before the horizon")
    assert f"kappa = {ss.inputs.censoring['kappa']:.4g}" in rows["Censoring (survival study)"]
    # the report's engine is calib_power's, called with every input the plan stores
    from calibtest.inputs.plan import power_arguments

    args = power_arguments(record)
    assert args["censored_fraction"] == 0.3 and args["null"] == "asymptotic"
    assert ct.calib_power([343, ss.n], **args).power.tolist() == planned_curve(record, [343, ss.n])["power"].tolist()
    # a plan written before the survival null was recorded as such (it read "conditional") is recomputed the same
    legacy = {**record, "inputs": {**record["inputs"], "null": "conditional"}}
    assert planned_curve(legacy, [343, ss.n])["power"].tolist() == planned_curve(record, [343, ss.n])["power"].tolist()


def test_survival_sample_size_takes_the_ipcw_asymptotic_null_only(survival_plan):
    probs, ss = survival_plan["probs"], survival_plan["ss"]
    assert ss.inputs.null == "asymptotic"
    explicit = ct.calib_sample_size(probs=probs, slope=0.8, power=0.8, censored_fraction=0.3, null="asymptotic")
    assert (explicit.n, explicit.achieved_power) == (ss.n, ss.achieved_power)
    for null in ("conditional", "monte-carlo"):
        with pytest.raises(ValueError, match=f"null='{null}' with censored_fraction="):
            ct.calib_sample_size(probs=probs, slope=0.8, power=0.8, censored_fraction=0.3, null=null)


def test_survival_summaries_name_the_survival_target(censored):
    _, res = censored
    text = str(res.summary())
    assert f"Mode:              survival at the horizon t = {HORIZON:g}" in text
    assert "Binary mode" not in text and "Classes (K)" not in text
    assert f"Target:           survival at the horizon t = {HORIZON:g}" in str(res.margin_test(0.1).summary())
    assert "target" not in ct.calib_ci("y ~ p", data=ct.load_demo()).margin_test(0.1).to_dict()
    cr = ct.calib_ci("Surv(time, status) ~ risk", data=_competing_risks_frame(), horizon=1, cause=1)
    assert "survival at the horizon t = 1, cause 1" in str(cr.summary())
    binary = str(ct.calib_ci("y ~ p", data=ct.load_demo()).summary())
    assert "Binary mode measures" in binary  # the note stays where it applies


def test_survival_sample_size_summary_says_it_plans_censoring(survival_plan):
    ss = survival_plan["ss"]
    text = " ".join(str(ss.summary()).split())
    assert "Target: power 0.8 to reject H0: calibrated" in text
    assert "Outcome: survival at a horizon" in text and "Null: IPCW asymptotic" in text
    assert "Censoring: 30% of the patients censored before the horizon" in text
    plain = " ".join(str(ct.calib_sample_size(probs=survival_plan["probs"], slope=0.8, power=0.8).summary()).split())
    assert "Outcome: binary" in plain and "Censoring:" not in plain and "Null: conditional" in plain


@pytest.mark.parametrize("call", [
    lambda df: ct.calib_test("Surv(time, event) ~ risk", data=df, horizon=HORIZON),
    lambda df: ct.calib_test("Surv(time, event) ~ risk", data=df),
    lambda df: ct.calib_test("event ~ risk", data=df, horizon=HORIZON),
    lambda df: ct.evidence("Surv(time, event) ~ risk", data=df, horizon=HORIZON),
    lambda df: ct.evidence("Surv(time,event)~risk", data=df),
    lambda df: ct.tcal_test("Surv(time, event) ~ risk", data=df, horizon=HORIZON),
    lambda df: ct.tcal_test("Surv(time, event) ~ risk", data=df),
])
def test_label_tests_refuse_a_survival_outcome_with_the_cli_explanation(censored, call):
    from calibtest.options import OptionError

    df, _ = censored
    with pytest.raises(OptionError, match="draws or tests binary labels, which rows censored before the horizon do "
                                          r"not have: for a survival outcome use calib_ci\('Surv\(time, event\) ~ "
                                          r"risk', data=\.\.\., horizon=t\) \(the IPCW interval and test\)"):
        call(df)


def test_cli_and_python_refusals_share_the_explanation(censored, tmp_path, capsys):
    from calibtest.options import survival_refusal

    df, _ = censored
    path = tmp_path / "surv.csv"
    df.to_csv(path, index=False)
    assert main(["test", str(path), "--formula", "Surv(time, event) ~ risk"]) == 2
    err = capsys.readouterr().err
    with pytest.raises(ValueError) as python:
        ct.calib_test("Surv(time, event) ~ risk", data=df)
    common = str(survival_refusal("X", ci="A", report="B")).split("X", 1)[1].split("A")[0]
    assert common in err and common in str(python.value)


def test_report_of_survival_sites_pools_their_oe_citl_and_slope(tmp_path):
    """calib_ci(by=) with a survival outcome: the report's table of measures, its meta-analysis and its forest
    plots show each site's O/E, CITL and slope at t and their pooled values (none is left out), with CITL on
    its log cumulative hazard scale."""
    import matplotlib

    matplotlib.use("Agg")
    from pathlib import Path

    from report_helpers import tables

    df = pd.read_csv(Path(__file__).resolve().parents[1] / "reference" / "gbsg_sites.csv")
    grouped = ct.calib_ci("Surv(time, cens) ~ risk", data=df, horizon=1826.25, by="tgrade")
    html = open(ct.report(grouped, tmp_path / "sites.html"), encoding="utf-8").read()
    text = _page_text(tmp_path / "sites.html")
    assert "0 of the 3 sites" not in text and "not pooled" not in text
    shown = dict(tables(html))
    sites = next(rows for caption, rows in shown.items() if caption.startswith("Calibration of risk across"))
    meta = grouped.meta
    pooled_oe = meta.pooled["log_oe"].row(natural=True)
    by_measure = {row[0]: row for row in sites}
    assert by_measure["O/E"][2] == fmt(pooled_oe["estimate"], 4)
    assert by_measure["CITL (log cumulative hazard scale)"][2] == fmt(meta.pooled["citl"].estimate, 4)
    assert by_measure["Calibration slope"][2] == fmt(meta.pooled["slope"].estimate, 4)
    measures = next(rows for caption, rows in shown.items() if caption.startswith("Every subgroup of tgrade"))
    frame = grouped.to_frame()
    for row in measures[1:4]:
        assert row[6].startswith(fmt(frame.loc[row[0], "oe"], 4) + " [")
        assert row[4].startswith(fmt(frame.loc[row[0], "citl"], 4) + " [")
    assert "Crowson" in text and f"pooled O/E {fmt(pooled_oe['estimate'], 3)}" in text
    ax = grouped.plot_forest(measure="citl")
    assert ax.get_xlabel().startswith("CITL (log cumulative hazard scale)")
    assert meta.plot_forest("citl").get_xlabel().startswith("CITL (log cumulative hazard scale")


def test_acceptance_criteria_are_named_with_their_scale_at_the_horizon(censored, tmp_path):
    """CITL of a survival result censored before t is log(O/E) of the cumulative hazard at t: the acceptance
    table says so, and the binary names (logit scale) are not used."""
    _, res = censored
    plan = ct.plan(tmp_path / "p.json", acceptance={"citl_within": (-0.2, 0.2), "oe_within": (0.8, 1.25)})
    ev = res.acceptance(plan.acceptance, alpha=plan.alpha)
    quantity = dict(zip(ev.table["criterion"], ev.table["quantity"]))
    t = fmt(HORIZON)
    assert quantity["citl_within"].startswith(f"CITL at t = {t} (log(O/E) of the cumulative hazard")
    assert quantity["oe_within"].startswith(f"O/E at t = {t} (Kaplan–Meier risk by t")
    assert "logit" not in " ".join(quantity.values())
    html = ct.report(res, tmp_path / "r.html", plan=plan).read_text(encoding="utf-8")
    assert quantity["citl_within"] in html.replace("&#39;", "'")


def test_the_horizon_is_printed_with_its_unit(censored, tmp_path):
    from calibtest.options import OptionError, OptionTypeError
    from calibtest.reporting.html import render_html

    _, res = censored
    t = fmt(HORIZON)
    plain = render_html(res, figures=False)
    days = render_html(res, figures=False, horizon_unit="days")
    assert f"t = {t} days" not in plain and "days" not in plain
    # every "t = 5" of the plain report carries the unit, and nothing else changed in those places
    assert plain.count(f"t = {t}") == days.count(f"t = {t} days") > 3
    assert f"<td>{t} days</td>" in days  # the follow-up table's horizon
    path = ct.report(res, tmp_path / "r.html", horizon_unit="weeks")
    assert f"t = {t} weeks" in path.read_text(encoding="utf-8")
    for bad, error in ((7, OptionTypeError), (["days"], OptionTypeError), ("  ", OptionError)):
        with pytest.raises(error, match="horizon_unit"):
            render_html(res, figures=False, horizon_unit=bad)
    # a binary result has no horizon: the unit changes nothing there
    binary = ct.calib_ci("y ~ p", data=ct.load_demo())
    assert "days" not in render_html(binary, figures=False, horizon_unit="days")
