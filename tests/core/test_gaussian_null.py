"""The Gaussian null of the multi-scale test (calibtest.core.gaussian_null), against slow direct computations."""
import itertools

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.core import gaussian_null as gn
from calibtest.core.conditional import conditional_bin_sums, conditional_moments, counter_key


def _inverses(p, grid):
    return [np.minimum(np.floor(p * b).astype(np.intp), b) for b in grid]


def _sums(p, y, grid, chunks=(None,)):
    sums = gn.CellSums([b + 1 for b in grid])
    start = 0
    for stop in list(chunks[:-1]) + [p.size]:
        inv = [i[start:stop] for i in _inverses(p, grid)]
        sums.add(start, p[start:stop], inv, y[start:stop])
        start = stop
    return sums


def _statistic(u, inv, n):
    """T = (1/n) sum_b sum_{a != c in b} u_a u_c / (c_b - 1), by its definition (a loop over bins)."""
    t = 0.0
    for b in np.unique(inv):
        ub = u[inv == b]
        if ub.size >= 2:
            t += (ub.sum() ** 2 - (ub * ub).sum()) / (ub.size - 1)
    return t / n


def test_exact_covariance_equals_enumeration_of_every_label_vector():
    rng = np.random.default_rng(0)
    n, grid = 10, (2, 4, 3)
    p = rng.uniform(0.05, 0.95, n)
    invs = _inverses(p, grid)
    cov = np.zeros((3, 3))
    for labels in itertools.product((0, 1), repeat=n):  # all 2^10 label vectors and their probabilities
        y = np.array(labels)
        prob = np.prod(np.where(y == 1, p, 1 - p))
        t = np.array([_statistic(y - p, inv, n) for inv in invs])
        cov += prob * np.outer(t, t)  # E[T] = 0 under H0
    got = gn.exact_covariance(_sums(p, np.zeros(n, bool), grid))
    np.testing.assert_allclose(got, cov, rtol=1e-10, atol=1e-15)
    assert np.all(np.abs(cov[np.triu_indices(3, 1)]) > 0)  # the scales are dependent


