"""The T-Cal test: statistic, consistency resampling, Monte Carlo decision, adaptive version.

References: T-Cal's statistic against a loop over bins and pairs of rows
(and against a transcription of the authors' ``plugin_ece``); the debiased
statistic against ``calib_ci``; the vectorised resampled statistics against
loops / ``calib_ci`` run on each explicitly built resampled data set; label draws against exact alias-table algebra and a chi-square check;
the Monte Carlo decision against hand-counted order statistics; size and power
by Monte Carlo.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

import calibtest as ct
from calibtest.display.format import fmt
from calibtest.core import tcal
from calibtest.cli import main


def draw_labels(rng, Q):
    return np.minimum((rng.random(Q.shape[0])[:, None] >= np.cumsum(Q, axis=1)).sum(axis=1), Q.shape[1] - 1)


@pytest.fixture(scope="module")
def multiclass():
    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.ones(4), size=400)
    return P, draw_labels(rng, P)


def slow_tcal_statistic(u, bins):
    """T-Cal's statistic by loops: (1/n) sum_b (1/c_b) sum_{a != a' in bin b} U_a . U_a'."""
    n = len(u)
    total = 0.0
    for b in set(bins.tolist()):
        rows = [i for i in range(n) if bins[i] == b]
        pair_sum = sum(float(u[i] @ u[j]) for i in rows for j in rows if i != j)
        total += pair_sum / len(rows)
    return total / n


def authors_plugin_ece(scores, labels, num_bins):
    """Transcription of ``plugin_ece(scores, labels, num_bins, p=2, debias=True)`` (github.com/dh7401/T-Cal)."""
    indexes = np.floor(num_bins * scores).astype(int)
    indexes = stats.rankdata(indexes, method="dense") - 1
    counts = np.bincount(indexes)
    counts[counts == 0] += 1
    error = ((np.bincount(indexes, weights=scores - labels) ** 2
              - np.bincount(indexes, weights=(scores - labels) ** 2)) / counts).sum()
    return error / len(scores)


KWARGS = ("binary", "top1", "top1_matrix", "topk", "full")


def case_kwargs(case, P, labels):
    conf = P.max(axis=1)
    correct = (P.argmax(axis=1) == labels).astype(int)
    return {"binary": dict(y=correct, probs=conf),
            "top1": dict(y=correct, probs=conf, n_classes=4),
            "top1_matrix": dict(y=labels, probs=P),
            "topk": dict(y=labels, probs=P, k=2),
            "full": dict(y=labels, probs=P, k="full")}[case]


# ----------------------------------------------------------------------------- statistic
@pytest.mark.parametrize("case", KWARGS)
def test_debiased_statistic_equals_calib_ci(case, multiclass):
    P, labels = multiclass
    kwargs = case_kwargs(case, P, labels)
    res = ct.tcal_test(**kwargs, n_bins=5, n_draws=50, rng=0, statistic="debiased")
    ref = ct.calib_ci(**kwargs, n_bins=5)
    assert res.statistic == pytest.approx(ref.estimate, rel=1e-12, abs=1e-16)
    assert res.mode == ref.mode and res.n == ref.n and res.k == ref.k and res.n_bins == 5
    assert res.statistic_type == "debiased" and res.to_dict()["statistic_type"] == "debiased"


@pytest.mark.parametrize("case", KWARGS)
def test_tcal_statistic_equals_a_loop_over_pairs(case, multiclass):
    P, labels = multiclass
    P, labels = P[:120], labels[:120]                      # small: the loop is O(n^2)
    kwargs = case_kwargs(case, P, labels)
    res = ct.tcal_test(**kwargs, n_bins=5, n_draws=50, rng=0)
    ref = ct.calib_ci(**kwargs, n_bins=5)                  # only for its bins and U
    expected = slow_tcal_statistic(ref.data.u, ref.partition.inverse)
    assert res.statistic_type == "tcal"
    assert res.statistic == pytest.approx(expected, rel=1e-12, abs=1e-16)
    assert res.statistic != pytest.approx(ref.estimate, rel=1e-6)   # it is not the c_b - 1 version


