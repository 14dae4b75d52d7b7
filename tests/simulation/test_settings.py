"""Tests of calibtest.simulation: the paper's three data-generating settings and their truth.

Every reference number is derived here independently of the module's code:

* closed forms (beta = 0, -1, 1 in settings 1-2; moments of Beta(5, 1/2));
* composite Simpson on the substitution s = sin^2(pi v / 2), a different rule
  and a different change of variables from the module's adaptive quad;
* mpmath tanh-sinh quadrature at 30 digits (skipped if mpmath is absent),
  including top-1 ECE^2 integrated against the density of the confidence
  C = max(s, 1 - s) with P(correct | C) derived from the generative story
  without the symmetry argument the module uses;
* Monte Carlo from the generators, with the conditional probability
  p_beta(z) = 1 / (1 + ((1 - z) / z)^beta) written here in power form
  (the module uses expit(beta * logit)), tolerance 4 Monte Carlo s.e.;
* binned chi-square checks that the labels follow the stated conditional
  probabilities, with a check that the same statistic rejects a wrong beta.
"""
from fractions import Fraction

import numpy as np
import pytest
from scipy import special, stats
from scipy.integrate import simpson

from calibtest.simulation.settings import (
    SimulatedData,
    paper_betas,
    setting1,
    setting2,
    setting3,
    true_ece_sq,
)

A, B = 5.0, 0.5  # Beta law of s in setting 2
GENERATORS = {1: setting1, 2: setting2, 3: setting3}


def p_true(z, beta):
    """P(class holding z is the label | z) in power form, the test's own implementation."""
    z = np.asarray(z, dtype=float)
    with np.errstate(divide="ignore", over="ignore"):
        return 1.0 / (1.0 + ((1.0 - z) / z) ** beta)


# ---------------------------------------------------------------------------
# closed forms


def _beta_moments():
    a, b = Fraction(5), Fraction(1, 2)
    mean = a / (a + b)
    var = a * b / ((a + b) ** 2 * (a + b + 1))
    return mean, var


def test_closed_forms_settings_1_2():
    # beta = 0: p = 1/2, ECE^2 = E(1/2 - s)^2; beta = -1: p(z) = 1 - z, ECE^2 = E(1 - 2s)^2.
    mean, var = _beta_moments()
    expected = {
        (1, 0.0): Fraction(1, 12),   # int_0^1 (1/2 - z)^2 dz
        (1, -1.0): Fraction(1, 3),   # int_0^1 (1 - 2z)^2 dz
        (2, 0.0): var + (mean - Fraction(1, 2)) ** 2,
        (2, -1.0): 4 * var + (1 - 2 * mean) ** 2,
    }
    for (setting, beta), val in expected.items():
        got = true_ece_sq(setting, beta, "binary")
        assert got == pytest.approx(float(val), rel=1e-13, abs=0), (setting, beta)
        assert true_ece_sq(setting, beta, "top1") == pytest.approx(float(val), rel=1e-13)
        assert true_ece_sq(setting, beta, "full") == pytest.approx(2 * float(val), rel=1e-13)


@pytest.mark.parametrize("setting", [1, 2])
@pytest.mark.parametrize("target", ["binary", "top1", "full"])
def test_calibrated_beta_one_is_exactly_zero(setting, target):
    assert true_ece_sq(setting, 1.0, target) == 0.0
    assert true_ece_sq(setting, 1, target) == 0.0


@pytest.mark.parametrize("target", ["top1", "top2", "full"])
def test_setting3_calibrated_is_exactly_zero(target):
    assert true_ece_sq(3, 0.0, target) == 0.0


def test_setting3_exact_values():
    # The gap vector given Z is (-beta, +beta) on (r1, r2) and 0 elsewhere.
    for beta in paper_betas(3):
        assert true_ece_sq(3, beta, "top1") == pytest.approx(beta**2, rel=1e-15, abs=0)
        assert true_ece_sq(3, beta, "top2") == pytest.approx(2 * beta**2, rel=1e-15, abs=0)
        assert true_ece_sq(3, beta, "full") == pytest.approx(2 * beta**2, rel=1e-15, abs=0)


