"""calibtest.evidence: the evidence table, bin sensitivity and the conclusion rules."""
import json

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

import calibtest as ct
from calibtest.checks.evidence_table import conclude


def _beta_data(seed, power, n=472):
    g = np.random.default_rng(seed)
    p = g.beta(2, 5, n)
    return (g.random(n) < p).astype(int), p ** power


@pytest.fixture(scope="module")
def squared():
    y, q = _beta_data(2024, 2.0)
    return y, q, ct.evidence("y ~ q", data=pd.DataFrame({"y": y, "q": q}), rng=1)


@pytest.fixture(scope="module")
def calibrated():
    y, p = _beta_data(2024, 1.0)
    return y, p, ct.evidence(y=y, probs=p, rng=1)


@pytest.fixture(scope="module")
def smooth():  # mild smooth miscalibration: q = p^1.3
    y, q = _beta_data(1, 1.3)
    return y, q, ct.evidence(y=y, probs=q, rng=1)


@pytest.fixture(scope="module")
def hl_sparse():  # calibrated, tiny probabilities: HL groups with expected counts below 5
    g = np.random.default_rng(38)
    q = g.uniform(0.002, 0.03, 600)
    y = (g.random(600) < q).astype(int)
    return y, q, ct.evidence(y=y, probs=q, rng=1)


@pytest.fixture(scope="module")
def spread():  # over-confident, level right: q = expit(1.8 L), true expit(L)
    g = np.random.default_rng(0)
    L = g.normal(0, 1.2, 472)
    y = (g.random(472) < expit(L)).astype(int)
    return y, expit(1.8 * L), ct.evidence(y=y, probs=expit(1.8 * L), rng=1)


@pytest.fixture(scope="module")
def level():  # predictions too low on the log-odds scale by 0.5
    g = np.random.default_rng(0)
    L = g.normal(-1, 1, 472)
    y = (g.random(472) < expit(L + 0.5)).astype(int)
    return y, expit(L), ct.evidence(y=y, probs=expit(L), rng=1)


def test_squared_predictions_evidence(squared):
    _, _, ev = squared
    assert ev.table.loc["calib_test", "reject"]
    assert ev.verdict == "evidence"
    assert ev.conclusion().startswith("Evidence of miscalibration")
    assert "multi-scale test rejects" in ev.conclusion()
    first = ev.conclusion().split("; how much: ")  # whether and how much in one sentence
    assert len(first) == 2 and "interval for ECE^2" in first[1].split(". ")[0]


def test_calibrated_no_evidence_and_upper_bound(calibrated):
    _, _, ev = calibrated
    assert ev.verdict == "no evidence"
    assert not any(ev.table["reject"])
    assert ev.conclusion().startswith("No evidence of miscalibration")
    assert "does not show that the model is calibrated" in ev.conclusion()
    upper = ev.table.loc["calib_ci", "upper"]
    # a bound at a confidence level, not a certainty
    assert f"the upper confidence limit (one-sided 97.5%) for ECE^2 is {ct.display.format.fmt(upper, 4)}" in ev.conclusion()
    assert "at most" not in ev.conclusion()
    assert ev.reasons == ()


def test_rule_smooth(smooth):
    _, _, ev = smooth
    assert "smooth" in ev.reasons
    assert ev.table.loc["calib_test", "reject"] and not ev.table.loc["calib_ci", "reject"]
    assert "the miscalibration is smooth and the interval's B = 35 is large for n = 472" in ev.conclusion()


def test_rule_bins(smooth):
    _, _, ev = smooth
    assert ev.sensitivity_flag and "bins" in ev.reasons
    assert ev.sensitivity["reject"].nunique() == 2
    assert "depends on the bin count" in ev.conclusion()
    assert "The verdict changes with B." in str(ev.summary())
    open_rows = ev.sensitivity[ev.sensitivity["lower_open"]]  # 0 excluded, lower bound at 0: (0, upper]
    assert all(open_rows["reject"]) and all("(0, " in str(ev.summary()) for _ in open_rows.index)


def test_rule_hl_sparse(hl_sparse):
    _, _, ev = hl_sparse
    assert ev.reasons == ("hl_sparse",)
    assert ev.verdict == "mixed"
    t = ev.hl.table
    assert (np.minimum(t["expected"], t["n"] - t["expected"]) < 5).any()
    assert "driven by groups with tiny expected counts" in ev.conclusion()


