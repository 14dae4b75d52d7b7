"""Bin keys for the cube partition of the paper (Section 2.3) and the bin-count rule.

Pure functions: they turn the binned vectors of the rows into integer bin keys
and never look at the labels.

Conventions (``docs/conventions.md``, "Binning"): a coordinate ``z`` goes to the cube index
i with ``i/B <= z < (i+1)/B`` (cubes are half-open), where a value whose float64
product lies on an edge up to rounding, ``|z*B - round(z*B)| <= EDGE_TOL`` (1e-9),
counts as on that edge and goes to the cube above it (so 0.58 at B = 50, whose
product is 28.999999999999996, is in cube 29).  A coordinate exactly 1.0 gets the
index ``B``, a cube of its own.  No row is ever dropped.
"""
from __future__ import annotations

import numpy as np

import math

from dataclasses import dataclass
from typing import cast

from calibtest.options import OptionError, OptionTypeError, is_integer

__all__ = ["EDGE_TOL", "edge_floor", "auto_n_bins", "cube_indices", "group_keys", "resolve_n_bins", "max_n_bins",
           "MAX_CELLS_LOG2", "MAX_SINGLETON_FRACTION", "BinRule", "singleton_fraction", "occupancy_n_bins",
           "fixed_rule"]

#: The automatic rule keeps at most this fraction of the rows in cells of their own (singleton cells,
#: which T cannot use); a partition with more is flagged as approximate.
MAX_SINGLETON_FRACTION = 0.05

#: The cells of a partition number at most 2^MAX_CELLS_LOG2: their volume w = 1 / cells then stays a
#: normal float64 (its square root enters the test's threshold), and B itself at most 2^53, the range in
#: which float64 holds every integer, so that the bin edges i / B are distinct.
MAX_CELLS_LOG2 = 1000

#: A scaled value p = z * B (or a simplex partial sum) within EDGE_TOL of an integer is on that bin edge:
#: predictions on a grid (k/100, verbalized confidences) must not change bin with float64 rounding.
EDGE_TOL = 1e-9

#: Largest dense key space (product of the index ranges) binned with a direct
#: ``bincount`` instead of a sort-based ``np.unique``.
_DENSE_LIMIT = 1 << 22
#: Largest key space whose linear key is used directly as the bin number (bins
#: may then be empty until :func:`calibtest.core.binstats.bin_sums` drops them).
_RAW_LIMIT = 1 << 16


def auto_n_bins(n: int, d: int) -> int:
    """Number of bins per dimension chosen from the sample size.

    ``B = max(2, round(6 / (d + 1) * n ** (2 / (4 + d))))``
    (``docs/conventions.md``, "Number of bins"): the rate ``n^{2/(4s+d)}``
    with ``s = 1`` is the MSE-optimal order of the paper's Remark "Binning
    Scheme"; the constant ``6/(d+1)`` reproduces the bins the paper used
    (d = 1: 19 and 48 bins at n = 100 and 1000; d = 2: 9 and 20).

    Parameters
    ----------
    n : int
        Number of rows.
    d : int
        Dimension of the binned vector (1 for binary/top-1, k for top-k).

    Returns
    -------
    int
        B, the number of bins per dimension.

    Examples
    --------
    >>> from calibtest import auto_n_bins
    >>> auto_n_bins(100, 1), auto_n_bins(1000, 1), auto_n_bins(1000, 2)
    (19, 48, 20)
    """
    return int(max(2, round(6.0 / (d + 1) * n ** (2.0 / (4 + d)))))


def singleton_fraction(counts) -> float:
    """Fraction of the rows that sit alone in their cell: ``#{b : c_b = 1} / sum_b c_b``.

    These rows do not enter the debiased estimator T (a cell needs two rows
    for a pair), so their share of the binned ECE^2 is lost.
    """
    counts = np.asarray(counts)
    total = counts.sum()
    return float(np.count_nonzero(counts == 1) / total) if total else 0.0


