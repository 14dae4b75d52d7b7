"""Tests of calibtest.api.sample_size (power and sample size) and calibtest.core.power."""
from __future__ import annotations

import importlib.util
import inspect
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from calibtest.options import OptionError
from scipy.special import expit, logit

import calibtest as ct
from calibtest.api import sample_size as pl
from calibtest.core import power as pw
from calibtest.core.binning import auto_n_bins
from calibtest.core.null import sigma0_sq
from calibtest.display.summary import CalibSummary

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def beta_probs():
    return np.random.default_rng(11).beta(2, 5, 4000)


def _slow_pair_t(z, u, B):
    """T of eq. (6) by explicit loops over bins and ordered pairs of rows (1-d)."""
    n = len(z)
    bins = {}
    for i in range(n):
        bins.setdefault(min(int(math.floor(z[i] * B)), B), []).append(i)
    total = 0.0
    for rows in bins.values():
        c = len(rows)
        if c >= 2:
            total += sum(u[a] * u[b] for a in rows for b in rows if a != b) / (c - 1)
    return total / n


# ----------------------------------------------------------------------------- population quantities
def test_binned_ece_matches_loop_over_bins(beta_probs):
    """ECE^2_B: the vectorised bin sums against a loop over the bins' edges."""
    p = beta_probs
    c = expit(0.3 + 0.8 * logit(p))
    B = 17
    pb = pw.population_bins(p[:, None], c[:, None], B)
    slow = 0.0
    for b in range(B + 1):
        inside = (p >= b / B) & (p < (b + 1) / B) if b < B else p == 1.0
        if inside.any():
            slow += inside.mean() * np.mean(c[inside] - p[inside]) ** 2
    assert pw.binned_ece_sq(pb) == pytest.approx(slow, rel=1e-12)
    # the binned ECE never exceeds the continuous one (Jensen within each bin)
    assert pw.binned_ece_sq(pb) <= np.mean((c - p) ** 2)


def test_t_moments_exact_by_enumeration():
    """E T (two bins) and Var T (one bin) against enumeration of every study of n = 4 rows."""
    z = np.array([0.2, 0.3, 0.7])
    q = np.array([0.35, 0.3, 0.5])
    n = 4
    for B, check_var in ((2, False), (1, True)):
        pb = pw.population_bins(z[:, None], q[:, None], B)
        mean, var = pw.t_moments(n, pb)
        m1 = m2 = 0.0
        for idx in itertools.product(range(3), repeat=n):
            for y in itertools.product((0, 1), repeat=n):
                prob = (1 / 3) ** n * np.prod([q[i] if yy else 1 - q[i] for i, yy in zip(idx, y)])
                zz = z[list(idx)]
                t = _slow_pair_t(zz, np.array(y) - zz, B)
                m1 += prob * t
                m2 += prob * t * t
        assert mean == pytest.approx(m1, rel=1e-12)
        if check_var:
            assert var == pytest.approx(m2 - m1**2, rel=1e-12)


def test_count_moments_against_binomial_sums():
    """E[c; c>=2] and E[c/(c-1); c>=2]: closed form / delta method against direct binomial sums."""
    from scipy import stats
    n = 3000
    pi = np.array([1e-4, 0.003, 0.019, 0.05, 0.3])
    e1, e2 = pw.count_moments(n, pi)
    c = np.arange(0, n + 1)
    for j, p in enumerate(pi):
        pmf = stats.binom.pmf(c, n, p)
        keep = c >= 2
        assert e1[j] == pytest.approx(np.sum(pmf[keep] * c[keep]), rel=1e-10)
        assert e2[j] == pytest.approx(np.sum(pmf[keep] * c[keep] / (c[keep] - 1)), rel=1e-5)


