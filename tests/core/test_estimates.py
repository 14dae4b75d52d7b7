"""core.estimates: every estimate of Algorithm 1 from the bin sums, checked against row-by-row computations."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

import calibtest as ct
from calibtest.core.conditional import conditional_bin_sums, conditional_moments, conditional_test, null_law
from calibtest.core.estimates import estimates_from_sums
from calibtest.core.partition import partition_rows
from calibtest.core.targets import prepare_target
from calibtest.ece.result import Approximation


def _rows(n=300, seed=5):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.98, n)
    y = (rng.uniform(size=n) < np.clip(p + 0.05, 0, 1)).astype(float)
    return y, p


def _hand(y, p, B):
    """T, T_m and the singleton fraction by loops over the bins and the pairs of rows (eq. (6), eq. (2))."""
    u = y - p
    cell = np.floor(p * B).astype(int)
    n = y.size
    t = plugin = 0.0
    singles = 0
    for b in np.unique(cell):
        ub = u[cell == b]
        c = ub.size
        plugin += ub.sum() ** 2 / c / n
        if c == 1:
            singles += 1
            continue
        pairs = sum(ub[i] * ub[j] for i in range(c) for j in range(c) if i != j)
        t += pairs / (c - 1) / n
    return t, plugin, singles / n


@pytest.mark.parametrize("B", [7, 40])
def test_estimates_from_sums_match_the_rows(B):
    y, p = _rows()
    data = prepare_target(y, p)
    part = partition_rows(data, B)
    est = estimates_from_sums(part.bin_sums(data), mode="binary", k=1, n_classes=None, n_bins=B, alpha=0.05)
    t, plugin, singles = _hand(y, p, B)
    assert est.estimate == pytest.approx(t, rel=1e-12, abs=1e-15)
    assert est.plugin_estimate == pytest.approx(plugin, rel=1e-12)
    assert est.singleton_fraction == pytest.approx(singles, abs=0)
    assert est.bin_volume == pytest.approx(1.0 / B)
    # the asymptotic test of eq. (12): z0 = n sqrt(w) T / sigma0, p = 1 - Phi(z0)
    z, pval, _ = est.test
    assert z == pytest.approx(y.size * math.sqrt(1.0 / B) * t / math.sqrt(est.sigma0_sq), rel=1e-10)
    assert pval == pytest.approx(sps.norm.sf(z), rel=1e-10)
    assert est.null_method == "normal" and est.asymptotic is None
    assert est.se == pytest.approx(math.sqrt(est.sigma1_sq / y.size))


def test_the_conditional_null_decides_and_the_asymptotic_test_is_kept():
    y, p = _rows(seed=9)
    data = prepare_target(y, p)
    part = partition_rows(data, 10)
    stats = part.bin_sums(data)
    plain = estimates_from_sums(stats, mode="binary", k=1, n_classes=None, n_bins=10, alpha=0.05)
    cond = conditional_test(plain.estimate, conditional_moments(conditional_bin_sums(data.z, part.inverse), data.n),
                            0.05)
    est = estimates_from_sums(stats, mode="binary", k=1, n_classes=None, n_bins=10, alpha=0.05, null="conditional",
                              conditional=cond)
    assert null_law("conditional", cond) == est.null_method == "shifted gamma"
    assert est.test == (cond.zstat, cond.pvalue, cond.threshold)
    assert est.asymptotic == plain.test[:2]
    # zero joins the interval iff the conditional p-value exceeds alpha
    assert est.interval.contains_zero == (cond.pvalue > 0.05)
    # the result is built from this bundle: what it shows is these numbers
    res = ct.calib_ci(y=y, probs=p, n_bins=10, null="conditional")
    assert (res.estimate, res.null_pvalue, res.ci_lower, res.ci_upper) == (
        est.estimate, est.test[1], est.interval.lower, est.interval.upper)


def test_sparse_cells_flag_words_each_reason():
    quiet = Approximation.sparse_cells(0.01, mode="binary", k=1, second_order_variance=None)
    assert not quiet.approximate and quiet.reasons == ()
    many = Approximation.sparse_cells(0.5, mode="full", k=3, second_order_variance=None, more_reasons=("weights",))
    assert many.approximate and len(many.reasons) == 3 and many.reasons[-1] == "weights"
    assert "50% of the rows sit alone" in many.reasons[0]
    # with V2 in the standard error, full calibration is not flagged for lacking it
    assert Approximation.sparse_cells(0.0, mode="full", k=3, second_order_variance=1e-4).reasons == ()
