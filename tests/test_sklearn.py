"""calibtest.sklearn against scikit-learn itself.

The display's bins and points are checked against ``sklearn.calibration.calibration_curve``
where the definitions coincide (no prediction on a bin edge: sklearn puts an edge value in the bin
below, calibtest in the bin above), the scorer inside ``GridSearchCV`` against a hand loop over
the same folds, and the cross-validation against ``cross_val_predict``.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sklearn = pytest.importorskip("sklearn")
matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from scipy import stats  # noqa: E402
from sklearn.calibration import calibration_curve  # noqa: E402
from sklearn.datasets import make_classification  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import (GridSearchCV, KFold, ShuffleSplit, cross_val_predict,  # noqa: E402
                                     cross_val_score, train_test_split)

import calibtest as ct  # noqa: E402
from calibtest.sklearn import (CalibrationErrorDisplay, CrossValidatedCalibration, calibration_target,  # noqa: E402
                               cross_validate_calibration, ece_score, ece_scorer)


REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _close_figures():
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One OpenMP thread for the gradient boosting fits: on a busy machine with few cores, its threads
    spin-wait for one another (minutes instead of a second)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="module")
def binary_data():
    X, y = make_classification(n_samples=2000, n_features=8, random_state=0)
    return train_test_split(X, y, test_size=1000, random_state=0)


@pytest.fixture(scope="module")
def multiclass_data():
    X, y = make_classification(n_samples=3000, n_features=10, n_informative=6, n_classes=4, random_state=1)
    return train_test_split(X, y, test_size=1000, random_state=1)


def _wilson(events, n, alpha):
    """Wilson score interval, closed form (Wilson 1927)."""
    z = stats.norm.isf(alpha / 2)
    phat = events / n
    centre = (phat + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * np.sqrt(phat * (1 - phat) / n + z**2 / (4 * n**2))
    return centre - half, centre + half


# --------------------------------------------------------------------------- against calibration_curve
@pytest.mark.parametrize("n_bins, strategy", [(5, "uniform"), (10, "uniform"), (7, "quantile"),
                                              (10, "quantile"), (1, "uniform")])
def test_display_curve_is_calibration_curve_with_the_same_n_bins_and_strategy(n_bins, strategy):
    rng = np.random.default_rng(3)
    n = 1000
    p = rng.beta(2, 3, n)
    p[:50] = np.round(p[:50], 1)  # predictions on the uniform edges and ties at the quantiles
    y = (rng.random(n) < p**1.2).astype(int)
    disp = CalibrationErrorDisplay.from_predictions(y, p, n_bins=n_bins, strategy=strategy)
    true_c, pred_c = calibration_curve(y, p, n_bins=n_bins, strategy=strategy)
    np.testing.assert_array_equal(disp.prob_true, true_c)
    np.testing.assert_array_equal(disp.prob_pred, pred_c)
    edges = np.percentile(p, np.linspace(0, 100, n_bins + 1)) if strategy == "quantile" else np.linspace(0, 1,
                                                                                                   n_bins + 1)
    counts = np.array([np.sum((p >= lo) & (p <= hi) if k == 0 else (p > lo) & (p <= hi))
                       for k, (lo, hi) in enumerate(zip(edges[:-1], edges[1:]))])  # an edge value: the bin below
    np.testing.assert_array_equal(disp.counts, counts[counts > 0])
    lo, hi = _wilson(np.rint(disp.prob_true * disp.counts), disp.counts, 0.05)
    np.testing.assert_allclose(disp.lower, lo, atol=1e-12)
    np.testing.assert_allclose(disp.upper, hi, atol=1e-12)
    assert len(disp.line_.get_xdata()) == len(true_c)


def test_n_bins_is_the_displayed_curve_and_ece_bins_the_estimators():
    X, y = make_classification(n_samples=2000, random_state=0)
    from sklearn.naive_bayes import GaussianNB
    nb = GaussianNB().fit(X[:1000], y[:1000])
    default = CalibrationErrorDisplay.from_estimator(nb, X[1000:], y[1000:])
    five = CalibrationErrorDisplay.from_estimator(nb, X[1000:], y[1000:], n_bins=5)
    p = nb.predict_proba(X[1000:])[:, 1]
    assert len(five.prob_true) == len(calibration_curve(y[1000:], p, n_bins=5)[0]) == 5
    assert len(default.prob_true) == 5  # scikit-learn's default: n_bins=5, strategy="uniform"
    ref = ct.calib_ci(y=y[1000:], probs=p)
    assert five.result_.ece == default.result_.ece == ref.ece  # the display bins leave the estimator alone
    at40 = CalibrationErrorDisplay.from_estimator(nb, X[1000:], y[1000:], ece_bins=40)
    assert at40.result_.n_bins == 40 and at40.result_.ece == ct.calib_ci(y=y[1000:], probs=p, n_bins=40).ece
    with pytest.warns(FutureWarning, match="display_bins"):
        old = CalibrationErrorDisplay.from_estimator(nb, X[1000:], y[1000:], display_bins=8)
    np.testing.assert_array_equal(old.prob_true, calibration_curve(y[1000:], p, n_bins=8)[0])
    with pytest.warns(FutureWarning, match="display_bins"):
        old = CalibrationErrorDisplay.from_estimator(nb, X[1000:], y[1000:], display_bins=None)
    np.testing.assert_array_equal(old.prob_pred, calibration_curve(y[1000:], p, n_bins=10, strategy="quantile")[1])
    with pytest.warns(FutureWarning, match="ece_bins"):
        auto = CalibrationErrorDisplay.from_estimator(nb, X[1000:], y[1000:], n_bins="auto")
    assert auto.result_.ece == ref.ece and len(auto.prob_true) == 5
    with pytest.raises(TypeError, match="not both"):
        CalibrationErrorDisplay.from_estimator(nb, X[1000:], y[1000:], n_bins=8, display_bins=8)


def test_unknown_keywords_are_refused_by_name_before_plotting():
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    p = rng.uniform(size=200)
    y = (rng.random(200) < p).astype(int)
    ax = plt.figure().subplots()
    for bad in ({"strateg": "quantile"}, {"yerr": 0.1}, {"colour": "red", "nbins": 3}):
        with pytest.raises(TypeError) as err:
            CalibrationErrorDisplay.from_predictions(y, p, ax=ax, **bad)
        assert all(repr(key) in str(err.value) for key in bad)
    assert not ax.lines and not ax.containers  # nothing drawn
    with pytest.raises(ValueError, match="strategy must be 'uniform' or 'quantile'"):
        CalibrationErrorDisplay.from_predictions(y, p, strategy="kmeans")
    for bad_bins in (0, 2.5, True):
        with pytest.raises(ValueError, match="n_bins must be an integer >= 1"):
            CalibrationErrorDisplay.from_predictions(y, p, n_bins=bad_bins)
    disp = CalibrationErrorDisplay.from_predictions(y, p, ax=ax, color="red", lw=2, capsize=4)  # errorbar's own
    assert disp.line_.get_color() == "red" and disp.line_.get_linewidth() == 2
    with pytest.raises(TypeError, match="'strategy'"):
        disp.plot(ax=ax, strategy="quantile")


def test_string_labels_and_pos_label_match_calibration_curve():
    rng = np.random.default_rng(5)
    p = rng.uniform(0, 1, 1000)
    y = np.where(rng.random(1000) < p, "sick", "well")
    disp = CalibrationErrorDisplay.from_predictions(y, p, pos_label="sick", n_bins=10)
    true_u, pred_u = calibration_curve(y, p, n_bins=10, pos_label="sick")
    np.testing.assert_allclose(disp.prob_true, true_u, atol=1e-15)
    np.testing.assert_allclose(disp.prob_pred, pred_u, rtol=1e-14)
    ref = ct.calib_ci(y=(y == "sick").astype(int), probs=p)
    assert disp.result_.estimate == ref.estimate and disp.result_.ci_upper == ref.ci_upper
    assert "sick" in disp.ax_.get_xlabel()
    with pytest.raises(ValueError, match="pos_label"):
        CalibrationErrorDisplay.from_predictions(y, p)
    with pytest.raises(ValueError, match="pos_label='ill' is not a label"):
        ece_score(y, p, pos_label="ill")


def test_top1_display_matches_calibration_curve_of_correctness(multiclass_data):
    Xtr, Xte, ytr, yte = multiclass_data
    clf = LogisticRegression(max_iter=1000).fit(Xtr, ytr)
    P = clf.predict_proba(Xte)
    conf = P.max(axis=1)
    correct = (clf.classes_[P.argmax(axis=1)] == yte).astype(int)
    disp = CalibrationErrorDisplay.from_estimator(clf, Xte, yte, n_bins=10)
    true_u, pred_u = calibration_curve(correct, conf, n_bins=10)
    np.testing.assert_allclose(disp.prob_true, true_u, atol=1e-15)
    np.testing.assert_allclose(disp.prob_pred, pred_u, rtol=1e-14)
    res = disp.result_
    assert res.mode == "top1" and res.n_classes == 4 and res.n == len(yte)
    ref = ct.calib_ci(y=correct, probs=conf, n_classes=4)
    assert res.estimate == pytest.approx(ref.estimate, rel=1e-12, abs=1e-15)
    assert disp.ax_.get_xlabel() == "top-1 confidence"


# --------------------------------------------------------------------------- end to end
def test_logistic_regression_end_to_end(binary_data):
    Xtr, Xte, ytr, yte = binary_data
    clf = LogisticRegression().fit(Xtr, ytr)
    disp = CalibrationErrorDisplay.from_estimator(clf, Xte, yte)
    assert isinstance(disp.result_, ct.CalibrationResult)
    p = clf.predict_proba(Xte)[:, 1]
    ref = ct.calib_ci(y=yte, probs=p)
    for key in ("estimate", "ci_lower", "ci_upper", "null_pvalue", "n_bins"):
        assert getattr(disp.result_, key) == getattr(ref, key)
    np.testing.assert_array_equal(disp.line_.get_xdata(), disp.prob_pred)
    np.testing.assert_array_equal(disp.line_.get_ydata(), disp.prob_true)
    assert disp.ax_ is disp.line_.axes and disp.figure_ is disp.ax_.figure
    legend = " ".join(t.get_text() for t in disp.ax_.get_legend().get_texts())
    assert "LogisticRegression" in legend and "evidence of miscalibration" in legend
    iv = ref.conf_int(scale="ece")
    assert f"{iv.upper:.3g}" in legend
    same = CalibrationErrorDisplay.from_predictions(yte, p)
    np.testing.assert_array_equal(same.prob_true, disp.prob_true)


def test_hist_gradient_boosting_end_to_end(multiclass_data):
    Xtr, Xte, ytr, yte = multiclass_data
    labels = np.array(["ant", "bee", "cat", "dog"])
    hgb = HistGradientBoostingClassifier(max_iter=60, random_state=0).fit(Xtr, labels[ytr])
    disp = CalibrationErrorDisplay.from_estimator(hgb, Xte, labels[yte])
    res = disp.result_
    assert res.mode == "top1" and res.n == len(yte)
    P = hgb.predict_proba(Xte)
    correct = (hgb.classes_[P.argmax(axis=1)] == labels[yte]).astype(int)
    assert disp.result_.estimate == pytest.approx(ct.calib_ci(y=correct, probs=P.max(axis=1), n_classes=4).estimate,
                                                  rel=1e-12)
    # the legend's word is the summary's, and follows accuracy against mean confidence (Wald interval)
    u = correct - P.max(axis=1)
    half = stats.norm.isf(0.025) * u.std() / np.sqrt(u.size)
    word = "overconfident" if u.mean() + half < 0 else "underconfident" if u.mean() - half > 0 else None
    legend = " ".join(t.get_text() for t in disp.ax_.get_legend().get_texts())
    if word is None:
        assert "confident" not in legend and "confident" not in res.conclusion()[1]
    else:
        assert word in legend and word in res.conclusion()[1]
    # binary HGB with string labels: the column of classes_[1]
    yb = np.where(ytr % 2 == 1, "odd", "even")
    hgb2 = HistGradientBoostingClassifier(max_iter=40, random_state=0).fit(Xtr, yb)
    d2 = CalibrationErrorDisplay.from_estimator(hgb2, Xte, np.where(yte % 2 == 1, "odd", "even"))
    assert d2.result_.mode == "binary" and d2.pos_label == "odd"
    p = hgb2.predict_proba(Xte)[:, 1]
    assert d2.result_.estimate == ct.calib_ci(y=(yte % 2 == 1).astype(int), probs=p).estimate


def test_two_displays_share_axes_and_one_reference_line(binary_data):
    Xtr, Xte, ytr, yte = binary_data
    a = CalibrationErrorDisplay.from_estimator(LogisticRegression().fit(Xtr, ytr), Xte, yte)
    b = CalibrationErrorDisplay.from_estimator(LogisticRegression(C=0.001).fit(Xtr, ytr), Xte, yte, ax=a.ax_,
                                               name="strong penalty", color="C3")
    labels = [t.get_text() for t in a.ax_.get_legend().get_texts()]
    assert labels.count("perfect calibration") == 1
    assert any(t.startswith("strong penalty") for t in labels)
    assert b.line_.get_color() == "C3"


def test_sample_weight_gives_the_weighted_interval_and_weighted_points():
    rng = np.random.default_rng(2)
    n = 1500
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < p).astype(int)
    w = rng.gamma(2.0, 1.0, n)
    disp = CalibrationErrorDisplay.from_predictions(y, p, sample_weight=w, n_bins=5)
    ref = ct.calib_ci(y=y, probs=p, weights=w)
    assert disp.result_.weighting is not None and disp.result_.estimate == ref.estimate
    frame = pd.DataFrame({"g": np.minimum(np.floor(p * 5), 4).astype(int), "p": p, "y": y, "w": w})
    g = frame.groupby("g").apply(lambda d: pd.Series({
        "pred": np.average(d.p, weights=d.w), "obs": np.average(d.y, weights=d.w),
        "neff": d.w.sum() ** 2 / (d.w ** 2).sum()}), include_groups=False)
    np.testing.assert_allclose(disp.prob_pred, g["pred"], rtol=1e-12)
    np.testing.assert_allclose(disp.prob_true, g["obs"], rtol=1e-12)
    lo, hi = _wilson(g["obs"].to_numpy() * g["neff"].to_numpy(), g["neff"].to_numpy(), 0.05)
    np.testing.assert_allclose(disp.lower, lo, atol=1e-12)
    # unit weights: the unweighted points and Wilson intervals
    unit = CalibrationErrorDisplay.from_predictions(y, p, sample_weight=np.ones(n), n_bins=5)
    plain = CalibrationErrorDisplay.from_predictions(y, p, n_bins=5)
    np.testing.assert_allclose(unit.prob_true, plain.prob_true, atol=1e-15)
    np.testing.assert_allclose(unit.lower, plain.lower, atol=1e-12)
    assert ece_score(y, p, sample_weight=w, squared=True) == ref.estimate


# --------------------------------------------------------------------------- metric and scorer
def test_ece_score_is_the_estimate_of_calib_ci(binary_data):
    Xtr, Xte, ytr, yte = binary_data
    p = LogisticRegression().fit(Xtr, ytr).predict_proba(Xte)
    ref = ct.calib_ci(y=yte, probs=p[:, 1])
    assert ece_score(yte, p[:, 1]) == ref.ece
    assert ece_score(yte, p[:, 1], squared=True) == ref.estimate
    assert ece_score(yte, p) == ref.ece  # two columns: the second class's
    assert ece_score(2 * yte - 1, p[:, 1]) == ref.ece  # {-1, 1} labels
    assert ece_score(1 - yte, p[:, 0], n_bins=10) == ct.calib_ci(y=1 - yte, probs=p[:, 0], n_bins=10).ece
    with pytest.raises(TypeError, match="squared"):
        ece_score(yte, p[:, 1], squared="yes")


def test_scorer_inside_grid_search_equals_a_hand_loop(binary_data):
    Xtr, _, ytr, _ = binary_data
    cv = KFold(4, shuffle=True, random_state=0)
    grid = GridSearchCV(LogisticRegression(), {"C": [0.001, 1.0]}, scoring=ece_scorer, cv=cv).fit(Xtr, ytr)
    for i, C in enumerate([0.001, 1.0]):
        by_hand = []
        for train, test in cv.split(Xtr):
            m = LogisticRegression(C=C).fit(Xtr[train], ytr[train])
            by_hand.append(-ece_score(ytr[test], m.predict_proba(Xtr[test])[:, 1]))
        assert grid.cv_results_["mean_test_score"][i] == pytest.approx(np.mean(by_hand), rel=1e-12, abs=1e-15)
    assert grid.best_params_["C"] == [0.001, 1.0][int(np.argmax(grid.cv_results_["mean_test_score"]))]
    assert np.all(grid.cv_results_["mean_test_score"] <= 0)  # lower ECE is better: the score is -ECE


def test_scorer_multiclass_and_string_labels(multiclass_data):
    from sklearn.metrics import make_scorer
    Xtr, _, ytr, _ = multiclass_data
    scores = cross_val_score(LogisticRegression(max_iter=1000), Xtr, ytr, cv=3, scoring=ece_scorer,
                             error_score="raise")
    assert scores.shape == (3,) and np.all(scores <= 0)
    yb = np.where(ytr == 0, "yes", "no")
    with pytest.raises(ValueError, match="pos_label"):
        cross_val_score(LogisticRegression(), Xtr, yb, cv=3, scoring=ece_scorer, error_score="raise")
    scorer = make_scorer(ece_score, response_method="predict_proba", greater_is_better=False, pos_label="yes")
    got = cross_val_score(LogisticRegression(), Xtr, yb, cv=KFold(3), scoring=scorer)
    for s, (train, test) in zip(got, KFold(3).split(Xtr)):
        m = LogisticRegression().fit(Xtr[train], yb[train])
        col = list(m.classes_).index("yes")
        assert s == -ece_score(yb[test], m.predict_proba(Xtr[test])[:, col], pos_label="yes")


# --------------------------------------------------------------------------- cross-validation
def test_cross_validate_calibration_matches_cross_val_predict(binary_data):
    Xtr, _, ytr, _ = binary_data
    y = np.where(ytr == 1, "pos", "neg")
    cvr = cross_validate_calibration(LogisticRegression(), Xtr, y, cv=5)
    assert isinstance(cvr, CrossValidatedCalibration) and len(cvr.fold_results) == 5
    oof = cross_val_predict(LogisticRegression(), Xtr, y, cv=5, method="predict_proba")
    np.testing.assert_allclose(cvr.oof_prob, oof, rtol=1e-12, atol=1e-15)
    ref = ct.calib_ci(y=(y == "pos").astype(int), probs=oof[:, 1])
    assert cvr.out_of_fold.estimate == pytest.approx(ref.estimate, rel=1e-10, abs=1e-14)
    assert cvr.folds["n"].sum() == len(y) and list(cvr.folds.index) == [1, 2, 3, 4, 5]
    from sklearn.model_selection import StratifiedKFold
    for (train, test), row in zip(StratifiedKFold(5).split(Xtr, y), cvr.folds.itertuples()):
        m = LogisticRegression().fit(Xtr[train], y[train])
        fold = ct.calib_ci(y=(y[test] == "pos").astype(int), probs=m.predict_proba(Xtr[test])[:, 1])
        assert row.estimate == pytest.approx(fold.estimate, rel=1e-10, abs=1e-14)
        assert row.upper == pytest.approx(fold.ci_upper, rel=1e-10)
    text = str(cvr.summary())
    assert "out of fold" in text and "fold 5" in text
    assert cvr.out_of_fold.conclusion()[1][:30] in " ".join(text.split())
    d = cvr.to_dict()
    assert d["n_folds"] == 5 and len(d["folds"]) == 5


def test_cross_validate_calibration_multiclass_and_errors(multiclass_data):
    Xtr, _, ytr, _ = multiclass_data
    cvr = cross_validate_calibration(HistGradientBoostingClassifier(max_iter=30, random_state=0), Xtr, ytr,
                                     cv=KFold(3))
    assert cvr.out_of_fold.mode == "top1" and cvr.out_of_fold.n_classes == 4
    with pytest.raises(ValueError, match="exactly once"):
        cross_validate_calibration(LogisticRegression(), Xtr, ytr, cv=ShuffleSplit(3, random_state=0))
    with pytest.raises(TypeError, match="predict_proba"):
        from sklearn.svm import LinearSVC
        cross_validate_calibration(LinearSVC(), Xtr, ytr, cv=3)


def _weighted_oof(make, X, y, w, splits, **fit_kw):
    """Out-of-fold predict_proba by a hand loop: a fresh model per fold, fitted with the fold's weights."""
    oof = np.empty((len(y), 2))
    for train, test in splits:
        kw = {key: val[train] for key, val in fit_kw.items()}
        if w is not None:
            kw["sample_weight"] = w[train]
        oof[test] = make().fit(X[train], y[train], **kw).predict_proba(X[test])
    return oof


