"""Frozen results of :func:`calibtest.calib_compare` and their summaries."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import special as _special

from .intervals import check_alpha
from .results import CalibrationResult, ConfidenceInterval
from .summary import CalibSummary, _json_safe, fmt

__all__ = ["ComparisonResult", "PairwiseComparisonResult", "ALTERNATIVES", "z_pvalue", "z_interval"]

#: Alternatives of the test of H0: Delta = 0 (scipy naming).
ALTERNATIVES = ("two-sided", "less", "greater")


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


@dataclass(frozen=True, eq=False)
class ComparisonResult:
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
        if self.variance == "corrected":
            notes.append("Standard error = sqrt(first order + second order); the first-order (influence) "
                         "variance has its plug-in bias from the estimated bin means removed "
                         "(docs/compare.md).")
        else:
            notes.append("Standard error = sqrt(plug-in first order + second order) (variance='plugin', "
                         "conservative near calibration).")
        if self.se == 0:
            notes.append("The standard error is 0 (identical or degenerate estimates); the test is undefined.")
        notes.append("Delta compares ECE^2 on each model's own bins; a negative estimate favours model A.")
        return notes

    def summary(self, alpha: float | None = None) -> CalibSummary:
        """A statsmodels-style summary (``print`` it; ``.as_html()``, ``.as_latex()``)."""
        alpha = self.alpha if alpha is None else check_alpha(alpha)
        ci = self.conf_int(alpha)
        smry = CalibSummary()
        smry.add_title("Comparison of calibration errors: Delta = ECE_A^2 - ECE_B^2")
        settings = {
            "Model A:": self.name_a, "Model B:": self.name_b,
            "Mode:": self.mode + (f" (k = {self.k})" if self.mode == "topk" else ""),
            "Classes (K):": "2" if self.n_classes is None else str(self.n_classes),
            "No. obs. A:": str(self.n_a), "No. obs. B:": str(self.n_b),
            "Bins A / B:": f"{self.n_bins_a} / {self.n_bins_b}",
            "Paired:": f"{fmt(self.paired)} ({self.pairing})",
            "Alternative:": self.alternative, "Variance:": self.variance,
        }
        smry.add_dict(settings, ncols=2)
        table = pd.DataFrame(
            {"estimate": [fmt(self.estimate_a), fmt(self.estimate_b), fmt(self.estimate)],
             "std err": [_one_se(self.result_a), _one_se(self.result_b), fmt(self.se)],
             "z": ["", "", fmt(self.statistic, 4)],
             "p-value": ["", "", fmt(self.pvalue, 4)],
             "ci lower": ["", "", fmt(ci.lower)], "ci upper": ["", "", fmt(ci.upper)]},
            index=[f"ECE_A^2 ({self.name_a})", f"ECE_B^2 ({self.name_b})", "Delta = A - B"])
        smry.add_df(table)
        parts = pd.DataFrame(
            {"std err": [fmt(self.se_first_order), fmt(self.se_second_order), fmt(self.se_first_order_plugin)]},
            index=["first order (influence)", "second order (degenerate)", "first order, plug-in"])
        smry.add_df(parts)
        side = {"two-sided": "two-sided", "greater": "one-sided (H1: Delta > 0)",
                "less": "one-sided (H1: Delta < 0)"}[self.alternative]
        level = (f"{100 * (1 - alpha):g}% {side} normal interval for Delta: {ci}. The std err of "
                 "ECE_A^2 and ECE_B^2 are the one-model sigma1 / sqrt(n) of calib_ci.")
        smry.add_text("Notes:")
        for i, note in enumerate([level] + self.notes(), 1):
            smry.add_text(f"[{i}] {note}")
        return smry

    def to_dict(self) -> dict:
        """All scalar results as a JSON-safe dict (NaN and infinities become None)."""
        out = {f: getattr(self, f) for f in (
            "estimate", "estimate_a", "estimate_b", "se", "se_first_order", "se_second_order",
            "se_first_order_plugin", "statistic", "pvalue", "alternative", "alpha", "ci_lower",
            "ci_upper", "paired", "pairing", "variance", "name_a", "name_b", "n_a", "n_b",
            "n_bins_a", "n_bins_b", "mode", "k", "n_classes")}
        out["notes"] = self.notes()
        return _json_safe(out)

    def __repr__(self) -> str:
        return (f"<ComparisonResult {self.name_a} vs {self.name_b} ({'paired' if self.paired else 'unpaired'}, "
                f"mode={self.mode}): Delta={self.estimate:.6g}, se={self.se:.4g}, z={self.statistic:.4g}, "
                f"p={self.pvalue:.4g}>")


def _one_se(res) -> str:
    return "" if res is None else fmt(res.se)


@dataclass(frozen=True, eq=False)
class PairwiseComparisonResult:
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

    def summary(self) -> CalibSummary:
        """A statsmodels-style summary of the pairwise table."""
        smry = CalibSummary()
        smry.add_title("Pairwise comparison of calibration errors: Delta = ECE_a^2 - ECE_b^2")
        shown = pd.DataFrame({
            "model a": self.table["model_a"], "model b": self.table["model_b"],
            "Delta": [fmt(v) for v in self.table["estimate"]],
            "std err": [fmt(v) for v in self.table["se"]],
            "z": [fmt(v, 4) for v in self.table["statistic"]],
            "p-value": [fmt(v, 4) for v in self.table["pvalue"]],
            "p (Holm)": [fmt(v, 4) for v in self.table["pvalue_holm"]],
            "reject": [fmt(bool(v)) for v in self.table["reject"]],
        })
        smry.add_df(shown, index=False)
        smry.add_text("Notes:")
        smry.add_text(f"[1] {len(self.comparisons)} comparisons of {len(self.names)} models; p-values adjusted "
                      f"by Holm's step-down method, family-wise error rate {self.alpha:g} "
                      f"(alternative: {self.alternative}).")
        return smry

    def to_dict(self) -> dict:
        """JSON-safe dict: the table as a list of records plus the settings."""
        return _json_safe({"names": list(self.names), "alpha": self.alpha, "alternative": self.alternative,
                           "correction": self.correction,
                           "comparisons": self.table.to_dict(orient="records")})

    def __repr__(self) -> str:
        return f"<PairwiseComparisonResult {len(self.names)} models, {len(self.comparisons)} pairs>"

