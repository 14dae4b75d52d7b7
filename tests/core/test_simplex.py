"""Equal-volume simplex binning (edgewise / Freudenthal-Kuhn subdivision).

Every check is against the test's own construction of the subdivision: the
Kuhn simplex of the unit cube at integer corner ``a`` with fractional parts
ordered by a permutation has vertices a, a + e_(largest), ..., a + (1, ..., 1);
its cells inside the order simplex {0 <= s_1 <= ... <= s_d <= B} are the cells
of the simplex, and z_1 = s_1 / B, z_j = (s_j - s_{j-1}) / B.
"""
from __future__ import annotations

import itertools
from math import factorial

import numpy as np
import pytest
from scipy import stats

from calibtest.core.binning import cube_indices
from calibtest.core.simplex import (cell_barycentres, decode_order, partial_sums, simplex_cell_volume,
                               simplex_cells, simplex_groups)


def s_to_z(s: np.ndarray, B: int) -> np.ndarray:
    """Points in s coordinates (..., d) -> probability vectors (..., d + 1)."""
    zeros = np.zeros(s.shape[:-1] + (1,))
    full = np.full(s.shape[:-1] + (1,), float(B))
    return np.diff(np.concatenate([zeros, s, full], axis=-1), axis=-1) / B


def interior_cells(d: int, B: int):
    """All Kuhn cells inside the order simplex: (a, permutation), with their vertices in s."""
    cells = []
    for a in itertools.product(range(B), repeat=d):
        for perm in itertools.permutations(range(d)):  # perm[0] has the largest fractional part
            verts = [np.array(a, dtype=float)]
            for coord in perm:
                step = np.zeros(d)
                step[coord] = 1.0
                verts.append(verts[-1] + step)
            verts = np.array(verts)
            centre = verts.mean(axis=0)
            if np.all(np.diff(centre) > 0) and centre[0] > 0 and centre[-1] < B:
                cells.append((a, perm, verts))
    return cells


@pytest.mark.parametrize("K,B", [(3, 1), (3, 2), (3, 4), (4, 1), (4, 3), (5, 2)])
def test_exact_count_and_equal_volume(K, B):
    d = K - 1
    cells = interior_cells(d, B)
    assert len(cells) == B**d
    w = simplex_cell_volume(B, K)
    assert w == pytest.approx(1.0 / (factorial(d) * B**d), rel=1e-15)
    rng = np.random.default_rng(K * 10 + B)
    keys = []
    for _, _, verts in cells:
        zv = s_to_z(verts, B)[:, :d]                      # vertices in (z_1..z_d)
        vol = abs(np.linalg.det(zv[1:] - zv[0])) / factorial(d)
        assert vol == pytest.approx(w, rel=1e-9)
        # random interior points of the cell all get the same key
        weights = rng.dirichlet(np.ones(d + 1), size=20)
        pts = s_to_z(weights @ verts, B)
        k = simplex_cells(pts, B)
        assert (k == k[0]).all()
        keys.append(tuple(k[0]))
    assert len(set(keys)) == B**d          # one key per cell, no two cells merged


@pytest.mark.parametrize("K,B", [(3, 5), (4, 3)])
def test_uniform_points_fill_cells_equally(K, B):
    """Monte Carlo: uniform points on the simplex fall in B^(K-1) cells with equal frequency."""
    rng = np.random.default_rng(11)
    n = 40_000
    z = rng.dirichlet(np.ones(K), size=n)
    inverse, keys = simplex_groups(z, B)
    counts = np.bincount(inverse)
    counts = counts[counts > 0]
    assert counts.size == B ** (K - 1)
    chi2 = stats.chisquare(counts)
    assert chi2.pvalue > 1e-3


def test_k2_matches_binary_cubes():
    rng = np.random.default_rng(3)
    p = np.concatenate([rng.random(500), [0.0, 1.0, 0.25, 0.5, 0.999999999, 1e-12]])
    for B in (1, 7, 20, 48):
        keys = simplex_cells(np.column_stack([p, 1.0 - p]), B)
        assert np.array_equal(keys[:, 0], cube_indices(p[:, None], B)[:, 0])
        assert np.all(keys[:, 1] == 0)
        assert keys[np.argmax(p == 1.0), 0] == B    # z_1 = 1: its own cell, as in binary mode


def test_boundary_rule_is_a_push_towards_the_first_classes():
    """A boundary point belongs to the cell of z + eps (1, ..., 1, -(K-1))."""
    B = 4
    pts = np.array([
        [0.25, 0.5, 0.25],      # s = (1, 3): both fractional parts 0
        [0.25, 0.0, 0.75],      # s = (1, 1): tie between fractional parts
        [0.125, 0.125, 0.75],   # s = (0.5, 1): one fractional part 0
        [0.375, 0.25, 0.375],   # s = (1.5, 2.5): equal fractional parts 0.5
        [0.0, 0.0, 1.0],        # vertex
        [1.0, 0.0, 0.0],        # vertex on the face z_3 = 0
        [0.0, 1.0, 0.0],
        [0.5, 0.5, 0.0],        # face z_3 = 0
        [0.3, 0.7, 0.0],
        [0.0, 0.3, 0.7],        # face z_1 = 0
    ])
    v = np.array([1.0, 1.0, -2.0])
    for eps in (1e-9, 1e-7):
        assert np.array_equal(simplex_cells(pts, B), simplex_cells(pts + eps * v, B))
    K4 = np.array([[0.25, 0.25, 0.25, 0.25], [0.5, 0.0, 0.0, 0.5], [0.25, 0.0, 0.75, 0.0]])
    v4 = np.array([1.0, 1.0, 1.0, -3.0])
    assert np.array_equal(simplex_cells(K4, 4), simplex_cells(K4 + 1e-9 * v4, 4))


