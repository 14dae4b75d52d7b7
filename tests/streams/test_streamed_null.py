"""The conditional null from streamed bin sums: files, Dask frames and BinAccumulator give the rows' null.

The conditional moments of T given the predictions are additive per-bin sums
(``calibtest.core.conditional.conditional_sum_columns``); a stream adds them
chunk by chunk, so its variance, skewness and p-value must equal the
in-memory ones up to the order of the additions (rtol 1e-10), and
``null="auto"`` must choose the same null for every source.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.streams.accumulator import BinAccumulator
from calibtest.core.binstats import merge_stats
from calibtest.core.conditional import (conditional_bin_sums, conditional_sum_columns, conditional_sum_width,
                                        conditional_sums_from_columns)
from scale_helpers import assert_same_conditional, assert_same_result

pytest.importorskip("pyarrow")

N = 3000


def frame(kind: str, n: int = N, seed: int = 7):
    """(DataFrame, formula, options) of one target; every target's null is the conditional one under auto."""
    rng = np.random.default_rng(seed)
    if kind == "binary":
        p = rng.beta(2, 5, n)
        return pd.DataFrame({"y": (rng.uniform(size=n) < p ** 1.1).astype(int), "p": p}), "y ~ p", {"n_bins": 12}
    if kind == "top1":
        conf = 0.1 + 0.9 * rng.beta(4, 1.5, n)
        df = pd.DataFrame({"correct": (rng.uniform(size=n) < conf ** 1.2).astype(int), "conf": conf})
        return df, "correct ~ conf", {"n_classes": 10, "n_bins": 15}
    K = 4 if kind == "top2" else 3
    P = rng.dirichlet(np.ones(K) * 1.5, size=n)
    names = [f"c{j}" for j in range(K)]
    df = pd.DataFrame(P, columns=names)
    df["label"] = (rng.uniform(size=n)[:, None] > np.cumsum(P, axis=1)).sum(axis=1)
    opts = {"k": 2, "n_bins": 5} if kind == "top2" else {"k": "full", "n_bins": 6}
    return df, "label ~ " + " + ".join(names), opts


KINDS = ["binary", "top1", "top2", "full3"]


@pytest.fixture(scope="module", params=KINDS)
def case(request, tmp_path_factory):
    df, formula, opts = frame(request.param)
    ref = ct.calib_ci(formula, data=df, **opts)
    assert ref.null == "conditional" and ref.null_method == "shifted gamma" and ref.conditional.reliable
    assert ref.null_pvalue == ref.conditional.pvalue
    folder = tmp_path_factory.mktemp(request.param)
    df.to_csv(folder / "rows.csv", index=False)
    df.to_parquet(folder / "rows.parquet", row_group_size=700)
    return request.param, df, formula, opts, ref, folder


def check(res, ref):
    assert (res.null, res.null_method) == ("conditional", "shifted gamma")
    assert_same_result(res, ref)
    np.testing.assert_allclose([res.null_pvalue, res.conditional.variance, res.conditional.skewness],
                               [ref.null_pvalue, ref.conditional.variance, ref.conditional.skewness], rtol=1e-10)


@pytest.mark.parametrize("chunksize", [211, 1000, N])
def test_csv_file_gives_the_in_memory_null(case, chunksize):
    _, _, formula, opts, ref, folder = case
    check(ct.calib_ci(formula, data=folder / "rows.csv", chunksize=chunksize, **opts), ref)


def test_parquet_file_gives_the_in_memory_null(case):
    _, _, formula, opts, ref, folder = case
    check(ct.calib_ci(formula, data=folder / "rows.parquet", **opts), ref)
    explicit = ct.calib_ci(formula, data=folder / "rows.parquet", chunksize=333, null="conditional", **opts)
    check(explicit, ct.calib_ci(formula, data=pd.read_parquet(folder / "rows.parquet"), null="conditional", **opts))
    assert "null='conditional'" in explicit.call


@pytest.mark.parametrize("npartitions", [1, 3, 8])
def test_dask_frame_gives_the_in_memory_null(case, npartitions):
    dd = pytest.importorskip("dask.dataframe")
    _, df, formula, opts, ref, _ = case
    check(ct.calib_ci(formula, data=dd.from_pandas(df, npartitions=npartitions), **opts), ref)


