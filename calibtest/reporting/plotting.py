"""Reliability diagrams of calibration results (matplotlib, imported lazily).

A reliability diagram plots, for the rows grouped by the interval
[i/B, (i+1)/B) of width 1/B that holds their prediction, the observed
frequency of the outcome against the mean prediction, with a Wilson binomial
confidence interval (Wilson 1927, through
``statsmodels.stats.proportion.proportion_confint(method="wilson")``), the
diagonal ``observed = predicted`` of perfect calibration, and underneath a strip
with the number of rows per interval.

For the binary and top-1 targets the groups are exactly the bins of the
estimator T (``result.bin_table()``), so a point far from the diagonal *with
many rows* is a bin that contributes to T.  For the multi-coordinate targets
(top-1-to-k, full calibration) each coordinate j gets its own panel with the
marginal (class-wise) groups of z_j: for the sorted top-k vector, coordinate j
is the j-th largest probability and the outcome the indicator that the label
is that class; for full calibration, coordinate j is class j.  The estimator's
own d-dimensional bins often hold a handful of rows each; they are listed in
the bin table rather than plotted.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from calibtest._format import model_name
from calibtest.core.binning import cube_indices

__all__ = ["plot_reliability", "coordinate_columns", "reliability_points"]

#: Height of the count strip relative to the panel it sits under.
STRIP_SIZE = "24%"

_MODE_AXIS_LABEL = {
    "binary": "predicted probability p",
    "top1": "top-1 confidence",
}


def coordinate_columns(table) -> list[tuple[str, str]]:
    """``(mean_pred, mean_outcome)`` column names per coordinate of a bin table.

    One pair ``("mean_pred", "mean_outcome")`` for the 1-dim modes, otherwise
    ``("mean_pred_j", "mean_outcome_j")`` for j = 1, 2, ... in order.
    """
    if "mean_pred" in table.columns:
        return [("mean_pred", "mean_outcome")]
    pairs = []
    j = 1
    while f"mean_pred_{j}" in table.columns:
        pairs.append((f"mean_pred_{j}", f"mean_outcome_{j}"))
        j += 1
    if not pairs:
        raise ValueError("the bin table has no mean_pred columns")
    return pairs


_CUBE_MODES = ("binary", "top1", "topk")


def _marginal_groups(result, coordinate: int):
    """(count, sum of predictions, sum of outcomes) per interval of coordinate j.

    Interval i is [i/B, (i+1)/B); a coordinate exactly 1.0 has its own index B.
    Cube partitions (binary, top-1, top-k) aggregate the bin table by the bin
    key's j-th index (exact, needs no rows); other partitions (full
    calibration's simplices) group the rows themselves, or, for a result
    without rows, the bins by their mean prediction_j.  Both use the cube
    rule of the estimator (:func:`calibtest.core.binning.cube_indices`: a
    value on an edge up to float64 rounding is on it), so a grid value such as
    0.58 at B = 50 is in interval 29 here as in a cube partition.
    """
    B = result.n_bins
    table = result.bin_table()
    pred_col, obs_col = coordinate_columns(table)[coordinate]
    count = table["count"].to_numpy(np.float64)
    if result.mode in _CUBE_MODES:
        key = np.array([k[coordinate] for k in table["bin"]], dtype=np.int64)
        sum_pred = count * table[pred_col].to_numpy(np.float64)
        sum_obs = count * table[obs_col].to_numpy(np.float64)
    elif result.data is not None and result.data.z.shape[1] == len(coordinate_columns(table)):
        z = result.data.z[:, coordinate]
        key = cube_indices(z[:, None], B)[:, 0]
        count = np.ones_like(z)
        sum_pred = z
        sum_obs = result.data.u[:, coordinate] + z
    else:
        pred = table[pred_col].to_numpy(np.float64)
        key = cube_indices(pred[:, None], B)[:, 0]
        sum_pred = count * pred
        sum_obs = count * table[obs_col].to_numpy(np.float64)
    n_keys = B + 1
    c = np.bincount(key, weights=count, minlength=n_keys)
    sp = np.bincount(key, weights=sum_pred, minlength=n_keys)
    so = np.bincount(key, weights=sum_obs, minlength=n_keys)
    keep = c > 0
    return c[keep], sp[keep], so[keep]


def reliability_points(result, coordinate: int = 0, alpha: float | None = None) -> dict:
    """Points of one panel of the reliability diagram.

    The rows are grouped by the interval [i/B, (i+1)/B) that holds their
    coordinate j (a coordinate exactly 1 is its own group, as in the
    estimator's bins).  For the 1-dim modes these groups are exactly the bins
    of the estimator; for top-k and full calibration they are the marginal
    (class-wise) groups of coordinate j, which stay readable when the d-dim
    bins hold few rows each (those bins are listed in ``bin_table()``).

    Parameters
    ----------
    result : CalibrationResult
    coordinate : int
        0-based coordinate j (always 0 for the 1-dim modes).
    alpha : float, optional
        The Wilson intervals have level 1 - alpha (default: the result's alpha).

    Returns
    -------
    dict of ndarray
        ``pred`` (mean prediction), ``observed`` (events / count), ``count``,
        ``events`` (rows whose outcome indicator is 1: the sum of the 0/1
        outcomes, rounded to remove floating-point error), ``lower`` and
        ``upper`` (Wilson interval of events / count), sorted by ``pred``.
    """
    from statsmodels.stats.proportion import proportion_confint

    alpha = result.alpha if alpha is None else alpha
    count, sum_pred, sum_obs = _marginal_groups(result, coordinate)
    count = np.rint(count).astype(np.int64)
    events = np.rint(sum_obs).astype(np.int64)
    pred = sum_pred / count
    observed = events / count
    lower, upper = proportion_confint(events, count, alpha=alpha, method="wilson")
    order = np.argsort(pred, kind="stable")
    return {"pred": pred[order], "observed": observed[order], "count": count[order], "events": events[order],
            "lower": np.asarray(lower, dtype=float)[order], "upper": np.asarray(upper, dtype=float)[order]}


def _strip_counts(points: dict, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows per interval [i/B, (i+1)/B) of the bins' mean predictions (1.0 in the last).

    The intervals follow the cube rule of the estimator (a mean prediction on an
    edge up to float64 rounding, e.g. 0.58 at B = 50, is in the interval above
    it), not ``np.histogram``'s comparison with rounded ``linspace`` edges.
    """
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    pred = np.asarray(points["pred"], dtype=np.float64)
    key = np.minimum(cube_indices(pred[:, None], n_bins)[:, 0], n_bins - 1)
    counts = np.bincount(key, weights=np.asarray(points["count"], dtype=np.float64), minlength=n_bins)
    return edges, counts


def _panel_title(result, coordinate: int, n_coords: int) -> str:
    if n_coords == 1:
        return ""
    if result.mode == "topk":
        return f"rank {coordinate + 1} of the sorted top-{result.k}"
    names = tuple(getattr(result, "prob_names", ()) or ())
    if len(names) == n_coords:
        return f"class {names[coordinate]}"
    return f"class {coordinate + 1}"


def _append_strip(ax):
    from mpl_toolkits.axes_grid1 import make_axes_locatable

    strip = make_axes_locatable(ax).append_axes("bottom", size=STRIP_SIZE, pad=0.08, sharex=ax)
    ax.tick_params(labelbottom=False)
    return strip


def _draw_panel(ax, results, labels, coordinate: int, n_coords: int, alpha, colors) -> None:
    overlay = len(results) > 1
    strip = _append_strip(ax)
    ax.plot([0, 1], [0, 1], linestyle="--", color="0.45", linewidth=1, label="perfect calibration")
    markers = "osD^vP*X"
    all_counts = []
    for i, (res, label) in enumerate(zip(results, labels)):
        pts = reliability_points(res, coordinate, alpha)
        color = colors[i % len(colors)]
        # max(., 0) guards the bar lengths against rounding in the Wilson end points.
        yerr = np.maximum(np.vstack([pts["observed"] - pts["lower"], pts["upper"] - pts["observed"]]), 0.0)
        level = f"{100 * (1 - (res.alpha if alpha is None else alpha)):g}%"
        text = label if overlay else f"observed frequency ({level} Wilson CI)"
        ax.errorbar(pts["pred"], pts["observed"], yerr=yerr, fmt=markers[i % len(markers)] + "-",
                    color=color, markersize=4 if n_coords == 1 else 3, linewidth=1, elinewidth=0.8, capsize=2,
                    label=text, alpha=0.9)
        edges, counts = _strip_counts(pts, res.n_bins)
        strip.stairs(counts, edges, fill=not overlay, color=color, alpha=0.55 if not overlay else 0.9,
                     linewidth=1.2)
        all_counts.append(counts)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_aspect("auto")
    ax.set_ylabel("observed frequency")
    ax.grid(True, linewidth=0.4, alpha=0.5)
    title = _panel_title(results[0], coordinate, n_coords)
    if title:
        ax.set_title(title, fontsize="medium")
    if coordinate == 0:  # one legend per figure
        ax.legend(loc="upper left", fontsize="small" if n_coords == 1 else "x-small", frameon=False)
    counts = np.concatenate(all_counts)
    positive = counts[counts > 0]
    if positive.size and positive.max() > 100 * np.median(positive):
        # very uneven counts (e.g. most confidences near 1): a linear strip would show one bar only
        strip.set_yscale("symlog", linthresh=1.0)
        top = math.ceil(math.log10(positive.max()))
        strip.set_yticks([0] + [10.0**e for e in range(0, top + 1, 2 if top > 3 else 1)])
        strip.set_ylabel("rows (log)", fontsize="small")
    else:
        strip.set_ylabel("rows", fontsize="small")
    strip.tick_params(labelsize="small")
    strip.set_ylim(bottom=0)
    strip.set_xlabel("mean " + _MODE_AXIS_LABEL.get(results[0].mode, "predicted probability")
                     if n_coords == 1 else "mean predicted probability")


def _as_results(result) -> list:
    if isinstance(result, (list, tuple)):
        results = list(result)
        if not results:
            raise ValueError("result must be a CalibrationResult or a non-empty list of them")
    else:
        results = [result]
    for r in results:
        if not hasattr(r, "bin_table") or not hasattr(r, "n_bins"):
            raise TypeError(f"result must be a CalibrationResult (or a list of them), got {type(r).__name__}")
    return results


def plot_reliability(result, ax=None, *, overlay: Sequence | None = None, labels: Sequence[str] | None = None,
                     alpha: float | None = None, colors: Sequence | None = None):
    """Reliability diagram with Wilson intervals and a bin-count strip.

    Parameters
    ----------
    result : CalibrationResult or list of CalibrationResult
        One result, or several results of the same target (mode, k and
        dimension) to overlay (the comparison of models).
    ax : matplotlib Axes or sequence of Axes, optional
        Where to draw: one Axes for the 1-dim modes (binary, top-1), a
        sequence of d Axes (one per coordinate) for top-1-to-k and full
        calibration.  A strip with the bin counts is appended below each
        panel (``mpl_toolkits.axes_grid1``), in the same figure.  Without
        ``ax`` a new pyplot figure is made (6.4 x 4.8 inches for one panel;
        4 x 4 inches per panel, at most 3 panels per row, otherwise).
    overlay : sequence of CalibrationResult, optional
        Further results drawn on the same panels (same as passing a list).
    labels : sequence of str, optional
        Legend names of the overlaid models (default: the right-hand sides of
        their formulas, or their probability column names).
    alpha : float, optional
        The Wilson intervals have level 1 - alpha (default: each result's alpha).
    colors : sequence of matplotlib colours, optional
        One colour per model (default: the ``tab10`` cycle).

    Returns
    -------
    matplotlib.axes.Axes or numpy.ndarray of Axes
        The main panel for the 1-dim modes; for d > 1 coordinates a 1-d array
        of the d main panels (``axes[0].figure`` is the figure).  The count
        strips are further Axes of the same figure.

    Notes
    -----
    Each point is one group g of rows (see :func:`reliability_points`):
    x = mean prediction of its rows, y = their observed frequency
    ``o_g = e_g / c_g`` with ``e_g`` the number of rows whose outcome
    indicator is 1 and ``c_g`` the group size; the vertical bar is the Wilson
    interval ``(o + z^2/(2c) -/+ z sqrt(o(1-o)/c + z^2/(4c^2))) / (1 + z^2/c)``,
    z = Phi^-1(1 - alpha/2).  The strip shows the rows per interval
    [i/B, (i+1)/B); rows with a prediction of exactly 1 (their own group) are
    counted in the last interval.  When the largest count exceeds 100 times
    the median count the strip uses a symmetric-log scale.
    """
    results = _as_results(result) + (list(overlay) if overlay is not None else [])
    results = _as_results(results)
    dims = {len(coordinate_columns(r.bin_table())) for r in results}
    modes = {(r.mode, r.k) for r in results}
    if len(dims) != 1 or len(modes) != 1:
        raise ValueError("overlaid results must have the same mode, k and dimension; got "
                         + ", ".join(f"{m} (k={k})" for m, k in sorted(modes, key=str)))
    n_coords = dims.pop()
    if labels is None:
        labels = [model_name(r.formula, r.prob_names, f"model {i + 1}") for i, r in enumerate(results)]
    elif len(labels) != len(results):
        raise ValueError(f"labels must have one name per result ({len(results)}), got {len(labels)}")
    if colors is None:
        colors = [f"C{i}" for i in range(10)]
    if ax is None:
        import matplotlib.pyplot as plt

        if n_coords == 1:
            fig = plt.figure(figsize=(6.4, 4.8))
            ax = fig.add_subplot()
        else:
            ncols = min(n_coords, 3)
            nrows = math.ceil(n_coords / ncols)
            fig = plt.figure(figsize=(4.0 * ncols, 4.0 * nrows))
            grid = fig.subplots(nrows, ncols, squeeze=False).ravel()
            for extra in grid[n_coords:]:
                extra.remove()
            ax = grid[:n_coords]
    axes = [ax] if n_coords == 1 and not isinstance(ax, (list, tuple, np.ndarray)) else list(np.ravel(ax))
    if len(axes) != n_coords:
        raise ValueError(f"ax must hold {n_coords} Axes (one per coordinate), got {len(axes)}")
    for j, panel in enumerate(axes):
        _draw_panel(panel, results, labels, j, n_coords, alpha, colors)
    return axes[0] if n_coords == 1 else np.array(axes, dtype=object)
