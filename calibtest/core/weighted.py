r"""The weighted debiased estimator of ECE^2, its influence-function variance and its null variance.

Rows i = 1..n carry non-negative case weights w_i (survey or inverse-probability
weights; prevalence weights are a special case).  The weights describe a
population P_w with dP_w proportional to w dP, so that its binned squared
calibration error is

.. math::

    \theta_w = \sum_b P_w(b) \lVert \mu_b \rVert^2, \qquad
    P_w(b) = \frac{E[w 1_b]}{E[w]}, \qquad \mu_b = \frac{E[w U 1_b]}{E[w 1_b]}.

**Estimator.**  Per bin, with W_b = sum w_i, S_b = sum w_i U_i and
P_b = sum w_i^2 (sums over the rows of bin b), and W = sum_b W_b,

.. math::

    T_w = \sum_b \frac{W_b}{W}
          \frac{\sum_{i \ne j \in b} w_i w_j U_i^\top U_j}{\sum_{i \ne j \in b} w_i w_j}
        = \sum_b \frac{W_b}{W} \frac{\lVert S_b\rVert^2 - \sum_{i \in b} w_i^2 \lVert U_i\rVert^2}
                                     {W_b^2 - P_b}.

The numerator and the denominator are unbiased pair sums of (E[w U 1_b])^2
and (E[w 1_b])^2, so the ratio estimates ||mu_b||^2 without the plug-in's
bias; given the weights (weights fixed by the design, U independent across
rows with mean mu_b) the ratio is exactly unbiased for ||mu_b||^2.  Bins
with W_b^2 = P_b (a single row with positive weight) hold no pair and are
left out, as in the unweighted T.  With unit weights W_b = c_b, P_b = c_b
and T_w = (1/n) sum_b (||S_b||^2 - Q_b) / (c_b - 1) = T (the paper's eq. (6)).

**Outcome-dependent weights (prevalence weights).**  When the weights depend
on the outcome (events pi / pi_hat, non-events (1 - pi) / (1 - pi_hat)), the
U_i of a bin are no longer independent of its weights, and the ratio T_w is
biased: in a bin with few rows of the up-weighted class the denominator
W_b^2 - P_b is small exactly when those rows are missing, and T_w then
overstates ||mu_b||^2, by more than a standard error at 500 + 500 rows.  The
estimate used there is the delete-one jackknife (Quenouille [4]_)

.. math::

    T_J = n T_w - \frac{n - 1}{n} \sum_i T_w^{(-i)},

which removes the O(1/n) term of the ratio's bias; each T_w^{(-i)} changes
only its row's bin sums and W, so T_J costs O(n d) from per-bin sums
(:func:`jackknife_statistic`).  With unit weights each bin ratio is a
U-statistic, whose leave-one-out average is itself, and T_J = T exactly.
Its standard error is the jackknife one,
se_J^2 = (n - 1)/n sum_i (T_w^{(-i)} - mean)^2 (the influence-function se
misses the ratio noise: measured up to 1.7 times too small).  Where bins hold
O(1) rows of the up-weighted class T_J keeps a bias of 7-8% of the binned
ECE^2 at 500 + 500 rows; when every row of a class has one weight (prevalence
weights without varying case weights) the estimate is the iterated jackknife
T_JJ = n T_J - (n - 1) mean_i T_J^{(-i)}, in closed form in O(n)
(:func:`second_order_jackknife`), with the jackknife se of T_J,
(n - 1)/n sum_i (T_J^{(-i)} - mean)^2 (``vignettes/prevalence_second_order.md``).

**Influence function.**  Writing theta_w = sum_b ||A_b||^2 / (B_b C) with
A_b = E[w U 1_b], B_b = E[w 1_b], C = E[w], the influence value of row i
(in bin b) is

.. math::

    \mathrm{IF}_i = \frac{w_i}{C}\,\bigl(2 \mu_b^\top U_i - \lVert\mu_b\rVert^2 - \theta_w\bigr),

and sqrt(n) (T_w - theta_w) -> N(0, sigma_{1,w}^2) with
sigma_{1,w}^2 = E[IF^2] away from calibration.  The plug-in uses
mu_b = S_b / W_b, C = W / n and the weighted plug-in estimate
sum_b (W_b / W) ||mu_b||^2 for theta_w (then the IF_i average to exactly 0).
With unit weights IF_i = psi_i - mean(psi) and sigma_{1,w}^2 is the paper's
sigma1^2 (eq. (8)).

**Calibrated regime.**  When the population the weights describe is
calibrated (E[w U 1_b] = 0 in every bin), the numerator of each bin is a
degenerate U-statistic and, to leading order,

.. math::

    \operatorname{Var}_0(T_w) = V_0 = 2 \sum_b \Bigl(\frac{W_b}{W D_b}\Bigr)^2
        \sum_{i \ne j \in b} E\bigl[(w_i w_j U_i^\top U_j)^2\bigr],
    \qquad D_b = W_b^2 - P_b,

estimated without a model by the products of distinct rows themselves
(each (w_i w_j U_i.U_j)^2 is unbiased for its expectation).  With unit
weights V_0 is the second-order variance (2/n^2) sum_b sum_{i != j}
(U_i.U_j)^2 / (c_b - 1)^2 of ``calibtest.core.difference_variance``, whose
limit with small bins is the paper's sigma0^2 / (n^2 w) (eq. (12)).  In the
small-bin limit, with omega(z) = E[w | z] and m_2(z) = E[w^2 U U^T | z],

.. math::

    V_0 \approx \frac{2}{W^2 w} \int \frac{\operatorname{tr}(m_2(z)^2)}{\omega(z)^2}\,dz,

which for unit weights and a calibrated model is 2 int tr(Sigma(z)^2) dz /
(n^2 w) = sigma0^2 / (n^2 w).  Because the integrand depends on the law of
the weights given z, the weighted test uses the data-based V_0 (there is no
weight-free constant).

**Numerics.**  Every quantity here is invariant to a common rescaling of
the weights; they are rescaled exactly, by a power of two, before any sum
(:func:`normalised_weights`), so that weights of 1e-100 or 1e100 give the
result of the same weights near 1, and equal weights are unit weights (T_w
= T).  In a bin where one weight w_a is far above the rest, W_b^2 - P_b and
||S_b||^2 - Q_b are differences of numbers of size w_a^2 whose value is of
size w_a times the rest: at a ratio of 10^12 they keep about 4 digits, and
beyond about 2 * 10^12 they round to 0.  A bin whose pair sum is below
W_b^2 / 128 is therefore computed from its top row and the sums of the
other rows (:func:`_top_row_form`), where no large numbers cancel; the
jackknife's deletions likewise.

References
----------
.. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
       l2 Expected Calibration Error", arXiv:2408.08998, 2024, eqs. (6), (8), (12).
.. [2] Kish, "Survey Sampling", Wiley, 1965 (effective sample size).
.. [3] Saerens, Latinne and Decaestecker, "Adjusting the outputs of a
       classifier to new a priori probabilities", Neural Computation 14 (2002).
.. [4] Quenouille, "Notes on bias in estimation", Biometrika 43 (1956);
       Efron and Stein, "The jackknife estimate of variance", Annals of
       Statistics 9 (1981).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as _sps

from calibtest.core.binstats import column_sums
from calibtest.core.intervals import AdjustedInterval, adjusted_interval

__all__ = ["NullLabels", "WeightedStatistics", "weighted_statistics", "weighted_influence", "weighted_null_variance",
           "weighted_null_draws", "prevalence_event_prob", "normalised_weights", "sparse_bins",
           "prevalence_weights", "kish_n_eff", "jackknife_statistic", "expected_sparse_weight_share",
           "null_studentized_multipliers", "studentized_adjusted_interval", "stratified_pair_terms",
           "second_order_jackknife", "SecondOrderJackknife", "class_weights"]


def normalised_weights(*weights: np.ndarray) -> tuple[np.ndarray, ...]:
    """Weights rescaled by one common factor so that the largest is in [0.5, 1); equal weights become 1.

    Every quantity of this module is invariant to a common rescaling of the
    weights (T_w, sigma_{1,w}^2, V_0 and n_eff are ratios of sums of equal
    degree in w), but their sums of w^2 and w^4 underflow for weights of
    1e-100 and overflow for 1e100.  The factor is the power of two 2^-e with
    2^(e-1) <= max w < 2^e, so that the rescaling is exact (every sum,
    product and ratio is the unscaled one times a power of two, bit for bit)
    unless a weight is below 2^-1022 times the largest.  When all positive
    weights are equal (a rescaling of unit weights, c * 1) they become
    exactly 1, so that the result is bit for bit that of unit weights, where
    T_w = T.

    Parameters
    ----------
    *weights : ndarray
        Non-negative finite arrays, not all zero (e.g. the weights of events
        and of non-events), rescaled by the same factor.

    Returns
    -------
    tuple of ndarray
        The rescaled arrays, as float64.
    """
    arrays = [np.asarray(w, dtype=np.float64) for w in weights]
    top = max(float(a.max(initial=0.0)) for a in arrays)
    if not top > 0.0:
        return tuple(arrays)
    low = min(float(a[a > 0].min(initial=top)) for a in arrays)
    if low == top:
        return tuple((a > 0).astype(np.float64) for a in arrays)
    exponent = math.frexp(top)[1]
    return tuple(np.ldexp(a, -exponent) for a in arrays)


def kish_n_eff(w: np.ndarray) -> float:
    """Kish's effective sample size (sum w)^2 / sum w^2 (of the rescaled weights, so at any scale)."""
    (w,) = normalised_weights(w)
    return float(w.sum() ** 2 / np.sum(w * w))


