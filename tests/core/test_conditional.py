"""Tests of calibtest.core.conditional: exact conditional null moments, shifted gamma, Monte Carlo test.

Independent references: exhaustive enumeration of every label configuration on
tiny data sets (the law of T given the predictions is a finite mixture), T
recomputed from its pair definition sum_{a != b} U_a^T U_b / (c - 1), scipy's
chi-square law for the shifted gamma, and Monte Carlo size on calibrated data.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

import calibtest as ct
from calibtest.core import conditional as cond
from calibtest.core.targets import prepare


# ---------------------------------------------------------------------------
# brute force


def pair_statistic(u: np.ndarray, bins: np.ndarray) -> float:
    """T = (1/n) sum_bins 1/(c-1) sum_{a != b} U_a^T U_b, straight from the definition."""
    n = u.shape[0]
    total = 0.0
    for b in np.unique(bins):
        idx = np.flatnonzero(bins == b)
        if idx.size < 2:
            continue
        total += sum(u[a] @ u[c] for a in idx for c in idx if a != c) / (idx.size - 1)
    return total / n


def enumerate_law(probs: np.ndarray, bins: np.ndarray, to_u):
    """Exact law of T: list of (probability, T) over all label vectors drawn from ``probs``.

    ``probs`` (n, L) are the label probabilities of each row (L outcomes) and
    ``to_u(labels)`` returns U (n, d) for a label vector.
    """
    n, L = probs.shape
    law = []
    for labels in itertools.product(range(L), repeat=n):
        labels = np.array(labels)
        w = float(np.prod(probs[np.arange(n), labels]))
        if w > 0:
            law.append((w, pair_statistic(to_u(labels), bins)))
    return law


def law_moments(law):
    w = np.array([p for p, _ in law])
    t = np.array([v for _, v in law])
    return w.sum(), w @ t, w @ t**2, w @ t**3


def _topk_case(seed, n, K, k, n_bins_used):
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(K, 0.7), n)
    bins = rng.integers(0, n_bins_used, n)

    def to_u(labels):
        return prepare(labels, P, k=k).u

    z = prepare(np.zeros(n, dtype=int), P, k=k).z
    return P, z, bins, to_u


def _binary_case(seed, n, n_bins_used):
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    bins = rng.integers(0, n_bins_used, n)
    probs = np.column_stack([1 - p, p])  # outcome 0 -> y = 0, outcome 1 -> y = 1
    return probs, p[:, None], bins, lambda labels: (labels - p)[:, None]


def _full_case(seed, n, K, n_bins_used):
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(K), n)
    bins = rng.integers(0, n_bins_used, n)
    return P, P, bins, lambda labels: np.eye(K)[labels] - P


CASES = {
    "binary n=5, 2 bins": lambda: _binary_case(1, 5, 2),
    "binary n=6, 1 bin": lambda: _binary_case(2, 6, 1),
    "top1 of K=3, n=5, 2 bins": lambda: _topk_case(3, 5, 3, 1, 2),
    "top2 of K=3, n=5, 2 bins": lambda: _topk_case(4, 5, 3, 2, 2),
    "top2 of K=3, n=6, 1 bin": lambda: _topk_case(5, 6, 3, 2, 1),
    "full K=2, n=6, 2 bins": lambda: _full_case(6, 6, 2, 2),
    "full K=3, n=5, 2 bins": lambda: _full_case(7, 5, 3, 2),
}


@pytest.mark.parametrize("case", list(CASES))
def test_moments_match_exact_enumeration(case):
    probs, z, bins, to_u = CASES[case]()
    law = enumerate_law(probs, bins, to_u)
    total, mean, second, third = law_moments(law)
    assert total == pytest.approx(1.0, abs=1e-12)
    assert abs(mean) < 1e-14  # E[T | Z] = 0 under H0
    mom = cond.conditional_moments(cond.conditional_bin_sums(z, bins), z.shape[0])
    np.testing.assert_allclose(mom.variance, second - mean**2, rtol=1e-10)
    np.testing.assert_allclose(mom.third_moment, third, rtol=1e-10)
    np.testing.assert_allclose(mom.skewness, third / (second - mean**2) ** 1.5, rtol=1e-9)


def test_two_row_term_is_needed():
    """Dropping the 4 sum_{a != b} <K_a, K_b> term (triangles only) misses the exact third moment."""
    probs, z, bins, to_u = _binary_case(8, 5, 1)
    third = law_moments(enumerate_law(probs, bins, to_u))[3]
    s = cond.conditional_bin_sums(z, bins)
    triangles_only = cond.ConditionalBinSums(s.count, s.sigma, s.sigma_sq, s.tr2, s.tr3,
                                             np.zeros_like(s.kappa), np.zeros_like(s.kappa_sq),
                                             s.kappa_mult)
    assert cond.conditional_moments(s, 5).third_moment == pytest.approx(third, rel=1e-10)
    assert abs(cond.conditional_moments(triangles_only, 5).third_moment - third) > 0.05 * abs(third)


def test_variance_closed_form_one_dim():
    """1-dim: Var = (2/n^2) sum_b [(sum v)^2 - sum v^2] / (c-1)^2 with v = p(1-p), by hand."""
    p = np.array([0.1, 0.5, 0.7, 0.2, 0.9, 0.95, 0.3])
    bins = np.array([0, 0, 0, 1, 1, 1, 2])  # bin 2 is a singleton: no contribution
    v = p * (1 - p)
    expect = 0.0
    for b in (0, 1):
        vb = v[bins == b]
        expect += (vb.sum() ** 2 - (vb**2).sum()) / (vb.size - 1) ** 2
    expect *= 2 / p.size**2
    mom = cond.conditional_moments(cond.conditional_bin_sums(p, bins), p.size)
    assert mom.variance == pytest.approx(expect, rel=1e-13)


def test_chunking_does_not_change_sums(monkeypatch):
    rng = np.random.default_rng(0)
    z = -np.sort(-rng.dirichlet(np.ones(5), 3000), axis=1)[:, :2]
    bins = rng.integers(0, 40, 3000)
    whole = cond.conditional_moments(cond.conditional_bin_sums(z, bins), 3000)
    monkeypatch.setattr(cond, "_CHUNK_ENTRIES", 1000)
    chunked = cond.conditional_moments(cond.conditional_bin_sums(z, bins), 3000)
    assert chunked.variance == pytest.approx(whole.variance, rel=1e-12)
    assert chunked.third_moment == pytest.approx(whole.third_moment, rel=1e-12)


def test_one_dim_chunks_and_hand_variance(monkeypatch):
    rng = np.random.default_rng(12)
    p = rng.random(5000)
    bins = rng.integers(0, 40, 5000)
    whole = cond.conditional_moments(cond.conditional_bin_sums(p, bins), 5000)
    monkeypatch.setattr(cond, "_CACHE_ROWS", 7)
    chunked = cond.conditional_moments(cond.conditional_bin_sums(p, bins), 5000)
    assert chunked.third_moment == pytest.approx(whole.third_moment, rel=1e-12)
    v = p * (1 - p)
    s1 = np.bincount(bins, weights=v)
    s2 = np.bincount(bins, weights=v**2)
    c = np.bincount(bins)
    assert chunked.variance == pytest.approx(2 * np.sum((s1**2 - s2) / (c - 1) ** 2) / 5000**2, rel=1e-12)


def test_certain_predictions_have_no_variance():
    z = np.array([1.0, 1.0, 0.0, 0.0])
    mom = cond.conditional_moments(cond.conditional_bin_sums(z, np.array([0, 0, 1, 1])), 4)
    assert mom.variance == 0.0 and mom.skewness == 0.0
    assert cond.shifted_gamma_sf(0.0, 0.0, 0.0) == 1.0
    assert cond.shifted_gamma_sf(0.1, 0.0, 0.0) == 0.0


# ---------------------------------------------------------------------------
# shifted gamma


@pytest.mark.parametrize("nu, lam", [(1.0, 0.3), (4.0, 2.0), (30.0, 0.01)])
def test_shifted_gamma_is_exact_for_a_scaled_centred_chi_square(nu, lam):
    """X = lam (chi2_nu - nu) has mean 0, variance 2 nu lam^2 and skewness sqrt(8 / nu)."""
    var, skew = 2 * nu * lam**2, math.sqrt(8 / nu)
    for q in (0.5, 0.9, 0.95, 0.99):
        t = lam * (stats.chi2.ppf(q, nu) - nu)
        assert cond.shifted_gamma_sf(t, var, skew) == pytest.approx(1 - q, rel=1e-9)
        assert cond.shifted_gamma_isf(1 - q, var, skew) == pytest.approx(t, rel=1e-9, abs=1e-12)
        # negative skewness: the reflection -X
        assert cond.shifted_gamma_sf(-t, var, -skew) == pytest.approx(q, rel=1e-9)


def test_shifted_gamma_normal_limit_and_monotone():
    assert cond.shifted_gamma_sf(1.2, 4.0, 0.0) == pytest.approx(stats.norm.sf(0.6), rel=1e-12)
    assert cond.shifted_gamma_sf(1.2, 4.0, 1e-4) == pytest.approx(stats.norm.sf(0.6), rel=1e-4)
    t = np.linspace(-3, 20, 500)
    for g in (0.3, 2.0, 8.0):
        p = cond.shifted_gamma_sf(t, 1.0, g)
        assert np.all(np.diff(p) <= 0) and p.min() >= 0 and p.max() <= 1


# ---------------------------------------------------------------------------
# Monte Carlo test


def _exact_pvalue(law, t_obs):
    return sum(p for p, t in law if t >= t_obs - 1e-12)


@pytest.mark.parametrize("case", ["binary n=6, 1 bin", "top2 of K=3, n=5, 2 bins", "full K=3, n=5, 2 bins"])
def test_monte_carlo_pvalue_converges_to_exact_conditional_pvalue(case):
    probs, z, bins, to_u = CASES[case]()
    law = enumerate_law(probs, bins, to_u)
    n, d = z.shape
    complete = case.startswith("full")
    rng = np.random.default_rng(11)
    for _ in range(2):
        if case.startswith("binary"):
            y = (rng.random(n) < z[:, 0]).astype(int)
            observed, u = 1 - y, (y - z[:, 0])[:, None]
        else:
            labels = (rng.random(n)[:, None] >= np.cumsum(probs, axis=1)).sum(axis=1).clip(max=probs.shape[1] - 1)
            u = to_u(labels)
            observed = cond.label_classes(type("D", (), {"y": u + z})())
        t_obs = pair_statistic(u, bins)
        R = 20000
        mc = cond.monte_carlo_test(z, bins, observed, n_draws=R, rng=5, complete=complete)
        assert mc.statistic == pytest.approx(t_obs, abs=1e-12)
        exact = _exact_pvalue(law, t_obs)
        se = math.sqrt(exact * (1 - exact) / R) + 1 / R
        assert abs(mc.pvalue - exact) < 4.5 * se
    # the draws reproduce the exact mean and variance
    _, mean, second, _ = law_moments(law)
    assert abs(mc.null_draws.mean() - mean) < 4.5 * math.sqrt(second / R)
    assert mc.null_draws.var() == pytest.approx(second - mean**2, rel=0.06)


def test_monte_carlo_seed_and_block_size():
    rng = np.random.default_rng(3)
    P = rng.dirichlet(np.ones(6), 700)
    data = prepare(rng.integers(0, 6, 700), P, k=2)
    bins = rng.integers(0, 30, 700)
    obs = cond.label_classes(data)
    a = cond.monte_carlo_test(data.z, bins, obs, n_draws=301, rng=42, block_size=1)
    b = cond.monte_carlo_test(data.z, bins, obs, n_draws=301, rng=42, block_size=64)
    c = cond.monte_carlo_test(data.z, bins, obs, n_draws=301, rng=np.random.default_rng(42))
    np.testing.assert_array_equal(a.null_draws, b.null_draws)
    np.testing.assert_array_equal(a.null_draws, c.null_draws)
    assert a.pvalue == b.pvalue == c.pvalue
    assert a.seed == 42 and c.seed is None
    assert a.pvalue == (1 + np.sum(a.null_draws >= a.statistic)) / 302
    d = cond.monte_carlo_test(data.z, bins, obs, n_draws=301, rng=43)
    assert not np.array_equal(a.null_draws, d.null_draws)
    # each draw equals T recomputed from its definition for a label vector with the same classes
    assert a.statistic == pytest.approx(pair_statistic(data.u, bins), rel=1e-10)


def test_monte_carlo_critical_value_matches_pvalue_rule():
    rng = np.random.default_rng(9)
    p = rng.random(400)
    bins = np.floor(p * 10).astype(int)
    mc = cond.monte_carlo_test(p, bins, (rng.random(400) >= p).astype(int), n_draws=199, rng=1)
    for alpha in (0.05, 0.1):
        crit = mc.critical_value(alpha)
        for t in (crit, np.nextafter(crit, np.inf)):
            p_t = (1 + np.sum(mc.null_draws >= t)) / 200
            assert (p_t <= alpha) == (t > crit)
    assert mc.critical_value(0.001) == math.inf


def test_monte_carlo_without_pairs():
    mc = cond.monte_carlo_test(np.array([0.2, 0.6]), np.array([0, 1]), np.array([0, 1]), n_draws=10, rng=0)
    assert mc.statistic == 0.0 and mc.pvalue == 1.0


# ---------------------------------------------------------------------------
# calib_ci integration


def _setting3(n, rng):
    Z = rng.dirichlet(np.ones(10), n)
    labels = (rng.random(n)[:, None] >= np.cumsum(Z, axis=1)).sum(axis=1).clip(max=9)
    return labels, Z


def test_calib_ci_records_conditional_null_exactly():
    """End to end on 6 rows in 2 bins: the recorded variance is the enumerated one."""
    rng = np.random.default_rng(21)
    p = np.array([0.12, 0.31, 0.44, 0.58, 0.81, 0.93])
    y = (rng.random(6) < p).astype(int)
    res = ct.calib_ci(y=y, probs=p, n_bins=2, null="conditional")
    bins = np.floor(p * 2).astype(int)
    law = enumerate_law(np.column_stack([1 - p, p]), bins, lambda lab: (lab - p)[:, None])
    _, mean, second, third = law_moments(law)
    assert res.conditional.variance == pytest.approx(second, rel=1e-10)
    assert res.conditional.skewness == pytest.approx(third / second**1.5, rel=1e-9)
    assert res.null == "conditional"
    assert res.null_pvalue == res.conditional.pvalue
    assert res.null_zstat == pytest.approx(res.estimate / math.sqrt(second), rel=1e-9)
    assert res.asymptotic.pvalue == pytest.approx(stats.norm.sf(res.asymptotic.zstat))


def test_calib_ci_asymptotic_null_is_the_papers_test():
    rng = np.random.default_rng(2)
    y, P = _setting3(500, rng)
    res = ct.calib_ci(y=y, probs=P, k=2, null="asymptotic")
    z0 = 500 * math.sqrt(res.bin_volume) * res.estimate / math.sqrt(res.sigma0_sq)
    assert res.null == "asymptotic" and res.null_zstat == pytest.approx(z0)
    assert res.null_pvalue == res.asymptotic.pvalue == pytest.approx(stats.norm.sf(z0))
    assert res.contains_zero == (res.estimate_pos < res.threshold)
    assert res.monte_carlo is None and res.conditional.pvalue is not None


def test_zero_rule_follows_chosen_null_at_any_alpha():
    rng = np.random.default_rng(4)
    y, P = _setting3(400, rng)
    res_a = ct.calib_ci(y=y, probs=P, k=2, n_bins=10, null="asymptotic")
    res_c = ct.calib_ci(y=y, probs=P, k=2, n_bins=10, null="conditional")
    res_m = ct.calib_ci(y=y, probs=P, k=2, n_bins=10, null="monte-carlo", rng=1, n_null_draws=500)
    for alpha in (0.01, 0.05, 0.2, 0.5, 0.8):
        assert res_c.conf_int(alpha).contains_zero == (res_c.conditional.pvalue > alpha)
        assert res_m.conf_int(alpha).contains_zero == (res_m.monte_carlo.pvalue > alpha)
        if alpha < 0.5:  # the paper's rule T+ < threshold is p > alpha when z_alpha > 0
            assert res_a.conf_int(alpha).contains_zero == (res_a.asymptotic.pvalue > alpha)
        # upper ends do not depend on the null
        assert res_c.conf_int(alpha).upper == res_a.conf_int(alpha).upper
    assert res_c.contains_zero == (res_c.conditional.pvalue > 0.05)
    assert res_m.monte_carlo.n_draws == 500 and res_m.monte_carlo.seed == 1
    assert res_m.null_pvalue == res_m.monte_carlo.pvalue


def test_summary_shows_both_pvalues_and_disagreement():
    rng = np.random.default_rng(5)
    y, P = _setting3(300, rng)
    base = ct.calib_ci(y=y, probs=P, k=2, n_bins=10)
    pa, pc = base.asymptotic.pvalue, base.conditional.pvalue
    assert pa != pc
    alpha = (pa + pc) / 2  # the two tests disagree at this level by construction
    res = ct.calib_ci(y=y, probs=P, k=2, n_bins=10, alpha=alpha, null="conditional")
    text = str(res.summary())
    assert "conditional: T / sd(T | Z)" in text and "calibrated: z0" in text
    assert f"{pa:.4g}" in text and f"{pc:.4g}" in text
    assert "disagree" in text
    agree = str(ct.calib_ci(y=y, probs=P, k=2, n_bins=10, alpha=min(pa, pc) / 2).summary())
    assert "disagree" not in agree
    d = res.to_dict()
    assert d["null"] == "conditional" and d["conditional_pvalue"] == pytest.approx(pc)


def test_monte_carlo_same_seed_same_result():
    rng = np.random.default_rng(6)
    p = rng.random(800)
    y = (rng.random(800) < p).astype(int)
    a = ct.calib_ci(y=y, probs=p, null="monte-carlo", rng=7, n_null_draws=300)
    b = ct.calib_ci(y=y, probs=p, null="monte-carlo", rng=7, n_null_draws=300)
    assert a.monte_carlo.pvalue == b.monte_carlo.pvalue
    assert a.call.count("rng=7") == 1 and "null='monte-carlo'" in a.call and "n_null_draws=300" in a.call
    c = ct.calib_ci(y=y, probs=p, null="monte-carlo", n_null_draws=300)
    d = ct.calib_ci(y=y, probs=p, null="monte-carlo", rng=c.monte_carlo.seed, n_null_draws=300)
    assert c.monte_carlo.pvalue == d.monte_carlo.pvalue  # the recorded seed reproduces an unseeded run


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(null="exact"), ValueError, "null must be one of"),
    (dict(null=None), ValueError, "null must be one of"),
    (dict(n_null_draws=0), ValueError, "n_null_draws"),
    (dict(n_null_draws=2.5), TypeError, "n_null_draws"),
    (dict(rng="seed"), TypeError, "rng"),
    (dict(rng=True), TypeError, "rng"),
    (dict(rng=-1), ValueError, "rng"),
])
def test_bad_null_options(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ct.calib_ci(y=[0, 1, 1, 0], probs=[0.2, 0.7, 0.6, 0.4], **kwargs)


def test_rows_with_certain_confidence():
    """Rows at confidence 1.0 (as in three ImageNet files) have Sigma = 0 and never vary."""
    rng = np.random.default_rng(8)
    conf = np.concatenate([np.ones(50), 0.5 + 0.5 * rng.random(450)])
    correct = np.concatenate([np.ones(50), (rng.random(450) < conf[50:])]).astype(int)
    res = ct.calib_ci(y=correct, probs=conf, n_classes=10, null="monte-carlo", rng=1, n_null_draws=200)
    assert np.isfinite(res.conditional.pvalue) and 0 < res.monte_carlo.pvalue <= 1


# ---------------------------------------------------------------------------
# size (Monte Carlo)


@pytest.mark.slow
def test_size_smoke_setting3():
    """Setting 3 (K=10, top-1-to-2, calibrated), n=200, B=10: the paper's test is far too
    conservative; the conditional and Monte Carlo nulls hold the 10% level."""
    reps, alpha = 400, 0.10
    rej = {"asymptotic": 0, "conditional": 0, "monte-carlo": 0}
    for i in range(reps):
        y, P = _setting3(200, np.random.default_rng([20, i]))
        res = ct.calib_ci(y=y, probs=P, k=2, n_bins=10, alpha=alpha, null="monte-carlo", rng=i,
                          n_null_draws=99)
        rej["asymptotic"] += res.asymptotic.pvalue <= alpha
        rej["conditional"] += res.conditional.pvalue <= alpha
        rej["monte-carlo"] += res.monte_carlo.pvalue <= alpha
    se = math.sqrt(alpha * (1 - alpha) / reps)
    assert abs(rej["conditional"] / reps - alpha) < 3.5 * se
    assert abs(rej["monte-carlo"] / reps - alpha) < 3.5 * se
    assert rej["asymptotic"] / reps < alpha - 3 * se


def test_conditional_engines_generic_in_the_covariance_full_mode():
    """Full calibration (d = K, Sigma of the whole K-vector) with arbitrary row bins: exact moments and MC."""
    P, z, bins, to_u = _full_case(7, 5, 3, 2)
    labels = np.array([0, 2, 1, 1, 0])
    u = to_u(labels)
    _, inverse = np.unique(bins, return_inverse=True)
    inverse = inverse.ravel()
    variance = cond.conditional_moments(cond.conditional_bin_sums(z, inverse), 5).variance
    mc = cond.monte_carlo_test(z, inverse, labels, n=5, n_draws=20000, rng=3, complete=True)
    law = enumerate_law(P, bins, to_u)
    _, mean, second, _ = law_moments(law)
    assert variance == pytest.approx(second, rel=1e-10)
    exact = _exact_pvalue(law, pair_statistic(u, bins))
    assert abs(mc.pvalue - exact) < 4.5 * math.sqrt(exact * (1 - exact) / 20000) + 1e-4


def test_full_mode_accepts_every_null():
    import calibtest as ct
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(3), size=2000)
    labels = (rng.uniform(size=(2000, 1)) > P.cumsum(1)).sum(1).clip(max=2)
    res = {null: ct.calib_ci(y=labels, probs=P, k="full", n_bins=8, null=null, rng=1)
           for null in ("asymptotic", "conditional", "monte-carlo")}
    assert {r.mode for r in res.values()} == {"full"}
    assert res["conditional"].null_pvalue == res["asymptotic"].conditional.pvalue
    # the Monte Carlo p-value estimates the exact conditional one: within 4 MC standard errors
    p_mc, p_cond = res["monte-carlo"].null_pvalue, res["conditional"].null_pvalue
    assert abs(p_mc - p_cond) < 4 * np.sqrt(p_cond * (1 - p_cond) / 2000) + 0.01


def test_full_mode_large_k_skips_conditional_moments_unless_asked():
    import calibtest as ct
    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.ones(6), size=300)
    labels = (rng.uniform(size=(300, 1)) > P.cumsum(1)).sum(1).clip(max=5)
    default = ct.calib_ci(y=labels, probs=P, k="full", n_bins=2)
    assert default.conditional is None and "conditional" not in str(default.summary())
    asked = ct.calib_ci(y=labels, probs=P, k="full", n_bins=2, null="conditional")
    assert asked.conditional.pvalue is not None and asked.null_pvalue == asked.conditional.pvalue
    assert asked.estimate == default.estimate
