"""Self-contained HTML and PDF validation reports of calibration results.

``report(results, "out.html")`` renders the Jinja2 template ``report.html``
of the repository's top-level ``templates/`` folder (shipped inside the wheel
as ``calibtest/templates/``; ``templates=DIR`` puts an organisation's
templates in front of it) with autoescaping on, from a context made only of ``to_dict()``-style values
and preformatted strings: the template does no arithmetic.  Figures are PNG
images embedded as ``data:`` URIs and the CSS is inline, so the HTML file is a
single document that needs no network and no JavaScript.  ``"out.pdf"`` runs
the same HTML through WeasyPrint (the optional extra ``calibtest[pdf]``).

The module is named ``reporting`` so that the function ``calibtest.report``
does not shadow a module of the same name.
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import os
import platform
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from calibtest.checks.evidence_table import kind_flag
from calibtest.core.progress import progress_bar
from calibtest.core.targets import Target
from calibtest.display.format import fmt, fmt_interval, fmt_p, interval_verdict, model_name, p_equals, sha256_file
from calibtest._version import package_version
from calibtest.inputs.plan import not_recomputable, planned_curve, sample_size_rows
from calibtest.options import OptionError, OptionTypeError, check_option, criterion_text
from calibtest.reporting.document import (METADATA_FIELDS, NOT_STATED, Numbering, bin_table_csv, bins_file_name,
                                          result_file_name, result_record,
                                          check_deviation_reasons, check_metadata, check_report_text,
                                          check_report_path, load_metadata, pdf_attachments, plan_check,
                                          reported_tests, write_report_file)
from calibtest.reporting.plotting import FIGURE_DPI
from calibtest.checks.evidence_table import impossible_outcomes
from calibtest.display.summary import asymptotic_test, null_name, null_text
from calibtest.checks.survival_calibration import GND_CENSORING_LIMIT, MIN_GROUP_EVENTS


#: The report's references, by the key its templates cite (``{{ ref.KEY }}``); a report lists those its
#: results' kinds name (``res.kind.report_references()``) and its subgroup and weighting paragraphs cite, in
#: this order, numbered from 1.
REFERENCES = {
    "sun": "Sun, Y., Chaudhari, P., Barnett, I. J. and Dobriban, E. (2024). A Confidence Interval for the ℓ2 "
           "Expected Calibration Error. arXiv preprint arXiv:2408.08998. https://doi.org/10.48550/arXiv.2408.08998",
    "lee": "Lee, D., Huang, X., Hassani, H. and Dobriban, E. (2023). T-Cal: An optimal test for the calibration of "
           "predictive models. Journal of Machine Learning Research 24(335), 1–72.",
    "kuchibhotla": "Kuchibhotla, A. K., Balakrishnan, S. and Wasserman, L. (2024). The HulC: confidence regions from "
                   "convex hulls. Journal of the Royal Statistical Society Series B 86(3), 586–622. "
                   "https://doi.org/10.1093/jrsssb/qkad134",
    "hosmer": "Hosmer, D. W. and Lemeshow, S. (1980). Goodness of fit tests for the multiple logistic regression "
              "model. Communications in Statistics – Theory and Methods 9(10), 1043–1069. "
              "https://doi.org/10.1080/03610928008827941",
    "harrell": "Harrell, F. E. (2015). Regression Modeling Strategies, 2nd ed. Springer, Cham. "
               "https://doi.org/10.1007/978-3-319-19425-7; R package rms, function val.prob.",
    "spiegelhalter": "Spiegelhalter, D. J. (1986). Probabilistic prediction in patient management and clinical "
                     "trials. Statistics in Medicine 5(5), 421–433. https://doi.org/10.1002/sim.4780050506",
    "austin_steyerberg": "Austin, P. C. and Steyerberg, E. W. (2019). The Integrated Calibration Index (ICI) and "
                         "related metrics for quantifying the calibration of logistic regression models. Statistics "
                         "in Medicine 38(21), 4051–4065. https://doi.org/10.1002/sim.8281",
    "wilson": "Wilson, E. B. (1927). Probable inference, the law of succession, and statistical inference. "
              "Journal of the American Statistical Association 22(158), 209–212. "
              "https://doi.org/10.1080/01621459.1927.10502953",
    "van_calster": "Van Calster, B., Nieboer, D., Vergouwe, Y., De Cock, B., Pencina, M. J. and Steyerberg, E. W. "
                   "(2016). A calibration hierarchy for risk models was defined: from utopia to empirical data. "
                   "Journal of Clinical Epidemiology 74, 167–176. https://doi.org/10.1016/j.jclinepi.2015.12.005",
    "gerds": "Gerds, T. A. and Schumacher, M. (2006). Consistent estimation of the expected Brier score in general "
             "survival models with right-censored event times. Biometrical Journal 48(6), 1029–1040. "
             "https://doi.org/10.1002/bimj.200610301",
    "crowson": "Crowson, C. S., Atkinson, E. J. and Therneau, T. M. (2016). Assessing calibration of prognostic "
               "risk scores. Statistical Methods in Medical Research 25(4), 1692–1706. "
               "https://doi.org/10.1177/0962280213497434",
    "austin_harrell": "Austin, P. C., Harrell, F. E. and van Klaveren, D. (2020). Graphical calibration curves and "
                      "the integrated calibration index (ICI) for survival models. Statistics in Medicine 39(21), "
                      "2714–2742. https://doi.org/10.1002/sim.8570",
    "dagostino": "D'Agostino, R. B. and Nam, B.-H. (2003). Evaluation of the performance of survival analysis "
                 "models: discrimination and calibration measures. Handbook of Statistics 23, 1–25. "
                 "https://doi.org/10.1016/S0169-7161(03)23001-7",
    "demler": "Demler, O. V., Paynter, N. P. and Cook, N. R. (2015). Tests of calibration and goodness-of-fit in "
              "the survival setting. Statistics in Medicine 34(10), 1659–1680. https://doi.org/10.1002/sim.6428",
    "greenwood": "Greenwood, M. (1926). The natural duration of cancer. Reports on Public Health and Medical "
                 "Subjects 33. His Majesty's Stationery Office, London.",
    "uno": "Uno, H., Cai, T., Tian, L. and Wei, L. J. (2007). Evaluating prediction rules for t-year survivors with "
           "censored regression models. Journal of the American Statistical Association 102(478), 527–537. "
           "https://doi.org/10.1198/016214507000000149",
    "blanche": "Blanche, P., Dartigues, J.-F. and Jacqmin-Gadda, H. (2013). Estimating and comparing time-dependent "
               "areas under receiver operating characteristic curves for censored event times with competing "
               "risks. Statistics in Medicine 32(30), 5381–5397. https://doi.org/10.1002/sim.5958",
    "holm": "Holm, S. (1979). A simple sequentially rejective multiple test procedure. Scandinavian Journal of "
            "Statistics 6(2), 65–70.",
    "cochran": "Cochran, W. G. (1954). The combination of estimates from different experiments. Biometrics 10(1), "
               "101–129. https://doi.org/10.2307/3001666",
    "riley": "Riley, R. D., Higgins, J. P. T. and Deeks, J. J. (2011). Interpretation of random effects "
             "meta-analyses. BMJ 342, d549. https://doi.org/10.1136/bmj.d549",
    "debray": "Debray, T. P. A., Damen, J. A. A. G., Snell, K. I. E. et al. (2017). A guide to systematic review and "
              "meta-analysis of prediction model performance. BMJ 356, i6460. https://doi.org/10.1136/bmj.i6460",
    "viechtbauer": "Viechtbauer, W. (2010). Conducting meta-analyses in R with the metafor package. Journal of "
                   "Statistical Software 36(3), 1–48. https://doi.org/10.18637/jss.v036.i03",
    "kish": "Kish, L. (1965). Survey Sampling. John Wiley & Sons, New York.",
}


def report_references(results, subgroups: bool, weighting: bool) -> list[str]:
    """The keys of :data:`REFERENCES` a report cites, in the order of :data:`REFERENCES`: those its results'
    kinds name, and the subgroup and weighting paragraphs' sources."""
    keys = {k for r in results for k in r.kind.report_references()}
    keys |= {"holm", "cochran", "riley", "debray", "viechtbauer"} if subgroups else set()
    keys |= {"kish"} if weighting else set()
    return [k for k in REFERENCES if k in keys]

__all__ = ["report", "render_html", "build_context", "ReportOptions", "reliability_figure", "figure_size",
           "file_provenance", "load_metadata", "check_metadata", "result_evidence", "pdf_attachments",
           "FIGURE_DPI", "METADATA_FIELDS", "NOT_STATED"]

_PDF_HINT = ('writing a PDF report needs WeasyPrint: pip install "calibtest[pdf]" '
             "(WeasyPrint also needs the Pango library, e.g. Debian/Ubuntu: "
             "apt-get install libpango-1.0-0 libpangoft2-1.0-0)")

_METHOD_TEXT = {
    "adjusted": "adjusted interval (Algorithm 1 of Sun et al.)",
    "bootstrap": "percentile bootstrap of T",
    "subsampling": "subsampling of T",
    "hulc": "adaptive HulC (Kuchibhotla, Balakrishnan and Wasserman 2024)",
}

_BRANCH_TEXT = {
    1: "T⁺ − z(1−α/2)·se (the interval lies clear of 0: symmetric)",
    2: "max(0, T⁺ − z(1−α)·se) (near 0: one-sided)",
    3: "T⁺ / 2 (0 excluded by the test but the symmetric lower end would fall below 0)",
}

# --------------------------------------------------------------------------- helpers
def file_provenance(path) -> dict:
    """File name, size and SHA-256 of an input file."""
    path = Path(path)
    return {"file": str(path), "sha256": sha256_file(path), "size_bytes": path.stat().st_size}


def _table(headers: Sequence[str], rows: Sequence[Sequence]) -> dict:
    return {"headers": list(headers), "rows": [[str(c) for c in row] for row in rows]}


def _interval_text(lower: float, upper: float, lower_open: bool, digits: int = 6) -> str:
    return fmt_interval(lower, upper, lower_open, digits)


def _level(alpha: float) -> str:
    return f"{100 * (1 - alpha):g}%"


def _model_name(res, index: int) -> str:
    return model_name(res.formula, res.prob_names, f"model {index + 1}", getattr(res, "model_label", None))


def _n_coordinates(res) -> int:
    from calibtest.reporting.plotting import coordinate_columns
    return len(coordinate_columns(res.bin_table()))


def _versions() -> list[tuple[str, str]]:
    import jinja2
    import matplotlib
    import pandas
    import scipy
    import statsmodels


    return [("calibtest", package_version()), ("numpy", np.__version__), ("scipy", scipy.__version__),
            ("statsmodels", statsmodels.__version__), ("pandas", pandas.__version__),
            ("matplotlib", matplotlib.__version__), ("jinja2", jinja2.__version__),
            ("Python", platform.python_version()), ("platform", platform.platform())]


# --------------------------------------------------------------------------- figures
def figure_size(n_coordinates: int) -> tuple[float, float]:
    """Figure size in inches of a report's reliability diagram.

    One panel: 7.2 x 5.0.  d > 1 coordinates: ``ncols = min(d, 3)`` panels per
    row, ``nrows = ceil(d / ncols)``, width ``max(7.2, 3.3 ncols)``, height
    ``3.9 nrows``.  At :data:`FIGURE_DPI` = 120 one panel is 864 x 600 pixels.
    """
    if n_coordinates == 1:
        return 7.2, 5.0
    ncols = min(n_coordinates, 3)
    nrows = math.ceil(n_coordinates / ncols)
    return max(7.2, 3.3 * ncols), 3.9 * nrows


def reliability_figure(results, labels: Sequence[str] | None = None):
    """A matplotlib ``Figure`` (Agg canvas, no pyplot state) with the reliability diagram.

    ``results`` is one result or a list to overlay; see
    :func:`calibtest.reporting.plotting.plot_reliability`.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from calibtest.reporting.plotting import plot_reliability

    results = list(results) if isinstance(results, (list, tuple)) else [results]
    d = _n_coordinates(results[0])
    fig = Figure(figsize=figure_size(d), dpi=FIGURE_DPI)
    FigureCanvasAgg(fig)
    if d == 1:
        ax = fig.add_subplot()
        fig.subplots_adjust(left=0.09, right=0.98, top=0.97, bottom=0.1)
    else:
        ncols = min(d, 3)
        nrows = math.ceil(d / ncols)
        grid = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for extra in grid[d:]:
            extra.remove()
        ax = grid[:d]
        fig.subplots_adjust(left=0.08, right=0.98, top=0.93, bottom=0.1, wspace=0.3, hspace=0.45)
    plot_reliability(results, ax=ax, labels=labels, n_bins="estimator")
    return fig


def _png_data_uri(fig) -> str:
    """The figure as a PNG ``data:`` URI at :data:`FIGURE_DPI`.

    The Agg canvas draws it once (``print_png``): its layout engine, if any,
    runs inside that draw, so the extra layout draw of ``savefig`` is saved.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    if fig.get_dpi() != FIGURE_DPI:  # the report's figures are made at FIGURE_DPI (a fixed layout stays right)
        fig.set_dpi(FIGURE_DPI)
    buf = io.BytesIO()
    canvas.print_png(buf)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


# --------------------------------------------------------------------------- sections
def _settings(res, d: dict) -> dict:
    dim = _n_coordinates(res)
    if d["n_bins_rule"] == "auto":
        rule = (f"{d['n_bins']} (chosen automatically: B = max(2, round(6 / (d + 1) · n^(2 / (4 + d)))) "
                f"with d = {dim}, n = {d['n']})")
    else:
        rule = f"{d['n_bins']} (set by the user)"
    method = d["method"]
    method_text = _METHOD_TEXT.get(method, method)
    n_resamples = getattr(res, "n_resamples", None)
    if n_resamples is not None:
        method_text += f", {n_resamples} resamples"
    resample_size = getattr(res, "resample_size", None)
    if resample_size is not None:
        method_text += f" of {resample_size} rows"
    hulc_splits = getattr(res, "hulc_splits", None)
    if hulc_splits is not None:
        method_text += f", {hulc_splits} splits"
    rows = [
        ("Target (mode)", res.kind.target_description()),
        ("k (coordinates calibrated)", fmt(d["k"])),
        ("K (classes)", "2" if d["n_classes"] is None else fmt(d["n_classes"])),
        ("Model", d["formula"] or f"{d['y_name']} ~ {' + '.join(d['prob_names'])}"),
        ("Outcome column", d["y_name"]),
        ("Prediction columns", ", ".join(d["prob_names"])),
        ("Bins per dimension B", rule),
        ("Bin width 1/B; bin volume w = B^(−d)", f"{fmt(d['bin_width'])}, {fmt(d['bin_volume'])}"),
        ("Occupied bins (single-row bins)", f"{fmt(d['n_occupied_bins'])} ({fmt(d['n_singleton_bins'])})"),
        ("Significance level α", f"{fmt(d['alpha'])} (confidence level {_level(d['alpha'])})"),
        ("Interval method", method_text),
    ]
    rows.append(("Null distribution of the test of ECE = 0", res.kind.null_setting_text()))
    return _table(["Setting", "Value"], rows)


