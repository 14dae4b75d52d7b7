"""Reliability diagrams and the report figures: what is drawn against independent computations.

The report figures (flexible curve, display-bin reliability diagram, bin sensitivity, prediction
strip) are also checked for legends and text boxes that cover drawn data, in display coordinates.

The per-bin points are recomputed from the raw rows with a plain floor(p * B)
grouping, and the Wilson interval from its closed form (Wilson 1927), not with
statsmodels.
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import StepPatch  # noqa: E402
from scipy import stats  # noqa: E402

import calibtest as ct  # noqa: E402
from calibtest.datasets import load_demo  # noqa: E402
from calibtest.reporting.plotting import plot_reliability, reliability_points  # noqa: E402


@pytest.fixture(scope="module")
def demo():
    return load_demo()


@pytest.fixture(scope="module")
def demo_result(demo):
    return ct.calib_ci("y ~ p", data=demo, n_bins=12)


@pytest.fixture(scope="module")
def topk_result():
    rng = np.random.default_rng(7)
    probs = rng.dirichlet([2.0, 1.0, 1.0, 0.5], size=600)
    labels = (rng.random(600)[:, None] > probs.cumsum(axis=1)).sum(axis=1)
    return ct.calib_ci(y=labels, probs=probs, k=2, n_bins=5), probs, labels


@pytest.fixture(autouse=True)
def _close_figures():
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


def _wilson(events, n, alpha):
    """Wilson score interval, closed form."""
    z = stats.norm.isf(alpha / 2)
    phat = events / n
    centre = (phat + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * np.sqrt(phat * (1 - phat) / n + z**2 / (4 * n**2))
    return centre - half, centre + half


def test_points_match_direct_grouping_and_wilson(demo, demo_result):
    B = 12
    frame = pd.DataFrame({"bin": np.floor(demo["p"].to_numpy() * B).astype(int), "p": demo["p"], "y": demo["y"]})
    groups = frame.groupby("bin").agg(count=("y", "size"), events=("y", "sum"), pred=("p", "mean"))
    groups = groups.sort_values("pred")
    pts = reliability_points(demo_result, alpha=0.1)
    np.testing.assert_array_equal(pts["count"], groups["count"].to_numpy())
    np.testing.assert_array_equal(pts["events"], groups["events"].to_numpy())
    np.testing.assert_allclose(pts["pred"], groups["pred"].to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(pts["observed"], (groups["events"] / groups["count"]).to_numpy(), atol=1e-12)
    lo, hi = _wilson(groups["events"].to_numpy(), groups["count"].to_numpy(), 0.1)
    np.testing.assert_allclose(pts["lower"], lo, atol=1e-12)
    np.testing.assert_allclose(pts["upper"], hi, atol=1e-12)


def test_binary_diagram_draws_points_intervals_and_counts(demo, demo_result):
    ax = demo_result.plot_reliability(n_bins="estimator")
    assert isinstance(ax, matplotlib.axes.Axes)
    fig = ax.figure
    assert len(fig.axes) == 2  # main panel and count strip
    strip = next(a for a in fig.axes if a is not ax)
    # the diagonal
    diag = [ln for ln in ax.get_lines() if list(ln.get_xdata()) == [0, 1] and list(ln.get_ydata()) == [0, 1]]
    assert len(diag) == 1
    # the points are the bin means
    pts = reliability_points(demo_result)
    data_lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == len(pts["pred"])]
    np.testing.assert_allclose(data_lines[0].get_xdata(), pts["pred"])
    np.testing.assert_allclose(data_lines[0].get_ydata(), pts["observed"])
    # the strip counts every row once, per interval [i/12, (i+1)/12)
    steps = [p for p in strip.patches if isinstance(p, StepPatch)]
    assert len(steps) == 1
    values, edges, _ = steps[0].get_data()
    np.testing.assert_allclose(edges, np.arange(13) / 12)
    expected = np.bincount(np.minimum(np.floor(demo["p"].to_numpy() * 12).astype(int), 11), minlength=12)
    np.testing.assert_array_equal(values, expected)
    assert values.sum() == len(demo)


def _marginal(z, y, B):
    """Rows grouped by floor(z * B): (mean z, events, count) sorted by mean z, by pandas."""
    frame = pd.DataFrame({"key": np.floor(z * B).astype(int), "z": z, "y": y})
    g = frame.groupby("key").agg(pred=("z", "mean"), events=("y", "sum"), count=("y", "size"))
    return g.sort_values("pred")


def test_topk_one_panel_per_coordinate(topk_result):
    res, probs, labels = topk_result
    axes = plot_reliability(res, n_bins="estimator")
    assert isinstance(axes, np.ndarray) and axes.shape == (2,)
    # independent: the sorted top-2 vector and its label indicators, grouped per coordinate
    order = np.argsort(-probs, axis=1, kind="stable")[:, :2]
    z = np.take_along_axis(probs, order, axis=1)
    yind = (order == labels[:, None]).astype(int)
    for j, ax in enumerate(axes):
        g = _marginal(z[:, j], yind[:, j], 5)
        pts = reliability_points(res, coordinate=j)
        np.testing.assert_array_equal(pts["count"], g["count"].to_numpy())
        np.testing.assert_array_equal(pts["events"], g["events"].to_numpy())
        np.testing.assert_allclose(pts["pred"], g["pred"].to_numpy(), rtol=1e-12)
        lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == len(g)]
        np.testing.assert_allclose(lines[0].get_xdata(), g["pred"].to_numpy(), rtol=1e-12)
        np.testing.assert_allclose(lines[0].get_ydata(), (g["events"] / g["count"]).to_numpy(), rtol=1e-12)
        assert "rank" in ax.get_title()
    assert sum(len(reliability_points(res, coordinate=j)["count"]) for j in range(2)) > 0


def test_full_mode_panels_group_rows_by_class_if_available():
    rng = np.random.default_rng(4)
    probs = rng.dirichlet([2.0, 1.0, 1.0], size=400)
    labels = (rng.random(400)[:, None] > probs.cumsum(axis=1)).sum(axis=1)
    try:
        res = ct.calib_ci(y=labels, probs=probs, k="full", n_bins=6)
    except (TypeError, ValueError) as exc:
        pytest.skip(f"full calibration is not on this branch: {exc}")
    axes = plot_reliability(res, n_bins="estimator")
    assert axes.shape == (3,)
    for j in range(3):
        g = _marginal(probs[:, j], (labels == j).astype(int), 6)
        pts = reliability_points(res, coordinate=j)
        np.testing.assert_array_equal(pts["count"], g["count"].to_numpy())
        np.testing.assert_array_equal(pts["events"], g["events"].to_numpy())
        np.testing.assert_allclose(pts["pred"], g["pred"].to_numpy(), rtol=1e-12)


def test_overlay_two_models_and_bad_input(demo):
    import matplotlib.pyplot as plt

    df = demo.assign(q=np.clip(demo["p"] * 1.2, 0, 1))
    a = ct.calib_ci("y ~ p", data=df, n_bins=10)
    b = ct.calib_ci("y ~ q", data=df, n_bins=10)
    ax = plot_reliability([a, b])
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "p" in legend and "q" in legend
    ax2 = plot_reliability(a, overlay=[b], labels=["old", "new"])
    assert {"old", "new"} <= {t.get_text() for t in ax2.get_legend().get_texts()}
    rng = np.random.default_rng(1)
    probs = rng.dirichlet([1, 1, 1], size=200)
    topk = ct.calib_ci(y=rng.integers(0, 3, 200), probs=probs, k=2)
    with pytest.raises(ValueError, match="same mode"):
        plot_reliability([a, topk])
    with pytest.raises(ValueError, match="one name per result"):
        plot_reliability([a, b], labels=["only one"])
    with pytest.raises(ValueError, match="2 Axes"):
        fig, axs = plt.subplots(1, 3)
        plot_reliability(topk, ax=axs)
    with pytest.raises(TypeError, match="CalibrationResult"):
        plot_reliability("not a result")


def test_given_axes_are_used(demo_result):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    out = plot_reliability(demo_result, ax=ax)
    assert out is ax
    assert len(fig.axes) == 2


def test_count_strip_switches_to_log_scale_for_piled_up_confidences():
    rng = np.random.default_rng(9)
    conf = np.concatenate([np.full(3000, 1.0), rng.uniform(0.3, 0.99, 200)])
    correct = (rng.random(conf.size) < conf).astype(int)
    res = ct.calib_ci(y=correct, probs=conf, n_classes=10, n_bins=20)
    ax = plot_reliability(res)
    strip = next(a for a in ax.figure.axes if a is not ax)
    assert strip.get_yscale() == "symlog"
    values = next(p for p in strip.patches if isinstance(p, StepPatch)).get_data()[0]
    assert values[-1] == 3000 + np.sum(conf[3000:] >= 0.95)  # the rows at 1.0 join the last interval
    lin = plot_reliability(ct.calib_ci(y=correct[3000:], probs=conf[3000:], n_classes=10, n_bins=20))
    assert next(a for a in lin.figure.axes if a is not lin).get_yscale() == "linear"


# =========================================================================== report figures
from scipy.special import expit  # noqa: E402

from calibtest.checks.flexible_calibration import flexible_calibration  # noqa: E402
from calibtest.reporting.plotting import (FIGURE_WIDTH, bin_sensitivity_figure, display_bins,  # noqa: E402
                                          display_bins_caption, display_reliability_figure,
                                          flexible_curve_figure, prediction_strip_figure)


@pytest.fixture(scope="module")
def rare_result():
    """A rare-event model (about 2% events), over-confident."""
    rng = np.random.default_rng(5)
    x = rng.normal(-4.0, 1.0, 4000)
    y = (rng.random(4000) < expit(0.4 + 1.2 * x)).astype(int)
    return ct.calib_ci(y=y, probs=expit(x))


@pytest.fixture(scope="module")
def second_result(demo):
    return ct.calib_ci(y=demo["y"].to_numpy(), probs=demo["p"].to_numpy() ** 1.3)


def _densify(xy: np.ndarray, per_segment: int = 60) -> np.ndarray:
    """Points along the segments of a polyline (display coordinates)."""
    if len(xy) < 2:
        return xy
    t = np.linspace(0.0, 1.0, per_segment)[None, :, None]
    seg = xy[:-1, None, :] + t * (xy[1:, None, :] - xy[:-1, None, :])
    return seg.reshape(-1, 2)


def _drawn_points(fig):
    """Display coordinates of everything drawn as data in each Axes, limited to the Axes' box."""
    out = []
    for ax in fig.axes:
        box = ax.get_window_extent()
        pts = []
        for ln in ax.get_lines():
            xy = ln.get_transform().transform(np.asarray(ln.get_xydata(), dtype=float))
            pts.append(_densify(xy[np.all(np.isfinite(xy), axis=1)]) if ln.get_linestyle() not in ("None", "none", "")
                       else xy)
        for coll in ax.collections:
            tr = coll.get_transform()
            for path in coll.get_paths():
                pts.append(_densify(tr.transform(path.vertices)))
        for patch in ax.patches:
            pts.append(_densify(patch.get_transform().transform(patch.get_path().vertices)))
        pts = np.concatenate([p for p in pts if len(p)]) if pts else np.empty((0, 2))
        pts = pts[np.all(np.isfinite(pts), axis=1)]
        inside = ((pts[:, 0] >= box.x0) & (pts[:, 0] <= box.x1) & (pts[:, 1] >= box.y0) & (pts[:, 1] <= box.y1))
        out.append((ax, pts[inside]))
    return out


