"""statsmodels-style Summary tables and the JSON-safe dict of a result.

Tables are stored as DataFrames (``statsmodels.iolib.summary2.Summary``) and
formatted only when rendered; numbers are rounded for display only.
"""
from __future__ import annotations

import copy
import html

import pandas as pd
from statsmodels.iolib import summary2

from calibtest._format import fmt, json_safe, mode_text
from calibtest.core.conditional import SHIFTED_GAMMA_MAX_SKEWNESS
from calibtest.core.null import threshold as null_threshold

__all__ = ["CalibSummary", "build_summary", "result_dict", "result_notes", "null_rows", "null_notes",
           "asymptotic_test", "resampling_notes"]


class CalibSummary(summary2.Summary):
    """A statsmodels ``Summary`` whose HTML escapes user-supplied text.

    ``print(s)`` gives text, ``s.as_html()`` HTML, ``s.as_latex()`` LaTeX; it
    displays as HTML in notebooks.
    """

    def as_html(self) -> str:
        escaped = copy.copy(self)
        escaped.tables = [t.map(lambda v: html.escape(v) if isinstance(v, str) else v)
                          .rename(index=lambda v: html.escape(v) if isinstance(v, str) else v,
                                  columns=lambda v: html.escape(v) if isinstance(v, str) else v)
                          for t in self.tables]
        escaped.extra_txt = [html.escape(t) for t in self.extra_txt]
        escaped.title = html.escape(self.title) if self.title else self.title
        return summary2.Summary.as_html(escaped)

    def __str__(self) -> str:
        return self.as_text()

    def __repr__(self) -> str:
        return self.as_text()


def result_notes(res, alpha: float | None = None) -> list[str]:
    """Numbered notes for the summary footer (for the interval at level 1 - alpha)."""
    notes = []
    alpha = res.alpha if alpha is None else alpha
    ci = res.conf_int(alpha)
    level = f"{100 * (1 - alpha):g}%"
    if res.method != "adjusted":
        notes += resampling_notes(res, alpha)
    elif ci.contains_zero and res.null != "asymptotic":
        notes.append(f"The {res.null} test does not reject ECE = 0 (p = {fmt(res.null_pvalue, 4)}), so 0 "
                     f"belongs to the {level} interval: no evidence of miscalibration at level {alpha:g} "
                     "(this is not evidence that the model is calibrated).")
    elif ci.contains_zero:
        notes.append(f"T+ = {fmt(res.estimate_pos)} is below the calibrated-regime threshold, so 0 belongs "
                     f"to the {level} interval: no evidence of miscalibration at level {alpha:g} "
                     "(this is not evidence that the model is calibrated).")
    elif ci.lower_open:
        notes.append("The interval is open at 0: (0, upper]. The calibrated-regime test rejects ECE = 0, "
                     "while the lower bound of the miscalibrated-regime interval reaches 0.")
    notes += null_notes(res)
    if res.estimate < 0:
        notes.append("The debiased estimate T is negative (possible when ECE is small); T+ = 0 is used.")
    if res.n_occupied_bins and res.n_singleton_bins > res.n_occupied_bins / 2:
        notes.append(f"{res.n_singleton_bins} of {res.n_occupied_bins} occupied bins hold fewer than 2 rows "
                     "and do not enter T; consider fewer bins.")
    if res.n_dropped:
        notes.append(f"{res.n_dropped} rows with missing values were dropped (missing='drop').")
    notes.append(f"Plug-in (biased) estimate T_m on the same bins: {fmt(res.plugin_estimate)}.")
    if res.mode == "binary":
        notes.append("Binary mode measures calibration of p itself; it equals the paper's K = 2 full "
                     "calibration error divided by 2.")
    if res.mode == "full":
        notes.append(f"Full calibration: the simplex is cut into B^(K-1) = {res.n_bins}^{res.n_classes - 1} "
                     "equal-volume simplices (edgewise subdivision); only non-empty cells are stored.")
    return notes


