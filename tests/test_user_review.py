"""Fixes from a user's review of the survival, clustered and meta-analysis features (wording and consistency)."""
import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.reporting.html import _public


def test_public_drops_a_trailing_see_with_its_document():
    # the survival result's refusal of Hosmer-Lemeshow ends "...: see docs/survival.md"; the report
    # leaves the package's documents out and must not leave a dangling "see"
    text = ("val_prob needs binary outcomes; 3 rows of this survival result are censored before the "
            "horizon (their outcomes are IPCW-weighted): see docs/survival.md")
    assert _public(text) == ("val_prob needs binary outcomes; 3 rows of this survival result are censored "
                             "before the horizon (their outcomes are IPCW-weighted)")
    assert _public("a fact, see ``docs/scale.md``.") == "a fact."
    assert _public("a fact (see docs/scale.md).") == "a fact."
    assert _public("a fact (docs/scale.md, section 2).") == "a fact."
    assert _public("described in docs/clusters.md") == "described in"  # a bare path goes, as before


@pytest.fixture(scope="module")
def clustered():
    """600 rows from 15 sites with a shared site effect; calibrated on average."""
    rng = np.random.default_rng(7)
    site = np.repeat(np.arange(15), 40)
    p = rng.uniform(0.1, 0.9, site.size)
    shift = rng.normal(0, 0.05, 15)[site]
    y = rng.binomial(1, np.clip(p + shift, 0, 1))
    df = pd.DataFrame({"y": y, "p": p, "site": site})
    return ct.calib_ci("y ~ p", data=df, cluster="site", rng=3)


def test_clustered_notes_name_the_sign_flip_test_not_label_draws(clustered):
    res = clustered
    assert res.clustering is not None and res.null == "monte-carlo"
    text = res.summary().as_text()
    flat = " ".join(text.split())
    assert "The monte-carlo test" not in flat
    assert res.conf_int().contains_zero  # the note below is the one of an interval holding 0
    assert f"The cluster sign-flip ({res.clustering.n_patterns} sign patterns) test does not reject" in flat
    assert "label draws" not in flat
    assert "(monte-carlo, sign flips of whole clusters)" in flat


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_clustered_report_tables_state_the_clustered_se_and_sign_flips(clustered):
    from calibtest.reporting.html import build_context, fmt

    res = clustered
    m = build_context([res])["models"][0]
    regimes = {row[0]: row[1:] for row in m["regimes"]["rows"]}
    cl = res.clustering
    se = float(np.sqrt(cl.linear_variance + cl.null_variance))  # docs/clusters.md: se = sqrt(V_1 + V_0)
    assert regimes["Standard error of T"][1] == f"se = √(V₁ + V₀) = {fmt(se)} (cluster-robust)"
    assert "σ₁ / √n" not in regimes["Standard error of T"][1]
    df = cl.n_clusters - 1
    assert f"t with G − 1 = {df} df" in regimes["Asymptotic law of T"][1]
    assert f"t_{df}(1−α/2)·se" in regimes["Role in the interval"][1]
    assert "z(" not in regimes["Role in the interval"][1]
    null_rows = {row[0]: row[1] for row in m["null_test"]["rows"]}
    assert "Monte Carlo draws" not in null_rows["Statistic"]
    assert f"{res.monte_carlo.n_draws} random sign patterns of the {cl.n_clusters} clusters" in null_rows["Statistic"]


def test_clustered_report_does_not_call_the_bin_terms_sum_the_estimate(clustered):
    from calibtest.reporting.html import build_context

    res = clustered
    terms = float(res.bin_table()["contribution"].sum())
    assert terms == pytest.approx(res.clustering.iid_estimate, rel=1e-12, abs=1e-15)  # the paper's T
    assert abs(terms - res.estimate) > 1e-6  # so "(= T)" next to T_cl would be false
    rows = {row[0]: row[1] for row in build_context([res])["models"][0]["bins"]["rows"]}
    assert "(= T)" not in rows["Sum of the bins' terms of T"]
    assert "the paper's T" in rows["Sum of the bins' terms of T"]


def test_clustered_report_methods_and_limitations_describe_the_clustered_analysis(clustered):
    from calibtest.reporting.html import build_context, limitation_of_null

    res = clustered
    ctx = build_context([res])
    assert ctx["has_clustering"] and not ctx["uses_conditional_null"]  # a sign-flip null is not conditional
    text = limitation_of_null([res], ["p"])
    assert "conditional on the observed predictions" not in text
    assert "σ₁/√n" not in text
    assert "cluster sign-flip test" in text and "G − 1 degrees of freedom" in text
    from calibtest.reporting.html import render_html

    flat = " ".join(render_html([res]).split())
    assert "independent clusters take the place of independent rows" in flat
    assert "Clustered rows (patients within sites)" in flat