def test_tcal_statistic_equals_the_authors_code():
    rng = np.random.default_rng(12)
    p = rng.random(500)
    y = (rng.random(500) < p ** 1.3).astype(int)
    for B in (3, 10, 40):
        res = ct.tcal_test(y=y, probs=p, n_bins=B, n_draws=20, rng=0)
        assert np.array_equal(ct.calib_ci(y=y, probs=p, n_bins=B).partition.inverse,
                              stats.rankdata(np.floor(B * p), method="dense") - 1)   # same equal-width bins
        assert res.statistic == pytest.approx(authors_plugin_ece(p, y, B), rel=1e-12, abs=1e-16)


def test_core_statistics_on_arbitrary_bins():
    rng = np.random.default_rng(13)
    z = rng.dirichlet(np.ones(3), size=60)
    u = np.eye(3)[rng.integers(0, 3, 60)] - z
    bins = rng.integers(0, 25, size=60)                    # sparse bins, many singletons
    core = tcal.tcal_statistic_threshold(z, u, bins, n_draws=19, rng=0, full=True)
    assert core.statistic[0] == pytest.approx(slow_tcal_statistic(u, bins), rel=1e-12)
    deb = tcal.tcal_statistic_threshold(z, u, bins, n_draws=19, rng=0, full=True, statistic="debiased")
    slow_deb = sum(sum(float(u[i] @ u[j]) for i in np.flatnonzero(bins == b) for j in np.flatnonzero(bins == b)
                       if i != j) / ((bins == b).sum() - 1) for b in set(bins.tolist()) if (bins == b).sum() >= 2)
    assert deb.statistic[0] == pytest.approx(slow_deb / 60, rel=1e-12)


def test_formula_form(multiclass):
    P, labels = multiclass
    df = pd.DataFrame(P, columns=["a", "b", "c", "d"]).assign(y=labels)
    res = ct.tcal_test("y ~ a + b + c + d", data=df, k="full", n_bins=3, n_draws=30, rng=1)
    assert "statistic='tcal'" in res.call and "n_draws=30" in res.call
    arr = ct.tcal_test(y=labels, probs=P, k="full", n_bins=3, n_draws=30, rng=1)
    assert res.statistic == arr.statistic and res.pvalue == arr.pvalue
    assert res.formula == "y ~ a + b + c + d" and res.call.startswith("tcal_test(")


def test_same_seed_same_output(multiclass):
    P, labels = multiclass
    a = ct.tcal_test(y=labels, probs=P, k="full", n_bins=3, n_draws=120, rng=7)
    b = ct.tcal_test(y=labels, probs=P, k="full", n_bins=3, n_draws=120, rng=np.random.default_rng(7))
    c = ct.tcal_test(y=labels, probs=P, k="full", n_bins=3, n_draws=120, rng=8)
    assert {**a.to_dict(), "seed": None} == {**b.to_dict(), "seed": None}
    assert a.seed == 7 and b.seed == "Generator"
    assert np.array_equal(a.null_draws, b.null_draws)
    assert not np.array_equal(a.null_draws, c.null_draws)
    for statistic in ("tcal", "debiased"):                  # default draws, both statistics
        d = ct.tcal_test(y=labels, probs=P, k="full", n_bins=3, rng=7, statistic=statistic)
        e = ct.tcal_test(y=labels, probs=P, k="full", n_bins=3, rng=7, statistic=statistic)
        assert d.to_dict() == e.to_dict() and np.array_equal(d.null_draws, e.null_draws)
        assert d.n_draws == 3000 and d.draws_auto


