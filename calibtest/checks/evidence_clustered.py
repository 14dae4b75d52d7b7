"""The evidence on calibration of rows in independent clusters (``evidence(..., cluster=)``).

:func:`build_clustered_evidence` lays out, for a clustered
:class:`~calibtest.CalibrationResult` (``calib_ci(..., cluster=)``), the rows
of :mod:`calibtest.checks.evidence_table` in their clustered versions, each allowing
for correlation of the rows of one cluster (clusters independent):

* ``calib_test``: the clustered multi-scale test
  (:func:`calibtest.checks.multiscale.calib_test_clustered`): T_cl per scale,
  sign flips of whole clusters, Spiegelhalter's z with cluster sums as a
  component;
* ``calib_ci``: the result's own cluster-robust interval for ECE^2 and its
  cluster sign-flip (or asymptotic) test;
* ``hosmer_lemeshow``: the design-based, F-adjusted Hosmer-Lemeshow test of
  Archer, Lemeshow and Hosmer [1]_ (:func:`design_hosmer_lemeshow`), when
  there are more clusters than groups (otherwise left out, and the scope
  says why);
* ``spiegelhalter``: z = sum_g A_g / sqrt(sum_g A_g^2), A_g the cluster sums
  of (y - p)(1 - 2p), with its sign-flip p-value (the draws of the
  multi-scale test);
* ``citl``, ``slope``, ``oe``: calibration-in-the-large, the calibration
  slope and O/E with cluster-robust intervals (``res.clustering.measures``).

The bin-sensitivity table gives the clustered interval and test at each B.
:func:`clustered_evidence_parts` computes these rows;
:func:`calibtest.checks.evidence_table.assemble_clustered_evidence` writes the
conclusion (:func:`calibtest.checks.evidence_table.conclude`) and the
:class:`~calibtest.checks.evidence_table.EvidenceResult`, and
``CalibrationResult.evidence()`` keeps it with the result.

References
----------
.. [1] Archer, Lemeshow and Hosmer, "Goodness-of-fit tests for logistic
       regression models when data are collected using a complex sampling
       design", Computational Statistics & Data Analysis 51:4450-4464, 2007.
.. [2] Korn and Graubard, "Simultaneous testing of regression coefficients
       with complex survey data: use of Bonferroni t statistics", The
       American Statistician 44:270-276, 1990 (the F-adjusted Wald test).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as _sps

from calibtest.inputs.validation import DEFAULT_DRAWS
from calibtest.checks.multiscale import MultiScaleOptions, calib_test_clustered
from calibtest.core.clustered import cluster_cells, clustered_inference
from calibtest.core.partition import partition_rows
from calibtest.display.summary import null_text, part

__all__ = ["DesignHosmerLemeshow", "design_hosmer_lemeshow", "clustered_evidence_parts", "HL_GROUPS"]

#: Groups of the design-based Hosmer-Lemeshow test (deciles of the predictions, as the i.i.d. evidence's).
HL_GROUPS = 10


@dataclass(frozen=True, eq=False)
class DesignHosmerLemeshow:
    """The F-adjusted design-based Hosmer-Lemeshow test of Archer, Lemeshow and Hosmer (2007).

    The rows are split into ``groups`` groups of equal size by sorted
    prediction (as :func:`calibtest.hosmer_lemeshow`); the mean residual
    m_j = sum (y - p) / n_j of group j is the sum over clusters of the
    cluster totals S_cj / n_j (n_j fixed by the split), so its covariance is
    the between-cluster one, V = G / (G - 1) sum_c z_c z_c' with
    z_c = (S_c - S / G) / n (the with-replacement variance of a total over
    independent primary units); W = m' V^-1 m, and with f = G - 1 design
    degrees of freedom and d = g restrictions (external validation: every
    mean residual is 0 under calibration) F = (f - d + 1) W / (f d) is
    referred to F(d, f - d + 1), as in Archer, Lemeshow and Hosmer (2007).
    They linearise m_j as a ratio (its denominator is random under survey
    weights); with unweighted rows and fixed group sizes the totals' form
    is used, whose size was measured closer to alpha (``docs/clusters.md``).

    Attributes
    ----------
    statistic : float
        F.
    wald : float
        W.
    df_num, df_den : int
        d = g and f - g + 1.
    pvalue : float
    groups : int
    n_clusters : int
    table : pandas.DataFrame
        Per group: ``group``, ``n``, ``observed``, ``expected``, ``mean_residual``, ``se`` (cluster-robust).
    """

    statistic: float
    wald: float
    df_num: int
    df_den: int
    pvalue: float
    groups: int
    n_clusters: int
    table: pd.DataFrame = field(repr=False)


def design_hosmer_lemeshow(y, p, codes, n_clusters: int, groups: int = HL_GROUPS) -> DesignHosmerLemeshow:
    """The design-based Hosmer-Lemeshow test for rows in ``n_clusters`` independent clusters.

    Parameters
    ----------
    y, p : ndarray, shape (n,)
        Outcomes 0/1 and predicted probabilities.
    codes : ndarray of int, shape (n,)
        Cluster of each row, 0..G-1.
    n_clusters : int
        G.
    groups : int
        g, groups of equal size by sorted prediction.

    Raises
    ------
    ValueError
        With fewer than g + 1 clusters (the F reference needs f - g + 1 >= 1
        design degrees of freedom), or when the cluster covariance of the
        mean residuals is singular (e.g. a group whose residuals are all 0).
    """
    y = np.asarray(y, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    codes = np.asarray(codes, dtype=np.intp)
    G, g, n = int(n_clusters), int(groups), y.shape[0]
    f = G - 1
    if f - g + 1 < 1:
        raise ValueError(f"the design-based Hosmer-Lemeshow test with g = {g} groups needs at least {g + 1} "
                         f"clusters (its F reference has G - g = {G - g} denominator degrees of freedom), and "
                         f"these rows have {G}")
    if n < g:
        raise ValueError(f"the design-based Hosmer-Lemeshow test needs at least g = {g} rows, got {n}")
    order = np.argsort(p, kind="stable")
    sizes = np.array([len(ix) for ix in np.array_split(order, g)])
    group = np.empty(n, dtype=np.intp)
    group[order] = np.repeat(np.arange(g), sizes)
    r = y - p
    cell = codes * g + group
    sums = np.bincount(cell, weights=r, minlength=G * g).reshape(G, g)
    total = sums.sum(axis=0)
    mean = total / sizes
    z = (sums - total / G) / sizes  # each cluster's share of the mean residuals, centred over the clusters
    V = G / (G - 1.0) * (z.T @ z)
    eig = np.linalg.eigvalsh(V)
    if not eig[0] > 1e-12 * max(eig[-1], 0.0) or not eig[-1] > 0:
        raise ValueError("the cluster covariance of the groups' mean residuals is singular (a group whose "
                         "residuals do not vary across clusters), so the design-based Hosmer-Lemeshow test is "
                         "undefined")
    wald = float(mean @ np.linalg.solve(V, mean))
    d = g
    statistic = (f - d + 1) * wald / (f * d)
    pvalue = float(_sps.f.sf(statistic, d, f - d + 1))
    table = pd.DataFrame({"group": np.arange(1, g + 1), "n": sizes,
                          "observed": np.bincount(group, weights=y, minlength=g),
                          "expected": np.bincount(group, weights=p, minlength=g), "mean_residual": mean,
                          "se": np.sqrt(np.diag(V))})
    return DesignHosmerLemeshow(statistic=float(statistic), wald=wald, df_num=d, df_den=f - d + 1,
                                pvalue=pvalue, groups=g, n_clusters=G, table=table)


def _sensitivity(res, alpha: float, rng, bins) -> pd.DataFrame:
    """The clustered interval and test at each B of ``bins`` below the result's, then at its B."""
    c = res.clustering
    data = res.data
    draws = DEFAULT_DRAWS if c.exact else (part(res, "monte_carlo", "n_draws") or DEFAULT_DRAWS)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    rows = []
    for b in tuple(b for b in bins if b < res.n_bins):  # a loop over the few bin counts
        partition = partition_rows(data, b)
        cells = cluster_cells(partition.inverse, data.u, c.codes, partition.m, c.n_clusters)
        inf = clustered_inference(cells, data.n, alpha=alpha, null=c.null, n_draws=draws, rng=gen)
        iv = inf.interval
        rows.append({"n_bins": int(partition.n_bins), "T": float(inf.statistics.estimate), "lower": float(iv.lower),
                     "upper": float(iv.upper), "lower_open": bool(iv.lower_open), "pvalue": float(inf.pvalue),
                     "reject": bool(not iv.contains_zero)})
    iv = res.conf_int(alpha)
    rows.append({"n_bins": int(res.n_bins), "T": float(res.estimate), "lower": float(iv.lower),
                 "upper": float(iv.upper), "lower_open": bool(iv.lower_open), "pvalue": float(res.null_pvalue),
                 "reject": bool(not iv.contains_zero)})
    return pd.DataFrame(rows)