def test_clusters_within_groups_notes_state_the_cluster_robust_variances():
    rng = np.random.default_rng(11)
    site = np.repeat(np.arange(16), 40)
    p = rng.uniform(0.1, 0.9, site.size)
    y = rng.binomial(1, np.clip(p + rng.normal(0, 0.05, 16)[site], 0, 1))
    df = pd.DataFrame({"y": y, "p": p, "site": site, "region": np.where(site < 8, "north", "south")})
    grouped = ct.calib_ci("y ~ p", data=df, by="region", cluster="site", rng=5)
    # the heterogeneity test uses each group's cluster-robust se^2 whole (no part evaluated at the pooled ECE^2)
    v = np.array([grouped.groups[g].se ** 2 for g in ("north", "south")])
    t = np.array([grouped.groups[g].estimate for g in ("north", "south")])
    t_bar = np.sum(t / v) / np.sum(1 / v)
    assert grouped.heterogeneity_statistic == pytest.approx(np.sum((t - t_bar) ** 2 / v), rel=1e-10)
    text = grouped.heterogeneity_text()
    assert "cluster-robust se^2" in text and "first-order part at that ECE^2" not in text
    meta = grouped.meta_analysis()
    assert meta.clustered and grouped.meta_analysis(method="DL").clustered
    assert "Wald s.e." not in " ".join(meta.notes()) and "cluster-robust s.e." in meta.notes()[1]
    plain = ct.calib_ci("y ~ p", data=df, by="region").meta_analysis()
    assert not plain.clustered and "Wald s.e." in plain.notes()[1]


def test_clustered_flexible_curve_prints_the_cluster_robust_citl_and_slope(clustered):
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    from calibtest.reporting import plotting

    res = clustered
    robust = res.clustering.measures
    (a0, a1), (b0, b1) = robust.citl_ci(), robust.slope_ci()
    want = (f"CITL {robust.citl:.2f} [{a0:.2f}, {a1:.2f}]; slope {robust.slope:.2f} [{b0:.2f}, {b1:.2f}] "
            "(95% CI, cluster-robust)")
    vp = res.val_prob()
    iid = f"[{vp.citl_ci[0]:.2f}, {vp.citl_ci[1]:.2f}]"
    assert iid not in want  # the i.i.d. Wald interval differs here, so the test tells them apart
    fig = plotting.flexible_curve_figure([res], ["p"], alpha=res.alpha)
    texts = " ".join(t.get_text() for t in fig.findobj(Text))
    plt.close(fig)
    assert want in texts and iid not in texts


def test_survival_report_settings_name_the_survival_target():
    from calibtest.reporting.html import build_context

    rng = np.random.default_rng(4)
    n = 400
    risk = rng.uniform(0.1, 0.7, n)
    t_event = rng.exponential(10 / -np.log1p(-risk))  # P(T <= 10) = risk
    t_cens = rng.uniform(3, 30, n)
    res = ct.calib_ci(time=np.minimum(t_event, t_cens), event=(t_event <= t_cens).astype(int), probs=risk,
                      horizon=10)
    assert res.survival.n_censored > 0
    rows = {row[0]: row[1] for row in build_context([res])["models"][0]["settings"]["rows"]}
    assert rows["Target (mode)"].startswith("survival at the horizon t = 10:")
    assert "P(y = 1)" not in rows["Target (mode)"]


@pytest.mark.parametrize("python, cli", [
    ("horizon= needs a survival outcome 'Surv(time, event) ~ risk', got 'y'",
     "--horizon needs a survival outcome 'Surv(time, event) ~ risk', got 'y'"),
    ("censoring='cox' needs censoring_covariates= (columns of data, or an (n, p) array)",
     "--censoring cox needs --censoring-covariates (columns of data, or an (n, p) array)"),
    ("horizon=100 is beyond the last follow-up time (24.99)", "--horizon 100 is beyond the last follow-up time (24.99)"),
    ("the outcome is a survival outcome: calib_ci(..., horizon=t) analyses it, with horizon= the time t",
     "the outcome is a survival outcome: --horizon t analyses it, with --horizon the time t"),
    ("cluster='nope' is not a column of data", "--cluster nope is not a column of data"),
    ("missing='drop' drops rows", "--missing drop drops rows"),  # as before
])
def test_cli_spells_the_survival_and_cluster_options_as_flags(python, cli):
    from calibtest.cli import cli_spelling

    assert cli_spelling(python) == cli


