"""Resampling intervals (bootstrap, subsampling, adaptive HulC) against slow direct implementations.

Each reference below is a transcription of the documented recipe with a
Python loop over resamples and over pairs of rows: the same uniform doubles
from ``Generator.random`` in the same order, T by its definition
(1/s) sum_bins 1/(c-1) sum_{a != b} U_a^T U_b, and type-7 quantiles written out.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import calibtest as ct
from calibtest.core import resampling as rs
from calibtest.core.partition import partition_rows
from calibtest.core.targets import prepare
from calibtest.core.binstats import debiased_statistic


# --------------------------------------------------------------------------- slow references


def slow_T(inverse, u, rows) -> float:
    """T of the multiset ``rows`` by the pair-sum definition (copies are distinct rows)."""
    bins: dict = {}
    for pos, r in enumerate(rows):
        bins.setdefault(int(inverse[r]), []).append(pos)
    total = 0.0
    for members in bins.values():
        c = len(members)
        if c < 2:
            continue
        pair = 0.0
        for a in members:
            for b in members:
                if a != b:
                    pair += float(np.dot(u[rows[a]], u[rows[b]]))
        total += pair / (c - 1)
    return total / len(rows)


def quantile7(x, p) -> float:
    """Hyndman-Fan type 7 quantile, written out."""
    xs = sorted(x)
    h = (len(xs) - 1) * p
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


def slow_floyd(gen, n, size):
    """Floyd's algorithm, one subsample, with a Python set."""
    u = gen.random(size)
    chosen = []
    for i, j in enumerate(range(n - size, n)):
        t = int(u[i] * (j + 1))
        chosen.append(j if t in chosen else t)
    return chosen


def seeded(seed):
    """The documented stream of an int seed s for resampling: default_rng([s, 1])."""
    return np.random.default_rng([seed, 1])


def slow_bootstrap(inverse, u, R, seed, alpha):
    gen = seeded(seed)
    n = len(inverse)
    stats = []
    for _ in range(R):
        draws = gen.random(n)
        stats.append(slow_T(inverse, u, [int(x * n) for x in draws]))
    return quantile7(stats, alpha / 2), quantile7(stats, 1 - alpha / 2), stats


def slow_subsampling(inverse, u, R, seed, alpha, reflect=False):
    gen = seeded(seed)
    n = len(inverse)
    b = int(math.floor(math.sqrt(n)))
    T = slow_T(inverse, u, list(range(n)))
    diffs = [slow_T(inverse, u, slow_floyd(gen, n, b)) - T for _ in range(R)]
    ql, qh = quantile7(diffs, alpha / 2), quantile7(diffs, 1 - alpha / 2)
    s = math.sqrt(b / n)
    if reflect:
        return T - s * qh, T - s * ql
    return T + s * ql, T + s * qh


