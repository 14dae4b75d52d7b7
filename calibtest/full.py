"""Full (canonical) calibration, k = K: E[Y | Z] = Z on the whole probability vector.

The target of the paper with k = K (Sun, Chaudhari, Barnett & Dobriban,
Section 2.2; T-Cal, Lee et al. 2023): U = Y - Z is the K-dimensional
difference between the one-hot label and the unsorted probability vector, and
the rows are binned on the simplex Delta_{K-1} into B^(K-1) equal-volume
simplices (:mod:`calibtest.simplex`).  With the cell volume
w = 1/((K-1)! B^(K-1)) and the exact

    sigma0^2 = 2 * int_{Delta_{K-1}} g(z) dz_1 ... dz_{K-1}

(:func:`calibtest.null.sigma0_sq_full_exact`) the estimator, the calibrated-
regime test and the adjusted interval are those of Algorithm 1 unchanged.

For K = 2, full calibration is binary calibration in other units: U = (u, -u),
the bins are those of binary mode, and T_full = 2 T_binary,
sigma1_full^2 = 4 sigma1_binary^2, sigma0_full^2 = 4 sigma0_binary^2 = 4/15;
the z statistic and p-value agree and the interval's ends double.
"""
from __future__ import annotations

import numpy as np

from .binning import resolve_n_bins
from .estimation import result_from_stats
from .modes import PreparedData, ROW_SUM_TOL, _check_probabilities, _class_codes
from .null import sigma0_sq_full
from .results import CalibrationResult
from .simplex import simplex_bin_stats, simplex_cell_volume
from .stats import BinStats

__all__ = ["is_full_request", "prepare_full", "full_calibration_result", "sigma1_sq_quadratic"]


def is_full_request(k, probs: np.ndarray) -> bool:
    """True when ``k`` asks for full calibration (``"full"`` or K for K probability columns).

    Raises
    ------
    ValueError
        ``k="full"`` with a single probability column, or an unknown string.
    """
    if isinstance(k, str):
        if k != "full":
            raise ValueError(f"k must be an integer or 'full', got {k!r}")
        if np.ndim(probs) == 1 or (np.ndim(probs) == 2 and np.shape(probs)[1] == 1):
            raise ValueError(
                "k='full' needs a probability matrix with one column per class (K >= 2). With a single "
                "column p = P(y = 1), binary mode already is full calibration for K = 2: omit k (the "
                "paper's K = 2 full ECE^2 is twice the binary ECE^2)")
        return True
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        return False
    return np.ndim(probs) == 2 and np.shape(probs)[1] >= 2 and int(k) == np.shape(probs)[1]


def prepare_full(y, probs, *, n_classes=None, class_names=None, y_name: str = "y",
                 prob_names=None) -> PreparedData:
    """Validate a K-column probability matrix and labels; Z = probs, U = onehot(y) - Z.

    Parameters
    ----------
    y : array_like, shape (n,)
        Class codes 0..K-1 in column order, or values equal to ``class_names``.
    probs : array_like, shape (n, K)
        Probability rows summing to 1 within ``ROW_SUM_TOL``.
    n_classes : int, optional
        Must equal K when given.
    """
    P = np.asarray(probs, dtype=np.float64)
    if P.ndim != 2 or P.shape[1] < 2:
        raise ValueError(f"full calibration needs a probability matrix of shape (n, K) with K >= 2, "
                         f"got shape {P.shape}")
    n, K = P.shape
    if n < 2:
        raise ValueError(f"need at least n = 2 rows, got {n}")
    if n_classes is not None and n_classes != K:
        raise ValueError(f"n_classes={n_classes} does not match the {K} probability columns")
    _check_probabilities(P, "probs" if not prob_names else "probability columns " + ", ".join(map(str, prob_names)))
    dev = np.abs(P.sum(axis=1) - 1.0)
    if dev.max() > ROW_SUM_TOL:
        row = int(np.argmax(dev))
        raise ValueError(f"rows of the probability matrix must sum to 1 (tolerance {ROW_SUM_TOL:g}); "
                         f"row {row} sums to {P[row].sum():.10g}")
    names = list(class_names) if class_names is not None else list(range(K))
    codes = _class_codes(y, n, names, y_name)
    onehot = (codes[:, None] == np.arange(K)[None, :]).astype(np.float64)
    return PreparedData(z=P, u=onehot - P, mode="full", k=K, n_classes=K)


def sigma1_sq_quadratic(stats: BinStats) -> float:
    """sigma1^2 of the paper's eq. (sigma1_plug_in_estimator) without forming Cov_b.

    Same quantity as :func:`calibtest.stats.sigma1_sq`, using
    mu_b^T Cov_b mu_b = mu_b^T M_b mu_b / c_b - ||mu_b||^4 (M_b = sum U U^T), so
    no (m, K, K) temporaries are built: with K = 10 and a million cells the
    covariance arrays would be 800 MB each.
    """
    n = stats.n
    c = stats.count
    p = c / n
    mu = stats.sum_u / c[:, None]
    mu_sq = np.einsum("bi,bi->b", mu, mu)
    quad = np.einsum("bi,bij,bj->b", mu, stats.sum_uu, mu) / c - mu_sq**2
    value = np.sum(p * mu_sq**2) - np.sum(p * mu_sq) ** 2 + 4.0 * np.sum(p * quad)
    return float(max(value, 0.0))


def full_calibration_result(y, probs, *, n_bins, alpha: float, class_names=None, n_classes=None,
                            y_name: str = "y", prob_names=(), **extra) -> CalibrationResult:
    """Algorithm 1 for full calibration on the equal-volume simplex bins.

    ``n_bins="auto"`` uses the SPEC rule with d = K - 1.  ``**extra`` are the
    bookkeeping fields of the result (formula, call, n_dropped, ...).
    """
    prepared = prepare_full(y, probs, n_classes=n_classes, class_names=class_names,
                            y_name=y_name, prob_names=prob_names)
    K = prepared.n_classes
    B, rule = resolve_n_bins(n_bins, prepared.n, K - 1)
    stats = simplex_bin_stats(prepared, B)
    return result_from_stats(
        stats, mode="full", k=K, n_classes=K, n_bins=B, n_bins_rule=rule, alpha=alpha,
        volume=simplex_cell_volume(B, K), sigma0_sq_value=sigma0_sq_full(K),
        sigma1_sq_value=sigma1_sq_quadratic(stats),
        y_name=y_name, prob_names=tuple(prob_names), data=prepared, **extra)
