"""Calibration across sites (issue 26, points 2 and 3): per-group CITL, slope and O/E, and their meta-analysis.

The reference numbers in ``tests/reference/meta_metafor.json`` were written by
``tests/reference/meta_metafor.R`` (R 4.2.2, metafor 3.8-1) from the site
estimates of ``tests/reference/meta_sites.csv`` (written by
``tests/reference/meta_sites.py``: the groups of a ``calib_ci(by="site")``
result, and two boundary sets).
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from scipy import optimize, stats

import calibtest as ct
from calibtest.ece.meta_analysis import MEASURES, MetaAnalysisResult, random_effects, site_estimates
from calibtest.options import OptionError, OptionTypeError

REF = Path(__file__).resolve().parents[1] / "reference"
sys.path.insert(0, str(REF))
from meta_sites import extra_sets, sites_frame  # noqa: E402

R = json.loads((REF / "meta_metafor.json").read_text())
SITES = pd.read_csv(REF / "meta_sites.csv")


@pytest.fixture(scope="module")
def grouped():
    return ct.calib_ci("y ~ p", data=sites_frame(), by="site", rng=0)


# --------------------------------------------------------------------------- agreement with metafor
def test_the_shared_data_are_the_grouped_results_sites(grouped):
    # the CSV metafor read holds this grouped result's per-site estimates and variances
    table = grouped.to_frame()
    for m in MEASURES:
        y, v, left = site_estimates(table, m)
        ref = SITES[SITES["set"] == m]
        assert left == {}
        assert list(ref["site"]) == [str(i) for i in y.index]
        assert_allclose(y.to_numpy(), ref["yi"].to_numpy(), rtol=1e-9, atol=1e-15)
        assert_allclose(v.to_numpy(), ref["vi"].to_numpy(), rtol=1e-9, atol=1e-15)
    extra = dict((name, (y, v)) for name, y, v in extra_sets())
    for name, (y, v) in extra.items():
        assert_allclose(SITES[SITES["set"] == name]["yi"], y)


KEYS = {"tau2": "tau2", "b": "estimate", "se": "se", "zval": "statistic", "pval": "pvalue", "ci_lb": "ci_lower",
        "ci_ub": "ci_upper", "QE": "q", "QEp": "q_pvalue", "riley_lb": "pi_lower", "riley_ub": "pi_upper"}


@pytest.mark.parametrize("key", [k for k in R if k.count("/") == 2])
def test_agrees_with_metafor_rma(key):
    name, method, test = key.split("/")
    d = SITES[SITES["set"] == name]
    fit = random_effects(d["yi"], d["vi"], method=method, hartung_knapp=test == "knha")
    ref = R[key]
    for rk, attr in KEYS.items():
        got = getattr(fit, attr)
        if ref[rk] is None:
            assert math.isnan(got), (rk, got)
        else:
            assert_allclose(got, ref[rk], rtol=1e-6, atol=1e-9, err_msg=f"{key}: {rk}")
    assert_allclose(100 * fit.i2, ref["I2"], rtol=1e-6, atol=1e-7)
    assert_allclose(fit.h2, ref["H2"], rtol=1e-6)


@pytest.mark.parametrize("name", sorted({k.split("/")[0] for k in R if "/" in k}))
def test_agrees_with_metafor_default_control(name):
    d = SITES[SITES["set"] == name]
    # metafor's default Fisher scoring stops once a step is below 1e-5: within 1e-6 of the converged numbers
    fit = random_effects(d["yi"], d["vi"])
    ref = R[f"{name}/REML/z/default-control"]
    assert_allclose([fit.tau2, fit.estimate, fit.se], [ref["tau2"], ref["b"], ref["se"]], rtol=0, atol=1e-6)


def test_the_boundary_sets_exercise_the_boundaries():
    # tau^2 = 0 where Q < k - 1 (REML and DL alike), and a prediction interval from 3 sites on t(1)
    name, y, v = extra_sets()[1]
    for method in ("REML", "DL", "PM"):
        fit = random_effects(y, v, method=method)
        assert fit.q < fit.q_df and fit.tau2 == 0.0 and fit.i2 == 0.0
        assert_allclose(fit.estimate, np.sum(y / v) / np.sum(1 / v))
    name, y, v = extra_sets()[0]
    fit = random_effects(y, v)
    half = stats.t(1).isf(0.025) * math.sqrt(fit.tau2 + fit.se ** 2)
    assert_allclose([fit.pi_lower, fit.pi_upper], [fit.estimate - half, fit.estimate + half])
    two = random_effects(y[:2], v[:2])
    assert math.isnan(two.pi_lower) and math.isnan(two.pi_upper) and np.isfinite(two.ci_lower)


# --------------------------------------------------------------------------- independent checks
def _restricted_loglik(tau2, y, v):
    w = 1 / (v + tau2)
    mu = np.sum(w * y) / np.sum(w)
    return -0.5 * (np.sum(np.log(v + tau2)) + np.log(np.sum(w)) + np.sum(w * (y - mu) ** 2))


@pytest.mark.parametrize("m", list(MEASURES))
def test_reml_maximises_the_restricted_likelihood(m):
    # a slower, obviously correct REML: a bounded scalar optimiser on the restricted log-likelihood
    d = SITES[SITES["set"] == m]
    y, v = d["yi"].to_numpy(), d["vi"].to_numpy()
    fit = random_effects(y, v)
    hi = 10 * np.var(y) + 1e-12
    best = optimize.minimize_scalar(lambda t: -_restricted_loglik(t, y, v), bounds=(0, hi), method="bounded",
                                    options={"xatol": 1e-14 * hi})
    tau2 = best.x if _restricted_loglik(best.x, y, v) > _restricted_loglik(0.0, y, v) else 0.0
    assert_allclose(fit.tau2, tau2, rtol=1e-5, atol=1e-10 * hi)


def test_dl_and_hartung_knapp_by_hand():
    d = SITES[SITES["set"] == "citl"]
    y, v = d["yi"].to_numpy(), d["vi"].to_numpy()
    k, w = y.size, 1 / v
    q = np.sum(w * (y - np.sum(w * y) / w.sum()) ** 2)
    tau2 = max(0.0, (q - (k - 1)) / (w.sum() - np.sum(w ** 2) / w.sum()))
    ws = 1 / (v + tau2)
    mu = np.sum(ws * y) / ws.sum()
    se_hk = math.sqrt(np.sum(ws * (y - mu) ** 2) / (k - 1) / ws.sum())
    fit = random_effects(y, v, method="DL", hartung_knapp=True)
    assert_allclose([fit.tau2, fit.estimate, fit.se, fit.q], [tau2, mu, se_hk, q], rtol=1e-12)
    assert_allclose(fit.ci_upper, mu + stats.t(k - 1).isf(0.025) * se_hk, rtol=1e-12)
    assert_allclose(fit.i2, (q - (k - 1)) / q, rtol=1e-10)  # metafor's I^2 is Higgins' for DL


# --------------------------------------------------------------------------- the grouped result's meta-analysis
def test_meta_analysis_of_a_grouped_result(grouped):
    meta = grouped.meta_analysis()
    assert meta is grouped.meta  # held with the result, computed once
    assert isinstance(meta, MetaAnalysisResult) and meta.measures == tuple(MEASURES)
    frame = meta.to_frame()
    for m in MEASURES:
        d = SITES[SITES["set"] == m]
        ref = R[f"{m}/REML/z"]
        assert_allclose(frame.loc[m, "tau2"], ref["tau2"], rtol=1e-6, atol=1e-12)
        assert_allclose(frame.loc[m, "estimate"], ref["b"], rtol=1e-6)
        assert_allclose(meta[m].weights, (1 / (d["vi"] + ref["tau2"])) / np.sum(1 / (d["vi"] + ref["tau2"])),
                        rtol=1e-5)
    natural = meta.to_frame(natural=True)
    assert_allclose(natural.loc["log_oe", "estimate"], math.exp(R["log_oe/REML/z"]["b"]), rtol=1e-6)
    assert_allclose(natural.loc["ece", "ci_upper"], math.sqrt(R["ece/REML/z"]["ci_ub"]), rtol=1e-6)
    assert_allclose(natural.loc["ece", "ci_lower"], max(R["ece/REML/z"]["ci_lb"], 0) ** 0.5, rtol=1e-6)
    # the slope is tested against 1, the others against 0
    s = meta["slope"]
    assert_allclose(s.statistic, (s.estimate - 1) / s.se)
    hk = grouped.meta_analysis(["citl"], method="PM", hartung_knapp=True)
    assert hk.measures == ("citl",) and hk is not grouped.meta
    assert_allclose(hk["citl"].ci_lower, R["citl/PM/knha"]["ci_lb"], rtol=1e-6)
    text = str(meta.summary())
    assert "REML" in text and "O/E" in text and "Riley" in text
    d = meta.to_dict()
    assert d["measures"]["log_oe"]["natural"]["estimate"] == pytest.approx(math.exp(R["log_oe/REML/z"]["b"]))
    sites = meta.site_frame("citl")
    assert sites.index.name == "site" and list(sites.index) == list(grouped.to_frame().index)
    assert_allclose(sites["estimate"], grouped.to_frame()["citl"], rtol=0)
    assert_allclose(sites["ci_upper"], sites["estimate"] + stats.norm.isf(0.025) * sites["se"], rtol=1e-12)
    assert_allclose(sites["weight_pct"].sum(), 100.0)


def test_sites_left_out_and_too_few_sites():
    df = sites_frame()
    df.loc[df["site"] == "site3", "y"] = 0  # a single outcome class: not analysed
    g = ct.calib_ci("y ~ p", data=df[df["site"].isin(["site1", "site2", "site3"])], by="site", rng=0)
    meta = g.meta
    assert meta.left_out["citl"] == {"site3": "not analysed"}
    assert meta["citl"].k == 2 and math.isnan(meta["citl"].pi_lower)
    assert any("site3 (not analysed)" in n for n in meta.notes())
    one = ct.calib_ci("y ~ p", data=df[df["site"].isin(["site1", "site3"])], by="site", rng=0)
    assert one.meta.pooled == {}
    assert "at least two sites" in one.meta.left_out_measures["ece"]
    assert "not pooled" in str(one.meta.summary())


@pytest.mark.parametrize("kwargs, exc, word", [
    ({"method": "ML"}, OptionError, "method"),
    ({"hartung_knapp": "yes"}, OptionTypeError, "hartung_knapp"),
    ({"measures": ["ece", "auc"]}, OptionError, "measures"),
    ({"measures": []}, OptionError, "measures"),
    ({"alpha": 1.5}, OptionError, "alpha"),
])
def test_bad_options_name_the_argument(grouped, kwargs, exc, word):
    with pytest.raises(exc, match=word):
        grouped.meta_analysis(**kwargs)


@pytest.mark.parametrize("y, v, word", [([0.1], [0.01], "at least two"), ([0.1, np.nan], [0.01, 0.01], "finite"),
                                        ([0.1, 0.2], [0.01, 0.0], "> 0"), ([0.1, 0.2], [0.01], "same length")])
def test_random_effects_refuses_bad_input(y, v, word):
    with pytest.raises(ValueError, match=word):
        random_effects(y, v)


# --------------------------------------------------------------------------- every group judged by every measure
def _age_frame(seed, n, shifts):
    rng = np.random.default_rng(seed)
    parts = []
    for label, m, s in zip(("18-44", "45-64", "65+"), n, shifts):
        lp = rng.normal(-1.8, 0.9, m)
        y = rng.binomial(1, 1 / (1 + np.exp(-(lp + s))))
        parts.append(pd.DataFrame({"y": y, "p": 1 / (1 + np.exp(-lp)), "age": label}))
    return pd.concat(parts, ignore_index=True)


def test_group_measures_are_the_logistic_fits_of_the_groups_rows(grouped):
    # CITL (offset logit p), slope (on logit p) and O/E of each group, from statsmodels directly
    import statsmodels.api as sm

    df = sites_frame()
    table = grouped.to_frame()
    for site in ("site1", "site6"):
        d = df[df["site"] == site]
        lp = np.log(d["p"].to_numpy() / (1 - d["p"].to_numpy()))
        citl = sm.GLM(d["y"], np.ones((len(d), 1)), family=sm.families.Binomial(), offset=lp).fit()
        joint = sm.GLM(d["y"], sm.add_constant(lp), family=sm.families.Binomial()).fit()
        row = table.loc[site]
        assert_allclose([row["citl"], row["citl_se"]], [np.asarray(citl.params)[0], np.asarray(citl.bse)[0]], rtol=1e-6)
        assert_allclose([row["slope"], row["slope_se"]], [np.asarray(joint.params)[1], np.asarray(joint.bse)[1]], rtol=1e-6)
        assert_allclose(row["slope_ci_lower"], np.asarray(joint.params)[1] - 1.959963984540054 * np.asarray(joint.bse)[1], rtol=1e-6)
        o, e = d["y"].sum(), d["p"].sum()
        se = math.sqrt((1 - o / len(d)) / o)
        assert_allclose([row["oe"], row["log_oe_se"], row["oe_ci_upper"]],
                        [o / e, se, o / e * math.exp(1.959963984540054 * se)], rtol=1e-9)
        assert_allclose(row["estimate_se"] ** 2, SITES.query("set == 'ece' and site == @site")["vi"].iloc[0],
                        rtol=1e-9)


def test_the_issues_age_group_is_revealed_by_citl_and_oe():
    # issue 26: in an age group of a shifted model the ECE is 0 and its test p = 0.88, while CITL rejects
    g = ct.calib_ci("y ~ p", data=_age_frame(6, (1500, 3000, 1500), (-0.45, -0.13, 0.45)), by="age", rng=0)
    row = g.to_frame().loc["45-64"]
    assert row["ece"] == 0.0 and row["pvalue"] > 0.8 and row["contains_zero"]
    assert row["citl_ci_upper"] < 0 and row["oe_ci_upper"] < 1  # over-predicted: CITL and O/E reject
    assert 0.85 < row["oe"] < 0.92
    text = str(g.summary())
    assert "CITL" in text and "O/E" in text and f"{row['oe']:.3g}" in text


def test_the_pooled_ece_below_every_group_is_explained_once():
    df = _age_frame(3, (1500, 1500, 1500), (-0.5, 0.5, -0.45))
    g = ct.calib_ci("y ~ p", data=df, by="age", rng=0)
    table = g.to_frame()
    assert g.pooled.ece < table["ece"].min()
    sentence = g.pooled_ece_text()
    assert sentence is not None and "opposite sign" in sentence and f"{g.pooled.ece:.3g}" in sentence
    assert f"{table['citl'].min():.3g}" in sentence and f"{table['citl'].max():.3g}" in sentence
    assert sentence in g.notes() and sentence.split(":")[0] in " ".join(str(g.summary()).split())
    same = ct.calib_ci("y ~ p", data=_age_frame(3, (1500, 1500, 1500), (0.5, 0.5, 0.45)), by="age", rng=0)
    if same.pooled.ece >= same.to_frame()["ece"].min():
        assert same.pooled_ece_text() is None


def test_measures_are_missing_where_undefined():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(3), 600)
    y = np.array([rng.choice(3, p=p) for p in probs])
    g = ct.calib_ci(y=y, probs=probs, k=2, by=np.repeat(["a", "b"], 300), rng=0)
    table = g.to_frame()
    assert table[["citl", "slope", "oe"]].isna().all().all()
    assert g.meta.measures == ("ece",)


# --------------------------------------------------------------------------- plots and the report
def test_forest_plot_of_a_measure_reads_the_table(grouped):
    from calibtest.reporting.forest import forest_rows, meta_forest_rows

    table = grouped.to_frame()
    rows = forest_rows(grouped, "oe")
    assert [r["ece"] for r in rows[:-1]] == list(table["oe"])
    assert [r["upper"] for r in rows[:-1]] == list(table["oe_ci_upper"])
    pooled = rows[-1]
    assert pooled["pooled"] and pooled["ece"] == grouped.pooled_measures["oe"]
    o, e = grouped.pooled.data.y[:, 0].sum(), grouped.pooled.data.z[:, 0].sum()
    assert_allclose(pooled["ece"], o / e, rtol=1e-12)
    with pytest.raises(ValueError, match="measure"):
        forest_rows(grouped, "auc")
    tested = ct.calib_test("y ~ p", data=sites_frame(), by="site", rng=0, n_draws=99)
    with pytest.raises(ValueError, match="calib_ci"):
        forest_rows(tested, "citl")
    with pytest.raises(TypeError, match="calib_ci"):
        tested.meta_analysis()
    meta = grouped.meta
    mrows = meta_forest_rows(meta, "log_oe")
    assert [r["kind"] for r in mrows] == ["site"] * 8 + ["pooled", "prediction"]
    assert_allclose([r["point"] for r in mrows[:8]], np.exp(meta["log_oe"].y))
    assert_allclose(mrows[-1]["lower"], math.exp(R["log_oe/REML/z"]["riley_lb"]), rtol=1e-6)
    assert_allclose(sum(r["weight"] for r in mrows[:8]), 100.0)


def test_plots_draw(grouped):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = grouped.plot_forest(measure="slope")
    assert "slope" in ax.get_xlabel() and len(ax.get_yticklabels()) == 9
    ax = grouped.meta.plot_forest("ece")
    assert "ECE" in ax.get_title(loc="left") and len(ax.get_yticklabels()) == 10
    plt.close("all")


def test_report_section_calibration_across_sites(grouped):
    import re

    from calibtest.reporting.html import render_html

    html = render_html(grouped, labels=["risk"], figures=False)
    section = html.split('id="sites-1"', 1)[1].split("</section>", 1)[0]
    assert "Calibration across sites: risk by site" in section
    natural = grouped.meta.to_frame(natural=True)
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", section)]
    rows = [cells[i:i + 9] for i in range(0, len(cells), 9)]
    assert [r[0] for r in rows] == ["O/E", "CITL (logit scale)", "Calibration slope", "ECE"]
    for r, m in zip(rows, MEASURES):
        assert int(r[1]) == 8
        assert float(r[2]) == pytest.approx(natural.loc[m, "estimate"], rel=5e-4)
        lo, hi = (float(x) for x in r[4].strip("[]").split(", "))
        assert lo == pytest.approx(natural.loc[m, "pi_lower"], rel=5e-4, abs=1e-12)
        assert hi == pytest.approx(natural.loc[m, "pi_upper"], rel=5e-4)
    measures = html.split("judged by every measure", 1)[1].split("</table>", 1)[0]
    assert f"{grouped.to_frame().loc['site3', 'citl']:.4g}" in measures


def test_recalibration_fits_without_a_maximum_are_missing():
    from calibtest.core.recalibration import calibration_measures_rows

    p = np.linspace(0.05, 0.95, 40)
    y = (p > 0.5).astype(float)  # complete separation: the slope has no finite maximum
    out = calibration_measures_rows(p, y, 0.05)
    assert math.isnan(out["slope"]) and math.isnan(out["slope_ci_upper"])
    assert np.isfinite(out["citl"]) and out["oe"] == pytest.approx(y.sum() / p.sum())
    # rows with p = 0 or 1 (an infinite logit) stay out of the fits, as in val.prob, and in O/E
    rng = np.random.default_rng(1)
    q = rng.uniform(0.1, 0.9, 300)
    z = (rng.random(300) < q).astype(float)
    base = calibration_measures_rows(q, z, 0.05)
    more = calibration_measures_rows(np.r_[q, 0.0, 1.0], np.r_[z, 0.0, 1.0], 0.05)
    assert more["citl"] == pytest.approx(base["citl"], rel=1e-9) and more["slope"] == pytest.approx(base["slope"])
    assert more["oe"] == pytest.approx((z.sum() + 1) / (q.sum() + 1))


# --------------------------------------------------------------------------- the ECE^2's prediction interval
def test_gamma_marginal_likelihood_matches_quadrature():
    """The midpoint rule over 128 gamma quantiles against scipy's quad of N(y; theta, V2 + r theta) times the
    gamma density, at three shapes (a spike at 0, chi-square-like, nearly a point mass)."""
    from calibtest.ece.meta_analysis import _LOG_SHAPES, _gamma_log_posterior
    from scipy import integrate
    y, v2, r = np.array([0.004, 0.012]), np.array([2e-6, 5e-6]), np.array([2e-3, 1e-3])
    log_means = np.array([math.log(0.006)])
    got = _gamma_log_posterior(y, v2, r, log_means)[0]
    for j in (4, 15, 30):
        kappa, mean = math.exp(_LOG_SHAPES[j]), 0.006
        total = 0.0
        for yi, vi, ri in zip(y, v2, r):
            f = lambda t: stats.norm.pdf(yi, t, math.sqrt(vi + ri * t)) * stats.gamma.pdf(t, kappa, scale=mean / kappa)
            lo, hi = stats.gamma.ppf([1e-12, 1 - 1e-12], kappa, scale=mean / kappa)
            total += math.log(integrate.quad(f, lo, hi, points=[yi], limit=400, epsabs=0)[0])
        assert got[j] == pytest.approx(total, abs=0.02)


def test_gamma_prediction_interval_quantiles_by_sampling_the_posterior():
    """The interval's ends are the alpha/2 and 1 - alpha/2 quantiles of the posterior mixture: drawing (m, kappa)
    from the grid posterior, then a gamma draw, puts alpha/2 of 400,000 draws below and above them."""
    from calibtest.ece.meta_analysis import _LOG_SHAPES, _N_LOG_MEANS, _gamma_log_posterior, gamma_prediction_interval
    rng = np.random.default_rng(4)
    theta = rng.gamma(0.5, 0.01, 8)
    v2, r = np.full(8, 4e-6), np.full(8, 1e-3)
    y = theta + rng.normal(0, np.sqrt(v2 + r * theta))
    lo, hi = gamma_prediction_interval(y, v2, r, 0.1)
    m0 = max(y.mean(), math.sqrt(v2.mean()))
    log_means = np.linspace(math.log(m0) - 5, math.log(m0) + 2.5, _N_LOG_MEANS)
    lp = _gamma_log_posterior(y, v2, r, log_means)
    # the prior: uniform on s = sqrt(c), c = kappa^(-1/2) the coefficient of variation, s = kappa^(-1/4); a cell
    # of width h in log kappa holds the prior mass |ds/dlog kappa| h = s h / 4, proportional to kappa^(-1/4)
    post = (np.exp(lp - lp.max()) * np.exp(-0.25 * _LOG_SHAPES)[None, :]).ravel()
    pick = rng.choice(post.size, size=400_000, p=post / post.sum())
    mean, kappa = np.exp(log_means)[pick // _LOG_SHAPES.size], np.exp(_LOG_SHAPES)[pick % _LOG_SHAPES.size]
    draws = rng.gamma(kappa, mean / kappa)
    assert np.mean(draws < lo) == pytest.approx(0.05, abs=0.0015)  # 3.3 binomial s.e.
    assert np.mean(draws > hi) == pytest.approx(0.05, abs=0.0015)


def test_gamma_prediction_interval_prior_on_the_coefficient_of_variation_reaches_higher():
    """The prior uniform on sqrt of the coefficient of variation puts more mass on skewed laws (small kappa) than
    the flat prior on log kappa, so on the same sites its upper end is higher; shape_prior_power=0 is the flat
    prior, and 1/2 (uniform on the coefficient of variation) higher still."""
    from calibtest.ece.meta_analysis import SHAPE_PRIOR_POWER, gamma_prediction_interval
    assert SHAPE_PRIOR_POWER == 0.25
    rng = np.random.default_rng(7)
    y, v2, r = _synthetic_sites(rng, 8, 0.5)
    flat = gamma_prediction_interval(y, v2, r, 0.1, shape_prior_power=0.0)
    cv = gamma_prediction_interval(y, v2, r, 0.1)
    assert cv[1] > flat[1] * 1.01
    assert gamma_prediction_interval(y, v2, r, 0.1, shape_prior_power=0.5)[1] > cv[1] * 1.01
    assert cv == gamma_prediction_interval(y, v2, r, 0.1, shape_prior_power=0.25)


def test_grouped_meta_analysis_uses_the_gamma_interval_for_the_ece(grouped):
    meta = grouped.meta_analysis()
    ece, oe = meta["ece"], meta["log_oe"]
    assert ece.pi_method == "gamma" and oe.pi_method == "normal"
    from calibtest.ece.meta_analysis import ece_site_variances, gamma_prediction_interval
    v2, rate = ece_site_variances(grouped.groups, ece.labels)
    lo, hi = gamma_prediction_interval(ece.y, v2, rate, ece.alpha)
    assert ece.pi_upper == hi and ece.pi_lower == (0.0 if ece.ci_lower <= 0 else lo)
    assert 0.0 <= ece.pi_lower < ece.pi_upper
    # the other measures keep Riley's interval, every number as before
    half = stats.t(oe.k - 2).isf(oe.alpha / 2) * math.sqrt(oe.tau2 + oe.se ** 2)
    assert_allclose([oe.pi_lower, oe.pi_upper], [oe.estimate - half, oe.estimate + half], rtol=1e-12)
    # a table alone (no site results): the sites' own variances, r = 0
    from calibtest.ece.meta_analysis import Sites, pool_sites
    alone = pool_sites(Sites(grouped.to_frame(), grouped.by))["ece"]
    assert alone.pi_upper == gamma_prediction_interval(ece.y, ece.v, np.zeros(ece.k), ece.alpha)[1]


def _synthetic_sites(rng, k, shape, mean=0.0056):
    """Site ECE^2 ~ Gamma(shape, mean) (all equal to ``mean`` for shape 0), estimated with the variance
    V2 + r theta of binary sites of n ~ log-U(300, 3000) rows (V2 = 2.3e-5 (300 / n)^1.6, r = 0.69 / n: the
    parts of sites with logit p ~ N(-1, 1))."""
    theta = rng.gamma(shape, mean / shape, k) if shape else np.full(k, mean)
    n = np.exp(rng.uniform(math.log(300), math.log(3000), k))
    v2, r = 2.3e-5 * (300 / n) ** 1.6, 0.69 / n
    return theta + rng.normal(0, np.sqrt(v2 + r * theta)), v2, r


@pytest.mark.slow
def test_gamma_prediction_interval_covers_a_new_sites_ece():
    """Sites whose ECE^2 is a scaled chi-square on 1 df (shape 0.5) observed with the variance V2 + r theta: the
    90% interval from 8 sites covers a new site's ECE^2 in at least 0.87 of 200 meta-analyses x 200 new sites
    (Monte Carlo s.e. about 0.01); Riley's normal interval on the same sites covers less."""
    from calibtest.ece.meta_analysis import gamma_prediction_interval
    rng = np.random.default_rng(35)
    gamma_cover, normal_cover = [], []
    for _ in range(200):
        y, v2, r = _synthetic_sites(rng, 8, 0.5)
        lo, hi = gamma_prediction_interval(y, v2, r, 0.1)
        new = rng.gamma(0.5, 0.0056 / 0.5, 200)
        gamma_cover.append(np.mean((new >= lo) & (new <= hi)))
        fit = random_effects(y, v2 + r * np.maximum(y, 0), alpha=0.1)
        normal_cover.append(np.mean((new >= fit.pi_lower) & (new <= fit.pi_upper)))
    assert np.mean(gamma_cover) >= 0.87
    assert np.mean(normal_cover) < np.mean(gamma_cover) - 0.02


@pytest.mark.slow
def test_gamma_prediction_interval_is_narrow_without_heterogeneity():
    """All 8 sites with the same ECE^2: the 90% interval covers it, and is at most 1.5 times as wide as Riley's."""
    from calibtest.ece.meta_analysis import gamma_prediction_interval
    rng = np.random.default_rng(36)
    cover, ratio = [], []
    for _ in range(100):
        y, v2, r = _synthetic_sites(rng, 8, 0)
        lo, hi = gamma_prediction_interval(y, v2, r, 0.1)
        fit = random_effects(y, v2 + r * np.maximum(y, 0), alpha=0.1)
        cover.append(lo <= 0.0056 <= hi)
        ratio.append((hi - lo) / (fit.pi_upper - max(fit.pi_lower, 0.0)))
    assert np.mean(cover) >= 0.9
    assert np.median(ratio) < 1.5