def slow_hulc(inverse, u, R, seed, alpha):
    gen = seeded(seed)
    n = len(inverse)
    size = int(round(n ** (2 / 3)))
    T = slow_T(inverse, u, list(range(n)))
    below = sum(slow_T(inverse, u, slow_floyd(gen, n, size)) <= T for _ in range(R))
    delta = abs(below / R - 0.5)

    def P(B):
        return (0.5 - delta) ** B + (0.5 + delta) ** B

    B = 1
    while P(B) > alpha:
        B += 1
    tau = (alpha - P(B)) / (P(B - 1) - P(B))
    if gen.random() <= tau:
        B -= 1
    perm = list(np.argsort(gen.random(n), kind="stable"))
    sizes = [n // B + (1 if j < n % B else 0) for j in range(B)]
    est, start = [], 0
    for sz in sizes:
        est.append(slow_T(inverse, u, perm[start:start + sz]))
        start += sz
    return min(est), max(est), B, delta


# --------------------------------------------------------------------------- fixtures


def _rows_top1(n=40, seed=0, B=5):
    gen = np.random.default_rng(seed)
    conf = gen.uniform(0.5, 1.0, n)
    correct = (gen.random(n) < conf ** 1.5).astype(int)
    prep = prepare(correct, conf, n_classes=2)
    return prep, rs.binned_rows(partition_rows(prep, B), prep.u)


def _rows_top2(n=45, seed=1, B=4):
    gen = np.random.default_rng(seed)
    P = gen.dirichlet(np.ones(4), n)
    y = np.array([gen.choice(4, p=p) for p in P])
    prep = prepare(y, P, k=2)
    return prep, rs.binned_rows(partition_rows(prep, B), prep.u)


# --------------------------------------------------------------------------- kernel


@pytest.mark.parametrize("maker", [_rows_top1, _rows_top2])
def test_statistic_of_all_rows_is_the_estimate(maker):
    prep, rows = maker()
    B = 5 if prep.k == 1 else 4
    T_all = rs.resample_statistic(rows, np.arange(prep.n)[None, :])[0]
    assert T_all == pytest.approx(debiased_statistic(partition_rows(prep, B).bin_sums(prep)), rel=1e-12, abs=1e-15)
    assert T_all == pytest.approx(slow_T(rows.inverse, rows.u, list(range(prep.n))), rel=1e-12, abs=1e-15)


def test_statistic_counts_repeated_rows_as_distinct():
    # two rows in one bin, U = 0.5 and -0.25; the multiset (0, 0, 1): pairs of distinct positions
    rows = rs.BinnedRows(np.array([0, 0]), np.array([0.5, -0.25]), 1)
    idx = np.array([[0, 0, 1]])
    # ||S||^2 - Q = (0.75)^2 - (0.25 + 0.25 + 0.0625) = 0; by hand: 2*(0.25 - 0.125 - 0.125) = 0
    assert rs.resample_statistic(rows, idx)[0] == pytest.approx(0.0, abs=1e-16)
    idx = np.array([[0, 0]])  # 2 * 0.25 / (2 - 1) / 2 = 0.25
    assert rs.resample_statistic(rows, idx)[0] == pytest.approx(0.25)


# --------------------------------------------------------------------------- methods vs slow code


@pytest.mark.parametrize("maker", [_rows_top1, _rows_top2])
def test_bootstrap_equals_slow_implementation(maker):
    prep, rows = maker()
    lo, hi, stats = slow_bootstrap(rows.inverse, rows.u, 40, 11, 0.1)
    iv = rs.resampling_interval(rows, "bootstrap", alpha=0.1, n_resamples=40, rng=11)
    np.testing.assert_allclose(iv.estimates, stats, rtol=1e-12, atol=1e-15)
    assert (iv.lower, iv.upper) == pytest.approx((lo, hi), rel=1e-12, abs=1e-15)
    assert iv.seed == 11 and iv.n_resamples == 40 and iv.resample_size == prep.n


@pytest.mark.parametrize("maker", [_rows_top1, _rows_top2])
@pytest.mark.parametrize("reflect", [False, True])
def test_subsampling_equals_slow_implementation(maker, reflect):
    prep, rows = maker()
    lo, hi = slow_subsampling(rows.inverse, rows.u, 60, 5, 0.2, reflect=reflect)
    iv = rs.resampling_interval(rows, "subsampling", alpha=0.2, n_resamples=60, rng=5)
    assert iv.resample_size == math.isqrt(prep.n)
    got = rs.subsampling_interval(iv.estimate, iv.estimates, prep.n, iv.resample_size, 0.2, reflect=reflect)
    assert got == pytest.approx((lo, hi), rel=1e-12, abs=1e-15)
    if not reflect:
        assert (iv.lower, iv.upper) == pytest.approx((lo, hi), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("seed", [3, 4, 8])
def test_hulc_equals_slow_implementation(seed):
    prep, rows = _rows_top1(n=60, seed=seed)
    lo, hi, B, delta = slow_hulc(rows.inverse, rows.u, 50, seed, 0.1)
    iv = rs.resampling_interval(rows, "hulc", alpha=0.1, n_resamples=50, rng=seed)
    assert iv.hulc_splits == B
    assert iv.hulc_median_bias == pytest.approx(delta, abs=1e-15)
    assert (iv.lower, iv.upper) == pytest.approx((lo, hi), rel=1e-12, abs=1e-15)
    assert iv.resample_size == round(60 ** (2 / 3))


def test_subsampling_formulas_by_hand():
    # T = 1, T_b - T = 0..10, type-7 quantiles at 0.1 / 0.9: 1 and 9; sqrt(b/n) = 1/2
    est = 1.0 + np.arange(11.0)
    assert rs.subsampling_interval(1.0, est, n=16, size=4, alpha=0.2) == pytest.approx((1.5, 5.5))
    assert rs.subsampling_interval(1.0, est, n=16, size=4, alpha=0.2, reflect=True) == pytest.approx((-3.5, 0.5))
    assert rs.percentile_interval(np.arange(11.0), 0.2) == pytest.approx((1.0, 9.0))


def test_hulc_number_of_splits_by_hand():
    # Delta = 0: P(B) = 2^(1-B); alpha = 0.1 -> B = 5 (0.0625), P(4) = 0.125, tau = 0.6
    assert rs.hulc_n_splits(0.1, 0.0) == 5
    assert rs.hulc_n_splits(0.1, 0.0, u=0.6) == 4
    assert rs.hulc_n_splits(0.1, 0.0, u=0.6000001) == 5
    # alpha = 0.05 -> B = 6 (0.03125), P(5) = 0.0625, tau = 0.6
    assert rs.hulc_n_splits(0.05, 0.0, u=0.59) == 5
    # Delta = 0.1: P(5) = 0.4^5 + 0.6^5 = 0.088, P(4) = 0.1552, tau = 0.012 / 0.0672
    tau = (0.1 - (0.4**5 + 0.6**5)) / ((0.4**4 + 0.6**4) - (0.4**5 + 0.6**5))
    assert tau == pytest.approx(0.012 / 0.0672)
    assert rs.hulc_n_splits(0.1, 0.1, u=tau * 0.999) == 4
    assert rs.hulc_n_splits(0.1, 0.1, u=tau * 1.001) == 5
    assert rs.hulc_n_splits(0.1, 0.5) is None
    assert rs.hulc_n_splits(0.1, 0.45, max_splits=10) is None
    assert rs.median_bias(0.0, np.array([-1.0, 0.0, 1.0, 2.0])) == pytest.approx(0.0)
    assert rs.median_bias(0.0, np.array([-1.0, -2.0, -3.0, 2.0])) == pytest.approx(0.25)


def test_floyd_subsets_are_uniform():
    # all C(5, 2) = 10 subsets equally likely: chi-square goodness of fit
    from scipy import stats
    idx = rs._subsample_idx(5, 2)(np.random.default_rng(0), 20000)
    assert all(len(set(r)) == 2 for r in idx[:500])
    idx.sort(axis=1)
    counts = np.bincount(idx[:, 0] * 5 + idx[:, 1], minlength=25)
    counts = counts[counts > 0]
    assert counts.size == 10
    assert stats.chisquare(counts).pvalue > 1e-3


def test_hulc_gives_whole_line_when_splits_exceed_rows():
    # all T_s <= T -> Delta = 1/2 -> no finite number of splits
    rows = rs.BinnedRows(np.zeros(6, dtype=int), np.array([1.0, 1.0, 1.0, -1.0, -1.0, -1.0]), 1)
    iv = rs.resampling_interval(rows, "hulc", alpha=0.1, estimate=10.0, n_resamples=5, rng=0)
    assert iv.hulc_median_bias == 0.5 and iv.hulc_splits is None
    assert (iv.lower, iv.upper) == (-math.inf, math.inf)


# --------------------------------------------------------------------------- reproducibility


@pytest.mark.parametrize("method", rs.METHODS)
def test_same_seed_same_output_and_block_size_independence(method):
    prep, rows = _rows_top2(n=120)
    ref = rs.resampling_interval(rows, method, alpha=0.1, n_resamples=37, rng=9)
    for block in (1, 5, 36, 37, 1000):
        iv = rs.resampling_interval(rows, method, alpha=0.1, n_resamples=37, rng=9, block_size=block)
        np.testing.assert_array_equal(iv.estimates, ref.estimates)
        assert (iv.lower, iv.upper, iv.hulc_splits) == (ref.lower, ref.upper, ref.hulc_splits)
    again = rs.resampling_interval(rows, method, alpha=0.1, n_resamples=37, rng=np.random.default_rng([9, 1]))
    np.testing.assert_array_equal(again.estimates, ref.estimates)
    assert again.seed == "Generator"
    other = rs.resampling_interval(rows, method, alpha=0.1, n_resamples=37, rng=10)
    assert not np.array_equal(other.estimates, ref.estimates) or other.lower != ref.lower


def test_estimates_do_not_depend_on_block_size_bootstrap_and_subsampling():
    prep, rows = _rows_top1(n=200)
    a = rs.bootstrap_estimates(rows, 50, 3, block_size=3)
    b = rs.bootstrap_estimates(rows, 50, 3, block_size=50)
    np.testing.assert_array_equal(a, b)
    a = rs.subsample_estimates(rows, 14, 50, 3, block_size=7)
    b = rs.subsample_estimates(rows, 14, 50, 3)
    np.testing.assert_array_equal(a, b)


def test_unseeded_run_records_a_seed_that_reproduces_it():
    prep, rows = _rows_top1()
    first = rs.resampling_interval(rows, "bootstrap", alpha=0.1, n_resamples=20)
    assert isinstance(first.seed, int)
    again = rs.resampling_interval(rows, "bootstrap", alpha=0.1, n_resamples=20, rng=first.seed)
    np.testing.assert_array_equal(first.estimates, again.estimates)


# --------------------------------------------------------------------------- calib_ci integration


def _data_binary(n=80, seed=2):
    gen = np.random.default_rng(seed)
    p = gen.random(n)
    y = (gen.random(n) < p ** 0.7).astype(int)
    return y, p


@pytest.mark.parametrize("kwargs", [dict(), dict(n_classes=3), dict(k=2)])
def test_calib_ci_bootstrap_matches_slow_code_in_every_mode(kwargs):
    gen = np.random.default_rng(4)
    n = 50
    if "k" in kwargs:
        P = gen.dirichlet(np.ones(3), n)
        y = np.array([gen.choice(3, p=p) for p in P])
    elif "n_classes" in kwargs:
        P = gen.uniform(1 / 3, 1, n)
        y = (gen.random(n) < P).astype(int)
    else:
        y, P = _data_binary(n)
    res = ct.calib_ci(y=y, probs=P, n_bins=4, alpha=0.2, method="bootstrap", n_resamples=30, rng=7, **kwargs)
    prep = prepare(y, P, **kwargs)
    rows = rs.binned_rows(partition_rows(prep, 4), prep.u)
    lo, hi, _ = slow_bootstrap(rows.inverse, rows.u, 30, 7, 0.2)
    assert res.method == "bootstrap" and res.resampling.n_resamples == 30 and res.resampling.seed == 7
    assert res.ci_lower == pytest.approx(max(lo, 0.0), abs=1e-15)
    assert res.ci_upper == pytest.approx(max(hi, 0.0), abs=1e-15)
    assert res.contains_zero == (lo <= 0 <= hi)
    assert res.ci_lower_open is False and res.ci_branch == 0


def test_result_records_method_details_and_recomputes_other_levels():
    y, p = _data_binary(300)
    adj = ct.calib_ci(y=y, probs=p, n_bins=10, alpha=0.1)
    res = ct.calib_ci(y=y, probs=p, n_bins=10, alpha=0.1, method="subsampling", rng=3)
    assert res.estimate == adj.estimate and res.null_pvalue == adj.null_pvalue
    assert res.resampling.n_resamples == rs.DEFAULT_N_RESAMPLES and res.resampling.resample_size == 17 and res.resampling.seed == 3
    assert not res.resampling.estimates.flags.writeable
    lo, hi = rs.subsampling_interval(res.estimate, res.resampling.estimates, 300, 17, 0.05)
    ci = res.conf_int(0.05)
    assert (ci.lower, ci.upper) == pytest.approx((max(lo, 0), max(hi, 0)))
    assert ci.level == pytest.approx(0.95)
    ece = res.conf_int(scale="ece")
    assert ece.upper == pytest.approx(math.sqrt(res.ci_upper))
    hulc = ct.calib_ci(y=y, probs=p, n_bins=10, alpha=0.1, method="hulc", rng=3)
    assert hulc.resampling.hulc_splits >= 4 and 0 <= hulc.resampling.hulc_median_bias <= 0.5
    assert hulc.conf_int().upper == hulc.ci_upper
    with pytest.raises(ValueError, match="number of splits depends on alpha"):
        hulc.conf_int(0.05)


def test_summary_and_dict_show_method_details():
    y, p = _data_binary(200)
    res = ct.calib_ci(y=y, probs=p, n_bins=8, alpha=0.1, method="hulc", n_resamples=40, rng=12)
    text = str(res.summary())
    assert "hulc interval" in text and "Seed:" in text and "12" in text
    assert "HulC splits:" in text and "Median bias:" in text and "Bias subsamples:" in text
    assert "Adaptive HulC 90% confidence interval" in text
    d = res.to_dict()
    assert d["method"] == "hulc" and d["n_resamples"] == 40 and d["seed"] == "12"
    assert d["hulc_splits"] == res.resampling.hulc_splits
    boot = ct.calib_ci(y=y, probs=p, n_bins=8, method="bootstrap", n_resamples=20,
                       rng=np.random.default_rng(1))
    assert "Generator" in str(boot.summary()) and boot.to_dict()["seed"] == "Generator"
    adj = ct.calib_ci(y=y, probs=p, n_bins=8)
    assert adj.to_dict()["n_resamples"] is None and "Seed:" not in str(adj.summary())


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(method="jackknife"), ValueError, "method must be one of"),
    (dict(n_resamples=10), ValueError, "only to the resampling methods"),
    (dict(method="bootstrap", n_resamples=1), ValueError, "n_resamples must be >= 2"),
    (dict(method="bootstrap", n_resamples=2.5), TypeError, "n_resamples must be an integer"),
    (dict(method="bootstrap", rng="seed"), TypeError, "rng must be"),
    (dict(method="bootstrap", rng=-1), ValueError, "non-negative"),
    (dict(method="bootstrap", progress="yes"), TypeError, "progress must be"),
])
def test_bad_resampling_arguments(kwargs, exc, match):
    y, p = _data_binary(30)
    with pytest.raises(exc, match=match):
        ct.calib_ci(y=y, probs=p, **kwargs)


