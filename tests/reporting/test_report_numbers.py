"""Every number of the report's result tables, read back from the HTML and recomputed (issue 24, point 5).

Six HTML reports are rendered once per module (``ct.report``): a binary
result (the demo data), a top-1 result (simulated three-class probabilities),
a case-weighted result, a prevalence-weighted result (Monte Carlo null), a
subgroup analysis (``calib_ci(by=)``) and two models
on the same rows with their comparison (``calib_compare``).  The tables are
parsed with the standard library's ``html.parser``.  Each checked table has
one small function that maps a row (its label, numbers replaced by ``#``) to
the numbers every cell must show, in order: a value of the result's
``to_dict()`` (or of ``evidence()``, ``val_prob()``, the comparison's
``to_dict()``), a value recomputed from the formula printed beside it (z₀ =
n·√w·T/σ₀, 1 − Φ(z₀), ...), or a constant of the wording (the 1 of
"1 − Φ(z₀)").  A row without a mapping, a cell with a number more or less than
mapped, or a number that is not the rounding of its value to the significant
digits printed is a mismatch; the tests assert there is none, and that the
checker finds a perturbed number, a perturbed result and an unmapped row.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2, norm

import calibtest as ct
from calibtest.display.format import fmt
from calibtest.checks.survival_calibration import GND_CENSORING_LIMIT, MIN_GROUP_EVENTS
from report_helpers import tables

# a number as the report prints it (fmt: "%g"); not the digit of a name such as a0, z_B, R2, E90 or chi2
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


# ------------------------------------------------------------------------------------------- matching one number
@dataclass(frozen=True)
class V:
    """A number of the result: the cell must show it rounded to the significant digits printed."""
    x: float
    what: str = ""


@dataclass(frozen=True)
class C:
    """A constant of the wording (the 1 of "1 − Φ(z₀)"): the cell must show exactly it."""
    text: str


def _significant(text: str) -> int:
    digits = text.lstrip("-").split("e")[0].replace(".", "").lstrip("0")
    return max(len(digits), 1)


def shown_as(text: str, x) -> bool:
    """Whether the printed ``text`` is ``x`` rounded to the significant digits of ``text``.

    An integer must be printed in full; a zero only for an exact zero; "1e-300"
    after "<" stands for a p-value that underflowed to 0 (checked by the caller).
    """
    if isinstance(x, (bool, np.bool_)):
        return False
    if isinstance(x, (int, np.integer)):
        return text == str(int(x))
    x, value = float(x), float(text)
    if not math.isfinite(x):
        return False
    if value == 0:
        return x == 0
    return value == float(f"{x:.{_significant(text)}g}")


def check_cell(where: str, text: str, expected) -> list[str]:
    """The mismatches between the numbers printed in a cell and the expected items, in order."""
    found = [(m.group(0), m.start()) for m in NUMBER.finditer(text)]
    if len(found) != len(expected):
        return [f"{where}: {text!r} shows {len(found)} numbers {[f for f, _ in found]}, mapped {len(expected)}"]
    errors = []
    for (number, start), item in zip(found, expected):
        if isinstance(item, C):
            ok = number == item.text
        elif number == "1e-300" and text[:start].rstrip().endswith("<"):
            ok = item.x == 0  # fmt_p's "< 1e-300": the p-value underflowed
        else:
            ok = shown_as(number, item.x)
        if not ok:
            errors.append(f"{where}: {number} in {text!r} is not {item}")
    return errors


def check_rows(table: str, rows: list[list[str]], spec) -> list[str]:
    """Check every cell of ``rows`` (header first) against ``spec(key)``: the expected items per column.

    ``key`` is the row's first cell with its numbers replaced by ``#``
    ("header" for the header row); the numbers of the first cell are checked
    like the others.  ``spec`` raises KeyError for a row it does not map.
    """
    errors = []
    for i, row in enumerate(rows):
        key = "header" if i == 0 else NUMBER.sub("#", row[0])
        try:
            columns = spec(key)
        except KeyError:
            errors.append(f"{table}: row {row[0]!r} has no mapping")
            continue
        if len(columns) != len(row):
            errors.append(f"{table}: row {row[0]!r} has {len(row)} cells, mapped {len(columns)}")
            continue
        for j, (cell, expected) in enumerate(zip(row, columns)):
            if expected is PROSE:
                continue
            errors += check_cell(f"{table} [{row[0]!r}, column {j}]", cell, expected)
    return errors


PROSE = object()  # a column of definitions in words: its numbers are constants of the wording, not results


def null_numbers(d: dict) -> list:
    """The numbers in the name of the result's null: "Monte Carlo (999 label draws)"."""
    return [V(d["mc_draws"], "mc_draws")] if d["null"] == "monte-carlo" else []


def level(alpha: float) -> V:
    return V(100 * (1 - alpha), "confidence level in %")


def _lookup(mapping: dict, key: str):
    return mapping[key]  # KeyError: an unmapped row


# ------------------------------------------------------------------------------------------- one function per table
def survival_evidence_spec(res):
    """The evidence table of a survival result censored before t: ``res.evidence().to_dict()`` (the IPCW row
    and the survival rows) and the flexible curve's Wald test."""
    ev = res.evidence()
    e = ev.to_dict()
    sev = ev.survival

    def row(key, label, null, verdict=()):
        return [label, null, [V(e[f"{key}_statistic"], f"{key}_statistic")], [V(e[f"{key}_pvalue"], f"{key}_pvalue")],
                list(verdict)]

    return lambda key: _lookup({
        "caption": [V(e["n"], "n"), V(e["alpha"], "alpha")],
        "header": [[], [], [], [], [V(e["alpha"], "alpha")]],
        "ECE²(t) #% CI, B = #": row("calib_ci", [level(e["alpha"]), V(res.n_bins, "n_bins")],
                                    [C("0"), V(res.n_bins, "n_bins")], [C("0")]),
        "O/E at t = # #% CI": row("observed_expected", [V(sev.horizon, "horizon"), level(e["alpha"])], [C("1")]),
        "CITL #% CI": row("citl", [level(e["alpha"])], [C("0")]),
        "slope #% CI": row("slope", [level(e["alpha"])], [C("1")]),
        "flexible curve ICI": row("flexible", [], [V(sev.curve.wald, "Wald chi2"), V(sev.curve.df, "df")]),
        "Greenwood-Nam-D'Agostino": row("gnd", [], [V(len(sev.groups), "groups"), V(sev.gnd_df, "gnd_df"),
                                                    *_gnd_unreliable_numbers(sev)]),
        "AUC(t) #% CI": [[level(e["alpha"])], [], [V(e["auc_statistic"], "auc_statistic")],
                         [V(e["auc_lower"], "auc_lower"), V(e["auc_upper"], "auc_upper")], []],
    }, key)


def survival_curve_spec(res):
    """The flexible calibration curve at the horizon: ``res.evidence().to_dict()`` (ICI, E50, E90, Emax, the Wald
    statistic) and the curve's df, knots and p-value (``res.evidence().survival.curve``)."""
    e = res.evidence().to_dict()["survival"]
    curve = res.evidence().survival.curve
    return lambda key: _lookup({
        "caption": [V(res.survival.horizon, "horizon"), V(len(curve.knots), "knots")],
        "header": [[], []],
        "ICI (mean |observed − predicted risk|)": [[], [V(e["flexible_estimate"], "ICI")]],
        "E50 (median |observed − predicted risk|)": [[], [V(e["e50"], "e50")]],
        "E90 (#th percentile)": [[C("90")], [V(e["e90"], "e90")]],
        "Emax (largest)": [[], [V(e["emax"], "emax")]],
        "Wald test that the curve is the identity": [[], [V(e["flexible_wald"], "flexible_wald"),
                                                          V(curve.df, "df"), V(curve.pvalue, "pvalue")]],
    }, key)


def _gnd_unreliable_numbers(sev) -> list:
    """The numbers of the reason the GND row is unreliable, in the order the null text gives them."""
    out = []
    share = sev.n_censored / sev.n
    if share > GND_CENSORING_LIMIT:
        out += [V(sev.n_censored, "censored"), V(sev.n, "n")]
        out += [V(100 * GND_CENSORING_LIMIT, "limit %")] if GND_CENSORING_LIMIT > 0 else []
    if sev.max_tied_events > 1:
        out.append(V(sev.max_tied_events, "tied events"))
    few = int((sev.groups["events"] < MIN_GROUP_EVENTS).sum())
    if few:
        out += [V(few, "sparse groups"), V(MIN_GROUP_EVENTS, "events")]
    return out


def follow_up_spec(res):
    """The follow-up and censoring table: what ``res.survival`` holds."""
    s = res.survival
    return lambda key: _lookup({
        "caption": [V(s.horizon, "horizon")],
        "header": [[], []],
        "Horizon t (the risk is P(T ≤ t))": [[], [V(s.horizon, "horizon")]],
        "Events at or before t (event = #, time ≤ t)": [[C("1")], [V(s.n_events, "n_events")]],
        "Censored before t (outcome at t unknown)": [[], [V(s.n_censored, "n_censored")]],
        "Known event-free at t": [[], [V(s.n_event_free, "n_event_free")]],
        "Median follow-up (reverse Kaplan–Meier)": [[], [V(s.median_followup, "median_followup")]],
        "Kaplan–Meier risk by t, # − S(t)": [[C("1")], [V(s.km_risk, "km_risk")]],
        "Censoring model of the IPCW weights": [[], []],
        "Largest weight # / G(time−) of an event before t": [[C("1")], [V(s.max_weight, "max_weight")]],
        "Standard error": [[], PROSE],
    }, key)


def risk_groups_spec(res):
    """The Kaplan-Meier risk groups: ``res.evidence().survival.groups``, one row after the other."""
    sev = res.evidence().survival
    groups = iter(sev.groups.itertuples())

    def group_row():
        g = next(groups)
        interval = ([V(g.lower, "lower"), V(g.upper, "upper")] if math.isfinite(g.lower) and math.isfinite(g.upper)
                    else [])
        return [[V(int(g.Index), "group")], [V(int(g.n), "n")], [V(int(g.events), "events")],
                [V(int(g.censored), "censored")], [V(g.mean_risk, "mean_risk")], [V(g.observed, "observed")],
                interval, [V(g.gnd, "gnd")]]

    def spec(key):
        if key == "#":
            return group_row()
        return _lookup({"caption": [V(sev.horizon, "horizon"), V(sev.gnd_statistic, "gnd"), V(sev.gnd_df, "df")],
                        "header": [[], [], [], [], [], [], [level(sev.alpha)], []]}, key)
    return spec


def evidence_spec(res):
    """The evidence table (unweighted result): ``res.evidence().to_dict()`` and its multi-scale test."""
    if res.censored:
        return survival_evidence_spec(res)
    ev = res.evidence()
    e = ev.to_dict()
    grid = ev.test.to_dict()["n_bins"]
    hl = ev.hl.to_dict()

    def result(key):
        if e[f"{key}_pvalue"] is not None:
            return [V(e[f"{key}_pvalue"], f"{key}_pvalue")]
        return [V(e[f"{key}_lower"], f"{key}_lower"), V(e[f"{key}_upper"], f"{key}_upper")]

    def row(key, label, null):
        verdict = [C("0")] if key == "calib_ci" else []  # "contains 0" / "excludes 0"
        return [label, null, [V(e[f"{key}_statistic"], f"{key}_statistic")], result(key), verdict]

    return lambda key: _lookup({
        "caption": [V(e["n"], "n"), V(e["alpha"], "alpha")],
        "header": [[], [], [], [], [V(e["alpha"], "alpha")]],
        "multi-scale test": row("calib_test", [], [V(b, "grid B") for b in grid]),
        "ECE² #% CI, B = #": row("calib_ci", [level(e["alpha"]), V(res.n_bins, "n_bins")],
                                 [C("0"), V(res.n_bins, "n_bins")]),
        "Hosmer-Lemeshow": row("hosmer_lemeshow", [], [V(hl["groups"], "groups"), V(hl["df"], "df")]),
        "Spiegelhalter z": row("spiegelhalter", [], [C("2")]),
        "CITL #% CI": row("citl", [level(e["alpha"])], [C("0"), C("1")]),
        "slope #% CI": row("slope", [level(e["alpha"])], [C("1"), C("1")]),
    }, key)


def weighted_evidence_spec(res):
    """The evidence table of a weighted result: its interval and its test (``to_dict()``)."""
    d = res.to_dict()
    null = {"asymptotic": "asymptotic null)", "monte-carlo": "Monte Carlo (# label draws) null)"}.get(d["null"])
    return lambda key: _lookup({
        "caption": [V(d["alpha"], "alpha")],
        "header": [[], [], [], [], [V(d["alpha"], "alpha")]],
        "Weighted interval for ECE² (B = #, adjusted)": [[V(d["n_bins"], "n_bins")], [C("0")],
                                                        [V(d["estimate"], "estimate")],
                                                        [V(d["ci_lower"], "ci_lower"), V(d["ci_upper"], "ci_upper")],
                                                        [C("0")]],
        f"Weighted test of ECE = # ({null}": [[C("0")] + null_numbers(d), [C("0")], [V(d["estimate"], "estimate")],
                                             [V(d["null_pvalue"], "null_pvalue")], []],
        "Hosmer–Lemeshow, case-weighted": [[], [], [], [], []],  # prevalence weights: not computed
        "Hosmer–Lemeshow, case-weighted (# groups, df = #)": _weighted_hl_row(res),
        "Multi-scale test, Spiegelhalter's z, CITL, slope": [[], [], [], [], []],
    }, key)


def _weighted_hl_row(res):
    """The case-weighted Hosmer–Lemeshow row, recomputed by the public function with the result's case weights."""
    if res.weighting.case_weights is None:
        return None
    hl = ct.hosmer_lemeshow(y=np.rint(res.data.y[:, 0]), probs=res.data.z[:, 0],
                            weights=np.asarray(res.weighting.case_weights)).to_dict()
    return [[V(hl["groups"], "groups"), V(hl["df"], "df")], [], [V(hl["statistic"], "HL statistic")],
            [V(hl["pvalue"], "HL p-value")], []]


#: The acceptance criteria of the plan the acceptance report is checked against.
ACCEPTANCE = {"ece_below": 0.05, "citl_within": (-0.2, 0.2), "slope_within": (0.8, 1.25), "oe_within": (0.8, 1.25)}


def acceptance_spec(res, alpha: float = 0.05):
    """The Acceptance table: each criterion's limit, estimate, bound or interval and p-value, recomputed by the
    public tests (``res.margin_test``, ``ct.citl_test``, ``ct.slope_test``, ``ct.oe_test`` on the rows)."""
    m = res.margin_test(ACCEPTANCE["ece_below"], alpha).to_dict()
    vp = res.val_prob()
    p, y = res.data.z[:, 0], np.rint(res.data.y[:, 0])
    named = res.kind.acceptance_quantity  # each criterion's measure with its scale
    tests = {named("citl_within"): ct.citl_test(vp, ACCEPTANCE["citl_within"], alpha).to_dict(),
             named("slope_within"): ct.slope_test(vp, ACCEPTANCE["slope_within"], alpha).to_dict(),
             named("oe_within"): ct.oe_test(within=ACCEPTANCE["oe_within"], alpha=alpha, probs=p, y=y).to_dict()}
    rows = {f"{named('ece_below')} (primary)": [[], [V(m["margin"], "margin")], [V(m["estimate"], "ECE")],
                              [V(m["upper"], "upper bound"), level(alpha)], [], [V(m["pvalue"], "p")], []]}
    for label, t in tests.items():
        rows[label] = [[], [V(t["lower_limit"], "lower"), V(t["upper_limit"], "upper")], [V(t["estimate"], "estimate")],
                       [V(t["ci_lower"], "ci_lower"), V(t["ci_upper"], "ci_upper"), V(100 * (1 - 2 * alpha), "level")],
                       [], [V(t["pvalue"], "p")], []]
    rows["caption"] = [V(alpha, "alpha")]
    rows["header"] = [[], [], [], [], [], [], []]
    return lambda key: _lookup(rows, key)


def estimate_spec(res):
    """The estimate table: T, T⁺, √T⁺, the interval on both scales, the plug-in estimate and its square root."""
    d = res.to_dict()
    lower, upper = adjusted_interval(d) if d["method"] == "adjusted" else (d["ci_lower"], d["ci_upper"])
    interval = [[level(d["alpha"])], [V(lower, "lower end (formula)"), V(upper, "T⁺ + z(1−α/2)·se")],
                [V(math.sqrt(lower), "√lower"), V(math.sqrt(upper), "√upper")]]
    return lambda key: _lookup({
        "caption": [level(d["alpha"])],
        "header": [[], [], []],
        "Point estimate": [[], [V(d["estimate"], "estimate"), C("0"), V(d["estimate_pos"], "estimate_pos")],
                           [V(math.sqrt(d["estimate_pos"]), "√T⁺")]],
        f"#% {d['method']} confidence interval": interval,
        "Plug-in estimate T_m (biased upward; for comparison)": [
            [], [V(d["plugin_estimate"], "plugin_estimate")],
            [V(math.sqrt(max(d["plugin_estimate"], 0.0)), "√T_m")]],
    }, key)


# the lower end of the adjusted interval in words, by branch: its numbers
BRANCH_CONSTANTS = {1: [C("1"), C("2"), C("0")],  # T⁺ − z(1−α/2)·se (... clear of 0: symmetric)
                    2: [C("0"), C("1"), C("0")],  # max(0, T⁺ − z(1−α)·se) (near 0: one-sided)
                    3: [C("2"), C("0"), C("0")]}  # T⁺ / 2 (0 excluded ... below 0)


def adjusted_interval(d: dict) -> tuple[float, float]:
    """The adjusted interval for ECE² recomputed from the formulas the regimes table prints, by branch."""
    t, se, alpha = d["estimate_pos"], d["se"], d["alpha"]
    upper = t + norm.ppf(1 - alpha / 2) * se
    lower = {1: t - norm.ppf(1 - alpha / 2) * se, 2: max(0.0, t - norm.ppf(1 - alpha) * se), 3: t / 2}
    return lower[d["ci_branch"]], upper


def regimes_spec(res):
    """The two asymptotic regimes: each number recomputed from the formula printed beside it."""
    d = res.to_dict()
    n, w, t, alpha = d["n"], d["bin_volume"], d["estimate"], d["alpha"]
    sigma0, se = math.sqrt(d["sigma0_sq"]), d["se"]
    z0 = n * math.sqrt(w) * t / sigma0
    critical0 = norm.ppf(1 - alpha) * sigma0 / (n * math.sqrt(w))
    s1u, v0 = d.get("sigma1_sq_unbiased"), d.get("second_order_variance")
    # a censored survival result's se is sqrt(sigma1_U^2 / n + V0), printed with its two parts
    se_cell = [V(se, "se")] if v0 is None else [V(math.sqrt(s1u / n + v0), "√(σ₁,U² / n + V₀)"),
                                                V(s1u, "sigma1_sq_unbiased"), V(v0, "second_order_variance")]
    return lambda key: _lookup({
        "caption": [] if d["null"] == "asymptotic" else null_numbers(d) + [C("0")],  # "... whether 0 belongs"
        "header": [[], [C("0")], [C("0")]],
        "Asymptotic law of T": [[], [C("0"), C("1")], [C("0"), C("1")]],
        "Variance constant": [[], [V(d["sigma0_sq"], "sigma0_sq")], [V(d["sigma1_sq"], "sigma1_sq")]],
        "Standard error of T": [[], [V(sigma0 / (n * math.sqrt(w)), "σ₀ / (n·√w)")], se_cell],
        "Statistic": [[], [V(z0, "z₀ = n·√w·T / σ₀")], [V(t / se, "T / se")]],
        "p-value of H0: ECE = #": [[C("0")], [V(norm.sf(z0), "1 − Φ(z₀)"), C("1")], []],
        "Role in the interval": [[], null_numbers(d) + [C("0"), C("1"), V(critical0, "z(1−α)·σ₀ / (n·√w)")],
                                 [C("1"), C("2")] + BRANCH_CONSTANTS[d["ci_branch"]]],
    }, key)


def finite_sample_spec(res):
    """The finite-sample test used: the conditional null (sd(T | Z), skewness, z = T / sd) or the Monte Carlo
    null (T against its draws, p = (1 + #draws ≥ T) / (1 + draws) recomputed from the stored draws)."""
    d = res.to_dict()
    mapping = {
        "caption": [C("0"), V(d["n_bins"], "n_bins")] + null_numbers(d),
        "header": [[], []],
        "Null law": [[], []],
        "p-value of H0: ECE = #": [[C("0")], [V(d["null_pvalue"], "null_pvalue")]],
        "Critical value of T at α": [[], [V(d["threshold"], "threshold")]],
        "Role in the interval": [[], [C("0")]],
    }
    if d["conditional_variance"] is not None:
        sd = math.sqrt(d["conditional_variance"])
        mapping["Conditional moments of T given the predictions"] = [
            [], [V(sd, "sd(T | Z)"), V(d["conditional_skewness"], "skewness")]]
    if d["null"] == "conditional" and d["null_method"] == "shifted gamma":
        mapping["Statistic"] = [[], [V(d["estimate"] / sd, "z = T / sd(T | Z)")]]
    elif d["null"] == "monte-carlo":
        draws = res.monte_carlo.null_draws
        assert draws.size == d["mc_draws"]
        mapping["Statistic"] = [[], [V(d["estimate"], "estimate"), V(d["mc_draws"], "mc_draws")]
                                + ([] if d["mc_seed"] is None else [V(int(d["mc_seed"]), "mc_seed")])]
        p = (1 + np.count_nonzero(draws >= d["estimate"])) / (1 + draws.size)
        mapping["p-value of H0: ECE = #"] = [[C("0")], [V(p, "(1 + #draws ≥ T) / (1 + draws)"), C("1"), C("1"),
                                                        V(d["mc_draws"], "mc_draws")]]
    return lambda key: _lookup(mapping, key)


VALPROB_ROWS = {  # row label -> value key of val_prob().to_dict()
    "Observed event rate O / n": "observed_rate", "Mean predicted risk E / n": "mean_predicted",
    "O / E (observed / expected events)": "oe", "C (ROC), val.prob's": "c_statistic", "C-statistic (exact)": "auc",
    "Dxy": "dxy", "R2": "r2", "D": "d", "D:Chi-sq": "d_chisq", "D:p": "d_p", "U": "u", "U:Chi-sq": "u_chisq",
    "U:p": "u_p", "Q": "q", "Brier": "brier", "Intercept": "intercept", "Slope": "slope",
    "Calibration-in-the-large": "citl", "Emax": "emax", "E90": "e90", "Eavg": "eavg", "E50 (loess)": "loess_e50",
    "E90 (loess)": "loess_e90", "ICI (loess)": "loess_ici", "Emax (loess)": "loess_emax",
    "S:z": "spiegelhalter_z", "S:p": "spiegelhalter_p",
}


def valprob_spec(res):
    """The validation metrics: ``res.val_prob().to_dict()``, and the formula of a row where it has one.

    O/E = Σy / Σp with exp(log(O/E) ∓ z·√((1 − O/n) / O)); C ∓ z·se (DeLong);
    Dxy = 2 (C − 1/2) of val.prob's C; D = (D:Chi-sq − 1) / n, U = (U:Chi-sq − 2) / n
    and Q = D − U on the finite-logit rows; D:p and U:p from chi-square(1), (2);
    S:p = 2 Φ(−|S:z|); the intercept, slope and CITL intervals est ∓ z·se.
    """
    v = res.val_prob().to_dict()
    z = norm.isf(v["alpha"] / 2)
    n_fit = v["n"] - v["n_infinite_logit"]
    se_log_oe = math.sqrt((1 - v["observed_rate"]) / v["n_events"])
    oe = v["observed_rate"] / v["mean_predicted"]
    value = {"oe": oe, "dxy": 2 * (v["c_statistic"] - 0.5), "d": (v["d_chisq"] - 1) / n_fit,
             "u": (v["u_chisq"] - 2) / n_fit, "q": (v["d_chisq"] - 1) / n_fit - (v["u_chisq"] - 2) / n_fit,
             "d_p": chi2.sf(v["d_chisq"], 1), "u_p": chi2.sf(v["u_chisq"], 2),
             "spiegelhalter_p": 2 * norm.sf(abs(v["spiegelhalter_z"])),
             "observed_rate": v["n_events"] / v["n"]}
    interval = {"oe": (oe * math.exp(-z * se_log_oe), oe * math.exp(z * se_log_oe)),
                "auc": (max(v["auc"] - z * v["auc_se"], 0.0), min(v["auc"] + z * v["auc_se"], 1.0))}
    interval.update({key: (v[key] - z * v[f"{key}_se"], v[key] + z * v[f"{key}_se"])
                     for key in ("intercept", "slope", "citl")})

    def spec(key):
        if key == "caption":
            return []
        if key == "header":
            return [[], [], [level(v["alpha"])], []]
        name = VALPROB_ROWS[key]
        ci = interval.get(name)
        return [[], [V(value.get(name, v[name]), name)], [] if ci is None else [V(ci[0], name), V(ci[1], name)],
                PROSE]
    return spec


def comparison_spec(cmp):
    """The comparison of two models: the comparison's ``to_dict()``; z = Δ / se and the interval Δ ∓ z·se."""
    c = cmp.to_dict()
    assert c["alternative"] == "two-sided"  # the interval below is the two-sided one
    half = norm.isf(c["alpha"] / 2) * c["se"]
    return lambda key: _lookup({
        "caption": [], "header": [[], []], "Model A": [[], []], "Model B": [[], []],
        "ECE_A² (squared probability units)": [[], [V(c["estimate_a"], "estimate_a")]],
        "ECE_B² (squared probability units)": [[], [V(c["estimate_b"], "estimate_b")]],
        "Δ = ECE_A² − ECE_B²": [[], [V(c["estimate"], "estimate")]],
        "Standard error of Δ": [[], [V(c["se"], "se")]],
        "z": [[], [V(c["estimate"] / c["se"], "z = Δ / se")]],
        "p-value": [[], [V(c["pvalue"], "pvalue")]],
        "#% confidence interval for Δ": [[level(c["alpha"])], [V(c["estimate"] - half, "Δ − z·se"),
                                                                V(c["estimate"] + half, "Δ + z·se")]],
        "Alternative hypothesis": [[], []], "Pairing": [[], []],
    }, key)