def test_rule_spread(spread):
    _, _, ev = spread
    assert "spread" in ev.reasons
    assert ev.table.loc["slope", "reject"] and not ev.table.loc["citl", "reject"]
    assert "the slope detects spread (over-confidence), not level" in ev.conclusion()
    assert "Direction: the predictions are too extreme (slope = " in ev.conclusion()


def test_rule_level(level):
    _, _, ev = level
    assert "level" in ev.reasons and "spread" not in ev.reasons
    assert "off in level, not in spread" in ev.conclusion()
    assert "Direction: the predictions are too low on average (CITL = " in ev.conclusion()


def test_rules_do_not_fire_on_squared(squared):
    _, _, ev = squared
    assert "hl_sparse" not in ev.reasons and "smooth" not in ev.reasons


@pytest.mark.parametrize("name", ["squared", "smooth", "hl_sparse"])
def test_numbers_equal_direct_calls(name, request):
    y, q, ev = request.getfixturevalue(name)
    t = ev.table
    test = ct.calib_test(y=y, probs=q, rng=1)
    assert t.loc["calib_test", "statistic"] == test.statistic
    assert t.loc["calib_test", "pvalue"] == test.pvalue
    assert t.loc["calib_test", "reject"] == test.reject
    ci = ct.calib_ci(y=y, probs=q, null="conditional", rng=1)
    iv = ci.conf_int()
    assert t.loc["calib_ci", "statistic"] == ci.estimate
    assert (t.loc["calib_ci", "lower"], t.loc["calib_ci", "upper"]) == (iv.lower, iv.upper)
    assert t.loc["calib_ci", "reject"] == (not iv.contains_zero)
    hl = ct.hosmer_lemeshow(y=y, probs=q, validation="external")
    assert hl.df == 10
    assert (t.loc["hosmer_lemeshow", "statistic"], t.loc["hosmer_lemeshow", "pvalue"]) == (hl.statistic, hl.pvalue)
    vp = ct.val_prob(y=y, probs=q)
    cis = vp.conf_int(0.05)
    assert (t.loc["spiegelhalter", "statistic"], t.loc["spiegelhalter", "pvalue"]) == \
        (vp.spiegelhalter_z, vp.spiegelhalter_p)
    assert t.loc["citl", "statistic"] == vp.citl
    assert (t.loc["citl", "lower"], t.loc["citl", "upper"]) == tuple(cis.loc["citl"])
    assert t.loc["slope", "statistic"] == vp.slope
    assert (t.loc["slope", "lower"], t.loc["slope", "upper"]) == tuple(cis.loc["slope"])
    assert t.loc["slope", "reject"] == (not cis.loc["slope", "lower"] <= 1 <= cis.loc["slope", "upper"])
    for _, row in ev.sensitivity.iterrows():
        r = ct.calib_ci(y=y, probs=q, n_bins=int(row["n_bins"]), null="conditional", rng=1)
        civ = r.conf_int()
        assert (row["T"], row["lower"], row["upper"], row["lower_open"], row["pvalue"]) == \
            (r.estimate, civ.lower, civ.upper, civ.lower_open, r.null_pvalue)
        assert row["reject"] == (r.null_pvalue <= 0.05)
    assert ev.sensitivity["n_bins"].tolist() == [b for b in (5, 10, 20, 35) if b < ci.n_bins] + [ci.n_bins]


def test_verdict_words(squared, calibrated):
    for _, _, ev in (squared, calibrated):
        for key, row in ev.table.iterrows():
            if key == "calib_ci":
                assert row["verdict"] == ("excludes 0" if row["reject"] else "contains 0")
            else:
                assert row["verdict"] == ("rejects" if row["reject"] else "does not reject")


@pytest.mark.parametrize("name", ["squared", "calibrated", "smooth", "hl_sparse", "spread"])
def test_summary_width_and_dict(name, request):
    _, _, ev = request.getfixturevalue(name)
    lines = str(ev.summary()).splitlines()
    assert len({len(ln) for ln in lines}) == 1 and len(lines[0]) <= 80
    text = "\n".join(lines)
    for word in ("multi-scale test", "Hosmer-Lemeshow", "Spiegelhalter", "CITL", "slope", "Conclusion"):
        assert word in text
    d = ev.to_dict()
    json.dumps(d)
    assert d["verdict"] == ev.verdict and d["calib_test_pvalue"] == ev.table.loc["calib_test", "pvalue"]
    assert "<table" in ev._repr_html_()
    assert repr(ev).startswith("<EvidenceResult ") and "\n" not in repr(ev)


