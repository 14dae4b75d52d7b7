"""A multi-scale test of calibration with exact finite-sample size.

The single-B test of :func:`calibtest.calib_ci` bins at the automatic B
(``auto_n_bins``: 35 bins at n = 472), tuned to *estimate* the ECE; against
smooth miscalibration (a recalibration curve that departs slowly from the
diagonal) the signal lives in a few wide bins and the many narrow bins only
add noise, so that test loses power (p = 0.27 at B = 35 against p = 0.0009 at
B = 5 on a model whose predictions were squared).

:func:`calib_test` tests H0: E[Y | Z] = Z at several bin counts at once.

Statistic.  For each B of the grid, T_B is the debiased binned estimate of
ECE^2 of ``calib_ci`` (eq. (6) of Sun et al.), and z_B = T_B / sd(T_B | Z),
with the exact conditional variance of T_B given the predictions under H0
(:func:`calibtest.core.conditional.conditional_moments`).  The statistic is
max_B z_B: standardizing puts the scales on one footing (T_B at small B has a
much larger null spread than at large B).

Degenerate predictions.  When sd(T_B | Z) = 0 the null law of T_B given the
predictions is the point mass at 0: every row of a bin of >= 2 rows has a
prediction in {0, 1} (hard labels used as probabilities, an LLM that always
says 100%), or is the only random row of its bin, so the label draws
reproduce T_B = 0 exactly.  z_B is then the limit of T_B / sd: +inf when
labels of probability 0 make T_B > 0, -inf when they make T_B < 0, and 0
when T_B = 0 (:func:`calibtest.core.conditional.point_mass_sign`); every
draw has z*_B = 0.  So labels that depart from such predictions give
z_B = +inf and the p-value 1/(R + 1), the smallest R draws can give, while
labels equal to the predictions give z_B = 0 and p = 1; under H0 labels of
probability 0 never occur, and the size stays exact.  Spiegelhalter's z with
a zero denominator (every p in {0, 1/2, 1}) is read the same way: +inf when
some label has probability 0, else 0.  Scales where only some bins are
degenerate have sd > 0 and are standardized as usual.  The single-B test
equals ``calib_ci(..., null="monte-carlo")``, whose Monte Carlo p-value
follows the same rule, and ``calib_ci``'s conditional null gives the exact
p-value of the point mass (0 when T > 0, 1 otherwise).

Spiegelhalter's z (binary and top-1 targets, ``spiegelhalter=None`` or
True).  The statistic becomes max(max_B z_B, |z_S|) with

    z_S = sum_a (y_a - p_a)(1 - 2 p_a) / sqrt(sum_a (1 - 2 p_a)^2 p_a (1 - p_a)),

Spiegelhalter's (1986) z, which has mean 0 and variance 1 exactly given
the predictions under H0, so it sits on the footing of the z_B.  Its
numerator is sum_a y_a (1 - 2 p_a) up to a constant: the sum over the
segments of the sums W_s the label draws compute anyway, so it costs
nothing per draw, and the max is calibrated by the same draws (exact size).
z_S is one global contrast weighting the residuals by 1 - 2p, which a
calibration slope or a departure of every p towards or away from 1/2 moves
most.  Measured (``vignettes/spiegelhalter_component.md``, paired data
sets, R = 399): +0.14 of power at slope 0.7 (n = 200 and 500) and +0.07
to +0.13 at slope 1.4, -0.006 to +0.03 elsewhere, and the size unchanged;
z_S alone is still the more powerful test against a logit-linear
departure (0.62 against 0.38 at slope 0.7, n = 200).  ``spiegelhalter=False``
tests the binned scales alone; top-k (k >= 2) and full calibration have no
single probability per row and refuse ``spiegelhalter=True``.  An int
``n_bins`` (the single-scale test of ``calib_ci``) leaves it out unless
``spiegelhalter=True``.

Null.  Conditional Monte Carlo: given the predictions, R label vectors are
drawn from them (Y* ~ Categorical(z)), and T*_B is computed at *every* scale
for the *same* draw (:func:`calibtest.core.conditional.monte_carlo_draws`), so
the joint law of (z_B)_B is the exact conditional null, dependence included.
p-value = (1 + #{max_B z*_B >= max_B z_B}) / (R + 1): under H0 the observed
labels and the R draws are exchangeable given the predictions, so
P(p <= alpha) <= alpha exactly, for every n (no asymptotics).

Gaussian null (``null="gaussian"``, or ``"auto"`` at n >= 10^6 when at most
200,000 random rows sit in thin cells; binary and top-1 targets).  R draws
of the label sums of the cells of the scales' common refinement instead of
R label vectors: normal with their exact conditional moments where a cell
holds sum p(1 - p) >= 30, from Bernoulli(p) labels for the rows of the other
cells (:mod:`calibtest.core.gaussian_null`).  The T*_B of each draw are
computed from those sums, so the chi-square shape of the coarse scales and
the dependence between the scales are kept; the cost is one pass over the
rows plus R x (thin rows), not R x n.  Its size is approximate, measured in
``vignettes/multiscale_gaussian_null.md``; the result's ``null`` names the
null used.

Grid.  n_bins="adaptive": B = 2, 4, 8, ... (doubling) below the automatic B
of ``calib_ci``, then the automatic B itself; about log2(B_auto) scales (6 at
n = 472).  Doubling covers every bandwidth between the coarsest binning and
the estimation-optimal one within a factor sqrt(2) of some scale, while the
number of scales -- and so the price of the max -- grows only
logarithmically (the adaptive T-Cal test of Lee et al. 2023 uses the same
dyadic grid).  ``vignettes/calib_test_study.md`` measures the size and power.

Partitions.  ``partitions="equal-width"``: the cubes [i/B, (i+1)/B) of
``calib_ci`` (the paper's bins).  ``"equal-mass"`` (binary and top-1
targets): B bins with edges at the empirical quantiles e_j = Q(j/B) of the
predictions (:func:`equal_mass_bins`; a row on an edge goes to the bin above,
so equal predictions always share a bin).  ``"both"``: the two families, 2L
scales, scored on the same draws.  A partition that depends on the
predictions only is fixed given them, so the conditional null -- and the
exact size -- holds for the equal-mass scales as for the equal-width ones.
With skewed predictions (p ~ Beta(2, 5)) equal-width B = 2 or 4 puts
almost every row in one or two bins, while the equal-mass median split
compares the lower and upper halves of the predictions.  Measured
(``vignettes/equal_mass_scales.md``), adding the equal-mass scales gains
about 0.04 of power on a calibration slope of 0.7 and nothing on slope 1.4,
and loses 0.02-0.09 on rare-event predictions (Beta(0.5, 10)) and 0.03 on a
local bump, where equal-width bins isolate the sparse tail; the default
stays ``"equal-width"`` (the test of the paper's bins), the other two are
options.  The interval of ``calib_ci`` keeps the paper's equal-width bins.
Top-k (k >= 2) and full calibration bin a vector in dimension >= 2, which
has no natural quantiles: equal-width only.

Speed and memory.  The partitions and the per-scale sd are computed once;
for binary and top-1 targets the labels of every draw come from a
counter-based stream keyed by the seed, the row's position and the draw
(:func:`calibtest.core.counter_draws.counter_labels`: 8 random bits per row
and draw), drawn in blocks of rows and draws and reduced to additive per-draw
bin sums (:class:`calibtest.core.counter_draws.DrawSums`), so peak memory is
O(R x bins + rows per block x draws per block), not O(R x n), and a file or
a Dask frame read in any chunks gives the p-value of the rows in memory for
the same int seed.  Timings and peak memory: ``benchmarks/bench_calib_test.py``.

Combination.  ``combine="max-z"`` (default) or ``"bonferroni"``:
min(1, L min_B p_B) over the per-scale Monte Carlo p-values (for one global
test Holm's step-down gives the same p-value as Bonferroni).  Both are exact
level tests; the max-z test spends no level on the dependence between the
scales and was the more powerful in every power setting of the study.
"""
from __future__ import annotations