@dataclass(frozen=True)
class BinRule:
    """How the number of bins B of a call was chosen, with the inputs of the rule.

    Attributes
    ----------
    rule : {"auto", "rate", "user"}
        ``"auto"``: the rate B_rate reduced until at most
        ``max_singleton_fraction`` of the rows sit in singleton cells (the
        rule of :func:`occupancy_n_bins`, computed from the predictions only);
        ``"rate"``: B_rate alone (rows streamed in chunks, whose predictions
        are not all in memory when B must be fixed); ``"user"``: B given.
    n_bins : int
        The B used.
    rate_n_bins : int
        B_rate = :func:`auto_n_bins` (n, d), the bias-variance rate.
    dim : int
        Dimension d of the binned space.
    singleton_fraction : float
        Fraction of the rows in singleton cells at the B used.
    rate_singleton_fraction : float or None
        The same at B_rate (None when the rule did not look at it).
    max_singleton_fraction : float
        The rule's bound tau (:data:`MAX_SINGLETON_FRACTION`).
    weighted_from : int or None
        With prevalence weights: the automatic B of the unweighted rule, which
        the weighted rule reduced to ``n_bins`` (None otherwise).
    sparse_weight_share, max_sparse_weight_share, sparse_bin_neff : float or None
        With prevalence weights: the share of the weight expected under
        calibration that lies in bins of expected effective size below
        ``sparse_bin_neff``, at the B used, and the rule's bound on it.
    """

    rule: str
    n_bins: int
    rate_n_bins: int
    dim: int
    singleton_fraction: float
    rate_singleton_fraction: float | None
    max_singleton_fraction: float = MAX_SINGLETON_FRACTION
    weighted_from: int | None = None
    sparse_weight_share: float | None = None
    max_sparse_weight_share: float | None = None
    sparse_bin_neff: float | None = None

    def describe(self) -> str:
        """One sentence stating the rule and its inputs."""
        if self.weighted_from is not None:
            share, bound, neff = self.sparse_weight_share, self.max_sparse_weight_share, self.sparse_bin_neff
            if share is None or bound is None or neff is None:
                raise ValueError("BinRule: weighted_from needs sparse_weight_share, max_sparse_weight_share and "
                                 "sparse_bin_neff")
            reached = "" if share <= bound else " (the smallest B allowed; the bound is not met)"
            return (f"B = {self.n_bins}, reduced from the unweighted automatic {self.weighted_from} to the largest B "
                    f"at which at most {100 * bound:.3g}% of the weight expected under "
                    f"calibration (given the predictions and the prevalence weights) lies in bins of expected "
                    f"effective size below {neff:g} ({100 * share:.3g}% at "
                    f"B = {self.n_bins}){reached}.")
        if self.rule == "user":
            return f"B = {self.n_bins} was given (the automatic rate would be {self.rate_n_bins})."
        rate = (f"B_rate = max(2, round(6/(d+1) n^(2/(4+d)))) = {self.rate_n_bins} (d = {self.dim})")
        if self.rule == "rate":
            return f"B = {rate}; the rows were streamed, so the occupancy of the cells was not checked first."
        if self.n_bins == self.rate_n_bins and self.dim == 1 and self.singleton_fraction > self.max_singleton_fraction:
            return (f"B = {rate}, kept in one dimension although {100 * self.singleton_fraction:.3g}% of the rows "
                    f"sit alone in a cell (more than {100 * self.max_singleton_fraction:.3g}%).")
        if self.n_bins == self.rate_n_bins:
            return (f"B = {rate}: {100 * self.singleton_fraction:.3g}% of the rows sit alone in a cell "
                    f"(at most {100 * self.max_singleton_fraction:.3g}% allowed).")
        reached = "" if self.singleton_fraction <= self.max_singleton_fraction else " (the smallest B allowed; the bound is not met)"
        rate_fraction = cast(float, self.rate_singleton_fraction)  # set whenever B was reduced from B_rate
        return (f"B = {self.n_bins}, reduced from {rate} where {100 * rate_fraction:.3g}% of the rows "
                f"sit alone in a cell, to the largest B with at most {100 * self.max_singleton_fraction:.3g}% "
                f"({100 * self.singleton_fraction:.3g}% at B = {self.n_bins}){reached}.")


def occupancy_n_bins(counts_at, n: int, d: int, max_singleton_fraction: float = MAX_SINGLETON_FRACTION) -> BinRule:
    """The automatic B: the largest B <= B_rate whose cells leave at most a fraction tau of rows alone.

    ``B = max{B' in {2, ..., B_rate} : s(B') <= tau}`` (B = 2 when no B' qualifies), with
    B_rate = :func:`auto_n_bins` (n, d) and s(B') = :func:`singleton_fraction` of the
    cell counts of the predictions at B', scanned downward from B_rate.

    B_rate is the bias-variance rate (binning bias O(B^-2) for a Lipschitz
    calibration map against a standard error O(n^-1/2)); it keeps the cells
    populated in one dimension (about n^(3/5)/3 rows per bin) but not on the
    simplex of full calibration, where it puts O(1) or fewer rows in a cell.
    Only singleton cells bias T (given the cell counts T is unbiased for
    ``sum_b (c_b/n) 1{c_b >= 2} ||mu_b||^2``, so the rows alone in a cell carry
    the lost share), and among the admissible B the largest has the smallest
    binning bias.  The rule looks at the predictions only, so the partition
    is fixed given Z and the conditional nulls stay exact.

    In one dimension (binary, top-1) B_rate is kept as it is, so that these
    results do not change: its bins hold about n^(3/5)/3 rows each, and where
    more than tau of the rows are alone nonetheless (very small n, or
    predictions piled at a few values) the result is flagged as approximate
    instead.

    Parameters
    ----------
    counts_at : callable
        ``counts_at(B)`` returns the cell counts of the predictions at B.
    n, d : int
        Rows and dimension of the binned space.
    max_singleton_fraction : float
        tau.

    Returns
    -------
    BinRule
    """
    rate = auto_n_bins(n, d)
    rate_fraction = fraction = singleton_fraction(counts_at(rate))
    B = rate
    while d >= 2 and fraction > max_singleton_fraction and B > 2:  # a scan over at most B_rate candidate B
        B -= 1
        fraction = singleton_fraction(counts_at(B))
    return BinRule(rule="auto", n_bins=B, rate_n_bins=rate, dim=d, singleton_fraction=fraction,
                   rate_singleton_fraction=rate_fraction, max_singleton_fraction=max_singleton_fraction)