# ---------------------------------------------------------------------------
# independent numerical integration


def _simpson_binary(setting, beta, n_int=2**16):
    """E (p_beta(s) - s)^2 by composite Simpson on s = sin^2(pi v / 2).

    ds = (pi/2) sin(pi v) dv, and for Beta(5, 1/2) the density times ds is
    pi sin^9(pi v / 2) dv / B(5, 1/2), smooth at both ends.  Near s = 1 the gap
    is formed as (1 - s) - (1 - p) with 1 - s = cos^2(pi v / 2) computed
    directly, so no precision is lost to rounding s to 1.
    """
    v = np.linspace(0.0, 1.0, n_int + 1)
    s = np.sin(np.pi * v / 2) ** 2
    r = np.cos(np.pi * v / 2) ** 2
    p = p_true(s, beta)
    gap = np.where(s > 0.5, r - (1.0 - p), p - s)
    if setting == 1:
        h = gap**2 * (np.pi / 2) * np.sin(np.pi * v)
    else:
        h = gap**2 * np.pi * np.sin(np.pi * v / 2) ** 9 / special.beta(A, B)
    h[~np.isfinite(h)] = 0.0  # 0 * inf at v = 0 where the Jacobian vanishes
    return simpson(h, x=v)


@pytest.mark.parametrize("beta", [0.05, 0.25, 0.5, 0.75, 1.5, 2.0, -0.5])
def test_setting1_binary_by_simpson(beta):
    # Simpson error here is below 2e-12 (checked against 2^18 points).
    assert true_ece_sq(1, beta, "binary") == pytest.approx(_simpson_binary(1, beta), abs=1e-11)


@pytest.mark.parametrize("beta", [0.25, 0.5, 0.75, 1.5, 2.0, -0.5])
def test_setting2_binary_by_simpson(beta):
    # For beta < 1/4 the integrand ~ (1 - v)^(4 beta) is too rough for Simpson;
    # small beta is covered by the mpmath test below.
    assert true_ece_sq(2, beta, "binary") == pytest.approx(_simpson_binary(2, beta), abs=1e-11)


@pytest.mark.parametrize("beta", [0.1, 0.25, 0.5, 0.8, 3.0])
def test_setting1_reciprocal_beta_symmetry(beta):
    # For uniform Z_1 and any increasing bijection f of [0, 1],
    # int (f - z)^2 (1 - f') dz = [-(f - z)^3 / 3]_0^1 = 0, so the ECE^2 of f and
    # of its inverse agree; the inverse of p_beta is p_{1/beta}.
    assert true_ece_sq(1, beta, "binary") == pytest.approx(
        true_ece_sq(1, 1.0 / beta, "binary"), rel=1e-11, abs=1e-15
    )


def test_decreasing_on_the_paper_grid():
    # p_beta moves monotonically towards the diagonal as beta -> 1 from below.
    for setting in (1, 2):
        vals = np.array([true_ece_sq(setting, b, "binary") for b in paper_betas(setting)])
        assert np.all(np.diff(vals) < 0)
        assert vals[-1] == 0.0


@pytest.fixture
def mp():
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(30):
        yield mpmath


def _mp_p(mp, z, beta):
    if z == 0:
        return mp.mpf(0) if beta > 0 else (mp.mpf(1) if beta < 0 else mp.mpf(1) / 2)
    return 1 / (1 + ((1 - z) / z) ** beta)


def _mp_density(mp, setting):
    if setting == 1:
        return lambda s: mp.mpf(1)
    norm = mp.beta(A, B)
    return lambda s: s ** (A - 1) * (1 - s) ** (B - 1) / norm


