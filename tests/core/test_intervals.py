"""The adjusted interval's three branches, the zero rule and the open-at-0 case.

Each case is first written out by hand from Algorithm 1, step 4, then reproduced
on real inputs of 6-10 rows whose T and sigma1^2 come from the slow pairwise
implementation in ``conftest.py``.
"""
import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import stats

import calibtest as ct
from calibtest.inputs.validation import check_alpha
from calibtest.core.intervals import adjusted_interval

from conftest import slow_estimates


def expected_interval(t, se, threshold, alpha):
    """Algorithm 1, step 4, transcribed literally with if/else."""
    tp = max(t, 0.0)
    za, zh = stats.norm.ppf(1 - alpha), stats.norm.ppf(1 - alpha / 2)
    upper = tp + zh * se
    if tp / 2 <= tp - zh * se:
        lower, branch = tp - zh * se, 1
    elif tp - za * se < tp / 2:
        lower, branch = max(0.0, tp - za * se), 2
    else:
        lower, branch = tp / 2, 3
    if tp < threshold:
        return 0.0, upper, True, False, branch
    return lower, upper, False, lower == 0.0, branch


def test_branches_by_hand():
    z05, z10 = 1.6448536269514722, 1.959963984540054  # Phi^-1(0.95), Phi^-1(0.975)
    # branch 1: T = 1, se = 0.1 -> [1 - 0.196, 1 + 0.196]
    iv = adjusted_interval(1.0, 0.1, 0.0, 0.05)
    assert iv.branch == 1
    assert_allclose([iv.lower, iv.upper], [1 - z10 * 0.1, 1 + z10 * 0.1], rtol=1e-12)
    # branch 3: T = 1, se = 0.28: T - 1.96 se = 0.451 < 0.5 <= T - 1.645 se = 0.539 -> lower = 0.5
    iv = adjusted_interval(1.0, 0.28, 0.0, 0.05)
    assert iv.branch == 3 and iv.lower == 0.5
    # branch 2: T = 1, se = 0.4: T - 1.645 se = 0.342 < 0.5 -> lower = 0.342
    iv = adjusted_interval(1.0, 0.4, 0.0, 0.05)
    assert iv.branch == 2
    assert_allclose(iv.lower, 1 - z05 * 0.4, rtol=1e-12)
    # branch 2 at 0, not rescued by the zero rule: open at 0
    iv = adjusted_interval(1.0, 1.0, 0.5, 0.05)
    assert iv.branch == 2 and iv.lower == 0.0 and iv.lower_open and not iv.contains_zero
    # zero rule: T+ below the threshold -> [0, upper]
    iv = adjusted_interval(1.0, 0.1, 1.5, 0.05)
    assert iv.contains_zero and iv.lower == 0.0 and not iv.lower_open
    assert_allclose(iv.upper, 1 + z10 * 0.1)
    # negative T: T+ = 0; with threshold 0 (never in practice) zero is excluded and the set is open
    iv = adjusted_interval(-0.3, 0.1, 0.0, 0.05)
    assert iv.branch == 2 and iv.lower == 0.0 and iv.lower_open and iv.upper == pytest.approx(z10 * 0.1)


def test_vectorised_equals_scalar():
    rng = np.random.default_rng(0)
    t = rng.normal(0.05, 0.05, size=200)
    se = rng.uniform(0.001, 0.05, size=200)
    thr = rng.uniform(0, 0.05, size=200)
    vec = adjusted_interval(t, se, thr, 0.1)
    for i in range(200):
        lo, hi, zero, open_, branch = expected_interval(t[i], se[i], thr[i], 0.1)
        assert vec.lower[i] == pytest.approx(lo, abs=1e-15)
        assert vec.upper[i] == pytest.approx(hi)
        assert (vec.contains_zero[i], vec.lower_open[i], vec.branch[i]) == (zero, open_, branch)


