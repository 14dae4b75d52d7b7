"""Per-bin sufficient statistics, and T and sigma1^2 computed from them.

Everything the adjusted interval needs is a function of additive per-bin sums
(``docs/conventions.md``, "The estimator and its variances"): for bin b, the count c_b,
S_b = sum U, Q_b = sum ||U||^2 and M_b = sum U U^T.  The bin table also uses
the sum of the binned vectors, sum z.  Because the sums are additive, the same
object serves in-memory data, chunked files and distributed frames: two
``BinStats`` of disjoint rows merge into the ``BinStats`` of their union.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibtest.options import check_memory
from calibtest.core.arrays import read_only
from calibtest.core.binning import group_keys

__all__ = ["BinStats", "bin_sums", "column_sums", "merge_stats", "debiased_statistic", "plugin_statistic", "sigma1_sq",
           "sigma1_sq_quadratic", "sparse_bin_sums", "second_order_variance",
           "second_order_sums", "second_order_from_sums"]



def column_sums(inverse: np.ndarray, values: np.ndarray, m: int) -> np.ndarray:
    """Per-bin sums of each column of ``values`` (n, p) -> (m, p): ``np.bincount`` per column (a loop over the
    p columns only)."""
    out = np.empty((m, values.shape[1]))
    for j in range(values.shape[1]):
        out[:, j] = np.bincount(inverse, weights=values[:, j], minlength=m)
    return out

@dataclass(frozen=True, eq=False)
class BinStats:
    """Additive per-bin sums of the non-empty bins.

    Attributes
    ----------
    keys : ndarray of int64, shape (m, q)
        Integer key of each non-empty bin (cube indices ``i/B <= z < (i+1)/B`` for the
        cube partition).
    count : ndarray of float64, shape (m,)
        c_b, rows per bin.
    sum_u : ndarray, shape (m, d)
        S_b = sum of U over the bin.
    sum_uu : ndarray, shape (m, d, d)
        M_b = sum of U U^T over the bin (its trace is Q_b = sum ||U||^2).
    sum_z : ndarray, shape (m, d)
        Sum of the binned prediction vectors over the bin.
    sum_zz : ndarray, shape (m, d, d), or None
        Sum of z z^T over the bin (full calibration only: with ``sum_tr`` it
        gives the second-order variance, :func:`second_order_from_sums`).
    sum_tr : ndarray, shape (m,), or None
        Sum of tr(Sigma_a^2) = ||z||^2 - 2 ||z||_3^3 + ||z||^4 over the bin (full calibration only).
    null_sums : ndarray, shape (m, w), or None
        The additive per-bin sums of the conditional null's moments
        (:func:`calibtest.core.conditional.conditional_sum_columns`), kept by
        the streaming backends so that files, Dask frames and accumulators get
        the conditional null of the rows in memory; None on the in-memory path,
        which computes them from the rows.
    """

    keys: np.ndarray
    count: np.ndarray
    sum_u: np.ndarray
    sum_uu: np.ndarray
    sum_z: np.ndarray
    sum_zz: np.ndarray | None = None
    sum_tr: np.ndarray | None = None
    null_sums: np.ndarray | None = None

    def __post_init__(self):
        for name in ("keys", "count", "sum_u", "sum_uu", "sum_z", "sum_zz", "sum_tr", "null_sums"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, read_only(getattr(self, name)))

    @property
    def n(self) -> int:
        """Total number of rows."""
        return int(round(self.count.sum()))

    @property
    def dim(self) -> int:
        """Dimension d of U."""
        return self.sum_u.shape[1]

    @property
    def sum_sq(self) -> np.ndarray:
        """Q_b = sum of ||U||^2 over each bin (trace of ``sum_uu``)."""
        return np.trace(self.sum_uu, axis1=1, axis2=2)

    def merge(self, other: "BinStats") -> "BinStats":
        """Sums of the union of two disjoint row sets binned the same way (see :func:`merge_stats`)."""
        return merge_stats([self, other])


def _bincount_columns(inverse: np.ndarray, values: np.ndarray, m: int) -> np.ndarray:
    """Per-bin sums of each column of ``values`` (shape (n, p)) -> (m, p)."""
    columns = np.ascontiguousarray(values.T)
    out = np.empty((m, columns.shape[0]))
    for j, col in enumerate(columns):  # loop over the few columns, not rows or bins
        out[:, j] = np.bincount(inverse, weights=col, minlength=m)
    return out


def merge_stats(parts) -> BinStats:
    """Merge the per-bin sums of any number of disjoint row sets in one pass.

    Bins with equal keys are added: count, S_b, M_b and sum z of the union are
    the sums of the parts' (the sums are additive), as are the optional sums
    (``sum_zz``, ``sum_tr``, ``null_sums``) when every part has them.  The keys are grouped with
    :func:`calibtest.core.binning.group_keys` on the linear key (a ``bincount``
    lookup or a 1-d sort) and each column summed with ``np.bincount``, so
    merging p parts holding M bins in all costs O(M log M) at worst, however
    many parts; the merged bins are the non-empty ones, in the order of the
    linear key (:func:`group_keys`).

    Parameters
    ----------
    parts : sequence of BinStats
        Sums of disjoint row sets binned on the same partition.

    Returns
    -------
    BinStats
    """
    parts = list(parts)
    if not parts:
        raise ValueError("merge_stats needs at least one BinStats")
    d, q = parts[0].dim, parts[0].keys.shape[1]
    if any(p.dim != d or p.keys.shape[1] != q for p in parts):
        raise ValueError("cannot merge BinStats of different dimensions")
    if len(parts) == 1:
        return parts[0]
    keys = np.concatenate([p.keys for p in parts])
    if keys.shape[0] == 0:
        return parts[0]
    if keys.min() < 0:
        raise ValueError("bin keys must be non-negative integers")
    inverse, uniq = group_keys(keys, keys.max(axis=0) + 1)
    m = uniq.shape[0]

    def add(name: str) -> np.ndarray:
        tail = getattr(parts[0], name).shape[1:]
        width = int(np.prod(tail, dtype=np.int64))
        stacked = np.concatenate([getattr(p, name).reshape(p.keys.shape[0], width) for p in parts])
        return _bincount_columns(inverse, stacked, m).reshape((m,) + tail)

    arrays = {"keys": uniq, "count": add("count"), "sum_u": add("sum_u"), "sum_uu": add("sum_uu"),
              "sum_z": add("sum_z")}
    if all(p.sum_zz is not None and p.sum_tr is not None for p in parts):
        arrays.update(sum_zz=add("sum_zz"), sum_tr=add("sum_tr"))
    if all(p.null_sums is not None for p in parts):
        arrays["null_sums"] = add("null_sums")
    occupied = arrays["count"] > 0  # group_keys may number every key of a small key space
    if not occupied.all():
        arrays = {name: a[occupied] for name, a in arrays.items()}
    return BinStats(**arrays)


def bin_sums(inverse: np.ndarray, keys: np.ndarray, u: np.ndarray, z: np.ndarray, count=None) -> BinStats:
    """Accumulate the per-bin sums of U, U U^T and z; empty bins are dropped.

    Parameters
    ----------
    inverse : ndarray of intp, shape (n,)
        Bin number of each row (from :func:`calibtest.core.binning.group_keys`).
    keys : ndarray, shape (m, q)
        Key of each bin number.
    u : ndarray, shape (n, d)
        U = Y - Z for each row.
    z : ndarray, shape (n, d)
        The binned prediction vector of each row.
    count : ndarray, shape (m,), optional
        Rows per bin, when the caller already has them (a partition does).

    Notes
    -----
    Cost O(n d^2) with one ``np.bincount`` per column; only the upper triangle
    of U U^T is accumulated.
    """
    m = keys.shape[0]
    n, d = u.shape
    check_memory(8.0 * (n * d * (d + 1) / 2 + 2.0 * m * d * d),
                 f"the per-bin sums of U U^T for {d} binned coordinates ({n} rows, {m} bins)",
                 "use fewer coordinates (a smaller k) or fewer bins")
    count = np.bincount(inverse, minlength=m) if count is None else count
    count = np.asarray(count, dtype=np.float64)
    sum_u = _bincount_columns(inverse, u, m)
    sum_z = _bincount_columns(inverse, z, m)
    iu, ju = np.triu_indices(d)
    products = u * u if d == 1 else u[:, iu] * u[:, ju]
    upper = _bincount_columns(inverse, products, m)
    sum_uu = np.empty((m, d, d))
    sum_uu[:, iu, ju] = upper
    sum_uu[:, ju, iu] = upper
    occupied = count > 0
    if not occupied.all():
        keys, count, sum_u, sum_uu, sum_z = (a[occupied] for a in (keys, count, sum_u, sum_uu, sum_z))
    return BinStats(keys, count, sum_u, sum_uu, sum_z)


def debiased_statistic(stats: BinStats, n: int | None = None) -> float:
    """The debiased estimator T of the paper's eq. (6).

    T = (1/n) * sum over bins with c_b >= 2 of (||S_b||^2 - Q_b) / (c_b - 1),

    which equals (1/n) sum_b 1/(c_b - 1) sum_{a != b in bin} U_a^T U_b.
    """
    n = stats.n if n is None else n
    c = stats.count
    keep = c >= 2
    num = np.einsum("bi,bi->b", stats.sum_u, stats.sum_u) - stats.sum_sq
    return float(np.sum(num[keep] / (c[keep] - 1.0)) / n)


def plugin_statistic(stats: BinStats, n: int | None = None) -> float:
    """The biased plug-in estimate T_m of the paper's eq. (2).

    T_m = sum_b (c_b / n) ||S_b / c_b||^2 = (1/n) sum_b ||S_b||^2 / c_b.
    """
    n = stats.n if n is None else n
    return float(np.sum(np.einsum("bi,bi->b", stats.sum_u, stats.sum_u) / stats.count) / n)


def sigma1_sq(stats: BinStats, n: int | None = None) -> float:
    """Plug-in variance of the miscalibrated regime, the paper's eq. (8).

    With mu_b = S_b / c_b, Cov_b = M_b / c_b - mu_b mu_b^T and p_b = c_b / n,
    over all non-empty bins::

        sigma1^2 = sum p_b ||mu_b||^4 - (sum p_b ||mu_b||^2)^2
                   + 4 sum p_b mu_b^T Cov_b mu_b.
    """
    n = stats.n if n is None else n
    c = stats.count
    p = c / n
    mu = stats.sum_u / c[:, None]
    mu_sq = np.einsum("bi,bi->b", mu, mu)
    cov = stats.sum_uu / c[:, None, None] - mu[:, :, None] * mu[:, None, :]
    quad = np.einsum("bi,bij,bj->b", mu, cov, mu)
    value = np.sum(p * mu_sq**2) - np.sum(p * mu_sq) ** 2 + 4.0 * np.sum(p * quad)
    return float(max(value, 0.0))


def sigma1_sq_quadratic(stats: BinStats) -> float:
    """sigma1^2 of the paper's eq. (8) without forming Cov_b.

    Same quantity as :func:`calibtest.core.binstats.sigma1_sq`, using
    mu_b^T Cov_b mu_b = mu_b^T M_b mu_b / c_b - ||mu_b||^4 (M_b = sum U U^T), so
    no (m, K, K) temporaries are built: with K = 10 and a million cells the
    covariance arrays would be 800 MB each.
    """
    n = stats.n
    c = stats.count
    p = c / n
    mu = stats.sum_u / c[:, None]
    mu_sq = np.einsum("bi,bi->b", mu, mu)
    quad = np.einsum("bi,bij,bj->b", mu, stats.sum_uu, mu) / c - mu_sq**2
    value = np.sum(p * mu_sq**2) - np.sum(p * mu_sq) ** 2 + 4.0 * np.sum(p * quad)
    return float(max(value, 0.0))


def sparse_bin_sums(inverse: np.ndarray, keys: np.ndarray, u: np.ndarray, z: np.ndarray) -> BinStats:
    """:func:`calibtest.core.binstats.bin_sums` for partitions whose bins hold few rows each.

    Full calibration with many classes has up to B^(K-1) cells, most holding
    one row, and a K-dimensional U: ``bin_sums`` would make K(K+1)/2 bincount
    passes over as many bins as rows.  Here one row of each non-empty bin
    contributes directly (its outer product U U^T is one vectorised
    broadcast), and only the remaining rows go through ``bin_sums``, on the
    bins they occupy.  Same sums up to the order of floating-point additions;
    with fewer than n/8 non-empty bins ``bin_sums`` itself is used.
    """
    n = inverse.shape[0]
    m = keys.shape[0]
    rep = np.full(m, -1, dtype=np.intp)
    rep[inverse] = np.arange(n)                       # some row of each non-empty bin
    occupied = np.flatnonzero(rep >= 0)
    if occupied.size * 8 < n:
        return bin_sums(inverse, keys, u, z)
    first = rep[occupied]
    count = np.ones(occupied.size)
    sum_u = u[first]                                   # fancy indexing: fresh arrays
    sum_z = z[first]
    sum_uu = np.einsum("bi,bj->bij", sum_u, sum_u)     # before the remaining rows are added
    rest = np.ones(n, dtype=bool)
    rest[first] = False
    if rest.any():
        slot = np.empty(m, dtype=np.intp)
        slot[occupied] = np.arange(occupied.size)
        where, local = np.unique(slot[inverse[rest]], return_inverse=True)
        part = bin_sums(local.ravel(), where[:, None], u[rest], z[rest])
        at = part.keys[:, 0]
        count[at] += part.count
        sum_u[at] += part.sum_u
        sum_z[at] += part.sum_z
        sum_uu[at] += part.sum_uu
    return BinStats(keys[occupied], count, sum_u, sum_uu, sum_z)


def second_order_variance(z: np.ndarray, inverse: np.ndarray, n: int | None = None) -> float:
    """The second-order (degenerate) part of Var(T | Z) for the full calibration target.

    With U_a = Y_a - z_a and, given the predictions, independent rows of mean
    m_a and covariance Sigma_a, T = (1/n) sum_b (c_b - 1)^-1 sum_{a != a' in b} U_a^T U_a'
    has the Hoeffding decomposition T = E[T | Z] + linear part + quadratic part,
    and the quadratic part (a degenerate U-statistic) has variance

        V2 = (2 / n^2) sum_{b: c_b >= 2} (c_b - 1)^-2 sum_{a != a' in b} tr(Sigma_a Sigma_a').

    The paper's sigma1^2 / n (eq. (8)) is the variance of the linear part at a
    fixed partition; V2 is of order (number of cells) / n^2, negligible when
    the cells hold many rows but as large as sigma1^2 / n when they hold a few
    (full calibration on the simplex).  Sigma_a is taken as
    diag(z_a) - z_a z_a^T, the covariance of the label vector under
    calibration, so V2 is exactly the conditional null variance of T (the
    variance of :func:`calibtest.core.conditional.conditional_moments`) and a
    function of the predictions only.  With A_b = sum z_a and
    G_b = sum z_a z_a^T over the cell,

        sum_{a != a'} tr(Sigma_a Sigma_a') = tr(S_b^2) - sum_a tr(Sigma_a^2),
        tr(S_b^2) = ||A_b||^2 - 2 sum_k A_bk G_bkk + ||G_b||_F^2,
        tr(Sigma_a^2) = ||z_a||^2 - 2 ||z_a||_3^3 + ||z_a||^4,

    with S_b = diag(A_b) - G_b.

    Parameters
    ----------
    z : ndarray, shape (n, K)
        Predicted probability vectors.
    inverse : ndarray of int, shape (n,)
        Cell number of each row.
    n : int, optional
        The 1/n of T (default: the rows of ``z``).

    Returns
    -------
    float
        V2 (0 when no cell holds two rows).

    References
    ----------
    .. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
           l2 Expected Calibration Error", arXiv:2408.08998, 2024, eqs. (6) and (8).
    .. [2] Hoeffding, "A class of statistics with asymptotically normal
           distribution", Ann. Math. Statist. 19 (1948).
    """
    z = np.asarray(z, dtype=np.float64)
    inverse = np.asarray(inverse, dtype=np.intp)
    n = z.shape[0] if n is None else int(n)
    m = int(inverse.max()) + 1 if inverse.size else 0
    count = np.bincount(inverse, minlength=m).astype(np.float64)
    sum_z, sum_zz, sum_tr = second_order_sums(z, inverse, m)
    return second_order_from_sums(count, sum_z, sum_zz, sum_tr, n)


def _row_trace_sq(z: np.ndarray) -> np.ndarray:
    """tr(Sigma_a^2) = ||z||^2 - 2 ||z||_3^3 + ||z||^4 for Sigma_a = diag(z_a) - z_a z_a^T, per row."""
    sq = np.einsum("ak,ak->a", z, z)
    return sq - 2.0 * np.einsum("ak,ak,ak->a", z, z, z) + sq * sq


def second_order_sums(z: np.ndarray, inverse: np.ndarray, m: int):
    """Additive per-cell sums ``(sum z, sum z z^T, sum tr(Sigma_a^2))`` that give V2 (shapes (m,K), (m,K,K), (m,))."""
    K = z.shape[1]
    iu, ju = np.triu_indices(K)
    upper = _bincount_columns(inverse, z[:, iu] * z[:, ju], m)
    zz = np.empty((m, K, K))
    zz[:, iu, ju] = upper
    zz[:, ju, iu] = upper
    return (_bincount_columns(inverse, z, m), zz,
            np.bincount(inverse, weights=_row_trace_sq(z), minlength=m))


def second_order_from_sums(count, sum_z, sum_zz, sum_tr, n: int) -> float:
    """V2 of :func:`second_order_variance` from the additive per-cell sums (cells with c_b >= 2 enter)."""
    count = np.asarray(count, dtype=np.float64)
    keep = count >= 2
    if not keep.any():
        return 0.0
    A, G, c = np.asarray(sum_z)[keep], np.asarray(sum_zz)[keep], count[keep]
    diag = np.einsum("bkk->bk", G)
    tr_s2 = np.einsum("bk,bk->b", A, A) - 2.0 * np.einsum("bk,bk->b", A, diag) + np.einsum("bij,bij->b", G, G)
    pairs = tr_s2 - np.asarray(sum_tr)[keep]
    return float(max(2.0 * np.sum(pairs / (c - 1.0) ** 2) / float(n) ** 2, 0.0))
