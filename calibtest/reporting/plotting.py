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
the bin table (``res.bin_table()``) rather than plotted.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from calibtest.core.targets import Target
from calibtest.display.format import model_name
from calibtest.options import OPTIONS, check_option
from calibtest.core.binning import cube_indices

__all__ = ["plot_reliability", "coordinate_columns", "reliability_points", "flexible_curve_figure",
           "display_reliability_figure", "display_bins", "curve_bins", "display_bins_from_sums", "display_points",
           "display_bins_caption", "bin_sensitivity_figure", "prediction_strip_figure"]

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


def _marginal_intervals(result, coordinate: int):
    """(interval index, count, sum of predictions, sum of outcomes) per non-empty interval of coordinate j.

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
    if Target(result.mode).cube:
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
    return np.flatnonzero(keep), c[keep], sp[keep], so[keep]


def _marginal_groups(result, coordinate: int):
    """(count, sum of predictions, sum of outcomes) per non-empty interval of coordinate j (see
    :func:`_marginal_intervals`)."""
    return _marginal_intervals(result, coordinate)[1:]


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
    if Target(result.mode).topk:
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


def _draw_panel(ax, results, labels, coordinate: int, n_coords: int, alpha, colors, n_bins=None) -> None:
    overlay = len(results) > 1
    estimator_bins = n_bins == "estimator"
    strip = _append_strip(ax)
    ax.plot([0, 1], [0, 1], linestyle="--", color="0.45", linewidth=1, label="perfect calibration")
    markers = "osD^vP*X"
    all_counts = []
    for i, (res, label) in enumerate(zip(results, labels)):
        fine = reliability_points(res, coordinate, alpha)  # the estimator's intervals: the strip
        pts = fine if estimator_bins else display_points(res, coordinate, n_bins, alpha)
        color = colors[i % len(colors)]
        # max(., 0) guards the bar lengths against rounding in the Wilson end points.
        yerr = np.maximum(np.vstack([pts["observed"] - pts["lower"], pts["upper"] - pts["observed"]]), 0.0)
        level = f"{100 * (1 - (res.alpha if alpha is None else alpha)):g}%"
        what = "observed frequency" if estimator_bins else "observed frequency per display bin"
        text = label if overlay else f"{what} ({level} Wilson CI)"
        ax.errorbar(pts["pred"], pts["observed"], yerr=yerr, fmt=markers[i % len(markers)] + "-",
                    color=color, markersize=4 if n_coords == 1 else 3, linewidth=1, elinewidth=0.8, capsize=2,
                    label=text, alpha=0.9)
        edges, counts = _strip_counts(fine, res.n_bins)
        strip.stairs(counts, edges, fill=not overlay, color=color, alpha=0.55 if not overlay else 0.9,
                     linewidth=1.2)
        if not estimator_bins and not overlay:  # where the display bins are cut
            inner = pts["edges"][(pts["edges"] > 0.0) & (pts["edges"] < 1.0)]
            strip.vlines(inner, 0.0, 1.0, transform=strip.get_xaxis_transform(), color="0.2", linewidth=0.6)
        all_counts.append(counts)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_aspect("auto")
    ax.set_ylabel("observed frequency")
    ax.grid(True, linewidth=0.4, alpha=0.5)
    title = _panel_title(results[0], coordinate, n_coords)
    if title:
        ax.set_title(title, fontsize="medium")
    elif not overlay and not estimator_bins:
        # one model: what its interval and test say, with the direction of a top-1 result
        ax.set_title(results[0].figure_verdict(alpha, sep=": "), fontsize="small")
    if coordinate == 0:  # one legend per figure
        ax.legend(loc="upper left", fontsize="small" if n_coords == 1 else "x-small", frameon=False)
    counts = np.concatenate(all_counts)
    positive = counts[counts > 0]
    unit = "rows per 1/B" if not estimator_bins else "rows"
    if positive.size and positive.max() > 100 * np.median(positive):
        # very uneven counts (e.g. most confidences near 1): a linear strip would show one bar only
        strip.set_yscale("symlog", linthresh=1.0)
        top = math.ceil(math.log10(positive.max()))
        strip.set_yticks([0] + [10.0**e for e in range(0, top + 1, 2 if top > 3 else 1)])
        strip.set_ylabel(f"{unit} (log)", fontsize="small")
    else:
        strip.set_ylabel(unit, fontsize="small")
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


def plot_reliability(result, ax=None, *, n_bins=None, overlay: Sequence | None = None,
                     labels: Sequence[str] | None = None, alpha: float | None = None, colors: Sequence | None = None):
    """Reliability diagram at display bins with Wilson intervals, over a strip of the rows per 1/B.

    Parameters
    ----------
    result : CalibrationResult or list of CalibrationResult
        One result, or several results of the same target (mode, k and
        dimension) to overlay (the comparison of models).
    n_bins : None, int or "estimator"
        The points drawn.  None (default): deciles of the predictions (ten
        groups of about n/10 rows); an integer 2 to 15: that many equal-width
        intervals of [0, 1].  Both are *display bins* (see
        :func:`display_points`), chosen for reading: the estimator's B
        (754 bins at 10^6 rows) gives points whose intervals overlap into a
        cloud.  ``"estimator"``: one point per interval [i/B, (i+1)/B) of the
        estimator (:func:`reliability_points`).  Results of files and Dask
        frames hold bin sums, not rows: their display bins are unions of the
        estimator's intervals (see :func:`display_bins_from_sums`).
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
    Each point is one group g of rows (a display bin, or with
    ``n_bins="estimator"`` an interval of the estimator's bins):
    x = mean prediction of its rows, y = their observed frequency
    ``o_g = e_g / c_g`` with ``e_g`` the number of rows whose outcome
    indicator is 1 and ``c_g`` the group size; the vertical bar is the Wilson
    interval ``(o + z^2/(2c) -/+ z sqrt(o(1-o)/c + z^2/(4c^2))) / (1 + z^2/c)``,
    z = Phi^-1(1 - alpha/2).  The strip shows the rows per interval
    [i/B, (i+1)/B) of the estimator, with the display bins' edges as vertical
    lines (one model); rows with a prediction of exactly 1 (their own group) are
    counted in the last interval.  When the largest count exceeds 100 times
    the median count the strip uses a symmetric-log scale.
    """
    n_bins = check_option("reliability_bins", n_bins, "n_bins")
    results = _as_results(result) + (list(overlay) if overlay is not None else [])
    results = _as_results(results)
    dims = {len(coordinate_columns(r.bin_table())) for r in results}
    modes = {(r.mode, r.k) for r in results}
    if len(dims) != 1 or len(modes) != 1:
        raise ValueError("overlaid results must have the same mode, k and dimension; got "
                         + ", ".join(f"{m} (k={k})" for m, k in sorted(modes, key=str)))
    n_coords = dims.pop()
    if labels is None:
        labels = [model_name(r.formula, r.prob_names, f"model {i + 1}", getattr(r, "model_label", None))
                  for i, r in enumerate(results)]
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
        _draw_panel(panel, results, labels, j, n_coords, alpha, colors, n_bins)
    return axes[0] if n_coords == 1 else np.array(axes, dtype=object)


# =========================================================================== report figures
# Figures of a calibration report: the flexible calibration curve, the reliability diagram at
# display bins, the bin sensitivity of the verdict and the distribution of the predictions.
# Each returns a new ``matplotlib.figure.Figure`` (not registered with pyplot: nothing to close),
# at most 16 cm wide, with its legend below the axes so that it never covers data.

#: Width of every report figure in inches (15.5 cm, inside an A4 page's text width).
FIGURE_WIDTH = 15.5 / 2.54

#: Resolution of the report figures (pixels per inch): they are made at it, so that a layout
#: solved once (:func:`flexible_curve_figure`) is the layout of the PNG embedded in a report.
FIGURE_DPI = 120

#: Largest number of equal-width display bins (the table's ``display_bins`` option).
MAX_DISPLAY_BINS = OPTIONS["display_bins"].maximum

#: Bins of the prediction histograms (over the plotted range).
STRIP_BINS = 50

_MARKERS = "osD^vP*X"


def _labels_for(results, labels) -> list[str]:
    if labels is None:
        return [model_name(r.formula, r.prob_names, f"model {i + 1}", getattr(r, "model_label", None))
                for i, r in enumerate(results)]
    if isinstance(labels, str):
        labels = [labels]
    labels = list(labels)
    if len(labels) != len(results):
        raise ValueError(f"labels must have one name per result ({len(results)}), got {len(labels)}")
    for lab in labels:
        if not isinstance(lab, str):
            raise TypeError(f"labels must be strings, got {type(lab).__name__}")
    return labels


def _binary_rows(res, label: str) -> tuple[np.ndarray, np.ndarray]:
    """(p, y) of a binary or top-1 result whose rows are in memory."""
    if not Target(res.mode).one_dimensional:
        raise ValueError(f"results: {label!r} is a {res.mode} result; this figure needs a binary or top-1 "
                         "result (one probability per row)")
    if res.data is None:
        raise ValueError(f"results: {label!r} holds no rows (streamed or aggregated data); this figure needs "
                         "the rows in memory")
    p = np.asarray(res.data.z[:, 0], dtype=np.float64)
    y = np.rint(np.asarray(res.data.y[:, 0], dtype=np.float64))
    return p, y


def _axis_limit(values) -> float:
    """Upper limit of both axes: 1, or a multiple of 0.05 above the data when they all lie below 0.5."""
    top = max(float(np.max(v)) for v in values)
    if top >= 0.5:
        return 1.0
    return min(1.0, math.ceil(top * 1.08 / 0.05) * 0.05)


def _figure(height_in: float):
    """A new Figure with an Agg canvas (not registered with pyplot, so there is nothing to close)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(FIGURE_WIDTH, height_in), dpi=FIGURE_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _new_figure(height_in: float, nrows: int, ratios):
    fig = _figure(height_in)
    axes = fig.subplots(nrows, 1, sharex=True, gridspec_kw={"height_ratios": list(ratios)}, squeeze=False)[:, 0]
    return fig, axes


def _legend_below(fig, handles, texts, ncols: int = 1):
    return fig.legend(handles, texts, loc="outside lower center", ncols=ncols, frameon=False, fontsize="small")


def _piled(counts: np.ndarray) -> bool:
    """Very uneven bin counts (the largest above 30 times the median occupied bin): use a log scale."""
    positive = counts[counts > 0]
    return bool(positive.size) and bool(positive.max() > 30 * np.median(positive))


def _outcome_strip(ax, p, y, edges, color, label) -> None:
    """Mirrored histogram of the predictions: events up, non-events down, each scaled to its maximum.

    Heights are ``c / max(c)``, or ``log(1 + c) / log(1 + max(c))`` when the counts pile up in a
    few bins (e.g. confidences near 1), so that the other bins stay visible.
    """
    c1 = np.histogram(p[y == 1], bins=edges)[0].astype(float)
    c0 = np.histogram(p[y == 0], bins=edges)[0].astype(float)
    m1, m0 = max(c1.max(), 1.0), max(c0.max(), 1.0)
    log = _piled(c1) or _piled(c0)
    if log:
        h1, h0 = np.log1p(c1) / np.log1p(m1), np.log1p(c0) / np.log1p(m0)
    else:
        h1, h0 = c1 / m1, c0 / m0
    ax.stairs(h1, edges, baseline=0.0, fill=True, color=color, alpha=0.8, linewidth=0)
    ax.stairs(-h0, edges, baseline=0.0, fill=True, color=color, alpha=0.35, linewidth=0)
    ax.axhline(0.0, color="0.3", linewidth=0.5)
    ax.set_ylim(-1.15, 1.15)
    ax.set_yticks([-1.0, 1.0], [f"{int(m0)}", f"{int(m1)}"], fontsize="x-small")
    ax.set_ylabel(f"{label}\nrows per bin{' (log)' if log else ''}\n(y = 1 up, y = 0 down)", fontsize="x-small",
                  rotation=0, ha="right", va="center")


def _stat_text(vp) -> str:
    return (f"CITL {vp.citl:.2f} [{vp.citl_ci[0]:.2f}, {vp.citl_ci[1]:.2f}]; "
            f"slope {vp.slope:.2f} [{vp.slope_ci[0]:.2f}, {vp.slope_ci[1]:.2f}]")


def _result_stat_text(res, vp, alpha: float, level: str) -> str:
    """CITL and slope of the panel: a clustered result's cluster-robust ones (its evidence table's), else val.prob's."""
    robust = getattr(getattr(res, "clustering", None), "measures", None)
    if robust is None:
        return _stat_text(vp) + f" ({level} CI)"
    (a0, a1), (b0, b1) = robust.citl_ci(alpha), robust.slope_ci(alpha)
    return (f"CITL {robust.citl:.2f} [{a0:.2f}, {a1:.2f}]; slope {robust.slope:.2f} [{b0:.2f}, {b1:.2f}] "
            f"({level} CI, cluster-robust)")


def _box_hits_curves(ax, bbox, curves) -> bool:
    """Whether a display-space box meets any (x, lower, upper) band or curve drawn in ``ax`` (data coords)."""
    for x, lo, hi in curves:
        lo_d = ax.transData.transform(np.column_stack([x, lo]))
        hi_d = ax.transData.transform(np.column_stack([x, hi]))
        inside = (lo_d[:, 0] >= bbox.x0) & (lo_d[:, 0] <= bbox.x1)
        if np.any(inside & (np.minimum(lo_d[:, 1], hi_d[:, 1]) <= bbox.y1)
                  & (np.maximum(lo_d[:, 1], hi_d[:, 1]) >= bbox.y0)):
            return True
    return False


def _place_text(fig, ax, text: str, curves):
    """Put ``text`` in the first corner of ``ax`` (upper left, lower right) where it covers no curve.

    Returns the text artist, or None when every corner is taken (the caller
    then prints the text in the legend below the axes).
    """
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()  # fixes the layout once; a text inside the axes does not change it
    for x, y, ha, va in ((0.02, 0.98, "left", "top"), (0.98, 0.02, "right", "bottom")):
        art = ax.text(x, y, text, transform=ax.transAxes, ha=ha, va=va, fontsize="x-small",
                      bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "0.7", "alpha": 0.9})
        pad = 0.3 * art.get_fontsize() * fig.dpi / 72.0  # the box's padding (pad=0.3 font sizes), in pixels
        if not _box_hits_curves(ax, art.get_window_extent(renderer).padded(pad), curves):
            return art
        art.remove()
    return None


