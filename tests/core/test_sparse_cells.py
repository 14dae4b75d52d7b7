"""Sparse cells: what T estimates given the cell counts, proved by exhaustive enumeration; V2; the flag.

Every expectation below is exact: all prediction vectors (from a finite support) and all
label vectors are enumerated with their probabilities, T is computed by the package for
each, and the weighted sum is compared with the estimand computed independently from
the support, the cell probabilities and the calibration map.
"""
import itertools
import math

import numpy as np
import pytest

import calibtest as ct
from calibtest.core.binning import BinRule, occupancy_n_bins, singleton_fraction
from calibtest.core.binstats import debiased_statistic, second_order_variance
from calibtest.core.partition import partition_rows
from calibtest.core.targets import prepare_target

# binary target, B = 2: cell 0 = [0, 1/2) holds support points 0.1, 0.3; cell 1 = [1/2, 1) holds 0.6, 0.85
SUPPORT = np.array([0.1, 0.3, 0.6, 0.85])
Q = np.array([0.3, 0.2, 0.25, 0.25])          # P(Z = support point)
PI = np.array([0.3, 0.1, 0.8, 0.6])           # P(Y = 1 | Z): miscalibrated
CELL = np.array([0, 0, 1, 1])


def binary_T(z, y):
    data = prepare_target(np.asarray(y), np.asarray(z, dtype=float))
    return debiased_statistic(partition_rows(data, 2).bin_sums(data), len(z))


def enumerate_binary(n):
    """Yield (Z indices, P(Z), T(y) for all y, P(y | Z)) over every configuration."""
    for zi in itertools.product(range(4), repeat=n):
        zi = np.array(zi)
        pz = float(np.prod(Q[zi]))
        for y in itertools.product((0, 1), repeat=n):
            y = np.array(y)
            py = float(np.prod(np.where(y == 1, PI[zi], 1 - PI[zi])))
            yield zi, pz, binary_T(SUPPORT[zi], y), py


@pytest.mark.slow
def test_T_given_cell_counts_is_unbiased_for_the_kept_mass_estimand_binary():
    n = 4
    p_cell = np.array([Q[CELL == b].sum() for b in (0, 1)])
    mu_cell = np.array([np.sum(Q[CELL == b] * (PI - SUPPORT)[CELL == b]) / p_cell[b] for b in (0, 1)])
    by_counts, prob_counts = {}, {}
    e_t = 0.0
    for zi, pz, t, py in enumerate_binary(n):
        c = tuple(np.bincount(CELL[zi], minlength=2))
        by_counts[c] = by_counts.get(c, 0.0) + pz * py * t
        prob_counts[c] = prob_counts.get(c, 0.0) + pz * py
        e_t += pz * py * t
    assert sum(prob_counts.values()) == pytest.approx(1.0, abs=1e-14)
    for c, total in by_counts.items():
        kept = sum(c[b] * mu_cell[b] ** 2 for b in (0, 1) if c[b] >= 2) / n
        assert total / prob_counts[c] == pytest.approx(kept, rel=1e-12, abs=1e-15), c
    # unconditionally: each cell's share is weighted by P(its row is not alone) = 1 - (1 - p_b)^(n-1)
    binned = float(np.sum(p_cell * mu_cell**2))
    expected = float(np.sum(p_cell * (1 - (1 - p_cell) ** (n - 1)) * mu_cell**2))
    assert e_t == pytest.approx(expected, rel=1e-12)
    assert binned - e_t == pytest.approx(float(np.sum(p_cell * (1 - p_cell) ** (n - 1) * mu_cell**2)), rel=1e-12)
    assert e_t < binned  # the bias against the binned ECE^2 of all cells is real


def test_T_given_the_predictions_loses_the_within_cell_spread_binary():
    """E[T | Z] = (1/n) sum_{c_b >= 2} (c_b ||mean m||^2 - sum ||m_a - mean m||^2 / (c_b - 1))."""
    n = 3
    for zi in itertools.product(range(4), repeat=n):
        zi = np.array(zi)
        m = (PI - SUPPORT)[zi]
        e_t = 0.0
        for y in itertools.product((0, 1), repeat=n):
            y = np.array(y)
            e_t += float(np.prod(np.where(y == 1, PI[zi], 1 - PI[zi]))) * binary_T(SUPPORT[zi], y)
        cells = CELL[zi]
        want = 0.0
        for b in (0, 1):
            mb = m[cells == b]
            if mb.size >= 2:
                want += mb.size * mb.mean() ** 2 - np.sum((mb - mb.mean()) ** 2) / (mb.size - 1)
        assert e_t == pytest.approx(want / n, rel=1e-12, abs=1e-15), zi


def test_T_given_cell_counts_full_calibration_k3():
    """K = 3, B = 2 on the simplex, n = 3, three support points (two share a cell), all 27 x 27 cases."""
    support = np.array([[0.6, 0.3, 0.1], [0.7, 0.2, 0.1], [0.1, 0.2, 0.7]])
    q = np.array([0.4, 0.3, 0.3])
    pi = np.array([[0.5, 0.3, 0.2], [0.8, 0.1, 0.1], [0.2, 0.2, 0.6]])
    n = 3
    from calibtest.core.simplex import simplex_groups
    inv, _ = simplex_groups(support, 2)
    assert inv[0] == inv[1] != inv[2]
    cell = np.array([0, 0, 1])
    p_cell = np.array([q[cell == b].sum() for b in (0, 1)])
    gap = pi - support
    mu = np.array([(q[cell == b, None] * gap[cell == b]).sum(axis=0) / p_cell[b] for b in (0, 1)])
    num, den = {}, {}
    for zi in itertools.product(range(3), repeat=n):
        zi = np.array(zi)
        pz = float(np.prod(q[zi]))
        P = support[zi]
        c = tuple(np.bincount(cell[zi], minlength=2))
        for y in itertools.product(range(3), repeat=n):
            y = np.array(y)
            py = float(np.prod(pi[zi, y]))
            data = prepare_target(y, P, k="full")
            t = debiased_statistic(partition_rows(data, 2).bin_sums(data), n)
            num[c] = num.get(c, 0.0) + pz * py * t
            den[c] = den.get(c, 0.0) + pz * py
    for c in num:
        kept = sum(c[b] * float(mu[b] @ mu[b]) for b in (0, 1) if c[b] >= 2) / n
        assert num[c] / den[c] == pytest.approx(kept, rel=1e-12, abs=1e-15), c


