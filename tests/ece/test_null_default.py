"""The default null of calib_ci (``null="auto"``) and smoke runs of the two null studies."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import calibtest as ct
from calibtest.cli import main as cli_main

VIGNETTES = Path(__file__).resolve().parents[2] / "vignettes"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, VIGNETTES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _binary(n, seed, a=2.0, b=2.0):
    g = np.random.default_rng(seed)
    p = g.beta(a, b, n)
    return (g.random(n) < p).astype(int), p


def _multiclass(n, K, seed):
    g = np.random.default_rng(seed)
    P = g.dirichlet(np.ones(K), n)
    return (g.random((n, 1)) > P.cumsum(axis=1)).sum(axis=1).clip(max=K - 1), P


# ----------------------------------------------------------------------------- the default
def test_default_is_conditional_in_memory_and_equals_the_explicit_call():
    y, p = _binary(400, 1, 0.5, 10)
    auto = ct.calib_ci(y=y, probs=p)
    cond = ct.calib_ci(y=y, probs=p, null="conditional")
    assert auto.null == "conditional" and auto.null_method == "shifted gamma"
    assert auto.null_pvalue == cond.null_pvalue == auto.conditional.pvalue
    assert (auto.ci_lower, auto.ci_upper, auto.contains_zero) == (cond.ci_lower, cond.ci_upper, cond.contains_zero)
    # the paper's test is still computed, from its own formula
    z0 = auto.n * math.sqrt(auto.bin_volume) * auto.estimate / math.sqrt(auto.sigma0_sq)
    assert auto.asymptotic.zstat == pytest.approx(z0, rel=1e-12)
    assert auto.asymptotic.pvalue == pytest.approx(stats.norm.sf(z0), rel=1e-12)


def test_default_zero_rule_follows_the_conditional_pvalue():
    """Rare events: T+ above the paper's threshold would exclude 0 only if the asymptotic null decided."""
    hits = {True: 0, False: 0}
    for seed in range(60):
        y, p = _binary(300, seed, 0.5, 10)
        res = ct.calib_ci(y=y, probs=p)
        assert res.contains_zero == (res.conditional.pvalue > res.alpha)
        hits[res.contains_zero] += 1
    assert hits[True] > 0


def test_default_for_six_rows_is_the_enumerated_conditional_law():
    """n = 6, B = 2: the shifted gamma from the moments of T over all 2^6 label vectors."""
    p = np.array([0.12, 0.31, 0.44, 0.58, 0.81, 0.93])
    y = np.array([0, 1, 0, 1, 1, 0])
    res = ct.calib_ci(y=y, probs=p, n_bins=2)
    bins = (p >= 0.5).astype(int)
    labels = (np.arange(64)[:, None] >> np.arange(6)) & 1  # every label vector
    weights = np.prod(np.where(labels == 1, p, 1 - p), axis=1)
    u = labels - p
    t = np.zeros(64)
    for b in (0, 1):  # two bins: T = (1/n) sum_b (S_b^2 - Q_b) / (c_b - 1)
        ub = u[:, bins == b]
        t += (ub.sum(axis=1) ** 2 - (ub ** 2).sum(axis=1)) / (ub.shape[1] - 1) / 6
    var = float(weights @ t ** 2)
    skew = float(weights @ t ** 3) / var ** 1.5
    assert abs(weights @ t) < 1e-15
    k = 4 / skew ** 2
    theta = math.sqrt(var / k)
    t_obs = float(t[int((y << np.arange(6)).sum())])
    assert res.estimate == pytest.approx(t_obs, rel=1e-12)
    assert res.null == "conditional"
    assert res.null_pvalue == pytest.approx(stats.gamma.sf(t_obs / theta + k, k), rel=1e-8)


def test_default_is_asymptotic_beyond_four_binned_coordinates():
    y, P = _multiclass(300, 7, 2)
    five = ct.calib_ci(y=y, probs=P, k=5, n_bins=2)
    assert five.null == "asymptotic" and five.null_method == "normal" and five.conditional is None
    two = ct.calib_ci(y=y, probs=P, k=2)
    assert two.null == "conditional"
    four = ct.calib_ci(y=y, probs=P, k=4, n_bins=2)
    assert four.null == "conditional"


