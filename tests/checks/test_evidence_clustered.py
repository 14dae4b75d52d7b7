"""evidence(cluster=): every row of the evidence table in its clustered version, against slow references.

The design-based Hosmer-Lemeshow test is recomputed with explicit loops over clusters and groups (the ratio
means' linearised covariance, as survey software computes it); Spiegelhalter's clustered z and its sign-flip
p-value by enumerating every sign pattern; the sensitivity rows from the clustered engine at each B.
"""
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

import calibtest as ct
from calibtest.checks.evidence_clustered import design_hosmer_lemeshow
from calibtest.options import DataError, OptionError


def sites(seed=0, G=25, tau=0.7, lo=30, hi=120, shift=0.0):
    rng = np.random.default_rng(seed)
    size = rng.integers(lo, hi, G)
    site = np.repeat(np.arange(G), size)
    p = special.expit(rng.normal(-0.8, 1.0, site.size))
    eta = special.logit(p) + shift + rng.normal(0, tau, G)[site]
    y = (rng.uniform(size=site.size) < special.expit(eta)).astype(int)
    return pd.DataFrame({"y": y, "p": p, "site": [f"h{g:02d}" for g in site]})


def slow_design_hl(y, p, site, g=10):
    """W, F and its p-value by loops: deciles of sorted p, each cluster's share of the groups' mean residuals
    centred over the clusters, their covariance G/(G-1) sum_c z_c z_c', F = (f - g + 1) W / (f g) on
    F(g, f - g + 1) with f = G - 1."""
    n = len(y)
    order = sorted(range(n), key=lambda i: (p[i], i))
    group = [0] * n
    bounds = np.linspace(0, n, g + 1)
    sizes = [len(a) for a in np.array_split(np.arange(n), g)]
    start = 0
    for j, size in enumerate(sizes):
        for i in order[start:start + size]:
            group[i] = j
        start += size
    labels = sorted(set(site))
    G = len(labels)
    mean = np.array([sum(y[i] - p[i] for i in range(n) if group[i] == j) / sizes[j] for j in range(g)])
    V = np.zeros((g, g))
    for c in labels:
        z = np.zeros(g)
        for i in range(n):
            if site[i] == c:
                z[group[i]] += (y[i] - p[i]) / sizes[group[i]]
        z -= mean / G  # centred over the clusters
        V += np.outer(z, z)
    V *= G / (G - 1)
    W = float(mean @ np.linalg.inv(V) @ mean)
    f = G - 1
    F = (f - g + 1) * W / (f * g)
    assert bounds[-1] == n
    return W, F, stats.f.sf(F, g, f - g + 1)


def slow_spiegelhalter(y, p, codes, G):
    """z = sum_g A_g / sqrt(sum_g A_g^2) by a loop over clusters, and its exact sign-flip p-value by
    enumerating the 2^(G-1) patterns with the first sign +1 (the identity counts once)."""
    A = np.array([np.sum(((y - p) * (1 - 2 * p))[codes == g]) for g in range(G)])
    z = A.sum() / math.sqrt(np.sum(A ** 2))
    zs = [abs(np.dot(A, s)) / math.sqrt(np.sum(A ** 2)) for s in itertools.product([1, -1], repeat=G) if s[0] == 1]
    return z, float(np.mean(np.array(zs) >= abs(z) - 1e-12))


def test_design_hosmer_lemeshow_matches_loops():
    df = sites(seed=1, G=14, shift=0.2)
    y, p, site = df["y"].to_numpy(float), df["p"].to_numpy(), df["site"].tolist()
    codes = pd.factorize(df["site"], sort=True)[0]
    res = design_hosmer_lemeshow(y, p, codes, 14)
    W, F, pv = slow_design_hl(y, p, site)
    assert res.wald == pytest.approx(W, rel=1e-9) and res.statistic == pytest.approx(F, rel=1e-9)
    assert res.pvalue == pytest.approx(pv, rel=1e-9)
    assert (res.df_num, res.df_den) == (10, 4)
    # the groups are those of the i.i.d. Hosmer-Lemeshow test (equal sizes by sorted prediction)
    hl = ct.hosmer_lemeshow(y=y, probs=p)
    assert res.table["n"].tolist() == hl.table["n"].tolist()
    assert res.table["observed"].to_numpy() == pytest.approx(hl.table["observed"].to_numpy())
    assert res.table["expected"].to_numpy() == pytest.approx(hl.table["expected"].to_numpy())