def test_frozen_and_alpha(calibrated):
    _, _, ev = calibrated
    with pytest.raises(Exception):
        ev.verdict = "x"
    with pytest.raises(ValueError):
        ev.summary(alpha=0.1)
    assert str(ev.summary(alpha=0.05)) == str(ev.summary())


def test_top1_and_errors():
    g = np.random.default_rng(3)
    conf = g.uniform(1 / 3, 1, 300)
    correct = (g.random(300) < conf).astype(int)
    ev = ct.evidence(y=correct, probs=conf, n_classes=3, rng=2)
    assert ev.mode == "top1" and ev.n_classes == 3
    assert ev.table.loc["calib_test", "pvalue"] == ct.calib_test(y=correct, probs=conf, n_classes=3,
                                                                  rng=2).pvalue
    with pytest.raises(ValueError):
        ct.evidence(y=correct, probs=conf, alpha=2)
    with pytest.raises(ValueError, match="null"):
        ct.evidence(y=correct, probs=conf, null="bootstrap")


def test_missing_drop():
    y, q = _beta_data(5, 1.0, n=200)
    q = q.copy()
    q[:3] = np.nan
    with pytest.raises(ValueError):
        ct.evidence(y=y, probs=q, rng=1)
    ev = ct.evidence(y=y, probs=q, rng=1, missing="drop")
    assert ev.n == 197 and ev.n_dropped == 3
    assert "3 rows with missing values" in str(ev.summary())


def test_exported():
    assert "evidence" in ct.__all__ and "EvidenceResult" in ct.__all__
    assert isinstance(ct.evidence(y=[0, 1, 1, 0, 1] * 20, probs=[0.3, 0.6, 0.7, 0.4, 0.35] * 20, rng=1),
                      ct.EvidenceResult)


# --------------------------------------------------------------------------- evidence of a result
def _assert_rows_equal_direct_calls(ev, res, y, q, seed, null):
    t = ev.table
    test = ct.calib_test(y=y, probs=q, rng=seed)
    assert ev.seed == seed
    assert (t.loc["calib_test", "statistic"], t.loc["calib_test", "pvalue"]) == (test.statistic, test.pvalue)
    iv = res.conf_int()
    assert (t.loc["calib_ci", "lower"], t.loc["calib_ci", "upper"]) == (iv.lower, iv.upper)
    assert t.loc["calib_ci", "pvalue"] == res.null_pvalue and t.loc["calib_ci", "statistic"] == res.estimate
    hl = ct.hosmer_lemeshow(y=y, probs=q, validation="external")
    assert (t.loc["hosmer_lemeshow", "statistic"], t.loc["hosmer_lemeshow", "pvalue"]) == (hl.statistic, hl.pvalue)
    vp = ct.val_prob(y=y, probs=q)
    assert (t.loc["spiegelhalter", "statistic"], t.loc["citl", "statistic"], t.loc["slope", "statistic"]) == \
        (vp.spiegelhalter_z, vp.citl, vp.slope)
    for _, row in ev.sensitivity.iterrows():
        r = ct.calib_ci(y=y, probs=q, n_bins=int(row["n_bins"]), null=null, rng=seed)
        civ = r.conf_int()
        assert (row["T"], row["lower"], row["upper"], row["lower_open"], row["pvalue"]) == \
            (r.estimate, civ.lower, civ.upper, civ.lower_open, r.null_pvalue)


@pytest.mark.parametrize("null", ["asymptotic", "conditional", "monte-carlo"])
def test_result_evidence_equals_direct_calls_and_is_deterministic(null):
    y, q = _beta_data(7, 1.4, n=300)
    res = ct.calib_ci(y=y, probs=q, null=null, rng=9)
    ev = res.evidence()
    _assert_rows_equal_direct_calls(ev, res, y, q, 9, null)
    again = res.evidence()
    pd.testing.assert_frame_equal(ev.table, again.table)
    pd.testing.assert_frame_equal(ev.sensitivity, again.sensitivity)
    assert ev.conclusion() == again.conclusion() and ev.null == null


def test_result_evidence_seed_without_rng():
    y, q = _beta_data(8, 1.0, n=200)
    res = ct.calib_ci(y=y, probs=q, null="asymptotic")
    ev = res.evidence()
    assert ev.seed == 0  # nothing drawn, nothing recorded: the fixed seed
    assert ev.table.loc["calib_test", "pvalue"] == ct.calib_test(y=y, probs=q, rng=0).pvalue
    mc = ct.calib_ci(y=y, probs=q, null="monte-carlo")
    assert mc.evidence().seed == mc.monte_carlo.seed
    assert mc.evidence(rng=5).table.loc["calib_test", "pvalue"] == ct.calib_test(y=y, probs=q, rng=5).pvalue


