"""Power, expected interval width and simulated studies for planning a validation study.

Pure numpy/scipy engines behind :mod:`calibtest.api.sample_size`.  A *population* is a
finite sample of binned prediction vectors z_i (i = 1..m, each of mass 1/m)
with the anticipated true probabilities q_i of the k classes that z_i lists
(for binary and top-1 targets: q_i = c(p_i) = E[y | p_i]).  For a study of n
rows drawn from the population:

* per bin b (the cube partition at B bins per dimension): mass pi_b,
  mu_b = E[U | bin] (U = Y - Z) and Sigma_b = Cov(U | bin), which is the mean
  of Cov(Y | z) = diag(q) - q q^T (binary: c (1 - c)) plus the spread of
  q - z inside the bin;
* the binned population ECE^2_B = sum_b pi_b ||mu_b||^2, the value the
  debiased estimator T of the paper's eq. (6) estimates;
* sigma1^2 = sum pi_b ||mu_b||^4 - (sum pi_b ||mu_b||^2)^2
  + 4 sum pi_b mu_b^T Sigma_b mu_b (the population form of eq. (8));
* the exact mean and variance of T.  Given the bin counts c_b, the bin's term
  (||S_b||^2 - Q_b) / (c_b - 1) is c_b times a U-statistic of order 2 with
  kernel U_a^T U_a', whence (Hoeffding)

      Var(T | c) = (1/n^2) sum_{c_b >= 2} [4 c_b mu_b^T Sigma_b mu_b
                                           + 2 c_b / (c_b - 1) tr(Sigma_b^2)],

  and with c ~ Multinomial(n, pi),

      E T = (1/n) sum_b ||mu_b||^2 E[c_b; c_b >= 2],
      Var T = E Var(T | c) + (1/n) [sum pi_b ||mu_b||^4 - (sum pi_b ||mu_b||^2)^2].

  The first-order part is sigma1^2 / n (the miscalibrated regime); the second,
  (2/n^2) sum_b E[c_b/(c_b - 1); c_b >= 2] tr(Sigma_b^2), is the calibrated
  regime's variance (it equals sigma0^2 / (n^2 w) of the paper's eq. (12) when
  every bin is occupied and the model is calibrated), so one normal law
  N(E T, Var T) covers both regimes and the transition between them.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize, stats as _sps

from calibtest.core.binning import cube_indices, group_keys
from calibtest.core.conditional import _SKEW_NORMAL, shifted_gamma_sf
from calibtest.core.intervals import adjusted_interval

__all__ = ["PopulationBins", "population_bins", "population_bins_many", "binned_ece_sq", "population_sigma1_sq", "t_moments",
           "count_moments", "t_skewness", "null_skewness", "gamma_power", "margin_power", "plugin_slope", "null_variance", "expected_sigma1_sq", "expected_width", "normal_power",
           "simulate_studies", "shifted_gamma_sf_many", "shifted_gamma_isf_many",
           "expected_width_many", "analytic_grid", "GH_NODES"]

#: Gauss-Hermite nodes of the expected-width quadrature over T ~ N(E T, Var T).
GH_NODES = 48
#: Bins with n pi_b below this get the exact binomial sums of :func:`count_moments`.
_EXACT_COUNT = 60.0
#: Largest count summed exactly (n pi_b < 60 puts P(c_b > 200) below 1e-30).
_COUNT_TOP = 200


class PopulationBins:
    """Per-bin population quantities at B bins per dimension (see the module docstring).

    Attributes
    ----------
    n_bins : int
        B.
    inverse : ndarray of intp, shape (m,)
        Bin of each population point.
    pi : ndarray, shape (nb,)
        Bin masses pi_b (sum 1); only occupied bins are kept.
    mu : ndarray, shape (nb, d)
        E[U | bin] under the alternative.
    sigma : ndarray, shape (nb, d, d)
        Cov(U | bin) under the alternative.
    sigma_null : ndarray, shape (nb, d, d)
        Mean of diag(z) - z z^T over the bin: Cov(U | bin) when labels are drawn from Z.
    raw_moments : ndarray, shape (nb, 4) or None
        E[U^j | bin], j = 1..4, for one-dimensional U (None otherwise).
    """

    __slots__ = ("n_bins", "inverse", "pi", "mu", "sigma", "sigma_null", "raw_moments", "_counts", "_pmf")

    def __init__(self, n_bins, inverse, pi, mu, sigma, sigma_null, raw_moments=None):
        self.n_bins, self.inverse, self.pi, self.mu = int(n_bins), inverse, pi, mu
        self.sigma, self.sigma_null, self.raw_moments = sigma, sigma_null, raw_moments
        self._counts = {}
        self._pmf = {}

    def small(self, n: int) -> np.ndarray:
        """The bins whose counts at n are summed exactly (n pi_b < 60)."""
        return n * self.pi < _EXACT_COUNT

    def pmf(self, n: int) -> np.ndarray:
        """Binomial(n, pi_b) probabilities of c = 1..200 for the :meth:`small` bins (:func:`count_table`)."""
        return self.count_table(n)[0]

    def count_table(self, n: int):
        """:func:`count_table` for the :meth:`small` bins at n (computed once per n)."""
        if n not in self._pmf:
            sm = self.small(n)
            self._pmf[n] = count_table(np.full(int(sm.sum()), float(n)), self.pi[sm])
        return self._pmf[n]

    def counts(self, n: int):
        """:func:`_all_count_moments` at n (computed once per n)."""
        if n not in self._counts:
            self._counts[n] = _all_count_moments(n, self.pi, self.pmf(n) if self.small(n).any() else None)
        return self._counts[n]


#: The exact count sums stop where the binomial upper tail is below this (Bernstein's bound).
_TAIL = 1e-30


def count_table(n, pi) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Binomial(n_r, pi_r) probabilities of c = 1..200 for rows r, as a matrix (rows, 200).

    Row r is evaluated for c up to c_r = min(200, n_r, ceil(lambda + t)), lambda = n_r pi_r,
    where Bernstein's inequality P(c >= lambda + t) <= exp(-t^2 / (2 (lambda + t/3)))
    puts the rest of the tail below 1e-30 (t = (a + sqrt(a^2 + 8 a lambda)) / 2,
    a = (2/3) log(1e30)); the entries beyond are 0 (for c > n_r exactly).  The
    count moments are sums of these probabilities times factors of at most
    200^2, so the cut changes no sum by more than 1e-25.

    Returns
    -------
    pmf : ndarray, shape (rows, 200)
    rows, cols : ndarray of intp
        The evaluated entries (row, c - 1), for further terms on the same support.
    """
    n = np.asarray(n, dtype=float)
    pi = np.asarray(pi, dtype=float)
    lam = n * pi
    a = (2.0 / 3.0) * -math.log(_TAIL)
    t = (a + np.sqrt(a * a + 8.0 * a * lam)) / 2.0
    top = np.minimum(np.minimum(np.ceil(lam + t), n), _COUNT_TOP).astype(np.intp)
    rows = np.repeat(np.arange(lam.size), top)
    starts = np.repeat(np.cumsum(top) - top, top)
    cols = np.arange(rows.size) - starts
    out = np.zeros((lam.size, _COUNT_TOP))
    out[rows, cols] = _sps.binom.pmf(cols + 1.0, n[rows], pi[rows])
    return out, rows, cols