def test_cross_validate_passes_sample_weight_to_fit_as_cross_validate_does(binary_data):
    from sklearn.model_selection import StratifiedKFold

    Xtr, _, ytr, _ = binary_data
    w = np.random.default_rng(5).uniform(0.2, 3.0, size=len(ytr))
    splits = list(StratifiedKFold(5).split(Xtr, ytr))
    cvr = cross_validate_calibration(LogisticRegression(), Xtr, ytr, cv=5, sample_weight=w)
    hand = _weighted_oof(LogisticRegression, Xtr, ytr, w, splits)
    np.testing.assert_allclose(cvr.oof_prob, hand, rtol=1e-12, atol=1e-15)
    unweighted = _weighted_oof(LogisticRegression, Xtr, ytr, None, splits)
    assert np.max(np.abs(cvr.oof_prob - unweighted)) > 1e-4  # the weights did reach the fits
    assert cvr.fit_params == ("sample_weight",) and cvr.to_dict()["fit_params"] == ["sample_weight"]
    assert "with sample_weight" in " ".join(str(cvr.summary()).split())
    ref = ct.calib_ci(y=ytr, probs=hand[:, 1], weights=w)  # the evaluation is weighted too
    assert cvr.out_of_fold.estimate == pytest.approx(ref.estimate, rel=1e-10, abs=1e-14)
    # scikit-learn's own cross_validate(params=) fits the same models
    from sklearn.model_selection import cross_validate
    fitted = cross_validate(LogisticRegression(), Xtr, ytr, cv=5, params={"sample_weight": w},
                            return_estimator=True)["estimator"]
    for model, (_, test) in zip(fitted, splits):
        np.testing.assert_allclose(cvr.oof_prob[test], model.predict_proba(Xtr[test]), rtol=1e-12, atol=1e-15)