def test_result_evidence_at_another_alpha():
    y, q = _beta_data(1, 1.3)
    res = ct.calib_ci(y=y, probs=q, null="conditional", rng=1)
    ev = res.evidence(alpha=0.2)
    iv = res.conf_int(0.2)
    assert ev.alpha == 0.2 and (ev.table.loc["calib_ci", "lower"], ev.table.loc["calib_ci", "upper"]) == \
        (iv.lower, iv.upper)
    assert ev.table.loc["calib_test", "reject"] == (ev.table.loc["calib_test", "pvalue"] <= 0.2)
    assert "level 0.2" in ev.conclusion() and "80% interval" in ev.conclusion()


def test_squared_predictions_of_a_logistic_model():
    """The case of a user who squared a logistic model's predictions (n = 472 held-out patients)."""
    import statsmodels.api as sm
    g = np.random.default_rng(472)
    beta = np.array([-1.0, 0.9, -0.7, 0.5])

    def cohort(n):
        X = sm.add_constant(g.normal(size=(n, 3)))
        return X, (g.random(n) < expit(X @ beta)).astype(int)
    X_dev, y_dev = cohort(2000)
    fit = sm.Logit(y_dev, X_dev).fit(disp=0)
    X_val, y_val = cohort(472)
    q = fit.predict(X_val) ** 2
    res = ct.calib_ci(y=y_val, probs=q)
    ev = res.evidence()
    assert ev.table.loc["calib_test", "reject"]
    assert ev.verdict == "evidence" and ev.conclusion().startswith("Evidence of miscalibration")
    assert "no evidence" not in ev.conclusion().lower()
    # the calibration slope and CITL see it too: squaring makes predictions too low and too spread
    assert ev.valprob.citl > 0 and ev.table.loc["citl", "reject"]
    text = str(res.summary())
    assert text.index("multi-scale test") < text.index("Conclusion: Evidence of miscalibration") \
        < text.index("No. observations:")


def test_interval_without_zero_exclusion_is_explained_as_smooth(smooth):
    """Multi-scale test rejects, the B = 35 interval contains 0: the conclusion says evidence, and why."""
    y, q, _ = smooth
    res = ct.calib_ci(y=y, probs=q, null="conditional", rng=1)
    ev = res.evidence()
    assert res.contains_zero and ev.table.loc["calib_test", "reject"]
    assert ev.verdict == "evidence" and "smooth" in ev.reasons
    assert not ev.conclusion().startswith("No evidence")


@pytest.mark.parametrize("k", [2, "full"])
def test_multiclass_evidence_has_the_rows_that_apply(k):
    g = np.random.default_rng(11)
    P = g.dirichlet(np.ones(3), 300)
    labels = (g.random(300)[:, None] > np.cumsum(P, axis=1)).sum(axis=1)
    res = ct.calib_ci(y=labels, probs=P, k=k, rng=3)
    ev = res.evidence()
    assert list(ev.table.index) == ["calib_test", "calib_ci"] and ev.hl is None and ev.valprob is None
    assert "apply to one probability column" in ev.scope
    assert ev.table.loc["calib_test", "pvalue"] == ct.calib_test(y=labels, probs=P, k=k, rng=3).pvalue
    text = " ".join(str(res.summary()).split())  # notes wrap: compare with single spaces
    assert "multi-scale test" in text and "apply to one probability column" in text
    json.dumps(ev.to_dict())


def test_bin_sums_result_has_no_evidence():
    # a BinAccumulator keeps only bin sums (a file's or Dask frame's result reads its rows again:
    # tests/streams/test_evidence.py)
    y, q = _beta_data(3, 1.0, n=150)
    acc = ct.BinAccumulator("y ~ q", n_bins=40).update(pd.DataFrame({"y": y, "q": q}))
    res = acc.result()
    assert res.data is None and res.stream is None
    with pytest.raises(ValueError, match="holds only bin sums"):
        res.evidence()
    text = " ".join(str(res.summary()).split())
    assert "holds only bin sums" in text and "B = 5 " not in text
    assert "Conclusion: " + conclude(res)[1] in text and "multi-scale" not in conclude(res)[1]