def _assert_nothing_covers_data(fig):
    """The legend box meets no Axes and covers no drawn point; in-panel text boxes cover no drawn point."""
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    assert len(fig.legends) == 1
    leg = fig.legends[0].get_window_extent(renderer)
    drawn = _drawn_points(fig)
    for ax, pts in drawn:
        assert not leg.overlaps(ax.get_window_extent()), "the legend overlaps an Axes"
        inside = (pts[:, 0] >= leg.x0) & (pts[:, 0] <= leg.x1) & (pts[:, 1] >= leg.y0) & (pts[:, 1] <= leg.y1)
        assert not inside.any()
        for text in ax.texts:
            patch = text.get_bbox_patch()
            bb = (patch if patch is not None else text).get_window_extent(renderer)
            hit = (pts[:, 0] >= bb.x0) & (pts[:, 0] <= bb.x1) & (pts[:, 1] >= bb.y0) & (pts[:, 1] <= bb.y1)
            assert not hit.any(), f"the text {text.get_text()[:30]!r} covers data"
    # sized for an A4 page: at most 16 cm wide
    assert fig.get_size_inches()[0] * 2.54 <= 16.0


def _png(fig) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=50)
    return buf.getvalue()


def _sensitivity_frame():
    return pd.DataFrame({"n_bins": [5, 10, 20, 35, 60], "T": [1e-4, 3e-4, 2e-4, 5e-4, 4e-4],
                         "lower": [0.0, 1e-4, 0.0, 2e-4, 0.0], "upper": [6e-4, 8e-4, 9e-4, 1.2e-3, 1.4e-3],
                         "lower_open": [False, False, True, False, False],
                         "pvalue": [0.2, 0.01, 0.07, 1e-20, 0.3], "reject": [False, True, False, True, False]})


