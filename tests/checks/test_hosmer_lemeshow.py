"""Hosmer–Lemeshow test against a direct implementation of the textbook formula."""
import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import stats

import calibtest as ct


def textbook_hl(p, y, g):
    """HL = sum_g (O_g - E_g)^2 / (E_g (1 - E_g / n_g)) over g groups of the sorted predictions."""
    order = np.argsort(p, kind="stable")
    stat = 0.0
    for rows in np.array_split(order, g):
        o, e, m = y[rows].sum(), p[rows].sum(), len(rows)
        stat += (o - e) ** 2 / (e * (1 - e / m))
    return stat


@pytest.mark.parametrize("groups", [5, 10, 13])
def test_statistic_df_and_pvalue(groups):
    rng = np.random.default_rng(groups)
    p = rng.uniform(0.02, 0.98, size=777)
    y = (rng.uniform(size=777) < np.clip(p + 0.05, 0, 1)).astype(int)
    hl = ct.calib_ci(y=y, probs=p, n_bins=10).hosmer_lemeshow(groups=groups)
    expected = textbook_hl(p, y, groups)
    assert_allclose(hl.statistic, expected, rtol=1e-10)
    # default: external validation, chi2 with df = g (was df = g - 2 before validation= existed)
    assert hl.validation == "external" and hl.df == groups
    assert_allclose(hl.pvalue, stats.chi2.sf(expected, groups), rtol=1e-10)
    assert_allclose(hl.pvalue_df_groups, stats.chi2.sf(expected, groups), rtol=1e-10)
    assert_allclose(hl.pvalue_df_groups_minus_2, stats.chi2.sf(expected, groups - 2), rtol=1e-10)
    stat, pval = hl
    assert stat == hl.statistic and pval == hl.pvalue
    table = hl.table
    assert table["n"].sum() == 777 and len(table) == groups
    assert_allclose(table["observed"].sum(), y.sum())
    assert_allclose(table["expected"].sum(), p.sum())
    assert_allclose(table["chi2"].sum(), expected, rtol=1e-10)


def test_plugin_and_debiased_estimates_on_groups():
    rng = np.random.default_rng(2)
    p = rng.uniform(size=500)
    y = (rng.uniform(size=500) < p).astype(int)
    res = ct.calib_ci(y=y, probs=p, n_bins=20)
    hl = res.hosmer_lemeshow(groups=10)
    assert hl.plugin_estimate == res.plugin_estimate and hl.debiased_estimate == res.estimate
    order = np.argsort(p, kind="stable")
    u = y - p
    t_m = sum(len(r) / 500 * u[r].mean() ** 2 for r in np.array_split(order, 10))
    t = sum((u[r].sum() ** 2 - (u[r] ** 2).sum()) / (len(r) - 1) for r in np.array_split(order, 10)) / 500
    assert_allclose(hl.plugin_estimate_groups, t_m, rtol=1e-12)
    assert_allclose(hl.debiased_estimate_groups, t, rtol=1e-12)
    # the plug-in estimate is biased upwards by about (number of groups) * var / n
    assert hl.plugin_estimate_groups > hl.debiased_estimate_groups


def test_bad_groups_and_modes():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=50)
    y = (rng.uniform(size=50) < p).astype(int)
    res = ct.calib_ci(y=y, probs=p)
    with pytest.raises(ValueError, match="groups must be between 3 and n = 50"):
        res.hosmer_lemeshow(groups=2)
    with pytest.raises(TypeError, match="groups"):
        res.hosmer_lemeshow(groups=2.5)
    P = rng.dirichlet(np.ones(3), size=50)
    res2 = ct.calib_ci(y=rng.integers(0, 3, size=50), probs=P, k=2)
    with pytest.raises(ValueError, match="1-dim mode"):
        res2.hosmer_lemeshow()