# ----------------------------------------------------------------------------- resampling
def explicit_statistic(case, P, z, idx_r, lab_r, B):
    """calib_ci on the r-th resampled data set built row by row."""
    if case == "binary":
        return ct.calib_ci(y=(lab_r == 0).astype(int), probs=z[idx_r, 0], n_bins=B).estimate
    if case == "full":
        return ct.calib_ci(y=lab_r, probs=P[idx_r], k="full", n_bins=B).estimate
    # top-2: label 0/1 = the class ranked 1st/2nd in the resampled row, 2 = a class outside the top 2
    order = np.argsort(-P[idx_r], axis=1, kind="stable")
    y = order[np.arange(len(idx_r)), np.minimum(lab_r, 2)]
    return ct.calib_ci(y=y, probs=P[idx_r], k=2, n_bins=B).estimate


@pytest.mark.parametrize("statistic", ["debiased", "tcal"])
@pytest.mark.parametrize("case", ["binary", "topk", "full"])
def test_block_statistics_match_explicit_resamples(case, statistic, multiclass):
    P, labels = multiclass
    rng = np.random.default_rng(3)
    B = 4
    res = ct.calib_ci(y=labels if case != "binary" else (P[:, 0] > 0.3).astype(int),
                      probs=P if case != "binary" else P[:, 0], k={"binary": None, "topk": 2, "full": "full"}[case],
                      n_bins=B)
    z, n = res.data.z, res.n
    full = case == "full"
    bins = res.partition.inverse
    tables = tcal._pair_tables(z, full, [bins], [int(bins.max()) + 1])
    pairs = tcal._draw_pairs(rng, 6, n, tables)
    idx, lab = tcal._pair_rows(pairs, tables.c)
    out = tcal._block_statistics(pairs, tables, statistic)
    for r in range(6):
        if statistic == "debiased":
            expected = explicit_statistic(case, P, z, idx[r], lab[r], B)
        else:   # the resampled data set built row by row: U* = onehot(label) - z* (label d = "none")
            d = z.shape[1]
            onehot = np.vstack([np.eye(d), np.zeros((1, d))]) if not full else np.eye(d)
            expected = slow_tcal_statistic(onehot[lab[r]] - z[idx[r]], bins[idx[r]])
        assert out[0, r] == pytest.approx(expected, rel=1e-10, abs=1e-15)


def test_helmert_basis_is_orthonormal_and_sum_zero():
    for d in (2, 3, 7):
        h = tcal._helmert(d)
        np.testing.assert_allclose(h.T @ h, np.eye(d - 1), atol=1e-14)
        np.testing.assert_allclose(h.sum(axis=0), 0.0, atol=1e-14)
    np.testing.assert_allclose(tcal._helmert(2)[:, 0], [2 ** -0.5, -(2 ** -0.5)])


def test_draws_do_not_depend_on_block_size(multiclass):
    P, labels = multiclass
    bins = ct.calib_ci(y=labels, probs=P, k="full", n_bins=3).partition.inverse
    core = [tcal.tcal_statistic_threshold(P, np.eye(4)[labels] - P, bins, n_draws=70, rng=11, full=True,
                                          run=tcal.DrawRun(block_size=bs)).null_draws for bs in (1, 13, 70)]
    assert np.array_equal(core[0], core[1]) and np.array_equal(core[0], core[2])


def test_alias_tables_reproduce_probabilities():
    rng = np.random.default_rng(4)
    p = np.vstack([rng.dirichlet(np.ones(5) * 0.5, size=200), np.eye(5), np.full((1, 5), 0.2)])
    prob, alias = tcal._alias_tables(p)
    n, c = p.shape
    prob, alias = prob.reshape(n, c), alias.reshape(n, c)
    back = prob.copy()
    for j in range(c):  # add the alias mass of column j to its alias target
        np.add.at(back, (np.arange(n), alias[:, j]), 1.0 - prob[:, j])
    np.testing.assert_allclose(back / c, p, atol=1e-14)
    assert np.all((prob >= -1e-14) & (prob <= 1 + 1e-14))


