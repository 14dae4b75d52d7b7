"""Degenerate predictions: every prediction of a bin exactly 0 or 1, so the conditional null law of T is a point mass.

Expected values are derived by hand from the error counts (T of a bin of c rows at p = 0 with k labels
y = 1 is (k^2 - k) / (c - 1) / n), from R (the smallest Monte Carlo p-value 1 / (R + 1)) and from the
Monte Carlo formula applied to the returned draws.
"""
import math
import warnings

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.core.conditional import (conditional_bin_sums, conditional_moments, conditional_test,
                                        monte_carlo_test, point_mass_sign)

R = 199  # few draws keep the tests fast; every expected p-value below is derived from R


def hard_labels(n, right=0.7, seed=0):
    """Predictions exactly 0 or 1 that are right with probability ``right``."""
    rng = np.random.default_rng(seed)
    p = rng.integers(0, 2, n).astype(float)
    y = np.where(rng.random(n) < right, p, 1.0 - p).astype(int)
    return pd.DataFrame({"y": y, "p": p})


def hand_t(p, y, inverse, n):
    """T = (1/n) sum_b (S_b^2 - Q_b) / (c_b - 1), from the residuals, bin by bin (slow and obvious)."""
    total = 0.0
    for b in np.unique(inverse):
        u = (y - p)[inverse == b]
        if u.size >= 2:
            total += (u.sum() ** 2 - (u ** 2).sum()) / (u.size - 1)
    return total / n


@pytest.mark.parametrize("n", [200, 2000])
def test_hard_labels_right_70_percent(n):
    df = hard_labels(n)
    errors = int(np.sum(df.y != df.p))
    assert errors > 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = ct.calib_test("y ~ p", data=df, n_draws=R, rng=3)
    smallest = 1.0 / (R + 1)
    assert res.statistic == math.inf
    assert res.pvalue == smallest and res.reject
    sc = res.scales
    assert (sc["sd"] == 0).all()
    assert (sc["z"] == math.inf).all()
    assert (sc["pvalue"] == smallest).all()
    assert res.spiegelhalter_z == math.inf and res.pvalue_spiegelhalter == smallest
    assert (res.null_draws == 0).all() and (res.spiegelhalter_draws == 0).all()
    # T at each scale by hand: p = 0 rows share the first bin, p = 1 rows the last one
    p, y = df.p.to_numpy(), df.y.to_numpy(float)
    expected_t = hand_t(p, y, p.astype(int), n)
    assert expected_t > 0
    np.testing.assert_allclose(sc["T"], expected_t, rtol=1e-12)