def test_sigma1_population_matches_large_sample_plugin(beta_probs):
    """sigma1^2 and ECE^2_B of the population against calib_ci on one very large simulated study."""
    p = beta_probs
    c = expit(-0.3 + 0.7 * logit(p))
    B = 20
    pb = pw.population_bins(p[:, None], c[:, None], B)
    rng = np.random.default_rng(3)
    idx = rng.integers(0, p.size, 400_000)
    y = (rng.random(idx.size) < c[idx]).astype(int)
    res = ct.calib_ci(y=y, probs=p[idx], n_bins=B)
    assert res.sigma1_sq == pytest.approx(pw.population_sigma1_sq(pb), rel=0.05)
    assert res.estimate == pytest.approx(pw.binned_ece_sq(pb), rel=0.05)


def test_simulated_studies_equal_calib_ci(beta_probs):
    """The stacked simulation gives calib_ci's T and sigma1^2 on the same drawn studies."""
    p = beta_probs
    c = expit(0.3 + logit(p))
    n, B = 300, 19
    pb = pw.population_bins(p[:, None], c[:, None], B)
    t, s1 = pw.simulate_studies(p[:, None], c[:, None], pb.inverse, pb.pi.size, n, 3, np.random.default_rng(5))
    gen = np.random.default_rng(5)  # the same draws, in the engine's order
    idx = gen.integers(0, p.size, size=(3, n))
    u = gen.random((3, n))
    for s in range(3):
        res = ct.calib_ci(y=(u[s] < c[idx[s]]).astype(int), probs=p[idx[s]], n_bins=B)
        assert t[s] == pytest.approx(res.estimate, rel=1e-10, abs=1e-15)
        assert s1[s] == pytest.approx(res.sigma1_sq, rel=1e-10)


def test_calibrated_variance_is_sigma0_regime():
    """Calibrated model, every bin well filled: Var T -> sigma0^2 / (n^2 w) (eq. (12)), power -> alpha."""
    p = (np.arange(200_000) + 0.5) / 200_000  # uniform on [0, 1]
    n = 20_000
    B = auto_n_bins(n, 1)
    res = ct.calib_power(n, probs=p, null="asymptotic")  # the paper's threshold z_alpha sd
    assert res.t_mean == pytest.approx(0.0, abs=1e-15)
    assert res.t_sd**2 == pytest.approx(sigma0_sq("binary") * B / n**2, rel=0.01)
    # skewness of the degenerate part: 8 B int g^{3/2} / (2 B int g)^{3/2}, g = (z(1-z))^2
    g = 8 * B / 140 / (2 * B / 30) ** 1.5
    assert res.t_skewness == pytest.approx(g, rel=0.02)
    # size = P(shifted gamma >= z_alpha sd): Gamma(4/g^2) tail at 4/g^2 + 2 z_alpha / g
    from scipy import stats
    size = stats.gamma.sf(4 / g**2 + 2 * stats.norm.isf(0.05) / g, 4 / g**2)
    assert res.power == pytest.approx(size, abs=0.002)
    assert res.power > 0.05  # the right skew of T puts the size above alpha
    assert res.ece_sq_binned == 0.0


# ----------------------------------------------------------------------------- power
@pytest.mark.slow
@pytest.mark.parametrize("slope, intercept, n", [(0.8, 0.0, 1500), (1.0, 0.3, 400)])
def test_analytic_power_matches_simulation(beta_probs, slope, intercept, n):
    """Analytic power and width against 2000 simulated studies (tolerance: 3 MC s.e. + 0.025)."""
    an = ct.calib_power(n, probs=beta_probs, slope=slope, intercept=intercept, null="asymptotic")
    sim = ct.calib_power(n, probs=beta_probs, slope=slope, intercept=intercept, null="asymptotic",
                         method="simulation", n_sim=2000, rng=7)
    assert abs(an.power - sim.power) <= 3 * sim.monte_carlo.power_se + 0.025
    assert an.expected_width == pytest.approx(sim.expected_width, rel=0.06)
    assert sim.n_bins == an.n_bins == auto_n_bins(n, 1)


