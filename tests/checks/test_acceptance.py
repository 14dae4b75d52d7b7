"""Tests of calibtest.checks.acceptance (margin test of the ECE; TOST of CITL, slope and O/E) and calibtest.core.margin.

Every value is recomputed here from its formula (the result's stored T, se and
variances; statsmodels' Logit for CITL and the slope; the log-scale O/E interval
of Debray et al. 2017 by hand) and the decisions are checked against the rule
"reject iff the bound lies within the limit iff p < alpha".
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, logit

import calibtest as ct
from calibtest.checks.acceptance import margin_null_variance
from calibtest.core.margin import margin_bound, tost


@pytest.fixture(scope="module")
def binary_rows():
    rng = np.random.default_rng(24)
    p = rng.beta(2, 5, 4000)
    y = rng.binomial(1, expit(0.2 + 0.9 * logit(p)))
    return p, y


@pytest.fixture(scope="module")
def result(binary_rows):
    p, y = binary_rows
    return ct.calib_ci(y=y, probs=p, rng=1)


# ----------------------------------------------------------------------------- margin test
def _hand_margin(T, se, v0, margin, alpha):
    t_pos = max(T, 0.0)
    se_m = math.sqrt(max(se * se, v0))
    upper_sq = t_pos + stats.norm.ppf(1 - alpha) * se_m
    return math.sqrt(upper_sq), (t_pos - margin**2) / se_m, stats.norm.cdf((t_pos - margin**2) / se_m)


@pytest.mark.parametrize("margin", [0.02, 0.04, 0.06, 0.1])
def test_margin_test_equals_the_hand_formula(result, margin):
    m = result.margin_test(margin)
    assert result.conditional is not None
    v0 = result.conditional.variance
    upper, stat, p = _hand_margin(result.estimate, result.se, v0, margin, result.alpha)
    assert m.upper == pytest.approx(upper, rel=1e-12)
    assert m.statistic == pytest.approx(stat, rel=1e-12)
    assert m.pvalue == pytest.approx(p, rel=1e-10, abs=1e-300)
    assert m.reject == (upper < margin)
    assert m.null_variance == v0 and m.null_variance_source.startswith("conditional")
    assert m.estimate == pytest.approx(math.sqrt(max(result.estimate, 0)))


def test_bound_pvalue_and_decision_agree(result):
    for margin in np.linspace(0.01, 0.12, 45):
        for alpha in (0.01, 0.05, 0.1, 0.2):
            m = result.margin_test(float(margin), alpha=alpha)
            assert m.reject == (m.upper < margin) == (m.pvalue < alpha)
    # the p-value is the smallest level at which it rejects
    m = result.margin_test(0.06)
    assert 0 < m.pvalue < 0.5
    assert result.margin_test(0.06, alpha=m.pvalue * 1.001).reject
    assert not result.margin_test(0.06, alpha=m.pvalue * 0.999).reject


def test_the_bound_is_one_sided_and_tighter_than_the_interval(result):
    m = result.margin_test(0.05)
    # one-sided z_alpha < two-sided z_{alpha/2}: below the adjusted interval's upper end (same se when no floor)
    assert not m.floor_used
    assert m.upper < result.conf_int(scale="ece").upper
    assert m.upper == pytest.approx(result.conf_int(alpha=2 * result.alpha, scale="ece").upper, rel=1e-12)


def test_t_nonpositive_uses_the_floor():
    rng = np.random.default_rng(5)
    for seed in range(40):  # a calibrated model at small n: find a sample with T <= 0
        p = rng.beta(2, 5, 150)
        y = rng.binomial(1, p)
        res = ct.calib_ci(y=y, probs=p, rng=seed)
        if res.estimate <= 0:
            break
    assert res.estimate <= 0
    m = res.margin_test(0.05)
    v0 = res.conditional.variance
    z = stats.norm.ppf(0.95)
    assert m.upper_sq == pytest.approx(z * math.sqrt(max(res.se**2, v0)), rel=1e-12)
    assert m.upper_sq >= z * math.sqrt(v0) * (1 - 1e-12)
    # the engine: with sigma1 = 0 the floor alone sets the bound
    mb = margin_bound(-0.001, 0.0, v0, 0.05, 0.05)
    assert mb.upper_sq == pytest.approx(z * math.sqrt(v0), rel=1e-12)
    assert mb.se == pytest.approx(math.sqrt(v0))


def test_asymptotic_floor_without_a_conditional_part(binary_rows):
    p, y = binary_rows
    res = ct.calib_ci(y=y, probs=p, null="asymptotic")
    v0, source = margin_null_variance(res)
    if res.conditional is None:
        assert v0 == pytest.approx(res.sigma0_sq / (res.n**2 * res.bin_volume), rel=1e-15)
        assert source == "sigma0^2 / (n^2 w)"
    # from the bin sums alone (a file / Dask result holds no conditional part): sigma0^2 / (n^2 w)
    assert (1 / 15) / (res.n**2 / res.n_bins) == pytest.approx(res.sigma0_sq / (res.n**2 * res.bin_volume))


def test_weighted_result_uses_its_own_se_and_null_variance(binary_rows):
    p, y = binary_rows
    w = np.random.default_rng(3).uniform(0.5, 2.0, p.size)
    res = ct.calib_ci(y=y, probs=p, weights=w)
    m = res.margin_test(0.06)
    v0 = res.weighting.null_variance
    upper, _, pval = _hand_margin(res.estimate, res.se, v0, 0.06, res.alpha)
    assert m.upper == pytest.approx(upper, rel=1e-12) and m.pvalue == pytest.approx(pval, rel=1e-10)
    assert m.null_variance_source == "weighted V_0"


def test_resampling_result_uses_the_normal_bound(binary_rows, result):
    p, y = binary_rows
    res = ct.calib_ci(y=y, probs=p, method="bootstrap", n_resamples=50, rng=1)
    m, m0 = res.margin_test(0.05), result.margin_test(0.05)
    assert res.estimate == result.estimate and res.se == result.se
    assert m.upper == m0.upper and m.method == "bootstrap"
    assert any("bootstrap" in note for note in m.notes())


def test_top1_and_topk_results():
    rng = np.random.default_rng(8)
    P = rng.dirichlet(np.full(5, 0.6), 3000)
    y = np.array([rng.choice(5, p=row) for row in P])
    for k in (1, 2):
        res = ct.calib_ci(y=y, probs=P, k=k, rng=0)
        m = res.margin_test(0.08)
        v0, _ = margin_null_variance(res)
        upper, _, _ = _hand_margin(res.estimate, res.se, v0, 0.08, res.alpha)
        assert m.upper == pytest.approx(upper, rel=1e-12) and m.mode == res.mode


@pytest.mark.parametrize("bad", [0, -0.1, math.nan, math.inf])
def test_margin_must_be_positive_and_finite(result, bad):
    with pytest.raises((ValueError, TypeError), match="margin"):
        result.margin_test(bad)


@pytest.mark.parametrize("bad", ["0.05", True, None])
def test_margin_type(result, bad):
    with pytest.raises(TypeError, match="margin"):
        result.margin_test(bad)


def test_margin_alpha_checked(result):
    with pytest.raises(ValueError, match="alpha"):
        result.margin_test(0.05, alpha=1.5)
    with pytest.raises(TypeError, match="result"):
        ct.margin_test(object(), 0.05)


def test_margin_result_display(result):
    m = result.margin_test(0.05)
    text = str(m.summary())
    assert "upper bound" in text and "Notes:" in text
    d = m.to_dict()
    assert d["upper"] == m.upper and d["reject"] == m.reject and d["conclusion"] == m.conclusion()
    assert repr(m).startswith("<MarginTestResult margin=0.05")
    assert "<table" in m._repr_html_()
    with pytest.raises(ValueError, match="level"):
        m.summary(alpha=0.1)


def test_margin_bound_vectorised():
    T = np.array([-0.001, 0.0, 0.001, 0.004])
    mb = margin_bound(T, np.full(4, 0.0005), 1e-7, 0.05, 0.05)
    for i in range(4):
        one = margin_bound(T[i], 0.0005, 1e-7, 0.05, 0.05)
        assert one.upper == mb.upper[i] and one.reject == mb.reject[i]
    assert margin_bound(0.0, 0.0, 0.0, 0.05, 0.05).pvalue == 0.0  # no noise, T+ = 0 < margin^2


# ----------------------------------------------------------------------------- TOST
def _hand_tost(est, se, lo, hi, alpha):
    p_lo = stats.norm.sf((est - lo) / se)
    p_hi = stats.norm.cdf((est - hi) / se)
    z = stats.norm.ppf(1 - alpha)
    return max(p_lo, p_hi), (est - z * se, est + z * se)


def test_citl_against_statsmodels_logit(binary_rows):
    import statsmodels.api as sm

    p, y = binary_rows
    lp = logit(p)
    fit = sm.Logit(y, np.ones((p.size, 1)), offset=lp).fit(disp=0, tol=1e-12)
    est, se = float(fit.params[0]), float(fit.bse[0])
    vp = ct.val_prob(y=y, probs=p)
    r = ct.citl_test(vp, 0.25)
    pval, (lo, hi) = _hand_tost(est, se, -0.25, 0.25, 0.05)
    assert r.estimate == pytest.approx(est, abs=1e-7) and r.se == pytest.approx(se, rel=1e-6)
    assert r.pvalue == pytest.approx(pval, rel=1e-5)
    assert (r.ci_lower, r.ci_upper) == pytest.approx((lo, hi), abs=1e-6)
    assert r.reject == (-0.25 < lo and hi < 0.25) == (r.pvalue < 0.05)
    assert ct.citl_test(vp, (-0.25, 0.25)).pvalue == r.pvalue


def test_slope_against_statsmodels_logit(binary_rows, result):
    import statsmodels.api as sm

    p, y = binary_rows
    fit = sm.Logit(y, sm.add_constant(logit(p))).fit(disp=0, tol=1e-12)
    est, se = float(fit.params[1]), float(fit.bse[1])
    for limits in ((0.8, 1.25), (0.85, 1.0), (0.95, 1.5)):
        r = ct.slope_test(result, limits)  # from a binary calib_ci result: val_prob on its rows
        pval, (lo, hi) = _hand_tost(est, se, *limits, 0.05)
        assert r.estimate == pytest.approx(est, abs=1e-7)
        assert r.pvalue == pytest.approx(pval, rel=1e-5, abs=1e-12)
        assert r.reject == (limits[0] < lo and hi < limits[1])


def test_oe_log_scale_interval_by_hand(binary_rows, result):
    p, y = binary_rows
    O, E, n = y.sum(), p.sum(), p.size
    se = math.sqrt((1 - O / n) / O)
    r = ct.oe_test(result, (0.9, 1.1))
    z = stats.norm.ppf(0.95)
    assert r.estimate == pytest.approx(O / E, rel=1e-14) and r.se == pytest.approx(se, rel=1e-14)
    assert (r.ci_lower, r.ci_upper) == pytest.approx((O / E * math.exp(-z * se), O / E * math.exp(z * se)),
                                                      rel=1e-13)
    pval = max(stats.norm.sf((math.log(O / E) - math.log(0.9)) / se),
               stats.norm.cdf((math.log(O / E) - math.log(1.1)) / se))
    assert r.pvalue == pytest.approx(pval, rel=1e-12)
    assert r.reject == (0.9 < r.ci_lower and r.ci_upper < 1.1)
    r2 = ct.oe_test(probs=p, y=y, within=(0.9, 1.1))
    assert r2.pvalue == r.pvalue and r2.estimate == r.estimate


def test_tost_decision_matches_pvalue():
    for est in np.linspace(-0.5, 0.5, 41):
        for alpha in (0.025, 0.05, 0.1):
            tb = tost(float(est), 0.1, -0.3, 0.3, alpha)
            assert tb.reject == (tb.pvalue < alpha)


@pytest.mark.parametrize("within, exc", [((1.2, 0.8), ValueError), (0.9, TypeError), ((0, 1.2), ValueError),
                                         ("0.8,1.2", TypeError)])
def test_oe_limits_checked(result, within, exc):
    with pytest.raises(exc, match="within"):
        ct.oe_test(result, within)


def test_tost_inputs_checked(binary_rows):
    p, y = binary_rows
    vp = ct.val_prob(y=y, probs=p)
    with pytest.raises(ValueError, match="within"):
        ct.citl_test(vp, -0.1)
    with pytest.raises(TypeError, match="ValProbResult"):
        ct.slope_test(object(), (0.8, 1.2))
    with pytest.raises(ValueError, match="probs"):
        ct.oe_test(within=(0.8, 1.2), probs=p[:10], y=y[:9])
    with pytest.raises(ValueError, match="event"):
        ct.oe_test(within=(0.8, 1.2), probs=p[:10], y=np.zeros(10))


def test_tost_display(binary_rows):
    p, y = binary_rows
    r = ct.slope_test(ct.val_prob(y=y, probs=p), (0.8, 1.25))
    assert "Calibration slope" in str(r.summary())
    assert r.to_dict()["conclusion"] == r.conclusion()


# ----------------------------------------------------------------------------- planning
def test_margin_power_formula(binary_rows):
    """calib_power(margin=) at one n: P(T < T*) under the planner's shifted gamma, T* the root of the bound."""
    from calibtest.api import sample_size as pl
    from calibtest.core import power as pw
    from calibtest.core.conditional import shifted_gamma_sf
    p, _ = binary_rows
    n = 3000
    res = ct.calib_power(n, probs=p, margin=0.05)
    planner, _, _ = pl._common(pl._Anticipated(p, None, 0.0, 1.0, 1, None), 0.05, "auto", None, "analytic", 0.05)
    pb = planner.bins(planner.B(n))
    mean, var = pw.t_moments(n, pb)
    skew = pw.t_skewness(n, pb, var)
    s2, v0 = pw.expected_sigma1_sq(n, pb) / n, pw.null_variance(n, pb)
    # kappa by hand: 4/n times the tr(Sigma^2)-weighted mean of the bins' variance (1-d: Sigma_b itself)
    e2 = pw.count_moments(n, pb.pi)[1]
    sig = pb.sigma[:, 0, 0]
    kappa = 4.0 / n * np.sum(e2 * sig**2 * sig) / np.sum(e2 * sig**2)
    z = stats.norm.ppf(0.95)
    # T* by bisection on the bound's equation T+ + z sqrt(max(s2 + kappa (T - mean), v0)) = 0.05^2
    g = lambda t: max(t, 0) + z * math.sqrt(max(s2 + kappa * (t - mean), v0))
    lo, hi = -1.0, 0.05**2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if g(mid) < 0.05**2 else (lo, mid)
    assert res.power == pytest.approx(1 - shifted_gamma_sf(lo - mean, var, skew), rel=1e-9)
    assert res.to_dict()["margin"] == 0.05
    assert "ECE < 0.05" in str(res.summary())


