"""T-Cal's statistic and consistency-resampling threshold (array level, no result objects).

Statistics (per bin b: count c_b, S_b = sum of U, Q_b = sum of ||U||^2):

* ``"tcal"`` -- the authors' debiased plug-in estimator (DPE) of ECE^2,
  ``(1/n) sum_b (||S_b||^2 - Q_b) / c_b`` (``plugin_ece(..., debias=True)`` in
  the authors' code, github.com/dh7401/T-Cal, ``utils.py``; bins with
  c_b = 1 contribute 0);
* ``"debiased"`` -- ``(1/n) sum_{c_b >= 2} (||S_b||^2 - Q_b) / (c_b - 1)``, the
  unbiased estimator of the binned ECE^2 of Sun, Chaudhari, Barnett and
  Dobriban, eq. (6) (equal to ``calib_ci(...).estimate``).

Consistency resampling (Lee, Huang, Hassani and Dobriban 2023, Section 4.1):
draw the predictions Z*_1..Z*_n with replacement from the observed ones,
draw each label from its own prediction, Y* ~ Categorical(Z*) (the
resampled model is calibrated by construction), and recompute the
statistic on the same bins.  Every resampled data set of a block is handled
by one set of ``np.bincount`` calls.

Monte Carlo decision (R draws T*_1..T*_R): p-value = (1 + #{T*_r >= T}) / (R + 1);
threshold = the (R - j)-th smallest T*_r with j = floor(alpha (R + 1)) - 1
(infinite when j < 0); T > threshold if and only if p-value <= alpha.  The
test can reject only when (R + 1) alpha >= 1 (:func:`min_draws`).  The
authors' code instead compares T with ``np.quantile(T*, 1 - alpha / L)``
(linear interpolation, 3000 draws); at levels below 1 / (R + 1) that
interpolates between the two largest draws, and its size can exceed the
level, so calibtest keeps the exact Monte Carlo rule and chooses R large
enough (:func:`default_draws`).

References
----------
.. [1] Lee, Huang, Hassani and Dobriban, "T-Cal: An optimal test for the
       calibration of predictive models", Journal of Machine Learning
       Research 24(335), 2023.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from calibtest.core.progress import make_bar
from calibtest.options import OPTIONS, OptionError, check_option, check_seed
from calibtest.core.binstats import BinStats, bin_sums, debiased_statistic
from calibtest.core.resampling import BLOCK_ELEMENTS, GatherWork, _squares, _want_progress, multiset_statistics

__all__ = ["TCalCore", "DrawRun", "tcal_statistic_threshold", "tcal_reject", "adaptive_scales", "STATISTICS", "tcal_statistic",
           "min_draws", "default_draws", "DEFAULT_DRAWS", "DRAWS_MARGIN"]

#: The statistics of T-Cal: the authors' (divide by c_b) and calib_ci's debiased one (c_b - 1).
STATISTICS = OPTIONS["statistic"].choices

#: Monte Carlo draws of the authors' adaptive T-Cal (``MC_trials=3000``); the default's floor.
DEFAULT_DRAWS = 3000

#: The default R makes (R + 1) * level >= DRAWS_MARGIN: the threshold is at worst the
#: DRAWS_MARGIN-th largest draw, never a single extreme draw.
DRAWS_MARGIN = 2

_FLOOR_TOL = 1e-9  # the tolerance of floor(level * (R + 1)) in _mc_decision


def _rank_at(level: float, R: int) -> int:
    """j + 1 = floor(level (R + 1)): the threshold is the (j + 1)-th largest of R draws (0: none)."""
    return int(math.floor(level * (R + 1) + _FLOOR_TOL))


def min_draws(level: float, rank: int = 1) -> int:
    """Smallest R with floor(level (R + 1)) >= ``rank`` (``rank = 1``: the test can reject at all).

    With fewer draws the Monte Carlo threshold at ``level`` (the per-scale
    level alpha / L) is infinite and the test cannot reject.
    """
    R = max(1, int(math.ceil(rank / level)) - 1)
    while _rank_at(level, R) < rank:  # at most a step or two of float rounding
        R += 1
    while R > 1 and _rank_at(level, R - 1) >= rank:
        R -= 1
    return R


def default_draws(alpha: float, n_scales: int = 1) -> int:
    """Default Monte Carlo draws R for overall level ``alpha`` over ``n_scales`` scales (Bonferroni).

    R = max(3000, smallest R with (R + 1) alpha / L >= 2): the authors' 3000
    draws, raised when the per-scale level alpha / L is so small that the
    threshold would be one of the two largest draws.
    """
    return max(DEFAULT_DRAWS, min_draws(alpha / n_scales, DRAWS_MARGIN))


def check_draws(R: int, level: float, message: str = "") -> int:
    """R checked as the table's ``n_draws`` (an integer >= 1) and against ``level``; returns R as an int.

    Raises ``OptionTypeError`` for a non-integer and ``OptionError`` (a
    ValueError) for R < 1 or when R draws cannot reject at ``level`` (the
    interplay of ``n_draws`` with ``alpha`` and the number of scales).
    """
    R = check_option("n_draws", R)
    need = min_draws(level)
    if R < need:
        raise OptionError(f"n_draws={R} is too small: the Monte Carlo test at level {level:.4g}{message} "
                          f"needs (n_draws + 1) * level >= 1, i.e. n_draws >= {need}, or it can never "
                          "reject; increase n_draws or leave n_draws=None (chosen automatically)")
    return R


def tcal_statistic(stats: BinStats, n: int | None = None) -> float:
    """The authors' debiased plug-in estimator of ECE^2 (T-Cal's statistic).

    (1/n) sum over bins with c_b >= 2 of (||S_b||^2 - Q_b) / c_b (a bin with one
    row has ||S_b||^2 = Q_b and contributes 0, as in the authors' code).
    """
    n = stats.n if n is None else n
    c = stats.count
    keep = c >= 2
    num = np.einsum("bi,bi->b", stats.sum_u, stats.sum_u) - stats.sum_sq
    return float(np.sum(num[keep] / c[keep]) / n)


# --------------------------------------------------------------------------- array core
@dataclass(frozen=True, eq=False)
class TCalCore:
    """Per-scale output of :func:`tcal_statistic_threshold` (arrays of length L = number of scales).

    Attributes
    ----------
    statistic : ndarray, shape (L,)
        The statistic (T-Cal's or the debiased T) on the observed data at each scale.
    threshold : ndarray, shape (L,)
        Monte Carlo threshold at the given level (finite: too few draws raise).
    pvalue : ndarray, shape (L,)
        Monte Carlo p-value (1 + #{T* >= T}) / (R + 1).
    null_draws : ndarray, shape (L, R)
        The resampled statistics T*.
    """

    statistic: np.ndarray
    threshold: np.ndarray
    pvalue: np.ndarray
    null_draws: np.ndarray = field(repr=False)


def _as_rng(rng) -> np.random.Generator:
    rng = check_seed(rng)
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def _category_probs(z: np.ndarray, full: bool) -> np.ndarray:
    """Label distribution of each row: classes 1..d with probability z_j, plus "none" unless ``full``.

    Rows are renormalised to sum to 1 (they do within ``ROW_SUM_TOL``); the
    "none" mass 1 - sum z is clipped at 0.
    """
    p = z if full else np.column_stack([z, np.maximum(1.0 - z.sum(axis=1), 0.0)])
    return p / p.sum(axis=1, keepdims=True)


def _alias_tables(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Walker/Vose alias tables of the categorical rows of ``p`` (n, c), vectorised over rows.

    Drawing J uniform on 0..c-1 and V ~ U(0, 1), the label is J if V < prob[J]
    and alias[J] otherwise; label l then has probability
    (prob[l] + sum_{j: alias[j] = l} (1 - prob[j])) / c = p[l].  Each of the c - 1
    steps pairs the smallest remaining scaled mass (<= 1) with the largest (>= 1).
    Returns ``prob`` and ``alias`` flattened row by row (entry i * c + j).
    """
    n, c = p.shape
    scaled = p * c
    prob = np.ones((n, c))
    alias = np.tile(np.arange(c), (n, 1))
    active = np.ones((n, c), dtype=bool)
    rows = np.arange(n)
    for _ in range(c - 1):  # loop over the c categories, vectorised over rows
        small = np.where(active, scaled, np.inf).argmin(axis=1)
        large = np.where(active, scaled, -np.inf).argmax(axis=1)
        prob[rows, small] = scaled[rows, small]
        alias[rows, small] = large
        scaled[rows, large] -= 1.0 - scaled[rows, small]
        active[rows, small] = False
    return prob.ravel(), alias.ravel()


def _helmert(d: int) -> np.ndarray:
    """Orthonormal basis (d, d - 1) of the vectors whose coordinates sum to zero (Helmert contrasts)."""
    h = np.zeros((d, d - 1))
    for j in range(1, d):  # loop over the d - 1 basis vectors
        h[:j, j - 1] = 1.0 / math.sqrt(j * (j + 1))
        h[j, j - 1] = -j / math.sqrt(j * (j + 1))
    return h


@dataclass(frozen=True, eq=False)
class _PairTables:
    """Everything a consistency resample needs, per (row, label) pair p = row * c + label.

    Attributes
    ----------
    prob, alias : ndarray, shape (n * c,)
        Alias tables: pair p is kept with probability prob[p], else replaced by alias[p].
    choice : ndarray, shape (2 n c,)
        The pair drawn from cell f and coin k (1: kept, 0: not): entry 2 f + k,
        i.e. ``choice[2 f] = alias[f]`` and ``choice[2 f + 1] = f`` (one gather
        in place of a gather of ``alias`` and a masked copy).
    cols : tuple of ndarray, shape (n * c,)
        Coordinates of U* = onehot(label) - z_row; in full mode expressed in an
        orthonormal basis of the sum-zero hyperplane (K - 1 coordinates, the
        same norms and inner products since U* sums to 0).
    sq : ndarray, shape (n * c,)
        ||U*||^2 in the same coordinates.
    c : int
        Categories per row (d + 1 with "none", or K in full mode).
    bins : tuple of ndarray, shape (n * c,)
        Bin number of each pair at each scale: a copy keeps its row's bin.
    sizes : tuple of int
        Number of bins m at each scale.
    """

    prob: np.ndarray
    alias: np.ndarray
    choice: np.ndarray
    cols: tuple
    sq: np.ndarray
    c: int
    bins: tuple
    sizes: tuple


def _pair_tables(z: np.ndarray, full: bool, bins, sizes) -> _PairTables:
    """Alias tables, U* coordinates and bins of every (row, label) pair (``bins``: per scale, per row)."""
    p = _category_probs(z, full)
    n, c = p.shape
    prob, alias = _alias_tables(p)
    alias_pair = np.repeat(np.arange(n) * c, c) + alias
    d = z.shape[1]
    onehot = np.vstack([np.eye(d), np.zeros((1, d))])[:c] if not full else np.eye(d)
    u = (onehot[None, :, :] - z[:, None, :]).reshape(n * c, d)
    if full and d > 1:
        u = u @ _helmert(d)
    cols = tuple(np.ascontiguousarray(u[:, j]) for j in range(u.shape[1]))
    pair_bins = [np.repeat(np.asarray(b, dtype=np.intp), c) for b in bins]  # loop over the few scales
    choice = np.column_stack([alias_pair, np.arange(n * c)]).ravel()
    return _PairTables(prob=prob, alias=alias_pair, choice=choice, cols=cols, sq=np.einsum("ij,ij->i", u, u), c=c,
                       bins=tuple(pair_bins), sizes=tuple(sizes))


class _DrawBuffers:
    """Work arrays of :func:`_draw_pairs` for blocks of up to ``size`` resamples of ``n`` rows, reused block
    after block (a fresh array per block costs more in page faults than the arithmetic on it)."""

    def __init__(self, size: int, n: int, d: int = 1):
        self.u = np.empty((size, n))
        self.cell = np.empty((size, n), dtype=np.intp)
        self.prob = np.empty((size, n))
        self.keep = np.empty((size, n), dtype=bool)
        self.pairs = np.empty((size, n), dtype=np.intp)
        # the statistics' gathers reuse the arrays that are free once the pairs are drawn
        self.gather = GatherWork(size * n, d, cols=[self.u.reshape(-1)], sq=self.prob.reshape(-1),
                                 key=self.cell.reshape(-1))

    def first(self, size: int) -> tuple:
        """The buffers' first ``size`` rows (contiguous views)."""
        return self.u[:size], self.cell[:size], self.prob[:size], self.keep[:size], self.pairs[:size]


def _draw_pairs(gen: np.random.Generator, size: int, n: int, tables: _PairTables,
                buffers: _DrawBuffers | None = None) -> np.ndarray:
    """One block of consistency resamples as (row, label) pair numbers, shape (size, n).

    One uniform u per copy gives both the row and the label: x = u * n * c,
    f = floor(x) is a uniform (row, column) cell of the alias table and
    V = x - f its uniform coin (exact up to a relative error n c / 2^53); the
    pair is f if V < prob[f], else alias[f], read as ``choice[2 f + (V < prob[f])]``.
    Copy r of a block always uses
    the r-th run of n doubles of the stream, so the draws do not depend on the
    block size.  With ``buffers`` every step writes into them (the result is a
    view of ``buffers.pairs``, overwritten by the next block); the numbers are
    the same.
    """
    buffers = _DrawBuffers(size, n) if buffers is None else buffers
    x, f, prob, keep, pairs = buffers.first(size)
    gen.random(out=x)                           # the same stream as gen.random((size, n))
    np.multiply(x, n * tables.c, out=x)
    np.copyto(f, x, casting="unsafe")           # floor of a non-negative double, as astype(np.intp)
    np.subtract(x, f, out=x)
    np.take(tables.prob, f, out=prob, mode="clip")  # f < n c always: "clip" only avoids take's buffering
    np.less(x, prob, out=keep)
    np.add(f, f, out=f)
    np.add(f, keep, out=f)                      # 2 f + (V < prob[f])
    np.take(tables.choice, f, out=pairs, mode="clip")
    return pairs


def _pair_rows(pairs: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and label of pair numbers (the inverse of p = row * c + label)."""
    return np.divmod(pairs, c)


def _block_statistics(pairs: np.ndarray, tables: _PairTables, statistic: str = "debiased",
                      work: GatherWork | None = None) -> np.ndarray:
    """The statistic of each resampled data set in a block, at each scale: shape (L, D).

    Parameters
    ----------
    pairs : ndarray of int, shape (D, n)
        (row, label) pair number of each copy (from :func:`_draw_pairs`).
    tables : _PairTables
        With the bin of every pair at each scale.
    statistic : {"debiased", "tcal"}
    work : GatherWork, optional
        Work arrays for the gathers (``_DrawBuffers.gather``); the result is the same.

    Notes
    -----
    A copy keeps its row's bin, so pair p = row * c + label lies in bin
    bins[row]; :func:`calibtest.core.resampling.multiset_statistics` then gives
    T = (1/n) sum_{c_b >= 2} (||S_b||^2 - Q_b) / (c_b - 1) of every data set with
    one key and d + 2 bincounts per scale (``statistic="debiased"``), or the
    same with the divisor c_b (``statistic="tcal"``).  No loop over data sets,
    rows or bins.
    """
    return multiset_statistics(tables.bins, tables.sizes, tables.cols, _squares(tables.cols, tables.sq), pairs,
                               pair_divisor_offset=0.0 if statistic == "tcal" else 1.0, work=work)


def _ranks(alpha, L: int, R: int) -> np.ndarray:
    """k_l = floor(alpha_l (R + 1)) per scale: the threshold is the k_l-th largest of R draws (none when 0)."""
    alpha = np.broadcast_to(np.asarray(alpha, dtype=float), (L,))
    return np.floor(alpha * (R + 1) + 1e-9).astype(np.int64)


def _mc_decision(statistic: np.ndarray, draws: np.ndarray, alpha) -> tuple[np.ndarray, np.ndarray]:
    """Threshold and p-value of the Monte Carlo test, per scale (rows of ``draws``)."""
    L, R = draws.shape
    pvalue = (1.0 + (draws >= statistic[:, None]).sum(axis=1)) / (R + 1.0)
    j = _ranks(alpha, L, R) - 1
    ordered = np.sort(draws, axis=1)
    threshold = np.where(j >= 0, ordered[np.arange(L), np.clip(R - 1 - j, 0, R - 1)], np.inf)
    return threshold, pvalue


@dataclass(frozen=True)
class DrawRun:
    """How the resamples of :func:`tcal_statistic_threshold` are run; neither option changes its output.

    Attributes
    ----------
    block_size : int, optional
        Resamples processed together (default: about 2^15 / n); it changes
        memory use only.
    progress : bool, optional
        Progress bar (tqdm) over the resamples on stderr: None (default)
        shows one only for long runs (R n >= 5 10^7 draws) in an interactive
        terminal outside CI (as ``calib_ci``'s resampling methods do), True
        always (a warning if tqdm is missing), False never.
    """

    block_size: int | None = None
    progress: bool | None = None


def tcal_statistic_threshold(z, u, bins, *, alpha=0.05, n_draws: int | None = None, rng=None,
                             full: bool = False, statistic: str = "tcal", run: DrawRun = DrawRun()) -> TCalCore:
    """Statistic and consistency-resampling threshold (array-level T-Cal core).

    Parameters
    ----------
    z : ndarray, shape (n, d)
        Binned prediction vector of each row: p (binary), the top-1 confidence,
        the sorted top-k vector, or the full probability vector (``full=True``).
        A resampled label is class j with probability z_j, otherwise "none".
    u : ndarray, shape (n, d)
        Observed U = Y - Z (gives the observed statistic).
    bins : ndarray of int, shape (n,) or (L, n)
        Bin number (0..m-1) of each row, at one or at L scales.  Bins are a
        function of z, so a resampled row keeps its bin.
    alpha : float or array_like of shape (L,)
        Level of each scale's test (pass alpha / L for a Bonferroni split).
    n_draws : int, optional
        Monte Carlo resamples R; default :func:`default_draws` at the smallest
        level (``max(3000, ...)``).  Fewer than :func:`min_draws` of the
        smallest level raise ``ValueError`` (the test could never reject).
    rng : None, int or numpy.random.Generator
        Seed or generator; the same seed gives the same output.
    full : bool
        ``z`` rows are complete probability vectors (no "none" outcome; rows
        are renormalised to sum to 1 for the label draws).
    statistic : {"tcal", "debiased"}
        The authors' statistic (divisor c_b) or the debiased T (c_b - 1).
    run : DrawRun
        The block size and the progress bar (neither changes the output).

    Returns
    -------
    TCalCore
        ``statistic``, ``threshold``, ``pvalue`` (arrays of length L) and
        ``null_draws`` (L, R).
    """
    null = _NullDraws(z, u, bins, alpha=alpha, n_draws=n_draws, rng=rng, full=full, statistic=statistic,
                      progress=run.progress)
    R, D = null.R, run.block_size or null.block
    draws = np.empty((len(null.sizes), R))
    bar = None
    if _want_progress(run.progress, R * null.n):
        bar = make_bar(R, "T-Cal resamples", unit="resample")
    try:
        for start in range(0, R, D):  # loop over blocks of resamples, not single resamples
            size = min(D, R - start)
            draws[:, start:start + size] = null.next(size)
            if bar is not None:
                bar.update(size)
    finally:
        if bar is not None:
            bar.close()
    threshold, pvalue = _mc_decision(null.observed, draws, alpha)
    return TCalCore(statistic=null.observed, threshold=threshold, pvalue=pvalue, null_draws=draws)


class _NullDraws:
    """The checked inputs, observed statistics and consistency resamples of one T-Cal test.

    ``next(size)`` gives the statistics of the next ``size`` resamples, shape
    (L, size); resample r always uses the r-th run of n doubles of the
    generator, so the draws do not depend on how they are split into blocks.
    """

    def __init__(self, z, u, bins, *, alpha, n_draws, rng, full: bool, statistic: str, progress=None):
        z = np.asarray(z, dtype=np.float64)
        u = np.asarray(u, dtype=np.float64)
        if z.ndim != 2 or u.shape != z.shape:
            raise ValueError(f"z and u must be arrays of the same shape (n, d), got {z.shape} and {u.shape}")
        n = z.shape[0]
        bins = np.atleast_2d(np.asarray(bins))
        if bins.shape[1] != n or bins.dtype.kind not in "iu":
            raise ValueError(f"bins must be integer bin numbers of shape (n,) or (L, n) with n = {n}")
        if bins.min() < 0:
            raise ValueError("bins must be non-negative bin numbers")
        self.statistic = check_option("statistic", statistic)
        check_option("progress", progress)
        smallest = float(np.min(np.asarray(alpha, dtype=float)))
        self.R = check_draws(default_draws(smallest) if n_draws is None else n_draws, smallest)
        self.gen = _as_rng(rng)
        bins = [np.unique(b, return_inverse=True)[1].ravel() for b in bins]  # dense 0..m-1
        self.sizes = [int(b.max()) + 1 for b in bins]
        # the observed statistic (the debiased one exactly as calib_ci computes it)
        stat_fn = tcal_statistic if self.statistic == "tcal" else debiased_statistic
        self.observed = np.array([stat_fn(bin_sums(b, np.arange(m)[:, None], u, z), n)
                                  for b, m in zip(bins, self.sizes)])
        self.tables = _pair_tables(z, full, bins, self.sizes)
        self.n = n
        self.block = max(1, min(self.R, BLOCK_ELEMENTS // max(n, 1)))
        self._buffers: _DrawBuffers | None = None

    def next(self, size: int) -> np.ndarray:
        """Statistics (L, size) of the next ``size`` resamples."""
        if self._buffers is None or self._buffers.u.shape[0] < size:
            self._buffers = _DrawBuffers(size, self.n, len(self.tables.cols))
        pairs = _draw_pairs(self.gen, size, self.n, self.tables, self._buffers)
        return _block_statistics(pairs, self.tables, self.statistic, self._buffers.gather)


def tcal_reject(z, u, bins, *, alpha=0.05, n_draws: int | None = None, rng=None, full: bool = False,
                statistic: str = "tcal", block_size: int | None = None) -> tuple[bool, int]:
    """Whether T-Cal rejects at some scale, drawing resamples only until that is decided.

    The decision of :func:`tcal_statistic_threshold` with the same arguments
    (``any(statistic > threshold)``), without its threshold and p-value.  With
    R draws and k_l = floor(alpha_l (R + 1)), scale l rejects if and only if
    fewer than k_l draws reach its statistic: ``e_l = #{T*_lr >= T_l} < k_l``
    (T_l > the k_l-th largest draw).  After r draws with e_l(r) such draws,

    * scale l cannot reject once e_l(r) >= k_l (e_l only grows);
    * scale l rejects whatever follows once e_l(r) + (R - r) < k_l,

    so the draws stop when one scale is sure to reject or every scale is sure
    not to.  Draw r uses the same doubles of the stream as in
    :func:`tcal_statistic_threshold`, so the decision is the same; the
    generator is left after the last draw made.  Each block is at most as
    long as the fewest draws that could settle an undecided scale, so no
    draw beyond the deciding block is made.

    Parameters
    ----------
    z, u, bins, alpha, n_draws, rng, full, statistic
        As in :func:`tcal_statistic_threshold`.
    block_size : int, optional
        Most resamples per block (default about 2^15 / n); it does not change the decision.

    Returns
    -------
    reject : bool
    draws : int
        Resamples drawn (at most R).
    """
    null = _NullDraws(z, u, bins, alpha=alpha, n_draws=n_draws, rng=rng, full=full, statistic=statistic)
    R, D = null.R, block_size or null.block
    k = [int(v) for v in _ranks(alpha, len(null.sizes), R)]
    seen = [0] * len(k)  # e_l(r), as Python ints: the loop runs once per block on a few scales
    r = 0
    while True:
        left = R - r
        if any(e + left < k_l for e, k_l in zip(seen, k)):  # a scale rejects whatever the remaining draws
            return True, r
        open_ = [(e, k_l) for e, k_l in zip(seen, k) if e < k_l]
        if not open_:  # no scale can reject
            return False, r
        settle = min(min(k_l - e, e + left - k_l + 1) for e, k_l in open_)  # draws that could settle a scale
        size = min(D, settle)
        hits = np.count_nonzero(null.next(size) >= null.observed[:, None], axis=1)
        seen = [e + int(h) for e, h in zip(seen, hits)]
        r += size


# --------------------------------------------------------------------------- scales
def adaptive_scales(n: int, d: int) -> tuple[int, ...]:
    """Dyadic bin counts 2, 4, ..., 2^L of the adaptive T-Cal test.

    L = max(1, floor((2/d) log2(n / sqrt(log n)))), the end of T-Cal's adaptive
    range m <= (n / sqrt(log n))^(2/d) (d = 1: the reference code's
    ``int(2 * log2(n / sqrt(log n)))``).
    """
    n = max(int(n), 3)
    top = int(math.floor(2.0 / d * math.log2(n / math.sqrt(math.log(n)))))
    return tuple(2 ** b for b in range(1, max(1, top) + 1))