def clustered_evidence_parts(res, alpha: float, rng, bins) -> dict:
    """The rows of the clustered evidence table of a clustered result (rows in memory).

    Parameters
    ----------
    res : CalibrationResult
        A result of ``calib_ci(..., cluster=)`` (``res.clustering`` set, ``res.data`` held).
    alpha : float
        Level of every test and interval.
    rng : int or numpy.random.Generator
        Seed of the sign patterns of the multi-scale test (and of the
        bin-sensitivity rows' sign-flip tests).
    bins : tuple of int
        The bin counts of the bin-sensitivity table (those below the result's B are used).

    Returns
    -------
    dict
        ``table`` (the rows of the module docstring, as the evidence table
        lays them out), ``sens`` and ``flag`` (the bin-sensitivity rows and
        whether their verdict varies), ``test`` (the clustered multi-scale
        test), ``measures`` (the cluster-robust CITL, slope and O/E or
        None), ``design_hl`` (:class:`DesignHosmerLemeshow` or None),
        ``scope`` (what each row allows for and what was left out) and
        ``seed``.
    """
    c = res.clustering
    data = res.data
    seed = "Generator" if isinstance(rng, np.random.Generator) else int(rng)
    book = {"formula": res.formula, "y_name": res.y_name, "prob_names": tuple(res.prob_names),
            "n_dropped": res.n_dropped}
    test = calib_test_clustered(data, c.codes, c.n_clusters, MultiScaleOptions(alpha=alpha), rng=rng, **book)
    sens = _sensitivity(res, alpha, rng, bins)
    iv = res.conf_int(alpha)
    level = f"{100 * (1 - alpha):g}%"
    G = c.n_clusters
    flips = f"{test.n_draws} {'(every one) ' if test.cluster_exact else 'random '}sign patterns of the {G} clusters"
    sp = test.spiegelhalter_z is not None
    records = {
        "calib_test": ("multi-scale test (clustered)",
                       f"E[Y | Z] = Z (calibrated), at every B of the grid {list(test.n_bins)}"
                       + (" and by Spiegelhalter's z with cluster sums" if sp else "")
                       + f" (statistic: max of z_B = T_cl / sqrt(V_0){' and |z_S|' if sp else ''}; {flips})",
                       test.statistic, test.pvalue, None, None, test.reject),
        "calib_ci": (f"ECE^2 {level} CI, B = {res.n_bins} (clustered)",
                     f"ECE^2 = 0 at B = {res.n_bins}, tested with the {null_text(res)} null (statistic: T_cl, "
                     "pairs of rows of different clusters)", res.estimate, res.null_pvalue, iv.lower, iv.upper,
                     not iv.contains_zero),
    }
    missing, dhl = [], None
    if data.z.shape[1] == 1:
        y, p = np.rint(data.y[:, 0]), data.z[:, 0]
        try:
            dhl = design_hosmer_lemeshow(y, p, c.codes, G, HL_GROUPS)
            records["hosmer_lemeshow"] = (
                "Hosmer-Lemeshow (design-based F)",
                f"mean residual y - p = 0 in each of the {dhl.groups} groups (Archer-Lemeshow-Hosmer F-adjusted "
                f"Wald test, F({dhl.df_num}, {dhl.df_den}), cluster covariance)", dhl.statistic, dhl.pvalue,
                None, None, dhl.pvalue <= alpha)
        except ValueError as exc:
            missing.append(f"Hosmer-Lemeshow was not computed: {exc}; its i.i.d. version takes the rows as "
                           "independent and is not shown.")
        if test.spiegelhalter_z is not None:
            records["spiegelhalter"] = ("Spiegelhalter z (clustered)", "the squared errors (y - p)^2 have the "
                                        "mean implied by p (z from the cluster sums of (y - p)(1 - 2p), "
                                        "sign-flip p-value)", test.spiegelhalter_z, test.pvalue_spiegelhalter,
                                        None, None, test.pvalue_spiegelhalter <= alpha)
    m = c.measures
    if m is not None:
        (c_lo, c_hi), (s_lo, s_hi), (o_lo, o_hi) = m.citl_ci(alpha), m.slope_ci(alpha), m.oe_ci(alpha)
        t_ref = f"cluster-robust standard error, t with {m.df} df"
        records.update({
            "citl": (f"CITL {level} CI (clustered)", "calibration-in-the-large a0 = 0 in logit P(y=1) = a0 + "
                     f"logit(p) ({t_ref})", m.citl, None, c_lo, c_hi, not (c_lo <= 0.0 <= c_hi)),
            "slope": (f"slope {level} CI (clustered)", f"calibration slope b = 1 in logit P(y=1) = a + b logit(p) "
                      f"({t_ref})", m.slope, None, s_lo, s_hi, not (s_lo <= 1.0 <= s_hi)),
            "oe": (f"O/E {level} CI (clustered)", f"observed / expected events O/E = 1 ({t_ref} on log O/E)",
                   m.oe, None, o_lo, o_hi, not (o_lo <= 1.0 <= o_hi)),
        })
    elif data.z.shape[1] != 1:
        missing.append("Hosmer-Lemeshow, Spiegelhalter's z, CITL, the slope and O/E apply to one probability "
                       "column (binary or top-1); here the evidence is the multi-scale test and the interval.")
    table = pd.DataFrame(
        [{"name": nm, "null": null, "statistic": float(stat), "pvalue": None if pv is None else float(pv),
          "lower": None if lo is None else float(lo), "upper": None if hi is None else float(hi),
          "reject": bool(r), "verdict": ("excludes 0" if r else "contains 0") if key == "calib_ci" else
          ("rejects" if r else "does not reject")}
         for key, (nm, null, stat, pv, lo, hi, r) in records.items()], index=list(records), dtype=object)
    scope = " ".join([f"Clustered rows: {G} clusters, taken as independent, rows of one cluster possibly "
                      "correlated; every row of this table allows for that correlation (sign flips of whole "
                      "clusters, cluster-robust standard errors with t quantiles on "
                      f"{G - 1} df, the design-based Hosmer-Lemeshow test); the i.i.d. Hosmer-Lemeshow test and "
                      "val.prob statistics take the rows as independent and are not part of it."]
                     + missing + ([f"Only {G} clusters: read the clustered tests and intervals as exploratory."]
                                  if c.few else []))
    return {"table": table, "sens": sens, "flag": bool(sens["reject"].nunique() > 1), "test": test, "measures": m,
            "design_hl": dhl, "scope": scope, "seed": seed}