def test_observed_statistic_and_sd_equal_the_monte_carlo_path():
    rng = np.random.default_rng(1)
    n = 3000
    p = rng.beta(2, 5, n)
    y = rng.uniform(size=n) < p ** 1.2
    res = ct.calib_test(y=y.astype(float), probs=p, null="monte-carlo", rng=2)
    grid = tuple(res.scales["n_bins"])
    g = gn.gaussian_draws(_sums(p, y, grid), counter_key(2)[0], 9)
    np.testing.assert_allclose(g.statistic, res.scales["T"], rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(g.sd, res.scales["sd"], rtol=1e-10)
    sd_direct = [np.sqrt(conditional_moments(conditional_bin_sums(p[:, None], inv), n).variance)
                 for inv in _inverses(p, grid)]
    np.testing.assert_allclose(g.sd, sd_direct, rtol=1e-10)
    assert g.spiegelhalter == pytest.approx(res.spiegelhalter_z, rel=1e-10)


def test_draws_follow_the_model_covariance():
    """z* have variance 1 and the correlations of model_covariance (thin and thick cells), z*_S is
    uncorrelated with them; R = 20000 draws, tolerance 4 Monte Carlo standard errors."""
    rng = np.random.default_rng(3)
    n, grid, R = 4000, (2, 4, 16), 20000
    p = np.concatenate([rng.uniform(0.2, 0.8, n - 60), rng.uniform(0.97, 0.999, 60)])  # a sparse thin tail
    sums = _sums(p, rng.uniform(size=n) < p, grid)
    assert sums.thin_rows > 0 and (sums.cols[:, 1] >= gn.THICK_VARIANCE).any()
    g = gn.gaussian_draws(sums, counter_key(4)[0], R)
    z = g.null_draws / g.sd[:, None]
    c = gn.model_covariance(sums)
    corr = c / np.sqrt(np.outer(np.diag(c), np.diag(c)))
    se = 1.0 / np.sqrt(R)
    np.testing.assert_allclose(z.var(axis=1), 1.0, atol=4 * np.sqrt(2) * se * 1.5)  # var of z^2: about 2
    np.testing.assert_allclose(np.corrcoef(z), corr, atol=4 * se * 1.5)
    assert abs(np.corrcoef(z[0], g.spiegelhalter_draws)[0, 1]) < 4 * se
    assert g.spiegelhalter_draws.var() == pytest.approx(1.0, abs=4 * np.sqrt(2) * se)


def test_kept_rows_are_the_random_rows_of_thin_cells_whatever_the_chunks():
    rng = np.random.default_rng(5)
    n, grid = 5000, (2, 8, 50)
    p = np.concatenate([rng.beta(2, 5, n - 100), np.zeros(50), rng.uniform(0.99, 1.0, 50)])
    y = rng.uniform(size=n) < p
    one, many = _sums(p, y, grid), _sums(p, y, grid, chunks=(700, 1400, 3000, 4999))
    cell = np.sum(_inverses(p, grid), axis=0)
    v = np.bincount(cell, weights=p * (1 - p))
    expect = np.flatnonzero((v[cell] < gn.THICK_VARIANCE) & (p * (1 - p) > 0))
    np.testing.assert_array_equal(np.sort(one.pos), expect)
    np.testing.assert_array_equal(np.sort(many.pos), expect)
    a, b = (gn.gaussian_draws(s, counter_key(7)[0], 50) for s in (one, many))
    np.testing.assert_allclose(a.null_draws, b.null_draws, rtol=1e-9, atol=1e-14)


def test_pvalue_within_monte_carlo_error_of_the_label_draws():
    rng = np.random.default_rng(6)
    n = 100_000
    p = rng.beta(2, 5, n)
    y = (rng.uniform(size=n) < p ** 1.03).astype(float)
    mc = ct.calib_test(y=y, probs=p, null="monte-carlo", rng=1)
    ga = ct.calib_test(y=y, probs=p, null="gaussian", rng=1)
    assert (mc.null, ga.null) == ("monte-carlo", "gaussian")
    np.testing.assert_allclose(ga.scales["z"], mc.scales["z"], rtol=1e-9)
    se = np.sqrt(2 * mc.pvalue * (1 - mc.pvalue) / 1000)  # two independent p-values of 999 draws
    assert abs(ga.pvalue - mc.pvalue) <= 4 * se + 2e-3


def test_auto_chooses_by_n_and_occupancy(monkeypatch):
    rng = np.random.default_rng(8)
    n = 4000
    p = rng.uniform(0.1, 0.9, n)
    y = (rng.uniform(size=n) < p).astype(float)
    assert ct.calib_test(y=y, probs=p).null == "monte-carlo"  # n < 10^6
    monkeypatch.setattr(gn, "GAUSSIAN_MIN_ROWS", 1000)
    res = ct.calib_test(y=y, probs=p)
    assert res.null == "gaussian"
    assert res.to_dict()["null"] == "gaussian"
    text = str(res.summary())
    assert "Gaussian null" in text and "Null draws (R):" in text
    monkeypatch.setattr(gn, "MAX_THIN_ROWS", 0)  # every cell of the finest scale is thin at n = 4000
    assert ct.calib_test(y=y, probs=p).null == "monte-carlo"
    assert (gn.choose_null(10 ** 6, 1), gn.choose_null(10 ** 6, 0)) == ("monte-carlo", "gaussian")


def test_stream_equals_rows_in_memory(tmp_path):
    rng = np.random.default_rng(9)
    n = 30_000
    p = rng.beta(2, 5, n)
    df = pd.DataFrame({"y": (rng.uniform(size=n) < p).astype(float), "p": p})
    path = tmp_path / "rows.parquet"
    df.to_parquet(path)
    mem = ct.calib_test("y ~ p", data=df, null="gaussian", rng=4)
    fil = ct.calib_test("y ~ p", data=str(path), null="gaussian", rng=4, chunksize=6_999)
    assert fil.null == "gaussian" and fil.pvalue == mem.pvalue
    np.testing.assert_allclose(fil.null_draws, mem.null_draws, rtol=1e-9, atol=1e-12)


def test_gaussian_refused_where_it_does_not_apply():
    rng = np.random.default_rng(10)
    probs = rng.dirichlet(np.ones(3), 200)
    y = np.array([rng.choice(3, p=row) for row in probs])
    with pytest.raises(ValueError, match="null='gaussian' needs a 1-dim prediction"):
        ct.calib_test(y=y, probs=probs, k="full", null="gaussian")
    with pytest.raises(ValueError, match="null must be one of"):
        ct.calib_test(y=y, probs=probs, null="normal")


def test_auto_on_a_parquet_file_chooses_as_rows_in_memory(tmp_path, monkeypatch):
    """null="auto" takes n from the Parquet metadata, with the adaptive grid or a given one."""
    rng = np.random.default_rng(11)
    n = 6000
    p = rng.beta(2, 5, n)
    df = pd.DataFrame({"y": (rng.uniform(size=n) < p).astype(float), "p": p})
    path = tmp_path / "rows.parquet"
    df.to_parquet(path)
    monkeypatch.setattr(gn, "GAUSSIAN_MIN_ROWS", 5000)
    for n_bins in ("adaptive", [3, 9]):
        mem = ct.calib_test("y ~ p", data=df, n_bins=n_bins, rng=2)
        fil = ct.calib_test("y ~ p", data=str(path), n_bins=n_bins, rng=2, chunksize=2500)
        assert mem.null == fil.null == "gaussian" and mem.pvalue == fil.pvalue
    monkeypatch.setattr(gn, "GAUSSIAN_MIN_ROWS", 6001)
    assert ct.calib_test("y ~ p", data=str(path), rng=2).null == "monte-carlo"


def test_dask_frame_equals_rows_in_memory():
    dd = pytest.importorskip("dask.dataframe")
    rng = np.random.default_rng(12)
    n = 20_000
    p = rng.beta(2, 5, n)
    df = pd.DataFrame({"y": (rng.uniform(size=n) < p).astype(float), "p": p})
    mem = ct.calib_test("y ~ p", data=df, null="gaussian", rng=4)
    das = ct.calib_test("y ~ p", data=dd.from_pandas(df, npartitions=5), null="gaussian", rng=4)
    assert das.null == "gaussian" and das.pvalue == mem.pvalue
    np.testing.assert_allclose(das.null_draws, mem.null_draws, rtol=1e-9, atol=1e-12)