def test_boundary_points_with_z_k_positive_land_in_interior_cells():
    B = 4
    interior = {tuple(simplex_cells(s_to_z(verts.mean(axis=0)[None], B), B)[0])
                for _, _, verts in interior_cells(2, B)}
    grid = np.array([[i, j, 4 - i - j] for i in range(5) for j in range(5) if i + j < 4]) / 4.0
    for key in map(tuple, simplex_cells(grid, B)):
        assert key in interior
    face = np.array([[i, 4 - i, 0] for i in range(5)]) / 4.0   # z_3 = 0: a_2 = B, beyond the face
    assert np.all(simplex_cells(face, B)[:, 1] == B)


def test_boundary_rule_explicit_keys():
    # s = (1, 1): floor (1, 1), tie -> ranks (0, 1) -> Lehmer code 0
    assert simplex_cells(np.array([[0.25, 0.0, 0.75]]), 4).tolist() == [[1, 1, 0]]
    # s = (1.5, 1.75): ranks (0, 1) -> code 0; s = (1.75, 2.5): fractions (0.75, 0.5) -> ranks (1, 0) -> 1
    assert simplex_cells(np.array([[0.375, 0.0625, 0.5625]]), 4).tolist() == [[1, 1, 0]]
    assert simplex_cells(np.array([[0.4375, 0.1875, 0.375]]), 4).tolist() == [[1, 2, 1]]
    # the last vertex (1, 0, 0): s = (B, B)
    assert simplex_cells(np.array([[1.0, 0.0, 0.0]]), 4).tolist() == [[4, 4, 0]]


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_order_code_round_trip(d):
    """Every order of the fractional parts gets its own code, and decode_order inverts it."""
    ranks = np.array(list(itertools.permutations(range(d))))
    frac = (ranks + 1.0) / 8.0                      # dyadic, so s is exact; a = 0
    keys = simplex_cells(s_to_z(frac, 1), 1)
    assert np.all(keys[:, :d] == 0)
    assert sorted(keys[:, d].tolist()) == list(range(factorial(d)))
    assert np.array_equal(decode_order(keys[:, d], d), ranks)


def test_barycentres():
    B = 3
    cells = interior_cells(3, B)
    keys = np.array([simplex_cells(s_to_z(v.mean(axis=0)[None], B), B)[0] for _, _, v in cells])
    bary = cell_barycentres(keys, B)
    expected = np.array([s_to_z(v.mean(axis=0), B) for _, _, v in cells])
    np.testing.assert_allclose(bary, expected, atol=1e-14)
    np.testing.assert_allclose(bary.sum(axis=1), 1.0)
    assert np.array_equal(simplex_cells(bary, B), keys)
    # face cells (z_K = 0): barycentre of the face piece, on the face, in the same cell
    face_pts = np.array([[0.3, 0.7, 0.0], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    fk = simplex_cells(face_pts, 2)
    fb = cell_barycentres(fk, 2)
    np.testing.assert_allclose(fb[:, 2], 0.0, atol=1e-15)
    np.testing.assert_allclose(fb, [[0.25, 0.75, 0.0], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]], atol=1e-15)
    assert np.array_equal(simplex_cells(fb, 2), fk)


def test_partial_sums_non_decreasing():
    rng = np.random.default_rng(0)
    z = rng.dirichlet(np.ones(6) * 0.3, size=1000)
    s = partial_sums(z, 7)
    assert np.all(np.diff(s, axis=1) >= 0)
    assert s.shape == (1000, 5)


@pytest.mark.parametrize("K,B,n", [(2, 7, 3000), (3, 4, 5000), (3, 60, 3000), (5, 6, 4000), (10, 10, 3000)])
def test_sparse_bin_sums_equal_core_bin_sums(K, B, n):
    """The full-mode accumulator gives calibtest.core.binstats.bin_sums' sums (few and many rows per cell)."""
    from calibtest.core.binstats import sparse_bin_sums
    from calibtest.core.binstats import bin_sums
    rng = np.random.default_rng(K + B)
    P = rng.dirichlet(np.ones(K), size=n)
    P[:3] = np.eye(K)[np.arange(3) % K]          # vertices: cells on the faces
    U = np.eye(K)[rng.integers(0, K, n)] - P
    inverse, keys = simplex_groups(P, B)
    ref = bin_sums(inverse, keys, U, P)
    got = sparse_bin_sums(inverse, keys, U, P)
    assert np.array_equal(got.keys, ref.keys) and np.array_equal(got.count, ref.count)
    for name in ("sum_u", "sum_z", "sum_uu"):
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=1e-12, atol=1e-12)