def sparse_bins(inverse: np.ndarray, w: np.ndarray, m: int, n_eff_min: float) -> np.ndarray:
    """Bins whose Kish effective size (sum w)^2 / sum w^2 is below ``n_eff_min`` (empty bins: False).

    Computed on the rescaled weights (:func:`normalised_weights`), so that
    weights of any scale give the same bins (sum w^2 of weights of 1e200
    would overflow).
    """
    (w,) = normalised_weights(w)
    W_b = np.bincount(inverse, weights=w, minlength=m)
    P_b = np.bincount(inverse, weights=w * w, minlength=m)
    return W_b * W_b < n_eff_min * P_b


def expected_sparse_weight_share(inverse: np.ndarray, m: int, weight_event: np.ndarray,
                                 weight_nonevent: np.ndarray, event_prob: np.ndarray, n_eff_min: float) -> float:
    """Share of the weight, expected under H0, in bins whose expected effective size is below ``n_eff_min``.

    Row i has weight ``weight_event[i]`` with probability ``event_prob[i]``
    and ``weight_nonevent[i]`` otherwise (the law of the Monte Carlo null,
    :func:`weighted_null_draws`).  Bin b has the expected weight
    E W_b = sum_i (a_i q_i + b_i (1 - q_i)) and the expected sum of squares
    E P_b = sum_i (a_i^2 q_i + b_i^2 (1 - q_i)); it counts as sparse when
    (E W_b)^2 < n_eff_min E P_b (Kish's effective size of the expected
    sums).  The share depends on the predictions and the weights' two
    values only, not on the outcomes, so a B chosen from it keeps the Monte
    Carlo null given the predictions exact.

    Returns
    -------
    float
        sum of E W_b over the sparse bins / sum of E W_b.
    """
    a, b = normalised_weights(weight_event, weight_nonevent)
    q = np.asarray(event_prob, dtype=np.float64)
    ew = np.bincount(inverse, weights=a * q + b * (1.0 - q), minlength=m)
    ew2 = np.bincount(inverse, weights=a * a * q + b * b * (1.0 - q), minlength=m)
    sparse = ew * ew < n_eff_min * ew2
    total = float(ew.sum())
    return float(ew[sparse].sum() / total) if total > 0 else 0.0


def prevalence_weights(events: np.ndarray, prevalence: float, base=None, pi_hat: float | None = None
                       ) -> tuple[np.ndarray, float]:
    """Weights that move the sample's event rate to ``prevalence``.

    w_i = pi / pi_hat for events and (1 - pi) / (1 - pi_hat) for non-events,
    pi_hat the (``base``-weighted) sample prevalence; the weighted event rate
    is then pi and the weights average to 1 (Saerens et al. 2002 [3]_).

    Parameters
    ----------
    events : ndarray of bool, shape (n,)
    prevalence : float
        pi in (0, 1) (validated by the caller).
    base : ndarray, shape (n,), optional
        Case weights the prevalence weights multiply.
    pi_hat : float, optional
        The sample prevalence to use (default: that of these rows).  A subgroup
        of an enriched sample uses the whole sample's, since the sampling
        fractions of events and non-events are those of the whole design.

    Returns
    -------
    weights, pi_hat : ndarray, float
    """
    events = np.asarray(events, dtype=bool)
    base = np.ones(events.shape[0]) if base is None else np.asarray(base, dtype=np.float64)
    if pi_hat is None:
        (scaled,) = normalised_weights(base)  # the same ratio at any scale of the case weights
        pi_hat = float(np.sum(scaled * events) / np.sum(scaled))
    if not 0.0 < pi_hat < 1.0:
        raise ValueError(f"prevalence= needs both events and non-events in the data (sample prevalence "
                         f"{pi_hat:g})")
    factor = np.where(events, prevalence / pi_hat, (1.0 - prevalence) / (1.0 - pi_hat))
    return base * factor, pi_hat


@dataclass(frozen=True, eq=False)
class WeightedStatistics:
    """The weighted estimator and its variances for one set of weighted rows (see the module docstring).

    Attributes
    ----------
    estimate : float
        T_w.
    plugin : float
        sum_b (W_b / W) ||mu_b||^2, the weighted plug-in estimate.
    sigma1_sq : float
        mean of IF_i^2 (the miscalibrated-regime variance of sqrt(n) T_w).
    null_variance : float
        V_0, the calibrated-regime variance of T_w.
    null_variance_plugin_weights : float
        V_0 with D_b replaced by W_b^2 (the noise the estimated bin means add
        to the plug-in sigma1^2 / n is about twice this).
    contributions : ndarray, shape (m,)
        Each bin's term of T_w (0 for bins without a weighted pair).
    weight_sum : ndarray, shape (m,)
        W_b.
    n_eff : float
        Kish's effective sample size of all rows.
    ratio_estimate : float
        T_w before the jackknife correction (equal to ``estimate`` when
        ``jackknife=False``).
    jackknife_variance : float or None
        The delete-one jackknife variance of ``estimate`` (None when
        ``jackknife=False``).
    """

    estimate: float
    plugin: float
    sigma1_sq: float
    null_variance: float
    null_variance_plugin_weights: float
    contributions: np.ndarray
    weight_sum: np.ndarray
    n_eff: float
    ratio_estimate: float = float("nan")
    jackknife_variance: float | None = None


def _bin_parts(inverse: np.ndarray, u: np.ndarray, w: np.ndarray, m: int):
    W_b = np.bincount(inverse, weights=w, minlength=m)
    P_b = np.bincount(inverse, weights=w * w, minlength=m)
    S_b = column_sums(inverse, u * w[:, None], m)
    Q_b = np.bincount(inverse, weights=w * w * np.einsum("ij,ij->i", u, u), minlength=m)
    return W_b, P_b, S_b, Q_b


def _pair_factor(W_b: np.ndarray, D_b: np.ndarray, W: float) -> np.ndarray:
    """W_b / (W D_b) for bins with a weighted pair (D_b > 0), else 0."""
    out = np.zeros_like(W_b)
    keep = D_b > 1e-12 * np.maximum(W_b * W_b, np.finfo(float).tiny)
    out[keep] = W_b[keep] / (W * D_b[keep])
    return out