def _provenance(res, d: dict, source: dict | None, command: str | None, evidence_seed=None) -> dict:
    rows = []
    src = source if source is not None else getattr(res, "source", None)
    if src:
        for key, value in src.items():
            label = {"file": "Input file", "sha256": "SHA-256 of the input file",
                     "size_bytes": "Input file size (bytes)"}.get(key, str(key))
            rows.append((label, str(value)))
    else:
        rows.append(("Input", "in-memory data (no file; no checksum available)"))
    rows.append(("Rows used n", fmt(d["n"])))
    if d["n_dropped"]:
        rows.append(("Rows dropped (missing values)", fmt(d["n_dropped"])))
    seeds = []
    for attr, label in (("seed", "resampling seed"), ("mc_seed", "Monte Carlo null seed")):
        value = getattr(res, attr, None)
        if value is not None:
            seeds.append(f"{label} {value}")
    rows.append(("Random seed", "; ".join(seeds) if seeds else "none (no resampling: the result is deterministic)"))
    if evidence_seed is not None:
        rows.append(("Seed of the evidence table's multi-scale test", str(evidence_seed)))
    rows.append(("Python call", res.call or "not recorded"))
    if command:
        rows.append(("Command line", command))
    return _table(["Item", "Value"], rows)


def _estimates(res, d: dict) -> tuple[dict, dict]:
    level = _level(d["alpha"])
    method = d["method"]
    kind = "adjusted" if method == "adjusted" else method
    sq = _interval_text(d["ci_lower"], d["ci_upper"], d["ci_lower_open"])
    ece = _interval_text(d["ece_ci_lower"], d["ece_ci_upper"], d["ci_lower_open"])
    estimate_rows = [
        ("Point estimate", f"T = {fmt(d['estimate'])}  (T⁺ = max(T, 0) = {fmt(d['estimate_pos'])})",
         f"√T⁺ = {fmt(d['ece'])}"),
        (f"{level} {kind} confidence interval", sq, ece),
        ("Plug-in estimate T_m (biased upward; for comparison)", fmt(d["plugin_estimate"]),
         fmt(math.sqrt(max(d["plugin_estimate"], 0.0)))),
    ]
    estimates = _table(["Quantity", "ECE² scale", "ECE scale"], estimate_rows)
    se = d["se"]
    n, w = d["n"], d["bin_volume"]
    se0 = math.sqrt(d["sigma0_sq"]) / (n * math.sqrt(w))
    z0, p0, threshold0 = asymptotic_test(res)  # the asymptotic quantities, whatever null decided the test
    z1 = fmt(d["estimate"] / se, 4) if se and se > 0 else "undefined (se = 0)"
    if method == "adjusted":
        branch = _BRANCH_TEXT.get(d["ci_branch"], str(d["ci_branch"]))
        role1 = f"upper end T⁺ + z(1−α/2)·se; lower end {branch}"
    else:
        role1 = f"not used: the interval comes from {method}"
    critical = f"z(1−α)·σ₀ / (n·√w) = {fmt(threshold0)}"
    if method != "adjusted":
        role0 = f"not used: the interval comes from {method} (critical value of T {critical})"
    elif res.null == "asymptotic":
        role0 = f"0 belongs to the interval iff T⁺ < {critical}"
    else:
        role0 = (f"not used: the {null_name(res)} test decides whether 0 belongs to the interval (the "
                 f"asymptotic critical value of T would be {critical})")
    law1, variance0, variance1, se1, role1 = res.kind.regime_texts(d, se, role1)
    regime_rows = [
        ("Asymptotic law of T", "n·√w·T / σ₀ → N(0, 1)", law1),
        ("Variance constant", variance0, variance1),
        ("Standard error of T", f"σ₀ / (n·√w) = {fmt(se0)}", se1),
        ("Statistic", f"z₀ = n·√w·T / σ₀ = {fmt(z0, 4)}", f"T / se = {z1}"),
        ("p-value of H0: ECE = 0", f"{fmt_p(p0)} (one-sided, 1 − Φ(z₀))", "—"),
        ("Role in the interval", role0, role1),
    ]
    regimes = _table(["", "Calibrated regime (ECE = 0)", "Miscalibrated regime (ECE > 0)"], regime_rows)
    return estimates, regimes


def _null_test(res, d: dict) -> dict | None:
    """The finite-sample test of ECE = 0 the result used (conditional or Monte Carlo null); None if asymptotic."""
    if res.null == "asymptotic":
        return None
    rows = [("Null law", f"{null_text(res)} (null='{res.null}')")]
    cond, mc = res.conditional, res.monte_carlo
    if cond is not None:
        rows.append(("Conditional moments of T given the predictions",
                     f"sd(T | Z) = {fmt(math.sqrt(max(cond.variance, 0.0)))}, skewness {fmt(cond.skewness, 3)}"))
    if res.null_method == "point mass":
        rows += [("Statistic", f"T = {fmt(d['estimate'])}; under H0, T = 0 with probability 1 (every prediction "
                               "is 0 or 1 in its bin, so the labels are determined)"),
                 ("p-value of H0: ECE = 0", f"{fmt_p(d['null_pvalue'])} (P(T ≥ observed T | H0): 0 when T > 0, "
                                            "else 1)")]
    elif res.null_method == "shifted gamma":
        rows += [("Statistic", f"z = T / sd(T | Z) = {fmt(cond.zstat, 4)}"),
                 ("p-value of H0: ECE = 0", f"{fmt_p(d['null_pvalue'])} (shifted gamma with the conditional "
                                            "mean, variance and skewness of T)")]
    else:  # label draws, or sign flips of whole clusters
        rows += res.kind.draw_rows(d, mc)
    rows.append(("Critical value of T at α", fmt(d["threshold"]) if math.isfinite(res.threshold) else
                 f"none: no attainable p-value is at or below α = {fmt(d['alpha'])} (too few draws or patterns)"))
    rows.append(("Role in the interval", "0 belongs to the interval iff p > α" if d["method"] == "adjusted"
                 else f"not used: the interval comes from {d['method']}"))
    return _table(["", "Test used"], rows)


def _hosmer_lemeshow(res, groups: int) -> tuple[dict | None, str | None]:
    if not res.kind.one_column:
        return None, None
    try:
        hl = res.hosmer_lemeshow(groups)
    except ValueError as exc:
        return None, f"Hosmer–Lemeshow test not computed: {exc}."
    h = hl.to_dict()
    test = _table(["Statistic", "Value"], [
        ("HL chi-square", fmt(h["statistic"])),
        ("groups g (of equal size, by sorted prediction)", fmt(h["groups"])),
        ("reference distribution", f"chi-square with df = g = {h['groups']} (external validation: "
                                   "the predictions were not fitted on these rows)"
         if h["validation"] == "external" else
         f"chi-square with df = g - 2 = {h['df']} (development data: the model was fitted on these rows)"),
        (f"p-value, df = {h['df']} (the reference above)", fmt_p(h["pvalue"])),
        ("p-value, df = g - 2 (development-data reference, for comparison)", fmt_p(h["pvalue_df_groups_minus_2"]))
        if h["validation"] == "external" else
        ("p-value, df = g (independent validation data, for comparison)", fmt_p(h["pvalue_df_groups"])),
    ])
    compare = _table(["Estimator of ECE²", f"on the B = {res.n_bins} bins of this report",
                      f"on the {groups} HL groups"], [
        ("plug-in T_m (unweighted HL-type statistic / n)", fmt(h["plugin_estimate"]), fmt(h["plugin_estimate_groups"])),
        ("debiased T (this report)", fmt(h["debiased_estimate"]), fmt(h["debiased_estimate_groups"])),
    ])
    t = hl.table
    groups_table = _table(["group", "n", "mean prediction", "observed events", "expected events",
                           "observed rate", "chi-square term"],
                          [(fmt(int(r.group)), fmt(int(r.n)), fmt(r.mean_pred, 4), fmt(float(r.observed), 5),
                            fmt(r.expected, 5), fmt(r.observed_rate, 4), fmt(r.chi2, 4))
                           for r in t.itertuples(index=False)])
    return {"test": test, "compare": compare, "groups": groups_table}, None


_VALPROB_ROWS = (
    ("observed_rate", "Observed event rate O / n", "events per row"),
    ("mean_predicted", "Mean predicted risk E / n", "mean of p; equals O / n when calibrated in the large"),
    ("oe", "O / E (observed / expected events)", "Σy / Σp; interval exp(log(O/E) ∓ z·se), se(log O/E) = "
                                                "√((1 − O/n) / O) (Debray et al. 2017)"),
    ("c_statistic", "C (ROC), val.prob's", "discrimination; 0.5 = none, 1 = perfect"),
    ("auc", "C-statistic (exact)", "Mann–Whitney U / (n1 n0); interval C ∓ z·se with DeLong's variance "
                                   "(DeLong et al. 1988; pROC's ci.auc(method = \"delong\"))"),
    ("dxy", "Dxy", "Somers' rank correlation 2 (C - 1/2)"),
    ("r2", "R2", "Nagelkerke's R²"),
    ("d", "D", "discrimination index (D:Chi-sq - 1) / n"),
    ("d_chisq", "D:Chi-sq", "LR chi-square of the predictions vs the constant model"),
    ("d_p", "D:p", "chi-square(1) p-value"),
    ("u", "U", "unreliability index (U:Chi-sq - 2) / n"),
    ("u_chisq", "U:Chi-sq", "LR chi-square of intercept 0 and slope 1"),
    ("u_p", "U:p", "chi-square(2) p-value"),
    ("q", "Q", "quality index D - U"),
    ("brier", "Brier", "mean (p − y)²"),
    ("intercept", "Intercept", "a of logit P(y = 1) = a + b logit(p), joint fit (val.prob)"),
    ("slope", "Slope", "b of the same fit; 1 for no over/underfitting"),
    ("citl", "Calibration-in-the-large", "a0 of logit P(y = 1) = a0 + logit(p) (offset, slope 1)"),
    ("emax", "Emax", "max |p - lowess(y ~ p)|"),
    ("e90", "E90", "0.9 quantile of |p - lowess(y ~ p)|"),
    ("eavg", "Eavg", "mean |p - lowess(y ~ p)|"),
    ("loess_e50", "E50 (loess)", "median |p − c(p)|, c = loess(y ~ p) calibration curve (span 0.75, degree 2; "
                                 "Austin & Steyerberg 2019; CalibrationCurves::val.prob.ci.2's smoother)"),
    ("loess_e90", "E90 (loess)", "0.9 quantile of |p − c(p)|"),
    ("loess_ici", "ICI (loess)", "Integrated Calibration Index: mean |p − c(p)|"),
    ("loess_emax", "Emax (loess)", "max |p − c(p)|"),
    ("spiegelhalter_z", "S:z", "Spiegelhalter's z"),
    ("spiegelhalter_p", "S:p", "two-sided p-value of S:z"),
)


def _valprob(res) -> tuple[dict | None, str | None]:
    if not res.kind.one_column:
        return None, None
    if res.data is None and getattr(res, "stream", None) is None:
        return None, "Validation metrics not computed: the result holds no rows (bin sums only)."
    try:
        v = res.val_prob()  # the one the evidence table used
    except (ValueError, RuntimeError) as exc:
        return None, f"Validation metrics (rms::val.prob) not computed: {exc}."
    vd = v.to_dict()
    level = _level(res.alpha)
    cis = {"intercept": vd["intercept_ci"], "slope": vd["slope_ci"], "citl": vd["citl_ci"], "oe": vd["oe_ci"],
           "auc": vd["auc_ci"]}
    rows = []
    for key, label, meaning in _VALPROB_ROWS:
        ci = cis.get(key)
        ci_text = "" if ci is None or _missing(ci[0]) else f"[{fmt(ci[0], 4)}, {fmt(ci[1], 4)}]"
        rows.append((label, "—" if _missing(vd[key]) else fmt(vd[key], 4), ci_text, meaning))
    table = _table(["Statistic", "Value", f"{level} CI (Wald; O/E on the log scale)", "Definition"], rows)
    note = (f"n = {vd['n']} rows, {vd['n_events']} events"
            + ("; for the top-1 target p is the confidence and y the indicator that the top class is correct"
               if Target(res.mode).top1 else "") + "."
            + (f" {vd['n_infinite_logit']} rows have p exactly 0 or 1 (infinite logit) and, as in R's val.prob, "
               "are left out of the logistic fits: Intercept, Slope, calibration-in-the-large, C (ROC) val.prob's, "
               f"Dxy, R2, D, U and Q use the other {vd['n'] - vd['n_infinite_logit']} rows; the exact C, Brier, "
               "Emax, E90, Eavg and S:z use all rows." if vd["n_infinite_logit"] else "")
            + " " + v.direction())  # the sentence the evidence conclusion shows
    return table, note


def _coordinate_words(mode: str) -> str | None:
    """What coordinate j of the binned vector is, for the column names of a bin table (None in one dimension)."""
    return {"topk": "the j-th largest predicted probability", "full": "class j"}.get(mode)


def _bin_summary(res, d: dict, file_name: str) -> tuple[dict, str]:
    """The estimator's bins in a few rows, and the full bin table as CSV (attached to the PDF, linked in HTML).

    The table has one row per occupied bin (:func:`bin_table_csv`); the report
    prints its shape (occupied and single-row bins, rows per bin, the sum of
    the bins' terms, which is T) and names the file.
    """
    t = res.bin_table()
    counts = t["count"].to_numpy()
    singles = int(np.sum(counts == 1))
    weighted = "weight" in t.columns
    term = "T_w" if weighted else "T"
    rows = [("Bins per coordinate B", f"{d['n_bins']} (width {fmt(d['bin_width'])})"),
            ("Occupied bins", fmt(len(t))),
            (f"Bins holding one row (they do not enter {term})",
             f"{singles} ({fmt(100.0 * singles / d['n'], 3)}% of the n = {d['n']} rows)"),
            ("Rows per occupied bin: smallest, median, largest",
             f"{int(counts.min())}, {fmt(float(np.median(counts)))}, {int(counts.max())}")]
    if weighted:
        w = t["weight"].to_numpy(np.float64)
        rows.append(("Sum of weights per occupied bin: smallest, median, largest",
                     f"{fmt(w.min(), 4)}, {fmt(float(np.median(w)), 4)}, {fmt(w.max(), 4)}"))
    text = bin_table_csv(t)
    columns = text.split("\n", 1)[0].replace(",", ", ")
    total = f"{fmt(float(t['contribution'].sum()), 6)} (= {res.kind.bins_sum_text(d) or term})"
    rows += [(f"Sum of the bins' terms of {term}", total),
             ("Full bin table", f"{file_name}: {len(t)} rows, columns {columns}"),
             ("SHA-256 of the bin table file", hashlib.sha256(text.encode("utf-8")).hexdigest())]
    return _table(["Item", "Value"], rows), text


def result_evidence(res, rng=None):
    """The evidence table of a result's own rows (:meth:`calibtest.CalibrationResult.evidence`).

    Returns None for a result that holds only bin sums; a result of a file
    or a Dask frame reads its rows again (``res.stream``).  ``rng=None`` uses
    the seed the result recorded, so the report is the same at every call.
    """
    if res.data is None and getattr(res, "stream", None) is None:
        return None
    return res.evidence(rng=rng)


def _evidence_table(ev) -> dict:
    rows = []
    for key, r in ev.table.iterrows():
        if r["pvalue"] is not None:
            result = p_equals(r['pvalue'])
        else:
            unit = " (squared probability units)" if key == "calib_ci" else ""
            result = f"{_interval_text(r['lower'], r['upper'], False, 4)}{unit}"
        rows.append((r["name"], r["null"], fmt(r["statistic"], 4), result, r["verdict"]))
    return _table(["Test or measure", "Null hypothesis", "Statistic", "p-value or interval",
                   f"Verdict at α = {fmt(ev.alpha)}"], rows)


def _sensitivity_table(ev) -> dict:
    rows = [(fmt(int(r.n_bins)), fmt(r.T), _interval_text(r.lower, r.upper, bool(r.lower_open)),
             fmt_p(r.pvalue), "rejects" if r.reject else "does not reject")
            for r in ev.sensitivity.itertuples(index=False)]
    return _table(["B (bins)", "T (ECE², squared units)", f"{_level(ev.alpha)} CI for ECE²",
                   "p (ECE = 0)", "single-B test"], rows)


def _model_figures(res, name: str, d: dict, ev) -> tuple[list[dict], list[str]]:
    """Figures of one model (flexible curve, display-bin reliability diagram, prediction strip, bin
    sensitivity) and a note for each figure the data do not allow (e.g. a constant outcome)."""
    from calibtest.reporting import plotting

    level = _level(d["alpha"])
    figs, notes = [], []

    def add(title, draw, alt, caption):
        try:
            src = _png_data_uri(draw())
        except ValueError as exc:
            notes.append(f"The {title} of {name} was not drawn: {exc}.")
            return
        figs.append({"src": src, "alt": alt, "caption": caption})

    binary = res.kind.one_column and res.data is not None
    if binary:
        add("flexible calibration curve",
            lambda: plotting.flexible_curve_figure([res], [name], alpha=d["alpha"]),
            f"Flexible calibration curve of {name}",
            f"Flexible calibration curve of {name}: logistic recalibration of the outcome on a restricted cubic "
            f"spline of logit(p) (4 knots) with its pointwise {level} band, over the diagonal of perfect "
            "calibration [9]. Printed in the panel: the calibration-in-the-large (CITL) a0 (logit P(y = 1) = a0 + "
            "logit(p)) and the calibration slope b (logit P(y = 1) = a + b·logit(p)) with "
            + res.kind.recalibration_interval_words()
            + ". The strip underneath shows the predictions of events (up) and non-events (down), each half "
            "scaled to its own largest bin count (the tick labels give the two counts).")
    add("reliability diagram", lambda: plotting.display_reliability_figure([res], [name]),
        f"Reliability diagram of {name} at display bins",
        f"Reliability diagram of {name}. " + plotting.display_bins_caption([res]))
    if binary:
        add("distribution of the predictions", lambda: plotting.prediction_strip_figure([res], [name]),
            f"Distribution of the predictions of {name} by outcome",
            f"Distribution of the predictions of {name} by observed outcome: the share of the events (y = 1) "
            "and of the non-events (y = 0) in each of 50 equal-width bins, in percent of their own group.")
    if ev is not None:
        add("bin-sensitivity figure", lambda: plotting.bin_sensitivity_figure(ev, name),
            f"Bin sensitivity of {name}",
            f"Bin sensitivity of {name}: the debiased estimate T of ECE² (squared probability units) with its "
            f"{level} adjusted interval ({null_name(res)} null), and the p-value of the single-B test, against the "
            "number of bins B.")
    return figs, notes


def _survival_groups_table(sev) -> dict:
    """The reliability diagram's numbers: Kaplan–Meier risk by t per risk group (what ``sev.groups`` holds)."""
    level = _level(sev.alpha)
    g = sev.groups
    rows = [(fmt(int(i)), fmt(int(r.n)), fmt(int(r.events)), fmt(int(r.censored)), fmt(r.mean_risk, 4),
             fmt(r.observed, 4), "—" if not (math.isfinite(r.lower) and math.isfinite(r.upper)) else
             _interval_text(r.lower, r.upper, False, 4), fmt(r.gnd, 4))
            for i, r in zip(g.index, g.itertuples(index=False))]
    return _table(["Group", "n", "Events by t", "Censored before t", "Mean predicted risk",
                   "Kaplan–Meier risk by t", f"{level} CI (log-log)", "GND term"], rows)


def _survival_figures(res, name: str, d: dict, ev) -> tuple[list[dict], list[str]]:
    """The figure of a survival result censored before t: the reliability diagram at the horizon."""
    from calibtest.reporting.plotting import FIGURE_WIDTH, _figure
    from calibtest.reporting.survival_plot import plot_survival_calibration

    notes = [f"The flexible logistic curve, the display-bin reliability diagram with Wilson intervals, the "
             f"distribution of the predictions by outcome and the bin-sensitivity figure of {name} need binary "
             "outcomes; rows censored before the horizon have none, so the reliability diagram at the horizon "
             "takes their place."]
    sev = None if ev is None else ev.survival
    if sev is None:
        return [], notes + [f"The reliability diagram at the horizon of {name} was not drawn: the survival "
                            "evidence was not computed (see the evidence table's note)."]
    fig = _figure(FIGURE_WIDTH * 0.8)
    plot_survival_calibration(sev, fig.subplots())
    level = _level(sev.alpha)
    caption = (f"Reliability diagram of {name} at the horizon t = {fmt(sev.horizon)}: the Kaplan–Meier risk by t "
               f"in {len(sev.groups)} groups of equal size by predicted risk, with {level} log-log intervals, "
               "against the group's mean predicted risk; the line is the flexible calibration curve (Cox model "
               "on a restricted cubic spline of cloglog(risk), 3 knots) and the dashed diagonal perfect "
               "calibration.")
    return [{"src": _png_data_uri(fig), "alt": f"Reliability diagram of {name} at the horizon", "caption": caption}], \
        notes


_INTERNAL = re.compile(r"\s*\((?:see\s+)?(?:``)?docs/[\w.-]+\.md(?:``)?(?:,[^)]*)?\)"
                       r"|(?:[:;,]\s*|\s+)see\s+(?:``)?docs/[\w.-]+\.md(?:``)?"
                       r"|\s*(?:``)?docs/[\w.-]+\.md(?:``)?")


def _public(text: str) -> str:
    """``text`` without references to the package's source documents (they are not part of the report)."""
    return _INTERNAL.sub("", text)


def _model_context(res, name: str, index: int, *, source, command, hl_groups: int, figure: bool,
                   evidence_rng) -> dict:
    d = res.to_dict()
    estimates, regimes = _estimates(res, d)
    bins_file = bins_file_name(index + 1, name)
    bins, bins_csv = _bin_summary(res, d, bins_file)
    kind = res.kind
    prose = kind.report_prose()
    left_out = kind.report_omissions(name)  # the parts this kind leaves out, each with the reason
    hl, hl_note = (None, left_out["hl"]) if "hl" in left_out else _hosmer_lemeshow(res, hl_groups)
    vp, vp_note = (None, left_out["vp"]) if "vp" in left_out else _valprob(res)
    if "evidence" in left_out:
        ev, ev_note = None, left_out["evidence"]
    else:
        try:
            ev = result_evidence(res, evidence_rng)
            ev_note = None
        except (ValueError, RuntimeError) as exc:
            ev, ev_note = None, f"The evidence table was not computed: {exc}."
    figures, figure_notes = _FIGURES[kind.report_figures()](res, name, d, ev) if figure else ([], [])
    substitute = kind.substitute_evidence_rows(d)
    level = _level(d["alpha"])
    interval_verdict, interval_conclusion, _ = res.conclusion()  # the interval and its own test
    null_test = _null_test(res, d)
    ctx = {
        "name": name,
        "heading": f"{name} ({d['formula']})" if d["formula"] and d["formula"] != name else name,
        "anchor": f"model-{index + 1}",
        "conclusion": interval_conclusion,
        "evidence_conclusion": ev.conclusion() if ev is not None else None,
        "evidence_verdict": ev.verdict if ev is not None else interval_verdict,
        "evidence_table": ({**_evidence_table(ev), "caption": (
            f"Evidence on the calibration of {name}: every test on the same {d['n']} rows, at level "
            f"α = {fmt(d['alpha'])} (ECE² in squared probability units).")} if ev is not None else
            None if substitute is None else {**_substitute_evidence_table(substitute, d), "caption": (
                f"Evidence on the calibration of {name} that supports its weights, at level α = "
                f"{fmt(d['alpha'])} (ECE² in squared probability units); the rows that treat every row as one "
                "observation are listed with the reason they are left out.")}),
        "evidence_keys": [] if ev is None else list(ev.table.index),
        "evidence_note": ev_note,
        # a file's or Dask frame's evidence says what needs every row at once and was not computed
        "evidence_scope": ev.scope if ev is not None and kind.evidence_scope_shown() else None,
        "evidence_seed": None if ev is None else ev.seed,
        "sensitivity": None if ev is None or not len(ev.sensitivity) else {**_sensitivity_table(ev), "caption": (
            f"Bin sensitivity of {name}: the interval and the single-B test ({null_name(res)} null) at several "
            "numbers of bins B per dimension.")},
        "provenance": {**_provenance(res, d, source, command, None if ev is None else ev.seed),
                       "caption": f"Provenance of the result for {name}."},
        "settings": {**_settings(res, d), "caption": f"Settings of the analysis of {name}."},
        "estimates": {**estimates, "caption": (
            f"Estimate and {level} confidence interval of {name}: ECE² in squared probability units, "
            "ECE (its square root) in probability units.")},
        "regimes": {**regimes, "caption": (
            f"The two asymptotic regimes of the debiased estimator T for {name}: the asymptotic quantities"
            + ("." if null_test is None else
               f"; the {null_name(res)} test that decided whether 0 belongs to the interval is in the next table."
               if d["method"] == "adjusted" else f"; the {null_name(res)} test of ECE = 0 is in the next table."))},
        "null_test": None if null_test is None else {**null_test, "caption": (
            f"The finite-sample test of H0: ECE = 0 used for {name} at B = {d['n_bins']}: the "
            f"{null_name(res)} null.")},
        "notes": [_public(n) for n in d["notes"]],
        "hl": None if hl is None else {
            "test": {**hl["test"], "caption": f"Hosmer–Lemeshow test of {name}."},
            "compare": {**hl["compare"], "caption": (
                f"Plug-in and debiased estimates of ECE² (squared probability units) for {name}, on the "
                "report's bins and on the Hosmer–Lemeshow groups.")},
            "groups": {**hl["groups"], "caption": f"Hosmer–Lemeshow groups of {name}."}},
        "hl_note": None if hl_note is None else _public(hl_note),
        "valprob": None if vp is None else {**vp, "caption": (
            f"Validation metrics of {name} (definitions of R's rms::val.prob); Brier, Emax, E90 and Eavg in "
            "probability units (Brier squared).")},
        "valprob_note": None if vp_note is None else _public(vp_note),
        "bins": {**bins, "caption": (f"Bins of the estimator for {name}: B = {d['n_bins']}, "
                                     f"{d['n_occupied_bins']} occupied bins.")},
        "bins_file": bins_file,
        "bins_coordinates": _coordinate_words(d["mode"]),
        "bins_csv": bins_csv,
        "bins_href": "data:text/csv;charset=utf-8;base64," + base64.b64encode(bins_csv.encode("utf-8")).decode("ascii"),
        "evidence_record": None if ev is None else ev.to_dict(),
        "verdict": interval_verdict if ev is None else ev.verdict,
        "figures": figures,
        "figure_notes": figure_notes,
        "level": level,
        "mode": d["mode"],
        "evidence": not d["contains_zero"],
        **prose,  # weighting, weighting_short, clustering, clustering_short
        "data_rows": data_rows(res, d),
        "subgroups": None,
        "sites": None,
        "survival": _survival_context(res, name, ev),
    }
    return ctx


def _survival_curve_table(sev, name: str, t: str) -> dict | None:
    """The flexible calibration curve at the horizon in numbers: ICI, E50, E90, Emax and its Wald test (None when
    the survival evidence or the curve was not computed)."""
    curve = None if sev is None else sev.curve
    if curve is None:
        return None
    rows = [("ICI (mean |observed − predicted risk|)", fmt(curve.ici, 4)),
            ("E50 (median |observed − predicted risk|)", fmt(curve.e50, 4)),
            ("E90 (90th percentile)", fmt(curve.e90, 4)),
            ("Emax (largest)", fmt(curve.emax, 4)),
            ("Wald test that the curve is the identity", f"chi² = {fmt(curve.wald, 4)}, df = {curve.df}, "
                                                         f"{p_equals(curve.pvalue)}")]
    return {**_table(["Measure", "Value"], rows),
            "caption": (f"Flexible calibration curve of {name} at t = {t} (Cox model on a restricted cubic spline of "
                        f"cloglog(risk), {len(curve.knots)} knots; observed risk by t from Breslow's baseline): the absolute "
                        "differences between the curve and the predicted risks over the rows, in probability "
                        "units.")}


def _survival_context(res, name: str, ev) -> dict | None:
    """The censoring section of a survival result, and the Kaplan–Meier risk groups of its evidence."""
    rows = res.kind.censoring_rows()
    if rows is None:
        return None
    sev = None if ev is None else getattr(ev, "survival", None)
    t = fmt(res.survival.horizon)
    return {"curve": _survival_curve_table(sev, name, t),
            "censoring": {**_table(["Item", "Value"], rows),
                          "caption": f"Follow-up and censoring of {name} at the horizon t = {t}."},
            "groups": None if sev is None else {**_survival_groups_table(sev), "caption": (
                f"Kaplan–Meier risk by t = {t} per risk group of {name} (the reliability diagram's points) and "
                f"each group's term of the Greenwood–Nam–D'Agostino statistic "
                f"({fmt(sev.gnd_statistic, 4)}, df = {sev.gnd_df}).")}}


_MISSING_OPTION = re.compile(r"missing=['\"](\w+)['\"]")


def data_rows(res, d: dict) -> list[tuple[str, str]]:
    """The "Model and data" rows of one result: n, events and event rate, and how missing values were handled.

    Events are the rows with ``y = 1`` (binary) or with a correct top-1
    prediction (top-1), unweighted; the missing-data rule is read from the
    recorded call (``missing='raise'``, the default, when the call names none).
    """
    n, dropped = int(d["n"]), int(d["n_dropped"])
    rows = res.kind.event_rows()  # n and the events: counts of rows (by the horizon for a survival outcome)
    call = getattr(res, "call", None)
    found = _MISSING_OPTION.search(call) if call else None
    rule = found.group(1) if found else ("raise" if call else None)
    how = {"drop": "rows with a missing value in a model column were dropped (missing='drop')",
           "raise": "a missing value stops the analysis (missing='raise'), so none were present"}.get(
        rule, "the rule was not recorded (no Python call)" if rule is None else f"missing='{rule}'")
    rows.append(("Missing data", f"{fmt(n + dropped)} rows read, {fmt(dropped)} dropped, {fmt(n)} analysed; {how}"))
    impossible = impossible_outcomes(res)
    if impossible is not None:  # certain refutations, counted from the rows
        rows.append(("Impossible under calibration", f"{impossible.sentence()}: calibration is refuted"))
    return rows


def _substitute_evidence_table(rows: list, d: dict) -> dict:
    """The evidence table of a kind without one (a weighted result): the rows it gives."""
    return _table(["Test or measure", "Null hypothesis", "Statistic", "p-value or interval",
                   f"Verdict at α = {fmt(d['alpha'])}"], rows)


def _weighted_figures(res, name: str, d: dict, ev=None) -> tuple[list[dict], list[str]]:
    """The weighted reliability diagram of a weighted binary or top-1 result (a note otherwise)."""
    from calibtest.reporting import plotting

    if not res.kind.one_column:
        return [], [f"No figure is drawn for {name}: the weighted reliability diagram is drawn for binary and "
                    "top-1 targets; the bin table lists each bin's sum of weights and its weighted mean prediction "
                    "and outcome."]
    fig = plotting.weighted_reliability_figure(res, name)
    return [{"src": _png_data_uri(fig), "alt": f"Weighted reliability diagram of {name}",
             "caption": (f"Weighted reliability diagram of {name} ({res.weighting.kind}): each of the "
                         f"{d['n_occupied_bins']} occupied bins of width 1/B = {fmt(d['bin_width'], 4)} at its "
                         "weighted mean prediction Σwp/Σw against its weighted observed frequency Σwy/Σw, with "
                         "area proportional to its share of the total weight (strip underneath); the weights are "
                         "in the fit, as in the estimate. No per-bin intervals: the result keeps each bin's sum "
                         "of weights, not the row weights their variance needs.")}], []


#: The figures of each kind of result (``res.kind.report_figures()``).
_FIGURES = {"rows": lambda res, name, d, ev: _model_figures(res, name, d, ev),
            "survival": lambda res, name, d, ev: _survival_figures(res, name, d, ev),
            "weighted": lambda res, name, d, ev: _weighted_figures(res, name, d, ev)}


# --------------------------------------------------------------------------- subgroups
_GLOBAL_TEXT = {
    "bonferroni": "Bonferroni min-p: min(1, G · min p_g) over the G = {g} analysed groups (the first step of "
                  "Holm's procedure; size at most α whatever the dependence between groups)",
    "fisher": "Fisher's combination −2 Σ log p_g referred to chi-square with 2G = {df} degrees of freedom",
    "stouffer": "Stouffer's combination Σ Φ⁻¹(1 − p_g) / √G referred to N(0, 1)",
}


def _group_text(label) -> str:
    return ", ".join(map(str, label)) if isinstance(label, tuple) else str(label)


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is _NA


_NA = pd.NA  # to_frame() marks the numbers of a group without a result missing


def _cell(value, digits: int | None = None, p: bool = False) -> str:
    if _missing(value):
        return "—"
    if p:
        return fmt_p(float(value))
    if digits is None:
        return fmt(int(value))
    return fmt(float(value), digits)


def subgroup_rows(grouped) -> list[list[str]]:
    """The rows of the report's subgroup table, formatted from ``grouped.to_frame()``, then the pooled row.

    Columns: group, n, events, B, T (ECE²), interval for ECE², ECE, interval
    for ECE (``(0, u]`` when open at 0), its verdict (``contains 0`` or
    ``excludes 0``), p-value, Holm-adjusted p-value; 4 significant digits.
    """
    frame = grouped.to_frame()
    rows = []
    for label, r in zip(frame.index, frame.to_dict(orient="records")):
        res = grouped.groups.get(label)
        if res is None:
            rows.append([_group_text(label), _cell(r["n"]), _cell(r["events"]), "—", "not analysed", "—", "—", "—",
                         "—", "—", "—"])
            continue
        iv = res.conf_int()
        rows.append([_group_text(label), _cell(r["n"]), _cell(r["events"]), _cell(r["n_bins"]),
                     _cell(r["estimate"], 4), _interval_text(r["ci_lower"], r["ci_upper"], iv.lower_open, 4),
                     _cell(r["ece"], 4), _interval_text(r["ece_ci_lower"], r["ece_ci_upper"], iv.lower_open, 4),
                     interval_verdict(iv.contains_zero), _cell(r["pvalue"], p=True), _cell(r["pvalue_holm"], p=True)])
    pooled = grouped.pooled
    d = pooled.to_dict()
    events = pooled.kind.events()  # counted rows (by the horizon for a survival outcome), never IPCW outcomes
    if events is None and pooled.data is not None:
        events = int(np.rint(pooled.data.y[:, 0]).sum())
    events = "—" if events is None else fmt(events)
    rows.append(["all rows (pooled)", fmt(d["n"]), events,
                 fmt(d["n_bins"]), fmt(d["estimate"], 4),
                 _interval_text(d["ci_lower"], d["ci_upper"], d["ci_lower_open"], 4), fmt(d["ece"], 4),
                 _interval_text(d["ece_ci_lower"], d["ece_ci_upper"], d["ci_lower_open"], 4),
                 interval_verdict(pooled.conf_int().contains_zero), fmt_p(d["null_pvalue"]), "—"])
    return rows


def _measure_text(values: dict, name: str) -> str:
    """``0.95 [0.76, 1.15]`` from a table record (4 significant digits; an em dash when not defined)."""
    v = values.get(name)
    if _missing(v) or not np.isfinite(float(v)):
        return "—"
    lo, hi = values.get(f"{name}_ci_lower"), values.get(f"{name}_ci_upper")
    if _missing(lo) or not np.isfinite(float(lo)):
        return fmt(float(v), 4)
    return f"{fmt(float(v), 4)} {_interval_text(float(lo), float(hi), False, 4)}"


def subgroup_measure_rows(grouped) -> list[list[str]] | None:
    """The rows of the report's table of CITL, slope and O/E by subgroup (None when the result holds none).

    Formatted from ``grouped.to_frame()`` and ``grouped.pooled_measures``
    (computed once with the result); the ECE and its p-value repeated so that
    every group is read by every measure on one row.
    """
    frame = grouped.to_frame()
    if "oe" not in frame or not frame["oe"].notna().any():
        return None
    rows = []
    for label, r in zip(frame.index, frame.to_dict(orient="records")):
        if grouped.groups.get(label) is None:
            rows.append([_group_text(label), _cell(r["n"]), "not analysed", "—", "—", "—", "—"])
            continue
        rows.append([_group_text(label), _cell(r["n"]), _cell(r["ece"], 4), _cell(r["pvalue"], p=True),
                     _measure_text(r, "citl"), _measure_text(r, "slope"), _measure_text(r, "oe")])
    pm = getattr(grouped, "pooled_measures", {}) or {}
    rows.append(["all rows (pooled)", fmt(grouped.pooled.n), fmt(grouped.pooled.ece, 4),
                 fmt_p(grouped.pooled.null_pvalue), _measure_text(pm, "citl"), _measure_text(pm, "slope"),
                 _measure_text(pm, "oe")])
    return rows


def forest_figure(grouped):
    """The forest plot of a grouped result as a matplotlib ``Figure`` sized for the report page.

    7.2 inches wide; 0.3 inch per row (0.18 more per extra line of a wrapped label)
    plus 1.3 inches, at most 9 inches (smaller
    type above 26 rows), with the layout fitted around the group labels and the
    title over the whole width.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    import textwrap

    from calibtest.reporting.forest import LABEL_WIDTH, forest_rows, plot_forest

    labels = [r["label"] for r in forest_rows(grouped)]
    n_rows = len(labels)
    extra = sum(len(textwrap.wrap(label, LABEL_WIDTH)) - 1 for label in labels)  # wrapped label lines
    fig = Figure(figsize=(7.2, min(9.0, 1.3 + 0.3 * n_rows + 0.18 * extra)), dpi=FIGURE_DPI,
                 layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    plot_forest(grouped, ax=ax)
    title = ax.get_title(loc="left")  # over the whole width, not only over the axes (long labels)
    ax.set_title("", loc="left")
    fig.suptitle(title, x=0.01, ha="left", fontsize="medium")
    if n_rows > 26:
        ax.tick_params(axis="y", labelsize=max(4.0, 9.0 * 26 / n_rows))
    return fig


def _subgroup_context(grouped, name: str, index: int, figure: bool) -> dict:
    by = " × ".join(grouped.by)
    level = _level(grouped.alpha)
    frame = grouped.to_frame()
    analysed = int(frame["estimate"].notna().sum())
    alpha = grouped.alpha
    table = {**_table([f"Group ({', '.join(grouped.by)})", "n", "events", "B", "T (ECE²)", f"{level} CI for ECE²",
                       "ECE", f"{level} CI for ECE", "verdict", "p (ECE = 0)", "p (Holm)"], subgroup_rows(grouped)),
             "caption": (f"Calibration of {name} within the subgroups of {by}: the debiased estimate T of ECE² "
                         "(squared probability units) and the ECE (probability units) with the adjusted "
                         f"{level} interval of each group on its own B bins, the p-value of the test of ECE = 0 in "
                         f"the group and the Holm-adjusted p-value over the {analysed} analysed groups; the last "
                         "row is all rows together (4 significant digits).")}
    g_df = 2 * analysed if grouped.global_method == "fisher" else None
    method = _GLOBAL_TEXT[grouped.global_method].format(g=analysed, df=g_df)

    def verdict(p):
        if _missing(p):
            return "not computed"
        return "rejects" if p <= alpha else "does not reject"

    g_stat = {"bonferroni": "min p_g = ", "fisher": "−2 Σ log p_g = ", "stouffer": "Z = "}[grouped.global_method]
    het_note = getattr(grouped, "heterogeneity_note", None)  # why Cochran's Q was not computed, in words
    het_df = "—" if grouped.heterogeneity_df is None else fmt(int(grouped.heterogeneity_df))
    het_verdict = f"not computed: {het_note}" if het_note else verdict(grouped.heterogeneity_pvalue)
    tests = {**_table(["", "Global test", "Heterogeneity test"], [
        ("Null hypothesis", "the model is calibrated in every analysed group (ECE = 0 in each group)",
         "the squared calibration error ECE² is the same in every analysed group"),
        ("Method", method,
         "Cochran's Q = Σ_g (T_g − T̄)² / v_g with the inverse-variance mean T̄, referred to chi-square with "
         "G − 1 degrees of freedom; v_g the first- plus second-order variance of T_g"),
        ("Statistic", g_stat + _cell(grouped.global_statistic, 4), "Q = " + _cell(grouped.heterogeneity_statistic, 4)),
        ("Degrees of freedom", "—" if g_df is None else fmt(g_df), het_df),
        ("p-value", _cell(grouped.global_pvalue, p=True), _cell(grouped.heterogeneity_pvalue, p=True)),
        (f"Verdict at α = {fmt(alpha)}", verdict(grouped.global_pvalue), het_verdict)]),
        "caption": f"Tests across the subgroups of {by} for {name}."}
    notes = [_public(n) for n in grouped.notes()]
    multiplicity = (notes[0] + f" Each group's interval has its own {level} confidence level and is not adjusted "
                    f"for multiplicity: across {analysed} groups, some intervals can miss their group's ECE and "
                    "some unadjusted p-values can fall below α by chance; read the per-group results with the "
                    "Holm-adjusted p-values and the global test.")
    nulls = {}
    for label, null in zip(frame.index, frame["null"]):
        if not _missing(null):
            nulls.setdefault(str(null), []).append(_group_text(label))
    null_text = "; ".join(f"{k} null in {', '.join(v)}" for k, v in nulls.items())
    not_analysed = [f"{_group_text(label)}: {reason}" for label, reason in grouped.reasons.items()]
    fig = None
    fig_note = None
    if figure:
        try:
            fig = {"src": _png_data_uri(forest_figure(grouped)), "alt": f"Forest plot of {name} by {by}",
                   "cls": "tall",
                   "caption": (f"Forest plot of the calibration of {name} by {by}: the ECE (probability units) of "
                               f"each group (square) with its adjusted {level} interval, and of all rows together "
                               "(diamond, bottom). An interval that contains 0 starts at 0; a hollow circle marks "
                               "an interval open at 0. Groups not analysed are listed without an interval. The "
                               "title repeats the p-values of the global and heterogeneity tests.")}
        except ValueError as exc:
            fig_note = f"The forest plot was not drawn: {exc}."
    gp, hp = grouped.global_pvalue, grouped.heterogeneity_pvalue
    het_finding = f"not computed ({het_note})" if het_note else f"p {_p_eq(hp)}"
    finding = (f"Subgroups of {by} ({analysed} analysed of {len(frame)}): global test of calibration in every "
               f"group p {_p_eq(gp)} ({verdict(gp)} at α = {fmt(alpha)}); heterogeneity of the ECE² across groups "
               f"{het_finding}.")
    below = grouped.pooled_ece_text() if hasattr(grouped, "pooled_ece_text") else None
    if below is not None:
        finding += " " + _public(below)
    measure_rows = subgroup_measure_rows(grouped)
    measures = None if measure_rows is None else {
        **_table([f"Group ({', '.join(grouped.by)})", "n", "ECE", "p (ECE = 0)", f"CITL {level} CI",
                  f"slope {level} CI", f"O/E {level} CI"], measure_rows),
        "caption": (f"Every subgroup of {by} judged by every measure, for {name}: the ECE and the p-value of its "
                    f"test (as in the table above) beside {grouped.pooled.kind.recalibration_words()['report']}, "
                    f"with their {level} "
                    + ("cluster-robust intervals (t on each group's clusters - 1 df)"
                       if kind_flag(grouped.pooled, "clustered") else "Wald intervals")
                    + "; the last row is all rows together (4 significant digits). "
                    "An ECE of 0 beside a CITL or O/E interval that excludes its null is a group whose mean risk "
                    "is off by less than its binned test can see.")}
    return {"anchor": f"subgroups-{index + 1}", "title": f"Subgroups of {name} by {by}", "by": by,
            "measures": measures,
            "n_groups": len(frame), "n_analysed": analysed, "table": table, "tests": tests, "figure": fig,
            "figure_note": fig_note, "multiplicity": multiplicity, "notes": notes[1:], "null_text": null_text,
            "not_analysed": not_analysed, "finding": finding,
            "small": [f"{_group_text(label)}: {_public(note)}" for label, note in grouped.group_notes.items()]}


def meta_figure(meta):
    """The forest plots of a meta-analysis across sites, one panel per measure pooled, side by side, as a ``Figure``.

    7.2 inches wide, the panels sharing the site labels of the first;
    1.2 inches plus 0.26 inch per row high (at most 9 inches), so that for
    up to about 12 sites the figure keeps the report's aspect ratio.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from calibtest.reporting.forest import meta_forest_rows, plot_meta_forest

    measures = list(meta.measures)
    n_rows = max(len(meta_forest_rows(meta, m)) for m in measures)
    fig = Figure(figsize=(7.2, min(9.0, 1.2 + 0.26 * n_rows)), dpi=FIGURE_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(measures), sharey=True, squeeze=False)[0]
    for i, (ax, m) in enumerate(zip(axes, measures)):
        plot_meta_forest(meta, m, ax=ax, compact=True)
        ax.tick_params(axis="both", labelsize=7)
        if i:
            ax.tick_params(axis="y", labelleft=False)
        ax.xaxis.label.set_size(7)
    return fig


def _sites_context(grouped, name: str, index: int, figure: bool, meta_method: str = "REML",
                   hartung_knapp: bool = False) -> dict | None:
    """The section "Calibration across sites": the random-effects meta-analysis of the groups' measures, with
    tau^2 by ``meta_method`` and the Hartung-Knapp interval if asked (the held one with the defaults)."""
    if getattr(grouped, "meta", None) is None:
        return None
    meta = grouped.meta_analysis(method=meta_method, hartung_knapp=hartung_knapp)
    by = " × ".join(grouped.by)
    level = _level(meta.alpha)
    labels = {"log_oe": "O/E", "citl": f"CITL ({meta.citl_scale} scale)", "slope": "Calibration slope", "ece": "ECE"}
    rows = []
    for m in meta.measures:
        re = meta.pooled[m]
        r = re.row(natural=True)
        pi = ("— (fewer than 3 sites)" if _missing(r["pi_lower"]) or not np.isfinite(r["pi_lower"]) else
              _interval_text(r["pi_lower"], r["pi_upper"], False, 4))
        rows.append([labels[m], fmt(re.k), fmt(r["estimate"], 4),
                     _interval_text(r["ci_lower"], r["ci_upper"], False, 4), pi, fmt(re.tau2, 3),
                     f"{fmt(100 * re.i2, 3)}%", f"{fmt(re.q, 4)} ({re.q_df})", fmt_p(re.q_pvalue)])
    for m, why in meta.left_out_measures.items():
        rows.append([labels[m], "—", "not pooled", _public(why), "—", "—", "—", "—", "—"])
    interval = "Hartung–Knapp" if meta.hartung_knapp else "Wald"
    table = {**_table(["Measure", "sites k", "pooled", f"{level} CI ({interval})", f"{level} prediction interval",
                       "τ²", "I²", "Q (df)", "p (Q)"], rows),
             "caption": (f"Calibration of {name} across the sites (groups) of {by}: random-effects meta-analysis "
                         f"(τ² by {meta.method}) of each site's O/E (pooled as log O/E), CITL, calibration slope "
                         "and ECE (pooled as the debiased ECE² and shown as its square root); the prediction "
                         "interval is where the measure of a new site is expected to fall (4 significant digits; "
                         "τ² on the pooled scale).")}
    fig, fig_note = None, None
    if figure and meta.measures:
        try:
            fig = {"src": _png_data_uri(meta_figure(meta)), "alt": f"Forest plots of {name} across {by}",
                   "cls": "tall",  # one row per site: printed up to a page high, so that its labels stay legible
                   "caption": (f"Forest plots of the calibration of {name} across the sites of {by}, one panel per "
                               f"measure: each site's estimate (square, sized by its weight) with its {level} "
                               f"{'cluster-robust' if meta.clustered else 'Wald'} interval, the pooled estimate "
                               f"(diamond, spanning its {level} interval) and the "
                               "prediction interval for a new site (bar); dotted: perfect calibration.")}
        except ValueError as exc:
            fig_note = f"The forest plots were not drawn: {exc}."
    finding = None
    if "log_oe" in meta.pooled:
        re = meta.pooled["log_oe"]
        r = re.row(natural=True)
        pi = ("" if not np.isfinite(r["pi_lower"]) else
              f"; in a new site O/E is expected between {fmt(r['pi_lower'], 3)} and {fmt(r['pi_upper'], 3)}")
        finding = (f"Across the {re.k} sites of {by}, pooled O/E {fmt(r['estimate'], 3)} ({level} CI "
                   f"{fmt(r['ci_lower'], 3)} to {fmt(r['ci_upper'], 3)}), I² = {fmt(100 * re.i2, 3)}%{pi}.")
    return {"anchor": f"sites-{index + 1}", "title": f"Calibration across sites: {name} by {by}", "by": by,
            "table": table, "figure": fig, "figure_note": fig_note, "finding": finding,
            "notes": [_public(n) for n in meta.notes()]}


def _p_eq(p) -> str:
    if _missing(p):
        return "not computed"
    text = fmt_p(float(p), 3)
    return text if text.startswith("<") else f"= {text}"


class _Labels:
    """Map the names a comparison uses (formulas or right-hand sides) to the report's labels."""

    def __init__(self, results, names):
        self.by_formula = {r.formula: nm for r, nm in zip(results, names) if r.formula}
        self.by_name = {_model_name(r, i): nm for i, (r, nm) in enumerate(zip(results, names))}

    def __call__(self, name, result=None) -> str:
        formula = getattr(result, "formula", None)
        if formula in self.by_formula:
            return self.by_formula[formula]
        return self.by_name.get(name, name)


def _comparison_conclusion(cmp, labels) -> str | None:
    """The comparison's own sentence (``conclusion()`` of calib_compare's results); None for other objects."""
    conclusion = getattr(cmp, "conclusion", None)
    return None if conclusion is None else conclusion(labels=labels)


def _comparison_context(cmp, index: int, label: _Labels) -> dict:
    d = cmp.to_dict()
    if "comparisons" in d:  # all pairwise comparisons (Holm)
        level = _level(d.get("alpha"))
        headers = ["model a", "model b", "Δ = ECE_a² − ECE_b²", "std err", "z", "p-value", "p (Holm)",
                   "reject (Holm)", f"{level} CI for Δ"]
        pairs = list(getattr(cmp, "comparisons", ()))
        rows = []
        for i, r in enumerate(d["comparisons"]):
            pair = pairs[i] if i < len(pairs) else None
            rows.append((label(r.get("model_a", ""), getattr(pair, "result_a", None)),
                         label(r.get("model_b", ""), getattr(pair, "result_b", None)),
                         fmt(r.get("estimate")), fmt(r.get("se")), fmt(r.get("statistic"), 4),
                         fmt_p(r.get("pvalue")), fmt_p(r.get("pvalue_holm")), fmt(r.get("reject")),
                         f"[{fmt(r.get('ci_lower'))}, {fmt(r.get('ci_upper'))}]"))
        names = [label(n) for n in d.get("names", [])]
        title = f"Pairwise comparison of {len(names)} models: {', '.join(names)}"
        notes = [f"Family-wise error rate {fmt(d.get('alpha'))}, alternative: {d.get('alternative', '')}; "
                 f"p-values adjusted by Holm's step-down method; Δ in squared probability units."]
        if rows and any(r.get("paired") for r in d["comparisons"]):
            notes.append("Paired comparisons: the models were scored on the same rows.")
        shown = {n: label(n) for n in d.get("names", [])}
        for pair in pairs:  # the labels of the table's rows
            shown[pair.name_a] = label(pair.name_a, pair.result_a)
            shown[pair.name_b] = label(pair.name_b, pair.result_b)
        return {"title": title, "table": {**_table(headers, rows), "caption": title + "."}, "notes": notes,
                "cls": "wide", "conclusion": _comparison_conclusion(cmp, shown)}
    alpha = d.get("alpha")
    level = _level(alpha) if alpha is not None else ""
    name_a = label(d.get("name_a", "A"), getattr(cmp, "result_a", None))
    name_b = label(d.get("name_b", "B"), getattr(cmp, "result_b", None))
    lo, hi = d.get("ci_lower"), d.get("ci_upper")
    if lo is None or hi is None:  # one-sided: an infinite end
        ci = f"({'−∞' if lo is None else fmt(lo)}, {'∞' if hi is None else fmt(hi)}{')' if hi is None else ']'}"
        if lo is not None:
            ci = "[" + ci[1:]
    else:
        ci = f"[{fmt(lo)}, {fmt(hi)}]"
    rows = [("Model A", name_a), ("Model B", name_b),
            ("ECE_A² (squared probability units)", fmt(d.get("estimate_a"))),
            ("ECE_B² (squared probability units)", fmt(d.get("estimate_b"))),
            ("Δ = ECE_A² − ECE_B²", fmt(d.get("estimate"))), ("Standard error of Δ", fmt(d.get("se"))),
            ("z", fmt(d.get("statistic"), 4)), ("p-value", fmt_p(d.get("pvalue"))),
            (f"{level} confidence interval for Δ", ci),
            ("Alternative hypothesis", str(d.get("alternative", ""))),
            ("Pairing", f"{'paired' if d.get('paired') else 'unpaired'} ({d.get('pairing', '')})")]
    title = f"Comparison of {name_a} with {name_b}"
    return {"title": title, "table": {**_table(["Quantity", "Value"], rows), "caption": title + "."},
            "notes": [_public(n) for n in d.get("notes", [])], "cls": "kv",
            "conclusion": _comparison_conclusion(cmp, (name_a, name_b))}


def _overview(results, names) -> dict:
    """The models side by side: one column per model (up to 5 models), else one row per model."""
    rows = []
    for res, name in zip(results, names):
        d = res.to_dict()
        rows.append((name, d["mode"], fmt(d["n"]), fmt(d["n_bins"]), fmt(d["estimate"], 4),
                     _interval_text(d["ci_lower"], d["ci_upper"], d["ci_lower_open"], 4), fmt(d["ece"], 4),
                     _interval_text(d["ece_ci_lower"], d["ece_ci_upper"], d["ci_lower_open"], 4),
                     interval_verdict(res.conf_int().contains_zero), fmt_p(d["null_pvalue"], 3)))
    headers = ["Model", "target", "n", "B", "T (ECE²)", "CI for ECE²", "ECE", "CI for ECE", "verdict", "p (ECE = 0)"]
    caption = ("The models at a glance (4 significant digits): ECE² in squared probability units, ECE in "
               "probability units, intervals at each model's confidence level.")
    if len(rows) <= 5:  # transposed, so that the intervals fit the page width
        return {**_table(["Quantity"] + [r[0] for r in rows],
                         [[h] + [r[i] for r in rows] for i, h in enumerate(headers) if i > 0]),
                "caption": caption}
    return {**_table(headers, rows), "caption": caption}


def _unique_names(results, labels) -> list[str]:
    if labels is not None:
        labels = [str(x) for x in labels]
        if len(labels) != len(results):
            raise ValueError(f"labels must have one name per result ({len(results)}), got {len(labels)}")
        if len(set(labels)) < len(labels):
            raise ValueError(f"labels must be distinct, got {labels}")
        return labels
    names = [_model_name(r, i) for i, r in enumerate(results)]
    if len(set(names)) < len(names):
        names = [f"{nm} [{i + 1}]" for i, nm in enumerate(names)]
    return names


def _is_grouped(r) -> bool:
    """A subgroup analysis (``GroupedCalibrationResult``), recognised by its fields (reporting sits above groups)."""
    return all(hasattr(r, a) for a in ("groups", "pooled", "by", "global_pvalue", "heterogeneity_pvalue"))


def _as_result_list(results) -> list:
    results = list(results) if isinstance(results, (list, tuple)) else [results]
    if not results:
        raise ValueError("results must hold at least one CalibrationResult")
    for r in results:
        if _is_grouped(r):
            continue
        if not (hasattr(r, "to_dict") and hasattr(r, "bin_table") and hasattr(r, "conf_int")):
            raise TypeError("results must be CalibrationResult or GroupedCalibrationResult objects, got "
                            f"{type(r).__name__}")
    return results


def _shown(value) -> str:
    return value if value else NOT_STATED


def _document_control(meta: dict, title: str, generated: str) -> dict:
    """Title block, model-and-data table, revision history and signature block."""
    block = [(METADATA_FIELDS[k], _shown(meta[k])) for k in
             ("document_id", "document_version", "organisation", "model_name", "model_version",
              "author", "reviewer", "approver")]
    block.append(("Date generated", generated))
    model_data = _table(["Item", "Value"], [(METADATA_FIELDS[k], _shown(meta[k])) for k in
                                            ("model_name", "model_version", "intended_use", "population",
                                             "outcome_definition", "data_source", "data_period",
                                             "inclusion_criteria")])
    revisions = _table(["Version", "Date", "Description"],
                       [(r["version"], r["date"], r["description"]) for r in meta["revisions"]]
                       or [(NOT_STATED, NOT_STATED, "no revision history was given")])
    signatures = _table(["Role", "Name", "Date", "Signature"],
                        [("Prepared by (author)", _shown(meta["author"]), "", ""),
                         ("Reviewed by (reviewer)", _shown(meta["reviewer"]), "", ""),
                         ("Approved by (approver)", _shown(meta["approver"]), "", "")])
    return {
        "title_block": block,
        "document_id": _shown(meta["document_id"]),
        "document_version": _shown(meta["document_version"]),
        "author": meta["author"] or "",
        "model_data": {**model_data, "caption": "The model under validation and the validation data."},
        "revisions": {**revisions, "caption": "Revision history of this document."},
        "signatures": {**signatures, "caption": "Approval: prepared, reviewed and approved by."},
    }


#: How the report names the options of an analysis plan (the keyword of ``calibtest.plan`` in brackets).
PLAN_OPTION_LABELS = {
    "alpha": "significance level α (alpha)",
    "n_bins": "bins per coordinate B (n_bins)",
    "null": "null distribution of the test (null)",
    "method": "interval method (method)",
    "k": "top-k target k (k)",
    "n_classes": "number of classes K (n_classes)",
    "tests": "tests to report (tests)",
    "subgroups": "subgroups (subgroups)",
    "acceptance": "acceptance criteria (acceptance)",
    "primary": "primary acceptance criterion (primary)",
    "sample_size": "sample size (sample_size)",
}


def _plan_value(text: str) -> str:
    return "not fixed in the plan" if text == "not set" else text


def _deviation_reason(dev, reasons: dict) -> str:
    stated = reasons.get(dev.option, NOT_STATED)
    return f"{dev.note}; reason: {stated}" if dev.note else stated


def _plan_context(check: dict, figure: bool = True) -> dict:
    plan = check["plan"]
    out = {"statement": check["statement"], "has_plan": plan is not None, "options": None, "deviations": None,
           "sample_size": None, "achieved": [], "curve": None}
    if plan is None:
        return out
    out["options"] = {**_table(["Option", "Planned value"], [(PLAN_OPTION_LABELS.get(k, k), _plan_value(v))
                                                              for k, v in check["options"].items()]),
                      "caption": "The pre-specified analysis options."}
    if check["deviations"]:
        reasons = check["reasons"]
        out["deviations"] = {**_table(["Model", "Option", "Planned", "Used", "Reason"],
                                      [(v.model, PLAN_OPTION_LABELS.get(v.option, v.option), _plan_value(v.planned),
                                        _plan_value(v.used), _deviation_reason(v, reasons))
                                       for v in check["deviations"]]),
                             "caption": "Deviations of the analysis from the pre-specified plan."}
    if plan.sample_size:
        multi = len(check["achieved"]) > 1
        out["achieved"] = [(f"{name}: " if multi else "") + pva.sentence for name, pva in check["achieved"]]
        if figure and check["achieved"]:
            out["curve"] = _plan_curve_figure(plan.sample_size, [pva.achieved_n for _, pva in check["achieved"]])
        out["sample_size"] = {**_table(["Item", "Value"], sample_size_rows(plan.sample_size)),
                              "caption": "The sample-size calculation of the analysis plan." +
                                         (" Its curve is the figure below, recomputed from the plan's inputs."
                                          if out["curve"] else "")}
    return out


def _plan_curve_figure(record: dict, achieved: list) -> dict | None:
    """Power (or expected width) against n recomputed from the plan's inputs, planned and achieved n marked."""
    import matplotlib.pyplot as plt

    if not_recomputable(record):
        return None
    planned = int(record["n"])
    top = max([planned] + achieved)
    grid = np.unique(np.round(np.geomspace(max(20, planned // 20), 4 * top, 80)).astype(np.int64))
    curve = planned_curve(record, grid)
    power = record.get("target", "power") == "power"
    values = curve["power"] if power else curve["expected_width"]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(grid, values, "-", color="C0", label="analytic, from the plan's inputs")
    ax.axhline(record["target_value"], color="grey", lw=0.8, ls="--", label="target")
    ax.axvline(planned, color="C2", lw=0.9, ls=":", label=f"planned n = {planned}")
    for i, n in enumerate(sorted(set(achieved))):
        ax.axvline(n, color="C3", lw=0.9, ls="-.", label=f"achieved n = {n}" if i == 0 else None)
    ax.set_xscale("log")
    ax.set_xlabel("sample size n")
    ax.set_ylabel("power" if power else "expected ECE-scale interval width")
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    what = "power" if power else "expected width of the ECE-scale interval"
    return {"src": _png_data_uri(fig), "alt": f"Planned {what} against the sample size",
            "caption": (f"The {what} of the plan's sample-size calculation against n, recomputed with calib_power "
                        "(analytic) from the inputs the plan stores, with the planned and the achieved n marked.")}


def _acceptance_context(plan, results, names) -> dict | None:
    """The Acceptance section: each model's verdict on the plan's criteria (``res.acceptance``, computed once)."""
    if plan is None or not plan.acceptance:
        return None
    multi = len(results) > 1
    models = []
    for res, name in zip(results, names):
        ev = res.acceptance(plan.acceptance, alpha=plan.alpha, primary=plan.primary,
                            model=f"Model {name}" if multi else "The model")
        rows = []
        for row in ev.table.to_dict(orient="records"):
            head = row["quantity"]  # the measure with its scale, as the result's kind names it
            limit = (f"< {fmt(row['upper_limit'], 4)}" if row["criterion"] == "ece_below" else
                     f"within ({fmt(row['lower_limit'], 4)}, {fmt(row['upper_limit'], 4)})")
            if row["verdict"] == ev.NOT_EVALUABLE:
                rows.append((head + (" (primary)" if row["primary"] else ""), limit, "—", "—", row["test"], "—",
                             f"not evaluable: {row['reason']}"))
                continue
            if row["criterion"] == "ece_below":
                interval = f"≤ {fmt(row['ci_upper'], 4)} ({row['interval']})"
            else:
                interval = f"[{fmt(row['ci_lower'], 4)}, {fmt(row['ci_upper'], 4)}] ({row['interval']})"
            estimate = fmt(row["estimate"], 4)
            if row["criterion"] == "ece_below" and row["estimate"] == 0.0:
                estimate += " (T ≤ 0)"
            rows.append((head + (" (primary)" if row["primary"] else ""), limit, estimate, interval,
                         row["test"], fmt_p(row["pvalue"]), row["verdict"]))
        table = {**_table(["Criterion", "Pre-specified limit", "Estimate", "Bound or interval", "Test", "p-value",
                           "Verdict"], rows),
                 "caption": (f"Acceptance criteria of the analysis plan{f' for {name}' if multi else ''}, each "
                             f"tested at alpha = {fmt(ev.alpha)}: the ECE margin by the margin test (met when the "
                             "one-sided upper confidence bound is below the margin), CITL, slope and O/E by two "
                             "one-sided tests (met when the interval lies inside the limits).")}
        models.append({"name": name, "sentence": ev.sentence, "table": table, "all_met": ev.all_met,
                       "record": ev.to_dict()})
    primary = (f" The primary criterion is {criterion_text(plan.primary, plan.acceptance[plan.primary])}; the "
               "others are secondary." if plan.primary else " Every criterion is co-primary.")
    intro = (f"The analysis plan (SHA-256 {plan.sha256[:16]}…) fixed {len(plan.acceptance)} acceptance "
             f"{'criterion' if len(plan.acceptance) == 1 else 'criteria'} before the data were analysed." + primary +
             " The model meets the criteria when it meets every one (an intersection-union test at level alpha); a "
             "criterion that cannot be evaluated on a result is stated with the reason and counts as not met.")
    return {"intro": intro, "models": models}


def _number(ctx: dict) -> None:
    """Number the tables and figures in the order the template shows them (adds label, id)."""
    numbers = Numbering()
    t, f = numbers.table, numbers.figure
    for a in (ctx["acceptance"] or {}).get("models", ()):
        t(a["table"])
    for m in ctx["models"]:
        if m["evidence_table"]:
            t(m["evidence_table"])
    if ctx["overview"]:
        t(ctx["overview"])
    t(ctx["doc"]["model_data"])
    for key in ("options", "deviations", "sample_size"):
        if ctx["plan"][key]:
            t(ctx["plan"][key])
    if ctx["plan"]["curve"]:
        f(ctx["plan"]["curve"])
    if ctx["overlay_figure"]:
        f(ctx["overlay_figure"])
    for c in ctx["comparisons"]:
        t(c["table"])
    for m in ctx["models"]:
        for key in ("estimates", "regimes", "null_test", "settings"):
            if m[key]:
                t(m[key])
        if m["survival"]:
            t(m["survival"]["censoring"])
        for fig in m["figures"]:
            f(fig)
        if m["survival"] and m["survival"]["groups"]:
            t(m["survival"]["groups"])
        if m["survival"] and m["survival"]["curve"]:
            t(m["survival"]["curve"])
        if m["sensitivity"]:
            t(m["sensitivity"])
        t(m["provenance"])
        if m["hl"]:
            for key in ("test", "compare", "groups"):
                t(m["hl"][key])
        if m["valprob"]:
            t(m["valprob"])
        t(m["bins"])
        sg = m["subgroups"]
        if sg:
            t(sg["table"])
            if sg["measures"]:
                t(sg["measures"])
            if sg["figure"]:
                f(sg["figure"])
            t(sg["tests"])
        if m["sites"]:
            t(m["sites"]["table"])
            if m["sites"]["figure"]:
                f(m["sites"]["figure"])
    t(ctx["versions"])
    t(ctx["doc"]["revisions"])
    t(ctx["doc"]["signatures"])


def _toc(ctx: dict) -> list[dict]:
    entries = ([("acceptance", "Acceptance")] if ctx["acceptance"] else []) + \
        [("summary", "Summary of findings"), ("model-and-data", "Model and data"), ("analysis-plan", "Analysis plan")]
    if ctx["multi"] or ctx["has_comparisons"]:
        entries.append(("comparisons", "Comparison of the models"))
    for m in ctx["models"]:
        entries.append((m["anchor"], m["section_title"]))
        if m["subgroups"]:
            entries.append((m["subgroups"]["anchor"], m["subgroups"]["title"]))
        if m["sites"]:
            entries.append((m["sites"]["anchor"], m["sites"]["title"]))
    entries += [("methods", "Methods"), ("limitations", "Limitations"),
                ("software", "Software and reproducibility"), ("references", "References"),
                ("revision-history", "Revision history"), ("approval", "Approval")]
    return [{"anchor": a, "number": str(i), "title": title} for i, (a, title) in enumerate(entries, 1)]


def limitation_of_null(results, names) -> str:
    """The Limitations bullet on the test and the interval, consistent with the null each result used."""
    def method_words(method):
        se = "; ".join(sorted({r.kind.se_words() for r in results if r.method == "adjusted"}))
        return (f"the upper end of the adjusted interval uses the normal approximation of T in the miscalibrated "
                f"regime ({se})" if method == "adjusted" else
                f"the {method} interval is asymptotically valid")
    def clustered(r):
        return kind_flag(r, "clustered")

    finite = [(nm, r) for nm, r in zip(names, results) if r.null != "asymptotic" and not clustered(r)]
    flips = [(nm, r) for nm, r in zip(names, results) if r.null != "asymptotic" and clustered(r)]
    asym = [(nm, r) for nm, r in zip(names, results) if r.null == "asymptotic"]
    parts = []
    if flips:  # the cluster sign-flip test: exact only for errors symmetric within clusters
        who = "" if len(flips) == len(results) else " for " + ", ".join(nm for nm, _ in flips)
        parts.append(f"The test of ECE = 0{who} is the cluster sign-flip test: it refers T_cl to its values when "
                     "the signs of whole clusters' errors are flipped, which holds its level when each cluster's "
                     "errors are symmetric about 0 and approximately otherwise; with few clusters it has few "
                     "patterns and little power")
    if finite:
        who = "" if not (asym or flips) else " for " + ", ".join(nm for nm, _ in finite)
        nulls = sorted({null_name(r) for _, r in finite})
        parts.append(f"The test of ECE = 0{who} is a finite-sample test ({'; '.join(nulls)} null), conditional "
                     "on the observed predictions, so its level does not rest on a large-n approximation (a Monte "
                     "Carlo p-value carries simulation error, shown with its number of draws)")
    if asym:
        who = "" if not finite else " for " + ", ".join(nm for nm, _ in asym)
        parts.append(f"The test of ECE = 0{who} uses the asymptotic normal law of T; with few rows per bin its "
                     "level can deviate from the nominal value")
    methods = sorted({r.method for r in results if not clustered(r)})
    if methods:
        parts.append("; ".join(method_words(m) for m in methods).capitalize()
                     + ", so with few rows per bin the coverage can deviate from the nominal level")
    if any(clustered(r) for r in results):
        parts.append("The clustered interval uses the cluster-robust standard error √(V₁ + V₀) with t quantiles "
                     "on G − 1 degrees of freedom; it needs independent clusters, and with fewer than 20 clusters "
                     "its coverage can deviate from the nominal level")
    return ". ".join(parts) + "."


def _resolve_plan(plan):
    from calibtest.inputs.plan import AnalysisPlan

    if plan is None or isinstance(plan, AnalysisPlan):
        return plan
    if isinstance(plan, (str, os.PathLike)):
        if not os.path.isfile(plan):  # as ``calibtest report --plan`` refuses it
            raise OptionError(f"plan: file not found: {os.fspath(plan)}")
        return AnalysisPlan.read(plan)
    raise OptionTypeError(f"plan must be a path to a plan file or an AnalysisPlan, got {type(plan).__name__}")


def _as_comparisons(comparisons) -> list:
    if comparisons is None:
        comparisons = []
    elif hasattr(comparisons, "to_dict"):
        comparisons = [comparisons]
    elif isinstance(comparisons, (list, tuple)):
        comparisons = list(comparisons)
    else:
        raise OptionTypeError(f"comparisons must be a result of calibtest.calib_compare or a list of them, got "
                              f"{type(comparisons).__name__}")
    for c in comparisons:
        if not hasattr(c, "to_dict"):
            raise OptionTypeError(f"comparisons must be results of calibtest.calib_compare, got {type(c).__name__}")
    return comparisons


@dataclass(frozen=True)
class ReportOptions:
    """What :func:`report` passes through to the report's context: its keywords other than the results,
    the path and the templates (see :func:`report`).

    Attributes
    ----------
    comparisons, title, purpose, labels, source, command, hl_groups, metadata, plan, rng,
    deviation_reasons, meta_method, hartung_knapp
        As in :func:`report`.
    figures : bool
        False skips the (slowest) figure rendering.
    generated : datetime or None
        The report's time (None: now).
    """

    comparisons: object = None
    title: str | None = None
    purpose: str | None = None
    labels: Sequence[str] | None = None
    source: object = None
    command: str | None = None
    hl_groups: int = 10
    metadata: dict | None = None
    plan: object = None
    rng: object = None
    figures: bool = True
    generated: datetime | None = None
    deviation_reasons: dict | None = None
    meta_method: str = "REML"
    hartung_knapp: bool = False
    horizon_unit: str | None = None


def check_horizon_unit(unit) -> str | None:
    """``horizon_unit`` checked: None, or a non-empty string naming the unit of the survival times ("days")."""
    if unit is None:
        return None
    if not isinstance(unit, str):
        raise OptionTypeError(f"horizon_unit must be a string naming the unit of the follow-up times, such as "
                              f"'days', got {type(unit).__name__} {unit!r}")
    if not unit.strip():
        raise OptionError("horizon_unit must name the unit of the follow-up times (such as 'days'), got an empty "
                          "string")
    return unit.strip()


#: Keys of a model's context that hold data, not prose: the horizon's unit is not written into them.
_DATA_KEYS = frozenset({"src", "bins_csv", "bins_href", "result_href", "evidence_record", "anchor", "id"})


def _with_horizon_unit(value, pattern: re.Pattern, replacement: str):
    """``value`` (a context's strings, lists and dicts) with every "t = <horizon>" followed by the unit."""
    if isinstance(value, str):
        return pattern.sub(replacement, value)
    if isinstance(value, list):
        return [_with_horizon_unit(v, pattern, replacement) for v in value]
    if isinstance(value, tuple):
        return tuple(_with_horizon_unit(v, pattern, replacement) for v in value)
    if isinstance(value, dict):
        return {k: v if k in _DATA_KEYS else _with_horizon_unit(v, pattern, replacement) for k, v in value.items()}
    return value


def _apply_horizon_unit(ctx: dict, results, unit: str | None) -> None:
    """The horizon printed with its unit in the prose and tables of each survival model ("t = 1826.25 days")."""
    if unit is None:
        return
    accepted = {a["name"]: a for a in (ctx["acceptance"] or {}).get("models", ())}
    for m, res in zip(ctx["models"], results):
        if not res.kind.survival_outcome:
            continue
        h = fmt(res.survival.horizon)
        pattern = re.compile(rf"\bt = {re.escape(h)}(?!\w|\.\d)")
        m.update(_with_horizon_unit({k: v for k, v in m.items()}, pattern, f"t = {h} {unit}"))
        for row in (m["survival"] or {}).get("censoring", {}).get("rows", ()):
            if row[0].startswith("Horizon t") and row[1] == h:
                row[1] = f"{h} {unit}"
        if m["name"] in accepted:
            accepted[m["name"]].update(_with_horizon_unit(dict(accepted[m["name"]]), pattern, f"t = {h} {unit}"))
        m["horizon_unit"] = unit


def build_context(results, options: ReportOptions | None = None, **keywords) -> dict:
    """The template context: strings, lists and ``to_dict()`` values only.

    Parameters
    ----------
    results
        As in :func:`report`.
    options : ReportOptions, optional
        The report's options; without it, ``ReportOptions(**keywords)``
        (the keywords of :func:`report`, and ``figures``, ``generated``).
    """
    if options is None:
        options = ReportOptions(**keywords)
    elif keywords:
        raise TypeError("give build_context a ReportOptions or its fields as keywords, not both")
    o = options
    comparisons, title, purpose, labels, source, command = (o.comparisons, o.title, o.purpose, o.labels, o.source,
                                                            o.command)
    hl_groups, metadata, plan, rng, figures, generated = o.hl_groups, o.metadata, o.plan, o.rng, o.figures, o.generated
    deviation_reasons = o.deviation_reasons
    horizon_unit = check_horizon_unit(o.horizon_unit)
    meta_method = check_option("meta_method", o.meta_method)
    hartung_knapp = check_option("hartung_knapp", o.hartung_knapp)
    items = _as_result_list(results)
    results = [r.pooled if _is_grouped(r) else r for r in items]  # a subgroup analysis: its pooled result
    meta = check_metadata(metadata)
    if labels is None and len(results) == 1 and meta["model_name"]:
        labels = [meta["model_name"]]  # one model: the document's model name is its label
    names = _unique_names(results, labels)
    plan = _resolve_plan(plan)
    check_deviation_reasons(deviation_reasons, plan)  # before the figures: a bad argument fails fast
    if source is None or isinstance(source, dict):
        sources = [source] * len(results)
    else:
        if not isinstance(source, (list, tuple)) or not all(s is None or isinstance(s, dict) for s in source):
            raise OptionTypeError(f"source must be a dict or a list of one dict per result, got "
                                  f"{type(source).__name__}")
        sources = list(source)
        if len(sources) != len(results):
            raise ValueError(f"source must be a dict or one dict per result ({len(results)}), got {len(sources)}")
    comparisons = _as_comparisons(comparisons)
    generated = datetime.now().astimezone() if generated is None else generated
    generated_text = generated.isoformat(timespec="seconds")
    title = title if title else "Calibration validation report"
    models = [_model_context(r, nm, i, source=s, command=command, hl_groups=hl_groups, figure=figures,
                             evidence_rng=rng)
              for i, (r, nm, s) in enumerate(zip(results, names, sources))]
    multi = len(results) > 1
    for m, item, i in zip(models, items, range(len(items))):
        m["section_title"] = f"Model: {m['name']}"
        if _is_grouped(item):
            m["subgroups"] = _subgroup_context(item, m["name"], i, figures)
            m["sites"] = _sites_context(item, m["name"], i, figures, meta_method, hartung_knapp)
    overlay = None
    same_target = len({(r.mode, r.k, _n_coordinates(r)) for r in results}) == 1
    if figures and multi and same_target:
        from calibtest.reporting import plotting

        binary = all(r.kind.one_column and r.data is not None for r in results)
        if binary:
            try:
                src = _png_data_uri(plotting.flexible_curve_figure(results, names, alpha=results[0].alpha))
            except ValueError:  # e.g. a constant outcome: the per-model sections say why
                binary = False
        if binary:
            overlay = {"src": src,
                       "alt": "Flexible calibration curves of the models overlaid",
                       "caption": ("Flexible calibration curves of the models overlaid (restricted cubic spline "
                                   "logistic recalibration [9]), each with its pointwise band and its "
                                   "calibration-in-the-large and slope; the strips show each model's "
                                   "predictions of events (up) and non-events (down).")}
        else:
            overlay = {"src": _png_data_uri(plotting.display_reliability_figure(results, names)),
                       "alt": "Reliability diagrams of the models overlaid at display bins",
                       "caption": ("Reliability diagrams of the models overlaid, each at its own display bins. "
                                   + plotting.display_bins_caption(results))}
    label = _Labels(results, names)
    check = plan_check(plan, results, names, reported_tests(models, bool(comparisons)),
                       subgroups=[item.by if _is_grouped(item) else None for item in items],
                       reasons=deviation_reasons)
    methods = {r.method for r in results}
    null_kinds = {str(getattr(r, "null", "asymptotic")) for r in results}
    doc = _document_control(meta, title, generated_text)
    for m in models:  # the re-weighting of each weighted analysis, next to the population it describes
        for label_, value in m.get("data_rows", ()):
            doc["model_data"]["rows"].append([f"{label_} ({m['name']})" if multi else label_, value])
        if m["weighting"]:
            doc["model_data"]["rows"].append([f"Re-weighting of {m['name']}" if multi else "Re-weighting",
                                              m["weighting"]])
    subgroup_models = [m for m in models if m["subgroups"]]
    for m in subgroup_models:
        doc["model_data"]["rows"].append([f"Subgroups of {m['name']}" if multi else "Subgroups",
                                          f"analysed by {m['subgroups']['by']}: {m['subgroups']['n_groups']} "
                                          f"groups, {m['subgroups']['n_analysed']} analysed"])
    subject = purpose if purpose else ("Calibration validation of " + ", ".join(names))
    ctx = {
        "title": title,
        "purpose": purpose,
        "subject": subject,
        "keywords": "calibration, expected calibration error, l2-ECE, confidence interval, validation",
        "generated": generated_text,
        "versions": {**_table(["Software", "Version"], _versions()),
                     "caption": "Software used to produce this report."},
        "command": command,
        "multi": multi,
        "doc": doc,
        "meta_missing": [METADATA_FIELDS[k] for k, v in meta.items() if not v],
        "plan": _plan_context(check, figures),
        "acceptance": _acceptance_context(plan, results, names),
        "overview": _overview(results, names) if multi else None,
        "overlay_figure": overlay,
        "comparisons": [_comparison_context(c, i, label) for i, c in enumerate(comparisons)],
        "models": models,
        "alpha_text": ", ".join(sorted({fmt(r.alpha) for r in results})),
        "uses_hulc": "hulc" in methods,
        "uses_bootstrap": "bootstrap" in methods,
        "uses_subsampling": "subsampling" in methods,
        "uses_tcal": any(r.kind.full_calibration for r in results) or any("tcal" in m for m in methods | null_kinds),
        "uses_conditional_null": bool({str(getattr(r, "null", "asymptotic")) for r in results
                                       if not r.kind.clustered} - {"asymptotic"}),
        "has_clustering": any(r.kind.clustered for r in results),
        "limitation_null": limitation_of_null(results, names),
        "has_hl": any(m["hl"] is not None for m in models),
        "has_valprob": any(m["valprob"] is not None for m in models),
        # the paragraph on the multi-scale test, Hosmer-Lemeshow, ...: not for a survival result censored before
        # the horizon, whose evidence table holds the IPCW interval and the survival rows (its own paragraph)
        "has_evidence": any(m["evidence_table"] is not None and not getattr(r, "censored", False)
                            for m, r in zip(models, results)),
        "has_flexible": any("Flexible" in f["caption"] for m in models for f in m["figures"]),
        "has_comparisons": bool(comparisons),
        "auto_bins": any(r.n_bins_rule == "auto" for r in results),
        "has_subgroups": bool(subgroup_models),
        "has_weighting": any(m["weighting"] for m in models),
        "has_survival": any(m["survival"] for m in models),
        # Wilson's display-bin reliability diagram: every kind but one whose diagram is that at the horizon
        "gnd_rule": ("marked unreliable and never counted in the conclusion when "
                     + (f"more than {100 * GND_CENSORING_LIMIT:g}% of the rows are" if GND_CENSORING_LIMIT > 0 else
                        "any row is") + " censored before t, when more than one event "
                     f"falls on one time by t, or when a group has fewer than {MIN_GROUP_EVENTS} events by t (its "
                     "size at a calibrated model was measured well above α there)"),
        "has_display_bins": any(r.kind.report_figures() != "survival" for r in results),
        "global_methods": sorted({item.global_method for item in items if _is_grouped(item)}),
    }
    cited = report_references(results, ctx["has_subgroups"], ctx["has_weighting"])
    ctx["ref"] = {key: str(i) for i, key in enumerate(cited, 1)}
    ctx["references"] = [REFERENCES[key] for key in cited]
    _number(ctx)
    ctx["toc"] = _toc(ctx)
    ctx["section_number"] = {e["anchor"]: e["number"] for e in ctx["toc"]}
    for m in models:  # consecutive subsection numbers, only for the subsections the model has
        shown = ["estimate", "settings"] + (["survival"] if m["survival"] else []) + \
            (["figures"] if m["figures"] or m["figure_notes"] else []) + \
            ["provenance"] + (["hl"] if m["hl"] else []) + (["valprob"] if m["valprob"] else []) + ["notes", "bins"]
        m["sub"] = {key: f"{ctx['section_number'][m['anchor']]}.{i}" for i, key in enumerate(shown, 1)}
    accepted = {a["name"]: a["record"] for a in (ctx["acceptance"] or {}).get("models", ())}
    _apply_horizon_unit(ctx, results, horizon_unit)
    records = []
    for i, (m, item) in enumerate(zip(models, items), 1):  # the machine-readable result, linked and attached
        record = result_record(item, m["evidence_record"], m["verdict"], accepted.get(m["name"]))
        if m.get("horizon_unit"):
            record["horizon_unit"] = m["horizon_unit"]
        records.append(json.dumps(record, indent=1))
        m["result_file"] = result_file_name(i, m["name"], _is_grouped(item))
        m["result_href"] = "data:application/json;charset=utf-8;base64," + base64.b64encode(
            records[-1].encode("utf-8")).decode("ascii")
    ctx["_attachments"] = pdf_attachments(items, names, comparisons, plan,
                                          [(m["bins_file"], m["bins_csv"]) for m in models], records)
    return ctx


# --------------------------------------------------------------------------- rendering
def builtin_templates() -> Path:
    """The folder of the built-in report templates (``report.html``, ``title_page.html``, ``report.css``, ...).

    An installed package has them in ``calibtest/templates/`` (the wheel maps
    the repository's top-level ``templates/`` there); a source checkout (the
    package imported from the repository, editable installs included) reads
    the top-level ``templates/`` itself.
    """
    package = Path(__file__).resolve().parent.parent  # the calibtest package folder
    for folder in (package / "templates", package.parent / "templates"):
        if (folder / "report.html").is_file():
            return folder
    raise FileNotFoundError(f"the report templates are missing: neither {package / 'templates'} (an installed "
                            f"calibtest) nor {package.parent / 'templates'} (a source checkout) holds report.html")


def _template_environment(templates=None):
    """Jinja2 environment over an organisation's ``templates`` folder (optional) and the built-in templates.

    A template is looked up in ``templates`` first and then among the
    built-in ones, so an organisation replaces only what it provides (e.g.
    ``title_page.html``); the built-in templates are also reachable as
    ``calibtest/<name>``, so an organisation's ``report.html`` can
    ``{% extends "calibtest/report.html" %}`` and override blocks.  Every
    template is autoescaped and an undefined variable is an error.
    """
    import jinja2

    builtin = jinja2.FileSystemLoader(str(builtin_templates()))
    loaders = ([jinja2.FileSystemLoader(templates)] if templates is not None else []) + \
        [builtin, jinja2.PrefixLoader({"calibtest": builtin})]
    return jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "htm", "xml"), default=True,
                                            default_for_string=True),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def _template_error(exc, templates) -> Exception:
    """A template's error as one line naming the template and line (an OptionError for ``templates=``).

    Jinja puts the template's file and line into the traceback of an error
    raised while rendering (an undefined variable) and into the exception of
    a syntax error.
    """
    import traceback

    import jinja2

    filename, line = getattr(exc, "filename", None), getattr(exc, "lineno", None)
    if filename is None:  # a rendering error: the innermost frame that is a template
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if f.filename.endswith((".html", ".htm", ".css", ".j2", ".xml"))]
        if frames:
            filename, line = frames[-1].filename, frames[-1].lineno
    where = f"template {filename or '?'}" + (f", line {line}" if line else "")
    kind = "undefined variable" if isinstance(exc, jinja2.UndefinedError) else "template error"
    text = f"{where}: {kind}: {exc.message or exc}"
    own = templates is not None and filename is not None and \
        Path(filename).resolve().is_relative_to(Path(templates).resolve())
    return OptionError(f"templates: {text}") if own else RuntimeError(f"report {text}")


#: Plain-text notation of the console summaries (shared with the report) and its typeset form.
_TYPESET = (("ECE^2", "ECE²"), ("Delta compares", "Δ compares"))


def _render(ctx: dict, pdf: bool = False, templates=None, name: str = "report.html") -> str:
    """The report's HTML; ``pdf=True`` for the document WeasyPrint lays out (files named as attachments).

    ``name``: the template (``report.html``; ``monitor_report.html`` for a monitor's report).

    ``templates``: an organisation's folder of templates, used before the
    built-in ones.  Sentences shared with the console summaries write ECE^2
    and Delta in ASCII; the report typesets them (ECE², Δ) like its own text.
    """
    import jinja2

    try:
        html = _template_environment(templates).get_template(name).render(**ctx, pdf=pdf)
    except jinja2.TemplateError as exc:
        raise _template_error(exc, templates) from exc
    for plain, typeset in _TYPESET:  # a loop over the two notations
        html = html.replace(plain, typeset)
    return html


def render_html(results, *, templates=None, **kwargs) -> str:
    """The report as one self-contained HTML string (arguments of :func:`report`)."""
    templates = check_option("templates", templates)
    return _render(build_context(results, **kwargs), templates=templates)


def _import_weasyprint():
    try:
        import weasyprint
    except (ImportError, OSError) as exc:  # OSError: WeasyPrint present but Pango missing
        raise ImportError(_PDF_HINT + f" [{type(exc).__name__}: {exc}]") from exc
    return weasyprint


def pdf_writer(weasyprint, attachments):
    """``write_pdf(html, target)`` of :func:`calibtest.reporting.document.write_report_file`: a PDF/A-3b with the
    ``(name, text, description)`` attachments; None when ``weasyprint`` is None (an HTML report)."""
    if weasyprint is None:
        return None
    files = [weasyprint.Attachment(string=text, name=name, description=desc) for name, text, desc in attachments]

    def write_pdf(source, target):
        weasyprint.HTML(string=source, base_url=None).write_pdf(
            target, pdf_variant="pdf/a-3b", attachments=files, uncompressed_pdf=False)
    return write_pdf


def _monitor_report(monitor, path, keywords: dict, unused: dict) -> Path:
    """:func:`report` of a ``CalibrationMonitor`` or ``MonitorResult`` (``report_kind == "monitor"``): its own
    ``report()``, the monitoring report of :mod:`calibtest.reporting.monitor_report`."""
    given = sorted(k for k, v in unused.items() if v is not None)
    if given:
        raise OptionError(f"{', '.join(given)}: not options of a monitoring report (report() of a "
                          "CalibrationMonitor or MonitorResult takes title, purpose, command, metadata, templates)")
    return monitor.report(path, **keywords)


def report(results, path, *, comparisons=None, title: str | None = None, purpose: str | None = None,
           labels: Sequence[str] | None = None, source=None, command: str | None = None,
           hl_groups: int = 10, metadata: dict | None = None, plan=None, rng=None,
           deviation_reasons: dict | None = None, templates=None, meta_method: str = "REML",
           hartung_knapp: bool = False, horizon_unit: str | None = None) -> Path:
    """Write a validation report of one or more calibration results as HTML or PDF.

    The report is a controlled document: a title block with document id,
    version and the people responsible, a table of contents, a summary with
    the evidence table and its conclusion, the model and data, the check
    against a pre-specified analysis plan, the comparison of the models, one
    section per model (estimate and interval, settings, figures, provenance,
    Hosmer–Lemeshow, validation metrics, bin table), methods, limitations,
    software, references, revision history and a signature block.  Tables
    and figures are numbered.  The PDF is PDF/A-3b with a running header
    (title, document id, version) and footer ("page X of Y"), and embeds the
    ``to_dict()`` of every result (of a subgroup analysis: the grouped
    ``to_dict()``), of every comparison and the plan as JSON file
    attachments.

    Parameters
    ----------
    results : CalibrationResult, GroupedCalibrationResult, or a list of them; or a CalibrationMonitor or MonitorResult
        A monitor (or its result) gets its monitoring report
        (:func:`calibtest.reporting.monitor_report.monitor_report`: plan,
        looks, alarms, guarantee), which takes ``title``, ``purpose``,
        ``command``, ``metadata`` and ``templates``.
        The models to report (each gets its own section; several are also
        summarised in one table and, when they share a target, in one
        overlaid figure).  A subgroup analysis (``calib_ci(..., by=...)``) is
        reported by its pooled result in the model section, followed by a
        subgroup section: the per-group table (the values of ``to_frame()``),
        the forest plot, the global and heterogeneity tests and the
        multiplicity statement.  A weighted result (``weights=``,
        ``prevalence=``) states the re-weighting (π, π̂, the effective sample
        size (Σw)² / Σw²) and leaves out, each with the reason, the parts that
        treat every row as one observation (evidence table, figures,
        Hosmer–Lemeshow, validation metrics).
    path : str or path-like
        Output file; the suffix decides the format: ``.html``/``.htm`` or
        ``.pdf`` (WeasyPrint, ``pip install "calibtest[pdf]"``).
    comparisons : result of :func:`calibtest.calib_compare` or a list of them, optional
        Shown as comparison tables, with the models named by ``labels``.
    title, purpose : str, optional
        Report title and a free-text statement of what is evaluated and why.
    labels : sequence of str, optional
        Distinct model names used everywhere in the report (default: the
        right-hand sides of the formulas).
    source : dict or list of dict, optional
        Provenance of the input (e.g. ``file_provenance("data.csv")``: file
        name, size, SHA-256), one dict for all results or one per result;
        defaults to each result's ``source``.
    command : str, optional
        The command line that produced the report (the CLI passes it).
    hl_groups : int
        Groups of the Hosmer–Lemeshow test (binary and top-1 targets), at
        least 3.
    metadata : dict, optional
        Document control, every key optional (strings): ``document_id``,
        ``document_version``, ``author``, ``reviewer``, ``approver``,
        ``organisation``, ``model_name``, ``model_version``,
        ``intended_use``, ``population``, ``outcome_definition``,
        ``data_source``, ``data_period``, ``inclusion_criteria``, and
        ``revisions`` (a list of ``{"version", "date", "description"}``).
        A field not given is shown as "not stated".  :func:`load_metadata`
        reads them from a JSON or TOML file.
    plan : str, path-like or AnalysisPlan, optional
        A pre-specified analysis plan (:func:`calibtest.plan`).  The report
        states that the analysis followed it (with its SHA-256 and creation
        time) or lists each deviation (option, planned, used, reason); without
        a plan it states that the options were not pre-specified.
    deviation_reasons : dict, optional
        Why the analysis deviates from the plan: option name (``alpha``,
        ``n_bins``, ``null``, ``method``, ``k``, ``n_classes``, ``tests``,
        ``subgroups``) -> reason.  Shown in the deviations table; a deviation
        without one shows "not stated", and the plan statement counts them.
        A reason for an option the analysis followed, an unknown option, or
        reasons without a plan raise ``ValueError``.
    rng : None or int
        Seed of the label draws of the evidence table's multi-scale test;
        None (default) uses each result's recorded seed, so the same result
        gives the same report.  The seed used is shown in the provenance.
    meta_method : {"REML", "DL", "PM"}
        Estimator of tau^2 in the section "Calibration across sites" of a
        result with ``by=`` (default REML; the table's caption names it).
    hartung_knapp : bool
        The Hartung-Knapp interval (t on k - 1 df) of that section's pooled
        estimates instead of the Wald one.
    horizon_unit : str, optional
        The unit of the follow-up times of survival results (e.g. ``"days"``):
        the report prints the horizon with it ("t = 1826.25 days") in every
        section of a survival model, and the model's machine-readable result
        records it.  A non-string is refused.

    Returns
    -------
    pathlib.Path
        The file written.  It is written atomically: a report that fails
        (to render, or to be written) leaves an existing file as it was.

    Raises
    ------
    OptionError, OptionTypeError
        Before anything is computed or written, as ``calibtest report``
        refuses them (its ``-o``, ``--hl-groups``, ``--seed``,
        ``--meta-method``, ``--hartung-knapp`` and ``--templates``, checked by
        the table of options :data:`calibtest.options.OPTIONS`): a ``path``
        whose suffix is not .html, .htm or .pdf, or whose folder the OS cannot
        reach (resolved as the OS does: ``nosub/../r.html`` is refused when
        ``nosub`` does not exist), ``hl_groups`` below 3, a negative ``rng``,
        an unknown ``meta_method``, a ``hartung_knapp`` that is not a bool, a
        ``templates`` folder that does not exist.
    ValueError
        A ``templates`` folder whose templates fail to render (naming the
        template and line), unknown metadata keys
        (all named), a plan file whose SHA-256 does not match its content, or
        a text (a metadata field, the title, a label, ...) holding a character
        that cannot be encoded as UTF-8 (a lone surrogate), naming the field.
    TypeError
        For a metadata value that is not a string, naming the field.
    ImportError
        For a PDF without WeasyPrint (the message names the extra to install).

    Notes
    -----
    The report explains the method (the debiased estimator, its two regimes
    and the adjusted interval of Algorithm 1 [1]_; T-Cal [2]_ and HulC [3]_
    when used), the Hosmer-Lemeshow test [4]_ and the validation metrics
    [5]_, [6]_, [7]_ for binary and top-1 targets, the reliability diagram
    with Wilson intervals [8]_ and the flexible calibration curve [9]_.  Its
    own reference list has the same numbering.

    References
    ----------
    .. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
           l2 Expected Calibration Error", arXiv:2408.08998, 2024.
    .. [2] Lee, Huang, Hassani and Dobriban, "T-Cal: An optimal test for the
           calibration of predictive models", Journal of Machine Learning
           Research 24(335), 2023.
    .. [3] Kuchibhotla, Balakrishnan and Wasserman, "The HulC: confidence
           regions from convex hulls", Journal of the Royal Statistical
           Society Series B 86(3), 2024.
    .. [4] Hosmer and Lemeshow, "Goodness of fit tests for the multiple
           logistic regression model", Communications in Statistics - Theory
           and Methods 9(10), 1980.
    .. [5] Harrell, *Regression Modeling Strategies*, 2nd ed., Springer, 2015
           (R package rms, ``val.prob``).
    .. [6] Spiegelhalter, "Probabilistic prediction in patient management and
           clinical trials", Statistics in Medicine 5(5), 1986.
    .. [7] Austin and Steyerberg, "The Integrated Calibration Index (ICI) and
           related metrics for quantifying the calibration of logistic
           regression models", Statistics in Medicine 38(21), 2019.
    .. [8] Wilson, "Probable inference, the law of succession, and statistical
           inference", Journal of the American Statistical Association 22,
           1927.
    .. [9] Van Calster, Nieboer, Vergouwe, De Cock, Pencina and Steyerberg,
           "A calibration hierarchy for risk models was defined: from utopia
           to empirical data", Journal of Clinical Epidemiology 74, 2016.
    .. [10] Holm, "A simple sequentially rejective multiple test procedure",
           Scandinavian Journal of Statistics 6, 1979 (Holm-adjusted subgroup
           p-values).
    .. [11] Cochran, "The combination of estimates from different
           experiments", Biometrics 10, 1954 (the heterogeneity test).
    .. [12] Kish, *Survey Sampling*, Wiley, 1965 (the effective sample size).

    Examples
    --------
    >>> import pathlib, tempfile, calibtest as ct
    >>> res = ct.calib_ci("y ~ p", data=ct.load_demo())
    >>> path = ct.report(res, pathlib.Path(tempfile.mkdtemp()) / "report.html",
    ...                  metadata={"document_id": "VAL-001", "model_name": "demo risk model"})
    >>> path.name, "VAL-001" in path.read_text(encoding="utf-8")
    ('report.html', True)

    ``"report.pdf"`` writes the PDF (``pip install "calibtest[pdf]"``).
    """
    if getattr(results, "report_kind", None) == "monitor":  # a monitor's report: its own document
        return _monitor_report(results, path, {"title": title, "purpose": purpose, "command": command,
                                               "metadata": metadata, "templates": templates},
                               {"comparisons": comparisons, "labels": labels, "source": source, "plan": plan,
                                "rng": rng, "deviation_reasons": deviation_reasons})
    path = check_report_path(path)
    suffix = path.suffix.lower()
    # the options of `calibtest report` that are in the table of options, checked as the command line checks them
    templates, hl_groups, rng, meta_method, hartung_knapp = (
        check_option(name, value) for name, value in (("templates", templates), ("hl_groups", hl_groups),
                                                      ("rng", rng), ("meta_method", meta_method),
                                                      ("hartung_knapp", hartung_knapp)))
    weasyprint = _import_weasyprint() if suffix == ".pdf" else None
    check_report_text(title=title, purpose=purpose, command=command, labels=labels)
    # three steps (the evidence and figures of every result, the HTML, the file): a bar on a terminal or notebook
    with progress_bar(3, f"report {path.name}", unit="step") as bar:
        ctx = build_context(results, ReportOptions(
            comparisons=comparisons, title=title, purpose=purpose, labels=labels, source=source, command=command,
            hl_groups=hl_groups, metadata=metadata, plan=plan, rng=rng, deviation_reasons=deviation_reasons,
            meta_method=meta_method, hartung_knapp=hartung_knapp, horizon_unit=horizon_unit))
        bar.update()
        if weasyprint is not None:  # the PDF's maker is part of the software that produced the document
            ctx["versions"]["rows"].insert(-2, ["WeasyPrint (made this PDF)", str(weasyprint.__version__)])
        html = _render(ctx, pdf=weasyprint is not None, templates=templates)
        bar.update()
        written = write_report_file(path, html, pdf_writer(weasyprint, ctx["_attachments"]))
        bar.update()
    return written
