"""The estimator T, the plug-in T_m and sigma1^2 against hand and slow computations."""
from fractions import Fraction

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import stats

import calibtest as ct
from calibtest.core.binning import cube_indices, group_keys
from calibtest.core.binstats import BinStats, bin_sums, debiased_statistic, sigma1_sq

from conftest import slow_estimates

P6 = [0.1, 0.2, 0.3, 0.6, 0.7, 0.9]
Y6 = [0, 1, 0, 1, 1, 0]


def test_hand_computed_six_rows():
    # B = 2: rows 0-2 in [0, 1/2), rows 3-5 in [1/2, 1).  U = y - p:
    # bin 0: -0.1, 0.8, -0.3 (S = 0.4, Q = 0.74); bin 1: 0.4, 0.3, -0.9 (S = -0.2, Q = 1.06)
    # T = [(0.16 - 0.74)/2 + (0.04 - 1.06)/2] / 6 = -0.8 / 6 = -2/15
    res = ct.calib_ci(y=Y6, probs=P6, n_bins=2, alpha=0.1, null="asymptotic")
    assert_allclose(res.estimate, -2 / 15, rtol=1e-13)
    assert res.estimate_pos == 0.0 and res.ece == 0.0
    # mu = (2/15, -1/15); Cov_0 = 0.74/3 - 4/225 = 103/450; Cov_1 = 1.06/3 - 1/225 = 157/450
    mu0, mu1 = Fraction(2, 15), Fraction(-1, 15)
    cov0, cov1 = Fraction(103, 450), Fraction(157, 450)
    half = Fraction(1, 2)
    sigma1 = (half * (mu0**4 + mu1**4) - (half * (mu0**2 + mu1**2)) ** 2
              + 4 * half * (mu0**2 * cov0 + mu1**2 * cov1))
    assert sigma1 == Fraction(457, 40500)
    assert_allclose(res.sigma1_sq, float(sigma1), rtol=1e-12)
    assert_allclose(res.se, np.sqrt(457 / 40500 / 6), rtol=1e-12)
    # plug-in T_m = (3/6) (2/15)^2 + (3/6) (1/15)^2 = 1/90
    assert_allclose(res.plugin_estimate, 1 / 90, rtol=1e-12)
    # T+ = 0 < threshold -> zero rule: [0, z_{0.05} se]
    threshold = stats.norm.ppf(0.9) * np.sqrt(1 / 15) / (6 * np.sqrt(1 / 2))
    assert_allclose(res.threshold, threshold, rtol=1e-12)
    assert res.contains_zero and not res.ci_lower_open
    assert res.ci_lower == 0.0
    assert_allclose(res.ci_upper, stats.norm.ppf(0.95) * np.sqrt(457 / 40500 / 6), rtol=1e-12)
    z0 = 6 * np.sqrt(0.5) * (-2 / 15) / np.sqrt(1 / 15)
    assert_allclose(res.null_zstat, z0, rtol=1e-12)
    assert_allclose(res.null_pvalue, stats.norm.sf(z0), rtol=1e-12)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("B", [1, 3, 7])
def test_binary_matches_slow_implementation(seed, B):
    rng = np.random.default_rng(seed)
    n = 40
    p = rng.uniform(size=n)
    p[:3] = [1.0, 0.0, 0.5]  # edges: exactly 1 gets its own cube
    y = (rng.uniform(size=n) < p ** 1.5).astype(int)
    res = ct.calib_ci(y=y, probs=p, n_bins=B)
    z, u = p[:, None], (y - p)[:, None]
    t, t_m, s1, m = slow_estimates(z, u, B)
    assert_allclose(res.estimate, t, rtol=1e-11, atol=1e-15)
    assert_allclose(res.plugin_estimate, t_m, rtol=1e-11)
    assert_allclose(res.sigma1_sq, s1, rtol=1e-10, atol=1e-15)
    assert res.n_occupied_bins == m


@pytest.mark.parametrize("K,k,B", [(3, 2, 4), (5, 2, 3), (6, 3, 3), (10, 2, 5)])
def test_topk_matches_slow_implementation(K, k, B):
    rng = np.random.default_rng(K * 10 + k)
    n = 60
    P = rng.dirichlet(np.ones(K) * 0.7, size=n)
    labels = np.array([rng.choice(K, p=row) for row in P[:, ::-1]])  # miscalibrated
    res = ct.calib_ci(y=labels, probs=P, k=k, n_bins=B)
    order = np.array([sorted(range(K), key=lambda j: (-P[i, j], j))[:k] for i in range(n)])
    z = np.array([P[i, order[i]] for i in range(n)])
    y_ind = np.array([[1.0 if labels[i] == c else 0.0 for c in order[i]] for i in range(n)])
    t, t_m, s1, m = slow_estimates(z, y_ind - z, B)
    assert_allclose(res.estimate, t, rtol=1e-11, atol=1e-15)
    assert_allclose(res.sigma1_sq, s1, rtol=1e-10, atol=1e-15)
    assert res.n_occupied_bins == m
    assert res.bin_volume == B ** -k


def test_top1_from_confidence_equals_top1_from_matrix():
    rng = np.random.default_rng(3)
    P = rng.dirichlet(np.ones(4), size=500)
    labels = np.array([rng.choice(4, p=row) for row in P])
    conf = P.max(axis=1)
    correct = (P.argmax(axis=1) == labels).astype(int)
    a = ct.calib_ci(y=labels, probs=P, k=1, n_bins=10)
    b = ct.calib_ci(y=correct, probs=conf, n_classes=4, n_bins=10)
    assert a.mode == b.mode == "top1"
    for name in ("estimate", "sigma1_sq", "sigma0_sq", "ci_lower", "ci_upper", "null_pvalue"):
        assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-12)


def test_merge_of_disjoint_parts_equals_whole():
    rng = np.random.default_rng(5)
    z = rng.uniform(size=(300, 2))
    u = rng.normal(size=(300, 2))

    def stats_of(rows):
        inverse, keys = group_keys(cube_indices(z[rows], 4), 5)
        return bin_sums(inverse, keys, u[rows], z[rows])

    whole = stats_of(np.arange(300))
    merged = stats_of(np.arange(0, 120)).merge(stats_of(np.arange(120, 300)))
    assert_allclose(debiased_statistic(merged), debiased_statistic(whole), rtol=1e-12)
    assert_allclose(sigma1_sq(merged), sigma1_sq(whole), rtol=1e-12)
    assert merged.n == 300


def test_bin_stats_are_read_only():
    res = ct.calib_ci(y=Y6, probs=P6, n_bins=2)
    assert isinstance(res.bin_stats, BinStats)
    with pytest.raises(ValueError):
        res.bin_stats.count[0] = 5
    with pytest.raises(AttributeError):
        res.estimate = 1.0
