"""Case weights and prevalence adjustment: calibtest.core.weighted and calib_ci(weights=, prevalence=)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.core.difference_variance import second_order_var_single
from calibtest.core.weighted import (NullLabels, jackknife_statistic, kish_n_eff, prevalence_event_prob, prevalence_weights,
                                     weighted_null_draws, weighted_statistics)


def brute_force(inverse, u, w):
    """T_w, sigma_{1,w}^2 and V_0 by double loops over the rows (the definitions, written out)."""
    n = len(w)
    W = sum(w)
    T = V0 = plug = 0.0
    mu = {}
    for b in set(inverse.tolist()):
        rows = [i for i in range(n) if inverse[i] == b]
        Wb = sum(w[i] for i in rows)
        num = den = pairs = 0.0
        for i in rows:
            for j in rows:
                if i != j:
                    num += w[i] * w[j] * float(u[i] @ u[j])
                    den += w[i] * w[j]
                    pairs += (w[i] * w[j] * float(u[i] @ u[j])) ** 2
        mu[b] = sum(w[i] * u[i] for i in rows) / Wb if Wb > 0 else np.zeros(u.shape[1])
        plug += Wb / W * float(mu[b] @ mu[b])
        if den > 0:
            T += Wb / W * num / den
            V0 += 2.0 * (Wb / (W * den)) ** 2 * pairs
    s1 = sum((w[i] * n / W * (2 * float(mu[inverse[i]] @ u[i]) - float(mu[inverse[i]] @ mu[inverse[i]]) - plug)) ** 2
             for i in range(n)) / n
    return T, plug, s1, V0


@pytest.mark.parametrize("seed", range(25))
def test_matches_double_loop_on_small_inputs(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 31))
    d = int(rng.integers(1, 3))
    u = rng.normal(size=(n, d))
    w = rng.lognormal(0.0, 1.0, n)
    w[rng.random(n) < 0.15] = 0.0
    w[0] = max(w[0], 0.5)
    _, inverse = np.unique(rng.integers(0, max(1, n // 4), n), return_inverse=True)
    fast = weighted_statistics(inverse, u, w)
    T, plug, s1, V0 = brute_force(inverse, u, w)
    np.testing.assert_allclose([fast.estimate, fast.plugin, fast.sigma1_sq, fast.null_variance],
                               [T, plug, s1, V0], rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(fast.contributions.sum(), T, rtol=1e-9, atol=1e-14)


def brute_force_ratio(inverse, u, w):
    """T_w = sum_b (W_b / W) sum_{i != j} w_i w_j U_i.U_j / sum_{i != j} w_i w_j, and each bin's ratio."""
    W = sum(w)
    T, R = 0.0, {}
    for b in set(inverse.tolist()):
        rows = [i for i in range(len(w)) if inverse[i] == b]
        num = sum(w[i] * w[j] * float(u[i] @ u[j]) for i in rows for j in rows if i != j)
        den = sum(w[i] * w[j] for i in rows for j in rows if i != j)
        R[b] = num / den if den > 1e-12 * sum(w[i] for i in rows) ** 2 else 0.0
        T += sum(w[i] for i in rows) / W * R[b]
    return T, R


def brute_force_jackknife(inverse, u, w):
    """T_J = n T_w - (n-1)/n sum_i T_w(rows without i), recomputing T_w from scratch on each deletion.

    The one convention: when row i's bin keeps no weighted pair without it,
    that bin's ratio is taken at its full-bin value.
    """
    n = len(w)
    T, R = brute_force_ratio(inverse, u, w)
    loo = []
    for i in range(n):  # each deletion (the definition of the jackknife)
        keep = np.arange(n) != i
        if w[keep].sum() <= 1e-12 * w.sum():
            loo.append(T)
            continue
        own = keep & (inverse == inverse[i])
        ww = w[own]
        if ww.sum() ** 2 - (ww ** 2).sum() > 1e-12 * ww.sum() ** 2:
            loo.append(brute_force_ratio(inverse[keep], u[keep], w[keep])[0])
        else:
            others = keep & (inverse != inverse[i])
            rest = (brute_force_ratio(inverse[others], u[others], w[others])[0] * w[others].sum()
                    if others.any() and w[others].sum() > 0 else 0.0)
            loo.append((rest + ww.sum() * R[inverse[i]]) / w[keep].sum())
    loo = np.array(loo)
    return n * T - (n - 1) * loo.mean(), (n - 1) / n * np.sum((loo - loo.mean()) ** 2)


