r"""Counter-based Bernoulli label draws reduced to additive per-draw bin sums.

The conditional Monte Carlo test of a 1-dim prediction p (binary, top-1)
redraws every label R times from Bernoulli(p) and recomputes the debiased
ECE^2 on each of L interval partitions of p.  This module makes those draws
so that rows in memory, the chunks of a file and the partitions of a Dask
frame give the same draws, and reduces each draw to sums that add over rows.

The label stream
----------------
Draws come in blocks of eight: draw r is lane ``r mod 8`` of block
``r // 8``.  Block k is a PCG64DXSM stream [1]_ seeded by
``SeedSequence(entropy=(key_0, key_1), spawn_key=(k,))``; its g-th 64-bit
output holds the eight random bytes of the row at global position g in the
block's eight draws (little-endian: byte j is draw 8k + j), and a stream is
positioned on any row by ``advance(g)``, so a row's byte depends on the key,
its position and the draw only, never on how the rows are split.

Row i's label in draw r is y = 1 iff V < 256 p_i with V = b + v: b is its
byte and, on the tie b = floor(256 p_i) (probability 1/256), v is a uniform
in [0, 1) from a splitmix64 hash of (key_2, key_3, i, r)
(:func:`tie_uniforms`).  Then P(y = 1) = floor(256 p) / 256 +
(256 p - floor(256 p)) / 256 = p to 2^-53.

The per-draw sums
-----------------
For draw r and bin b of partition l the accumulator keeps N_b (successes,
int64) and W_b = sum over the successes of (1 - 2 p) (float64); with the
per-bin count c_b and sums of p and p^2 they give the debiased ECE^2 of
every partition (:meth:`DrawSums.statistics`), since
(y - p)^2 = y (1 - 2p) + p^2 for y in {0, 1}.  The rows of a chunk of
:data:`DRAW_ROWS` rows are sorted once by the common refinement of the
partitions (segments); per block of eight draws and chunk the engine

1. gathers each row's 64-bit word in segment order (one gather for eight
   draws),
2. compares the bytes with floor(256 p) (a byte comparison) and settles the
   ties,
3. counts the successes of each segment eight draws at a time: the label
   bytes of a row are one 64-bit word and a sum of at most 255 such words
   is the eight counts, one per byte, with no carry between bytes,
4. sums 1 - 2p over the successes of each segment by sparse products
   (segments x rows) @ (rows x 8) over parts of whole segments of about
   :data:`_W_ROWS` rows (whose float labels stay in cache), each segment
   and lane by the same arithmetic, row by row,

adds the segment sums to the group's cells (its distinct tuples of bins)
chunk by chunk, and the cells to the bins by one sparse product per run of
blocks.  Every draw's sums, and the observed labels' (put in all eight
lanes), are computed by the same arithmetic on any thread, so labels equal
to a draw's give that draw's T exactly.  The float sums depend on the chunks
of :data:`DRAW_ROWS` rows and the groups of :data:`DRAW_GROUP_ROWS` rows
taken from the first row of each call only through their rounding (about
1e-16 relative); the counts are exact.

References
----------
.. [1] O'Neill, "PCG: A family of simple fast space-efficient statistically
       good algorithms for random number generation", Harvey Mudd College
       HMC-CS-2014-0905 (2014); numpy's ``PCG64DXSM``.
.. [2] Steele, Lea and Flood, "Fast splittable pseudorandom number
       generators", OOPSLA 2014 (the splitmix64 finaliser of the ties).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.sparse import csr_matrix
from calibtest.core.progress import progress_bar

__all__ = ["DRAW_ROWS", "DRAW_THREADS", "DrawSums", "counter_bytes", "counter_draw_sums", "counter_labels",
           "counter_words", "draw_chunk_rows", "tie_uniforms"]

LANES = 8  # draws per 64-bit word of the stream: one word holds one row's bytes for eight draws
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_GOLDEN, _DRAW_MULT = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xD1B54A32D192ED03)

#: Rows per chunk of the draws: the rows of a chunk are sorted by the common refinement of the partitions
#: and each block of eight draws' per-segment sums are computed over them at once.  The float sums are
#: added chunk by chunk, so this constant fixes their rounding.
DRAW_ROWS = 1 << 17

#: Bins (all scales together) per :data:`DRAW_ROWS` rows of a chunk above which the chunk grows (by powers
#: of 2, :func:`draw_chunk_rows`): with many bins the segments get short and the per-segment work (the
#: segment sums and their addition to the cells) outweighs the per-row work.
DRAW_BINS_PER_CHUNK = 8192

#: Rows of a group of chunks: their plans are built together (in parallel), the segment sums of a run of
#: draws are collected per cell of the group, and a group's plans take about 60 bytes per row.
DRAW_GROUP_ROWS = 1 << 20

#: Threads among which :class:`DrawSums` splits the blocks of draws (numpy, scipy's sparse products and
#: the bit generator release the GIL in their loops; every draw's sums are computed by the same
#: arithmetic on any thread).
DRAW_THREADS = max(1, min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else
                         os.cpu_count() or 1))

#: Rows x draws of one :meth:`DrawSums.add` from which a progress bar is shown (about 2 s on two cores).
PROGRESS_MIN_LABELS = 1e9

_THREAD_MIN_LABELS = 1 << 23  # rows x draws of a group below which one thread does the draws

_FLUSH_WORDS = 16  # blocks of eight draws per run: the run's per-cell sums go to the bins by one sparse product

_W_ROWS = 1 << 14  # rows of a part of a chunk whose float labels and product with 1 - 2p stay in cache

_U8_ROWS = 255  # rows of one byte-wise count of successes (a longer segment is counted in pieces)


def draw_chunk_rows(total_bins: int) -> int:
    """Rows per chunk of :class:`DrawSums` for ``total_bins`` bins over all partitions: :data:`DRAW_ROWS`
    (every grid up to n of about 10^7 rows), doubled until the bins are at most
    :data:`DRAW_BINS_PER_CHUNK` per :data:`DRAW_ROWS` rows (2^18 rows for the 12,958 bins of n = 10^8)."""
    rows = DRAW_ROWS
    while total_bins * DRAW_ROWS > DRAW_BINS_PER_CHUNK * rows:
        rows *= 2
    return rows


def counter_draw_sums(key, p: np.ndarray, inverses, n_draws: int, y=None, block: int = LANES * _FLUSH_WORDS,
                      threads: int | None = None) -> "DrawSums":
    """:class:`DrawSums` of rows 0..n-1 in memory (chunks of :func:`draw_chunk_rows` rows)."""
    acc = DrawSums(key, [int(inv.max()) + 1 if inv.size else 0 for inv in inverses], n_draws, block=block,
                   threads=threads)
    return acc.add(0, p, inverses, y)


# ---------------------------------------------------------------------------
# the stream


def _stream(key: np.ndarray, word: int, start: int) -> np.random.PCG64DXSM:
    """The generator of block ``word`` of eight draws, positioned on the row at global position ``start``."""
    seq = np.random.SeedSequence(entropy=[int(key[0]), int(key[1])], spawn_key=(int(word),))
    gen = np.random.PCG64DXSM(seq)
    gen.advance(int(start))
    return gen


def counter_words(key: np.ndarray, start: int, stop: int, word: int) -> np.ndarray:
    """The 64-bit words of rows start..stop-1 (global positions) in block ``word`` of eight draws, uint64.

    Output g of the PCG64DXSM stream seeded by ``SeedSequence(entropy=(key[0], key[1]),
    spawn_key=(word,))``: byte j (little-endian) of a row's word is its random byte in draw 8 word + j.
    """
    return _stream(key, word, start).random_raw(int(stop) - int(start)).astype("<u8", copy=False)


def counter_bytes(key: np.ndarray, start: int, stop: int, draw: int) -> np.ndarray:
    """The random bytes of rows start..stop-1 (global positions) in draw ``draw``, shape (stop - start,), uint8."""
    return counter_words(key, start, stop, draw // LANES).view(np.uint8)[draw % LANES::LANES]


def _splitmix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * _MIX1
    x = x ^ (x >> np.uint64(27))
    x = x * _MIX2
    return x ^ (x >> np.uint64(31))


def tie_uniforms(key: np.ndarray, rows: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Uniforms in [0, 1) (53 bits) keyed by (key, global row, draw): a splitmix64 hash [2]_, vectorised.

    u = (h >> 11) 2^-53 with h = mix(mix(key_2 ^ row G) ^ (key_3 + draw D)), mix splitmix64's finaliser.
    """
    return _draw_uniforms(key, _row_hashes(key, rows), draws)


