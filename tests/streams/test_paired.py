"""calib_compare streamed from a CSV or Parquet file (calibtest/streams/paired.py).

The reference is the same comparison with the rows in memory, whose variance
components tests/api/test_calib_compare.py checks against O(n^2) loops over
pairs of rows: the streamed numbers must agree to 1e-12 (relative; the
difference of two estimates on the scale of the estimates), with chunks of a
few rows so that every sum is split across many chunks.
"""
from __future__ import annotations

import os
import re

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, logit

import calibtest as ct
from calibtest.options import DataError, OptionError
from calibtest.streams.paired import DifferenceSums, ModelBins, compare_file, _Models
from calibtest.streams.accumulator import BinAccumulator
from calibtest.inputs.settings import Settings
from calibtest.inputs.formula import resolve_env

FIELDS = ("estimate_a", "estimate_b", "se", "se_first_order", "se_second_order", "se_first_order_plugin",
          "statistic", "pvalue", "ci_lower", "ci_upper")


def _binary(n=3000, seed=0):
    g = np.random.default_rng(seed)
    p = np.clip(g.beta(2, 5, n), 1e-4, 1 - 1e-4)
    return pd.DataFrame({"y": (g.random(n) < p ** 1.1).astype(int), "p_a": p,
                         "p_b": expit(1.2 * logit(p) + 0.3 * g.standard_normal(n)),
                         "p_c": expit(0.9 * logit(p))})


def _write(df, path):
    df.to_csv(path, index=False) if path.suffix == ".csv" else df.to_parquet(path, row_group_size=500)
    return path


def assert_same(streamed, memory):
    """Every number of two ComparisonResults agrees to 1e-12 (relative; Delta on the scale of T_A, T_B)."""
    for f in FIELDS:
        a, b = getattr(streamed, f), getattr(memory, f)
        assert a == pytest.approx(b, rel=1e-12, abs=1e-300), f
    scale = max(abs(memory.estimate_a), abs(memory.estimate_b))
    assert abs(streamed.estimate - memory.estimate) <= 1e-12 * scale
    assert (streamed.paired, streamed.pairing, streamed.n_a, streamed.n_bins_a, streamed.n_bins_b) == \
        (memory.paired, memory.pairing, memory.n_a, memory.n_bins_a, memory.n_bins_b)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("options", [{}, {"n_bins": 6}, {"variance": "plugin", "alternative": "greater"}])