@pytest.mark.parametrize("setting", [1, 2])
@pytest.mark.parametrize("beta", [0.0, 0.05, 0.2, 0.5, 0.95, 2.0])
def test_binary_against_mpmath(mp, setting, beta):
    b = mp.mpf(beta)
    f = _mp_density(mp, setting)
    ref = mp.quad(lambda s: (_mp_p(mp, s, b) - s) ** 2 * f(s), [0, 0.5, 1])
    assert true_ece_sq(setting, beta, "binary") == pytest.approx(float(ref), abs=1e-13, rel=1e-12)
    assert true_ece_sq(setting, beta, "full") == pytest.approx(2 * float(ref), abs=2e-13, rel=1e-12)


@pytest.mark.parametrize("setting", [1, 2])
@pytest.mark.parametrize("beta", [0.0, 0.05, 0.3, 0.7])
def test_top1_against_confidence_density(mp, setting, beta):
    """Top-1 ECE^2 as an integral over the confidence C = max(s, 1 - s).

    Given C = c in (1/2, 1]: either s = c (density f(c)); the class holding
    s is predicted and is correct with probability p(c); or s = 1 - c
    (density f(1 - c)); the other class is predicted and is correct with
    probability 1 - p(1 - c).  Hence f_C(c) = f(c) + f(1 - c) and
    P(correct | C = c) = [f(c) p(c) + f(1 - c) (1 - p(1 - c))] / f_C(c).
    Neither the symmetry p(1 - c) = 1 - p(c) nor the module's formula is used.
    """
    b = mp.mpf(beta)
    f = _mp_density(mp, setting)

    def integrand(c):
        w1, w2 = f(c), f(1 - c)
        pc = (w1 * _mp_p(mp, c, b) + w2 * (1 - _mp_p(mp, 1 - c, b))) / (w1 + w2)
        return (pc - c) ** 2 * (w1 + w2)

    ref = mp.quad(integrand, [0.5, 1])
    assert true_ece_sq(setting, beta, "top1") == pytest.approx(float(ref), abs=1e-13, rel=1e-12)


# ---------------------------------------------------------------------------
# Monte Carlo from the generators

N_MC = 2_000_000


def _mc_check(h):
    mean = h.mean()
    se = h.std(ddof=1) / np.sqrt(h.size)
    return mean, se


@pytest.mark.parametrize("setting", [1, 2])
@pytest.mark.parametrize("beta", [0.0, 0.5, 0.9, 2.0])
@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_monte_carlo_settings_1_2(setting, beta):
    d = GENERATORS[setting](N_MC, beta, rng=20240 + setting)
    z1 = d.probs[:, 0]
    gap1 = p_true(z1, beta) - z1            # E[Y_1 | Z] - Z_1
    gap_top = p_true(d.confidence, beta) - d.confidence  # E[correct | conf] - conf
    samples = {
        "binary": gap1**2,
        "top1": gap_top**2,
        "full": gap1**2 + (-gap1) ** 2,     # ||E[Y | Z] - Z||^2 over both classes
    }
    for target, h in samples.items():
        truth = true_ece_sq(setting, beta, target)
        mean, se = _mc_check(h)
        assert abs(mean - truth) < 4 * se, (target, mean, truth, se)


