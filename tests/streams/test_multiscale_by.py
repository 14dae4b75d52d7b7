"""calib_test(..., by=) on a file or a Dask frame gives the grouped result of the rows in memory (issue 27, point 3).

Group g draws from default_rng([seed, g]) keyed by its rows' positions within the group, so the per-group
p-values for a seed are those of the rows in memory, whatever the chunk size or partitioning.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import calibtest as ct



def _frame(n=2400, seed=1):
    g = np.random.default_rng(seed)
    p = g.beta(2, 5, n)
    site = g.choice(["north", "east", "south"], n, p=[0.5, 0.3, 0.2])
    arm = g.choice([1, 2], n)
    y = (g.random(n) < p ** np.where(site == "east", 1.4, 1.0)).astype(float)
    df = pd.DataFrame({"y": y, "p": p, "site": site, "arm": arm})
    df.loc[7, "site"] = "west"  # a group of one row: listed, not tested
    return df


def assert_same_grouped(res, ref):
    a, b = res.to_frame(), ref.to_frame()
    pd.testing.assert_index_equal(a.index, b.index)
    assert list(a.columns) == list(b.columns)
    assert a["n"].tolist() == b["n"].tolist() and a["note"].tolist() == b["note"].tolist()
    np.testing.assert_array_equal(a["pvalue"].to_numpy(float), b["pvalue"].to_numpy(float))
    np.testing.assert_array_equal(a["pvalue_holm"].to_numpy(float), b["pvalue_holm"].to_numpy(float))
    np.testing.assert_allclose(a["statistic"].to_numpy(float), b["statistic"].to_numpy(float), rtol=1e-8)
    assert (res.global_pvalue, res.seed, res.mode, res.n_dropped) == (ref.global_pvalue, ref.seed, ref.mode,
                                                                       ref.n_dropped)
    for label, r in ref.groups.items():
        if r is None:
            assert res.groups[label] is None
            continue
        s = res.groups[label]
        assert list(s.n_bins) == list(r.n_bins) and s.seed == r.seed == "Generator"
        np.testing.assert_allclose(s.scales["z"], r.scales["z"], rtol=1e-8, atol=1e-8)
        np.testing.assert_array_equal(s.scales["pvalue"], r.scales["pvalue"])
        if r.spiegelhalter_z is None:  # an int n_bins: the single-scale test
            assert s.spiegelhalter_z is None and list(r.n_bins) == [6]
        else:
            assert s.spiegelhalter_z == pytest.approx(r.spiegelhalter_z, rel=1e-8)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    df = _frame()
    path = tmp_path_factory.mktemp("by")
    df.to_csv(path / "g.csv", index=False)
    df.to_parquet(path / "g.parquet", row_group_size=900)
    return df, path, ct.calib_test("y ~ p", data=df, by="site", rng=5)


@pytest.mark.parametrize("chunksize", [333, 5000])
@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_csv_equals_memory(data, chunksize):
    df, path, ref = data
    assert_same_grouped(ct.calib_test("y ~ p", data=path / "g.csv", by="site", rng=5, chunksize=chunksize), ref)
    assert ref.to_frame().loc["east", "pvalue"] <= 0.05  # the miscalibrated site is found


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_parquet_and_dask_equal_memory(dd, data):
    df, path, ref = data
    assert_same_grouped(ct.calib_test("y ~ p", data=str(path / "g.parquet"), by="site", rng=5), ref)
    for npartitions in (1, 3):
        assert_same_grouped(ct.calib_test("y ~ p", data=dd.from_pandas(df, npartitions=npartitions), by="site",
                                          rng=5), ref)


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_crossed_groups_missing_rows_and_an_int_grid(dd, tmp_path):
    df = _frame(1500, seed=4)
    df.loc[[3, 50, 700], "p"] = np.nan
    df.to_csv(tmp_path / "x.csv", index=False)
    for kw in ({}, {"n_bins": 6}):
        ref = ct.calib_test("y ~ p", data=df, by=["site", "arm"], rng=2, missing="drop", **kw)
        assert ref.n_dropped == 3
        assert_same_grouped(ct.calib_test("y ~ p", data=tmp_path / "x.csv", by=["site", "arm"], rng=2,
                                          missing="drop", chunksize=400, **kw), ref)
        assert_same_grouped(ct.calib_test("y ~ p", data=dd.from_pandas(df, npartitions=2), by=["site", "arm"],
                                          rng=2, missing="drop", **kw), ref)


def test_categorical_levels_unused_too(dd):
    df = _frame(900, seed=6)
    df["site"] = pd.Categorical(df["site"], categories=["west", "south", "north", "east", "nowhere"])
    ref = ct.calib_test("y ~ p", data=df, by="site", rng=3)
    res = ct.calib_test("y ~ p", data=dd.from_pandas(df, npartitions=2), by="site", rng=3)
    assert list(ref.to_frame().index) == ["west", "south", "north", "east", "nowhere"]
    assert_same_grouped(res, ref)


def test_refusals(tmp_path):
    df = _frame(300)
    df.to_csv(tmp_path / "r.csv", index=False)
    with pytest.raises(ValueError, match="grouping columns"):
        ct.calib_test("y ~ p", data=tmp_path / "r.csv", by=df["site"].to_numpy())
    with pytest.raises(ValueError, match="not a column"):
        ct.calib_test("y ~ p", data=tmp_path / "r.csv", by="ward")
    with pytest.raises(TypeError, match="int seed"):
        ct.calib_test("y ~ p", data=tmp_path / "r.csv", by="site", rng=np.random.default_rng(0))