import math
from typing import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from calibtest.display.format import Call, fmt
from calibtest.inputs.validation import DEFAULT_DRAWS, check_memory, is_integer, resolve_seed
from calibtest.core.binning import auto_n_bins
from calibtest.core.clustered import cluster_cells, clustered_statistics, flip_draws, flipped_statistic
from calibtest.core.conditional import (conditional_bin_sums, conditional_moments, label_classes, monte_carlo_draws,
                                        point_mass_sign)
from calibtest.core.partition import binned_dimension, partition_rows
from calibtest.core.gaussian_null import CellSums, choose_null, gaussian_draws
from calibtest.core.conditional import counter_key
from calibtest.core import gaussian_null
from calibtest.core.progress import progress_bar
from calibtest.core.targets import PreparedData, Target
from calibtest.options import BIN_COUNT, OPTIONS, OptionError, check_option
from calibtest.display.summary import CalibSummary, ResultDisplay, model_text

__all__ = ["CalibrationTestResult", "MultiScaleOptions", "ScaleDraws", "assemble_result", "check_grid", "adaptive_grid", "calib_test_rows", "equal_mass_bins", "TestOfCalibration"]

COMBINE = OPTIONS["combine"].choices
#: The null laws of the multi-scale test (``calib_test(null=)``).
TEST_NULLS = OPTIONS["test_null"].choices
PARTITIONS = OPTIONS["partitions"].choices


def equal_mass_bins(p, n_bins: int) -> tuple[np.ndarray, int]:
    """Equal-mass bins of a 1-dim prediction: edges at the empirical quantiles, ties kept together.

    The B - 1 interior edges are ``e_j = np.quantile(p, j / B)`` (linear
    interpolation, j = 1, ..., B - 1) and row a falls in bin
    ``#{j : e_j <= p_a}`` (``np.searchsorted(edges, p, side="right")``): a
    row on an edge goes to the bin above it, so rows with equal predictions
    always share a bin, and a value held by more than 1/B of the rows merges
    bins (fewer than B bins remain).  Bins left empty are dropped and the
    others renumbered 0..m-1 in order of p.  The partition is a function of
    the predictions only, so the conditional null given them stays exact.

    Parameters
    ----------
    p : array_like, shape (n,)
        The predictions (binary p or top-1 confidence).
    n_bins : int
        B, the number of quantile bins asked for.

    Returns
    -------
    inverse : ndarray of intp, shape (n,)
        Bin of each row, 0..m-1, non-decreasing in p.
    m : int
        Number of non-empty bins (<= B).
    """
    p = np.asarray(p, dtype=np.float64)
    edges = np.quantile(p, np.arange(1, n_bins) / n_bins)
    raw = np.searchsorted(edges, p, side="right")
    counts = np.bincount(raw, minlength=n_bins)
    lookup = np.cumsum(counts > 0) - 1  # non-empty bins renumbered in order
    return lookup[raw].astype(np.intp), int(np.count_nonzero(counts))


def adaptive_grid(n: int, d: int) -> tuple[int, ...]:
    """The bin counts of ``n_bins="adaptive"``: 2, 4, 8, ... below ``auto_n_bins(n, d)``, then it."""
    top = auto_n_bins(n, d)
    grid, b = [], 2
    while b < top:
        grid.append(b)
        b *= 2
    return tuple(grid + [top])


def check_partitions(partitions: str, mode: str) -> str:
    """``partitions=`` checked against the target: equal-mass bins need a 1-dim prediction.

    Equal-mass bins need quantiles of a 1-dim prediction; the binned vector
    of the top-k (k >= 2) and full targets lives in [0, 1]^k or the simplex,
    where no ordering defines quantiles, so only equal-width cells are used
    there and the other values are refused.  The value itself is checked by
    the table of options (``partitions``); this adds its interplay with the target.
    """
    partitions = check_option("partitions", partitions)
    if not Target(mode).one_dimensional and partitions != "equal-width":
        raise OptionError(f"partitions={partitions!r} needs a 1-dim prediction (binary or top-1 target); the "
                         f"{mode} target bins a vector in dimension >= 2, where quantiles do not define bins: "
                         f"use partitions='equal-width' (the default)")
    return partitions


def check_spiegelhalter(spiegelhalter: bool | None, mode: str) -> bool:
    """``spiegelhalter=`` resolved against the target: None is True for a 1-dim target, False otherwise.

    Spiegelhalter's z needs one probability per row (binary p, top-1
    confidence); an explicit True on a top-k (k >= 2) or full target is refused.
    The value itself is checked by the table of options (``spiegelhalter``).
    """
    spiegelhalter = check_option("spiegelhalter", spiegelhalter)
    one_dim = Target(mode).one_dimensional
    if spiegelhalter is None:
        return one_dim
    if spiegelhalter and not one_dim:
        raise OptionError(f"spiegelhalter=True needs a 1-dim prediction (binary or top-1 target); the {mode} "
                         "target has no single probability per row: use spiegelhalter=False or None")
    return bool(spiegelhalter)


def check_grid(n_bins) -> tuple[int, ...] | None:
    """The bin counts of ``calib_test(n_bins=)``, sorted and without repeats; None for ``"adaptive"``.

    A single value is the table's ``scales`` option (``"adaptive"`` or a bin
    count); each entry of a sequence is a bin count (:data:`~calibtest.options.BIN_COUNT`).
    What this adds to the table is the sequence: it may not be empty.
    """
    if np.ndim(n_bins) == 0:
        value = check_option("scales", n_bins, "n_bins")
        return None if value == "adaptive" else (value,)
    values = [BIN_COUNT.check(b, "n_bins") for b in np.asarray(n_bins, dtype=object).ravel()]
    if not values:
        raise OptionError("n_bins must list at least one bin count")
    return tuple(sorted(set(values)))


def _pvalue(observed: float, draws: np.ndarray) -> float:
    """(1 + #{draw >= observed}) / (R + 1), ties with scipy's relative tolerance (none for +-inf)."""
    tol = 100 * np.finfo(np.float64).eps * abs(observed) if math.isfinite(observed) else 0.0
    return float((1.0 + np.count_nonzero(draws >= observed - tol)) / (1.0 + draws.size))


# --------------------------------------------------------------------------- result
@dataclass(frozen=True, eq=False, repr=False, kw_only=True)
class TestOfCalibration(ResultDisplay):
    """Fields shared by the results of the tests of calibration (``tcal_test``, ``calib_test``).

    It sits here, below :mod:`calibtest.ece.result`, so that the tests and the
    evidence built from them need not import the interval's result module.
    Keyword-only, so a subclass lists its own fields first; unpacks as
    ``statistic, pvalue`` (the subclass defines both).

    Attributes
    ----------
    n, k, n_classes, mode : int, int, int or None, str
        The calibration target, as in :class:`CalibrationResult`.
    formula, y_name, prob_names, n_dropped, call_record
        Bookkeeping (``call`` renders the call as text).
    source : dict or None
        For a file or a Dask frame (streamed), the data source as in
        ``CalibrationResult.source``; None for rows in memory.
    """

    n: int
    k: int
    n_classes: int | None
    mode: str
    formula: str | None = None
    y_name: str = "y"
    prob_names: tuple = ()
    n_dropped: int = 0
    call_record: Call | None = field(default=None, repr=False)
    source: dict | None = field(default=None, repr=False)

    def __iter__(self):
        return iter((self.statistic, self.pvalue))


