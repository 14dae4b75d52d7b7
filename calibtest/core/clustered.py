r"""The debiased estimator of ECE^2 for clustered rows, its cluster-robust variances and the sign-flip null.

Rows i = 1..n fall in G clusters (sites, hospitals, patients with several
rows); clusters are independent, rows of one cluster need not be.  With a
random site effect on the outcome, two rows of one site share a part of
their error U = Y - Z, so E[U_i^T U_j] > 0 for such a pair even when the
model is calibrated for the population of sites' patients.

**Estimand.**  theta = sum_b P(b) ||E[U | b]||^2, the binned squared
calibration error of the population of patients of the population of sites
(the expectation is over sites as well as patients: a model calibrated on
average over sites has theta = 0 however much single sites deviate).

**Estimator.**  The paper's debiased T (eq. (6)) averages U_i^T U_j over the
pairs of distinct rows of a bin; the pairs of one cluster are biased by the
shared site effect.  T_cl averages over the pairs of rows of *different*
clusters only: with S_bg = sum of U over the rows of cluster g in bin b,
c_bg their count, S_b = sum_g S_bg and c_b = sum_g c_bg,

.. math::

    T_{cl} = \sum_b \frac{c_b}{n}
             \frac{\lVert S_b \rVert^2 - \sum_g \lVert S_{bg} \rVert^2}{c_b^2 - \sum_g c_{bg}^2}
           = \sum_{g \ne h} K_{gh}, \qquad
    K_{gh} = \sum_b a_b\, S_{bg}^\top S_{bh}, \quad a_b = \frac{c_b}{n (c_b^2 - \sum_g c_{bg}^2)}.

Given the predictions, E[S_bg^T S_bh] = c_bg c_bh ||mu_b||^2 for independent
clusters, so each bin's ratio is unbiased for ||mu_b||^2.  Bins whose rows
all belong to one cluster hold no such pair and are left out (as the bins of
one row are left out of T).  With one row per cluster T_cl = T.

**Miscalibrated regime (linear part).**  The influence value of row i in bin
b is IF_i = 2 mu_b^T U_i - ||mu_b||^2 - theta (plug-in mu_b = S_b / c_b and
theta the plug-in sum_b (c_b / n) ||mu_b||^2, so that the IF_i add to 0); its
cluster sums s_g = sum_{i in g} IF_i give the cluster-robust variance

.. math::

    V_1 = \frac{G}{G - 1} \frac{1}{n^2} \sum_g s_g^2,

which with one row per cluster is n / (n - 1) times sigma1^2 / n of the
paper's eq. (8).

**Calibrated regime (the degenerate part).**  Under H0 (E[S_bg] = 0) T_cl is
a degenerate U-statistic over clusters, T_cl = 2 sum_{g < h} K_gh with
uncorrelated mean-zero terms, and

.. math::

    \operatorname{Var}_0(T_{cl}) = 2 \sum_{g \ne h} E[K_{gh}^2]
    \quad\text{estimated by}\quad V_0 = 2 \sum_{g \ne h} K_{gh}^2,

computed without forming the G x G matrix K: with X the (m d) x G matrix of
the S_bg and A = diag(a_b), sum_{g,h} K_gh^2 = ||X^T A X||_F^2 =
sum_{r,r'} a_r a_r' (X X^T)_{rr'}^2, a sparse product over the bins a
cluster shares.  With one row per cluster V_0 is the unweighted second-order
variance (2 / n^2) sum_b sum_{i != j} (U_i^T U_j)^2 / (c_b - 1)^2.

**The standard error** is sqrt(V_1 + V_0): the linear and the quadratic
(Hoeffding) parts of Var(T_cl), as full calibration adds its second-order
variance to sigma1^2 / n; the interval's quantiles are those of Student's t
with G - 1 degrees of freedom (the cluster-robust variance has about G - 1).

**The null.**  The conditional and the label-redrawing (Monte Carlo) nulls
of independent rows redraw each label alone and miss the shared site
effect; under clustering the null law is the cluster sign-flip (a wild
cluster bootstrap with Rademacher weights): under H0 the cluster sums S_bg
have mean 0, and T*(eps) = sum_{g != h} eps_g eps_h K_gh with independent
signs eps_g has the second moments of T_cl.  With 2^(G-1) - 1 at most the number
of draws every sign pattern but the identity is enumerated (eps and -eps give
the same T*), and (1 + #{T* >= T}) / 2^(G-1) is the exact randomization
p-value: it cannot fall below 2^-(G-1), so with 5 clusters (16 patterns) no
test at alpha < 1/16 rejects.
The asymptotic alternative is z = T_cl / sqrt(V_0) ~ N(0, 1).

References
----------
.. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
       l2 Expected Calibration Error", arXiv:2408.08998, 2024, eqs. (6), (8), (10).
.. [2] Cameron, Gelbach and Miller, "Bootstrap-based improvements for
       inference with clustered errors", Review of Economics and Statistics 90 (2008).
.. [3] Liang and Zeger, "Longitudinal data analysis using generalized linear
       models", Biometrika 73 (1986).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse as _sparse
from scipy import stats as _sps

from calibtest.core.arrays import read_only
from calibtest.core.intervals import AdjustedInterval, adjusted_interval
from calibtest.options import check_memory

__all__ = ["ClusterCells", "cluster_cells", "ClusteredStatistics", "clustered_statistics",
           "sign_flip_draws", "sign_flip_test", "flip_draws", "flipped_statistic", "t_adjusted_interval", "t_multipliers",
           "ClusteredInference", "clustered_inference", "MIN_CLUSTERS", "clustered_difference_variance"]

#: Below this many clusters the summary and the report warn that the clustered interval and test are
#: unreliable (chosen from vignettes/clustered_coverage.md: see docs/clusters.md).
MIN_CLUSTERS = 20


@dataclass(frozen=True, eq=False)
class ClusterCells:
    """The rows summed per (bin, cluster) cell: the only sums the clustered estimator needs.

    Attributes
    ----------
    bin : ndarray of intp, shape (k,)
        Bin of each non-empty cell.
    cluster : ndarray of intp, shape (k,)
        Cluster code (0..G-1) of each cell.
    count : ndarray of float64, shape (k,)
        c_bg, rows per cell.
    sum_u : ndarray, shape (k, d)
        S_bg, the sum of U over the cell.
    m, n_clusters : int
        Bins and clusters G.
    """

    bin: np.ndarray
    cluster: np.ndarray
    count: np.ndarray
    sum_u: np.ndarray
    m: int
    n_clusters: int

    @property
    def dim(self) -> int:
        """Dimension d of U."""
        return self.sum_u.shape[1]

    def design(self) -> "_sparse.csr_matrix":
        """X, the sparse (m d) x G matrix of the S_bg (row b d + j, column g)."""
        d = self.dim
        rows = (self.bin[:, None] * d + np.arange(d)[None, :]).ravel()
        cols = np.repeat(self.cluster, d)
        return _sparse.csr_matrix((self.sum_u.ravel(), (rows, cols)), shape=(self.m * d, self.n_clusters))


def cluster_cells(inverse: np.ndarray, u: np.ndarray, codes: np.ndarray, m: int, n_clusters: int) -> ClusterCells:
    """Sum the rows' U per (bin, cluster) cell.

    Parameters
    ----------
    inverse : ndarray of int, shape (n,)
        Bin of each row (0..m-1).
    u : ndarray, shape (n, d)
        U = Y - Z of each row.
    codes : ndarray of int, shape (n,)
        Cluster code of each row (0..G-1).
    m, n_clusters : int
        Bins and clusters G.
    """
    inverse = np.asarray(inverse, dtype=np.int64)
    codes = np.asarray(codes, dtype=np.int64)
    key = inverse * n_clusters + codes
    cells, cell = np.unique(key, return_inverse=True)
    cell = cell.ravel()
    k = cells.shape[0]
    sum_u = np.empty((k, u.shape[1]))
    for j in range(u.shape[1]):  # loop over the d columns only
        sum_u[:, j] = np.bincount(cell, weights=u[:, j], minlength=k)
    count = np.bincount(cell, minlength=k).astype(np.float64)
    return ClusterCells((cells // n_clusters).astype(np.intp), (cells % n_clusters).astype(np.intp), count,
                        sum_u, int(m), int(n_clusters))


@dataclass(frozen=True, eq=False)
class ClusteredStatistics:
    """T_cl and its cluster-robust variances (see the module docstring).

    Attributes
    ----------
    estimate : float
        T_cl, the debiased estimator over pairs of rows of different clusters.
    plugin : float
        The plug-in sum_b (c_b / n) ||S_b / c_b||^2.
    linear_variance : float
        V_1 = G / (G - 1) sum_g s_g^2 / n^2, the cluster-robust variance of the linear part.
    null_variance : float
        V_0 = 2 sum_{g != h} K_gh^2, the variance of T_cl under H0 (the quadratic part).
    se : float
        sqrt(V_1 + V_0).
    n_clusters : int
        G.
    bin_weight : ndarray, shape (m,)
        a_b = c_b / (n (c_b^2 - sum_g c_bg^2)) (0 for bins without a pair of rows of different clusters).
    contributions : ndarray, shape (m,)
        Each bin's term of T_cl.
    cluster_influence : ndarray, shape (G,)
        s_g / n, each cluster's share of the linear part (they add to 0).
    """

    estimate: float
    plugin: float
    linear_variance: float
    null_variance: float
    se: float
    n_clusters: int
    bin_weight: np.ndarray
    contributions: np.ndarray
    cluster_influence: np.ndarray

    def __post_init__(self):
        for name in ("bin_weight", "contributions", "cluster_influence"):
            object.__setattr__(self, name, read_only(getattr(self, name)))


#: Largest number of entries of X X^T (the bins any cluster shares, squared) that V_0 forms.
MAX_GRAM_ENTRIES = 50_000_000


def _gram_entries(cells: ClusterCells) -> float:
    """An upper bound on the entries of X X^T: sum over clusters of (its cells times d)^2."""
    per_cluster = np.bincount(cells.cluster, minlength=cells.n_clusters).astype(np.float64) * cells.dim
    return float(np.sum(per_cluster * per_cluster))


def clustered_statistics(cells: ClusterCells, n: int) -> ClusteredStatistics:
    """T_cl, V_1, V_0 and the standard error from the (bin, cluster) sums.

    Parameters
    ----------
    cells : ClusterCells
    n : int
        Rows.

    Raises
    ------
    OptionError
        When X X^T would exceed the memory limit (clusters spread over very many bins).
    """
    m, G, d = cells.m, cells.n_clusters, cells.dim
    b, g = cells.bin, cells.cluster
    c_b = np.bincount(b, weights=cells.count, minlength=m)
    S_b = np.empty((m, d))
    for j in range(d):
        S_b[:, j] = np.bincount(b, weights=cells.sum_u[:, j], minlength=m)
    cell_sq = np.einsum("kj,kj->k", cells.sum_u, cells.sum_u)
    A_b = np.bincount(b, weights=cell_sq, minlength=m)               # sum_g ||S_bg||^2
    C2_b = np.bincount(b, weights=cells.count * cells.count, minlength=m)   # sum_g c_bg^2
    D_b = c_b * c_b - C2_b
    a = np.zeros(m)
    keep = D_b > 0.5  # counts are integers: D_b >= 2 when a bin holds two clusters
    a[keep] = c_b[keep] / (n * D_b[keep])
    contributions = a * (np.einsum("bj,bj->b", S_b, S_b) - A_b)
    estimate = float(contributions.sum())
    # linear part: IF summed per cluster, s_g = sum_b (2 mu_b.S_bg - c_bg ||mu_b||^2) - n_g theta_plugin
    occupied = c_b > 0
    mu = np.zeros((m, d))
    mu[occupied] = S_b[occupied] / c_b[occupied, None]
    mu_sq = np.einsum("bj,bj->b", mu, mu)
    plugin = float(np.sum(c_b * mu_sq) / n)
    h = 2.0 * np.einsum("kj,kj->k", mu[b], cells.sum_u) - cells.count * (mu_sq[b] + plugin)
    s_g = np.bincount(g, weights=h, minlength=G)
    linear = float(G / (G - 1.0) * np.sum(s_g * s_g) / (n * n)) if G > 1 else math.inf
    # quadratic part: V_0 = 2 (||X^T A X||_F^2 - sum_g K_gg^2)
    check_memory(24.0 * _gram_entries(cells), f"the cluster-robust null variance ({G} clusters over {m} bins)",
                 "use fewer bins (n_bins=)")
    X = cells.design()
    a_row = np.repeat(a, d)
    gram = (X @ X.T).tocoo()
    frob = float(np.sum(a_row[gram.row] * a_row[gram.col] * gram.data * gram.data))
    k_gg = np.bincount(g, weights=a[b] * cell_sq, minlength=G)
    null_variance = float(max(2.0 * (frob - np.sum(k_gg * k_gg)), 0.0))
    return ClusteredStatistics(estimate=estimate, plugin=plugin, linear_variance=linear,
                               null_variance=null_variance, se=math.sqrt(linear + null_variance), n_clusters=G,
                               bin_weight=a, contributions=contributions, cluster_influence=s_g / n)


def _every_pattern(n_clusters: int, n_draws: int) -> np.ndarray | None:
    """Every sign pattern with eps_0 = +1 except the identity, shape (G, 2^(G-1) - 1), when there are at most
    ``n_draws`` of them (None otherwise)."""
    if n_clusters - 1 > 30 or 2 ** (n_clusters - 1) - 1 > n_draws:
        return None
    count = 2 ** (n_clusters - 1)
    bits = (np.arange(1, count)[None, :] >> np.arange(n_clusters - 1)[:, None]) & 1
    return np.vstack([np.ones((1, count - 1)), 1.0 - 2.0 * bits])


def flip_draws(n_clusters: int, n_draws: int, rng, statistics) -> tuple[np.ndarray, bool]:
    """Statistics of sign-flipped clusters, the same sign patterns for every statistic.

    Parameters
    ----------
    n_clusters : int
        G.
    n_draws : int
        R: the random patterns, unless every pattern but the identity (2^(G-1) - 1 of them, eps and -eps
        giving the same statistics) is at most R: then they are enumerated and the p-value
        (1 + #{T* >= T}) / (1 + R') is the exact randomization p-value.
    rng : numpy.random.Generator
    statistics : sequence of callables
        Each maps signs of shape (G, r) to r values.

    Returns
    -------
    draws, exact : ndarray of shape (L, R'), bool
    """
    every = _every_pattern(n_clusters, n_draws)
    if every is not None:
        return np.vstack([f(every) for f in statistics]).reshape(len(statistics), -1), True
    out = np.empty((len(statistics), n_draws))
    step = max(1, int(2_000_000 // max(n_clusters, 1)))
    for start in range(0, n_draws, step):  # chunks of draws bound the memory of the (G, r) sign matrix
        r = min(step, n_draws - start)
        eps = 1.0 - 2.0 * rng.integers(0, 2, size=(n_clusters, r)).astype(np.float64)
        for i, f in enumerate(statistics):
            out[i, start:start + r] = f(eps)
    return out, False


def flipped_statistic(cells: ClusterCells, bin_weight: np.ndarray):
    """The function eps -> T*(eps) = sum_b a_b (||sum_g eps_g S_bg||^2 - sum_g ||S_bg||^2) of the sign-flip null
    (= sum_{g != h} eps_g eps_h K_gh), vectorised over the columns of eps."""
    X = cells.design()
    a_row = np.repeat(np.asarray(bin_weight, dtype=np.float64), cells.dim)
    offset = float(np.sum(bin_weight[cells.bin] * np.einsum("kj,kj->k", cells.sum_u, cells.sum_u)))

    def evaluate(eps: np.ndarray) -> np.ndarray:
        Y = X @ eps
        return a_row @ (Y * Y) - offset

    return evaluate


def sign_flip_draws(cells: ClusterCells, bin_weight: np.ndarray, *, n_draws: int, rng) -> tuple[np.ndarray, bool]:
    """T* of the cluster sign-flip null: every pattern but the identity (exact) or ``n_draws`` random ones.

    T*(eps) = sum_b a_b (||sum_g eps_g S_bg||^2 - sum_g ||S_bg||^2) = sum_{g != h} eps_g eps_h K_gh.

    Parameters
    ----------
    cells : ClusterCells
    bin_weight : ndarray, shape (m,)
        a_b of :class:`ClusteredStatistics`.
    n_draws : int
        R, the random sign patterns (when there are more than R + 1 patterns in all).
    rng : numpy.random.Generator

    Returns
    -------
    draws, exact : ndarray, bool
        The T* and whether they are every pattern but the identity (whose T* is T_cl itself).
    """
    draws, exact = flip_draws(cells.n_clusters, n_draws, rng, [flipped_statistic(cells, bin_weight)])
    return draws[0], exact


def sign_flip_test(statistic: float, draws: np.ndarray) -> float:
    """The p-value (1 + #{T* >= T}) / (1 + R) of T_cl against the sign-flip draws.

    With every pattern but the identity enumerated this is the exact
    randomization p-value #{patterns with T* >= T} / 2^(G-1).  Ties within
    1e-10 of the largest magnitude count as reaching T.
    """
    tol = 1e-10 * max(abs(statistic), float(np.abs(draws).max(initial=0.0)))
    return (1.0 + int(np.count_nonzero(draws >= statistic - tol))) / (1.0 + draws.size)


def t_multipliers(alpha: float, n_clusters: int) -> tuple[float, float]:
    """(t_a, t_h): the 1 - alpha and 1 - alpha/2 quantiles of Student's t with G - 1 degrees of freedom."""
    df = max(n_clusters - 1, 1)
    return float(_sps.t.isf(alpha, df)), float(_sps.t.isf(alpha / 2.0, df))


def t_adjusted_interval(estimate: float, se: float, threshold: float, alpha: float, n_clusters: int
                        ) -> AdjustedInterval:
    """The adjusted interval (paper eqs. (10) and (7)) with t_{G-1} quantiles in place of z_a and z_h.

    With T+ = max(T, 0) and (t_a, t_h) of :func:`t_multipliers`::

        upper = T+ + t_h se
        lower = T+ - t_h se               if T+/2 <= T+ - t_h se   (branch 1)
              = max(0, T+ - t_a se)       if T+ - t_a se < T+/2    (branch 2)
              = T+/2                      otherwise                (branch 3)

    and [0, upper] when T+ < threshold (the test does not reject).
    """
    t_a, t_h = t_multipliers(alpha, n_clusters)
    return adjusted_interval(estimate, se, threshold, alpha, multipliers=(t_h, t_h, t_a))


@dataclass(frozen=True, eq=False)
class ClusteredInference:
    """The clustered estimate, its test of H0: calibrated and its interval, from one set of cells.

    Attributes
    ----------
    statistics : ClusteredStatistics
    null : {"sign-flip", "asymptotic"}
        The null that decided the test and whether 0 joins the interval.
    zstat, asymptotic_pvalue : float
        z = T_cl / sqrt(V_0) and 1 - Phi(z) (computed under either null).
    pvalue : float
        The chosen null's p-value.
    threshold : float
        Critical value of T_cl (the asymptotic one z_alpha sqrt(V_0), or the
        sign-flip draws' critical value; inf when no T rejects).
    interval : AdjustedInterval
        The t-adjusted interval with the chosen null's zero rule.
    draws : ndarray or None
        The sign-flip T* (None under the asymptotic null).
    exact : bool
        The draws are every sign pattern but the identity (2^(G-1) - 1 of them).
    """

    statistics: ClusteredStatistics
    null: str
    zstat: float
    asymptotic_pvalue: float
    pvalue: float
    threshold: float
    interval: AdjustedInterval
    draws: np.ndarray | None
    exact: bool


def _critical_value(draws: np.ndarray, alpha: float) -> float:
    """Smallest D such that T > D rejects at level alpha against the draws (inf if no T rejects)."""
    allowed = math.floor(alpha * (draws.size + 1) + 1e-9) - 1  # max #{T* >= T} that rejects
    if allowed < 0:
        return math.inf
    ordered = np.sort(draws)[::-1]
    return float(ordered[allowed]) if allowed < ordered.size else -math.inf


def clustered_inference(cells: ClusterCells, n: int, *, alpha: float, null: str = "sign-flip",
                        n_draws: int = 999, rng=None) -> ClusteredInference:
    """T_cl, its cluster-robust standard error, the test of H0: calibrated and the interval.

    Parameters
    ----------
    cells : ClusterCells
    n : int
        Rows.
    alpha : float
    null : {"sign-flip", "asymptotic"}
        The cluster sign-flip null (:func:`sign_flip_draws`) or z = T_cl / sqrt(V_0) ~ N(0, 1).
    n_draws : int
        Random sign patterns when they are not enumerated.
    rng : numpy.random.Generator, optional
        Needed by the sign-flip null.
    """
    st = clustered_statistics(cells, n)
    t = st.estimate
    if st.null_variance > 0:
        zstat = t / math.sqrt(st.null_variance)
        p_asym = float(_sps.norm.sf(zstat))
        threshold = float(_sps.norm.isf(alpha) * math.sqrt(st.null_variance))
    else:  # no pair of rows of different clusters with a non-zero product: T_cl = 0, no evidence
        zstat, p_asym, threshold = 0.0, 1.0, math.inf
    draws, exact, pvalue = None, False, p_asym
    if null == "sign-flip":
        draws, exact = sign_flip_draws(cells, st.bin_weight, n_draws=n_draws, rng=rng)
        pvalue = sign_flip_test(t, draws)
        threshold = _critical_value(draws, alpha)
    elif null != "asymptotic":
        raise ValueError(f"null must be 'sign-flip' or 'asymptotic', got {null!r}")
    rule = threshold if null == "asymptotic" else (math.inf if pvalue > alpha else -math.inf)
    interval = t_adjusted_interval(t, st.se, rule, alpha, st.n_clusters)
    return ClusteredInference(st, null, float(zstat), p_asym, float(pvalue), float(threshold), interval,
                              None if draws is None else read_only(draws), exact)


def _gram_inner(cells_a: ClusterCells, a_a: np.ndarray, cells_b: ClusterCells, a_b: np.ndarray) -> float:
    """<K_a, K_b>_F = sum_{g,h} K^a_gh K^b_gh = sum_{r,s} a_r b_s (X_a X_b^T)_rs^2 (the same clusters)."""
    check_memory(24.0 * math.sqrt(_gram_entries(cells_a) * _gram_entries(cells_b)),
                 f"the cluster-robust difference variance ({cells_a.n_clusters} clusters)", "use fewer bins (n_bins=)")
    cross = (cells_a.design() @ cells_b.design().T).tocoo()
    ra = np.repeat(np.asarray(a_a, dtype=np.float64), cells_a.dim)
    rb = np.repeat(np.asarray(a_b, dtype=np.float64), cells_b.dim)
    return float(np.sum(ra[cross.row] * rb[cross.col] * cross.data * cross.data))


def _cluster_diagonal(cells: ClusterCells, bin_weight: np.ndarray) -> np.ndarray:
    """K_gg = sum_b a_b ||S_bg||^2 per cluster."""
    sq = np.einsum("kj,kj->k", cells.sum_u, cells.sum_u)
    return np.bincount(cells.cluster, weights=bin_weight[cells.bin] * sq, minlength=cells.n_clusters)


def clustered_difference_variance(cells_a: ClusterCells, stats_a: ClusteredStatistics, cells_b: ClusterCells,
                                  stats_b: ClusteredStatistics) -> tuple[float, float]:
    """(V_1, V_0) of T_cl^A - T_cl^B for two models on the same rows and clusters (a paired comparison).

    V_1 = G / (G - 1) sum_g (s^A_g - s^B_g)^2 / n^2 from the clusters' influence sums, and
    V_0 = 2 sum_{g != h} (K^A_gh - K^B_gh)^2, the quadratic part of the difference (its covariance on shared
    clusters included), from ||K^A - K^B||_F^2 = ||K^A||^2 + ||K^B||^2 - 2 <K^A, K^B>.
    """
    G = cells_a.n_clusters
    if cells_b.n_clusters != G:
        raise ValueError("a paired clustered comparison needs the same clusters in both results")
    diff = np.asarray(stats_a.cluster_influence) - np.asarray(stats_b.cluster_influence)
    linear = float(G / (G - 1.0) * np.sum(diff * diff))
    a, b = stats_a.bin_weight, stats_b.bin_weight
    frob = (_gram_inner(cells_a, a, cells_a, a) + _gram_inner(cells_b, b, cells_b, b)
            - 2.0 * _gram_inner(cells_a, a, cells_b, b))
    dd = _cluster_diagonal(cells_a, a) - _cluster_diagonal(cells_b, b)
    return linear, float(max(2.0 * (frob - np.sum(dd * dd)), 0.0))
