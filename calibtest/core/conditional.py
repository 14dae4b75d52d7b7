r"""Finite-sample null calibration: exact conditional moments of T and a Monte Carlo test.

The paper's [1]_ test of H0: "the model is calibrated" uses the asymptotic law
``n sqrt(w) T / sigma0 -> N(0, 1)`` (the theorem "Limiting distribution for a
top-1-to-k calibrated model"), with sigma0^2 an integral over the whole
support. This module replaces it by the law of T *conditionally on the
observed predictions*.

The conditional null
--------------------
Under H0, E[Y | Z] = Z.  Given the predictions z_1, ..., z_n the label
vectors are independent, so U_a = Y_a - z_a are independent with

* E[U_a] = 0 and Cov(U_a) = Sigma_a = diag(z_a) - z_a z_a^T, the multinomial
  covariance of the label indicators of the binned classes (the top-k block
  for ``top1``/``topk``: the block of a categorical vector has the same
  formula restricted to the block; p(1 - p) in the 1-dim modes; the whole
  K-vector in full calibration),
* third central moment tensor K_a with entries
  ``K_ijl = z_i d_ijl - z_i z_j d_jl - z_i z_j d_il - z_i z_l d_ij + 2 z_i z_j z_l``
  (d = Kronecker delta), since E[Y_i Y_j Y_l] = z_i d_ijl for one-hot Y.
  In one dimension K = p (1 - p) (1 - 2p).

The statistic is ``T = (1/n) sum_bins W_b / (c_b - 1)`` over bins with
c_b >= 2, with ``W_b = sum_{a != b in bin} U_a^T U_b`` (ordered pairs), the
paper's eq. (6).

**Mean.**  E[W_b] = 0 (independent mean-zero factors), so E[T | Z] = 0.

**Variance.**  ``E[W^2] = sum_{a != b} sum_{c != d} E[U_a^T U_b U_c^T U_d]``;
a term vanishes unless every row appears at least twice, i.e.
(c, d) = (a, b) or (b, a), and each of the two gives
E[(U_a^T U_b)^2] = tr(Sigma_a Sigma_b).  Bins are independent and W_b has
mean zero, so cross-bin terms vanish and::

    Var(T | Z) = (1/n^2) sum_b E[W_b^2] / (c_b - 1)^2,
    E[W_b^2]   = 2 sum_{a != b} tr(Sigma_a Sigma_b) = 2 [tr(S^2) - sum_a tr(Sigma_a^2)],

with S = sum_{a in bin} Sigma_a.

**Third moment.**  ``E[W^3]`` is a sum over three ordered pairs; every row
that appears must appear at least twice among the six slots, so at most three
rows are involved:

* three distinct rows, each twice: the pairs form a triangle a-b-c.  For one
  set {a, b, c} there are 3! orders of the edges times 2^3 orientations = 48
  terms, each E[U_a^T U_b U_b^T U_c U_c^T U_a] = tr(Sigma_a Sigma_b Sigma_c)
  (the trace of a product of three symmetric matrices does not depend on the
  order).  Over ordered triples of distinct rows this is
  ``8 sum_{a,b,c distinct} tr(Sigma_a Sigma_b Sigma_c)
  = 8 [tr(S^3) - 3 sum_a tr(Sigma_a^2 S) + 2 sum_a tr(Sigma_a^3)]``
  (inclusion-exclusion over the coincidences a=b, a=c, b=c and a=b=c).
* two distinct rows: all three pairs are {a, b}, 2^3 = 8 orientations per
  unordered pair, each E[(U_a^T U_b)^3] = <K_a, K_b> (Frobenius inner product
  of the third-moment tensors).  Over ordered pairs this is
  ``4 sum_{a != b} <K_a, K_b> = 4 [||sum_a K_a||^2 - sum_a ||K_a||^2]``.

The two-row term is *not* negligible: in a bin of high-confidence rows
(z near 1) K_a ~ -(1 - z_a) while Sigma_a ~ (1 - z_a), so the pair term is of
order c^2 (1-z)^2 against c^3 (1-z)^3 for the triangles -- it dominates when a
bin expects fewer than about one error, which is exactly where T is most
skewed.  Both terms are checked against exact enumeration of all label
configurations in ``tests/core/test_conditional.py``.  Hence::

    E[(T - E T)^3 | Z] = (1/n^3) sum_b E[W_b^3] / (c_b - 1)^3,
    E[W_b^3] = 8 [tr(S^3) - 3 sum_a tr(Sigma_a^2 S) + 2 sum_a tr(Sigma_a^3)]
               + 4 [||sum_a K_a||^2 - sum_a ||K_a||^2].

Every quantity is an additive per-bin sum of per-row terms (Sigma_a,
Sigma_a^2, tr Sigma_a^2, tr Sigma_a^3, K_a, ||K_a||^2) -- note
``sum_a tr(Sigma_a^2 S) = tr((sum_a Sigma_a^2) S)`` -- so one pass of
``np.bincount`` over the rows suffices.

The skewness-corrected p-value: a moment-matched shifted gamma
---------------------------------------------------------------
Given mean 0, variance v and skewness g > 0 of T, T is approximated by
``G - k theta`` with G ~ Gamma(shape k = 4 / g^2, scale theta = sqrt(v) g / 2)
(Pearson's three-moment approximation, as used for quadratic forms by Imhof
1961 [2]_ and Satterthwaite-Welch).  The choice over Cornish-Fisher:

* T is a degenerate U-statistic, a quadratic form in the label errors; its
  Gaussian-label limit is a weighted sum of centred chi-squares, a law of the
  gamma family's shape (lower-bounded, right-skewed), which the shifted gamma
  reproduces exactly for one weight and closely for several;
* the shifted gamma is a proper distribution for every skewness, so its
  p-value is monotone in T and in [0, 1], whereas the Cornish-Fisher quantile
  ``z + g (z^2 - 1) / 6`` is not monotone in z below z = -3/g, so once g is
  large (skewness near 1 is common at n = 100 in the paper's settings, and a
  few sparse bins of near-certain predictions give more) inverting it for a
  p-value is ill-posed and its lower tail is not a distribution.

A negative skewness uses the reflected gamma; |g| < 1e-6 uses the normal law.

The conditional Monte Carlo test
--------------------------------
Keeping the predictions fixed, R label vectors are drawn from them (one
categorical draw per row over the d binned classes plus "another class",
by inverse CDF on uniforms), T* is recomputed for each, and
``p = (1 + #{T* >= T}) / (1 + R)`` (exact-size Monte Carlo p-value; ties are
counted with scipy's relative tolerance).  The draws are vectorised over
blocks of draws with one combined (draw, bin, class) ``np.bincount``; the
uniforms are consumed in the same order whatever the block size, so a seed
gives the same p-value for any block size.  In the 1-dim modes (binary,
top-1) the labels come from a counter-based stream keyed by the seed, the
row's position and the draw (:func:`~calibtest.core.counter_draws.counter_labels`: one PCG64DXSM byte per
row and draw, a splitmix64 hash uniform on the 1-in-256 ties; exact to
2^-53), reduced to additive per-draw bin sums (:class:`~calibtest.core.counter_draws.DrawSums`), so rows in
memory, chunks of a file and partitions of a Dask frame give the same T* for
a seed (to the rounding of the float sums); :mod:`calibtest.core.counter_draws`
describes the stream and the engine, ``benchmarks/results/bench_calib_test.txt``
the timings.

The point-mass null
-------------------
When Var(T | Z) = 0 the conditional law of T is the point mass at E[T | Z] = 0:
every row that enters T either has a degenerate prediction (binary p in
{0, 1}, a top-1 confidence of exactly 1, a one-hot vector), whose label
the draws reproduce exactly, or is the only row of its bin with a random
label, so every product U_a^T U_b of two rows of a bin is 0 (hard 0/1
labels used as predictions, an LLM that always says 100%).  Then
z = (T - E[T | Z]) / sd(T | Z) is read as its limit: +inf when T > 0, -inf
when T < 0, and 0 when T = 0 (:func:`point_mass_sign`).  The observed T can
depart from 0 only through a label of probability 0 (y = 1 at p = 0, y = 0
at p = 1), which no draw has, so under H0 the observed labels are a possible
draw, T = 0 and z = 0 with probability 1: the Monte Carlo p-value
(1 + #{T* >= T}) / (R + 1) is 1/(R + 1) when T > 0 (the smallest R draws can
give) and 1 otherwise, and the size stays exact.  The conditional test's
exact p-value P(T* >= T | Z) is 0 when T > 0 and 1 otherwise
(:func:`conditional_test`).  The floating-point T of such a scale carries
rounding of order 1e-18, which these rules never compare with 0: a label
vector that the draws can give is T = 0 by definition, and otherwise T is
recomputed from its integer-valued bin sums and compared with a tolerance
of :data:`POINT_MASS_RTOL` times the size of its terms.

Validation
----------
``vignettes/null_calibration.md``: on the paper's Settings 1-3 at n = 100,
1000 and 10000 with the automatic and the paper's bins (1000 calibrated data
sets per point), the conditional and Monte Carlo nulls are within alpha +- 3
Monte Carlo s.e. in all 36 cells at alpha = 0.05 and 0.10 (the asymptotic null is outside
in 19 of 36), and the two agree to 0.006 in rejection rate.

References
----------
.. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
       l2 Expected Calibration Error", arXiv:2408.08998, 2024.
.. [2] Imhof, "Computing the distribution of quadratic forms in normal
       variables", Biometrika 48:419-426, 1961.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from scipy import stats as _sps

from calibtest.options import DEFAULT_DRAWS, DEFAULT_SEED, NULLS, check_option, check_seed
from calibtest.core.arrays import read_only
from calibtest.core.counter_draws import counter_draw_sums

if TYPE_CHECKING:  # annotations only
    from calibtest.core.targets import PreparedData

__all__ = [
    "null_law",
    "NULLS",
    "ConditionalBinSums",
    "ConditionalMoments",
    "ConditionalTest",
    "MonteCarloTest",
    "conditional_bin_sums",
    "conditional_sum_columns",
    "conditional_sum_width",
    "conditional_sums_from_columns",
    "conditional_memory",
    "conditional_moments",
    "conditional_test",
    "monte_carlo_test",
    "monte_carlo_draws",
    "SharedDraws",
    "shifted_gamma_sf",
    "SHIFTED_GAMMA_MAX_SKEWNESS",
    "shifted_gamma_isf",
    "label_classes",
    "point_mass_sign",
    "POINT_MASS_RTOL",
]

#: Largest number of per-row entries (rows per chunk times columns) kept in memory at once.
_CHUNK_ENTRIES = 1 << 22

#: Rows per chunk that keep the per-row temporaries in cache.
_CACHE_ROWS = 1 << 15

#: |skewness| below which the normal law replaces the shifted gamma.
_SKEW_NORMAL = 1e-6

#: Largest conditional skewness at which the shifted-gamma p-value is trusted.  Beyond it the law
#: of T given the predictions is dominated by a handful of label errors (a lattice with a large atom),
#: which no three-moment approximation follows: with every prediction at 0.9999 (skewness 17) the
#: shifted gamma rejects 95% of calibrated data sets at alpha = 0.05, with predictions uniform on
#: [0.999, 1] (skewness 5.6) it rejects 0.3%.  Up to skewness 3 its size stayed within 3 Monte Carlo
#: standard errors of alpha on every design measured (``vignettes/null_calibration.md``).
SHIFTED_GAMMA_MAX_SKEWNESS = 3.0

#: Relative tolerance under which T counts as equal to its null value 0 when Var(T | Z) = 0 and some
#: label has probability 0 (:func:`point_mass_sign`): |T| <= POINT_MASS_RTOL * (1/n) sum_b (||S_b||^2 +
#: Q_b) / (c_b - 1).  A nonzero T of such labels is at least 1/c_b of that size when the degenerate rows
#: fill the bin (S_b and Q_b are integers), far above both the tolerance and the rounding of the sums.
POINT_MASS_RTOL = 2.0 ** -26


# ---------------------------------------------------------------------------
# index helpers for symmetric tensors


def conditional_memory(d: int, m: int) -> float:
    """Bytes that :func:`conditional_bin_sums` needs for a d-dimensional binned vector and m bins.

    Per bin it keeps d(d+1) entries of Sigma and Sigma^2, the d(d+1)(d+2)/6
    unique entries of the third-moment tensor and three traces, in float64,
    plus the unpacked d x d matrices and the index of the tensor's entries.
    """
    terms = d * (d + 1) + d * (d + 1) * (d + 2) / 6 + 3
    return 8.0 * (terms * m + 2 * m * d * d) + 100.0 * d * (d + 1) * (d + 2) / 6 + 8.0 * _CHUNK_ENTRIES


def _sym3(d: int):
    """Unique index triples i <= j <= l of a symmetric d x d x d tensor and their multiplicities."""
    i, j, l = np.array([(a, b, c) for a in range(d) for b in range(a, d) for c in range(b, d)],
                       dtype=np.intp).T
    mult = np.where((i == j) & (j == l), 1.0, np.where((i == j) | (j == l), 3.0, 6.0))
    return i, j, l, mult


def _row_columns(z: np.ndarray, iu, ju, triples) -> list[np.ndarray]:
    """Per-row terms as contiguous columns (fast ``np.bincount``), for the rows ``z`` (n, d).

    Returns the upper-triangle entries of Sigma_a = diag(z) - z z^T (diagonal
    as z (1 - z) for accuracy near 0 and 1), those of Sigma_a^2, the unique
    entries i <= j <= l of the third central moment tensor K_a in factored form
    (K_iii = z_i (1 - z_i)(1 - 2 z_i), K_iil = -z_i z_l (1 - 2 z_i),
    K_ijj = -z_i z_j (1 - 2 z_j), K_ijl = 2 z_i z_j z_l for distinct indices),
    then tr(Sigma_a^2), tr(Sigma_a^3) and ||K_a||^2.
    """
    d = z.shape[1]
    zc = [np.ascontiguousarray(z[:, i]) for i in range(d)]
    sig: list[list[Any]] = [[None] * d for _ in range(d)]
    for i in range(d):  # loops over the few coordinates, not rows
        sig[i][i] = zc[i] * (1.0 - zc[i])
        for j in range(i + 1, d):
            sig[i][j] = sig[j][i] = -zc[i] * zc[j]
    sig2 = {}
    for i, j in zip(iu, ju):
        acc = sig[i][0] * sig[0][j]
        for l in range(1, d):
            acc = acc + sig[i][l] * sig[l][j]
        sig2[i, j] = acc
    tr2 = sum((1.0 if i == j else 2.0) * sig[i][j] ** 2 for i, j in zip(iu, ju))
    tr3 = sum((1.0 if i == j else 2.0) * sig2[i, j] * sig[i][j] for i, j in zip(iu, ju))
    kap, ksq = [], 0.0
    for i, j, l, mult in triples:
        if i == j == l:
            k = sig[i][i] * (1.0 - 2.0 * zc[i])
        elif i == j:
            k = sig[i][l] * (1.0 - 2.0 * zc[i])
        elif j == l:
            k = sig[i][j] * (1.0 - 2.0 * zc[j])
        else:
            k = 2.0 * zc[i] * zc[j] * zc[l]
        kap.append(k)
        ksq = ksq + mult * k * k
    return ([sig[i][j] for i, j in zip(iu, ju)] + [sig2[i, j] for i, j in zip(iu, ju)] + kap
            + [tr2, tr3, ksq])


# ---------------------------------------------------------------------------
# per-bin sums and the moments


@dataclass(frozen=True, eq=False)
class ConditionalBinSums:
    """Additive per-bin sums of the per-row null moments (one entry per non-empty bin).

    Attributes
    ----------
    count : ndarray, shape (m,)
        c_b, rows per bin.
    sigma : ndarray, shape (m, d, d)
        S_b = sum of Sigma_a = diag(z_a) - z_a z_a^T over the bin.
    sigma_sq : ndarray, shape (m, d, d)
        sum of Sigma_a^2.
    tr2, tr3 : ndarray, shape (m,)
        sum of tr(Sigma_a^2) and of tr(Sigma_a^3).
    kappa : ndarray, shape (m, u)
        sum of K_a, unique entries i <= j <= l (u = d(d+1)(d+2)/6).
    kappa_sq : ndarray, shape (m,)
        sum of ||K_a||^2 (Frobenius).
    kappa_mult : ndarray, shape (u,)
        Multiplicity (1, 3 or 6) of each unique entry in the full tensor.
    """

    count: np.ndarray
    sigma: np.ndarray
    sigma_sq: np.ndarray
    tr2: np.ndarray
    tr3: np.ndarray
    kappa: np.ndarray
    kappa_sq: np.ndarray
    kappa_mult: np.ndarray

    def __post_init__(self):
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, read_only(getattr(self, f.name)))


def _bincount_cols(inverse: np.ndarray, values: np.ndarray, m: int) -> np.ndarray:
    out = np.empty((m, values.shape[1]))
    for c in range(values.shape[1]):  # a loop over the few columns, not rows or bins
        out[:, c] = np.bincount(inverse, weights=values[:, c], minlength=m)
    return out


def conditional_bin_sums(z, inverse, m: int | None = None) -> ConditionalBinSums:
    """Per-bin sums of the conditional null moments of the label errors.

    Parameters
    ----------
    z : array_like, shape (n, d) or (n,)
        The binned prediction vector of each row: p (binary), the top-1
        confidence, the sorted top-k probabilities, or the whole K-vector
        (full calibration).  Rows of Y are one-hot over these d classes plus,
        when sum z < 1, "another class".
    inverse : array_like of int, shape (n,)
        Bin number 0..m-1 of each row.
    m : int, optional
        Number of bins (default ``inverse.max() + 1``).

    Notes
    -----
    Cost O(n d^3) in chunks of rows; ``d (d+1) + d(d+1)(d+2)/6 + 4`` weighted
    ``np.bincount`` calls over contiguous per-row columns.  The sums are
    :func:`conditional_sum_columns` unpacked by :func:`conditional_sums_from_columns`.
    """
    z = np.asarray(z, dtype=np.float64)
    if z.ndim == 1:
        z = z[:, None]
    inverse = np.asarray(inverse, dtype=np.intp)
    m = int(inverse.max()) + 1 if m is None else int(m)
    count = np.bincount(inverse, minlength=m).astype(np.float64)
    return conditional_sums_from_columns(count, _packed_sums(z, inverse, m).T)


def conditional_sum_width(d: int) -> int:
    """Columns of :func:`conditional_sum_columns` for a d-dimensional binned vector.

    4 for d = 1 (sums of v, v^2, v (1 - 2p) and v^3, v = p (1 - p)); otherwise
    the d(d+1)/2 upper-triangle entries of Sigma and of Sigma^2, the
    d(d+1)(d+2)/6 unique entries of K, then tr(Sigma^2), tr(Sigma^3) and ||K||^2:
    O(d^3) floats per bin (43 at d = 4).
    """
    if d == 1:
        return 4
    return d * (d + 1) + d * (d + 1) * (d + 2) // 6 + 3


def conditional_sum_columns(z, inverse, m: int) -> np.ndarray:
    """The additive per-bin sums of the conditional null moments, packed: shape (m, w).

    The sums of a union of disjoint row sets are the sums of their columns,
    so a stream adds them chunk by chunk and partition by partition
    (:class:`calibtest.core.binstats.BinStats` ``null_sums``), and
    :func:`conditional_sums_from_columns` unpacks them for
    :func:`conditional_moments`.

    Parameters
    ----------
    z : array_like, shape (n, d) or (n,)
        Binned prediction vectors (as for :func:`conditional_bin_sums`).
    inverse : array_like of int, shape (n,)
        Bin number 0..m-1 of each row.
    m : int
        Number of bins.

    Returns
    -------
    ndarray, shape (m, :func:`conditional_sum_width` (d))
    """
    z = np.asarray(z, dtype=np.float64)
    if z.ndim == 1:
        z = z[:, None]
    return np.ascontiguousarray(_packed_sums(z, np.asarray(inverse, dtype=np.intp), int(m)).T)


def _packed_sums(z: np.ndarray, inverse: np.ndarray, m: int) -> np.ndarray:
    """The per-bin sums as rows of one array, shape (w, m) (column layout of :func:`conditional_sum_width`)."""
    n, d = z.shape
    if d == 1:
        return _one_dim_bin_sums(z[:, 0], inverse, m)
    iu, ju = np.triu_indices(d)
    ti, tj, tl, mult = _sym3(d)
    triples = list(zip(ti.tolist(), tj.tolist(), tl.tolist(), mult.tolist()))
    p, u = iu.size, ti.size
    out = np.zeros((2 * p + u + 3, m))
    step = max(1, min(_CHUNK_ENTRIES // (2 * p + u + 3 + d), max(_CACHE_ROWS, m)))
    for start in range(0, n, step):  # a handful of chunks bounding memory
        inv = inverse[start:start + step]
        cols = _row_columns(z[start:start + step], iu, ju, triples)
        for c, col in enumerate(cols):  # a loop over the columns, not rows or bins
            out[c] += np.bincount(inv, weights=col, minlength=m)
    return out


def conditional_sums_from_columns(count, columns) -> ConditionalBinSums:
    """Unpack the per-bin sums of :func:`conditional_sum_columns` (shape (m, w)) with the counts c_b.

    The dimension d is read from the width w (:func:`conditional_sum_width`).
    """
    count = np.asarray(count, dtype=np.float64)
    out = np.asarray(columns, dtype=np.float64).T
    m, w = count.size, out.shape[0]
    if w == 4:
        sv, sv2, sk, sv3 = out
        return ConditionalBinSums(count=count, sigma=sv[:, None, None], sigma_sq=sv2[:, None, None], tr2=sv2,
                                  tr3=sv3, kappa=sk[:, None], kappa_sq=sv2 - 4.0 * sv3, kappa_mult=np.ones(1))
    d = next((k for k in range(2, w) if conditional_sum_width(k) >= w), w)
    if conditional_sum_width(d) != w:
        raise ValueError(f"{w} columns are not the conditional sums of any dimension")
    iu, ju = np.triu_indices(d)
    mult = _sym3(d)[3]
    p, u = iu.size, mult.size

    def unpack(block):
        mat = np.empty((m, d, d))
        mat[:, iu, ju] = block.T
        mat[:, ju, iu] = block.T
        return mat

    return ConditionalBinSums(count=count, sigma=unpack(out[:p]), sigma_sq=unpack(out[p:2 * p]),
                              kappa=out[2 * p:2 * p + u].T, tr2=out[2 * p + u], tr3=out[2 * p + u + 1],
                              kappa_sq=out[2 * p + u + 2], kappa_mult=mult)


def _one_dim_bin_sums(p: np.ndarray, inverse: np.ndarray, m: int) -> np.ndarray:
    """The 1-dim case with four bincounts, rows (sum v, sum v^2, sum K, sum v^3): v = p(1-p),
    Sigma^2 = tr Sigma^2 = v^2, tr Sigma^3 = v^3, K = v (1 - 2p) and K^2 = v^2 (1 - 4v) (as
    (1 - 2p)^2 = 1 - 4v).

    Rows go in cache-sized chunks (at least m rows, so the per-chunk O(m) cost stays small).
    """
    out = np.zeros((4, m))
    step = max(_CACHE_ROWS, m)
    for start in range(0, p.shape[0], step):  # chunks of rows that stay in cache
        pc, ic = p[start:start + step], inverse[start:start + step]
        v = 1.0 - pc
        v *= pc
        k = pc * -2.0
        k += 1.0
        k *= v
        v2 = v * v
        out[0] += np.bincount(ic, weights=v, minlength=m)
        out[1] += np.bincount(ic, weights=v2, minlength=m)
        out[2] += np.bincount(ic, weights=k, minlength=m)
        v2 *= v
        out[3] += np.bincount(ic, weights=v2, minlength=m)
    return out


@dataclass(frozen=True)
class ConditionalMoments:
    """Exact moments of T given the predictions, under H0.

    Attributes
    ----------
    variance : float
        Var(T | Z) = (2/n^2) sum_b [tr(S_b^2) - sum_a tr(Sigma_a^2)] / (c_b - 1)^2.
    third_moment : float
        E[T^3 | Z] (E[T | Z] = 0), see the module docstring.
    skewness : float
        third_moment / variance^1.5 (0 when the variance is 0).
    """

    variance: float
    third_moment: float
    skewness: float

    @classmethod
    def from_moments(cls, variance: float, third: float) -> "ConditionalMoments":
        variance = max(float(variance), 0.0)
        scale = math.sqrt(variance) ** 3  # underflows to 0 for a tiny positive variance
        if scale > 0:
            skew = float(third) / scale
        else:
            skew = 0.0 if variance == 0 or third == 0 else math.copysign(math.inf, third)
        return cls(variance, float(third), skew)


def conditional_moments(sums: ConditionalBinSums, n: int) -> ConditionalMoments:
    """Var(T | Z) and E[T^3 | Z] under H0 from per-bin sums (module docstring for the derivation).

    Parameters
    ----------
    sums : ConditionalBinSums
    n : int
        Total number of rows (the 1/n of T).
    """
    keep = sums.count >= 2
    c1 = sums.count[keep] - 1.0
    S = sums.sigma[keep]
    tr_s2 = np.einsum("bij,bij->b", S, S)
    e2 = 2.0 * (tr_s2 - sums.tr2[keep])
    tr_s3 = np.einsum("bij,bjk,bki->b", S, S, S)
    triangles = tr_s3 - 3.0 * np.einsum("bij,bij->b", sums.sigma_sq[keep], S) + 2.0 * sums.tr3[keep]
    kap = sums.kappa[keep]
    pairs = (kap * kap) @ sums.kappa_mult - sums.kappa_sq[keep]
    e3 = 8.0 * triangles + 4.0 * pairs
    variance = float(np.sum(e2 / c1**2)) / n**2
    third = float(np.sum(e3 / c1**3)) / n**3
    return ConditionalMoments.from_moments(variance, third)


# ---------------------------------------------------------------------------
# the shifted gamma law


def _gamma_params(variance: float, skewness: float):
    g = abs(skewness)
    shape = 4.0 / g**2
    scale = math.sqrt(variance) * g / 2.0
    return shape, scale


def shifted_gamma_sf(t, variance: float, skewness: float):
    """P(X >= t) for the shifted gamma X with mean 0, the given variance and skewness.

    X = G - k theta, G ~ Gamma(k = 4/g^2, theta = sqrt(v) g / 2) for g > 0;
    the reflection -(G - k theta) for g < 0; N(0, v) for |g| < 1e-6.  With
    variance 0 the law is the point mass at 0: p = 1 for t <= 0, else 0.
    """
    t = np.asarray(t, dtype=float)
    if variance <= 0:
        out = np.where(t <= 0, 1.0, 0.0)
    elif abs(skewness) < _SKEW_NORMAL:
        out = _sps.norm.sf(t / math.sqrt(variance))
    else:
        k, theta = _gamma_params(variance, skewness)
        if skewness > 0:
            out = _sps.gamma.sf(k + t / theta, k)
        else:
            out = _sps.gamma.cdf(k - t / theta, k)
    return float(out) if out.ndim == 0 else out


def shifted_gamma_isf(alpha: float, variance: float, skewness: float) -> float:
    """Upper alpha critical value of the shifted gamma: P(X >= c) = alpha (see :func:`shifted_gamma_sf`)."""
    if variance <= 0:
        return 0.0
    if abs(skewness) < _SKEW_NORMAL:
        return float(math.sqrt(variance) * _sps.norm.isf(alpha))
    k, theta = _gamma_params(variance, skewness)
    if skewness > 0:
        return float(theta * (_sps.gamma.isf(alpha, k) - k))
    return float(theta * (k - _sps.gamma.ppf(alpha, k)))


@dataclass(frozen=True)
class ConditionalTest:
    """The conditional test of H0: calibrated, with the shifted-gamma p-value.

    Attributes
    ----------
    statistic : float
        T.
    zstat : float
        T / sqrt(Var(T | Z)); with variance 0 (the point-mass null) its limit: +-inf when T is
        nonzero, 0 when T = 0.
    pvalue : float
        P(X >= T) for the moment-matched shifted gamma X; with variance 0 the exact
        P(T* >= T | Z) of the point mass at 0: 0 when T > 0, else 1.
    threshold : float
        Critical value c of T at the level alpha: P(X >= c) = alpha.
    variance, skewness, third_moment : float
        Conditional moments of T under H0.
    reliable : bool
        Whether the shifted gamma may be used (see :data:`SHIFTED_GAMMA_MAX_SKEWNESS`).
    """

    statistic: float
    zstat: float
    pvalue: float
    threshold: float
    variance: float
    skewness: float
    third_moment: float

    #: The largest skewness at which the shifted gamma is trusted (:data:`SHIFTED_GAMMA_MAX_SKEWNESS`).
    max_skewness: ClassVar[float] = SHIFTED_GAMMA_MAX_SKEWNESS

    def threshold_at(self, alpha: float) -> float:
        """Critical value of T at level ``alpha`` under the shifted gamma (nan when it cannot be fitted)."""
        if not math.isfinite(self.skewness):
            return math.nan
        return shifted_gamma_isf(alpha, self.variance, self.skewness)

    @property
    def reliable(self) -> bool:
        """The shifted-gamma p-value can be trusted: |skewness| <= :data:`SHIFTED_GAMMA_MAX_SKEWNESS`.

        A zero variance (every prediction exactly 0 or 1 in its bin) is reliable: T is then 0 under H0.
        """
        return bool(abs(self.skewness) <= SHIFTED_GAMMA_MAX_SKEWNESS)


def conditional_test(t: float, moments: ConditionalMoments, alpha: float) -> ConditionalTest:
    """Skewness-corrected conditional test of H0 for the observed T."""
    v = moments.variance
    if v > 0:
        z = t / math.sqrt(v)
    else:
        z = 0.0 if t == 0 else math.copysign(math.inf, t)  # the point mass at 0: z's limit
    if math.isfinite(moments.skewness):
        p = shifted_gamma_sf(t, v, moments.skewness)
        thr = shifted_gamma_isf(alpha, v, moments.skewness)
    else:  # no gamma law has infinite skewness: only the Monte Carlo test can decide (``reliable`` is False)
        p = thr = math.nan
    return ConditionalTest(float(t), float(z), float(p), thr, v, moments.skewness, moments.third_moment)


# ---------------------------------------------------------------------------
# the conditional Monte Carlo test


def _check_rng(rng):
    """Return (Generator, recorded seed) from None, an int or a Generator.

    The argument is checked by the table's ``rng`` option (:func:`calibtest.options.check_seed`); the
    seed rule is this test's own and differs from :func:`calibtest.inputs.validation.resolve_seed`, so it is
    kept (the recorded seeds and draws stay as they were): a Generator records None (not
    ``"Generator"``).  None is the default seed :data:`calibtest.options.DEFAULT_SEED`, as everywhere.
    """
    if rng is None:
        rng = DEFAULT_SEED
    if isinstance(check_seed(rng), np.random.Generator):
        return rng, None
    return np.random.default_rng(int(rng)), int(rng)


@dataclass(frozen=True, eq=False)
class MonteCarloTest:
    """Conditional Monte Carlo test of H0: calibrated (labels redrawn from the predictions).

    Attributes
    ----------
    statistic : float
        T of the observed labels (computed by the same code as the draws).
    pvalue : float
        (1 + #{T* >= T}) / (1 + R).
    n_draws : int
        R.
    seed : int or None
        The seed that reproduces the draws (None when a Generator was passed).
    null_draws : ndarray, shape (R,)
        The T* of the draws, in draw order.
    """

    statistic: float
    pvalue: float
    n_draws: int
    seed: int | None
    null_draws: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "null_draws", read_only(self.null_draws))

    def critical_value(self, alpha: float) -> float:
        """Smallest D such that T > D rejects at level alpha (inf if no T rejects)."""
        allowed = math.floor(alpha * (self.n_draws + 1) + 1e-9) - 1  # max #{T* >= T} that rejects
        if allowed < 0:
            return math.inf
        ordered = np.sort(self.null_draws)[::-1]
        return float(ordered[allowed]) if allowed < ordered.size else -math.inf


def label_classes(data: PreparedData) -> np.ndarray:
    """Class code 0..d-1 of each row among the d binned classes, d for "another class"."""
    y = np.rint(data.y)
    hit = y.max(axis=1) > 0.5
    return np.where(hit, np.argmax(y, axis=1), y.shape[1]).astype(np.intp)


def point_mass_sign(z, inverse, observed, *, n: int | None = None, complete: bool = False) -> int:
    """Sign of T - E[T | Z] on a partition whose conditional null law of T is a point mass.

    For a partition with Var(T | Z) = 0 (see "The point-mass null" in the
    module docstring) the null law of T is the point mass at 0, and
    z = (T - E[T | Z]) / sd(T | Z) is read as its limit, ``sign * inf``
    (0 for sign 0).  The sign is

    * 0 when every row in a bin of >= 2 rows has a label of positive
      probability under the label draws (the labels are a possible draw, so
      T = 0 exactly, whatever the rounding of its floating-point value);
    * otherwise the sign of T recomputed as (1/n) sum_b (||S_b||^2 - Q_b) /
      (c_b - 1) from S_b = sum U_a and Q_b = sum ||U_a||^2 over the bin
      (U = e_y - z; integer-valued on the degenerate rows), 0 when
      |T| <= :data:`POINT_MASS_RTOL` (1/n) sum_b (||S_b||^2 + Q_b) / (c_b - 1).

    Under H0 the first case holds with probability 1, so a test that reads
    z = +inf as "beyond every draw" keeps its exact size.

    Parameters
    ----------
    z : array_like, shape (n, d) or (n,)
        Binned prediction vectors (as for :func:`monte_carlo_test`).
    inverse : array_like of int, shape (n,)
        Bin of each row.
    observed : array_like of int, shape (n,)
        Observed class code of each row (:func:`label_classes`).
    n : int, optional
        Divisor of T (default: number of rows).
    complete : bool
        The d classes exhaust the labels (full calibration).

    Returns
    -------
    int
        +1, -1 or 0.
    """
    z = np.asarray(z, dtype=np.float64)
    if z.ndim == 1:
        z = z[:, None]
    inverse = np.asarray(inverse, dtype=np.intp)
    observed = np.asarray(observed, dtype=np.intp)
    count = np.bincount(inverse)
    rows = np.flatnonzero(count[inverse] >= 2)
    if rows.size == 0:  # no bin holds two rows: T = 0
        return 0
    zr, cls = z[rows], observed[rows]
    d = zr.shape[1]
    # the probability of each class under the draws' inverse CDF: cum_j - cum_{j-1}, and 1 - cum_{d-1}
    # for another class (0 when the d classes exhaust the labels)
    cum = np.cumsum(zr, axis=1)
    upper = np.concatenate((cum, np.full((cum.shape[0], 1), 0.0 if complete else 1.0)), axis=1)
    if complete:
        upper[:, d - 1] = 1.0
    lower = np.concatenate((np.zeros((cum.shape[0], 1)), cum), axis=1)
    take = np.arange(rows.size), cls
    if np.all(upper[take] > lower[take]):  # the labels are a possible draw: T = E[T | Z] = 0
        return 0
    u = -zr
    hit = cls < d
    u[np.flatnonzero(hit), cls[hit]] += 1.0
    inv = inverse[rows]
    s_b = _bincount_cols(inv, u, count.size)
    q_b = np.bincount(inv, weights=np.einsum("ni,ni->n", u, u), minlength=count.size)
    keep = count >= 2
    s2 = np.einsum("bi,bi->b", s_b, s_b)[keep]
    c1 = count[keep] - 1.0
    n_div = z.shape[0] if n is None else int(n)
    t = float(np.sum((s2 - q_b[keep]) / c1)) / n_div
    size = float(np.sum((s2 + q_b[keep]) / c1)) / n_div
    if abs(t) <= POINT_MASS_RTOL * size:
        return 0
    return 1 if t > 0 else -1


def _point_mass(z, inverse, n: int) -> bool:
    """Var(T | Z) = 0 on this partition: T's conditional null law is the point mass at 0."""
    return conditional_moments(conditional_bin_sums(z, inverse), n).variance == 0


def _may_be_point_mass(plan: "_DrawPlan", draws: np.ndarray) -> bool:
    """False when the draws show that Var(T | Z) > 0 (so the conditional moments need not be computed).

    With Var(T | Z) = 0 every T* is 0 up to the rounding of its terms, each at most (d + 1) w_a / n in
    size (w_a = 1 / (c_b - 1)): below n eps (d + 1) sum_a w_a / n, far under the 1e-6 margin here.
    """
    size = (plan.d + 1) * float(np.sum(plan.inv_c1[plan.bin])) / plan.n
    return bool(np.max(np.abs(draws)) <= 1e-6 * size)


class _DrawPlan:
    """Rows of the bins with c >= 2 and the per-row constants every draw needs."""

    def __init__(self, z: np.ndarray, inverse: np.ndarray, n: int, complete: bool):
        count = np.bincount(inverse)
        rows = np.flatnonzero(count[inverse] >= 2)
        kept_bins, b = np.unique(inverse[rows], return_inverse=True)
        self.n = n
        self.rows = rows
        self.bin = b.ravel().astype(np.intp)
        self.m = kept_bins.size
        zk = z[rows]
        self.nk, self.d = zk.shape
        self.inv_c1 = 1.0 / (count[kept_bins] - 1.0)
        self.zsum = _bincount_cols(self.bin, zk, self.m)
        cum = np.cumsum(zk, axis=1)
        if complete:
            cum[:, -1] = np.inf  # the d classes exhaust the labels (full calibration)
        self.cum = cum
        # h[a, j] = ||e_j - z_a||^2 / (c - 1), with e_d = 0 ("another class"); T's within-row
        # part sum_a h[a, class_a] = sum_a h[a, d] + sum_{j<d} sum_a 1{class_a = j} (h[a, j] - h[a, d])
        q2 = np.einsum("ni,ni->n", zk, zk)
        w = self.inv_c1[self.bin]
        self.h_other = float(np.sum(q2 * w))
        self.h_diff = (1.0 - 2.0 * zk) * w[:, None]
        self._base: dict[int, np.ndarray] = {}

    def classes(self, u: np.ndarray) -> np.ndarray:
        """Inverse-CDF categorical draws: class = #{j : cum_j <= u} (int8, 0..d)."""
        cls = (u >= self.cum[:, 0]).view(np.int8)
        for j in range(1, self.d):  # a loop over the few classes
            cls = cls + (u >= self.cum[:, j]).view(np.int8)
        return cls

    def _cells(self, R: int) -> np.ndarray:
        """(draw, bin) cell of each row-draw times (d + 1), cached per block size."""
        if R not in self._base:
            self._base[R] = (np.arange(R, dtype=np.intp)[:, None] * self.m + self.bin) * (self.d + 1)
        return self._base[R]

    def statistics(self, cls: np.ndarray) -> np.ndarray:
        """T for each row of ``cls`` (shape (R, nk), class codes 0..d)."""
        R = cls.shape[0]
        d1 = self.d + 1
        cell = self._cells(R) + cls
        counts = np.bincount(cell.ravel(), minlength=R * self.m * d1).reshape(R, self.m, d1)
        s = counts[:, :, :self.d] - self.zsum
        between = np.einsum("rbi,rbi,b->r", s, s, self.inv_c1)
        within = np.full(R, self.h_other)
        for j in range(self.d):  # a loop over the few classes; einsum avoids threaded BLAS
            within += np.einsum("rn,n->r", cls == j, self.h_diff[:, j])
        return (between - within) / self.n


def monte_carlo_test(z, inverse, observed, *, n: int | None = None, n_draws: int = DEFAULT_DRAWS, rng=None,
                     complete: bool = False, block_size: int | None = None) -> MonteCarloTest:
    """Conditional Monte Carlo test: redraw labels from the predictions and recompute T.

    Parameters
    ----------
    z : array_like, shape (n, d) or (n,)
        Binned prediction vectors (as for :func:`conditional_bin_sums`).
    inverse : array_like of int, shape (n,)
        Bin of each row.
    observed : array_like of int, shape (n,)
        Observed class code of each row among the d binned classes, d for
        another class (see :func:`label_classes`); in the 1-dim modes 0 means
        y = 1 and 1 means y = 0.
    n : int, optional
        Divisor of T (default: number of rows).
    n_draws : int
        R, the number of label draws (default 999).
    rng : None, int or numpy.random.Generator
        Seed; the same seed gives the same p-value whatever ``block_size``.
    complete : bool
        The d classes exhaust the labels (full calibration: z sums to 1).
    block_size : int, optional
        Draws per vectorised block (default: about 2^21 row-draws per block).

    Returns
    -------
    MonteCarloTest

    Notes
    -----
    When Var(T | Z) = 0 (the point-mass null: every draw gives T* = 0 up to
    rounding) the p-value is 1/(R + 1) when :func:`point_mass_sign` is +1
    (T > 0) and 1 otherwise; the rounding of T and T* is never compared.

    With d = 1 (binary, top-1) the labels of every row come from the
    counter-based stream (:func:`~calibtest.core.counter_draws.counter_labels`), as in
    :func:`monte_carlo_draws`; otherwise by inverse CDF on one uniform per row.
    """
    z = np.asarray(z, dtype=np.float64)
    if z.ndim == 1:
        z = z[:, None]
    inverse = np.asarray(inverse, dtype=np.intp)
    observed = np.asarray(observed, dtype=np.intp)
    n_draws = check_option("n_draws", n_draws)
    gen, seed = _check_rng(rng)
    n_div = z.shape[0] if n is None else int(n)
    plan = _DrawPlan(z, inverse, n_div, complete)
    if plan.nk == 0:  # no bin holds two rows: T = 0 for every label vector
        return MonteCarloTest(0.0, 1.0, n_draws, seed, np.zeros(n_draws))
    if block_size is None:
        block_size = max(1, (1 << 21) // (plan.nk * plan.d))
    if plan.d == 1 and not complete:  # counter-based draws keyed by (seed, row, draw); T by the same sums
        t_o, t_d = counter_draw_sums(_key_of(gen, seed), z[:, 0], [inverse], n_draws,
                                     observed == 0).statistics(n_div)[:2]
        t_obs, draws = float(t_o[0]), t_d[0]
    else:
        t_obs = float(plan.statistics(observed[plan.rows][None, :])[0])
        draws = np.empty(n_draws)
        for start in range(0, n_draws, block_size):  # a handful of blocks
            r = min(block_size, n_draws - start)
            u = gen.random((r, plan.nk))
            draws[start:start + r] = plan.statistics(plan.classes(u))
    if _may_be_point_mass(plan, draws) and _point_mass(z, inverse, n_div):  # T* = 0 for every draw
        pvalue = 1.0 / (1.0 + n_draws) if point_mass_sign(z, inverse, observed, n=n_div, complete=complete) > 0 \
            else 1.0
        return MonteCarloTest(t_obs, pvalue, n_draws, seed, draws)
    tol = 100 * np.finfo(np.float64).eps * abs(t_obs)  # ties as in scipy.stats.permutation_test
    pvalue = (1.0 + np.count_nonzero(draws >= t_obs - tol)) / (1.0 + n_draws)
    return MonteCarloTest(t_obs, float(pvalue), n_draws, seed, draws)


# ---------------------------------------------------------------------------
# shared draws over several partitions (the multi-scale test)


@dataclass(frozen=True, eq=False)
class SharedDraws:
    """T of the observed labels and of R shared label draws on several partitions of the same rows.

    Attributes
    ----------
    statistic : ndarray, shape (L,)
        T on each partition for the observed labels.
    null_draws : ndarray, shape (L, R)
        T*_r on each partition for the r-th label draw: column r uses the same
        label vector on every partition.
    n_draws : int
    seed : int or None
    spiegelhalter : float or None
        Spiegelhalter's z of the observed labels (``spiegelhalter=True``, 1-dim
        targets), else None.
    spiegelhalter_draws : ndarray, shape (R,), or None
        Spiegelhalter's z of each label draw (the same draws as ``null_draws``).
    """

    statistic: np.ndarray
    null_draws: np.ndarray
    n_draws: int
    seed: int | None
    spiegelhalter: float | None = None
    spiegelhalter_draws: np.ndarray | None = None

    def __post_init__(self):
        object.__setattr__(self, "statistic", read_only(self.statistic))
        object.__setattr__(self, "null_draws", read_only(self.null_draws))
        if self.spiegelhalter_draws is not None:
            object.__setattr__(self, "spiegelhalter_draws", read_only(self.spiegelhalter_draws))


def monte_carlo_draws(z, inverses, observed, *, n: int | None = None, n_draws: int = DEFAULT_DRAWS, rng=None,
                      complete: bool = False, block_size: int | None = None,
                      spiegelhalter: bool = False) -> SharedDraws:
    """Conditional Monte Carlo draws of T on several partitions with the same label draws.

    Each label vector is drawn once from the predictions (exactly as
    :func:`monte_carlo_test`: inverse-CDF categorical draws on uniforms) and T
    is recomputed on every partition in ``inverses`` for that same vector, so
    the joint law of (T_1, ..., T_L) under H0 given the predictions is
    reproduced exactly, dependence between the partitions included.

    In the 1-dim modes every row's labels come from the counter-based stream
    keyed by (seed, row position, draw) (:func:`~calibtest.core.counter_draws.counter_labels`, reduced by
    :class:`~calibtest.core.counter_draws.DrawSums`); otherwise labels are drawn from uniforms in row order
    for the rows in a bin of >= 2 rows on at least one partition (the other
    rows never enter any T).  With a single partition those are the labels
    :func:`monte_carlo_test` draws, so
    ``monte_carlo_draws(z, [inv], ...).null_draws[0]`` equals
    ``monte_carlo_test(z, inv, ...).null_draws`` for the same seed.

    Parameters
    ----------
    z, observed, n, n_draws, rng, complete, block_size
        As for :func:`monte_carlo_test`.
    inverses : sequence of array_like of int, each shape (n,)
        Bin of each row on each partition.
    spiegelhalter : bool
        1-dim targets only (binary, top-1): also return Spiegelhalter's z of
        the observed labels and of every draw,

            z_S = sum_a (y_a - p_a)(1 - 2 p_a) / sqrt(sum_a (1 - 2 p_a)^2 p_a (1 - p_a)),

        whose numerator sum_a y_a (1 - 2 p_a) - sum_a p_a (1 - 2 p_a) is the
        sum over the segments of W_s, which the fast path computes anyway.
        z_S has conditional mean 0 and variance 1 given p exactly.  When its
        denominator is 0 (every p in {0, 1/2, 1}) its null law is the point
        mass at 0 and z_S is read as the limit of its ratio: the numerator is
        then the number of labels of probability 0 (y = 1 at p = 0, y = 0 at
        p = 1), an integer, and z_S = +inf when it is positive, else 0 (every
        draw: 0).  Every row enters z_S; the 1-dim draws give every row a
        label from the counter-based stream either way, so ``null_draws`` do
        not depend on this option.

    Returns
    -------
    SharedDraws

    References
    ----------
    .. [1] Spiegelhalter, "Probabilistic prediction in patient management and
           clinical trials", Statistics in Medicine 5 (1986) 421-433 (the z
           statistic).
    """
    z = np.asarray(z, dtype=np.float64)
    if z.ndim == 1:
        z = z[:, None]
    observed = np.asarray(observed, dtype=np.intp)
    inverses = [np.asarray(inv, dtype=np.intp) for inv in inverses]
    if not inverses:
        raise ValueError("give at least one partition")
    n_draws = check_option("n_draws", n_draws)
    gen, seed = _check_rng(rng)
    n_div = z.shape[0] if n is None else int(n)
    d = z.shape[1]
    if spiegelhalter and (d != 1 or complete):
        raise ValueError("spiegelhalter=True needs a 1-dim prediction (binary or top-1 target)")
    L = len(inverses)
    if d == 1 and not complete:  # every row's labels from the counter-based stream, reduced to per-bin sums
        # the observed T by the draws' arithmetic: labels equal to a draw's give that draw's T exactly
        sums = counter_draw_sums(_key_of(gen, seed), z[:, 0], inverses, n_draws, observed == 0)
        t_obs, t_draws, wq_obs, wq = sums.statistics(n_div)
        if not spiegelhalter:
            return SharedDraws(t_obs, t_draws, n_draws, seed)
        sp = _Spiegelhalter(z[:, 0])
        return SharedDraws(t_obs, t_draws, n_draws, seed, spiegelhalter=float(sp.z(wq_obs)[0]),
                           spiegelhalter_draws=sp.z(wq))
    used = np.zeros(z.shape[0], dtype=bool)
    for inv in inverses:  # a loop over the few partitions
        used |= np.bincount(inv)[inv] >= 2
    rows = np.flatnonzero(used)
    stats = np.zeros(L)
    draws = np.zeros((L, n_draws))
    if rows.size == 0:  # no bin of any partition holds two rows: T = 0 for every label vector
        return SharedDraws(stats, draws, n_draws, seed)
    if block_size is None:
        block_size = max(1, (1 << 21) // (rows.size * d))
    # one plan per partition on the used rows; plan.rows index into the used rows
    plans = [_DrawPlan(z[rows], inv[rows], n_div, complete) for inv in inverses]
    full = [p.rows.size == rows.size for p in plans]
    obs = observed[rows][None, :]
    for i, plan in enumerate(plans):
        if plan.nk:
            stats[i] = plan.statistics(obs if full[i] else obs[:, plan.rows])[0]
    cum = plans[0].cum if full[0] else None
    if cum is None:  # the cumulative probabilities of all used rows
        cum = np.cumsum(z[rows], axis=1)
        if complete:
            cum[:, -1] = np.inf
    drawer = _DrawPlan.__new__(_DrawPlan)
    drawer.cum, drawer.d = cum, d
    for start in range(0, n_draws, block_size):  # a handful of blocks
        r = min(block_size, n_draws - start)
        cls = drawer.classes(gen.random((r, rows.size)))
        for i, plan in enumerate(plans):  # a loop over the few partitions
            if plan.nk:
                draws[i, start:start + r] = plan.statistics(cls if full[i] else cls[:, plan.rows])
    return SharedDraws(stats, draws, n_draws, seed)


class _Spiegelhalter:
    """z_S = (sum_a y_a q_a - sum_a p_a q_a) / sqrt(sum_a q_a^2 p_a (1 - p_a)), q = 1 - 2p, from sum y q."""

    def __init__(self, p: np.ndarray):
        self.q = 1.0 - 2.0 * p
        self.center = float(np.sum(p * self.q))
        self.sd = math.sqrt(float(np.sum(self.q * self.q * p * (1.0 - p))))

    def z(self, wq) -> np.ndarray:
        """z_S from sum_a y_a q_a (any shape).

        With denominator 0 (every p in {0, 1/2, 1}) the numerator is an integer, the number of labels of
        probability 0: z_S is its limit, +inf when the numerator is positive, -inf when negative (never,
        for labels in {0, 1}), 0 when it is 0.
        """
        wq = np.atleast_1d(np.asarray(wq, dtype=np.float64))
        if self.sd > 0:
            return (wq - self.center) / self.sd
        num = wq - self.center
        return np.where(num > 0, np.inf, np.where(num < 0, -np.inf, 0.0))


def null_law(null: str, conditional: ConditionalTest | None) -> str:
    """How the chosen null's p-value is computed: ``"normal"``, ``"point mass"``, ``"shifted gamma"`` or
    ``"monte carlo"``.

    ``null="conditional"`` uses the shifted gamma only while it is reliable
    (conditional skewness at most :data:`SHIFTED_GAMMA_MAX_SKEWNESS`); beyond,
    the exact conditional Monte Carlo test decides.  When Var(T | Z) = 0
    (every prediction exactly 0 or 1 in its bin) the conditional law of T is
    the point mass at 0 and its exact p-value is that of
    :func:`conditional_test`: 0 when T > 0, else 1.
    """
    if null == "asymptotic":
        return "normal"
    if null == "conditional":
        if conditional is None:
            raise ValueError("null='conditional' needs the conditional test of the rows (conditional=)")
        if conditional.variance == 0:
            return "point mass"
        if conditional.reliable:
            return "shifted gamma"
    return "monte carlo"


# ---------------------------------------------------------------------------
# the key of the counter-based label stream (calibtest.core.counter_draws)


def counter_key(rng) -> tuple[np.ndarray, int | None]:
    """The key of the counter-based label stream for ``rng`` (None, int or Generator) and the seed to record.

    The key is the next four raw 64-bit words of the generator: of ``numpy.random.default_rng(s)`` for an
    int s (so ``rng=s`` and ``rng=default_rng(s)`` give the same draws); words 0 and 1 seed the
    PCG64DXSM streams of the label bytes, words 2 and 3 the tie hash
    (:mod:`calibtest.core.counter_draws`).
    """
    gen, seed = _check_rng(rng)
    return _key_of(gen, seed), seed


def _key_of(gen: np.random.Generator, seed: int | None = None) -> np.ndarray:
    """The counter stream's key: the next four raw words of ``gen`` (``default_rng(seed)`` when resolved
    from an int seed)."""
    return gen.bit_generator.random_raw(4).astype(np.uint64)