@dataclass(frozen=True, eq=False, repr=False)
class CalibrationTestResult(TestOfCalibration):
    """Multi-scale conditional Monte Carlo test of H0: the model is calibrated.

    Unpacks as ``statistic, pvalue``.

    Attributes
    ----------
    statistic : float
        max over the scales of z_B = T_B / sd(T_B | Z), and of ``|z_S|`` when
        Spiegelhalter's z is a component (``combine="max-z"``), or the
        smallest p-value of the components (``combine="bonferroni"``).
    pvalue : float
        Monte Carlo p-value of the combined test.
    reject : bool
        ``pvalue <= alpha``.
    alpha : float
    n_bins : tuple of int
        The grid of bin counts B.
    scales : pandas.DataFrame
        One row per scale: ``partition`` (``"equal-width"`` or
        ``"equal-mass"``), ``n_bins``, ``T`` (debiased ECE^2 estimate), ``sd``
        (sqrt Var(T | Z) under H0), ``z`` (T / sd; with sd = 0 its limit,
        +-inf or 0, see the module docstring), ``pvalue`` (per-scale Monte
        Carlo p-value, unadjusted).
    null : str
        ``"monte-carlo"`` (label draws over every row) or ``"gaussian"`` (the Gaussian null of the cell
        sums, :mod:`calibtest.core.gaussian_null`).
    combine : str
        ``"max-z"`` or ``"bonferroni"``.
    pvalue_max_z, pvalue_bonferroni : float
        The p-values of both combinations (from the same draws).
    n_draws : int
        R.
    seed : int or str
        Seed reproducing the draws (the default seed 0 when ``rng=None``);
        ``"Generator"`` when a Generator was passed.
    n, k, n_classes, mode, formula, y_name, prob_names, n_dropped, call_record
        As in :class:`~calibtest.TCalResult`.
    null_draws : ndarray, shape (L, R)
        z*_B of the draws (one column per draw, shared by the scales); the
        Spiegelhalter component's draws are in ``spiegelhalter_draws``.
    partitions : str
        The families of partitions tested: ``"equal-width"``,
        ``"equal-mass"`` or ``"both"``.
    spiegelhalter_z : float or None
        Spiegelhalter's z of the observed labels when it is a component of the
        test (``spiegelhalter=True``, binary and top-1 targets), else None.
    pvalue_spiegelhalter : float or None
        Its own two-sided Monte Carlo p-value from the same draws,
        ``(1 + #{|z*_S| >= |z_S|}) / (R + 1)``, unadjusted; None when not a component.
    spiegelhalter_draws : ndarray, shape (R,), or None
        z*_S of the draws (column r of ``null_draws`` and entry r here come
        from the same label vector): the combined statistic of draw r is
        max(null_draws[:, r].max(), abs(spiegelhalter_draws[r])).
    n_clusters : int or None
        With ``cluster=``: G, the number of clusters.  The test is then the
        clustered one (:func:`calib_test_clustered`): T is T_cl of each scale,
        ``sd`` sqrt(V_0), and the draws are sign flips of whole clusters
        (``n_draws`` sign patterns) instead of label draws.
    cluster_exact : bool
        With ``cluster=``: the draws are every sign pattern but the identity.
    """

    statistic: float
    pvalue: float
    reject: bool
    alpha: float
    n_bins: tuple
    scales: pd.DataFrame = field(repr=False)
    null: str
    combine: str
    pvalue_max_z: float
    pvalue_bonferroni: float
    n_draws: int
    seed: int | str | None
    null_draws: np.ndarray | None = field(default=None, repr=False)
    partitions: str = "equal-width"
    spiegelhalter_z: float | None = None
    pvalue_spiegelhalter: float | None = None
    spiegelhalter_draws: np.ndarray | None = field(default=None, repr=False)
    n_clusters: int | None = None
    cluster_exact: bool = False

    def _summary(self, alpha: float | None):
        return _build_summary(self, alpha)

    def _dict(self) -> dict:
        sc = self.scales
        return {"statistic": self.statistic, "pvalue": self.pvalue, "reject": self.reject, "alpha": self.alpha,
                "n_bins": list(self.n_bins), "partitions": self.partitions,
                "partition": sc["partition"].tolist(), "scale_n_bins": sc["n_bins"].tolist(), "T": sc["T"].tolist(), "sd": sc["sd"].tolist(),
                "z": sc["z"].tolist(), "scale_pvalues": sc["pvalue"].tolist(), "null": self.null,
                "combine": self.combine, "pvalue_max_z": self.pvalue_max_z,
                "pvalue_bonferroni": self.pvalue_bonferroni, "n_draws": self.n_draws, "n": self.n, "k": self.k,
                "n_classes": self.n_classes, "mode": self.mode, "formula": self.formula, "y_name": self.y_name,
                "prob_names": list(self.prob_names), "n_dropped": self.n_dropped,
                "seed": None if self.seed is None else str(self.seed), "method": "calib_test",
                "spiegelhalter_z": self.spiegelhalter_z, "pvalue_spiegelhalter": self.pvalue_spiegelhalter,
                **({} if self.n_clusters is None else {"n_clusters": self.n_clusters,
                                                       "cluster_exact": self.cluster_exact})}

    def _repr_parts(self) -> list[str]:
        grid = f"B in {list(self.n_bins)}" if len(self.n_bins) > 1 else f"B={self.n_bins[0]}"
        name = "max z" if self.combine == "max-z" else "min p"
        grid += " + Spiegelhalter" if self.spiegelhalter_z is not None else ""
        return [f"mode={self.mode} n={self.n} {grid} {self.partitions} {self.combine}: {name}={self.statistic:.4g}",
                f"p={self.pvalue:.4g}", f"reject={self.reject}"]


