"""calib_ci(..., by=...) on files and Dask frames: the in-memory grouped result from per-group bin sums."""
import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.core.partition import partition_rows
from calibtest.core.targets import prepare_target
from calibtest.ece.grouped_interval import MIN_GROUP_ROWS, estimate_variance, variance_from_sums
from calibtest.streams.grouped import _fourth_sums

RTOL, ATOL = 1e-12, 1e-14


def _frame(seed=3, n=3000, top1=False):
    rng = np.random.default_rng(seed)
    site = rng.choice(["a", "b", "c"], n, p=[0.5, 0.45, 0.05])
    site[:30] = "d"                                    # a small group: the Monte Carlo null in memory
    if top1:
        conf = 1 - rng.beta(1, 8, n)
        correct = (rng.random(n) < conf ** 1.3).astype(int)
        df = pd.DataFrame({"correct": correct, "conf": conf})
    else:
        p = rng.beta(2, 2, n)
        df = pd.DataFrame({"y": (rng.random(n) < p ** 1.2).astype(int), "p": p})
    df["site"] = pd.Categorical(site, categories=["a", "b", "c", "d", "zz"])   # zz: an unused level
    df["arm"] = rng.integers(0, 2, n)
    df.loc[df.index[5:12], df.columns[1]] = np.nan      # dropped with missing="drop"
    return df


def _same(mem, streamed, small=("d",)):
    """Every number of the grouped result to 1e-12, apart from the small groups' Monte Carlo test."""
    a, b = mem.to_frame(), streamed.to_frame()
    assert list(a.index) == list(b.index) and a.index.names == b.index.names
    assert list(a.columns) == list(b.columns)
    big = [not any(s == (lb if not isinstance(lb, tuple) else lb[0]) for s in small) for lb in a.index]
    for col in a.columns:
        x, y = a.loc[big, col], b.loc[big, col]
        if col.startswith(("citl", "slope")):  # logistic fits need the rows, which a stream does not keep
            assert b[col].isna().all(), col
            continue
        if col in ("n", "events", "n_bins"):
            assert x.astype(object).tolist() == y.astype(object).tolist(), col
        elif x.dtype.kind == "f":
            np.testing.assert_allclose(y.to_numpy(float), x.to_numpy(float), rtol=RTOL, atol=ATOL, err_msg=col)
        elif col != "pvalue_holm":
            assert x.astype(object).fillna("-").tolist() == y.astype(object).fillna("-").tolist(), col
    for col in ("n", "events", "n_bins", "estimate", "ci_lower", "ci_upper"):  # the small groups' interval too
        np.testing.assert_allclose(b[col].to_numpy(float), a[col].to_numpy(float), rtol=RTOL, atol=ATOL)
    for lb, res in mem.groups.items():
        if res is None:
            assert streamed.groups[lb] is None and streamed.reasons[lb] == mem.reasons[lb]
            continue
        other = streamed.groups[lb]
        for name in ("estimate", "sigma1_sq", "n", "n_bins"):
            np.testing.assert_allclose(getattr(other, name), getattr(res, name), rtol=RTOL, atol=ATOL)
    for name in ("estimate", "ci_lower", "ci_upper", "null_pvalue", "n", "n_bins"):
        np.testing.assert_allclose(getattr(streamed.pooled, name), getattr(mem.pooled, name), rtol=RTOL, atol=ATOL)
    assert streamed.pooled.null == mem.pooled.null
    np.testing.assert_allclose(streamed.heterogeneity_statistic, mem.heterogeneity_statistic, rtol=RTOL)
    np.testing.assert_allclose(streamed.heterogeneity_pvalue, mem.heterogeneity_pvalue, rtol=RTOL, atol=ATOL)
    assert streamed.n_dropped == mem.n_dropped


def _small_group_consistent(streamed, frame, formula, label="d", **kw):
    """The streamed small group: the asymptotic test of its rows, its p-value the one the global test uses."""
    rows = frame[frame["site"] == label]
    alone = ct.calib_ci(formula, data=rows, null="asymptotic", missing="drop", **kw)
    tab = streamed.to_frame()
    assert tab.loc[label, "null"] == "asymptotic"
    np.testing.assert_allclose(tab.loc[label, "pvalue"], alone.null_pvalue, rtol=RTOL, atol=ATOL)
    assert "Monte Carlo" in tab.loc[label, "note"] and "asymptotic" in tab.loc[label, "note"]
    p = tab["pvalue"].dropna().to_numpy(float)
    assert streamed.global_pvalue == pytest.approx(min(1.0, p.size * p.min()), rel=1e-14)


