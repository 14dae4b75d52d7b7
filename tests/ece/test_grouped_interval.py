"""Calibration within subgroups: calib_ci(by=...), the global and heterogeneity tests, the forest plot."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

import calibtest as ct
from calibtest.ece.grouped_interval import estimate_variance, finite_sample_pvalue, global_test, heterogeneity_test


@pytest.fixture(scope="module")
def df():
    rng = np.random.default_rng(21)
    n = 2400
    site = rng.choice(["A", "B", "C"], n, p=[0.5, 0.35, 0.15])
    p = rng.uniform(size=n)
    q = np.where(site == "C", np.clip(p + 0.15, 0, 1), p)
    return pd.DataFrame({"y": (rng.random(n) < q).astype(int), "p": p, "site": site,
                         "sex": rng.choice(["f", "m"], n), "w": rng.lognormal(0, 0.5, n)})


@pytest.fixture(scope="module")
def grouped(df):
    return ct.calib_ci("y ~ p", df, by="site", rng=3)


def test_each_group_is_calib_ci_on_its_rows(df, grouped):
    for site in ("A", "B", "C"):
        sub = df[df.site == site]
        ref = ct.calib_ci("y ~ p", sub)
        res = grouped.groups[site]
        assert res.n == len(sub) and res.n_bins == ref.n_bins
        assert res.estimate == pytest.approx(ref.estimate, rel=1e-12)
        assert (res.ci_lower, res.ci_upper) == pytest.approx((ref.ci_lower, ref.ci_upper), rel=1e-12)
    assert grouped.pooled.estimate == pytest.approx(ct.calib_ci("y ~ p", df).estimate, rel=1e-12)
    assert grouped.groups["C"].ci_lower > 0  # the miscalibrated site


def test_frame_holm_and_global(grouped):
    frame = grouped.to_frame()
    assert list(frame.index) == ["A", "B", "C"]
    p = frame["pvalue"].to_numpy()
    expected = [finite_sample_pvalue(grouped.groups[s])[0] for s in "ABC"]
    np.testing.assert_allclose(p, expected)
    # Holm by hand: sort, multiply by (G - rank), running maximum, cap at 1
    order = np.argsort(p)
    adj = np.minimum(np.maximum.accumulate(p[order] * (3 - np.arange(3))), 1.0)
    holm = np.empty(3)
    holm[order] = adj
    np.testing.assert_allclose(frame["pvalue_holm"].to_numpy(), holm)
    assert grouped.global_pvalue == pytest.approx(min(1.0, 3 * p.min()))
    assert frame.loc["A", "n"] + frame.loc["B", "n"] + frame.loc["C", "n"] == grouped.pooled.n
    assert frame["ece_ci_upper"].to_numpy() == pytest.approx(np.sqrt(frame["ci_upper"].to_numpy()))


def test_global_combinations_by_hand():
    p = np.array([0.2, 0.03, 0.6, 0.9])
    assert global_test(p, "bonferroni") == pytest.approx((0.03, 0.12))
    fisher = -2 * np.log(p).sum()
    assert global_test(p, "fisher") == pytest.approx((fisher, stats.chi2.sf(fisher, 8)))
    z = stats.norm.isf(p).sum() / 2
    assert global_test(p, "stouffer") == pytest.approx((z, stats.norm.sf(z)))


def test_two_group_variance_parts_are_the_unpaired_comparison():
    """Each group's unrestricted variance is the one calib_compare's unpaired z uses (the same variance parts).

    Both groups are miscalibrated, so neither group's corrected first-order
    variance is floored at 0 (the parts floor each group's, the comparison
    the sum).  Cochran's Q itself evaluates the variances at the pooled
    ECE^2 of H0 (test_heterogeneity_restricted_by_hand), so it is not z^2.
    """
    rng = np.random.default_rng(6)
    n = 3000
    g = np.repeat([0, 1], [1800, 1200])
    p = rng.uniform(size=n)
    y = (rng.random(n) < np.clip(p + np.where(g == 0, 0.12, 0.2), 0, 1)).astype(int)
    two = ct.calib_ci(y=y, probs=p, by=g)
    cmp = ct.calib_compare(two.groups[0], two.groups[1], paired=False)
    v = [estimate_variance(two.groups[k]).unrestricted for k in (0, 1)]
    z2 = (two.groups[0].estimate - two.groups[1].estimate) ** 2 / sum(v)
    assert two.heterogeneity_df == 1
    assert z2 == pytest.approx(cmp.statistic ** 2, rel=1e-9)


def _restricted_q_by_root(t, v2, f, pl):
    """Q with v_g = V2_g + F_g theta+ / P_g at the theta solving theta = inverse-variance mean (by brentq)."""
    slope = np.where(pl > 0, f / np.where(pl > 0, pl, 1.0), 0.0)

    def mean(theta):
        w = 1.0 / (v2 + slope * max(theta, 0.0))
        return float(np.sum(w * t) / np.sum(w))

    theta = optimize.brentq(lambda th: mean(th) - th, -1.0, 1.0, xtol=1e-15, rtol=1e-14)
    w = 1.0 / (v2 + slope * max(theta, 0.0))
    return float(np.sum(w * (t - theta) ** 2)), theta


def test_heterogeneity_restricted_by_hand():
    t = np.array([0.004, 0.012, 0.03, 0.008])
    v2 = np.array([4e-6, 1e-6, 2.5e-5, 2e-6])
    f = np.array([3e-5, 2e-6, 9e-5, 1.5e-5])
    pl = np.array([0.006, 0.013, 0.035, 0.009])
    q_ref, theta = _restricted_q_by_root(t, v2, f, pl)
    q, df, pv, pooled = heterogeneity_test(t, v2, f, pl)
    assert pooled == pytest.approx(theta, rel=1e-10)
    assert q == pytest.approx(q_ref, rel=1e-10)
    assert (df, pv) == (3, pytest.approx(stats.chi2.sf(q_ref, 3), rel=1e-9))
    # a pooled estimate <= 0 (every group near calibration) leaves the second-order variances alone
    neg = np.array([-0.001, -0.0005, -0.002])
    assert heterogeneity_test(neg, v2[:3], f[:3], pl[:3]) == pytest.approx(heterogeneity_test(neg, v2[:3]))


def test_heterogeneity_of_grouped_result_uses_restricted_parts(df):
    res = ct.calib_ci("y ~ p", data=df, by="site")
    labels = list(res.groups)
    parts = [estimate_variance(res.groups[lb]) for lb in labels]
    t = np.array([res.groups[lb].estimate for lb in labels])
    q_ref, theta = _restricted_q_by_root(t, *(np.array([getattr(vp, a) for vp in parts])
                                             for a in ("second_order", "first_order", "plugin")))
    assert res.heterogeneity_statistic == pytest.approx(q_ref, rel=1e-9)
    assert res.heterogeneity_pooled == pytest.approx(theta, rel=1e-9)


def test_heterogeneity_by_hand():
    t, v = np.array([0.01, 0.02, 0.05]), np.array([1e-5, 2e-5, 4e-5])
    w = 1 / v
    pooled = (w * t).sum() / w.sum()
    q = (w * (t - pooled) ** 2).sum()
    assert heterogeneity_test(t, v) == pytest.approx((q, 2, stats.chi2.sf(q, 2), pooled))


def test_crossed_groups_list_empty_and_single_class_groups():
    rng = np.random.default_rng(2)
    n = 600
    a = rng.choice(["x", "y"], n)
    b = np.where(a == "x", rng.choice(["u", "v"], n), "u")   # (y, v) never occurs
    p = rng.uniform(size=n)
    y = (rng.random(n) < p).astype(int)
    y[(a == "y")] = 1                                          # (y, u): a single outcome class
    res = ct.calib_ci(y=y, probs=p, by=[pd.Series(a, name="a"), pd.Series(b, name="b")], rng=1)
    assert res.by == ("a", "b")
    assert set(res.groups) == {("x", "u"), ("x", "v"), ("y", "u"), ("y", "v")}
    assert res.groups[("y", "v")] is None and res.reasons[("y", "v")] == "no rows"
    assert res.groups[("y", "u")] is None and "single outcome class" in res.reasons[("y", "u")]
    frame = res.to_frame()
    assert frame.loc[("y", "v"), "note"] == "no rows" and pd.isna(frame.loc[("y", "v"), "estimate"])
    assert "not analysed" in str(res.summary())
    assert res.global_pvalue == pytest.approx(min(1.0, 2 * frame["pvalue"].min()))


def test_small_group_gets_monte_carlo_null_and_note():
    rng = np.random.default_rng(8)
    n = 1030
    g = np.r_[np.zeros(1000, int), np.ones(30, int)]
    p = rng.uniform(size=n)
    y = (rng.random(n) < p).astype(int)
    res = ct.calib_ci(y=y, probs=p, by=g, rng=5, n_null_draws=300)
    small = res.groups[1]
    assert small.null == "monte-carlo" and small.monte_carlo.n_draws == 300
    assert "small group" in res.group_notes[1]
    assert res.to_frame().loc[1, "null"] == "monte-carlo"
    assert res.groups[0].null == "conditional"  # the default null="auto" on one binned coordinate


def test_summary_dict_and_repr(grouped):
    text = str(grouped.summary())
    assert all(len(line) == 78 for line in text.splitlines())
    assert "(pooled)" in text and "heterogeneity" in text
    d = grouped.to_dict()
    json.dumps(d)
    assert d["global_pvalue"] == grouped.global_pvalue and len(d["groups"]) == 3
    assert "global p=" in repr(grouped)
    with pytest.raises(Exception):
        grouped.global_pvalue = 0.0


def test_weighted_and_prevalence_groups(df):
    res = ct.calib_ci("y ~ p", df, by="site", weights="w")
    sub = df[df.site == "B"]
    ref = ct.calib_ci("y ~ p", sub, weights="w")
    assert res.groups["B"].estimate == pytest.approx(ref.estimate, rel=1e-12)
    assert np.isfinite(res.heterogeneity_pvalue)
    prev = ct.calib_ci("y ~ p", df, by="site", prevalence=0.2, rng=1, n_null_draws=200)
    pi_hat = df.y.mean()
    assert all(r.weighting.sample_prevalence == pytest.approx(pi_hat) for r in prev.groups.values())


def test_bad_by(df, tmp_path):
    with pytest.raises(ValueError, match="not a column"):
        ct.calib_ci("y ~ p", df, by="nope")
    bad = df.assign(site=df.site.where(df.index % 7 != 0))
    with pytest.raises(ValueError, match="missing values"):
        ct.calib_ci("y ~ p", bad, by="site")
    with pytest.raises(ValueError, match="one value per row"):
        ct.calib_ci(y=df.y, probs=df.p, by=np.zeros(5))
    path = tmp_path / "d.csv"
    df.to_csv(path, index=False)
    with pytest.raises(ValueError, match="in memory"):   # by= streams a file (test_groups_streamed.py), weights not
        ct.calib_ci("y ~ p", str(path), by="site", weights=np.ones(len(df)))


def test_calib_test_and_tcal_test_by_group(df):
    """Group number i of calib_test/tcal_test(by=) is the test on its rows with rng=default_rng([seed, i])."""
    res = ct.calib_test("y ~ p", df, by="site", rng=4, n_draws=200)
    assert isinstance(res, ct.GroupedResult) and res.kind == "calib_test"
    table = res.to_frame()
    for i, site in enumerate("ABC"):
        ref = ct.calib_test("y ~ p", df[df.site == site], rng=np.random.default_rng([4, i]), n_draws=200)
        assert table.loc[site, "pvalue"] == ref.pvalue and table.loc[site, "statistic"] == ref.statistic
        assert res.groups[site].pvalue == ref.pvalue
        assert table.loc[site, "n"] == (df.site == site).sum()
    assert res.global_pvalue == pytest.approx(min(1.0, 3 * table["pvalue"].min()))
    tcal = ct.tcal_test("y ~ p", df, by=["site", "sex"], rng=4, n_draws=200)
    frame = tcal.to_frame()
    assert len(frame) == 6 and frame["pvalue"].notna().all() and frame.index.names == ["site", "sex"]
    i = list(frame.index).index(("B", "m"))
    sub = df[(df.site == "B") & (df.sex == "m")]
    ref = ct.tcal_test("y ~ p", sub, rng=np.random.default_rng([4, i]), n_draws=200)
    assert frame.loc[("B", "m"), "pvalue"] == ref.pvalue and frame.loc[("B", "m"), "statistic"] == ref.statistic


def test_plot_forest(grouped):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    from calibtest.reporting import plot_forest
    from calibtest.reporting.forest import forest_rows
    ax = plot_forest(grouped)
    rows = forest_rows(grouped)
    assert [r["label"].split(" ")[0] for r in rows] == ["A", "B", "C", "pooled"]
    assert len(ax.get_yticklabels()) == 4
    assert rows[2]["upper"] == pytest.approx(grouped.groups["C"].conf_int(scale="ece").upper)


@pytest.mark.slow
def test_global_test_size_smoke():
    """All groups calibrated: the Bonferroni global test rejects at about its level or less."""
    rng = np.random.default_rng(12)
    sizes = [100, 400, 1500]
    labels = np.repeat(np.arange(3), sizes)
    reps = 150
    rejects = 0
    for r in range(reps):  # independent data sets (the quantity under study)
        p = rng.uniform(size=labels.size)
        y = (rng.random(labels.size) < p).astype(int)
        rejects += ct.calib_ci(y=y, probs=p, by=labels).global_pvalue <= 0.10
    # binomial(150, 0.10): mean 15, sd 3.7
    assert rejects <= 15 + 3 * 3.7


@pytest.mark.slow
def test_populations_study_smoke():
    """The vignette's cells run end to end on one data set each and return what the tables read."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "vignettes" / "populations.py"
    spec = importlib.util.spec_from_file_location("populations_study", path)
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    rng = np.random.default_rng(0)
    row = study.subgroup_cell(2, 0, 0.5)(rng)
    assert set(row) >= {"global_bonferroni", "global_fisher", "heterogeneity", "cover_0", "cover_1"}
    run, truth = study.prevalence_cell(0.5, 100, 100)
    row = run(rng)
    assert row["truth"] == pytest.approx(truth) and row["unweighted_cover"] in (0, 1)
    assert study.lognormal_cell(0.5, 300)(rng)["n_eff"] < 300
    # the population ECE of the prevalence design by a second route (Monte Carlo over the population)
    x = np.random.default_rng(1).standard_normal(400_000)
    mu = study._population_mu(study.PREV, study.PREV_SD)
    r = 1 / (1 + np.exp(-(mu + study.PREV_SD * x)))
    assert r.mean() == pytest.approx(study.PREV, abs=0.002)
    p = 1 / (1 + np.exp(-(np.log(r / (1 - r)) - 0.5)))
    assert np.mean((r - p) ** 2) == pytest.approx(truth, rel=0.03)


