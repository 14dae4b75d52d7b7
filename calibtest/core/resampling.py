"""Resampling intervals for ECE^2: percentile bootstrap, subsampling and adaptive HulC.

These are the baselines the paper [1]_ compares its adjusted interval against
(Section 4.1; ``docs/conventions.md``, "Resampling baselines"). All three work
on the *binned representation* of the data: each row's bin number (fixed by
its prediction, so it is computed once) and its error vector U. Any
calibration target that yields per-row bin numbers and U (binary, top-1,
top-k, full calibration) is therefore supported by the same code.

The debiased statistic of a row multiset R (a resample, subsample or split)
of size s is the paper's eq. (6) on the same bins::

    T(R) = (1/s) * sum over bins with c_b >= 2 of (||S_b||^2 - Q_b) / (c_b - 1),

with c_b, S_b = sum U and Q_b = sum ||U||^2 over the rows of R in bin b; a
row drawn twice by the bootstrap counts twice (its copies are distinct rows of
the resample).

Vectorisation
-------------
Resamples are index matrices of shape (block, s) processed a block at a time.
For a block, the combined key ``r * m + bin`` (r the resample within the
block, m the number of occupied bins) turns all per-(resample, bin) sums into
one ``np.bincount`` per column of U (plus one for the counts and one for
||U||^2); T of every resample in the block is then a row sum of a (block, m)
array.  There is no Python loop over resamples or rows; memory is
O(block * s + block * m) (plus a (block, n) boolean matrix for subsampling
without replacement).

Randomness and block-size independence
--------------------------------------
Every random draw is a standard uniform double from ``Generator.random``,
whose stream of doubles is the same whether it is drawn in one call or in
several (no buffering between calls).  Resample r always consumes the same
doubles, in the same order, whatever the block size, so the results are
bit-for-bit independent of ``block_size``:

* bootstrap: n doubles per resample, row ``floor(u * n)``;
* subsampling (without replacement): s doubles per subsample, used by
  Floyd's algorithm (for j = n-s, ..., n-1: ``t = floor(u * (j + 1))``; take t
  unless already taken, else j), giving a uniformly random s-subset;
* HulC: the subsamples of the median-bias estimate first, then one double for
  the randomised number of splits, then n doubles whose ranks
  (``argsort``) give the random permutation of the rows.

``floor(u * n)`` with a 53-bit uniform u is uniform on 0..n-1 up to a relative
error n / 2^53 (below 1e-9 for n up to 10^7).

Choices where the sources differ
--------------------------------
* Subsampling: ``docs/conventions.md`` ("Resampling baselines") defines
  ``T + sqrt(b/n) (q_{alpha/2}, q_{1-alpha/2})`` with q the quantiles of ``T_b - T``; Politis and Romano (1994) [3]_ give the
  reflected ``T - sqrt(b/n) (q_{1-alpha/2}, q_{alpha/2})``.  calibtest follows
  ``docs/conventions.md``; ``subsampling_interval(reflect=True)`` gives the
  other.  On the paper's settings the documented form has the higher
  coverage (``vignettes/simulation_study.md``).
* HulC: the median bias is estimated as in the authors' R code
  (``subsamp_median_bias``): subsamples of round(n^(2/3)) rows without
  replacement, Delta = |mean(T_sub <= T) - 1/2|, here from ``n_resamples``
  subsamples (the R default is 1000).  Splits have sizes differing by at most
  one row.

References
----------
.. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
       l2 Expected Calibration Error", arXiv:2408.08998, 2024.
.. [2] Efron, "Bootstrap methods: another look at the jackknife", Annals of
       Statistics 7:1-26, 1979.
.. [3] Politis and Romano, "Large sample confidence regions based on
       subsamples under minimal assumptions", Annals of Statistics
       22:2031-2050, 1994.
.. [4] Kuchibhotla, Balakrishnan and Wasserman, "The HulC: confidence regions
       from convex hulls", Journal of the Royal Statistical Society Series B
       86, 2024.
.. [5] Bentley and Floyd, "Programming pearls: a sample of brilliance",
       Communications of the ACM 30, 1987.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from calibtest.core.progress import make_bar, want_progress
from calibtest.options import DEFAULT_SEED, RESAMPLING_METHODS, check_count, check_seed
from calibtest.core.arrays import read_only

__all__ = [
    "METHODS",
    "DEFAULT_N_RESAMPLES",
    "BinnedRows",
    "GatherWork",
    "ResamplingInterval",
    "bootstrap_estimates",
    "subsample_estimates",
    "subsample_size",
    "hulc_subsample_size",
    "interval_from_estimates",
    "resample_statistic",
    "multiset_statistics",
    "percentile_interval",
    "subsampling_interval",
    "hulc_n_splits",
    "hulc_split_estimates",
    "median_bias",
    "resampling_interval",
    "binned_rows",
    "clip_interval",
    "resolve_rng",
]

#: The resampling methods of ``calib_ci(method=...)``.
METHODS = RESAMPLING_METHODS

#: Default number of resamples (bootstrap), subsamples (subsampling) and
#: median-bias subsamples (HulC).
DEFAULT_N_RESAMPLES = 500

#: Default block: this many (resample, row) index entries per block (256 KB of
#: indices; peak memory about five times that).  Blocks this small stay in the
#: CPU cache: at n = 1000 one bootstrap interval takes about 12 ms instead of
#: 16 ms with 2^20 entries per block (``benchmarks/bench_study.py``).
BLOCK_ELEMENTS = 1 << 15

#: Exponent of the HulC median-bias subsample size round(n ** (2/3)), the
#: default ``subsamp_exp`` of the authors' R code (Kuchibhotla et al. 2024).
HULC_SUBSAMPLE_EXPONENT = 2.0 / 3.0

#: Show a progress bar only when a run has at least this many index entries.
_PROGRESS_MIN_ELEMENTS = 50_000_000


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True, eq=False)
class BinnedRows:
    """The binned representation of the rows: bin number and U per row.

    Attributes
    ----------
    inverse : ndarray of intp, shape (n,)
        Bin number of each row, 0..m-1 (as from :func:`calibtest.core.binning.group_keys`).
    u : ndarray of float64, shape (n, d)
        U = Y - Z of each row.
    n_groups : int
        m, the number of bins the numbers refer to (``inverse.max() + 1`` at least).

    Notes
    -----
    The bins are renumbered 0..m'-1 over the occupied ones (an empty bin adds
    nothing to T), so ``n_groups`` is the number of occupied bins and every
    per-(resample, bin) array has R * m' entries.
    """

    inverse: np.ndarray
    u: np.ndarray
    n_groups: int
    if TYPE_CHECKING:  # set by __post_init__; not dataclass fields at run time
        _cols: tuple[np.ndarray, ...] = field(init=False)
        _sq: np.ndarray = field(init=False)

    def __post_init__(self):
        inv = np.asarray(self.inverse)
        if inv.ndim != 1 or not np.issubdtype(inv.dtype, np.integer):
            raise TypeError("inverse must be a one-dimensional integer array of bin numbers")
        u = np.asarray(self.u, dtype=np.float64)
        if u.ndim == 1:
            u = u[:, None]
        if u.ndim != 2 or u.shape[0] != inv.shape[0]:
            raise ValueError(f"u must have shape (n,) or (n, d) with n = {inv.shape[0]}, got {np.shape(self.u)}")
        if inv.shape[0] < 2:
            raise ValueError(f"need at least 2 rows, got {inv.shape[0]}")
        m = int(self.n_groups)
        if inv.min() < 0 or inv.max() >= m:
            raise ValueError(f"bin numbers must lie in 0..{m - 1}")
        counts = np.bincount(inv, minlength=m)
        if counts.min() == 0:  # renumber the occupied bins 0..m'-1
            occupied = np.flatnonzero(counts)
            lookup = np.zeros(m, dtype=np.intp)
            lookup[occupied] = np.arange(occupied.size)
            inv, m = lookup[inv], occupied.size
        object.__setattr__(self, "inverse", read_only(inv.astype(np.intp)))
        object.__setattr__(self, "u", read_only(u))
        object.__setattr__(self, "n_groups", m)
        # Contiguous columns and ||U||^2, gathered by every resample.
        object.__setattr__(self, "_cols", tuple(read_only(u[:, j].copy()) for j in range(u.shape[1])))
        object.__setattr__(self, "_sq", read_only(np.einsum("ij,ij->i", u, u)))

    @classmethod
    def from_inverse(cls, inverse, u) -> "BinnedRows":
        """Rows with arbitrary non-negative bin numbers."""
        inverse = np.asarray(inverse)
        return cls(inverse, u, int(inverse.max()) + 1)

    @property
    def n(self) -> int:
        """Number of rows."""
        return self.inverse.shape[0]

    @property
    def dim(self) -> int:
        """Dimension d of U."""
        return self.u.shape[1]


def binned_rows(partition, u) -> BinnedRows:
    """The rows of a :class:`~calibtest.core.partition.Partition` with their U, for resampling.

    The bin numbering is the partition's (that of the estimator's bin sums),
    so ``T`` of all rows equals the reported estimate.
    """
    return BinnedRows(partition.inverse, u, partition.m)


#: Second word of the resampling seed: an int seed s starts ``default_rng([s, 1])``, a
#: stream independent of ``default_rng(s)``, which the Monte Carlo null (``null="monte-carlo"``)
#: of the same ``calib_ci(rng=s)`` call uses.
RESAMPLING_STREAM = 1


def resolve_rng(rng):
    """A Generator and the seed to record: ``(generator, seed)``.

    ``rng=None`` is the default seed :data:`calibtest.options.DEFAULT_SEED`
    (recorded, so the run is the same in any process); an int seed s gives
    ``default_rng([s, 1])`` (:data:`RESAMPLING_STREAM`: independent of the
    Monte Carlo null's ``default_rng(s)``); a Generator is used as is (and
    consumed) and recorded as ``"Generator"``.
    """
    if rng is None:
        rng = DEFAULT_SEED
    if isinstance(check_seed(rng), np.random.Generator):
        return rng, "Generator"
    return np.random.default_rng([int(rng), RESAMPLING_STREAM]), int(rng)


# --------------------------------------------------------------------------- the kernel


def resample_statistic(rows: BinnedRows, idx: np.ndarray) -> np.ndarray:
    """T of each row multiset given by the rows of an index matrix.

    Parameters
    ----------
    rows : BinnedRows
    idx : ndarray of int, shape (R, s)
        Row numbers of R resamples of size s (repeats allowed).

    Returns
    -------
    ndarray of float64, shape (R,)
        ``T_r = (1/s) sum_{b: c_rb >= 2} (||S_rb||^2 - Q_rb) / (c_rb - 1)``.

    Notes
    -----
    One combined (resample, bin) key ``r * m + bin`` and ``d + 2`` bincounts
    for the whole matrix; no loop over resamples (see :func:`multiset_statistics`).
    """
    return multiset_statistics([rows.inverse], [rows.n_groups], rows._cols, _squares(rows._cols, rows._sq), idx)[0]


def _squares(cols, sq: np.ndarray) -> np.ndarray | None:
    """``sq``, or None when U has one column: ||U||^2 = U^2 is then squared after the gather
    (:func:`multiset_statistics`), which is cheaper than a second gather and gives the same doubles."""
    return None if len(cols) == 1 else sq


class GatherWork:
    """Work arrays of :func:`multiset_statistics` for index matrices of up to ``size`` entries.

    ``cols`` (float64, one per column of U), ``sq`` (float64) and ``key``
    (intp) receive the gathered columns, the gathered ||U||^2 and the
    (multiset, bin) keys, block after block, so that a loop over blocks
    allocates nothing (and memory stays in the CPU cache).  Any of them may be
    views of a caller's arrays that are free while the statistics are computed.
    """

    def __init__(self, size: int, d: int, *, cols=None, sq=None, key=None):
        given = list(cols or [])
        self.cols = given + [np.empty(size) for _ in range(d - len(given))]
        self.sq = np.empty(size) if sq is None else sq
        self.key = np.empty(size, dtype=np.intp) if key is None else key


def _take(table: np.ndarray, index: np.ndarray, buffer: np.ndarray | None) -> np.ndarray:
    """``table[index]`` (flat), into the first ``index.size`` entries of ``buffer`` when given.

    Every index lies in the table, so ``mode="clip"`` only spares ``np.take`` its bounds buffering;
    the values are those of fancy indexing.
    """
    out = None if buffer is None else buffer[:index.size]
    return np.take(table, index, out=out, mode="clip")


def multiset_statistics(inverses, sizes, cols, sq: np.ndarray | None, idx: np.ndarray, *,
                        pair_divisor_offset: float = 1.0, work: GatherWork | None = None) -> np.ndarray:
    """T of each row multiset of an index matrix, on one or several binnings of the rows.

    Parameters
    ----------
    inverses : sequence of L ndarrays of intp, shape (N,)
        Bin number (0..m_l-1) of each of the N rows, one array per binning.
    sizes : sequence of L int
        m_l, the number of bins of each binning.
    cols : sequence of d ndarrays, shape (N,)
        The columns of U, one value per row.
    sq : ndarray, shape (N,), or None
        ||U||^2 of each row; None when d = 1, for the square of the one
        column (``einsum("ij,ij->i", u, u)`` of one column is that square
        exactly, so the result is the same to the last bit).
    idx : ndarray of int, shape (R, s)
        Row numbers of R multisets of size s.
    pair_divisor_offset : float
        o in the divisor c_rb - o of each bin's pair sum: 1 gives the paper's
        debiased T (default), 0 gives T-Cal's statistic (divisor c_rb).
    work : GatherWork, optional
        Work arrays of at least R s entries (the result is the same).

    Returns
    -------
    ndarray of float64, shape (L, R)
        ``T_lr = (1/s) sum_{b: c_rb >= 2} (||S_rb||^2 - Q_rb) / (c_rb - o)`` on binning l
        (the paper's eq. (6) on the multiset for o = 1).

    Notes
    -----
    The weights U[idx] and ||U[idx]||^2 are gathered once and shared by the
    binnings; each binning adds one key ``r * m + bin`` and ``d + 2``
    bincounts.  No loop over multisets, rows or bins.
    """
    R, s = idx.shape
    flat = idx.reshape(-1)
    bufs = work.cols if work is not None else [None] * len(cols)
    w_cols = [_take(col, flat, buf) for col, buf in zip(cols, bufs)]  # loop over the d columns of U
    if sq is None:
        if len(cols) != 1:
            raise ValueError(f"sq=None needs U with one column, got {len(cols)}")
        w_sq = np.multiply(w_cols[0], w_cols[0], out=None if work is None else work.sq[:flat.size])
    else:
        w_sq = _take(sq, flat, None if work is None else work.sq)
    out = np.empty((len(sizes), R))
    for l, (inverse, m) in enumerate(zip(inverses, sizes)):  # loop over the few binnings
        key = _take(inverse, flat, None if work is None else work.key)
        grid = key.reshape(R, s)
        np.add(grid, (np.arange(R, dtype=np.intp) * m)[:, None], out=grid)
        size = R * m
        count = np.bincount(key, minlength=size)
        num = np.bincount(key, weights=w_sq, minlength=size)
        np.negative(num, out=num)
        for w in w_cols:
            s_j = np.bincount(key, weights=w, minlength=size)
            num += s_j * s_j
        contrib = np.zeros(size)
        np.divide(num, count - pair_divisor_offset, out=contrib, where=count >= 2)
        out[l] = contrib.reshape(R, m).sum(axis=1) / s
    return out


def _block_size(block_size, n_resamples: int, size: int) -> int:
    if block_size is None:
        return max(1, min(n_resamples, BLOCK_ELEMENTS // max(size, 1)))
    return check_count(block_size, "block_size", 1)


def _want_progress(progress, elements: int) -> bool:
    """Progress bar only for long runs in an interactive terminal or notebook, never in CI
    (:func:`calibtest.core.progress.want_progress`)."""
    return want_progress(progress, elements, _PROGRESS_MIN_ELEMENTS)


def _blocked(rows: BinnedRows, n_resamples: int, size: int, make_idx, rng, block_size, progress,
             desc: str) -> np.ndarray:
    """Run ``make_idx(rng, block)`` -> (block, size) index matrices block after block."""
    blk = _block_size(block_size, n_resamples, size)
    out = np.empty(n_resamples)
    starts = range(0, n_resamples, blk)
    work = GatherWork(blk * size, rows.dim)
    bar = None
    if _want_progress(progress, n_resamples * size):
        bar = make_bar(n_resamples, desc, unit="resample")
    try:
        for start in starts:  # loop over blocks, not resamples
            stop = min(start + blk, n_resamples)
            out[start:stop] = multiset_statistics([rows.inverse], [rows.n_groups], rows._cols,
                                                  _squares(rows._cols, rows._sq), make_idx(rng, stop - start),
                                                  work=work)[0]
            if bar is not None:
                bar.update(stop - start)
    finally:
        if bar is not None:
            bar.close()
    return out


def _bootstrap_idx(n: int):
    """Rows ``floor(u * n)``; ``u * n < n`` after rounding for u <= 1 - 2^-53, so no clamp is needed."""
    def make(rng, count):
        u = rng.random((count, n))
        u *= n
        return u.astype(np.intp)
    return make


def _position_type(size: int):
    """The smallest of int8, int16 and intp that holds the positions 0..size (the first-position matrix
    of :func:`_subsample_idx` is then as small as it can be)."""
    return next(t for t in (np.int8, np.int16, np.intp) if size <= np.iinfo(t).max)


def _subsample_idx(n: int, size: int):
    """Floyd's algorithm (Bentley and Floyd 1987), vectorised across subsamples and positions.

    For j = n - s, ..., n - 1 (position i = j - n + s) draw ``t_i = floor(u_i (j + 1))``
    in 0..j; pick t_i unless it was picked before, else pick j.  Every s-subset
    of 0..n-1 is equally likely.  With P_i the picks before position i, t_i is
    in P_i exactly when

    * t_i equals an earlier draw t_k (k < i): t_k is in P_(k+1) either way; or
    * t_i = j_k for the position k = t_i - (n - s) < i, and j_k was picked
      (t_k collided),

    so the collisions C satisfy ``C_i = dup_i or (0 <= t_i - (n - s) < i and C_(t_i - (n - s)))``:
    ``dup`` comes from the first position of every value in every subsample
    (one ``np.minimum.at`` on a (count, n) matrix), and C by iterating that rule
    from ``C = dup``, which settles after as many rounds as the longest chain
    of such references (each points to an earlier position).  The picks,
    ``where(C, j, t)`` in position order, are those of the sequential
    algorithm, with no loop over positions.
    """
    j0 = n - size
    pos_type = _position_type(size)

    def make(rng, count):
        u = rng.random((count, size))
        u *= np.arange(j0 + 1, n + 1, dtype=np.float64)  # j + 1: u (j + 1) < j + 1 after rounding, so t <= j
        t = u.astype(np.intp)
        pos = np.arange(size, dtype=pos_type)
        key = t + (np.arange(count, dtype=np.intp) * n)[:, None]
        first = np.full(count * n, size, dtype=pos_type)
        np.minimum.at(first, key.ravel(), np.broadcast_to(pos, (count, size)).ravel())
        collided = (np.take(first, key, mode="clip") != pos).ravel()  # dup, then C
        ref = t - j0  # the position whose j equals t
        linked = np.flatnonzero(((ref >= 0) & (ref < pos)).ravel())  # the few draws that may point back
        source = linked - linked % size + ref.ravel()[linked]  # flat index of the position referred to
        dup = collided[linked]
        while True:  # a few rounds: the length of the longest chain of references
            step = dup | collided[source]
            if np.array_equal(step, collided[linked]):
                break
            collided[linked] = step
        return np.where(collided.reshape(count, size), j0 + pos.astype(np.intp), t)
    return make


def bootstrap_estimates(rows: BinnedRows, n_resamples: int = DEFAULT_N_RESAMPLES, rng=None, *,
                        block_size: int | None = None, progress: bool | None = None) -> np.ndarray:
    """T of ``n_resamples`` bootstrap resamples (n rows drawn with replacement).

    Resample r uses n uniform doubles u and the rows ``floor(u * n)``.

    Returns
    -------
    ndarray, shape (n_resamples,)
    """
    gen, _ = resolve_rng(rng)
    n_resamples = check_count(n_resamples, "n_resamples", 1)
    return _blocked(rows, n_resamples, rows.n, _bootstrap_idx(rows.n), gen, block_size, progress, "bootstrap")


def subsample_estimates(rows: BinnedRows, size: int, n_resamples: int = DEFAULT_N_RESAMPLES, rng=None, *,
                        block_size: int | None = None, progress: bool | None = None) -> np.ndarray:
    """T of ``n_resamples`` subsamples of ``size`` rows drawn without replacement.

    Subsample r uses ``size`` uniform doubles in Floyd's algorithm, so every
    ``size``-subset of the rows is equally likely.
    """
    gen, _ = resolve_rng(rng)
    n_resamples = check_count(n_resamples, "n_resamples", 1)
    size = check_count(size, "size", 1)
    if size > rows.n:
        raise ValueError(f"subsample size {size} exceeds the number of rows {rows.n}")
    if block_size is None:  # 2^14 draws per block, and the (block, n) matrix of first positions below 512 KB
        first_bytes = rows.n * np.dtype(_position_type(size)).itemsize
        block_size = max(1, min(n_resamples, BLOCK_ELEMENTS // (2 * size), 16 * BLOCK_ELEMENTS // first_bytes))
    return _blocked(rows, n_resamples, size, _subsample_idx(rows.n, size), gen, block_size, progress,
                    "subsampling")


# --------------------------------------------------------------------------- intervals


def percentile_interval(estimates: np.ndarray, alpha: float) -> tuple[float, float]:
    """Percentile bootstrap interval ``(q_{alpha/2}, q_{1-alpha/2})`` of the resampled T.

    Quantiles are numpy's default (linear interpolation, Hyndman-Fan type 7).
    """
    lo, hi = np.quantile(estimates, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(lo), float(hi)


def subsampling_interval(estimate: float, estimates: np.ndarray, n: int, size: int, alpha: float, *,
                         reflect: bool = False) -> tuple[float, float]:
    """Subsampling interval for ECE^2 at the sqrt(n) rate.

    With q_p the p-quantile (type 7) of ``T_b - T`` over the subsamples of size
    b, the interval of ``docs/conventions.md`` ("Resampling baselines") is::

        [T + sqrt(b/n) q_{alpha/2},  T + sqrt(b/n) q_{1-alpha/2}]      (reflect=False)

    ``reflect=True`` gives the interval of Politis and Romano (1994)::

        [T - sqrt(b/n) q_{1-alpha/2},  T - sqrt(b/n) q_{alpha/2}],

    which follows from approximating the law of ``sqrt(n) (T - theta)`` by that
    of ``sqrt(b) (T_b - T)``.  The two have the same length and coincide when
    the subsampling law is symmetric; they differ when it is skewed, as T_b is
    for a small ECE.  The default follows ``docs/conventions.md``
    ("Resampling baselines"); it also reproduces the paper's finding that subsampling keeps
    at least nominal coverage better than the reflected form does (measured
    side by side in ``vignettes/simulation_study.md``).
    """
    lo_q, hi_q = np.quantile(np.asarray(estimates) - estimate, [alpha / 2.0, 1.0 - alpha / 2.0])
    scale = math.sqrt(size / n)
    if reflect:
        return float(estimate - scale * hi_q), float(estimate - scale * lo_q)
    return float(estimate + scale * lo_q), float(estimate + scale * hi_q)


def median_bias(estimate: float, estimates: np.ndarray) -> float:
    """Subsampling estimate of the median bias, ``|mean(T_b <= T) - 1/2|``.

    As ``subsamp_median_bias`` of the HulC authors' R code (ties count as
    ``T_b <= T``).
    """
    return float(abs(np.mean(np.asarray(estimates) <= estimate) - 0.5))


def _miscoverage(n_splits: int, delta: float) -> float:
    """P(B; Delta) = (1/2 - Delta)^B + (1/2 + Delta)^B (HulC, eq. (3))."""
    return (0.5 - delta) ** n_splits + (0.5 + delta) ** n_splits


def hulc_n_splits(alpha: float, delta: float, u: float | None = None, max_splits: int | None = None):
    """Number of HulC splits, randomised between B - 1 and B (HulC Algorithm 1).

    B is the smallest integer with ``P(B; Delta) <= alpha``; with
    ``tau = (alpha - P(B)) / (P(B-1) - P(B))`` the number of splits is
    ``B - 1`` if ``u <= tau`` and ``B`` otherwise, so that the expected
    miscoverage bound ``tau P(B-1) + (1 - tau) P(B)`` equals alpha.

    Parameters
    ----------
    alpha : float
    delta : float
        Median bias in [0, 1/2].
    u : float, optional
        A standard uniform; ``None`` returns B without randomising.
    max_splits : int, optional
        Give up (return ``None``) once B would exceed this.

    Returns
    -------
    int or None
    """
    if not 0.0 <= delta <= 0.5:
        raise ValueError(f"median bias must be in [0, 1/2], got {delta}")
    if delta == 0.5:
        return None
    # P(B) > (1/2 + Delta)^B > alpha for every B < log(alpha) / log(1/2 + Delta): start there.
    B = max(1, math.floor(math.log(alpha) / math.log(0.5 + delta)))
    while _miscoverage(B, delta) > alpha:  # a step or two
        B += 1
        if max_splits is not None and B - 1 > max_splits:
            return None
    if u is not None:
        p1, p0 = _miscoverage(B, delta), _miscoverage(B - 1, delta)
        tau = (alpha - p1) / (p0 - p1)
        if u <= tau:
            B -= 1
    if max_splits is not None and B > max_splits:
        return None
    return B


def _split_groups(n: int, n_splits: int) -> tuple[np.ndarray, np.ndarray]:
    """Split number of each position 0..n-1: contiguous groups, sizes differing by at most one
    (the first ``n % B`` groups get the extra row, as ``numpy.array_split``)."""
    base, extra = divmod(n, n_splits)
    sizes = np.full(n_splits, base)
    sizes[:extra] += 1
    return np.repeat(np.arange(n_splits), sizes), sizes


def hulc_split_estimates(rows: BinnedRows, n_splits: int, rng) -> np.ndarray:
    """T on each of ``n_splits`` disjoint random splits of the rows.

    The permutation is the ranks (``argsort``) of n uniform doubles; split j is
    the j-th contiguous group of the permuted rows (sizes differ by at most 1).
    """
    gen, _ = resolve_rng(rng)
    n = rows.n
    perm = np.argsort(gen.random(n), kind="stable")
    group, sizes = _split_groups(n, n_splits)
    m = rows.n_groups
    key = group * m + rows.inverse[perm]
    size = n_splits * m
    count = np.bincount(key, minlength=size)
    num = -np.bincount(key, weights=rows._sq[perm], minlength=size)
    for col in rows._cols:
        s_j = np.bincount(key, weights=col[perm], minlength=size)
        num += s_j * s_j
    contrib = np.zeros(size)
    np.divide(num, count - 1.0, out=contrib, where=count >= 2)
    return contrib.reshape(n_splits, m).sum(axis=1) / sizes


# --------------------------------------------------------------------------- one call


@dataclass(frozen=True, eq=False)
class ResamplingInterval:
    """A resampling interval for ECE^2 and what produced it.

    Attributes
    ----------
    method : str
        ``"bootstrap"``, ``"subsampling"`` or ``"hulc"``.
    lower, upper : float
        The interval as the method defines it (not intersected with [0, inf);
        ``lower`` may be negative).  HulC gives (-inf, inf) when it needs more
        splits than rows.
    estimate : float
        T of all rows.
    alpha : float
    estimates : ndarray (read-only)
        The resampled statistics: bootstrap T*, subsample T_b, or the HulC split
        estimates (the median-bias subsample estimates are in ``bias_estimates``).
    n_resamples : int
        Resamples, subsamples, or HulC median-bias subsamples.
    resample_size : int
        Rows per resample: n, b = floor(sqrt(n)), or HulC's median-bias subsample size.
    seed : int, str or None
        The int seed (the default seed 0 when ``rng=None``), or ``"Generator"``.
    hulc_splits : int or None
        HulC's number of splits (None if it exceeded n).
    hulc_median_bias : float or None
        HulC's estimated median bias Delta.
    bias_estimates : ndarray or None
        HulC's median-bias subsample estimates.
    n : int or None
        Rows of the data set.
    """

    method: str
    lower: float
    upper: float
    estimate: float
    alpha: float
    estimates: np.ndarray
    n_resamples: int
    resample_size: int
    seed: object = None
    hulc_splits: int | None = None
    hulc_median_bias: float | None = None
    bias_estimates: np.ndarray | None = None
    n: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "estimates", read_only(np.asarray(self.estimates, dtype=float)))
        if self.bias_estimates is not None:
            object.__setattr__(self, "bias_estimates", read_only(np.asarray(self.bias_estimates, dtype=float)))

    @property
    def contains_zero(self) -> bool:
        """0 lies in the closed interval [lower, upper] (no rejection of ECE = 0)."""
        return bool(self.lower <= 0.0 <= self.upper)

    def at_level(self, alpha: float | None = None) -> tuple[float, float]:
        """The method's interval at level 1 - alpha, recomputed from the stored statistics (ends may be negative).

        Raises
        ------
        ValueError
            HulC at another alpha: its number of splits depends on alpha.
        """
        alpha = self.alpha if alpha is None else alpha
        if self.method == "hulc":
            if alpha != self.alpha:
                interval_from_estimates("hulc", self.estimate, self.estimates, n=self.n, size=0, alpha=alpha)
            if self.estimates.size == 0:
                return -math.inf, math.inf
            return float(self.estimates.min()), float(self.estimates.max())
        return interval_from_estimates(self.method, self.estimate, self.estimates, n=self.n,
                                       size=self.resample_size, alpha=alpha)


def subsample_size(n: int) -> int:
    """b = floor(sqrt(n)), the paper's subsample size (computed in integers)."""
    return math.isqrt(int(n))


