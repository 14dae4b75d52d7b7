"""calibtest.core.weighted: the pair-sum terms of fixed stratum counts (case-control) and the second-order
jackknife, by exact enumeration."""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from calibtest.core.weighted import (NullLabels, prevalence_event_prob, second_order_jackknife,
                                     stratified_pair_terms, weighted_null_draws, weighted_statistics)

# each stratum's law of one row: (bin, U, weight) with its probability; weights include a prevalence factor
CASES = ([(0, 0.7, 0.4), (1, 0.4, 0.8), (0, 0.2, 0.2)], [0.5, 0.3, 0.2])
CONTROLS = ([(0, -0.3, 2.4), (1, -0.6, 1.6), (1, -0.1, 1.3)], [0.2, 0.5, 0.3])
N_CASES, N_CONTROLS, M = 2, 3, 2


def _expectations():
    """E of the plain and stratified pair sums per bin, over every sample of 2 cases and 3 controls."""
    laws = [CASES] * N_CASES + [CONTROLS] * N_CONTROLS
    stratum = np.array([True] * N_CASES + [False] * N_CONTROLS)
    plain_num, plain_den, full_num, full_den = (np.zeros(M) for _ in range(4))
    for pick in itertools.product(range(3), repeat=len(laws)):
        prob = np.prod([law[1][k] for law, k in zip(laws, pick)])
        rows = [law[0][k] for law, k in zip(laws, pick)]
        cell = np.array([r[0] for r in rows])
        u = np.array([[r[1]] for r in rows])
        w = np.array([r[2] for r in rows])
        num, den = np.zeros(M), np.zeros(M)
        for i, j in itertools.permutations(range(len(rows)), 2):  # the pair sums by a double loop
            if cell[i] == cell[j]:
                num[cell[i]] += w[i] * w[j] * u[i, 0] * u[j, 0]
                den[cell[i]] += w[i] * w[j]
        extra_num, extra_den = stratified_pair_terms(cell, w, u, stratum, M)
        plain_num += prob * num
        plain_den += prob * den
        full_num += prob * (num + extra_num)
        full_den += prob * (den + extra_den)
    return plain_num, plain_den, full_num, full_den


def _population_sums():
    """(E S_b, E W_b) of the design: sum_h n_h E_h[w U 1_b] and sum_h n_h E_h[w 1_b], from the laws."""
    es, ew = np.zeros(M), np.zeros(M)
    for (outcomes, probs), n_h in ((CASES, N_CASES), (CONTROLS, N_CONTROLS)):
        for (b, u, w), p in zip(outcomes, probs):
            es[b] += n_h * p * w * u
            ew[b] += n_h * p * w
    return es, ew


def test_stratified_pair_sums_are_unbiased_for_the_squared_sums_by_enumeration():
    plain_num, plain_den, full_num, full_den = _expectations()
    es, ew = _population_sums()
    assert full_num == pytest.approx(es ** 2, rel=1e-12, abs=1e-14)
    assert full_den == pytest.approx(ew ** 2, rel=1e-12, abs=1e-14)
    # the i.i.d. pair sums miss sum_h n_h ||m_h||^2 (the test above can fail)
    missed = np.zeros(M)
    for (outcomes, probs), n_h in ((CASES, N_CASES), (CONTROLS, N_CONTROLS)):
        m_h = np.zeros(M)
        for (b, u, w), p in zip(outcomes, probs):
            m_h[b] += p * w * u
        missed += n_h * m_h ** 2
    assert plain_num == pytest.approx(es ** 2 - missed, rel=1e-12)
    assert np.all(np.abs(plain_num - es ** 2) > 1e-3)


def test_stratified_pair_terms_of_a_stratum_of_one_row_are_zero():
    cell = np.array([0, 0, 1])
    u = np.array([[0.5], [0.2], [-0.3]])
    w = np.array([1.0, 2.0, 3.0])
    num, den = stratified_pair_terms(cell, w, u, np.array([True, False, False]), 2)
    # the controls (rows 1, 2) are in different bins: no within-stratum pair; the case stratum has one row
    assert num == pytest.approx([0.0, 0.0], abs=1e-15) and den == pytest.approx([0.0, 0.0], abs=1e-15)
    num, den = stratified_pair_terms(np.array([0, 0, 0]), w, u, np.array([True, False, False]), 1)
    assert num[0] == pytest.approx(2 * 2.0 * 3.0 * 0.2 * -0.3 / 1)
    assert den[0] == pytest.approx(2 * 2.0 * 3.0 / 1)