def test_rule_logit_linear():
    """CITL rejects, the multi-scale test does not: mixed, explained by the tests' shapes."""
    g = np.random.default_rng(1)
    L = g.normal(-0.5, 1, 300)
    y = (g.random(300) < expit(L + 0.35)).astype(int)
    ev = ct.evidence(y=y, probs=expit(L), rng=1)
    assert not ev.table.loc["calib_test", "reject"] and ev.table.loc["citl", "reject"]
    assert ev.verdict == "mixed" and "logit_linear" in ev.reasons
    assert ev.conclusion().startswith("Mixed evidence") and "CITL rejects" in ev.conclusion()
    assert f"level a0 = {ct.display.format.fmt(ev.valprob.citl, 3)}" in ev.conclusion()


def test_evidence_exists_when_val_prob_cannot_be_computed():
    """Every label 1 (predictions near 1): val_prob's fits are undefined; the other rows remain, and it is said."""
    res = ct.calib_ci(y=np.ones(40, int), probs=np.full(40, 0.9999), null="conditional", n_bins=2, rng=3)
    ev = res.evidence()
    assert list(ev.table.index) == ["calib_test", "calib_ci", "hosmer_lemeshow"] and ev.valprob is None
    with pytest.raises(ValueError, match="both 0 and 1"):
        ct.val_prob(y=np.ones(40), probs=np.full(40, 0.9999))
    assert "val_prob (Spiegelhalter, CITL, slope) was not computed" in ev.scope
    assert ev.verdict == "no evidence"
    assert "was not computed" in " ".join(str(res.summary()).split())


def test_resampling_interval_does_not_decide_the_interval_row():
    """A percentile bootstrap interval of T excludes 0 on calibrated data; the row's test is the null's."""
    y, p = _beta_data(1, 1.0, n=300)
    res = ct.calib_ci(y=y, probs=p, method="bootstrap", n_resamples=200, rng=4)
    ev = res.evidence()
    row = ev.table.loc["calib_ci"]
    assert (row["lower"], row["upper"]) == tuple(res.conf_int())
    assert row["reject"] == (res.null_pvalue <= 0.05) and row["verdict"] in ("rejects", "does not reject")
    assert "bootstrap interval does not decide it" in row["null"]
    assert ev.seed == 4


def test_smooth_rule_names_spiegelhalter_when_it_is_the_strongest_component():
    """Slope 0.7 at n = 400: |z_S| exceeds every z_B; the rule and the row's null say so."""
    g = np.random.default_rng(4)
    q = g.beta(2, 5, 400)
    y = (g.random(400) < expit(0.7 * np.log(q / (1 - q)))).astype(int)
    ev = ct.evidence(y=y, probs=q, rng=1)
    zs = ct.val_prob(y=y, probs=q).spiegelhalter_z  # the classical z, computed independently of calib_test
    assert ev.test.spiegelhalter_z == pytest.approx(zs, rel=1e-10)
    assert abs(zs) > ev.test.scales["z"].max() and ev.table.loc["calib_test", "reject"]
    assert "smooth" in ev.reasons
    assert f"strongest component is Spiegelhalter's z, |z_S| = {abs(zs):.3g}" in ev.conclusion()
    assert "Spiegelhalter's z (statistic: max of z_B and |z_S|)" in ev.table.loc["calib_test", "null"]
    assert ev.table.loc["calib_test", "statistic"] == pytest.approx(abs(zs), rel=1e-10)


def test_rule_hl_sparse_not_when_the_interval_rejects(hl_sparse):
    """'HL rejects but the other tests do not' is not said when the interval excludes 0 (it rejects too)."""
    from calibtest.checks.evidence_table import _conclude

    _, _, ev = hl_sparse
    table = ev.table.copy()
    args = (ev.sensitivity, ev.sensitivity_flag, ev.test, ev.interval, ev.hl, ev.valprob, ev.alpha)
    assert "hl_sparse" in _conclude(table, *args)[2]
    table.loc["calib_ci", "reject"] = True
    verdict, conclusion, reasons = _conclude(table, *args)
    assert "hl_sparse" not in reasons and "the other tests do not" not in conclusion
    assert verdict == "mixed"


def _direction_case(transform, n=4000, seed=3):
    rng = np.random.default_rng(seed)
    p_true = rng.uniform(0.05, 0.95, n)
    y = (rng.uniform(size=n) < p_true).astype(int)
    return ct.val_prob(y=y, probs=transform(p_true))