def smallest_pvalue_text(pvalue: float, n_draws: int, draws: str = "label draws") -> str:
    """"the smallest p-value R label draws can give" when ``pvalue`` is 1 / (R + 1) (no draw reached the
    observed statistic), else ""; ``draws`` names them ("sign patterns" for clustered rows)."""
    return f"the smallest p-value {n_draws} {draws} can give" if pvalue * (n_draws + 1) < 1.5 else ""


def _combination_text(res: CalibrationTestResult) -> str:
    if res.combine == "max-z":
        z = "T_cl / sqrt(V_0)" if res.n_clusters is not None else "T / sd(T | Z)"
        return f"max of z = {z}" + (" and |Spiegelhalter z|" if res.spiegelhalter_z is not None else "")
    return "Bonferroni over the scales" + (" and Spiegelhalter z" if res.spiegelhalter_z is not None else "")


def _build_summary(res: CalibrationTestResult, alpha: float | None = None):
    alpha = res.alpha if alpha is None else alpha
    reject = res.pvalue <= alpha
    smry = CalibSummary()
    clustered = res.n_clusters is not None
    gaussian = res.null == "gaussian"
    smry.add_title("Multi-scale test of calibration (cluster sign-flip)" if clustered else
                   "Multi-scale test of calibration (Gaussian null)" if gaussian else
                   "Multi-scale test of calibration (conditional Monte Carlo)")
    smry.add_settings({"Model:": model_text(res.formula, res.y_name, res.prob_names),
                       "Mode:": Target(res.mode).text(res.k),
                       "Classes (K):": "2" if res.n_classes is None else str(res.n_classes),
                       "No. observations:": str(res.n),
                       **({"Clusters (G):": str(res.n_clusters),
                           "Sign patterns (R):": str(res.n_draws) + (" (every one)" if res.cluster_exact else "")}
                          if clustered else {"Null draws (R):" if gaussian else "Label draws (R):": str(res.n_draws)}),
                       **({"Null:": "gaussian (cell sums)"} if gaussian else {}),
                       "Partitions:": res.partitions,
                       "Combination:": _combination_text(res),
                       "Statistic:": fmt(res.statistic, 4), "P-value:": fmt(res.pvalue, 4),
                       "Alpha:": fmt(alpha),
                       "Seed:": "Generator" if res.seed == "Generator" else fmt(res.seed)})
    sc = res.scales
    table = pd.DataFrame({"T": sc["T"].tolist(), "sd(T | Z)": sc["sd"].tolist(), "z": sc["z"].tolist(),
                          "p-value": sc["pvalue"].tolist()},
                         index=[(f"{part} B = {b}" if res.partitions == "both" else f"B = {b}")
                                for part, b in zip(sc["partition"], sc["n_bins"])], dtype=object)
    if res.spiegelhalter_z is not None:  # a component next to the scales (not a scale: no T, no sd)
        table = pd.concat([table, pd.DataFrame({"T": [None], "sd(T | Z)": [None], "z": [res.spiegelhalter_z],
                                                "p-value": [res.pvalue_spiegelhalter]},
                                               index=["Spiegelhalter z_S"], dtype=object)])
    if clustered:  # the null sd of T_cl is sqrt(V_0), not a conditional sd given the predictions
        table = table.rename(columns={"sd(T | Z)": "sqrt(V_0)"})
    smry.add_table(table, {"T": 5, "sd(T | Z)": 4, "sqrt(V_0)": 4, "z": 4, "p-value": 4})
    draws = "sign patterns" if clustered else ("null draws" if gaussian else "label draws")
    vectors = ("R sign patterns of whole clusters (a randomization test over clusters)" if clustered else
               "R label vectors drawn from the predictions")
    exact = "" if clustered else ": exact size given the predictions"
    if gaussian:
        vectors = ("R draws of the label sums of the cells of the scales' common refinement, normal with their "
                   "exact conditional moments where a cell holds sum p(1 - p) >= 30, from Bernoulli(p) labels "
                   "elsewhere")
        exact = (": size within Monte Carlo error of the exact null where measured "
                 "(vignettes/multiscale_gaussian_null.md); null='monte-carlo' draws every row's label")
    verdict = "rejects" if reject else "does not reject"
    floor = smallest_pvalue_text(res.pvalue, res.n_draws,
                                 draws)
    floor = f"; {floor}: no draw reached the observed statistic" if floor else ""
    notes = [f"The test {verdict} H0: calibrated at level {alpha:g} (p-value {fmt(res.pvalue, 4)}{floor})."
             + ("" if reject else " This is not evidence that the model is calibrated.")]
    sp = res.spiegelhalter_z is not None
    if sp:
        z_s = ("z = sum_g A_g / sqrt(sum_g A_g^2) over the cluster sums A_g of (y - p)(1 - 2p)" if clustered else
               "z = sum (y - p)(1 - 2p) / sqrt(sum (1 - 2p)^2 p (1 - p)) (mean 0, sd 1 given the predictions)")
        notes.append("The statistic is the max over both the binned scales' z_B and |z_S|, Spiegelhalter's "
                     f"{z_s}, calibrated by the same {draws}; spiegelhalter=False tests the scales alone.")
    if len(res.n_bins) > 1 or sp:
        other = res.pvalue_bonferroni if res.combine == "max-z" else res.pvalue_max_z
        over = "max(max_B z_B, |z_S|)" if sp else "max_B z_B"
        notes.append(f"p-value = (1 + #{{{over.replace('z_', 'z*_')} >= {over}}}) / (R + 1) over {vectors}, "
                     f"each scored at every component{exact}."
                     if res.combine == "max-z" else
                     "p-value = min(1, L min p) over the L Monte Carlo p-values of the components.")
        notes.append(f"{'Bonferroni' if res.combine == 'max-z' else 'Max-z'} p-value from the same draws: "
                     f"{fmt(other, 4)}. The p-values of the components are unadjusted.")
    else:
        notes.append(f"p-value = (1 + #{{T* >= T}}) / (R + 1) over {vectors}{exact}.")
    both = res.partitions == "both"
    flat = [f"{fam} B = {b}" if both else f"B = {b}"
            for fam, b, sd in zip(res.scales["partition"], res.scales["n_bins"], res.scales["sd"]) if sd == 0]
    if flat:
        notes.append(f"sd(T | Z) = 0 at {', '.join(flat)}: no bin there holds two rows with random labels "
                     "(the other predictions are exactly 0 or 1), so every label draw gives T* = 0 and z* = 0, "
                     "and z is the limit of T / sd: +inf when labels contradict such predictions and make T > 0, "
                     "-inf when they make T < 0, 0 when T = 0.")
    if sp and res.spiegelhalter_z is not None and math.isinf(res.spiegelhalter_z):
        notes.append("Spiegelhalter's denominator is 0 (every p in {0, 1/2, 1}) and some label contradicts its "
                     "prediction (y = 1 at p = 0 or y = 0 at p = 1): z_S = +inf; every draw has z*_S = 0.")
    if clustered:
        notes.append(f"Clustered rows ({res.n_clusters} clusters, taken as independent): T is T_cl, the debiased "
                     "estimate over pairs of rows of different clusters, sd = sqrt(V_0) its between-cluster null "
                     "standard deviation, and the draws flip the signs of whole clusters' errors (a wild cluster "
                     "bootstrap) instead of drawing labels"
                     + (", every sign pattern but the identity (an exact randomization test)" if res.cluster_exact
                        else "") + " (docs/clusters.md).")
    if res.n_dropped:
        notes.append(f"{res.n_dropped} rows with missing values were dropped (missing='drop').")
    notes.append("T: debiased binned ECE^2 estimate (Sun, Chaudhari, Barnett & Dobriban, arXiv:2408.08998).")
    smry.add_notes(notes)
    return smry