def test_margin_sample_size_options(binary_rows):
    p, _ = binary_rows
    with pytest.raises(ValueError, match="power"):
        ct.calib_sample_size(probs=p, margin=0.05, ci_width=0.05)
    with pytest.raises(ValueError, match="margin"):
        ct.calib_sample_size(probs=p, margin=-0.05, power=0.8)
    r = ct.calib_sample_size(probs=p, margin=0.05, power=0.8)
    assert r.achieved_power >= 0.8
    assert ct.calib_power(r.n - 1, probs=p, margin=0.05).power < 0.8
    assert r.to_dict()["margin"] == 0.05


def test_margin_sample_size_by_simulation_smoke():
    """At the n calib_sample_size(margin=) returns, the real margin_test rejects about 80% of the time."""
    rng = np.random.default_rng(2024)
    pop = rng.beta(2, 5, 20000)
    plan = ct.calib_sample_size(probs=pop, margin=0.05, power=0.8)
    reps = 120
    hits = 0
    for i in range(reps):
        p = rng.beta(2, 5, plan.n)
        y = rng.binomial(1, p)
        hits += ct.calib_ci(y=y, probs=p, rng=i).margin_test(0.05).reject
    se = math.sqrt(0.8 * 0.2 / reps)
    assert abs(hits / reps - 0.8) <= 0.05 + 3 * se