def test_design_hosmer_lemeshow_needs_more_clusters_than_groups():
    df = sites(G=10)
    codes = pd.factorize(df["site"], sort=True)[0]
    with pytest.raises(ValueError, match="at least 11 clusters"):
        design_hosmer_lemeshow(df["y"].to_numpy(), df["p"].to_numpy(), codes, 10)
    assert design_hosmer_lemeshow(df["y"].to_numpy(), df["p"].to_numpy(), codes, 10, groups=5).df_den == 5


def test_design_hosmer_lemeshow_holds_its_size_under_the_null():
    """Calibrated clustered rows (site effects on the predictions only): the F test rejects about alpha.

    400 data sets of 30 clusters of 40 rows; the rejection rate at 0.05 within 3 binomial standard errors."""
    rng = np.random.default_rng(11)
    G, reps, rejections = 30, 400, 0
    site = np.repeat(np.arange(G), 40)
    for _ in range(reps):
        p = special.expit(rng.normal(-0.5, 1.0, G)[site] * 0.5 + rng.normal(-0.5, 0.8, site.size))
        y = (rng.uniform(size=site.size) < p).astype(float)
        rejections += design_hosmer_lemeshow(y, p, site, G).pvalue <= 0.05
    rate = rejections / reps
    assert abs(rate - 0.05) <= 3 * math.sqrt(0.05 * 0.95 / reps)


def test_evidence_with_cluster_has_every_row_clustered():
    df = sites(seed=2, G=12, shift=0.3)
    ev = ct.evidence("y ~ p", data=df, cluster="site", rng=5)
    res = ev.interval
    assert res.clustering.n_clusters == 12
    assert list(ev.table.index) == ["calib_test", "calib_ci", "hosmer_lemeshow", "spiegelhalter", "citl", "slope",
                                    "oe"]
    # the multi-scale test is calib_test(..., cluster=) with the same seed
    test = ct.calib_test("y ~ p", data=df, cluster="site", rng=5)
    assert ev.table.loc["calib_test", "pvalue"] == test.pvalue and ev.test.n_clusters == 12
    # the interval row is the clustered result's
    assert ev.table.loc["calib_ci", "statistic"] == res.estimate
    assert ev.table.loc["calib_ci", "upper"] == res.conf_int().upper
    # Spiegelhalter's clustered z; its sign-flip p-value (999 random of 2^11 patterns) near the enumerated one
    codes = pd.factorize(df["site"], sort=True)[0]
    y, p = df["y"].to_numpy(float), df["p"].to_numpy()
    z, exact = slow_spiegelhalter(y, p, codes, 12)
    assert ev.table.loc["spiegelhalter", "statistic"] == pytest.approx(z, rel=1e-12)
    assert abs(ev.table.loc["spiegelhalter", "pvalue"] - exact) <= 3 * math.sqrt(exact * (1 - exact) / 999) + 1e-3
    # CITL, slope and O/E with the cluster-robust intervals of the result
    m = res.clustering.measures
    assert (ev.table.loc["citl", "lower"], ev.table.loc["citl", "upper"]) == pytest.approx(m.citl_ci())
    assert (ev.table.loc["oe", "lower"], ev.table.loc["oe", "upper"]) == pytest.approx(m.oe_ci())
    assert ev.table.loc["oe", "reject"] == (not m.oe_ci()[0] <= 1 <= m.oe_ci()[1])
    # the design-based HL row
    dhl = design_hosmer_lemeshow(y, p, codes, 12)
    assert ev.table.loc["hosmer_lemeshow", "statistic"] == dhl.statistic and ev.design_hl is not None
    assert ev.hl is None and ev.valprob is None
    assert "correlation of the rows within each of the 12 clusters" in ev.conclusion()
    assert "Direction:" in ev.conclusion() and m.direction() in ev.conclusion()
    # the result's evidence is the same object (computed once), and its summary opens with it
    assert res.evidence() is res.evidence()
    text = str(res.summary())
    assert "Hosmer-Lemeshow (design-ba" in text and "label draws can give" not in text


