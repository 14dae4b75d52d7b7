"""Equal-mass scales of calib_test on a file or a Dask frame equal those of the rows in memory (issue 27, point 2).

The edges are np.quantile's to the last bit (from exact order statistics and numpy's interpolation formula),
so every row falls in its in-memory bin and the p-value for a seed is the same.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.streams.multiscale_quantiles import linear_quantiles



@pytest.mark.parametrize("n", [2, 3, 7, 100, 1001, 65537])
def test_linear_quantiles_are_numpys_bit_for_bit(n):
    g = np.random.default_rng(n)
    for x in (g.random(n), np.round(g.beta(2, 5, n), 2), np.full(n, 0.3)):
        s = np.sort(x)
        for b in (2, 3, 7, 10, 64, 250):
            q = np.arange(1, b) / b
            np.testing.assert_array_equal(linear_quantiles(lambda r: s[r], n, q), np.quantile(x, q))


def _frame(n, seed, digits=None):
    g = np.random.default_rng(seed)
    p = g.beta(2, 5, n)
    if digits is not None:
        p = np.round(p, digits)
    return pd.DataFrame({"y": (g.random(n) < p).astype(int), "p": p})  # calibrated (p as given, rounded or not)


def assert_same_test(res, ref):
    assert (res.pvalue, res.pvalue_max_z, res.pvalue_bonferroni) == (ref.pvalue, ref.pvalue_max_z,
                                                                     ref.pvalue_bonferroni)
    assert (res.partitions, list(res.n_bins), res.seed, res.n, res.n_dropped) == (
        ref.partitions, list(ref.n_bins), ref.seed, ref.n, ref.n_dropped)
    assert list(res.scales["partition"]) == list(ref.scales["partition"])
    for col in ("T", "sd", "z"):
        np.testing.assert_allclose(res.scales[col], ref.scales[col], rtol=1e-8, atol=1e-12)
    np.testing.assert_array_equal(res.scales["pvalue"], ref.scales["pvalue"])
    if ref.spiegelhalter_z is None:  # an int n_bins: the single-scale test
        assert res.spiegelhalter_z is None
    else:
        assert res.spiegelhalter_z == pytest.approx(ref.spiegelhalter_z, rel=1e-10)


@pytest.mark.parametrize("partitions", ["equal-mass", "both"])
def test_file_and_dask_equal_memory(dd, tmp_path, partitions):
    df = _frame(2500, 1, digits=2)  # tied predictions: edges on ties, bins merged
    df.loc[[3, 40], "p"] = np.nan
    df.to_csv(tmp_path / "e.csv", index=False)
    df.to_parquet(tmp_path / "e.parquet", row_group_size=700)
    ref = ct.calib_test("y ~ p", data=df, partitions=partitions, rng=9, missing="drop")
    assert 1 / 1000 < ref.pvalue < 1 and ref.n_dropped == 2  # not at the floor of the draws
    for chunksize in (333, 10_000):
        assert_same_test(ct.calib_test("y ~ p", data=tmp_path / "e.csv", partitions=partitions, rng=9,
                                       missing="drop", chunksize=chunksize), ref)
    assert_same_test(ct.calib_test("y ~ p", data=tmp_path / "e.parquet", partitions=partitions, rng=9,
                                   missing="drop"), ref)
    for npartitions in (1, 3):
        assert_same_test(ct.calib_test("y ~ p", data=dd.from_pandas(df, npartitions=npartitions),
                                       partitions=partitions, rng=9, missing="drop"), ref)


def test_an_int_grid_and_a_top1_target(tmp_path):
    g = np.random.default_rng(3)
    conf = 0.5 + 0.5 * g.random(1800)
    df = pd.DataFrame({"correct": (g.random(1800) < conf).astype(int), "confidence": conf})
    df.to_parquet(tmp_path / "t.parquet")
    for n_bins in (5, [3, 9]):
        ref = ct.calib_test("correct ~ confidence", data=df, n_classes=10, partitions="equal-mass", n_bins=n_bins,
                            rng=2)
        res = ct.calib_test("correct ~ confidence", data=tmp_path / "t.parquet", n_classes=10,
                            partitions="equal-mass", n_bins=n_bins, rng=2)
        assert res.mode == "top1" and (ref.spiegelhalter_z is None) == (np.ndim(n_bins) == 0)
        assert_same_test(res, ref)


def test_equal_mass_with_by_is_refused_with_what_to_do(tmp_path):
    df = _frame(300, 2).assign(site=lambda d: np.where(d.index % 2, "a", "b"))
    df.to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(ValueError, match="partitions='equal-width' with by="):
        ct.calib_test("y ~ p", data=tmp_path / "b.csv", partitions="both", by="site")
