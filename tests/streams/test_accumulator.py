"""BinAccumulator and merge_stats: chunked and merged sums give the in-memory answer."""
from __future__ import annotations

import pickle
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import calibtest as ct
from calibtest.core.binstats import BinStats, merge_stats
from calibtest.streams.accumulator import BinAccumulator
from scale_helpers import assert_same_result


# ---------------------------------------------------------------- data
def make_frame(kind: str, n: int, seed: int, n_classes: int = 4) -> tuple[pd.DataFrame, str, dict]:
    """A small data set of each calibration target, with its formula and options."""
    rng = np.random.default_rng(seed)
    if kind == "binary":
        p = rng.uniform(0, 1, n)
        p[rng.uniform(size=n) < 0.05] = 1.0  # rows exactly at 1 get the cube of their own
        y = (rng.uniform(size=n) < p ** 1.3).astype(int)
        return pd.DataFrame({"y": y, "p": p}), "y ~ p", {}
    if kind == "top1":
        conf = rng.uniform(1 / n_classes, 1, n)
        correct = (rng.uniform(size=n) < conf).astype(int)
        return pd.DataFrame({"correct": correct, "conf": conf}), "correct ~ conf", {"n_classes": n_classes}
    logits = rng.normal(size=(n, n_classes)) * 2
    P = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = np.array([rng.choice(n_classes, p=row) for row in P])
    names = [f"c{j}" for j in range(n_classes)]
    df = pd.DataFrame(P, columns=names)
    df["label"] = np.array(names)[labels]  # string labels equal to the column names
    return df, "label ~ " + " + ".join(names), {"k": 2 if kind == "topk" else "full"}


def cut_points(draw_sizes, n: int) -> list[int]:
    """Chunk boundaries from a list of chunk sizes (0-row chunks included)."""
    bounds, at = [0], 0
    for size in draw_sizes:
        at = min(n, at + size)
        bounds.append(at)
    bounds.append(n)
    return bounds


# ---------------------------------------------------------------- the property
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["binary", "top1", "topk", "full"]),
       n=st.integers(2, 250),
       seed=st.integers(0, 2**32 - 1),
       n_bins=st.integers(1, 25),
       sizes=st.lists(st.integers(0, 60), max_size=12),
       n_workers=st.integers(1, 4),
       data=st.data())
def test_any_chunking_and_merge_order_gives_the_in_memory_result(kind, n, seed, n_bins, sizes, n_workers, data):
    """The default null too: the conditional null's moments from merged sums are those of the rows, and where
    the rows fall back to the Monte Carlo test (skewness above 3) the stream's default is the asymptotic null
    (null='conditional' refuses), by the same rule."""
    df, formula, opts = make_frame(kind, n, seed)
    ref = ct.calib_ci(formula, data=df, n_bins=n_bins, **opts, rng=0)
    bounds = cut_points(sizes, n)
    chunks = [df.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    # deal the chunks to workers at random, then merge the workers in a random order
    owner = data.draw(st.lists(st.integers(0, n_workers - 1), min_size=len(chunks), max_size=len(chunks)))
    accs = [BinAccumulator(formula, n_bins=n_bins, **opts) for _ in range(n_workers)]
    for chunk, w in zip(chunks, owner):
        accs[w].update(chunk)
    order = data.draw(st.permutations(range(n_workers)))
    total = accs[order[0]]
    for w in order[1:]:
        total = total.merge(accs[w])
    if ref.null_method == "monte carlo":  # the rows' exact test needs label draws, which the sums cannot give
        with pytest.raises(ValueError, match="conditional skewness of T is .* streamed data do not keep"):
            total.result(null="conditional")
        ref = ct.calib_ci(formula, data=df, n_bins=n_bins, **opts, null="asymptotic")
        assert_same_result(total.result(null="asymptotic"), ref)
        assert_same_result(total.result(), ref)
        return
    assert_same_result(total.result(), ref)
    assert total.result().data is None
    assert_same_result(total.result(null="asymptotic"), ct.calib_ci(formula, data=df, n_bins=n_bins, **opts,
                                                                    null="asymptotic"))


@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 200), seed=st.integers(0, 2**32 - 1), sizes=st.lists(st.integers(0, 50), max_size=10))
def test_array_chunks_with_auto_bins_from_n_rows(n, seed, sizes):
    df, _, _ = make_frame("top1", n, seed)
    ref = ct.calib_ci(y=df["correct"].to_numpy(), probs=df["conf"].to_numpy(), n_classes=4, null="asymptotic")
    acc = BinAccumulator(n_classes=4, n_bins="auto", n_rows=n, null="asymptotic")
    bounds = cut_points(sizes, n)
    for a, b in zip(bounds[:-1], bounds[1:]):
        acc.update(y=df["correct"].to_numpy()[a:b], probs=df["conf"].to_numpy()[a:b])
    res = acc.result()
    assert res.n_bins_rule == "auto"
    assert_same_result(res, ref)