def hulc_subsample_size(n: int) -> int:
    """round(n^(2/3)), the HulC authors' median-bias subsample size (at least 2, at most n)."""
    return int(min(n, max(2, round(n ** HULC_SUBSAMPLE_EXPONENT))))


def resampling_interval(rows: BinnedRows, method: str, *, alpha: float, estimate: float | None = None,
                        n_resamples: int | None = None, rng=None, block_size: int | None = None,
                        progress: bool | None = None) -> ResamplingInterval:
    """A bootstrap, subsampling or adaptive HulC interval for ECE^2.

    Parameters
    ----------
    rows : BinnedRows
        Per-row bin numbers and U (see :func:`row_bin_index`).
    method : {"bootstrap", "subsampling", "hulc"}
        * ``bootstrap``: percentile interval ``(q_{alpha/2}, q_{1-alpha/2})``
          of T over ``n_resamples`` resamples of n rows with replacement.
        * ``subsampling``: ``[T + sqrt(b/n) q_{alpha/2}, T + sqrt(b/n) q_{1-alpha/2}]``
          with q the quantiles of ``T_b - T`` over ``n_resamples`` subsamples of
          b = floor(sqrt(n)) rows without replacement (``docs/conventions.md``; see
          :func:`subsampling_interval` for the reflected Politis-Romano form).
        * ``hulc``: adaptive HulC (Kuchibhotla, Balakrishnan and Wasserman 2024,
          Algorithm 1 with the median bias estimated by subsampling):
          Delta = |mean(T_s <= T) - 1/2| over ``n_resamples`` subsamples of
          s = round(n^(2/3)) rows, the randomised number of splits B of
          :func:`hulc_n_splits`, and the interval ``[min, max]`` of T over B
          disjoint random splits.  When B > n it returns (-inf, inf).
    alpha : float
        Significance level.
    estimate : float, optional
        T of all rows (computed when omitted).
    n_resamples : int, optional
        Default 500.
    rng : None, int or numpy.random.Generator
    block_size : int, optional
        Resamples per block (default: about 2^15 index entries per block).
        The result does not depend on it.
    progress : bool, optional
        Progress bar (tqdm): ``None`` shows one only for long runs in an
        interactive terminal (``sys.stderr.isatty()``) with no ``CI``
        environment variable; ``False`` never.

    Returns
    -------
    ResamplingInterval
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    gen, seed = resolve_rng(rng)
    R = DEFAULT_N_RESAMPLES if n_resamples is None else check_count(n_resamples, "n_resamples", 2)
    n = rows.n
    if estimate is None:
        estimate = float(resample_statistic(rows, np.arange(n, dtype=np.intp)[None, :])[0])
    kw: dict[str, Any] = dict(block_size=block_size, progress=progress)
    if method == "bootstrap":
        est = bootstrap_estimates(rows, R, gen, **kw)
        lo, hi = percentile_interval(est, alpha)
        return ResamplingInterval(method, lo, hi, estimate, alpha, est, R, n, seed, n=n)
    if method == "subsampling":
        b = subsample_size(n)
        est = subsample_estimates(rows, b, R, gen, **kw)
        lo, hi = subsampling_interval(estimate, est, n, b, alpha)
        return ResamplingInterval(method, lo, hi, estimate, alpha, est, R, b, seed, n=n)
    s = hulc_subsample_size(n)
    bias_est = subsample_estimates(rows, s, R, gen, **kw)
    delta = median_bias(estimate, bias_est)
    B = hulc_n_splits(alpha, delta, u=float(gen.random()), max_splits=n)
    if B is None:
        return ResamplingInterval(method, -math.inf, math.inf, estimate, alpha, np.empty(0), R, s, seed,
                                  None, delta, bias_est, n=n)
    splits = hulc_split_estimates(rows, B, gen)
    return ResamplingInterval(method, float(splits.min()), float(splits.max()), estimate, alpha, splits, R, s,
                              seed, B, delta, bias_est, n=n)


def interval_from_estimates(method: str, estimate: float, estimates: np.ndarray, *, n: int | None, size: int,
                            alpha: float) -> tuple[float, float]:
    """Recompute a bootstrap or subsampling interval at another alpha from stored statistics.

    HulC cannot be recomputed: its number of splits depends on alpha, so the
    stored split estimates do not determine the interval at another level.
    """
    if method == "bootstrap":
        return percentile_interval(estimates, alpha)
    if method == "subsampling":
        if n is None:
            raise ValueError("a subsampling interval needs n, the number of rows it was computed from")
        return subsampling_interval(estimate, estimates, n, size, alpha)
    if method == "hulc":
        raise ValueError("a HulC interval cannot be recomputed at another alpha: its number of splits "
                         "depends on alpha; call calib_ci(..., method='hulc', alpha=...) again")
    raise ValueError(f"unknown resampling method {method!r}")


def clip_interval(lower: float, upper: float) -> tuple[float, float, bool]:
    """Intersect ``[lower, upper]`` with [0, inf): ``(max(lower, 0), max(upper, 0), 0 in [lower, upper])``."""
    return max(lower, 0.0), max(upper, 0.0), bool(lower <= 0.0 <= upper)