def test_label_draws_follow_the_predictions():
    z = np.array([[0.5, 0.3], [0.1, 0.05], [0.9, 0.1], [0.0, 0.0]])    # top-2 vectors; rest = "none"
    tables = tcal._pair_tables(z, False, [np.zeros(4, dtype=np.intp)], [1])
    idx, lab = tcal._pair_rows(tcal._draw_pairs(np.random.default_rng(5), 5000, 4, tables), tables.c)
    probs = np.column_stack([z, 1 - z.sum(1)])
    for i in range(4):
        counts = np.bincount(lab[idx == i], minlength=3)
        expected = probs[i] * counts.sum()
        keep = expected > 0
        assert np.all(counts[~keep] == 0)
        if keep.sum() > 1:
            assert stats.chisquare(counts[keep], expected[keep]).pvalue > 1e-4
    assert np.all(np.bincount(idx.ravel(), minlength=4) > 4000)


# ----------------------------------------------------------------------------- decision
def test_monte_carlo_decision_by_hand():
    draws = np.arange(1.0, 20.0)[None, :]                 # R = 19 draws 1..19
    thr, p = tcal._mc_decision(np.array([19.5]), draws, 0.05)
    assert thr[0] == 19.0 and p[0] == pytest.approx(1 / 20)     # j = floor(0.05 * 20) - 1 = 0: the maximum
    thr, p = tcal._mc_decision(np.array([19.0]), draws, 0.05)
    assert p[0] == pytest.approx(2 / 20)                   # ties count against rejection
    thr, _ = tcal._mc_decision(np.array([5.0]), draws, 0.10)
    assert thr[0] == 18.0                                  # j = 1: the second largest
    thr, p = tcal._mc_decision(np.array([100.0]), np.arange(10.0)[None, :], 0.05)
    assert np.isinf(thr[0]) and p[0] == pytest.approx(1 / 11)   # R = 10 cannot reach level 0.05


def test_reject_iff_pvalue_at_most_alpha():
    rng = np.random.default_rng(6)
    draws = rng.integers(0, 30, size=(400, 99)).astype(float)    # many ties
    stat = rng.integers(0, 32, size=400).astype(float)
    for alpha in (0.01, 0.05, 0.1, 0.2):
        thr, p = tcal._mc_decision(stat, draws, alpha)
        assert np.array_equal(stat > thr, p <= alpha + 1e-12)


# ----------------------------------------------------------------------------- adaptive
def test_adaptive_scales():
    # d = 1, n = 1000: 2 log2(1000 / sqrt(log 1000)) = 17.14 -> 2^1..2^17
    assert tcal.adaptive_scales(1000, 1) == tuple(2**b for b in range(1, 18))
    assert tcal.adaptive_scales(1000, 2) == tuple(2**b for b in range(1, 9))
    assert tcal.adaptive_scales(50, 9) == (2,)


def test_adaptive_result(multiclass):
    P, labels = multiclass
    res = ct.tcal_test(y=labels, probs=P, k="full", adaptive=True, n_draws=79, rng=2, statistic="debiased")
    L = len(res.scales)
    # d = 3: (2/3) log2(400 / sqrt(log 400)) = 4.90 -> B = 2, 4, 8, 16
    assert res.adaptive and res.scales == (2, 4, 8, 16) and L == 4
    assert res.level == pytest.approx(0.05 / L)
    assert res.pvalue == pytest.approx(min(1.0, L * min(res.pvalues)))
    assert res.reject == any(t > c for t, c in zip(res.statistics, res.thresholds))
    best = int(np.argmin(res.pvalues))
    assert res.n_bins == res.scales[best] and res.statistic == res.statistics[best]
    for B, t in zip(res.scales, res.statistics):
        assert t == pytest.approx(ct.calib_ci(y=labels, probs=P, k="full", n_bins=B).estimate, rel=1e-12, abs=1e-16)
    listed = ct.tcal_test(y=labels, probs=P, k="full", n_bins=[2, 4, 8, 16], n_draws=79, rng=2,
                          statistic="debiased")
    assert listed.adaptive and listed.to_dict() == res.to_dict()
    tab = res.scale_table()
    assert list(tab["n_bins"]) == list(res.scales)