# --------------------------------------------------------------------------- one grouping engine
@pytest.fixture(scope="module")
def small():
    """Two sites with 120 and 80 rows, a categorical arm with an unused level, and missing predictions."""
    rng = np.random.default_rng(31)
    n = 200
    site = np.repeat(["A", "B"], [120, 80])
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < p).astype(int)
    arm = pd.Categorical(rng.choice(["x", "y"], n), categories=["x", "y", "z"])
    frame = pd.DataFrame({"y": y, "p": p, "site": site, "arm": arm})
    frame.loc[[3, 7, 150, 151, 152], "p"] = np.nan  # 2 missing in A, 3 in B
    return frame


def _run(kind, frame, **kw):
    if kind == "calib_ci":
        return ct.calib_ci("y ~ p", frame, rng=1, **kw)
    if kind == "evidence":
        return ct.evidence("y ~ p", frame, rng=1, **kw)
    return getattr(ct, kind)("y ~ p", frame, rng=1, n_draws=99, **kw)


KINDS = ["calib_ci", "calib_test", "tcal_test", "evidence"]


@pytest.mark.parametrize("kind", KINDS)
def test_one_protocol_for_every_grouped_function(kind, small):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    res = _run(kind, small, by="site", missing="drop")
    assert isinstance(res, ct.GroupedResult)
    frame = res.to_frame()
    assert frame.index.name == "site" and list(frame.index) == ["A", "B"]
    assert set(res.groups) == {"A", "B"} and all(r is not None for r in res.groups.values())
    assert np.isfinite(res.global_pvalue)
    assert res.global_pvalue == pytest.approx(min(1.0, 2 * frame["pvalue"].min()))
    text = str(res.summary())
    assert "nan" not in text and "site" in text
    json.dumps(res.to_dict())
    ax = res.plot_forest()
    assert len(ax.get_yticklabels()) == (3 if kind == "calib_ci" else 2)  # calib_ci: the pooled row too
    import matplotlib.pyplot as plt
    plt.close("all")