@pytest.mark.slow
def test_topk_moments_match_simulation():
    """Top-2 targets: analytic mean and sd of T against 3000 simulated studies."""
    P = np.random.default_rng(2).dirichlet(np.full(4, 0.5), 3000)
    an = ct.calib_power(800, probs=P, k=2, slope=0.7, null="asymptotic")
    sim = ct.calib_power(800, probs=P, k=2, slope=0.7, method="simulation", n_sim=3000, rng=1,
                          null="asymptotic")
    assert an.inputs.mode == "topk"
    assert an.n_bins == auto_n_bins(800, 2)
    z, q, data, _ = pl._population(pl._Anticipated(P, None, 0.0, 0.7, 2, None))
    pb = pw.population_bins(z, q, an.n_bins)
    t, _ = pw.simulate_studies(z, q, pb.inverse, pb.pi.size, 800, 3000, np.random.default_rng(4), want_sigma1=False)
    assert t.mean() == pytest.approx(an.t_mean, abs=4 * t.std() / math.sqrt(t.size))
    assert t.std() == pytest.approx(an.t_sd, rel=0.06)
    assert abs(an.power - sim.power) <= 3 * sim.monte_carlo.power_se + 0.025
    assert an.expected_width == pytest.approx(sim.expected_width, rel=0.06)


@pytest.mark.slow
def test_conditional_null_power_matches_calib_ci_simulation(beta_probs):
    """The data-dependent null: analytic threshold approximation against calib_ci(null='conditional')."""
    an = ct.calib_power(600, probs=beta_probs, intercept=0.3, null="conditional")
    sim = ct.calib_power(600, probs=beta_probs, intercept=0.3, null="conditional", method="simulation",
                         n_sim=300, rng=2)
    assert abs(an.power - sim.power) <= 3 * sim.monte_carlo.power_se + 0.03


@pytest.mark.slow
def test_default_null_analytic_power_matches_calib_ci_simulation(beta_probs):
    """Default null (conditional for a binary target): analytic power against 1500 per-study calib_ci runs.

    Tolerance: 3 Monte Carlo s.e. of the simulated power plus 0.01 for the approximation.
    """
    an = ct.calib_power(700, probs=beta_probs, intercept=0.3)
    assert an.inputs.null == "conditional"
    sim = ct.calib_power(700, probs=beta_probs, intercept=0.3, method="simulation", n_sim=1500, rng=17)
    assert sim.inputs.null == "conditional"
    assert 0.2 < sim.power < 0.8  # a point where power is informative, not saturated
    assert abs(an.power - sim.power) <= 3 * sim.monte_carlo.power_se + 0.01
    assert an.expected_width == pytest.approx(sim.expected_width, rel=0.05)


def test_power_curve_vectorised_equals_scalar_calls(beta_probs):
    ns = np.array([150, 700, 3000])
    curve = ct.calib_power(ns, probs=beta_probs, slope=0.8)
    assert curve.power.shape == (3,)
    for i, n in enumerate(ns):
        one = ct.calib_power(int(n), probs=beta_probs, slope=0.8)
        assert one.power == curve.power[i]
        assert one.n_bins == curve.n_bins[i] == auto_n_bins(int(n), 1)
    assert np.all(np.diff(curve.power) > 0)
    with pytest.raises(ValueError):
        curve.power[0] = 1.0  # read-only


def test_logistic_and_callable_agree(beta_probs):
    a = ct.calib_power(900, probs=beta_probs, intercept=-0.2, slope=1.3)
    b = ct.calib_power(900, probs=beta_probs, calibration=lambda p: expit(-0.2 + 1.3 * logit(p)))
    assert a.power == pytest.approx(b.power, rel=1e-12)
    assert b.inputs.miscalibration["form"] == "callable"


def test_null_default_follows_calib_ci(beta_probs):
    """No null given: the plan uses calib_ci's default, resolved as calib_ci resolves it for rows in memory."""
    default = inspect.signature(ct.calib_ci).parameters["null"].default
    assert default == "auto"
    res = ct.calib_power(500, probs=beta_probs, slope=0.8)
    # binary: one binned coordinate, so calib_ci's "auto" is the conditional null
    assert res.inputs.null == "conditional"
    direct = ct.calib_power(500, probs=beta_probs, slope=0.8, null="conditional")
    assert res.power == direct.power
    # full calibration over the top-5 classes of K = 6 has d = 5 > 4: "auto" is the asymptotic null
    probs = np.random.default_rng(3).dirichlet(np.ones(6), 400)
    assert ct.calib_power(500, probs=probs, k=5).inputs.null == "asymptotic"


