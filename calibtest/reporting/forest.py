"""Forest plot of a grouped result (matplotlib, imported lazily).

Grouped intervals (``calib_ci`` and ``evidence`` with ``by=``): one row per
group, the point estimate sqrt(T+) of the ECE and its adjusted interval
(Algorithm 1 of Sun, Chaudhari, Barnett and Dobriban), with the pooled result
(``calib_ci``) as a diamond at the bottom.  An interval that contains 0 (the
test does not reject ECE = 0) is drawn from 0; one open at 0, ``(0, upper]``,
has a hollow left end.

Grouped tests (``calib_test`` and ``tcal_test`` with ``by=``), which have no
interval: one row per group, its p-value (square) joined to its
Holm-adjusted p-value (hollow circle) on a log scale, with alpha as a dashed
line; a group left of the line rejects at alpha before the adjustment.

Groups that could not be analysed are listed with "not analysed".

Other measures of a grouped interval (``measure="citl"``, ``"slope"`` or
``"oe"``): each group's calibration-in-the-large, calibration slope or O/E
with its Wald interval, as held in the grouped result's table (computed once
with it), the pooled rows' as a diamond, and the value of perfect calibration
(0, 1, 1) as a dotted line; O/E on a log scale.

A meta-analysis across sites (:func:`plot_meta_forest`): each site's
estimate of one measure with its Wald interval, the random-effects pooled
estimate as a diamond spanning its interval, and the prediction interval for
a new site as a bar under it (Riley et al. 2011).

References
----------
.. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
       l2 Expected Calibration Error", arXiv:2408.08998, 2024.
.. [2] Lewis and Clarke, "Forest plots: trying to see the wood and the
       trees", BMJ 322 (2001) 1479-1480.
.. [3] Riley, Higgins and Deeks, "Interpretation of random effects
       meta-analyses", BMJ 342 (2011) d549.
"""
from __future__ import annotations

import textwrap

import numpy as np

from calibtest.options import check_option

__all__ = ["plot_forest", "forest_rows", "plot_meta_forest", "meta_forest_rows", "FOREST_MEASURES", "LABEL_WIDTH"]

#: The measures of a grouped interval's forest plot: name -> (axis label, value of perfect calibration, log axis).
FOREST_MEASURES = {
    "ece": ("ECE", 0.0, False),
    "citl": ("CITL (logit scale)", 0.0, False),
    "slope": ("calibration slope", 1.0, False),
    "oe": ("O/E (observed / expected events)", 1.0, True),
}

#: Group labels longer than this many characters are wrapped onto several lines.
LABEL_WIDTH = 36


def _axes(ax, n_rows: int):
    """``ax``, or new axes on a figure whose height fits ``n_rows`` rows of a forest plot."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.figure(figsize=(6.4, 1.2 + 0.35 * n_rows), layout="constrained").add_subplot()


def _has_intervals(grouped) -> bool:
    """Rows of ECE intervals (``calib_ci``, ``evidence``) rather than p-values (the tests)."""
    return getattr(grouped, "kind", "calib_ci") in ("calib_ci", "evidence")


def _interval_of(grouped, res):
    """The CalibrationResult of a group: itself, or the interval row of its evidence."""
    return res.interval if getattr(grouped, "kind", "calib_ci") == "evidence" else res


def _measure_rows(grouped, measure: str) -> list[dict]:
    """The rows of a measure other than the ECE, from the grouped result's table and pooled measures."""
    table = grouped.to_frame()
    rows = []
    for label, r in zip(table.index, table.to_dict(orient="records")):
        text = label if not isinstance(label, tuple) else ", ".join(map(str, label))
        value = r.get(measure)
        if grouped.groups[label] is None or value is None or not np.isfinite(value):
            why = "not analysed" if grouped.groups[label] is None else f"no {measure}"
            rows.append({"label": f"{text} ({why})", "n": None, "ece": np.nan, "lower": np.nan, "upper": np.nan,
                         "lower_open": False, "analysed": False, "pooled": False})
            continue
        rows.append({"label": f"{text} (n={int(r['n'])})", "n": int(r["n"]), "ece": float(value),
                     "lower": float(r[f"{measure}_ci_lower"]), "upper": float(r[f"{measure}_ci_upper"]),
                     "lower_open": False, "analysed": True, "pooled": False})
    pm = getattr(grouped, "pooled_measures", {}) or {}
    if pm.get(measure) is not None and np.isfinite(pm[measure]):
        rows.append({"label": f"pooled (n={grouped.pooled.n})", "n": grouped.pooled.n, "ece": float(pm[measure]),
                     "lower": float(pm.get(f"{measure}_ci_lower", np.nan)),
                     "upper": float(pm.get(f"{measure}_ci_upper", np.nan)), "lower_open": False, "analysed": True,
                     "pooled": True})
    return rows