def test_clustered_sensitivity_rows_are_the_clustered_interval_at_each_b():
    df = sites(seed=4, G=8)
    ev = ct.evidence("y ~ p", data=df, cluster="site", rng=1, null="asymptotic")
    res = ev.interval
    for row in ev.sensitivity.itertuples():
        if row.n_bins == res.n_bins:
            assert row.upper == res.conf_int().upper
            continue
        again = ct.calib_ci("y ~ p", data=df, cluster="site", n_bins=int(row.n_bins), null="asymptotic")
        assert row.T == again.estimate and row.upper == pytest.approx(again.conf_int().upper, rel=1e-12)
        assert row.pvalue == pytest.approx(again.null_pvalue, rel=1e-12)
    # 8 clusters: every one of the 2^7 sign patterns, so Spiegelhalter's p-value is the enumerated one
    codes = pd.factorize(df["site"], sort=True)[0]
    z, exact = slow_spiegelhalter(df["y"].to_numpy(float), df["p"].to_numpy(), codes, 8)
    assert ev.test.cluster_exact
    assert ev.table.loc["spiegelhalter", "statistic"] == pytest.approx(z, rel=1e-12)
    assert ev.table.loc["spiegelhalter", "pvalue"] == pytest.approx(exact, rel=1e-12)
    # 8 clusters: fewer than the 11 the design-based HL needs, said in the scope
    assert "hosmer_lemeshow" not in ev.table.index and "at least 11 clusters" in ev.scope
    assert "exploratory" in ev.conclusion()


def test_evidence_cluster_refusals():
    df = sites(G=6)
    with pytest.raises(OptionError, match="rows in memory"):
        ct.evidence("y ~ p", data=__file__, cluster="site")  # a file path: the clustered evidence needs the rows
    with pytest.raises(DataError, match="single cluster"):
        ct.evidence("y ~ p", data=df.assign(site="x"), cluster="site")


def test_report_of_a_clustered_result_shows_the_clustered_evidence(tmp_path):
    df = sites(seed=5, G=12)
    res = ct.calib_ci("y ~ p", data=df, cluster="site", rng=2)
    path = tmp_path / "r.html"
    res.report(path)
    html = path.read_text(encoding="utf-8")
    assert "multi-scale test (clustered)" in html and "O/E 95% CI (clustered)" in html
    assert "The Hosmer–Lemeshow test of independent rows is not shown" in html
    assert "validation metrics of independent rows" in html
    assert "Every row of the evidence table below allows for the clusters" in html


def test_summary_continues_long_row_names_instead_of_cutting_them():
    """A clustered row name longer than the evidence table's first column goes on below, indented: the
    whole name is printed, no line is wider than the summary, and a short name keeps its single line."""
    g = np.random.default_rng(3)
    n = 3000
    site = g.integers(0, 20, n)
    p = g.beta(2, 5, n)
    df = pd.DataFrame({"y": (g.random(n) < p).astype(int), "p": p, "site": site})
    text = ct.calib_ci("y ~ p", data=df, cluster="site", n_null_draws=199, rng=1).summary().as_text()
    lines = text.splitlines()
    assert all(len(line) <= 78 for line in lines)
    assert "..." not in text
    first = next(i for i, line in enumerate(lines) if line.startswith("multi-scale test"))
    assert lines[first + 1].strip() == "(clustered)" and lines[first + 1].startswith("  (")
    citl = next(line for line in lines if line.startswith("CITL 95% CI (clustered)"))
    assert citl.rstrip().endswith(("rejects", "does not reject"))  # a name that fits keeps its cells on its line