def _keep(D: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Bins (or leave-one-out bins) that hold a weighted pair: D = W^2 - sum w^2 > 0 up to rounding."""
    return D > 1e-12 * np.maximum(W * W, np.finfo(float).tiny)


#: A bin whose pair sum D_b = W_b^2 - P_b is below W_b^2 / TOP_ROW_SHARE (one weight above about
#: TOP_ROW_SHARE / 2 times the rest of its bin) is computed in the top-row form (:func:`_top_row_form`).
TOP_ROW_SHARE = 128.0


def _dominated_bins(W_b: np.ndarray, P_b: np.ndarray, inverse: np.ndarray, m: int) -> np.ndarray:
    """Bins of two or more rows whose pair sum W_b^2 - P_b is below W_b^2 / TOP_ROW_SHARE."""
    return (W_b * W_b - P_b < W_b * W_b / TOP_ROW_SHARE) & (np.bincount(inverse, minlength=m) > 1)


@dataclass(frozen=True)
class _TopRowForm:
    """Bin ratios of the bins dominated by one row, computed without cancellation (see :func:`_top_row_form`)."""

    bins: np.ndarray        # bins (cells) with a weighted pair
    ratio: np.ndarray       # R_b = sum_{i != j} w_i w_j U_i.U_j / sum_{i != j} w_i w_j
    null_ratio: np.ndarray  # sum_{i != j} (w_i w_j U_i.U_j)^2 / D_b^2
    plain_ratio: np.ndarray  # sum_{i != j} (w_i w_j U_i.U_j)^2 / W_b^4


def _first_max(cell: np.ndarray, w: np.ndarray, size: int) -> np.ndarray:
    """Index (into ``cell``) of one row of largest weight in each cell that has rows (the first such row)."""
    wmax = np.full(size, -np.inf)
    np.maximum.at(wmax, cell, w)
    ties = np.flatnonzero(w == wmax[cell])
    _, first = np.unique(cell[ties], return_index=True)
    return ties[first]


def _top_row_form(cell: np.ndarray, u: np.ndarray, w: np.ndarray, size: int, candidates: np.ndarray
                  ) -> _TopRowForm:
    r"""Pair ratios of the ``candidates`` cells in a form without cancellation when one row dominates.

    In a bin where one weight w_a dominates, W_b^2 - P_b and ||S_b||^2 - Q_b
    subtract two numbers of size w_a^2 whose difference is of size w_a times
    the rest of the bin: at a ratio of 10^12 about 12 of the 16 digits are
    lost, and beyond about 2 * 10^12 the difference rounds to 0 and the bin
    is dropped.  Splitting the pairs into those with the top row a and those
    among the others, with O = sum_{j != a} w_j, p_j = w_j / O and s = O / w_a,

    .. math::

        R_b = \frac{2 U_a^\top S_p + s (\lVert S_p \rVert^2 - Q_p)}{2 + s (1 - P_p)},
        \qquad
        \frac{\sum_{i \ne j} (w_i w_j U_i^\top U_j)^2}{D_b^2}
          = \frac{2 U_a^\top M_p U_a + s^2 (\lVert M_p \rVert_F^2 - F_p)}{(2 + s (1 - P_p))^2},

    with S_p = sum_j p_j U_j, Q_p = sum_j p_j^2 ||U_j||^2, P_p = sum_j p_j^2,
    M_p = sum_j p_j^2 U_j U_j^T and F_p = sum_j p_j^4 ||U_j||^4 over the
    other rows; the pairs over W_b^4 are s^2 times the same numerator over
    (1 + s)^4.  Every difference left is multiplied by s, so the rounding
    error is a few ulps times the number of rows at any ratio of weights.
    Cells without a second row of positive weight hold no pair and are not
    returned.
    """
    rows = np.flatnonzero(candidates[cell] & (w > 0))
    empty = np.empty(0)
    if rows.size == 0:
        return _TopRowForm(np.empty(0, dtype=np.intp), empty, empty, empty)
    c, wr, ur = cell[rows], w[rows], u[rows]
    d = ur.shape[1]
    top = _first_max(c, wr, size)
    w_top = np.zeros(size)
    w_top[c[top]] = wr[top]
    u_top = np.zeros((size, d))
    u_top[c[top]] = ur[top]
    other = np.ones(rows.size, dtype=bool)
    other[top] = False
    c, wr, ur = c[other], wr[other], ur[other]
    rest = np.bincount(c, weights=wr, minlength=size)
    bins = np.flatnonzero(rest > 0)
    p = wr / rest[c]
    p2 = p * p
    uu = np.einsum("ij,ij->i", ur, ur)
    S = column_sums(c, ur * p[:, None], size)[bins]
    P = np.bincount(c, weights=p2, minlength=size)[bins]
    Q = np.bincount(c, weights=p2 * uu, minlength=size)[bins]
    M = column_sums(c, (ur[:, :, None] * ur[:, None, :]).reshape(-1, d * d) * p2[:, None], size)[bins]
    F = np.bincount(c, weights=(p2 * uu) ** 2, minlength=size)[bins]
    ua = u_top[bins]
    sc = rest[bins] / w_top[bins]
    den = 2.0 + sc * (1.0 - P)
    ratio = (2.0 * np.einsum("bi,bi->b", ua, S) + sc * (np.einsum("bi,bi->b", S, S) - Q)) / den
    pairs = (2.0 * np.einsum("bi,bij,bj->b", ua, M.reshape(-1, d, d), ua)
             + sc * sc * (np.einsum("bj,bj->b", M, M) - F))
    return _TopRowForm(bins, ratio, pairs / (den * den), sc * sc * pairs / (1.0 + sc) ** 4)


def _leave_one_out_top_rows(cell: np.ndarray, u: np.ndarray, w: np.ndarray, size: int, need: np.ndarray):
    """The weight and the pair ratio of each ``need`` row's bin without that row, in the top-row form.

    Per bin the rows of positive weight are split into the top row a, the
    next one a2 and the rest.  The bin without row i has the top row a2 and
    the others "the rest" when i = a; the top row a and the others "the
    rest" when i = a2; and otherwise the top row a and the others
    {a2} + rest - {i}, whose sums are a2's term plus (the rest's sum minus
    row i's term): row i weighs at most w_a2, so no sum loses more digits
    than the number of rows.  The ratio is then that of :func:`_top_row_form`.

    Returns
    -------
    rows : ndarray of intp
        The indices of the ``need`` rows.
    pair : ndarray of bool
        Whether the bin without row i still holds a weighted pair.
    left, ratio : ndarray
        W_b - w_i (the weight left in the bin, summed without cancellation)
        and R_b^(-i) (0 where no pair is left: the caller keeps its
        convention there).
    """
    rows = np.flatnonzero(need)
    in_bins = np.zeros(size, dtype=bool)
    in_bins[cell[rows]] = True
    members = np.flatnonzero(in_bins[cell] & (w > 0))
    c, wr, ur = cell[members], w[members], u[members]
    d = ur.shape[1]
    first = _first_max(c, wr, size)
    second_pool = np.ones(members.size, dtype=bool)
    second_pool[first] = False
    pool = np.flatnonzero(second_pool)
    second = pool[_first_max(c[pool], wr[pool], size)] if pool.size else np.empty(0, dtype=np.intp)
    role = np.zeros(cell.shape[0], dtype=np.int8)  # 1: top row, 2: second row, 0: the rest
    role[members[first]], role[members[second]] = 1, 2
    w1, w2 = np.zeros(size), np.zeros(size)
    u1, u2 = np.zeros((size, d)), np.zeros((size, d))
    w1[c[first]], u1[c[first]] = wr[first], ur[first]
    w2[c[second]], u2[c[second]] = wr[second], ur[second]
    rest_rows = np.ones(members.size, dtype=bool)
    rest_rows[first] = rest_rows[second] = False
    cr, wrr, urr = c[rest_rows], wr[rest_rows], ur[rest_rows]
    O2 = np.bincount(cr, weights=wrr, minlength=size)
    p = wrr / O2[cr]  # shares of the rest's weight: their squares neither underflow nor overflow
    S2 = column_sums(cr, urr * p[:, None], size)
    Q2 = np.bincount(cr, weights=p * p * np.einsum("ij,ij->i", urr, urr), minlength=size)
    P2 = np.bincount(cr, weights=p * p, minlength=size)
    b, wi, ui, ri = cell[rows], w[rows], u[rows], role[rows]
    is_top, is_rest = ri == 1, ri == 0
    w_top = np.where(is_top, w2[b], w1[b])
    u_top = np.where(is_top[:, None], u2[b], u1[b])
    # the others: the rest, plus the second row (and minus row i) when row i is neither top nor second
    wi, ui = np.where(is_rest, wi, 0.0), np.where(is_rest[:, None], ui, 0.0)
    add_w, add_u = np.where(is_rest, w2[b], 0.0), np.where(is_rest[:, None], u2[b], 0.0)
    others = add_w + (O2[b] - wi)
    ok = (others > 0) & (w_top > 0)
    o = np.where(ok, others, 1.0)
    qa, qr, qi = add_w / o, O2[b] / o, wi / o  # shares of the others' weight
    Sp = qa[:, None] * add_u + (qr[:, None] * S2[b] - qi[:, None] * ui)
    Qp = qa**2 * np.einsum("ij,ij->i", add_u, add_u) + (qr**2 * Q2[b] - qi**2 * np.einsum("ij,ij->i", ui, ui))
    Pp = qa**2 + (qr**2 * P2[b] - qi**2)
    sc = np.where(ok, others / np.where(w_top > 0, w_top, 1.0), 0.0)
    ratio = (2.0 * np.einsum("ij,ij->i", u_top, Sp) + sc * (np.einsum("ij,ij->i", Sp, Sp) - Qp)) / \
        (2.0 + sc * (1.0 - Pp))
    return rows, ok, w_top + others, np.where(ok, ratio, 0.0)


def stratified_pair_terms(cell: np.ndarray, w: np.ndarray, u: np.ndarray, stratum: np.ndarray, m: int
                          ) -> tuple[np.ndarray, np.ndarray]:
    r"""The terms that make T_w's pair sums unbiased when the strata's row counts are fixed (case-control).

    Under case-control sampling the n_h rows of stratum h (cases, controls)
    are i.i.d. within the stratum and the counts n_h are fixed by design, not
    multinomial.  Write v_i = w_i U_i 1{i in b} and m_h = E[v | stratum h]
    (a vector).  The pair sum of T_w's numerator then has the expectation

    .. math::

        E\Bigl[\sum_{i \ne j} v_i^\top v_j\Bigr]
          = \sum_h n_h (n_h - 1) \lVert m_h\rVert^2 + \sum_{h \ne h'} n_h n_{h'} m_h^\top m_{h'}
          = \Bigl\lVert \sum_h n_h m_h \Bigr\rVert^2 - \sum_h n_h \lVert m_h \rVert^2 ,

    i.e. ||S_b||^2 - Q_b removes the i.i.d. variance sum_i ||v_i||^2 where the
    stratified one is sum_h n_h Var_h(v) = sum_h n_h (E_h||v||^2 - ||m_h||^2):
    it misses sum_h n_h ||m_h||^2.  Since E[||S_hb||^2 - Q_hb] =
    n_h (n_h - 1) ||m_h||^2 (S_hb, Q_hb: the sums of v_i and ||v_i||^2 over
    the stratum's rows), the unbiased numerator is

    .. math::

        \lVert S_b\rVert^2 - Q_b + \sum_h \frac{\lVert S_{hb}\rVert^2 - Q_{hb}}{n_h - 1},
        \qquad E[\,\cdot\,] = \lVert E S_b \rVert^2 ,

    and likewise the denominator W_b^2 - P_b + sum_h (W_hb^2 - P_hb) / (n_h - 1)
    (v_i replaced by w_i 1{i in b}), unbiased for (E W_b)^2.  Equivalently the
    within-stratum pairs are counted n_h / (n_h - 1) times.  The extra terms
    are O(1/n) of the pair sums; strata of one row add nothing.

    Parameters
    ----------
    cell : ndarray of intp, shape (n,)
        Bin of each row.
    w : ndarray, shape (n,)
        Weights (e.g. the prevalence weights; within a stratum they may vary
        with case weights, i.i.d. with the rows).
    u : ndarray, shape (n, d)
        U = Y - Z of each row.
    stratum : ndarray of bool, shape (n,)
        The stratum of each row (an event or not).
    m : int
        Number of bins.

    Returns
    -------
    numerator, denominator : ndarray, shape (m,)
        The terms added to ||S_b||^2 - Q_b and to W_b^2 - P_b.

    Notes
    -----
    Measured in ``vignettes/prevalence_bias.md``: on three case-control
    designs the term moves the mean of the jackknife estimate by about 1% of
    the binned ECE^2 (about one seventh of the overspread design's bias), so
    the package's estimate does not use it; the rest of the bias is the ratio
    in bins with O(1) rows of the up-weighted class.
    """
    num, den = np.zeros(m), np.zeros(m)
    for rows in (np.flatnonzero(stratum), np.flatnonzero(~stratum)):
        if rows.size < 2:
            continue
        c, wr, ur = cell[rows], w[rows], u[rows]
        W_h, P_h, S_h, Q_h = _bin_parts(c, ur, wr, m)
        num += (np.einsum("bi,bi->b", S_h, S_h) - Q_h) / (rows.size - 1)
        den += (W_h * W_h - P_h) / (rows.size - 1)
    return num, den


def _class_pair_sum(v: np.ndarray, s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """sum_{i != j} w_i w_j U_i U_j of cells from per-class sums: sum_k v_k^2 (s_k^2 - q_k) + 2 v_0 v_1 s_0 s_1."""
    return v[0] ** 2 * (s[0] * s[0] - q[0]) + v[1] ** 2 * (s[1] * s[1] - q[1]) + 2.0 * v[0] * v[1] * s[0] * s[1]


def _class_weight_pairs(v: np.ndarray, N: np.ndarray) -> np.ndarray:
    """W_b^2 - P_b = sum_k v_k^2 N_k (N_k - 1) + 2 v_0 v_1 N_0 N_1 from the class counts (no cancellation)."""
    return v[0] ** 2 * N[0] * (N[0] - 1.0) + v[1] ** 2 * N[1] * (N[1] - 1.0) + 2.0 * v[0] * v[1] * N[0] * N[1]


def _pair_deletion_sums(v: np.ndarray, N: np.ndarray, s: np.ndarray, q: np.ndarray, k: int, l: int):
    """Over the pairs {i, j} of a cell with i of class k and j of class l: their number and sum of E_b^(-ij).

    Each pair {a, b} of the rows left is counted once per deletion that keeps it.  For k = l = c (o the
    other class): sum E^(-ij) = v_c^2 (N_c - 2)(N_c - 3)/2 (s_c^2 - q_c) + C(N_c, 2) v_o^2 (s_o^2 - q_o)
    + v_0 v_1 (N_c - 1)(N_c - 2) s_c s_o; for k != l: v_0^2 N_1 (N_0 - 2)(s_0^2 - q_0)
    + v_1^2 N_0 (N_1 - 2)(s_1^2 - q_1) + 2 v_0 v_1 (N_0 - 1)(N_1 - 1) s_0 s_1.
    """
    if k != l:
        pairs = N[0] * N[1]
        total = (v[0] ** 2 * N[1] * (N[0] - 2.0) * (s[0] * s[0] - q[0])
                 + v[1] ** 2 * N[0] * (N[1] - 2.0) * (s[1] * s[1] - q[1])
                 + 2.0 * v[0] * v[1] * (N[0] - 1.0) * (N[1] - 1.0) * s[0] * s[1])
        return pairs, total
    c, o = k, 1 - k
    pairs = N[c] * (N[c] - 1.0) / 2.0
    total = (v[c] ** 2 * (N[c] - 2.0) * (N[c] - 3.0) / 2.0 * (s[c] * s[c] - q[c])
             + pairs * v[o] ** 2 * (s[o] * s[o] - q[o]) + v[0] * v[1] * (N[c] - 1.0) * (N[c] - 2.0) * s[c] * s[o])
    return pairs, total


@dataclass(frozen=True, eq=False)
class SecondOrderJackknife:
    """The deletion averages of T_w for rows whose weight is one value per class (:func:`second_order_jackknife`).

    Attributes
    ----------
    ratio : ndarray, shape (r,)
        T_w of each set.
    first, second : ndarray, shape (r,)
        d_1 = mean_i T^(-i) - T_w and h = mean over pairs of T^(-ij) - T^(-i) - T^(-j) + T_w.
    estimate : ndarray, shape (r,)
        The iterated jackknife T_JJ = T_w - 3 (n - 1) d_1 + (n - 1)(n - 2) h.
    jackknife : ndarray, shape (r,)
        T_J = T_w - (n - 1) d_1.
    contributions : ndarray, shape (r * m,)
        Each bin's share of ``estimate``.
    variance : ndarray, shape (r,)
        The delete-one jackknife variance (n - 1)/n sum_i (T^(-i) - mean)^2 of T_w.
    jackknife_variance : ndarray, shape (r,)
        The jackknife variance (n - 1)/n sum_i (T_J^(-i) - mean)^2 of T_J (the variance of ``estimate``).
    loo_jackknife_mean : ndarray, shape (r,)
        mean_i T_J^(-i).
    """

    ratio: np.ndarray
    first: np.ndarray
    second: np.ndarray
    estimate: np.ndarray
    jackknife: np.ndarray
    contributions: np.ndarray
    variance: np.ndarray
    jackknife_variance: np.ndarray
    loo_jackknife_mean: np.ndarray


def second_order_jackknife(cell: np.ndarray, event: np.ndarray, u: np.ndarray, v: np.ndarray, m: int,
                           r: int = 1) -> SecondOrderJackknife:
    r"""The iterated jackknife T_JJ of T_w in O(n) when every row of a class has one weight (prevalence weights).

    **Definition.**  For a set S of rows deleted, with X_b = W_b R_b
    (R_b = 0 in a bin of fewer than two rows),

    .. math::

        G(S) = \frac{A - \sum_{b \ni S} X_b + \sum_{b \ni S} W_b^{(-S)} \tilde R_b^{(-S)}}{W - \sum_{i \in S} w_i},

    where the sums run over the bins S touches and \tilde R_b^{(-S)} is the
    ratio of bin b without the rows S, or R_b when fewer than two rows are left
    (the convention of :func:`jackknife_statistic`, whose T_w^{(-i)} is
    G({i})).  With T = G(empty), d_1 = mean_i G({i}) - T and
    h = mean_{i<j} [G({i,j}) - G({i}) - G({j}) + T], the generalized
    jackknife of Schucany, Gray and Owen [1]_ that removes the a/n and
    b/n^2 terms of a bias a/n + b/n^2 + ... (the quadratic in 1/n through
    E T, E G({i}), E G({i,j}) at n, n - 1, n - 2 rows, extrapolated to 1/n = 0) is

    .. math::

        T_2 = \frac{n^2}{2} T - (n-1)^2 \bar G_1 + \frac{(n-2)^2}{2} \bar G_2
            = T - (2n - 3)\, d_1 + \frac{(n-2)^2}{2}\, h ,

    with \bar G_1 = T + d_1 and \bar G_2 = mean_{i<j} G({i,j}) = T + 2 d_1 + h;
    the first-order jackknife is T_J = T - (n - 1) d_1.  The estimate
    returned is the jackknife iterated once (Quenouille),

    .. math::

        T_{JJ} = n T_J - (n - 1)\,\mathrm{mean}_i T_J^{(-i)}
               = n^2 T - (n-1)(2n-1) \bar G_1 + (n-1)(n-2) \bar G_2
               = T - 3 (n - 1)\, d_1 + (n - 1)(n - 2)\, h ,

    T_J^{(-i)} = (n - 1) G({i}) - (n - 2) mean_{j != i} G({i,j}) the jackknife
    of the n - 1 rows other than i.  For a bias a/n + b/n^2 it leaves
    b/((n-1)(n-2)) where T_J leaves -b/(n(n-1)) and T_2 nothing; but where
    bins hold O(1) rows of the up-weighted class the bias is no short series
    in 1/n, and on the three case-control designs of
    ``vignettes/prevalence_second_order.md`` T_JJ is within 2 Monte Carlo s.e.
    of the truth where T_2 misses by 3.5 on one (hence T_JJ; T_2 is the
    combination of ``ratio``, ``first`` and ``second`` above).  Its variance is
    the jackknife variance of T_J, (n - 1)/n sum_i (T_J^{(-i)} - mean)^2, with
    T_J^{(-i)} - T = (n - 1)(G({i}) - T) - (n - 2)/(n - 1) M_i,
    M_i = sum_{j != i} (G({i,j}) - T), whose per-row sums over j use the same
    class sums (of the bin without row i).

    **Closed form.**  Every row of class k (0: events, 1: non-events) has the
    weight v_k, so a bin is described by its class counts N_k and the power
    sums s_k = sum U_i, q_k = sum U_i^2 of each class, and

    .. math::

        W_b = \sum_k v_k N_k, \quad
        D_b = W_b^2 - P_b = \sum_k v_k^2 N_k (N_k - 1) + 2 v_0 v_1 N_0 N_1, \quad
        E_b = \lVert S_b\rVert^2 - Q_b = \sum_k v_k^2 (s_k^2 - q_k) + 2 v_0 v_1 s_0 s_1 .

    Deleting row i (class k, value U_i) replaces N_k, s_k, q_k by N_k - 1,
    s_k - U_i, q_k - U_i^2: O(1) per row.  With delta_i = W_b^{(-i)}
    \tilde R_b^{(-i)} - X_b, e_i = delta_i + v_k T, c_k = 1 / (W - v_k) and
    c_{kl} = 1 / (W - v_k - v_l) (all computed from the class counts, so no
    total cancels), G({i}) - T = e_i c_k and, for a pair (class l for j),

    .. math::

        G(\{i,j\}) - G(\{i\}) - G(\{j\}) + T
          = e_i \gamma_{kl} + e_j \gamma_{lk}
            + 1_{b_i = b_j} c_{kl} (X_b^{(-ij)} - X_b^{(-i)} - X_b^{(-j)} + X_b),
        \qquad \gamma_{kl} = v_l c_{kl} c_k .

    The first part sums over all pairs to sum_i e_i (sum_l N_l gamma_{k_i l} -
    gamma_{k_i k_i}) (N_l: the set's class counts).  In the second, the pairs of
    classes (k, l) of a bin share W_b^{(-ij)} and D_b^{(-ij)} (functions of the
    counts), and E_b^{(-ij)} is quadratic in U_i, U_j, so its sum over the
    pairs is a polynomial in the counts and s, q (each pair a, b of the rows
    left is counted once per deletion that keeps it):

    .. math::

        \sum_{i<j \in k} E^{(-ij)} &= v_k^2 \tbinom{N_k - 2}{2} (s_k^2 - q_k)
            + \tbinom{N_k}{2} v_o^2 (s_o^2 - q_o) + v_0 v_1 (N_k - 1)(N_k - 2) s_k s_o, \\
        \sum_{i \in 0, j \in 1} E^{(-ij)} &= v_0^2 N_1 (N_0 - 2)(s_0^2 - q_0)
            + v_1^2 N_0 (N_1 - 2)(s_1^2 - q_1) + 2 v_0 v_1 (N_0 - 1)(N_1 - 1) s_0 s_1 ,

    and sum X^{(-ij)} = W_b^{(-kl)} / D_b^{(-kl)} times that (a bin of four
    rows or more), the number of pairs times W_b^{(-kl)} R_b (three rows), 0
    (two rows).  The sums of X^{(-i)} over the pairs are N_l sum_{i in k} X^{(-i)}
    and so on.  The cost is O(n) per set (``np.bincount`` over rows and cells;
    a loop over the three class pairs); tested against the direct O(n^2)
    enumeration of G.  Each term is attributed to its bin (``contributions``).

    Parameters
    ----------
    cell : ndarray of intp, shape (N,)
        ``set * m + bin`` of each row (r sets of n = N / r rows).
    event : ndarray of bool, shape (N,)
        The class of each row (weight v[0] if True, else v[1]).
    u : ndarray, shape (N,)
        U = Y - Z of each row.
    v : ndarray, shape (2,)
        Positive weights of an event and of a non-event (e.g. pi / pi_hat and
        (1 - pi) / (1 - pi_hat), rescaled by :func:`normalised_weights`).
    m, r : int
        Bins per set and number of sets; every set has at least 3 rows.

    Returns
    -------
    SecondOrderJackknife

    References
    ----------
    .. [1] Schucany, Gray and Owen, "On bias reduction in estimation", Journal
           of the American Statistical Association 66 (1971) 524-533; Quenouille,
           "Notes on bias in estimation", Biometrika 43 (1956).
    """
    size = r * m
    n = cell.shape[0] // r
    v = np.asarray(v, dtype=np.float64)
    k_row = np.where(event, 0, 1)
    pos = cell * 2 + k_row
    N = np.bincount(pos, minlength=2 * size).reshape(size, 2).T.astype(np.float64)
    s = np.bincount(pos, weights=u, minlength=2 * size).reshape(size, 2).T
    q = np.bincount(pos, weights=u * u, minlength=2 * size).reshape(size, 2).T
    nb = N[0] + N[1]
    W_b = v[0] * N[0] + v[1] * N[1]
    R = np.divide(_class_pair_sum(v, s, q), _class_weight_pairs(v, N), out=np.zeros(size), where=nb >= 2)
    X = W_b * R
    set_counts = N.reshape(2, r, m).sum(axis=2)                # (2, r): events and non-events per set
    W = v @ set_counts
    T = X.reshape(r, m).sum(axis=1) / W

    def left(drop):  # 1 / (W - sum of the dropped weights) per set, from the counts
        return 1.0 / (v @ (set_counts - np.asarray(drop, dtype=np.float64)[:, None]))

    c = [left([1, 0]), left([0, 1])]
    cc = {(0, 0): left([2, 0]), (0, 1): left([1, 1]), (1, 1): left([0, 2])}
    cc[1, 0] = cc[0, 1]
    # first order, per row
    set_i, b_i = cell // m, cell
    one_hot = np.stack([event, ~event]).astype(np.float64)        # (2, N)
    Nl = N[:, b_i] - one_hot
    sl, ql = s[:, b_i] - one_hot * u, q[:, b_i] - one_hot * u * u
    Rl = np.divide(_class_pair_sum(v, sl, ql), _class_weight_pairs(v, Nl), out=R[b_i].copy(), where=nb[b_i] >= 3)
    Xl = (v @ Nl) * Rl
    delta = Xl - X[b_i]
    Ti = T[set_i]
    ck = np.where(event, c[0][set_i], c[1][set_i])
    e = delta + v[k_row] * Ti
    g = e * ck                                                      # G({i}) - T
    d1_b = np.bincount(cell, weights=g, minlength=size) / n
    d1 = d1_b.reshape(r, m).sum(axis=1)
    variance = (n - 1) / n * np.bincount(set_i, weights=(g - d1[set_i]) ** 2, minlength=r)
    # second order: the separable part, per row
    gam = {(k, l): v[l] * cc[k, l] * c[k] for k in (0, 1) for l in (0, 1)}
    reach = [sum(set_counts[l] * gam[k, l] for l in (0, 1)) - gam[k, k] for k in (0, 1)]  # (r,) each
    h_b: np.ndarray = np.bincount(cell, weights=e * np.where(event, reach[0][set_i], reach[1][set_i]),
                                  minlength=size)
    # second order: the pairs within a bin
    Xl_sum = np.bincount(pos, weights=Xl, minlength=2 * size).reshape(size, 2).T   # sum_{i in (b, k)} X^(-i)
    set_b = np.repeat(np.arange(r), m)
    for k, l in ((0, 0), (0, 1), (1, 1)):
        pairs, e_sum = _pair_deletion_sums(v, N, s, q, k, l)
        N2 = N - np.array([[k == 0], [k == 1]], dtype=np.float64) - np.array([[l == 0], [l == 1]], dtype=np.float64)
        W2 = v @ N2
        x2 = np.where(nb >= 4, W2 * np.divide(e_sum, _class_weight_pairs(v, N2), out=np.zeros(size),
                                              where=(nb >= 4) & (pairs > 0)), pairs * W2 * R)
        x2 = np.where(pairs > 0, x2, 0.0)
        x1 = N[l] * Xl_sum[k] + N[k] * Xl_sum[l] if k != l else (N[k] - 1.0) * Xl_sum[k]
        h_b += cc[k, l][set_b] * (x2 - x1 + pairs * X)
    pair_count = n * (n - 1) / 2.0
    h_b /= pair_count
    h = h_b.reshape(r, m).sum(axis=1)
    # the delete-one values of T_J: T_J^(-i) = T + (n - 1) g_i - (n - 2)/(n - 1) M_i, M_i = sum_{j != i} G(ij) - T
    per_class = np.bincount(set_i * 2 + k_row, weights=e, minlength=2 * r).reshape(r, 2).T     # (2, r)
    g_set = np.bincount(set_i, weights=g, minlength=r)
    M = (n - 2) * g + g_set[set_i] + e * np.where(event, reach[0][set_i], reach[1][set_i])
    for l in (0, 1):
        own = (k_row == l).astype(np.float64)
        gam_l = np.where(event, gam[l, 0][set_i], gam[l, 1][set_i])
        M += gam_l * (per_class[l][set_i] - own * e)
        o = 1 - l
        F = (v[l] ** 2 * (Nl[l] - 2.0) * (sl[l] * sl[l] - ql[l]) + Nl[l] * v[o] ** 2 * (sl[o] * sl[o] - ql[o])
             + 2.0 * v[0] * v[1] * (Nl[l] - 1.0) * sl[0] * sl[1])       # sum_{j in l, j != i} E_b^(-ij)
        N2 = Nl - np.array([[l == 0], [l == 1]], dtype=np.float64)
        W2 = v @ N2
        four = (nb[b_i] >= 4) & (Nl[l] > 0)
        x2 = np.where(four, W2 * np.divide(F, _class_weight_pairs(v, N2), out=np.zeros_like(F), where=four),
                      np.where(nb[b_i] == 3, Nl[l] * W2 * R[b_i], 0.0))
        c_l = np.where(event, cc[0, l][set_i], cc[1, l][set_i])
        M += c_l * (x2 - (Xl_sum[l][b_i] - own * Xl) - Nl[l] * Xl + Nl[l] * X[b_i])
    loo_jack = T[set_i] + (n - 1) * g - (n - 2) / (n - 1) * M
    loo_mean = np.bincount(set_i, weights=loo_jack, minlength=r) / n
    variance_jack = (n - 1) / n * np.bincount(set_i, weights=(loo_jack - loo_mean[set_i]) ** 2, minlength=r)
    estimate = T - 3 * (n - 1) * d1 + (n - 1) * (n - 2) * h
    contributions = X / np.repeat(W, m) - 3 * (n - 1) * d1_b + (n - 1) * (n - 2) * h_b
    return SecondOrderJackknife(ratio=T, first=d1, second=h, estimate=estimate, jackknife=T - (n - 1) * d1,
                                contributions=contributions, variance=variance, jackknife_variance=variance_jack,
                                loo_jackknife_mean=loo_mean)


def jackknife_statistic(cell: np.ndarray, w: np.ndarray, wu: np.ndarray, w2uu: np.ndarray, m: int, r: int = 1):
    r"""The delete-one jackknife of T_w over the rows, from per-bin sums (closed form, no loop over rows).

    With R_b = (||S_b||^2 - Q_b) / (W_b^2 - P_b) (0 for a bin without a
    weighted pair), A = sum_b W_b R_b and T_w = A / W, deleting row i of bin b
    changes only its bin's sums and W:

    .. math::

        T_w^{(-i)} = \frac{A - W_b R_b + (W_b - w_i) R_b^{(-i)}}{W - w_i},
        \qquad
        T_J = n T_w - \frac{n - 1}{n} \sum_i T_w^{(-i)},

    where R_b^{(-i)} uses W_b - w_i, P_b - w_i^2, S_b - w_i U_i and
    Q_b - w_i^2 ||U_i||^2; when the bin keeps no weighted pair without row i,
    R_b^{(-i)} is taken as R_b (the row's deletion carries no information on
    the ratio).  Bins, and bins without row i, that one row dominates (pair
    sum below W^2 / ``TOP_ROW_SHARE``, or row i holding all but
    1 / ``TOP_ROW_SHARE`` of its bin) are computed from their top rows and
    the sums of the rest, without the cancellation of these differences
    (:func:`_top_row_form`).  T_J removes the O(1/n) bias of the ratio (Quenouille's
    jackknife [1]_).  With unit weights each R_b is a U-statistic, whose
    leave-one-out average is itself, and T_J = T_w = T exactly.  The jackknife
    variance is (n - 1)/n sum_i (T_w^{(-i)} - mean)^2.

    Parameters
    ----------
    cell : ndarray of intp, shape (N,)
        Bin of each row, ``set * m + bin`` when ``r`` sets of n = N / r rows
        (e.g. Monte Carlo draws) are handled at once.
    w : ndarray, shape (N,)
    wu : ndarray, shape (N, d)
        w_i U_i.
    w2uu : ndarray, shape (N,)
        w_i^2 ||U_i||^2.
    m, r : int
        Bins per set and number of sets.

    Returns
    -------
    ratio, jack : ndarray, shape (r,)
        T_w and T_J of each set.
    contributions : ndarray, shape (r * m,)
        Each bin's share of T_J (they sum to T_J within a set).
    variance : ndarray, shape (r,)
        Jackknife variance of each set.

    Raises
    ------
    ValueError
        When one row holds more than 1 - 2^-20 of its set's weight: T_w
        without it, a ratio over a weight total below the rounding error of
        the total, cannot be computed.

    References
    ----------
    .. [1] Quenouille, "Notes on bias in estimation", Biometrika 43 (1956);
           Efron and Stein, "The jackknife estimate of variance", Annals of
           Statistics 9 (1981).
    """
    size = r * m
    n = cell.shape[0] // r
    W_b = np.bincount(cell, weights=w, minlength=size)
    P_b = np.bincount(cell, weights=w * w, minlength=size)
    S_b = column_sums(cell, wu, size)
    Q_b = np.bincount(cell, weights=w2uu, minlength=size)
    D = W_b * W_b - P_b
    keep = _keep(D, W_b)
    R = np.divide(np.einsum("bj,bj->b", S_b, S_b) - Q_b, D, out=np.zeros(size), where=keep)
    dominated = D < W_b * W_b / TOP_ROW_SHARE
    rows_b = None
    if dominated.any():
        rows_b = np.bincount(cell, minlength=size)  # rows per cell: cells of one row hold no pair
        dominated &= rows_b > 1
    u = None
    if dominated.any():  # bins dominated by one row: without cancellation (_top_row_form)
        u = np.divide(wu, w[:, None], out=np.zeros_like(wu), where=w[:, None] > 0)
        top = _top_row_form(cell, u, w, size, dominated)
        R[top.bins] = top.ratio
    X = W_b * R
    A = X.reshape(r, m).sum(axis=1)
    W = W_b.reshape(r, m).sum(axis=1)
    ratio = A / W
    W_cell = W_b[cell]
    Wl = W_cell - w
    Sl = S_b[cell] - wu
    Dl = Wl * Wl - (P_b[cell] - w * w)
    kl = _keep(Dl, Wl)
    Rl = np.divide(np.einsum("ij,ij->i", Sl, Sl) - (Q_b[cell] - w2uu), Dl, out=R[cell].copy(), where=kl)
    # leave-one-out bins dominated by one row (that still hold two rows), and deletions of a row that
    # dominates its bin (whose W_b - w_i, P_b - w_i^2, S_b - w_i U_i cancel)
    loo_dominated, row_dominates = Dl < Wl * Wl / TOP_ROW_SHARE, Wl < W_cell / TOP_ROW_SHARE
    need = loo_dominated | row_dominates
    if need.any():
        rows_i = (np.bincount(cell, minlength=size) if rows_b is None else rows_b)[cell]
        need = (loo_dominated & (rows_i > 2)) | (row_dominates & (rows_i > 1))
    if need.any():
        u = np.divide(wu, w[:, None], out=np.zeros_like(wu), where=w[:, None] > 0) if u is None else u
        rows, pair, left, ratio_loo = _leave_one_out_top_rows(cell, u, w, size, need)
        fix = pair | (left < W_cell[rows] / TOP_ROW_SHARE)  # where W_b - w_i loses digits
        Wl[rows[fix]], Rl[rows[pair]] = left[fix], ratio_loo[pair]
    set_i = cell // m
    if np.any(w > W[set_i] * (1.0 - 2.0 ** -20)):
        raise ValueError("weights: one row holds more than 1 - 2^-20 of the total weight (an effective sample "
                         "size of 1), so the delete-one jackknife of T_w cannot be computed (deleting that row "
                         "leaves a weight total below the rounding error of the total)")
    denom = W[set_i] - w
    ok = denom > 1e-12 * W[set_i]
    inv = np.divide(1.0, denom, out=np.zeros_like(denom), where=ok)
    own = Wl * Rl * inv                                  # row i's own-bin term of T^(-i)
    T_loo = np.where(ok, (A[set_i] - X[cell]) * inv + own, ratio[set_i])
    # per-bin shares: sum_i T^(-i) = sum_b [X_b (H - H_b) + L_b] (+ ratio for rows with nothing left)
    H_b = np.bincount(cell, weights=inv, minlength=size)
    H = H_b.reshape(r, m).sum(axis=1)
    L_b = np.bincount(cell, weights=own, minlength=size)
    none_b = np.bincount(cell, weights=(~ok) * ratio[set_i], minlength=size)
    loo_b = X * (np.repeat(H, m) - H_b) + L_b + none_b
    contributions = n * X / np.repeat(W, m) - (n - 1) / n * loo_b
    jack = contributions.reshape(r, m).sum(axis=1)
    mean = np.bincount(set_i, weights=T_loo, minlength=r) / n
    variance = (n - 1) / n * np.bincount(set_i, weights=(T_loo - mean[set_i]) ** 2, minlength=r)
    return ratio, jack, contributions, variance


def weighted_influence(inverse: np.ndarray, u: np.ndarray, w: np.ndarray, m: int | None = None) -> np.ndarray:
    """IF_i = (w_i / C)(2 mu_b^T U_i - ||mu_b||^2 - theta), plug-in mu_b = S_b / W_b, C = W / n.

    theta is the weighted plug-in estimate, so the values average to 0.
    Rows of a bin with W_b = 0 (all weights zero) get IF = 0.
    """
    m = int(inverse.max()) + 1 if m is None else m
    n = u.shape[0]
    (w,) = normalised_weights(w)
    W_b = np.bincount(inverse, weights=w, minlength=m)
    S_b = column_sums(inverse, u * w[:, None], m)
    pos = W_b > 0
    mu = np.zeros_like(S_b)
    mu[pos] = S_b[pos] / W_b[pos, None]
    W = W_b.sum()
    theta = float(np.sum(np.einsum("bi,bi->b", mu, mu) * W_b) / W)
    mu_i = mu[inverse]
    return (w * n / W) * (2.0 * np.einsum("ij,ij->i", mu_i, u) - np.einsum("ij,ij->i", mu_i, mu_i) - theta)


def weighted_null_variance(inverse: np.ndarray, u: np.ndarray, w: np.ndarray, m: int | None = None,
                           shift: float = 1.0) -> float:
    """V_0 = 2 sum_b (W_b / (W D_b))^2 sum_{i != j in b} (w_i w_j U_i.U_j)^2, D_b = W_b^2 - shift P_b.

    The pair sums are ||sum_i w_i^2 U_i U_i^T||_F^2 - sum_i w_i^4 ||U_i||^4 per
    bin (exact algebra), so the cost is O(n d^2).  ``shift=0`` gives the
    weights 1 / (W W_b)^2 of the plug-in bias of sigma1^2 (see
    ``calibtest.core.difference_variance``).
    """
    m = int(inverse.max()) + 1 if m is None else m
    d = u.shape[1]
    (w,) = normalised_weights(w)
    W_b = np.bincount(inverse, weights=w, minlength=m)
    P_b = np.bincount(inverse, weights=w * w, minlength=m)
    w2 = w * w
    outer = (u[:, :, None] * u[:, None, :]).reshape(u.shape[0], d * d) * w2[:, None]
    M = column_sums(inverse, outer, m)
    sq = w2 * np.einsum("ij,ij->i", u, u)
    pairs = np.einsum("bj,bj->b", M, M) - np.bincount(inverse, weights=sq * sq, minlength=m)
    W = W_b.sum()
    factor = _pair_factor(W_b, W_b * W_b - shift * P_b, W) if shift else \
        np.divide(1.0, W * W_b, out=np.zeros_like(W_b), where=W_b > 0)
    terms = factor**2 * pairs
    if shift in (0.0, 1.0):  # bins dominated by one row: without cancellation (_top_row_form)
        top = _top_row_form(inverse, u, w, m, _dominated_bins(W_b, P_b, inverse, m))
        share = W_b[top.bins] / W
        terms[top.bins] = share * share * (top.null_ratio if shift else top.plain_ratio)
    return float(max(2.0 * np.sum(terms), 0.0))


def class_weights(w: np.ndarray, events: np.ndarray) -> np.ndarray:
    """(v_event, v_nonevent): the one weight of each class (a class without rows gets 1).

    Raises
    ------
    ValueError
        When the weights of a class are not all equal (the closed form of
        :func:`second_order_jackknife` needs one weight per class).
    """
    events = np.asarray(events, dtype=bool)
    out = np.ones(2)
    for k, rows in enumerate((events, ~events)):
        if rows.any():
            vals = w[rows]
            if vals.min() != vals.max():
                raise ValueError("weights: the second-order jackknife needs one weight per class (events, "
                                 "non-events); these weights vary within a class")
            out[k] = vals[0]
    return out


def weighted_statistics(inverse: np.ndarray, u: np.ndarray, w: np.ndarray, m: int | None = None, *,
                        jackknife: int = 0, events: np.ndarray | None = None) -> WeightedStatistics:
    """T_w, the weighted plug-in, sigma_{1,w}^2 and V_0 of weighted rows (see the module docstring).

    Parameters
    ----------
    inverse : ndarray of intp, shape (n,)
        Bin number of each row.
    u : ndarray, shape (n, d)
        U = Y - Z of each row.
    w : ndarray, shape (n,)
        Non-negative finite weights, not all zero (validated by the caller).
    m : int, optional
        Number of bins (default: ``inverse.max() + 1``).
    jackknife : {0, 1, 2}
        1 (or True): report the jackknife-corrected T_J (:func:`jackknife_statistic`) as
        the estimate, with its jackknife variance; for weights that depend on
        the outcome (prevalence weights), where the ratio T_w is biased.
        2: the iterated jackknife T_JJ (:func:`second_order_jackknife`), with
        the jackknife variance of T_J; needs ``events``, and one weight per class.
    events : ndarray of bool, shape (n,), optional
        The class of each row (events, non-events), for ``jackknife=2``.

    Returns
    -------
    WeightedStatistics

    Raises
    ------
    ValueError
        When the weights' sum overflows, or (with ``jackknife``) one row holds
        all but 2^-20 of the weight (:func:`jackknife_statistic`).

    Notes
    -----
    The weights are rescaled first (:func:`normalised_weights`: exactly, by a
    power of two; equal weights become unit weights), so that weights of any
    scale give the same result; ``weight_sum`` is of the weights as given.
    Bins that one row dominates are computed in the top-row form
    (:func:`_top_row_form`), which matches the definition at any ratio of
    weights.
    """
    given = np.asarray(w, dtype=np.float64)
    (w,) = normalised_weights(given)
    m = int(inverse.max()) + 1 if m is None else m
    with np.errstate(over="ignore"):
        weight_sum = np.bincount(inverse, weights=given, minlength=m)
        if not np.isfinite(weight_sum.sum()):
            raise ValueError(f"weights sum to more than the largest floating-point number "
                             f"({np.finfo(float).max:.4g}); divide them by a common factor (no estimate "
                             "changes)")
    W_b, P_b, S_b, Q_b = _bin_parts(inverse, u, w, m)
    W = float(W_b.sum())
    factor = _pair_factor(W_b, W_b * W_b - P_b, W)
    contributions = factor * (np.einsum("bi,bi->b", S_b, S_b) - Q_b)
    top = _top_row_form(inverse, u, w, m, _dominated_bins(W_b, P_b, inverse, m))
    contributions[top.bins] = W_b[top.bins] / W * top.ratio
    pos = W_b > 0
    plugin = float(np.sum(np.einsum("bi,bi->b", S_b[pos], S_b[pos]) / W_b[pos]) / W)
    psi = weighted_influence(inverse, u, w, m)
    ratio, jvar = float(contributions.sum()), None
    estimate = ratio
    if jackknife == 2:
        if events is None:
            raise ValueError("jackknife=2 needs the rows' events (events=)")
        so = second_order_jackknife(inverse, events, u[:, 0], class_weights(w, events), m)
        estimate, jvar, contributions = float(so.estimate[0]), float(so.jackknife_variance[0]), so.contributions
    elif jackknife:
        _, jack, contributions, var = jackknife_statistic(
            inverse, w, u * w[:, None], w * w * np.einsum("ij,ij->i", u, u), m)
        estimate, jvar = float(jack[0]), float(var[0])
    return WeightedStatistics(
        estimate=estimate, plugin=plugin, sigma1_sq=float(np.mean(psi * psi)),
        null_variance=weighted_null_variance(inverse, u, w, m),
        null_variance_plugin_weights=weighted_null_variance(inverse, u, w, m, shift=0.0),
        contributions=contributions, weight_sum=weight_sum, n_eff=kish_n_eff(w), ratio_estimate=ratio,
        jackknife_variance=jvar)


@dataclass(frozen=True, eq=False)
class NullLabels:
    """The law of the labels under H0 given the predictions, and the weight each label brings.

    Row i is an event with probability ``event_prob[i]``, weighted ``weight_event[i]``
    as an event and ``weight_nonevent[i]`` otherwise (see :func:`weighted_null_draws`).

    Attributes
    ----------
    weight_event, weight_nonevent, event_prob : ndarray, shape (n,)
    """

    weight_event: np.ndarray
    weight_nonevent: np.ndarray
    event_prob: np.ndarray


def weighted_null_draws(z: np.ndarray, inverse: np.ndarray, labels: NullLabels, *, n_draws: int, rng,
                        m: int | None = None, max_cells: int = 20_000_000, jackknife: bool = False,
                        return_variance: bool = False):
    """T_w of ``n_draws`` label vectors drawn under H0 given the predictions (binary and top-1 rows).

    Row i gets y_i ~ Bernoulli(event_prob_i) independently, U_i = y_i - z_i and
    weight ``weight_event[i]`` if y_i = 1 else ``weight_nonevent[i]``; T_w of each
    draw is computed from per-(draw, bin) sums with one ``np.bincount`` per
    sum over blocks of draws (at most ``max_cells`` draw-rows at a time).

    Under H0 (the population the weights describe is calibrated):

    * case weights that do not depend on the outcome given the prediction:
      event_prob = z and both weights are the case weights;
    * prevalence weights (events pi / pi_hat, non-events (1 - pi) / (1 - pi_hat)):
      the sample's event probability given z is q = z b / (z b + (1 - z) a)
      with a = pi / pi_hat and b = (1 - pi) / (1 - pi_hat) (the population odds
      times b / a), and the weights follow the drawn outcome.

    Parameters
    ----------
    z : ndarray, shape (n,)
        The binned prediction (p, or the top-1 confidence).
    inverse : ndarray of intp, shape (n,)
    labels : NullLabels
        ``weight_event``, ``weight_nonevent`` and ``event_prob`` of each row.
    n_draws : int
    rng : numpy.random.Generator
    m : int, optional
        Number of bins.
    jackknife : {0, 1, 2}
        1 (or True): draw the jackknife-corrected T_J instead of T_w (the statistic the
        test then compares with must be T_J too); 2: the iterated jackknife
        T_JJ (:func:`second_order_jackknife`; ``weight_event`` and
        ``weight_nonevent`` must each be one value), with the jackknife variance of T_J.
    return_variance : bool
        With ``jackknife``, also return the jackknife variance of each draw.

    Returns
    -------
    ndarray, shape (n_draws,)
        The statistic of each draw; with ``return_variance`` a pair
        (statistics, jackknife variances).
    """
    n = z.shape[0]
    m = int(inverse.max()) + 1 if m is None else m
    event_prob = labels.event_prob
    weight_event, weight_nonevent = normalised_weights(labels.weight_event, labels.weight_nonevent)
    several = np.bincount(inverse, minlength=m) > 1  # bins of one row hold no pair
    out = np.empty(n_draws)
    out_var = np.empty(n_draws)
    cells = max_cells // (32 if jackknife == 2 else 8 if jackknife else 1)   # arrays per row the jackknife holds
    v = class_weights(np.concatenate([weight_event, weight_nonevent]),
                      np.arange(2 * n) < n) if jackknife == 2 else None
    block = max(1, min(n_draws, cells // max(n, 1)))
    for start in range(0, n_draws, block):  # blocks of draws, each fully vectorised
        r = min(block, n_draws - start)
        y = rng.random((r, n)) < event_prob
        w = np.where(y, weight_event, weight_nonevent)
        u = y - z
        cell = (np.arange(r)[:, None] * m + inverse).ravel()
        if v is not None:  # jackknife == 2
            so = second_order_jackknife(cell, y.ravel(), u.ravel(), v, m, r)
            out[start:start + r], out_var[start:start + r] = so.estimate, so.jackknife_variance
            continue
        if jackknife:
            wf, uf = w.ravel(), u.ravel()
            _, out[start:start + r], _, out_var[start:start + r] = jackknife_statistic(
                cell, wf, (wf * uf)[:, None], (wf * uf) ** 2, m, r)
            continue
        size = r * m
        W_b = np.bincount(cell, weights=w.ravel(), minlength=size).reshape(r, m)
        P_b = np.bincount(cell, weights=(w * w).ravel(), minlength=size).reshape(r, m)
        S_b = np.bincount(cell, weights=(w * u).ravel(), minlength=size).reshape(r, m)
        Q_b = np.bincount(cell, weights=(w * w * u * u).ravel(), minlength=size).reshape(r, m)
        D_b = W_b * W_b - P_b
        keep = D_b > 1e-12 * np.maximum(W_b * W_b, np.finfo(float).tiny)
        W = W_b.sum(axis=1, keepdims=True)
        factor = np.divide(W_b, W * D_b, out=np.zeros_like(W_b), where=keep)
        terms = (factor * (S_b * S_b - Q_b)).reshape(size)
        dominated = ((D_b < W_b * W_b / TOP_ROW_SHARE) & several).reshape(size)
        if dominated.any():  # cells dominated by one row: without cancellation, as for the observed T_w
            top = _top_row_form(cell, u.reshape(-1, 1), w.ravel(), size, dominated)
            terms[top.bins] = (W_b / W).reshape(size)[top.bins] * top.ratio
        out[start:start + r] = np.sum(terms.reshape(r, m), axis=1)
    if return_variance:
        if not jackknife:
            raise ValueError("return_variance=True needs jackknife=True")
        return out, out_var
    return out


def null_studentized_multipliers(draws: np.ndarray, variances: np.ndarray, alpha: float) -> tuple[float, float]:
    """k_a, k_h: the 1 - alpha and 1 - alpha/2 quantiles of T*/se* over null draws, at least z_a and z_h.

    ``draws`` and ``variances`` are T_J and its jackknife variance of each
    Monte Carlo draw under H0 (:func:`weighted_null_draws` with
    ``return_variance=True``).  A draw with zero variance counts as +inf,
    -inf or 0 by the sign of its statistic.  This is the bootstrap-t idea
    (Hall [1]_) with the Monte Carlo null given the predictions as the
    resampling law, i.e. the studentized law at ECE^2 = 0.

    References
    ----------
    .. [1] Hall, "Theoretical comparison of bootstrap confidence intervals",
           Annals of Statistics 16 (1988) 927-953.
    """
    draws = np.asarray(draws, dtype=np.float64)
    variances = np.asarray(variances, dtype=np.float64)
    pos = variances > 0
    degenerate = np.select([draws > 0, draws < 0], [np.inf, -np.inf], 0.0)
    stud = np.where(pos, draws / np.sqrt(np.where(pos, variances, 1.0)), degenerate)
    q_a, q_h = np.quantile(stud, [1.0 - alpha, 1.0 - alpha / 2.0], method="higher")
    return float(max(_sps.norm.isf(alpha), q_a)), float(max(_sps.norm.isf(alpha / 2.0), q_h))


def studentized_adjusted_interval(estimate: float, se: float, threshold: float, alpha: float,
                                  k_a: float, k_h: float) -> AdjustedInterval:
    """The adjusted interval with the lower end's normal quantiles replaced by k_a and k_h.

    With T+ = max(T, 0), z_h = Phi^-1(1 - alpha/2)::

        upper = T+ + z_h se
        lower = T+ - k_h se               if T+/2 <= T+ - k_h se   (branch 1)
              = max(0, T+ - k_a se)       if T+ - k_a se < T+/2    (branch 2)
              = T+/2                      otherwise                (branch 3)

    and [0, upper] when T+ < threshold.  With k_a = z_a and k_h = z_h it is
    :func:`calibtest.core.intervals.adjusted_interval` (paper eqs. (10) and
    (7)).  For prevalence weights k_a, k_h are the quantiles of the
    studentized statistic T*/se* under H0 given the predictions
    (:func:`null_studentized_multipliers`): near ECE^2 = 0, where the lower
    end is decided, (T - theta) / se has a heavier upper tail than N(0, 1)
    (bins with few rows of the up-weighted class give large T with a small
    jackknife se), and the null draws show how much.

    References
    ----------
    .. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
           l2 Expected Calibration Error", arXiv:2408.08998, 2024, eqs. (7), (10).
    """
    return adjusted_interval(estimate, se, threshold, alpha, multipliers=(_sps.norm.isf(alpha / 2.0), k_h, k_a))


def prevalence_event_prob(z: np.ndarray, a: float, b: float) -> np.ndarray:
    """q = z b / (z b + (1 - z) a): the sample's event probability given z when the population is calibrated.

    a = pi / pi_hat and b = (1 - pi) / (1 - pi_hat) are the event and non-event
    prevalence weights.
    """
    num = z * b
    return num / (num + (1.0 - z) * a)