@pytest.mark.parametrize("chunksize", [97, 1000, 10**6])
@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_csv_binary_matches_memory_for_every_chunk_size(tmp_path, chunksize):
    df = _frame()
    path = tmp_path / "d.csv"
    df.to_csv(path, index=False)
    mem = ct.calib_ci("y ~ p", data=pd.read_csv(path), by="site", missing="drop", rng=1)
    streamed = ct.calib_ci("y ~ p", data=str(path), by="site", missing="drop", chunksize=chunksize)
    _same(mem, streamed)
    _small_group_consistent(streamed, df, "y ~ p")
    assert streamed.source["passes"] == 2 and streamed.n_dropped == 7


def test_parquet_top1_crossed_with_unused_level(tmp_path):
    df = _frame(seed=5, top1=True)
    path = tmp_path / "d.parquet"
    df.to_parquet(path, row_group_size=500)
    kw = dict(n_classes=10, missing="drop")
    mem = ct.calib_ci("correct ~ conf", data=pd.read_parquet(path), by=["site", "arm"], rng=2, **kw)
    streamed = ct.calib_ci("correct ~ conf", data=str(path), by=["site", "arm"], chunksize=333, **kw)
    assert ("zz", 0) in streamed.to_frame().index and streamed.reasons[("zz", 0)] == "no rows"
    _same(mem, streamed)
    assert streamed.mode == "top1"


def test_parquet_unused_categorical_level_kept(tmp_path):
    df = _frame(seed=7)
    path = tmp_path / "d.parquet"
    df.to_parquet(path)
    mem = ct.calib_ci("y ~ p", data=pd.read_parquet(path), by="site", missing="drop", rng=0)
    streamed = ct.calib_ci("y ~ p", data=str(path), by="site", missing="drop", chunksize=800)
    assert list(streamed.to_frame().index) == ["a", "b", "c", "d", "zz"]
    _same(mem, streamed)
    _small_group_consistent(streamed, df, "y ~ p")


@pytest.mark.parametrize("npartitions", [1, 3, 7])
@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_dask_matches_memory_for_every_partitioning(npartitions):
    dd = pytest.importorskip("dask.dataframe")
    df = _frame(seed=11)
    mem = ct.calib_ci("y ~ p", data=df, by="site", missing="drop", rng=4)
    with __import__("dask").config.set(scheduler="synchronous"):
        streamed = ct.calib_ci("y ~ p", data=dd.from_pandas(df, npartitions=npartitions), by="site",
                               missing="drop")
    _same(mem, streamed)
    _small_group_consistent(streamed, df, "y ~ p")
    assert streamed.source["format"] == "dask"


def test_dask_top1_missing_raise():
    dd = pytest.importorskip("dask.dataframe")
    df = _frame(seed=13, top1=True).dropna()
    mem = ct.calib_ci("correct ~ conf", data=df, by="arm", n_classes=5)
    with __import__("dask").config.set(scheduler="synchronous"):
        streamed = ct.calib_ci("correct ~ conf", data=dd.from_pandas(df, npartitions=4), by="arm", n_classes=5)
    _same(mem, streamed, small=())


def test_integer_n_bins_needs_one_pass(tmp_path):
    df = _frame(seed=17).dropna()
    path = tmp_path / "d.csv"
    df.to_csv(path, index=False)
    mem = ct.calib_ci("y ~ p", data=pd.read_csv(path), by="arm", n_bins=12)
    streamed = ct.calib_ci("y ~ p", data=str(path), by="arm", n_bins=12, chunksize=250)
    assert streamed.source["passes"] == 1
    _same(mem, streamed, small=())