@pytest.mark.slow
@pytest.mark.parametrize("case", ["demo", "rare", "two"])
def test_report_figures_keep_legends_off_the_data(case, demo_result, rare_result, second_result):
    import matplotlib.pyplot as plt

    results, labels = {"demo": ([demo_result], ["demo"]), "rare": ([rare_result], ["rare"]),
                       "two": ([demo_result, second_result], ["Model A", "Model B"])}[case]
    n_before = plt.get_fignums()
    figs = [flexible_curve_figure(results, labels), display_reliability_figure(results, labels),
            display_reliability_figure(results, labels, n_bins=10), prediction_strip_figure(results, labels),
            bin_sensitivity_figure(_sensitivity_frame(), labels[0])]
    for fig in figs:
        _assert_nothing_covers_data(fig)
        assert fig.get_size_inches()[0] == pytest.approx(FIGURE_WIDTH)
    assert plt.get_fignums() == n_before  # nothing registered with pyplot, nothing to close


def test_overlap_check_detects_a_legend_on_the_data(demo_result):
    """The overlap check fails for a legend put over the curve (so it can fail)."""
    fig = flexible_curve_figure(demo_result, "demo")
    ax = fig.axes[0]
    fig.legends[0].remove()
    fig.legend(["x"], loc="center", bbox_to_anchor=(0.5, 0.5), bbox_transform=ax.transAxes, fontsize=30)
    with pytest.raises(AssertionError):
        _assert_nothing_covers_data(fig)


