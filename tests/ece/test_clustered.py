"""Clustered rows (cluster=): T_cl, its cluster-robust variances, the sign-flip null, CITL/slope/O/E, inputs.

Every number is checked against a slow, obviously correct implementation: explicit loops over rows, pairs of
rows and clusters, statsmodels' own cluster covariance, or an enumeration of sign patterns.
"""
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

import calibtest as ct
from calibtest.core.binstats import bin_sums, debiased_statistic, sigma1_sq
from calibtest.core.clustered import (cluster_cells, clustered_difference_variance, clustered_inference,
                                      clustered_statistics, sign_flip_draws, t_adjusted_interval)
from calibtest.core.weighted import weighted_statistics
from calibtest.options import DataError, OptionError


# ----------------------------------------------------------------------------- slow references
def slow_statistics(inv, u, codes, n):
    """T_cl, K (G x G), V_0 and V_1 by explicit loops over bins, rows, pairs and clusters."""
    G = codes.max() + 1
    T, K = 0.0, np.zeros((G, G))
    mu = {}
    for b in np.unique(inv):
        rows = np.flatnonzero(inv == b)
        mu[b] = u[rows].mean(axis=0)
        pairs = [(i, j) for i in rows for j in rows if codes[i] != codes[j]]
        if not pairs:
            continue
        weight = len(rows) / (n * len(pairs))
        for i, j in pairs:
            T += weight * (u[i] @ u[j])
            K[codes[i], codes[j]] += weight * (u[i] @ u[j])
    v0 = 2.0 * sum(K[g, h] ** 2 for g in range(G) for h in range(G) if g != h)
    theta = sum(len(np.flatnonzero(inv == b)) * (mu[b] @ mu[b]) for b in mu) / n
    s = np.zeros(G)
    for i in range(n):  # influence value of each row, summed over its cluster
        m = mu[inv[i]]
        s[codes[i]] += 2.0 * m @ u[i] - m @ m - theta
    v1 = G / (G - 1) * np.sum(s ** 2) / n ** 2
    return T, K, v0, v1


def clustered_rows(rng, n=240, G=9, m=6, d=1, shift=0.1):
    inv = rng.integers(0, m, n)
    codes = rng.integers(0, G, n)
    codes[:G] = np.arange(G)  # every cluster present
    u = rng.normal(size=(n, d)) + shift + 0.3 * rng.normal(size=(G, d))[codes]
    return inv, u, codes, m, G


@pytest.mark.parametrize("d", [1, 3])
def test_statistics_match_loops_over_pairs_and_clusters(d):
    rng = np.random.default_rng(d)
    inv, u, codes, m, G = clustered_rows(rng, d=d)
    st = clustered_statistics(cluster_cells(inv, u, codes, m, G), u.shape[0])
    T, K, v0, v1 = slow_statistics(inv, u, codes, u.shape[0])
    assert st.estimate == pytest.approx(T, rel=1e-12)
    assert st.null_variance == pytest.approx(v0, rel=1e-10)
    assert st.linear_variance == pytest.approx(v1, rel=1e-10)
    assert st.se == pytest.approx(math.sqrt(v0 + v1), rel=1e-10)
    assert np.sum(st.cluster_influence) == pytest.approx(0.0, abs=1e-12)


def test_bins_within_one_cluster_hold_no_pair():
    # a bin whose rows all share one cluster is left out, as a bin of one row is left out of T
    u = np.array([[0.5], [0.4], [0.2], [-0.1]])
    inv = np.array([0, 0, 1, 1])
    codes = np.array([0, 0, 0, 1])
    st = clustered_statistics(cluster_cells(inv, u, codes, 2, 2), 4)
    assert st.estimate == pytest.approx(2 / 4 * (0.2 * -0.1))  # bin 1 only: its one cross pair, weight c_b / n
    assert st.bin_weight[0] == 0.0


def test_one_row_per_cluster_gives_the_iid_numbers():
    """cluster = row id: T_cl = T, V_1 = n / (n - 1) sigma1^2 / n, V_0 = the unweighted second-order variance."""
    rng = np.random.default_rng(5)
    n, m = 400, 8
    inv = rng.integers(0, m, n)
    u = rng.normal(size=(n, 1)) * 0.4 + 0.05
    st = clustered_statistics(cluster_cells(inv, u, np.arange(n), m, n), n)
    stats_ = bin_sums(inv, np.arange(m)[:, None], u, np.zeros_like(u))
    assert st.estimate == pytest.approx(debiased_statistic(stats_, n), rel=1e-12)
    assert st.linear_variance == pytest.approx(n / (n - 1) * sigma1_sq(stats_, n) / n, rel=1e-10)
    ws = weighted_statistics(inv, u, np.ones(n), m)
    assert st.null_variance == pytest.approx(ws.null_variance, rel=1e-10)