def test_formula_and_array_forms_match_the_result_form():
    import pandas as pd
    rng = np.random.default_rng(8)
    p = rng.uniform(0.02, 0.98, size=400)
    y = (rng.uniform(size=400) < p).astype(int)
    old = ct.calib_ci(y=y, probs=p).hosmer_lemeshow(groups=7)
    old_positional = ct.hosmer_lemeshow(ct.calib_ci(y=y, probs=p), 7)
    df = pd.DataFrame({"y": y, "p": p})
    new = ct.hosmer_lemeshow("y ~ p", data=df, groups=7)
    arrays = ct.hosmer_lemeshow(y=y, probs=p, groups=7)
    for hl in (old_positional, new, arrays):
        assert hl.statistic == old.statistic and hl.pvalue == old.pvalue
        assert hl.plugin_estimate_groups == old.plugin_estimate_groups
    assert_allclose(new.statistic, textbook_hl(p, y, 7), rtol=1e-10)
    dropped = ct.hosmer_lemeshow("y ~ p", data=df.assign(p=np.r_[np.nan, p[1:]]), groups=7, missing="drop")
    assert dropped.n == 399 and dropped.n_dropped == 1 and "1 rows with missing values" in str(dropped.summary())
    assert "References" in ct.hosmer_lemeshow.__doc__ and "1980" in ct.hosmer_lemeshow.__doc__


@pytest.mark.parametrize("validation, df_shift", [("external", 0), ("development", 2)])
def test_validation_chooses_the_reference_distribution(validation, df_shift):
    import json
    import pandas as pd
    rng = np.random.default_rng(4)
    p = rng.uniform(0.05, 0.95, size=600)
    y = (rng.uniform(size=600) < np.clip(p + 0.04, 0, 1)).astype(int)
    expected = textbook_hl(p, y, 8)
    res = ct.calib_ci(y=y, probs=p)
    forms = [res.hosmer_lemeshow(8, validation=validation),
             res.hosmer_lemeshow(groups=8, validation=validation),
             ct.hosmer_lemeshow(res, 8, validation=validation),
             ct.hosmer_lemeshow("y ~ p", data=pd.DataFrame({"y": y, "p": p}), groups=8, validation=validation),
             ct.hosmer_lemeshow(y=y, probs=p, groups=8, validation=validation)]
    for hl in forms:
        assert hl.validation == validation and hl.df == 8 - df_shift
        assert_allclose(hl.pvalue, stats.chi2.sf(expected, 8 - df_shift), rtol=1e-10)
        # both p-values whatever the choice
        assert_allclose(hl.pvalue_df_groups, stats.chi2.sf(expected, 8), rtol=1e-10)
        assert_allclose(hl.pvalue_df_groups_minus_2, stats.chi2.sf(expected, 6), rtol=1e-10)
        assert tuple(hl) == (hl.statistic, hl.pvalue)
    hl = forms[0]
    d = json.loads(json.dumps(hl.to_dict(), allow_nan=False))
    assert d["validation"] == validation and d["df"] == 8 - df_shift and d["pvalue"] == hl.pvalue
    assert d["pvalue_df_groups"] == hl.pvalue_df_groups
    assert d["pvalue_df_groups_minus_2"] == hl.pvalue_df_groups_minus_2
    text = " ".join(str(hl.summary()).split())
    label = {"external": "df = g", "development": "df = g - 2"}[validation]
    assert f"chi2({8 - df_shift}), {label} ({validation})" in text
    assert f"HL, {label} ({validation}) [used]" in text and text.count("[used]") == 1
    assert f"({validation})" in repr(hl)
    # the external and development p-values differ, and external is the larger (more df, same statistic)
    assert hl.pvalue_df_groups > hl.pvalue_df_groups_minus_2


def test_default_is_external():
    rng = np.random.default_rng(5)
    p = rng.uniform(0.05, 0.95, size=300)
    y = (rng.uniform(size=300) < p).astype(int)
    a = ct.hosmer_lemeshow(y=y, probs=p)
    b = ct.hosmer_lemeshow(y=y, probs=p, validation="external")
    c = ct.calib_ci(y=y, probs=p).hosmer_lemeshow()
    assert a.validation == c.validation == "external" and a.df == c.df == 10
    assert a.pvalue == b.pvalue == c.pvalue == a.pvalue_df_groups


@pytest.mark.parametrize("bad", ["internal", "External", None, 1])
def test_bad_validation(bad):
    rng = np.random.default_rng(6)
    p = rng.uniform(size=60)
    y = (rng.uniform(size=60) < p).astype(int)
    with pytest.raises(ValueError, match=r"validation must be one of \('external', 'development'\)"):
        ct.hosmer_lemeshow(y=y, probs=p, validation=bad)
    with pytest.raises(ValueError, match=r"validation must be one of \('external', 'development'\)"):
        ct.calib_ci(y=y, probs=p).hosmer_lemeshow(5, validation=bad)