# --------------------------------------------------------------------------- public function
@dataclass(frozen=True)
class MultiScaleOptions:
    """The options of the multi-scale test that travel together (validated by :func:`calibtest.calib_test`).

    Attributes
    ----------
    grid : tuple of int, optional
        The bin counts; None: :func:`adaptive_grid` (``n_bins="adaptive"``).
    alpha : float
    n_draws : int
        Label draws R.
    combine : {"max-z", "bonferroni"}
    partitions : {"equal-width", "equal-mass", "both"}
    spiegelhalter : bool, optional
        Spiegelhalter's z as a component: None is True for binary and top-1
        targets, False otherwise; True on another target raises ValueError.
    """

    grid: tuple | None = None
    alpha: float = 0.05
    n_draws: int = DEFAULT_DRAWS
    combine: str = "max-z"
    partitions: str = "equal-width"
    spiegelhalter: bool | None = None
    null: str = "auto"

    def for_target(self, target: PreparedData) -> "MultiScaleOptions":
        """These options resolved for ``target``: the partitions and Spiegelhalter's z checked, the grid chosen."""
        grid = self.grid if self.grid is not None else adaptive_grid(target.n,
                                                                     binned_dimension(target.mode, target.k))
        return MultiScaleOptions(grid=grid, alpha=self.alpha, n_draws=self.n_draws, combine=self.combine,
                                 partitions=check_partitions(self.partitions, target.mode),
                                 spiegelhalter=check_spiegelhalter(self.spiegelhalter, target.mode),
                                 null=check_test_null(self.null, target.mode))

    def scales(self, target: PreparedData) -> tuple[list, list]:
        """(labels, bins) of the scales of resolved options: (family, B) and each scale's (inverse, m)."""
        grid = self.grid
        assert grid is not None, "the options are resolved for a target (for_target) first"
        families = [fam for fam in ("equal-width", "equal-mass") if self.partitions in (fam, "both")]
        labels = [(fam, b) for fam in families for b in grid]
        check_memory(8.0 * len(labels) * self.n_draws, f"n_draws={self.n_draws} at {len(labels)} scale(s)",
                     "lower n_draws")
        bins = []  # (inverse, m) per scale: a loop over the few scales
        if "equal-width" in families:
            bins += [(p.inverse, p.m) for p in (partition_rows(target, b) for b in grid)]
        if "equal-mass" in families:
            bins += [equal_mass_bins(target.z[:, 0], b) for b in grid]
        return labels, bins


@dataclass(frozen=True)
class ScaleDraws:
    """T and its null draws at every scale, the input of :func:`assemble_result`.

    ``statistic`` (L,) and ``null_draws`` (L, R) are T and T*; ``sd`` (L,) sqrt Var(T | Z); ``sign_of(i)``
    the sign of T on a scale with sd = 0 (+1, -1 or 0); ``spiegelhalter_z`` and ``spiegelhalter_draws`` z_S
    and z*_S, or None when z_S is not a component; ``n_draws`` R and the ``seed`` recorded.
    """

    labels: list
    statistic: np.ndarray
    null_draws: np.ndarray
    sd: np.ndarray
    sign_of: Callable[[int], int]
    spiegelhalter_z: float | None
    spiegelhalter_draws: np.ndarray | None
    n_draws: int
    seed: int | str | None
    null: str = "monte-carlo"


