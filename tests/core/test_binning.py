"""Predictions on a grid sit exactly on bin edges: their bins follow the exact half-open rule.

docs/conventions.md, "Binning": on each coordinate a row's bin is the i with i/B <= z < (i+1)/B,
a value on an edge up to float64 rounding (|z B - round(z B)| <= 1e-9) counting as on that edge;
for full calibration a partial sum s_j = B (z_1 + ... + z_j) within 1e-9 of an integer is that
integer.  Every expected bin here is computed in exact rational arithmetic (fractions.Fraction of
the decimal value), independently of the package.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import calibtest as ct
import calibtest.simulation as sim
from calibtest.streams.accumulator import BinAccumulator
from calibtest.core.binning import cube_indices
from calibtest.core.binstats import debiased_statistic
from calibtest.core.conditional import conditional_bin_sums, conditional_moments, conditional_test
from calibtest.core.conditional import label_classes, monte_carlo_test
from calibtest.core.partition import partition_rows
from calibtest.core.resampling import binned_rows, resample_statistic
from calibtest.core.simplex import simplex_cells
from calibtest.core.targets import prepare
from calibtest.simulation.study import PAPER_BINS

BINS = (10, 20, 25, 50, 100, 7, 3)


def grid(step: str, top: int) -> np.ndarray:
    """The decimal grid k * step, k = 0..top, each value the float nearest to the decimal."""
    return np.array([float(Fraction(step) * k) for k in range(top + 1)])


GRIDS = {
    "hundredths": grid("0.01", 100),
    "twentieths": np.round(np.arange(21) * 0.05, 2),   # the computed products, then rounded
    "tenths": np.round(np.arange(11) * 0.1, 2),
    "thirds": np.round(np.arange(4) / 3, 2),            # 0, 0.33, 0.67, 1
}


def exact_bin(z: float, B: int) -> int:
    """floor(z B) in exact arithmetic on the decimal that z stands for (1.0 -> B)."""
    return math.floor(Fraction(repr(float(z))) * B)


def t_from_keys(keys: np.ndarray, u: np.ndarray) -> float:
    """T = (1/n) sum over bins with c >= 2 of (||S_b||^2 - Q_b) / (c_b - 1), bins given by key rows."""
    u = u.reshape(len(u), -1)
    _, inv = np.unique(keys.reshape(len(keys), -1), axis=0, return_inverse=True)
    inv = inv.ravel()
    total = 0.0
    for b in range(inv.max() + 1):
        rows = u[inv == b]
        c = rows.shape[0]
        if c >= 2:
            s = rows.sum(axis=0)
            total += (s @ s - np.sum(rows * rows)) / (c - 1)
    return total / len(u)


# --------------------------------------------------------------------------- cubes
@pytest.mark.parametrize("name", sorted(GRIDS))
@pytest.mark.parametrize("B", BINS)
def test_cube_bins_of_grid_values_are_exact(name, B):
    z = GRIDS[name]
    expected = np.array([exact_bin(v, B) for v in z])
    assert np.array_equal(cube_indices(z[:, None], B)[:, 0], expected)
    assert cube_indices(np.array([[1.0]]), B)[0, 0] == B


def test_the_documented_example():
    # 0.58 * 50 = 28.999999999999996 in float64, but 0.58 lies on the edge 29/50
    assert 0.58 * 50 < 29
    assert cube_indices(np.array([[0.58]]), 50)[0, 0] == 29
    res = ct.calib_ci(y=np.array([0, 1, 1, 0]), probs=np.array([0.58, 0.58, 0.59, 0.57]), n_bins=50)
    assert sorted(res.bin_table()["bin"]) == [(28,), (29,)]
    assert res.bin_table().set_index("bin").loc[[(29,)], "count"].item() == 3


def test_cube_bins_of_top_k_grid_vectors_are_exact():
    rng = np.random.default_rng(3)
    z = rng.choice(GRIDS["hundredths"], size=(2000, 3))
    for B in BINS:
        expected = np.vectorize(lambda v: exact_bin(v, B))(z)
        assert np.array_equal(cube_indices(z, B), expected)


@pytest.mark.parametrize("B", (1, 3, 10, 19, 48, 50, 1000, 2**20))
def test_continuous_predictions_keep_plain_floor(B):
    z = np.random.default_rng(B).uniform(size=(10**5, 1))
    assert np.array_equal(cube_indices(z, B), np.floor(z * B).astype(np.int64))


@pytest.mark.parametrize("setting", (1, 2, 3))
@pytest.mark.parametrize("n", (100, 1000))
def test_paper_settings_give_the_same_t_as_the_floor_rule(setting, n):
    B = PAPER_BINS[n][setting]
    data = getattr(sim, f"setting{setting}")(n, 0.5 if setting != 3 else 0.05, rng=np.random.default_rng(11))
    preps = [prepare(data.correct, data.confidence, n_classes=data.n_classes)]
    if data.n_classes > 2:
        preps.append(prepare(data.labels, data.probs, k=2))
    else:
        preps.append(prepare((data.labels == 0).astype(np.int64), data.probs[:, 0]))
    for prep in preps:
        part = partition_rows(prep, B)
        old = np.floor(prep.z * B).astype(np.int64)      # the rule before the edge tolerance
        assert np.array_equal(part.keys[part.inverse], old)
        t = debiased_statistic(part.bin_sums(prep), prep.n)
        assert t == pytest.approx(t_from_keys(old, prep.u), rel=1e-12, abs=1e-15)


# --------------------------------------------------------------------------- simplex
def exact_cell(row, B: int) -> list[int]:
    """(floor(s), Lehmer code) of a probability row from exact partial sums; ties stable (lower index first)."""
    z = [Fraction(repr(float(v))) for v in row]
    s = [B * sum(z[: j + 1]) for j in range(len(z) - 1)]
    a = [math.floor(v) for v in s]
    f = [v - math.floor(v) for v in s]
    d = len(s)
    code = sum(sum(1 for i in range(j + 1, d) if f[i] < f[j]) * math.factorial(d - 1 - j) for j in range(d - 1))
    return a + [code]


def simplex_grid(step: int, K: int) -> np.ndarray:
    """All probability vectors of K classes on the grid of `step` hundredths (two-decimal floats)."""
    m = 100 // step
    import itertools
    pts = [c for c in itertools.product(range(m + 1), repeat=K - 1) if sum(c) <= m]
    return np.array([[round(c * step / 100, 2) for c in p] + [round((m - sum(p)) * step / 100, 2)] for p in pts])


def grid_data(n: int, seed: int, K: int = 3, step: int = 5):
    """n rows drawn from the K-class grid, labels drawn from the probabilities."""
    rng = np.random.default_rng(seed)
    pts = simplex_grid(step, K)
    P = pts[rng.integers(0, len(pts), size=n)]
    labels = np.minimum((rng.random(n)[:, None] >= np.cumsum(P, axis=1)).sum(axis=1), K - 1)
    return P, labels


@pytest.mark.parametrize("K,step", [(3, 5), (3, 10), (4, 10)])
@pytest.mark.parametrize("B", (2, 3, 4, 5, 7, 10, 20, 25, 50))
def test_simplex_cells_of_grid_vectors_are_exact(K, step, B):
    Z = simplex_grid(step, K)
    expected = np.array([exact_cell(r, B) for r in Z])
    assert np.array_equal(simplex_cells(Z, B), expected)


def test_the_documented_simplex_example():
    # (0.1 + 0.7) * 20 = 15.999999999999998 in float64; the partial sum is 16
    assert (0.1 + 0.7) * 20 < 16
    assert simplex_cells(np.array([[0.1, 0.7, 0.2]]), 20).tolist() == [exact_cell([0.1, 0.7, 0.2], 20)]
    assert simplex_cells(np.array([[0.1, 0.7, 0.2]]), 20)[0, 1] == 16


@pytest.mark.parametrize("B", (3, 5, 10, 20))
def test_full_calibration_on_a_grid_uses_the_exact_cells(B):
    P, labels = grid_data(3000, seed=B)
    keys = np.array([exact_cell(r, B) for r in P])
    u = np.eye(3)[labels] - P
    res = ct.calib_ci(y=labels, probs=P, k="full", n_bins=B)
    assert res.estimate == pytest.approx(t_from_keys(keys, u), rel=1e-10, abs=1e-15)


# --------------------------------------------------------------------------- every engine
@pytest.fixture(scope="module")
def binary_grid():
    """Binary rows on the hundredths grid at B = 50 (many on edges), the exact T and bins."""
    rng = np.random.default_rng(2024)
    n, B = 4000, 50
    p = rng.choice(GRIDS["hundredths"], size=n)
    y = (rng.random(n) < p).astype(np.int64)
    keys = np.array([exact_bin(v, B) for v in p])
    return {"y": y, "p": p, "B": B, "keys": keys, "t": t_from_keys(keys, y - p),
            "res": ct.calib_ci(y=y, probs=p, n_bins=B)}


def test_grid_calib_ci_uses_the_exact_bins(binary_grid):
    g = binary_grid
    assert g["res"].estimate == pytest.approx(g["t"], rel=1e-10)
    old = t_from_keys(np.floor(g["p"] * g["B"]), g["y"] - g["p"])
    assert old != pytest.approx(g["t"], rel=1e-6)      # the float64 floor moved rows on this grid


def test_grid_streaming_accumulator(binary_grid):
    g = binary_grid
    acc = BinAccumulator(n_bins=g["B"])
    for a in range(0, len(g["y"]), 777):
        acc.update(y=g["y"][a:a + 777], probs=g["p"][a:a + 777])
    assert acc.result().estimate == pytest.approx(g["res"].estimate, rel=1e-12)


def test_grid_resampling(binary_grid):
    g = binary_grid
    prep = prepare(g["y"], g["p"])
    rows = binned_rows(partition_rows(prep, g["B"]), prep.u)
    identity = np.arange(prep.n)[None, :]       # the resample that is the data set itself
    assert resample_statistic(rows, identity)[0] == pytest.approx(g["res"].estimate, rel=1e-12)


def test_grid_tcal(binary_grid):
    g = binary_grid
    res = ct.tcal_test(y=g["y"], probs=g["p"], n_bins=g["B"], n_draws=50, rng=0, statistic="debiased")
    assert res.statistic == pytest.approx(g["res"].estimate, rel=1e-12)


def test_grid_conditional_null(binary_grid):
    g = binary_grid
    res = ct.calib_ci(y=g["y"], probs=g["p"], n_bins=g["B"], null="conditional")
    _, inv = np.unique(g["keys"], return_inverse=True)         # the exact bins
    sums = conditional_bin_sums(g["p"][:, None], inv.ravel())
    ref = conditional_test(g["t"], conditional_moments(sums, len(g["y"])), res.alpha)
    assert res.null_pvalue == pytest.approx(ref.pvalue, rel=1e-9)


def test_grid_monte_carlo_null(binary_grid):
    g = binary_grid
    prep = prepare(g["y"], g["p"])
    mc = monte_carlo_test(prep.z, partition_rows(prep, g["B"]).inverse, label_classes(prep), n=prep.n,
                          n_draws=20, rng=0)
    assert mc.statistic == pytest.approx(g["res"].estimate, rel=1e-12)