# ---------------------------------------------------------------- independent checks
def test_hand_computed_example_in_one_row_chunks():
    """Binary, B = 2.  Bin [0, 1/2): p = .1, .2, .3, y = 0, 1, 0, so U = -.1, .8, -.3, S = .4,
    Q = .74 and (S^2 - Q)/(c - 1) = (.16 - .74)/2 = -.29.  Bin [1/2, 1): p = .6, .7, y = 1, 1,
    U = .4, .3, S = .7, Q = .25, (.49 - .25)/1 = .24.  T = (-.29 + .24)/5 = -.01."""
    df = pd.DataFrame({"y": [0, 1, 0, 1, 1], "p": [0.1, 0.2, 0.3, 0.6, 0.7]})
    acc = BinAccumulator("y ~ p", n_bins=2)
    for i in range(5):
        acc.update(df.iloc[i:i + 1])
    res = acc.result()
    assert res.estimate == pytest.approx(-0.01, abs=1e-15)
    assert res.plugin_estimate == pytest.approx((0.4**2 / 3 + 0.7**2 / 2) / 5, abs=1e-15)
    assert res.n == 5 and res.n_occupied_bins == 2
    np.testing.assert_allclose(res.bin_stats.count, [3, 2])


def slow_bin_sums(z: np.ndarray, u: np.ndarray, B: int) -> dict:
    """Per-bin sums by a Python loop over rows (the obviously correct version)."""
    out = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for zi, ui in zip(z, u):
        key = int(np.floor(zi * B))
        acc = out[key]
        acc[0] += 1
        acc[1] += ui
        acc[2] += ui * ui
        acc[3] += zi
    return out


def test_merge_stats_matches_a_row_loop():
    rng = np.random.default_rng(7)
    z = rng.uniform(0, 1, 500)
    z[:10] = 1.0
    u = (rng.uniform(size=500) < z).astype(float) - z
    B = 13
    parts = []
    for a, b in [(0, 3), (3, 200), (200, 201), (201, 500)]:
        acc = BinAccumulator(n_bins=B).update(y=u[a:b] + z[a:b], probs=z[a:b])
        parts.append(acc.bin_stats)
    merged = merge_stats(parts)
    slow = slow_bin_sums(z, u, B)
    assert sorted(slow) == merged.keys[:, 0].tolist()
    for row, key in enumerate(merged.keys[:, 0]):
        c, s, q, sz = slow[int(key)]
        assert merged.count[row] == c
        assert merged.sum_u[row, 0] == pytest.approx(s, abs=1e-12)
        assert merged.sum_uu[row, 0, 0] == pytest.approx(q, abs=1e-12)
        assert merged.sum_z[row, 0] == pytest.approx(sz, abs=1e-12)
    # pairwise BinStats.merge agrees with the one-pass merge
    pairwise = parts[0].merge(parts[1]).merge(parts[2]).merge(parts[3])
    np.testing.assert_array_equal(pairwise.keys, merged.keys)
    np.testing.assert_allclose(pairwise.sum_uu, merged.sum_uu, rtol=1e-14)


def test_merge_stats_two_dimensional_keys_match_a_dict():
    rng = np.random.default_rng(3)
    keys = [rng.integers(0, 6, size=(m, 2)) for m in (5, 0, 17, 9)]
    parts = [BinStats(np.unique(k, axis=0), np.ones(len(np.unique(k, axis=0))),
                      np.ones((len(np.unique(k, axis=0)), 2)), np.ones((len(np.unique(k, axis=0)), 2, 2)),
                      np.zeros((len(np.unique(k, axis=0)), 2))) for k in keys]
    merged = merge_stats(parts)
    expected = defaultdict(float)
    for p in parts:
        for key in map(tuple, p.keys):
            expected[key] += 1.0
    assert {tuple(k): c for k, c in zip(merged.keys.tolist(), merged.count)} == dict(expected)
    # keys in the order of the linear key (last column most significant), as cube_bin_stats gives
    linear = merged.keys[:, 0] + 6 * merged.keys[:, 1]
    assert np.all(np.diff(linear) > 0)


def test_merge_stats_rejects_mixed_dimensions():
    a = BinStats(np.zeros((1, 1), int), np.ones(1), np.zeros((1, 1)), np.zeros((1, 1, 1)), np.zeros((1, 1)))
    b = BinStats(np.zeros((1, 2), int), np.ones(1), np.zeros((1, 2)), np.zeros((1, 2, 2)), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="different dimensions"):
        merge_stats([a, b])
    with pytest.raises(ValueError, match="at least one"):
        merge_stats([])


