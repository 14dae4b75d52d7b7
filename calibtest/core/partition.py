"""The partition of one call: which bin each row falls in, built once.

Every engine that needs bins takes a :class:`Partition` instead of binning the
rows again: the estimator's bin sums, the conditional and Monte Carlo nulls,
the resampling intervals, T-Cal, ``bin_table()``, the streaming accumulator
and the two-model difference variance.

Two kinds of partition exist (see ``docs/conventions.md``, "Binning"):

* ``"cube"`` (binary, top-1 and top-k targets): the binned vector z in
  [0, 1]^d is cut into half-open cubes ``[i/B, (i+1)/B)`` per coordinate
  (a value on an edge up to float64 rounding, ``|z B - round(z B)| <= 1e-9``,
  counting as on it), a coordinate exactly 1.0 getting the index B (its own
  cube); the cell volume is w = B^-d.
* ``"simplex"`` (full calibration, k = K): the probability simplex
  Delta_{K-1} is cut into B^(K-1) equal-volume simplices by the edgewise
  subdivision of :mod:`calibtest.core.simplex`; w = 1 / ((K-1)! B^(K-1)).

The partition also carries sigma0^2, the calibrated-regime variance constant
of the paper's eq. (12) for its support, since it depends only on the
target and the partition's geometry.

References
----------
.. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
       l2 Expected Calibration Error", arXiv:2408.08998, 2024, Section 2.3.
.. [2] Lee, Huang, Hassani and Dobriban, "T-Cal: An optimal test for the
       calibration of predictive models", JMLR 24 (2023), Section 8.2.3.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import factorial

import numpy as np

from calibtest.core.arrays import read_only
from calibtest.core.binning import (BinRule, cube_indices, fixed_rule, group_keys, occupancy_n_bins,
                                    resolve_n_bins)
from calibtest.core.binstats import BinStats, bin_sums, second_order_sums, sparse_bin_sums
from calibtest.core.null import bin_volume, sigma0_sq, sigma0_sq_full
from calibtest.core.simplex import simplex_cell_volume, simplex_groups
from calibtest.core.targets import PreparedData, Target

__all__ = ["Partition", "partition_rows", "binned_dimension", "cell_geometry", "MAX_SIMPLEX_DIMENSION"]

#: Largest K - 1 of full calibration: the simplex key's order code takes (K-1)! values in an int64.
MAX_SIMPLEX_DIMENSION = 20


def _occupied(inverse: np.ndarray, keys: np.ndarray):
    """Renumber the non-empty bins 0..m-1 (``group_keys`` numbers every key of a small key space)."""
    counts = np.bincount(inverse, minlength=keys.shape[0])
    occupied = np.flatnonzero(counts)
    if occupied.size < keys.shape[0]:
        lo = int(occupied[0])
        if int(occupied[-1]) - lo + 1 == occupied.size:  # one run of occupied bins: a shift, no gather
            inverse = inverse - lo
        else:
            lookup = np.zeros(keys.shape[0], dtype=np.intp)
            lookup[occupied] = np.arange(occupied.size)
            inverse = lookup[inverse]
        keys = keys[occupied]
    return np.asarray(inverse, dtype=np.intp), keys, counts[occupied]


@dataclass(frozen=True, eq=False)
class Partition:
    """Row-to-bin assignment of one data set on one partition.

    Attributes
    ----------
    kind : {"cube", "simplex"}
        Cube partition of [0, 1]^d or equal-volume simplex cells.
    n_bins : int
        Bins per dimension B (subdivisions per edge for the simplex).
    n_bins_rule : {"auto", "user"}
        How B was chosen.
    dim : int
        Dimension d of the binned space (k for cubes, K - 1 for the simplex).
    inverse : ndarray of intp, shape (n,)
        Bin number 0..m-1 of each row, numbering the non-empty bins in the
        order of their linear key.  Treat it as read-only: it is left
        writeable only because ``np.bincount``, which every engine runs on it,
        is about a quarter slower on a read-only array (numpy 2.x).
    keys : ndarray of int64, shape (m, q), read-only
        Key of each non-empty bin: cube indices (``i/B <= z < (i+1)/B``, edges up to 1e-9 in z * B), or the
        simplex key ``(a_1, ..., a_{K-1}, code)``.
    counts : ndarray of int64, shape (m,), read-only
        Rows per non-empty bin.
    volume : float
        Cell volume w.
    sigma0_sq : float
        The exact calibrated-regime variance constant of the target.
    bin_rule : BinRule or None
        How B was chosen and the inputs of the rule (B_rate, the fraction of
        rows alone in a cell at B_rate and at B).
    """

    kind: str
    n_bins: int
    n_bins_rule: str
    dim: int
    inverse: np.ndarray = field(repr=False)
    keys: np.ndarray = field(repr=False)
    counts: np.ndarray = field(repr=False)
    volume: float
    sigma0_sq: float
    bin_rule: BinRule | None = None

    @property
    def n(self) -> int:
        """Number of rows."""
        return int(self.inverse.shape[0])

    @property
    def m(self) -> int:
        """Number of non-empty bins."""
        return int(self.keys.shape[0])

    def bin_sums(self, data: PreparedData) -> BinStats:
        """Per-bin sums c_b, S_b, M_b and sum z of the rows of ``data`` (the rows this partition binned).

        On the simplex with K >= 3 also the sums of z z^T and tr(Sigma^2) of the second-order variance.
        """
        if self.kind == "simplex":
            stats = sparse_bin_sums(self.inverse, self.keys, data.u, data.z)
            if data.z.shape[1] < 3:
                return stats
            sum_z, sum_zz, sum_tr = second_order_sums(data.z, self.inverse, self.m)
            return BinStats(stats.keys, stats.count, stats.sum_u, stats.sum_uu, stats.sum_z, sum_zz, sum_tr)
        return bin_sums(self.inverse, self.keys, data.u, data.z, count=self.counts)


def binned_dimension(mode: str, k: int) -> int:
    """Dimension d of the binned space: K - 1 on the simplex (full calibration), k on the cube."""
    return Target.of(mode).binned_dimension(k)


def cell_geometry(mode: str, k: int, n_classes, n_bins: int) -> tuple[float, float]:
    """``(w, sigma0^2)``: the cell volume and the calibrated-regime constant of a target's partition."""
    if Target.of(mode).full_calibration:
        volume, s0 = simplex_cell_volume(n_bins, k), sigma0_sq_full(k)
    else:
        volume, s0 = bin_volume(n_bins, k), sigma0_sq(mode, n_classes, k)
    if not s0 >= np.finfo(np.float64).tiny:
        raise ValueError(f"the calibrated-regime variance sigma0^2 of this target ({binned_dimension(mode, k)} "
                         "binned coordinates) is below the smallest normal float64, so the test of calibration "
                         "cannot be computed; use fewer coordinates (a smaller k)")
    return volume, s0