@pytest.mark.slow
def test_stratified_pair_terms_mean_on_a_case_control_design():
    """Case-control samples (200 cases + 200 controls, prevalence 0.1, an over-spread model, 8 bins of p): the
    mean of the terms over 1500 samples is sum_h n_h m_hb^2 per bin, m_hb = w_h E[U 1_b | stratum h] by quadrature
    (within 3.8 Monte Carlo s.e. in every bin: a family-wise level of 0.001 over the 8 bins; bin 0 is at 3.5 s.e.
    with this seed, and at 0.1 s.e. in a check of 3000 samples with another), and the missed term is a visible
    share of (E S_b)^2 in some bin."""
    from scipy import integrate, optimize, special
    prev, n_h, B = 0.1, 200, 8
    x = np.linspace(-10.0, 10.0, 200_001)
    dens = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    mu = optimize.brentq(lambda c: integrate.trapezoid(special.expit(c + x) * dens, x) - prev, -10, 5)
    r = special.expit(mu + x)
    p = special.expit(mu + 1.5 * x)
    b = np.minimum((p * B).astype(int), B - 1)
    w_case, w_control = prev / 0.5, (1 - prev) / 0.5
    f_case, f_control = dens * r / prev, dens * (1 - r) / (1 - prev)   # densities of x given the stratum
    m_case = np.array([w_case * integrate.trapezoid(np.where(b == k, (1 - p) * f_case, 0.0), x) for k in range(B)])
    m_control = np.array([w_control * integrate.trapezoid(np.where(b == k, -p * f_control, 0.0), x)
                          for k in range(B)])
    expected = n_h * m_case ** 2 + n_h * m_control ** 2
    rng = np.random.default_rng(35)
    draws = []
    for _ in range(1500):
        xs = rng.standard_normal(4000)
        ys = rng.random(xs.size) < special.expit(mu + xs)
        pick = np.concatenate([np.flatnonzero(ys)[:n_h], np.flatnonzero(~ys)[:n_h]])
        ps = special.expit(mu + 1.5 * xs[pick])
        events = ys[pick]
        cell = np.minimum((ps * B).astype(int), B - 1)
        w = np.where(events, w_case, w_control)
        draws.append(stratified_pair_terms(cell, w, (events - ps)[:, None], events, B)[0])
    draws = np.array(draws)
    se = draws.std(axis=0, ddof=1) / math.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - expected) <= 3.8 * se + 1e-12)
    target = (n_h * (m_case + m_control)) ** 2                     # (E S_b)^2
    assert np.max(expected / np.maximum(target, 1e-300)) > 0.05


# --- the second-order (iterated) jackknife in closed form, against the direct enumeration of deletions ---


def _deleted_statistic(inverse, u, w, drop):
    """G(drop): T_w without the rows ``drop``; a bin left with fewer than two rows keeps its full ratio (exact)."""
    def ratio(sel):
        if len(sel) < 2:
            return None
        num = sum(w[i] * w[j] * u[i] * u[j] for i in sel for j in sel if i != j)
        return num / sum(w[i] * w[j] for i in sel for j in sel if i != j)
    A = W = 0
    for b in set(inverse):
        full = [i for i in range(len(u)) if inverse[i] == b]
        R = ratio(full) or 0
        kept = [i for i in full if i not in drop]
        R_left = R if len(kept) == len(full) or ratio(kept) is None else ratio(kept)
        A += sum(w[i] for i in kept) * R_left
        W += sum(w[i] for i in kept)
    return A / W


def _iterated_jackknife_by_enumeration(inverse, u, w):
    """T_JJ = n T_J - (n - 1) mean_i T_J^(-i), T_J^(-i) = (n - 1) G(i) - (n - 2) mean_{j != i} G(ij); exact
    rationals.  Returns T_w, T_J, T_JJ and the variance (n - 1)/n sum_i (T_J^(-i) - mean)^2."""
    n = len(u)
    T = _deleted_statistic(inverse, u, w, ())
    G1 = [_deleted_statistic(inverse, u, w, (i,)) for i in range(n)]
    G2 = {}
    for i, j in itertools.combinations(range(n), 2):
        G2[i, j] = G2[j, i] = _deleted_statistic(inverse, u, w, (i, j))
    T_J = n * T - (n - 1) * sum(G1) / n
    loo = [(n - 1) * G1[i] - Fraction(n - 2, n - 1) * sum(G2[i, j] for j in range(n) if j != i) for i in range(n)]
    mean = sum(loo) / n
    return T, T_J, n * T_J - (n - 1) * mean, Fraction(n - 1, n) * sum((x - mean) ** 2 for x in loo)