@pytest.mark.slow
def test_figures_are_deterministic(demo_result, second_result):
    for make in (lambda: flexible_curve_figure([demo_result, second_result], ["A", "B"]),
                 lambda: display_reliability_figure(demo_result, "A"),
                 lambda: prediction_strip_figure(demo_result, "A"),
                 lambda: bin_sensitivity_figure(_sensitivity_frame(), "A")):
        assert _png(make()) == _png(make())


def test_flexible_figure_draws_the_fitted_curves_band_and_valprob_numbers(demo, demo_result, second_result):
    fig = flexible_curve_figure([demo_result, second_result], ["A", "B"])
    ax = fig.axes[0]
    p, y = demo["p"].to_numpy(), demo["y"].to_numpy()
    for i, probs in enumerate([p, p**1.3]):
        fc = flexible_calibration(probs, y)
        line = [ln for ln in ax.get_lines() if ln.get_color() == f"C{i}"][0]
        np.testing.assert_allclose(line.get_xdata(), fc.grid)
        np.testing.assert_allclose(line.get_ydata(), fc.fitted)
        band = ax.collections[i].get_paths()[0].vertices
        assert band[:, 1].min() == pytest.approx(fc.lower.min()) and band[:, 1].max() == pytest.approx(fc.upper.max())
    # CITL and slope: the offset and the joint logistic fit, refitted here with statsmodels directly
    import statsmodels.api as sm

    L = np.log(p / (1 - p))
    citl = sm.GLM(y, np.ones((p.size, 1)), family=sm.families.Binomial(), offset=L).fit().params[0]
    slope = sm.GLM(y, sm.add_constant(L), family=sm.families.Binomial()).fit().params[1]
    text = "\n".join(t.get_text() for t in ax.texts) + "\n".join(t.get_text() for t in fig.legends[0].get_texts())
    assert f"A: CITL {citl:.2f}" in text and f"slope {slope:.2f}" in text
    # the strip: events up, non-events down, each scaled to its own largest count
    strip = fig.axes[1]
    ups, downs = [pt.get_data()[0] for pt in strip.patches[:2]]
    edges = strip.patches[0].get_data()[1]
    c1 = np.histogram(p[y == 1], bins=edges)[0]
    c0 = np.histogram(p[y == 0], bins=edges)[0]
    np.testing.assert_allclose(ups, c1 / c1.max())
    np.testing.assert_allclose(downs, -c0 / c0.max())
    assert [t.get_text() for t in strip.get_yticklabels()] == [str(c0.max()), str(c1.max())]