def forest_rows(grouped, measure: str = "ece") -> list[dict]:
    """The rows of the forest plot, top to bottom.

    Keys: ``label``, ``n``, ``ece`` (the point: the ECE, the ``measure``, or
    the p-value of a grouped test), ``lower``/``upper`` (the interval; for a
    grouped test the p-value and its Holm adjustment), ``lower_open``,
    ``analysed``, ``pooled``.
    """
    measure = check_option("forest_measure", measure, "measure")
    if measure != "ece" and getattr(grouped, "kind", "calib_ci") != "calib_ci":
        raise ValueError(f"measure={measure!r} needs a grouped interval (calib_ci with by=), whose table holds "
                         f"each group's CITL, slope and O/E; this result is {grouped.kind!r}")
    if measure != "ece":
        return _measure_rows(grouped, measure)
    rows = []
    table = grouped.to_frame()
    intervals = _has_intervals(grouped)
    for label, holm in zip(table.index, table["pvalue_holm"]):
        res = grouped.groups[label]
        text = label if not isinstance(label, tuple) else ", ".join(map(str, label))
        if res is None:
            rows.append({"label": f"{text} (not analysed)", "n": None, "ece": np.nan, "lower": np.nan,
                         "upper": np.nan, "lower_open": False, "analysed": False, "pooled": False})
            continue
        if not intervals:
            rows.append({"label": f"{text} (n={res.n})", "n": res.n, "ece": res.pvalue, "lower": res.pvalue,
                         "upper": float(holm), "lower_open": False, "analysed": True, "pooled": False})
            continue
        res = _interval_of(grouped, res)
        ci = res.conf_int(scale="ece")
        rows.append({"label": f"{text} (n={res.n})", "n": res.n, "ece": res.ece, "lower": ci.lower,
                     "upper": ci.upper, "lower_open": ci.lower_open, "analysed": True, "pooled": False})
    pooled = getattr(grouped, "pooled", None)
    if pooled is not None:
        ci = pooled.conf_int(scale="ece")
        rows.append({"label": f"pooled (n={pooled.n})", "n": pooled.n, "ece": pooled.ece, "lower": ci.lower,
                     "upper": ci.upper, "lower_open": ci.lower_open, "analysed": True, "pooled": True})
    return rows


def _measure_name(grouped, measure: str) -> str:
    """The axis label of a measure; CITL on the scale of the result's kind (logit, or log cumulative hazard at a
    horizon)."""
    if measure == "citl":
        return f"CITL ({grouped.pooled.kind.recalibration_words()['citl_scale']} scale)"
    return FOREST_MEASURES[measure][0]


def _title(grouped, measure: str = "ece") -> str:
    by = " x ".join(grouped.by).replace("$", r"\$")
    if grouped.n_analysed == 0:
        tests = "global test not computed (no group analysed)"
    else:
        tests = f"global p = {grouped.global_pvalue:.3g}"
    if measure != "ece":
        name = _measure_name(grouped, measure)
        return f"{name[0].upper()}{name[1:]} by {by}\n{tests} (ECE = 0 in every group)"
    if getattr(grouped, "kind", "calib_ci") == "calib_ci":
        het = "heterogeneity not computed" if getattr(grouped, "heterogeneity_note", None) is not None \
            else f"heterogeneity p = {grouped.heterogeneity_pvalue:.3g}"
        return f"Calibration by {by}\n{tests}, {het}"
    return f"Calibration by {by} ({grouped.kind})\n{tests}"


