"""Acceptance criteria in the plan (issue 24 point 2) and planned versus achieved sample size (point 4).

Every verdict is checked against an independent computation: the margin test's bound from T, sigma1 and the
conditional variance by hand, CITL and slope from statsmodels' logistic fits, O/E from the counts, the power at
the achieved n from calib_power on the original predictions.
"""
import hashlib
import html as html_lib
import json
import re
from datetime import datetime, timezone

import numpy as np
import pytest
import statsmodels.formula.api as smf
from scipy.special import logit
from scipy.stats import norm

import calibtest as ct
from calibtest.checks.acceptance import evaluate_acceptance
from calibtest.inputs.plan import AnalysisPlan, decode_predictions, planned_vs_achieved, sample_size_record
from calibtest.cli import main
from calibtest.options import check_criteria

WHEN = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
CRITERIA = {"ece_below": 0.05, "citl_within": 0.2, "slope_within": (0.8, 1.25), "oe_within": (0.8, 1.25)}


# ----------------------------------------------------------------------------- data
@pytest.fixture(scope="module")
def fair():
    """The issue's study: statsmodels' fair data, a logistic model fitted on one half, validated on the other."""
    import statsmodels.api as sm

    d = sm.datasets.fair.load_pandas().data
    d["affair"] = (d["affairs"] > 0).astype(int)
    idx = np.random.default_rng(0).permutation(len(d))
    dev, val = d.iloc[idx[: len(d) // 2]], d.iloc[idx[len(d) // 2:]]
    fit = smf.logit("affair ~ rate_marriage + age + yrs_married + children + religious + educ + occupation",
                    dev).fit(disp=0)
    return {"p_dev": fit.predict(dev).to_numpy(), "p": fit.predict(val).to_numpy(), "y": val["affair"].to_numpy()}


@pytest.fixture(scope="module")
def fair_result(fair):
    return ct.calib_ci(y=fair["y"], probs=fair["p"], rng=1)


def _canonical_sha(fields: dict) -> str:
    body = {k: v for k, v in fields.items() if k != "sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ----------------------------------------------------------------------------- the plan
def test_acceptance_round_trip_python_and_cli_same_sha(tmp_path):
    path = tmp_path / "py.json"
    p = ct.plan(path, acceptance={"ece_below": 0.05, "slope_within": [0.8, 1.25]}, primary="ece_below",
                created=WHEN)
    fields = json.loads(path.read_text(encoding="utf-8"))
    assert fields["acceptance"] == {"ece_below": 0.05, "slope_within": [0.8, 1.25]}
    assert fields["primary"] == "ece_below"
    assert fields["sha256"] == _canonical_sha(fields) == p.sha256
    back = AnalysisPlan.read(path)
    assert back.sha256 == p.sha256 and back.acceptance == {"ece_below": 0.05, "slope_within": (0.8, 1.25)}
    assert back.primary == "ece_below"
    # the command line writes the same fields; with the same creation time, the same SHA-256
    cli = tmp_path / "cli.json"
    assert main(["plan", "-o", str(cli), "--accept", "ece_below=0.05", "--accept", "slope_within=0.8,1.25",
                 "--primary", "ece_below"]) == 0
    cli_fields = json.loads(cli.read_text(encoding="utf-8"))
    same_time = {**fields, "created": cli_fields["created"]}
    assert {k: v for k, v in cli_fields.items() if k != "sha256"} == {k: v for k, v in same_time.items()
                                                                      if k != "sha256"}
    assert cli_fields["sha256"] == _canonical_sha(same_time) == AnalysisPlan.read(cli).sha256
    # changing a limit changes the fingerprint, and the tampered file is refused
    fields["acceptance"]["ece_below"] = 0.06
    path.write_text(json.dumps(fields), encoding="utf-8")
    with pytest.raises(ValueError, match="does not match its content"):
        AnalysisPlan.read(path)


def test_a_plan_without_acceptance_keeps_its_fields_and_fingerprint(tmp_path):
    p = ct.plan(tmp_path / "p.json", created=WHEN)
    fields = json.loads((tmp_path / "p.json").read_text(encoding="utf-8"))
    assert "acceptance" not in fields and "primary" not in fields
    assert p.sha256 == _canonical_sha(fields)


def test_citl_single_limit_is_symmetric_and_criteria_are_checked():
    assert check_criteria({"citl_within": 0.2}) == {"citl_within": (-0.2, 0.2)}
    bad = [({"ece_below": 0}, "ece_below"), ({"ece_below": -0.1}, "ece_below"), ({"foo": 1}, "foo"),
           ({"slope_within": 1.0}, "slope_within"), ({"slope_within": (1.2, 0.8)}, "lower < upper"),
           ({"oe_within": (0, 1.2)}, "oe_within"), ({"ece_below": float("nan")}, "finite"), ({}, "at least one"),
           ({"ece_below": True}, "ece_below")]
    for criteria, word in bad:
        with pytest.raises((ValueError, TypeError), match=re.escape(word)):
            ct.plan("/dev/null", acceptance=criteria)
    with pytest.raises(ValueError, match="primary must be one of the acceptance criteria"):
        ct.plan("/dev/null", acceptance={"ece_below": 0.05}, primary="slope_within")
    with pytest.raises(ValueError, match="primary"):
        ct.plan("/dev/null", primary="ece_below")


@pytest.mark.parametrize("argv, word", [
    (["--accept", "ece_below=-1"], "ece_below"), (["--accept", "foo=1"], "unknown criteria"),
    (["--accept", "slope_within=1"], "pair"), (["--accept", "slope_within=a,b"], "two numbers"),
    (["--accept", "ece_below"], "KEY=VALUE"), (["--accept", "ece_below=0.05", "--accept", "ece_below=0.1"], "twice"),
    (["--accept", "ece_below=0.05", "--primary", "slope_within"], "primary"),
    (["--primary", "nonsense"], "invalid choice"),
])
def test_cli_bad_accept_values_give_one_line_errors(tmp_path, capsys, argv, word):
    with pytest.raises(SystemExit) as exc:
        code = main(["plan", "-o", str(tmp_path / "p.json"), *argv])
        raise SystemExit(code)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and word in lines[0], err
    assert not (tmp_path / "p.json").exists()


# ----------------------------------------------------------------------------- the verdicts
def _independent(fair, alpha):
    """CITL, slope (statsmodels) and O/E (counts), each with its (1 - 2 alpha) interval."""
    import statsmodels.api as sm

    y, p = fair["y"], fair["p"]
    lp = logit(p)
    z = norm.ppf(1 - alpha)
    citl = sm.GLM(y, np.ones((y.size, 1)), family=sm.families.Binomial(), offset=lp).fit()
    slope = sm.Logit(y, sm.add_constant(lp)).fit(disp=0)
    o, e = y.sum(), p.sum()
    se_log = np.sqrt((1 - o / y.size) / o)
    return {"citl_within": (citl.params[0], citl.params[0] - z * citl.bse[0], citl.params[0] + z * citl.bse[0]),
            "slope_within": (slope.params[1], slope.params[1] - z * slope.bse[1], slope.params[1] + z * slope.bse[1]),
            "oe_within": (o / e, o / e * np.exp(-z * se_log), o / e * np.exp(z * se_log))}


def _margin_upper(res, alpha):
    """The one-sided upper bound for ECE by hand: T+ + z se, se^2 = max(sigma1^2 / n, Var(T | Z))."""
    v0 = res.conditional.variance
    return np.sqrt(max(res.estimate, 0.0) + norm.ppf(1 - alpha) * np.sqrt(max(res.se ** 2, v0)))


def test_each_criterion_met_and_not_met_against_independent_computations(fair, fair_result):
    alpha = 0.05
    ind = _independent(fair, alpha)
    upper = _margin_upper(fair_result, alpha)
    # limits just inside and just outside each independent interval
    met = {"ece_below": upper * 1.01, **{k: (lo - 0.01, hi + 0.01) for k, (_, lo, hi) in ind.items()}}
    not_met = {"ece_below": upper * 0.99, **{k: (lo + 0.001, hi + 0.5) for k, (_, lo, hi) in ind.items()}}
    for criteria, verdict in ((met, "met"), (not_met, "not met")):
        ev = evaluate_acceptance(fair_result, criteria, alpha=alpha)
        t = ev.table.set_index("criterion")
        assert (t["verdict"] == verdict).all(), t[["verdict", "reason"]]
        assert t.loc["ece_below", "ci_upper"] == pytest.approx(upper, rel=1e-12)
        assert np.isnan(t.loc["ece_below", "ci_lower"])
        assert t.loc["ece_below", "estimate"] == pytest.approx(np.sqrt(max(fair_result.estimate, 0.0)), abs=1e-15)
        for key, (est, lo, hi) in ind.items():
            assert t.loc[key, "estimate"] == pytest.approx(est, rel=1e-6), key
            assert (t.loc[key, "ci_lower"], t.loc[key, "ci_upper"]) == pytest.approx((lo, hi), rel=1e-6), key
            assert 0 <= t.loc[key, "pvalue"] <= 1
            assert (t.loc[key, "pvalue"] < alpha) == (verdict == "met"), key
    ev = evaluate_acceptance(fair_result, met, alpha=alpha)
    assert ev.all_met
    assert ev.sentence == "The model meets all pre-specified acceptance criteria (4 of 4 met at alpha = 0.05)."


def test_not_evaluable_is_stated_and_counted():
    rng = np.random.default_rng(3)
    P = rng.dirichlet([2, 2, 2], 3000)
    y = (rng.random(3000)[:, None] > P.cumsum(axis=1)).sum(axis=1)
    top2 = ct.calib_ci(y=y, probs=P, k=2)
    ev = evaluate_acceptance(top2, {"ece_below": 0.5, "slope_within": (0.8, 1.25), "oe_within": (0.8, 1.25)},
                             primary="slope_within")
    t = ev.table.set_index("criterion")
    assert list(ev.table["criterion"]) == ["slope_within", "ece_below", "oe_within"]  # the primary first
    assert t.loc["slope_within", "verdict"] == "not evaluable" and "top-k" in t.loc["slope_within", "reason"]
    assert t.loc["oe_within", "verdict"] == "not evaluable" and "top-k" in t.loc["oe_within", "reason"]
    assert t.loc["ece_below", "verdict"] == ("met" if _margin_upper(top2, 0.05) < 0.5 else "not met")
    assert ev.sentence == ("The model does not meet all pre-specified acceptance criteria: calibration slope within "
                           "(0.8, 1.25) and O/E within (0.8, 1.25) could not be evaluated (1 of 3 met at alpha = "
                           "0.05); the primary criterion, calibration slope within (0.8, 1.25), could not be "
                           "evaluated.")
    assert not ev.all_met


def test_sentence_names_the_criteria_not_met(fair, fair_result):
    ind = _independent(fair, 0.05)
    lo = ind["slope_within"][1]
    ev = evaluate_acceptance(fair_result, {"ece_below": 1.0, "slope_within": (lo + 0.01, 2.0)}, primary="ece_below",
                             model="Model A")
    assert ev.sentence == (f"Model A does not meet all pre-specified acceptance criteria: it does not meet "
                           f"calibration slope within ({lo + 0.01:g}, 2) (1 of 2 met at alpha = 0.05); the primary "
                           f"criterion, ECE below 1, is met.")


# ----------------------------------------------------------------------------- the report
def _table_rows(page: str, caption_start: str) -> list[list[str]]:
    for table in re.findall(r"<table.*?</table>", page, flags=re.S):
        caption = re.search(r"<caption>(.*?)</caption>", table, flags=re.S)
        if caption and re.sub(r"<[^>]+>", "", caption.group(1)).split(". ", 1)[-1].startswith(caption_start):
            body = re.search(r"<tbody>(.*?)</tbody>", table, flags=re.S).group(1)
            return [[html_lib.unescape(re.sub(r"\s+", " ", c).strip()) for c in re.findall(r"<td>(.*?)</td>", r,
                                                                                              flags=re.S)]
                    for r in re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)]
    raise AssertionError(f"no table {caption_start!r}")


def _text(page: str) -> str:
    return html_lib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


@pytest.fixture(scope="module")
def fair_report(fair, fair_result, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("acc")
    ss = ct.calib_sample_size(probs=fair["p_dev"], margin=0.0405, power=0.8)
    plan_path = tmp / "plan.json"
    ct.plan(plan_path, sample_size=ss, acceptance=CRITERIA, primary="ece_below", created=WHEN)
    out = ct.report(fair_result, tmp / "r.html", plan=plan_path)
    return {"ss": ss, "plan": AnalysisPlan.read(plan_path), "plan_path": plan_path,
            "html": out.read_text(encoding="utf-8")}


def test_report_opens_with_the_acceptance_table(fair_result, fair_report):
    page = fair_report["html"]
    assert page.index('id="acceptance"') < page.index('id="summary"') < page.index('id="analysis-plan"')
    rows = _table_rows(page, "Acceptance criteria of the analysis plan")
    ev = evaluate_acceptance(fair_result, CRITERIA, alpha=0.05, primary="ece_below")
    t = ev.table
    assert [r[0] for r in rows] == ["ECE (probability units) (primary)",
                                    "CITL (logit scale: intercept of the logistic model with offset logit(p))",
                                    "Calibration slope (coefficient of logit(p) in the logistic model)",
                                    "O/E (observed over expected events, a ratio)"]  # each named with its scale
    assert [r[1] for r in rows] == ["< 0.05", "within (-0.2, 0.2)", "within (0.8, 1.25)", "within (0.8, 1.25)"]
    assert [r[4] for r in rows] == ["margin_test", "citl_test", "slope_test", "oe_test"]
    for row, (_, expect) in zip(rows, t.iterrows()):
        assert float(row[2].split()[0]) == pytest.approx(expect["estimate"], rel=5e-4, abs=5e-5)
        if expect["criterion"] == "ece_below":
            assert row[2].endswith("(T ≤ 0)") == (fair_result.estimate <= 0)
        bounds = [float(v) for v in re.findall(r"-?\d+\.?\d*(?:e-?\d+)?", row[3].split("(")[0])]
        expected = [expect["ci_upper"]] if expect["criterion"] == "ece_below" else [expect["ci_lower"],
                                                                                  expect["ci_upper"]]
        assert bounds == pytest.approx(expected, rel=5e-4)
        assert float(row[5]) == pytest.approx(expect["pvalue"], rel=5e-4)
        assert row[6] == expect["verdict"]
    text = _text(page)
    summary = text[text.index("Summary of findings", text.index("Acceptance criteria of")):]
    assert ev.sentence in summary.split("Model and data")[0]
    assert text.count(ev.sentence) == 2  # under the table and once in the Summary of findings


def test_report_states_a_criterion_that_is_not_evaluable(tmp_path):
    rng = np.random.default_rng(4)
    P = rng.dirichlet([2, 2, 2], 2000)
    y = (rng.random(2000)[:, None] > P.cumsum(axis=1)).sum(axis=1)
    res = ct.calib_ci(y=y, probs=P, k=2)
    ct.plan(tmp_path / "p.json", k=2, acceptance={"ece_below": 0.5, "slope_within": (0.8, 1.25)}, created=WHEN)
    page = ct.report(res, tmp_path / "r.html", plan=tmp_path / "p.json").read_text(encoding="utf-8")
    rows = _table_rows(page, "Acceptance criteria of the analysis plan")
    assert rows[1][0] == res.kind.acceptance_quantity("slope_within") and rows[1][2] == "—"
    assert rows[1][0].startswith("Calibration slope (")
    assert rows[1][6].startswith("not evaluable: the calibration slope is defined for a binary outcome")
    assert "could not be evaluated" in _text(page)


# ----------------------------------------------------------------------------- planned versus achieved
def test_plan_keeps_a_short_sample_size_record(fair, fair_report):
    plan, ss = fair_report["plan"], fair_report["ss"]
    record = plan.sample_size
    assert "curve" not in record and record["n"] == ss.n and record["n_bins"] == ss.n_bins
    assert record["achieved_power"] == ss.achieved_power and record["margin"] == 0.0405
    stored = decode_predictions(record["predictions"])
    assert stored.size == fair["p_dev"].size
    assert np.abs(np.sort(fair["p_dev"]) - stored).max() <= 5e-7  # rounded to 1e-6
    assert fair_report["plan_path"].stat().st_size < 12_000
    assert len(repr(plan)) < 300 and "sample_size=n" in repr(plan)
    page = plan._repr_html_()
    assert "SHA-256" in page and "Planned n" in page and "analytic, analytic" not in page
    # the stored inputs give the plan's own power back at the planned n
    again = planned_vs_achieved(record, ss.n)
    assert again.achieved_value == pytest.approx(ss.achieved_power, abs=1e-4)


def test_report_compares_planned_and_achieved_n(fair, fair_result, fair_report):
    ss, page = fair_report["ss"], fair_report["html"]
    n = fair_result.n
    assert ss.n > n == 3183
    power = ct.calib_power(n, probs=fair["p_dev"], margin=0.0405).power  # independently, from the original sample
    exact = ct.calib_power(n, probs=decode_predictions(fair_report["plan"].sample_size["predictions"]),
                           margin=0.0405).power
    pva = planned_vs_achieved(fair_report["plan"].sample_size, n, events=fair["y"].sum())
    assert pva.achieved_value == pytest.approx(exact, abs=1e-12)
    assert pva.achieved_value == pytest.approx(power, abs=1e-3)
    text = _text(page)
    assert (f"The plan asked for n = {ss.n}; the study has n = 3183 with 1031 events, {ss.n - 3183} fewer; the "
            f"power for the planned alternative is {power:.3f} at n = 3183") in text
    deviations = _table_rows(page, "Deviations of the analysis from the pre-specified plan")
    assert deviations == [["probs", "sample size (sample_size)", f"n = {ss.n} (power {ss.achieved_power:.3f})",
                           "n = 3183", f"{ss.n - 3183} rows short: power {power:.3f} at n = 3183 for the planned "
                           "alternative; reason: not stated"]]
    assert "deviated from the pre-specified plan" in text and "in 1 option" in text
    rows = dict(map(tuple, _table_rows(page, "The sample-size calculation of the analysis plan")))
    assert rows["Planned n"] == str(ss.n) and rows["Power at n"] == f"{ss.achieved_power:.3f}"
    assert rows["Anticipated calibration"] == "calibrated (intercept 0, slope 1)"
    assert "Power curve" not in rows and len(rows) <= 10
    assert "The power of the plan's sample-size calculation against n" in text  # the curve as a figure


def test_no_shortfall_no_deviation_and_a_dict_calculation_is_stated(fair, fair_result, tmp_path):
    ss = ct.calib_sample_size(probs=fair["p_dev"], margin=0.06, power=0.8)
    assert ss.n <= fair_result.n
    ct.plan(tmp_path / "p.json", sample_size=ss, created=WHEN)
    page = ct.report(fair_result, tmp_path / "r.html", plan=tmp_path / "p.json").read_text(encoding="utf-8")
    assert "The analysis followed the pre-specified plan" in _text(page)
    # a calculation given as its to_dict() (as `calibtest sample-size --json` prints it): no predictions kept
    big = ct.calib_sample_size(probs=fair["p_dev"], margin=0.0405, power=0.8)
    ct.plan(tmp_path / "d.json", sample_size=big.to_dict(), created=WHEN)
    assert "curve" not in json.loads((tmp_path / "d.json").read_text())["sample_size"]
    page = ct.report(fair_result, tmp_path / "d.html", plan=tmp_path / "d.json").read_text(encoding="utf-8")
    assert "power at n = 3183 was not recomputed: the plan does not hold the predictions" in _text(page)


@pytest.mark.parametrize("kwargs", [dict(ci_width=0.04), dict(power=0.8, slope=0.8, n_classes=3, n_bins=12)])
def test_width_targets_and_top1_columns_recompute_as_calib_power(kwargs):
    """The stored inputs reproduce calib_power at another n: a width target's expected width, a top-1 column."""
    rng = np.random.default_rng(7)
    probs = rng.uniform(1 / 3, 0.95, 1500) if "n_classes" in kwargs else rng.beta(2, 5, 1500)
    ss = ct.calib_sample_size(probs=probs, **kwargs)
    record = json.loads(json.dumps(sample_size_record(ss)))  # as read back from the file
    n = max(ss.n // 2, 60)
    stored = decode_predictions(record["predictions"])
    power_kw = {k: v for k, v in kwargs.items() if k not in ("power", "ci_width")}
    expect = ct.calib_power(n, probs=stored, **power_kw)
    got = planned_vs_achieved(record, n)
    assert got.shortfall and got.planned_n == ss.n
    if "ci_width" in kwargs:
        assert got.quantity == "expected width" and got.achieved_value == pytest.approx(expect.expected_width,
                                                                                        abs=1e-12)
    else:
        assert got.quantity == "power" and got.achieved_value == pytest.approx(expect.power, abs=1e-12)
        assert got.achieved_value == pytest.approx(ct.calib_power(n, probs=probs, **power_kw).power, abs=1e-3)


def test_a_stated_reason_for_the_shortfall(fair_result, fair_report, tmp_path):
    page = ct.report(fair_result, tmp_path / "r.html", plan=fair_report["plan_path"],
                     deviation_reasons={"sample_size": "recruitment stopped early"}).read_text(encoding="utf-8")
    row = _table_rows(page, "Deviations of the analysis from the pre-specified plan")[0]
    assert row[4].endswith("for the planned alternative; reason: recruitment stopped early")
    assert "each with the reason given" in _text(page)


def test_result_acceptance_is_evaluate_acceptance_computed_once():
    """res.acceptance(...) is evaluate_acceptance on the result, kept once computed (the report reads it)."""
    import pandas as pd

    from calibtest.checks.acceptance import evaluate_acceptance

    res = ct.calib_ci("y ~ p", data=ct.load_demo())
    criteria = {"ece_below": 0.05, "slope_within": (0.8, 1.25)}
    first = res.acceptance(criteria, alpha=0.05, primary="ece_below")
    assert first is res.acceptance(dict(criteria), alpha=0.05, primary="ece_below")
    direct = evaluate_acceptance(res, criteria, alpha=0.05, primary="ece_below")
    pd.testing.assert_frame_equal(first.table, direct.table)
    assert first.sentence == direct.sentence