def _label_cov(q: np.ndarray) -> np.ndarray:
    """Cov(Y | z) = diag(q) - q q^T of the indicators of k listed classes with probabilities q (m, d)."""
    d = q.shape[1]
    return np.einsum("ij,jk->ijk", q, np.eye(d)) - q[:, :, None] * q[:, None, :]


def population_bins(z: np.ndarray, q: np.ndarray, n_bins: int) -> PopulationBins:
    """Bin the population on the cube partition and form pi_b, mu_b, Sigma_b.

    Parameters
    ----------
    z : ndarray, shape (m, d)
        Binned prediction vectors of the population (each of mass 1/m).
    q : ndarray, shape (m, d)
        True probabilities of the listed classes (E[Y | z]).
    n_bins : int
        B.

    Returns
    -------
    PopulationBins

    Notes
    -----
    Sigma_b = mean_bin[diag(q) - q q^T] + mean_bin[delta delta^T] - mu_b mu_b^T
    with delta = q - z (law of total covariance); all sums are ``np.bincount``.
    """
    return population_bins_many(z, q, [n_bins])[int(n_bins)]


def _bin_index(z: np.ndarray, n_bins: int):
    """``(inverse, count)``: each point's occupied bin (0..nb-1, in key order) and the bins' counts."""
    inverse, keys = group_keys(cube_indices(z, n_bins), n_bins + 1)
    nb = keys.shape[0]
    count = np.bincount(inverse, minlength=nb).astype(float)
    occupied = count > 0
    remap = np.cumsum(occupied) - 1
    return remap[inverse], count[occupied]


def population_bins_many(z: np.ndarray, q: np.ndarray, bins) -> dict:
    """:func:`population_bins` at several B at once: ``{B: PopulationBins}``.

    The per-bin sums of every B come from one ``np.bincount`` per value column
    over the bins of all B stacked with offsets; a bincount adds the rows of a
    bin in row order, so each B's sums are bit-identical to binning it alone.
    """
    m, d = z.shape
    bins = sorted({int(b) for b in bins})
    index = [_bin_index(z, B) for B in bins]
    sizes = [c.size for _, c in index]
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    key = np.concatenate([inv + off for (inv, _), off in zip(index, offsets[:-1])])
    total = int(offsets[-1])
    reps = len(bins)

    def means(values):  # values (m, ...) -> per-bin means of every B, stacked (total, ...)
        flat = values.reshape(m, -1)
        out = np.stack([np.bincount(key, weights=np.tile(col, reps), minlength=total) for col in flat.T], axis=1)
        return out.reshape((total,) + values.shape[1:])

    delta = q - z
    mu_all = means(delta)
    second = means(_label_cov(q) + delta[:, :, None] * delta[:, None, :])
    null_all = means(_label_cov(z))
    raw_all = None
    if d == 1:  # E[(Y - z)^j] = q (1 - z)^j + (1 - q) (-z)^j
        zz, qq = z[:, 0], q[:, 0]
        raw_all = means(np.stack([qq * (1 - zz) ** j + (1 - qq) * (-zz) ** j for j in (1, 2, 3, 4)], axis=1))
    out = {}
    for B, (inverse, count), lo, hi in zip(bins, index, offsets[:-1], offsets[1:]):
        cnt = count[:, None]
        mu = mu_all[lo:hi] / cnt
        sigma = second[lo:hi] / cnt[:, :, None] - mu[:, :, None] * mu[:, None, :]
        sigma_null = null_all[lo:hi] / cnt[:, :, None]
        raw = None if raw_all is None else raw_all[lo:hi] / cnt
        out[B] = PopulationBins(B, inverse, count / m, mu, sigma, sigma_null, raw)
    return out


def binned_ece_sq(pb: PopulationBins) -> float:
    """ECE^2_B = sum_b pi_b ||mu_b||^2, the binned population calibration error at B."""
    return float(np.sum(pb.pi * np.einsum("bi,bi->b", pb.mu, pb.mu)))