def fixed_rule(rule: str, n_bins: int, n: int, d: int, counts) -> BinRule:
    """The :class:`BinRule` of a B fixed without the occupancy scan (given, or streamed rows).

    ``rule`` is ``"user"`` for a given B; for ``"auto"`` on streamed rows (B fixed from n
    before the predictions are seen) it is recorded as ``"rate"`` when d >= 2, and as
    ``"auto"`` in one dimension, where the automatic rule is the rate.
    """
    fraction = singleton_fraction(counts)
    if rule == "user":
        return BinRule(rule="user", n_bins=int(n_bins), rate_n_bins=auto_n_bins(n, d), dim=d,
                       singleton_fraction=fraction, rate_singleton_fraction=None)
    return BinRule(rule="auto" if d == 1 else "rate", n_bins=int(n_bins), rate_n_bins=int(n_bins), dim=d,
                   singleton_fraction=fraction, rate_singleton_fraction=fraction)


def max_n_bins(d: int, orderings: int = 1) -> int:
    """The largest B for a partition of B^d cells (times ``orderings`` simplices per cube).

    B^d * orderings <= 2^MAX_CELLS_LOG2 and B <= 2^53.
    """
    limit = (MAX_CELLS_LOG2 - math.log2(orderings)) / d
    return int(min(2 ** 53, math.floor(2 ** limit) if limit < 60 else 2 ** 53))


def resolve_n_bins(n_bins, n: int, d: int, orderings: int = 1) -> tuple[int, str]:
    """Validate ``n_bins`` and return ``(B, how_chosen)``.

    Parameters
    ----------
    n_bins : int or "auto"
    n : int
        Rows (for ``"auto"``).
    d : int
        Dimension of the binned space.
    orderings : int
        Cells per cube (the simplex partition of full calibration cuts each
        cube of its B^(K-1) into (K-1)! simplices).

    Raises
    ------
    OptionError, OptionTypeError
        ``n_bins`` is not a positive integer or "auto", or exceeds
        :func:`max_n_bins` for this target.
    """
    if isinstance(n_bins, str):
        if n_bins != "auto":
            raise OptionError(f"n_bins must be a positive integer or 'auto', got {n_bins!r}")
        B, rule = auto_n_bins(n, d), "auto"
    elif not is_integer(n_bins):
        raise OptionTypeError(f"n_bins must be a positive integer or 'auto', got {type(n_bins).__name__}")
    elif n_bins < 1:
        raise OptionError(f"n_bins must be >= 1, got {n_bins}")
    else:
        B, rule = int(n_bins), "user"
    top = max_n_bins(d, orderings)
    cells = "simplex cells" if orderings > 1 else "cubes"
    if top < 2 and B >= 2:
        raise ValueError(f"{d} binned coordinates are too many for a partition: even B = 2 gives more than "
                         f"2^{MAX_CELLS_LOG2} {cells}; use fewer coordinates (a smaller k)")
    if B > top:
        raise OptionError(f"n_bins={B} is too large for this target (d = {d} binned coordinates): the largest B "
                          f"allowed is {top}, so that the {cells} number at most 2^{MAX_CELLS_LOG2} and B at "
                          "most 2^53")
    return B, rule


def _bump_threshold(tol: float) -> float:
    """Smallest float64 c with c >= 1 - tol exactly: for a float f, ``f >= c`` iff ``1 - f <= tol``."""
    from fractions import Fraction

    exact = 1 - Fraction(tol)
    c = float(exact)
    return float(np.nextafter(c, 2.0)) if Fraction(c) < exact else c


#: For f = p - floor(p) (exact in float64): p is within EDGE_TOL below the integer floor(p) + 1 iff f >= _BUMP.
_BUMP = _bump_threshold(EDGE_TOL)
#: Rows of a block of :func:`cube_indices` (its scratch arrays stay in the cache).
_BLOCK = 1 << 15


