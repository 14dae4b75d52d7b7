"""The monitoring engines of calibtest.core.sequential against independently derived values.

* the e-process's batch growth equals a slow row-by-row product of betting factors;
* under H0 the mixture's expectation is exactly 1 (enumeration of every label vector of a tiny stream);
* the confidence sequence's capital equals the bound it claims (Fan's inequality, row by row), and the
  sequence covers the truth at every time in a small Monte Carlo (s.e. stated);
* risk-adjusted CUSUM scores against Steiner et al.'s formula computed by hand; the vectorised CUSUM path
  against the recursion; the e-detectors against the max over start times.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from calibtest.core import sequential as sq


def _slow_growth(p, y, scales, bets):
    """Log of prod_i (1 + bet g (y - p)) for every family, one row at a time (floor(p B) bins, p = 1 in cell B)."""
    out = []
    offset = 0
    for b in scales:
        total = 0.0
        for pi, yi in zip(p, y):
            cell = offset + int(math.floor(pi * b))
            total += math.log(1.0 + bets[cell] * (yi - pi))
        out.append(total)
        offset += b + 1
    out.append(sum(math.log(1.0 + bets[offset] * (2 * pi - 1) * (yi - pi)) for pi, yi in zip(p, y)))
    return np.array(out)


def test_growth_equals_row_by_row_product():
    rng = np.random.default_rng(1)
    p = rng.uniform(0.01, 0.99, 200)
    p[:3] = [0.0, 1.0, 0.5]
    y = (rng.random(200) < p).astype(float)
    scales = (1, 2, 4, 8)
    bets = rng.uniform(-0.5, 0.5, sq.n_cells(scales))
    cell, g = sq.features(p, scales)
    np.testing.assert_allclose(sq.log_growth(cell, g, y - p, bets), _slow_growth(p, y, scales, bets), rtol=1e-12)


def test_cell_sums_and_bets_by_hand():
    p = np.array([0.1, 0.2, 0.7, 0.9])
    y = np.array([1.0, 0.0, 1.0, 1.0])
    cell, g = sq.features(p, (2,))
    sums = sq.cell_sums(cell, g, y - p, sq.n_cells((2,)))
    # bin 0 holds rows 0, 1 (r = 0.9, -0.2); bin 1 rows 2, 3 (r = 0.3, 0.1); slope g = 2p - 1
    np.testing.assert_allclose(sums[0, :3], [0.7, 0.4, 0.0])
    np.testing.assert_allclose(sums[1, :3], [0.81 + 0.04, 0.09 + 0.01, 0.0])
    slope = [(2 * a - 1) * (b - a) for a, b in zip(p, y)]
    np.testing.assert_allclose(sums[:, 3], [sum(slope), sum(s * s for s in slope)])
    np.testing.assert_allclose(sq.grapa_bets(sums)[:2], [0.7 / 1.85, 0.4 / 1.10])


def _mixture_after_two_batches(p1, y1, p2, y2, scales):
    size = sq.n_cells(scales)
    c1, g1 = sq.features(p1, scales)
    w = sq.log_growth(c1, g1, y1 - p1, np.zeros(size))  # first bets: no past, lambda = 0
    sums = sq.cell_sums(c1, g1, y1 - p1, size)
    c2, g2 = sq.features(p2, scales)
    w, log_e = sq.eprocess_step(w, sq.log_growth(c2, g2, y2 - p2, sq.grapa_bets(sums)))
    return math.exp(log_e)


def test_mixture_has_expectation_one_under_h0_by_enumeration():
    p1, p2 = np.array([0.3, 0.8, 0.55]), np.array([0.2, 0.9, 0.6, 0.45])
    scales = (1, 2, 4)
    total = 0.0
    for labels in itertools.product([0.0, 1.0], repeat=7):
        y = np.array(labels)
        p = np.concatenate([p1, p2])
        prob = float(np.prod(np.where(y == 1, p, 1 - p)))
        total += prob * _mixture_after_two_batches(p1, y[:3], p2, y[3:], scales)
    assert total == pytest.approx(1.0, abs=1e-12)
    # and the same stream is not a martingale when the labels come from another law (the test can fail)
    biased = 0.0
    for labels in itertools.product([0.0, 1.0], repeat=7):
        y = np.array(labels)
        q = np.clip(np.concatenate([p1, p2]) + 0.2, 0, 1)
        prob = float(np.prod(np.where(y == 1, q, 1 - q)))
        biased += prob * _mixture_after_two_batches(p1, y[:3], p2, y[3:], scales)
    assert biased > 1.01


def test_detector_equals_max_over_start_times():
    rng = np.random.default_rng(3)
    log_e = rng.normal(0.0, 1.0, 40)
    log_sr, log_c, start = -np.inf, -np.inf, 0
    for t, le in enumerate(log_e, start=1):
        log_sr, log_c, start = sq.detector_step(log_sr, log_c, start, float(le), t)
        prods = [log_e[j - 1:t].sum() for j in range(1, t + 1)]
        assert log_c == pytest.approx(max(prods), abs=1e-9)
        assert start == 1 + int(np.argmax(prods)) or prods[start - 1] == pytest.approx(max(prods))
        assert log_sr == pytest.approx(np.log(np.sum(np.exp(prods))), abs=1e-9)  # SR = sum over starts


def test_cs_capital_is_fans_bound_row_by_row():
    rng = np.random.default_rng(4)
    coef = np.zeros(5)
    slow_plus = {th: 0.0 for th in (-0.1, 0.0, 0.2)}
    for _ in range(3):
        p = rng.uniform(0, 1, 30)
        y = (rng.random(30) < p).astype(float)
        lam = float(rng.uniform(0, 0.5))
        s = sq.cs_sums(y - p, 1.0)
        coef += np.concatenate([lam * s[:2], float(sq.psi(lam)) * s[2:]])
        for th in slow_plus:
            x = (y - p - th) / 2.0
            slow_plus[th] += float(np.sum(lam * x + (math.log(1 - lam) + lam) * x * x))
    for th, value in slow_plus.items():
        assert sq.cs_log_capital(th, coef, "citl")[0] == pytest.approx(value, rel=1e-12)


def test_fans_inequality_holds():
    lam = np.linspace(0, 0.5, 11)[:, None]
    x = np.linspace(-1, 1, 201)[None, :]
    assert np.all(np.log1p(lam * x) >= lam * x + sq.psi(lam) * x * x - 1e-15)


def test_cs_interval_endpoints_solve_the_capital_equation():
    rng = np.random.default_rng(5)
    p = rng.uniform(0, 1, 4000)
    y = (rng.random(4000) < np.clip(p + 0.05, 0, 1)).astype(float)
    s = sq.cs_sums(y - p, 1.0)
    lam = 0.1
    coef = np.concatenate([lam * s[:2], float(sq.psi(lam)) * s[2:]])
    lo, hi = sq.cs_interval(coef, 0.05, "citl", -1.0, 1.0)
    c = math.log(2 / 0.05)
    assert sq.cs_log_capital(float(lo), coef, "citl")[0] == pytest.approx(c, abs=1e-6)
    assert sq.cs_log_capital(float(hi), coef, "citl")[1] == pytest.approx(c, abs=1e-6)
    assert lo < np.mean(y - p) < hi


def _run_cs(rng, n_batches, batch, shift, alpha):
    """Running intersection of the CITL sequence on a stream with E[y - p] = shift; covered at every time?"""
    coef, n, su, su2 = np.zeros(5), 0.0, 0.0, 0.0
    lo_run, hi_run = -1.0, 1.0
    for _ in range(n_batches):
        p = rng.uniform(0.2, 0.8, batch)
        y = (rng.random(batch) < p + shift).astype(float)
        lam = float(sq.cs_bet(n, su, su2, batch, alpha))
        s = sq.cs_sums(y - p, 1.0)
        coef += np.concatenate([lam * s[:2], float(sq.psi(lam)) * s[2:]])
        n, su, su2 = n + batch, su + s[0] / 2, su2 + s[2] / 4
        lo, hi = sq.cs_interval(coef, alpha, "citl", -1.0, 1.0)
        lo_run, hi_run = max(lo_run, float(lo)), min(hi_run, float(hi))
        if not lo_run <= shift <= hi_run:
            return False
    return True


def test_cs_covers_at_every_time_monte_carlo():
    """300 streams of 40 batches of 100 rows, E[y - p] = 0.1; simultaneous coverage >= 0.90 - 3 s.e."""
    rng = np.random.default_rng(6)
    covered = np.array([_run_cs(rng, 40, 100, 0.1, 0.10) for _ in range(300)])
    se = math.sqrt(0.9 * 0.1 / covered.size)
    assert covered.mean() >= 0.90 - 3 * se


def test_oe_interval_contains_ratio():
    rng = np.random.default_rng(7)
    p = rng.uniform(0.05, 0.5, 20000)
    y = (rng.random(20000) < 1.3 * p).astype(float)
    s = sq.cs_sums(y, p)
    lam = 0.05
    coef = np.concatenate([lam * s[:2], float(sq.psi(lam)) * s[2:]])
    lo, hi = sq.cs_interval(coef, 0.05, "oe", 0.0, 50.0)
    assert lo < y.sum() / p.sum() < hi
    assert lo > 1.0


def test_ece_upper_by_hand_and_bracket():
    lo, hi = sq.bin_bracket(4)
    np.testing.assert_allclose(lo, [-0.25, -0.5, -0.75, -1.0, -1.0])
    np.testing.assert_allclose(hi, [1.0, 0.75, 0.5, 0.25, 0.0])
    counts = np.array([10, 30, 0, 60, 0])
    lower = np.array([-0.1, 0.0, -1, -0.05, -1])
    upper = np.array([0.05, 0.2, 1, 0.01, 0])
    expected = math.sqrt(0.1 * 0.01 + 0.3 * 0.04 + 0.6 * 0.0025)
    assert sq.ece_upper(counts, lower, upper) == pytest.approx(expected, rel=1e-12)


def test_ra_scores_against_steiners_formula_by_hand():
    # W = y log(R) - log(1 - p + R p); p = 0.2, R = 2: y = 1 -> log 2 - log 1.2; y = 0 -> -log 1.2
    scores = sq.ra_scores(np.array([0.2, 0.2, 0.5]), np.array([1, 0, 1]), 2.0)
    np.testing.assert_allclose(scores, [math.log(2) - math.log(1.2), -math.log(1.2), math.log(2) - math.log(1.5)])
    down = sq.ra_scores(np.array([0.4]), np.array([0]), 0.5)
    assert down[0] == pytest.approx(-math.log(1 - 0.4 + 0.5 * 0.4))


def test_cusum_path_equals_recursion():
    rng = np.random.default_rng(8)
    w = rng.normal(-0.1, 1.0, 500)
    s, slow = 1.5, []
    for wi in w:
        s = max(0.0, s + wi)
        slow.append(s)
    np.testing.assert_allclose(sq.cusum_path(w, start=1.5), slow, atol=1e-10)


def test_ra_threshold_reaches_its_arl():
    """The simulated threshold's ARL, re-estimated on fresh paths, is near the target (s.e. of a mean run length)."""
    rng = np.random.default_rng(9)
    p = rng.beta(2, 8, 300)
    pool = sq.ra_batch_pool(p, 2.0, rng, n_pool=1000)
    # mean and variance of a batch score with predictions resampled from p: n E[W] and n Var[W] of one row
    w1, w0 = np.log(2) - np.log1p(p), -np.log1p(p)
    mean_row = np.mean(p * w1 + (1 - p) * w0)
    var_row = np.mean(p * w1 ** 2 + (1 - p) * w0 ** 2) - mean_row ** 2
    np.testing.assert_allclose(pool.mean(), p.size * mean_row, atol=4 * math.sqrt(p.size * var_row / 1000))
    np.testing.assert_allclose(pool.var(), p.size * var_row, rtol=0.15)
    h, arl = sq.ra_threshold(pool, 50.0, rng, n_paths=400)
    runs = sq._first_crossings(pool, np.array([h]), 2000, 5000, np.random.default_rng(10))[:, 0]
    se = runs.std() / math.sqrt(runs.size)
    assert runs.mean() >= 50.0 - 3 * se - 50.0 * 0.15  # the level grid is coarse: within 15% and noise
    assert arl >= 50.0