def population_sigma1_sq(pb: PopulationBins) -> float:
    """sigma1^2 of the paper's eq. (8) with population bin masses, means and covariances."""
    qb = np.einsum("bi,bi->b", pb.mu, pb.mu)
    quad = np.einsum("bi,bij,bj->b", pb.mu, pb.sigma, pb.mu)
    value = np.sum(pb.pi * qb**2) - np.sum(pb.pi * qb) ** 2 + 4.0 * np.sum(pb.pi * quad)
    return float(max(value, 0.0))


def _all_count_moments(n: int, pi: np.ndarray, pmf=None):
    """``(E[c; c>=2], E[c/(c-1); c>=2], P(c>=1), E[1/c; c>=1])`` for c ~ Binomial(n, pi_b), per bin.

    E[c; c >= 2] = n pi - n pi (1 - pi)^(n - 1) and P(c >= 1) = 1 - (1 - pi)^n
    exactly; the other two are exact binomial sums over c = 1..200 for bins with
    n pi < 60, and otherwise second-order delta-method expansions
    E[c/(c-1)] ~ 1 + 1/(n pi - 1) + n pi (1 - pi) / (n pi - 1)^3 and
    E[1/c] ~ (1 + (1 - pi) / (n pi)) / (n pi) (P(c <= 1) is below 1e-24 there).
    """
    lam = n * pi
    with np.errstate(divide="ignore"):
        log_empty = np.log1p(-pi)
        first = lam - lam * np.exp((n - 1) * log_empty)
        occupied = -np.expm1(n * log_empty)
    second = np.empty_like(lam)
    inv = np.empty_like(lam)
    small = lam < _EXACT_COUNT
    if small.any():
        c = np.arange(1, _COUNT_TOP + 1, dtype=float)
        if pmf is None:
            pmf = count_table(np.full(int(small.sum()), float(n)), pi[small])[0]
        ratio = np.zeros_like(c)
        ratio[1:] = c[1:] / (c[1:] - 1.0)
        second[small] = pmf @ ratio
        inv[small] = pmf @ (1.0 / c)
    big = ~small
    lb, pbig = lam[big], pi[big]
    second[big] = 1.0 + 1.0 / (lb - 1.0) + lb * (1.0 - pbig) / (lb - 1.0) ** 3
    inv[big] = (1.0 + (1.0 - pbig) / lb) / lb
    third = np.empty_like(lam)  # E[c (c - 2) / (c - 1)^2; c >= 2]
    if small.any():
        ratio3 = np.zeros_like(c)
        ratio3[1:] = c[1:] * (c[1:] - 2.0) / (c[1:] - 1.0) ** 2
        third[small] = pmf @ ratio3
    third[big] = 1.0 - 1.0 / (lb - 1.0) ** 2
    return first, second, occupied, inv, third