def test_sign_flip_draws_match_an_explicit_enumeration():
    rng = np.random.default_rng(2)
    inv, u, codes, m, G = clustered_rows(rng, n=90, G=6, m=4)
    cells = cluster_cells(inv, u, codes, m, G)
    st = clustered_statistics(cells, u.shape[0])
    draws, exact = sign_flip_draws(cells, st.bin_weight, n_draws=999, rng=rng)
    assert exact and draws.size == 2 ** (G - 1) - 1
    _, K, _, _ = slow_statistics(inv, u, codes, u.shape[0])
    off = K - np.diag(np.diag(K))
    expected = sorted(float(np.array(eps) @ off @ np.array(eps))
                      for eps in itertools.product([1.0, -1.0], repeat=G) if eps[0] == 1.0 and min(eps) < 0)
    assert np.allclose(sorted(draws), expected, rtol=1e-10, atol=1e-15)
    inference = clustered_inference(cells, u.shape[0], alpha=0.05, null="sign-flip", n_draws=999, rng=rng)
    every = np.array(expected + [st.estimate])
    assert inference.pvalue == pytest.approx(np.mean(every >= st.estimate - 1e-12))


def test_random_sign_flips_with_many_clusters():
    rng = np.random.default_rng(3)
    inv, u, codes, m, G = clustered_rows(rng, n=400, G=40, m=5, shift=0.0)
    cells = cluster_cells(inv, u, codes, m, G)
    st = clustered_statistics(cells, 400)
    draws, exact = sign_flip_draws(cells, st.bin_weight, n_draws=2000, rng=np.random.default_rng(0))
    assert not exact and draws.size == 2000
    # E[T*] = 0 and Var[T*] = 2 sum_{g != h} K_gh^2 = V_0 over the sign patterns
    assert abs(draws.mean()) < 4 * math.sqrt(st.null_variance / 2000)
    assert draws.var() == pytest.approx(st.null_variance, rel=0.15)


def test_t_adjusted_interval_by_hand():
    iv = t_adjusted_interval(0.02, 0.004, -math.inf, 0.05, 11)
    t_h = stats.t.isf(0.025, 10)
    assert iv.upper == pytest.approx(0.02 + t_h * 0.004)
    assert iv.lower == pytest.approx(0.02 - t_h * 0.004) and iv.branch == 1
    iv = t_adjusted_interval(0.002, 0.004, math.inf, 0.05, 11)
    assert iv.contains_zero and iv.lower == 0.0


def test_difference_variance_matches_loops():
    rng = np.random.default_rng(8)
    inv_a, u_a, codes, m, G = clustered_rows(rng, n=150, G=7, m=5)
    inv_b = rng.integers(0, 4, 150)
    u_b = u_a * 0.5 + rng.normal(size=u_a.shape) * 0.2
    ca, cb = cluster_cells(inv_a, u_a, codes, m, G), cluster_cells(inv_b, u_b, codes, 4, G)
    v1, v0 = clustered_difference_variance(ca, clustered_statistics(ca, 150), cb, clustered_statistics(cb, 150))
    _, Ka, _, _ = slow_statistics(inv_a, u_a, codes, 150)
    _, Kb, _, _ = slow_statistics(inv_b, u_b, codes, 150)
    D = Ka - Kb
    assert v0 == pytest.approx(2 * (np.sum(D ** 2) - np.sum(np.diag(D) ** 2)), rel=1e-10)
    sa = clustered_statistics(ca, 150).cluster_influence
    sb = clustered_statistics(cb, 150).cluster_influence
    assert v1 == pytest.approx(G / (G - 1) * np.sum((sa - sb) ** 2), rel=1e-10)


# ----------------------------------------------------------------------------- the public functions
def sites(seed=0, G=25, tau=0.7, lo=30, hi=200, shift=0.0):
    rng = np.random.default_rng(seed)
    size = rng.integers(lo, hi, G)
    site = np.repeat(np.arange(G), size)
    p = special.expit(rng.normal(-0.8, 1.0, site.size))
    eta = special.logit(p) + shift + rng.normal(0, tau, G)[site]
    y = (rng.uniform(size=site.size) < special.expit(eta)).astype(int)
    return pd.DataFrame({"y": y, "p": p, "site": [f"h{g:02d}" for g in site]})