def test_cross_validate_fit_params_reach_a_pipeline_step(binary_data):
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    Xtr, _, ytr, _ = binary_data
    w = np.random.default_rng(6).uniform(0.2, 3.0, size=len(ytr))
    pipe = make_pipeline(StandardScaler(), LogisticRegression())
    cvr = cross_validate_calibration(pipe, Xtr, ytr, cv=5, fit_params={"logisticregression__sample_weight": w})
    splits = list(StratifiedKFold(5).split(Xtr, ytr))
    hand = _weighted_oof(lambda: make_pipeline(StandardScaler(), LogisticRegression()), Xtr, ytr, None, splits,
                         logisticregression__sample_weight=w)
    np.testing.assert_allclose(cvr.oof_prob, hand, rtol=1e-12, atol=1e-15)
    assert cvr.fit_params == ("logisticregression__sample_weight",)
    unweighted = ct.calib_ci(y=ytr, probs=hand[:, 1])  # fit_params do not weight the evaluation
    assert cvr.out_of_fold.estimate == pytest.approx(unweighted.estimate, rel=1e-10, abs=1e-14)


def test_cross_validate_sample_weight_with_metadata_routing(binary_data):
    from sklearn.model_selection import StratifiedKFold

    Xtr, _, ytr, _ = binary_data
    w = np.random.default_rng(7).uniform(0.2, 3.0, size=len(ytr))
    splits = list(StratifiedKFold(5).split(Xtr, ytr))
    with sklearn.config_context(enable_metadata_routing=True):
        on = cross_validate_calibration(LogisticRegression().set_fit_request(sample_weight=True), Xtr, ytr, cv=5,
                                        sample_weight=w)
        off = cross_validate_calibration(LogisticRegression().set_fit_request(sample_weight=False), Xtr, ytr,
                                         cv=5, sample_weight=w)
        with pytest.raises(ValueError, match="sample_weight"):  # scikit-learn's error for an unset request
            cross_validate_calibration(LogisticRegression(), Xtr, ytr, cv=5, sample_weight=w)
    np.testing.assert_allclose(on.oof_prob, _weighted_oof(LogisticRegression, Xtr, ytr, w, splits), rtol=1e-12,
                               atol=1e-15)
    np.testing.assert_allclose(off.oof_prob, _weighted_oof(LogisticRegression, Xtr, ytr, None, splits),
                               rtol=1e-12, atol=1e-15)
    assert on.fit_params == ("sample_weight",) and off.fit_params == ()
    assert "without weights" in " ".join(str(off.summary()).split())


