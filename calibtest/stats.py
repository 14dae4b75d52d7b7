"""Per-bin sufficient statistics, and T and sigma1^2 computed from them.

Everything the adjusted interval needs is a function of additive per-bin sums
(``SPEC.md``, "The estimator and its variances"): for bin b, the count c_b,
S_b = sum U, Q_b = sum ||U||^2 and M_b = sum U U^T.  The bin table also uses
the sum of the binned vectors, sum z.  Because the sums are additive, the same
object serves in-memory data, chunked files and distributed frames: two
``BinStats`` of disjoint rows merge into the ``BinStats`` of their union.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BinStats", "bin_sums", "debiased_statistic", "plugin_statistic", "sigma1_sq"]


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class BinStats:
    """Additive per-bin sums of the non-empty bins.

    Attributes
    ----------
    keys : ndarray of int64, shape (m, q)
        Integer key of each non-empty bin (cube indices ``floor(z*B)`` for the
        cube partition).
    count : ndarray of float64, shape (m,)
        c_b, rows per bin.
    sum_u : ndarray, shape (m, d)
        S_b = sum of U over the bin.
    sum_uu : ndarray, shape (m, d, d)
        M_b = sum of U U^T over the bin (its trace is Q_b = sum ||U||^2).
    sum_z : ndarray, shape (m, d)
        Sum of the binned prediction vectors over the bin.
    """

    keys: np.ndarray
    count: np.ndarray
    sum_u: np.ndarray
    sum_uu: np.ndarray
    sum_z: np.ndarray

    def __post_init__(self):
        for name in ("keys", "count", "sum_u", "sum_uu", "sum_z"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

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
        """Sums of the union of two disjoint row sets binned the same way."""
        if self.dim != other.dim or self.keys.shape[1] != other.keys.shape[1]:
            raise ValueError("cannot merge BinStats of different dimensions")
        keys = np.concatenate([self.keys, other.keys])
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.ravel()
        m = uniq.shape[0]

        def add(a, b):
            stacked = np.concatenate([a, b])
            out = np.zeros((m,) + stacked.shape[1:])
            np.add.at(out, inverse, stacked)
            return out

        return BinStats(uniq, add(self.count, other.count), add(self.sum_u, other.sum_u),
                        add(self.sum_uu, other.sum_uu), add(self.sum_z, other.sum_z))


def _bincount_columns(inverse: np.ndarray, values: np.ndarray, m: int) -> np.ndarray:
    """Per-bin sums of each column of ``values`` (shape (n, p)) -> (m, p)."""
    columns = np.ascontiguousarray(values.T)
    out = np.empty((m, columns.shape[0]))
    for j, col in enumerate(columns):  # loop over the few columns, not rows or bins
        out[:, j] = np.bincount(inverse, weights=col, minlength=m)
    return out


def bin_sums(inverse: np.ndarray, keys: np.ndarray, u: np.ndarray, z: np.ndarray) -> BinStats:
    """Accumulate the per-bin sums of U, U U^T and z; empty bins are dropped.

    Parameters
    ----------
    inverse : ndarray of intp, shape (n,)
        Bin number of each row (from :func:`calibtest.binning.group_keys`).
    keys : ndarray, shape (m, q)
        Key of each bin number.
    u : ndarray, shape (n, d)
        U = Y - Z for each row.
    z : ndarray, shape (n, d)
        The binned prediction vector of each row.

    Notes
    -----
    Cost O(n d^2) with one ``np.bincount`` per column; only the upper triangle
    of U U^T is accumulated.
    """
    m = keys.shape[0]
    d = u.shape[1]
    count = np.bincount(inverse, minlength=m).astype(np.float64)
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
    """The debiased estimator T of the paper's eq. (debiased_estimator).

    T = (1/n) * sum over bins with c_b >= 2 of (||S_b||^2 - Q_b) / (c_b - 1),

    which equals (1/n) sum_b 1/(c_b - 1) sum_{a != b in bin} U_a^T U_b.
    """
    n = stats.n if n is None else n
    c = stats.count
    keep = c >= 2
    num = np.einsum("bi,bi->b", stats.sum_u, stats.sum_u) - stats.sum_sq
    return float(np.sum(num[keep] / (c[keep] - 1.0)) / n)


def plugin_statistic(stats: BinStats, n: int | None = None) -> float:
    """The biased plug-in estimate T_m of the paper's eq. (Hosmer_Lemeshow_version).

    T_m = sum_b (c_b / n) ||S_b / c_b||^2 = (1/n) sum_b ||S_b||^2 / c_b.
    """
    n = stats.n if n is None else n
    return float(np.sum(np.einsum("bi,bi->b", stats.sum_u, stats.sum_u) / stats.count) / n)


def sigma1_sq(stats: BinStats, n: int | None = None) -> float:
    """Plug-in variance of the miscalibrated regime, the paper's eq. (sigma1_plug_in_estimator).

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
