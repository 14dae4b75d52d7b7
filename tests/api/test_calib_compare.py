"""Tests of calib_compare: exact algebra against slow O(n^2) code, bad input, and Monte Carlo.

Every variance component is checked against a brute-force implementation that
builds the n x n matrices of the definitions in ``docs/compare.md``; size,
coverage and power are checked by simulation (slow-marked, n = 500, 300
replications; the vignette ``vignettes/compare_study.py`` runs larger studies).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats
from scipy.special import expit, logit

import calibtest as ct
from calibtest.cli import main as cli_main
from calibtest.display.summary import CalibSummary

TCAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "tcal"


# ---------------------------------------------------------------- slow reference code
def _bins(z, B):
    """Bin label of each row: the tuple floor(z * B), as an integer code."""
    idx = np.floor(np.asarray(z, dtype=float).reshape(len(z), -1) * B).astype(int)
    _, code = np.unique(idx, axis=0, return_inverse=True)
    return code.ravel()


def _slow_T(u, bins):
    """T = (1/n) sum_b 1/(c_b - 1) sum_{i != j in b} U_i.U_j, by explicit loops over pairs."""
    n = len(u)
    total = 0.0
    for b in np.unique(bins):
        rows = np.flatnonzero(bins == b)
        c = len(rows)
        if c < 2:
            continue
        s = sum(float(u[i] @ u[j]) for i in rows for j in rows if i != j)
        total += s / (c - 1)
    return total / n


def _slow_psi(u, bins):
    psi = np.empty(len(u))
    for b in np.unique(bins):
        rows = np.flatnonzero(bins == b)
        mu = u[rows].mean(axis=0)
        for i in rows:
            psi[i] = mu @ mu + 2 * mu @ (u[i] - mu)
    return psi


def _pair_weights(bins, shift):
    same = (bins[:, None] == bins[None, :]) & ~np.eye(len(bins), dtype=bool)
    c = np.bincount(bins)[bins].astype(float)
    with np.errstate(divide="ignore"):
        return np.where(same, 1.0 / (c[:, None] - shift), 0.0)


def _slow_second_order(u_a, bins_a, u_b, bins_b, shift=1.0):
    """(2/n^2) sum_{i != j} (a_ij U^A_i.U^A_j - b_ij U^B_i.U^B_j)^2 with n x n matrices."""
    n = len(u_a)
    diff = _pair_weights(bins_a, shift) * (u_a @ u_a.T) - _pair_weights(bins_b, shift) * (u_b @ u_b.T)
    return 2.0 / n**2 * np.sum(diff**2)


def _slow_single_second_order(u, bins, shift=1.0):
    n = len(u)
    return 2.0 / n**2 * np.sum((_pair_weights(bins, shift) * (u @ u.T)) ** 2)


# ---------------------------------------------------------------- data
def _binary(n, rng, shift_a=0.05, shift_b=-0.05):
    q = rng.uniform(0.1, 0.9, n)
    y = (rng.random(n) < q).astype(float)
    return pd.DataFrame({"y": y, "pa": q + shift_a, "pb": q + shift_b, "q": q})


@pytest.fixture
def df():
    return _binary(300, np.random.default_rng(11))


# ---------------------------------------------------------------- exact algebra
def test_paired_estimate_and_variance_match_brute_force(df):
    B = 12
    res = ct.calib_compare("y ~ pa", "y ~ I(q ** 1.3)", data=df, n_bins=B)
    u_a = (df.y - df.pa).to_numpy()[:, None]
    p_b = df.q.to_numpy() ** 1.3
    u_b = (df.y.to_numpy() - p_b)[:, None]
    ba, bb = _bins(df.pa, B), _bins(p_b, B)
    n = len(df)
    assert res.paired and res.pairing == "formula"
    assert res.estimate_a == pytest.approx(_slow_T(u_a, ba), rel=1e-10)
    assert res.estimate_b == pytest.approx(_slow_T(u_b, bb), rel=1e-10)
    assert res.estimate == pytest.approx(_slow_T(u_a, ba) - _slow_T(u_b, bb), rel=1e-10, abs=1e-15)
    v1 = np.var(_slow_psi(u_a, ba) - _slow_psi(u_b, bb)) / n
    v2 = _slow_second_order(u_a, ba, u_b, bb)
    bias = 2 * _slow_second_order(u_a, ba, u_b, bb, shift=0.0)
    assert res.se_first_order_plugin**2 == pytest.approx(v1, rel=1e-10)
    assert res.se_second_order**2 == pytest.approx(v2, rel=1e-10)
    assert res.se_first_order**2 == pytest.approx(max(v1 - bias, 0.0), rel=1e-10, abs=1e-18)
    assert res.se**2 == pytest.approx(max(v1 - bias, 0.0) + v2, rel=1e-10)
    plug = ct.calib_compare("y ~ pa", "y ~ I(q ** 1.3)", data=df, n_bins=B, variance="plugin")
    assert plug.se**2 == pytest.approx(v1 + v2, rel=1e-10)


def test_topk_paired_variance_matches_brute_force():
    rng = np.random.default_rng(5)
    n, K = 200, 4
    logits = rng.normal(size=(n, K)) * 1.5
    pa = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    pb = np.exp(0.6 * logits) / np.exp(0.6 * logits).sum(1, keepdims=True)
    label = np.array([rng.choice(K, p=row) for row in pa])
    data = {"label": label, **{f"a{j}": pa[:, j] for j in range(K)}, **{f"b{j}": pb[:, j] for j in range(K)}}
    res = ct.calib_compare("label ~ a0 + a1 + a2 + a3", "label ~ b0 + b1 + b2 + b3", data=data, k=2, n_bins=4)
    assert res.mode == "topk" and res.k == 2 and res.paired

    def zu(P):
        order = np.argsort(-P, axis=1, kind="stable")[:, :2]
        z = np.take_along_axis(P, order, axis=1)
        return z, (order == label[:, None]).astype(float) - z

    za, ua = zu(pa)
    zb, ub = zu(pb)
    ba, bb = _bins(za, 4), _bins(zb, 4)
    assert res.estimate == pytest.approx(_slow_T(ua, ba) - _slow_T(ub, bb), rel=1e-10)
    v1 = np.var(_slow_psi(ua, ba) - _slow_psi(ub, bb)) / n
    assert res.se_first_order_plugin**2 == pytest.approx(v1, rel=1e-10)
    assert res.se_second_order**2 == pytest.approx(_slow_second_order(ua, ba, ub, bb), rel=1e-10)


def test_unpaired_variance_is_sum_of_one_model_variances():
    rng = np.random.default_rng(3)
    a = _binary(250, rng)
    b = _binary(180, rng)
    ra = ct.calib_ci("y ~ pa", data=a, n_bins=10)
    rb = ct.calib_ci("y ~ pb", data=b, n_bins=7)
    res = ct.calib_compare(ra, rb)
    assert not res.paired and res.pairing == "different n"
    # The first-order plug-in is the paper's sigma1^2 of each model (computed by the core).
    assert res.se_first_order_plugin**2 == pytest.approx(ra.sigma1_sq / 250 + rb.sigma1_sq / 180, rel=1e-10)
    ua = (a.y - a.pa).to_numpy()[:, None]
    ub = (b.y - b.pb).to_numpy()[:, None]
    v2 = _slow_single_second_order(ua, _bins(a.pa, 10)) + _slow_single_second_order(ub, _bins(b.pb, 7))
    assert res.se_second_order**2 == pytest.approx(v2, rel=1e-10)
    bias = 2 * (_slow_single_second_order(ua, _bins(a.pa, 10), 0.0) + _slow_single_second_order(ub, _bins(b.pb, 7), 0.0))
    assert res.se**2 == pytest.approx(max(res.se_first_order_plugin**2 - bias, 0) + v2, rel=1e-10)
    swapped = ct.calib_compare(rb, ra)
    assert swapped.estimate == pytest.approx(-res.estimate) and swapped.se == pytest.approx(res.se)


def test_test_and_interval_formulas(df):
    res = ct.calib_compare("y ~ pa", "y ~ q", data=df)
    z = res.estimate / res.se
    assert res.statistic == pytest.approx(z)
    assert res.pvalue == pytest.approx(2 * stats.norm.sf(abs(z)))
    lo, hi = res.conf_int()
    assert (lo, hi) == pytest.approx((res.estimate - 1.959963985 * res.se, res.estimate + 1.959963985 * res.se))
    assert res.conf_int().contains_zero == (res.pvalue > 0.05)
    lo90, hi90 = res.conf_int(alpha=0.10)
    assert lo < lo90 < hi90 < hi
    stat, p = res  # statistic, pvalue unpacking
    assert (stat, p) == (res.statistic, res.pvalue)
    greater = ct.calib_compare("y ~ pa", "y ~ q", data=df, alternative="greater")
    assert greater.pvalue == pytest.approx(stats.norm.sf(z))
    assert greater.conf_int().upper == np.inf
    assert greater.conf_int().lower == pytest.approx(res.estimate - stats.norm.isf(0.05) * res.se)
    less = ct.calib_compare("y ~ pa", "y ~ q", data=df, alternative="less")
    assert less.pvalue == pytest.approx(stats.norm.cdf(z))
    assert less.conf_int().lower == -np.inf


def test_identical_models_give_zero_difference(df):
    res = ct.calib_compare("y ~ pa", "y ~ I(pa + 0)", data=df)
    assert res.estimate == 0 and res.se == 0 and res.pvalue == 1.0
    assert "undefined" in str(res.summary())


# ---------------------------------------------------------------- pairing
def test_pairing_detection_binary(df):
    ra = ct.calib_ci("y ~ pa", data=df)
    rb = ct.calib_ci("y ~ pb", data=df)
    assert ct.calib_compare(ra, rb).pairing == "identical outcomes"
    other = df.assign(y=1 - df.y)
    rc = ct.calib_ci("y ~ pb", data=other)
    res = ct.calib_compare(ra, rc)
    assert not res.paired and res.pairing == "outcomes differ"
    assert ct.calib_compare(ra, rb, paired=False).paired is False
    # paired=True is trusted when n agrees (outcomes may legitimately differ, e.g. top-1 'correct')
    assert ct.calib_compare(ra, rc, paired=True).pairing == "caller"


def test_top1_results_need_an_explicit_pairing():
    rng = np.random.default_rng(8)
    conf = rng.uniform(0.2, 1.0, 400)
    ra = ct.calib_ci(y=(rng.random(400) < conf).astype(int), probs=conf, n_classes=5)
    rb = ct.calib_ci(y=(rng.random(400) < conf).astype(int), probs=conf ** 0.8, n_classes=5)
    with pytest.raises(ValueError, match="paired=True"):
        ct.calib_compare(ra, rb)
    assert ct.calib_compare(ra, rb, paired=True).paired
    assert not ct.calib_compare(ra, rb, paired=False).paired


def test_formula_form_is_paired_and_drops_missing_jointly(df):
    d = df.copy()
    d.loc[3, "pa"] = np.nan
    d.loc[7, "pb"] = np.nan
    with pytest.raises(ValueError, match="missing"):
        ct.calib_compare("y ~ pa", "y ~ pb", data=d)
    res = ct.calib_compare("y ~ pa", "y ~ pb", data=d, missing="drop")
    assert res.paired and res.n_a == res.n_b == len(d) - 2
    assert (res.name_a, res.name_b) == ("pa", "pb")


def test_formula_names_from_the_callers_frame(df):
    offset = 0.01
    res = ct.calib_compare("y ~ pa", "y ~ I(q + offset)", data=df)
    assert res.name_b == "I(q + offset)"
    ref = ct.calib_ci(y=df.y, probs=df.q + offset)
    assert res.estimate_b == pytest.approx(ref.estimate)


# ---------------------------------------------------------------- bad input
def test_bad_input(df):
    ra = ct.calib_ci("y ~ pa", data=df)
    short = ct.calib_ci("y ~ pb", data=df.iloc[:200])
    with pytest.raises(ValueError, match="different numbers of rows"):
        ct.calib_compare(ra, short, paired=True)
    top1 = ct.calib_ci(y=df.y, probs=np.maximum(df.pa, 1 - df.pa), n_classes=2)
    with pytest.raises(ValueError, match="different modes"):
        ct.calib_compare(ra, top1)
    with pytest.raises(ValueError, match="alternative"):
        ct.calib_compare(ra, ra, alternative="larger")
    with pytest.raises(ValueError, match="variance"):
        ct.calib_compare(ra, ra, variance="exact")
    with pytest.raises(TypeError, match="paired"):
        ct.calib_compare(ra, ra, paired="yes")
    with pytest.raises(ValueError, match="alpha"):
        ct.calib_compare(ra, ra, alpha=1.5)
    with pytest.raises(ValueError, match="paired"):
        ct.calib_compare("y ~ pa", "y ~ pb", data=df, paired=False)
    with pytest.raises(ValueError, match="needs data"):
        ct.calib_compare("y ~ pa", "y ~ pb")
    with pytest.raises(TypeError, match="CalibrationResult"):
        ct.calib_compare(ra, "y ~ pb")
    with pytest.raises(TypeError, match="CalibrationResult"):
        ct.calib_compare(ra, np.zeros(3))
    with pytest.raises(ValueError, match="at least two"):
        ct.calib_compare([ra])
    with pytest.raises(ValueError, match="one name per model"):
        ct.calib_compare(ra, ra, names=["x"])
    with pytest.raises(ValueError, match="data="):
        ct.calib_compare(ra, ra, data=df)


def test_different_k_is_rejected():
    rng = np.random.default_rng(2)
    P = rng.dirichlet(np.ones(5), size=100)
    lab = rng.integers(0, 5, 100)
    r2 = ct.calib_ci(y=lab, probs=P, k=2)
    r3 = ct.calib_ci(y=lab, probs=P, k=3)
    with pytest.raises(ValueError, match="different k"):
        ct.calib_compare(r2, r3, paired=True)


# ---------------------------------------------------------------- several models
def test_pairwise_holm(df):
    res = ct.calib_compare(["y ~ pa", "y ~ pb", "y ~ q", "y ~ I(q ** 1.2)"], data=df)
    t = res.table
    assert len(t) == 6 and list(t.model_a[:3]) == ["pa"] * 3
    # Holm by hand: sorted p times (m - rank), running maximum, capped at 1.
    p = t.pvalue.to_numpy()
    order = np.argsort(p)
    adj = np.minimum(np.maximum.accumulate(p[order] * (len(p) - np.arange(len(p)))), 1.0)
    expected = np.empty_like(adj)
    expected[order] = adj
    np.testing.assert_allclose(t.pvalue_holm, expected, rtol=1e-12)
    np.testing.assert_array_equal(t.reject, expected <= 0.05)
    pair = ct.calib_compare("y ~ pb", "y ~ q", data=df)
    row = t[(t.model_a == "pb") & (t.model_b == "q")].iloc[0]
    assert row.estimate == pytest.approx(pair.estimate) and row.pvalue == pytest.approx(pair.pvalue)
    assert isinstance(res.summary(), CalibSummary) and "Holm" in str(res.summary())
    json.dumps(res.to_dict())
    results = [ct.calib_ci(f, data=df) for f in ("y ~ pa", "y ~ pb", "y ~ q")]
    assert len(ct.calib_compare(results).table) == 3


# ---------------------------------------------------------------- output
def test_summary_and_dict(df):
    res = ct.calib_compare("y ~ pa", "y ~ pb", data=df)
    text = " ".join(str(res.summary()).split())  # notes are wrapped to the table width
    assert "Delta = A - B" in text and "pa" in text and "95% two-sided" in text and "formula" in text
    assert "<table" in res.summary().as_html()
    d = res.to_dict()
    json.dumps(d)
    assert d["estimate"] == res.estimate and d["paired"] is True and d["name_a"] == "pa"
    assert "ComparisonResult" in repr(res)
    with pytest.raises(Exception):
        res.estimate = 0.0  # frozen


def test_cli_compare(tmp_path, df, capsys):
    path = tmp_path / "two.csv"
    df.to_csv(path, index=False)
    assert cli_main(["compare", str(path), "--formula-a", "y ~ pa", "--formula-b", "y ~ pb", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = ct.calib_compare("y ~ pa", "y ~ pb", data=df)
    assert out["estimate"] == pytest.approx(ref.estimate) and out["se"] == pytest.approx(ref.se)
    assert cli_main(["compare", str(path), "--formula-a", "y ~ pa", "--formula-b", "y ~ pb", "--bins", "10",
                     "--alternative", "greater"]) == 0
    assert "greater" in capsys.readouterr().out
    assert cli_main(["compare", str(path), "--formula-a", "y ~ pa", "--formula-b", "y ~ nope"]) == 1
    assert "nope" in capsys.readouterr().err


@pytest.mark.skipif(not TCAL.is_dir(), reason="shared/data/tcal not available")
def test_real_cifar100_models_unpaired():
    a = pd.read_csv(TCAL / "cifar100_resnet56.csv")
    b = pd.read_csv(TCAL / "cifar100_mobilenetv2_x1_4.csv")
    ra = ct.calib_ci("correct ~ confidence", data=a, n_classes=100)
    rb = ct.calib_ci("correct ~ confidence", data=b, n_classes=100)
    res = ct.calib_compare(ra, rb, paired=False)
    assert res.estimate == pytest.approx(ra.estimate - rb.estimate)
    # Unpaired, the plug-in first order is the sum of the published-method variances.
    assert res.se_first_order_plugin**2 == pytest.approx(ra.se**2 + rb.se**2, rel=1e-10)
    assert np.isfinite(res.pvalue) and res.se > 0


# ---------------------------------------------------------------- Monte Carlo (slow)
REPS, N, ALPHA = 300, 500, 0.05


def _mc_limit(rate_ok: float) -> float:
    return 3 * np.sqrt(rate_ok * (1 - rate_ok) / REPS)


def _run(make, reps=REPS, seed=0, **options):
    """Run calib_compare on `reps` data sets from `make(rng)` -> (y, p_a, p_b); returns the results."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(reps):
        y, pa, pb = make(rng)
        ra = ct.calib_ci(y=y, probs=pa)
        rb = ct.calib_ci(y=y, probs=pb)
        out.append((ra, rb, ct.calib_compare(ra, rb, **options)))
    return out