def test_cross_validate_fit_without_sample_weight_warns_and_bad_fit_params_raise(binary_data):
    from sklearn.neighbors import KNeighborsClassifier

    Xtr, _, ytr, _ = binary_data
    w = np.ones(len(ytr))
    with pytest.warns(UserWarning, match="does not accept sample_weight"):
        cvr = cross_validate_calibration(KNeighborsClassifier(), Xtr, ytr, cv=3, sample_weight=w)
    assert cvr.fit_params == ()
    with pytest.raises(TypeError, match="fit_params.*does not accept \\['bogus'\\]"):
        cross_validate_calibration(LogisticRegression(), Xtr, ytr, cv=3, fit_params={"bogus": 1})
    with pytest.raises(ValueError, match="sample_weight="):
        cross_validate_calibration(LogisticRegression(), Xtr, ytr, cv=3, fit_params={"sample_weight": w})
    with pytest.raises(TypeError, match="fit_params must be a dict"):
        cross_validate_calibration(LogisticRegression(), Xtr, ytr, cv=3, fit_params=[("C", 1)])


# --------------------------------------------------------------------------- input errors
def test_bad_inputs_raise_errors_naming_the_argument(binary_data):
    Xtr, Xte, ytr, yte = binary_data
    p = np.linspace(0.01, 0.99, len(yte))
    with pytest.raises(ValueError, match="y_prob must lie in"):
        ece_score(yte, p * 2)
    with pytest.raises(ValueError, match="y_prob has NaN"):
        ece_score(yte, np.where(p > 0.5, np.nan, p))
    with pytest.raises(ValueError, match="y_prob must have shape"):
        ece_score(yte, p[:-1])
    with pytest.raises(ValueError, match="y_true has 1 missing"):
        ece_score(np.where(np.arange(len(yte)) == 3, np.nan, yte), p)
    with pytest.raises(ValueError, match="one column"):
        ece_score(np.arange(len(yte)) % 3, p)
    with pytest.raises(ValueError, match="labels="):
        ece_score(np.arange(len(yte)) % 3, np.full((len(yte), 4), 0.25))
    with pytest.raises(ValueError, match="sample_weight"):
        ece_score(yte, p, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="weights must be non-negative"):
        ece_score(yte, p, sample_weight=-np.ones(len(yte)))
    with pytest.raises(NotFittedError):
        CalibrationErrorDisplay.from_estimator(LogisticRegression(), Xte, yte)
    from sklearn.svm import LinearSVC
    with pytest.raises(TypeError, match="predict_proba"):
        CalibrationErrorDisplay.from_estimator(LinearSVC().fit(Xtr, ytr), Xte, yte)
    with pytest.raises(ValueError, match="n_bins must be an integer >= 1"):
        CalibrationErrorDisplay.from_predictions(yte, p, n_bins=-3)
    with pytest.raises(TypeError, match="CalibrationResult"):
        CalibrationErrorDisplay([0.5], [0.5], p, lower=[0.4], upper=[0.6], counts=[10], result="no")
    t = calibration_target(["b", "a", "c", "a"], np.eye(3)[[1, 0, 2, 0]] * 0.7 + 0.1, labels=["a", "b", "c"])
    np.testing.assert_array_equal(t.y, [1, 0, 2, 0])
    with pytest.raises(ValueError, match=r"labels \['z'\]"):
        calibration_target(["b", "a", "z", "a"], np.full((4, 3), 1 / 3), labels=["a", "b", "c"])