@pytest.mark.parametrize("beta", [0.0, 0.05, 0.1])
@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_monte_carlo_setting3_from_labels(beta):
    """Top-2 and top-1 ECE^2 estimated from the labels, without the known gap.

    With U = (Y_r1 - Z_(1), Y_r2 - Z_(2)), the gap E[U | Z_(1:2)] is claimed
    constant (checked in the binned test), so ECE^2 = ||E U||^2, estimated
    without bias by the U-statistic (||sum U||^2 - sum ||U||^2) / (n (n-1)).
    Its s.e. is sqrt(4 mu' S mu / n + 2 tr(S^2) / n^2) (Hoeffding, kernel
    x'y; S = Cov U, mu = E U, both estimated), tolerance 4 s.e.
    """
    d = setting3(N_MC // 2, beta, rng=77)
    order = np.argsort(-d.probs, axis=1, kind="stable")
    rows = np.arange(d.n)
    u = np.column_stack([
        (d.labels == order[:, j]) - d.probs[rows, order[:, j]] for j in (0, 1)
    ])
    n = d.n
    for dims, target in (([0, 1], "top2"), ([0], "top1")):
        x = u[:, dims]
        total = x.sum(axis=0)
        est = (total @ total - np.sum(x * x)) / (n * (n - 1))
        mu = x.mean(axis=0)
        cov = np.atleast_2d(np.cov(x, rowvar=False))
        se = np.sqrt(4 * mu @ cov @ mu / n + 2 * np.trace(cov @ cov) / n**2)
        assert abs(est - true_ece_sq(3, beta, target)) < 4 * se, (target, est, se)
    # and the gap vector itself is (-beta, +beta)
    for j, target in ((0, -beta), (1, beta)):
        mean, se = _mc_check(u[:, j])
        assert abs(mean - target) < 4 * se


# ---------------------------------------------------------------------------
# label frequencies against the stated conditional probabilities


def _binned_chi2(x, y, p, n_bins=20):
    """Sum over quantile bins of x of (sum y - sum p)^2 / sum p(1-p); ~ chi2(n_bins)."""
    edges = np.quantile(x, np.linspace(0, 1, n_bins + 1))
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, n_bins - 1)
    obs = np.bincount(idx, weights=y, minlength=n_bins)
    exp = np.bincount(idx, weights=p, minlength=n_bins)
    var = np.bincount(idx, weights=p * (1 - p), minlength=n_bins)
    keep = var > 0
    stat = np.sum((obs[keep] - exp[keep]) ** 2 / var[keep])
    return stats.chi2.sf(stat, keep.sum())


# Seeds fixed; the null p-value must exceed 1e-3, and a beta off by 0.05
# (0.02 in setting 3) must be rejected at 1e-6, which shows the check has power.
@pytest.mark.parametrize("setting", [1, 2])
def test_label_frequencies_settings_1_2(setting):
    beta, wrong = 0.5, 0.55
    d = GENERATORS[setting](400_000, beta, rng=5 + setting)
    z1 = d.probs[:, 0]
    y1 = (d.labels == 0).astype(float)
    assert _binned_chi2(z1, y1, p_true(z1, beta)) > 1e-3
    assert _binned_chi2(z1, y1, p_true(z1, wrong)) < 1e-6
    # the top-1 view: P(correct | conf) = p_beta(conf)
    c = d.confidence
    assert _binned_chi2(c, d.correct.astype(float), p_true(c, beta)) > 1e-3
    assert _binned_chi2(c, d.correct.astype(float), p_true(c, wrong)) < 1e-6


def test_label_frequencies_setting3():
    beta = 0.06
    d = setting3(400_000, beta, rng=11)
    order = np.argsort(-d.probs, axis=1, kind="stable")
    rows = np.arange(d.n)
    z_sorted = d.probs[rows[:, None], order]
    hit = d.labels[:, None] == order  # hit[:, j]: label is the class of rank j
    shift = {0: -beta, 1: beta}
    for j in range(4):  # ranks 1-4; binned by Z_(1)
        p = z_sorted[:, j] + shift.get(j, 0.0)
        assert _binned_chi2(z_sorted[:, 0], hit[:, j].astype(float), p) > 1e-3, j
    p_wrong = z_sorted[:, 0] - (beta - 0.02)
    assert _binned_chi2(z_sorted[:, 0], hit[:, 0].astype(float), p_wrong) < 1e-6


