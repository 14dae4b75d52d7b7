r"""Variance of the difference of two debiased ECE^2 estimators (paired or not).

Pure array functions used by :func:`calibtest.calib_compare`.  The derivation is
written out in ``docs/compare.md``; in short, for one model binned into bins
b with counts c_b, the debiased statistic is the bin-wise U-statistic

.. math::

    T = \frac1n \sum_b \frac{1}{c_b - 1} \sum_{i \ne j \in b} U_i^\top U_j .

Conditionally on the predictions, write U_i = m_i + e_i with E[e_i] = 0.  Then
T = const + L + Q with the linear part L = (2/n) sum_i mu_{b(i)}^T e_i and the
degenerate part Q = (1/n) sum_b (c_b - 1)^{-1} sum_{i != j in b} e_i^T e_j, and
L and Q are uncorrelated.  For two models A and B scored on the same rows:

* **first order** (the decomposition behind the paper's sigma1^2): the influence
  value of row i is psi_i = ||mu(b_i)||^2 + 2 mu(b_i)^T (U_i - mu(b_i)), and
  Var1(T_A - T_B) = Var_n(psi^A - psi^B) / n (population variance over rows).
* **second order** (the degenerate U-statistic, dominant near calibration)::

      Var(Q_A - Q_B | Z) = (2/n^2) sum_{i != j} E[(a_ij e^A_i.e^A_j - b_ij e^B_i.e^B_j)^2]

  with a_ij = 1{i, j in the same A-bin} / (c^A - 1) and b_ij likewise for B.
  Expanding the square gives the two single-model terms
  (2/n^2) sum_b sum_{i != j in b} tr(Sigma_i Sigma_j) / (c_b - 1)^2 and the
  cross term -2 (2/n^2) sum over pairs in the same A-bin AND the same B-bin of
  tr(C_i C_j^T) / ((c^A - 1)(c^B - 1)), C_i = Cov(U^A_i, U^B_i | predictions).
  Each expectation is estimated without a model by the products of distinct
  rows, E[(U_i.U_j)^2] (unbiased for tr(Sigma_i Sigma_j) when the rows are
  calibrated), which gives the non-negative plug-in

      V2 = (2/n^2) sum_{i != j} (a_ij U^A_i.U^A_j - b_ij U^B_i.U^B_j)^2 .

  Per cell of the (A-bin, B-bin) cross partition the pair sums are
  ||sum_i W_i||_F^2 - sum_i ||W_i||_F^2 with W_i = U^A_i (U^B_i)^T, so the whole
  term costs O(n d^2) with ``np.bincount``.

* **plug-in bias of the first order**: psi uses the estimated bin means, whose
  noise inflates Var_n(psi^A - psi^B)/n by about 2 * V2 computed with weights
  1/c instead of 1/(c - 1); ``variance="corrected"`` subtracts that estimate
  (floored at 0) before adding V2.

For independent evaluation sets the two statistics are independent and the
variance is the sum of the one-model variances.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibtest.core.binning import group_keys
from calibtest.core.binstats import column_sums

__all__ = ["influence_values", "pair_sums_single", "second_order_var_single",
           "second_order_var_paired", "first_order_var_paired", "first_order_var_single",
           "DifferenceVariance", "difference_variance",
           "paired_variance_from_sums", "unpaired_variance_from_sums", "influence_from_means"]


def influence_values(inverse: np.ndarray, u: np.ndarray) -> np.ndarray:
    """psi_i = ||mu_b||^2 + 2 mu_b^T (U_i - mu_b), mu_b the mean of U over row i's bin.

    Their population variance over the rows is the paper's plug-in sigma1^2
    (eq. (8)).
    """
    m = int(inverse.max()) + 1
    count = np.bincount(inverse, minlength=m).astype(np.float64)
    mu = column_sums(inverse, u, m) / count[:, None]
    return influence_from_means(mu[inverse], u)


def influence_from_means(mu_i: np.ndarray, u: np.ndarray) -> np.ndarray:
    """psi_i = ||mu_i||^2 + 2 mu_i^T (U_i - mu_i) given the mean mu_i of U over row i's bin (shape (n, d)).

    The bin means may come from the rows themselves (:func:`influence_values`)
    or from bin sums accumulated in an earlier pass over a stream.
    """
    return np.einsum("ij,ij->i", mu_i, mu_i) + 2.0 * np.einsum("ij,ij->i", mu_i, u - mu_i)


def first_order_var_single(inverse: np.ndarray, u: np.ndarray) -> float:
    """sigma1^2 / n computed from the influence values (population variance / n)."""
    psi = influence_values(inverse, u)
    return float(np.var(psi) / psi.shape[0])


def first_order_var_paired(inv_a: np.ndarray, u_a: np.ndarray, inv_b: np.ndarray, u_b: np.ndarray) -> float:
    """Var_n(psi^A - psi^B) / n on shared rows (population variance over rows)."""
    delta = influence_values(inv_a, u_a) - influence_values(inv_b, u_b)
    return float(np.var(delta) / delta.shape[0])


def _outer_flat(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Row-wise outer products u_i v_i^T flattened to shape (n, d*d)."""
    return (u[:, :, None] * v[:, None, :]).reshape(u.shape[0], -1)


