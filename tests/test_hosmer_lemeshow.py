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
    assert hl.df == groups - 2
    assert_allclose(hl.pvalue, stats.chi2.sf(expected, groups - 2), rtol=1e-10)
    assert_allclose(hl.pvalue_df_groups, stats.chi2.sf(expected, groups), rtol=1e-10)
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
