"""Two-model (and pairwise) comparison of calibration errors: ``calib_compare``.

Estimand: Delta = ECE_A^2 - ECE_B^2, estimated by T_A - T_B (the paper's
debiased estimator for each model on its own bins).  The z test and normal
interval use the variance of ``calibtest.core.difference_variance`` (first-order
influence part plus second-order degenerate part; derivation in
``docs/compare.md``), which accounts for the correlation of the two estimates
when both models are scored on the same rows.

Paired or not
-------------
Paired means *the same rows in the same order*.  ``paired=None`` decides:

* formula form (``calib_compare("y ~ p_a", "y ~ p_b", data=df)``): both
  models are evaluated on the rows of ``data``, so the comparison is paired;
* results with different ``n``: unpaired;
* binary results with equal ``n``: paired when the outcome vectors
  y = U + Z are identical row by row, unpaired otherwise;
* top-1 / top-k results with equal ``n``: the results hold only each model's
  own indicators (``correct`` of the top-1 class, or of the top-k classes),
  which differ between models on the same rows, so the rows cannot be
  recognised: a ``ValueError`` asks for ``paired=True`` or ``paired=False``
  (or use the formula form).

``paired=True`` with different ``n`` raises a ``ValueError``; ``paired=True``
with equal ``n`` is trusted (the outcomes may legitimately differ, e.g. top-1
``correct`` of two models on the same images).

Results streamed from files (``calib_ci(..., data=path)``, holding no rows
but ``res.stream``) are compared by reading their files again
(:func:`calibtest.streams.paired.streamed_difference`): two results of the
same file as above, in one pass with both formulas; results of different files
(or one in memory) as independent sets, ``paired=None`` with equal ``n``
asking for ``paired=False``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import special as _special

from calibtest.inputs.front_door import bound_options
from calibtest.checks.evidence_table import kind_flag
from calibtest.display.format import fmt, fmt_p, model_name, p_equals
from calibtest.inputs.validation import check_alpha, check_missing
from calibtest.core.censoring import censoring_km, ipcw_outcome, km_influence
from calibtest.core.clustered import cluster_cells, clustered_difference_variance, clustered_statistics
from calibtest.core.difference_variance import DifferenceVariance, difference_variance
from calibtest.core.targets import Target
from calibtest.ece.build_result import estimate_in_memory
from calibtest.inputs.design import Design
from calibtest.inputs.settings import Inputs, Settings
from calibtest.inputs.formula import resolve_env
from calibtest.inputs.rows import joint_missing
from calibtest.inputs.design import source_of
from calibtest.streams.paired import compare_file, is_streamed, streamed_difference
from calibtest.options import OPTIONS, OptionError, check_option
from calibtest.ece.result import CalibrationResult, ConfidenceInterval
from calibtest.ece.survival import ipcw_influence, survival_calib_ci
from calibtest.display.summary import CalibSummary, ResultDisplay, short_name

__all__ = ["calib_compare", "ComparisonResult", "PairwiseComparisonResult", "ALTERNATIVES", "z_pvalue",
           "z_interval"]

#: Alternatives of the test of H0: Delta = 0 (scipy naming).
ALTERNATIVES = OPTIONS["alternative"].choices


def z_pvalue(statistic, alternative: str):
    """p-value of a standard normal statistic: two-sided 2 Phi(-|z|), 'greater' 1 - Phi(z), 'less' Phi(z)."""
    statistic = np.asarray(statistic, dtype=float)
    if alternative == "two-sided":
        p = np.minimum(2.0 * _special.ndtr(-np.abs(statistic)), 1.0)
    elif alternative == "greater":
        p = _special.ndtr(-statistic)
    else:
        p = _special.ndtr(statistic)
    return float(p) if p.ndim == 0 else p


def z_interval(estimate, se, alpha: float, alternative: str):
    """Normal interval matching ``alternative`` (scipy convention: one-sided ends are infinite)."""
    if alternative == "two-sided":
        q = -_special.ndtri(alpha / 2.0)
        return estimate - q * se, estimate + q * se
    q = -_special.ndtri(alpha)
    if alternative == "greater":
        return estimate - q * se, np.inf * np.ones_like(estimate)
    return -np.inf * np.ones_like(estimate), estimate + q * se


@dataclass(frozen=True, eq=False, repr=False)
class ComparisonResult(ResultDisplay):
    """Test and interval for Delta = ECE_A^2 - ECE_B^2.

    Attributes
    ----------
    estimate : float
        T_A - T_B, the difference of the debiased estimators.
    estimate_a, estimate_b : float
        T_A and T_B.
    se : float
        Standard error of T_A - T_B: sqrt(se_first_order^2 + se_second_order^2).
    se_first_order : float
        First-order (influence-value) part; with ``variance="corrected"`` after
        subtracting the estimated plug-in bias (floored at 0).
    se_second_order : float
        Second-order (degenerate U-statistic) part.
    se_first_order_plugin : float
        The uncorrected plug-in first-order part, Var_n(psi^A - psi^B)/n
        (paired) or sigma1_A^2/n_A + sigma1_B^2/n_B (unpaired), square-rooted.
    statistic : float
        z = estimate / se.
    pvalue : float
        p-value of H0: Delta = 0 against ``alternative``.
    alternative : {"two-sided", "less", "greater"}
        "greater": H1 Delta > 0 (model A is worse calibrated).
    alpha : float
        Significance level of ``ci_lower``/``ci_upper``.
    ci_lower, ci_upper : float
        Normal interval for Delta at level 1 - alpha matching ``alternative``.
    paired : bool
        Whether the two estimates were treated as computed on the same rows.
    pairing : str
        Why (``"formula"``, ``"caller"``, ``"identical outcomes"``, ``"different n"``,
        ``"outcomes differ"``).
    variance : {"corrected", "plugin"}
        Which first-order variance was used.
    name_a, name_b : str
        Model names (right-hand sides of the formulas, or given).
    n_a, n_b : int
        Rows of each evaluation.
    n_bins_a, n_bins_b : int
        Bins per dimension of each model.
    mode, k, n_classes : str, int, int or None
        Calibration target.
    result_a, result_b : CalibrationResult
        The one-model results.
    """

    estimate: float
    estimate_a: float
    estimate_b: float
    se: float
    se_first_order: float
    se_second_order: float
    se_first_order_plugin: float
    statistic: float
    pvalue: float
    alternative: str
    alpha: float
    ci_lower: float
    ci_upper: float
    paired: bool
    pairing: str
    variance: str
    name_a: str
    name_b: str
    n_a: int
    n_b: int
    n_bins_a: int
    n_bins_b: int
    mode: str
    k: int
    n_classes: int | None
    result_a: CalibrationResult | None = field(default=None, repr=False)
    result_b: CalibrationResult | None = field(default=None, repr=False)

    def __iter__(self):
        """``statistic, pvalue = res`` (statsmodels/scipy test-result idiom)."""
        return iter((self.statistic, self.pvalue))

    def conf_int(self, alpha: float | None = None) -> ConfidenceInterval:
        """Normal confidence interval for Delta = ECE_A^2 - ECE_B^2.

        Two-sided: estimate -/+ z_{1 - alpha/2} se.  With ``alternative="greater"``
        the interval is [estimate - z_{1 - alpha} se, inf), with ``"less"``
        (-inf, estimate + z_{1 - alpha} se] (scipy's convention).
        """
        alpha = self.alpha if alpha is None else check_alpha(alpha)
        lower, upper = z_interval(self.estimate, self.se, alpha, self.alternative)
        lower, upper = float(lower), float(upper)
        return ConfidenceInterval(lower, upper, False, bool(lower <= 0.0 <= upper), 1.0 - alpha, "squared")

    def notes(self) -> list[str]:
        """Plain-text notes for the summary footer."""
        notes = []
        if self.paired:
            notes.append(f"Paired comparison ({self.pairing}): both models scored on the same {self.n_a} rows; "
                         "the variance accounts for the correlation of the two estimates.")
        else:
            notes.append(f"Unpaired comparison ({self.pairing}): independent evaluation sets, "
                         "Var = Var(T_A) + Var(T_B).")
        if kind_flag(self.result_a, "clustered"):
            notes.append(f"Clustered rows ({self.result_a.clustering.n_clusters} clusters in A"
                         + ("" if not kind_flag(self.result_b, "clustered") else
                            f", {self.result_b.clustering.n_clusters} in B")
                         + "): each estimate is T_cl (pairs of rows of different clusters); the first order is the "
                         "cluster-robust variance of the cluster sums of the influence values (G / (G - 1)), the "
                         "second order the between-cluster quadratic part (docs/clusters.md).")
        elif self.variance == "corrected":
            notes.append("Standard error = sqrt(first order + second order); the first-order (influence) "
                         "variance has its plug-in bias from the estimated bin means removed "
                         "(docs/compare.md).")
        else:
            notes.append("Standard error = sqrt(plug-in first order + second order) (variance='plugin', "
                         "conservative near calibration).")
        if self.se == 0:
            notes.append("The standard error is 0 (identical or degenerate estimates); the test is undefined.")
        sv = self.result_a.survival if self.result_a is not None else None
        if sv is not None:
            censored = max(sv.n_censored, self.result_b.survival.n_censored)
            notes.append(f"Survival outcome at horizon t = {sv.horizon:g}: ECE^2(t) of each model's risk by t. "
                         + ("Rows censored before t enter by inverse probability of censoring weights; the "
                            "first-order variance is that of the difference of the IPCW influence values, "
                            "including the (shared, when paired) influence of the Kaplan-Meier censoring "
                            "distribution (docs/survival.md)." if censored else
                            "Nothing is censored before t, so the comparison is that of the binary outcome "
                            "1{T <= t}."))
        notes.append("Delta compares ECE^2 on each model's own bins; a negative estimate favours model A.")
        return notes

    def conclusion(self, alpha: float | None = None, labels: tuple[str, str] | None = None) -> str:
        """The comparison in one sentence: which model is better calibrated, or no evidence of a difference.

        Decided by the interval for Delta = ECE_A^2 - ECE_B^2 at level
        ``1 - alpha`` (it excludes 0 exactly when the test rejects), in the
        direction of ``alternative``; Delta > 0 means model A is worse
        calibrated.  ``labels`` (default: the models' names) name A and B.
        The report's Summary of findings shows it.
        """
        alpha = self.alpha if alpha is None else check_alpha(alpha)
        ci = self.conf_int(alpha)
        level = f"{100 * (1 - alpha):g}%"
        ends = (f"[{fmt(ci.lower, 4)}, {fmt(ci.upper, 4)}]" if self.alternative == "two-sided" else
                f"[{fmt(ci.lower, 4)}, ∞)" if self.alternative == "greater" else f"(−∞, {fmt(ci.upper, 4)}]")
        a, b = (short_name(self.name_a), short_name(self.name_b)) if labels is None else labels
        facts = (f"Δ = ECE²({a}) − ECE²({b}) = {fmt(self.estimate, 4)}, {level} CI {ends}, "
                 f"{p_equals(self.pvalue, 3)}")
        if not ci.contains_zero:
            worse, better = (a, b) if self.estimate > 0 else (b, a)
            return (f"At level {alpha:g}, {worse} is worse calibrated than {better} ({facts}; the interval "
                    "excludes 0).")
        claim = {"two-sided": f"{a} and {b} differ in calibration",
                 "greater": f"{a} is worse calibrated than {b}",
                 "less": f"{a} is better calibrated than {b}"}[self.alternative]
        return (f"No evidence at level {alpha:g} that {claim} ({facts}; the interval includes 0); this does "
                "not show that they are equally calibrated.")

    def summary(self, alpha: float | None = None) -> CalibSummary:
        """A statsmodels-style summary (``print`` it; ``.as_html()``, ``.as_latex()``).

        ``alpha`` (default: the stored one) sets the level of the interval shown.
        """
        return ResultDisplay.summary(self, alpha)

    def _summary(self, alpha: float | None) -> CalibSummary:
        alpha = self.alpha if alpha is None else alpha
        ci = self.conf_int(alpha)
        smry = CalibSummary()
        smry.add_title("Comparison of calibration errors: Delta = ECE_A^2 - ECE_B^2")
        settings = {
            "Model A:": self.name_a, "Model B:": self.name_b,
            "Mode:": str(self.mode) + (f" (k = {self.k})" if Target(self.mode).topk else ""),
            "Classes (K):": "2" if self.n_classes is None else str(self.n_classes),
            "No. obs. A:": str(self.n_a), "No. obs. B:": str(self.n_b),
            "Bins A / B:": f"{self.n_bins_a} / {self.n_bins_b}",
            "Paired:": f"{fmt(self.paired)} ({self.pairing})",
            "Alternative:": self.alternative, "Variance:": self.variance,
            "Alpha:": fmt(alpha),
        }
        smry.add_settings(settings)
        table = pd.DataFrame(
            {"estimate": [self.estimate_a, self.estimate_b, self.estimate],
             "std err": [_one_se(self.result_a), _one_se(self.result_b), self.se],
             "z": [None, None, self.statistic], "p-value": [None, None, self.pvalue],
             "ci lower": [None, None, ci.lower], "ci upper": [None, None, ci.upper]},
            index=["ECE_A^2 (model A)", "ECE_B^2 (model B)", "Delta = A - B"], dtype=object)
        smry.add_table(table, {"estimate": 6, "std err": 6, "z": 4, "p-value": fmt_p, "ci lower": 6,
                               "ci upper": 6})
        parts = pd.DataFrame(
            {"std err": [self.se_first_order, self.se_second_order, self.se_first_order_plugin]},
            index=["first order (influence)", "second order (degenerate)", "first order, plug-in"], dtype=object)
        smry.add_table(parts, {"std err": 6})
        side = {"two-sided": "two-sided", "greater": "one-sided (H1: Delta > 0)",
                "less": "one-sided (H1: Delta < 0)"}[self.alternative]
        one = ("cluster-robust sqrt(V_1 + V_0) of calib_ci(cluster=)"
               if kind_flag(self.result_a, "clustered") else "sigma1 / sqrt(n) of calib_ci")
        level = (f"{100 * (1 - alpha):g}% {side} normal interval for Delta: {ci}. The std err of "
                 f"ECE_A^2 and ECE_B^2 are the one-model {one}.")
        smry.add_notes([level] + self.notes())
        return smry

    def _dict(self) -> dict:
        out = {f: getattr(self, f) for f in (
            "estimate", "estimate_a", "estimate_b", "se", "se_first_order", "se_second_order",
            "se_first_order_plugin", "statistic", "pvalue", "alternative", "alpha", "ci_lower",
            "ci_upper", "paired", "pairing", "variance", "name_a", "name_b", "n_a", "n_b",
            "n_bins_a", "n_bins_b", "mode", "k", "n_classes")}
        out["notes"] = self.notes()
        return out

    def _repr_parts(self) -> list[str]:
        return [f"{short_name(self.name_a)} vs {short_name(self.name_b)} "
                f"({'paired' if self.paired else 'unpaired'}, mode={self.mode}): Delta={self.estimate:.6g}",
                f"se={self.se:.4g}", f"z={self.statistic:.4g}", p_equals(self.pvalue).replace(" ", "")]


def _one_se(res):
    return None if res is None else res.se


@dataclass(frozen=True, eq=False, repr=False)
class PairwiseComparisonResult(ResultDisplay):
    """All pairwise comparisons of several models with Holm-adjusted p-values.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per pair (i < j): ``model_a``, ``model_b``, ``estimate``
        (T_a - T_b), ``se``, ``statistic``, ``pvalue``, ``pvalue_holm``,
        ``reject`` (Holm at ``alpha``), ``ci_lower``, ``ci_upper``, ``paired``.
    comparisons : tuple of ComparisonResult
        The comparisons, in the order of ``table``.
    names : tuple of str
        Model names.
    alpha : float
    alternative : str
    correction : str
        ``"holm"`` (``statsmodels.stats.multitest.multipletests``).
    """

    table: pd.DataFrame
    comparisons: tuple
    names: tuple
    alpha: float
    alternative: str
    correction: str = "holm"

    def conclusion(self, alpha: float | None = None, labels: dict | None = None) -> str:
        """The pairwise comparisons in one sentence: the pairs Holm's procedure separates, or none.

        Decided by the Holm-adjusted p-values at family-wise level ``alpha``
        (default: the stored one); for each pair that rejects, the model with
        the larger ECE^2 is named worse calibrated.  ``labels`` maps a model's
        name to the label to show (default: the names).
        """
        label = (lambda name: short_name(name)) if labels is None else (lambda name: labels.get(name, name))
        alpha = self.alpha if alpha is None else check_alpha(alpha)
        holm = self.table["pvalue_holm"].to_numpy(float)
        rows = [r for r, p in zip(self.table.itertuples(index=False), holm) if p <= alpha]
        if not rows:
            return (f"No pair of the {len(self.names)} models differs in calibration at family-wise level "
                    f"{alpha:g} (Holm; smallest adjusted {p_equals(float(holm.min()), 3)}); this does not show "
                    "that they are equally calibrated.")
        said = []
        for r in rows:
            a, b = label(r.model_a), label(r.model_b)
            worse, better = (a, b) if r.estimate > 0 else (b, a)
            said.append(f"{worse} is worse calibrated than {better} (Δ = ECE²({a}) − ECE²({b}) = "
                        f"{fmt(r.estimate, 4)}, Holm-adjusted "
                        f"{p_equals(r.pvalue_holm, 3)})")
        rest = len(self.table) - len(rows)
        return (f"At family-wise level {alpha:g} (Holm): " + "; ".join(said)
                + ((f"; the other {rest} pairs do not differ significantly." if rest > 1 else
                    "; the other pair does not differ significantly.") if rest else "."))

    def summary(self, alpha: float | None = None) -> CalibSummary:
        """A statsmodels-style summary of the pairwise table.

        ``alpha`` (default: the stored one) is the family-wise level of the
        Holm rejections shown (the Holm-adjusted p-values do not depend on it).
        """
        return ResultDisplay.summary(self, alpha)

    def _summary(self, alpha: float | None) -> CalibSummary:
        alpha = self.alpha if alpha is None else alpha
        reject = (self.table["reject"] if alpha == self.alpha
                  else self.table["pvalue_holm"] <= alpha)
        number = {name: i for i, name in enumerate(self.names, 1)}
        smry = CalibSummary()
        smry.add_title("Pairwise comparison of calibration errors: Delta = ECE_a^2 - ECE_b^2")
        smry.add_settings({**{f"Model {i}:": name for name, i in number.items()},
                           "Alternative:": self.alternative, "Correction:": self.correction,
                           "Alpha (FWER):": fmt(alpha)})
        shown = pd.DataFrame({
            "Delta": list(self.table["estimate"]), "std err": list(self.table["se"]),
            "z": list(self.table["statistic"]), "p-value": list(self.table["pvalue"]),
            "p (Holm)": list(self.table["pvalue_holm"]), "reject": [bool(v) for v in reject]},
            index=[f"{number[a]} - {number[b]}" for a, b in zip(self.table["model_a"], self.table["model_b"])],
            dtype=object)
        smry.add_table(shown, {"Delta": 6, "std err": 6, "z": 4, "p-value": fmt_p, "p (Holm)": fmt_p})
        smry.add_notes([f"{len(self.comparisons)} comparisons of {len(self.names)} models (rows: model a - "
                        f"model b, numbered as above); p-values adjusted by Holm's step-down method, "
                        f"family-wise error rate {alpha:g} (alternative: {self.alternative})."])
        return smry

    def _dict(self) -> dict:
        """Settings plus the table as a list of flat records (one per pair)."""
        return {"names": list(self.names), "alpha": self.alpha, "alternative": self.alternative,
                "correction": self.correction, "comparisons": self.table.to_dict(orient="records")}

    def to_dict(self) -> dict:
        """JSON-safe dict: the table as a list of records plus the settings."""
        return ResultDisplay.to_dict(self)

    def _repr_parts(self) -> list[str]:
        return [f"{len(self.names)} models", f"{len(self.comparisons)} pairs", f"alpha={self.alpha:g}"]


_VARIANCES = OPTIONS["variance"].choices


def _rows(res: CalibrationResult, which: str):
    """Bin number and U of every row of a result (recomputed from ``res.data``)."""
    if not isinstance(res, CalibrationResult):
        raise TypeError(f"{which} must be a CalibrationResult from calib_ci (or a formula string), "
                        f"got {type(res).__name__}")
    if res.data is None or res.partition is None:
        raise ValueError(f"{which} holds no row-level data (result.data is None, and no file to read them again "
                         "from); compare results of calib_ci computed in memory or streamed from a binary or top-1 "
                         "file, or compare the formulas on the file itself: calib_compare('y ~ p_a', 'y ~ p_b', "
                         "data='preds.parquet') streams it")
    if not res.mode.cube:
        raise ValueError(f"{which}: calib_compare supports the modes {tuple(t.value for t in Target if t.cube)}, "
                         f"got {res.mode!r}")
    return res.partition.inverse, res.data.u


def _decide_pairing(a: CalibrationResult, b: CalibrationResult, paired) -> tuple[bool, str]:
    """(paired, reason) for two results; see the module docstring."""
    same_n = a.n == b.n
    if paired is True:
        if not same_n:
            raise ValueError(f"paired=True needs the same rows in the same order, but the results have "
                             f"different numbers of rows (n_a = {a.n}, n_b = {b.n})")
        return True, "caller"
    if paired is False:
        return False, "caller"
    if not same_n:
        return False, "different n"
    return a.kind.shares_rows(b.kind)  # survival: the same times and events; binary: the same outcomes


def survival_influence(res: CalibrationResult) -> np.ndarray:
    """The influence values of T of a survival result with censoring before t, the Kaplan-Meier G's included.

    psi_i - mean(psi) + phi_i of :func:`calibtest.ece.survival.ipcw_influence`
    with the Kaplan-Meier influence phi recomputed from ``res.survival``
    (the times and events): mean(IF^2) is the result's sigma1^2.

    Raises
    ------
    ValueError
        For a Cox censoring model (its covariates are not kept on the result).
    """
    sv = res.survival
    if sv.censoring != "km":
        raise ValueError("calib_compare of survival results with censoring before the horizon needs the "
                         "Kaplan-Meier censoring distribution (censoring='km'): a result does not keep the Cox "
                         "model's covariates, so the shared censoring term of the difference cannot be computed")
    observed = sv.event if sv.cause is None else (sv.event != 0).astype(np.float64)
    event = sv.event if sv.cause is None else (sv.event == sv.cause).astype(np.float64)
    km = censoring_km(sv.time, observed)
    y_tilde = ipcw_outcome(sv.time, event, sv.horizon, km.before(sv.time))
    return ipcw_influence(res.partition.inverse, res.partition.m, res.data.u[:, 0], y_tilde,
                          lambda w: km_influence(km, observed, w))


def _survival_variance(a: CalibrationResult, b: CalibrationResult, paired: bool) -> DifferenceVariance:
    """Var(T_A - T_B) of two survival results with censoring before the horizon.

    The second-order part and the plug-in bias are those of the IPCW rows
    (:func:`calibtest.core.difference_variance.difference_variance`, the rows
    being independent given G); the first-order part is paired
    mean((IF_A - IF_B)^2) / n, whose Kaplan-Meier terms share the censoring
    martingales of the same rows (phi is linear in the weights a_i, so the
    difference's censoring term is phi(a^A - a^B)), or unpaired
    sigma1_A^2 / n_A + sigma1_B^2 / n_B.
    """
    if paired and not a.kind.same_follow_up(b.kind):
        raise ValueError("a paired comparison of survival results needs the same times and events row by row (the "
                         "same patients in the same order)")
    var = difference_variance(a.partition.inverse, a.data.u, b.partition.inverse, b.data.u, paired=paired)
    if paired:
        d = survival_influence(a) - survival_influence(b)
        first = float(np.mean(d * d)) / a.n
    else:
        first = a.sigma1_sq / a.n + b.sigma1_sq / b.n
    return DifferenceVariance(first, var.first_order_bias, var.second_order)


def _check_compatible(a: CalibrationResult, b: CalibrationResult):
    refusal = a.kind.comparison_refusal(b.kind)  # survival or not, weighted, clustered or not, the same target
    if refusal is not None:
        raise ValueError(refusal)


def _clustered_variance(a, b, paired: bool) -> tuple[float, float]:
    """(V_1, V_0) of T_cl^A - T_cl^B for two clustered results (``calib_ci(..., cluster=)``).

    Paired (the same rows and clusters): the cluster-robust variance of the
    difference (:func:`calibtest.core.clustered.clustered_difference_variance`);
    unpaired (independent sets of clusters): the sum of the two results' parts.
    """
    ca, cb = a.clustering, b.clustering
    if not paired:
        return ca.linear_variance + cb.linear_variance, ca.null_variance + cb.null_variance
    if not np.array_equal(ca.codes, cb.codes):
        raise ValueError("a paired clustered comparison needs the same clusters row by row in both results (the "
                         "same cluster= labels)")
    G = ca.n_clusters
    cells = [cluster_cells(r.partition.inverse, r.data.u, r.clustering.codes, r.partition.m, G) for r in (a, b)]
    stats = [clustered_statistics(c, r.n) for c, r in zip(cells, (a, b))]
    return clustered_difference_variance(cells[0], stats[0], cells[1], stats[1])


def _compare_two(a, b, *, paired, pairing, alpha, alternative, variance, names, var=None) -> ComparisonResult:
    """The comparison of two results; ``var``: the variance components already streamed from a file."""
    if var is None:
        (inv_a, u_a), (inv_b, u_b) = _rows(a, "a"), _rows(b, "b")
    if var is not None:
        v1, v2 = var.first_order(variance), var.second_order
    elif a.kind.clustered:
        v1, v2 = _clustered_variance(a, b, paired)
        var = None
    elif a.kind.censored or b.kind.censored:
        var = _survival_variance(a, b, paired)
        v1, v2 = var.first_order(variance), var.second_order
    else:
        var = difference_variance(inv_a, u_a, inv_b, u_b, paired=paired)
        v1, v2 = var.first_order(variance), var.second_order
    se = float(np.sqrt(v1 + v2))
    est = float(a.estimate - b.estimate)
    if se > 0:
        stat = est / se
    else:
        stat = 0.0 if est == 0 else float(np.copysign(np.inf, est))
    pvalue = float(z_pvalue(stat, alternative))
    lower, upper = z_interval(est, se, alpha, alternative)
    return ComparisonResult(
        estimate=est, estimate_a=float(a.estimate), estimate_b=float(b.estimate), se=se,
        se_first_order=float(np.sqrt(v1)), se_second_order=float(np.sqrt(v2)),
        se_first_order_plugin=float(np.sqrt(v1 if var is None else var.first_order_plugin)), statistic=float(stat), pvalue=pvalue,
        alternative=alternative, alpha=alpha, ci_lower=float(lower), ci_upper=float(upper), paired=bool(paired),
        pairing=pairing, variance=variance, name_a=names[0], name_b=names[1], n_a=a.n, n_b=b.n,
        n_bins_a=a.n_bins, n_bins_b=b.n_bins, mode=a.mode, k=a.k, n_classes=a.n_classes,
        result_a=a, result_b=b)


def _names(results, names) -> list[str]:
    if names is not None:
        names = [str(v) for v in names]
        if len(names) != len(results):
            raise ValueError(f"names must give one name per model ({len(results)}), got {len(names)}")
        if len(set(names)) != len(names):
            raise ValueError(f"names must be distinct, got {names}")
        return names
    letters = [chr(ord("A") + i) if i < 26 else f"M{i + 1}" for i in range(len(results))]
    out = [model_name(r.formula, r.prob_names, letter, r.model_label) if isinstance(r, CalibrationResult) else letter
           for r, letter in zip(results, letters)]
    if len(set(out)) != len(out):
        out = [f"{letter}: {name}" for letter, name in zip(letters, out)]
    return out


def _fit_formulas(formulas, data, *, n_classes, k, n_bins, missing, env, cluster=None, survival=None):
    """calib_ci for each formula on the same rows (rows with NaN in any formula dropped jointly).

    ``survival``: the keywords ``horizon``, ``censoring`` and ``cause`` of
    survival formulas ``"Surv(time, event) ~ risk"`` (None: other outcomes).
    """
    if data is None:
        raise ValueError("the formula form needs data=")
    check_missing(missing)
    if missing == "drop":
        mask = joint_missing(formulas, data, env)
        if mask.any():
            if isinstance(data, pd.DataFrame):
                data = data.loc[~mask]
            else:
                data = {key: np.asarray(val)[~mask] for key, val in data.items()}
            if cluster is not None and not isinstance(cluster, str):  # labels given per row: drop them too
                labels = np.asarray(cluster)
                cluster = labels[~mask] if labels.shape == mask.shape else labels
    options = {"n_classes": n_classes, "k": k, "n_bins": n_bins, "alpha": 0.05}  # as calib_ci records them
    settings = Settings(n_classes=n_classes, k=k, n_bins=n_bins, missing=missing, env=env, call_options=options,
                        **(survival or {}))
    design = Design.resolve("calib_ci", Inputs(formulas[0], data, cluster=cluster), settings)
    if design.survival:  # one design for every formula; survival_calib_ci refuses cluster= with the table's reason
        return [survival_calib_ci(Inputs(f, data), design, settings) for f in formulas]
    settings = Settings(n_classes=n_classes, k=k, n_bins=n_bins, env=env, null="asymptotic", call_options=options)
    return [estimate_in_memory(Inputs(f, data, cluster=cluster), settings) for f in formulas]


def _stream_formulas(formulas, path, pairs, settings: Settings, cluster=None):
    """The formula form on a CSV or Parquet file: each model's result and each pair's variance, streamed in two
    passes (:func:`calibtest.streams.paired.compare_file`); what needs every row at once is refused."""
    design = Design.resolve("calib_ci", Inputs(formulas[0], path, cluster=cluster), settings)
    if design.needs_rows:
        raise OptionError(f"calib_compare on a file streams it, and {design.describe().rsplit(', ', 1)[0]} rows "
                          "(cluster= or a survival outcome) need every row in memory: read the formulas' columns "
                          "into a DataFrame, e.g. pd.read_parquet(path, columns=[...]), and pass it as data=")
    return compare_file(path, formulas, settings, pairs)


@bound_options("calib_compare")
def calib_compare(a, b=None, *, data=None, paired=None, alpha: float = 0.05, alternative: str = "two-sided",
                  variance: str = "corrected", names=None, n_classes=None, k=None, n_bins="auto",
                  missing: str = "raise", eval_env=0, cluster=None, horizon=None, censoring: str = "km",
                  cause=None, chunksize=None, progress=None) -> ComparisonResult | PairwiseComparisonResult:
    """Test whether two models' l2 calibration errors differ: H0 Delta = ECE_A^2 - ECE_B^2 = 0.

    Parameters
    ----------
    a, b : CalibrationResult or str
        Two results of :func:`calibtest.calib_ci` with the same mode, k and
        number of classes (in memory, or streamed from a file: its rows are
        read again), or two formulas (``"y ~ p_a"``, ``"y ~ p_b"``)
        evaluated on ``data``.  A list of three or more results (or formulas)
        as ``a`` with ``b=None`` gives all pairwise comparisons.  Formulas are
        evaluated by patsy and can run any Python expression: trusted input
        only.
    data : DataFrame, dict, str or os.PathLike, optional
        Data for the formula form (both formulas use the same rows: paired).
        A path to a ``.csv`` (possibly compressed) or ``.parquet`` file is
        streamed in chunks, in two passes (a third counts the rows for
        ``n_bins="auto"`` unless a Parquet file with ``missing="raise"`` gives
        them): each model's bin sums, then the sums of the difference's
        variance (the models' influence values, and per cell of the two
        models' bins the cross products of their residuals;
        :mod:`calibtest.streams.paired`).  The numbers equal those of the rows
        in memory up to the order of the floating-point additions; memory is
        that of one chunk plus the sums (``docs/scale.md``).  Clustered rows
        and survival outcomes need the rows in memory and are refused on a
        file.
    paired : bool or None
        Same rows in the same order (True), independent evaluation sets
        (False), or decide from the data (None; see the module docstring).
        ``paired=True`` with different numbers of rows raises ``ValueError``.
    alpha : float
        Significance level of the interval (and of Holm's rejections).
    alternative : {"two-sided", "less", "greater"}
        "greater": H1 Delta > 0, model A worse calibrated than model B.
    variance : {"corrected", "plugin"}
        ``"corrected"`` (default): first-order influence variance with its
        plug-in bias removed, plus the second-order part; ``"plugin"``: the
        uncorrected plug-in first order plus the second order (conservative
        near calibration).  See ``docs/compare.md`` and the vignette.
    names : sequence of str, optional
        Model names (default: the right-hand sides of the formulas).
    n_classes, k, n_bins, missing, eval_env
        As in :func:`calibtest.calib_ci`, for the formula form.  With
        ``missing="drop"`` a row with a missing value in any formula is
        dropped for all models, so the rows stay shared.
    cluster : str or array_like, optional
        Formula form: clusters of correlated rows (a column of ``data`` or
        one label per row), as in :func:`calibtest.calib_ci`; each model's
        estimate is T_cl and the difference's standard error the
        cluster-robust one: cluster sums of the difference of the influence
        values (G / (G - 1) correction) plus the between-cluster quadratic
        part of the difference (``docs/clusters.md``).  Results of
        ``calib_ci(..., cluster=)`` are compared the same way (paired: the
        same clusters row by row; unpaired: independent sets of clusters,
        variances added); a clustered and an unclustered result are not
        compared.  ``variance=`` does not apply to clustered results.
    horizon, censoring, cause : optional
        Formula form with survival outcomes: ``calib_compare("Surv(time,
        event) ~ risk_a", "Surv(time, event) ~ risk_b", data=df, horizon=t)``
        compares two models' risks by t on the same patients, as
        :func:`calibtest.calib_ci` with ``horizon=`` (``censoring="km"`` for
        a paired comparison with censoring before t).  Survival results
        (``calib_ci(..., horizon=)``) are compared the same way: paired when
        they hold the same times and events row by row.  With censoring
        before t the first-order variance is that of the paired IPCW
        influence values, whose Kaplan-Meier censoring term is shared
        (``docs/survival.md``); without it the results are binary ones and
        so is the comparison.

    chunksize : int, optional
        Rows per chunk of a file (default :data:`~calibtest.options.DEFAULT_CHUNKSIZE`).
    progress : bool or None
        A progress bar over the first pass of a file, as in :func:`calibtest.calib_ci`.

    Returns
    -------
    ComparisonResult or PairwiseComparisonResult

    References
    ----------
    .. [1] Sun, Y., Chaudhari, P., Barnett, I. J. and Dobriban, E. (2024). "A
       Confidence Interval for the l2 Expected Calibration Error."
       arXiv:2408.08998.

    Notes
    -----
    z = (T_A - T_B) / se with se^2 = V1 + V2: V1 the first-order variance from
    the influence values psi_i = ||mu(b_i)||^2 + 2 mu(b_i)^T (U_i - mu(b_i))
    (the decomposition behind the paper's sigma1^2, eq. (8)),
    paired Var_n(psi^A - psi^B)/n; V2 the variance of the degenerate
    U-statistic parts, including their covariance on shared rows.

    Examples
    --------
    The demo model against an overconfident version of it, on the same rows:

    >>> import numpy as np, calibtest as ct
    >>> from scipy.special import expit, logit
    >>> df = ct.load_demo()
    >>> df["p_sharp"] = expit(1.6 * logit(df["p"]))
    >>> cmp = ct.calib_compare("y ~ p", "y ~ p_sharp", data=df)
    >>> print(f"Delta = {cmp.estimate:.4f}, se = {cmp.se:.5f}, p = {cmp.pvalue:.1e}")
    Delta = -0.0072, se = 0.00138, p = 1.6e-07

    ``calib_compare([r1, r2, r3]).table`` compares three or more results
    pairwise; ``print(cmp.summary())`` prints the comparison.
    """
    if b is None:
        if not isinstance(a, (list, tuple)):
            raise TypeError("give two models (a, b), or a list of models as a with b=None")
        models = list(a)
        if len(models) < 2:
            raise ValueError(f"need at least two models to compare, got {len(models)}")
    else:
        if isinstance(a, (list, tuple)):
            raise TypeError("a list of models goes in a alone (b=None)")
        models = [a, b]
    kinds = {isinstance(m, str) for m in models}
    variances = {}
    if kinds == {True}:
        if paired is False:
            raise ValueError("the formula form evaluates all models on the same rows of data, so it is paired; "
                             "pass paired=None or True")
        surv = None if horizon is None else dict(horizon=horizon, censoring=censoring, cause=cause)
        pairs = [(0, 1)] if b is not None else list(itertools.combinations(range(len(models)), 2))
        if source_of(data) == "file":
            results, variances = _stream_formulas(models, data, pairs, Settings(
                n_classes=n_classes, k=k, n_bins=n_bins, missing=missing, env=resolve_env(eval_env),
                chunksize=check_option("chunksize", chunksize), progress=progress,
                horizon=horizon, censoring=censoring, cause=cause), cluster=cluster)
        else:
            if chunksize is not None:
                raise OptionError("chunksize= reads a file in chunks; it needs data= to be a CSV or Parquet path")
            if source_of(data) == "dask":
                raise OptionError("calib_compare does not take a Dask DataFrame: write it to Parquet "
                                  "(ddf.to_parquet(path)) and pass the path, which is streamed, or pass "
                                  "ddf[columns].compute()")
            results = _fit_formulas(models, data, n_classes=n_classes, k=k, n_bins=n_bins, missing=missing,
                                    env=resolve_env(eval_env), cluster=cluster, survival=surv)
        forced = (True, "formula")
    else:
        if data is not None:
            raise ValueError("data= is used only with formulas")
        if cluster is not None:
            raise ValueError("cluster= is used only with formulas; results of calib_ci(..., cluster=) carry "
                             "their clusters")
        if horizon is not None or cause is not None:
            raise ValueError("horizon= and cause= are used only with formulas; survival results of "
                             "calib_ci(..., horizon=) carry their horizon")
        for i, m in enumerate(models):
            if not isinstance(m, CalibrationResult):
                raise TypeError(f"model {i + 1} must be a CalibrationResult or a formula string, "
                                f"got {type(m).__name__}")
        if chunksize is not None:
            raise OptionError("chunksize= reads a file in chunks; results carry their rows (or their file) already")
        results, forced = models, None
    for r in results[1:]:
        _check_compatible(results[0], r)
    labels = _names(results, names)

    def one(i, j):
        x, y, var = results[i], results[j], variances.get((i, j))
        if var is None and (is_streamed(x) or is_streamed(y)):  # read the rows again from their file
            var, pair = streamed_difference(x, y, paired)
        else:
            pair = forced if forced is not None else _decide_pairing(x, y, paired)
        return _compare_two(x, y, paired=pair[0], pairing=pair[1], alpha=alpha, alternative=alternative,
                            variance=variance, names=(labels[i], labels[j]), var=var)

    if len(results) == 2 and b is not None:
        return one(0, 1)
    return _pairwise([one(i, j) for i, j in itertools.combinations(range(len(results)), 2)],
                     labels, alpha, alternative)


def _pairwise(comparisons, labels, alpha, alternative) -> PairwiseComparisonResult:
    from statsmodels.stats.multitest import multipletests
    pvals = np.array([c.pvalue for c in comparisons])
    reject, p_holm, _, _ = multipletests(pvals, alpha=alpha, method="holm")
    table = pd.DataFrame({
        "model_a": [c.name_a for c in comparisons], "model_b": [c.name_b for c in comparisons],
        "estimate": [c.estimate for c in comparisons], "se": [c.se for c in comparisons],
        "statistic": [c.statistic for c in comparisons], "pvalue": pvals, "pvalue_holm": p_holm,
        "reject": reject, "ci_lower": [c.ci_lower for c in comparisons],
        "ci_upper": [c.ci_upper for c in comparisons], "paired": [c.paired for c in comparisons]})
    return PairwiseComparisonResult(table=table, comparisons=tuple(comparisons), names=tuple(labels),
                                    alpha=alpha, alternative=alternative)