def test_second_order_variance_is_the_exact_conditional_variance_under_calibration():
    """Under calibration the linear part vanishes and Var(T | Z) = V2: all 3^5 label vectors enumerated."""
    rng = np.random.default_rng(3)
    z = rng.dirichlet(np.ones(3), size=5)
    inverse = np.array([0, 0, 0, 1, 1])
    n = 5

    def t_of(y):
        u = np.eye(3)[list(y)] - z
        total = 0.0
        for b in (0, 1):
            ub = u[inverse == b]
            s = ub.sum(axis=0)
            total += (s @ s - np.sum(ub * ub)) / (ub.shape[0] - 1)
        return total / n

    m1 = m2 = 0.0
    for y in itertools.product(range(3), repeat=n):
        p = float(np.prod(z[np.arange(n), list(y)]))
        t = t_of(y)
        m1 += p * t
        m2 += p * t * t
    assert m1 == pytest.approx(0.0, abs=1e-15)
    assert second_order_variance(z, inverse) == pytest.approx(m2 - m1**2, rel=1e-12)


def test_occupancy_rule_scans_down_from_the_rate():
    seen = []

    def counts_at(B):  # B^2 cells of 1000 rows: singletons vanish below B = 9
        seen.append(B)
        return np.array([1] * 100 + [2] * 450) if B > 9 else np.array([5] * 200)

    rule = occupancy_n_bins(counts_at, 1000, 2)
    assert seen == list(range(ct.auto_n_bins(1000, 2), 8, -1)) and rule.n_bins == 9
    assert rule.rate_singleton_fraction == pytest.approx(0.1) and rule.singleton_fraction == 0.0
    assert "reduced from" in rule.describe()
    # one dimension keeps the rate
    one = occupancy_n_bins(lambda B: np.array([1] * 100 + [2] * 450), 1000, 1)
    assert one.n_bins == ct.auto_n_bins(1000, 1) and one.singleton_fraction == pytest.approx(0.1)
    assert "kept in one dimension" in one.describe()
    assert singleton_fraction(np.array([1, 1, 2, 6])) == 0.2


def test_flagged_result_says_so_in_the_summary():
    rng = np.random.default_rng(4)
    P = rng.dirichlet(np.ones(4), size=2000)
    y = (rng.random(2000)[:, None] > np.cumsum(P, 1)).sum(1).clip(0, 3)
    sparse = ct.calib_ci(y=y, probs=P, k="full", n_bins=13)
    assert sparse.approximate and sparse.approximation.singleton_fraction > 0.05
    assert sparse.approximation.singleton_fraction == pytest.approx(
        np.mean(np.bincount(sparse.partition.inverse)[sparse.partition.inverse] == 1))
    text = " ".join(str(sparse.summary(evidence=False)).split())
    assert "APPROXIMATE" in text and "alone in their cell" in text
    auto = ct.calib_ci(y=y, probs=P, k="full")
    assert not auto.approximate and isinstance(auto.bin_rule, BinRule) and auto.n_bins < 13
    auto_text = " ".join(str(auto.summary(evidence=False)).split())
    assert "APPROXIMATE" not in auto_text and "Bins: B = " in auto_text
    assert "se = sqrt(sigma1^2 / n + V2)" in auto_text
    # V2 enters the standard error: se^2 = sigma1^2 / n + V2
    v2 = second_order_variance(P, auto.partition.inverse)
    assert auto.approximation.second_order_variance == pytest.approx(v2, rel=1e-10)
    assert auto.se == pytest.approx(math.sqrt(auto.sigma1_sq / 2000 + v2), rel=1e-12)
    assert auto.to_dict()["approximate"] is False and sparse.to_dict()["approximate"] is True
    assert sparse.to_dict()["singleton_fraction"] == sparse.approximation.singleton_fraction


@pytest.mark.slow
def test_edges_study_smoke():
    """A small run of vignettes/edges_coverage.py: full calibration, K = 4, n = 2000, pi ~ P^0.5.

    The vignette measures (200 data sets) coverage of the binned ECE^2 0.685 with the rate and
    se = sigma1/sqrt(n), 0.955 with the automatic rule and V2 (nominal 0.90); 40 data sets here,
    so the bounds sit 2 (before) and 3 (after) binomial standard deviations from those values.
    """
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "vignettes" / "edges_coverage.py"
    spec = importlib.util.spec_from_file_location("edges_coverage", path)
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    study.TRUTH_DRAWS = 200_000
    rows = [study.replicate(np.random.default_rng([7, r]), "full", 4, 4, 1.0, "temp", 2000) for r in range(40)]
    assert all(r["B_after"] < r["B_before"] == ct.auto_n_bins(2000, 3) for r in rows)
    assert all(r["singleton_before"] > 0.05 and r["singleton_after"] <= 0.05 and not r["approximate"] for r in rows)
    before = sum(r["cov_bin_before"] for r in rows)
    after = sum(r["cov_bin_after"] for r in rows)
    assert before <= 33 and after >= 34 and after - before >= 5, (before, after)