def test_adaptive_detects_miscalibration():
    rng = np.random.default_rng(9)
    p = rng.random(600)
    y = (rng.random(600) < special.expit(0.3 * special.logit(p))).astype(int)
    res = ct.tcal_test(y=y, probs=p, adaptive=True, n_draws=300, rng=1)
    assert res.reject and res.pvalue <= 0.05


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_adaptive_rejects_at_alpha_001_over_many_scales():
    rng = np.random.default_rng(21)
    n = 2000
    p = rng.random(n)
    y = (rng.random(n) < special.expit(0.5 * special.logit(p))).astype(int)
    # d = 1: 2 log2(2000 / sqrt(log 2000)) = 19.19 -> L = 19 scales, level 0.01 / 19
    res = ct.tcal_test(y=y, probs=p, adaptive=True, alpha=0.01, rng=3)
    assert len(res.scales) == 19
    # default R: smallest R with (R + 1) * 0.01 / 19 >= 2 is 2 * 1900 - 1 = 3799 (> 3000)
    assert res.n_draws == 3799 and res.draws_auto and res.null_draws.shape == (19, 3799)
    assert all(math.isfinite(t) for t in res.thresholds)
    # the threshold is the 2nd largest draw: j = floor(3800 * 0.01 / 19) - 1 = 1
    assert res.thresholds[0] == np.sort(res.null_draws[0])[-2]
    assert res.reject and res.pvalue <= 0.01
    # the old default (1000 draws) could not reject here: it now raises instead
    with pytest.raises(ValueError, match=r"n_draws=1000 is too small.*n_draws >= 1899"):
        ct.tcal_test(y=y, probs=p, adaptive=True, alpha=0.01, n_draws=1000, rng=3)
    ok = ct.tcal_test(y=y, probs=p, adaptive=True, alpha=0.01, n_draws=1899, rng=3)   # (1899 + 1) * 0.01 / 19 = 1
    assert ok.thresholds[0] == ok.null_draws[0].max() and not ok.draws_auto


def test_too_few_draws_raise():
    rng = np.random.default_rng(22)
    p = rng.random(200)
    y = (rng.random(200) < p).astype(int)
    with pytest.raises(ValueError, match=r"n_draws=18 is too small.*n_draws >= 19"):     # 19 * 0.05 < 1
        ct.tcal_test(y=y, probs=p, n_bins=4, n_draws=18)
    assert math.isfinite(ct.tcal_test(y=y, probs=p, n_bins=4, n_draws=19, rng=0).threshold)   # 20 * 0.05 = 1
    with pytest.raises(ValueError, match=r"n_draws=98 is too small.*n_draws >= 99"):     # 99 * 0.01 < 1
        ct.tcal_test(y=y, probs=p, n_bins=4, n_draws=98, alpha=0.01)
    with pytest.raises(ValueError, match=r"n_draws=58 is too small.*n_draws >= 59"):     # 3 scales: 59 * 0.05 / 3 < 1
        ct.tcal_test(y=y, probs=p, n_bins=[2, 4, 8], n_draws=58)
    with pytest.raises(ValueError, match=r"n_draws=9 is too small"):
        tcal.tcal_statistic_threshold(p[:, None], (y - p)[:, None], np.zeros(200, dtype=int), n_draws=9)


def test_default_draws_rule():
    assert tcal.min_draws(0.05) == 19 and tcal.min_draws(0.01) == 99 and tcal.min_draws(0.05 / 3) == 59
    assert tcal.default_draws(0.05) == 3000 and tcal.default_draws(0.05, 23) == 3000
    assert tcal.default_draws(0.01, 23) == 4599          # (4599 + 1) * 0.01 / 23 = 2
    assert tcal.default_draws(0.001, 5) == 9999           # (9999 + 1) * 0.001 / 5 = 2


