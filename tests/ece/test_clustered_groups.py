"""calib_ci(..., by=, cluster=) with clusters nested in the groups: each group is the clustered analysis of its
own rows and clusters (checked against calib_ci on the group's rows alone), by= the cluster itself is refused
towards meta_analysis(), a group of one cluster is listed with the reason."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import special

import calibtest as ct
from calibtest.options import DataError, OptionError


def countries(seed=0, G=24):
    rng = np.random.default_rng(seed)
    site = np.repeat(np.arange(G), rng.integers(40, 100, G))
    p = special.expit(rng.normal(-0.8, 1.0, site.size))
    y = (rng.uniform(size=site.size) < special.expit(special.logit(p) + rng.normal(0, 0.5, G)[site])).astype(int)
    country = np.where(site < 10, "A", np.where(site < 20, "B", "C"))
    return pd.DataFrame({"y": y, "p": p, "site": [f"h{g:02d}" for g in site], "country": country})


def test_each_group_is_the_clustered_analysis_of_its_rows():
    df = countries()
    grouped = ct.calib_ci("y ~ p", data=df, by="country", cluster="site", null="asymptotic")
    table = grouped.to_frame()
    for label in ("A", "B", "C"):
        rows = df[df["country"] == label]
        alone = ct.calib_ci("y ~ p", data=rows, cluster="site", null="asymptotic")
        res = grouped.groups[label]
        assert res.clustering.n_clusters == rows["site"].nunique() == alone.clustering.n_clusters
        assert res.estimate == alone.estimate and res.se == alone.se
        assert (res.ci_lower, res.ci_upper) == (alone.ci_lower, alone.ci_upper)
        assert table.loc[label, "estimate_se"] == pytest.approx(alone.se, rel=1e-14)
        m = alone.clustering.measures
        assert table.loc[label, "citl"] == m.citl and table.loc[label, "citl_se"] == m.citl_se
        assert (table.loc[label, "slope_ci_lower"], table.loc[label, "slope_ci_upper"]) == pytest.approx(m.slope_ci())
        assert (table.loc[label, "oe_ci_lower"], table.loc[label, "oe_ci_upper"]) == pytest.approx(m.oe_ci())
        assert "exploratory" in table.loc[label, "note"]  # 4 to 10 clusters per country
    whole = ct.calib_ci("y ~ p", data=df, cluster="site", null="asymptotic")
    assert grouped.pooled.estimate == whole.estimate and grouped.pooled.se == whole.se
    # the heterogeneity test uses the cluster-robust variances
    est = np.array([grouped.groups[lb].estimate for lb in "ABC"])
    w = 1 / np.array([grouped.groups[lb].se ** 2 for lb in "ABC"])
    q = float(np.sum(w * (est - np.sum(w * est) / np.sum(w)) ** 2))
    assert grouped.heterogeneity_statistic == pytest.approx(q, rel=1e-10)
    assert "nested in the groups" in " ".join(grouped.notes()) and "cluster-robust intervals" in str(grouped.summary())
    # the meta-analysis pools the cluster-robust log O/E: DerSimonian-Laird by hand
    meta = grouped.meta_analysis(["log_oe"], method="DL")
    y = np.log([grouped.groups[lb].clustering.measures.oe for lb in "ABC"])
    v = np.square([grouped.groups[lb].clustering.measures.log_oe_se for lb in "ABC"])
    w = 1 / v
    qe = np.sum(w * (y - np.sum(w * y) / np.sum(w)) ** 2)
    tau2 = max(0.0, (qe - 2) / (np.sum(w) - np.sum(w ** 2) / np.sum(w)))
    ws = 1 / (v + tau2)
    assert meta.pooled["log_oe"].estimate == pytest.approx(np.sum(ws * y) / np.sum(ws), rel=1e-10)
    assert meta.pooled["log_oe"].tau2 == pytest.approx(tau2, rel=1e-10, abs=1e-14)


def test_by_the_cluster_itself_is_refused_towards_the_meta_analysis():
    df = countries()
    with pytest.raises(OptionError, match="meta_analysis"):
        ct.calib_ci("y ~ p", data=df, by="site", cluster="site")


def test_a_group_of_one_cluster_is_listed_not_analysed():
    df = countries()
    df["country"] = np.where(df["site"] == "h00", "solo", df["country"])
    grouped = ct.calib_ci("y ~ p", data=df, by="country", cluster="site", null="asymptotic")
    assert grouped.groups["solo"] is None and "one cluster ('h00')" in grouped.reasons["solo"]
    assert grouped.groups["A"] is not None


def test_crossing_and_conditional_are_refused():
    df = countries()
    crossed = df.assign(half=np.arange(len(df)) % 2)
    with pytest.raises(DataError, match="cross"):
        ct.calib_ci("y ~ p", data=crossed, by="half", cluster="site")
    with pytest.raises(OptionError, match="conditional"):
        ct.calib_ci("y ~ p", data=df, by="country", cluster="site", null="conditional")
    assert math.isfinite(ct.calib_ci("y ~ p", data=df, by="country", cluster="site", rng=3).global_pvalue)


def test_report_of_nested_clusters_names_the_cluster_robust_intervals(tmp_path):
    grouped = ct.calib_ci("y ~ p", data=countries(), by="country", cluster="site", null="asymptotic")
    path = tmp_path / "r.html"
    ct.report(grouped, path)
    html = path.read_text(encoding="utf-8")
    assert "cluster-robust intervals (t on each group" in html and "nested in the groups" in html
    assert "multi-scale test (clustered)" in html  # the pooled result's clustered evidence


def test_calib_test_by_with_clusters_is_each_groups_clustered_test():
    """calib_test(by=, cluster=): group g is calib_test on its own rows and clusters with the group's seed
    default_rng([s, g]); the notes say the tests are clustered; by= the cluster itself is refused."""
    df = countries(seed=4)
    grouped = ct.calib_test("y ~ p", data=df, by="country", cluster="site", n_draws=199, rng=7)
    for g, label in enumerate(("A", "B", "C")):  # the table's order: sorted levels
        rows = df[df["country"] == label]
        alone = ct.calib_test("y ~ p", data=rows, cluster="site", n_draws=199, rng=np.random.default_rng([7, g]))
        res = grouped.groups[label]
        assert res.pvalue == alone.pvalue and res.statistic == alone.statistic
        assert grouped.to_frame().loc[label, "pvalue"] == alone.pvalue
        assert "exploratory" in grouped.to_frame().loc[label, "note"]  # fewer than 20 clusters per country
    assert "nested in the groups" in " ".join(grouped.notes()) and "sign flips of whole clusters" in str(
        grouped.summary())
    with pytest.raises(OptionError, match="same groups"):
        ct.calib_test("y ~ p", data=df, by="site", cluster="site")


def test_evidence_by_with_clusters_is_each_groups_clustered_evidence():
    """evidence(by=, cluster=): group g is the clustered evidence of its own rows and clusters with the
    group's seed; a group of one cluster is listed, not analysed, with the reason."""
    df = countries(seed=5)
    df.loc[df["site"] == "h23", "country"] = "D"  # country D: one site
    grouped = ct.evidence("y ~ p", data=df, by="country", cluster="site", rng=3)
    for g, label in enumerate(("A", "B", "C")):
        rows = df[df["country"] == label]
        alone = ct.evidence("y ~ p", data=rows, cluster="site", rng=np.random.default_rng([3, g]))
        ev = grouped.groups[label]
        pd.testing.assert_frame_equal(ev.evidence_table(), alone.evidence_table())
        assert ev.verdict == alone.verdict
    assert grouped.groups["D"] is None and "one cluster ('h23')" in grouped.reasons["D"]
    notes = " ".join(grouped.notes())
    assert "nested in the groups" in notes and "design-based" in notes
