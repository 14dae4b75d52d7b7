"""calibtest.core.weighted: the pair-sum terms of fixed stratum counts (case-control), by exact enumeration."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from calibtest.core.weighted import stratified_pair_terms

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
