"""summary(), to_dict(), bin_table() and repr."""
import json
import math

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from scipy import stats

import calibtest as ct
from calibtest.checks.evidence_table import conclude, result_val_prob
from calibtest.display.format import fmt, fmt_p


@pytest.fixture
def res():
    rng = np.random.default_rng(4)
    P = rng.dirichlet(np.ones(5), size=800)
    labels = np.array([rng.choice(5, p=row) for row in P])
    return ct.calib_ci(y=labels, probs=P, k=2, alpha=0.1)


def test_summary_formats(res):
    s = res.summary()
    text = str(s)
    for piece in ("top-1-to-k (k = 2)", "No. observations:", "800", fmt(res.estimate), fmt(res.sigma0_sq),
                  fmt(res.null_pvalue, 4), "Adjusted 90% confidence interval", "calibrated: z0"):
        assert piece in text, piece
    html = s.as_html()
    assert "<table" in html and fmt(res.ci_upper) in html
    latex = s.as_latex()
    assert "\\begin{tabular}" in latex or "\\begin{table}" in latex
    assert s._repr_html_() == html


def test_summary_html_escapes_user_text():
    df = pd.DataFrame({"y": [0, 1, 1, 0] * 10, "p": np.linspace(0.1, 0.9, 40)})
    df = df.rename(columns={"p": "<script>alert(1)</script>"})
    res = ct.calib_ci('y ~ Q("<script>alert(1)</script>")', data=df)
    html = res.summary().as_html()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<script>" in str(res.summary())  # text output is not escaped


def test_to_dict_is_json_safe_and_complete(res):
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    for key in ("estimate", "ece", "ci_lower", "ci_upper", "ci_lower_open", "ece_ci_lower", "ece_ci_upper",
                "contains_zero", "sigma1_sq", "sigma0_sq", "se", "threshold", "null_zstat", "null_pvalue",
                "n", "n_bins", "k", "n_classes", "mode", "alpha"):
        assert key in d, key
    assert d["estimate"] == res.estimate and d["n"] == 800
    assert_allclose(d["ece_ci_upper"], np.sqrt(res.ci_upper))


def test_bin_table_contributions_sum_to_estimate(res):
    table = res.bin_table()
    assert_allclose(table["contribution"].sum(), res.estimate, rtol=1e-10)
    assert table["count"].sum() == res.n
    assert {"lower_1", "upper_2", "mean_pred_1", "mean_outcome_2"} <= set(table.columns)
    row = table.iloc[0]
    assert row["lower_1"] <= row["mean_pred_1"] < row["upper_1"] or row["upper_1"] == row["lower_1"]


def test_sparse_bin_warning():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=30)
    res = ct.calib_ci(y=(rng.uniform(size=30) < p).astype(int), probs=p, n_bins=200)
    assert res.n_singleton_bins > res.n_occupied_bins / 2
    assert "fewer than 2 rows" in str(res.summary())


def test_repr(res):
    assert repr(res).startswith("<CalibrationResult mode=topk k=2 n=800")


# --------------------------------------------------------------------------- one protocol, fixed width
import re

from calibtest.core.conditional import shifted_gamma_isf
from calibtest.display.summary import CalibSummary, latex_escape, wrap_note

LONG = "p_" + "x" * 38                     # a 40-character column name
LONG_B = "q_" + "z" * 38


@pytest.fixture(scope="module")
def long_df():
    rng = np.random.default_rng(11)
    p = rng.uniform(0.05, 0.95, size=600)
    q = np.clip(p + rng.normal(0, 0.05, size=600), 0.02, 0.98)
    y = (rng.uniform(size=600) < p).astype(int)
    return pd.DataFrame({"y_" + "w" * 38: y, LONG: p, LONG_B: q})