def test_variance_from_sums_equals_rows():
    rng = np.random.default_rng(0)
    for d_mode in ("binary", "full"):
        if d_mode == "binary":
            p = rng.random(400)
            data = prepare_target((rng.random(400) < p).astype(int), p[:, None])
        else:
            probs = rng.dirichlet([2, 2, 2], 400)
            data = prepare_target(np.array([rng.choice(3, p=r) for r in probs]), probs, k="full")
        part = partition_rows(data, "auto")
        stats = part.bin_sums(data)
        res = ct.calib_ci(y=np.rint(data.y[:, 0] if d_mode == "binary" else data.y.argmax(1)).astype(int),
                          probs=p if d_mode == "binary" else probs, k=None if d_mode == "binary" else "full",
                          null="asymptotic")
        fourth = _fourth_sums(part, data.u).sum_u[:, 0]
        from_sums, from_rows = variance_from_sums(stats, fourth), estimate_variance(res)
        for part in ("second_order", "first_order", "plugin", "bias"):
            assert getattr(from_sums, part) == pytest.approx(getattr(from_rows, part), rel=1e-12)
        assert from_sums.unrestricted == pytest.approx(from_rows.unrestricted, rel=1e-12)


def test_explicit_conditional_leaves_small_group_unanalysed(tmp_path):
    df = _frame(seed=19)
    path = tmp_path / "d.csv"
    df.to_csv(path, index=False)
    streamed = ct.calib_ci("y ~ p", data=str(path), by="site", missing="drop", null="conditional")
    assert streamed.groups["d"] is None and "null='conditional'" in streamed.reasons["d"]
    assert streamed.n_analysed == 3 and (streamed.to_frame()["n"] >= 0).all()
    assert streamed.to_frame().loc["d", "n"] < MIN_GROUP_ROWS


def test_refusals(tmp_path):
    df = _frame(seed=23).dropna()
    path = tmp_path / "d.csv"
    df.to_csv(path, index=False)
    with pytest.raises(ValueError, match="weights= and prevalence="):
        ct.calib_ci("y ~ p", data=str(path), by="site", weights="arm")
    with pytest.raises(ValueError, match="monte-carlo"):
        ct.calib_ci("y ~ p", data=str(path), by="site", null="monte-carlo")
    with pytest.raises(ValueError, match="grouping columns"):
        ct.calib_ci("y ~ p", data=str(path), by=df["site"].to_numpy())
    with pytest.raises(ValueError, match="'nope'"):
        ct.calib_ci("y ~ p", data=str(path), by="nope")
    with pytest.raises(ValueError, match="more than once"):
        ct.calib_ci("y ~ p", data=str(path), by=["site", "site"])
    with pytest.raises(ValueError, match="method="):
        ct.calib_ci("y ~ p", data=str(path), by="site", method="bootstrap")
    bad = df.astype({"site": object})
    bad.loc[bad.index[40], "site"] = np.nan
    bad.to_csv(path, index=False)
    with pytest.raises(ValueError, match="by column 'site' has missing values"):
        ct.calib_ci("y ~ p", data=str(path), by="site")


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_cli_ci_by_streams_csv_and_parquet(tmp_path, capsys):
    import json
    from calibtest.cli import main
    df = _frame(seed=29).dropna()
    df["site"] = df["site"].astype(str)
    csv, parquet = tmp_path / "d.csv", tmp_path / "d.parquet"
    df.to_csv(csv, index=False)
    df.to_parquet(parquet)
    mem = ct.calib_ci("y ~ p", data=pd.read_csv(csv), by="site").to_frame()
    for path in (csv, parquet):
        assert main(["ci", str(path), "--formula", "y ~ p", "--by", "site", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert "Streamed from d." in " ".join(out["notes"])      # not read into memory
        got = pd.DataFrame(out["groups"]).set_index("group")
        big = [lb != "d" for lb in mem.index]
        np.testing.assert_allclose(got["estimate"].to_numpy(float)[big], mem["estimate"].to_numpy(float)[big],
                                   rtol=RTOL, atol=ATOL)


def test_groups_that_cannot_be_analysed(tmp_path):
    """A one-row group and a single-outcome group: not analysed, with the in-memory reasons."""
    df = _frame(seed=31).dropna()
    df["site"] = df["site"].astype(str)
    df.loc[df.index[100], "site"] = "one"
    rows = df.index[200:220]
    df.loc[rows, "site"], df.loc[rows, "y"] = "ones", 1
    path = tmp_path / "d.csv"
    df.to_csv(path, index=False)
    mem = ct.calib_ci("y ~ p", data=pd.read_csv(path), by="site")
    streamed = ct.calib_ci("y ~ p", data=str(path), by="site", chunksize=150)
    assert streamed.reasons["one"] == "a single row" and "single outcome class" in streamed.reasons["ones"]
    _same(mem, streamed)
