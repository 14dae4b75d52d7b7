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

References
----------
.. [1] Sun, Chaudhari, Barnett and Dobriban, "A Confidence Interval for the
       l2 Expected Calibration Error", arXiv:2408.08998, 2024.
.. [2] Lewis and Clarke, "Forest plots: trying to see the wood and the
       trees", BMJ 322 (2001) 1479-1480.
"""
from __future__ import annotations

import textwrap

import numpy as np

__all__ = ["plot_forest", "forest_rows", "LABEL_WIDTH"]

#: Group labels longer than this many characters are wrapped onto several lines.
LABEL_WIDTH = 36


def _has_intervals(grouped) -> bool:
    """Rows of ECE intervals (``calib_ci``, ``evidence``) rather than p-values (the tests)."""
    return getattr(grouped, "kind", "calib_ci") in ("calib_ci", "evidence")


def _interval_of(grouped, res):
    """The CalibrationResult of a group: itself, or the interval row of its evidence."""
    return res.interval if getattr(grouped, "kind", "calib_ci") == "evidence" else res


def forest_rows(grouped) -> list[dict]:
    """The rows of the forest plot, top to bottom.

    Keys: ``label``, ``n``, ``ece`` (the point: the ECE, or the p-value of a
    grouped test), ``lower``/``upper`` (the interval; for a grouped test the
    p-value and its Holm adjustment), ``lower_open``, ``analysed``, ``pooled``.
    """
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


def _title(grouped) -> str:
    by = " x ".join(grouped.by).replace("$", r"\$")
    if grouped.n_analysed == 0:
        tests = "global test not computed (no group analysed)"
    else:
        tests = f"global p = {grouped.global_pvalue:.3g}"
    if getattr(grouped, "kind", "calib_ci") == "calib_ci":
        het = "heterogeneity not computed" if getattr(grouped, "heterogeneity_note", None) is not None \
            else f"heterogeneity p = {grouped.heterogeneity_pvalue:.3g}"
        return f"Calibration by {by}\n{tests}, {het}"
    return f"Calibration by {by} ({grouped.kind})\n{tests}"


def plot_forest(grouped, ax=None, *, color="C0", pooled_color="black"):
    """Forest plot of a grouped result: per-group ECE intervals (with the pooled one), or per-group p-values.

    Parameters
    ----------
    grouped : GroupedResult
        From ``calib_ci``, ``evidence``, ``calib_test`` or ``tcal_test`` with ``by=``.
    ax : matplotlib Axes, optional
        Where to draw; a new figure (6.4 inches wide, 0.35 inch per row) otherwise.
    color, pooled_color : matplotlib colours
        Of the groups and of the pooled diamond.

    Returns
    -------
    matplotlib.axes.Axes
    """
    rows = forest_rows(grouped)
    if ax is None:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=(6.4, 1.2 + 0.35 * len(rows)), layout="constrained")
        ax = fig.add_subplot()
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
    if intervals:
        ax.axvline(0.0, color="grey", linewidth=0.8, linestyle=":")
        level = f"{100 * (1 - grouped.alpha):g}%"
        ax.set_xlabel(f"ECE with adjusted {level} interval")
        ax.set_xlim(left=0.0)
    else:
        ax.axvline(grouped.alpha, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xscale("log")
        ax.set_xlabel(f"p-value (square) and Holm-adjusted p-value (circle); dashed: alpha = {grouped.alpha:g}")
        ax.set_xlim(right=1.0)
    ax.set_title(_title(grouped), fontsize="medium", loc="left")
    return ax