@pytest.mark.parametrize("kind", KINDS)
def test_counts_are_taken_after_missing_drop(kind, small):
    res = _run(kind, small, by="site", missing="drop")
    kept = small[small.p.notna()]
    hand = {s: int((kept.site == s).sum()) for s in ("A", "B")}
    assert hand == {"A": 118, "B": 77}
    assert res.to_frame()["n"].to_dict() == hand
    assert {s: r.n for s, r in res.groups.items()} == hand
    assert res.n_dropped == 5


@pytest.mark.parametrize("kind", ["calib_test", "tcal_test", "evidence"])
def test_each_group_is_the_function_on_its_rows_with_the_seed_rule(kind, small):
    res = _run(kind, small, by="site", missing="drop")
    for i, site in enumerate(["A", "B"]):
        sub = small[small.site == site]
        gen = np.random.default_rng([1, i])
        if kind == "evidence":
            ref = ct.evidence("y ~ p", sub, rng=gen, missing="drop")
            assert res.groups[site].conclusion() == ref.conclusion()
            assert res.to_frame().loc[site, "pvalue"] == ref.test.pvalue
        else:
            ref = getattr(ct, kind)("y ~ p", sub, rng=gen, n_draws=99, missing="drop")
            assert res.to_frame().loc[site, "pvalue"] == ref.pvalue
            assert res.groups[site].statistic == ref.statistic