def _flexible_fit(fit, p, y, knots: int, alpha: float, label: str):
    """The flexible curve with ``knots`` knots, or with fewer (down to 3) when that fit has no finite estimate.

    With rare events a 4-knot spline often has no finite maximum-likelihood
    estimate (no event in a tail); the figure then shows the 3-knot curve and
    says so in the legend rather than failing.
    """
    from calibtest.inputs.validation import check_count

    knots = check_count(knots, "knots", minimum=3)
    for k in range(knots, 2, -1):
        try:
            return fit(p, y, knots=k, alpha=alpha)
        except ValueError as exc:
            if "separates" not in str(exc) or k == 3:
                raise ValueError(f"results: {label!r}: {exc}") from exc
    raise AssertionError("unreachable")  # pragma: no cover


def flexible_curve_figure(results, labels=None, *, knots=4, alpha: float = 0.05):
    """Flexible calibration curves with pointwise bands, CITL and slope, over a strip of the predictions.

    For each binary or top-1 result with its rows in memory the curve
    ``P(y = 1 | p)`` of :func:`calibtest.checks.flexible_calibration.flexible_calibration`
    (logistic recalibration on Harrell's restricted cubic spline of
    ``logit(p)``, ``knots`` knots) is drawn with its pointwise ``1 - alpha``
    band (delta method on the linear predictor), over the identity line of
    perfect calibration.  The calibration intercept (CITL, ``a0`` in
    ``logit P(y=1) = a0 + logit(p)``) and slope (``b`` in
    ``logit P(y=1) = a + b logit(p)``) of :func:`calibtest.val_prob`, with
    their Wald ``1 - alpha`` intervals, are printed in a corner of the panel
    that no curve crosses (or, if both corners are taken, in the legend).
    Under the panel, one strip per model shows the predictions of events
    (up) and non-events (down), each scaled to its largest bin count (the
    tick labels give those counts).

    Parameters
    ----------
    results : CalibrationResult or sequence of CalibrationResult
        Binary or top-1 results with rows in memory (``res.data``).
    labels : str or sequence of str, optional
        One name per result (default: the formulas' right-hand sides).
    knots : int
        Knots of the spline (3 to 7).  When a model's spline has no finite
        maximum-likelihood estimate (typically rare events with no event in a
        tail), the curve is refitted with one knot fewer, down to 3, and the
        legend gives the number used.
    alpha : float
        Level of the band and of the intervals of CITL and slope.

    Returns
    -------
    matplotlib.figure.Figure
        15.5 cm wide; the legend is below the axes.  Rows with p exactly 0 or
        1 are left out of the fits (as in R's ``val.prob``); their number is
        given in the legend.  When the CITL/slope text fits in a corner the
        constrained layout is solved once and then kept (the figure's layout
        engine is ``"none"``).

    References
    ----------
    .. [1] Van Calster, B. et al. (2016). "A calibration hierarchy for risk
       models was defined: from utopia to empirical data." *Journal of
       Clinical Epidemiology* 74, 167-176. doi:10.1016/j.jclinepi.2015.12.005
    .. [2] Harrell, F. E. (2015). *Regression Modeling Strategies*, 2nd ed., Springer.
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from calibtest.checks.flexible_calibration import flexible_calibration

    results = _as_results(results)
    labels = _labels_for(results, labels)
    rows = [_binary_rows(r, lab) for r, lab in zip(results, labels)]
    curves = [_flexible_fit(flexible_calibration, p, y, knots, alpha, lab) for (p, y), lab in zip(rows, labels)]
    vps = [r.val_prob(alpha) for r in results]  # each result's own, computed once (evidence, report)
    lim = _axis_limit([p for p, _ in rows] + [c.fitted for c in curves] + [c.upper for c in curves])
    m = len(results)
    fig, axes = _new_figure(4.3 + 0.55 * m + 0.2 * m, 1 + m, [4.0] + [0.75] * m)
    ax = axes[0]
    ax.plot([0, lim], [0, lim], linestyle="--", color="0.45", linewidth=1)
    handles = [Line2D([], [], linestyle="--", color="0.45", linewidth=1)]
    texts = ["perfect calibration"]
    level = f"{100 * (1 - alpha):g}%"
    diagonal = np.linspace(0.0, lim, 201)  # dense, so that the corner test sees the line everywhere
    drawn = [(diagonal, diagonal, diagonal)]
    for i, (curve, lab) in enumerate(zip(curves, labels)):
        color = f"C{i}"
        ax.fill_between(curve.grid, curve.lower, curve.upper, color=color, alpha=0.18, linewidth=0)
        ax.plot(curve.grid, curve.fitted, color=color, linewidth=1.6)
        drawn.append((curve.grid, curve.lower, curve.upper))
        notes = []
        if curve.knots.size < knots:
            notes.append(f"{curve.knots.size} knots")
        if curve.n_infinite_logit:
            notes.append(f"{curve.n_infinite_logit} rows with p = 0 or 1 not fitted")
        extra = f" ({'; '.join(notes)})" if notes else ""
        handles.append((Patch(color=color, alpha=0.18, linewidth=0), Line2D([], [], color=color, linewidth=1.6)))
        texts.append(f"{lab}: flexible curve, pointwise {level} band{extra}")
    ax.set_xlim(0.0, lim)
    ax.set_ylim(0.0, lim)
    ax.set_ylabel("observed proportion P(y = 1 | p)")
    ax.grid(True, linewidth=0.4, alpha=0.5)
    edges = np.linspace(0.0, lim, STRIP_BINS + 1)
    for i, ((p, y), lab) in enumerate(zip(rows, labels)):
        _outcome_strip(axes[1 + i], p, y, edges, f"C{i}", lab if m > 1 else "")
    axes[-1].set_xlabel(_MODE_AXIS_LABEL[results[0].mode] if len({r.mode for r in results}) == 1
                        else "predicted probability")
    stat_lines = [(f"{lab}: " if m > 1 else "") + _result_stat_text(r, vp, alpha, level)
                  for r, lab, vp in zip(results, labels, vps)]
    legend = _legend_below(fig, handles, texts)
    if _place_text(fig, ax, "\n".join(stat_lines), drawn) is None:
        # both corners are crossed by a curve: the numbers go into the legend instead
        legend.remove()
        _legend_below(fig, handles + [Line2D([], [], linestyle="none")] * m, texts + stat_lines)
    else:
        # the layout solved to place the text is final (a text inside the axes does not change it):
        # keep it rather than solve it again at every draw
        fig.set_layout_engine("none")
    return fig


# --------------------------------------------------------------------------- display bins
def _wilson(observed, n, alpha: float):
    """Wilson interval of a proportion ``observed`` of ``n`` rows (``n`` may be an effective size)."""
    from scipy.special import ndtri

    z = ndtri(1.0 - alpha / 2.0)
    centre = (observed + z ** 2 / (2 * n)) / (1 + z ** 2 / n)
    half = z / (1 + z ** 2 / n) * np.sqrt(np.maximum(observed * (1 - observed), 0.0) / n + z ** 2 / (4 * n ** 2))
    return centre - half, centre + half


def display_bins(z, y, n_bins=None, alpha: float = 0.05, weights=None) -> dict:
    """Display bins of one coordinate: mean prediction, observed frequency, Wilson interval, count.

    Parameters
    ----------
    z : ndarray, shape (n,)
        Predictions (probabilities in [0, 1]).
    y : ndarray, shape (n,)
        0/1 outcomes.
    n_bins : int, optional
        None: deciles of risk -- group g holds the rows with
        ``q_{g/10} <= z < q_{(g+1)/10}`` (q the empirical quantiles, numpy's
        default; the largest z in the last group), so tied predictions stay
        together and a group may be empty (then dropped).  An integer B' (2 to
        15): equal-width intervals ``[i/B', (i+1)/B')`` of [0, 1], 1.0 in the
        last, with the estimator's edge rule (a value on an edge up to float64
        rounding is on it).
    alpha : float
        The Wilson intervals have level ``1 - alpha``.
    weights : ndarray, shape (n,), optional
        Case weights (non-negative): ``pred`` and ``observed`` are then the
        weighted means of a bin, and its Wilson interval uses Kish's
        effective size ``(sum w)^2 / sum w^2`` in place of the row count
        (``events`` stays the unweighted count of rows with y = 1).  The bins
        are those of the rows, unweighted.

    Returns
    -------
    dict of ndarray
        ``pred``, ``observed``, ``count``, ``events``, ``lower``, ``upper``
        (one entry per non-empty bin, in increasing order), ``edges`` (the
        bin edges, empty bins included) and ``bin_count`` (rows per bin, one
        per interval of ``edges``); with weights also ``n_effective``.
    """
    z = np.asarray(z, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if n_bins is None:
        edges = np.quantile(z, np.linspace(0.0, 1.0, 11))
        key = np.searchsorted(edges[1:-1], z, side="right")
        nb = 10
    else:
        nb = int(n_bins)
        edges = np.linspace(0.0, 1.0, nb + 1)
        key = np.minimum(cube_indices(z[:, None], nb)[:, 0], nb - 1)
    return _bin_points(key, nb, edges, z, y, alpha, weights)


def _bin_points(key, nb: int, edges, z, y, alpha: float, weights=None) -> dict:
    """The points of display bins given each row's bin ``key`` (0 to ``nb - 1``): see :func:`display_bins`."""
    from statsmodels.stats.proportion import proportion_confint

    count = np.bincount(key, minlength=nb)
    events = np.rint(np.bincount(key, weights=y, minlength=nb)).astype(np.int64)
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        sw = np.bincount(key, weights=w, minlength=nb)
        keep = sw > 0
        sw2 = np.bincount(key, weights=w * w, minlength=nb)[keep]
        pred = np.bincount(key, weights=w * z, minlength=nb)[keep] / sw[keep]
        observed = np.bincount(key, weights=w * y, minlength=nb)[keep] / sw[keep]
        n_eff = sw[keep] ** 2 / sw2
        lower, upper = _wilson(observed, n_eff, alpha)
        return {"pred": pred, "observed": observed, "count": count[keep], "events": events[keep],
                "lower": lower, "upper": upper, "edges": edges, "bin_count": count, "n_effective": n_eff}
    sum_pred = np.bincount(key, weights=z, minlength=nb)
    keep = count > 0
    count, events, sum_pred = count[keep], events[keep], sum_pred[keep]
    lower, upper = proportion_confint(events, count, alpha=alpha, method="wilson")
    return {"pred": sum_pred / count, "observed": events / count, "count": count, "events": events,
            "lower": np.asarray(lower, dtype=float), "upper": np.asarray(upper, dtype=float), "edges": edges,
            "bin_count": np.bincount(key, minlength=nb)}


