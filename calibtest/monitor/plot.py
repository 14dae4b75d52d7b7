"""The monitor's statistics over time against their thresholds (matplotlib, imported when a plot is asked for)."""
from __future__ import annotations

import numpy as np

__all__ = ["plot_monitor"]


def _x(res):
    times = res.looks["time"]
    return res.looks["look"].to_numpy(), "look" if times.isna().all() else "look (times in the table)"


def _mark(ax, res):
    """Vertical lines: the e-process alarm, the detector alarm and the estimated change time."""
    marks = [(res.alarm_look, "tab:red", "-", "e-process alarm"),
             (res.detector_look, "tab:purple", "-", "detector alarm"),
             (res.change_look if res.detector_look is not None else None, "tab:purple", ":", "estimated change")]
    for look, color, style, label in marks:
        if look is not None:
            ax.axvline(look, color=color, linestyle=style, linewidth=1, label=label)


def _log_panel(ax, x, values, threshold, label, res, ylabel):
    """log10 of a statistic (clipped to [1e-300, 1e300]) against log10 of its threshold."""
    ax.plot(x, np.log10(np.clip(values, 1e-300, 1e300)), label=label, color="tab:blue")
    ax.axhline(np.log10(threshold), color="black", linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
    ax.set_ylabel(f"log10 {ylabel}")
    _mark(ax, res)
    ax.legend(fontsize=7, loc="upper left")


def plot_monitor(res, ax=None):
    """Four panels: the e-process against 1/alpha, the detector against its ARL, the CITL confidence
    sequence with the ECE bound, and the RA-CUSUMs against their thresholds.

    Parameters
    ----------
    res : MonitorResult
    ax : array of 4 matplotlib Axes, optional
        Where to draw (default: a new figure).
    """
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(4, 1, figsize=(7, 9), sharex=True)
    else:
        fig = np.ravel(ax)[0].figure
    ax = np.ravel(ax)
    x, xlabel = _x(res)
    lk = res.looks
    _log_panel(ax[0], x, lk["e_value"].to_numpy(float), 1 / res.alpha, "e-process E_t", res, "E_t")
    _log_panel(ax[1], x, lk["detector"].to_numpy(float), res.settings["arl"], "e-detector M_t", res, "M_t")
    ax[2].fill_between(x, lk["citl_lower"].to_numpy(float), lk["citl_upper"].to_numpy(float), alpha=0.3,
                       label="CITL confidence sequence", step="post")
    ax[2].plot(x, lk["ece_upper"].to_numpy(float), color="tab:orange", label="ECE upper bound")
    ax[2].axhline(0, color="black", linewidth=0.5)
    if res.settings["margin"] is not None:
        ax[2].axhline(res.settings["margin"], color="tab:green", linestyle="--", label="ECE margin")
    ax[2].set_ylabel("CITL, ECE")
    _mark(ax[2], res)
    ax[2].legend(fontsize=7, loc="upper left")
    for col, color, h in (("ra_up", "tab:red", 0), ("ra_down", "tab:blue", 1)):
        ax[3].plot(x, lk[col].to_numpy(float), color=color, label=col.replace("_", " "))
        if res.ra_thresholds:
            ax[3].axhline(res.ra_thresholds[h], color=color, linestyle="--", linewidth=1)
    ax[3].set_ylabel("RA-CUSUM")
    ax[3].set_xlabel(xlabel)
    _mark(ax[3], res)
    ax[3].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig
