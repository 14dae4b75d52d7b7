"""Forest plot of the per-group calibration errors of a grouped result (matplotlib, imported lazily).

One row per group: the point estimate sqrt(T+) of the ECE and its adjusted
interval (Algorithm 1 of Sun, Chaudhari, Barnett and Dobriban), with the
pooled result as a diamond at the bottom.  An interval that contains 0 (the
test does not reject ECE = 0) is drawn from 0; one open at 0, ``(0, upper]``,
has a hollow left end.  Groups that could not be analysed are listed with
"not analysed".

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


def forest_rows(grouped) -> list[dict]:
    """The rows of the forest plot, top to bottom: label, n, ECE, interval ends, open at 0, analysed."""
    rows = []
    table = grouped.table
    for label in table.index:
        res = grouped.groups[label]
        text = label if not isinstance(label, tuple) else ", ".join(map(str, label))
        if res is None:
            rows.append({"label": f"{text} (not analysed)", "n": None, "ece": np.nan, "lower": np.nan,
                         "upper": np.nan, "lower_open": False, "analysed": False, "pooled": False})
            continue
        ci = res.conf_int(scale="ece")
        rows.append({"label": f"{text} (n={res.n})", "n": res.n, "ece": res.ece, "lower": ci.lower,
                     "upper": ci.upper, "lower_open": ci.lower_open, "analysed": True, "pooled": False})
    pooled = grouped.pooled
    ci = pooled.conf_int(scale="ece")
    rows.append({"label": f"pooled (n={pooled.n})", "n": pooled.n, "ece": pooled.ece, "lower": ci.lower,
                 "upper": ci.upper, "lower_open": ci.lower_open, "analysed": True, "pooled": True})
    return rows


def plot_forest(grouped, ax=None, *, color="C0", pooled_color="black"):
    """Forest plot of the per-group ECE intervals with the pooled one.

    Parameters
    ----------
    grouped : GroupedCalibrationResult
        From ``calib_ci(..., by=...)``.
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

        fig = plt.figure(figsize=(6.4, 1.2 + 0.35 * len(rows)))
        ax = fig.add_subplot()
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
    ax.axvline(0.0, color="grey", linewidth=0.8, linestyle=":")
    ax.set_yticks(y)
    ax.tick_params(axis="y", length=0, pad=8)  # the labels clear of the markers drawn at ECE = 0
    # long labels wrap (at most LABEL_WIDTH characters a line); a "$" in a label is text, not math
    ax.set_yticklabels([textwrap.fill(r["label"], LABEL_WIDTH).replace("$", r"\$") for r in rows])
    level = f"{100 * (1 - grouped.alpha):g}%"
    ax.set_xlabel(f"ECE with adjusted {level} interval")
    by = " x ".join(grouped.by).replace("$", r"\$")
    ax.set_title(f"Calibration by {by}\nglobal p = {grouped.global_pvalue:.3g}, "
                 f"heterogeneity p = {grouped.heterogeneity_pvalue:.3g}", fontsize="medium", loc="left")
    ax.set_xlim(left=0.0)
    return ax