@pytest.mark.parametrize("transform, words", [
    (lambda p: p ** 2, ("too low on average", "too extreme")),          # CITL > 0 and slope < 1
    (lambda p: 1 / (1 + np.exp(-1.8 * np.log(p / (1 - p)))), ("too extreme",)),  # logit x 1.8: slope < 1
    (lambda p: 1 / (1 + np.exp(-0.5 * np.log(p / (1 - p)))), ("not extreme enough",)),
    (lambda p: 1 / (1 + np.exp(-(np.log(p / (1 - p)) + 0.6))), ("too high on average",)),
    (lambda p: p, ()),
])
def test_direction_every_pattern(transform, words):
    """The direction follows the signs of CITL and slope - 1, stated only where the Wald interval excludes the null."""
    vp = _direction_case(transform)
    text = vp.direction()
    lo_c, hi_c = vp.citl_ci
    lo_s, hi_s = vp.slope_ci
    level_off, spread_off = not lo_c <= 0 <= hi_c, not lo_s <= 1 <= hi_s
    expected = []
    if level_off:
        expected.append("too low on average" if vp.citl > 0 else "too high on average")
    if spread_off:
        expected.append("too extreme" if vp.slope < 1 else "not extreme enough")
    assert tuple(expected) == words  # the simulated pattern is the one the intervals show
    for w in ("too low on average", "too high on average", "too extreme", "not extreme enough"):
        assert (w in text) == (w in words), (w, text)
    if not words:
        assert text.startswith("Direction: neither calibration-in-the-large")
    assert text.count("Direction") == 1


def test_direction_sentence_is_in_the_evidence_conclusion(squared):
    y, q, ev = squared
    vp = ct.val_prob(y=y, probs=q)
    assert vp.direction() in ev.conclusion()
    assert "too low on average" in ev.conclusion() and "too extreme" in ev.conclusion()  # p squared


def test_conclusion_is_a_method_on_every_result_and_the_string_attribute_warns():
    """Issue 37: EvidenceResult.conclusion was a str, CalibrationResult.conclusion() a method."""
    import warnings

    rng = np.random.default_rng(2)
    p = rng.uniform(0.05, 0.95, 400)
    y = (rng.random(400) < p).astype(int)
    res = ct.calib_ci(y=y, probs=p)
    ev = res.evidence()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # calling it never warns
        text = ev.conclusion()
        assert type(text) is str
        assert " ".join(res.conclusion()[1].split()) in " ".join(str(res.summary(evidence=False)).split())
        assert ev.to_dict()["conclusion"] == text
        shown = " ".join(str(ev.summary()).split())
        assert " ".join(text.split()[:8]) in shown
    with pytest.warns(FutureWarning, match=r"res\.conclusion\(\)"):
        assert ev.conclusion.startswith(text[:20])  # the former string attribute: still a string, with a warning
    with pytest.warns(FutureWarning):
        assert f"{ev.conclusion}" == text
    with pytest.warns(FutureWarning):
        assert ev.conclusion == text
    margin = res.margin_test(0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert type(margin.conclusion()) is str
        assert " ".join(margin.conclusion().split()) in " ".join(str(margin.summary()).split())
    with pytest.warns(FutureWarning):
        assert "margin" in margin.conclusion


# --------------------------------------------------------------------------- issue 37: certain refutations
def _llm_run(seed: int = 31):
    """300 questions, overconfident by 0.03 below 1.0, 2 wrong answers among 121 given at confidence exactly 1.0."""
    rng = np.random.default_rng(seed)
    conf = np.concatenate([np.ones(121), rng.uniform(0.5, 0.99, 179)])
    correct = np.concatenate([np.r_[np.zeros(2), np.ones(119)], rng.random(179) < conf[121:] - 0.03]).astype(int)
    return conf, correct


@pytest.mark.parametrize("source", ["csv", "parquet", "dask"])
def test_a_file_or_dask_frame_counts_its_impossible_rows_as_it_goes_by(tmp_path, source):
    # A file or a Dask frame is not held in memory: its impossible rows are counted chunk by chunk (partition by
    # partition) and merged; the counts equal those of the rows in memory, counted here from the data.
    from calibtest.checks.evidence_table import impossible_outcomes
    conf, correct = _llm_run()
    frame = pd.DataFrame({"correct": correct, "confidence": conf})
    expected = int(np.sum((conf == 1.0) & (correct == 0)))
    if source == "dask":
        dd = pytest.importorskip("dask.dataframe")
        data, extra = dd.from_pandas(frame, npartitions=3), {}
    else:
        data = tmp_path / f"llm.{source}"
        frame.to_csv(data, index=False) if source == "csv" else frame.to_parquet(data)
        data, extra = str(data), {"chunksize": 70}
    res = ct.calib_ci("correct ~ confidence", data=data, n_classes=4, **extra)
    assert res.data is None  # bin sums only
    found = impossible_outcomes(res)
    assert found.count == found.at_one == expected and found.at_zero == 0 and found.rows is None
    assert ("Calibration is refuted: 2 wrong answers at stated confidence 1.0") in " ".join(str(res.summary()).split())


def test_a_survival_outcome_known_by_the_horizon_counts_its_impossible_rows():
    # An event by t at a stated risk of 0, or a row followed event-free beyond t at a risk of 1, is impossible
    # under calibration; a row censored before t is not counted (its outcome by t is unknown).
    from calibtest.checks.evidence_table import impossible_outcomes
    g = np.random.default_rng(5)
    n, horizon = 600, 5.0
    risk = g.beta(2, 5, n)
    t, c = g.exponential(-horizon / np.log(1 - risk)), g.exponential(6.0, n)
    df = pd.DataFrame({"time": np.minimum(t, c), "event": (t <= c).astype(int), "risk": risk})
    assert impossible_outcomes(ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=horizon)) is None
    events_by_t = np.flatnonzero((df.time <= horizon) & (df.event == 1))
    censored_before_t = np.flatnonzero((df.time <= horizon) & (df.event == 0))
    followed_beyond_t = np.flatnonzero(df.time > horizon)
    df.loc[events_by_t[:2], "risk"] = 0.0
    df.loc[followed_beyond_t[:1], "risk"] = 1.0
    df.loc[censored_before_t[:3], "risk"] = 1.0  # unknown outcome by t: not counted
    res = ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=horizon)
    found = impossible_outcomes(res)
    assert (found.at_zero, found.at_one, found.count) == (2, 1, 3)
    text = " ".join(str(res.summary()).split())
    assert "Calibration is refuted: 2 events at a stated risk of 0 and 1 non-event at a stated risk of 1" in text