def test_default_on_a_file_is_the_in_memory_null(tmp_path):
    """null='auto' means the same for a file: the conditional null, from the streamed per-bin sums."""
    y, p = _binary(500, 3, 0.5, 10)
    df = pd.DataFrame({"y": y, "p": p})
    path = tmp_path / "preds.csv"
    df.to_csv(path, index=False)
    res = ct.calib_ci("y ~ p", data=str(path), progress=False)
    ref = ct.calib_ci("y ~ p", data=df, n_bins=res.n_bins)  # a stream's B is the rate's (no occupancy scan)
    assert res.null == ref.null == "conditional" and res.null_method == ref.null_method == "shifted gamma"
    assert (res.estimate, res.null_pvalue, res.ci_upper, res.conditional.variance) == pytest.approx(
        (ref.estimate, ref.null_pvalue, ref.ci_upper, ref.conditional.variance), rel=1e-12)
    explicit = ct.calib_ci("y ~ p", data=str(path), null="conditional", progress=False)
    assert explicit.null_pvalue == res.null_pvalue
    with pytest.raises(ValueError, match="null='monte-carlo' draws labels for every row and needs the rows"):
        ct.calib_ci("y ~ p", data=str(path), null="monte-carlo")


def test_default_call_record_reproduces_the_result():
    """The drawn Monte Carlo seed of the fallback is recorded; null="auto" stays implicit."""
    g = np.random.default_rng(5)
    p = g.uniform(0, 0.002, 400)
    y = (g.random(400) < p).astype(int)
    y[0] = 1
    res = ct.calib_ci(y=y, probs=p)
    assert res.null == "conditional" and res.null_method == "monte carlo"
    text = str(res.call_record)
    assert "null=" not in text and f"rng={res.monte_carlo.seed}" in text
    again = ct.calib_ci(y=y, probs=p, rng=res.monte_carlo.seed)
    assert again.null_pvalue == res.null_pvalue


def test_unknown_null_names_the_argument():
    y, p = _binary(50, 0)
    with pytest.raises(ValueError, match="null"):
        ct.calib_ci(y=y, probs=p, null="gamma")


def test_cli_default_null_is_auto(tmp_path, capsys):
    import json

    y, p = _binary(300, 7, 0.5, 10)
    path = tmp_path / "d.csv"
    pd.DataFrame({"y": y, "p": p}).to_csv(path, index=False)
    assert cli_main(["ci", str(path), "--formula", "y ~ p", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["null"] == "conditional"
    assert out["null_pvalue"] == ct.calib_ci(y=y, probs=p, null="conditional").null_pvalue


# ----------------------------------------------------------------------------- smoke runs of the studies
@pytest.mark.slow
def test_default_null_study_smoke(tmp_path):
    """Rare events at n = 1000: the asymptotic null is conservative, the conditional one holds its size."""
    mod = _load("default_null")
    name = "binary, rare events p ~ Beta(0.5, 10)"
    out = mod.run_cell(mod.DESIGNS[name][1], 1000, 400, [11, 1000], False, 200)
    asym, cond = (out[:, 0] <= 0.10).mean(), (out[:, 1] <= 0.10).mean()
    se = math.sqrt(0.1 * 0.9 / 400)
    assert abs(cond - 0.10) < 4 * se
    assert asym < 0.10 - 3 * se  # the study: 0.03 at N = 1000
    text = mod.main(["--reps", "20", "--reps-large", "2", "--designs", name, "--n", "100,300",
                     "--no-power", "--prefix", str(tmp_path / "dn")])
    assert "| binary, rare events p ~ Beta(0.5, 10) | 300 | 20 |" in text


@pytest.mark.slow
def test_calib_test_study_smoke(tmp_path):
    """New designs of the calib_test study: size near alpha on calibrated top-2 data, power on slope 0.7."""
    mod = _load("calib_test_study")
    prefix = str(tmp_path / "cts")
    mod.run_size(prefix + "_size.csv", 150, 150, 99, designs=["calibrated top-2 of K=5, Dirichlet(0.5)"], ns=(300,))
    size = pd.read_csv(prefix + "_size.csv")
    # exact level floor(0.05 * 100) / 100 = 0.05; 150 data sets: s.e. 0.018
    assert size["calib_test"].iloc[0] <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 150)
    mod.run_power(prefix + "_power.csv", 60, 99, alternatives=["slope 0.7"], ns=(2000,))
    power = pd.read_csv(prefix + "_power.csv")
    assert power["calib_test"].iloc[0] > 0.8 and power["slope_wald"].iloc[0] > 0.8
    assert "| slope 0.7 | power | 2000 | 60 |" in mod.tables(prefix)


def test_explicit_asymptotic_null_is_recorded_in_the_call():
    """The default is "auto", so a call that asked for the asymptotic null must say so to be reproducible."""
    df = ct.load_demo()
    res = ct.calib_ci("y ~ p", data=df, null="asymptotic")
    assert res.call_record.options["null"] == "asymptotic"
    again = ct.calib_ci("y ~ p", data=df, **{k: v for k, v in res.call_record.options.items() if v is not None})
    assert again.null == "asymptotic" and again.null_pvalue == res.null_pvalue
    default = ct.calib_ci("y ~ p", data=df)
    assert "null" not in default.call_record.options and default.null == "conditional"