def _row_keys(data: PreparedData, B: int):
    if Target.of(data.mode).full_calibration:
        return simplex_groups(data.z, B)
    return group_keys(cube_indices(data.z, B), B + 1)


def partition_rows(data: PreparedData, n_bins="auto") -> Partition:
    """Bin the rows of a prepared target on its partition.

    Parameters
    ----------
    data : PreparedData
        The target's rows (``mode`` decides the partition: ``"full"`` bins
        the simplex, the others the cube).
    n_bins : int or "auto"
        B, or ``"auto"``: the largest B <= B_rate = ``max(2, round(6 / (d + 1) * n ** (2 / (4 + d))))``
        (d the dimension of the binned space) at which at most 5% of the rows sit
        alone in a cell (:func:`calibtest.core.binning.occupancy_n_bins`).

    Returns
    -------
    Partition
    """
    target = Target.of(data.mode)
    d = target.binned_dimension(data.k)
    if target.full_calibration and d > MAX_SIMPLEX_DIMENSION:
        raise ValueError(f"full calibration supports at most K = {MAX_SIMPLEX_DIMENSION + 1} classes: a "
                         f"simplex cell is keyed by the order of K - 1 fractional parts, (K - 1)! values, "
                         f"which int64 keys hold only up to K = {MAX_SIMPLEX_DIMENSION + 1}; got K = {data.k}. "
                         "Use top-k calibration (k < K) or group the classes")
    B, rule = resolve_n_bins(n_bins, data.n, d, factorial(d) if target.full_calibration else 1)
    binned: dict[int, tuple] = {}

    def counts_at(b: int) -> np.ndarray:  # keeps only the last B binned, the one the scan returns
        binned.clear()
        binned[b] = _occupied(*_row_keys(data, b))
        return binned[b][2]

    if rule == "auto":
        bin_rule = occupancy_n_bins(counts_at, data.n, d)
        B = bin_rule.n_bins
        inverse, keys, counts = binned[B]
    else:
        inverse, keys, counts = _occupied(*_row_keys(data, B))
        bin_rule = fixed_rule(rule, B, data.n, d, counts)
    volume, s0 = cell_geometry(data.mode, data.k, data.n_classes, B)
    return Partition(kind="simplex" if target.full_calibration else "cube", n_bins=B, n_bins_rule=rule, dim=d,
                     inverse=inverse, keys=read_only(keys), counts=read_only(counts), volume=volume,
                     sigma0_sq=s0, bin_rule=bin_rule)