def _all_results(df):
    yname = df.columns[0]
    f_a, f_b = f"{yname} ~ {LONG}", f"{yname} ~ {LONG_B}"
    res = ct.calib_ci(f_a, data=df, null="monte-carlo", n_null_draws=99, rng=1)
    return {
        "calib": res,
        "compare": ct.calib_compare(f_a, f_b, data=df),
        "pairwise": ct.calib_compare([f_a, f_b, f"{yname} ~ I({LONG} * 0.9)"], data=df),
        "tcal": ct.tcal_test(f_a, data=df, n_draws=50, rng=2),
        "hl": ct.hosmer_lemeshow(f_a, data=df, groups=10),
        "valprob": ct.val_prob(f_a, data=df),
    }


def test_every_result_speaks_the_protocol_with_equal_width_lines(long_df):
    for name, res in _all_results(long_df).items():
        s = res.summary()
        assert isinstance(s, CalibSummary), name
        lines = str(s).splitlines()
        widths = {len(line) for line in lines}
        assert len(widths) == 1 and widths.pop() <= 80, (name, {len(x) for x in lines})
        assert s.as_html() == res._repr_html_()
        json.dumps(res.to_dict(), allow_nan=False)
        assert not any(isinstance(v, dict) for v in res.to_dict().values()), name
        r = repr(res)
        assert "\n" not in r and r.startswith(f"<{type(res).__name__} ") and len(r) < 200, (name, r)
        assert "\\_" in s.as_latex() or name == "pairwise"  # the formula's underscores are escaped
        assert isinstance(res.summary(alpha=0.1), CalibSummary)


def test_latex_and_html_escape_user_text():
    assert latex_escape(r"a&b%c$d#e_f{g}h~i^j\k") == (r"a\&b\%c\$d\#e\_f\{g\}h\textasciitilde{}i"
                                                      r"\textasciicircum{}j\textbackslash{}k")
    df = pd.DataFrame({"y": [0, 1, 1, 0] * 10, "p_&%$#": np.linspace(0.1, 0.9, 40)})
    res = ct.calib_ci('y ~ Q("p_&%$#")', data=df)
    latex = res.summary().as_latex()
    assert r"p\_\&\%\$\#" in latex and "p_&%$#" not in latex
    assert "ECE\\textasciicircum{}2 (T)" in latex


def test_notes_wrap_without_breaking_intervals():
    text = "word " * 13 + "the interval [0.00123456, 0.0234567] for ECE^2 and (0, 0.153209] for ECE."
    for width in range(30, 80):
        lines = wrap_note(text, width, "    ")
        assert all(len(line) <= width for line in lines)
        joined = "\n".join(lines)
        assert "[0.00123456, 0.0234567]" in joined and "(0, 0.153209]" in joined


def _row(text, label):
    line = next(line for line in text.splitlines() if line.startswith(label))
    return line[len(label):].split()


def test_summary_at_another_alpha_is_consistent():
    rng = np.random.default_rng(3)
    p = rng.uniform(0.05, 0.95, size=700)
    y = (rng.uniform(size=700) < np.clip(p + 0.02, 0, 1)).astype(int)
    res = ct.calib_ci(y=y, probs=p, n_bins=12, null="monte-carlo", n_null_draws=199, rng=5)
    assert res.alpha == 0.05
    text = str(res.summary(alpha=0.1))
    assert _row(text, "Alpha:")[0] == "0.1"
    cond = shifted_gamma_isf(0.1, res.conditional.variance, res.conditional.skewness)
    assert _row(text, "conditional: T / sd(T | Z)")[-1] == fmt(cond)
    assert _row(text, "Monte Carlo: 199 label draws")[-1] == fmt(res.monte_carlo.critical_value(0.1))
    z = 1.2815515655446004  # norm.isf(0.1)
    calibrated = z * np.sqrt(res.sigma0_sq) / (res.n * np.sqrt(res.bin_volume))
    assert float(_row(text, "calibrated: z0")[-1]) == pytest.approx(calibrated, rel=1e-5)
    flat = " ".join(text.split())
    assert re.search(r"(?<![\d.])0\.05(?!\d)", text) is None and "90%" in text
    assert "95%" not in flat.replace("(one-sided 95%)", "")  # the 90% interval's upper end is a one-sided 95% bound
    assert "upper confidence limit (one-sided 95%)" in flat
    # and at the stored alpha the stored values are shown
    text05 = str(res.summary())
    assert _row(text05, "conditional: T / sd(T | Z)")[-1] == fmt(res.conditional.threshold)
    assert _row(text05, "Alpha:")[0] == "0.05"