def edge_floor(p: np.ndarray) -> np.ndarray:
    """``floor(p)`` as int64, except that a p within :data:`EDGE_TOL` below an integer gives that integer.

    ``p`` holds non-negative scaled values (z * B or partial sums), so truncation
    is floor.  With f = p - floor(p) (exact in float64) the value is raised by
    one when 1 - f <= EDGE_TOL, i.e. when |p - round(p)| <= EDGE_TOL with round(p)
    above p; a p within EDGE_TOL above an integer already floors to it.  So the
    result is the integer i with i <= p < i + 1 where a p on an edge up to
    EDGE_TOL counts as on it.
    """
    p = np.asarray(p, dtype=np.float64)
    i = p.astype(np.int64)
    frac = p - i
    i += frac >= _BUMP
    return i


def cube_indices(z: np.ndarray, n_bins: int) -> np.ndarray:
    """Integer cube coordinates of each row: ``floor(z * B)`` with values on an edge up to rounding on it.

    Parameters
    ----------
    z : ndarray, shape (n, d)
        Binned vectors, each coordinate in [0, 1].
    n_bins : int
        Bins per dimension B.

    Returns
    -------
    ndarray of int64, shape (n, d)
        :func:`edge_floor` of z * B: the i with i/B <= z < (i+1)/B, where a
        coordinate with ``|z*B - round(z*B)| <= EDGE_TOL`` is on the edge
        ``round(z*B) / B`` and gets the index ``round(z*B)``.  Values in
        ``0..B``; ``B`` only for a coordinate equal to 1 (up to EDGE_TOL / B).
    """
    z = np.asarray(z, dtype=np.float64)
    flat = np.ascontiguousarray(z).reshape(-1)
    out = np.empty(flat.shape, dtype=np.int64)
    size = min(_BLOCK, flat.size)
    p = np.empty(size, dtype=np.float64)
    bump = np.empty(size, dtype=bool)
    scale = float(n_bins)
    # blocks of rows (vectorised within each): the scratch arrays stay in the cache, which makes
    # the four passes cheaper than the two of a plain floor over the whole array
    for start in range(0, flat.size, _BLOCK):
        zz = flat[start:start + _BLOCK]
        k = zz.size
        pp, ii, bb = p[:k], out[start:start + k], bump[:k]
        np.multiply(zz, scale, out=pp)
        ii[...] = pp                         # truncation = floor, z * B >= 0
        np.subtract(pp, ii, out=pp)          # the fractional part, exact
        np.greater_equal(pp, _BUMP, out=bb)  # within EDGE_TOL below the next edge
        ii += bb
    return out.reshape(z.shape)


def group_keys(idx: np.ndarray, upper: int | np.ndarray):
    """Group rows by their integer key vectors.

    Parameters
    ----------
    idx : ndarray of int64, shape (n, q)
        Non-negative integer key of each row.
    upper : int or ndarray of shape (q,)
        Exclusive upper bound of each key column (``B + 1`` for cube indices).

    Returns
    -------
    inverse : ndarray of intp, shape (n,)
        Bin number of each row, ``0..m-1``.
    keys : ndarray of int64, shape (m, q)
        The keys of bins ``0..m-1`` (for a small key space all possible keys,
        some of them empty; :func:`calibtest.core.binstats.bin_sums` drops empty bins), in lexicographic order of the key columns read
        from the last to the first (the order of the linear key).
    """
    n, q = idx.shape
    upper = np.broadcast_to(np.asarray(upper, dtype=np.int64), (q,))
    # Linear key sum_j idx_j * prod_{l<j} upper_l, if it fits in int64.
    space = 1.0
    for u in upper:
        space *= float(u)
    if space < 2.0**62:
        strides = np.concatenate(([1], np.cumprod(upper[:-1]))).astype(np.int64)
        linear = idx @ strides if q > 1 else idx[:, 0]
        if space <= max(_RAW_LIMIT, n // 8):
            # small key space: the linear key itself is the bin number; empty bins
            # are dropped after the sums (BinStats.compact), saving a gather
            uniq = np.arange(int(space), dtype=np.int64)
            inverse = linear
        elif space <= max(_DENSE_LIMIT, 4 * n):
            occupied = np.flatnonzero(np.bincount(linear, minlength=int(space)))
            lookup = np.empty(int(space), dtype=np.intp)
            lookup[occupied] = np.arange(occupied.size)
            inverse = lookup[linear]
            uniq = occupied
        else:
            uniq, inverse = np.unique(linear, return_inverse=True)
        keys = (uniq[:, None] // strides[None, :]) % upper[None, :]
        return inverse.ravel(), keys.astype(np.int64)
    keys, inverse = np.unique(idx, axis=0, return_inverse=True)
    return inverse.ravel(), keys.astype(np.int64)