def _settings_table(res) -> dict:
    model = res.formula if res.formula else f"{res.y_name} ~ {' + '.join(res.prob_names) or 'probs'}"
    out = {
        "Model:": model,
        "Mode:": mode_text(res.mode, res.k),
        "Classes (K):": "2" if res.n_classes is None else str(res.n_classes),
        "No. observations:": str(res.n),
        "Bins per dim. (B):": f"{res.n_bins} ({res.n_bins_rule})",
        "Occupied bins:": str(res.n_occupied_bins),
        "Bin volume (w):": fmt(res.bin_volume),
        "Method:": res.method,
        "Alpha:": fmt(res.alpha),
        "Null:": res.null,
    }
    if res.method != "adjusted":
        out.update(_resampling_settings(res))
    return out


def _resampling_settings(res) -> dict:
    """Settings rows of a resampling interval: resamples, their size, seed, HulC details."""
    label = {"bootstrap": "Resamples:", "subsampling": "Subsamples:", "hulc": "Bias subsamples:"}
    out = {label.get(res.method, "Resamples:"): f"{fmt(res.n_resamples)} x {fmt(res.resample_size)} rows",
           "Seed:": "Generator" if res.seed == "Generator" else fmt(res.seed)}
    if res.method == "hulc":
        out["HulC splits:"] = "more than n" if res.hulc_splits is None else fmt(res.hulc_splits)
        out["Median bias:"] = fmt(res.hulc_median_bias, 4)
    return out


def build_summary(res, alpha=None) -> CalibSummary:
    """Summary of a :class:`~calibtest.results.CalibrationResult`."""
    alpha = res.alpha if alpha is None else alpha
    ci = res.conf_int(alpha)
    ci_ece = res.conf_int(alpha, scale="ece")
    smry = CalibSummary()
    smry.add_title("Calibration error: debiased l2-ECE with adjusted interval" if res.method == "adjusted"
                   else f"Calibration error: debiased l2-ECE with {res.method} interval")
    smry.add_dict(_settings_table(res), ncols=2)
    est = pd.DataFrame(
        {"estimate": [fmt(res.estimate), fmt(res.ece)],
         "std err": [fmt(res.se), ""],
         "ci lower": [fmt(ci.lower), fmt(ci_ece.lower)],
         "ci upper": [fmt(ci.upper), fmt(ci_ece.upper)]},
        index=["ECE^2 (T)", "ECE (sqrt T+)"])
    smry.add_df(est)
    tests = pd.DataFrame(
        {"variance": [fmt(res.sigma0_sq), fmt(res.sigma1_sq)],
         "statistic": [fmt(asymptotic_test(res)[0]), fmt(res.estimate / res.se) if res.se > 0 else "nan"],
         "p-value": [fmt(asymptotic_test(res)[1], 4), ""],
         "threshold": [fmt(null_threshold(alpha, res.sigma0_sq, res.n, res.bin_volume)), ""]},
        index=["calibrated: z0 = n sqrt(w) T / sigma0", "miscalibrated: T / (sigma1 / sqrt(n))"])
    tests = pd.concat([tests, null_rows(res)]) if res.conditional_pvalue is not None else tests
    smry.add_df(tests)
    interval_note = (f"Adjusted {100 * (1 - alpha):g}% confidence interval (Algorithm 1): "
                     f"{ci} for ECE^2, {ci_ece} for ECE.")
    if res.method != "adjusted":
        name = {"bootstrap": "Percentile bootstrap", "subsampling": "Subsampling", "hulc": "Adaptive HulC"}
        interval_note = (f"{name.get(res.method, res.method)} {100 * (1 - alpha):g}% confidence interval: "
                         f"{ci} for ECE^2, {ci_ece} for ECE.")
    notes = [interval_note] + result_notes(res, alpha)
    smry.add_text("Notes:")
    for i, note in enumerate(notes, 1):
        smry.add_text(f"[{i}] {note}")
    return smry