@pytest.mark.parametrize("n", [200, 2000])
def test_single_b_equals_calib_ci_monte_carlo(n):
    df = hard_labels(n, seed=1)
    smallest = 1.0 / (R + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for b in (1, 2, 10):
            single = ct.calib_test("y ~ p", data=df, n_bins=b, n_draws=R, rng=7)
            ci = ct.calib_ci("y ~ p", data=df, n_bins=b, null="monte-carlo", n_null_draws=R, rng=7)
            assert single.pvalue == ci.null_pvalue
            if b > 1:  # 0 and 1 in different bins: T > 0 from the errors alone
                assert single.pvalue == smallest and not ci.contains_zero
        # the other two nulls agree in verdict: the exact point-mass p-value 0, and the asymptotic z test
        cond = ct.calib_ci("y ~ p", data=df, null="conditional")
        asym = ct.calib_ci("y ~ p", data=df, null="asymptotic")
    assert cond.null_pvalue == 0.0 and cond.null_zstat == math.inf and not cond.contains_zero
    assert asym.null_pvalue < 0.05 and not asym.contains_zero


def test_all_right_is_not_rejected():
    df = hard_labels(300, right=1.0, seed=2)
    assert (df.y == df.p).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = ct.calib_test("y ~ p", data=df, n_draws=R, rng=1)
        ci_mc = ct.calib_ci("y ~ p", data=df, null="monte-carlo", n_null_draws=R, rng=1)
        ci_cond = ct.calib_ci("y ~ p", data=df, null="conditional")
        single = ct.calib_test("y ~ p", data=df, n_bins=ci_mc.n_bins, n_draws=R, rng=1)
    assert res.statistic == 0.0 and res.pvalue == 1.0 and not res.reject
    assert (res.scales["z"] == 0).all() and res.spiegelhalter_z == 0.0
    assert single.pvalue == ci_mc.null_pvalue == 1.0
    assert ci_cond.null_pvalue == 1.0 and ci_cond.null_zstat == 0.0 and ci_cond.contains_zero


def test_top1_confidence_exactly_one():
    rng = np.random.default_rng(4)
    n = 500
    df = pd.DataFrame({"correct": (rng.random(n) < 0.75).astype(int), "conf": np.ones(n)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = ct.calib_test("correct ~ conf", data=df, n_classes=5, n_draws=R, rng=2)
        single = ct.calib_test("correct ~ conf", data=df, n_classes=5, n_bins=4, n_draws=R, rng=2)
        ci = ct.calib_ci("correct ~ conf", data=df, n_classes=5, n_bins=4, null="monte-carlo",
                         n_null_draws=R, rng=2)
    wrong = int(n - df.correct.sum())
    assert res.statistic == math.inf and res.pvalue == 1.0 / (R + 1)
    # one bin of n rows at confidence 1 with `wrong` errors: T = (wrong^2 - wrong) / (n - 1) / n
    np.testing.assert_allclose(res.scales["T"], (wrong ** 2 - wrong) / (n - 1) / n, rtol=1e-12)
    assert single.pvalue == ci.null_pvalue == 1.0 / (R + 1)


def test_mixture_of_degenerate_and_ordinary_predictions():
    """Bins that mix exact 0/1 with ordinary predictions have sd > 0 and are standardized as before."""
    rng = np.random.default_rng(5)
    n = 400
    p = np.where(rng.random(n) < 0.5, rng.integers(0, 2, n), rng.uniform(0.05, 0.95, n)).astype(float)
    y = (rng.random(n) < p).astype(int)
    df = pd.DataFrame({"y": y, "p": p})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = ct.calib_test("y ~ p", data=df, n_draws=R, rng=4, spiegelhalter=False)
    sc = res.scales
    assert (sc["sd"] > 0).all()
    np.testing.assert_allclose(sc["z"], sc["T"] / sc["sd"], rtol=1e-12)
    z_null = np.asarray(res.null_draws)
    for i in range(len(sc)):  # the per-scale p-value is the Monte Carlo formula on the returned draws
        z = sc["z"].iloc[i]
        expected = (1 + np.count_nonzero(z_null[i] >= z - 100 * np.finfo(float).eps * abs(z))) / (R + 1)
        assert sc["pvalue"].iloc[i] == expected
    assert np.isfinite(res.statistic)


def test_mixed_scale_with_only_some_degenerate_bins():
    """A scale whose occupied bins are all degenerate gets z = +inf; at B = 1 the same rows share a bin."""
    # p in {0, 1} only, with one ordinary prediction alone in the middle bin
    p = np.r_[np.zeros(50), np.ones(50), 0.5]
    y = np.r_[np.zeros(48), np.ones(2), np.ones(47), np.zeros(3), 1.0]
    df = pd.DataFrame({"y": y.astype(int), "p": p})
    res = ct.calib_test("y ~ p", data=df, n_bins=[4], n_draws=R, rng=0)
    inverse = np.minimum((p * 4).astype(int), 3)
    assert hand_t(p, y, inverse, p.size) > 0
    sums = conditional_bin_sums(p, inverse)
    assert conditional_moments(sums, p.size).variance == 0  # the lone 0.5 row pairs with no random row
    assert res.statistic == math.inf and res.pvalue == 1.0 / (R + 1)


def test_point_mass_sign_cases():
    # one bin of zeros and ones (B = 1): one error of each kind gives S = 0, Q = 2, T < 0
    p = np.r_[np.zeros(5), np.ones(5)]
    y = np.r_[1.0, np.zeros(4), 0.0, np.ones(4)]
    inv = np.zeros(10, dtype=int)
    observed = np.where(y == 1, 0, 1)  # class 0 is y = 1 in the 1-dim modes
    assert hand_t(p, y, inv, 10) < 0
    assert point_mass_sign(p, inv, observed) == -1
    # a single error in a bin of zeros: S = Q = 1, T = 0 although the label has probability 0
    y2 = np.r_[1.0, np.zeros(4), np.ones(5)]
    inv2 = (p > 0).astype(int)
    assert hand_t(p, y2, inv2, 10) == 0
    assert point_mass_sign(p, inv2, np.where(y2 == 1, 0, 1)) == 0
    # two errors in the bin of zeros: T = 2 / 4 / 10 > 0
    y3 = np.r_[1.0, 1.0, np.zeros(3), np.ones(5)]
    assert point_mass_sign(p, inv2, np.where(y3 == 1, 0, 1)) == 1
    mc = monte_carlo_test(p, inv2, np.where(y3 == 1, 0, 1), n_draws=R, rng=0)
    assert mc.pvalue == 1.0 / (R + 1)
    # labels equal to the predictions: a possible draw, sign 0 and p = 1
    assert point_mass_sign(p, inv2, np.where(p == 1, 0, 1)) == 0
    assert monte_carlo_test(p, inv2, np.where(p == 1, 0, 1), n_draws=R, rng=0).pvalue == 1.0


def test_point_mass_sign_full_calibration():
    """One-hot predictions of 3 classes (full calibration): an error is a label of probability 0."""
    z = np.tile(np.eye(3), (4, 1))  # 12 rows, each one-hot
    inv = np.argmax(z, axis=1)  # one bin per vertex
    right = np.argmax(z, axis=1)
    assert point_mass_sign(z, inv, right, complete=True) == 0
    wrong = right.copy()
    wrong[[0, 3]] = 1  # two rows of vertex 0 labelled class 1: S = (-2, 2, 0), Q = 4, T = 4 / 3 / 12
    assert point_mass_sign(z, inv, wrong, complete=True) == 1


def test_conditional_test_point_mass():
    m = conditional_moments(conditional_bin_sums(np.r_[np.zeros(4), np.ones(4)], np.r_[[0] * 4, [1] * 4]), 8)
    assert m.variance == 0
    zero, pos, neg = conditional_test(0.0, m, 0.05), conditional_test(0.1, m, 0.05), conditional_test(-0.1, m, 0.05)
    assert (zero.zstat, zero.pvalue) == (0.0, 1.0)
    assert (pos.zstat, pos.pvalue) == (math.inf, 0.0)
    assert (neg.zstat, neg.pvalue) == (-math.inf, 1.0)


@pytest.mark.parametrize("probs", ["{0, 1/2, 1}", "{0, 1}"])
def test_spiegelhalter_zero_denominator(probs):
    """z_S = (number of labels of probability 0) / 0: +inf when some, 0 when none."""
    rng = np.random.default_rng(6)
    values = [0.0, 0.5, 1.0] if probs == "{0, 1/2, 1}" else [0.0, 1.0]
    p = rng.choice(values, 300)
    y = (rng.random(300) < p).astype(int)  # calibrated: no label of probability 0
    df = pd.DataFrame({"y": y, "p": p})
    res = ct.calib_test("y ~ p", data=df, n_bins=[2], n_draws=R, rng=1)
    assert res.spiegelhalter_z == 0.0 and res.pvalue_spiegelhalter == 1.0
    y[np.flatnonzero(p == 0)[0]] = 1  # one label of probability 0
    res = ct.calib_test("y ~ p", data=df.assign(y=y), n_bins=[2], n_draws=R, rng=1)
    assert res.spiegelhalter_z == math.inf and res.pvalue_spiegelhalter == 1.0 / (R + 1)
    assert res.pvalue == 1.0 / (R + 1)


@pytest.mark.parametrize("right", [0.7, 1.0])
def test_evidence_has_no_nan_and_no_warning(right):
    df = hard_labels(400, right=right, seed=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ev = ct.evidence("y ~ p", data=df, rng=3)
        text = str(ev.summary())
        html = ev._repr_html_() if hasattr(ev, "_repr_html_") else ""
    for shown in (text, ev.conclusion(), html):
        assert "nan" not in shown.lower().replace("nans", "")
        assert "inf%" not in shown
    table = ev.table
    # the conclusion agrees with the table: every rejecting row is named as rejecting
    if right < 1:
        assert table.loc["calib_test", "reject"] and table.loc["calib_ci", "reject"]
        assert ev.verdict == "evidence"
        assert table.loc["hosmer_lemeshow", "statistic"] == math.inf
        assert table.loc["hosmer_lemeshow", "pvalue"] == 0.0
        assert "hl_sparse" not in ev.reasons
    else:
        assert not any(table["reject"]) and ev.verdict == "no evidence"


def test_evidence_point_mass_sentence_not_smooth():
    """One error per class: T = 0 at every scale, but Spiegelhalter's z is +inf; not called 'smooth'."""
    p = np.r_[np.zeros(100), np.ones(100)]
    y = p.copy()
    y[0] = 1.0
    df = pd.DataFrame({"y": y.astype(int), "p": p})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ev = ct.evidence("y ~ p", data=df, rng=1)
    assert ev.test.statistic == math.inf and ev.table.loc["calib_test", "reject"]
    assert "point_mass" in ev.reasons and "smooth" not in ev.reasons


def test_hosmer_lemeshow_expected_zero():
    """A group expecting 0 events that observes one contributes +inf; one that observes none, 0."""
    p = np.r_[np.zeros(50), np.ones(50)]
    y = p.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        right = ct.hosmer_lemeshow(y=y, probs=p, groups=4)
        y[0] = 1.0  # an event at p = 0, in group 1 (rows sorted stably by p)
        wrong = ct.hosmer_lemeshow(y=y, probs=p, groups=4)
        weighted = ct.hosmer_lemeshow(y=y, probs=p, groups=4, weights=np.ones(100))
    assert right.statistic == 0.0 and right.pvalue == 1.0
    assert (right.table["chi2"] == 0).all()
    assert wrong.statistic == math.inf and wrong.pvalue == 0.0 and wrong.pvalue_df_groups_minus_2 == 0.0
    assert list(wrong.table["chi2"]) == [math.inf, 0.0, 0.0, 0.0]
    assert weighted.statistic == math.inf and weighted.pvalue == 0.0


def test_size_exact_with_some_predictions_at_0_and_1():
    """Under H0 no label has probability 0, so z is never +inf, and the rejection rate is alpha.

    200 calibrated data sets (n = 120, a third of the predictions exactly 0 or 1), R = 39 draws:
    P(p <= 0.1) = 4 / 40 = 0.1 exactly; the Monte Carlo s.e. of the rate is sqrt(0.1 * 0.9 / 200) = 0.021,
    and the check allows 3.5 s.e.
    """
    rng = np.random.default_rng(11)
    reps, n, r = 200, 120, 39
    rejected = 0
    for i in range(reps):  # a loop over the few data sets of a size check
        p = np.where(rng.random(n) < 1 / 3, rng.integers(0, 2, n), rng.random(n)).astype(float)
        y = (rng.random(n) < p).astype(int)
        res = ct.calib_test(y=y, probs=p, n_bins=[2, 4, 8], n_draws=r, rng=i)
        assert math.isfinite(res.statistic)
        rejected += res.pvalue <= 0.1
    se = math.sqrt(0.1 * 0.9 / reps)
    assert abs(rejected / reps - 0.1) <= 3.5 * se


@pytest.mark.parametrize("n", [57, 2000, 20000])
def test_point_mass_gate_of_monte_carlo_test(n):
    """monte_carlo_test computes Var(T | Z) only when the draws allow a point mass: always for 0/1 predictions."""
    from calibtest.core.conditional import _DrawPlan, _may_be_point_mass

    df = hard_labels(n, seed=n)
    p = df.p.to_numpy()
    for inv in (np.zeros(n, dtype=int), p.astype(int)):  # one bin (0 and 1 together), two bins
        mc = monte_carlo_test(p, inv, np.where(df.y == 1, 0, 1), n_draws=R, rng=0)
        assert _may_be_point_mass(_DrawPlan(p[:, None], inv, n, False), np.asarray(mc.null_draws))
    rng = np.random.default_rng(n)
    q = rng.uniform(0.1, 0.9, n)
    inv = np.minimum((q * 5).astype(int), 4)
    mc = monte_carlo_test(q, inv, (rng.random(n) >= q).astype(int), n_draws=R, rng=0)
    assert not _may_be_point_mass(_DrawPlan(q[:, None], inv, n, False), np.asarray(mc.null_draws))


@pytest.mark.parametrize("k", ["full", 2])
def test_one_hot_vectors_multi_dim(k):
    """One-hot probability vectors (K = 3), right 70% of the time: every target's scales are point masses."""
    rng = np.random.default_rng(9)
    n, K = 300, 3
    cls = rng.integers(0, K, n)
    P = np.eye(K)[cls]
    y = np.where(rng.random(n) < 0.7, cls, (cls + 1) % K)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = ct.calib_test(y=y, probs=P, k=k, n_draws=R, rng=1)
        single = ct.calib_test(y=y, probs=P, k=k, n_bins=3, n_draws=R, rng=1)
        ci = ct.calib_ci(y=y, probs=P, k=k, n_bins=3, null="monte-carlo", n_null_draws=R, rng=1)
        right = ct.calib_test(y=cls, probs=P, k=k, n_draws=R, rng=1)
    assert (res.scales["sd"] == 0).all() and res.statistic == math.inf and res.pvalue == 1.0 / (R + 1)
    assert single.pvalue == ci.null_pvalue == 1.0 / (R + 1)
    assert right.statistic == 0.0 and right.pvalue == 1.0


def test_calib_test_summary_explains_infinite_z():
    df = hard_labels(300, seed=12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = ct.calib_test("y ~ p", data=df, n_draws=R, rng=1)
        text = str(res.summary())
        ordinary = ct.calib_test("y ~ p", data=df.assign(p=np.clip(df.p, 0.1, 0.9)), n_draws=R, rng=1)
        plain = str(ordinary.summary())
    flat = ", ".join(f"B = {b}" for b in res.n_bins)
    assert f"sd(T | Z) = 0 at {flat}:" in " ".join(text.split())
    assert "z_S = +inf" in " ".join(text.split())
    assert "sd(T | Z) = 0" not in plain and "+inf" not in plain


def test_hosmer_lemeshow_near_one_is_not_infinite():
    """Predictions just below 1 (not exactly 1) with events: finite HL, weighted or not."""
    rng = np.random.default_rng(13)
    p = np.full(60, np.nextafter(1.0, 0.0))
    y = np.ones(60)
    w = rng.uniform(0.5, 2.0, 60)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain = ct.hosmer_lemeshow(y=y, probs=p, groups=3)
        weighted = ct.hosmer_lemeshow(y=y, probs=p, groups=3, weights=w)
    assert math.isfinite(plain.statistic) and math.isfinite(weighted.statistic)


# --------------------------------------------------------------------------- the null is named for what it is
def test_conditional_null_of_hard_predictions_is_named_a_point_mass():
    """Every prediction 0 or 1: Var(T | Z) = 0, so the conditional law of T is the point mass at 0; the result
    says so (not 'shifted gamma') and its exact p-value is 0 when a label contradicts its prediction."""
    rng = np.random.default_rng(0)
    p = (rng.random(200) < 0.5).astype(float)
    y = np.where(rng.random(200) < 0.7, p, 1 - p)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = ct.calib_ci(y=y, probs=p)
        text = " ".join(str(res.summary()).split())
    assert res.null == "conditional" and res.null_method == "point mass"
    assert res.conditional.variance == 0 and res.estimate > 0 and res.null_pvalue == 0.0
    assert "Null: conditional (exact: a point mass at T = 0" in text and "shifted gamma" not in text


@pytest.mark.parametrize("kwargs", [{"weights": np.full(200, 2.0)}, {"prevalence": 0.3}])
def test_weighted_hard_predictions_all_right_give_no_evidence(kwargs):
    """Every label equals its 0/1 prediction: T_w = 0 and its null law is the point mass at 0, so p = 1 and the
    interval is [0, 0] (it used to raise 'the weighted calibrated-regime variance is 0')."""
    p = (np.random.default_rng(1).random(200) < 0.5).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = ct.calib_ci(y=p, probs=p, rng=3, **kwargs)
    assert res.estimate == 0.0 and res.null_pvalue == 1.0 and res.contains_zero
    assert tuple(res.conf_int()) == (0.0, 0.0)
    y = p.copy()
    y[:3] = 1 - y[:3]  # three contradicted predictions: an ordinary weighted result, T_w > 0
    res = ct.calib_ci(y=y, probs=p, rng=3, **kwargs)
    assert res.estimate > 0 and res.null_pvalue < 1.0