# ----------------------------------------------------------------------------- output, errors
def test_summary_dict_iter(multiclass):
    P, labels = multiclass
    res = ct.tcal_test(y=labels, probs=P, k="full", n_bins=3, n_draws=19, rng=3)
    stat, pval = res
    assert stat == res.statistic and pval == res.pvalue
    text = str(res.summary())
    assert "T-Cal" in text and "B = 3" in text and "full (canonical" in text
    assert "T-Cal (/ c_b)" in text and "/ c_b (Lee et al. 2023)" in text
    assert "too few" not in text
    assert "R = 19 resamples are too few" in str(res.summary(alpha=0.01))   # 0.01 * 20 < 1: infinite
    d = res.to_dict()
    json.dumps(d)
    assert d["threshold"] == res.threshold and d["method"] == "tcal" and d["statistic_type"] == "tcal"
    assert d["draws_auto"] is False and "statistic=tcal" in repr(res)
    assert "TCalResult" in repr(res)
    deb = ct.tcal_test(y=labels, probs=P, k="full", n_bins=3, rng=3, statistic="debiased")
    text = str(deb.summary())
    assert "debiased (/ (c_b - 1))" in text and "3000 (auto)" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_bad_input(multiclass):
    P, labels = multiclass
    with pytest.raises(ValueError, match="n_draws must be >= 1"):
        ct.tcal_test(y=labels, probs=P, n_draws=0)
    with pytest.raises(TypeError, match="n_draws"):
        ct.tcal_test(y=labels, probs=P, n_draws=10.5)
    with pytest.raises(TypeError, match="rng"):
        ct.tcal_test(y=labels, probs=P, rng="seed")
    with pytest.raises(ValueError, match="statistic must be one of"):
        ct.tcal_test(y=labels, probs=P, statistic="plugin")
    with pytest.raises(ValueError, match="adaptive=True chooses the bin counts"):
        ct.tcal_test(y=labels, probs=P, adaptive=True, n_bins=5)
    with pytest.raises(ValueError, match="n_bins must be >= 1, got 0"):
        ct.tcal_test(y=labels, probs=P, n_bins=[4, 0])
    with pytest.raises(ValueError, match="binary mode already is full calibration"):
        ct.tcal_test(y=labels == 0, probs=P[:, 0], k="full")
    with pytest.raises(ValueError, match="bins must be integer bin numbers"):
        tcal.tcal_statistic_threshold(P[:, :1], P[:, :1], np.zeros(3, dtype=int))