def test_calib_ci_cluster_numbers_come_from_the_engine():
    df = sites()
    res = ct.calib_ci("y ~ p", data=df, cluster="site", rng=4)
    codes = pd.factorize(df["site"], sort=True)[0]
    part = res.partition
    st = clustered_statistics(cluster_cells(part.inverse, res.data.u, codes, part.m, 25), res.n)
    assert res.estimate == st.estimate and res.se == pytest.approx(st.se, rel=1e-14)
    expected = t_adjusted_interval(st.estimate, st.se, math.inf if res.null_pvalue > 0.05 else -math.inf, 0.05, 25)
    assert (res.ci_lower, res.ci_upper) == pytest.approx((expected.lower, expected.upper))
    c = res.clustering
    assert c.n_clusters == 25 and c.name == "site" and not c.few and c.null == "sign-flip"
    assert res.to_dict()["n_clusters"] == 25
    assert res.conf_int(0.1).upper == pytest.approx(max(st.estimate, 0) + stats.t.isf(0.05, 24) * st.se)
    text = str(res.summary())
    assert "25 clusters" in text and "cluster-robust" in text
    # the same call reproduces the sign patterns from the recorded seed
    again = ct.calib_ci("y ~ p", data=df, cluster=df["site"].to_numpy(), rng=4)
    assert again.null_pvalue == res.null_pvalue and again.clustering.name is None


def test_cluster_equal_to_row_id_reproduces_the_iid_estimate_and_se():
    df = sites(G=8, lo=40, hi=60)
    iid = ct.calib_ci("y ~ p", data=df, null="asymptotic")
    res = ct.calib_ci("y ~ p", data=df, cluster=np.arange(len(df)), null="asymptotic")
    n = iid.n
    assert res.estimate == pytest.approx(iid.estimate, rel=1e-12)
    # documented small-sample difference: V_1 = n/(n-1) sigma1^2/n, plus the quadratic part V_0
    assert res.clustering.linear_variance == pytest.approx(n / (n - 1) * iid.sigma1_sq / n, rel=1e-10)
    assert res.se ** 2 == pytest.approx(res.clustering.linear_variance + res.clustering.null_variance, rel=1e-12)


def test_few_clusters_warn_and_enumerate_every_pattern():
    df = sites(G=5)
    res = ct.calib_ci("y ~ p", data=df, cluster="site")
    assert res.clustering.few and res.clustering.exact and res.clustering.n_patterns == 16
    assert res.null_pvalue >= 1 / 16 and res.contains_zero  # no p-value below 2^-(G-1) = 0.0625
    notes = " ".join(res.notes())
    assert "Only 5 clusters (fewer than 20)" in notes


def test_cluster_robust_citl_slope_match_statsmodels():
    import statsmodels.api as sm

    df = sites(seed=3, shift=0.3)
    res = ct.calib_ci("y ~ p", data=df, cluster="site")
    m = res.clustering.measures
    lp = special.logit(df["p"].to_numpy())
    groups = pd.factorize(df["site"], sort=True)[0]
    citl = sm.GLM(df["y"].to_numpy(), np.ones((len(df), 1)), family=sm.families.Binomial(), offset=lp).fit(
        cov_type="cluster", cov_kwds={"groups": groups})
    slope = sm.GLM(df["y"].to_numpy(), sm.add_constant(lp), family=sm.families.Binomial()).fit(
        cov_type="cluster", cov_kwds={"groups": groups})
    assert m.citl == pytest.approx(citl.params[0], rel=1e-8) and m.citl_se == pytest.approx(citl.bse[0], rel=1e-6)
    assert m.slope == pytest.approx(slope.params[1], rel=1e-8) and m.slope_se == pytest.approx(slope.bse[1], rel=1e-6)
    t = stats.t.isf(0.025, 24)
    assert m.citl_ci() == pytest.approx((m.citl - t * m.citl_se, m.citl + t * m.citl_se))
    # O/E: the delta method on log(O/E) from a loop over the clusters
    O, E = df["y"].sum(), df["p"].sum()
    r = [(g["y"].sum() / O - g["p"].sum() / E) for _, g in df.groupby("site")]
    assert m.oe == pytest.approx(O / E) and m.log_oe_se == pytest.approx(math.sqrt(25 / 24 * np.sum(np.square(r))))


