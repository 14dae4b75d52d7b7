"""The reliability diagram at a time horizon for censored outcomes (matplotlib, imported when drawing).

:func:`plot_survival_calibration` draws what a
:class:`~calibtest.checks.survival_calibration.SurvivalEvidence` holds -- it computes
nothing: the Kaplan-Meier risk by the horizon in each risk group against the
group's mean predicted risk, with the groups' log-log intervals, the flexible
calibration curve (Cox on a spline of cloglog(risk)) and the diagonal.
"""
from __future__ import annotations

import numpy as np

from calibtest.display.format import fmt

__all__ = ["plot_survival_calibration"]


def plot_survival_calibration(evidence, ax=None, *, curve: bool = True):
    """Draw the reliability diagram at the horizon of a survival evidence result.

    Parameters
    ----------
    evidence : SurvivalEvidence
        A result of :func:`calibtest.checks.survival_calibration.survival_evidence`.
    ax : matplotlib.axes.Axes, optional
        Where to draw (default: a new figure of 5 x 5 inches).
    curve : bool
        Draw the flexible calibration curve (when it was computed).

    Returns
    -------
    matplotlib.axes.Axes
        Points: Kaplan-Meier 1 - S_g(t) per risk group against the mean
        predicted risk, with the groups' (1 - alpha) log-log intervals as
        error bars (none where S_g(t) is 0 or 1); the flexible curve as a
        line; the diagonal (perfect calibration) dashed.
    """
    if not isinstance(curve, bool):
        raise TypeError(f"curve must be True or False, got {curve!r}")
    for attr in ("groups", "curve", "horizon", "alpha"):
        if not hasattr(evidence, attr):
            raise TypeError(f"evidence must be a SurvivalEvidence result, got {type(evidence).__name__}")
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(5, 5))
    g = evidence.groups
    x = g["mean_risk"].to_numpy(float)
    y = g["observed"].to_numpy(float)
    lower, upper = g["lower"].to_numpy(float), g["upper"].to_numpy(float)
    has = np.isfinite(lower) & np.isfinite(upper)
    err = np.vstack([np.where(has, y - lower, 0.0), np.where(has, upper - y, 0.0)])
    level = f"{100 * (1 - evidence.alpha):g}%"
    ax.errorbar(x, y, yerr=err, fmt="o", color="C0", capsize=3,
                label=f"Kaplan-Meier per risk group ({level} CI)")
    top = float(np.nanmax(np.concatenate([x, upper[has], y, [0.05]])))
    if curve and evidence.curve is not None:
        grid = evidence.curve.grid
        ax.plot(grid["risk"], grid["observed"], color="C1",
                label=f"flexible curve (ICI = {fmt(evidence.curve.ici, 3)})")
        top = max(top, float(grid["observed"].max()), float(grid["risk"].max()))
    top = min(1.0, 1.05 * top)
    ax.plot([0, top], [0, top], linestyle="--", color="grey", linewidth=1, label="perfect calibration")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel(f"predicted risk by t = {fmt(evidence.horizon)}")
    ax.set_ylabel(f"observed risk by t = {fmt(evidence.horizon)} (1 - Kaplan-Meier)")
    ax.legend(loc="upper left", fontsize="small")
    return ax