def test_flexible_figure_bad_input(demo_result, topk_result):
    with pytest.raises(ValueError, match="binary or top-1"):
        flexible_curve_figure(topk_result[0], "topk")
    with pytest.raises(ValueError, match="one name per result"):
        flexible_curve_figure([demo_result, demo_result], ["one"])
    with pytest.raises(TypeError, match="labels must be strings"):
        flexible_curve_figure(demo_result, [3])
    streamed = ct.calib_ci(y=np.array([0, 1] * 50), probs=np.linspace(0.05, 0.95, 100))
    no_rows = streamed.with_parts(data=None)  # a result whose rows are not in memory
    with pytest.raises(ValueError, match="holds no rows"):
        flexible_curve_figure(no_rows, "x")


def _deciles_by_loop(z, y):
    """Deciles of risk the slow way: group g holds q_{g/10} <= z < q_{(g+1)/10}, the maximum in the last."""
    q = np.quantile(z, np.arange(11) / 10)
    groups = []
    for g in range(10):
        members = [i for i in range(z.size) if q[g] <= z[i] and (z[i] < q[g + 1] or (g == 9 and z[i] <= q[10]))]
        if members:
            groups.append((np.mean(z[members]), int(np.sum(y[members])), len(members)))
    return groups


def test_display_bins_deciles_and_equal_width(demo):
    z, y = demo["p"].to_numpy(), demo["y"].to_numpy()
    got = display_bins(z, y, alpha=0.1)
    ref = _deciles_by_loop(z, y)
    np.testing.assert_allclose(got["pred"], [r[0] for r in ref], rtol=1e-12)
    np.testing.assert_array_equal(got["events"], [r[1] for r in ref])
    np.testing.assert_array_equal(got["count"], [r[2] for r in ref])
    lo, hi = _wilson(np.array([r[1] for r in ref]), np.array([r[2] for r in ref]), 0.1)
    np.testing.assert_allclose(got["lower"], lo, atol=1e-12)
    np.testing.assert_allclose(got["upper"], hi, atol=1e-12)
    # equal width, with a grid value on an edge: 0.6 at 5 bins is in [0.6, 0.8)
    zz = np.array([0.0, 0.1, 0.6, 0.3 * 2, 0.79, 1.0])
    yy = np.array([0, 1, 1, 0, 1, 1])
    eq = display_bins(zz, yy, n_bins=5)
    np.testing.assert_array_equal(eq["count"], [2, 3, 1])
    np.testing.assert_array_equal(eq["events"], [1, 2, 1])
    np.testing.assert_array_equal(eq["bin_count"], [2, 0, 0, 3, 1])


def test_display_bins_keep_tied_predictions_together():
    z = np.repeat([0.1, 0.2, 0.3], [500, 30, 470])
    y = np.zeros(1000)
    got = display_bins(z, y)
    np.testing.assert_array_equal(got["count"], [500, 30, 470])


def test_display_reliability_figure_points_and_caption(demo, demo_result, topk_result):
    fig = display_reliability_figure(demo_result, "demo")
    ax = fig.axes[0]
    ref = _deciles_by_loop(demo["p"].to_numpy(), demo["y"].to_numpy())
    line = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == len(ref)][0]
    np.testing.assert_allclose(line.get_xdata(), [r[0] for r in ref])
    np.testing.assert_allclose(line.get_ydata(), [r[1] / r[2] for r in ref])
    cap = display_bins_caption(demo_result)
    assert "display bins" in cap and "deciles" in cap and f"B = {demo_result.n_bins}" in cap
    assert "5 equal-width" in display_bins_caption(demo_result, n_bins=5)
    # top-k: one panel per coordinate, display bins of each coordinate's own predictions
    res, probs, labels = topk_result
    fig = display_reliability_figure(res, "top-2")
    mains = [a for a in fig.axes if a.get_title()]
    assert len(mains) == 2
    order = np.argsort(-probs, axis=1, kind="stable")[:, :2]
    z = np.take_along_axis(probs, order, axis=1)
    yind = (order == labels[:, None]).astype(float)
    for j, ax in enumerate(mains):
        ref = _deciles_by_loop(z[:, j], yind[:, j])
        line = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == len(ref)][0]
        np.testing.assert_allclose(line.get_ydata(), [r[1] / r[2] for r in ref])
    _assert_nothing_covers_data(fig)
    with pytest.raises(ValueError, match="between 2 and 15"):
        display_reliability_figure(demo_result, "demo", n_bins=16)
    with pytest.raises(TypeError, match="n_bins"):
        display_reliability_figure(demo_result, "demo", n_bins=2.5)
    with pytest.raises(ValueError, match="share one target"):
        display_reliability_figure([demo_result, res], ["a", "b"])