def curve_bins(z, y, n_bins: int = 5, strategy: str = "uniform", alpha: float = 0.05, weights=None) -> dict:
    """Display bins by the rule of :func:`sklearn.calibration.calibration_curve`, with Wilson intervals.

    The bins of scikit-learn's reliability curve (and of
    :class:`sklearn.calibration.CalibrationDisplay`): ``strategy="uniform"``
    cuts [0, 1] into ``n_bins`` equal-width intervals, ``"quantile"`` at the
    ``n_bins``-quantiles of ``z`` (``np.percentile``); a prediction on an
    inner edge goes to the bin below it (``np.searchsorted(edges[1:-1], z)``),
    and empty bins are dropped, so ``pred`` and ``observed`` are the
    ``prob_pred`` and ``prob_true`` of ``calibration_curve(y, z, n_bins=n_bins,
    strategy=strategy)``.

    Parameters
    ----------
    z, y : ndarray, shape (n,)
        Predictions and 0/1 outcomes, as in :func:`display_bins`.
    n_bins : int
        Number of bins (at least 1).
    strategy : {"uniform", "quantile"}
    alpha : float
        The Wilson intervals have level ``1 - alpha``.
    weights : ndarray, shape (n,), optional
        Case weights, as in :func:`display_bins`.

    Returns
    -------
    dict of ndarray
        As :func:`display_bins`.
    """
    z = np.asarray(z, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if strategy == "quantile":
        edges = np.percentile(z, np.linspace(0, 1, n_bins + 1) * 100)
    else:
        edges = np.linspace(0.0, 1.0, n_bins + 1)
    key = np.searchsorted(edges[1:-1], z)
    return _bin_points(key, n_bins, edges, z, y, alpha, weights)


def display_bins_from_sums(key, count, sum_pred, sum_obs, n_fine: int, n_bins=None, alpha: float = 0.05) -> dict:
    """Display bins made of whole intervals [i/B, (i+1)/B), for a result that holds bin sums, not rows.

    A file or a Dask frame is reduced to the estimator's per-bin sums (count,
    sum of predictions, sum of outcomes), so its display bins are unions of
    the estimator's intervals, each point exact for the rows it holds:

    * ``n_bins=None``: about deciles.  Interval i goes to group
      ``floor(10 C_i / n)``, with C_i the rows in the intervals before it:
      the decile of the first of its rows.  A group holds the rows of its
      intervals, so its size is n/10 up to one interval (e.g. about 1330 rows
      of 10^6 at B = 754); an interval holding more than n/10 rows (a pile
      of predictions) is a group of its own and the groups after it move up.
    * an integer B': interval i goes to the display bin ``[j/B', (j+1)/B')``
      that holds its mean prediction (the estimator's edge rule).  When B'
      divides B these are exactly the equal-width display bins of the rows;
      otherwise an interval that straddles an edge goes whole to one side.

    Parameters
    ----------
    key : ndarray of int, shape (m,)
        Increasing interval indices i (B for a prediction of exactly 1).
    count, sum_pred, sum_obs : ndarray, shape (m,)
        Rows, sum of predictions and sum of 0/1 outcomes per interval.
    n_fine : int
        B, the estimator's bins per coordinate.
    n_bins : int, optional
        As in :func:`display_bins`.
    alpha : float
        Level of the Wilson intervals, ``1 - alpha``.

    Returns
    -------
    dict of ndarray
        As :func:`display_bins`: ``pred``, ``observed``, ``count``,
        ``events``, ``lower``, ``upper`` per non-empty display bin, ``edges``
        and ``bin_count`` (for deciles the edges of the non-empty groups,
        multiples of 1/B).
    """
    from statsmodels.stats.proportion import proportion_confint

    key = np.asarray(key, dtype=np.int64)
    rows = np.rint(np.asarray(count, dtype=np.float64)).astype(np.int64)
    sum_pred = np.asarray(sum_pred, dtype=np.float64)
    sum_obs = np.asarray(sum_obs, dtype=np.float64)
    if n_bins is None:
        before = np.cumsum(rows) - rows
        group = np.minimum(10 * before // rows.sum(), 9)
        nb = 10
    else:
        nb = int(n_bins)
        group = np.minimum(cube_indices((sum_pred / rows)[:, None], nb)[:, 0], nb - 1)
    c = np.bincount(group, weights=rows, minlength=nb)
    sp = np.bincount(group, weights=sum_pred, minlength=nb)
    so = np.bincount(group, weights=sum_obs, minlength=nb)
    keep = c > 0
    if n_bins is None:
        first = np.searchsorted(group, np.flatnonzero(keep))  # group is non-decreasing in i
        edges = np.append(key[first] / n_fine, min(key[-1] + 1, n_fine) / n_fine)
        bin_count = c[keep].astype(np.int64)
    else:
        edges = np.linspace(0.0, 1.0, nb + 1)
        bin_count = c.astype(np.int64)
    count_k = c[keep].astype(np.int64)
    events = np.rint(so[keep]).astype(np.int64)
    lower, upper = proportion_confint(events, count_k, alpha=alpha, method="wilson")
    return {"pred": sp[keep] / count_k, "observed": events / count_k, "count": count_k, "events": events,
            "lower": np.asarray(lower, dtype=float), "upper": np.asarray(upper, dtype=float), "edges": edges,
            "bin_count": bin_count}


def display_points(result, coordinate: int = 0, n_bins=None, alpha: float | None = None) -> dict:
    """The display bins of one panel of a result's reliability diagram.

    With the rows in memory (``result.data``), :func:`display_bins` of
    coordinate j of the rows (deciles of the predictions, or ``n_bins``
    equal-width bins); for a result of a file or a Dask frame, which holds
    the estimator's bin sums only, :func:`display_bins_from_sums` of the
    marginal intervals of coordinate j.

    Parameters
    ----------
    result : CalibrationResult
    coordinate : int
        0-based coordinate j (always 0 for binary and top-1).
    n_bins : int, optional
        None: deciles; 2 to 15: equal-width display bins.
    alpha : float, optional
        Level of the Wilson intervals (default: the result's alpha).

    Returns
    -------
    dict of ndarray
        As :func:`display_bins`, plus ``source``: ``"rows"`` or ``"bin sums"``.
    """
    n_bins = check_option("display_bins", n_bins, "n_bins")
    alpha = result.alpha if alpha is None else alpha
    if result.data is not None and coordinate < result.data.z.shape[1]:
        z = np.asarray(result.data.z[:, coordinate], dtype=np.float64)
        y = np.rint(np.asarray(result.data.y[:, coordinate], dtype=np.float64))
        return {**display_bins(z, y, n_bins=n_bins, alpha=alpha), "source": "rows"}
    key, count, sum_pred, sum_obs = _marginal_intervals(result, coordinate)
    return {**display_bins_from_sums(key, count, sum_pred, sum_obs, result.n_bins, n_bins, alpha),
            "source": "bin sums"}


def display_bins_caption(results, n_bins=None) -> str:
    """A caption sentence saying that the reliability diagram shows display bins, and how they differ.

    Parameters
    ----------
    results : CalibrationResult or sequence of CalibrationResult
    n_bins : int, optional
        As in :func:`display_reliability_figure`.

    Returns
    -------
    str
    """
    results = _as_results(results)
    n_bins = check_option("display_bins", n_bins, "n_bins")
    how = ("deciles of predicted risk (ten groups of about equal size)" if n_bins is None
           else f"{n_bins} equal-width intervals of the predicted probability")
    bs = sorted({int(r.n_bins) for r in results})
    b_text = ", ".join(map(str, bs))
    levels = sorted({f"{100 * (1 - r.alpha):g}%" for r in results})
    if all(Target(r.mode).full_calibration for r in results):
        grid = f"the simplex cut into equal-volume cells with B = {b_text} subdivisions per edge"
    else:
        grid = f"B = {b_text} equal-width bins per coordinate"
    return (f"Points are display bins chosen for reading: {how}, each plotted at its mean prediction against "
            f"its observed proportion with a {'/'.join(levels)} Wilson interval. They are not the estimator's "
            f"bins: the ECE estimate, its interval and the tests use {grid} (described under the bins of the estimator), many "
            "of which hold few rows; the display bins only summarise the same rows for the eye."
            + _bin_sums_sentence(results, n_bins))


def _bin_sums_sentence(results, n_bins) -> str:
    """The caption's sentence for results of files and Dask frames, which hold bin sums, not rows."""
    if all(r.data is not None for r in results):
        return ""
    which = ("about deciles (a group's size is n/10 up to one interval)" if n_bins is None
             else "the display bin that holds an interval's mean prediction")
    return (" The data were read as the estimator's bin sums, not rows (a file or a Dask frame): each display bin "
            f"is a union of whole estimator intervals [i/B, (i+1)/B), {which}, and the strip counts the rows per "
            "interval 1/B.")


def _display_strip(res, coordinate: int, strip_edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The strip under one panel of :func:`display_reliability_figure`: counts, their edges, rows beyond.

    With the rows in memory: a histogram of the predictions over
    ``strip_edges`` (50 bins of the plotted range).  For a result of a file
    or a Dask frame (the estimator's bin sums only): the rows per interval
    [i/B, (i+1)/B) of the estimator (a prediction of exactly 1 in the last)
    whose left edge is inside the plotted range.  The third value counts
    the rows beyond the plotted range (not in the strip).
    """
    lim = float(strip_edges[-1])
    if res.data is not None:
        z = np.asarray(res.data.z[:, coordinate], dtype=np.float64)
        return np.histogram(z, bins=strip_edges)[0], strip_edges, int(np.count_nonzero(z > lim))
    B = int(res.n_bins)
    key, count, _, _ = _marginal_intervals(res, coordinate)
    per_interval = np.rint(np.bincount(np.minimum(key, B - 1), weights=count, minlength=B)).astype(np.int64)
    shown = int(np.count_nonzero(np.arange(B) / B < lim))
    return per_interval[:shown], np.arange(shown + 1) / B, int(per_interval[shown:].sum())


def display_reliability_figure(results, labels=None, n_bins=None):
    """Reliability diagram at display bins: deciles of risk or at most 15 equal-width bins.

    Each point is a display bin g (see :func:`display_bins`): x = mean
    prediction of its rows, y = observed proportion ``e_g / c_g``, with the
    Wilson interval at each result's level ``1 - alpha``
    (``statsmodels.stats.proportion.proportion_confint(method="wilson")``),
    over the identity line; a strip under the panel is a histogram of the
    predictions (50 bins of the plotted range; symmetric-log scale when they
    pile up) with the display-bin edges as vertical lines.  A result of a
    file or a Dask frame holds the estimator's bin sums, not rows: its
    display bins are unions of whole estimator intervals
    (:func:`display_bins_from_sums`) and its strip counts the rows per
    interval [i/B, (i+1)/B).  The display bins are for reading only; the estimator's bins
    are described by :func:`display_bins_caption`.  Binary and top-1 results
    give one panel; top-k and full-calibration results one panel per
    coordinate (the j-th largest probability, or class j) with its own
    display bins.

    Parameters
    ----------
    results : CalibrationResult or sequence of CalibrationResult
        Results of one target (mode and dimension), with their rows in
        memory or (files, Dask frames) their bin sums.
    labels : str or sequence of str, optional
        One name per result.
    n_bins : int, optional
        None (default): deciles of risk.  An integer 2 to 15: equal-width bins.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.lines import Line2D

    results = _as_results(results)
    labels = _labels_for(results, labels)
    n_bins = check_option("display_bins", n_bins, "n_bins")
    dims = {len(coordinate_columns(r.bin_table())) for r in results}
    modes = {(r.mode, r.k) for r in results}
    if len(modes) != 1 or len(dims) != 1:
        raise ValueError("results must share one target (mode, k and dimension) to be overlaid")
    d = dims.pop()
    pts = [[display_points(r, j, n_bins) for j in range(d)] for r in results]
    m = len(results)
    ncols = min(d, 3)
    nrows = math.ceil(d / ncols)
    height = (4.6 if d == 1 else 2.9 * nrows + 0.4) + 0.25 * m
    fig = _figure(height)
    outer = fig.add_gridspec(nrows, ncols)
    panels = []
    for j in range(d):
        sub = outer[j // ncols, j % ncols].subgridspec(2, 1, height_ratios=[4, 1], hspace=0.05)
        ax = fig.add_subplot(sub[0])
        strip = fig.add_subplot(sub[1], sharex=ax)
        ax.tick_params(labelbottom=False)
        panels.append((ax, strip))
    lim = _axis_limit([np.concatenate([q["upper"], q["pred"]]) for per in pts for q in per])
    strip_edges = np.linspace(0.0, lim, STRIP_BINS + 1)
    strips = [[_display_strip(r, j, strip_edges) for j in range(d)] for r in results]
    beyond = [0] * m
    handles = [Line2D([], [], linestyle="--", color="0.45", linewidth=1)]
    texts = ["perfect calibration"]
    for j, (ax, strip) in enumerate(panels):
        ax.plot([0, lim], [0, lim], linestyle="--", color="0.45", linewidth=1)
        for i, lab in enumerate(labels):
            q = pts[i][j]
            yerr = np.maximum(np.vstack([q["observed"] - q["lower"], q["upper"] - q["observed"]]), 0.0)
            cont = ax.errorbar(q["pred"], q["observed"], yerr=yerr, fmt=_MARKERS[i % len(_MARKERS)] + "-",
                               color=f"C{i}", markersize=4 if d == 1 else 3, linewidth=0.9, elinewidth=0.8,
                               capsize=2)
            hist, edges, over = strips[i][j]
            strip.stairs(hist, edges, fill=m == 1, color=f"C{i}", alpha=0.6 if m == 1 else 1.0,
                         linewidth=1.2)
            beyond[i] += over
            if m == 1:
                inner = q["edges"][(q["edges"] > 0.0) & (q["edges"] < lim)]
                strip.vlines(inner, 0.0, 1.0, transform=strip.get_xaxis_transform(), color="0.2",
                             linewidth=0.6)
            if j == 0:
                handles.append(cont)
                level = f"{100 * (1 - results[i].alpha):g}%"
                texts.append(f"{lab}: observed proportion per display bin ({level} Wilson CI)")
        ax.set_xlim(0.0, lim)
        ax.set_ylim(0.0, lim)
        ax.grid(True, linewidth=0.4, alpha=0.5)
        ax.set_ylabel("observed proportion", fontsize="small" if d > 1 else "medium")
        title = _panel_title(results[0], j, d)
        if title:
            ax.set_title(title, fontsize="small")
        strip_counts = np.concatenate([strips[i][j][0] for i in range(m)])
        unit = "rows per\nbin of p" if all(r.data is not None for r in results) else "rows per\n1/B of p"
        if _piled(strip_counts):  # e.g. confidences near 1: a linear strip would show one bar only
            strip.set_yscale("symlog", linthresh=1.0)
            top = math.ceil(math.log10(strip_counts.max()))
            strip.set_yticks([0] + [10.0**e for e in range(0, top + 1, 2)])
            strip.set_ylabel(f"{unit} (log)", fontsize="x-small")
        else:
            strip.set_ylabel(unit, fontsize="x-small")
        strip.set_ylim(bottom=0)
        strip.tick_params(labelsize="x-small")
        what = _MODE_AXIS_LABEL.get(results[0].mode, "predicted probability") if d == 1 else "predicted probability"
        strip.set_xlabel(f"{what} (points: mean of a display bin)" if d == 1 else what,
                         fontsize="small" if d > 1 else "medium")
    if any(beyond):
        texts.append("predictions beyond the axis (not in the strip): "
                     + ", ".join(f"{lab} {k}" for lab, k in zip(labels, beyond)))
        handles.append(Line2D([], [], linestyle="none"))
    _legend_below(fig, handles, texts)
    return fig


# --------------------------------------------------------------------------- bin sensitivity
_SENSITIVITY_COLUMNS = ("n_bins", "T", "lower", "upper", "lower_open", "pvalue", "reject")

#: p-values below this are drawn at it (log axis) and marked as smaller.
P_FLOOR = 1e-16


def bin_sensitivity_figure(sensitivity_df, label=None, *, alpha=None):
    """T and the ECE^2 interval against the number of bins B, and the test's p-value, with verdict changes.

    Parameters
    ----------
    sensitivity_df : pandas.DataFrame or EvidenceResult
        ``EvidenceResult.sensitivity`` (columns ``n_bins``, ``T``, ``lower``,
        ``upper``, ``lower_open``, ``pvalue``, ``reject``), or the
        :class:`~calibtest.api.calib_test.EvidenceResult` itself (its ``alpha`` is then used).
    label : str, optional
        The model's name, in the title.
    alpha : float, optional
        Level of the test, drawn as a line on the p-value panel (default: the
        EvidenceResult's alpha, else 0.05).

    Returns
    -------
    matplotlib.figure.Figure
        Top panel: the debiased estimate T of ECE^2 (squared probability
        units) and its interval at each B, log-scaled B axis; an interval open
        at 0 has an open marker at its lower end.  Bottom panel: the p-value
        of the single-scale test at each B (log scale; values below 1e-16
        drawn at 1e-16 with a downward marker) with the line p = alpha.
        Where the verdict (``reject``) differs from that at the next smaller
        B, both panels carry a red ring.
    """
    import pandas as pd
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    from calibtest.inputs.validation import check_alpha

    if hasattr(sensitivity_df, "sensitivity"):
        alpha = sensitivity_df.alpha if alpha is None else alpha
        sensitivity_df = sensitivity_df.sensitivity
    alpha = check_alpha(0.05 if alpha is None else alpha)
    if not isinstance(sensitivity_df, pd.DataFrame):
        raise TypeError(f"sensitivity_df must be a DataFrame or an EvidenceResult, got {type(sensitivity_df).__name__}")
    missing = [c for c in _SENSITIVITY_COLUMNS if c not in sensitivity_df.columns]
    if missing:
        raise ValueError(f"sensitivity_df lacks the columns {missing}")
    if len(sensitivity_df) == 0:
        raise ValueError("sensitivity_df has no rows")
    if label is not None and not isinstance(label, str):
        raise TypeError(f"label must be a string, got {type(label).__name__}")
    s = sensitivity_df.sort_values("n_bins", kind="stable")
    b = s["n_bins"].to_numpy(np.float64)
    t = s["T"].to_numpy(np.float64)
    lo = s["lower"].to_numpy(np.float64)
    hi = s["upper"].to_numpy(np.float64)
    lopen = s["lower_open"].to_numpy(bool)
    pv = s["pvalue"].to_numpy(np.float64)
    rej = s["reject"].to_numpy(bool)
    change = np.concatenate([[False], rej[1:] != rej[:-1]])

    fig, (ax, axp) = _new_figure(4.8, 2, [3, 2])
    ax.axhline(0.0, color="0.45", linewidth=0.8)
    ax.vlines(b, lo, hi, color="C0", linewidth=1.4)
    ax.plot(b, hi, "_", color="C0", markersize=8)
    ax.plot(b[~lopen], lo[~lopen], "_", color="C0", markersize=8)
    ax.plot(b[lopen], lo[lopen], "o", mfc="white", mec="C0", markersize=5)
    ax.plot(b, t, "o", color="C1", markersize=5)
    pshow = np.maximum(pv, P_FLOOR)
    tiny = pv < P_FLOOR
    axp.plot(b, pshow, "-", color="C2", linewidth=0.8)
    axp.plot(b[~tiny], pshow[~tiny], "s", color="C2", markersize=4)
    axp.plot(b[tiny], pshow[tiny], "v", color="C2", markersize=5)
    axp.axhline(alpha, color="C3", linestyle="--", linewidth=1)
    ax.plot(b[change], t[change], "o", mfc="none", mec="C3", markersize=11, mew=1.5)
    axp.plot(b[change], pshow[change], "o", mfc="none", mec="C3", markersize=11, mew=1.5)
    ax.set_xscale("log")
    axp.set_yscale("log")
    axp.yaxis.set_minor_locator(NullLocator())  # the decades are labelled; unlabelled minor ticks add only clutter
    axp.xaxis.set_major_locator(FixedLocator(b))
    axp.xaxis.set_minor_locator(NullLocator())
    axp.xaxis.set_major_formatter(ScalarFormatter())
    span = np.log(b.max() / b.min()) if b.size > 1 else 1.0
    ax.set_xlim(b.min() * math.exp(-0.08 * span), b.max() * math.exp(0.08 * span))
    ymin = min(float(np.min(lo)), float(np.min(t)), 0.0)
    ymax = max(float(np.max(hi)), float(np.max(t)))
    pad = 0.1 * (ymax - ymin if ymax > ymin else 1.0)  # room for the markers at the extremes
    ax.set_ylim(ymin - pad, ymax + pad)
    ax.set_ylabel("ECE² (squared probability units)", fontsize="small")
    axp.set_ylabel("p-value (log scale)", fontsize="small")
    axp.set_xlabel("number of bins B (log scale)")
    pmin = min(float(pshow.min()), alpha)
    axp.set_ylim(pmin / 3, 1.5)
    for a in (ax, axp):
        a.grid(True, linewidth=0.4, alpha=0.5)
    if label:
        ax.set_title(label, fontsize="medium")
    level = f"{100 * (1 - alpha):g}%"
    handles = [Line2D([], [], marker="o", color="C1", linestyle="none"),
               Line2D([], [], color="C0", linewidth=1.4, marker="_", markersize=8),
               Line2D([], [], marker="s", color="C2", linewidth=0.8),
               Line2D([], [], color="C3", linestyle="--")]
    texts = ["debiased estimate T of ECE²", f"{level} interval for ECE²",
             "p-value of the test of calibration at B", f"α = {alpha:g}"]
    if lopen.any():  # a legend entry only for what is drawn
        handles.insert(2, Line2D([], [], marker="o", mfc="white", mec="C0", linestyle="none"))
        texts.insert(2, "interval open at 0")
    if tiny.any():
        handles.append(Line2D([], [], marker="v", color="C2", linestyle="none"))
        texts.append(f"p-value below {P_FLOOR:g} (drawn at {P_FLOOR:g})")
    if change.any():
        handles.append(Line2D([], [], marker="o", mfc="none", mec="C3", mew=1.5, linestyle="none", markersize=9))
        texts.append("verdict differs from the next smaller B")
    _legend_below(fig, handles, texts, ncols=2)
    return fig


# --------------------------------------------------------------------------- prediction strip
def prediction_strip_figure(results, labels=None):
    """Distribution of the predictions by outcome (events and non-events), one panel per model.

    Each panel shows two step histograms over the same bins (50 equal-width
    bins of the plotted range): the share of the events (y = 1) and of the
    non-events (y = 0) whose prediction falls in each bin, in percent of their
    own group, so that both are visible however rare the events are.  Group
    sizes are in the legend.  Separation of the two histograms is the
    discrimination of the model; their position relative to the event rate
    is its calibration in the large.

    Parameters
    ----------
    results : CalibrationResult or sequence of CalibrationResult
        Binary or top-1 results with rows in memory.
    labels : str or sequence of str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.lines import Line2D

    results = _as_results(results)
    labels = _labels_for(results, labels)
    rows = [_binary_rows(r, lab) for r, lab in zip(results, labels)]
    lim = _axis_limit([p for p, _ in rows])
    edges = np.linspace(0.0, lim, STRIP_BINS + 1)
    m = len(results)
    fig, axes = _new_figure(1.0 + 1.6 * m + 0.3 * m, m, [1.0] * m)
    handles, texts = [], []
    for i, ((p, y), lab, ax) in enumerate(zip(rows, labels, axes)):
        n1 = int(np.count_nonzero(y == 1))
        n0 = y.size - n1
        for cls, n_cls, style, color in ((1, n1, "-", "C3"), (0, n0, "--", "C0")):
            c = np.histogram(p[y == cls], bins=edges)[0]
            share = 100.0 * c / max(n_cls, 1)
            ax.stairs(share, edges, color=color, linestyle=style, linewidth=1.3,
                      fill=False)
            handles.append(Line2D([], [], color=color, linestyle=style, linewidth=1.3))
            texts.append(f"{lab}: {'events (y = 1)' if cls else 'non-events (y = 0)'}, n = {n_cls}")
        ax.set_ylabel("share of group (%)", fontsize="small")
        ax.set_ylim(bottom=0.0)
        ax.margins(y=0.08)
        ax.set_title(lab, fontsize="small")
        ax.grid(True, linewidth=0.4, alpha=0.5)
    axes[-1].set_xlim(0.0, lim)
    axes[-1].set_xlabel(_MODE_AXIS_LABEL[results[0].mode] if len({r.mode for r in results}) == 1
                        else "predicted probability")
    _legend_below(fig, handles, texts, ncols=2)
    return fig


def weighted_reliability_figure(result, label: str | None = None):
    """Weighted reliability diagram of a weighted binary or top-1 result, from its bin table.

    Each occupied bin of the estimator is a point at its weighted mean
    prediction ``sum w p / sum w`` against its weighted mean outcome
    ``sum w y / sum w`` (the bin table's ``mean_pred_weighted`` and
    ``mean_outcome_weighted``), with area proportional to its share of the
    total weight, over the identity line; the strip underneath shows each
    bin's share of the weight.  No per-bin intervals: the result keeps each
    bin's sum of weights, not the row weights their variance needs.

    Raises
    ------
    ValueError
        If the result is not weighted or not one-dimensional (binary, top-1).
    """
    if not getattr(getattr(result, "kind", None), "weighted", False):
        raise ValueError("the weighted reliability diagram needs a weighted result")
    if not result.mode.one_dimensional or result.k != 1:
        raise ValueError("the weighted reliability diagram is drawn for binary and top-1 results")
    table = result.bin_table()
    weight = table["weight"].to_numpy(float)
    keep = weight > 0
    share = weight[keep] / weight[keep].sum()
    pred = table["mean_pred_weighted"].to_numpy(float)[keep]
    observed = table["mean_outcome_weighted"].to_numpy(float)[keep]
    fig, (ax, strip) = _new_figure(5.4, 2, (4, 1))
    top = _axis_limit(np.concatenate([pred, observed]))
    ax.plot([0, top], [0, top], color="0.6", lw=1, ls="--", label="perfect calibration")
    ax.scatter(pred, observed, s=20 + 600 * share, color="C0", alpha=0.75, edgecolor="k", lw=0.5,
               label=(label or "model") + " (area: share of the weight)")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_ylabel("weighted observed frequency")
    ax.set_title(f"Weighted reliability diagram ({result.weighting.kind})", fontsize="medium")
    width = 1.0 / result.n_bins
    strip.bar(table["lower"].to_numpy(float)[keep], 100 * share, width=width, align="edge", color="C0",
              alpha=0.6)
    strip.set_ylabel("% weight", fontsize="small")
    strip.set_xlabel("weighted mean prediction (bins of width 1/B)")
    handles, texts = ax.get_legend_handles_labels()
    _legend_below(fig, handles, texts, ncols=2)
    return fig
