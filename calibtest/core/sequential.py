"""Anytime-valid monitoring of calibration, batch by batch: the numpy engines (no result objects).

A stream of batches t = 1, 2, ... of rows (y_i, p_i), y_i in {0, 1}, p_i in [0, 1]
(top-1: y = correct, p = confidence).  H0: every row is calibrated given its
prediction, E[y_i | p_i, past] = p_i.  Everything here is vectorised over the
rows of a batch and, where a per-batch quantity is additive, it is a sum over
rows, so parts of one batch computed on different workers add.

Four engines:

* **Betting e-process** (:func:`features`, :func:`cell_sums`, :func:`grapa_bets`,
  :func:`log_growth`, :func:`log_mean_exp`).  Each *family* f is a test
  martingale ``M_f,t = prod_i (1 + lambda_f(p_i) g_f(p_i) (y_i - p_i))``: the
  families are equal-width binnings at several scales B (g = 1, the bet
  ``lambda`` chosen per bin, so its sign is the sign of the miscalibration seen
  so far in that bin: calibration-in-the-large at B = 1, region-confined
  miscalibration at larger B) and the slope direction g = 2p - 1.  The bets are
  predictable: fixed within a batch and computed from the sums of past batches
  only (aGRAPA, Waudby-Smith and Ramdas 2024, Sec. 5: ``lambda = S1 / (S2 + 1)``
  with S1 = sum g (y - p), S2 = sum (g (y - p))^2 over the past rows of the
  cell), clipped to ``|lambda| <= 1/2`` so every factor is >= 1/2.  Under H0
  each factor has conditional mean 1, so each M_f is a test martingale and so
  is their average ``E_t = (1/F) sum_f M_f,t``; by Ville's inequality
  ``P(sup_t E_t >= 1/alpha) <= alpha`` (Arnold, Henzi and Ziegel 2023;
  Ramdas et al. 2023).
* **Confidence sequences** for a parameter theta of a linear family
  ``E[a_i - theta b_i] = 0`` (calibration-in-the-large: a = y - p, b = 1;
  O/E: a = y, b = p): the hedged betting capital (Waudby-Smith and Ramdas
  2024) lower-bounded by Fan et al.'s inequality
  ``log(1 + l x) >= l x + psi(l) x^2``, ``psi(l) = log(1 - l) + l``, for
  ``x >= -1``, ``0 <= l < 1``.  With a bet l_t that does not depend on theta,
  ``log K+(theta) = sum_t [l_t sum x_i(theta) + psi(l_t) sum x_i(theta)^2]``
  is a quadratic in theta whose five coefficients are sums over rows
  (:func:`cs_sums`), so the whole sequence is kept in five numbers per
  parameter and the interval solved for by bisection (:func:`cs_interval`).
* **An upper confidence bound for the binned l2-ECE** at a fixed B: one
  such sequence per bin for ``mu_b = E[y - p | bin b]`` at level alpha / (B + 1)
  (Bonferroni), and ``ECE_B^2 <= sum_b (n_b / n) max(lo_b^2, hi_b^2)``
  (:func:`ece_upper`).  The bin shares n_b / n are those of the predictions
  seen (known exactly, no interval needed), so the bound is for the binned
  ECE at B of the stream's predictions, a lower bound on the true l2-ECE.
* **Change detection**: the e-detector of Shin, Ramdas and Rinaldo (2024),
  Shiryaev-Roberts type ``M_t = e_t (M_{t-1} + 1)`` on batch e-values e_t
  (:func:`detector_step`) with ``E[tau] >= A`` for the alarm ``M_t >= A``, and
  the e-CUSUM ``C_t = e_t max(C_{t-1}, 1) = max_j prod_{s=j..t} e_s`` whose
  argmax start j estimates the change time; and the risk-adjusted CUSUM of
  Steiner, Cook, Farewell and Treasure (2000) (:func:`ra_scores`,
  :func:`cusum_path`, :func:`ra_threshold`).

References
----------
Steiner, Cook, Farewell, Treasure (2000). Monitoring surgical performance using
risk-adjusted cumulative sum charts. Biostatistics 1(4), 441-452.
Arnold, Henzi, Ziegel (2023). Sequentially valid tests for forecast calibration.
Ann. Appl. Stat. 17(3), 1909-1935.
Waudby-Smith, Ramdas (2024). Estimating means of bounded random variables by
betting. JRSS B 86(1), 1-27.
Shin, Ramdas, Rinaldo (2024). E-detectors: a nonparametric framework for
sequential change detection. New England J. Stat. Data Sci. 2(2), 229-260.
Fan, Grama, Liu (2015). Exponential inequalities for martingales with
applications. Electron. J. Probab. 20(1), 1-22.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from calibtest.core.binning import edge_floor

__all__ = ["LAMBDA_MAX", "DEFAULT_SCALES", "psi", "n_cells", "features", "cell_sums", "grapa_bets",
           "log_growth", "log_mean_exp", "eprocess_step", "detector_step", "cs_sums", "cs_bet", "cs_log_capital",
           "cs_interval", "ece_upper", "bin_bracket", "ra_scores", "cusum_path", "BatchLaw", "ra_row_law", "ra_batch_law",
           "cusum_arl", "cusum_threshold", "ra_threshold"]

#: Largest absolute bet: every betting factor 1 + lambda g (y - p) is then >= 1/2 (|g (y - p)| <= 1).
LAMBDA_MAX = 0.5

#: Bin counts of the binned families of the e-process (the slope family is added to them).
DEFAULT_SCALES = (1, 2, 4, 8, 16)


def psi(lam):
    """Fan et al.'s ``psi(l) = log(1 - l) + l`` (<= 0), with ``log(1 + l x) >= l x + psi(l) x^2`` for x >= -1."""
    lam = np.asarray(lam, dtype=np.float64)
    return np.log1p(-lam) + lam