# ---------------------------------------------------------------- behaviour
def test_missing_drop_counts_across_chunks():
    df, formula, opts = make_frame("top1", 300, 11)
    df.loc[[3, 150, 151, 299], "conf"] = np.nan
    df.loc[[10], "correct"] = np.nan
    ref = ct.calib_ci(formula, data=df, n_bins=9, missing="drop", **opts)
    acc = BinAccumulator(formula, n_bins=9, missing="drop", **opts)
    for a in range(0, 300, 149):
        acc.update(df.iloc[a:a + 149])
    res = acc.result()
    assert res.n_dropped == ref.n_dropped == 5
    assert acc.n_seen == 300 and acc.n == 295
    assert_same_result(res, ref)
    with pytest.raises(ValueError, match="missing values"):
        BinAccumulator(formula, n_bins=9, **opts).update(df)


def test_auto_needs_n_rows_and_checks_it():
    with pytest.raises(ValueError, match="n_rows"):
        BinAccumulator("y ~ p", n_bins="auto")
    with pytest.raises(TypeError, match="n_bins is required"):
        BinAccumulator("y ~ p")
    df, formula, _ = make_frame("binary", 100, 1)
    acc = BinAccumulator(formula, n_bins="auto", n_rows=101).update(df)
    assert acc.n_bins == ct.auto_n_bins(101, 1)
    with pytest.raises(ValueError, match="n_rows=101"):
        acc.result()
    # B is resolved with the dimension d of the target when the first rows arrive
    matrix, formula_k, _ = make_frame("topk", 10, 1)
    acc_k = BinAccumulator(formula_k, k=2, n_bins="auto", n_rows=1000)
    assert acc_k.n_bins is None
    assert acc_k.update(matrix).n_bins == ct.auto_n_bins(1000, 2)
    acc_full = BinAccumulator(formula_k, k="full", n_bins="auto", n_rows=1000).update(matrix)
    assert acc_full.n_bins == ct.auto_n_bins(1000, 3)  # d = K - 1 on the simplex


def test_settings_must_match_to_merge():
    a = BinAccumulator("y ~ p", n_bins=10)
    with pytest.raises(ValueError, match="different settings"):
        a.merge(BinAccumulator("y ~ p", n_bins=11))
    with pytest.raises(TypeError, match="BinAccumulator"):
        a.merge(object())
    df, _, _ = make_frame("binary", 50, 2)
    b = BinAccumulator("y ~ p", n_bins=10).update(df)
    merged = a.merge(b)  # an empty accumulator is the identity
    assert merged.n == 50 and a.n == 0 and b.n == 50
    one_column = BinAccumulator(n_bins=10).update(y=df.y, probs=df.p)
    matrix = BinAccumulator(n_bins=10).update(y=df.y, probs=np.column_stack([1 - df.p, df.p]))
    with pytest.raises(ValueError, match="different calibration target"):
        one_column.merge(matrix)


def test_update_input_errors_and_small_totals():
    acc = BinAccumulator("y ~ p", n_bins=4)
    with pytest.raises(ValueError, match="not y=/probs="):
        acc.update(y=[0], probs=[0.5])
    with pytest.raises(ValueError, match="needs a chunk"):
        acc.update()
    with pytest.raises(ValueError, match="no formula"):
        BinAccumulator(n_bins=4).update(pd.DataFrame({"y": [1]}))
    acc.update(pd.DataFrame({"y": [1], "p": [0.9]}))
    with pytest.raises(ValueError, match="at least n = 2"):
        acc.result()
    with pytest.raises(ValueError, match="must lie in"):
        acc.update(pd.DataFrame({"y": [1], "p": [1.5]}))
    with pytest.raises(ValueError, match="missing must be"):
        BinAccumulator("y ~ p", n_bins=4, missing="ignore")


def test_pickle_ships_formula_variables_only():
    divisor = 100.0
    big_unrelated = np.zeros(10**6)  # noqa: F841 - must not travel with the accumulator
    df = pd.DataFrame({"y": [0, 1, 1, 0, 1], "pct": [10.0, 80.0, 90.0, 30.0, 60.0]})
    acc = BinAccumulator("y ~ I(pct / divisor)", n_bins=3)
    blob = pickle.dumps(acc)
    assert len(blob) < 10_000
    clone = pickle.loads(blob)
    clone.update(df)
    ref = ct.calib_ci("y ~ I(pct / divisor)", data=df, n_bins=3)
    assert_same_result(clone.result(), ref)


def test_result_from_sums_has_no_rows():
    df, formula, _ = make_frame("binary", 200, 5)
    res = BinAccumulator(formula, n_bins=5).update(df).result(alpha=0.1)
    assert res.alpha == 0.1 and res.data is None
    assert res.call.startswith("BinAccumulator('y ~ p'")
    with pytest.raises(ValueError, match="bin sums only"):
        res.hosmer_lemeshow()
    assert "ECE" in str(res.summary())
