"""Equal-volume binning of the probability simplex (full calibration, k = K).

The simplex Delta_{K-1} = {z in R^K : z >= 0, sum z = 1} is binned into
B^(K-1) simplices of equal volume by the edgewise (Freudenthal/Kuhn)
subdivision used by T-Cal (Lee, Huang, Hassani & Dobriban 2023, Sec. 8.2.3
[1]_), which the paper's binning scheme takes for k = K (Sun, Chaudhari,
Barnett and Dobriban, arXiv:2408.08998, Section 2.3). With d = K - 1 and the
partial sums

    s_j = B * (z_1 + ... + z_j),    j = 1..d,

the simplex is the scaled order simplex {0 <= s_1 <= ... <= s_d <= B}.  The
Kuhn triangulation cuts each unit cube ``a + [0, 1)^d`` (``a`` integer) into
d! simplices, one per order of the fractional parts f = s - a.  A row's cell
is therefore the integer parts ``a = floor(s)`` together with the order of
the fractional parts.  The map (z_1, ..., z_d) -> s is linear with determinant
B^d and every Kuhn simplex has volume 1/d! in s, so every cell has volume

    w = 1 / ((K - 1)! B^(K - 1))

in the coordinates (z_1, ..., z_{K-1}) (the simplex itself has volume
1/(K-1)!), and exactly B^d cells meet the simplex in a set of positive volume.
Only non-empty cells are ever materialised: a cell is an integer key, and rows
are grouped with :func:`calibtest.core.binning.group_keys`.

Boundary points (``docs/conventions.md``, "Binning")
----------------------------------------------------
Cells are half-open.  A fractional part exactly 0 belongs to the upper cube
(``floor``), and equal fractional parts f_i = f_j with i < j are ordered as if
f_i < f_j (a stable sort).  Equivalently: **a point on a cell boundary belongs
to the cell that contains z + eps * (1, ..., 1, -(K-1)) for every small
eps > 0**, i.e. the cell reached by moving a little mass from the last class
to all the others.  Every point of the simplex with z_K > 0 thus lands in one
of the B^(K-1) cells of the subdivision.  A point with z_K = 0 exactly (the
face opposite the last vertex) has s_d = B and lands in a cell with
``a_d = B`` just beyond the face -- the analogue of the cube convention that
puts a coordinate exactly 1.0 into a cube of its own.  No row is ever dropped.
For K = 2 this is exactly the binary-mode binning of the cubes.

The partial sums are computed in float64 by a cumulative sum, so a point on a
boundary in exact arithmetic (a grid of predictions: 0.1 + 0.7 at B = 20 gives
s = 15.999999999999998) may be computed just off it.  As for the cubes
(:data:`calibtest.core.binning.EDGE_TOL`), a partial sum within 1e-9 of an
integer counts as that integer (integer part that integer, fractional part 0),
and two fractional parts within 1e-9 of each other count as equal (the boundary
s_j - s_i integer, i.e. B (z_(i+1) + ... + z_j) on an edge), so the rule above
is applied to the exact point.  Only a point within 1e-9 / B of a boundary
without lying on it is moved onto it.

Keys
----
A cell's key is the integer vector ``(a_1, ..., a_d, code)`` where ``code`` is
the Lehmer code (0..d!-1) of the ranks of the fractional parts: ``rank_j`` is
the position of f_j in the stable ascending order, and
``code = sum_j #{i > j : rank_i < rank_j} * (d - 1 - j)!``.

References
----------
.. [1] Lee, Huang, Hassani and Dobriban, "T-Cal: An optimal test for the
       calibration of predictive models", Journal of Machine Learning
       Research 24(335), 2023.
"""
from __future__ import annotations

from math import factorial

import numpy as np

from calibtest.core.binning import EDGE_TOL, edge_floor, group_keys

__all__ = ["partial_sums", "simplex_cells", "simplex_cell_volume",
           "simplex_groups", "decode_order", "cell_barycentres"]


def simplex_cell_volume(n_bins: int, n_classes: int) -> float:
    """Volume w = 1 / ((K-1)! B^(K-1)) of one cell, in the coordinates z_1..z_{K-1}."""
    d = n_classes - 1
    return 1.0 / (factorial(d) * float(n_bins) ** d)


def partial_sums(z: np.ndarray, n_bins: int) -> np.ndarray:
    """s_j = B * (z_1 + ... + z_j) for j = 1..K-1, shape (n, K-1), non-decreasing per row.

    The cumulative sum is taken in float64 before scaling; for K = 2 it is
    ``z_1 * B``, the binary-mode product.
    """
    z = np.asarray(z, dtype=np.float64)
    return np.cumsum(z[:, :-1], axis=1) * n_bins


def _order_code(frac: np.ndarray) -> np.ndarray:
    """Lehmer code of the stable ascending order of each row's fractional parts.

    With rank_j the position of f_j in the stable ascending sort (ties: the
    lower index ranks lower), the Lehmer digit of position j is
    #{i > j : rank_i < rank_j} = #{i > j : f_i < f_j} (a tie with i > j ranks
    i higher), so no sort is needed: code = sum_j digit_j (d - 1 - j)!.
    """
    n, d = frac.shape
    cols = np.ascontiguousarray(frac.T)
    code = np.zeros(n, dtype=np.int64)
    for j in range(d - 1):  # loops over the d(d-1)/2 column pairs, vectorised over rows
        digit = np.zeros(n, dtype=np.int16)
        for i in range(j + 1, d):
            digit += cols[i] < cols[j]
        code += digit.astype(np.int64) * factorial(d - 1 - j)
    return code