def test_summary_numbers_equal_the_attributes(res):
    text = str(res.summary())
    est = _row(text, "ECE^2 (T)")
    # the interval in one cell, as every table shows it ((0, u] when open at 0), and its verdict beside it
    opening = "(" if res.ci_lower_open else "["
    verdict = ["contains", "0"] if res.contains_zero else ["excludes", "0"]
    assert est == [fmt(res.estimate), fmt(res.se), f"{opening}{fmt(res.ci_lower)},", f"{fmt(res.ci_upper)}]",
                   *verdict]
    cal = _row(text, "calibrated: z0")
    # the row is the paper's test whatever the null: z0 = n sqrt(w) T / sigma0, p = 1 - Phi(z0)
    z0 = res.n * math.sqrt(res.bin_volume) * res.estimate / math.sqrt(res.sigma0_sq)
    assert res.null == "conditional"  # the default for top-2 in memory
    assert cal[:3] == [fmt(res.sigma0_sq), fmt(z0, 4), fmt(stats.norm.sf(z0), 4)]
    assert _row(text, "No. observations:")[0] == str(res.n)


# --------------------------------------------------------------------------- the evidence and the null
@pytest.fixture(scope="module")
def binary_res():
    g = np.random.default_rng(21)
    p = g.beta(2, 5, 400)
    y = (g.random(400) < p).astype(int)
    return y, p ** 1.2, ct.calib_ci(y=y, probs=p ** 1.2, null="conditional", rng=4)


def test_summary_opens_with_the_evidence_table(binary_res):
    y, q, res = binary_res
    s = res.summary()
    first = s.tables[0]
    assert list(first.index)[:2] == ["multi-scale test", f"ECE^2 95% CI, B = {res.n_bins}"]
    ev = res.evidence()
    assert first["p-value"].iloc[0] == ct.calib_test(y=y, probs=q, rng=4).pvalue == ev.table.loc["calib_test",
                                                                                                  "pvalue"]
    assert first["statistic"].iloc[2] == ct.hosmer_lemeshow(y=y, probs=q).statistic
    conclusion = s.tables[1]
    assert conclusion["key"].iloc[0] == "Conclusion:" and conclusion["value"].iloc[0] == ev.conclusion()
    # the bin-sensitivity table follows the tests table
    assert list(s.tables[-1]["T"]) == list(ev.sensitivity["T"])


def test_summary_has_no_side_effects_and_can_skip_the_evidence(binary_res):
    _, _, res = binary_res
    before = res.to_dict()
    assert str(res.summary()) == str(res.summary())
    assert res.to_dict() == before
    lean_summary = res.summary(evidence=False)
    lean = str(lean_summary)
    assert "summary(evidence=False)" in " ".join(lean.split())
    # without the evidence, the summary opens with the conclusion of the interval and its own test
    head = lean_summary.tables[0]
    assert head["key"].iloc[0] == "Conclusion:"
    assert head["value"].iloc[0] == conclude(res)[1]
    assert "conditional (shifted gamma) test of ECE = 0" in head["value"].iloc[0]
    assert "multi-scale" not in head["value"].iloc[0]
    assert lean_summary.tables[1]["key"].iloc[0] == "Model:"
    with pytest.raises(TypeError, match="evidence"):
        res.summary(evidence="no")