def _margin_vignette():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "vignettes" / "margin_test.py"
    spec = importlib.util.spec_from_file_location("margin_vignette", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_vignette_size_smoke():
    """A few hundred studies of the vignette's binary design at ECE = margin (n = 3000).

    The tuned binned ECE is checked against a large sample binned by the planner
    (core.power), the mean of T against margin^2, and the rejection rate against
    alpha + 3 s.e.
    """
    from calibtest.core import power as pw
    from calibtest.core.binning import auto_n_bins
    vig = _margin_vignette()
    design = vig.DESIGNS[0]
    n, reps = 3000, 300
    B = auto_n_bins(n, 1)
    a = design.tune(design.margin, B)
    big = np.random.default_rng(1).beta(2, 5, 400_000)
    pb = pw.population_bins(big[:, None], design.truth(big, a)[:, None], B)
    assert math.sqrt(pw.binned_ece_sq(pb)) == pytest.approx(design.margin, rel=0.01)
    t, s1, vc = vig.simulate(design, a, n, reps, np.random.default_rng(2))
    assert abs(t.mean() - design.margin**2) < 4 * t.std() / math.sqrt(reps)
    rate = margin_bound(t, np.sqrt(s1 / n), vc, design.margin, 0.05).reject.mean()
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)
    assert vig.check_against_calib_ci(design, a, n, np.random.default_rng(3), reps=2) < 1e-12