# ----------------------------------------------------------------------------- e-process
def n_cells(scales) -> int:
    """Cells of all families: B + 1 per binned family (the cell B holds p = 1, as in the package's bins),
    one for the slope."""
    return int(sum(b + 1 for b in scales)) + 1


def features(p: np.ndarray, scales) -> tuple[np.ndarray, np.ndarray]:
    """Each row's cell and direction in every family.

    Parameters
    ----------
    p : ndarray, shape (n,)
        Predictions in [0, 1].
    scales : sequence of int
        Bin counts B of the binned families.

    Returns
    -------
    cell : ndarray of int64, shape (n, F)
        Index of the row's cell in the flat cell array of length :func:`n_cells`;
        F = len(scales) + 1 (the last family is the slope).
    g : ndarray, shape (n, F)
        The direction g_f(p): 1 in a binned family, 2p - 1 in the slope family.
    """
    p = np.asarray(p, dtype=np.float64)
    offsets = np.cumsum([0] + [b + 1 for b in scales])
    cells = [edge_floor(p * b) + off for b, off in zip(scales, offsets)]
    cells.append(np.full(p.shape, offsets[-1], dtype=np.int64))
    g = np.ones((p.size, len(scales) + 1))
    g[:, -1] = 2.0 * p - 1.0
    return np.column_stack(cells), g


def cell_sums(cell: np.ndarray, g: np.ndarray, r: np.ndarray, size: int) -> np.ndarray:
    """Per cell ``S1 = sum g r`` and ``S2 = sum (g r)^2`` (shape (2, size)), r = y - p: the bets' statistics."""
    x = g * r[:, None]
    flat = cell.ravel()
    return np.stack([np.bincount(flat, x.ravel(), size), np.bincount(flat, (x * x).ravel(), size)])


