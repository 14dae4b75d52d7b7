"""The evidence on a file or a Dask frame equals the evidence of the same rows in memory (issue 27, point 2).

Every number of the evidence table, the bin-sensitivity table, Hosmer-Lemeshow's group table and the
val_prob fields it reads is compared with the in-memory one (statsmodels' logistic fits, the stable sort
of Hosmer-Lemeshow) at 1e-8; the verdict, the reasons and the conclusion must be the same text.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.streams import evidence as evidence_stream
from calibtest.streams.evidence import NOT_STREAMED, _Select


TOL = 1e-8
VP_FIELDS = ("n", "n_events", "n_infinite_logit", "brier", "intercept", "slope", "intercept_se", "slope_se",
             "citl", "citl_se", "spiegelhalter_z", "spiegelhalter_p", "observed_rate", "mean_predicted", "oe",
             "oe_se", "r2", "d", "d_chisq", "u", "u_chisq", "q")


def _close(a, b, what):
    if a is None or b is None or isinstance(a, (bool, str, np.bool_)):
        assert a == b, (what, a, b)
    elif isinstance(a, tuple):
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{what}[{i}]")
    else:
        assert math.isclose(float(a), float(b), rel_tol=TOL, abs_tol=TOL), (what, a, b)


def assert_same_evidence(es, ev):
    """``es`` (streamed) and ``ev`` (in memory): every streamable number to 1e-8, the same words."""
    assert list(es.table.index) == list(ev.table.index)
    for key in ev.table.index:
        for col in ("statistic", "pvalue", "lower", "upper", "reject", "verdict", "name", "null"):
            _close(es.table.loc[key, col], ev.table.loc[key, col], f"{key}.{col}")
    assert list(es.sensitivity.columns) == list(ev.sensitivity.columns)
    for col in ev.sensitivity.columns:
        for i, (a, b) in enumerate(zip(es.sensitivity[col], ev.sensitivity[col])):
            _close(a, b, f"sensitivity.{col}[{i}]")
    assert (es.verdict, es.reasons, es.sensitivity_flag) == (ev.verdict, ev.reasons, ev.sensitivity_flag)
    assert es.conclusion() == ev.conclusion()
    assert (es.n, es.mode, es.n_dropped, es.seed) == (ev.n, ev.mode, ev.n_dropped, ev.seed)
    assert es.test.pvalue == ev.test.pvalue and list(es.test.n_bins) == list(ev.test.n_bins)
    np.testing.assert_allclose(es.test.scales["z"], ev.test.scales["z"], rtol=TOL, atol=TOL)
    assert (es.hl is None) == (ev.hl is None) and (es.valprob is None) == (ev.valprob is None)
    if ev.hl is not None:
        pd.testing.assert_frame_equal(es.hl.table, ev.hl.table, check_dtype=False, rtol=TOL, atol=TOL)
        for name in ("statistic", "pvalue", "df", "pvalue_df_groups_minus_2", "plugin_estimate",
                     "debiased_estimate", "plugin_estimate_groups", "debiased_estimate_groups"):
            _close(getattr(es.hl, name), getattr(ev.hl, name), f"hl.{name}")
    if ev.valprob is not None:
        for name in VP_FIELDS + ("intercept_ci", "slope_ci", "citl_ci", "oe_ci"):
            _close(getattr(es.valprob, name), getattr(ev.valprob, name), f"val_prob.{name}")
    assert NOT_STREAMED in es.scope and ev.scope in es.scope


def _frame(n=4000, seed=3, power=1.1, digits=None, nan=0):
    g = np.random.default_rng(seed)
    p = g.beta(2, 5, n)
    y = (g.random(n) < p ** power).astype(float)
    if digits is not None:
        p = np.round(p, digits)
    y[:nan] = np.nan
    return pd.DataFrame({"y": y, "p": p})


@pytest.fixture(scope="module")
def miscalibrated(tmp_path_factory):
    df = _frame()
    path = tmp_path_factory.mktemp("ev")
    df.to_csv(path / "d.csv", index=False)
    df.to_parquet(path / "d.parquet", row_group_size=1500)
    return df, path, ct.evidence("y ~ p", data=df, rng=7)


@pytest.mark.parametrize("chunksize", [997, 2000, 1_000_000])
def test_csv_at_three_chunk_sizes_equals_memory(miscalibrated, chunksize):
    df, path, ev = miscalibrated
    es = ct.evidence("y ~ p", data=path / "d.csv", rng=7, chunksize=chunksize)
    assert_same_evidence(es, ev)
    assert ev.verdict == "evidence" and ev.hl is not None  # the data are miscalibrated: the rules fire


def test_parquet_equals_memory(miscalibrated):
    df, path, ev = miscalibrated
    assert_same_evidence(ct.evidence("y ~ p", data=str(path / "d.parquet"), rng=7), ev)


@pytest.mark.parametrize("npartitions", [1, 3])
def test_dask_equals_memory(dd, miscalibrated, npartitions):
    df, _, ev = miscalibrated
    assert_same_evidence(ct.evidence("y ~ p", data=dd.from_pandas(df, npartitions=npartitions), rng=7), ev)


def test_result_evidence_and_summary_of_a_file_result(miscalibrated):
    df, path, ev = miscalibrated
    res = ct.calib_ci("y ~ p", data=path / "d.parquet", null="conditional")
    assert res.data is None and res.stream is not None
    es = res.evidence(rng=7)
    assert_same_evidence(es, ev)
    assert res.evidence(rng=7) is es  # computed once per level and seed
    text = " ".join(str(res.summary()).split())
    assert "Hosmer-Lemeshow" in text and "not computed, as they need every row at once" in text


def test_ties_split_by_group_boundaries_follow_the_row_order(dd, tmp_path):
    # predictions rounded to 2 digits: most HL group boundaries fall inside a run of tied predictions, which
    # the stable sort of the rows in memory splits by row position; missing outcomes are dropped first
    df = _frame(n=3001, seed=5, digits=2, nan=17)
    ev = ct.evidence("y ~ p", data=df, rng=2, missing="drop")
    df.to_csv(tmp_path / "t.csv", index=False)
    for chunksize in (250, 3001):
        es = ct.evidence("y ~ p", data=tmp_path / "t.csv", rng=2, missing="drop", chunksize=chunksize)
        assert_same_evidence(es, ev)
    assert_same_evidence(ct.evidence("y ~ p", data=dd.from_pandas(df, npartitions=4), rng=2, missing="drop"),
                         ev)
    sizes = ev.hl.table["n"].to_numpy()
    assert es.n_dropped == 17 and sizes.sum() == 2984 and set(sizes) == {298, 299}


def test_top1_with_n_classes(tmp_path):
    g = np.random.default_rng(8)
    conf = 0.5 + 0.5 * g.beta(5, 1, 3000)
    correct = (g.random(3000) < conf ** 1.3).astype(int)
    df = pd.DataFrame({"correct": correct, "confidence": conf})
    df.to_parquet(tmp_path / "top1.parquet")
    ev = ct.evidence("correct ~ confidence", data=df, n_classes=10, rng=4)
    es = ct.evidence("correct ~ confidence", data=tmp_path / "top1.parquet", n_classes=10, rng=4)
    assert es.mode == "top1"
    assert_same_evidence(es, ev)


def test_what_val_prob_cannot_fit_is_said_as_in_memory(tmp_path):
    # p separates y: the logistic fits have no finite estimate; the scope says so in the same words
    g = np.random.default_rng(1)
    p = np.sort(g.random(400))
    df = pd.DataFrame({"y": (p > 0.5).astype(int), "p": p})
    df.to_csv(tmp_path / "s.csv", index=False)
    ev = ct.evidence("y ~ p", data=df, rng=1)
    es = ct.evidence("y ~ p", data=tmp_path / "s.csv", rng=1, chunksize=150)
    assert ev.valprob is None and "p separates y" in ev.scope
    assert_same_evidence(es, ev)


def test_radix_selection_finds_exact_order_statistics(monkeypatch):
    # a tiny collection limit forces the 16-bit refinements down to single 64-bit keys
    g = np.random.default_rng(0)
    p = np.concatenate([g.random(500), np.full(40, 0.25), np.full(30, 1.0), np.zeros(20), 1e-300 * g.random(9)])
    g.shuffle(p)
    ranks = [0, 7, 100, 299, 300, 589, p.size - 1]
    for limit in (0, 50, 10 ** 6):
        monkeypatch.setattr(evidence_stream, "COLLECT_MAX", limit)
        select = _Select(ranks)
        counts, passes = None, 0
        while not select.done:
            plan = select.plan(counts)
            sums = {}
            for chunk in np.array_split(p, 3):  # three chunks, summed as a stream does
                part = _Select.step(plan, chunk)
                sums = part if not sums else evidence_stream._add(sums, part)
            counts = select.advance(plan, sums)
            passes += 1
        s = np.sort(p)
        for r in ranks:
            value, below, equal = select.found[r]
            assert value == s[r]
            assert below == np.count_nonzero(p < value) and equal == np.count_nonzero(p == value)
        assert passes <= 4


def test_refused_with_a_clear_message(tmp_path):
    g = np.random.default_rng(2)
    probs = g.dirichlet(np.ones(3), 300)
    df = pd.DataFrame({"y": [int(g.choice(3, p=q)) for q in probs], "p0": probs[:, 0], "p1": probs[:, 1],
                       "p2": probs[:, 2]})
    df.to_csv(tmp_path / "k.csv", index=False)
    with pytest.raises(ValueError, match="binary or top-1 target"):
        ct.evidence("y ~ p0 + p1 + p2", data=tmp_path / "k.csv", k="full")
    res = ct.calib_ci("y ~ p0 + p1 + p2", data=tmp_path / "k.csv", k="full")
    assert res.stream is None and "holds only bin sums" in " ".join(str(res.summary()).split())
    bin_df = _frame(300)
    bin_df.to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(TypeError, match="int seed"):
        ct.evidence("y ~ p", data=tmp_path / "b.csv", rng=np.random.default_rng(1))
    with pytest.raises(ValueError, match="by= is not available for evidence"):
        ct.evidence("y ~ p", data=tmp_path / "b.csv", by="y")
    with pytest.raises(ValueError, match="chunksize= applies only"):
        ct.evidence("y ~ p", data=bin_df, chunksize=100)


def test_a_file_changed_after_the_interval_is_said(tmp_path):
    df = _frame(500)
    df.to_csv(tmp_path / "c.csv", index=False)
    res = ct.calib_ci("y ~ p", data=tmp_path / "c.csv")
    df.iloc[:400].to_csv(tmp_path / "c.csv", index=False)
    with pytest.raises(ValueError, match="changed since it was first read"):
        res.evidence()
    assert "The evidence table was not computed from the file" in " ".join(str(res.summary()).split())


def test_hosmer_lemeshow_and_val_prob_of_a_file_result(miscalibrated):
    df, path, _ = miscalibrated
    res = ct.calib_ci("y ~ p", data=path / "d.csv", chunksize=1100)
    ref = ct.calib_ci("y ~ p", data=df)
    for groups, validation in ((7, "development"), (10, "external")):
        a, b = res.hosmer_lemeshow(groups, validation), ref.hosmer_lemeshow(groups, validation)
        assert (a.df, a.validation, a.groups) == (b.df, b.validation, b.groups)
        pd.testing.assert_frame_equal(a.table, b.table, check_dtype=False, rtol=TOL, atol=TOL)
        _close(a.pvalue, b.pvalue, "pvalue")
    vp, vq = res.val_prob(), ref.val_prob()
    for name in VP_FIELDS:
        _close(getattr(vp, name), getattr(vq, name), name)
    assert math.isnan(vp.auc) and math.isnan(vp.loess_ici)  # need every row at once: said in the scope


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_cli_report_streams_with_chunksize(miscalibrated, tmp_path):
    import html
    import re

    from calibtest.cli import main

    df, path, _ = miscalibrated
    ev = ct.evidence("y ~ p", data=df, rng=7, null="auto")
    out = tmp_path / "r.html"
    assert main(["report", str(path / "d.parquet"), "--formula", "y ~ p", "-o", str(out), "--chunksize", "1500",
                 "--seed", "7"]) == 0
    text = " ".join(re.sub(r"<[^>]+>", " ", html.unescape(out.read_text(encoding="utf-8"))).split())
    # the report writes ECE^2 as ECE²; its conclusion is the streamed evidence's, word for word
    assert ev.conclusion().replace("^2", "²") in text and NOT_STREAMED in text


def test_predictions_exactly_0_and_1_are_left_out_of_the_fits_as_in_memory(tmp_path):
    g = np.random.default_rng(11)
    p = g.beta(2, 5, 1500)
    p[:5], p[5:9] = 0.0, 1.0
    df = pd.DataFrame({"y": (g.random(1500) < p).astype(int), "p": p})
    df.to_csv(tmp_path / "z.csv", index=False)
    ev = ct.evidence("y ~ p", data=df, rng=3)
    es = ct.evidence("y ~ p", data=tmp_path / "z.csv", rng=3, chunksize=300)
    assert es.valprob.n_infinite_logit == 9
    assert_same_evidence(es, ev)


def _fits_from_val_probs_start(p: np.ndarray, y: np.ndarray, alpha: float) -> tuple:
    """The streamed fits as they ran before the binned start: Newton on the sums of every row from val.prob's
    start (0, 1) and 0, one evaluation per pass; returns (joint result, CITL result, evaluations)."""
    joint, citl = evidence_stream._Newton([0.0, 1.0]), evidence_stream._Newton([0.0])
    evaluations = 0
    while not (joint.done and citl.done) and evaluations < 60:
        sums = evidence_stream._fit_sums(p, y, joint.candidate, citl.candidate[0])
        evaluations += 1
        for fit, key in ((joint, "j"), (citl, "c")):
            if not fit.done:
                fit.update(sums[f"{key}_ll"], sums[f"{key}_info"], sums[f"{key}_score"])
    return joint.result(alpha), citl.result(alpha), evaluations


@pytest.mark.parametrize("frame, passes", [(dict(), 3), (dict(digits=2), 2), (dict(n=20_000, power=0.5, seed=11), 3)])
def test_streamed_citl_and_slope_from_the_binned_start_are_the_fits_from_val_probs_start(tmp_path, monkeypatch,
                                                                                       frame, passes):
    """Estimates and standard errors to 1e-10 against the Newton from (0, 1) / 0 (the streamed fits before) and
    statsmodels' converged GLM.  The passes: the first (sums, cell sums), then the selection's second pass with
    the first step and a third with the step that confirms the estimate; with p rounded to 2 digits the rows of
    a cell share one logit, the binned start is the estimate, and its first step confirms it (2 passes)."""
    import warnings

    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_linear_model import GLM

    df = _frame(**frame)
    df.to_parquet(tmp_path / "d.parquet", row_group_size=1500)
    seen = []
    original = evidence_stream._sums_and_fits
    monkeypatch.setattr(evidence_stream, "_sums_and_fits", lambda *a: seen.append(original(*a)) or seen[-1])
    vp = ct.evidence("y ~ p", data=str(tmp_path / "d.parquet"), rng=7).valprob
    p, y = df["p"].to_numpy(), df["y"].to_numpy()
    (ab, ab_se, _, _), (a0, a0_se, _, _), evaluations = _fits_from_val_probs_start(p, y, vp.alpha)
    logit = np.log(p / (1.0 - p))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        glm = GLM(y, np.column_stack([np.ones(p.size), logit]), family=Binomial()).fit(
            tol=1e-14, tol_criterion="params")
        glm_citl = GLM(y, np.ones((p.size, 1)), family=Binomial(), offset=logit).fit(
            tol=1e-14, tol_criterion="params")
    for got, before, converged in (((vp.intercept, vp.slope), ab, glm.params), ((vp.citl,), a0, glm_citl.params)):
        assert np.array(got) == pytest.approx(before, rel=1e-10, abs=1e-10)
        assert np.array(got) == pytest.approx(np.asarray(converged), rel=1e-10, abs=1e-10)
    for got, before, converged in (((vp.intercept_se, vp.slope_se), ab_se, glm.bse), ((vp.citl_se,), a0_se,
                                                                                       glm_citl.bse)):
        assert np.array(got) == pytest.approx(before, rel=1e-10)
        assert np.array(got) == pytest.approx(np.asarray(converged), rel=1e-10)
    assert seen[0].passes == passes < evaluations  # from (0, 1) the fits alone took `evaluations` passes