def test_calib_test_clustered_scales_use_t_cl_and_sign_flips():
    df = sites(G=6)
    res = ct.calib_test("y ~ p", data=df, cluster="site", n_bins=[4, 8])
    assert res.n_clusters == 6 and res.cluster_exact and res.n_draws == 31
    codes = pd.factorize(df["site"], sort=True)[0]
    target = ct.calib_ci("y ~ p", data=df).data
    for B, T in zip(res.scales["n_bins"], res.scales["T"]):
        inv = np.minimum(np.floor(target.z[:, 0] * B), B).astype(int)
        assert T == pytest.approx(slow_statistics(inv, target.u, codes, target.n)[0], rel=1e-10)
    assert res.pvalue >= 1 / 32
    assert "cluster sign-flip" in str(res.summary())


def test_calib_compare_clustered_paired():
    df = sites(seed=6)
    df["q"] = np.clip(df["p"] * 1.4, 0, 0.99)
    cmp = ct.calib_compare("y ~ p", "y ~ q", data=df, cluster="site")
    a = ct.calib_ci("y ~ p", data=df, cluster="site", null="asymptotic")
    b = ct.calib_ci("y ~ q", data=df, cluster="site", null="asymptotic")
    assert cmp.estimate == pytest.approx(a.estimate - b.estimate)
    same = ct.calib_compare(a, b)
    assert same.se == pytest.approx(cmp.se)
    unpaired = ct.calib_compare(a, b, paired=False)
    assert unpaired.se ** 2 == pytest.approx(a.se ** 2 + b.se ** 2)
    with pytest.raises(ValueError, match="clustered result"):
        ct.calib_compare(a, ct.calib_ci("y ~ q", data=df))


# ----------------------------------------------------------------------------- bad input
def test_bad_cluster_input():
    df = sites(G=6)
    with pytest.raises(DataError, match="single cluster"):
        ct.calib_ci("y ~ p", data=df.assign(site="A"), cluster="site")
    with pytest.raises(DataError, match="cluster has 1 missing labels"):
        ct.calib_ci("y ~ p", data=df.assign(site=df["site"].where(df.index != 3)), cluster="site")
    with pytest.raises(DataError, match="not a column"):
        ct.calib_ci("y ~ p", data=df, cluster="hospital")
    with pytest.raises(DataError, match="one value per row"):
        ct.calib_ci("y ~ p", data=df, cluster=np.arange(5))
    with pytest.raises(OptionError, match="conditional"):
        ct.calib_ci("y ~ p", data=df, cluster="site", null="conditional")
    with pytest.raises(OptionError, match="weights"):
        ct.calib_ci("y ~ p", data=df.assign(w=1.0), cluster="site", weights="w")
    with pytest.raises(OptionError, match="method"):
        ct.calib_ci("y ~ p", data=df, cluster="site", method="bootstrap")
    with pytest.raises(TypeError, match="cluster"):
        ct.calib_ci("y ~ p", data=df, cluster=3.5)
    one_region = ct.evidence("y ~ p", data=df.assign(region="a"), cluster="site", by="region", rng=1)
    assert one_region.groups["a"] is not None  # clusters nested in one group: its clustered evidence
    # a site in two groups of by=
    crossed = df.assign(region=np.where(np.arange(len(df)) % 2 == 0, "north", "south"))
    with pytest.raises(DataError, match="cross"):
        ct.calib_ci("y ~ p", data=crossed, cluster="site", by="region")
    # clusters nested in the groups are analysed (tests/ece/test_clustered_groups.py); by= the cluster itself is not
    with pytest.raises(OptionError, match="same groups"):
        ct.calib_ci("y ~ p", data=df, cluster="site", by="site")


def test_missing_drop_aligns_the_clusters_and_one_row_clusters_are_allowed():
    df = sites(G=6)
    df.loc[[0, 5], "p"] = np.nan
    res = ct.calib_ci("y ~ p", data=df, cluster="site", missing="drop", null="asymptotic")
    assert res.n == len(df) - 2 and int(res.clustering.sizes.sum()) == res.n
    singletons = ct.calib_ci("y ~ p", data=df.dropna(), cluster=np.arange(len(df) - 2), null="asymptotic")
    assert singletons.clustering.n_clusters == len(df) - 2