def grapa_bets(sums: np.ndarray, lam_max: float = LAMBDA_MAX) -> np.ndarray:
    """aGRAPA bets per cell: ``clip(S1 / (S2 + 1), -lam_max, lam_max)``.

    ``S1 / S2`` maximises the second-order expansion ``l S1 - l^2 S2 / 2`` of
    the past log-wealth ``sum log(1 + l x)`` (Waudby-Smith and Ramdas 2024,
    eq. (26)); the 1 in the denominator shrinks the first bets to 0.
    """
    return np.clip(sums[0] / (sums[1] + 1.0), -lam_max, lam_max)


def log_growth(cell: np.ndarray, g: np.ndarray, r: np.ndarray, bets: np.ndarray) -> np.ndarray:
    """Log-wealth of one batch per family: ``sum_i log(1 + lambda[cell_if] g_if r_i)``, shape (F,)."""
    return np.log1p(bets[cell] * g * r[:, None]).sum(axis=0)


def log_mean_exp(logs, axis=-1) -> np.ndarray:
    """``log(mean(exp(logs)))`` without overflow."""
    logs = np.asarray(logs, dtype=np.float64)
    top = np.max(logs, axis=axis, keepdims=True)
    out = top + np.log(np.mean(np.exp(logs - top), axis=axis, keepdims=True))
    return np.squeeze(out, axis=axis)


def eprocess_step(log_wealth: np.ndarray, growth: np.ndarray) -> tuple[np.ndarray, float]:
    """Families' log-wealth after a batch and the log of the mixture ``E_t = mean_f exp(log_wealth_f)``."""
    new = np.asarray(log_wealth) + growth
    return new, float(log_mean_exp(new))


def detector_step(log_sr: float, log_cusum: float, start: int, log_e: float, look: int) -> tuple[float, float, int]:
    """One batch of the e-detectors, in logs.

    ``M_t = e_t (M_{t-1} + 1)`` (Shiryaev-Roberts, M_0 = 0): ``M_t - t`` is a
    supermartingale under H0 when ``E[e_t | past] <= 1``, so the first t with
    ``M_t >= A`` has ``E[tau] >= A`` (Shin et al. 2024, Thm. 2.4).  The e-CUSUM
    ``C_t = e_t max(C_{t-1}, 1) = max_{j <= t} prod_{s=j}^t e_s`` (C_t <= M_t);
    ``start`` is its argmax j, the estimated change time (a new run starts at
    ``look`` when ``C_{t-1} <= 1``).

    Returns
    -------
    (log M_t, log C_t, start)
    """
    new_start = look if log_cusum <= 0.0 else start
    return log_e + float(np.logaddexp(log_sr, 0.0)), log_e + max(log_cusum, 0.0), new_start