def result_dict(res) -> dict:
    """JSON-safe dict of a result's scalars (CLI ``--json`` keys first)."""
    ci_ece = res.conf_int(scale="ece")
    out = {
        "estimate": res.estimate, "ece": res.ece,
        "ci_lower": res.ci_lower, "ci_upper": res.ci_upper, "ci_lower_open": res.ci_lower_open,
        "ece_ci_lower": ci_ece.lower, "ece_ci_upper": ci_ece.upper,
        "contains_zero": res.contains_zero, "sigma1_sq": res.sigma1_sq, "sigma0_sq": res.sigma0_sq,
        "se": res.se, "threshold": res.threshold, "null_zstat": res.null_zstat,
        "null_pvalue": res.null_pvalue, "n": res.n, "n_bins": res.n_bins, "k": res.k,
        "n_classes": res.n_classes, "mode": res.mode, "alpha": res.alpha,
        "estimate_pos": res.estimate_pos, "plugin_estimate": res.plugin_estimate,
        "ci_branch": res.ci_branch, "n_bins_rule": res.n_bins_rule, "bin_width": res.bin_width,
        "bin_volume": res.bin_volume, "n_occupied_bins": res.n_occupied_bins,
        "n_singleton_bins": res.n_singleton_bins, "method": res.method, "formula": res.formula,
        "y_name": res.y_name, "prob_names": list(res.prob_names), "n_dropped": res.n_dropped,
        "notes": result_notes(res),
        "null": res.null, "null_method": res.null_method, "asymptotic_zstat": res.asymptotic_zstat,
        "asymptotic_pvalue": res.asymptotic_pvalue, "conditional_variance": res.conditional_variance,
        "conditional_skewness": res.conditional_skewness, "conditional_zstat": res.conditional_zstat,
        "conditional_pvalue": res.conditional_pvalue, "conditional_threshold": res.conditional_threshold,
        "mc_pvalue": res.mc_pvalue, "mc_draws": res.mc_draws, "mc_seed": res.mc_seed,
    }
    out.update({"n_resamples": res.n_resamples, "seed": None if res.seed is None else str(res.seed),
                "resample_size": res.resample_size, "hulc_splits": res.hulc_splits,
                "hulc_median_bias": res.hulc_median_bias})
    return json_safe(out)


# --------------------------------------------------------------------------- the finite-sample nulls
def asymptotic_test(res) -> tuple[float, float, float]:
    """(z0, p-value, threshold) of the paper's calibrated-regime test, whatever the chosen null."""
    if res.null == "asymptotic" or res.asymptotic_pvalue is None:
        return res.null_zstat, res.null_pvalue, res.threshold
    return res.asymptotic_zstat, res.asymptotic_pvalue, null_threshold(res.alpha, res.sigma0_sq, res.n,
                                                                       res.bin_volume)


def null_rows(res) -> pd.DataFrame:
    """Rows of the tests table for the conditional and Monte Carlo nulls."""
    rows = {"conditional: T / sd(T | Z), shifted gamma": {
        "variance": fmt(res.conditional_variance), "statistic": fmt(res.conditional_zstat),
        "p-value": fmt(res.conditional_pvalue, 4), "threshold": fmt(res.conditional_threshold)}}
    if res.mc_pvalue is not None:
        rows[f"Monte Carlo: {res.mc_draws} label draws"] = {
            "variance": "", "statistic": "", "p-value": fmt(res.mc_pvalue, 4),
            "threshold": fmt(res.threshold) if res.null == "monte-carlo" else ""}
    return pd.DataFrame.from_dict(rows, orient="index")


def _unreliable_gamma_note(res) -> str:
    """Why the shifted-gamma p-value was not used (or should not be read)."""
    head = (f"The conditional skewness of T is {fmt(res.conditional_skewness, 3)} (above "
            f"{SHIFTED_GAMMA_MAX_SKEWNESS:g}): the label noise is nearly degenerate (predictions near 0 or 1), "
            "and the shifted-gamma approximation of the conditional null cannot be trusted.")
    if res.null == "conditional":
        return head + (f" The conditional p-value is the exact conditional Monte Carlo p-value from "
                       f"{res.mc_draws} label draws.")
    return head + " Its p-value is shown for reference only; null='monte-carlo' gives an exact-size test."


