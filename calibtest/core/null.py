"""The calibrated-regime null: sigma0^2 in closed form and the z test.

The paper's theorem "Limiting distribution for a top-1-to-k calibrated model"
[1]_: for a calibrated model ``n sqrt(w) T / sigma0 -> N(0, 1)`` with

    sigma0^2 = 2 * integral over the support of g(z),
    g(z) = ||z||_2^2 - 2 ||z||_3^3 + ||z||_2^4,

(eq. (12)) where g(z) = tr(Sigma(z)^2) for the multinomial
covariance Sigma(z) = diag(z) - z z^T.  The integrals are computed exactly in
rational arithmetic: g is a symmetric polynomial, and the integral of a
monomial over the scaled simplex {z >= 0, sum z <= t} in R^d is

    t^(d + |a|) * prod_i Gamma(a_i + 1) / Gamma(d + |a| + 1).

References
----------
.. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
       l2 Expected Calibration Error", arXiv:2408.08998, 2024.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple
from fractions import Fraction
from math import factorial

import numpy as np
from scipy import stats as _sps

from calibtest.core.intervals import normal_isf
from calibtest.core.targets import Target

__all__ = ["AsymptoticTest", "sigma0_sq", "sigma0_sq_exact", "bin_volume", "null_test", "sigma0_sq_full", "sigma0_sq_full_exact",
           "threshold"]


class AsymptoticTest(NamedTuple):
    """The paper's calibrated-regime test: z0 = n sqrt(w) T / sigma0 and its p-value 1 - Phi(z0) (eq. (12)).

    Attributes
    ----------
    zstat : float
        z0.
    pvalue : float
        1 - Phi(z0).
    """

    zstat: float
    pvalue: float


def _simplex_monomial(exponents: tuple[int, ...], d: int, t: Fraction) -> Fraction:
    """Integral of prod z_i^a_i (the listed exponents, others 0) over {z >= 0, sum z <= t} in R^d."""
    total = sum(exponents)
    num = 1
    for a in exponents:
        num *= factorial(a)
    return t ** (d + total) * Fraction(num, factorial(d + total))


def _g_integral_scaled_simplex(d: int, t: Fraction) -> Fraction:
    """Integral of g over {z >= 0, sum z <= t} in R^d, by symmetry of g.

    g = sum z_i^2 - 2 sum z_i^3 + sum z_i^4 + 2 sum_{i<j} z_i^2 z_j^2.
    """
    value = d * (_simplex_monomial((2,), d, t) - 2 * _simplex_monomial((3,), d, t)
                 + _simplex_monomial((4,), d, t))
    if d >= 2:
        value += d * (d - 1) * _simplex_monomial((2, 2), d, t)
    return value


def sigma0_sq_exact(mode: str, n_classes: int | None = None, k: int = 1) -> Fraction:
    """sigma0^2 as an exact rational number.

    Parameters
    ----------
    mode : {"binary", "top1", "topk", "full"}
        ``binary``: support [0, 1], sigma0^2 = 2 * int_0^1 z^2 (1-z)^2 dz = 1/15.
        ``top1``: support [1/K, 1].
        ``topk``: support the truncated Weyl chamber Delta(K, k) of the paper's
        eq. (5), {z_1 >= ... >= z_k >= 0, k/K <= sum z <= 1}.  Because g is
        symmetric, the integral over Delta(K, k) is 1/k! times the integral over
        {z >= 0, k/K <= sum z <= 1}, a difference of two scaled simplices.
        ``full``: the simplex Delta_{K-1} (:func:`sigma0_sq_full_exact`).
    n_classes : int
        K (required for ``top1``, ``topk`` and ``full``).
    k : int
        Dimension of the top-k vector (``topk``).
    """
    target = Target.of(mode)
    if target.full_calibration:  # k = K: the whole simplex (sigma0_sq_full_exact)
        if n_classes is None:
            raise ValueError("n_classes is required for full calibration")
        return sigma0_sq_full_exact(n_classes)
    k, lower = target.sorted_support(n_classes, k)
    outer = _g_integral_scaled_simplex(k, Fraction(1))
    inner = _g_integral_scaled_simplex(k, lower)
    return 2 * (outer - inner) / factorial(k)


@functools.lru_cache(maxsize=None)
def sigma0_sq(mode: str, n_classes: int | None = None, k: int = 1) -> float:
    """sigma0^2 of the paper's eq. (12) as a float (see :func:`sigma0_sq_exact`).

    Parameters
    ----------
    mode : {"binary", "top1", "topk", "full"}
        The calibration target.
    n_classes : int, optional
        K (required for ``top1``, ``topk`` and ``full``).
    k : int
        Dimension of the top-k vector (``topk``).

    Returns
    -------
    float

    Examples
    --------
    Binary mode: 2 * int_0^1 z^2 (1 - z)^2 dz = 1/15.

    >>> from calibtest import sigma0_sq
    >>> sigma0_sq("binary") == 1 / 15
    True
    """
    return float(sigma0_sq_exact(mode, n_classes, k))


def bin_volume(n_bins: int, d: int) -> float:
    """Volume w = B^-d of one cube of the partition."""
    return float(n_bins) ** (-d)


def null_test(estimate: float, n: int, volume: float, sigma0_sq_value: float):
    """Calibrated-regime z statistic and one-sided p-value.

    z0 = n sqrt(w) T / sigma0 and p = 1 - Phi(z0) (``docs/conventions.md``, "The interval").
    """
    z0 = n * np.sqrt(volume) * estimate / np.sqrt(sigma0_sq_value)
    return float(z0), float(_sps.norm.sf(z0))


def _dirichlet_monomial(exponents: tuple[int, ...], n_classes: int) -> Fraction:
    """Integral of prod z_i^a_i over Delta_{K-1} in the coordinates z_1..z_{K-1} (z_K = 1 - sum).

    Dirichlet(1, ..., 1) moments: prod_i Gamma(a_i + 1) / Gamma(K + |a|), the
    listed exponents on distinct coordinates and 0 on the others.
    """
    num = 1
    for a in exponents:
        num *= factorial(a)
    return Fraction(num, factorial(n_classes - 1 + sum(exponents)))


def sigma0_sq_full_exact(n_classes: int) -> Fraction:
    """sigma0^2 of full calibration (k = K) as an exact rational number.

    sigma0^2 = 2 * int_{Delta_{K-1}} g(z) dz_1 ... dz_{K-1} with
    g = sum z_i^2 - 2 sum z_i^3 + sum z_i^4 + 2 sum_{i<j} z_i^2 z_j^2 over all
    K coordinates (z_K = 1 - z_1 - ... - z_{K-1}); by exchangeability of the
    flat Dirichlet every coordinate contributes the same monomial integrals
    (:func:`_dirichlet_monomial`).  K = 2 gives 4/15 = 4 x the binary 1/15.
    """
    K = int(n_classes)
    if K < 2:
        raise ValueError(f"full calibration needs K >= 2 classes, got {n_classes}")
    value = K * (_dirichlet_monomial((2,), K) - 2 * _dirichlet_monomial((3,), K)
                 + _dirichlet_monomial((4,), K))
    value += K * (K - 1) * _dirichlet_monomial((2, 2), K)
    return 2 * value


@functools.lru_cache(maxsize=None)
def sigma0_sq_full(n_classes: int) -> float:
    """sigma0^2 of full calibration as a float (see :func:`sigma0_sq_full_exact`)."""
    return float(sigma0_sq_full_exact(n_classes))


def threshold(alpha: float, sigma0_sq_value: float, n: int, volume: float) -> float:
    """Critical value of T in the calibrated regime: z_alpha sigma0 / (n sqrt(w)).

    Zero joins the adjusted interval iff T+ is below it (Algorithm 1, step 4;
    the calibrated-regime limit with the variance of the paper's eq. (12)).
    """
    return float(normal_isf(alpha) * math.sqrt(sigma0_sq_value) / (n * math.sqrt(volume)))