@pytest.mark.parametrize("seed", range(25))
def test_jackknife_matches_recomputation_on_small_inputs(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(2, 26))
    d = int(rng.integers(1, 3))
    u = rng.normal(size=(n, d))
    w = rng.lognormal(0.0, 1.0, n)
    w[rng.random(n) < 0.15] = 0.0
    w[0] = max(w[0], 0.5)
    _, inverse = np.unique(rng.integers(0, max(1, n // 4), n), return_inverse=True)
    fast = weighted_statistics(inverse, u, w, jackknife=True)
    T_J, V_J = brute_force_jackknife(inverse, u, w)
    T = brute_force_ratio(inverse, u, w)[0]
    np.testing.assert_allclose([fast.estimate, fast.jackknife_variance, fast.ratio_estimate],
                               [T_J, V_J, T], rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(fast.contributions.sum(), T_J, rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("seed", range(10))
def test_jackknife_of_unit_weights_is_t(seed):
    """With unit weights each bin's ratio is a U-statistic, so the jackknife returns T itself."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    u = rng.normal(size=(n, 2))
    _, inverse = np.unique(rng.integers(0, max(1, n // 3), n), return_inverse=True)
    # T by its definition (paper eq. (6)): (1/n) sum_b sum_{i != j in b} U_i.U_j / (c_b - 1)
    T = 0.0
    for b in range(inverse.max() + 1):  # per bin, with the Gram matrix
        G = u[inverse == b] @ u[inverse == b].T
        c = G.shape[0]
        T += (G.sum() - np.trace(G)) / (c - 1) / n if c > 1 else 0.0
    jack = weighted_statistics(inverse, u, np.ones(n), jackknife=True)
    assert jack.estimate == pytest.approx(T, rel=1e-11, abs=1e-15)
    assert jack.ratio_estimate == pytest.approx(T, rel=1e-11, abs=1e-15)


def test_jackknife_null_draws_are_the_statistic_of_each_draw():
    rng = np.random.default_rng(8)
    n, m = 150, 9
    z = rng.uniform(size=n)
    inverse = np.minimum((z * m).astype(int), m - 1)
    w_event, w_non = np.full(n, 0.1), np.full(n, 1.9)
    q = prevalence_event_prob(z, 0.1, 1.9)
    draws = weighted_null_draws(z, inverse, NullLabels(w_event, w_non, q), n_draws=6, rng=np.random.default_rng(2),
                                m=m, jackknife=True, max_cells=16 * n)
    y = np.random.default_rng(2).random((6, n)) < q   # the same labels, drawn again
    for k in range(6):  # each draw against the single-set computation
        w = np.where(y[k], 0.1, 1.9)
        one = weighted_statistics(inverse, (y[k] - z)[:, None], w, m, jackknife=True).estimate
        assert draws[k] == pytest.approx(one, rel=1e-10, abs=1e-15)


def test_prevalence_estimate_is_the_iterated_jackknife():
    """T_JJ = n T_J - (n - 1) mean_i T_J^(-i) and se^2 = (n - 1)/n sum_i (T_J^(-i) - mean)^2, each T_J^(-i) the
    first-order jackknife (``jackknife_statistic``) of the n - 1 other rows: the O(n^2) definition."""
    rng = np.random.default_rng(9)
    n = 600
    p = rng.uniform(0.01, 0.99, n)
    y = (rng.random(n) < p).astype(int)
    res = ct.calib_ci(y=y, probs=p, prevalence=0.2, n_bins=8, n_null_draws=99, rng=1)
    w = np.where(y == 1, 0.2 / y.mean(), 0.8 / (1 - y.mean()))
    u = y - p
    inverse, m = res.partition.inverse, res.partition.m
    T_J = jackknife_statistic(inverse, w, (u * w)[:, None], (w * u) ** 2, m)[1][0]
    rows = np.broadcast_to(np.arange(n), (n, n))[~np.eye(n, dtype=bool)]   # set i: every row but i
    cell = np.repeat(np.arange(n), n - 1) * m + inverse[rows]
    wr, ur = w[rows], u[rows]
    loo = jackknife_statistic(cell, wr, (wr * ur)[:, None], (wr * ur) ** 2, m, n)[1]
    # the definition's route multiplies rounding errors by about n^2 (n T_J - (n - 1) mean): 1e-10 here
    assert res.estimate == pytest.approx(n * T_J - (n - 1) * loo.mean(), rel=1e-8)
    assert res.se == pytest.approx(np.sqrt((n - 1) / n * np.sum((loo - loo.mean()) ** 2)), rel=1e-9)
    assert res.weighting.contributions.sum() == pytest.approx(res.estimate, rel=1e-10)


@pytest.fixture(scope="module")
def binary():
    rng = np.random.default_rng(11)
    n = 1200
    p = rng.uniform(size=n)
    y = rng.binomial(1, np.clip(p + 0.08 * np.sin(6 * p), 0, 1))
    return pd.DataFrame({"y": y, "p": p, "w": rng.lognormal(0, 0.7, n), "one": np.ones(n)})


def test_unit_weights_give_t_sigma1_and_second_order_variance(binary):
    plain = ct.calib_ci("y ~ p", binary)
    weighted = ct.calib_ci("y ~ p", binary, weights="one")
    assert weighted.estimate == pytest.approx(plain.estimate, rel=1e-12, abs=1e-15)
    assert weighted.sigma1_sq == pytest.approx(plain.sigma1_sq, rel=1e-12)
    assert weighted.plugin_estimate == pytest.approx(plain.plugin_estimate, rel=1e-12)
    assert weighted.se == pytest.approx(plain.se, rel=1e-12)
    v2 = second_order_var_single(plain.partition.inverse, plain.data.u)
    assert weighted.weighting.null_variance == pytest.approx(v2, rel=1e-12)
    assert weighted.weighting.n_eff == pytest.approx(len(binary))
    assert weighted.ci_upper == pytest.approx(plain.ci_upper, rel=1e-12)


def test_scale_of_weights_does_not_matter(binary):
    a = ct.calib_ci("y ~ p", binary, weights="w", rng=4)
    b = ct.calib_ci(y=binary.y, probs=binary.p, weights=7.5 * binary.w.to_numpy(), rng=4)
    for name in ("estimate", "se", "sigma0_sq", "ci_lower", "ci_upper", "null_pvalue"):
        assert getattr(b, name) == pytest.approx(getattr(a, name), rel=1e-10)


def test_zero_weight_rows_are_the_same_as_dropping_them(binary):
    w = binary.w.to_numpy().copy()
    w[::3] = 0.0
    keep = w > 0
    full = ct.calib_ci(y=binary.y, probs=binary.p, weights=w, n_bins=20)
    sub = ct.calib_ci(y=binary.y[keep], probs=binary.p[keep], weights=w[keep], n_bins=20)
    for name in ("estimate", "se", "plugin_estimate"):
        assert getattr(full, name) == pytest.approx(getattr(sub, name), rel=1e-10)
    assert full.weighting.null_variance == pytest.approx(sub.weighting.null_variance, rel=1e-10)


def test_integer_weights_plugin_equals_replicated_rows(binary):
    rng = np.random.default_rng(3)
    k = rng.integers(1, 4, len(binary))
    weighted = ct.calib_ci(y=binary.y, probs=binary.p, weights=k, n_bins=15)
    rep = ct.calib_ci(y=np.repeat(binary.y, k), probs=np.repeat(binary.p, k), n_bins=15)
    assert weighted.plugin_estimate == pytest.approx(rep.plugin_estimate, rel=1e-12)
    table = weighted.bin_table()
    rep_table = rep.bin_table()
    np.testing.assert_allclose(table["weight"], rep_table["count"])
    np.testing.assert_allclose(table["mean_outcome_weighted"], rep_table["mean_outcome"], rtol=1e-12)
    assert table["contribution"].sum() == pytest.approx(weighted.estimate, rel=1e-10)


def test_prevalence_weights_by_hand():
    events = np.array([1] * 500 + [0] * 500, dtype=bool)
    w, pi_hat = prevalence_weights(events, 0.05)
    assert pi_hat == 0.5
    np.testing.assert_allclose(w[:500], 0.1)
    np.testing.assert_allclose(w[500:], 1.9)
    assert np.sum(w * events) / np.sum(w) == pytest.approx(0.05)
    assert kish_n_eff(w) == pytest.approx(1000**2 / (500 * 0.01 + 500 * 3.61))
    # under H0 the sample's event probability, weighted back, is the prediction
    z = np.linspace(0.01, 0.99, 9)
    q = prevalence_event_prob(z, 0.1, 1.9)
    np.testing.assert_allclose(q * 0.1 / (q * 0.1 + (1 - q) * 1.9), z)


def test_weighted_null_draws_reduce_to_the_statistic():
    """With event probabilities 0/1 every draw is the observed labels, so each draw is T_w of the data."""
    rng = np.random.default_rng(4)
    n = 200
    z = rng.uniform(size=n)
    y = (rng.random(n) < z).astype(float)
    w = rng.lognormal(size=n)
    _, inverse = np.unique(np.floor(z * 10), return_inverse=True)
    draws = weighted_null_draws(z, inverse, NullLabels(w, w, y), n_draws=7, rng=rng, max_cells=3 * n)
    t = weighted_statistics(inverse, (y - z)[:, None], w).estimate
    np.testing.assert_allclose(draws, t, rtol=1e-12)


def test_prevalence_result_records_pi_pi_hat_and_neff():
    rng = np.random.default_rng(5)
    p = np.concatenate([rng.beta(3, 2, 300), rng.beta(1, 6, 300)])
    y = np.r_[np.ones(300), np.zeros(300)].astype(int)
    res = ct.calib_ci(y=y, probs=p, prevalence=0.1, rng=1, n_null_draws=300)
    assert res.weighting.prevalence == 0.1 and res.weighting.sample_prevalence == 0.5
    a, b = 0.1 / 0.5, 0.9 / 0.5
    assert res.weighting.n_eff == pytest.approx(600**2 / (300 * a * a + 300 * b * b))
    assert res.null == "monte-carlo" and res.monte_carlo.n_draws == 300
    text = str(res.summary())
    assert "re-weighted" in text and "pi = 0.1" in text and "pi_hat = 0.5" in text
    d = res.to_dict()
    json.dumps(d)
    assert d["prevalence"] == 0.1 and d["sample_prevalence"] == 0.5 and d["n_eff"] == pytest.approx(res.weighting.n_eff)
    same = ct.calib_ci(y=y, probs=p, prevalence=0.1, rng=1, n_null_draws=300)
    assert same.null_pvalue == res.null_pvalue


@pytest.mark.parametrize("bad, exc, match", [
    (np.r_[-1.0, np.ones(99)], ValueError, "non-negative"),
    (np.r_[np.nan, np.ones(99)], ValueError, "finite"),
    (np.zeros(100), ValueError, "all zero"),
    (np.ones(99), ValueError, "one value per row"),
    (np.array(["a"] * 100), TypeError, "numeric"),
    ("nope", ValueError, "column"),
])
def test_bad_weights_name_the_argument(bad, exc, match):
    rng = np.random.default_rng(0)
    p = rng.uniform(size=100)
    with pytest.raises(exc, match=match) as info:
        ct.calib_ci(y=(rng.random(100) < p).astype(int), probs=p, weights=bad)
    assert "weights" in str(info.value)


@pytest.mark.parametrize("prevalence", [0.0, 1.0, -0.2, 1.5])
def test_bad_prevalence(prevalence):
    with pytest.raises(ValueError, match="prevalence"):
        ct.calib_ci(y=[0, 1, 1, 0], probs=[0.2, 0.7, 0.6, 0.4], prevalence=prevalence)


def test_unsupported_combinations(binary, tmp_path):
    with pytest.raises(ValueError, match="null='asymptotic' or null='monte-carlo'"):
        ct.calib_ci("y ~ p", binary, weights="w", null="conditional")
    with pytest.raises(ValueError, match="method='adjusted'"):
        ct.calib_ci("y ~ p", binary, weights="w", method="bootstrap")
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(3), 100)
    labels = rng.integers(0, 3, 100)
    with pytest.raises(ValueError, match="binary and top-1"):
        ct.calib_ci(y=labels, probs=probs, k=2, prevalence=0.2)
    path = tmp_path / "d.csv"
    binary.to_csv(path, index=False)
    with pytest.raises(ValueError, match="in memory"):
        ct.calib_ci("y ~ p", str(path), weights="w")


def test_missing_rows_drop_their_weights(binary):
    df = binary.copy()
    df.loc[::10, "p"] = np.nan
    res = ct.calib_ci("y ~ p", df, weights="w", missing="drop")
    keep = df.p.notna()
    ref = ct.calib_ci(y=df.y[keep], probs=df.p[keep], weights=df.w[keep].to_numpy())
    assert res.estimate == pytest.approx(ref.estimate, rel=1e-12)
    assert res.n_dropped == int((~keep).sum())


@pytest.mark.slow
def test_weighted_null_variance_by_simulation():
    """Var(T_w) over calibrated data sets with lognormal weights matches the mean estimated V_0."""
    rng = np.random.default_rng(7)
    n, reps = 400, 400
    t, v0 = np.empty(reps), np.empty(reps)
    for r in range(reps):  # independent data sets (the quantity under study)
        p = rng.uniform(size=n)
        y = (rng.random(n) < p).astype(int)
        w = rng.lognormal(0, 0.5, n) * np.exp(2 * p)
        res = ct.calib_ci(y=y, probs=p, weights=w, n_bins=20)
        t[r], v0[r] = res.estimate, res.weighting.null_variance
    ratio = t.var() / v0.mean()
    # the sample variance of 400 draws has relative s.e. about sqrt(2/399) = 0.07
    assert 0.8 < ratio < 1.25
    assert abs(t.mean()) < 4 * t.std() / np.sqrt(reps)


def test_hosmer_lemeshow_with_weights(binary):
    plain = ct.hosmer_lemeshow("y ~ p", binary)
    unit = ct.hosmer_lemeshow("y ~ p", binary, weights="one")
    assert unit.statistic == pytest.approx(plain.statistic, rel=1e-10)
    assert unit.debiased_estimate == pytest.approx(plain.debiased_estimate, rel=1e-10)
    res = ct.hosmer_lemeshow("y ~ p", binary, weights="w", groups=5)
    # by hand: the 5 groups of equal size by sorted p, weighted O, E and variance
    order = np.argsort(binary.p.to_numpy(), kind="stable")
    w, y, p = (binary[c].to_numpy()[order] for c in ("w", "y", "p"))
    stat = 0.0
    for idx in np.array_split(np.arange(len(order)), 5):  # the 5 groups
        O, E, W, W2 = (w[idx] * y[idx]).sum(), (w[idx] * p[idx]).sum(), w[idx].sum(), (w[idx] ** 2).sum()
        stat += (O - E) ** 2 / (W2 * (E / W) * (1 - E / W))
    assert res.statistic == pytest.approx(stat, rel=1e-10)
    assert res.weighted and "Case weights" in str(res.summary())
    assert res.debiased_estimate == pytest.approx(ct.calib_ci("y ~ p", binary, weights="w").estimate, rel=1e-10)


def test_val_prob_and_reliability_diagram_refuse_weights(binary):
    with pytest.raises(ValueError, match="val_prob does not take weights"):
        ct.val_prob("y ~ p", binary, weights="w")
    res = ct.calib_ci("y ~ p", binary, weights="w")
    with pytest.raises(ValueError, match="weighted"):
        res.plot_reliability()
    assert res.hosmer_lemeshow().to_dict() == ct.hosmer_lemeshow("y ~ p", binary, weights="w").to_dict()
    with pytest.raises(ValueError, match="weighted"):
        ct.calib_compare(res, ct.calib_ci("y ~ p", binary), paired=True)


def test_sparse_weight_share_by_hand():
    p = np.array([0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.6, 0.7, 0.8])
    y = np.array([0, 0, 1, 0, 0, 1, 1, 0, 1])
    w = np.array([1, 1, 1, 1, 1, 1, 10, 0.1, 0.1])
    res = ct.calib_ci(y=y, probs=p, weights=w, n_bins=2)
    # bin [0, 0.5): effective size 6; bin [0.5, 1): (10.2)^2 / 100.02 < 5, sparse
    assert res.weighting.sparse_weight_share == pytest.approx(10.2 / 16.2)
    assert any("effective size" in note for note in res.notes())


def test_weighted_summary_has_no_unweighted_evidence(binary):
    res = ct.calib_ci("y ~ p", binary, weights="w")
    text = str(res.summary())
    assert "multi-scale test" not in text.split("Model:")[0]
    assert "this result is weighted" in text
    with pytest.raises(ValueError, match="weighted"):
        res.evidence()


def test_studentized_interval_with_normal_quantiles_is_the_adjusted_interval():
    from scipy import stats

    from calibtest.core.intervals import adjusted_interval
    from calibtest.core.weighted import studentized_adjusted_interval
    rng = np.random.default_rng(12)
    za, zh = stats.norm.isf(0.05), stats.norm.isf(0.025)
    branches = set()
    for _ in range(300):  # random estimates across all three branches and both zero-rule outcomes
        t, se, thr = rng.normal(0.0, 2.0), rng.uniform(0.1, 1.0), rng.uniform(0.0, 2.0)
        a = adjusted_interval(t, se, thr, 0.05)
        b = studentized_adjusted_interval(t, se, thr, 0.05, za, zh)
        assert (b.lower, b.upper, b.contains_zero, b.lower_open, b.branch) == pytest.approx(
            (a.lower, a.upper, a.contains_zero, a.lower_open, a.branch), rel=1e-14, abs=1e-15)
        branches.add(b.branch)
    assert branches == {1, 2, 3}
    # larger multipliers lower the lower end: T = 3, se = 1, k_a = 2.5 -> branch 2, lower 0.5 (by hand)
    c = studentized_adjusted_interval(3.0, 1.0, -np.inf, 0.05, 2.5, 3.0)
    assert (c.lower, c.branch) == (pytest.approx(0.5), 2)
    assert c.upper == pytest.approx(3.0 + zh)


def test_null_studentized_multipliers_by_hand():
    from scipy import stats

    from calibtest.core.weighted import null_studentized_multipliers
    # 20 draws with se 1: studentized values 0.1, 0.2, ..., 2.0 (+ one draw of zero variance and positive T)
    draws = np.append(np.arange(1, 21) / 10.0, 0.5)
    var = np.append(np.ones(20), 0.0)
    k_a, k_h = null_studentized_multipliers(draws, var, 0.05)
    # 21 values, 'higher' quantiles at positions 0.95 * 20 = 19 and 0.975 * 20 = 19.5 -> 20th and 21st sorted
    assert k_a == pytest.approx(2.0)
    assert k_h == np.inf
    k_a, k_h = null_studentized_multipliers(np.zeros(5), np.ones(5), 0.05)   # never below z
    assert (k_a, k_h) == (pytest.approx(stats.norm.isf(0.05)), pytest.approx(stats.norm.isf(0.025)))


@pytest.mark.slow
def test_prevalence_jackknife_study_smoke():
    """Case-control samples from the vignette: T_J removes most of the ratio's upward bias at the automatic B."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "vignettes" / "populations.py"
    spec = importlib.util.spec_from_file_location("populations_study_w", path)
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    run = study.prevalence_diagnosis_cell(0.5, 500)
    rows = pd.DataFrame([run(np.random.default_rng([16, r])) for r in range(80)])  # 80 data sets
    truth = rows["truth_binned"].iloc[0]
    # the binned population ECE^2 by a second route: Monte Carlo over the population
    mu = study._population_mu(study.PREV, study.PREV_SD)
    x = np.random.default_rng(3).standard_normal(2_000_000)
    r = 1 / (1 + np.exp(-(mu + study.PREV_SD * x)))
    p = 1 / (1 + np.exp(-(mu + study.PREV_SD * x - 0.5)))
    b = np.minimum((p * rows["n_bins"].iloc[0]).astype(int), rows["n_bins"].iloc[0] - 1)
    mass = np.bincount(b) / x.size
    num = np.bincount(b, weights=r - p) / x.size
    assert np.sum(num[mass > 0] ** 2 / mass[mass > 0]) == pytest.approx(truth, rel=0.05)
    bias_ratio = rows["ratio"].mean() - truth
    bias_jack = rows["jackknife"].mean() - truth
    mcse = rows["jackknife"].std() / np.sqrt(len(rows))
    # measured (500 data sets): T_w biased by 1.2 sd, T_J by 0.3 sd; the jackknife se is not too small
    assert bias_ratio > 5 * mcse
    assert abs(bias_jack) < 0.5 * bias_ratio
    assert rows["jackknife"].std() < 1.1 * np.sqrt(rows["jack_var"].mean())


def test_prevalence_result_flagged_approximate_when_weight_sits_in_sparse_bins():
    # 8 bins of 0.125: rows at p = 0.9 are two events and two non-events; with pi = 0.05 and
    # pi_hat = 0.5 the non-events weigh 1.9 and the events 0.1, so that bin's effective size is
    # 4^2 / (2 * 3.61 + 2 * 0.01) = 2.2 < 5, and its weight share 4 / 100 = 4% > 1%
    p = np.concatenate([np.full(48, 0.05), np.full(48, 0.3), np.full(4, 0.9)])
    y = np.concatenate([np.tile([1, 0, 0, 1], 12), np.tile([1, 1, 0, 0], 12), [1, 1, 0, 0]])
    assert y.mean() == 0.5
    res = ct.calib_ci(y=y, probs=p, prevalence=0.05, n_bins=8, n_null_draws=99, rng=0)
    assert res.weighting.sparse_weight_share == pytest.approx(4.0 / 100)
    assert res.approximate and "approximate there" in res.approximation.reasons[-1]
    dense = ct.calib_ci(y=y[:96], probs=p[:96], prevalence=0.05, n_bins=8, n_null_draws=99, rng=0)
    assert dense.weighting.sparse_weight_share == 0.0 and not dense.approximate


# --- Extreme and rescaled weights: the documented values in exact rational arithmetic -------------------------

from fractions import Fraction  # noqa: E402

from calibtest.core.weighted import normalised_weights, weighted_null_variance  # noqa: E402


def exact_weighted(inverse, u, w):
    """T_w, V_0, V_0 with W_b^2 for D_b, and the jackknife T_J and its variance, from their definitions.

    Explicit sums over the pairs i != j of each bin in ``fractions.Fraction`` (every float is a
    rational, so nothing is rounded), with the module's conventions: a bin without a weighted
    pair is left out, and a deletion that leaves its bin without a pair keeps the bin's ratio.
    """
    n = len(w)
    W_ = [Fraction(float(x)) for x in w]
    U_ = [[Fraction(float(x)) for x in row] for row in u]
    dot = lambda a, b: sum(x * y for x, y in zip(a, b))  # noqa: E731
    bins = {b: [i for i in range(n) if inverse[i] == b] for b in set(inverse.tolist())}
    W = sum(W_)

    def ratio(rows):
        den = sum(W_[i] * W_[j] for i in rows for j in rows if i != j)
        if den == 0:
            return None
        return sum(W_[i] * W_[j] * dot(U_[i], U_[j]) for i in rows for j in rows if i != j) / den

    R = {b: ratio(rows) for b, rows in bins.items()}
    T = sum(sum(W_[i] for i in rows) * (R[b] or 0) for b, rows in bins.items()) / W
    V0 = V0_plain = Fraction(0)
    for b, rows in bins.items():
        Wb = sum(W_[i] for i in rows)
        pairs = sum((W_[i] * W_[j] * dot(U_[i], U_[j])) ** 2 for i in rows for j in rows if i != j)
        D = Wb * Wb - sum(W_[i] ** 2 for i in rows)
        if D > 0:
            V0 += 2 * (Wb / (W * D)) ** 2 * pairs
        if Wb > 0:
            V0_plain += 2 * (1 / (W * Wb)) ** 2 * pairs
    A = W * T
    loo = []
    for i in range(n):
        b = inverse[i]
        rows = [j for j in bins[b] if j != i]
        if W - W_[i] == 0:
            loo.append(T)
            continue
        Rl = ratio(rows)
        Rl = (R[b] or 0) if Rl is None else Rl
        Wb = sum(W_[j] for j in bins[b])
        loo.append((A - Wb * (R[b] or 0) + (Wb - W_[i]) * Rl) / (W - W_[i]))
    mean = sum(loo) / n
    T_J = n * T - Fraction(n - 1, n) * sum(loo)
    V_J = Fraction(n - 1, n) * sum((x - mean) ** 2 for x in loo)
    return [float(x) for x in (T, V0, V0_plain, T_J, V_J)]


def _dominated(seed, ratio, d=1, n=18):
    """Rows in 3 bins; in bin 0 one row's weight is ``ratio`` times the rest of its bin (the others scaled down)."""
    rng = np.random.default_rng(seed)
    inverse = np.arange(n) % 3
    u = rng.uniform(-0.9, 0.9, size=(n, d))
    w = rng.lognormal(0.0, 0.5, n)
    rest = (inverse == 0) & (np.arange(n) != 0)
    w[rest] *= w[0] / (ratio * w[rest].sum())  # then w[0] / sum(rest) = ratio
    return inverse, u, w


def _close(fast, exact, rtol=1e-10):
    np.testing.assert_allclose(fast, exact, rtol=rtol, atol=0.0)


@pytest.mark.parametrize("ratio", [1e2, 1e6, 2.5e12, 1e16, 1e40, 1e150])
@pytest.mark.parametrize("d", [1, 2])
def test_one_dominant_weight_gives_the_documented_value(ratio, d):
    """T_w, V_0 and the jackknife match their definitions in exact arithmetic at any ratio of weights.

    Before, W_b^2 - P_b and ||S_b||^2 - Q_b cancelled: at 2.5e12 the bin was dropped and T_w was
    the other bins' share only, with no warning.
    """
    inverse, u, w = _dominated(int(np.log10(ratio)), ratio, d)
    assert w[0] / w[1:][inverse[1:] == 0].sum() == pytest.approx(ratio, rel=1e-12)
    T, V0, V0_plain, T_J, V_J = exact_weighted(inverse, u, w)
    plain = weighted_statistics(inverse, u, w)
    jack = weighted_statistics(inverse, u, w, jackknife=True)
    _close([plain.estimate, plain.null_variance, plain.null_variance_plugin_weights], [T, V0, V0_plain])
    _close(plain.contributions.sum(), T)
    _close([jack.estimate, jack.jackknife_variance, jack.ratio_estimate], [T_J, V_J, T])
    _close(jack.contributions.sum(), T_J, rtol=1e-9)


@pytest.mark.parametrize("weights", [
    [1.0, 1e-9, 1e-21, 1e-30, 0.0, 3e-31],     # dominated, and the rest dominated again
    [1.0, 1.0, 1e-14, 2e-15, 1e-15, 0.0],        # two equal top rows: deleting either leaves a dominated bin
    [1.0, 1e-13, 0.0, 0.0, 0.0, 0.0],            # a dominated pair: deleting either row leaves no pair
])
def test_nested_dominance_and_deletions_match_the_definitions(weights):
    rng = np.random.default_rng(5)
    n = 15
    inverse = np.r_[np.zeros(6, dtype=int), np.arange(9) % 3 + 1]
    u = rng.uniform(-0.9, 0.9, size=(n, 1))
    w = np.r_[weights, rng.lognormal(0.0, 0.5, 9)]
    T, V0, V0_plain, T_J, V_J = exact_weighted(inverse, u, w)
    jack = weighted_statistics(inverse, u, w, jackknife=True)
    _close([jack.ratio_estimate, jack.null_variance, jack.null_variance_plugin_weights], [T, V0, V0_plain])
    _close([jack.estimate, jack.jackknife_variance], [T_J, V_J], rtol=1e-9)


def test_dominant_weight_through_calib_ci_the_issue_case():
    """One case weight 10^13 times the rest of its bin: T_w is the documented value, not ~1e-14."""
    rng = np.random.default_rng(2024)
    n, B = 40, 4
    p = rng.uniform(0.02, 0.98, n)
    y = (rng.random(n) < p).astype(int)
    w = rng.lognormal(0.0, 0.3, n)
    inverse = np.floor(p * B).astype(int)
    first = np.flatnonzero(inverse == inverse[0])
    w[0] = 1e13 * w[first[1:]].sum()
    res = ct.calib_ci("y ~ p", data=pd.DataFrame({"y": y, "p": p, "w": w}), weights="w", n_bins=B)
    _, inverse = np.unique(inverse, return_inverse=True)
    T = exact_weighted(inverse, (y - p)[:, None], w)[0]
    assert abs(T) > 1e-3  # the bin dominates the weight total, so T_w is about its ratio, far from 0
    assert res.estimate == pytest.approx(T, rel=1e-10)
    assert res.weighting.contributions.sum() == pytest.approx(T, rel=1e-10)
    mc = ct.calib_ci("y ~ p", data=pd.DataFrame({"y": y, "p": p, "w": w}), weights="w", n_bins=B,
                     null="monte-carlo", n_null_draws=99, rng=3)
    assert mc.estimate == res.estimate


def test_null_draws_of_a_dominated_bin_are_the_statistic_of_each_draw():
    inverse, u, w = _dominated(0, 1e14)
    z = np.random.default_rng(1).uniform(0.05, 0.95, w.size)
    y = (u[:, 0] > 0).astype(float)  # event probabilities 0/1: every draw is these labels
    draws = weighted_null_draws(z, inverse, NullLabels(w, w, y), n_draws=3, rng=np.random.default_rng(0),
                                max_cells=2 * w.size)
    _close(draws, exact_weighted(inverse, (y - z)[:, None], w)[0])


def test_a_row_holding_all_the_weight_is_refused_by_the_jackknife_by_name():
    inverse, u, w = _dominated(1, 10.0)
    w[0] = 1e30
    with pytest.raises(ValueError, match="weights: one row holds more than 1 - 2\\^-20 of the total weight"):
        weighted_statistics(inverse, u, w, jackknife=True)
    assert np.isfinite(weighted_statistics(inverse, u, w).estimate)  # T_w itself is defined


@pytest.mark.parametrize("prevalence", [None, 0.2])
@pytest.mark.parametrize("c", [1e-100, 1e100, 3.7, 2.0**-300, 1e-300, 1e300])
def test_rescaled_weights_give_the_same_result(binary, c, prevalence):
    kw = {"prevalence": prevalence, "rng": 1, "n_null_draws": 99}
    base = ct.calib_ci("y ~ p", data=binary, weights="w", **kw)
    res = ct.calib_ci("y ~ p", data=binary.assign(w=c * binary["w"]), weights="w", **kw)
    a, b = base.to_dict(), res.to_dict()
    keys = ["estimate", "se", "ci_lower", "ci_upper", "threshold", "null_pvalue", "null_zstat", "sigma0_sq",
            "sigma1_sq", "plugin_estimate"]
    for key in keys:
        assert b[key] == pytest.approx(a[key], rel=1e-12, abs=1e-300), key
    assert res.weighting.n_eff == pytest.approx(base.weighting.n_eff, rel=1e-13)
    assert res.weighting.sparse_weight_share == pytest.approx(base.weighting.sparse_weight_share, rel=1e-13)
    assert res.approximate == base.approximate
    assert res.weighting.weight_total == pytest.approx(c * base.weighting.weight_total, rel=1e-13)
    if c == 2.0**-300:  # a power of two rescales every sum exactly: the same bits
        assert [b[k] for k in keys] == [a[k] for k in keys]


@pytest.mark.parametrize("c", [1e-100, 1e100, 3.7])
def test_equal_weights_are_unit_weights(binary, c):
    """All weights equal to c: bit for bit the result with unit weights, whose T_w is T."""
    unit = ct.calib_ci("y ~ p", data=binary.assign(w=1.0), weights="w", rng=2)
    res = ct.calib_ci("y ~ p", data=binary.assign(w=c), weights="w", rng=2)
    keys = ["estimate", "se", "ci_lower", "ci_upper", "threshold", "null_pvalue", "sigma0_sq", "sigma1_sq"]
    assert [res.to_dict()[k] for k in keys] == [unit.to_dict()[k] for k in keys]
    assert res.weighting.n_eff == binary.shape[0]
    plain = ct.calib_ci("y ~ p", data=binary)
    assert res.estimate == pytest.approx(plain.estimate, rel=1e-12)
    assert res.se == pytest.approx(plain.se, rel=1e-12)


def test_normalised_weights_are_exact_rescalings():
    w = np.array([3.0, 0.0, 1e-300, 7.5])
    (v,) = normalised_weights(w)
    assert 0.5 <= v.max() < 1.0
    np.testing.assert_array_equal(v / v.max(), w / w.max())  # a power of two: no rounding
    e, n = normalised_weights(np.full(3, 2.5), np.array([2.5, 0.0, 2.5]))
    np.testing.assert_array_equal(e, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(n, [1.0, 0.0, 1.0])
    rng = np.random.default_rng(0)
    inverse, u = rng.integers(0, 4, 60), rng.normal(size=(60, 1))
    assert weighted_null_variance(inverse, u, np.full(60, 1e-100)) == weighted_null_variance(inverse, u, np.ones(60))


def test_weights_whose_sum_overflows_are_refused_by_name(binary):
    with pytest.raises(ValueError, match="weights sum to more than the largest floating-point number"):
        ct.calib_ci("y ~ p", data=binary.assign(w=1e307 * binary["w"]), weights="w")


@pytest.mark.parametrize("ratio", [1e3, 1e5])
def test_deleting_the_dominant_row_of_a_bin_matches_the_definition(ratio):
    """The rest of the dominated bin weighs as much as the other bins, so deleting the top row matters."""
    rng = np.random.default_rng(12)
    n = 18
    inverse = np.arange(n) % 3
    u = rng.uniform(-0.9, 0.9, size=(n, 1))
    w = rng.lognormal(0.0, 0.3, n)
    w[0] = ratio * w[1:][inverse[1:] == 0].sum()
    T, _, _, T_J, V_J = exact_weighted(inverse, u, w)
    jack = weighted_statistics(inverse, u, w, jackknife=True)
    _close([jack.ratio_estimate, jack.estimate, jack.jackknife_variance], [T, T_J, V_J], rtol=1e-9)


@pytest.mark.parametrize("seed", range(30))
def test_random_dominance_patterns_match_the_definitions(seed):
    """Random bins where random rows outweigh the rest by 10^k (k up to 200), zeros and ties included."""
    rng = np.random.default_rng(300 + seed)
    n = int(rng.integers(8, 19))
    d = int(rng.integers(1, 3))
    inverse = rng.integers(0, 3, n)
    u = rng.uniform(-0.95, 0.95, size=(n, d))
    w = rng.lognormal(0.0, 1.0, n) * 10.0 ** rng.integers(-200, 1, n).astype(float) ** (rng.random(n) < 0.4)
    w[rng.random(n) < 0.1] = 0.0
    w[1] = w[0]  # a tie somewhere
    w[0] = max(w[0], 1.0)
    T, V0, V0_plain, T_J, V_J = exact_weighted(inverse, u, w)
    plain = weighted_statistics(inverse, u, w)
    _close([plain.estimate, plain.null_variance, plain.null_variance_plugin_weights], [T, V0, V0_plain])
    if w.max() > (1.0 - 2.0**-20) * w.sum():  # one row holds (almost) all the weight
        with pytest.raises(ValueError, match="delete-one jackknife of T_w cannot be computed"):
            weighted_statistics(inverse, u, w, jackknife=True)
        return
    jack = weighted_statistics(inverse, u, w, jackknife=True)
    _close([jack.estimate, jack.jackknife_variance], [T_J, V_J], rtol=1e-9)


def test_weighted_result_stores_and_names_the_null_it_used(binary):
    from scipy.stats import norm
    from calibtest.display.summary import null_text
    sub = binary.iloc[:300]  # the double-loop V_0 stays quick
    res = ct.calib_ci("y ~ p", sub, weights="w", n_bins=8, null="asymptotic")
    assert res.null == "asymptotic" and res.null_method == "normal" and res.to_dict()["null"] == "asymptotic"
    # its p-value is the asymptotic one: 1 - Phi(T_w / sqrt(V_0)), V_0 by the double loop
    _, _, _, v0 = brute_force(res.partition.inverse, res.data.u, sub.w.to_numpy())
    assert res.null_pvalue == pytest.approx(norm.sf(res.estimate / np.sqrt(v0)), rel=1e-9)
    text = " ".join(str(res.summary()).split())
    assert "Null: asymptotic (normal limit of T_w / sqrt(V_0), V_0 estimated from the weighted rows)" in text
    assert "null='asymptotic'" in text and "Monte Carlo" not in text and "exact" not in null_text(res)
    assert "Conclusion: " in text and "the asymptotic test of ECE = 0 at B = 8" in text
    # the Monte Carlo null (prevalence weights) is named so, not "exact conditional", with its row in the tests table
    prev = ct.calib_ci("y ~ p", sub, prevalence=0.3, n_bins=8, n_null_draws=199, rng=1)
    assert prev.null == "monte-carlo" and "exact" not in null_text(prev)
    table = prev.summary().tables[3]
    assert table.loc["Monte Carlo: 199 label draws", "p-value"] == prev.null_pvalue


def test_case_weighted_result_gives_the_case_weighted_hosmer_lemeshow():
    """res.hosmer_lemeshow() of a case-weighted result equals hosmer_lemeshow(..., weights=) on the same rows, and the
    report's evidence table shows it; with prevalence weights it is refused (no chi-squared reference)."""
    df = ct.load_demo()
    df["w"] = np.random.default_rng(0).gamma(2.0, 1.0, len(df))
    res = ct.calib_ci("y ~ p", data=df, weights="w")
    direct = ct.hosmer_lemeshow("y ~ p", data=df, weights="w")
    assert res.hosmer_lemeshow().to_dict() == direct.to_dict()
    assert res.hosmer_lemeshow() is res.hosmer_lemeshow()  # kept once computed
    assert not res.weighting.case_weights.flags.writeable
    with pytest.raises(ValueError, match="prevalence"):
        ct.calib_ci("y ~ p", data=df, prevalence=0.2, rng=1).hosmer_lemeshow()


def test_default_null_of_case_weights_is_the_monte_carlo_test_given_predictions_and_weights(binary):
    """null="auto" with case weights (binary rows): the Monte Carlo test, whose p-value is recomputed here from
    label draws y* ~ Bernoulli(p) with the same seed and the T_w of each draw by the brute-force double loop."""
    sub = binary.iloc[:120]
    res = ct.calib_ci("y ~ p", sub, weights="w", n_bins=4, n_null_draws=39, rng=8)
    assert res.null == "monte-carlo" and res.null_method == "monte carlo" and res.monte_carlo.n_draws == 39
    assert "Monte Carlo (outcomes redrawn given the predictions, the case weights fixed)" in \
        " ".join(str(res.summary()).split())
    gen = np.random.default_rng(8)
    p, w, inv = sub.p.to_numpy(), sub.w.to_numpy(), res.partition.inverse
    draws = []
    for _ in range(39):
        y = gen.random(p.size) < p
        draws.append(brute_force(inv, (y - p)[:, None], w)[0])
    t = brute_force(inv, res.data.u, w)[0]
    assert res.estimate == pytest.approx(t, rel=1e-10)
    np.testing.assert_allclose(np.sort(res.monte_carlo.null_draws), np.sort(draws), rtol=1e-9, atol=1e-15)
    assert res.null_pvalue == pytest.approx((1 + sum(d >= t for d in draws)) / 40)