def test_accumulator_in_pieces_gives_the_in_memory_null(case):
    kind, df, formula, opts, ref, _ = case
    rng = np.random.default_rng(3)
    cuts = np.r_[0, np.sort(rng.choice(np.arange(1, N), 9, replace=False)), N]
    accs = [BinAccumulator(formula, **opts).update(df.iloc[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
    merged = BinAccumulator.merge_all(accs[::-1])
    res = merged.result()
    check(res, ref)
    d = {"binary": 1, "top1": 1, "top2": 2, "full3": 3}[kind]  # coordinates of the binned vector
    assert res.bin_stats.null_sums.shape[1] == conditional_sum_width(d)
    # the null is a choice at result time: the asymptotic one from the same sums, no second pass
    assert_same_result(merged.result(null="asymptotic"), ct.calib_ci(formula, data=df, null="asymptotic", **opts))


def test_summary_names_the_null_of_a_file(case):
    _, _, formula, opts, ref, folder = case
    res = ct.calib_ci(formula, data=folder / "rows.parquet", **opts)
    text = str(res.summary())
    assert "Null of the interval's test (null='conditional'): conditional (shifted gamma)" in " ".join(text.split())


# --------------------------------------------------------------------------- the sums themselves
def _slow_sums(z: np.ndarray, inverse: np.ndarray, m: int) -> dict:
    """Per-bin sums by explicit per-row matrices and tensors (a Python loop over rows)."""
    d = z.shape[1]
    out = {"sigma": np.zeros((m, d, d)), "sigma_sq": np.zeros((m, d, d)), "tr2": np.zeros(m), "tr3": np.zeros(m),
           "kappa": np.zeros((m, d, d, d)), "kappa_sq": np.zeros(m)}
    eye = np.eye(d)
    for a in range(z.shape[0]):
        zi, b = z[a], inverse[a]
        sig = np.diag(zi) - np.outer(zi, zi)
        # E[Y_i Y_j Y_l] = z_i d_ijl for one-hot Y, minus the lower moments
        kap = (np.einsum("i,ij,jl->ijl", zi, eye, eye) - np.einsum("i,j,jl->ijl", zi, zi, eye)
               - np.einsum("i,j,il->ijl", zi, zi, eye) - np.einsum("i,l,ij->ijl", zi, zi, eye)
               + 2 * np.einsum("i,j,l->ijl", zi, zi, zi))
        out["sigma"][b] += sig
        out["sigma_sq"][b] += sig @ sig
        out["tr2"][b] += np.trace(sig @ sig)
        out["tr3"][b] += np.trace(sig @ sig @ sig)
        out["kappa"][b] += kap
        out["kappa_sq"][b] += np.sum(kap * kap)
    return out


@pytest.mark.parametrize("d", [1, 2, 3])
def test_packed_sums_unpack_to_the_per_row_definitions(d):
    rng = np.random.default_rng(d)
    z = rng.dirichlet(np.ones(d + 1), size=60)[:, :d]
    inverse = rng.integers(0, 5, 60)
    cols = conditional_sum_columns(z, inverse, 5)
    assert cols.shape == (5, conditional_sum_width(d))
    got = conditional_sums_from_columns(np.bincount(inverse, minlength=5), cols)
    slow = _slow_sums(z, inverse, 5)
    for name in ("sigma", "sigma_sq", "tr2", "tr3", "kappa_sq"):
        np.testing.assert_allclose(getattr(got, name), slow[name], rtol=1e-12, atol=1e-15, err_msg=name)
    # the unique entries i <= j <= l of K with their multiplicities give the full tensor's square norm
    i, j, l = np.array([(a, b, c) for a in range(d) for b in range(a, d) for c in range(b, d)]).T
    np.testing.assert_allclose(got.kappa, slow["kappa"][:, i, j, l], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose((got.kappa ** 2) @ got.kappa_mult, np.sum(slow["kappa"] ** 2, axis=(1, 2, 3)),
                               rtol=1e-12)


def test_packed_sums_add_over_disjoint_rows_and_merge_by_key():
    rng = np.random.default_rng(5)
    z = rng.dirichlet(np.ones(3), size=400)[:, :2]
    inverse = rng.integers(0, 7, 400)
    whole = conditional_sum_columns(z, inverse, 7)
    parts = [conditional_sum_columns(z[a:b], inverse[a:b], 7) for a, b in ((0, 123), (123, 300), (300, 400))]
    np.testing.assert_allclose(sum(parts), whole, rtol=1e-13, atol=1e-15)
    # the in-memory sums are the packed sums unpacked, bit for bit
    direct = conditional_bin_sums(z, inverse, 7)
    unpacked = conditional_sums_from_columns(np.bincount(inverse, minlength=7), whole)
    for name in ("sigma", "sigma_sq", "tr2", "tr3", "kappa", "kappa_sq"):
        np.testing.assert_array_equal(getattr(direct, name), getattr(unpacked, name))
    # merge_stats adds null_sums by bin key, as it adds the estimator's sums
    acc = BinAccumulator(k=2, n_bins=4)
    P = np.c_[z, 1 - z.sum(axis=1)]
    y = (rng.uniform(size=400)[:, None] > np.cumsum(P, axis=1)).sum(axis=1)
    a = BinAccumulator(k=2, n_bins=4).update(y=y[:200], probs=P[:200]).bin_stats
    b = BinAccumulator(k=2, n_bins=4).update(y=y[200:], probs=P[200:]).bin_stats
    both = acc.update(y=y, probs=P).bin_stats
    merged = merge_stats([b, a])
    np.testing.assert_array_equal(merged.keys, both.keys)
    np.testing.assert_allclose(merged.null_sums, both.null_sums, rtol=1e-13, atol=1e-16)
    with pytest.raises(ValueError, match="columns are not the conditional sums"):
        conditional_sums_from_columns(np.ones(2), np.zeros((2, 5)))


# --------------------------------------------------------------------------- the rules
def test_monte_carlo_fallback_is_refused_by_the_same_rule(tmp_path):
    """Predictions near 1 with about one expected error: the rows use the Monte Carlo test; a stream cannot.

    null='conditional' refuses; the default null='auto' uses the paper's asymptotic test and says why."""
    rng = np.random.default_rng(11)
    n = 2000
    p = 0.9995 + 0.0004 * rng.uniform(size=n)
    df = pd.DataFrame({"y": (rng.uniform(size=n) < p).astype(int), "p": p})
    ref = ct.calib_ci("y ~ p", data=df, n_bins=4, rng=1)
    assert ref.null == "conditional" and ref.null_method == "monte carlo" and ref.conditional.skewness > 3
    path = tmp_path / "near_one.parquet"
    df.to_parquet(path)
    with pytest.raises(ValueError, match=r"conditional skewness of T is \d[\d.]* \(above 3.*null='asymptotic'"):
        ct.calib_ci("y ~ p", data=path, n_bins=4, null="conditional")
    asymptotic = ct.calib_ci("y ~ p", data=df, n_bins=4, null="asymptotic")
    streamed = ct.calib_ci("y ~ p", data=path, n_bins=4)
    assert streamed.null == "asymptotic"
    assert_same_result(streamed, asymptotic)
    assert any("these rows were streamed" in note for note in streamed.notes())
    acc = BinAccumulator("y ~ p", n_bins=4).update(df)
    with pytest.raises(ValueError, match="streamed data do not keep"):
        acc.result(null="conditional")
    res = acc.result(null="asymptotic")
    assert_same_result(res, asymptotic)
    assert_same_result(acc.result(), asymptotic)
    assert_same_conditional(res.conditional, ref.conditional)  # the moments are recorded all the same


def test_more_than_four_coordinates_keep_the_in_memory_rule(tmp_path):
    rng = np.random.default_rng(2)
    n, K = 1500, 6
    P = rng.dirichlet(np.ones(K), size=n)
    names = [f"c{j}" for j in range(K)]
    df = pd.DataFrame(P, columns=names)
    df["label"] = (rng.uniform(size=n)[:, None] > np.cumsum(P, axis=1)).sum(axis=1)
    formula = "label ~ " + " + ".join(names)
    path = tmp_path / "top5.parquet"
    df.to_parquet(path)
    ref = ct.calib_ci(formula, data=df, k=5, n_bins=2)
    res = ct.calib_ci(formula, data=path, k=5, n_bins=2)
    assert ref.null == res.null == "asymptotic" and ref.conditional is None and res.conditional is None
    assert res.bin_stats.null_sums is None  # nothing accumulated that the null does not use
    assert_same_result(res, ref)
    ref_c = ct.calib_ci(formula, data=df, k=5, n_bins=2, null="conditional")
    res_c = ct.calib_ci(formula, data=path, k=5, n_bins=2, null="conditional", chunksize=400)
    assert res_c.null == "conditional" and res_c.null_method == ref_c.null_method == "shifted gamma"
    assert_same_result(res_c, ref_c)
    with pytest.raises(ValueError, match="lack"):
        BinAccumulator(formula, k=5, n_bins=2).update(df).result(null="conditional")


def test_monte_carlo_null_is_refused_before_reading():
    with pytest.raises(ValueError, match="needs the rows in memory"):
        BinAccumulator("y ~ p", n_bins=4, null="monte-carlo")
    with pytest.raises(ValueError, match="null must be one of"):
        BinAccumulator("y ~ p", n_bins=4, null="exact")
    acc = BinAccumulator("y ~ p", n_bins=4).update(pd.DataFrame({"y": [0, 1, 1, 0], "p": [.2, .3, .6, .7]}))
    with pytest.raises(ValueError, match="needs the rows in memory"):
        acc.result(null="monte-carlo")
    with pytest.raises(ValueError, match="different settings"):
        acc.merge(BinAccumulator("y ~ p", n_bins=4, null="asymptotic"))