def subgroup_spec(grouped, frame):
    """The subgroup table: the groups of ``grouped.to_dict()``, then the pooled row (its events from the rows)."""
    g = grouped.to_dict()
    by = ",".join(grouped.by)

    def cells(r, pvalue, holm, events):
        return [[], [V(r["n"], "n")], [V(events, "events")], [V(r["n_bins"], "n_bins")],
                [V(r["estimate"], "estimate")], [V(r["ci_lower"], "ci_lower"), V(r["ci_upper"], "ci_upper")],
                [V(r["ece"], "ece")], [V(r["ece_ci_lower"], "ece_ci_lower"), V(r["ece_ci_upper"], "ece_ci_upper")],
                [C("0")], [V(pvalue, "pvalue")], [] if holm is None else [V(holm, "pvalue_holm")]]

    analysed = sum(r["estimate"] is not None for r in g["groups"])
    mapping = {"caption": [level(g["alpha"]), C("0"), V(analysed, "groups analysed"), C("4")],
               "header": [[]] * 5 + [[level(g["alpha"])], [], [level(g["alpha"])], [], [C("0")], []]}
    for r in g["groups"]:
        label = r["group"].split("=", 1)[1] if r["group"].startswith(by + "=") else r["group"]
        mapping[NUMBER.sub("#", label)] = cells(r, r["pvalue"], r["pvalue_holm"], r["events"])
    pooled = g["pooled"]
    events = int(frame[grouped.y_name].sum())  # recomputed from the rows
    mapping["all rows (pooled)"] = cells(pooled, pooled["null_pvalue"], None, events)
    return lambda key: _lookup(mapping, key)


def subgroup_tests_spec(grouped):
    """The tests across the subgroups (Bonferroni min-p and Cochran's Q): ``grouped.to_dict()``."""
    g = grouped.to_dict()
    analysed = sum(r["estimate"] is not None for r in g["groups"])
    assert g["global_method"] == "bonferroni"  # the only global test these fixtures use
    return lambda key: _lookup({
        "caption": [], "header": [[], [], []],
        "Null hypothesis": [[], [C("0")], []],
        "Method": [[], [C("1"), V(analysed, "G analysed")], [C("1")]],
        "Statistic": [[], [V(g["global_statistic"], "global_statistic")],
                      [V(g["heterogeneity_statistic"], "heterogeneity_statistic")]],
        "Degrees of freedom": [[], [], [V(g["heterogeneity_df"], "heterogeneity_df")]],
        "p-value": [[], [V(g["global_pvalue"], "global_pvalue")],
                    [V(g["heterogeneity_pvalue"], "heterogeneity_pvalue")]],
        "Verdict at α = #": [[V(g["alpha"], "alpha")], [], []],
    }, key)


# caption (without "Table N.") -> the table's kind, the name of its model
CAPTIONS = [
    ("evidence", r"Evidence on the calibration of (?P<name>.+?)(?:: every test on| that supports its weights)"),
    ("estimate", r"Estimate and \d+% confidence interval of (?P<name>.+?): ECE² in squared"),
    ("regimes", r"The two asymptotic regimes of the debiased estimator T for (?P<name>.+?): the asymptotic"),
    ("finite-sample test", r"The finite-sample test of H0: ECE = 0 used for (?P<name>.+?) at B = \d+:"),
    ("validation metrics", r"Validation metrics of (?P<name>.+?) \(definitions"),
    ("comparison", r"Comparison of (?P<name>.+?) with .+\.$"),
    ("subgroups", r"Calibration of (?P<name>.+?) within the subgroups of "),
    ("subgroup tests", r"Tests across the subgroups of .+ for (?P<name>.+?)\.$"),
    ("acceptance", r"Acceptance criteria of the analysis plan(?: for (?P<name>.+?))?, each tested at"),
    ("follow-up", r"Follow-up and censoring of (?P<name>.+?) at the horizon t = "),
    ("risk groups", r"Kaplan–Meier risk by t = \S+ per risk group of (?P<name>.+?) \(the reliability"),
    ("survival curve", r"Flexible calibration curve of (?P<name>.+?) at t = "),
]


# tables of result numbers this module has no checker for yet: a report holding one fails the check
UNCHECKED = [r"Pairwise comparison of "]


def _single(res):
    return res.pooled if hasattr(res, "pooled") else res