def plot_forest(grouped, ax=None, *, measure: str = "ece", color="C0", pooled_color="black"):
    """Forest plot of a grouped result: per-group ECE intervals (with the pooled one), or per-group p-values.

    Parameters
    ----------
    grouped : GroupedResult
        From ``calib_ci``, ``evidence``, ``calib_test`` or ``tcal_test`` with ``by=``.
    ax : matplotlib Axes, optional
        Where to draw; a new figure (6.4 inches wide, 0.35 inch per row) otherwise.
    measure : {"ece", "citl", "slope", "oe"}
        What each row shows for a grouped interval (``calib_ci``): the ECE,
        or the CITL, slope or O/E with its Wald interval held by the result.
    color, pooled_color : matplotlib colours
        Of the groups and of the pooled diamond.

    Returns
    -------
    matplotlib.axes.Axes
    """
    rows = forest_rows(grouped, measure)
    ax = _axes(ax, len(rows))
    intervals = _has_intervals(grouped)
    y = np.arange(len(rows))[::-1].astype(float)
    for yi, row in zip(y, rows):
        if not row["analysed"]:
            continue
        c = pooled_color if row["pooled"] else color
        ax.hlines(yi, row["lower"], row["upper"], color=c, linewidth=1.6)
        # markers at ECE = 0 sit on the axis edge: drawn whole (not clipped), like the interval ends
        ax.plot([row["ece"]], [yi], marker="D" if row["pooled"] else "s", color=c,
                markersize=8 if row["pooled"] else 6, clip_on=False, zorder=3)
        if row["lower_open"]:
            ax.plot([row["lower"]], [yi], marker="o", markerfacecolor="white", markeredgecolor=c, markersize=5,
                    clip_on=False, zorder=3)
        if not intervals:  # the Holm-adjusted p-value
            ax.plot([row["upper"]], [yi], marker="o", markerfacecolor="white", markeredgecolor=c, markersize=6,
                    clip_on=False, zorder=3)
    ax.set_yticks(y)
    ax.tick_params(axis="y", length=0, pad=8)  # the labels clear of the markers drawn at ECE = 0
    # long labels wrap (at most LABEL_WIDTH characters a line); a "$" in a label is text, not math
    ax.set_yticklabels([textwrap.fill(r["label"], LABEL_WIDTH).replace("$", r"\$") for r in rows])
    if measure != "ece":
        _, null, log = FOREST_MEASURES[measure]
        name = _measure_name(grouped, measure)
        ax.axvline(null, color="grey", linewidth=0.8, linestyle=":")
        if log:
            _plain_log_axis(ax)
        level = f"{100 * (1 - grouped.alpha):g}%"
        ax.set_xlabel(f"{name}, {level} Wald interval")
    elif intervals:
        ax.axvline(0.0, color="grey", linewidth=0.8, linestyle=":")
        level = f"{100 * (1 - grouped.alpha):g}%"
        ax.set_xlabel(f"ECE with adjusted {level} interval")
        ax.set_xlim(left=0.0)
    else:
        ax.axvline(grouped.alpha, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xscale("log")
        ax.set_xlabel(f"p-value (square) and Holm-adjusted p-value (circle); dashed: alpha = {grouped.alpha:g}")
        ax.set_xlim(right=1.0)
    ax.set_title(_title(grouped, measure), fontsize="medium", loc="left")
    return ax


def _plain_log_axis(ax, subs=(0.5, 0.6, 0.7, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0)) -> None:
    """A log x axis with plain tick labels (0.8, 1, 1.25) at ``subs`` times powers of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax.set_xscale("log")
    plain = FuncFormatter(lambda x, _: f"{x:g}")
    ax.xaxis.set_major_locator(LogLocator(base=10.0, subs=subs))
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: ""))


def meta_forest_rows(meta, measure: str) -> list[dict]:
    """The rows of :func:`plot_meta_forest`, top to bottom, on the reported scale (O/E, CITL, slope, ECE).

    Keys: ``label``, ``point``, ``lower``, ``upper``, ``weight`` (percent),
    ``kind`` (``"site"``, ``"pooled"`` or ``"prediction"``).  A site's ECE^2
    interval is its Wald interval T_g -+ z s.e., shown as sqrt(max(., 0)).
    """
    if measure not in meta.pooled:
        why = meta.left_out_measures.get(measure, "not asked for")
        raise ValueError(f"measure {measure!r} was not pooled: {why}")
    re = meta.pooled[measure]
    lower, upper = re.site_interval()
    rows = [{"label": ", ".join(map(str, lb)) if isinstance(lb, tuple) else str(lb), "point": re.natural(y),
             "lower": re.natural(lo), "upper": re.natural(hi), "weight": 100.0 * w, "kind": "site"}
            for lb, y, lo, hi, w in zip(re.labels, re.y, lower, upper, re.weights)]
    rows.append({"label": f"pooled ({re.method}, k={re.k})", "point": re.natural(re.estimate),
                 "lower": re.natural(re.ci_lower), "upper": re.natural(re.ci_upper), "weight": 100.0,
                 "kind": "pooled"})
    if np.isfinite(re.pi_lower):
        rows.append({"label": "prediction (new site)", "point": np.nan, "lower": re.natural(re.pi_lower),
                     "upper": re.natural(re.pi_upper), "weight": np.nan, "kind": "prediction"})
    return rows


#: The reported scale of each pooled measure: (axis label, value of perfect calibration, log axis).
_META_AXES = {"log_oe": ("O/E", 1.0, True), "citl": ("CITL", 0.0, False),
              "slope": ("Slope", 1.0, False), "ece": ("ECE", 0.0, False)}


def plot_meta_forest(meta, measure: str = "log_oe", ax=None, *, color="C0", pooled_color="black",
                     compact: bool = False):
    """Forest plot of one measure of a meta-analysis across sites (:class:`calibtest.ece.meta_analysis.MetaAnalysisResult`).

    Each site's estimate (square, area by its random-effects weight) with its
    Wald interval, the pooled estimate as a diamond spanning its interval,
    and the prediction interval for a new site as a bar under it; a dotted
    line at perfect calibration.

    Parameters
    ----------
    meta : MetaAnalysisResult
    measure : {"log_oe", "citl", "slope", "ece"}
        Drawn on its reported scale (O/E on a log axis; ECE as sqrt of ECE^2).
    ax : matplotlib Axes, optional
    color, pooled_color : matplotlib colours
    compact : bool
        A short title and axis label (panels side by side, as in the report).

    Returns
    -------
    matplotlib.axes.Axes
    """
    rows = meta_forest_rows(meta, measure)
    ax = _axes(ax, len(rows))
    name, null, log = _META_AXES[measure]
    y = np.arange(len(rows))[::-1].astype(float)
    for yi, row in zip(y, rows):
        if row["kind"] == "site":
            ax.hlines(yi, row["lower"], row["upper"], color=color, linewidth=1.4)
            ax.plot([row["point"]], [yi], marker="s", color=color, markersize=3 + 0.08 * row["weight"],
                    clip_on=False, zorder=3)
        elif row["kind"] == "pooled":
            ax.fill([row["lower"], row["point"], row["upper"], row["point"]], [yi, yi + 0.3, yi, yi - 0.3],
                    color=pooled_color, zorder=3)
        else:
            ax.hlines(yi, row["lower"], row["upper"], color=pooled_color, linewidth=3.0)
    ax.axvline(null, color="grey", linewidth=0.8, linestyle=":")
    if log:
        _plain_log_axis(ax, (0.5, 1.0, 2.0) if compact else (0.5, 0.6, 0.7, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0))
    re = meta.pooled[measure]
    ax.set_yticks(y)
    ax.tick_params(axis="y", length=0, pad=8)
    ax.set_yticklabels([textwrap.fill(r["label"], LABEL_WIDTH).replace("$", r"\$") for r in rows])
    level = f"{100 * (1 - meta.alpha):g}%"
    if compact:
        ax.set_xlabel(f"{name}{f' ({meta.citl_scale})' if measure == 'citl' else ''}")
        ax.set_title(f"{name}\n$I^2$ = {100 * re.i2:.0f}%, $\\tau^2$ = {re.tau2:.2g}", loc="left", fontsize=7.5)
        return ax
    ax.set_xlabel(f"{name} ({f'{meta.citl_scale} scale, ' if measure == 'citl' else ''}{level} intervals)")
    ax.set_title(f"{name} across sites\n$\\tau^2$ = {re.tau2:.2g}, $I^2$ = {100 * re.i2:.0f}%, "
                 f"Q: p = {re.q_pvalue:.2g}", fontsize="medium", loc="left")
    return ax