def check_test_null(null: str, mode: str) -> str:
    """``null=`` of the multi-scale test: "auto", "monte-carlo" or "gaussian" (binary and top-1 targets only)."""
    null = check_option("test_null", null, "null")
    if null == "gaussian" and not Target(mode).one_dimensional:
        raise OptionError(f"null='gaussian' needs a 1-dim prediction (binary or top-1 target); the {mode} target "
                          "has no 1-dim label sums: use null='monte-carlo' or 'auto'")
    return null


def _gaussian_scales(target: PreparedData, options: "MultiScaleOptions", labels, bins, rng, seed):
    """The ScaleDraws of the Gaussian null, or None when ``null="auto"`` keeps the Monte Carlo null."""
    if options.null == "monte-carlo" or not target.mode.one_dimensional:
        return None
    sums = CellSums([m for _, m in bins]).add(0, target.z[:, 0], [inv for inv, _ in bins],
                                              label_classes(target) == 0)
    if options.null == "auto" and choose_null(target.n, sums.thin_rows) != "gaussian":
        return None
    key = counter_key(seed if is_integer(seed) else rng)[0]
    with progress_bar(options.n_draws, "Gaussian null (thin cells)", unit="draw",
                      work=float(sums.thin_rows) * options.n_draws, min_work=gaussian_null.PROGRESS_MIN_DRAWS) as bar:
        g = gaussian_draws(sums, key, options.n_draws, bar)
    observed = label_classes(target)

    def sign_of(i: int) -> int:
        return point_mass_sign(target.z, bins[i][0], observed, n=target.n, complete=False)

    sp = options.spiegelhalter
    return ScaleDraws(labels, g.statistic, g.null_draws, g.sd, sign_of, g.spiegelhalter if sp else None,
                      g.spiegelhalter_draws if sp else None, options.n_draws, seed, null="gaussian")


def calib_test_rows(target: PreparedData, options: MultiScaleOptions = MultiScaleOptions(), *, rng=None, seed=None,
                    **bookkeeping) -> CalibrationTestResult:
    """The multi-scale test on prepared rows: the engine of :func:`calib_test`, one result built once.

    Parameters
    ----------
    target : PreparedData
        Z and U of every row (:func:`calibtest.core.targets.prepare_target`).
    options : MultiScaleOptions
        The grid, alpha, n_draws, combine, partitions and Spiegelhalter's z, as in :func:`calib_test`.
    rng : None, int or numpy.random.Generator
        Seed of the label draws; an int s gives the draws of ``calib_test(..., rng=s)``.
    seed : int or str, optional
        The seed to record when ``rng`` is a Generator already resolved from it.
    **bookkeeping
        ``formula``, ``y_name``, ``prob_names``, ``n_dropped``, ``call_record``.

    Returns
    -------
    CalibrationTestResult
    """
    if seed is None:
        rng, seed = resolve_seed(rng)
    options = options.for_target(target)
    labels, bins = options.scales(target)
    gaussian = _gaussian_scales(target, options, labels, bins, rng, seed)
    if gaussian is not None:
        return assemble_result(gaussian, options, n=target.n, k=target.k, n_classes=target.n_classes,
                               mode=target.mode, **bookkeeping)
    sd = np.array([math.sqrt(conditional_moments(conditional_bin_sums(target.z, inv, m), target.n).variance)
                   for inv, m in bins])
    observed = label_classes(target)
    spiegelhalter = bool(options.spiegelhalter)  # resolved for the target by for_target
    draws = monte_carlo_draws(target.z, [inv for inv, _ in bins], observed, n=target.n,
                              n_draws=options.n_draws, rng=seed if is_integer(seed) else rng,
                              complete=target.mode.full_calibration, spiegelhalter=spiegelhalter)

    def sign_of(i: int) -> int:  # the point-mass scales (rare): z is the limit of (T - 0) / sd
        return point_mass_sign(target.z, bins[i][0], observed, n=target.n, complete=target.mode.full_calibration)

    scales = ScaleDraws(labels, draws.statistic, draws.null_draws, sd, sign_of,
                        draws.spiegelhalter if spiegelhalter else None,
                        draws.spiegelhalter_draws if spiegelhalter else None, options.n_draws, seed)
    return assemble_result(scales, options, n=target.n, k=target.k, n_classes=target.n_classes, mode=target.mode,
                           **bookkeeping)