def test_top1_confidences(beta_probs):
    conf = 1.0 - 0.9 * np.random.default_rng(1).beta(1, 12, 3000)
    res = ct.calib_power(2000, probs=conf, n_classes=10, slope=0.7)
    assert res.inputs.mode == "top1"
    assert res.sigma0_sq == sigma0_sq("top1", 10)
    with pytest.raises(ValueError, match="1/K"):
        ct.calib_power(2000, probs=beta_probs, n_classes=2, slope=0.7)


def test_power_result_display(beta_probs):
    res = ct.calib_power([300, 900], probs=beta_probs, slope=0.8)
    assert isinstance(res.summary(), CalibSummary)
    d = json.loads(json.dumps(res.to_dict()))
    assert d["n"] == [300, 900]
    assert d["inputs"]["miscalibration"] == {"form": "logistic", "intercept": 0.0, "slope": 0.8}
    assert "power" in repr(ct.calib_power(300, probs=beta_probs, slope=0.8))


def test_sparse_bins_warn():
    rare = np.random.default_rng(0).beta(0.5, 10, 3000)
    with pytest.warns(UserWarning, match="simulation"):
        res = ct.calib_power(60, probs=rare, slope=0.7)
    assert not res.reliable


# ----------------------------------------------------------------------------- sample size
def test_sample_size_power_rule(beta_probs):
    res = ct.calib_sample_size(probs=beta_probs, slope=0.8, power=0.8)
    at = ct.calib_power(res.n, probs=beta_probs, slope=0.8)
    before = ct.calib_power(res.n - 1, probs=beta_probs, slope=0.8)
    assert at.power >= 0.8 > before.power
    assert res.achieved_power == at.power
    grid = res.curve[res.curve["n"] >= res.n]
    assert (grid["power"] >= 0.8).all()
    assert res.n_bins == auto_n_bins(res.n, 1)


def test_sample_size_target_met_at_n_min(beta_probs):
    res = ct.calib_sample_size(probs=beta_probs, slope=0.3, power=0.8, n_min=2000, n_max=20000, n_grid=20)
    assert res.n == 2000
    assert ct.calib_power(2000, probs=beta_probs, slope=0.3).power >= 0.8
    assert "n_min" in res.rule


def test_sample_size_width_rule(beta_probs):
    res = ct.calib_sample_size(probs=beta_probs, intercept=0.3, ci_width=0.05)
    assert ct.calib_power(res.n, probs=beta_probs, intercept=0.3).expected_width <= 0.05
    assert ct.calib_power(res.n - 1, probs=beta_probs, intercept=0.3).expected_width > 0.05
    d = json.loads(json.dumps(res.to_dict()))
    assert d["target"] == "ci_width" and d["inputs"]["prediction_summary"]["median"] > 0
    assert isinstance(res.summary(), CalibSummary)


def test_sample_size_plot(beta_probs):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = ct.calib_sample_size(probs=beta_probs, slope=0.8, power=0.8, n_grid=40).plot()
    assert isinstance(fig, matplotlib.figure.Figure)
    plt.close(fig)


@pytest.mark.slow
def test_sample_size_simulation_near_analytic(beta_probs):
    an = ct.calib_sample_size(probs=beta_probs, intercept=0.3, power=0.8)
    sim = ct.calib_sample_size(probs=beta_probs, intercept=0.3, power=0.8, method="simulation", n_sim=1000, rng=3)
    assert sim.monte_carlo.n_sim == 1000
    assert abs(sim.achieved_power - 0.8) <= 0.05
    assert sim.n == pytest.approx(an.n, rel=0.2)