def count_moments(n: int, pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(E[c; c >= 2], E[c / (c - 1); c >= 2])`` for c ~ Binomial(n, pi_b), per bin.

    See :func:`_all_count_moments` (exact binomial sums for n pi < 60, a
    second-order delta method above).
    """
    return _all_count_moments(n, pi)[:2]


def t_skewness(n: int, pb: PopulationBins, variance: float) -> float:
    """Approximate skewness of T: third cumulant / variance^1.5.

    With T = (count part) + L + D, L = (2/n) sum_b mu_b^T sum_a eps_a (first order)
    and D the degenerate second-order part, eps = U - mu_b::

        k3 ~ (8/n^3) sum_b E[c (c-2)/(c-1)^2; c >= 2] tr(Sigma_b^3)        (D; eq. (12) regime)
           + (24/n^3) sum_b E[c; c >= 2] mu_b^T Sigma_b^2 mu_b            (3 E[L^2 D])
           + (8/n^2) sum_b pi_b mu_b^3 m3_b                               (L; 1-d targets)
           + (1/n^2) k3 of ||mu||^2 over the bins                          (the bin counts)

    (m3_b the central third moment of U in the bin; the cross term E[L D^2]
    and the bins' third-moment tensors for k >= 2 are left out).  The
    degenerate part alone has skewness 2 sqrt(2) / sqrt(B) with B equally
    filled bins: 0.41 at B = 48, which is why a normal law understates
    the size of the test at moderate B.
    """
    if variance <= 0:
        return 0.0
    e1, _, _, _, e3 = pb.counts(n)
    s2 = np.einsum("bij,bjk->bik", pb.sigma, pb.sigma)
    tr3 = np.einsum("bij,bji->b", s2, pb.sigma)
    cross = np.einsum("bi,bij,bj->b", pb.mu, s2, pb.mu)
    qb = np.einsum("bi,bi->b", pb.mu, pb.mu)
    k3 = 8.0 * np.sum(e3 * tr3) / n**3 + 24.0 * np.sum(e1 * cross) / n**3
    if pb.raw_moments is not None:
        a1, a2, a3 = (pb.raw_moments[:, j] for j in range(3))
        m3 = a3 - 3.0 * a1 * a2 + 2.0 * a1**3
        k3 += 8.0 * np.sum(pb.pi * a1**3 * m3) / n**2
    mq = np.sum(pb.pi * qb)
    k3 += (np.sum(pb.pi * qb**3) - 3.0 * np.sum(pb.pi * qb**2) * mq + 2.0 * mq**3) / n**2
    return float(k3 / variance**1.5)


def t_moments(n: int, pb: PopulationBins) -> tuple[float, float]:
    """Exact-in-the-counts mean and variance of T for a study of n rows (module docstring).

    Returns
    -------
    mean, variance : float
    """
    e1, e2 = pb.counts(n)[:2]
    qb = np.einsum("bi,bi->b", pb.mu, pb.mu)
    zeta1 = np.einsum("bi,bij,bj->b", pb.mu, pb.sigma, pb.mu)
    tr2 = np.einsum("bij,bji->b", pb.sigma, pb.sigma)
    mean = float(np.sum(qb * e1) / n)
    cond = np.sum(4.0 * zeta1 * e1 + 2.0 * tr2 * e2) / n**2
    between = (np.sum(pb.pi * qb**2) - np.sum(pb.pi * qb) ** 2) / n
    return mean, float(cond + max(between, 0.0))


def null_skewness(n: int, pb: PopulationBins) -> float:
    """Skewness of T when the labels are drawn from the predictions: the degenerate part of :func:`t_skewness`.

    (8/n^3) sum_b E[c (c-2)/(c-1)^2; c >= 2] tr(Sigma0_b^3) / Var^1.5, Var from :func:`null_variance`.
    """
    var = null_variance(n, pb)
    if var <= 0:
        return 0.0
    e3 = pb.counts(n)[4]
    tr3 = np.einsum("bij,bjk,bki->b", pb.sigma_null, pb.sigma_null, pb.sigma_null)
    return float(8.0 * np.sum(e3 * tr3) / n**3 / var**1.5)


def null_variance(n: int, pb: PopulationBins) -> float:
    """Variance of T when the labels are drawn from the predictions (calibrated; given the counts).

    (2/n^2) sum_b E[c_b/(c_b - 1); c_b >= 2] tr(Sigma0_b^2), Sigma0_b the bin mean
    of diag(z) - z z^T: the expected conditional-null variance of T.
    """
    e2 = pb.counts(n)[1]
    tr2 = np.einsum("bij,bji->b", pb.sigma_null, pb.sigma_null)
    return float(2.0 * np.sum(tr2 * e2) / n**2)


def _plugin_terms(c, a):
    """Per-bin ``(c E[ubar^2], c(4 E[ubar^2 m2] - 3 E[ubar^4]))`` given c rows (1-d U, raw moments a).

    ubar is the bin mean of U and m2 the bin mean of U^2, for c iid rows with
    raw moments a_1..a_4; with these, the 1-d plug-in of eq. (8) is
    sigma1_hat^2 = (1/n) sum_b c_b (4 ubar^2 m2 - 3 ubar^4) - ((1/n) sum_b c_b ubar^2)^2.
    """
    a1, a2, a3, a4 = (a[..., j] for j in range(4))
    g0 = a2 + (c - 1.0) * a1**2
    g1 = (a4 + (c - 1.0) * (a2**2 + 2.0 * a1 * a3) + (c - 1.0) * (c - 2.0) * a1**2 * a2) / c
    g2 = (a4 + (c - 1.0) * (4.0 * a1 * a3 + 3.0 * a2**2) + 6.0 * (c - 1.0) * (c - 2.0) * a2 * a1**2
          + (c - 1.0) * (c - 2.0) * (c - 3.0) * a1**4) / c**2
    return g0, 4.0 * g1 - 3.0 * g2


def _plugin_sums(pmf, a):
    """Per row sum_c pmf(c) (c E[ubar^2], c (4 E[ubar^2 m2] - 3 E[ubar^4])) (:func:`_plugin_terms`),
    c = 1..200, for the rows of a :func:`count_table` with raw moments ``a`` (rows, 4)."""
    c = np.arange(1, _COUNT_TOP + 1, dtype=float)
    g0, g = _plugin_terms(c[None, :], a[:, None, :])
    return np.sum(pmf * g0, axis=1), np.sum(pmf * g, axis=1)


def expected_sigma1_sq(n: int, pb: PopulationBins) -> float:
    """Approximate expectation of the plug-in sigma1^2 (eq. (8)) in a study of n rows.

    The plug-in overshoots sigma1^2 by O(B/n) (bins' mean errors enter squared),
    which dominates near the null, where sigma1 -> 0 but the plug-in does not.

    One-dimensional U (binary, top-1): with ubar_b and m2_b the bin means of U
    and U^2 and the exact moments of a mean of c iid rows
    (:func:`_plugin_terms`, raw moments a_1..a_4 of U in the bin),

        E sigma1_hat^2 ~ (1/n) sum_b E[c (4 ubar^2 m2 - 3 ubar^4); c >= 1]
                         - ((1/n) sum_b E[c ubar^2; c >= 1])^2

    (exact except that the square of the expectation replaces the
    expectation of the square), the expectations over c ~ Binomial(n, pi_b)
    by exact sums (n pi_b < 60) or a three-point rule f(l) + (f(l+s) - 2 f(l) + f(l-s)) / 2
    at l = n pi_b, s = sd(c_b).  Top-k (k >= 2): Gaussian bin-mean errors,

        E sigma1_hat^2 ~ sigma1^2 + (1/n) sum [P1 (2 q tr Sigma + 4 zeta) + J ((tr Sigma)^2 + 2 tr Sigma^2)]
                         + (4/n) sum [(n pi - P1) zeta + (P1 - J) tr Sigma^2] - 4 sum pi zeta
                         - ((sum pi q + (1/n) sum P1 tr Sigma)^2 - (sum pi q)^2)

    with P1 = P(c >= 1), J = E[1/c; c >= 1], q_b = ||mu_b||^2, zeta_b = mu_b^T Sigma_b mu_b.
    """
    if pb.raw_moments is not None:
        lam = n * pb.pi
        small = lam < _EXACT_COUNT
        e0 = np.empty_like(lam)
        e1 = np.empty_like(lam)
        a = pb.raw_moments
        if small.any():
            e0[small], e1[small] = _plugin_sums(pb.pmf(n), a[small])
        big = ~small
        if big.any():
            lb = lam[big]
            sd = np.sqrt(lb * (1.0 - pb.pi[big]))
            ab = a[big]
            vals = [_plugin_terms(x, ab) for x in (lb - sd, lb, lb + sd)]
            e0[big] = vals[1][0] + 0.5 * (vals[0][0] - 2 * vals[1][0] + vals[2][0])
            e1[big] = vals[1][1] + 0.5 * (vals[0][1] - 2 * vals[1][1] + vals[2][1])
        return float(max(np.sum(e1) / n - (np.sum(e0) / n) ** 2, 0.0))
    p1, inv = pb.counts(n)[2:4]
    qb = np.einsum("bi,bi->b", pb.mu, pb.mu)
    zeta = np.einsum("bi,bij,bj->b", pb.mu, pb.sigma, pb.mu)
    tr1 = np.einsum("bii->b", pb.sigma)
    tr2 = np.einsum("bij,bji->b", pb.sigma, pb.sigma)
    a_ = np.sum(pb.pi * qb**2) + np.sum(p1 * (2.0 * qb * tr1 + 4.0 * zeta) + inv * (tr1**2 + 2.0 * tr2)) / n
    b_ = (np.sum(pb.pi * qb) + np.sum(p1 * tr1) / n) ** 2
    c_ = 4.0 * np.sum((n * pb.pi - p1) * zeta + (p1 - inv) * tr2) / n
    return float(max(a_ - b_ + c_, 0.0))


@functools.lru_cache(maxsize=1)
def _gauss_hermite():
    """Probabilists' Gauss-Hermite nodes and weights (:data:`GH_NODES`), computed once."""
    x, w = np.polynomial.hermite_e.hermegauss(GH_NODES)
    x.setflags(write=False)
    w.setflags(write=False)
    return x, w


def normal_power(mean, variance, thr):
    """P(T >= thr) for T ~ N(mean, variance): 1 - Phi((thr - mean) / sd)."""
    return _sps.norm.sf((np.asarray(thr) - np.asarray(mean)) / np.sqrt(variance))


def gamma_power(mean: float, variance: float, skewness: float, thr: float) -> float:
    """P(T >= thr) for T a shifted gamma with the given mean, variance and skewness.

    :func:`calibtest.core.conditional.shifted_gamma_sf` (the normal law when the
    skewness is 0).
    """
    return float(shifted_gamma_sf(thr - mean, variance, skewness))


def plugin_slope(n: int, pb: PopulationBins) -> float:
    """kappa: the slope of the plug-in sigma1_hat^2 / n on T across studies (the margin test's se moves with T).

    Both T and the plug-in sigma1_hat^2 are driven by the squared bin means of
    U: dT / d||ubar_b||^2 ~ p_b and d sigma1_hat^2 / d||ubar_b||^2 ~ 4 p_b
    lambda_b, with lambda_b = tr(Sigma_b^2) / tr(Sigma_b) the bin's label
    variance (the bin mean of U^2 in one dimension).  Weighting the bins by
    their share E[c/(c-1); c >= 2] tr(Sigma_b^2) of the variance of T,

        kappa = (4 / n) sum_b w_b lambda_b / sum_b w_b,

    so that sigma1_hat^2 / n ~ E sigma1_hat^2 / n + kappa (T - E T).
    """
    e2 = pb.counts(n)[1]
    tr1 = np.einsum("bii->b", pb.sigma)
    tr2 = np.einsum("bij,bji->b", pb.sigma, pb.sigma)
    w = e2 * tr2
    if not np.sum(w) > 0:
        return 0.0
    lam = np.where(tr1 > 0, tr2 / np.where(tr1 > 0, tr1, 1.0), 0.0)
    return float(4.0 * np.sum(w * lam) / np.sum(w) / n)


def margin_power(mean: float, variance: float, skewness: float, sigma1_sq_hat_over_n: float, null_variance: float,
                 margin: float, alpha: float, kappa: float = 0.0) -> float:
    """P(the margin test rejects H0: ECE >= margin) for T with the given mean, variance and skewness.

    The test rejects iff g(T) = T+ + z_alpha sqrt(max(s^2(T), V0)) < margin^2
    (:func:`calibtest.core.margin.margin_bound`), where the squared standard
    error follows T linearly, s^2(T) = E sigma1_hat^2 / n + kappa (T - E T)
    (:func:`plugin_slope`; kappa = 0 holds it at its expectation).  g is
    non-decreasing in T, so the test rejects iff T < T*, the root of
    g(T*) = margin^2, and the power is P(T < T*) under the shifted gamma law of
    :func:`gamma_power`; 0 when even z_alpha sqrt(V0) (the bound's floor) is not
    below margin^2.
    """
    z = _sps.norm.isf(alpha)
    m2 = margin * margin
    floor = z * np.sqrt(null_variance)
    if floor >= m2:
        return 0.0

    def g(t):
        return max(t, 0.0) + z * np.sqrt(max(sigma1_sq_hat_over_n + kappa * (t - mean), null_variance))

    if kappa <= 0.0:
        x = m2 - z * float(np.sqrt(max(sigma1_sq_hat_over_n, null_variance)))
        if x <= 0:
            return 0.0
    else:
        lo = min(mean - (sigma1_sq_hat_over_n - null_variance) / kappa, 0.0) - 1.0  # g(lo) = floor < m2
        hi = m2
        if g(hi) <= m2:
            x = hi
        else:
            x = optimize.brentq(lambda t: g(t) - m2, lo, hi, xtol=1e-15, rtol=1e-12)
    return float(1.0 - shifted_gamma_sf(x - mean, variance, skewness))


def expected_width(mean: float, variance: float, sigma1_sq_hat: float, n: int, thr: float,
                   alpha: float) -> float:
    """Expected width of the ECE-scale adjusted interval, sqrt(upper) - sqrt(lower).

    E over T ~ N(mean, variance) by Gauss-Hermite quadrature (:data:`GH_NODES`
    nodes) of the interval of Algorithm 1 (with the zero rule: lower = 0 when
    T+ < thr), at the standard error sqrt(sigma1_sq_hat / n) held fixed.
    """
    x, wts = _gauss_hermite()
    t = mean + np.sqrt(variance) * x
    ci = adjusted_interval(t, np.full_like(t, np.sqrt(sigma1_sq_hat / n)), thr, alpha)
    lower = np.where(ci.contains_zero, 0.0, ci.lower)
    width = np.sqrt(ci.upper) - np.sqrt(lower)
    return float(np.sum(wts * width) / np.sum(wts))


def _gamma_params_many(variance, skewness):
    g = np.abs(skewness)
    return 4.0 / g**2, np.sqrt(variance) * g / 2.0


def shifted_gamma_sf_many(t, variance, skewness) -> np.ndarray:
    """:func:`calibtest.core.conditional.shifted_gamma_sf` elementwise over arrays of t, variance, skewness.

    The same branches and the same scipy functions, called once per branch on
    arrays, so each value equals the scalar call's.
    """
    t, v, g = (np.asarray(a, dtype=float) for a in (t, variance, skewness))
    out = np.where(t <= 0, 1.0, 0.0)
    normal = (v > 0) & (np.abs(g) < _SKEW_NORMAL)
    out[normal] = _sps.norm.sf(t[normal] / np.sqrt(v[normal]))
    for sign in (1, -1):
        sel = (v > 0) & ~normal & (g > 0 if sign > 0 else g < 0)
        if sel.any():
            k, theta = _gamma_params_many(v[sel], g[sel])
            out[sel] = _sps.gamma.sf(k + t[sel] / theta, k) if sign > 0 else _sps.gamma.cdf(k - t[sel] / theta, k)
    return out


def shifted_gamma_isf_many(alpha: float, variance, skewness) -> np.ndarray:
    """:func:`calibtest.core.conditional.shifted_gamma_isf` elementwise over arrays of variance and skewness."""
    v, g = np.asarray(variance, dtype=float), np.asarray(skewness, dtype=float)
    out = np.zeros_like(v)
    normal = (v > 0) & (np.abs(g) < _SKEW_NORMAL)
    out[normal] = np.sqrt(v[normal]) * _sps.norm.isf(alpha)
    for sign in (1, -1):
        sel = (v > 0) & ~normal & (g > 0 if sign > 0 else g < 0)
        if sel.any():
            k, theta = _gamma_params_many(v[sel], g[sel])
            out[sel] = theta * (_sps.gamma.isf(alpha, k) - k) if sign > 0 else theta * (k - _sps.gamma.ppf(alpha, k))
    return out


def expected_width_many(mean, variance, sigma1_sq_hat, n, thr, alpha: float) -> np.ndarray:
    """:func:`expected_width` for arrays of mean, variance, sigma1_sq_hat, n and thr (one row per study size)."""
    x, wts = _gauss_hermite()
    mean, variance, s1, n, thr = (np.asarray(a, dtype=float)[:, None] for a in (mean, variance, sigma1_sq_hat, n, thr))
    t = mean + np.sqrt(variance) * x
    ci = adjusted_interval(t, np.broadcast_to(np.sqrt(s1 / n), t.shape), thr, alpha)
    lower = np.where(ci.contains_zero, 0.0, ci.lower)
    width = np.sqrt(ci.upper) - np.sqrt(lower)
    return np.sum(wts * width, axis=1) / np.sum(wts)


def simulate_studies(z: np.ndarray, q: np.ndarray, inverse: np.ndarray, nb: int, n: int, n_sim: int,
                     rng: np.random.Generator, *, want_sigma1: bool = True, max_block: int = 1 << 22):
    """T and the plug-in sigma1^2 of ``n_sim`` simulated studies of n rows each.

    Each study draws n population points with replacement and, for each, the
    label: with u ~ U(0, 1), the j-th listed class is the label iff
    q_1 + ... + q_{j-1} <= u < q_1 + ... + q_j (no listed class when
    u >= sum q).  Studies are stacked with offsets (study s, bin b -> s nb + b)
    so one ``np.bincount`` per column gives the bin sums of a block of studies.

    Parameters
    ----------
    z, q : ndarray, shape (m, d)
        Population vectors and true probabilities of the listed classes.
    inverse : ndarray of intp, shape (m,)
        Bin of each population point (:class:`PopulationBins`).
    nb : int
        Number of bins.
    n, n_sim : int
        Rows per study and studies.
    rng : numpy.random.Generator
    want_sigma1 : bool
        Also compute the plug-in sigma1^2 (eq. (8)).

    Returns
    -------
    t : ndarray, shape (n_sim,)
        The debiased estimator of eq. (6) of each study.
    sigma1_sq : ndarray, shape (n_sim,) or None
    """
    m, d = z.shape
    cum = np.cumsum(q, axis=1)
    lower = cum - q
    per = max(1, min(n_sim, max_block // max(n * d, 1)))
    t_all = np.empty(n_sim)
    s1_all = np.empty(n_sim) if want_sigma1 else None
    iu, ju = np.triu_indices(d)
    for start in range(0, n_sim, per):  # blocks of studies (memory), vectorised within
        r = min(per, n_sim - start)
        idx = rng.integers(0, m, size=(r, n))
        u = rng.random((r, n))
        rows = idx.ravel()
        uu = u.ravel()[:, None]
        y = ((uu >= lower[rows]) & (uu < cum[rows])).astype(float)
        U = y - z[rows]
        key = (inverse[rows] + nb * np.repeat(np.arange(r), n)).astype(np.intp)
        size = r * nb
        c = np.bincount(key, minlength=size).reshape(r, nb)
        S = np.stack([np.bincount(key, weights=U[:, j], minlength=size) for j in range(d)], axis=-1)
        S = S.reshape(r, nb, d)
        Q = np.bincount(key, weights=np.einsum("ij,ij->i", U, U), minlength=size).reshape(r, nb)
        ss = np.einsum("rbj,rbj->rb", S, S)
        keep = c >= 2
        num = np.where(keep, (ss - Q) / np.where(keep, c - 1.0, 1.0), 0.0)
        t_all[start:start + r] = num.sum(axis=1) / n
        if s1_all is not None:  # want_sigma1
            prods = U[:, iu] * U[:, ju]
            up = np.stack([np.bincount(key, weights=prods[:, j], minlength=size) for j in range(prods.shape[1])],
                          axis=-1).reshape(r, nb, -1)
            M = np.empty((r, nb, d, d))
            M[..., iu, ju] = up
            M[..., ju, iu] = up
            occ = c > 0
            cc = np.where(occ, c, 1.0)
            mu = S / cc[..., None]
            mq = np.einsum("rbi,rbi->rb", mu, mu)
            cov = M / cc[..., None, None] - mu[..., :, None] * mu[..., None, :]
            quad = np.einsum("rbi,rbij,rbj->rb", mu, cov, mu)
            p = c / n
            val = (np.sum(p * mq**2, axis=1) - np.sum(p * mq, axis=1) ** 2 + 4.0 * np.sum(p * quad, axis=1))
            s1_all[start:start + r] = np.maximum(val, 0.0)
    return t_all, s1_all


# ----------------------------------------------------------------------------- many study sizes at once
def _binomial_table(n, pi) -> np.ndarray:
    """Binomial(n_r, pi_r) probabilities of c = 1..200 per row, by the recurrence in c.

    pmf(1) = n pi (1 - pi)^(n - 1) (in logs) and pmf(c + 1) = pmf(c) (n - c) / (c + 1) pi / (1 - pi),
    a cumulative product along c (relative error at most about 200 ulp); 0 for c > n.
    Rows with pi >= 1/2 (only possible when n pi < 60 with n < 120) use scipy's ``binom.pmf``.
    """
    n = np.asarray(n, dtype=float)
    pi = np.asarray(pi, dtype=float)
    c = np.arange(1, _COUNT_TOP + 1, dtype=float)
    out = np.empty((pi.size, _COUNT_TOP))
    low = pi < 0.5
    if low.any():
        nl, pl = n[low][:, None], pi[low][:, None]
        step = np.maximum(nl - c[None, :-1], 0.0) / (c[None, 1:]) * (pl / (1.0 - pl))
        first = np.exp(np.log(nl) + np.log(pl) + (nl - 1.0) * np.log1p(-pl))
        out[low] = np.cumprod(np.concatenate([first, step], axis=1), axis=1)
    if (~low).any():
        out[~low] = _sps.binom.pmf(c[None, :], n[~low][:, None], pi[~low][:, None])
    return out


def analytic_grid(ns, pbs, null_moments: bool = True) -> list[dict]:
    """The per-n quantities of the analytic planner at many n at once (the engine of ``calib_sample_size``).

    For study sizes ``ns`` with their population bins ``pbs`` (one
    :class:`PopulationBins` per n) the bins of every n are stacked; each
    quantity of :func:`t_moments`, :func:`t_skewness`,
    :func:`expected_sigma1_sq`, :func:`null_variance`, :func:`null_skewness`,
    :func:`binned_ece_sq`, :func:`population_sigma1_sq` and :func:`plugin_slope`
    is computed on the stack by the same formulas, the sums over the bins of one n by
    ``np.add.reduceat``.  Differences from the one-n functions are rounding only
    (summation order, the binomial probabilities by a recurrence in c and the
    exact count sums of the plug-in's expectation through the moments
    E[c], E[1], E[1/c], E[1/c^2] of the count; ``tests/api/test_sample_size.py`` checks
    agreement to 1e-10).

    Returns
    -------
    list of dict
        Per n: ``mean``, ``variance``, ``skewness``, ``sigma1_sq_hat``,
        ``e1_sum``, ``occupied`` (sum P(c_b >= 1)), ``ece_sq_binned``, ``sigma1_sq``,
        ``kappa`` (:func:`plugin_slope`), ``null_variance`` and ``null_skewness`` (when ``null_moments``).
    """
    ns = [int(n) for n in ns]
    if not ns:
        return []
    sizes = np.array([pb.pi.size for pb in pbs])
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    pi = np.concatenate([pb.pi for pb in pbs])
    mu = np.concatenate([pb.mu for pb in pbs])
    sigma = np.concatenate([pb.sigma for pb in pbs])
    n_arr = np.array(ns, dtype=float)
    nn = np.repeat(n_arr, sizes)
    one_dim = all(pb.raw_moments is not None for pb in pbs)
    seg = lambda x: np.add.reduceat(x, starts)  # noqa: E731  (sum over the bins of each n)

    # count moments (_all_count_moments)
    lam = nn * pi
    with np.errstate(divide="ignore"):
        log_empty = np.log1p(-pi)
        first = lam - lam * np.exp((nn - 1.0) * log_empty)
        occupied = -np.expm1(nn * log_empty)
    small = lam < _EXACT_COUNT
    big = ~small
    c = np.arange(1, _COUNT_TOP + 1, dtype=float)
    second = np.empty_like(lam)
    inv = np.empty_like(lam)
    third = np.empty_like(lam)
    if small.any():
        pmf = _binomial_table(nn[small], pi[small])
        ratio = np.zeros_like(c)
        ratio[1:] = c[1:] / (c[1:] - 1.0)
        ratio3 = np.zeros_like(c)
        ratio3[1:] = c[1:] * (c[1:] - 2.0) / (c[1:] - 1.0) ** 2
        mom = pmf @ np.stack([ratio, 1.0 / c, ratio3, np.ones_like(c), c, 1.0 / c**2], axis=1)
        second[small], inv[small], third[small] = mom[:, 0], mom[:, 1], mom[:, 2]
    lb, pbig = lam[big], pi[big]
    second[big] = 1.0 + 1.0 / (lb - 1.0) + lb * (1.0 - pbig) / (lb - 1.0) ** 3
    inv[big] = (1.0 + (1.0 - pbig) / lb) / lb
    third[big] = 1.0 - 1.0 / (lb - 1.0) ** 2

    # per-bin terms
    qb = np.einsum("bi,bi->b", mu, mu)
    zeta = np.einsum("bi,bij,bj->b", mu, sigma, mu)
    tr1 = np.einsum("bii->b", sigma)
    tr2 = np.einsum("bij,bji->b", sigma, sigma)
    s2 = np.einsum("bij,bjk->bik", sigma, sigma)
    tr3 = np.einsum("bij,bji->b", s2, sigma)
    cross = np.einsum("bi,bij,bj->b", mu, s2, mu)
    pq = pi * qb
    sum_pq, sum_pq2, sum_pq3 = seg(pq), seg(pq * qb), seg(pq * qb * qb)

    mean = seg(qb * first) / n_arr
    cond = seg(4.0 * zeta * first + 2.0 * tr2 * second) / n_arr**2
    between = (sum_pq2 - sum_pq**2) / n_arr
    var = cond + np.maximum(between, 0.0)
    k3 = 8.0 * seg(third * tr3) / n_arr**3 + 24.0 * seg(first * cross) / n_arr**3
    if one_dim:
        raw = np.concatenate([pb.raw_moments for pb in pbs])
        a1, a2, a3, a4 = (raw[:, j] for j in range(4))
        m3 = a3 - 3.0 * a1 * a2 + 2.0 * a1**3
        k3 = k3 + 8.0 * seg(pi * a1**3 * m3) / n_arr**2
    k3 = k3 + (sum_pq3 - 3.0 * sum_pq2 * sum_pq + 2.0 * sum_pq**3) / n_arr**2
    with np.errstate(divide="ignore", invalid="ignore"):
        skew = np.where(var > 0, k3 / np.where(var > 0, var, 1.0) ** 1.5, 0.0)

    if one_dim:  # expected_sigma1_sq, one-dimensional U
        e0s = np.empty_like(lam)
        e1s = np.empty_like(lam)
        if small.any():
            s0, s1, sm1, sm2 = mom[:, 3], mom[:, 4], mom[:, 1], mom[:, 5]
            b1, b2, b3, b4 = a1[small], a2[small], a3[small], a4[small]
            # _plugin_terms' g0, g1 and g2 summed against the count law, through E[1], E[c], E[1/c], E[1/c^2]
            e0s[small] = b2 * s0 + b1**2 * (s1 - s0)
            x, y = b2**2 + 2.0 * b1 * b3, b1**2 * b2
            g1 = b4 * sm1 + x * (s0 - sm1) + y * (s1 - 3.0 * s0 + 2.0 * sm1)
            w = 4.0 * b1 * b3 + 3.0 * b2**2
            g2 = (b4 * sm2 + w * (sm1 - sm2) + 6.0 * b2 * b1**2 * (s0 - 3.0 * sm1 + 2.0 * sm2)
                  + b1**4 * (s1 - 6.0 * s0 + 11.0 * sm1 - 6.0 * sm2))
            e1s[small] = 4.0 * g1 - 3.0 * g2
        if big.any():
            sd = np.sqrt(lb * (1.0 - pbig))
            ab = raw[big]
            vals = [_plugin_terms(xx, ab) for xx in (lb - sd, lb, lb + sd)]
            e0s[big] = vals[1][0] + 0.5 * (vals[0][0] - 2 * vals[1][0] + vals[2][0])
            e1s[big] = vals[1][1] + 0.5 * (vals[0][1] - 2 * vals[1][1] + vals[2][1])
        s1_hat = np.maximum(seg(e1s) / n_arr - (seg(e0s) / n_arr) ** 2, 0.0)
    else:
        a_ = sum_pq2 + seg(occupied * (2.0 * qb * tr1 + 4.0 * zeta) + inv * (tr1**2 + 2.0 * tr2)) / n_arr
        b_ = (sum_pq + seg(occupied * tr1) / n_arr) ** 2
        c_ = 4.0 * seg((nn * pi - occupied) * zeta + (occupied - inv) * tr2) / n_arr
        s1_hat = np.maximum(a_ - b_ + c_, 0.0)
    sig1 = np.maximum(sum_pq2 - sum_pq**2 + 4.0 * seg(pi * zeta), 0.0)
    lam_b = np.where(tr1 > 0, tr2 / np.where(tr1 > 0, tr1, 1.0), 0.0)
    wsum = seg(second * tr2)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(wsum > 0, 4.0 * seg(second * tr2 * lam_b) / np.where(wsum > 0, wsum, 1.0) / n_arr, 0.0)
    cols = {"mean": mean, "variance": var, "skewness": skew, "sigma1_sq_hat": s1_hat,
            "e1_sum": seg(nn * pi - first), "occupied": seg(occupied), "ece_sq_binned": sum_pq,
            "sigma1_sq": sig1, "kappa": kappa}
    if null_moments:
        sn = np.concatenate([pb.sigma_null for pb in pbs])
        tr2n = np.einsum("bij,bji->b", sn, sn)
        tr3n = np.einsum("bij,bjk,bki->b", sn, sn, sn)
        nv = 2.0 * seg(tr2n * second) / n_arr**2
        with np.errstate(divide="ignore", invalid="ignore"):
            cols["null_variance"] = nv
            cols["null_skewness"] = np.where(nv > 0, 8.0 * seg(third * tr3n) / n_arr**3
                                             / np.where(nv > 0, nv, 1.0) ** 1.5, 0.0)
    names = list(cols)
    table = np.column_stack([cols[k] for k in names])
    return [dict(zip(names, map(float, row))) for row in table]