def _distinct_pair_sums(cells: np.ndarray, m: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Per cell, sum over ordered pairs i != j of (u_i.u_j)(v_i.v_j).

    Equals ||sum_i u_i v_i^T||_F^2 - sum_i ||u_i||^2 ||v_i||^2 (exact algebra).
    """
    W = column_sums(cells, _outer_flat(u, v), m)
    diag = np.bincount(cells, weights=np.einsum("ij,ij->i", u, u) * np.einsum("ij,ij->i", v, v),
                       minlength=m)
    return np.einsum("cj,cj->c", W, W) - diag


def pair_sums_single(inverse: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counts c_b and sum_{i != j in b} (U_i.U_j)^2 of each bin."""
    m = int(inverse.max()) + 1
    count = np.bincount(inverse, minlength=m).astype(np.float64)
    return count, _distinct_pair_sums(inverse, m, u, u)


def _inv_count(count: np.ndarray, shift: float) -> np.ndarray:
    """1/(c - shift) for bins with c >= 2, else 0 (single-row bins hold no pair)."""
    out = np.zeros_like(count, dtype=np.float64)
    keep = count >= 2
    out[keep] = 1.0 / (count[keep] - shift)
    return out


def second_order_var_single(inverse: np.ndarray, u: np.ndarray, n: int | None = None,
                            shift: float = 1.0) -> float:
    """V2 = (2/n^2) sum_b sum_{i != j in b} (U_i.U_j)^2 / (c_b - 1)^2.

    Unbiased for the conditional variance of the degenerate part of T,
    (2/n^2) sum_b sum_{i != j} tr(Sigma_i Sigma_j) / (c_b - 1)^2, when the
    rows are calibrated; under the paper's null (small bins) it is close to
    sigma0^2 / (n^2 w).  ``shift=0`` gives the weights 1/c_b^2 of the
    plug-in bias of sigma1^2 (see :func:`difference_variance`).
    """
    n = u.shape[0] if n is None else n
    count, pairs = pair_sums_single(inverse, u)
    return float(2.0 / n**2 * np.sum(pairs * _inv_count(count, shift) ** 2))


def _paired_pair_sums(inv_a, u_a, inv_b, u_b):
    """Counts and distinct-pair sums of the A-bins, the B-bins and the (A-bin, B-bin) cells."""
    count_a, pairs_a = pair_sums_single(inv_a, u_a)
    count_b, pairs_b = pair_sums_single(inv_b, u_b)
    # Cells of the cross partition: pairs that share an A-bin and a B-bin.
    cells, keys = group_keys(np.column_stack([inv_a, inv_b]).astype(np.int64),
                             np.array([count_a.size, count_b.size]))
    pairs_c = _distinct_pair_sums(cells, keys.shape[0], u_a, u_b)
    return count_a, pairs_a, count_b, pairs_b, keys, pairs_c


def _paired_from_sums(n, sums, shift):
    count_a, pairs_a, count_b, pairs_b, keys, pairs_c = sums
    w_a, w_b = _inv_count(count_a, shift), _inv_count(count_b, shift)
    var_a = 2.0 / n**2 * np.sum(pairs_a * w_a**2)
    var_b = 2.0 / n**2 * np.sum(pairs_b * w_b**2)
    cov = 2.0 / n**2 * np.sum(pairs_c * w_a[keys[:, 0]] * w_b[keys[:, 1]])
    return float(var_a), float(var_b), float(cov)


def second_order_var_paired(inv_a: np.ndarray, u_a: np.ndarray, inv_b: np.ndarray,
                            u_b: np.ndarray, shift: float = 1.0) -> tuple[float, float, float]:
    """Second-order variance of T_A - T_B on shared rows.

    Returns
    -------
    var_a, var_b, cov : float
        V2_A, V2_B and the cross covariance
        (2/n^2) sum over cells (A-bin, B-bin) of
        sum_{i != j in cell} (U^A_i.U^A_j)(U^B_i.U^B_j) / ((c^A - 1)(c^B - 1)),
        so that Var2(T_A - T_B) = var_a + var_b - 2 cov (never negative:
        it is (2/n^2) sum_{i != j} (a_ij U^A_i.U^A_j - b_ij U^B_i.U^B_j)^2).
        ``shift=0`` replaces c - 1 by c.
    """
    return _paired_from_sums(u_a.shape[0], _paired_pair_sums(inv_a, u_a, inv_b, u_b), shift)


@dataclass(frozen=True)
class DifferenceVariance:
    """Components of Var(T_A - T_B).

    Attributes
    ----------
    first_order_plugin : float
        Var_n(psi^A - psi^B)/n (paired) or sigma1_A^2/n_A + sigma1_B^2/n_B (unpaired).
    first_order_bias : float
        Estimated upward bias of ``first_order_plugin``, 2 * V2 with weights
        1/c in place of 1/(c - 1) (the noise of the bin means inside psi).
    second_order : float
        V2, the degenerate (second-order) part.
    """

    first_order_plugin: float
    first_order_bias: float
    second_order: float

    def first_order(self, variance: str) -> float:
        """The first-order part used by ``variance`` ("corrected" or "plugin")."""
        if variance == "plugin":
            return self.first_order_plugin
        return max(self.first_order_plugin - self.first_order_bias, 0.0)

    def total(self, variance: str) -> float:
        """first_order(variance) + second_order."""
        return self.first_order(variance) + self.second_order


def difference_variance(inv_a: np.ndarray, u_a: np.ndarray, inv_b: np.ndarray, u_b: np.ndarray,
                        *, paired: bool) -> DifferenceVariance:
    """Variance components of T_A - T_B (see the module docstring and ``docs/compare.md``).

    Parameters
    ----------
    inv_a, inv_b : ndarray of intp
        Bin number of each row of model A and of model B.
    u_a, u_b : ndarray, shape (n_a, d) and (n_b, d)
        U = Y - Z of each row.
    paired : bool
        The rows are the same rows in the same order (``n_a == n_b``).

    Notes
    -----
    The plug-in first-order variance uses the estimated bin means mu_b, whose
    noise adds about 4 sum_i tr(Sigma_i Var(mu_hat_b(i))) / n^2 to it; with
    the product estimates of tr(Sigma_i Sigma_j) over distinct rows this is
    ``2 * V2`` computed with the weights 1/c instead of 1/(c - 1).  The
    ``first_order_bias`` field holds that estimate.
    """
    if paired:
        if u_a.shape != u_b.shape:
            raise ValueError(f"paired rows need equal shapes, got {u_a.shape} and {u_b.shape}")
        plugin = first_order_var_paired(inv_a, u_a, inv_b, u_b)
        return paired_variance_from_sums(u_a.shape[0], plugin, _paired_pair_sums(inv_a, u_a, inv_b, u_b))
    plugin = first_order_var_single(inv_a, u_a) + first_order_var_single(inv_b, u_b)
    return unpaired_variance_from_sums(plugin, [(u.shape[0], *pair_sums_single(inv, u))
                                                for inv, u in ((inv_a, u_a), (inv_b, u_b))])


def paired_variance_from_sums(n: int, plugin: float, sums: tuple) -> DifferenceVariance:
    """Var(T_A - T_B) on n shared rows from its first-order part and the pair sums.

    Parameters
    ----------
    n : int
        Rows.
    plugin : float
        Var_n(psi^A - psi^B) / n.
    sums : tuple
        ``(count_a, pairs_a, count_b, pairs_b, keys, pairs_c)``: the counts
        c_b and distinct-pair sums sum_{i != j in b} (U_i.U_j)^2 of the A-bins
        and of the B-bins, and for each occupied cell of the cross partition its
        (A-bin, B-bin) numbers ``keys`` (shape (cells, 2)) and
        sum_{i != j in cell} (U^A_i.U^A_j)(U^B_i.U^B_j).  These are the same
        whether the rows are in memory or streamed (additive sums).

    Returns
    -------
    DifferenceVariance
        second order V2 = V2_A + V2_B - 2 cov (weights 1/(c - 1)); bias
        2 (V2_A + V2_B - 2 cov) with weights 1/c.
    """
    va, vb, cov = _paired_from_sums(n, sums, 1.0)
    ca, cb, ccov = _paired_from_sums(n, sums, 0.0)
    second, bias = va + vb - 2.0 * cov, 2.0 * (ca + cb - 2.0 * ccov)
    # Rounding can leave sums of squares a hair below zero.
    return DifferenceVariance(float(plugin), float(max(bias, 0.0)), float(max(second, 0.0)))


def unpaired_variance_from_sums(plugin: float, models) -> DifferenceVariance:
    """Var(T_A - T_B) of independent evaluation sets from its first-order part and each model's pair sums.

    Parameters
    ----------
    plugin : float
        sigma1_A^2 / n_A + sigma1_B^2 / n_B (population variances of the influence values).
    models : sequence of (n, count, pairs)
        Each model's rows, its bins' counts c_b and distinct-pair sums
        sum_{i != j in b} (U_i.U_j)^2.

    Returns
    -------
    DifferenceVariance
        second order sum over models of (2/n^2) sum_b pairs_b / (c_b - 1)^2;
        bias sum of (4/n^2) sum_b pairs_b / c_b^2.
    """
    second = bias = 0.0
    for n, count, pairs in models:
        second += 2.0 / n**2 * np.sum(pairs * _inv_count(count, 1.0) ** 2)
        bias += 4.0 / n**2 * np.sum(pairs * _inv_count(count, 0.0) ** 2)
    return DifferenceVariance(float(plugin), float(max(bias, 0.0)), float(max(second, 0.0)))