def test_prediction_distributions():
    # KS tests (fixed seeds; p > 1e-3) of the laws of the predictions.
    n = 200_000
    assert stats.kstest(setting1(n, 0.3, rng=1).probs[:, 0], "uniform").pvalue > 1e-3
    d = setting2(n, 0.3, rng=2)
    F = stats.beta(A, B).cdf
    # C = max(s, 1 - s): P(C <= c) = F(c) - F(1 - c) for c >= 1/2
    assert stats.kstest(d.confidence, lambda c: F(c) - F(1 - c)).pvalue > 1e-3
    # Z_1 = s or 1 - s with probability 1/2 each
    assert stats.kstest(d.probs[:, 0], lambda z: 0.5 * F(z) + 0.5 * (1 - F(1 - z))).pvalue > 1e-3
    d3 = setting3(n, 0.05, rng=3)
    for j in (0, 9):  # Dirichlet(1, ..., 1) marginals are Beta(1, 9)
        assert stats.kstest(d3.probs[:, j], stats.beta(1, 9).cdf).pvalue > 1e-3
    assert d3.confidence.min() >= 0.1 - 1e-15


# ---------------------------------------------------------------------------
# structure, edge cases, reproducibility


@pytest.mark.parametrize("setting", [1, 2, 3])
def test_structure(setting):
    beta = {1: 0.4, 2: 0.4, 3: 0.1}[setting]
    d = GENERATORS[setting](10_000, beta, rng=0)
    k = {1: 2, 2: 2, 3: 10}[setting]
    assert isinstance(d, SimulatedData)
    assert d.setting == setting and d.beta == beta and d.n == 10_000 and d.n_classes == k
    assert d.probs.shape == (10_000, k) and d.probs.dtype == np.float64
    assert np.all(d.probs >= 0) and np.all(d.probs <= 1)
    np.testing.assert_allclose(d.probs.sum(axis=1), 1.0, rtol=0, atol=1e-14)
    assert d.labels.dtype == np.int64 and d.labels.min() >= 0 and d.labels.max() <= k - 1
    np.testing.assert_array_equal(d.confidence, d.probs.max(axis=1))
    np.testing.assert_array_equal(d.correct, (d.labels == d.probs.argmax(axis=1)).astype(int))
    with pytest.raises(ValueError):
        d.probs[0, 0] = 0.5  # read-only
    with pytest.raises(AttributeError):
        d.beta = 2.0  # frozen


def test_ties_go_to_lowest_index():
    d = SimulatedData(np.array([[0.5, 0.5], [0.3, 0.7]]), np.array([0, 0]), setting=1, beta=0.0)
    np.testing.assert_array_equal(d.confidence, [0.5, 0.7])
    np.testing.assert_array_equal(d.correct, [1, 0])
    d3 = SimulatedData(np.array([[0.4, 0.2, 0.4]]), np.array([2]), setting=3, beta=0.0)
    assert d3.correct[0] == 0


class _GeneratorWithUnitDraws(np.random.Generator):
    """A Generator whose Beta draws include exactly 1.0 and 0.0 (both occur in float64)."""

    def beta(self, a, b, size=None):
        out = super().beta(a, b, size=size)
        out[:3] = [1.0, 0.0, 1.0]
        return out