def check_report(html: str, results: dict, comparisons: dict | None = None, frame=None) -> tuple[list[str], list]:
    """(mismatches, [(kind, name)] of the tables checked) of a report of ``results`` (name -> result)."""
    errors, seen = [], []
    for caption, rows in tables(html):
        for kind, pattern in CAPTIONS:
            m = re.match(pattern, caption)
            if m:
                break
        else:
            if any(re.match(pattern, caption) for pattern in UNCHECKED):
                errors.append(f"no checker for the table {caption!r}")
            continue  # a table of settings, provenance, bins, software ... : not a table of result numbers
        name = m.group("name") if m.group("name") is not None else next(iter(results))
        seen.append((kind, name))
        if kind == "comparison":
            spec = comparison_spec(comparisons[name])
        elif kind in ("subgroups", "subgroup tests"):
            spec = (subgroup_spec(results[name], frame) if kind == "subgroups"
                    else subgroup_tests_spec(results[name]))
        else:
            res = _single(results[name])
            if kind == "acceptance":
                spec = acceptance_spec(res)
            elif kind == "evidence":
                spec = weighted_evidence_spec(res) if res.weighting is not None else evidence_spec(res)
            else:
                spec = {"estimate": estimate_spec, "regimes": regimes_spec, "finite-sample test": finite_sample_spec,
                        "validation metrics": valprob_spec, "follow-up": follow_up_spec,
                        "risk groups": risk_groups_spec, "survival curve": survival_curve_spec}[kind](res)
        table = f"{kind} of {name}"
        unnamed = caption if m.start("name") < 0 else caption[:m.start("name")] + "…" + caption[m.end("name"):]
        errors += check_cell(f"{table} [caption]", unnamed, spec("caption"))
        errors += check_rows(table, rows, spec)
    return errors, seen


# ------------------------------------------------------------------------------------------- the five reports
def _render(results, path, **kwargs) -> str:
    return ct.report(results, path, **kwargs).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("numbers")


@pytest.fixture(scope="module")
def site_data():
    rng = np.random.default_rng(20261125)
    n = 1500
    p = rng.uniform(0.05, 0.95, n)
    site = rng.choice(["north", "south", "east"], n)
    y = (rng.uniform(size=n) < np.where(site == "south", np.clip(p + 0.1, 0, 1), p)).astype(int)
    return pd.DataFrame({"y": y, "p": p, "site": site, "w": rng.lognormal(0.0, 0.5, n)})


@pytest.fixture(scope="module")
def binary(folder):
    res = ct.calib_ci("y ~ p", data=ct.load_demo())
    return res, _render(res, folder / "binary.html")


@pytest.fixture(scope="module")
def with_plan(folder):
    """The demo model reported against a plan with every acceptance criterion."""
    res = ct.calib_ci("y ~ p", data=ct.load_demo())
    ct.plan(folder / "plan.json", acceptance=ACCEPTANCE, primary="ece_below")
    return res, _render(res, folder / "acceptance.html", plan=folder / "plan.json")


@pytest.fixture(scope="module")
def top1(folder):
    rng = np.random.default_rng(7)
    probs = rng.dirichlet([2, 2, 2], 1500)
    y = (rng.uniform(size=(1500, 1)) > probs.cumsum(axis=1)).sum(axis=1)  # a draw from each row's probabilities
    res = ct.calib_ci(y=y, probs=probs, k=1, n_classes=3)
    return res, _render(res, folder / "top1.html")


@pytest.fixture(scope="module")
def weighted(folder, site_data):
    res = ct.calib_ci("y ~ p", data=site_data, weights="w", null="asymptotic")  # the default is Monte Carlo
    return res, _render(res, folder / "weighted.html")


@pytest.fixture(scope="module")
def prevalence_weighted(folder, site_data):
    res = ct.calib_ci("y ~ p", data=site_data, prevalence=0.3, rng=11)  # Monte Carlo null, jackknife se
    return res, _render(res, folder / "prevalence.html")


@pytest.fixture(scope="module")
def grouped(folder, site_data):
    res = ct.calib_ci("y ~ p", data=site_data, by="site")
    return res, _render(res, folder / "grouped.html", labels=["risk score"])


@pytest.fixture(scope="module")
def survival(folder):
    rng = np.random.default_rng(25)
    n = 1200
    risk = rng.uniform(0.05, 0.6, n)
    t = rng.exponential(5 / -np.log1p(-risk))
    c = rng.exponential(15, n)
    frame = pd.DataFrame({"time": np.minimum(t, c), "event": (t <= c).astype(int), "risk": risk})
    res = ct.calib_ci("Surv(time, event) ~ risk", data=frame, horizon=5)
    return res, _render(res, folder / "survival.html")


@pytest.fixture(scope="module")
def two_models(folder):
    demo = ct.load_demo()
    frame = demo.assign(q=np.clip(demo["p"] * 1.25, 0.001, 0.999))
    a, b = ct.calib_ci("y ~ p", data=frame), ct.calib_ci("y ~ q", data=frame)
    cmp = ct.calib_compare(a, b, names=("current", "inflated"))
    html = _render([a, b], folder / "two.html", comparisons=cmp, labels=["current", "inflated"])
    return (a, b, cmp), html


PER_MODEL = ["evidence", "estimate", "regimes", "finite-sample test", "validation metrics"]


def test_binary_report_numbers(binary):
    res, html = binary
    errors, seen = check_report(html, {"p": res})
    assert errors == []
    assert seen == [(kind, "p") for kind in PER_MODEL]


def test_acceptance_report_numbers(with_plan):
    res, html = with_plan
    errors, seen = check_report(html, {"p": res})
    assert errors == []
    assert seen[0] == ("acceptance", "p") and ("evidence", "p") in seen


def test_top1_report_numbers(top1):
    res, html = top1
    assert res.mode == "top1"
    errors, seen = check_report(html, {"probs": res})
    assert errors == []
    assert seen == [(kind, "probs") for kind in PER_MODEL]