def test_importing_calibtest_does_not_import_sklearn():
    code = ("import sys, calibtest; calibtest.calib_ci; calibtest.CalibrationResult; "
            "assert 'sklearn' not in sys.modules, 'sklearn imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------- the API reference's examples
def _public_docs() -> dict[str, str]:
    """The text the API reference shows for each public name of calibtest.sklearn (and each method of the
    display): docstrings, and for the scorer its ``#:`` comment (what autodoc renders, read by Sphinx's own
    analyzer)."""
    import inspect

    import calibtest.sklearn as mod
    from sphinx.pycode import ModuleAnalyzer

    attr_docs = ModuleAnalyzer.for_module("calibtest.sklearn").find_attr_docs()
    docs = {}
    for name in mod.__all__:
        obj = getattr(mod, name)
        if inspect.isclass(obj) or inspect.isroutine(obj):
            docs[name] = inspect.getdoc(obj) or ""
        else:
            docs[name] = "\n".join(attr_docs.get(("", name), []))
    for method in ("from_estimator", "from_predictions", "plot"):
        docs[f"CalibrationErrorDisplay.{method}"] = inspect.getdoc(getattr(CalibrationErrorDisplay, method))
    return docs


def test_every_public_name_has_a_runnable_doctested_example(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    import doctest
    import re

    pytest.importorskip("sphinx")
    monkeypatch.chdir(tmp_path)
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    docs = _public_docs()
    assert "ece_scorer" in docs and "calibration_target" in docs
    for name, text in docs.items():
        assert re.search(r"^Examples\n--------$", text, re.M), f"{name} has no Examples section"
        test = parser.get_doctest(text, {}, name, "calibtest/sklearn.py", 0)
        runnable = [e for e in test.examples if not e.options.get(doctest.SKIP, False)]
        assert len(runnable) >= 2, f"{name}'s examples are skipped or missing"
        runner.run(test, out=lambda s: None)
    assert runner.failures == 0, f"{runner.failures} failing examples in calibtest.sklearn"
    assert runner.tries >= 40
    plt.close("all")


def test_the_api_reference_documents_every_public_name_of_calibtest_sklearn():
    import re

    import calibtest.sklearn as mod
    text = (REPO / "docs" / "api.rst").read_text(encoding="utf-8")
    # an autosummary block under ``.. currentmodule:: calibtest.sklearn`` (one page and an index entry each)
    block = re.search(r"\.\. currentmodule:: calibtest\.sklearn\n\n\.\. autosummary::\n(?:\s+:[^\n]+\n)*\n"
                      r"((?:   \w+\n)+)", text)
    assert block is not None
    assert {m.strip() for m in block.group(1).split()} == set(mod.__all__)


# --------------------------------------------------------------------------- issue 37: names, signs, p-values
def test_scorer_gives_zero_not_negative_zero():
    from sklearn.model_selection import StratifiedKFold

    X, y = make_classification(n_samples=600, random_state=0)
    scores = cross_val_score(LogisticRegression(), X, y, cv=5, scoring=ece_scorer)
    eces = []
    for train, test in StratifiedKFold(5).split(X, y):  # cross_val_score's folds for a classifier, cv=5
        p = LogisticRegression().fit(X[train], y[train]).predict_proba(X[test])[:, 1]
        eces.append(ct.calib_ci(y=y[test], probs=p).ece)
    n_zero = sum(e == 0 for e in eces)
    assert n_zero >= 2  # the folds this checks
    np.testing.assert_array_equal(scores, -np.array(eces) + 0.0)
    assert (scores[np.signbit(scores)] < 0).all()  # only true negatives carry the sign bit
    assert np.count_nonzero((scores == 0) & ~np.signbit(scores)) == n_zero
    assert "-0. " not in repr(scores) and "-0.]" not in repr(scores) and "-0.," not in repr(scores)


def test_display_name_is_carried_into_comparisons_summaries_and_reports(tmp_path):
    import matplotlib.pyplot as plt

    from sklearn.datasets import load_digits
    from sklearn.naive_bayes import GaussianNB

    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=600, random_state=0)
    models = {"naive Bayes": GaussianNB(), "logistic C=1": LogisticRegression(max_iter=2000),
              "logistic C=0.01": LogisticRegression(C=0.01, max_iter=2000),
              "logistic C=100": LogisticRegression(C=100, max_iter=2000)}
    ax = plt.figure().subplots()
    displays = [CalibrationErrorDisplay.from_estimator(m.fit(X_tr, y_tr), X_te, y_te, name=nm, ax=ax)
                for nm, m in models.items()]
    results = [d.result_ for d in displays]
    assert [r.model_label for r in results] == list(models)
    cmp = ct.calib_compare(results, paired=True)
    assert tuple(cmp.names) == tuple(models)
    text = str(cmp.summary())
    assert all(nm in text for nm in models) and "A: 0 + 1" not in text
    import re
    assert re.search(r"Model:\s+naive Bayes \(y ~ 0 \+ 1", str(results[0].summary(evidence=False)))
    page = ct.report(results, tmp_path / "r.html").read_text()
    assert all(nm in page for nm in models)
    plain = ct.calib_ci(y=(GaussianNB().fit(X_tr, y_tr).predict(X_te) == y_te).astype(int),
                        probs=GaussianNB().fit(X_tr, y_tr).predict_proba(X_te).max(axis=1), n_classes=10)
    assert results[0].estimate == plain.estimate  # the name changes no number


def test_comparison_summary_never_prints_p_value_zero():
    rng = np.random.default_rng(0)
    n = 20000
    p = rng.uniform(size=n)
    y = (rng.random(n) < p).astype(int)
    good = ct.calib_ci(y=y, probs=p)
    bad = ct.calib_ci(y=y, probs=np.clip(p + 0.4, 0, 1))
    cmp = ct.calib_compare(good, bad, paired=True)
    assert cmp.pvalue == 0.0  # underflowed: the case the display must not print as 0
    text = str(cmp.summary())
    row = next(line for line in text.splitlines() if line.startswith("Delta"))
    assert "< 1e-300" in row and " 0 " not in row.replace("< 1e-300", "")
    assert "p<1e-300" in repr(cmp)
    three = ct.calib_compare([good, bad, ct.calib_ci(y=y, probs=p ** 3)], paired=True)
    table = str(three.summary())
    assert "< 1e-300" in table


def test_cross_validation_table_shows_open_intervals_with_their_verdicts():
    from calibtest.display.format import fmt

    X, y = make_classification(n_samples=900, random_state=4, flip_y=0.15)
    for seed in range(30):  # a split with a fold that rejects while its lower end is 0
        cvr = cross_validate_calibration(LogisticRegression(C=30), X, y, cv=KFold(3, shuffle=True, random_state=seed))
        if any(r.null_pvalue <= r.alpha and r.conf_int(scale="ece").lower == 0 for r in cvr.fold_results):
            break
    else:
        pytest.fail("no fold open at 0 in 30 splits")
    lines = str(cvr.summary()).splitlines()
    for i, r in enumerate([*cvr.fold_results, cvr.out_of_fold]):
        label = f"fold {i + 1}" if i < len(cvr.fold_results) else "out of fold"
        line = next(x for x in lines if x.startswith(label + " "))
        rejects = r.null_pvalue <= r.alpha
        lo, hi = np.sqrt(r.ci_lower), np.sqrt(r.ci_upper)
        opened = "(" if rejects and lo == 0 else "["
        assert f"{opened}{fmt(lo, 4)}, {fmt(hi, 4)}]" in line
        assert ("excludes 0" if rejects else "contains 0") in line
    assert list(cvr.folds["lower_open"]) == [bool(r.null_pvalue <= r.alpha and r.ci_lower == 0)
                                            for r in cvr.fold_results]