@pytest.mark.parametrize("beta", [-0.7, 0.0, 0.05, 0.5, 1.0, 3.0])
def test_setting2_draws_at_the_endpoints(beta):
    import warnings

    gen = _GeneratorWithUnitDraws(np.random.PCG64(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = setting2(1000, beta, rng=gen)
    assert np.all(np.isfinite(d.probs))
    s_rows = np.sort(d.probs[:3], axis=1)
    np.testing.assert_array_equal(s_rows, [[0.0, 1.0]] * 3)

    # Every s = 1: the holder of s is predicted (confidence 1) and is the label
    # with probability p_beta(1) = 1 (beta > 0), 1/2 (beta = 0) or 0 (beta < 0).
    class AllOnes(np.random.Generator):
        def beta(self, a, b, size=None):
            return np.ones(size)

    d1 = setting2(20_000, beta, rng=AllOnes(np.random.PCG64(4)))
    rate = d1.correct.mean()  # holder of s = 1 is the predicted class
    expected = 1.0 if beta > 0 else (0.0 if beta < 0 else 0.5)
    assert abs(rate - expected) <= 4 * np.sqrt(0.25 / d1.n)
    if beta != 0:
        assert rate == expected


@pytest.mark.parametrize("setting", [1, 2, 3])
def test_same_seed_same_data(setting):
    beta = 0.05
    a = GENERATORS[setting](500, beta, rng=123)
    b = GENERATORS[setting](500, beta, rng=123)
    c = GENERATORS[setting](500, beta, rng=np.random.default_rng(123))
    e = GENERATORS[setting](500, beta, rng=124)
    for x in (b, c):
        np.testing.assert_array_equal(a.probs, x.probs)
        np.testing.assert_array_equal(a.labels, x.labels)
    assert not np.array_equal(a.probs, e.probs)


def test_generator_state_advances():
    g = np.random.default_rng(9)
    a, b = setting1(100, 0.5, rng=g), setting1(100, 0.5, rng=g)
    assert not np.array_equal(a.probs, b.probs)


@pytest.mark.parametrize("setting", [1, 2, 3])
@pytest.mark.parametrize("bad_n", [0, -5, 2.5, 10.0, "10", None, True])
def test_bad_n(setting, bad_n):
    with pytest.raises(ValueError, match=r"\bn\b"):
        GENERATORS[setting](bad_n, 0.05, rng=0)


@pytest.mark.parametrize("setting", [1, 2, 3])
@pytest.mark.parametrize("bad_beta", [np.nan, np.inf, -np.inf, "0.5", None, True, [0.1]])
def test_bad_beta(setting, bad_beta):
    with pytest.raises(ValueError, match="beta"):
        GENERATORS[setting](10, bad_beta, rng=0)


@pytest.mark.parametrize("bad_beta", [-1e-9, -0.01, 0.1000001, 0.5])
def test_setting3_beta_range(bad_beta):
    with pytest.raises(ValueError, match="beta"):
        setting3(10, bad_beta, rng=0)
    with pytest.raises(ValueError, match="beta"):
        true_ece_sq(3, bad_beta, "top2")


def test_setting3_beta_range_endpoints_work():
    for beta in (0.0, 0.1):
        d = setting3(50_000, beta, rng=1)
        assert d.labels.min() >= 0 and d.labels.max() <= 9


def test_true_ece_sq_bad_arguments():
    with pytest.raises(ValueError, match="target"):
        true_ece_sq(1, 0.5, "top2")
    with pytest.raises(ValueError, match="target"):
        true_ece_sq(3, 0.05, "binary")
    with pytest.raises(ValueError, match="target"):
        true_ece_sq(2, 0.5, "TOP1")
    for bad in (0, 4, "1", 1.0, None):
        with pytest.raises(ValueError, match="setting"):
            true_ece_sq(bad, 0.5, "top1")
    with pytest.raises(ValueError, match="beta"):
        true_ece_sq(1, np.nan, "binary")
    with pytest.raises(ValueError, match="setting"):
        paper_betas(0)


def test_paper_betas():
    g12, g3 = paper_betas(1), paper_betas(3)
    np.testing.assert_array_equal(paper_betas(2), g12)
    assert g12.shape == g3.shape == (21,)
    assert g12.dtype == np.float64
    # the float64 nearest each decimal, e.g. 0.15 and not 0.15000000000000002
    assert list(g12) == [float(f"{0.05 * i:.2f}") for i in range(21)]
    assert list(g3) == [float(f"{0.005 * i:.3f}") for i in range(21)]
    assert g12[3] == 0.15 and g12[-1] == 1.0 and g3[-1] == 0.1 and g3[7] == 0.035
    # every grid value is accepted by the generators and the truth
    for b in g3:
        setting3(5, b, rng=0)
        true_ece_sq(3, b, "top2")