# ----------------------------------------------------------------------------- confidence sequences
def cs_sums(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(sum a, sum b, sum a^2, sum a b, sum b^2)`` of a batch: the statistics of ``sum (a - theta b)^k``."""
    a = np.asarray(a, dtype=np.float64)
    b = np.broadcast_to(np.asarray(b, dtype=np.float64), a.shape)
    return np.array([a.sum(), b.sum(), (a * a).sum(), (a * b).sum(), (b * b).sum()])


def cs_bet(n_past, sum_u, sum_u2, n_batch, alpha: float, lam_max: float = LAMBDA_MAX) -> np.ndarray:
    """Predictable bet of a confidence sequence (the predictable plug-in of Waudby-Smith and Ramdas 2024, eq. (27)).

    ``lambda = min(lam_max, sqrt(2 log(2/alpha) / (v t log(1 + t))))`` with t the
    rows up to the middle of the batch (``n_past + n_batch / 2``, known before the
    labels) and ``v = (1/4 + sum (u - mean u)^2) / (n_past + 1)`` the past variance
    of the scaled variable u (u = (y - p) / 2).  Depends on no label of the batch
    and not on theta.  Vectorised over arrays (the bins).
    """
    n_past = np.asarray(n_past, dtype=np.float64)
    centred = np.asarray(sum_u2) - np.divide(np.square(sum_u), n_past, out=np.zeros_like(n_past),
                                             where=n_past > 0)
    v = (0.25 + np.maximum(centred, 0.0)) / (n_past + 1.0)
    t = np.maximum(n_past + np.asarray(n_batch, dtype=np.float64) / 2.0, 1.0)
    return np.minimum(lam_max, np.sqrt(2.0 * np.log(2.0 / alpha) / (v * t * np.log1p(t))))


def _scale(theta, kind: str):
    """Range of ``a - theta b``: 2 for CITL (y - p - theta in [-2, 2]); max(1, theta) for O/E (y - theta p)."""
    return 2.0 if kind == "citl" else np.maximum(1.0, theta)


def cs_log_capital(theta, coef: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """``(log K+, log K-)`` at ``theta`` from the accumulated coefficients.

    ``coef = sum_t (l_t sum a, l_t sum b, psi_t sum a^2, psi_t sum a b, psi_t sum b^2)``
    (last axis), with x(theta) = (a - theta b) / s(theta):
    ``log K+- = +-(C0 - theta C1) / s + (C2 - 2 theta C3 + theta^2 C4) / s^2``.
    log K+ decreases and log K- increases in theta (bets <= 1/2).
    """
    coef = np.asarray(coef, dtype=np.float64)
    s = _scale(theta, kind)
    lin = (coef[..., 0] - theta * coef[..., 1]) / s
    quad = (coef[..., 2] - 2.0 * theta * coef[..., 3] + theta * theta * coef[..., 4]) / (s * s)
    return lin + quad, -lin + quad


def _bisect(f, lo, hi, iterations: int = 60):
    """The boundary of {f >= 0} for f decreasing on [lo, hi] (f(lo) >= 0 > f(hi)), vectorised."""
    lo, hi = np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64)
    for _ in range(iterations):  # a loop over halvings, not rows
        mid = (lo + hi) / 2.0
        up = f(mid) >= 0
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    return lo, hi


def _root(qa, qb, qc, decreasing: bool):
    """The root of the concave quadratic ``qa x^2 + qb x + qc`` (qa <= 0) on its decreasing branch (the larger
    root) or its increasing branch (the smaller); the form ``2 qc / (-qb +- disc)`` also serves qa = 0."""
    disc = np.sqrt(np.maximum(qb * qb - 4.0 * qa * qc, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        return 2.0 * qc / ((-qb + disc) if decreasing else (-qb - disc))


def _citl_root(coef: np.ndarray, c, sign: float) -> np.ndarray:
    """The theta where ``log K+ = c`` (sign 1, decreasing in theta) or ``log K- = c`` (sign -1, increasing), s = 2:
    ``(C4/4) theta^2 - (sign C1/2 + C3/2) theta + (sign C0/2 + C2/4 - c) = 0``."""
    return _root(coef[..., 4] / 4.0, -(sign * coef[..., 1] + coef[..., 3]) / 2.0,
                 sign * coef[..., 0] / 2.0 + coef[..., 2] / 4.0 - c, sign > 0)


def _oe_root(coef: np.ndarray, c, sign: float) -> np.ndarray:
    """The same for O/E, s = max(1, theta): a quadratic in theta on [0, 1] (s = 1),
    ``C4 theta^2 - (sign C1 + 2 C3) theta + (sign C0 + C2 - c)``, and in v = 1/theta on [1, inf)
    (s = theta), ``C2 v^2 + (sign C0 - 2 C3) v + (C4 - sign C1 - c)``, where the monotone direction flips."""
    low = _root(coef[..., 4], -(sign * coef[..., 1] + 2.0 * coef[..., 3]), sign * coef[..., 0] + coef[..., 2] - c,
                sign > 0)
    v = _root(coef[..., 2], sign * coef[..., 0] - 2.0 * coef[..., 3], coef[..., 4] - sign * coef[..., 1] - c,
              sign < 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((low >= 0.0) & (low <= 1.0), low, 1.0 / v)


def cs_interval(coef: np.ndarray, alpha, kind: str, lo, hi) -> tuple[np.ndarray, np.ndarray]:
    """The confidence set ``{theta in [lo, hi]: log K+ < log(2/alpha) and log K- < log(2/alpha)}`` (an interval).

    ``K = (K+ + K-)/2 >= 1/alpha`` whenever either side reaches 2/alpha, so the set
    contains the hedged-capital set of Waudby-Smith and Ramdas.  log K+- are
    quadratics in theta (CITL, s = 2; O/E on [0, 1]) or in 1/theta (O/E on
    [1, inf), s = theta), and the endpoints are their roots on the monotone
    branch (:func:`_bisect` is the slow check in the tests).  Endpoints are
    rounded outwards.  Vectorised over the leading axes of ``coef`` (bins) with
    ``alpha``, ``lo``, ``hi`` broadcast.
    """
    coef = np.asarray(coef, dtype=np.float64)
    c = np.log(2.0 / np.asarray(alpha, dtype=np.float64))
    lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), coef.shape[:-1])
    hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), coef.shape[:-1])
    plus = lambda th: cs_log_capital(th, coef, kind)[0] - c
    minus = lambda th: c - cs_log_capital(th, coef, kind)[1]  # decreasing
    root = _citl_root if kind == "citl" else _oe_root
    low_in = np.nextafter(root(coef, c, 1.0), -np.inf)
    up_in = np.nextafter(root(coef, c, -1.0), np.inf)
    low = np.where(plus(lo) < 0, lo, np.where(plus(hi) >= 0, hi, np.clip(low_in, lo, hi)))
    up = np.where(minus(hi) >= 0, hi, np.where(minus(lo) < 0, lo, np.clip(up_in, lo, hi)))
    return low, up


def bin_bracket(n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Range of ``mu_b = E[y - p | bin b]`` for the B + 1 bins of [0, 1]: (-(b+1)/B, 1 - b/B], clipped to [-1, 1]."""
    b = np.arange(n_bins + 1, dtype=np.float64)
    return np.maximum(-(b + 1.0) / n_bins, -1.0), np.minimum(1.0 - b / n_bins, 1.0)


def ece_upper(counts: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> float:
    """Upper bound of the binned l2-ECE: ``sqrt(sum_b (n_b / n) max(lo_b^2, hi_b^2))`` (0 rows: NaN)."""
    counts = np.asarray(counts, dtype=np.float64)
    n = counts.sum()
    if n == 0:
        return float("nan")
    worst = np.maximum(np.square(lower), np.square(upper))
    return float(np.sqrt(np.sum(counts / n * worst)))


# ----------------------------------------------------------------------------- risk-adjusted CUSUM
def ra_scores(p: np.ndarray, y: np.ndarray, odds_ratio: float) -> np.ndarray:
    """Steiner et al.'s log-likelihood-ratio scores ``W = y log R - log(1 - p + R p)`` of an odds ratio R against 1."""
    p = np.asarray(p, dtype=np.float64)
    return np.asarray(y, dtype=np.float64) * np.log(odds_ratio) - np.log1p((odds_ratio - 1.0) * p)


def cusum_path(scores: np.ndarray, start: float = 0.0) -> np.ndarray:
    """``S_t = max(0, S_{t-1} + W_t)`` for every t, vectorised (Lindley's recursion unrolled).

    With C_t = W_1 + ... + W_t: ``S_t = max(S_0 + C_t, C_t - min_{1<=j<=t} C_j, 0)``
    (the best start j + 1 of the sum ending at t).  Works along the last axis.
    """
    c = np.cumsum(scores, axis=-1)
    return np.maximum(np.maximum(start + c, c - np.minimum.accumulate(c, axis=-1)), 0.0)


@dataclass(frozen=True, eq=False)
class BatchLaw:
    """In-control law of a batch score ``X = sum_i W_i``, on a lattice or normal.

    Lattice: ``P(X = delta * (start + k)) = pmf[k]``, k = 0, ..., N - 1; its CDF
    spreads each atom uniformly over ``delta * (start + k -+ 1/2)`` (adding
    ``delta^2 / 12`` to the variance), so it is continuous and piecewise linear.
    Normal (``pmf`` None): ``Phi((x - mean) / sd)``.  ``mean`` and ``sd`` are the
    exact moments of X (not those of the lattice law).
    """

    mean: float
    sd: float
    delta: float = 0.0
    start: int = 0
    pmf: np.ndarray | None = None

    def cdf(self, x) -> np.ndarray:
        """``P(X <= x)``, vectorised."""
        x = np.asarray(x, dtype=np.float64)
        if self.pmf is None:
            return special.ndtr((x - self.mean) / self.sd)
        knots = self.delta * (self.start - 0.5 + np.arange(self.pmf.size + 1))
        return np.interp(x, knots, np.concatenate([[0.0], np.cumsum(self.pmf)]))


#: Lattice steps per standard deviation of one row's score (the split of an atom between its two lattice
#: neighbours adds at most ``delta^2 / 4`` to a row's variance: a relative 1 / (4 * 64^2) = 6e-5).
RA_STEPS_PER_SD = 64
#: Largest FFT lattice; a batch law needing more is taken as normal (:func:`ra_batch_law`).
RA_MAX_GRID = 1 << 22
#: Mass allowed outside the lattice's window on each side (it would alias into the window).
RA_TAIL = 1e-15
#: States of the Markov chain of :func:`cusum_arl` for the final threshold (relative ARL error <= ~1e-3,
#: measured in tests/core/test_sequential.py and vignettes/ra_cusum_arl.txt).
RA_STATES = 1024


def ra_row_law(p_ref: np.ndarray, odds_ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """In-control law of one row's score when its prediction is drawn from ``p_ref``: 2n atoms.

    Values ``log R - log(1 - p_j + R p_j)`` (y = 1) with probability ``p_j / n`` and
    ``-log(1 - p_j + R p_j)`` (y = 0) with probability ``(1 - p_j) / n``.
    """
    p = np.asarray(p_ref, dtype=np.float64)
    base = -np.log1p((odds_ratio - 1.0) * p)
    return np.concatenate([base + np.log(odds_ratio), base]), np.concatenate([p, 1.0 - p]) / p.size


def _tail_widths(c: np.ndarray, w: np.ndarray, m: int, tail: float) -> np.ndarray:
    """Chernoff widths (below, above) of a sum of m iid rows with centred values ``c`` (probabilities ``w``):
    ``P(X - m mu <= -below) <= tail`` and ``P(X - m mu >= above) <= tail``.

    ``P(X - m mu >= t) <= exp(m K(l) - l t)`` for every l > 0, K the row's centred
    cumulant generating function, so ``t = min_l (m K(l) - log tail) / l`` (over a
    geometric grid of l; the lower side with -l), capped by the range of the sum.
    """
    span = max(float(np.max(np.abs(c))), 1e-300)
    lam = np.geomspace(1e-3, 1e3, 61) / span
    out = []
    for sign in (-1.0, 1.0):
        cgf = special.logsumexp(sign * lam[:, None] * c[None, :], b=w[None, :], axis=1)
        out.append(min(float(np.min((m * cgf - np.log(tail)) / lam)), m * float(np.max(sign * c))))
    return np.maximum(np.array(out), 0.0)


def _row_lattice(v: np.ndarray, w: np.ndarray, delta: float) -> tuple[int, np.ndarray]:
    """Each atom v split between ``delta floor(v / delta)`` and the next point in proportion to its distance
    (the mean is kept): the lattice law ``(first index, pmf)``."""
    u = v / delta
    f = np.floor(u)
    frac, f = u - f, f.astype(np.int64)
    first = int(f.min())
    return first, np.bincount(np.concatenate([f, f + 1]) - first, np.concatenate([w * (1.0 - frac), w * frac]))


def ra_batch_law(p_ref: np.ndarray, odds_ratio: float, m: int | None = None, steps_per_sd: int = RA_STEPS_PER_SD,
                 max_grid: int = RA_MAX_GRID) -> BatchLaw:
    """In-control law of the score of a batch of m rows (default ``len(p_ref)``) with predictions drawn from
    ``p_ref``: the m-fold convolution of the row law (:func:`ra_row_law`) by FFT.

    Each row atom is split between its two lattice neighbours (:func:`_row_lattice`,
    ``delta = sd(W) / steps_per_sd``; the mean is kept exactly and the variance
    grows by at most ``delta^2 / 4`` per row).  The characteristic function of the
    lattice row law on N points, raised to the power m and inverted, is the sum's
    law modulo N; the window of N points covers the sum's mean -+ its Chernoff
    widths (:func:`_tail_widths`, at most :data:`RA_TAIL` of the lattice law outside
    each side), so the aliased mass is below 2e-15.  When N would exceed
    ``max_grid`` the law is normal with the exact mean ``m E[W]`` and variance
    ``m Var[W]``; its CDF error is at most ``0.4748 E|W - E W|^3 / (Var[W]^{3/2}
    sqrt(m))`` (Berry-Esseen, Shevtsova 2011).  A constant score (every
    prediction 0 or 1) has sd 0 and the normal form.
    """
    v, w = ra_row_law(p_ref, odds_ratio)
    m = np.asarray(p_ref).size if m is None else int(m)
    mean = float(w @ v)
    sd = float(np.sqrt(w @ np.square(v - mean)))
    if sd <= 0.0:
        return BatchLaw(m * mean, 0.0)
    delta = sd / steps_per_sd
    first, row = _row_lattice(v, w, delta)
    k = first + np.arange(row.size)  # the lattice row law's points, in steps
    below, above = _tail_widths(k - mean / delta, row, m, RA_TAIL)
    lo, hi = int(np.floor(m * mean / delta - below)) - 1, int(np.ceil(m * mean / delta + above)) + 1
    n_grid = 1 << int(np.ceil(np.log2(max(hi - lo + 1, row.size))))
    if n_grid > max_grid:
        return BatchLaw(m * mean, float(np.sqrt(m) * sd))
    circular = np.bincount(k % n_grid, row, n_grid)
    total = np.fft.irfft(np.fft.rfft(circular) ** m, n_grid)[np.arange(lo, lo + n_grid) % n_grid]
    total = np.maximum(total, 0.0)
    return BatchLaw(m * mean, float(np.sqrt(m) * sd), float(delta), lo, total / total.sum())


def cusum_arl(cdf, h: float, n_states: int = RA_STATES) -> float:
    """In-control ARL of ``S_t = max(0, S_{t-1} + X_t)``, S_0 = 0, alarm at ``S_t >= h``: Brook and Evans's
    Markov chain.

    [0, h) is cut into M = ``n_states`` cells of width ``w = h / (M - 1/2)``, cell i
    holding S near ``i w`` (cell 0 is [0, w/2), with the atom at 0).  With F the
    CDF of the iid increment X, ``Q[i, 0] = F((1/2 - i) w)`` and ``Q[i, j] =
    F((j - i + 1/2) w) - F((j - i - 1/2) w)`` for j >= 1; the expected run lengths
    L from each cell solve ``(I - Q) L = 1`` and the ARL is ``L[0]``.  The error
    shrinks like 1 / M^2 for a smooth F.

    Parameters
    ----------
    cdf : callable
        Vectorised CDF of X.
    h : float
        Threshold (> 0).
    n_states : int
        M.
    """
    width = h / (n_states - 0.5)
    d = np.arange(-(n_states - 1), n_states)
    band = cdf((d + 0.5) * width) - cdf((d - 0.5) * width)
    i = np.arange(n_states)
    q = band[i[None, :] - i[:, None] + n_states - 1]
    q[:, 0] = cdf((0.5 - i) * width)
    return float(np.linalg.solve(np.eye(n_states) - q, np.ones(n_states))[0])


def cusum_threshold(cdf, arl: float, scale: float, n_states: int = RA_STATES) -> tuple[float, float]:
    """The threshold h with :func:`cusum_arl` ``= arl``, and the ARL at it.

    The ARL increases with h from ``1 / (1 - F(0))`` (h -> 0+) to infinity (a
    negative mean increment).  h is bracketed by doubling from ``scale`` (the
    increment's sd) and found by Brent's method with 256 states, then refined with
    ``n_states`` by secant steps on ``log ARL(h) - log arl`` (nearly linear in h),
    starting from the 256-state slope, to a relative ARL error of 1e-7; Brent's
    method on a bracket if they stall.  When even h -> 0+ gives an ARL >= ``arl``
    every positive h does: h is then the smallest positive float (the chart alarms
    when S_t > 0) and the ARL ``1 / P(X > 0)``.
    """
    tiny = np.nextafter(0.0, 1.0)
    above_zero = 1.0 - float(cdf(0.0))
    floor = 1.0 / above_zero if above_zero > 0.0 else np.inf  # h -> 0+: the first t with X_t > 0
    if floor >= arl:
        return float(tiny), float(floor)
    top = scale
    while cusum_arl(cdf, top, 256) < arl:  # doubling: a few passes
        top *= 2.0
    coarse = optimize.brentq(lambda h: cusum_arl(cdf, h, 256) - arl, top / 2.0 if top > scale else tiny, top,
                             xtol=1e-9 * top, rtol=1e-12)
    step = 1e-3 * coarse
    slope = (np.log(cusum_arl(cdf, coarse + step, 256)) - np.log(arl)) / step
    h, gap = coarse, np.log(cusum_arl(cdf, coarse, n_states) / arl)
    for _ in range(8):  # secant steps: two or three in practice
        if abs(gap) < 1e-7:
            return float(h), float(arl * np.exp(gap))
        new_h = max(h - gap / slope, h / 2.0)
        new_gap = np.log(cusum_arl(cdf, new_h, n_states) / arl)
        slope = (new_gap - gap) / (new_h - h) if new_h != h and new_gap != gap else slope
        h, gap = new_h, new_gap
    fine = lambda x: cusum_arl(cdf, x, n_states) - arl
    lo, hi = h, h
    while fine(lo) > 0:
        lo /= 2.0
    while fine(hi) < 0:
        hi *= 2.0
    h = optimize.brentq(fine, lo, hi, xtol=1e-12 * hi, rtol=1e-12)
    return float(h), cusum_arl(cdf, h, n_states)


def ra_threshold(p_ref: np.ndarray, odds_ratio: float, arl: float) -> tuple[float, float]:
    """Threshold h of the one-sided risk-adjusted batch CUSUM with in-control ARL ``arl``, and the ARL at h.

    The batch score's law (:func:`ra_batch_law`: batches of ``len(p_ref)`` rows
    whose predictions are drawn from ``p_ref``, labels y ~ Bernoulli(p)) and the
    Markov chain's ARL (:func:`cusum_arl`, :func:`cusum_threshold`): deterministic.
    A constant score (every prediction 0 or 1) never moves the CUSUM: (inf, inf).
    """
    law = ra_batch_law(p_ref, odds_ratio)
    if law.sd == 0.0:
        return float("inf"), float("inf")
    return cusum_threshold(law.cdf, arl, law.sd)