@pytest.mark.parametrize("kwargs, err, match", [
    (dict(power=0.8, ci_width=0.1), ValueError, "exactly one"),
    (dict(), ValueError, "exactly one"),
    (dict(power=1.2), ValueError, "power"),
    (dict(power=0.04), ValueError, "alpha"),
    (dict(ci_width=-1.0), ValueError, "ci_width"),
    (dict(power=0.8, n_max=400), ValueError, "n_max"),
    (dict(power=0.8, n_min=500, n_max=100), ValueError, "n_max"),
    (dict(power=0.8, method="bootstrap"), ValueError, "method"),
    (dict(power="0.8"), TypeError, "power"),
])
def test_sample_size_argument_errors(beta_probs, kwargs, err, match):
    with pytest.raises(err, match=match):
        ct.calib_sample_size(probs=beta_probs, slope=0.8, **kwargs)


@pytest.mark.parametrize("kwargs, err, match", [
    (dict(n=1), ValueError, "n must be >= 2"),
    (dict(n=2.5), TypeError, "n must"),
    (dict(n=[100, 1]), ValueError, "n must be >= 2"),
    (dict(n=100, alpha=1.5), ValueError, "alpha"),
    (dict(n=100, slope=float("nan")), ValueError, "slope"),  # a non-finite number is a value error
    (dict(n=100, calibration=3), TypeError, "calibration"),
    (dict(n=100, calibration=lambda p: p, slope=0.5), ValueError, "not both"),
    (dict(n=100, calibration=lambda p: p[:10]), ValueError, "calibration"),
    (dict(n=100, calibration=lambda p: p + 1.0), ValueError, "calibration"),
    (dict(n=100, null="bayes"), ValueError, "null"),
    (dict(n=100, n_bins=0), ValueError, "n_bins"),
    (dict(n=100, method="simulation", n_sim=1), ValueError, "n_sim"),
    (dict(n=100, rng="x", method="simulation"), TypeError, "rng"),
])
def test_power_argument_errors(beta_probs, kwargs, err, match):
    n = kwargs.pop("n")
    with pytest.raises(err, match=match):
        ct.calib_power(n, probs=beta_probs, **kwargs)


def test_probs_errors():
    with pytest.raises(ValueError, match="probs"):
        ct.calib_power(100, probs=np.array([0.2, 1.3, 0.4]))
    with pytest.raises(ValueError, match="intercept"):
        ct.calib_power(100, probs=np.full((10, 3), 1 / 3), intercept=0.2)


