"""The monitoring engines of calibtest.core.sequential against independently derived values.

* the e-process's batch growth equals a slow row-by-row product of betting factors;
* under H0 the mixture's expectation is exactly 1 (enumeration of every label vector of a tiny stream);
* the confidence sequence's capital equals the bound it claims (Fan's inequality, row by row), and the
  sequence covers the truth at every time in a small Monte Carlo (s.e. stated);
* risk-adjusted CUSUM scores against Steiner et al.'s formula computed by hand; the vectorised CUSUM path
  against the recursion; the e-detectors against the max over start times;
* the RA-CUSUM's batch-score law (FFT convolution) against enumeration of a tiny batch; the Markov-chain ARL
  against the closed form of a two-point walk and against simulated run lengths; the computed threshold
  against simulated CUSUM paths.
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


def _enumerated_batch(p_ref, m, odds_ratio):
    """Every batch of m rows (predictions drawn from p_ref, labels y ~ Bernoulli(p)): scores and probabilities."""
    values, probs = [], []
    for preds in itertools.product(p_ref, repeat=m):
        for labels in itertools.product((0, 1), repeat=m):
            p, y = np.array(preds), np.array(labels)
            values.append(sq.ra_scores(p, y, odds_ratio).sum())
            probs.append(np.prod(np.where(y == 1, p, 1 - p)) / len(p_ref) ** m)
    return np.array(values), np.array(probs)


@pytest.mark.parametrize("odds_ratio", [2.0, 0.5])
def test_ra_batch_law_fft_against_enumeration(odds_ratio):
    """The FFT convolution of the lattice row law against direct enumeration of a batch of 3 rows: the exact
    mean, a variance above the exact one by at most m delta^2 / 4 + delta^2 / 12 (the lattice split and the
    CDF's spread), and the CDF equal to the exact one away from the atoms (each atom moves at most (m + 1)
    lattice steps)."""
    p_ref, m = np.array([0.1, 0.35, 0.8]), 3
    v, pr = _enumerated_batch(p_ref, m, odds_ratio)
    mean = pr @ v
    var = pr @ (v - mean) ** 2
    law = sq.ra_batch_law(p_ref, odds_ratio, m)
    x = law.delta * (law.start + np.arange(law.pmf.size))
    assert law.pmf.sum() == pytest.approx(1.0, abs=1e-12)
    assert x @ law.pmf == pytest.approx(mean, abs=1e-12)
    assert law.mean == pytest.approx(mean, abs=1e-12) and law.sd == pytest.approx(math.sqrt(var), rel=1e-12)
    lattice_var = law.pmf @ (x - mean) ** 2
    assert var <= lattice_var <= var + m * law.delta ** 2 / 4
    atoms = np.unique(np.round(v, 12))
    mids = (atoms[1:] + atoms[:-1]) / 2
    far = mids[np.diff(atoms) > 2 * (m + 1) * law.delta]
    assert far.size >= 10
    exact = np.array([pr[v <= q].sum() for q in far])
    np.testing.assert_allclose(law.cdf(far), exact, atol=1e-12)


def test_ra_batch_law_normal_switch_keeps_the_exact_moments():
    """Past ``max_grid`` the law is normal with the exact mean and variance (enumeration of 3 rows)."""
    p_ref = np.array([0.2, 0.6, 0.9])
    v, pr = _enumerated_batch(p_ref, 3, 2.0)
    law = sq.ra_batch_law(p_ref, 2.0, 3, max_grid=16)
    assert law.pmf is None
    assert law.mean == pytest.approx(pr @ v, abs=1e-12)
    assert law.sd == pytest.approx(math.sqrt(pr @ (v - pr @ v) ** 2), rel=1e-12)
    assert law.cdf(law.mean) == pytest.approx(0.5)


@pytest.mark.parametrize("q, levels", [(0.3, 6), (0.45, 9), (0.5, 5)])
def test_cusum_arl_against_the_closed_form_of_a_two_point_walk(q, levels):
    """Increments +1 (probability q) and -1: the CUSUM is a walk on 0, 1, ... held at 0, and with cells of
    width 1 (h = H - 1/2, M = H) the chain is exact.  The expected time t_k from k to k + 1 solves
    t_0 = 1/q, q t_k = 1 + (1 - q) t_{k-1}, so t_k = (1/q) sum_{j<=k} r^j, r = (1 - q)/q, and
    ARL = sum_{k<H} t_k = (1/q) [r (r^H - 1)/(r - 1) - H] / (r - 1) (r != 1), H (H + 1) / (2 q) (r = 1)."""
    cdf = lambda x: np.where(x < -1, 0.0, np.where(x < 1, 1 - q, 1.0))
    r = (1 - q) / q
    exact = levels * (levels + 1) / (2 * q) if r == 1 else (r * (r ** levels - 1) / (r - 1) - levels) / (q * (r - 1))
    assert sq.cusum_arl(cdf, levels - 0.5, n_states=levels) == pytest.approx(exact, rel=1e-12)
    t, total = 1 / q, 1 / q  # the recursion, the other route
    for _ in range(1, levels):
        t = (1 + (1 - q) * t) / q
        total += t
    assert exact == pytest.approx(total, rel=1e-12)


def test_cusum_arl_against_simulated_run_lengths():
    """Normal increments N(-0.5, 1), h = 3: the chain's ARL (converged in M: 512 and 2048 states agree to
    1e-3) against 20,000 simulated run lengths (uncensored: every path runs to its alarm), within 3 s.e."""
    from scipy.stats import norm
    cdf = lambda x: norm.cdf(x, -0.5, 1.0)
    arl = sq.cusum_arl(cdf, 3.0, 2048)
    assert sq.cusum_arl(cdf, 3.0, 512) == pytest.approx(arl, rel=1e-3)
    rng = np.random.default_rng(12)
    s, alive, runs, t = np.zeros(20_000), np.ones(20_000, dtype=bool), np.zeros(20_000), 0
    while alive.any():  # a loop over steps, vectorised over the paths still running
        t += 1
        s[alive] = np.maximum(0.0, s[alive] + rng.normal(-0.5, 1.0, alive.sum()))
        hit = alive & (s >= 3.0)
        runs[hit], alive = t, alive & ~hit
    se = runs.std() / math.sqrt(runs.size)
    assert abs(runs.mean() - arl) < 3 * se, (runs.mean(), se, arl)


def test_ra_threshold_reaches_its_arl():
    """The computed threshold's ARL is the target; re-estimated from 4,000 simulated CUSUM paths of batches
    drawn as the law says (40 rows, predictions resampled from p_ref), it is within 3 s.e."""
    rng = np.random.default_rng(9)
    p = rng.beta(2, 8, 40)
    h, arl = sq.ra_threshold(p, 2.0, 50.0)
    assert arl == pytest.approx(50.0, rel=1e-6) and h > 0
    s, alive, runs, t = np.zeros(4000), np.ones(4000, dtype=bool), np.zeros(4000), 0
    while alive.any():  # a loop over batches, vectorised over the paths still running
        t += 1
        pp = p[rng.integers(0, p.size, (alive.sum(), p.size))]
        s[alive] = np.maximum(0.0, s[alive] + sq.ra_scores(pp, rng.random(pp.shape) < pp, 2.0).sum(axis=1))
        hit = alive & (s >= h)
        runs[hit], alive = t, alive & ~hit
    se = runs.std() / math.sqrt(runs.size)
    assert abs(runs.mean() - 50.0) < 3 * se, (runs.mean(), se)


def test_ra_threshold_when_no_threshold_reaches_the_target():
    """Batch scores that are rarely positive: even h -> 0+ gives an ARL 1 / P(X > 0) above the target, so h is
    the smallest positive float and the ARL that of alarming at any positive batch score; constant scores
    (every prediction 0 or 1) never move the CUSUM."""
    p = np.random.default_rng(3).beta(2, 5, 500)
    h, arl = sq.ra_threshold(p, 2.0, 200.0)
    law = sq.ra_batch_law(p, 2.0)
    assert h == np.nextafter(0.0, 1.0) and arl == pytest.approx(1 / (1 - law.cdf(0.0)), rel=1e-12) and arl > 200
    assert sq.ra_threshold(np.array([0.0, 1.0, 1.0]), 2.0, 200.0) == (math.inf, math.inf)


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