def _shift(rng, c_a=0.05, c_b=-0.05):
    q = rng.uniform(0.1, 0.9, N)
    y = (rng.random(N) < q).astype(float)
    return y, q + c_a, q + c_b


@pytest.mark.slow
def test_size_equal_ece_same_rows():
    runs = _run(_shift, seed=101)
    assert all(r[2].paired for r in runs)
    rate = np.mean([r[2].pvalue < ALPHA for r in runs])
    assert rate <= ALPHA + _mc_limit(ALPHA), rate


@pytest.mark.slow
def test_size_both_calibrated():
    def make(rng):
        p = rng.uniform(0, 1, N)
        y = (rng.random(N) < p).astype(float)
        return y, p, (np.floor(p * 5) + 0.5) / 5  # coarsened to fifths: still calibrated

    runs = _run(make, seed=202)
    rate = np.mean([r[2].pvalue < ALPHA for r in runs])
    assert rate <= ALPHA + _mc_limit(ALPHA), rate


@pytest.mark.slow
def test_coverage_when_eces_differ():
    beta, c_b = 1.5, 0.02

    def make(rng):
        q = rng.uniform(0.1, 0.9, N)
        y = (rng.random(N) < q).astype(float)
        return y, expit(beta * logit(q)), q + c_b

    ece_a = integrate.quad(lambda q: (expit(beta * logit(q)) - q) ** 2, 0.1, 0.9)[0] / 0.8
    delta = ece_a - c_b**2
    runs = _run(make, seed=303)
    cover = np.mean([r[2].ci_lower <= delta <= r[2].ci_upper for r in runs])
    assert cover >= 1 - ALPHA - _mc_limit(ALPHA), cover