def test_wrong_answers_at_confidence_one_refute_calibration(tmp_path):
    from calibtest.checks.evidence_table import impossible_outcomes, short_verdict

    conf, correct = _llm_run()
    n_wrong_at_one = int(np.sum((conf == 1.0) & (correct == 0)))  # counted from the rows
    assert n_wrong_at_one == 2
    res = ct.calib_ci(y=correct, probs=conf, n_classes=4)
    found = impossible_outcomes(res)
    assert found.count == found.at_one == n_wrong_at_one and found.at_zero == 0
    assert sorted(found.rows.tolist()) == np.flatnonzero((conf == 1.0) & (correct == 0)).tolist()
    sentence = "2 wrong answers at stated confidence 1.0: impossible under calibration"
    verdict, text, _ = res.conclusion()
    assert verdict == "evidence" and text.startswith("Calibration is refuted: " + sentence)
    assert "unchanged" in text
    # the interval's statistics are those of the rows, as before: no evidence at its own level
    assert res.null_pvalue > res.alpha and res.conf_int().contains_zero
    ev = res.evidence()
    assert ev.verdict == "evidence" and "impossible" in ev.reasons
    assert ev.table.loc["calib_ci", "pvalue"] == res.null_pvalue and ev.table.loc["calib_ci", "verdict"] == "contains 0"
    assert ev.conclusion().startswith("Calibration is refuted: " + sentence)
    assert np.isinf(ev.hl.statistic) and "hl_impossible" in ev.reasons
    assert "hl_sparse" not in ev.reasons  # on the code before, these rows gave "hl_sparse" and verdict "mixed"
    assert "chi-squared reference is unreliable" not in ev.conclusion()
    assert "Hosmer-Lemeshow is infinite because of the impossible rows" in ev.conclusion()
    shown = " ".join(str(ev.summary()).split())
    assert "Impossible rows: " + sentence in shown
    assert ("Calibration is refuted: " + sentence) in " ".join(str(res.summary()).split())
    assert ev.to_dict()["impossible_rows"] == n_wrong_at_one
    assert short_verdict(res) == "calibration refuted: 2 wrong answers at stated confidence 1.0"
    page = ct.report([res], tmp_path / "r.html").read_text()
    assert "Impossible under calibration" in page and sentence in page