def test_out_of_core_is_refused(tmp_path):
    path = tmp_path / "d.csv"
    sites(G=6).to_csv(path, index=False)
    with pytest.raises(OptionError, match="rows in memory"):
        ct.calib_ci("y ~ p", data=str(path), cluster="site")


def test_cli_cluster(tmp_path, capsys):
    from calibtest.cli import main

    path = tmp_path / "d.csv"
    df = sites(G=6)
    df.to_csv(path, index=False)
    argv = ["ci", str(path), "--formula", "y ~ p"]
    assert main(argv + ["--cluster", "site", "--json"]) == 0
    assert '"n_clusters": 6' in capsys.readouterr().out
    assert main(argv + ["--cluster", "nowhere"]) == 1
    err = capsys.readouterr().err
    assert "not a column" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    df.assign(site="one").to_csv(path, index=False)
    assert main(argv + ["--cluster", "site"]) == 1
    err = capsys.readouterr().err
    assert "single cluster" in err and "Traceback" not in err


def test_acceptance_tests_the_cluster_robust_citl_slope_and_oe():
    """A plan's CITL, slope and O/E criteria are decided by the cluster-robust numbers the summary prints."""
    df = sites(G=30, tau=0.2)
    res = ct.calib_ci("y ~ p", data=df, cluster="site", null="asymptotic")
    cm, a, G = res.clustering.measures, res.alpha, res.clustering.n_clusters
    t = stats.t.isf(a, G - 1)  # the (1 - 2 alpha) interval: t with G - 1 df
    wide = {"citl_within": (cm.citl - 2 * t * cm.citl_se, cm.citl + 2 * t * cm.citl_se),
            "slope_within": (cm.slope - 2 * t * cm.slope_se, cm.slope + 2 * t * cm.slope_se),
            "oe_within": (cm.oe * math.exp(-2 * t * cm.log_oe_se), cm.oe * math.exp(2 * t * cm.log_oe_se))}
    ev = res.acceptance({"ece_below": 1.0, **wide})
    tab = ev.table.set_index("criterion")
    assert list(tab["verdict"]) == ["met"] * 4 and ev.all_met
    assert "4 of 4 met" in ev.sentence and f"cluster-robust ({G} clusters" in ev.sentence
    printed = cm.to_frame().set_index("measure")["estimate"]
    for key, name, est, se, log in (("citl_within", "CITL", cm.citl, cm.citl_se, False),
                                    ("slope_within", "slope", cm.slope, cm.slope_se, False),
                                    ("oe_within", "O/E", cm.oe, cm.log_oe_se, True)):
        assert tab.loc[key, "estimate"] == printed[name] == est
        centre = math.log(est) if log else est
        lo, hi = centre - t * se, centre + t * se
        expected = (math.exp(lo), math.exp(hi)) if log else (lo, hi)
        assert (tab.loc[key, "ci_lower"], tab.loc[key, "ci_upper"]) == pytest.approx(expected, rel=1e-12)
        assert "cluster-robust" in tab.loc[key, "interval"]
    # the printed numbers: the summary shows the same cluster-robust O/E with its interval
    lo, hi = cm.oe_ci()
    line = next(ln for ln in res.summary().as_text().splitlines() if ln.startswith("O/E (cluster-robust)"))
    assert line.split()[2:] == [f"{cm.oe:.4g}", f"{cm.log_oe_se:.4g}", f"{lo:.4g}", f"{hi:.4g}"]
    # limits just inside the interval: not met (the same numbers decide both ways)
    tight = res.acceptance({"oe_within": (cm.oe * math.exp(-0.5 * t * cm.log_oe_se), 10.0)})
    assert list(tight.table["verdict"]) == ["not met"]
    assert ct.citl_test(res, wide["citl_within"]).method.startswith("CITL, cluster-robust")


def test_report_states_the_clusters_and_warns_below_the_minimum(tmp_path):
    df = sites(G=5)
    res = ct.calib_ci("y ~ p", data=df, cluster="site", null="asymptotic")
    path = tmp_path / "r.html"
    res.report(path)
    html = path.read_text(encoding="utf-8")
    assert "Clustered rows." in html and f"The {len(df)} rows come from 5 clusters (column site;" in html
    assert "Only 5 clusters (fewer than 20): the clustered interval and test are unreliable" in html
    assert "Clustered analysis: 5 clusters." in html