def test_progress_bar_only_when_asked_or_interactive(capsys, monkeypatch):
    pytest.importorskip("tqdm")
    prep, rows = _rows_top1(n=100)
    rs.bootstrap_estimates(rows, 30, 0, progress=False)
    rs.bootstrap_estimates(rows, 30, 0)  # short run, stderr captured (not a tty): no bar
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(rs, "_PROGRESS_MIN_ELEMENTS", 0)
    monkeypatch.setenv("CI", "true")
    rs.bootstrap_estimates(rows, 30, 0)
    assert capsys.readouterr().err == ""
    rs.bootstrap_estimates(rows, 30, 0, progress=True)
    assert "bootstrap" in capsys.readouterr().err


def test_binned_rows_validation():
    with pytest.raises(ValueError, match="bin numbers"):
        rs.BinnedRows(np.array([0, 3]), np.zeros(2), 2)
    with pytest.raises(ValueError, match="shape"):
        rs.BinnedRows(np.array([0, 1]), np.zeros(3), 2)
    with pytest.raises(TypeError, match="integer"):
        rs.BinnedRows(np.array([0.0, 1.0]), np.zeros(2), 2)
    rows = rs.BinnedRows.from_inverse(np.array([0, 2, 2]), np.array([0.1, 0.2, 0.3]))
    assert rows.n_groups == 2 and rows.n == 3 and rows.dim == 1  # empty bin 1 dropped
    assert rows.inverse.tolist() == [0, 1, 1]
    with pytest.raises(ValueError, match="exceeds"):
        rs.subsample_estimates(rows, 4, 3, 0)
    with pytest.raises(ValueError, match="method must be"):
        rs.resampling_interval(rows, "adjusted", alpha=0.1)