def test_bin_sensitivity_figure_flags_verdict_changes():
    s = _sensitivity_frame()
    fig = bin_sensitivity_figure(s.sample(frac=1.0, random_state=0), "model", alpha=0.05)  # order does not matter
    ax, axp = fig.axes
    assert ax.get_xscale() == "log" and axp.get_yscale() == "log"
    # reject: F, T, F, T, F -> the verdict changes at B = 10, 20, 35, 60
    rings = [ln for ln in ax.get_lines() if ln.get_marker() == "o" and ln.get_markerfacecolor() == "none"]
    np.testing.assert_array_equal(rings[0].get_xdata(), [10, 20, 35, 60])
    # the alpha line and the floored p-value
    assert any(np.allclose(ln.get_ydata(), 0.05) for ln in axp.get_lines())
    tiny = [ln for ln in axp.get_lines() if ln.get_marker() == "v"][0]
    np.testing.assert_array_equal(tiny.get_xdata(), [35])
    np.testing.assert_array_equal(tiny.get_ydata(), [1e-16])
    legend = " ".join(t.get_text() for t in fig.legends[0].get_texts())
    assert "verdict differs" in legend and "open at 0" in legend and "below 1e-16" in legend
    steady = s.assign(reject=False, pvalue=0.5)
    legend = " ".join(t.get_text() for t in bin_sensitivity_figure(steady).legends[0].get_texts())
    assert "verdict differs" not in legend and "below" not in legend
    with pytest.raises(ValueError, match="lacks the columns"):
        bin_sensitivity_figure(s.drop(columns="pvalue"), "m")
    with pytest.raises(TypeError, match="DataFrame"):
        bin_sensitivity_figure(s.to_dict(), "m")


def test_bin_sensitivity_figure_from_evidence(demo):
    ev = ct.evidence("y ~ p", data=demo, rng=1, alpha=0.1)
    fig = bin_sensitivity_figure(ev, "demo")
    _assert_nothing_covers_data(fig)
    axp = fig.axes[1]
    assert any(np.allclose(ln.get_ydata(), 0.1) for ln in axp.get_lines())  # the EvidenceResult's alpha
    pts = [ln for ln in axp.get_lines() if ln.get_marker() == "s"][0]
    np.testing.assert_allclose(pts.get_ydata(), ev.sensitivity.sort_values("n_bins")["pvalue"])


def test_prediction_strip_shares_by_outcome(demo, demo_result, rare_result):
    fig = prediction_strip_figure([demo_result, rare_result], ["demo", "rare"])
    ax = fig.axes[0]
    p, y = demo["p"].to_numpy(), demo["y"].to_numpy()
    ev, non = [pt.get_data() for pt in ax.patches[:2]]
    # shares of each outcome group, in percent: all predictions lie in [0, 1], so each sums to 100
    np.testing.assert_allclose(ev[0].sum(), 100.0)
    np.testing.assert_allclose(non[0].sum(), 100.0)
    np.testing.assert_allclose(ev[0], 100 * np.histogram(p[y == 1], bins=ev[1])[0] / np.sum(y == 1))
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert f"demo: events (y = 1), n = {int(y.sum())}" in legend


@pytest.mark.slow
def test_flexible_figure_moves_the_numbers_to_the_legend_when_curves_cross_both_corners():
    rng = np.random.default_rng(7)
    x = rng.normal(0, 2.5, 3000)
    over = ct.calib_ci(y=(rng.random(3000) < expit(0.3 * x)).astype(int), probs=expit(x))
    x2 = rng.normal(0, 0.5, 3000)
    under = ct.calib_ci(y=(rng.random(3000) < expit(3 * x2)).astype(int), probs=expit(x2))
    fig = flexible_curve_figure([over, under], ["over", "under"])
    assert len(fig.axes[0].texts) == 0
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(t.startswith("over: CITL") for t in legend) and any(t.startswith("under: CITL") for t in legend)
    _assert_nothing_covers_data(fig)
    # the over-confident model alone leaves the upper left corner free: the numbers sit there
    fig = flexible_curve_figure(over, "over")
    (text,) = fig.axes[0].texts
    assert text.get_text().startswith("CITL") and text.get_position() == (0.02, 0.98)
    assert not any("CITL" in t.get_text() for t in fig.legends[0].get_texts())


