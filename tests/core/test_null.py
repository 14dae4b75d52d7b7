"""sigma0^2 in closed form against independent numerical integration (scipy)."""
from fractions import Fraction

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import integrate
from scipy.special import roots_legendre

import calibtest as ct
from calibtest.core.null import null_test, sigma0_sq_exact


def g(*z):
    z = np.array(z)
    return np.sum(z**2) - 2 * np.sum(z**3) + np.sum(z**2) ** 2


def test_binary_is_one_fifteenth():
    assert sigma0_sq_exact("binary") == Fraction(1, 15)


@pytest.mark.parametrize("K", [2, 3, 10, 100, 1000])
def test_top1_against_quad(K):
    value, _ = integrate.quad(lambda z: 2 * z**2 * (1 - z) ** 2, 1 / K, 1, epsabs=1e-14, epsrel=1e-13)
    assert_allclose(ct.sigma0_sq("top1", K), value, rtol=1e-11)


@pytest.mark.parametrize("K", [3, 5, 10, 50])
def test_top2_against_dblquad(K):
    # Delta(K, 2) = {z1 >= z2 >= 0, 2/K <= z1 + z2 <= 1}: z2 in [0, 1/2], z1 in [max(z2, 2/K - z2), 1 - z2]
    value, _ = integrate.dblquad(lambda z1, z2: 2 * g(z1, z2), 0, 0.5,
                                 lambda z2: max(z2, 2 / K - z2), lambda z2: 1 - z2,
                                 epsabs=1e-13, epsrel=1e-12)
    assert_allclose(ct.sigma0_sq("topk", K, 2), value, rtol=1e-9)


def _gauss(f, a, b, order=8):
    """Gauss-Legendre rule on [a, b]: exact for polynomials of degree < 2 * order."""
    x, w = roots_legendre(order)
    half = (b - a) / 2
    return half * sum(wi * f(a + half * (xi + 1)) for xi, wi in zip(x, w))


def _top3_integral(K):
    """Integral of 2 g over Delta(K, 3), split into pieces with linear limits.

    z3 in [0, 1/3]; z2 in [z3, (1 - z3)/2]; z1 in [max(z2, 3/K - z2 - z3), 1 - z2 - z3].
    The max switches at z2 = (3/K - z3)/2, which lies above z3 only while z3 < 1/K.
    On each piece the integrand is a polynomial, so the product Gauss rule is exact.
    """
    def inner(z3, lo2, hi2, lower1):
        return _gauss(lambda z2: _gauss(lambda z1: 2 * g(z1, z2, z3), lower1(z2, z3), 1 - z2 - z3),
                      lo2, hi2)

    def low_z3(z3):  # z3 < 1/K: two pieces in z2
        m = (3 / K - z3) / 2
        return (inner(z3, z3, m, lambda z2, z3: 3 / K - z2 - z3)
                + inner(z3, m, (1 - z3) / 2, lambda z2, z3: z2))

    def high_z3(z3):
        return inner(z3, z3, (1 - z3) / 2, lambda z2, z3: z2)

    return _gauss(low_z3, 0, 1 / K) + _gauss(high_z3, 1 / K, 1 / 3)


@pytest.mark.parametrize("K", [4, 10, 30])
def test_top3_against_piecewise_gauss_rule(K):
    assert_allclose(ct.sigma0_sq("topk", K, 3), _top3_integral(K), rtol=1e-12)


def test_top1_via_topk_formula_consistency():
    # k = 1 of a K-column matrix uses the same support [1/K, 1]
    assert sigma0_sq_exact("top1", 7) == sigma0_sq_exact("topk", 7, 1)


def test_null_test_values():
    z0, p = null_test(0.01, 100, 0.05, 1 / 15)
    assert_allclose(z0, 100 * np.sqrt(0.05) * 0.01 / np.sqrt(1 / 15), rtol=1e-14)
    assert_allclose(p, 0.5 * (1 - __import__("math").erf(z0 / np.sqrt(2))), rtol=1e-12)


def test_unknown_mode_and_missing_classes():
    with pytest.raises(ValueError, match="unknown mode"):
        sigma0_sq_exact("bogus")
    with pytest.raises(ValueError, match="n_classes"):
        sigma0_sq_exact("topk", None, 2)