# ----------------------------------------------------------------------------- CLI and vignette
def test_cli_sample_size(tmp_path, capsys, beta_probs):
    import pandas as pd
    from calibtest.cli import main
    path = tmp_path / "preds.csv"
    pd.DataFrame({"p": beta_probs}).to_csv(path, index=False)
    assert main(["sample-size", str(path), "--formula", "~ p", "--slope", "0.8", "--power", "0.8"]) == 0
    out = capsys.readouterr().out
    expected = ct.calib_sample_size(probs=beta_probs, slope=0.8, power=0.8).n
    assert "Sample size" in out and str(expected) in out
    assert main(["sample-size", str(path), "--formula", "~ p", "--intercept", "0.3", "--ci-width", "0.05",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["n"] == ct.calib_sample_size(probs=beta_probs, intercept=0.3, ci_width=0.05).n
    assert main(["sample-size", str(path), "--formula", "~ q", "--power", "0.8"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'~ q'" in err


def _vignette():
    spec = importlib.util.spec_from_file_location("planning_vignette", ROOT / "vignettes" / "planning.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_riley_slope_criterion_against_glm():
    """The vignette's Riley criterion: the slope's variance from the Fisher information against a GLM fit."""
    import statsmodels.api as sm
    vig = _vignette()
    p = np.random.default_rng(8).beta(2, 5, 5000)
    a, b = -0.3, 0.8
    n_riley = vig.riley_slope_n(p, a, b)
    rng = np.random.default_rng(9)
    N = 200_000
    pp = p[rng.integers(0, p.size, N)]
    y = (rng.random(N) < expit(a + b * logit(pp))).astype(float)
    fit = sm.GLM(y, sm.add_constant(logit(pp)), family=sm.families.Binomial()).fit()
    n_glm = (2 * 1.959963984540054 / 0.2) ** 2 * fit.bse[1] ** 2 * N
    assert n_riley == pytest.approx(n_glm, rel=0.03)


@pytest.mark.slow
def test_expected_plugin_sigma1_matches_simulation():
    """E sigma1_hat^2 (exact moments of the bin means, rare events with sparse tail bins) against simulation."""
    p = np.random.default_rng(6).beta(0.5, 10, 20000)
    c = expit(-0.3 + logit(p))
    n = 800
    pb = pw.population_bins(p[:, None], c[:, None], auto_n_bins(n, 1))
    _, s1 = pw.simulate_studies(p[:, None], c[:, None], pb.inverse, pb.pi.size, n, 2000, np.random.default_rng(1))
    expected = pw.expected_sigma1_sq(n, pb)
    assert expected == pytest.approx(s1.mean(), abs=4 * s1.std() / math.sqrt(s1.size) + 0.01 * s1.mean())
    # the population sigma1^2 alone is far below what the plug-in gives at this n
    assert pw.population_sigma1_sq(pb) < 0.3 * s1.mean()


@pytest.mark.slow
def test_vignette_smoke(tmp_path, monkeypatch):
    """A reduced run of the planning vignette: one design, one target, 300 studies per point."""
    vig = _vignette()
    p = np.random.default_rng(1).beta(2, 5, 3000)
    monkeypatch.setattr(vig, "distributions", lambda: {"Beta(2,5)": (p, None)})
    monkeypatch.setattr(vig, "MISCAL", [("intercept +0.3", 0.3, 1.0)])
    monkeypatch.setattr(vig, "TARGETS", [("power", 0.8)])
    monkeypatch.setattr(vig, "SMALL_N", [200])
    monkeypatch.setattr(vig, "N_SIM", 300)
    monkeypatch.setattr(vig, "COND_CASES", [])
    monkeypatch.setattr(vig, "SIZE_CASES", [(0.0, 300)])
    assert vig.main(out_dir=str(tmp_path)) == 0
    import pandas as pd
    check = pd.read_csv(tmp_path / "planning_check.csv")
    assert len(check) == 1
    assert check["n_analytic"].iloc[0] == ct.calib_sample_size(probs=p, intercept=0.3, power=0.8,
                                                               null="asymptotic").n
    assert 0.75 < check["ratio"].iloc[0] < 1.33
    assert "Riley" in vig.tables(str(tmp_path))
    assert vig.main(out_dir=str(tmp_path)) == 0  # resumed: nothing recomputed
    assert len(pd.read_csv(tmp_path / "planning_check.csv")) == 1
    # the default-null stage: one design, power target, 150 studies per point, resumable
    path = vig.default_null_check(out_dir=str(tmp_path), dists={"Beta(2,5)": (p, None)},
                                  miscal=["intercept +0.3"], targets=[("power", 0.8)], n_sim=150)
    dn = pd.read_csv(path)
    assert len(dn) == 1 and dn["null"].iloc[0] == "conditional"
    assert dn["n_analytic"].iloc[0] == ct.calib_sample_size(probs=p, intercept=0.3, power=0.8).n
    assert 0.75 < dn["ratio"].iloc[0] < 1.33
    vig.default_null_check(out_dir=str(tmp_path), dists={"Beta(2,5)": (p, None)}, miscal=["intercept +0.3"],
                           targets=[("power", 0.8)], n_sim=150)
    assert len(pd.read_csv(path)) == 1


@pytest.mark.parametrize("kw", [dict(slope=0.8), dict(intercept=0.4, null="asymptotic"), dict(slope=0.8, margin=0.05),
                                dict(slope=1.3, k=2)])
def test_stacked_grid_equals_the_one_n_functions(beta_probs, kw):
    """analytic_grid (all n stacked, reduceat sums, binomial recurrence) against the one-n engines of core.power."""
    margin = kw.pop("margin", None)
    probs = beta_probs if "k" not in kw else np.random.default_rng(4).dirichlet(np.full(4, 0.7), 3000)
    anticipated = pl._Anticipated(probs, None, kw.get("intercept", 0.0), kw.get("slope", 1.0), kw.get("k", 1), None)
    planner = pl._common(anticipated, 0.05, "auto", kw.get("null"), "analytic", margin)[0]
    ns = [60, 137, 500, 1999, 20000, 300000]
    pbs = [planner.bins(planner.B(n)) for n in ns]
    for n, pb, g in zip(ns, pbs, pw.analytic_grid(ns, pbs)):
        mean, var = pw.t_moments(n, pb)
        e1, _, occ = pw.count_moments(n, pb.pi)[0], None, pb.counts(n)[2]
        ref = {"mean": mean, "variance": var, "skewness": pw.t_skewness(n, pb, var),
               "sigma1_sq_hat": pw.expected_sigma1_sq(n, pb), "e1_sum": float(np.sum(n * pb.pi - e1)),
               "occupied": float(np.sum(occ)), "ece_sq_binned": pw.binned_ece_sq(pb),
               "sigma1_sq": pw.population_sigma1_sq(pb), "kappa": pw.plugin_slope(n, pb),
               "null_variance": pw.null_variance(n, pb), "null_skewness": pw.null_skewness(n, pb)}
        for key, value in ref.items():
            assert g[key] == pytest.approx(value, rel=1e-10, abs=1e-300), (n, key)
    rows = planner.analytic_many(ns)
    assert [planner.analytic(n) for n in ns] == rows  # one n is the grid of one


def test_binomial_table_against_scipy():
    from scipy import stats as sst
    n = np.array([50.0, 137, 5000, 10**6, 80])
    p = np.array([0.3, 0.01, 0.004, 5e-5, 0.6])
    table = pw._binomial_table(n, p)
    c = np.arange(1, 201)
    ref = sst.binom.pmf(c[None, :], n[:, None], p[:, None])
    np.testing.assert_allclose(table, ref, rtol=1e-12, atol=1e-300)


def test_population_bins_many_against_direct_means(beta_probs):
    """Each B of the stacked binning: bin masses and means recomputed bin by bin with boolean masks."""
    z = beta_probs[:, None]
    q = expit(0.3 + logit(beta_probs))[:, None]
    many = pw.population_bins_many(z, q, [7, 19, 48])
    for B, pb in many.items():
        cells = np.minimum(np.floor(beta_probs * B), B).astype(int)
        occupied = np.unique(cells)
        assert np.array_equal(occupied[pb.inverse], cells)
        for b, cell in enumerate(occupied):
            rows = cells == cell
            delta = (q - z)[rows, 0]
            assert pb.pi[b] == pytest.approx(rows.mean(), rel=1e-15)
            assert pb.mu[b, 0] == pytest.approx(delta.mean(), rel=1e-10, abs=1e-15)
            lab = q[rows, 0] * (1 - q[rows, 0])
            assert pb.sigma[b, 0, 0] == pytest.approx(lab.mean() + delta.var(), rel=1e-9, abs=1e-15)
            assert pb.sigma_null[b, 0, 0] == pytest.approx((z[rows, 0] * (1 - z[rows, 0])).mean(), rel=1e-12)


# --------------------------------------------------------------------------- survival margin, precision, acceptance
def test_survival_margin_plan_holds_at_n_and_fails_below():
    p = np.random.default_rng(0).beta(2, 5, 5000)
    ss = ct.calib_sample_size(probs=p, margin=0.05, power=0.8, censored_fraction=0.4)
    assert ss.inputs.censoring["censored_fraction"] == 0.4 and ss.margin == 0.05
    pw = ct.calib_power([ss.n - 1, ss.n], probs=p, margin=0.05, censored_fraction=0.4).power
    assert pw[0] < 0.8 <= pw[1] and pw[1] == ss.achieved_power
    assert ss.n > ct.calib_sample_size(probs=p, margin=0.05, power=0.8, censored_fraction=0.1).n


@pytest.mark.slow
def test_survival_margin_power_at_the_planned_n_by_simulation():
    """300 survival studies (exponential event and censoring times, 40% censored) at the planned n, each analysed
    by calib_ci(..., horizon=) and its margin test: the share rejecting H0: ECE >= 0.05 is within 0.05 of the
    target 0.8 (Monte Carlo s.e. about 0.023; a 400-study run gave 0.8175, s.e. 0.019)."""
    rng = np.random.default_rng(11)
    p = rng.beta(2, 5, 20000)
    f, margin, reps = 0.4, 0.05, 300
    n = ct.calib_sample_size(probs=p, margin=margin, power=0.8, censored_fraction=f).n
    b = -math.log1p(-f)
    reject = 0
    for _ in range(reps):
        z = rng.choice(p, n)
        t, c = rng.exponential(1 / -np.log1p(-z)), rng.exponential(1 / b, n)
        res = ct.calib_ci(time=np.minimum(t, c), event=(t <= c).astype(int), probs=z, horizon=1.0)
        reject += res.margin_test(margin).reject
    assert abs(reject / reps - 0.8) < 0.05


def test_precision_targets_give_the_largest_size():
    from calibtest.core.precision import anticipated_precision, precision_size
    from scipy.special import expit, logit
    p = np.random.default_rng(0).beta(2, 5, 5000)
    targets = {"oe": 0.05, "slope": 0.05, "c": 0.025}
    only = ct.calib_sample_size(probs=p, intercept=0.1, slope=0.8, precision=targets)
    q = expit(0.1 + 0.8 * logit(p))
    by_hand = {m: precision_size(anticipated_precision(p, q, m), se) for m, se in targets.items()}
    assert dict(zip(only.precision["measure"], only.precision["n"])) == by_hand
    assert only.n == max(by_hand.values()) and only.target == "precision"
    assert only.achieved_power == ct.calib_power(only.n, probs=p, intercept=0.1, slope=0.8).power
    ece = ct.calib_sample_size(probs=p, intercept=0.1, slope=0.8, power=0.8)
    both = ct.calib_sample_size(probs=p, intercept=0.1, slope=0.8, power=0.8, precision=targets)
    assert both.n == max(ece.n, only.n)
    loose = ct.calib_sample_size(probs=p, intercept=0.1, slope=0.8, power=0.8, precision={"oe": 0.5})
    assert loose.n == ece.n and loose.achieved_power == ece.achieved_power
    assert "precision" in both.to_dict() and "calibration slope" in str(both.summary())
    with pytest.raises(OptionError, match="unknown measures"):
        ct.calib_sample_size(probs=p, precision={"auc": 0.1})
    with pytest.raises(OptionError, match="survival"):
        ct.calib_sample_size(probs=p, precision={"oe": 0.1}, censored_fraction=0.3)
    with pytest.raises(OptionError, match="exactly one"):
        ct.calib_sample_size(probs=p)


def test_acceptance_power_against_the_binomial_law():
    """Every prediction 0.3, true risk expit(0.05 + logit 0.3): the O/E criterion's power is a binomial sum.

    O ~ Binomial(n, q), E = 0.3 n fixed; the TOST of ln(O/E) in (ln 0.9, ln 1.1) with se sqrt((1 - O/n) / O)
    passes iff the 90% interval lies inside: the exact probability by summing the binomial pmf; the simulated
    share within 4 Monte Carlo s.e.
    """
    from scipy.special import expit, logit
    n_sim = 300
    probs = np.full(1000, 0.3)
    q = float(expit(0.05 + logit(0.3)))
    ss = ct.calib_sample_size(probs=probs, intercept=0.05, precision={"oe": 0.04},
                              acceptance={"oe_within": (0.9, 1.1)}, n_sim=n_sim, rng=4)
    n = ss.n
    o = np.arange(1, n)
    est, se = np.log(o / (0.3 * n)), np.sqrt((1 - o / n) / o)
    z = stats.norm.isf(0.05)
    passes = (est - z * se > math.log(0.9)) & (est + z * se < math.log(1.1))
    exact = float(np.sum(stats.binom.pmf(o, n, q)[passes]))
    ap = ss.acceptance_power
    assert ap.n == n and ap.n_sim == n_sim and ap.met["oe_within"] == ap.power
    assert abs(ap.power - exact) < 4 * max(ap.power_se, math.sqrt(exact * (1 - exact) / n_sim))
    assert "acceptance_power" in ss.to_dict()