@pytest.mark.slow
def test_paired_test_beats_non_overlapping_intervals():
    def make(rng):  # two over-confident models: A = expit(1.8 logit q), B = expit(1.2 logit q)
        q = rng.uniform(0.1, 0.9, N)
        y = (rng.random(N) < q).astype(float)
        return y, expit(1.8 * logit(q)), expit(1.2 * logit(q))

    runs = _run(make, reps=200, seed=404)
    paired = np.array([r[2].pvalue < ALPHA for r in runs])
    naive = np.array([(a.ci_lower > b.ci_upper) or (b.ci_lower > a.ci_upper) for a, b, _ in runs])
    diff = paired.astype(float) - naive
    assert diff.mean() > 3 * diff.std(ddof=1) / np.sqrt(len(runs)), (paired.mean(), naive.mean())


# ----------------------------------------------------------------- the comparison in words
def test_comparison_conclusion_follows_the_interval():
    from calibtest.datasets import load_demo

    d = load_demo()
    d["q"] = d["p"] ** 2
    d["r"] = d["p"] * 0.98
    worse = ct.calib_compare("y ~ p", "y ~ q", data=d)
    lo, hi = worse.ci_lower, worse.ci_upper
    assert hi < 0  # q has the larger ECE^2: Delta = ECE^2(p) - ECE^2(q) < 0
    text = worse.conclusion()
    assert text.startswith("At level 0.05, q is worse calibrated than p")
    assert f"95% CI [{ct.display.format.fmt(lo, 4)}, {ct.display.format.fmt(hi, 4)}]" in text
    same = ct.calib_compare("y ~ p", "y ~ r", data=d)
    assert same.ci_lower <= 0 <= same.ci_upper
    assert same.conclusion().startswith("No evidence at level 0.05 that p and r differ in calibration")
    assert same.conclusion(labels=("Model 1", "Model 2")).startswith(
        "No evidence at level 0.05 that Model 1 and Model 2 differ")
    one_sided = ct.calib_compare("y ~ p", "y ~ r", data=d, alternative="greater")
    assert "that p is worse calibrated than r" in one_sided.conclusion()
    pairs = ct.calib_compare(["y ~ p", "y ~ q", "y ~ r"], data=d)
    rejected = pairs.table[pairs.table["pvalue_holm"] <= 0.05]
    text = pairs.conclusion()
    assert text.count("is worse calibrated than") == len(rejected) == 2
    assert text.endswith("the other pair does not differ significantly.")