def null_notes(res) -> list[str]:
    """Notes on the null used, and on disagreement between the nulls at ``res.alpha``."""
    if res.conditional_pvalue is None:
        return []
    notes = []
    tests = {"asymptotic": asymptotic_test(res)[1]}
    if res.conditional.reliable:  # an unreliable shifted gamma is explained in its own note
        tests["conditional"] = res.conditional_pvalue
    if res.mc_pvalue is not None:
        tests["monte-carlo"] = res.mc_pvalue
    rejects = {name: p <= res.alpha for name, p in tests.items()}
    if len(set(rejects.values())) > 1:
        said = "; ".join(f"{name} p = {fmt(p, 4)} ({'rejects' if rejects[name] else 'does not reject'})"
                         for name, p in tests.items())
        notes.append(f"The tests of ECE = 0 disagree at level {res.alpha:g}: {said}. The {res.null} null "
                     "(null=) decides whether 0 joins the interval; the conditional and Monte Carlo nulls "
                     "hold their size in finite samples, the asymptotic one may not.")
    if res.conditional is not None and not res.conditional.reliable:
        notes.append(_unreliable_gamma_note(res))
    if res.conditional_skewness is not None:
        notes.append(f"Conditional null given the predictions: sd(T | Z) = "
                     f"{fmt(res.conditional_variance ** 0.5 if res.conditional_variance else 0.0)}, "
                     f"skewness {fmt(res.conditional_skewness, 3)}.")
    if res.mc_seed is not None:
        notes.append(f"Monte Carlo null: {res.mc_draws} label draws, seed {res.mc_seed} (rng=) reproduces them.")
    return notes


# --------------------------------------------------------------------------- resampling intervals
def resampling_notes(result, alpha: float | None = None) -> list[str]:
    """Summary notes describing a resampling interval (at level 1 - alpha; default the stored alpha)."""
    if result.resampling is None:
        return []
    alpha = result.alpha if alpha is None else alpha
    level = f"{100 * (1 - alpha):g}%"
    seed = result.seed
    seed_txt = "a numpy Generator (no integer seed)" if seed == "Generator" else f"rng={seed}"
    if result.method == "bootstrap":
        how = (f"percentile bootstrap: the {alpha / 2:g} and {1 - alpha / 2:g} quantiles of T "
               f"over {result.n_resamples} resamples of n = {result.n} rows drawn with replacement")
    elif result.method == "subsampling":
        how = (f"subsampling: T + sqrt(b/n) (q_{{a/2}}, q_{{1-a/2}}) with q the quantiles of T_b - T over "
               f"{result.n_resamples} subsamples of b = {result.resample_size} rows without replacement")
    elif result.hulc_splits is None:
        how = (f"adaptive HulC: estimated median bias {result.hulc_median_bias:.4g} (from {result.n_resamples} "
               f"subsamples of {result.resample_size} rows) needs more splits than rows, so the interval is "
               "the whole line")
    else:
        how = (f"adaptive HulC: [min, max] of T over {result.hulc_splits} disjoint random splits; median bias "
               f"{result.hulc_median_bias:.4g} estimated from {result.n_resamples} subsamples of "
               f"{result.resample_size} rows")
    notes = [f"The {level} interval is a resampling interval ({how}); {seed_txt} reproduces it."]
    lo, hi = result.resampling.at_level(alpha)
    if lo < 0.0 or hi < 0.0:
        notes.append(f"The method's interval [{lo:.6g}, {hi:.6g}] reaches below 0; the reported interval "
                     "is its intersection with [0, inf)" + (" (empty: shown as [0, 0])." if hi < 0 else "."))
    notes.append("0 belongs to the interval" if lo <= 0.0 <= hi else "0 is outside the interval")
    notes[-1] += (f"; the calibrated-regime z test (p = {result.null_pvalue:.4g}) is reported separately and "
                  "does not decide the interval.")
    return notes