def _small_sample(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 14))
    events = rng.random(n) < 0.5
    u = events - rng.uniform(size=n)
    v = np.array([rng.uniform(0.05, 1.0), rng.uniform(0.5, 20.0)])
    _, inverse = np.unique(rng.integers(0, max(1, n // 3), n), return_inverse=True)  # bins of 1-6 rows
    return inverse, events, u, v


@pytest.mark.parametrize("seed", range(12))
def test_second_order_jackknife_matches_the_enumeration_of_deletions(seed):
    inverse, events, u, v = _small_sample(seed)
    fast = second_order_jackknife(inverse, events, u, v, int(inverse.max()) + 1)
    w = [Fraction(x) for x in np.where(events, v[0], v[1])]
    T, T_J, T_JJ, V = _iterated_jackknife_by_enumeration(inverse, [Fraction(x) for x in u], w)
    got = [fast.ratio[0], fast.jackknife[0], fast.estimate[0], fast.jackknife_variance[0]]
    for value, exact in zip(got, (T, T_J, T_JJ, V)):
        assert abs(value - float(exact)) <= 1e-12 * max(1.0, abs(float(exact)))
    assert abs(fast.contributions.sum() - fast.estimate[0]) <= 1e-12


def test_second_order_jackknife_of_a_weight_ratio_of_a_thousand_matches_the_enumeration():
    """pi = 0.001 against a 50/50 sample: a control weighs 999 cases; the closed form sums counts, not weights."""
    inverse, events, u, _ = _small_sample(3)
    v = np.array([0.002, 1.998])
    fast = second_order_jackknife(inverse, events, u, v, int(inverse.max()) + 1)
    w = [Fraction(x) for x in np.where(events, v[0], v[1])]
    exact = _iterated_jackknife_by_enumeration(inverse, [Fraction(x) for x in u], w)
    for value, e in zip([fast.ratio[0], fast.jackknife[0], fast.estimate[0], fast.jackknife_variance[0]], exact):
        assert abs(value - float(e)) <= 1e-12 * max(1.0, abs(float(e)))


def test_weighted_statistics_second_order_keeps_the_first_order_pieces():
    """jackknife=2: T_w as before, T_J of the closed form equal to ``jackknife_statistic``'s."""
    rng = np.random.default_rng(4)
    n, m = 400, 7
    z = rng.uniform(size=n)
    events = rng.random(n) < z
    w = np.where(events, 0.1, 1.9)
    inverse = np.minimum((z * m).astype(int), m - 1)
    u = (events - z)[:, None]
    one, two = (weighted_statistics(inverse, u, w, m, jackknife=k, events=events) for k in (1, 2))
    so = second_order_jackknife(inverse, events, u[:, 0], np.array([0.1, 1.9]) / 2, m)
    assert one.ratio_estimate == two.ratio_estimate
    assert so.jackknife[0] == pytest.approx(one.estimate, rel=1e-12)
    assert so.variance[0] == pytest.approx(one.jackknife_variance, rel=1e-10)
    assert two.estimate == pytest.approx(so.estimate[0], rel=1e-12)
    with pytest.raises(ValueError, match="one weight per class"):
        weighted_statistics(inverse, u, w * rng.uniform(0.5, 1.5, n), m, jackknife=2, events=events)


def test_second_order_null_draws_are_the_statistic_of_each_draw():
    rng = np.random.default_rng(8)
    n, m = 150, 9
    z = rng.uniform(size=n)
    inverse = np.minimum((z * m).astype(int), m - 1)
    q = prevalence_event_prob(z, 0.1, 1.9)
    draws, var = weighted_null_draws(z, inverse, NullLabels(np.full(n, 0.1), np.full(n, 1.9), q), n_draws=6,
                                     rng=np.random.default_rng(2), m=m, jackknife=2, max_cells=64 * n,
                                     return_variance=True)
    y = np.random.default_rng(2).random((6, n)) < q   # the same labels, drawn again
    for k in range(6):  # each draw (in blocks of two) against the single-set computation
        one = weighted_statistics(inverse, (y[k] - z)[:, None], np.where(y[k], 0.1, 1.9), m, jackknife=2,
                                  events=y[k])
        assert draws[k] == pytest.approx(one.estimate, rel=1e-10, abs=1e-15)
        assert var[k] == pytest.approx(one.jackknife_variance, rel=1e-10, abs=1e-18)


@pytest.mark.parametrize("seed", range(5))
def test_second_order_jackknife_of_unit_weights_is_t(seed):
    """With one weight for both classes each bin ratio is a U-statistic: T_J = T_JJ = T (paper eq. (6))."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    events = rng.random(n) < 0.5
    u = events - rng.uniform(size=n)
    _, inverse = np.unique(rng.integers(0, max(1, n // 3), n), return_inverse=True)
    T = sum((u[inverse == b].sum() ** 2 - (u[inverse == b] ** 2).sum()) / (np.sum(inverse == b) - 1) / n
            for b in range(inverse.max() + 1) if np.sum(inverse == b) > 1)
    fast = second_order_jackknife(inverse, events, u, np.ones(2), int(inverse.max()) + 1)
    assert fast.estimate[0] == pytest.approx(T, rel=1e-11, abs=1e-15)
    assert fast.jackknife[0] == pytest.approx(T, rel=1e-11, abs=1e-15)