def test_weighted_report_numbers(weighted):
    res, html = weighted
    assert res.weighting is not None and res.null == "asymptotic"
    errors, seen = check_report(html, {"p": res})
    assert errors == []
    # asymptotic null: no finite-sample table; no rows-based validation metrics for weights
    assert [kind for kind, _ in seen] == ["evidence", "estimate", "regimes"]


def test_prevalence_weighted_report_numbers(prevalence_weighted):
    res, html = prevalence_weighted
    assert res.weighting.prevalence == 0.3 and res.null == "monte-carlo"
    errors, seen = check_report(html, {"p": res})
    assert errors == []
    assert [kind for kind, _ in seen] == ["evidence", "estimate", "regimes", "finite-sample test"]


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_grouped_report_numbers(grouped, site_data):
    res, html = grouped
    errors, seen = check_report(html, {"risk score": res}, frame=site_data)
    assert errors == []
    assert [kind for kind, _ in seen] == PER_MODEL + ["subgroups", "subgroup tests"]


def test_survival_report_numbers(survival):
    res, html = survival
    assert res.censored
    errors, seen = check_report(html, {"risk": res})
    assert errors == []
    # no finite-sample table (asymptotic IPCW null), no val_prob (binary outcomes only)
    assert [kind for kind, _ in seen] == ["evidence", "estimate", "regimes", "follow-up", "risk groups",
                                          "survival curve"]


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_two_model_report_numbers(two_models):
    (a, b, cmp), html = two_models
    assert cmp.to_dict()["estimate_a"] == a.estimate and cmp.to_dict()["estimate_b"] == b.estimate
    errors, seen = check_report(html, {"current": a, "inflated": b}, {"current": cmp})
    assert errors == []
    kinds = [(k, n) for k, n in seen]
    assert ("comparison", "current") in kinds
    for name in ("current", "inflated"):
        assert [k for k, n in kinds if n == name and k != "comparison"] == PER_MODEL


# ------------------------------------------------------------------------------------------- the checker can fail
def test_rounding_rule():
    assert shown_as("0.7193", 0.719349) and not shown_as("0.7193", 0.71936)  # 0.71936 rounds to 0.7194
    assert shown_as("0.322", 0.32202) and not shown_as("0.3221", 0.32202)  # "%g" drops trailing zeros
    assert shown_as("-4.26265e-05", -4.262653e-05) and not shown_as("-4.26265e-05", 4.262653e-05)
    assert shown_as("3183", 3183) and not shown_as("318", 3183) and not shown_as("3183.0", 3183)
    assert shown_as("0", 0.0) and not shown_as("0", 1e-12)


def test_checker_reports_a_changed_number(binary):
    res, html = binary
    d = res.to_dict()
    n, w = d["n"], d["bin_volume"]
    z0 = n * math.sqrt(w) * d["estimate"] / math.sqrt(d["sigma0_sq"])
    shown = f"z₀ = n·√w·T / σ₀ = {z0:.4g}"
    assert shown in html
    wrong = f"{float(f'{z0:.4g}') + 0.0001:.4g}"
    errors, _ = check_report(html.replace(shown, f"z₀ = n·√w·T / σ₀ = {wrong}"), {"p": res})
    assert len(errors) == 1 and "regimes of p ['Statistic', column 1]" in errors[0] and wrong in errors[0]


def test_checker_reports_a_result_that_differs_from_the_report(binary, monkeypatch):
    res, html = binary
    true = res.to_dict()
    changed = {**true, "plugin_estimate": true["plugin_estimate"] * (1 + 1e-5)}  # beyond 6 significant digits
    monkeypatch.setattr(type(res), "to_dict", lambda self, *a, **k: changed if self is res else true)
    errors, _ = check_report(html, {"p": res})
    assert len(errors) == 2 and all("Plug-in estimate" in e for e in errors)  # T_m and √T_m


def test_checker_reports_an_unmapped_row_and_an_unmapped_number(binary):
    res, html = binary
    row = "<tr><td>Critical value of T at α</td>"
    assert html.count(row) == 1
    extra = html.replace(row, "<tr><td>A new quantity</td><td>0.5</td></tr>" + row)
    errors, _ = check_report(extra, {"p": res})
    assert errors == ["finite-sample test of p: row 'A new quantity' has no mapping"]
    # a number added to a mapped cell is one more than mapped
    cell = "0 belongs to the interval iff p &gt; α"  # as escaped in the HTML
    assert html.count(cell) == 1
    errors, _ = check_report(html.replace(cell, cell + " (B = 76)"), {"p": res})
    assert len(errors) == 1 and "shows 2 numbers" in errors[0]


def test_checker_reports_a_table_without_a_checker(binary):
    res, html = binary
    table = ('<table><caption><span class="label">Table 99.</span> Pairwise comparison of three models.'
             '</caption><tr><th>Pair</th></tr><tr><td>A - B 0.05</td></tr></table>')
    errors, _ = check_report(html.replace("</body>", table + "</body>"), {"p": res})
    assert errors == ["no checker for the table 'Pairwise comparison of three models.'"]


def test_checker_reports_a_changed_acceptance_bound(with_plan):
    res, html = with_plan
    bound = fmt(res.margin_test(ACCEPTANCE["ece_below"]).upper, 4)
    changed = html.replace(f"≤ {bound}", "≤ 0.09999", 1)
    assert changed != html
    errors, _ = check_report(changed, {"p": res})
    assert len(errors) == 1 and errors[0].startswith("acceptance of p") and "0.09999" in errors[0]