@pytest.mark.parametrize("name", ["n", "estimate", "pvalue", "note", "null", "statistic", "events"])
@pytest.mark.parametrize("kind", ["calib_ci", "calib_test"])
def test_a_grouping_column_named_like_a_statistic_does_not_collide(name, kind, small):
    frame = small.assign(**{name: small.site})
    res = _run(kind, frame, by=name, missing="drop")
    table = res.to_frame()
    assert table.index.name == name and list(table.index) == ["A", "B"]
    assert table["n"].tolist() == [118, 77]  # the statistic, not the label
    text = str(res.summary())
    assert "A " in text and "B " in text
    assert [g["group"] for g in res.to_dict()["groups"]] == [f"{name}=A", f"{name}=B"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_level_of_a_categorical_is_listed(kind, small):
    res = _run(kind, small, by="arm", missing="drop")
    frame = res.to_frame()
    assert list(frame.index) == ["x", "y", "z"]
    assert frame.loc["z", "n"] == 0 and frame.loc["z", "note"] == "no rows"
    assert res.groups["z"] is None and res.reasons["z"] == "no rows"
    assert pd.isna(frame.loc["z", "pvalue"]) and res.n_analysed == 2
    assert "arm=z: not analysed (no rows)" in str(res.summary()).replace("\n", " ").replace("    ", "")


def test_crossed_categorical_levels_are_all_listed(small):
    res = ct.calib_test("y ~ p", small, by=["site", "arm"], rng=1, n_draws=99, missing="drop")
    frame = res.to_frame()
    assert list(frame.index) == [(s, a) for s in "AB" for a in "xyz"]
    assert frame.index.names == ["site", "arm"]
    assert frame.loc[("B", "z"), "n"] == 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_column_listed_twice_is_refused_by_name(kind, small):
    with pytest.raises(ValueError, match="'site' more than once"):
        _run(kind, small, by=["site", "site"], missing="drop")


def test_one_analysable_group_says_heterogeneity_is_not_computed(small):
    frame = small.assign(y=np.where(small.site == "B", 1, small.y))  # B: a single outcome class
    res = ct.calib_ci("y ~ p", frame, by="site", missing="drop", rng=1)
    assert res.groups["B"] is None and res.n_analysed == 1
    assert res.heterogeneity_df is None and np.isnan(res.heterogeneity_statistic)
    assert res.heterogeneity_note == "it needs at least two analysed groups and only one group was analysed"
    text = str(res.summary())
    assert "nan" not in text and "on 0 df" not in text and "not computed" in text
    assert any("Heterogeneity (equal ECE^2 in every group): not computed" in note for note in res.notes())
    assert res.to_dict()["heterogeneity_note"] == res.heterogeneity_note
    assert "heterogeneity not computed" in repr(res)


def test_no_analysable_group_says_the_global_test_is_not_computed(small):
    res = ct.calib_test("y ~ p", small.iloc[[0, 130]], by="site", rng=1, n_draws=99)
    assert list(res.to_frame().index) == ["A", "B"] and res.reasons == {"A": "a single row", "B": "a single row"}
    assert np.isnan(res.global_pvalue)
    text = str(res.summary())
    assert "nan" not in text and "not computed, no group could be analysed" in text.replace("\n", " ") \
        .replace("    ", "")


def test_cli_ci_by_a_column_named_n_and_by_twice(tmp_path, small, capsys):
    from calibtest.cli import main
    path = tmp_path / "d.csv"
    small.assign(n=small.site).to_csv(path, index=False)
    assert main(["ci", str(path), "--formula", "y ~ p", "--by", "n", "--missing", "drop"]) == 0
    out = capsys.readouterr().out
    assert "Groups by: n" in out and "\nA " in out and "\nB " in out
    assert main(["ci", str(path), "--formula", "y ~ p", "--by", "n", "--missing", "drop", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [g["n"] for g in d["groups"]] == [118, 77]
    status = main(["ci", str(path), "--formula", "y ~ p", "--by", "n", "--by", "n", "--missing", "drop"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "'n' more than once" in err


def test_tiny_groups_with_separated_outcomes_leave_the_slope_empty_with_a_note():
    """500 groups of 10 rows (issue: an uncaught "math domain error"): a group whose outcomes the predictions
    separate has no maximum-likelihood slope; its slope is NaN and its note says why, the others are unchanged."""
    from calibtest.core.recalibration import calibration_measures_rows, logistic_fit
    rng = np.random.default_rng(0)
    G, m = 500, 10
    p = rng.uniform(0.05, 0.95, G * m)
    y = (rng.uniform(size=G * m) < p).astype(int)
    df = pd.DataFrame({"y": y, "p": p, "g": np.repeat(np.arange(G), m)})
    sub = df[df.g.between(300, 311)].reset_index(drop=True)  # holds group 306, the first that failed
    lp = np.log(sub.p / (1 - sub.p)).to_numpy()
    separated = []
    for g, rows in sub.groupby("g"):
        order = np.argsort(lp[rows.index])
        ys = rows.y.to_numpy()[order]
        # complete or quasi-complete separation: the outcomes sorted by the prediction switch from 0 to 1 once
        if 0 < ys.sum() < m and np.all(np.diff(ys) >= 0):
            separated.append(g)
    assert 306 in separated
    res = ct.calib_ci("y ~ p", data=sub, by="g")
    tab = res.table
    for g in tab.index:
        rows = sub[sub.g == g]
        fit, _ = logistic_fit(rows.y.to_numpy(float), np.log(rows.p / (1 - rows.p)).to_numpy(), np.zeros(m),
                              np.array([0.0, 1.0]))
        if g in separated:
            assert np.isnan(tab.loc[g, "slope"]) and np.isnan(tab.loc[g, "slope_se"])
            assert "slope not estimable" in tab.loc[g, "note"]
            assert any(f"g={g}:" in nt and "slope not estimable" in nt for nt in res.notes())
        else:
            assert tab.loc[g, "slope"] == fit[1] and "not estimable" not in tab.loc[g, "note"]
    grp = sub[sub.g == 306]
    out = calibration_measures_rows(grp.p.to_numpy(), grp.y.to_numpy(float), 0.05)
    assert np.isnan(out["slope"]) and np.isnan(out["slope_se"]) and np.isfinite(out["oe"])


def test_summary_table_shows_an_open_interval_as_open_with_its_verdict():
    """Issue 37: the text table showed a rejecting pooled row as "0 ... 0.08475" with no verdict."""
    from calibtest.display.format import fmt

    rng = np.random.default_rng(0)
    n = 1500
    site = rng.choice(list("ABC"), n)
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < np.where(site == "C", np.clip(p + 0.12, 0, 1), p)).astype(int)
    res = ct.calib_ci("y ~ p", pd.DataFrame({"y": y, "p": p, "site": site}), by="site")
    lines = str(res.summary()).splitlines()
    rows = {**{g: res.groups[g] for g in "ABC"}, "(pooled)": res.pooled}
    n_open = 0
    for label, r in rows.items():
        line = next(x for x in lines if x.startswith(label + " "))
        rejects = r.null_pvalue <= r.alpha  # the test decides whether 0 belongs to the adjusted interval
        lo, hi = np.sqrt(r.ci_lower), np.sqrt(r.ci_upper)
        is_open = rejects and lo == 0.0
        n_open += is_open
        expected = f"{'(' if is_open else '['}{fmt(lo, 3)}, {fmt(hi, 3)}]"
        assert expected in line, (expected, line)
        assert ("excludes 0" if rejects else "contains 0") in line
    assert n_open >= 1  # the case this checks: a rejecting interval whose lower end is 0
