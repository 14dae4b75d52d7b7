"""The population tests at their size (issue 26, point 4): the heterogeneity test, the weighted test's default
null and the automatic B of prevalence-weighted rows.  The studies behind them: vignettes/population_tests.md."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

import calibtest as ct
from calibtest.core.weighted import (expected_sparse_weight_share, prevalence_event_prob, prevalence_weights,
                                     weighted_statistics)
from calibtest.ece.build_result import PREVALENCE_SPARSE_SHARE
from calibtest.ece.result import SPARSE_BIN_NEFF

POP_MU, POP_SD, PREV = -3.8446, 1.5, 0.05   # logit r ~ N(mu, 1.5^2) with E r = 5% (vignettes/populations.py)


def _case_control(rng, n_each: int, spread: bool = True):
    """500 + 500 style case-control sample of the 5%-prevalence population; p too spread (or shifted)."""
    r = special.expit(rng.normal(POP_MU, POP_SD, int(3 * n_each / PREV)))
    y = rng.random(r.size) < r
    idx = np.concatenate([rng.choice(np.flatnonzero(y), n_each, replace=False),
                          rng.choice(np.flatnonzero(~y), n_each, replace=False)])
    lr = special.logit(r[idx])
    p = special.expit(1.2 + 1.4 * lr) if spread else special.expit(lr - 0.5)
    return y[idx].astype(int), p, r[idx]


def _share_by_loops(bins, a, b, q, n_eff_min):
    """Expected-weight share of sparse bins, by a loop over bins and rows (dicts, no numpy sums)."""
    ew, ew2 = {}, {}
    for k, ai, bi, qi in zip(bins.tolist(), a.tolist(), b.tolist(), q.tolist()):
        ew[k] = ew.get(k, 0.0) + ai * qi + bi * (1 - qi)
        ew2[k] = ew2.get(k, 0.0) + ai * ai * qi + bi * bi * (1 - qi)
    total = sum(ew.values())
    return sum(v for k, v in ew.items() if v * v < n_eff_min * ew2[k]) / total


def test_expected_sparse_weight_share_by_hand():
    rng = np.random.default_rng(1)
    inv = rng.integers(0, 7, 90)
    a, b = np.full(90, 0.1), np.full(90, 1.9)
    q = rng.uniform(0.3, 0.99, 90)
    got = expected_sparse_weight_share(inv, 7, a, b, q, 5.0)
    assert got == pytest.approx(_share_by_loops(inv, a, b, q, 5.0), rel=1e-12)
    # one bin of 3 rows of near-certain events with the rare non-event weight heavy: sparse by hand
    inv2 = np.array([0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])
    q2 = np.array([0.99, 0.99, 0.99] + [0.5] * 10)
    a2, b2 = np.full(13, 0.1), np.full(13, 1.9)
    ew0 = 3 * (0.1 * 0.99 + 1.9 * 0.01)
    ew1 = 10 * (0.1 * 0.5 + 1.9 * 0.5)
    assert ew0 ** 2 < 5 * 3 * (0.01 * 0.99 + 3.61 * 0.01)       # bin 0 sparse
    assert ew1 ** 2 > 5 * 10 * (0.01 * 0.5 + 3.61 * 0.5)        # bin 1 not
    assert expected_sparse_weight_share(inv2, 2, a2, b2, q2, 5.0) == pytest.approx(ew0 / (ew0 + ew1), rel=1e-12)


def test_prevalence_auto_b_is_the_largest_b_whose_expected_sparse_share_is_small():
    y, p, _ = _case_control(np.random.default_rng(5), 500)
    res = ct.calib_ci(y=y, probs=p, prevalence=PREV, n_null_draws=99, rng=1)
    start = ct.calib_ci(y=y, probs=p).n_bins                    # the unweighted automatic B
    _, pi_hat = prevalence_weights(y == 1, PREV)
    a, b = PREV / pi_hat, (1 - PREV) / (1 - pi_hat)
    q = prevalence_event_prob(p, a, b)
    ones = np.ones(p.size)
    chosen = next(B for B in range(start, 1, -1)
                  if _share_by_loops(np.minimum((p * B).astype(int), B - 1), a * ones, b * ones, q,
                                     SPARSE_BIN_NEFF) <= PREVALENCE_SPARSE_SHARE)
    assert res.n_bins == chosen < start
    assert res.bin_rule.weighted_from == start and res.bin_rule.sparse_weight_share <= PREVALENCE_SPARSE_SHARE
    assert f"reduced from the unweighted automatic {start}" in " ".join(str(res.summary()).split())
    # a given B is kept, and case weights alone keep the unweighted automatic B
    assert ct.calib_ci(y=y, probs=p, prevalence=PREV, n_bins=30, n_null_draws=99, rng=1).n_bins == 30
    assert ct.calib_ci(y=y, probs=p, weights=np.full(p.size, 2.0), rng=1).n_bins == start


def test_prevalence_auto_b_depends_on_the_predictions_only():
    """Permuting the labels (same sample prevalence) leaves B alone: the Monte Carlo null given Z stays exact."""
    rng = np.random.default_rng(9)
    y, p, _ = _case_control(rng, 400)
    perm = rng.permutation(y)
    b1 = ct.calib_ci(y=y, probs=p, prevalence=PREV, n_null_draws=19, rng=1).n_bins
    b2 = ct.calib_ci(y=perm, probs=p, prevalence=PREV, n_null_draws=19, rng=1).n_bins
    assert b1 == b2


def _population_binned_ece_sq(B: int, n_grid: int = 200_001) -> float:
    """sum_b P(b) (E[r - p | b])^2 of the too-spread model over equal-width bins of p, by quadrature."""
    x = np.linspace(-12.0, 12.0, n_grid)
    dens = np.exp(-x * x / 2)
    dens /= dens.sum()
    r = special.expit(POP_MU + POP_SD * x)
    p = special.expit(1.2 + 1.4 * special.logit(r))
    k = np.minimum((p * B).astype(int), B - 1)
    mass = np.bincount(k, weights=dens, minlength=B)
    num = np.bincount(k, weights=dens * (r - p), minlength=B)
    return float(np.sum(num[mass > 0] ** 2 / mass[mass > 0]))


@pytest.mark.slow
def test_prevalence_estimate_is_near_the_population_binned_ece_on_the_too_spread_design():
    """Mean T_J / the population's binned ECE^2 at the B used, 300 samples of 500 + 500 (the unweighted B = 48
    gave 0.64 here; the study: 0.895, s.e. 0.030)."""
    from calibtest.core.partition import partition_rows
    from calibtest.core.targets import prepare_target
    from calibtest.ece.build_result import prevalence_partition
    est, truth, cache = [], [], {}
    for rep in range(300):
        y, p, _ = _case_control(np.random.default_rng([26, rep]), 500)
        data = prepare_target(y, p)
        w, pi_hat = prevalence_weights(y == 1, PREV)
        a, b = PREV / pi_hat, (1 - PREV) / (1 - pi_hat)
        part = prevalence_partition(data, partition_rows(data, "auto"), np.full(p.size, a), np.full(p.size, b),
                                    prevalence_event_prob(p, a, b))
        est.append(weighted_statistics(part.inverse, data.u, w, part.m, jackknife=True).estimate)
        if part.n_bins not in cache:
            cache[part.n_bins] = _population_binned_ece_sq(part.n_bins)
        truth.append(cache[part.n_bins])
    ratio = np.mean(est) / np.mean(truth)
    assert 0.8 < ratio < 1.2


@pytest.mark.slow
def test_heterogeneity_size_when_every_group_is_calibrated():
    """5 groups of 50-2000 rows with different prediction laws, all calibrated: Q rejects at 0.10 in about 10%
    (the floored unrestricted variances rejected 0.044-0.05; 300 data sets, s.e. 0.017)."""
    sizes, shapes = [50, 150, 400, 1000, 2000], [(1, 3), (2, 2), (3, 1), (1, 1), (0.5, 0.5)]
    labels = np.repeat(np.arange(5), sizes)
    pv = []
    for rep in range(300):
        rng = np.random.default_rng([27, rep])
        p = np.concatenate([0.05 + 0.85 * rng.beta(a, b, n) for n, (a, b) in zip(sizes, shapes)])
        y = (rng.random(p.size) < p).astype(int)
        pv.append(ct.calib_ci(y=y, probs=p, by=labels, null="asymptotic").heterogeneity_pvalue)
    rate = np.mean(np.array(pv) < 0.10)
    se = math.sqrt(0.09 / 300)
    assert abs(rate - 0.10) < 3 * se


@pytest.mark.slow
def test_population_tests_vignette_smoke(tmp_path):
    """Every cell of vignettes/population_tests.py runs on two data sets (the first checked against the package),
    the tables read them, and the population's binned ECE^2 agrees with a Monte Carlo over the population."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "vignettes" / "population_tests.py"
    spec = importlib.util.spec_from_file_location("population_tests_study", path)
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    study.OUT = tmp_path
    for name in ("het_calibrated", "het_equal_logit_0.0025", "het_power_shift0.1_n150", "w_strata_n1000",
                 "w_rare_n3000_asymptotic", "prev_bias_spread_500", "prev_cover_calibrated_500"):
        study.run_cell(name, 2)
    text = study.tables()
    assert "| het_calibrated | 2 |" in text and "| w_strata_n1000 | 2 |" in text
    assert "| prev_bias_spread_500 | 2 |" in text and "| prev_cover_calibrated_500 | 2 |" in text
    mu = study.population_mu()
    x = np.random.default_rng(3).standard_normal(2_000_000)
    r = special.expit(mu + study.PREV_SD * x)
    assert r.mean() == pytest.approx(study.PREV, abs=0.001)
    p = study.model(r, "spread")
    k = np.minimum((p * 10).astype(int), 9)
    mass = np.bincount(k, minlength=10) / r.size
    err = np.bincount(k, weights=r - p, minlength=10) / r.size
    mc = float(np.sum(err[mass > 0] ** 2 / mass[mass > 0]))
    assert study.population_binned(mu, "spread", 10) == pytest.approx(mc, rel=0.05)
    # the equal-ECE^2 logit design: the binned ECE^2 of each group at its automatic B is the target
    assert study.binned_logit_ece(0.5, 2, 2, 10) == pytest.approx(
        _binned_logit_by_sampling(0.5, 2, 2, 10), rel=0.02)


