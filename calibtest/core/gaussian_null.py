r"""The Gaussian null of the multi-scale test at large n: label sums of well-filled cells drawn as normals.

The Monte Carlo null of :func:`calibtest.calib_test` draws R = 999 label
vectors over every row: at 3e7 rows that is 3e10 labels (about a minute of two
cores).  At such n almost every bin holds hundreds of expected errors, and the
statistic depends on the labels only through per-cell sums, whose law given
the predictions is then normal to high accuracy.  This module draws those sums
instead of the rows.

Cells.  The scales' partitions of a 1-dim prediction (equal-width or
equal-mass) are intervals, each bin id non-decreasing in p, so the sum of a
row's bin ids over the L scales identifies the cell of their common
refinement (two rows share every bin iff they share the sum).  Per cell c
the additive sums are: the count, V_c = sum p(1 - p), Q_c = sum p^2 (1 - p)^2,
sum p(1 - p) q and sum p(1 - p) q^2 (q = 1 - 2p, so that sum p(1 - p) q is the
third cumulant of the cell's label sum), and of the observed labels
X_c = sum (y - p), sum (y - p)^2 and sum (y - p) q.

Statistic.  On scale i, bin b (a run of consecutive cells), with
S_b = sum_{c in b} X_c and c_b rows, T_i = (1/n) sum_{b: c_b >= 2}
(S_b^2 - sum_{a in b} (y_a - p_a)^2) / (c_b - 1): the debiased statistic of
:mod:`calibtest.core.conditional`; its exact conditional variance is
Var(T_i | Z) = (2/n^2) sum_b (V_b^2 - Q_b) / (c_b - 1)^2 and the exact
covariance of two scales (2/n^2) sum_{b, b'} (V_{b b'}^2 - Q_{b b'}) /
((c_b - 1)(c_b' - 1)) over the intersections b b' of their bins
(:func:`exact_covariance`; E[U_a U_c U_a' U_c'] vanishes unless the pairs coincide).
Spiegelhalter's z_S = sum (y - p) q / sqrt(sum p(1 - p) q^2) is uncorrelated
with every T_i (a product of three label errors with two distinct rows has mean 0).

The null (``null="gaussian"``).  A cell is *thick* when V_c >= :data:`THICK_VARIANCE`
(m = 30): its label sum has |skewness| = |sum p(1-p)q| / V_c^1.5 <= 1/sqrt(m) = 0.18
and excess kurtosis below 1/m, and is drawn as the normal pair (X*_c, Y*_c) with
the exact covariance [[V_c, sum p(1-p)q], [sum p(1-p)q, sum p(1-p)q^2]] (Y the
Spiegelhalter numerator), with sum (y - p)^2 replaced by its mean V_c.  The
rows of *thin* cells (V_c < m: sparse tails, predictions near 0 or 1) are
drawn exactly, Bernoulli(p) labels from the counter-based tie hash keyed by
the seed, the row's position and the draw
(:func:`calibtest.core.counter_draws.tie_uniforms`), so rows in memory and a
stream give the same p-value for a seed.  Rows with p in {0, 1} carry no
randomness and are counted only.  Each draw's T*_i is computed from the bin
sums as above and standardized by its exact standard deviation under this
model, sqrt((2/n^2) sum_b (V_b^2 - Q^thin_b) / (c_b - 1)^2) (the thick cells
lose Q_c: S_b^2 of a normal has variance 2 V_b^2), so z*_i has mean 0 and
variance 1 like the observed z_i = T_i / sd(T_i | Z); the p-value is
(1 + #{max z* >= max z}) / (R + 1) as for the Monte Carlo null.

Why not a normal law of the scales' z.  At B = 2 or 4 the statistic is a sum
of 2-5 terms S_b^2 / (c_b - 1): a weighted sum of centred chi-squares on one
degree of freedom, with skewness near 2 sqrt(2) / sqrt(B) at any n, so a
multivariate normal for (z_B)_B misplaces the tail of the coarse scales
however large n is.  Normality holds for the cell sums, not for the scales'
statistics; drawing the cell sums keeps the chi-square shape and the
dependence between the scales (a fine bin's sum is part of a coarse bin's).

Choice (``null="auto"``, :func:`choose_null`): the Gaussian null when n >=
:data:`GAUSSIAN_MIN_ROWS` and at most :data:`MAX_THIN_ROWS` random rows are in
thin cells; otherwise the exact Monte Carlo null.  Measured in
``vignettes/multiscale_gaussian_null.md``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix


__all__ = ["GAUSSIAN_MIN_ROWS", "THICK_VARIANCE", "MAX_THIN_ROWS", "CellSums", "GaussianDraws", "choose_null",
           "exact_covariance", "model_covariance", "gaussian_draws"]

#: Smallest n at which ``null="auto"`` takes the Gaussian null (below it the Monte Carlo null costs < 2 s).
GAUSSIAN_MIN_ROWS = 1_000_000

#: Smallest sum of p(1 - p) of a cell whose label sum is drawn as a normal (m).
THICK_VARIANCE = 30.0

#: Largest number of random rows in thin cells (drawn exactly, R per row) for ``null="auto"``.
MAX_THIN_ROWS = 200_000

#: Thin rows x draws from which the exact draws of the thin cells show a progress bar (about 2 s).
PROGRESS_MIN_DRAWS = 2e8

#: Columns of the per-cell sums.
_COLS = ("count", "v", "v2", "vq", "vqq", "x", "u2", "xq")


class CellSums:
    """Additive per-cell sums of the common refinement of L interval partitions of a 1-dim p (see the module).

    Parameters
    ----------
    sizes : sequence of int
        Number of bin ids of each partition (ids 0..size-1, non-decreasing in p).
    keep_rows : bool
        Keep the random rows of the cells still thin after each :meth:`add` (their position, p and label),
        for the exact draws of :func:`gaussian_draws`; rows of cells that become thick are dropped.
    """

    def __init__(self, sizes, keep_rows: bool = True):
        self.L = len(sizes)
        self.width = int(sum(int(s) - 1 for s in sizes)) + 1
        self.cols = np.zeros((self.width, len(_COLS)))
        self.bins = np.zeros((self.width, self.L))
        self.keep_rows = keep_rows
        self.pos = np.zeros(0, dtype=np.int64)
        self.p = np.zeros(0)
        self.y = np.zeros(0, dtype=bool)
        self.cell = np.zeros(0, dtype=np.intp)
        self.n = 0

    def add(self, start: int, p, inverses, y) -> "CellSums":
        """Add rows ``start..`` (global positions): predictions ``p``, bin ids ``inverses``, labels ``y`` (bool)."""
        p = np.asarray(p, dtype=np.float64)
        y = np.asarray(y, dtype=bool)
        cell = np.sum(np.asarray(inverses, dtype=np.intp), axis=0) if self.L else np.zeros(p.size, np.intp)
        s2, q, u = p * (1.0 - p), 1.0 - 2.0 * p, y - p
        for j, w in enumerate((None, s2, s2 * s2, s2 * q, s2 * q * q, u, u * u, u * q)):
            self.cols[:, j] += np.bincount(cell, weights=w, minlength=self.width)
        for i, inv in enumerate(inverses):  # a loop over the few scales
            self.bins[:, i] += np.bincount(cell, weights=inv, minlength=self.width)
        if self.keep_rows:
            self._keep(start, p, y, cell, s2 > 0)
        self.n += p.size
        return self

    def _keep(self, start, p, y, cell, random) -> None:
        thin = self.cols[:, 1] < THICK_VARIANCE
        keep = np.flatnonzero(random & thin[cell])
        self.pos = np.concatenate((self.pos, start + keep))
        self.p, self.y = np.concatenate((self.p, p[keep])), np.concatenate((self.y, y[keep]))
        self.cell = np.concatenate((self.cell, cell[keep]))
        still = thin[self.cell]  # cells that became thick drop their rows
        self.pos, self.p, self.y, self.cell = self.pos[still], self.p[still], self.y[still], self.cell[still]

    def merge(self, other: "CellSums") -> "CellSums":
        """Add the sums of the rows that follow (kept rows re-pruned)."""
        self.cols += other.cols
        self.bins += other.bins
        self.n += other.n
        if self.keep_rows:
            self._keep_merged(other)
        return self

    def _keep_merged(self, other) -> None:
        thin = self.cols[:, 1] < THICK_VARIANCE
        parts = [(a.pos, a.p, a.y, a.cell) for a in (self, other)]
        self.pos, self.p, self.y, self.cell = (np.concatenate(x) for x in zip(*parts))
        still = thin[self.cell]
        self.pos, self.p, self.y, self.cell = self.pos[still], self.p[still], self.y[still], self.cell[still]

    @property
    def thin_rows(self) -> int:
        """Random rows in thin cells (the exact part of the Gaussian null)."""
        return int(self.pos.size)

    def layout(self):
        """(occupied cells in order, each scale's bin id per occupied cell, per-scale run starts)."""
        occ = np.flatnonzero(self.cols[:, 0] > 0)
        count = self.cols[occ, 0]
        bins = np.rint(self.bins[occ] / count[:, None]).astype(np.intp)
        starts = [np.flatnonzero(np.r_[True, np.diff(bins[:, i]) != 0]) for i in range(self.L)]
        return occ, bins, starts


def choose_null(n: int, thin_rows: int) -> str:
    """``"gaussian"`` when n >= :data:`GAUSSIAN_MIN_ROWS` and thin_rows <= :data:`MAX_THIN_ROWS`, else ``"monte-carlo"``."""
    return "gaussian" if n >= GAUSSIAN_MIN_ROWS and thin_rows <= MAX_THIN_ROWS else "monte-carlo"


def _bin_sums(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sums over runs of consecutive cells (last axis)."""
    return np.add.reduceat(values, starts, axis=-1)


def _scale_terms(sums: CellSums, occ, starts):
    """Per scale: (c_b, V_b, Q_b) over its bins."""
    cols = sums.cols[occ]
    return [tuple(_bin_sums(cols[:, j], st) for j in (0, 1, 2)) for st in starts]


def exact_covariance(sums: CellSums) -> np.ndarray:
    """Cov(T_i, T_j | Z) under H0 (L x L): (2/n^2) sum_{b, b'} (V_{bb'}^2 - Q_{bb'}) / ((c_b - 1)(c_b' - 1))."""
    return _covariance(sums, thin_only=False)


def model_covariance(sums: CellSums) -> np.ndarray:
    """Cov(T*_i, T*_j) under the Gaussian null: as :func:`exact_covariance` with Q of the thin cells only."""
    return _covariance(sums, thin_only=True)


def _covariance(sums: CellSums, thin_only: bool) -> np.ndarray:
    occ, bins, _ = sums.layout()
    cols = sums.cols[occ]
    v, q2 = cols[:, 1], cols[:, 2] * (cols[:, 1] < THICK_VARIANCE if thin_only else 1.0)
    n, L = sums.n, sums.L
    out = np.zeros((L, L))
    for i in range(L):  # pairs of the few scales
        ci = np.bincount(bins[:, i], weights=cols[:, 0])
        for j in range(i, L):
            cj = np.bincount(bins[:, j], weights=cols[:, 0])
            key = bins[:, i] * (bins[:, j].max() + 1) + bins[:, j]
            cells, inv = np.unique(key, return_inverse=True)
            vb, qb = np.bincount(inv, weights=v), np.bincount(inv, weights=q2)
            bi, bj = cells // (bins[:, j].max() + 1), cells % (bins[:, j].max() + 1)
            ok = (ci[bi] >= 2) & (cj[bj] >= 2)
            den = np.where(ok, (ci[bi] - 1) * (cj[bj] - 1), 1.0)
            out[i, j] = out[j, i] = 2.0 / n ** 2 * float(np.sum(np.where(ok, (vb * vb - qb) / den, 0.0)))
    return out


@dataclass(frozen=True)
class GaussianDraws:
    """T and its null draws under the Gaussian null (the fields of :class:`calibtest.core.conditional.SharedDraws`).

    ``statistic`` (L,) T; ``sd`` (L,) sqrt Var(T | Z) (exact); ``null_draws`` (L, R) z*_i times ``sd`` (so
    that dividing by the exact sd gives z*); ``spiegelhalter`` z_S and ``spiegelhalter_draws`` z*_S (R,);
    ``thin_rows`` the rows drawn exactly.
    """

    statistic: np.ndarray
    sd: np.ndarray
    null_draws: np.ndarray
    spiegelhalter: float
    spiegelhalter_draws: np.ndarray
    thin_rows: int


def _thin_draws(sums: CellSums, occ_index: np.ndarray, C: int, key: np.ndarray, R: int, progress=None):
    """Exact label sums of the thin cells' rows, per draw: (sum U*, sum U*^2, sum U* q), each (R, C).

    The thin rows are taken in reading order (their positions increase) and their uniforms come from one
    generator seeded by the key, in blocks of draws fixed by the number of thin rows, so rows in memory and
    a stream read in any chunks consume the same uniforms.
    """
    out = [np.zeros((R, C)) for _ in range(3)]
    if not sums.thin_rows:
        return out
    order = np.argsort(sums.pos, kind="stable")
    p, col = sums.p[order], occ_index[sums.cell[order]]
    q = 1.0 - 2.0 * p
    cells = np.unique(col)
    member = csr_matrix((np.ones(p.size), (np.searchsorted(cells, col), np.arange(p.size))),
                        shape=(cells.size, p.size))
    weighted = csr_matrix((q, (np.searchsorted(cells, col), np.arange(p.size))), shape=(cells.size, p.size))
    base = [member @ p, member @ (p * p), weighted @ p]  # sum p, sum p^2, sum p q per cell
    gen = np.random.default_rng([int(key[2]), int(key[3]), 0x7431])
    step = max(1, (1 << 22) // p.size)
    for r0 in range(0, R, step):  # blocks of draws bound the memory; they depend on the thin rows' count only
        r1 = min(R, r0 + step)
        y = (gen.random((p.size, r1 - r0)) < p[:, None]).astype(np.float64)  # (rows, draws)
        sy, syq = (member @ y).T, (weighted @ y).T  # sum y and sum y q per cell and draw
        out[0][r0:r1, cells] = sy - base[0]  # sum (y - p)
        out[1][r0:r1, cells] = syq + base[1]  # sum (y - p)^2 = sum y (1 - 2p) + sum p^2
        out[2][r0:r1, cells] = syq - base[2]  # sum (y - p) q
        progress.update(r1 - r0) if progress is not None else None
    return out


def gaussian_draws(sums: CellSums, key: np.ndarray, n_draws: int, progress=None) -> GaussianDraws:
    """T, sd and R null draws of every scale and Spiegelhalter's z under the Gaussian null (see the module).

    Parameters
    ----------
    sums : CellSums
        The rows' cell sums (with the thin cells' rows kept).
    key : ndarray of uint64, shape (4,)
        :func:`calibtest.core.conditional.counter_key` of the seed: words 2-3 seed the thin rows' uniforms,
        words 0-1 the normal draws.
    n_draws : int
        R.
    progress : tqdm bar, optional
        Advanced by the draws done.
    """
    occ, bins, starts = sums.layout()
    cols = sums.cols[occ]
    count, v, v2, vq, vqq, x, u2, xq = cols.T
    thick = v >= THICK_VARIANCE
    index = np.full(sums.width, -1, dtype=np.intp)
    index[occ] = np.arange(occ.size)
    R, n = int(n_draws), sums.n
    tx, tu2, tq = _thin_draws(sums, index, occ.size, key, R, progress)
    gen = np.random.default_rng([int(key[0]), int(key[1]), 0x6A55])
    z1, z2 = gen.standard_normal((R, occ.size)), gen.standard_normal((R, occ.size))
    sv = np.sqrt(np.where(thick, v, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(thick, vq / np.where(thick, sv, 1.0), 0.0)
    rest = np.sqrt(np.clip(np.where(thick, vqq, 0.0) - slope ** 2, 0.0, None))
    xs = np.where(thick, sv * z1, tx)
    u2s = np.where(thick, v, tu2)
    ys = np.where(thick, slope * z1 + rest * z2, tq)
    L = sums.L
    stat, sd, draws = np.zeros(L), np.zeros(L), np.zeros((L, R))
    for i, st in enumerate(starts):  # a loop over the few scales
        c, vb, qb = (_bin_sums(a, st) for a in (count, v, v2))
        qthin = _bin_sums(np.where(thick, 0.0, v2), st)
        ok = c >= 2
        w = np.where(ok, 1.0 / np.where(ok, c - 1.0, 1.0), 0.0)
        stat[i] = float(np.sum((_bin_sums(x, st) ** 2 - _bin_sums(u2, st)) * w)) / n
        sd[i] = math.sqrt(max(0.0, 2.0 * float(np.sum((vb * vb - qb) * w * w)))) / n
        sd_model = math.sqrt(max(0.0, 2.0 * float(np.sum((vb * vb - qthin) * w * w)))) / n
        t_star = ((_bin_sums(xs, st) ** 2 - _bin_sums(u2s, st)) @ w) / n
        draws[i] = t_star / sd_model * sd[i] if sd_model > 0 else 0.0
    sp_var = float(vqq.sum())
    if sp_var > 0:
        sp, sp_draws = float(xq.sum()) / math.sqrt(sp_var), ys.sum(axis=1) / math.sqrt(sp_var)
    else:  # every p in {0, 1/2, 1}: the numerator counts labels of probability 0
        sp, sp_draws = (math.inf if float(xq.sum()) > 0.5 else 0.0), np.zeros(R)
    return GaussianDraws(stat, sd, draws, sp, sp_draws, sums.thin_rows)