def test_cli_resampling_options(tmp_path, capsys):
    import json

    from calibtest.cli import main
    y, p = _data_binary(120)
    path = tmp_path / "d.csv"
    path.write_text("y,p\n" + "\n".join(f"{int(a)},{float(b)!r}" for a, b in zip(y, p)))
    assert main(["ci", str(path), "--formula", "y ~ p", "--bins", "6", "--method", "subsampling",
                 "--n-resamples", "25", "--seed", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    res = ct.calib_ci(y=y, probs=p, n_bins=6, method="subsampling", n_resamples=25, rng=4)
    assert out["method"] == "subsampling" and out["seed"] == "4" and out["n_resamples"] == 25
    assert out["ci_upper"] == pytest.approx(res.ci_upper, rel=1e-12)
    assert main(["ci", str(path), "--formula", "y ~ p", "--n-resamples", "25"]) == 2
    assert "only to the resampling methods" in capsys.readouterr().err


def test_full_calibration_mode_resamples_on_the_simplex_cells():
    pytest.importorskip("calibtest.core.simplex")
    gen = np.random.default_rng(6)
    P = gen.dirichlet(np.ones(3), 60)
    y = np.array([gen.choice(3, p=p) for p in P])
    res = ct.calib_ci(y=y, probs=P, k="full", n_bins=3, alpha=0.2, method="bootstrap", n_resamples=25, rng=2)
    assert res.mode == "full" and res.method == "bootstrap"
    prep = res.data
    rows = rs.binned_rows(partition_rows(prep, 3), prep.u)
    # the numbering is the estimator's: T of all rows is the reported estimate
    assert rs.resample_statistic(rows, np.arange(60)[None, :])[0] == pytest.approx(res.estimate, rel=1e-12)
    lo, hi, _ = slow_bootstrap(rows.inverse, rows.u, 25, 2, 0.2)
    assert (res.ci_lower, res.ci_upper) == pytest.approx((max(lo, 0.0), max(hi, 0.0)), abs=1e-15)
    sub = ct.calib_ci(y=y, probs=P, k="full", n_bins=3, method="subsampling", rng=1)
    assert sub.resampling.resample_size == 7 and "method='subsampling'" in sub.call


def test_monte_carlo_null_and_bootstrap_use_separate_streams_of_one_seed():
    rng = np.random.default_rng(21)
    p = rng.random(300)
    y = (rng.random(300) < p).astype(int)
    both = ct.calib_ci(y=y, probs=p, n_bins=6, method="bootstrap", n_resamples=80, null="monte-carlo",
                       n_null_draws=200, rng=5)
    boot = ct.calib_ci(y=y, probs=p, n_bins=6, method="bootstrap", n_resamples=80, rng=5)
    null = ct.calib_ci(y=y, probs=p, n_bins=6, null="monte-carlo", n_null_draws=200, rng=5)
    np.testing.assert_array_equal(both.resampling.estimates, boot.resampling.estimates)
    assert both.monte_carlo.pvalue == null.monte_carlo.pvalue and both.resampling.seed == both.monte_carlo.seed == 5
    # the bootstrap consumes default_rng([5, 1]); the Monte Carlo null default_rng(5): not the same doubles
    rows = rs.binned_rows(both.partition, both.data.u)
    direct = rs.bootstrap_estimates(rows, 80, np.random.default_rng([5, 1]))
    np.testing.assert_array_equal(direct, boot.resampling.estimates)
    from calibtest.core.conditional import label_classes, monte_carlo_test
    plain = ct.calib_ci(y=y, probs=p, n_bins=6)
    mc = monte_carlo_test(plain.data.z, plain.partition.inverse, label_classes(plain.data), n=plain.n,
                          n_draws=200, rng=np.random.default_rng(5))
    assert mc.pvalue == both.monte_carlo.pvalue


@pytest.mark.parametrize("n, size", [(5, 2), (7, 7), (10, 1), (50, 40), (1000, 31), (1000, 100), (300, 200)])
def test_vectorised_floyd_picks_the_sequential_rows_in_order(n, size):
    # every subsample of a block: the rows (in position order) of Floyd's loop with a Python list,
    # from the same doubles; large size / n has chains of collisions (t_i = an earlier j that was picked)
    count = 60
    idx = rs._subsample_idx(n, size)(np.random.default_rng(n + size), count)
    gen = np.random.default_rng(n + size)
    expected = np.array([slow_floyd(gen, n, size) for _ in range(count)])
    assert idx.shape == (count, size) and np.array_equal(idx, expected)


def test_subsample_block_size_does_not_change_estimates_with_collisions():
    prep, rows = _rows_top1(n=60)
    ref = rs.subsample_estimates(rows, 45, 40, 5, block_size=40)
    for block in (1, 7, None):
        assert np.array_equal(rs.subsample_estimates(rows, 45, 40, 5, block_size=block), ref)


def test_multiset_statistics_square_and_work_arrays_give_the_same_doubles():
    # one column: sq=None squares the gathered column; the work arrays only hold the gathers
    idx = np.random.default_rng(2).integers(0, 40, (9, 40))
    for maker in (_rows_top1, _rows_top2):
        prep, rows = maker()
        plain = rs.multiset_statistics([rows.inverse], [rows.n_groups], rows._cols, rows._sq, idx)
        work = rs.GatherWork(idx.size + 5, rows.dim)
        assert np.array_equal(rs.multiset_statistics([rows.inverse], [rows.n_groups], rows._cols, rows._sq, idx,
                                                     work=work), plain)
        if rows.dim == 1:
            assert np.array_equal(rows._sq, rows._cols[0] ** 2)
            assert np.array_equal(rs.multiset_statistics([rows.inverse], [rows.n_groups], rows._cols, None, idx),
                                  plain)
        else:
            with pytest.raises(ValueError, match="one column"):
                rs.multiset_statistics([rows.inverse], [rows.n_groups], rows._cols, None, idx)
        # and T by its pair-sum definition
        for r in range(idx.shape[0]):
            assert plain[0, r] == pytest.approx(slow_T(rows.inverse, rows.u, list(idx[r])), rel=1e-12, abs=1e-15)