def test_a_file_compares_as_its_rows_in_memory(tmp_path, suffix, options):
    df = _binary()
    path = _write(df, tmp_path / f"rows{suffix}")
    memory = ct.calib_compare("y ~ p_a", "y ~ p_b", data=df, **options)
    streamed = ct.calib_compare("y ~ p_a", "y ~ p_b", data=path, chunksize=37, **options)
    assert_same(streamed, memory)
    src = streamed.result_a.source
    # CSV with n_bins="auto": a counting pass first; Parquet gives n in its metadata
    assert src["passes"] == (3 if suffix == ".csv" and not options.get("n_bins") else 2)
    assert src["n_chunks"] == -(-len(df) // 37) and src["chunksize"] == 37
    assert streamed.result_a.data is None and streamed.result_a.stream is not None


def test_a_tiny_chunk_of_one_row(tmp_path):
    df = _binary(n=300, seed=4)
    path = _write(df, tmp_path / "r.csv")
    assert_same(ct.calib_compare("y ~ p_a", "y ~ p_c", data=path, chunksize=1, n_bins=5),
                ct.calib_compare("y ~ p_a", "y ~ p_c", data=df, n_bins=5))


@pytest.mark.parametrize("options", [{"n_classes": 4}, {"k": 2, "n_bins": 4}])
def test_top1_and_topk_files(tmp_path, options):
    g = np.random.default_rng(2)
    n, K = 2500, 4
    P = np.exp(g.normal(size=(n, K)))
    P /= P.sum(1, keepdims=True)
    Q = P ** 1.3
    Q /= Q.sum(1, keepdims=True)
    label = (g.random(n)[:, None] > np.cumsum(P, axis=1)).sum(axis=1)
    df = pd.DataFrame({"label": label, **{f"a{j}": P[:, j] for j in range(K)},
                       **{f"b{j}": Q[:, j] for j in range(K)}})
    path = _write(df, tmp_path / "k.parquet")
    fa, fb = "label ~ a0 + a1 + a2 + a3", "label ~ b0 + b1 + b2 + b3"
    assert_same(ct.calib_compare(fa, fb, data=path, chunksize=101, **options),
                ct.calib_compare(fa, fb, data=df, **options))


def test_missing_drop_drops_a_row_for_every_model(tmp_path):
    df = _binary(seed=5)
    df.loc[[3, 70], "p_a"] = np.nan
    df.loc[[70, 900], "p_b"] = np.nan
    path = _write(df, tmp_path / "na.csv")
    streamed = ct.calib_compare("y ~ p_a", "y ~ p_b", data=path, missing="drop", chunksize=64)
    assert_same(streamed, ct.calib_compare("y ~ p_a", "y ~ p_b", data=df, missing="drop"))
    assert streamed.n_a == len(df) - 3
    # each model's own rule would read other rows than the three shared drops: no stream to re-read
    assert streamed.result_a.stream is None and streamed.result_b.stream is None
    only_a = df.copy()
    only_a["p_b"] = only_a["p_b"].fillna(0.5)
    path2 = _write(only_a, tmp_path / "na2.csv")
    both = ct.calib_compare("y ~ p_a", "y ~ p_b", data=path2, missing="drop", chunksize=64)
    assert both.result_a.stream is not None and both.result_b.stream is None
    assert both.result_a.evidence(rng=1).n == both.n_a  # its evidence reads the shared rows
    with pytest.raises(ValueError, match="missing"):
        ct.calib_compare("y ~ p_a", "y ~ p_b", data=path, chunksize=64)


def test_pairwise_from_a_file_in_two_passes(tmp_path):
    df = _binary(seed=6)
    path = _write(df, tmp_path / "r.parquet")
    formulas = ["y ~ p_a", "y ~ p_b", "y ~ p_c"]
    streamed = ct.calib_compare(formulas, data=path, chunksize=250)
    memory = ct.calib_compare(formulas, data=df)
    for s, m in zip(streamed.comparisons, memory.comparisons):
        assert_same(s, m)
    np.testing.assert_allclose(streamed.table["pvalue_holm"], memory.table["pvalue_holm"], rtol=1e-12)
    assert streamed.comparisons[0].result_a.source["passes"] == 2  # every pair from the same two passes


def test_streamed_results_paired_unpaired_and_mixed(tmp_path):
    df = _binary(seed=7)
    path = _write(df, tmp_path / "r.parquet")
    half = df.iloc[:1700]
    path_half = _write(half, tmp_path / "h.csv")
    ra, rb = (ct.calib_ci(f, data=path, chunksize=300) for f in ("y ~ p_a", "y ~ p_b"))
    ma, mb = (ct.calib_ci(f, data=df) for f in ("y ~ p_a", "y ~ p_b"))
    for paired in (None, True, False):  # the same file: one more pass decides and sums
        assert_same(ct.calib_compare(ra, rb, paired=paired), ct.calib_compare(ma, mb, paired=paired))
    assert ct.calib_compare(ra, rb).pairing == "identical outcomes"
    flipped = df.assign(y2=1 - df["y"])
    path_f = _write(flipped, tmp_path / "f.parquet")
    rf, rg = ct.calib_ci("y ~ p_a", data=path_f), ct.calib_ci("y2 ~ p_b", data=path_f)
    mf, mg = ct.calib_ci("y ~ p_a", data=flipped), ct.calib_ci("y2 ~ p_b", data=flipped)
    assert_same(ct.calib_compare(rf, rg), ct.calib_compare(mf, mg))  # outcomes differ: unpaired
    assert ct.calib_compare(rf, rg).pairing == "outcomes differ"
    rh, mh = ct.calib_ci("y ~ p_b", data=path_half, chunksize=99), ct.calib_ci("y ~ p_b", data=half)
    assert_same(ct.calib_compare(ra, rh), ct.calib_compare(ma, mh))  # two independent streams
    assert_same(ct.calib_compare(ma, rh), ct.calib_compare(ma, mh))  # one in memory, one streamed
    with pytest.raises(ValueError, match=re.escape("different numbers of rows (n_a = 3000, n_b = 1700)")):
        ct.calib_compare(ra, rh, paired=True)
    other = _write(df, tmp_path / "copy.csv")
    rc = ct.calib_ci("y ~ p_b", data=other)
    with pytest.raises(ValueError, match="pass paired=False"):
        ct.calib_compare(ra, rc)
    with pytest.raises(ValueError, match="same file"):
        ct.calib_compare(ra, rc, paired=True)
    assert_same(ct.calib_compare(ra, rc, paired=False), ct.calib_compare(ma, mb, paired=False))


def test_difference_sums_are_additive(tmp_path):
    """The sums of chunks merged equal the sums of all rows at once (disjoint rows add)."""
    df = _binary(n=1200, seed=8)
    env = resolve_env(0)
    models = _Models(("y ~ p_a", "y ~ p_b"), (env, env), "raise")
    accs = [BinAccumulator(f, n_bins=9).update(df) for f in models.formulas]
    bins = [ModelBins.of(a.bin_stats, a.n_bins) for a in accs]
    whole = DifferenceSums(bins, [(0, 1)]).add(models.prepared(df))
    parts = [DifferenceSums(bins, [(0, 1)]).add(models.prepared(df.iloc[i:i + 100])) for i in range(0, 1200, 100)]
    merged = parts[0]
    for p in parts[1:]:
        merged.merge(p)
    merged.refuse_other_rows()
    for paired in (True, False):
        w, m = whole.variance(0, 1, paired), merged.variance(0, 1, paired)
        for f in ("first_order_plugin", "first_order_bias", "second_order"):
            assert getattr(m, f) == pytest.approx(getattr(w, f), rel=1e-12)
    # and both are the in-memory components
    mem = ct.calib_compare("y ~ p_a", "y ~ p_b", data=df, n_bins=9, variance="plugin")
    assert np.sqrt(merged.variance(0, 1, True).first_order_plugin) == pytest.approx(mem.se_first_order_plugin,
                                                                                    rel=1e-12)


def test_a_file_changed_between_the_results_and_the_comparison(tmp_path):
    df = _binary(n=800, seed=9)
    path = _write(df, tmp_path / "c.csv")
    ra, rb = ct.calib_ci("y ~ p_a", data=path), ct.calib_ci("y ~ p_b", data=path)
    df.iloc[:700].to_csv(path, index=False)
    with pytest.raises(DataError, match="c.csv changed since it was first read; the result would mix two versions"):
        ct.calib_compare(ra, rb)


def test_a_file_changed_during_the_second_pass(tmp_path, monkeypatch):
    df = _binary(n=900, seed=10)
    path = _write(df, tmp_path / "c.parquet")
    import calibtest.streams.paired as paired
    original = paired._second_pass

    def change_then_read(file, *args):
        pd.concat([df, df.iloc[:1]]).to_parquet(path)  # a row added between the passes
        os.utime(path, ns=(file.stat0.st_mtime_ns + 10**9,) * 2)
        return original(file, *args)

    monkeypatch.setattr(paired, "_second_pass", change_then_read)
    with pytest.raises(DataError, match="c.parquet changed since it was first read"):
        ct.calib_compare("y ~ p_a", "y ~ p_b", data=path)


def test_what_needs_every_row_is_refused_on_a_file(tmp_path):
    df = _binary(n=400, seed=11).assign(site=lambda d: np.arange(len(d)) % 5, t=1.0, e=1)
    path = _write(df, tmp_path / "r.parquet")
    with pytest.raises(OptionError, match=r"clustered rows .*read the formulas' columns into a DataFrame"):
        ct.calib_compare("y ~ p_a", "y ~ p_b", data=path, cluster="site")
    with pytest.raises(OptionError, match=r"survival rows .*pd.read_parquet\(path, columns="):
        ct.calib_compare("Surv(t, e) ~ p_a", "Surv(t, e) ~ p_b", data=path, horizon=1.0)
    with pytest.raises(OptionError, match="chunksize= reads a file in chunks"):
        ct.calib_compare("y ~ p_a", "y ~ p_b", data=df, chunksize=10)
    with pytest.raises(OptionError, match="chunksize must be"):
        ct.calib_compare("y ~ p_a", "y ~ p_b", data=path, chunksize=0)


def test_compare_file_returns_each_pairs_components(tmp_path):
    df = _binary(n=1000, seed=12)
    path = _write(df, tmp_path / "r.parquet")
    results, variances = compare_file(path, ["y ~ p_a", "y ~ p_b"], Settings(n_bins=7, env=resolve_env(0),
                                                                           chunksize=128), [(0, 1)])
    mem = ct.calib_compare("y ~ p_a", "y ~ p_b", data=df, n_bins=7)
    assert [r.estimate for r in results] == pytest.approx([mem.estimate_a, mem.estimate_b], rel=1e-12)
    v = variances[(0, 1)]
    assert np.sqrt(v.total("corrected")) == pytest.approx(mem.se, rel=1e-12)