def _tie_levels(frac: np.ndarray) -> np.ndarray:
    """Fractional parts with those equal up to EDGE_TOL made exactly equal (same order otherwise).

    f_i = f_j is the boundary s_j - s_i = B (z_(i+1) + ... + z_j) integer, an edge
    of the same kind as s_j integer, so it gets the same tolerance: per row the
    sorted fractional parts are cut where consecutive ones differ by more than
    EDGE_TOL, and each run gets one level (0, 1, 2, ... in ascending order).
    Ties are then broken by position as for exactly equal parts.
    """
    n, d = frac.shape
    order = np.argsort(frac, axis=1, kind="stable")
    ordered = np.take_along_axis(frac, order, axis=1)
    level = np.zeros((n, d), dtype=np.float64)
    np.cumsum(np.diff(ordered, axis=1) > EDGE_TOL, axis=1, out=level[:, 1:])
    out = np.empty_like(level)
    np.put_along_axis(out, order, level, axis=1)
    return out


def simplex_cells(z: np.ndarray, n_bins: int) -> np.ndarray:
    """Integer cell key of each row under the edgewise subdivision.

    Parameters
    ----------
    z : ndarray, shape (n, K)
        Probability vectors (rows on the simplex), K >= 2.
    n_bins : int
        Subdivisions B per edge; B^(K-1) cells.

    Returns
    -------
    ndarray of int64, shape (n, K)
        ``(a_1, ..., a_{K-1}, code)``: the integer parts ``floor(s_j)`` of the
        partial sums s_j = B (z_1 + ... + z_j) and the Lehmer code of the
        order of their fractional parts, with partial sums within 1e-9 of an
        integer taken as that integer and fractional parts within 1e-9 of each
        other as equal (see the module docstring for the boundary rule).
    """
    s = partial_sums(z, n_bins)
    a = edge_floor(s)
    frac = s - a
    frac[np.abs(frac) <= EDGE_TOL] = 0.0    # a partial sum on an integer up to EDGE_TOL is that integer
    keys = np.empty((s.shape[0], s.shape[1] + 1), dtype=np.int64)
    keys[:, :-1] = a
    keys[:, -1] = _order_code(_tie_levels(frac)) if s.shape[1] > 1 else 0
    return keys


def simplex_groups(z: np.ndarray, n_bins: int):
    """``(inverse, keys)`` of the non-empty cells (:func:`calibtest.core.binning.group_keys`)."""
    keys = simplex_cells(z, n_bins)
    d = keys.shape[1] - 1
    upper = np.array([n_bins + 1] * d + [factorial(d)], dtype=np.int64)
    return group_keys(keys, upper)


def decode_order(codes: np.ndarray, d: int) -> np.ndarray:
    """Rank vectors (m, d) from Lehmer codes (inverse of the key's last column)."""
    codes = np.asarray(codes, dtype=np.int64)
    m = codes.shape[0]
    ranks = np.empty((m, d), dtype=np.int64)
    available = np.ones((m, d), dtype=bool)
    rest = codes.copy()
    for j in range(d):  # loop over positions, vectorised over cells
        f = factorial(d - 1 - j)
        digit = rest // f
        rest = rest % f
        # the digit-th smallest rank still available
        pos = np.cumsum(available, axis=1) - 1
        hit = available & (pos == digit[:, None])
        chosen = np.argmax(hit, axis=1)
        ranks[:, j] = chosen
        available[np.arange(m), chosen] = False
    return ranks


def cell_barycentres(keys: np.ndarray, n_bins: int) -> np.ndarray:
    """Barycentre (in z, shape (m, K)) of the part of each cell that lies in the simplex.

    A cell with integer parts ``a`` and fractional-part ranks ``r`` is the Kuhn
    simplex with vertices a, a + e_(largest f), ..., a + (1, ..., 1) in s
    coordinates; its barycentre is ``s = a + (r + 1) / (d + 1)``.  A cell with
    ``a_d = B`` (rows with z_K = 0) meets the simplex only in its face
    {s_d = B}, whose vertices are the first ``d - r_d`` of the list; the
    barycentre of that face is ``s = a + max(r - r_d, 0) / (d - r_d)``.  The
    s -> z map is z_1 = s_1 / B, z_j = (s_j - s_{j-1}) / B, z_K = 1 - s_d / B.
    """
    keys = np.asarray(keys, dtype=np.int64)
    d = keys.shape[1] - 1
    a = keys[:, :d].astype(np.float64)
    ranks = decode_order(keys[:, d], d).astype(np.float64)
    s = a + (ranks + 1.0) / (d + 1.0)
    face = keys[:, d - 1] >= n_bins
    if face.any():
        rd = ranks[face, d - 1:d]
        s[face] = a[face] + np.maximum(ranks[face] - rd, 0.0) / (d - rd)
    edges = np.concatenate([np.zeros((s.shape[0], 1)), s, np.full((s.shape[0], 1), float(n_bins))], axis=1)
    return np.diff(edges, axis=1) / n_bins
