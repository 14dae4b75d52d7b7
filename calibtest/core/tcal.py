"""T-Cal's consistency-resampling threshold for the debiased statistic (array level, no result objects).

Consistency resampling (Lee, Huang, Hassani and Dobriban 2023, Section 4.1):
draw the predictions Z*_1..Z*_n with replacement from the observed ones,
draw each label from its own prediction, Y* ~ Categorical(Z*) (the
resampled model is calibrated by construction), and recompute the debiased
statistic on the same bins.  Every resampled data set of a block is handled
by one set of ``np.bincount`` calls (:func:`calibtest.core.resampling.multiset_statistics`).

Monte Carlo decision (R draws T*_1..T*_R): p-value = (1 + #{T*_r >= T}) / (R + 1);
threshold = the (R - j)-th smallest T*_r with j = floor(alpha (R + 1)) - 1
(infinite when j < 0); T > threshold if and only if p-value <= alpha.

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

from calibtest._validation import check_count, check_seed
from calibtest.core.binstats import bin_sums, debiased_statistic
from calibtest.core.resampling import BLOCK_ELEMENTS, multiset_statistics

__all__ = ["TCalCore", "tcal_statistic_threshold", "adaptive_scales"]


# --------------------------------------------------------------------------- array core
@dataclass(frozen=True, eq=False)
class TCalCore:
    """Per-scale output of :func:`tcal_statistic_threshold` (arrays of length L = number of scales).

    Attributes
    ----------
    statistic : ndarray, shape (L,)
        Debiased T on the observed data at each scale.
    threshold : ndarray, shape (L,)
        Monte Carlo threshold at the given level (``inf`` if R is too small).
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
    return _PairTables(prob=prob, alias=alias_pair, cols=cols, sq=np.einsum("ij,ij->i", u, u), c=c,
                       bins=tuple(pair_bins), sizes=tuple(sizes))


def _draw_pairs(gen: np.random.Generator, size: int, n: int, tables: _PairTables) -> np.ndarray:
    """One block of consistency resamples as (row, label) pair numbers, shape (size, n).

    One uniform u per copy gives both the row and the label: x = u * n * c,
    f = floor(x) is a uniform (row, column) cell of the alias table and
    V = x - f its uniform coin (exact up to a relative error n c / 2^53); the
    pair is f if V < prob[f], else alias[f].  Copy r of a block always uses
    the r-th run of n doubles of the stream, so the draws do not depend on the
    block size.
    """
    x = gen.random((size, n))
    x *= n * tables.c
    f = x.astype(np.intp)
    x -= f
    return np.where(x < tables.prob[f], f, tables.alias[f])


def _pair_rows(pairs: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and label of pair numbers (the inverse of p = row * c + label)."""
    return np.divmod(pairs, c)


def _block_statistics(pairs: np.ndarray, tables: _PairTables) -> np.ndarray:
    """Debiased T of each resampled data set in a block, at each scale: shape (L, D).

    Parameters
    ----------
    pairs : ndarray of int, shape (D, n)
        (row, label) pair number of each copy (from :func:`_draw_pairs`).
    tables : _PairTables
        With the bin of every pair at each scale.

    Notes
    -----
    A copy keeps its row's bin, so pair p = row * c + label lies in bin
    bins[row]; :func:`calibtest.core.resampling.multiset_statistics` then gives
    T = (1/n) sum_{c_b >= 2} (||S_b||^2 - Q_b) / (c_b - 1) of every data set with
    one key and d + 2 bincounts per scale.  No loop over data sets, rows or bins.
    """
    return multiset_statistics(tables.bins, tables.sizes, tables.cols, tables.sq, pairs)


def _mc_decision(statistic: np.ndarray, draws: np.ndarray, alpha) -> tuple[np.ndarray, np.ndarray]:
    """Threshold and p-value of the Monte Carlo test, per scale (rows of ``draws``)."""
    L, R = draws.shape
    alpha = np.broadcast_to(np.asarray(alpha, dtype=float), (L,))
    pvalue = (1.0 + (draws >= statistic[:, None]).sum(axis=1)) / (R + 1.0)
    j = np.floor(alpha * (R + 1) + 1e-9).astype(np.int64) - 1
    ordered = np.sort(draws, axis=1)
    threshold = np.where(j >= 0, ordered[np.arange(L), np.clip(R - 1 - j, 0, R - 1)], np.inf)
    return threshold, pvalue


def tcal_statistic_threshold(z, u, bins, *, alpha=0.05, n_draws: int = 1000, rng=None,
                             full: bool = False, block_size: int | None = None) -> TCalCore:
    """Debiased statistic and consistency-resampling threshold (array-level T-Cal core).

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
    n_draws : int
        Monte Carlo resamples R.
    rng : None, int or numpy.random.Generator
        Seed or generator; the same seed gives the same output.
    full : bool
        ``z`` rows are complete probability vectors (no "none" outcome; rows
        are renormalised to sum to 1 for the label draws).
    block_size : int, optional
        Resamples processed together (default: about 2^15 / n); it changes
        memory use only, not the output.

    Returns
    -------
    TCalCore
        ``statistic``, ``threshold``, ``pvalue`` (arrays of length L) and
        ``null_draws`` (L, R).
    """
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
    R = check_count(n_draws, "n_draws")
    gen = _as_rng(rng)
    bins = [np.unique(b, return_inverse=True)[1].ravel() for b in bins]  # dense 0..m-1
    sizes = [int(b.max()) + 1 for b in bins]
    # the observed statistic exactly as calib_ci computes it
    observed = np.array([debiased_statistic(bin_sums(b, np.arange(m)[:, None], u, z), n)
                         for b, m in zip(bins, sizes)])
    tables = _pair_tables(z, full, bins, sizes)
    D = block_size or max(1, min(R, BLOCK_ELEMENTS // max(n, 1)))
    draws = np.empty((len(sizes), R))
    for start in range(0, R, D):  # loop over blocks of resamples, not single resamples
        size = min(D, R - start)
        draws[:, start:start + size] = _block_statistics(_draw_pairs(gen, size, n, tables), tables)
    threshold, pvalue = _mc_decision(observed, draws, alpha)
    return TCalCore(statistic=observed, threshold=threshold, pvalue=pvalue, null_draws=draws)


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


