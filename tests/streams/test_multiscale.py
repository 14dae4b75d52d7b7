"""The counter-based label draws and their additive per-draw sums (issue 27, points 2 and 5).

The draws are keyed by (seed, global row position, draw), so chunking never changes them; the per-draw
bin sums are additive, so chunks, merged accumulators and one pass give the same T* (to rounding).
"""
import numpy as np
import pytest

from calibtest.core.conditional import counter_key
from calibtest.core.counter_draws import DrawSums, counter_labels

MASK = (1 << 64) - 1


def _splitmix_py(x: int) -> int:  # the reference hash in Python integers
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & MASK
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def _byte_slow(key, row: int, draw: int) -> int:
    """One random byte from its own generator: byte draw % 8 (little-endian) of output ``row`` of the
    PCG64DXSM stream of block draw // 8."""
    seq = np.random.SeedSequence(entropy=[int(key[0]), int(key[1])], spawn_key=(draw // 8,))
    gen = np.random.PCG64DXSM(seq)
    gen.advance(row)
    return (int(gen.random_raw()) >> (8 * (draw % 8))) & 0xFF


def _label_slow(key, p: float, row: int, draw: int) -> bool:
    """One label from its own generator call and the hash computed in Python integers (no vectorisation)."""
    byte = _byte_slow(key, row, draw)
    t = min(int(np.floor(p * 256.0)), 255)
    frac = 1.0 if p * 256.0 >= 256.0 else p * 256.0 - t
    if byte != t:
        return byte < t
    x = _splitmix_py(int(key[2]) ^ ((row * 0x9E3779B97F4A7C15) & MASK))
    x = _splitmix_py(x ^ ((int(key[3]) + draw * 0xD1B54A32D192ED03) & MASK))
    return (x >> 11) * 2.0 ** -53 < frac


def _setup(n=3000, seed=0):
    g = np.random.default_rng(seed)
    p = g.beta(2, 5, n)
    y = g.random(n) < p
    grid = [2, 4, 8, 16]
    return p, y, grid, [np.minimum((p * b).astype(np.intp), b - 1) for b in grid]


def _run(p, y, grid, invs, key, R, chunk, block=64):
    acc = DrawSums(key, grid, R, block=block)
    for s in range(0, p.size, chunk):
        acc.add(s, p[s:s + chunk], [i[s:s + chunk] for i in invs], y[s:s + chunk])
    return acc.statistics()


def test_labels_match_a_slow_per_row_implementation():
    key, seed = counter_key(11)
    assert seed == 11
    g = np.random.default_rng(1)
    p = np.r_[g.random(40), 0.0, 1.0, 0.5, 3 / 256]  # p = 1, p = 0 and an exact tie boundary included
    start = 1000  # global position of the first row
    fast = counter_labels(key, p, start, 32, 70)  # draws 32..101
    rows = g.choice(p.size, 25)
    draws = g.choice(70, 25)
    for a, r in zip(rows, draws):  # a few rows and draws, one at a time (the reference is slow)
        assert fast[r, a] == _label_slow(key, float(p[a]), start + int(a), 32 + int(r))
    half = np.full(2000, 0.5)  # t = 128: about 1 in 256 bytes ties, each settled by the hash
    tied = [(a, r) for a in range(64) for r in range(40) if _byte_slow(key, a, r) == 128]
    assert tied  # 2560 bytes: about 10 ties
    got = counter_labels(key, half, 0, 0, 40)
    for a, r in tied:
        assert got[r, a] == _label_slow(key, 0.5, a, r)


def test_labels_do_not_depend_on_the_chunk():
    key, _ = counter_key(5)
    p = np.random.default_rng(2).random(500)
    whole = counter_labels(key, p, 0, 0, 96)
    parts = np.concatenate([counter_labels(key, p[s:s + 77], s, 0, 96) for s in range(0, 500, 77)], axis=1)
    np.testing.assert_array_equal(whole, parts)


def test_labels_are_bernoulli_p():
    key, _ = counter_key(9)
    p = np.array([0.001, 0.2, 0.5, 0.9, 0.999])
    y = counter_labels(key, np.repeat(p, 2000), 0, 0, 64).T.reshape(p.size, -1)
    freq = y.mean(axis=1)
    se = np.sqrt(p * (1 - p) / y.shape[1])
    assert np.all(np.abs(freq - p) < 5 * se + 1e-12)


def test_sums_do_not_depend_on_the_chunking():
    p, y, grid, invs = _setup()
    key, _ = counter_key(3)
    ref = _run(p, y, grid, invs, key, 99, p.size)
    for chunk, block in ((1000, 32), (777, 10), (64, 128)):  # several chunk sizes and draw blocks
        out = _run(p, y, grid, invs, key, 99, chunk, block)
        for a, b in zip(ref, out):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
        for i in range(len(grid)):  # the p-value of each scale, exactly
            assert np.count_nonzero(ref[1][i] >= ref[0][i]) == np.count_nonzero(out[1][i] >= out[0][i])


def test_merged_accumulators_equal_one_pass():
    p, y, grid, invs = _setup(1200)
    key, _ = counter_key(4)
    one = _run(p, y, grid, invs, key, 40, p.size)
    a = DrawSums(key, grid, 40).add(0, p[:500], [i[:500] for i in invs], y[:500])
    b = DrawSums(key, grid, 40).add(500, p[500:], [i[500:] for i in invs], y[500:])
    for u, v in zip(one, a.merge(b).statistics()):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-15)


def test_observed_statistic_is_the_debiased_estimate():
    p, y, grid, invs = _setup(800)
    key, _ = counter_key(0)
    t_obs, _, wq, _ = _run(p, y, grid, invs, key, 32, 300)
    for i, b in enumerate(grid):  # T = (1/n) sum_b [(sum (y - p))^2 - sum (y - p)^2] / (c_b - 1), by hand
        T = 0.0
        for k in range(b):
            r = (y - p)[invs[i] == k]
            if r.size >= 2:
                T += (r.sum() ** 2 - (r * r).sum()) / (r.size - 1)
        assert t_obs[i] == pytest.approx(T / p.size, rel=1e-10, abs=1e-15)
    assert wq == pytest.approx(float(np.sum(y * (1 - 2 * p))), rel=1e-12)


def test_draws_of_t_have_the_null_mean():
    """E[T* | p] = 0 under the draws: the mean of R draws is within 5 of its Monte Carlo standard errors."""
    p, y, grid, invs = _setup(400, seed=3)
    key, _ = counter_key(8)
    _, draws, _, wq = _run(p, y, grid, invs, key, 2000, 400)
    se = draws.std(axis=1) / np.sqrt(draws.shape[1])
    assert np.all(np.abs(draws.mean(axis=1)) < 5 * se)
    q = 1 - 2 * p
    assert abs(wq.mean() - np.sum(p * q)) < 5 * wq.std() / np.sqrt(wq.size)


def test_size_smoke_calibrated_beta():
    """Size of the single-scale Monte Carlo test from the streamed sums on calibrated Beta(2, 5) data.

    200 data sets (n = 150, B = 4, R = 39): the rejection rate at alpha = 0.05 has MC standard error
    sqrt(0.05 * 0.95 / 200) = 0.015; the test is exact, so it must lie within 0.05 +- 4 SE.
    """
    g = np.random.default_rng(2027)
    rej = 0
    for rep in range(200):  # a few hundred small data sets
        p = g.beta(2, 5, 150)
        y = g.random(150) < p
        inv = np.minimum((p * 4).astype(np.intp), 3)
        key, _ = counter_key(rep)
        t_obs, draws, _, _ = DrawSums(key, [4], 39).add(0, p, [inv], y).statistics()
        tol = 100 * np.finfo(float).eps * abs(t_obs[0])
        rej += (1 + np.count_nonzero(draws[0] >= t_obs[0] - tol)) / 40 <= 0.05
    assert abs(rej / 200 - 0.05) < 4 * np.sqrt(0.05 * 0.95 / 200)


# --------------------------------------------------------------------------- the streamed front doors
import pandas as pd  # noqa: E402

import calibtest as ct  # noqa: E402
from calibtest.streams.multiscale import CalibTestAccumulator  # noqa: E402
from calibtest.options import OptionError  # noqa: E402


@pytest.fixture(scope="module")
def frame():
    g = np.random.default_rng(27)
    p = g.beta(2, 5, 6000)
    return pd.DataFrame({"y": (g.random(6000) < p ** 1.05).astype(int), "p": p})


def _same(a, b):
    assert a.pvalue == b.pvalue and a.pvalue_bonferroni == b.pvalue_bonferroni
    assert a.statistic == pytest.approx(b.statistic, rel=1e-12)
    np.testing.assert_allclose(a.scales["T"], b.scales["T"], rtol=1e-11, atol=1e-17)
    np.testing.assert_allclose(a.scales["sd"], b.scales["sd"], rtol=1e-12)
    np.testing.assert_allclose(a.null_draws, b.null_draws, rtol=1e-9, atol=1e-9)


def test_file_dask_and_chunks_give_the_same_test(frame, tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    pytest.importorskip("pyarrow")
    frame.to_parquet(tmp_path / "d.parquet")
    frame.to_csv(tmp_path / "d.csv", index=False)
    ref = ct.calib_test("y ~ p", data=str(tmp_path / "d.parquet"), rng=5, n_draws=99)
    assert ref.n == 6000 and ref.n_bins[-1] == ct.calib_test("y ~ p", data=frame, rng=5, n_draws=99).n_bins[-1]
    _same(ref, ct.calib_test("y ~ p", data=tmp_path / "d.csv", rng=5, n_draws=99))
    for parts in (1, 3, 8):  # Dask partitionings
        _same(ref, ct.calib_test("y ~ p", data=dd.from_pandas(frame, npartitions=parts), rng=5, n_draws=99))
    for chunk in (6000, 1001, 250):  # chunk sizes of the accumulator
        acc = CalibTestAccumulator("y ~ p", n_bins=ref.n_bins, rng=5, n_draws=99)
        for s in range(0, 6000, chunk):
            acc.update(frame.iloc[s:s + chunk])
        _same(ref, acc.result())


def test_streamed_statistic_equals_the_rows_in_memory(frame):
    """T, sd(T | Z) and z_S of the stream are those of the rows in memory (their draws differ: another stream)."""
    mem = ct.calib_test("y ~ p", data=frame, rng=5, n_draws=99)
    acc = CalibTestAccumulator("y ~ p", n_bins="adaptive", n_rows=len(frame), rng=5, n_draws=99).update(frame)
    res = acc.result()
    assert res.n_bins == mem.n_bins
    np.testing.assert_allclose(res.scales["T"], mem.scales["T"], rtol=1e-11)
    np.testing.assert_allclose(res.scales["sd"], mem.scales["sd"], rtol=1e-12)
    assert res.spiegelhalter_z == pytest.approx(mem.spiegelhalter_z, rel=1e-12)


def test_streams_refuse_what_they_cannot_do(frame, tmp_path):
    frame.to_csv(tmp_path / "d.csv", index=False)
    # equal-mass scales and by= stream (tests/streams/test_multiscale_quantiles.py, test_calib_test_by_streamed.py),
    # not together, and by= names columns
    with pytest.raises(OptionError, match="partitions='equal-mass'"):
        ct.calib_test("y ~ p", data=str(tmp_path / "d.csv"), partitions="equal-mass", by="y")
    with pytest.raises(OptionError, match="by="):
        ct.calib_test("y ~ p", data=str(tmp_path / "d.csv"), by=frame["y"].to_numpy())
    with pytest.raises(TypeError, match="rng"):
        ct.calib_test("y ~ p", data=str(tmp_path / "d.csv"), rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_rows"):
        CalibTestAccumulator(n_bins="adaptive")
    acc = CalibTestAccumulator(n_bins=4, rng=1, k="full")
    probs = np.full((10, 3), 1 / 3)
    with pytest.raises(ValueError, match="binary and top-1"):
        acc.update(y=np.arange(10) % 3, probs=probs)
    with pytest.raises(ValueError, match="follow"):
        CalibTestAccumulator(n_bins=4, rng=1).merge(CalibTestAccumulator(n_bins=4, rng=1, start=5))


def test_observed_labels_equal_to_a_draw_give_its_statistic_exactly():
    """The observed sums use the draws' arithmetic: labels equal to draw 0's give T*_0 bit for bit (the
    Monte Carlo p-value counts such a tie, as exchangeability needs, even where T is all rounding)."""
    p, _, grid, invs = _setup(2000, seed=5)
    key, _ = counter_key(12)
    y0 = counter_labels(key, p, 0, 0, 1)[0]
    t_obs, draws, wq, wq_draws = _run(p, y0, grid, invs, key, 5, 700)
    np.testing.assert_array_equal(t_obs, draws[:, 0])
    assert wq == wq_draws[0]


@pytest.mark.parametrize("design", ["binary Beta(2, 5)", "top-1 Beta(20, 1)"])
@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_size_smoke_multiscale_on_the_new_stream(design):
    """calib_test (adaptive grid + Spiegelhalter, R = 99) on 300 calibrated data sets of n = 200.

    The test is exact: P(p <= 0.05) = floor(0.05 * 100) / 100 = 0.05.  300 data sets give a Monte Carlo
    standard error sqrt(0.05 * 0.95 / 300) = 0.0126; the rate must lie within 0.05 +- 3.5 s.e.
    """
    g = np.random.default_rng(2700 if design.startswith("binary") else 2701)
    N, rej = 300, 0
    for _ in range(N):  # a few hundred small data sets
        if design.startswith("binary"):
            p = g.beta(2, 5, 200)
            kw = {"y": (g.random(200) < p).astype(int), "probs": p}
        else:  # top-1 confidences near 1 of a 10-class model, correct with probability the confidence
            conf = 0.1 + 0.9 * g.beta(20, 1, 200)
            kw = {"y": (g.random(200) < conf).astype(int), "probs": conf, "n_classes": 10}
        rej += ct.calib_test(**kw, n_draws=99, rng=int(g.integers(2**31))).reject
    assert abs(rej / N - 0.05) <= 3.5 * np.sqrt(0.05 * 0.95 / N)


# --------------------------------------------------------------------------- the vectorised engine's paths
def _brute_sums(key, p, invs, sizes, R, y):
    """N and W per (bin, draw) from the labels of counter_labels, bin by bin (the obviously correct way)."""
    labels = counter_labels(key, p, 0, 0, R)  # (R, n)
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    N = np.zeros((offsets[-1], R), dtype=np.int64)
    W = np.zeros((offsets[-1], R))
    q = 1 - 2 * p
    for inv, off, size in zip(invs, offsets, sizes):  # a loop over the few partitions and bins: a reference
        for b in range(size):
            rows = inv == b
            N[off + b] = labels[:, rows].sum(axis=1)
            W[off + b] = labels[:, rows].astype(float) @ q[rows]
    obs_N = np.concatenate([np.bincount(inv, weights=y, minlength=s) for inv, s in zip(invs, sizes)])
    return N, W, obs_N


@pytest.mark.parametrize("threads, grid", [(1, [1, 2, 3]), (2, [2, 5, 16])])
def test_engine_boundaries_against_a_bin_by_bin_reference(monkeypatch, threads, grid):
    """Chunks, groups of chunks, blocks of draws, parts of chunks and segments of more than 255 rows, made
    small: the per-draw sums equal the bin-by-bin reference (counts exactly, float sums to rounding),
    whatever the number of threads."""
    import calibtest.core.counter_draws as cond
    monkeypatch.setattr(cond, "_THREAD_MIN_LABELS", 0)  # threads even for this small a group
    monkeypatch.setattr(cond, "DRAW_ROWS", 700)  # chunks of 700 rows, groups of 3 chunks (the last partial)
    monkeypatch.setattr(cond, "DRAW_GROUP_ROWS", 2100)
    monkeypatch.setattr(cond, "_W_ROWS", 50)  # parts of whole segments: some segments are longer than a part
    g = np.random.default_rng(31)
    p = np.r_[g.beta(2, 5, 4990), 0.0, 1.0, 0.5, 3 / 256, 1 - 1 / 1024, 0.25, 0.75, 0.1, 0.2, 0.3]
    y = g.random(p.size) < p
    invs = [np.minimum((p * b).astype(np.intp), b - 1) for b in grid]
    offsets = np.cumsum([0, *grid])
    plan = cond._ChunkPlan(0, p[:700], [inv[:700] + off for inv, off in zip(invs, offsets)], offsets[-1],
                           counter_key(0)[0], 0)
    assert (plan.first_piece is not None) == (grid[0] == 1)  # segments of more than 255 rows: uint8 pieces
    assert len(plan.parts) > 1 and plan.parts[-1][1] == 700  # parts of whole segments cover the chunk
    key, _ = counter_key(19)
    R = 37  # blocks of 8 draws: 4 full and a partial one; the cells go to the bins every 2 blocks
    acc = DrawSums(key, grid, R, block=16, threads=threads).add(0, p, invs, y)
    N, W, obs_N = _brute_sums(key, p, invs, grid, R, y)
    np.testing.assert_array_equal(acc.N, N)
    np.testing.assert_allclose(acc.W, W, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(acc.obs_N, obs_N)
    assert acc.n == p.size and acc.count.sum() == len(grid) * p.size


def test_engine_threads_do_not_change_a_bit_and_groups_only_round(monkeypatch):
    """Threads split the blocks of draws: the sums are bit-identical for any number of threads.  Groups
    batch the random words and the cells: the counts are identical and the float sums equal to rounding."""
    import calibtest.core.counter_draws as cond
    p, y, grid, invs = _setup(3000, seed=9)
    key, _ = counter_key(23)
    monkeypatch.setattr(cond, "DRAW_ROWS", 400)
    monkeypatch.setattr(cond, "_THREAD_MIN_LABELS", 0)
    ref = DrawSums(key, grid, 45, threads=1).add(0, p, invs, y)  # one group of 8 chunks
    for threads in (2, 3):
        other = DrawSums(key, grid, 45, threads=threads).add(0, p, invs, y)
        for name in ("N", "W", "obs_N", "obs_W", "count", "psum", "p2sum"):
            np.testing.assert_array_equal(getattr(other, name), getattr(ref, name))
    monkeypatch.setattr(cond, "DRAW_GROUP_ROWS", 1000)  # groups of 2 chunks: the chunks stay the same
    for threads in (1, 2):
        other = DrawSums(key, grid, 45, threads=threads).add(0, p, invs, y)
        for name in ("N", "obs_N", "count"):
            np.testing.assert_array_equal(getattr(other, name), getattr(ref, name))
        for name in ("W", "obs_W", "psum", "p2sum"):
            np.testing.assert_allclose(getattr(other, name), getattr(ref, name), rtol=1e-13, atol=1e-12)


def test_segments_of_bins_not_numbered_from_the_left():
    """A partition numbered right to left takes the ranking path; its sums are those of the same bins
    numbered left to right."""
    p, y, grid, invs = _setup(2500, seed=4)
    key, _ = counter_key(6)
    flipped = [invs[0], grid[1] - 1 - invs[1], invs[2], grid[3] - 1 - invs[3]]
    a = DrawSums(key, grid, 30).add(0, p, invs, y)
    b = DrawSums(key, grid, 30).add(0, p, flipped, y)
    offsets = a.offsets
    for i in (1, 3):  # the flipped partitions: reverse their bins back
        sl = slice(offsets[i], offsets[i + 1])
        for name in ("N", "W", "obs_N", "obs_W", "count", "psum", "p2sum"):
            getattr(b, name)[sl] = getattr(b, name)[sl][::-1].copy()
    np.testing.assert_array_equal(a.N, b.N)
    np.testing.assert_allclose(a.W, b.W, rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(a.obs_N, b.obs_N)
    np.testing.assert_allclose(a.statistics()[1], b.statistics()[1], rtol=1e-10, atol=1e-15)


def test_chunks_grow_with_the_bins(monkeypatch):
    """Many bins per chunk row make longer chunks (a power of 2 times DRAW_ROWS): the sums still equal the
    bin-by-bin reference, and one DrawSums fed in pieces of any size gives them too."""
    import calibtest.core.counter_draws as cond
    monkeypatch.setattr(cond, "DRAW_ROWS", 256)
    monkeypatch.setattr(cond, "DRAW_BINS_PER_CHUNK", 16)
    grid = [2, 8, 40]  # 50 bins > 16 per 256 rows: chunks of 1024 rows
    assert cond.draw_chunk_rows(sum(grid)) == 1024 and cond.draw_chunk_rows(16) == 256
    g = np.random.default_rng(44)
    p = g.beta(2, 5, 3000)
    y = g.random(3000) < p
    invs = [np.minimum((p * b).astype(np.intp), b - 1) for b in grid]
    key, _ = counter_key(45)
    acc = DrawSums(key, grid, 21).add(0, p, invs, y)
    assert acc.rows == 1024
    N, W, obs_N = _brute_sums(key, p, invs, grid, 21, y)
    np.testing.assert_array_equal(acc.N, N)
    np.testing.assert_allclose(acc.W, W, rtol=1e-12, atol=1e-12)
    pieces = DrawSums(key, grid, 21)
    for s in range(0, 3000, 700):
        pieces.add(s, p[s:s + 700], [i[s:s + 700] for i in invs], y[s:s + 700])
    np.testing.assert_array_equal(pieces.N, N)
    np.testing.assert_allclose(pieces.W, W, rtol=1e-12, atol=1e-12)