def test_cli_tcal(tmp_path, capsys, multiclass):
    P, labels = multiclass
    df = pd.DataFrame(P, columns=["p0", "p1", "p2", "p3"]).assign(label=labels)
    path = tmp_path / "preds.csv"
    df.to_csv(path, index=False, float_format="%.17g")
    assert main(["tcal", str(path), "--formula", "label ~ p0 + p1 + p2 + p3", "--k", "full", "--bins", "3",
                 "--draws", "50", "--seed", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = ct.tcal_test("label ~ p0 + p1 + p2 + p3", data=df, k="full", n_bins=3, n_draws=50, rng=4)
    assert out == ref.to_dict()
    assert main(["tcal", str(path), "--formula", "label ~ p0 + p1 + p2 + p3", "--draws", "50"]) == 0
    assert "T-Cal test" in capsys.readouterr().out


# ----------------------------------------------------------------------------- Monte Carlo
@pytest.mark.slow
def test_tcal_size_and_power_full_calibration():
    """Size at a calibrated model: the paper's Setting 1 as full calibration (K = 2) and K = 3 Dirichlet.

    n = 300, B = 10 (K = 2) and B = 5 (K = 3), R = 99 draws (alpha (R + 1) = 5 is an
    integer); 300 and 200 data sets: MC s.e. of a rate near 0.05 is 0.0126 and
    0.0154.  Power at beta = 0.4 on 40 data sets shows the test is not trivially
    conservative.
    """
    rng = np.random.default_rng(31)
    n, alpha = 300, 0.05

    def setting1(beta):
        z1 = rng.random(n)
        y1 = rng.random(n) < special.expit(beta * special.logit(z1))
        return np.column_stack([z1, 1 - z1]), np.where(y1, 0, 1)

    def dirichlet3(beta):
        P = rng.dirichlet(np.ones(3), size=n)
        Q = P**beta / (P**beta).sum(axis=1, keepdims=True)
        return P, draw_labels(rng, Q)

    for make, B, reps in ((setting1, 10, 300), (dirichlet3, 5, 200)):
        se = math.sqrt(alpha * (1 - alpha) / reps)
        rejects = sum(ct.tcal_test(y=y, probs=P, k="full", n_bins=B, n_draws=99, rng=rng).reject
                      for P, y in (make(1.0) for _ in range(reps)))
        assert rejects / reps <= alpha + 3 * se
        power = np.mean([ct.tcal_test(y=y, probs=P, k="full", n_bins=B, n_draws=99, rng=rng).reject
                         for P, y in (make(0.4) for _ in range(40))])
        assert power >= 0.8


def test_summary_at_another_alpha_and_reference():
    rng = np.random.default_rng(9)
    p = rng.uniform(size=300)
    y = (rng.uniform(size=300) < p).astype(int)
    res = ct.tcal_test(y=y, probs=p, n_bins=6, n_draws=99, rng=1)
    expected = np.sort(res.null_draws[0])[::-1][int(np.floor(0.1 * 100 + 1e-9)) - 1]
    assert res.thresholds_at(0.1)[0] == expected
    row = next(line for line in str(res.summary(alpha=0.1)).splitlines() if line.startswith("B = 6"))
    assert row.split()[4] == fmt(expected)
    assert res.thresholds_at() == res.thresholds
    doc = " ".join(ct.tcal_test.__doc__.split())
    assert "T-Cal: An optimal test" in doc and "24(335)" in doc
    assert "2408.08998" in ct.calib_compare.__doc__


# ----------------------------------------------------------------------------- progress and speed (issue 27 point 5)
def _plain_draws(gen, size, n, tables):
    """The consistency resample written out with fresh arrays (the reference of the buffered draws)."""
    x = gen.random((size, n)) * (n * tables.c)
    f = np.floor(x).astype(np.intp)
    v = x - f
    return np.where(v < tables.prob[f], f, tables.alias[f])


@pytest.mark.parametrize("full, d", [(False, 1), (False, 3), (True, 4)])
def test_buffered_draws_equal_plain_draws(full, d):
    rng = np.random.default_rng(8)
    n = 700
    z = rng.dirichlet(np.ones(d), size=n) if full else rng.dirichlet(np.ones(d + 1), size=n)[:, :d]
    bins = (z[:, 0] * 5).astype(np.intp)
    tables = tcal._pair_tables(z, full, [bins], [5])
    buffers = tcal._DrawBuffers(6, n)
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    for size in (6, 6, 4):  # a shorter last block reuses the first rows of the buffers
        got = tcal._draw_pairs(g1, size, n, tables, buffers)
        assert np.array_equal(got, _plain_draws(g2, size, n, tables))


def _binary(n, seed=4):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.95, n)
    return (rng.random(n) < p).astype(int), p


@pytest.mark.parametrize("progress, ci_env, shown", [(True, None, True), (False, None, False),
                                                     (None, "1", False), (None, None, False)])
def test_tcal_progress_bar(capsys, monkeypatch, progress, ci_env, shown):
    pytest.importorskip("tqdm")
    if ci_env is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci_env)
    y, p = _binary(300)
    res = ct.tcal_test(y=y, probs=p, n_bins=5, n_draws=400, rng=2, progress=progress)
    err = capsys.readouterr().err
    assert ("T-Cal resamples" in err) is shown  # None: a short run (and captured stderr is no terminal)
    ref = ct.tcal_test(y=y, probs=p, n_bins=5, n_draws=400, rng=2, progress=False)
    assert np.array_equal(res.null_draws, ref.null_draws) and res.pvalue == ref.pvalue


def test_tcal_progress_is_checked():
    y, p = _binary(50)
    with pytest.raises(TypeError, match="progress must be True, False or None"):
        ct.tcal_test(y=y, probs=p, progress="yes")
