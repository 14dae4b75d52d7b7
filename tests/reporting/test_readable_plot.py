"""The readable default reliability diagram (display bins, from rows or from the bin sums of a stream),
the direction of a top-1 result (overconfident / underconfident) and the hints of the outcome-coding
errors.

Display bins are recomputed with pandas from the raw rows; the direction from its closed form
(the mean of correct - confidence and its Wald interval).
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402

import calibtest as ct  # noqa: E402
from calibtest.checks.evidence_table import confidence_direction, short_verdict  # noqa: E402
from calibtest.reporting.plotting import display_bins, display_points, plot_reliability  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(11)
    n = 20000
    p = rng.beta(2, 5, n)
    y = (rng.random(n) < p**1.1).astype(int)
    return pd.DataFrame({"y": y, "p": p})


@pytest.fixture(scope="module")
def csv_path(rows, tmp_path_factory):
    path = tmp_path_factory.mktemp("stream") / "rows.csv"
    rows.to_csv(path, index=False, float_format="%.17g")
    return path


def _deciles_by_pandas(p, y):
    edges = np.quantile(p, np.linspace(0, 1, 11))
    g = pd.cut(p, np.r_[-np.inf, edges[1:-1], np.inf], right=False, labels=False)  # [q_g, q_{g+1})
    frame = pd.DataFrame({"g": g, "p": p, "y": y}).groupby("g").agg(count=("y", "size"), events=("y", "sum"),
                                                                   pred=("p", "mean"))
    return frame


def test_default_diagram_draws_deciles_of_the_rows(rows):
    res = ct.calib_ci("y ~ p", data=rows)
    assert res.n_bins > 50  # the estimator's B: far more bins than a reader can use
    ax = res.plot_reliability()
    g = _deciles_by_pandas(rows["p"].to_numpy(), rows["y"].to_numpy())
    line = next(ln for ln in ax.get_lines() if len(ln.get_xdata()) == 10)
    np.testing.assert_allclose(line.get_xdata(), g["pred"], rtol=1e-12)
    np.testing.assert_allclose(line.get_ydata(), g["events"] / g["count"], rtol=1e-12)
    assert "display bin" in " ".join(t.get_text() for t in ax.get_legend().get_texts())
    five = res.plot_reliability(n_bins=5)
    line5 = next(ln for ln in five.get_lines() if ln.get_marker() == "o")
    key = np.minimum(np.floor(rows["p"] * 5), 4)
    np.testing.assert_allclose(line5.get_ydata(), rows.groupby(key)["y"].mean(), rtol=1e-12)
    est = res.plot_reliability(n_bins="estimator")
    assert max(len(ln.get_xdata()) for ln in est.get_lines()) == res.n_occupied_bins
    with pytest.raises(ValueError, match="n_bins must be"):
        res.plot_reliability(n_bins="deciles")
    with pytest.raises(ValueError, match="between 2 and 15"):
        res.plot_reliability(n_bins=754)


def _sum_deciles_by_pandas(p, y, B):
    """Whole intervals [i/B, (i+1)/B) grouped by the decile of their first row, with pandas."""
    key = np.floor(p * B).astype(int)
    per = pd.DataFrame({"key": key, "p": p, "y": y}).groupby("key").agg(count=("y", "size"), sp=("p", "sum"),
                                                                        sy=("y", "sum"))
    before = per["count"].cumsum() - per["count"]
    per["g"] = np.minimum((10 * before) // len(p), 9)
    g = per.groupby("g").agg(count=("count", "sum"), sp=("sp", "sum"), sy=("sy", "sum"))
    return g["count"].to_numpy(), (g["sp"] / g["count"]).to_numpy(), (g["sy"] / g["count"]).to_numpy()


def test_file_result_draws_display_bins_from_its_bin_sums(rows, csv_path):
    res = ct.calib_ci("y ~ p", data=csv_path)
    assert res.data is None
    pts = display_points(res)
    assert pts["source"] == "bin sums"
    count, pred, obs = _sum_deciles_by_pandas(rows["p"].to_numpy(), rows["y"].to_numpy(), res.n_bins)
    np.testing.assert_array_equal(pts["count"], count)
    np.testing.assert_allclose(pts["pred"], pred, rtol=1e-10)
    np.testing.assert_allclose(pts["observed"], obs, rtol=1e-12)
    assert np.all(np.abs(pts["count"] - len(rows) / 10) < 0.05 * len(rows))  # about deciles
    ax = res.plot_reliability()
    line = next(ln for ln in ax.get_lines() if len(ln.get_xdata()) == pts["pred"].size)
    np.testing.assert_allclose(line.get_xdata(), pts["pred"])
    # equal-width display bins whose edges lie on the estimator's grid: those of the rows, exactly
    res20 = ct.calib_ci("y ~ p", data=csv_path, n_bins=20)
    from_sums = display_points(res20, n_bins=10)
    from_rows = display_bins(rows["p"].to_numpy(), rows["y"].to_numpy(), n_bins=10)
    np.testing.assert_array_equal(from_sums["count"], from_rows["count"])
    np.testing.assert_array_equal(from_sums["events"], from_rows["events"])
    np.testing.assert_allclose(from_sums["pred"], from_rows["pred"], rtol=1e-10)
    np.testing.assert_allclose(from_sums["upper"], from_rows["upper"], rtol=1e-12)


def test_dask_result_draws_display_bins_from_its_bin_sums(rows):
    dd = pytest.importorskip("dask.dataframe")
    res = ct.calib_ci("y ~ p", data=dd.from_pandas(rows, npartitions=3))
    assert res.data is None
    pts = display_points(res)
    count, pred, obs = _sum_deciles_by_pandas(rows["p"].to_numpy(), rows["y"].to_numpy(), res.n_bins)
    np.testing.assert_array_equal(pts["count"], count)
    np.testing.assert_allclose(pts["observed"], obs, rtol=1e-12)
    assert res.plot_reliability() is not None


def test_streamed_top_k_result_draws_one_panel_per_coordinate(tmp_path):
    rng = np.random.default_rng(3)
    probs = rng.dirichlet([3.0, 1.0, 1.0], size=3000)
    labels = (rng.random(3000)[:, None] > probs.cumsum(axis=1)).sum(axis=1)
    frame = pd.DataFrame(probs, columns=["a", "b", "c"]).assign(y=labels)
    path = tmp_path / "k.csv"
    frame.to_csv(path, index=False, float_format="%.17g")
    res = ct.calib_ci("y ~ a + b + c", data=path, k=2)
    axes = plot_reliability(res)
    assert axes.shape == (2,)
    order = np.argsort(-probs, axis=1, kind="stable")[:, :2]
    z = np.take_along_axis(probs, order, axis=1)
    ind = (order == labels[:, None]).astype(int)
    for j in range(2):
        count, _, obs = _sum_deciles_by_pandas(z[:, j], ind[:, j], res.n_bins)
        pts = display_points(res, j)
        np.testing.assert_array_equal(pts["count"], count)
        np.testing.assert_allclose(pts["observed"], obs, rtol=1e-12)


# --------------------------------------------------------------------------- direction of a top-1 result
def _top1(shift, n=4000, seed=0):
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.35, 1.0, n)
    correct = (rng.random(n) < np.clip(conf + shift, 0, 1)).astype(int)
    return conf, correct


@pytest.mark.parametrize("shift, word", [(-0.1, "overconfident"), (0.08, "underconfident"), (0.0, None)])
def test_direction_of_a_top1_result(shift, word):
    conf, correct = _top1(shift)
    res = ct.calib_ci(y=correct, probs=conf, n_classes=10)
    d = confidence_direction(res)
    u = correct - conf
    half = stats.norm.isf(0.025) * u.std(ddof=0) / np.sqrt(u.size)
    assert d.difference == pytest.approx(u.mean(), rel=1e-12)
    assert d.accuracy == pytest.approx(correct.mean(), rel=1e-12)
    assert (d.lower, d.upper) == pytest.approx((u.mean() - half, u.mean() + half), rel=1e-9)
    assert d.word == word
    text = res.conclusion()[1]
    title = res.plot_reliability().get_title()
    iv = res.conf_int(scale="ece")
    assert title.startswith(f"ECE {res.ece:.3g}, 95% CI [{iv.lower:.3g}, {iv.upper:.3g}]: ")
    if word is None:
        assert "confident" not in text and "confident" not in short_verdict(res) and "confident" not in title
    else:
        assert title.endswith(f"evidence of miscalibration ({word})")
        assert f"The model is {word}" in text and f"({word})" in short_verdict(res)
        assert word in str(res.summary())
        assert word in str(res.summary(evidence=False))


def test_direction_is_the_same_from_a_file_and_absent_for_other_targets(tmp_path):
    conf, correct = _top1(-0.1, n=3000, seed=4)
    path = tmp_path / "top1.csv"
    pd.DataFrame({"correct": correct, "conf": conf}).to_csv(path, index=False, float_format="%.17g")
    streamed = confidence_direction(ct.calib_ci("correct ~ conf", data=path, n_classes=10))
    memory = confidence_direction(ct.calib_ci(y=correct, probs=conf, n_classes=10))
    assert streamed.word == memory.word == "overconfident"
    assert streamed.difference == pytest.approx(memory.difference, rel=1e-10)
    assert streamed.upper == pytest.approx(memory.upper, rel=1e-9)
    binary = ct.calib_ci(y=correct, probs=conf)
    assert confidence_direction(binary) is None and "confident" not in binary.conclusion()[1]


# --------------------------------------------------------------------------- coding hints
def test_errors_say_how_to_code_yes_no_1_2_and_percentages():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=200)
    y = rng.random(200) < p
    df = pd.DataFrame({"p": p, "y": np.where(y, "yes", "no"), "y12": y.astype(int) + 1, "pct": 100 * p, "d": y})
    with pytest.raises(TypeError, match=r"I\(y == 'yes'\)"):
        ct.calib_ci("y ~ p", data=df)
    with pytest.raises(ValueError, match=r"I\(y12 == 2\)"):
        ct.calib_ci("y12 ~ p", data=df)
    with pytest.raises(ValueError, match=r"I\(pct / 100\)"):
        ct.calib_ci("d ~ pct", data=df)
    with pytest.raises(TypeError, match=r"pass y == 'yes'"):
        ct.calib_ci(y=df["y"].to_numpy(), probs=p)
    fixed = ct.calib_ci('I(y == "yes") ~ I(pct / 100)', data=df)
    assert fixed.estimate == ct.calib_ci(y=y.astype(int), probs=df["pct"].to_numpy() / 100).estimate
    with pytest.raises(ValueError, match="3 distinct values"):
        ct.calib_ci(y=rng.integers(0, 3, 200), probs=p)


def test_display_figure_of_a_file_result_draws_display_bins_and_rows_per_interval(rows, csv_path):
    from matplotlib.patches import StepPatch

    from calibtest.reporting.plotting import display_bins_caption, display_reliability_figure

    res = ct.calib_ci("y ~ p", data=csv_path)
    assert res.data is None
    fig = display_reliability_figure(res, "p")
    p, y = rows["p"].to_numpy(), rows["y"].to_numpy()
    count, pred, obs = _sum_deciles_by_pandas(p, y, res.n_bins)
    line = next(ln for a in fig.axes for ln in a.get_lines() if len(ln.get_xdata()) == count.size)
    np.testing.assert_allclose(line.get_xdata(), pred, rtol=1e-10)
    np.testing.assert_allclose(line.get_ydata(), obs, rtol=1e-12)
    # the strip: rows per estimator interval [i/B, (i+1)/B), counted with pandas
    step = next(a for a in fig.axes if any(isinstance(c, StepPatch) for c in a.patches))
    values, edges = next(c for c in step.patches if isinstance(c, StepPatch)).get_data()[:2]
    B = res.n_bins
    per = pd.Series(np.floor(p * B).astype(int)).value_counts().reindex(range(B), fill_value=0).to_numpy()
    np.testing.assert_array_equal(values, per[:values.size])
    np.testing.assert_allclose(edges, np.arange(values.size + 1) / B)
    assert edges[-2] < step.get_xlim()[1] <= edges[-1] + 1e-12  # every interval that starts inside the axis
    cap = display_bins_caption(res)
    assert "bin sums, not rows" in cap and "union of whole estimator intervals" in cap
    in_memory = ct.calib_ci("y ~ p", data=rows)
    assert "bin sums" not in display_bins_caption(in_memory)


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_report_of_file_and_dask_results_uses_display_bins(rows, csv_path):
    from calibtest.reporting.html import build_context

    results = [ct.calib_ci("y ~ p", data=csv_path)]
    dd = pytest.importorskip("dask.dataframe")
    results.append(ct.calib_ci("y ~ p", data=dd.from_pandas(rows, npartitions=3)))
    for res in results:
        ctx = build_context(res)
        fig = next(f for f in ctx["models"][0]["figures"] if "Reliability diagram" in f["alt"])
        assert fig["alt"].endswith("at display bins")
        assert "deciles of predicted risk" in fig["caption"] and "bin sums, not rows" in fig["caption"]
        assert "occupied bins" not in fig["caption"]


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_report_overlay_of_file_results_uses_display_bins(rows, tmp_path):
    from calibtest.reporting.html import build_context

    path = tmp_path / "two.csv"
    rows.assign(q=np.clip(rows["p"] * 1.2, 0.0, 1.0)).to_csv(path, index=False, float_format="%.17g")
    results = [ct.calib_ci("y ~ p", data=path), ct.calib_ci("y ~ q", data=path)]
    assert all(r.data is None for r in results)
    overlay = build_context(results, labels=["p", "q"])["overlay_figure"]
    assert overlay["alt"].endswith("at display bins")
    assert "deciles of predicted risk" in overlay["caption"] and "bin sums, not rows" in overlay["caption"]