def test_strips_switch_to_log_heights_when_predictions_pile_up():
    rng = np.random.default_rng(11)
    conf = np.concatenate([np.full(3000, 0.995), rng.uniform(0.3, 0.98, 300)])
    correct = (rng.random(conf.size) < conf).astype(int)
    res = ct.calib_ci(y=correct, probs=conf, n_classes=10, n_bins=20)
    fig = display_reliability_figure(res, "piled")
    assert fig.axes[1].get_yscale() == "symlog"
    assert fig.axes[1].get_xlabel().startswith("top-1 confidence")
    fig = flexible_curve_figure(res, "piled")
    strip = fig.axes[1]
    ups = strip.patches[0].get_data()
    c1 = np.histogram(conf[correct == 1], bins=ups[1])[0]
    np.testing.assert_allclose(ups[0], np.log1p(c1) / np.log1p(c1.max()))
    assert "(log)" in strip.get_ylabel()
    # spread-out predictions keep linear heights
    assert display_reliability_figure(ct.calib_ci(y=correct[3000:], probs=conf[3000:], n_classes=10),
                                      "spread").axes[1].get_yscale() == "linear"


def test_flexible_figure_drops_knots_when_a_rare_event_spline_has_no_estimate():
    rng = np.random.default_rng(0)  # 27 events in 1000 rows: the 4-knot spline separates a tail
    L = rng.normal(-4.3, 0.8, 1000)
    y = (rng.random(1000) < expit(-0.2 + 0.9 * L)).astype(int)
    with pytest.raises(ValueError, match="separates"):
        flexible_calibration(expit(L), y, knots=4)
    three = flexible_calibration(expit(L), y, knots=3)
    fig = flexible_curve_figure(ct.calib_ci(y=y, probs=expit(L)), "rare")
    line = [ln for ln in fig.axes[0].get_lines() if ln.get_color() == "C0"][0]
    np.testing.assert_allclose(line.get_ydata(), three.fitted)
    assert any("(3 knots)" in t.get_text() for t in fig.legends[0].get_texts())
    with pytest.raises(ValueError, match="knots must be"):
        flexible_curve_figure(ct.calib_ci(y=y, probs=expit(L)), "rare", knots=2)


def test_display_reliability_full_calibration_one_panel_per_class():
    rng = np.random.default_rng(4)
    probs = rng.dirichlet([2.0, 1.0, 1.0], size=600)
    labels = (rng.random(600)[:, None] > probs.cumsum(axis=1)).sum(axis=1)
    try:
        res = ct.calib_ci(y=labels, probs=probs, k="full", n_bins=4)
    except (TypeError, ValueError) as exc:
        pytest.skip(f"full calibration is not on this branch: {exc}")
    fig = display_reliability_figure(res, "full", n_bins=5)
    assert "simplex" in display_bins_caption(res, n_bins=5) and "B = 4 subdivisions" in display_bins_caption(res)
    mains = [a for a in fig.axes if a.get_title()]
    assert len(mains) == 3
    for j, ax in enumerate(mains):
        g = _marginal(probs[:, j], (labels == j).astype(int), 5)
        line = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == len(g)][0]
        np.testing.assert_allclose(line.get_xdata(), g["pred"].to_numpy(), rtol=1e-12)
        np.testing.assert_allclose(line.get_ydata(), (g["events"] / g["count"]).to_numpy(), rtol=1e-12)
    _assert_nothing_covers_data(fig)


def test_corner_check_sees_a_line_crossing_the_box():
    from matplotlib.transforms import Bbox

    from calibtest.reporting.plotting import _box_hits_curves, _figure

    fig = _figure(4.0)
    ax = fig.add_subplot()
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    fig.draw_without_rendering()
    diag = np.linspace(0.0, 1.0, 201)
    box = Bbox(ax.transData.transform([[0.4, 0.45], [0.6, 0.55]]))  # the diagonal runs through it
    corner = Bbox(ax.transData.transform([[0.0, 0.9], [0.5, 1.0]]))
    assert _box_hits_curves(ax, box, [(diag, diag, diag)])
    assert not _box_hits_curves(ax, corner, [(diag, diag, diag)])
    # a band below the box but reaching into it from underneath
    assert _box_hits_curves(ax, corner, [(diag, np.zeros_like(diag), np.full_like(diag, 0.95))])