def test_survival_reliability_refusal_points_to_the_horizon_diagram_that_works():
    import re

    import matplotlib.pyplot as plt

    from calibtest.reporting.survival_plot import plot_survival_calibration

    rng = np.random.default_rng(9)
    n = 300
    risk = rng.uniform(0.1, 0.7, n)
    t_event = rng.exponential(10 / -np.log1p(-risk))
    t_cens = rng.uniform(3, 30, n)
    res = ct.calib_ci(time=np.minimum(t_event, t_cens), event=(t_event <= t_cens).astype(int), probs=risk,
                      horizon=10)
    with pytest.raises(ValueError, match=re.escape("plot_survival_calibration(res.evidence().survival)")):
        res.plot_reliability()
    ax = plot_survival_calibration(res.evidence().survival)  # what the message names runs
    plt.close(ax.figure)


def test_clustered_multiscale_summary_speaks_of_sign_patterns_not_label_draws():
    rng = np.random.default_rng(7)
    site = np.repeat(np.arange(15), 40)
    p = rng.uniform(0.1, 0.9, site.size)
    y = rng.binomial(1, np.clip(p + rng.normal(0, 0.05, 15)[site], 0, 1))
    df = pd.DataFrame({"y": y, "p": p, "site": site})
    flat = " ".join(ct.calib_test("y ~ p", data=df, cluster="site", rng=2).summary().as_text().split())
    for stale in ("label draws", "label vectors", "Label vectors", "sd(T | Z)", "sd 1 given the predictions",
                  "exact size given the predictions"):
        assert stale not in flat
    assert "sign patterns of whole clusters" in flat and "max of z = T_cl / sqrt(V_0)" in flat
    plain = " ".join(ct.calib_test("y ~ p", data=df, rng=2).summary().as_text().split())
    assert "label vectors drawn from the predictions" in plain and "sd(T | Z)" in plain  # unchanged without clusters


def test_clustered_comparison_names_the_cluster_robust_one_model_se():
    rng = np.random.default_rng(7)
    site = np.repeat(np.arange(15), 40)
    p = rng.uniform(0.1, 0.9, site.size)
    y = rng.binomial(1, np.clip(p + rng.normal(0, 0.05, 15)[site], 0, 1))
    df = pd.DataFrame({"y": y, "p": p, "p2": np.clip(p * 1.1, 0, 1), "site": site})
    cmp = ct.calib_compare("y ~ p", "y ~ p2", data=df, cluster="site")
    cl = cmp.result_a.clustering
    assert cmp.result_a.se == pytest.approx(np.sqrt(cl.linear_variance + cl.null_variance), rel=1e-12)
    flat = " ".join(cmp.summary().as_text().split())
    assert "sigma1 / sqrt(n)" not in flat and "cluster-robust sqrt(V_1 + V_0)" in flat


def test_survival_groups_count_events_by_the_horizon_in_the_pooled_row():
    rng = np.random.default_rng(5)
    n = 600
    risk = rng.uniform(0.1, 0.7, n)
    t_event = rng.exponential(10 / -np.log1p(-risk))
    t_cens = rng.uniform(1, 14, n)  # heavy censoring before t = 10: IPCW outcomes well above 1
    df = pd.DataFrame({"time": np.minimum(t_event, t_cens), "event": (t_event <= t_cens).astype(int),
                       "risk": risk, "region": rng.choice(["north", "south"], n)})
    by_hand = int(((df.event == 1) & (df.time <= 10)).sum())  # events by t, counted from the data
    grouped = ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=10, by="region")
    assert int(np.rint(grouped.pooled.data.y[:, 0]).sum()) != by_hand  # rounding IPCW outcomes miscounts
    assert int(grouped.table["events"].sum()) == by_hand
    flat = grouped.summary().as_text()
    pooled_line = next(line for line in flat.splitlines() if line.startswith("(pooled)"))
    assert pooled_line.split()[2] == str(by_hand)  # n, events, ...
    assert "survival at a horizon" in flat and "E[y | p] = p" not in flat


def test_survival_groups_report_counts_events_by_the_horizon_in_the_pooled_row():
    from calibtest.reporting.html import subgroup_rows

    rng = np.random.default_rng(5)
    n = 600
    risk = rng.uniform(0.1, 0.7, n)
    t_event = rng.exponential(10 / -np.log1p(-risk))
    t_cens = rng.uniform(1, 14, n)
    df = pd.DataFrame({"time": np.minimum(t_event, t_cens), "event": (t_event <= t_cens).astype(int),
                       "risk": risk, "region": rng.choice(["north", "south"], n)})
    by_hand = int(((df.event == 1) & (df.time <= 10)).sum())
    grouped = ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=10, by="region")
    pooled = subgroup_rows(grouped)[-1]
    assert pooled[0] == "all rows (pooled)" and pooled[2] == str(by_hand)


def test_survival_report_methods_leave_out_the_binary_evidence_paragraph():
    from calibtest.reporting.html import render_html

    rng = np.random.default_rng(9)
    n = 300
    risk = rng.uniform(0.1, 0.7, n)
    t_event = rng.exponential(10 / -np.log1p(-risk))
    t_cens = rng.uniform(3, 30, n)
    res = ct.calib_ci(time=np.minimum(t_event, t_cens), event=(t_event <= t_cens).astype(int), probs=risk,
                      horizon=10)
    flat = " ".join(render_html([res], figures=False).split())
    assert "labels redrawn from the predictions" not in flat  # no multi-scale test on IPCW rows
    assert "Greenwood–Nam–D'Agostino test" in flat  # the survival paragraph says what the table holds
    binary = ct.calib_ci(y=rng.binomial(1, risk), probs=risk)
    assert "labels redrawn from the predictions" in " ".join(render_html([binary], figures=False).split())


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_forest_figures_may_print_taller_than_other_figures():
    from pathlib import Path

    from calibtest.reporting.html import render_html

    rng = np.random.default_rng(3)
    n = 900
    p = rng.uniform(0.1, 0.9, n)
    df = pd.DataFrame({"y": rng.binomial(1, p), "p": p, "site": rng.choice(["s1", "s2", "s3"], n)})
    html = render_html([ct.calib_ci("y ~ p", data=df, by="site")])
    # the subgroup forest plot and the meta-analysis forest plots: one row per site, printed up to 225 mm high
    assert html.count('<figure id="figure-') >= 4 and html.count('class="tall"') == 2
    css = (Path(ct.__file__).parent / "templates" / "report.css")
    css = css if css.exists() else Path(__file__).parents[1] / "templates" / "report.css"
    assert "figure.tall img { max-height: 225mm; }" in css.read_text()


def test_few_clusters_print_no_infinite_threshold():
    from calibtest.reporting.html import build_context

    rng = np.random.default_rng(7)
    site = np.repeat(np.arange(5), 80)
    p = rng.uniform(0.1, 0.9, site.size)
    df = pd.DataFrame({"y": rng.binomial(1, p), "p": p, "site": site})
    res = ct.calib_ci("y ~ p", data=df, cluster="site")
    cl = res.clustering
    assert cl.exact and cl.n_patterns == 2 ** (5 - 1)  # every sign pattern, the identity included
    assert 1 / cl.n_patterns > res.alpha and not np.isfinite(res.threshold)  # no p-value can reach alpha
    text = res.summary().as_text()
    row = next(line for line in text.splitlines() if line.startswith("cluster sign-flip:"))
    assert row.split()[2] == "16" and "inf" not in row  # the patterns of the Null line, and no 'inf'
    null_rows = {r[0]: r[1] for r in build_context([res], figures=False)["models"][0]["null_test"]["rows"]}
    assert null_rows["Critical value of T at α"].startswith("none: no attainable p-value")


def test_clustered_report_settings_do_not_name_an_option_the_user_never_gave(clustered):
    from calibtest.reporting.html import build_context

    rows = {row[0]: row[1] for row in build_context([clustered])["models"][0]["settings"]["rows"]}
    null_row = rows["Null distribution of the test of ECE = 0"]
    assert "sign" in null_row and "null='monte-carlo'" not in null_row


def test_survival_report_and_summary_name_the_same_ipcw_test():
    from calibtest.reporting.html import build_context
    from calibtest.display.summary import null_name

    rng = np.random.default_rng(4)
    n = 400
    risk = rng.uniform(0.1, 0.7, n)
    t_event = rng.exponential(10 / -np.log1p(-risk))
    t_cens = rng.uniform(3, 30, n)
    res = ct.calib_ci(time=np.minimum(t_event, t_cens), event=(t_event <= t_cens).astype(int), probs=risk,
                      horizon=10)
    assert res.censored and null_name(res) == "IPCW asymptotic"
    m = build_context([res])["models"][0]
    assert "the asymptotic test" not in str(m) and "IPCW asymptotic" in str(m)