def _binned_logit_by_sampling(delta, a, b, B):
    p = np.random.default_rng(4).beta(a, b, 2_000_000)
    err = special.expit(special.logit(p) + delta) - p
    k = np.minimum((p * B).astype(int), B - 1)
    mass = np.bincount(k, minlength=B) / p.size
    s = np.bincount(k, weights=err, minlength=B) / p.size
    return float(np.sum(s[mass > 0] ** 2 / mass[mass > 0]))


@pytest.mark.slow
def test_prevalence_iterated_jackknife_is_within_three_standard_errors_of_the_population_binned_ece():
    """Bias of the package's T_JJ over 1000 case-control samples of 500 + 500 (the ``spread05`` design of
    vignettes/prevalence_second_order.md, where 2000 samples gave T_JJ +1.4 s.e. and T_J -5.1 s.e.): within 3
    Monte Carlo s.e. of the population's binned ECE^2 at the B used, and nearer to it than T_J."""
    from calibtest.core.partition import partition_rows
    from calibtest.core.targets import prepare_target
    from calibtest.ece.build_result import prevalence_partition
    jj, jack, truth, cache = [], [], [], {}
    for rep in range(1000):
        y, p, _ = _case_control(np.random.default_rng([35, 7, rep]), 500)
        data = prepare_target(y, p)
        w, pi_hat = prevalence_weights(y == 1, PREV)
        a, b = PREV / pi_hat, (1 - PREV) / (1 - pi_hat)
        part = prevalence_partition(data, partition_rows(data, "auto"), np.full(p.size, a), np.full(p.size, b),
                                    prevalence_event_prob(p, a, b))
        jj.append(weighted_statistics(part.inverse, data.u, w, part.m, jackknife=2, events=y == 1).estimate)
        jack.append(weighted_statistics(part.inverse, data.u, w, part.m, jackknife=True).estimate)
        if part.n_bins not in cache:
            cache[part.n_bins] = _population_binned_ece_sq(part.n_bins)
        truth.append(cache[part.n_bins])
    err, err_j = np.array(jj) - truth, np.array(jack) - truth
    assert abs(err.mean()) < 3 * err.std(ddof=1) / math.sqrt(err.size)
    assert abs(err.mean()) < abs(err_j.mean())
