"""Reliability diagrams: the plotted points, intervals and counts against independent computations.

The per-bin points are recomputed from the raw rows with a plain floor(p * B)
grouping, and the Wilson interval from its closed form (Wilson 1927), not with
statsmodels.
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
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
    ax = demo_result.plot_reliability()
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
    axes = plot_reliability(res)
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
    axes = plot_reliability(res)
    assert axes.shape == (3,)
    for j in range(3):
        g = _marginal(probs[:, j], (labels == j).astype(int), 6)
        pts = reliability_points(res, coordinate=j)
        np.testing.assert_array_equal(pts["count"], g["count"].to_numpy())
        np.testing.assert_array_equal(pts["events"], g["events"].to_numpy())
        np.testing.assert_allclose(pts["pred"], g["pred"].to_numpy(), rtol=1e-12)


def test_overlay_two_models_and_bad_input(demo):
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