def test_summary_names_the_null_and_shows_the_asymptotic_test(binary_res):
    _, _, res = binary_res
    text = " ".join(str(res.summary(evidence=False)).split())
    assert "null='conditional'" in text and "conditional (shifted gamma)" in text
    assert f"p = {fmt_p(res.null_pvalue, 4)}" in text
    assert f"The paper's asymptotic test: z0 = {fmt(res.asymptotic.zstat, 4)}, " \
           f"p = {fmt_p(res.asymptotic.pvalue, 4)}" in text
    asym = ct.calib_ci(y=res.data.y[:, 0].round(), probs=res.data.z[:, 0], null="asymptotic")
    text = " ".join(str(asym.summary(evidence=False)).split())
    assert "null='asymptotic'" in text and "asymptotic (the paper's normal limit)" in text
    mc = ct.calib_ci(y=res.data.y[:, 0].round(), probs=res.data.z[:, 0], null="monte-carlo", rng=2)
    text = " ".join(str(mc.summary(evidence=False)).split())
    assert "Monte Carlo (exact conditional)" in text and "The paper's asymptotic test" in text


def test_summary_says_when_the_evidence_is_over_the_memory_limit(binary_res, monkeypatch):
    import calibtest.options as options
    y, q, _ = binary_res
    res = ct.calib_ci(y=y, probs=q)  # a new result: the evidence of the shared one is kept once computed
    monkeypatch.setattr(options, "MAX_BYTES", 1000.0)  # the multi-scale test's draws exceed it
    text = " ".join(str(res.summary()).split())
    assert "The evidence table was not computed:" in text and "lower n_draws" in text
    # the conclusion is then that of the interval and its own test
    assert "Conclusion: " + conclude(res)[1] in text and "multi-scale test rejects" not in text


# --------------------------------------------------------------------------- results format, never compute
@pytest.fixture
def counted(monkeypatch):
    """Counts of the runs of the multi-scale test, Hosmer-Lemeshow and val_prob (wrapped where they compute)."""
    from collections import Counter

    import importlib

    from calibtest.checks import evidence_table as verdict, val_prob as vp_module
    hl_module = importlib.import_module("calibtest.checks.hosmer_lemeshow")
    calls = Counter()

    def count(module, name):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            calls[name] += 1
            return original(*args, **kwargs)
        monkeypatch.setattr(module, name, wrapper)

    count(verdict, "calib_test_rows")  # the evidence's multi-scale test
    count(hl_module, "_hosmer_lemeshow")  # every Hosmer-Lemeshow test on rows
    count(vp_module, "_val_prob")  # every val_prob that gets past its argument checks
    return calls


def test_summary_display_and_report_compute_the_evidence_once(binary_res, counted):
    from calibtest.reporting.html import build_context
    y, q, _ = binary_res
    res = ct.calib_ci(y=y, probs=q)
    once = {"calib_test_rows": 1, "_hosmer_lemeshow": 1, "_val_prob": 1}
    first = str(res.summary())
    assert counted == once
    assert str(res.summary()) == first  # the second summary formats what the first computed
    html = res._repr_html_()
    assert counted == once and "multi-scale test" in html
    d = res.to_dict()
    assert res.to_dict() == d and res.to_dict() is not d  # kept, handed out as a copy
    ctx = build_context(res)  # with the figures: the flexible curve's CITL and slope are val_prob's
    assert counted == once
    ev = res.evidence()
    assert res.evidence() is ev
    model = ctx["models"][0]
    # the report shows the evidence, HL and val_prob the summary computed, and the one conclusion
    assert model["evidence_conclusion"] == ev.conclusion()
    assert model["hl"]["test"]["rows"][0][1] == fmt(ev.hl.statistic)
    assert res.hosmer_lemeshow() is ev.hl
    # another level, or another seed, is another evidence; a Generator's draws are never kept
    res.summary(alpha=0.1)
    assert counted["calib_test_rows"] == 2
    res.evidence(rng=7)
    res.evidence(rng=7)
    assert counted["calib_test_rows"] == 3
    res.evidence(rng=np.random.default_rng(7))
    res.evidence(rng=np.random.default_rng(7))
    assert counted["calib_test_rows"] == 5
    assert counted["_hosmer_lemeshow"] == 1 and counted["_val_prob"] == 2  # val_prob at alpha = 0.05 and 0.1


def test_report_after_summary_does_not_rerun_the_test(binary_res, counted, tmp_path):
    y, q, _ = binary_res
    res = ct.calib_ci(y=y, probs=q)
    res.summary()
    res.report(tmp_path / "r.html")
    assert counted == {"calib_test_rows": 1, "_hosmer_lemeshow": 1, "_val_prob": 1}


def test_bin_table_is_kept_and_copied(binary_res):
    _, _, res = binary_res
    table = res.bin_table()
    table.loc[0, "count"] = -1  # the caller's copy
    again = res.bin_table()
    assert again.loc[0, "count"] > 0 and again["contribution"].sum() == pytest.approx(res.estimate, rel=1e-12)


def test_a_failed_evidence_part_is_not_retried(counted, monkeypatch):
    from calibtest.checks import evidence_table as verdict
    tried = []
    original = verdict.val_prob
    monkeypatch.setattr(verdict, "val_prob", lambda *a, **k: tried.append(1) or original(*a, **k))
    q = np.random.default_rng(3).uniform(0.01, 0.1, 200)
    res = ct.calib_ci(y=np.zeros(200, dtype=int), probs=q)  # one class: val_prob's logistic fits are undefined
    for _ in range(2):
        text = " ".join(str(res.summary()).split())
        assert "val_prob (Spiegelhalter, CITL, slope) was not computed" in text
    assert len(tried) == 1 and counted["calib_test_rows"] == 1
    with pytest.raises(ValueError, match="both 0 and 1"):
        result_val_prob(res)
    assert len(tried) == 1


def test_every_path_builds_its_result_with_the_one_constructor(binary_res, monkeypatch, tmp_path):
    from pathlib import Path

    from calibtest.streams.accumulator import BinAccumulator
    from calibtest.core.estimates import Estimates
    from calibtest.ece.result import CalibrationResult
    from calibtest.ece.result_parts import BinChoice, CalibrationTarget, NullChoice
    y, q, _ = binary_res
    built = []
    original = CalibrationResult.from_estimates.__func__

    def counting(cls, *args, **kwargs):
        built.append(kwargs["null"].null)
        return original(cls, *args, **kwargs)
    monkeypatch.setattr(CalibrationResult, "from_estimates", classmethod(counting))
    frame = pd.DataFrame({"y": y, "q": q, "w": np.linspace(0.5, 2.0, y.size)})
    ct.calib_ci("y ~ q", data=frame)  # in memory
    ct.calib_ci("y ~ q", data=frame, weights="w")  # weighted
    frame.to_csv(tmp_path / "rows.csv", index=False)
    ct.calib_ci("y ~ q", data=str(tmp_path / "rows.csv"))  # streamed from a file
    BinAccumulator("y ~ q", n_bins=10).update(frame).result()  # bin sums
    # streamed: the in-memory null; case weights: the Monte Carlo null given the predictions and the weights
    assert built == ["conditional", "monte-carlo", "conditional", "conditional"]
    # no other construction of a result in the package
    package = Path(ct.__file__).parent
    calls = [(path.name, line) for path in package.rglob("*.py") for line in path.read_text().splitlines()
             if re.search(r"(?<![\w.])CalibrationResult\(", line) and not line.lstrip().startswith("class ")]
    assert calls == []
    with pytest.raises(ValueError, match="the null it used"):
        estimates = Estimates(estimate=0.0, plugin_estimate=0.0, sigma1_sq=0.0, sigma0_sq=1.0, se=0.0,
                              bin_volume=0.5, test=(0.0, 1.0, 0.0), interval=None, null_method="normal",
                              asymptotic=None, singleton_fraction=0.0)
        original(CalibrationResult, None, estimates, bins=BinChoice(2, "user"),
                 target=CalibrationTarget("binary", 1, None), alpha=0.05, null=NullChoice("auto"))