A_P = [0.95, 0.93, 0.67, 0.64, 0.67, 0.4, 0.17, 0.7, 0.52]
A_Y = [0, 0, 0, 0, 0, 1, 1, 0, 1]
C_P = [0.29, 0.09, 0.06, 0.78, 0.87, 0.6, 0.71, 0.54, 0.89, 0.78]
C_Y = [1, 1, 0, 0, 1, 1, 0, 1, 1, 1]
D_P = [0.39, 0.9, 0.37, 0.44, 0.32, 0.93]
D_Y = [0, 1, 0, 0, 0, 1]


@pytest.mark.parametrize("p,y,B,alpha,branch,zero,open_", [
    (A_P, A_Y, 2, 0.3, 1, False, False),
    (A_P, A_Y, 2, 0.2, 3, False, False),
    (A_P, A_Y, 2, 0.05, 2, False, False),
    (C_P, C_Y, 2, 0.3, 2, False, True),
    (C_P, C_Y, 1, 0.05, 2, True, False),
    (D_P, D_Y, 2, 0.05, 3, True, False),
])
def test_small_data_cases(p, y, B, alpha, branch, zero, open_):
    p, y = np.array(p), np.array(y)
    t, _, s1, _ = slow_estimates(p[:, None], (y - p)[:, None], B)
    n = len(p)
    se = np.sqrt(s1 / n)
    threshold = stats.norm.ppf(1 - alpha) * np.sqrt(1 / 15) / (n * np.sqrt(1 / B))
    lo, hi, exp_zero, exp_open, exp_branch = expected_interval(t, se, threshold, alpha)
    res = ct.calib_ci(y=y, probs=p, n_bins=B, alpha=alpha)
    assert (exp_branch, exp_zero, exp_open) == (branch, zero, open_)  # the case is the intended one
    assert (res.ci_branch, res.contains_zero, res.ci_lower_open) == (branch, zero, open_)
    assert_allclose([res.ci_lower, res.ci_upper], [lo, hi], rtol=1e-10, atol=1e-15)
    ci = res.conf_int()
    assert tuple(ci) == (res.ci_lower, res.ci_upper) and ci.lower_open == open_
    ece = res.conf_int(scale="ece")
    assert_allclose(tuple(ece), (np.sqrt(lo), np.sqrt(hi)), rtol=1e-10)
    text = str(res.summary())
    if open_:
        assert "open at 0" in text
    if zero:
        assert "no evidence of miscalibration" in text


def test_conf_int_other_alpha_recomputed():
    res = ct.calib_ci(y=A_Y, probs=A_P, n_bins=2, alpha=0.05)
    other = ct.calib_ci(y=A_Y, probs=A_P, n_bins=2, alpha=0.3)
    ci = res.conf_int(alpha=0.3)
    assert_allclose(tuple(ci), (other.ci_lower, other.ci_upper), rtol=1e-14)
    assert ci.level == pytest.approx(0.7)


@pytest.mark.parametrize("alpha", [0, 1, -0.1, 1.5, float("nan")])
def test_bad_alpha(alpha):
    with pytest.raises(ValueError, match="alpha"):
        check_alpha(alpha)
    with pytest.raises(ValueError, match="alpha"):
        ct.calib_ci(y=A_Y, probs=A_P, alpha=alpha)


def test_alpha_type():
    with pytest.raises(TypeError, match="alpha"):
        ct.calib_ci(y=A_Y, probs=A_P, alpha="0.05")


def test_scale_argument():
    res = ct.calib_ci(y=A_Y, probs=A_P, n_bins=2)
    with pytest.raises(ValueError, match="scale"):
        res.conf_int(scale="log")


def test_normal_isf_is_scipys_quantile():
    from calibtest.core.intervals import normal_isf
    for p in (0.1, 0.05, 0.025, 1e-6, 0.5, 0.9):
        assert normal_isf(p) == float(stats.norm.isf(p))
        assert normal_isf(p) == normal_isf(p)   # cached: the same double again
    # R: print(qnorm(0.05, lower.tail = FALSE), digits = 17) -> 1.6448536269514726
    assert normal_isf(0.05) == pytest.approx(1.6448536269514726, rel=1e-15)