def test_impossible_binary_rows_are_counted_and_absent_ones_say_nothing():
    from calibtest.checks.evidence_table import impossible_outcomes

    rng = np.random.default_rng(8)
    p = rng.uniform(0.05, 0.95, 600)
    y = (rng.random(600) < p).astype(int)
    assert impossible_outcomes(ct.calib_ci(y=y, probs=p)) is None
    assert not ct.calib_ci(y=y, probs=p).conclusion()[1].startswith("Calibration is refuted")
    p[:40] = np.repeat([0.0, 1.0], 20)
    y[:40] = rng.integers(0, 2, 40)
    at_zero = int(np.sum((p == 0) & (y == 1)))
    at_one = int(np.sum((p == 1) & (y == 0)))
    assert at_zero > 1 and at_one > 1
    found = impossible_outcomes(ct.calib_ci(y=y, probs=p))
    assert (found.at_zero, found.at_one, found.count) == (at_zero, at_one, at_zero + at_one)
    assert found.sentence() == (f"{at_zero} events at a stated risk of 0 and {at_one} non-events at a stated risk "
                                "of 1: impossible under calibration")


def test_a_class_of_probability_zero_that_occurs_refutes_full_calibration():
    from calibtest.checks.evidence_table import impossible_outcomes

    rng = np.random.default_rng(4)
    P = rng.dirichlet(np.ones(3), 500)
    y = np.array([rng.choice(3, p=row) for row in P])
    P[:5] = [0.0, 0.4, 0.6]  # class 0 has probability 0 ...
    y[:5] = [0, 0, 1, 2, 0]  # ... and occurs 3 times
    expected = int(np.sum(P[np.arange(500), y] == 0))  # rows whose observed class had stated probability 0
    res = ct.calib_ci(y=y, probs=P, k="full")
    found = impossible_outcomes(res)
    assert found.count == expected == 3
    assert found.sentence() == "3 rows whose class had stated probability 0: impossible under calibration"
    assert res.conclusion()[0] == "evidence"


def test_no_direction_word_beside_no_evidence():
    """A top-1 model whose accuracy exceeds its confidence (Wald CI by hand) while the ECE test does not reject."""
    from calibtest.checks.evidence_table import short_verdict
    from scipy import stats

    rng = np.random.default_rng(5)
    conf = rng.uniform(0.4, 0.9, 1500)
    correct = (rng.random(1500) < conf + 0.04).astype(int)
    res = ct.calib_ci(y=correct, probs=conf, n_classes=5)
    u = correct - conf
    half = stats.norm.isf(0.025) * u.std() / np.sqrt(u.size)
    assert u.mean() - half > 0  # the direction test: underconfident
    assert res.null_pvalue > 0.05 and res.conclusion()[0] == "no evidence"
    assert short_verdict(res) == "no evidence of miscalibration"
    text = res.conclusion()[1]
    assert "underconfident" not in text and "overconfident" not in text
    assert "is above the mean confidence" in text


def test_an_unreliable_gnd_never_decides_the_survival_conclusion():
    """Calibrated risks, 74% censored before t, n = 300 (the GND's size there was 0.32): a data set where GND
    rejects and no other row does concludes "no evidence", and says why GND is not counted."""
    import calibtest as ct

    found = None
    for seed in range(60):  # the first calibrated data set in which the GND row rejects and nothing else does
        rng = np.random.default_rng(seed)
        r = rng.uniform(0.05, 0.6, 300)
        t = 5.0 * (rng.exponential(size=300) / -np.log1p(-r)) ** (1 / 1.5)
        c = rng.uniform(0, 5.8, 300)
        res = ct.calib_ci(time=np.minimum(t, c), event=(t <= c).astype(float), probs=r, horizon=5.0)
        ev = res.evidence()
        rej = ev.table["reject"].astype(bool)
        if rej["gnd"] and not rej.drop("gnd").any():
            found = ev
            break
    assert found is not None, "no data set where only GND rejects among the first 60"
    sev = found.survival
    assert sev.gnd_pvalue <= found.alpha and sev.gnd_unreliable
    assert found.verdict == "no evidence"
    assert "The Greenwood-Nam-D'Agostino test has p = " in found.conclusion()
    assert f"it is unreliable here ({sev.gnd_unreliable})" in found.conclusion()
    assert found.conclusion().startswith("No evidence of miscalibration at level 0.05: no test counted rejects")