@pytest.mark.parametrize("kind, lo, hi, ratio", [("citl", -1.0, 1.0, None), ("oe", 0.0, 1e3, 0.7),
                                                 ("oe", 0.0, 1e3, 1.6), ("oe", 0.0, 1e3, 1.0)])
def test_closed_form_endpoints_equal_bisection(kind, lo, hi, ratio):
    rng = np.random.default_rng(11)
    p = rng.uniform(0.05, 0.6, 3000)
    y = (rng.random(3000) < p * (ratio or 1.0) + (0.03 if ratio is None else 0.0)).astype(float)
    s = sq.cs_sums(y - p, 1.0) if kind == "citl" else sq.cs_sums(y, p)
    for lam in (0.02, 0.2, 0.5):
        coef = np.concatenate([lam * s[:2], float(sq.psi(lam)) * s[2:]])
        low, up = sq.cs_interval(coef, 0.05, kind, lo, hi)
        c = math.log(2 / 0.05)
        plus = lambda th: sq.cs_log_capital(th, coef, kind)[0] - c
        minus = lambda th: c - sq.cs_log_capital(th, coef, kind)[1]
        slow_low = sq._bisect(plus, lo, hi)[0] if plus(lo) >= 0 else lo
        slow_up = sq._bisect(minus, lo, hi)[1] if minus(hi) < 0 else hi
        assert float(low) == pytest.approx(float(slow_low), abs=1e-9)
        assert float(up) == pytest.approx(float(slow_up), abs=1e-9)