def calib_test_clustered(target: PreparedData, codes: np.ndarray, n_clusters: int,
                         options: MultiScaleOptions = MultiScaleOptions(), *, rng=None, seed=None,
                         **bookkeeping) -> CalibrationTestResult:
    """The multi-scale test for rows in independent clusters (``calib_test(..., cluster=)``).

    Each scale's statistic is T_cl (pairs of rows of different clusters) and
    its sd sqrt(V_0) (:func:`calibtest.core.clustered.clustered_statistics`);
    the joint null of the scales comes from sign flips of whole clusters, the
    same patterns at every scale (:func:`calibtest.core.clustered.flip_draws`),
    so the max-z combination keeps its size with correlated rows.
    Spiegelhalter's z becomes sum_g A_g / sqrt(sum_g A_g^2) with A_g the
    cluster sums of (y - p)(1 - 2p), flipped with the same signs.

    Parameters
    ----------
    target : PreparedData
    codes : ndarray of int, shape (n,)
        Cluster of each row, 0..G-1.
    n_clusters : int
        G.
    options, rng, seed, **bookkeeping
        As in :func:`calib_test_rows`.
    """
    if seed is None:
        rng, seed = resolve_seed(rng)
    elif is_integer(seed):
        rng = np.random.default_rng(seed)
    options = options.for_target(target)
    labels, bins = options.scales(target)
    cells = [cluster_cells(inv, target.u, codes, m, n_clusters) for inv, m in bins]
    stats = [clustered_statistics(c, target.n) for c in cells]
    flips = [flipped_statistic(c, st.bin_weight) for c, st in zip(cells, stats)]
    sp_obs = None
    spiegelhalter = options.spiegelhalter
    if spiegelhalter:
        p = target.z[:, 0]
        A = np.bincount(codes, weights=target.u[:, 0] * (1.0 - 2.0 * p), minlength=n_clusters)
        scale = math.sqrt(float(np.sum(A * A)))
        sp_obs = float(A.sum() / scale) if scale > 0 else 0.0
        flips.append(lambda eps: (A @ eps) / scale if scale > 0 else np.zeros(eps.shape[1]))
    draws, exact = flip_draws(n_clusters, options.n_draws, rng, flips)
    statistic = np.array([st.estimate for st in stats])
    sd = np.sqrt([st.null_variance for st in stats])
    scales = ScaleDraws(labels, statistic, draws[:len(stats)], sd, lambda i: int(np.sign(statistic[i])), sp_obs,
                        draws[-1] if spiegelhalter else None, int(draws.shape[1]), None if exact else seed)
    return assemble_result(scales, options, n=target.n, k=target.k, n_classes=target.n_classes, mode=target.mode,
                           n_clusters=int(n_clusters), cluster_exact=bool(exact), **bookkeeping)


def assemble_result(scales: ScaleDraws, options: MultiScaleOptions, *, n, k, n_classes, mode,
                    **bookkeeping) -> CalibrationTestResult:
    """The result of the multi-scale test from T and T* of every scale (rows in memory or a stream).

    ``scales`` holds T, T*, sd and Spiegelhalter's z (:class:`ScaleDraws`); ``options`` the resolved grid,
    alpha, combination and partitions.
    """
    labels, statistic, null_draws, sd, sign_of = (scales.labels, scales.statistic, scales.null_draws, scales.sd,
                                                   scales.sign_of)
    spiegelhalter_z, spiegelhalter_draws = scales.spiegelhalter_z, scales.spiegelhalter_draws
    alpha, combine, partitions, grid = options.alpha, options.combine, options.partitions, options.grid
    assert grid is not None, "the options are resolved for a target (for_target) first"
    R, L, seed, null = scales.n_draws, len(labels), scales.seed, scales.null
    pos = sd > 0
    with np.errstate(divide="ignore", invalid="ignore"):  # sd = 0: T* = 0 for every label draw, z* := 0
        z_obs = np.where(pos, statistic / np.where(pos, sd, 1.0), 0.0)
        z_null = np.where(pos[:, None], null_draws / np.where(pos, sd, 1.0)[:, None], 0.0)
    for i in np.flatnonzero(~pos):  # the point-mass scales (rare): z is the limit of (T - 0) / sd
        sign = sign_of(int(i))
        z_obs[i] = sign * math.inf if sign else 0.0
    p_scale = np.array([_pvalue(z_obs[i], z_null[i]) for i in range(L)])
    m_obs, m_null, p_all = float(z_obs.max()), z_null.max(axis=0), p_scale
    sp_z = p_sp = sp_null = None
    if spiegelhalter_z is not None:  # |z_S| joins the max, on the same draws
        assert spiegelhalter_draws is not None, "Spiegelhalter's z comes with its draws"
        sp_z, sp_null = float(spiegelhalter_z), spiegelhalter_draws
        p_sp = _pvalue(abs(sp_z), np.abs(sp_null))
        m_obs, m_null = max(m_obs, abs(sp_z)), np.maximum(m_null, np.abs(sp_null))
        p_all = np.append(p_scale, p_sp)
    p_max = _pvalue(m_obs, m_null)
    p_bonf = float(min(1.0, p_all.size * p_all.min()))
    if p_all.size == 1:
        p_bonf = p_max = float(p_scale[0])
    statistic_, pvalue = (m_obs, p_max) if combine == "max-z" else (float(p_all.min()), p_bonf)
    scales = pd.DataFrame({"partition": [fam for fam, _ in labels], "n_bins": [b for _, b in labels],
                           "T": statistic, "sd": sd, "z": z_obs, "pvalue": p_scale})
    return CalibrationTestResult(
        statistic=statistic_, pvalue=float(pvalue), reject=bool(pvalue <= alpha), alpha=alpha, n_bins=tuple(grid),
        scales=scales, null=null, combine=combine, pvalue_max_z=float(p_max), pvalue_bonferroni=p_bonf,
        n_draws=R, seed=seed, n=n, k=k, n_classes=n_classes, mode=mode,
        null_draws=z_null, partitions=partitions, spiegelhalter_z=sp_z, pvalue_spiegelhalter=p_sp,
        spiegelhalter_draws=sp_null, **bookkeeping)