def _row_hashes(key: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """mix(key_2 ^ row G): the part of the tie hash that depends on the row only."""
    with np.errstate(over="ignore"):
        return _splitmix(key[2] ^ (rows.astype(np.uint64) * _GOLDEN))


def _draw_uniforms(key: np.ndarray, row_hashes: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """The tie uniforms from the rows' :func:`_row_hashes` and the draws."""
    with np.errstate(over="ignore"):
        x = _splitmix(row_hashes ^ (key[3] + draws.astype(np.uint64) * _DRAW_MULT))
    return (x >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def _thresholds(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """t = floor(256 p) (uint8) and the tie fraction 256 p - t; p = 1 is t = 255 with fraction 1."""
    scaled = np.asarray(p, dtype=np.float64) * 256.0
    t = np.floor(scaled)
    frac = scaled - t
    top = t >= 256.0
    t[top], frac[top] = 255.0, 1.0
    return t.astype(np.uint8), frac


def counter_labels(key, p, start: int, draw0: int, n_draws: int) -> np.ndarray:
    """Bernoulli(p) labels of rows start.. (global positions) for draws draw0..draw0+n_draws-1.

    Row i's label in draw r is y = 1 iff V < 256 p_i, V = b + v, with b its byte in draw r
    (:func:`counter_bytes`) and, on the tie b = floor(256 p) (probability 1/256), v the uniform
    :func:`tie_uniforms` of (i, r): P(y = 1) = t / 256 + P(v < 256 p - t) / 256 = p to 2^-53.
    Shape (n_draws, rows), bool (True for y = 1).  The slow, plain statement of the stream that
    :class:`DrawSums` reduces.
    """
    p = np.asarray(p, dtype=np.float64)
    t, frac = _thresholds(p)
    rows = np.arange(start, start + p.size)
    b = np.empty((n_draws, p.size), dtype=np.uint8)
    for k in range(draw0 // LANES, -(-(draw0 + n_draws) // LANES)):  # one generator call per block of draws
        lanes = counter_words(key, start, start + p.size, k).view(np.uint8).reshape(p.size, LANES).T
        lo, hi = max(draw0, LANES * k), min(draw0 + n_draws, LANES * (k + 1))
        b[lo - draw0:hi - draw0] = lanes[lo - LANES * k:hi - LANES * k]
    y = b < t
    tie = np.flatnonzero(b == t)
    if tie.size:
        draw, col = np.divmod(tie, p.size)
        y.flat[tie] = tie_uniforms(key, rows[col], draw + draw0) < frac[col]
    return y


# ---------------------------------------------------------------------------
# the engine


def _segments(ids: list, total: int):
    """Rows sorted by the common refinement of the partitions: (order, segment starts, bins (L, S)).

    The segments are the distinct tuples of bin ids, in lexicographic order, each segment's rows in row
    order (a stable sort).  When every partition's bin id is non-decreasing in one order of the rows (interval
    partitions of 1-dim p numbered from the left, as every caller's), the sum of the ids orders the
    tuples as the lexicographic order does and one stable sort of it (a radix sort for small sums) suffices;
    otherwise the tuples are ranked one partition at a time.
    """
    key = ids[0] if len(ids) == 1 else np.add.reduce(ids)
    small = len(ids) * total < (1 << 15)
    order = np.argsort(key.astype(np.int16) if small else key, kind="stable")
    ranked = [idx[order] for idx in ids]
    if all(not np.any(r[1:] < r[:-1]) for r in ranked):  # a loop over the few partitions
        ks = key[order]
        starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
        return order, starts, np.stack([r[starts] for r in ranked])
    seg_id = ids[0]
    for idx in ids[1:]:  # the refinement, one partition at a time (a loop over the few partitions)
        _, seg_id = np.unique(seg_id * total + idx, return_inverse=True)
        seg_id = seg_id.ravel()
    order = np.argsort(seg_id, kind="stable")
    ss = seg_id[order]
    starts = np.flatnonzero(np.r_[True, ss[1:] != ss[:-1]])
    return order, starts, np.stack([idx[order][starts] for idx in ids])


def _weight_parts(q: np.ndarray, starts: np.ndarray) -> list:
    """The (segments x rows) CSR matrices of q over whole segments of about :data:`_W_ROWS` rows each:
    (first row, end row, first segment, end segment, matrix).  Each segment's sum is the same (row by
    row, in row order) however the segments are split into parts."""
    m, S = q.size, starts.size
    ends = np.r_[starts[1:], m]
    cuts = np.unique(np.r_[np.searchsorted(starts, np.arange(0, m, _W_ROWS)), S])
    parts = []
    for a, b in zip(cuts[:-1], cuts[1:]):  # a loop over the few parts of a chunk
        r0, r1 = int(starts[a]), int(ends[b - 1])
        indptr = np.r_[starts[a:b], r1] - r0
        parts.append((r0, r1, int(a), int(b), csr_matrix((q[r0:r1], np.arange(r1 - r0, dtype=np.int32),
                                                          indptr.astype(np.int32)), shape=(b - a, r1 - r0))))
    return parts


class _ChunkPlan:
    """One chunk of rows sorted by segment: what every block of draws on it reuses.

    * ``local`` and ``order``: the chunk's rows (positions within the chunk and within the group) in
      segment order;
    * ``t8``: floor(256 p) of each sorted row, repeated for the eight lanes; ``frac``: 256 p - floor(256 p);
      ``row_hashes``: the tie hash's row part;
    * ``pieces`` and ``first_piece``: the byte-wise counts' pieces of at most 255 rows;
    * ``parts``: the (segments x rows) CSR matrices of 1 - 2p over parts of whole segments
      (:func:`_weight_parts`), whose products with the (rows x 8) labels are the segments' W;
    * ``bins``: the bin of each segment on each partition (L, S); ``cells``: each segment's cell of the
      group (:class:`_Cells`).
    """

    __slots__ = ("lo", "m", "order", "local", "starts", "pieces", "first_piece", "bins", "cells", "t8", "frac",
                 "parts", "row_hashes")

    def __init__(self, lo: int, p: np.ndarray, ids: list, total: int, key: np.ndarray, start: int):
        m = p.size
        order, starts, self.bins = _segments(ids, total)
        S = starts.size  # segment s adds to one bin of each partition
        self.cells = None
        self.lo, self.m, self.local, self.order, self.starts = lo, m, order, order + lo, starts
        # the successes of a segment counted in byte-wise pieces of at most 255 rows, then added per segment
        n_pieces = -(-np.diff(np.r_[starts, m]) // _U8_ROWS)
        if n_pieces.max() > 1:
            self.first_piece = np.r_[0, np.cumsum(n_pieces)[:-1]]
            seg = np.repeat(np.arange(S), n_pieces)
            self.pieces = starts[seg] + _U8_ROWS * (np.arange(seg.size) - self.first_piece[seg])
        else:
            self.pieces, self.first_piece = starts, None
        t, self.frac = _thresholds(p[order])
        self.t8 = np.repeat(t, LANES)
        self.row_hashes = _row_hashes(key, start + self.order)  # the tie hash's part that depends on the row
        self.parts = _weight_parts(1.0 - 2.0 * p[order], starts)

    def segment_sums(self, key, words: np.ndarray, scratch: "_Scratch", start: int, draw0: int):
        """Eight draws draw0..draw0+7 of the chunk from the chunk's ``words`` (row order; ``start``: the
        group's first row): (N (S, 8) int64, W (S, 8))."""
        m = self.m
        w = np.take(words, self.local, out=scratch.words[:m], mode="wrap")  # valid indices: no bounds check
        b = w.view(np.uint8)
        y = np.less(b, self.t8, out=scratch.y[:LANES * m])
        eq = np.equal(b, self.t8, out=scratch.eq[:LANES * m])
        tied = np.flatnonzero(eq.view(np.uint64) != 0)  # rows with a tie in some lane (about 3 in 100)
        if tied.size:  # b = floor(256 p): y = 1 iff the tie uniform of (row, draw) < 256 p - t
            at = np.flatnonzero(eq.view(np.uint64)[tied].view(np.uint8))  # lane of each tie: (word, byte)
            row, lane = tied[at >> 3], at & (LANES - 1)
            y.reshape(m, LANES)[row, lane] = _draw_uniforms(key, self.row_hashes[row], draw0 + lane) < self.frac[row]
        return self.label_sums(y.reshape(m, LANES), scratch)

    def label_sums(self, y: np.ndarray, scratch: "_Scratch"):
        """(N (S, 8) int64, W (S, 8)) of eight lanes of labels ``y`` (rows x 8, bool, in segment order)."""
        counts = np.add.reduceat(y.view(np.uint64).reshape(-1), self.pieces).view(np.uint8).reshape(-1, LANES)
        n_seg = np.add.reduceat(counts, self.first_piece, axis=0, dtype=np.int64) if self.first_piece is not None \
            else counts.astype(np.int64)
        w_seg = np.empty((self.starts.size, LANES))
        for r0, r1, a, b, weights in self.parts:  # a few parts of whole segments: the float labels stay in cache
            yf = scratch.yf[:r1 - r0]
            np.copyto(yf, y[r0:r1])
            w_seg[a:b] = weights @ yf
        return n_seg, w_seg


class _Cells:
    """The distinct segments (tuples of bins) of a group's chunks: per-draw sums are added per cell over
    the chunks, then to the bins by one sparse product per run of draws (not one per chunk)."""

    def __init__(self, plans, total: int):
        tuples = np.concatenate([plan.bins for plan in plans], axis=1)  # (L, segments of all chunks)
        cells, inverse = np.unique(tuples, axis=1, return_inverse=True)
        inverse = inverse.ravel()
        bounds = np.cumsum([0] + [plan.bins.shape[1] for plan in plans])
        for plan, a, b in zip(plans, bounds[:-1], bounds[1:]):  # a loop over the chunks
            plan.cells = inverse[a:b]
        L, C = cells.shape
        self.size = C
        self.to_bins = csr_matrix((np.ones(L * C, dtype=np.int64), (cells.ravel(), np.tile(np.arange(C), L))),
                                  shape=(total, C))
        self.to_bins_f = self.to_bins.astype(np.float64)


class _Scratch:
    """The buffers of one thread: one chunk's words, labels and ties, and one part's float labels, for
    eight draws."""

    def __init__(self, plans):
        rows = max(plan.m for plan in plans)
        self.words = np.empty(rows, dtype=np.uint64)
        self.y = np.empty(LANES * rows, dtype=bool)
        self.eq = np.empty(LANES * rows, dtype=bool)
        self.yf = np.empty((max(r1 - r0 for plan in plans for r0, r1, *_ in plan.parts), LANES))


class DrawSums:
    """Additive per-draw bin sums of the counter-based label draws on L interval partitions of 1-dim p.

    Feed the rows chunk by chunk (:meth:`add`, each chunk with the global position of its first row);
    per draw r and bin b of partition i it keeps N_b (successes, int64, exact) and W_b = sum over the
    successes of (1 - 2 p) (float64), per bin c_b, sum p, sum p^2, and the same sums for the observed
    labels.  The draws depend on (key, row position, draw) only, so the sums -- and the T*_B and
    Spiegelhalter numerators computed from them (:meth:`statistics`) -- do not depend on the chunking
    (the float sums up to their rounding, about 1e-16 relative).  Memory: O(R x bins) for the sums plus
    about 60 bytes per row of a group of :data:`DRAW_GROUP_ROWS` rows (the chunks' plans), and per
    thread about 40 bytes per row of a chunk, 1 MB of float labels and 2 KB per cell (one run of draws).

    Parameters
    ----------
    key : ndarray of uint64, shape (4,)
        :func:`calibtest.core.conditional.counter_key`.
    sizes : sequence of int
        Number of bin ids of each partition (bin ids 0..size-1).
    n_draws : int
        R.
    block : int
        Draws per run (rounded up to a multiple of 8): a run's per-cell sums go to the bins by one sparse
        product; the counts do not depend on it, the float sums only through their rounding.
    threads : int, optional
        Threads among which the blocks of draws are split (default :data:`DRAW_THREADS`); the sums do
        not depend on it.
    """

    def __init__(self, key, sizes, n_draws: int, block: int = LANES * _FLUSH_WORDS, threads: int | None = None):
        self.key, self.sizes, self.R = key, [int(s) for s in sizes], int(n_draws)
        self.flush = max(1, -(-int(block) // LANES))  # words (blocks of eight draws) per sparse product
        self.threads = DRAW_THREADS if threads is None else max(1, int(threads))
        self.offsets = np.concatenate(([0], np.cumsum(self.sizes)))
        total = int(self.offsets[-1])
        self.rows = draw_chunk_rows(total)  # fixed by the grid, so the chunks never depend on the input's
        self.N = np.zeros((total, self.R), dtype=np.int64)
        self.W = np.zeros((total, self.R))
        self.obs_N = np.zeros(total, dtype=np.int64)
        self.obs_W = np.zeros(total)
        self.count = np.zeros(total, dtype=np.int64)
        self.psum = np.zeros(total)
        self.p2sum = np.zeros(total)
        self.n = 0

    def add(self, start: int, p, inverses, y=None) -> "DrawSums":
        """Add rows start..start+len(p)-1: predictions ``p``, bin ids ``inverses`` (one per partition),
        observed labels ``y`` (1 for a success; optional).

        The rows are taken in chunks of :func:`draw_chunk_rows` rows (from the first row given), each sorted by the
        common refinement of the partitions; the words of a group of :data:`DRAW_GROUP_ROWS` rows come
        from one generator call per block of eight draws.
        """
        p = np.asarray(p, dtype=np.float64)
        if p.size == 0:
            return self
        ids = [np.asarray(inv) for inv in inverses]
        y = None if y is None else np.asarray(y).astype(bool)
        group = max(1, DRAW_GROUP_ROWS // self.rows) * self.rows  # whole chunks
        with progress_bar(p.size, "label draws", unit="rows", unit_scale=True, work=float(p.size) * self.R,
                          min_work=PROGRESS_MIN_LABELS) as bar:
            for g0 in range(0, p.size, group):  # groups of rows bound the memory
                g1 = min(g0 + group, p.size)
                self._add_group(start + g0, p[g0:g1], [idx[g0:g1] for idx in ids], None if y is None else y[g0:g1])
                bar.update(g1 - g0)
        return self

    def _add_group(self, start: int, p, ids, y) -> None:
        bounds = range(0, p.size, self.rows)  # the chunks of the group, in order
        words = list(range(-(-self.R // LANES)))
        workers = min(self.threads, len(words)) if p.size * self.R >= _THREAD_MIN_LABELS else 1
        if workers <= 1:
            built = [self._plan(start, p, ids, lo) for lo in bounds]
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                built = list(pool.map(lambda lo: self._plan(start, p, ids, lo), bounds))
        plans = []
        for plan, sums in built:  # the per-bin sums added chunk by chunk, partition by partition, in order
            for count, psum, p2sum in sums:  # a loop over the few partitions
                self.count += count
                self.psum += psum
                self.p2sum += p2sum
            plans.append(plan)
        cells = _Cells(plans, self.count.size)
        if y is not None:  # the observed labels in every lane, by the draws' arithmetic: equal labels, equal T
            n_cell, w_cell = np.zeros((cells.size, LANES), dtype=np.int64), np.zeros((cells.size, LANES))
            scratch = _Scratch(plans)
            for plan in plans:  # a loop over the chunks
                n_seg, w_seg = plan.label_sums(np.repeat(y[plan.order], LANES).reshape(-1, LANES), scratch)
                n_cell[plan.cells] += n_seg
                w_cell[plan.cells] += w_seg
            self.obs_N += (cells.to_bins @ n_cell[:, :1])[:, 0]
            self.obs_W += (cells.to_bins_f @ w_cell[:, :1])[:, 0]
        if workers <= 1:
            self._draw_words(start, p.size, plans, cells, words)
        else:  # contiguous runs of blocks per thread: each writes its own columns of N and W
            runs = np.array_split(np.array(words), workers)
            with ThreadPoolExecutor(max_workers=workers) as pool:
                for fut in [pool.submit(self._draw_words, start, p.size, plans, cells, run.tolist()) for run in runs]:
                    fut.result()
        self.n += p.size

    def _plan(self, start: int, p, ids, lo: int):
        """The plan of the chunk of rows lo..lo+rows-1 of a group and its per-bin count, sum p and sum p^2
        on each partition."""
        total = self.count.size
        pc = p[lo:lo + self.rows]
        idc = [idx[lo:lo + self.rows].astype(np.intp) + off for idx, off in zip(ids, self.offsets[:-1])]
        sums = [(np.bincount(idx, minlength=total), np.bincount(idx, weights=pc, minlength=total),
                 np.bincount(idx, weights=pc * pc, minlength=total)) for idx in idc]
        return _ChunkPlan(lo, pc, idc, total, self.key, start), sums

    def _draw_words(self, start: int, m: int, plans, cells: _Cells, words) -> None:
        """The draws of blocks ``words`` (block k: draws 8k..8k+7) on a group's chunks of ``m`` rows.

        Runs of blocks: for each chunk in turn (its plan stays in cache) each block's generator makes the
        chunk's words, the segment sums are added to the cells, and the cells go to the bins once per run.
        """
        scratch = _Scratch(plans)
        for r0 in range(0, len(words), self.flush):  # runs of blocks of eight draws
            run = words[r0:r0 + self.flush]
            gens = [_stream(self.key, k, start) for k in run]
            n_cell = np.zeros((cells.size, LANES * len(run)), dtype=np.int64)
            w_cell = np.zeros((cells.size, LANES * len(run)))
            for plan in plans:  # the chunks, in order
                n_seg = np.empty((plan.starts.size, n_cell.shape[1]), dtype=np.int64)
                w_seg = np.empty((plan.starts.size, n_cell.shape[1]))
                for j, (k, gen) in enumerate(zip(run, gens)):  # the run's blocks of eight draws
                    raw = gen.random_raw(plan.m).astype("<u8", copy=False)  # the chunk's words, after the last chunk's
                    n_seg[:, LANES * j:LANES * (j + 1)], w_seg[:, LANES * j:LANES * (j + 1)] = plan.segment_sums(
                        self.key, raw, scratch, start, LANES * k)
                n_cell[plan.cells] += n_seg  # a chunk's segments are distinct cells
                w_cell[plan.cells] += w_seg
            first = LANES * run[0]
            cols = min(LANES * len(run), self.R - first)  # the last block may hold fewer than eight draws
            self.N[:, first:first + cols] += cells.to_bins @ n_cell[:, :cols]
            self.W[:, first:first + cols] += cells.to_bins_f @ w_cell[:, :cols]

    def merge(self, other: "DrawSums") -> "DrawSums":
        """Add another accumulator's sums (rows disjoint from this one's): per-draw sums are additive."""
        for name in ("N", "W", "obs_N", "obs_W", "count", "psum", "p2sum"):
            getattr(self, name).__iadd__(getattr(other, name))
        self.n += other.n
        return self

    def statistics(self, n: int | None = None):
        """(T observed (L,), T* (L, R), sum y (1 - 2p) observed, per draw (R,)) from the sums.

        T_i = (1/n) [sum_b w_b (N_b - P_b)^2 - sum_b w_b W_b - sum_b w_b Q_b] with w_b = 1 / (c_b - 1) on
        bins of c_b >= 2 rows (0 otherwise), P_b = sum p, Q_b = sum p^2: the debiased ECE^2 of each
        partition, since (y - p)^2 = y (1 - 2p) + p^2 for y in {0, 1}.
        """
        n = self.n if n is None else int(n)
        L = len(self.sizes)
        T = np.empty((L, self.R + 1))  # column 0: the observed labels, by the draws' arithmetic
        for i in range(L):  # a loop over the few partitions
            sl = slice(self.offsets[i], self.offsets[i + 1])
            c = self.count[sl]
            w = np.where(c >= 2, 1.0 / np.maximum(c - 1.0, 1.0), 0.0)[:, None]
            h = float(np.sum(self.p2sum[sl] * w[:, 0]))
            s = np.column_stack((self.obs_N[sl], self.N[sl])) - self.psum[sl][:, None]
            W = np.column_stack((self.obs_W[sl], self.W[sl]))
            # sums over the bins row by row (axis 0): every column is summed in the same order
            T[i] = ((w * (s * s)).sum(axis=0) - (w * W).sum(axis=0) - h) / n
        first = slice(self.offsets[0], self.offsets[1])
        wq = np.column_stack((self.obs_W[first], self.W[first])).sum(axis=0)
        T_obs, T_draws = T[:, 0].copy(), T[:, 1:].copy()
        return T_obs, T_draws, float(wq[0]), wq[1:].copy()
