"""
scikit-learn: a display, a scorer and cross-validation
======================================================

The worked example of :doc:`the scikit-learn page <../sklearn>`, run: a gradient-boosting
classifier and a logistic regression on three classes, 4000 training rows and 2000 held-out rows
(:func:`sklearn.datasets.make_classification`). ``CalibrationErrorDisplay`` is the
``sklearn.calibration.CalibrationDisplay`` of calibtest: the same ``from_estimator`` /
``from_predictions`` / ``plot`` API and the same ``n_bins`` and ``strategy``, with the ECE, its
interval and the verdict in the legend.
"""
# %%
# Two classifiers
# ---------------
from sklearn.datasets import make_classification
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from calibtest.sklearn import (CalibrationErrorDisplay,
                               cross_validate_calibration, ece_score)

X, y = make_classification(n_samples=6000, n_features=12, n_informative=6,
                           n_classes=3, random_state=0)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=2000,
                                                    random_state=0)
hgb = HistGradientBoostingClassifier(random_state=0).fit(X_train, y_train)
lr = LogisticRegression(max_iter=1000).fit(X_train, y_train)

# %%
# The display, two models overlaid
# --------------------------------
# The top-1 confidence against the accuracy at five equal-width bins (scikit-learn's default
# ``n_bins=5, strategy="uniform"``), with Wilson intervals; the estimator's own bins (``ece_bins``)
# are chosen for the ECE, not for the eye.
disp = CalibrationErrorDisplay.from_estimator(hgb, X_test, y_test)
CalibrationErrorDisplay.from_estimator(lr, X_test, y_test, ax=disp.ax_)

# %%
# ``disp.result_`` is the full ``CalibrationResult``; its conclusion says how much and in which
# direction:
print(disp.result_.conclusion()[1])
print(f"ece_score: {ece_score(y_test, hgb.predict_proba(X_test)):.4f}")

# %%
# Equal-count bins, as ``CalibrationDisplay(strategy="quantile")``:
disp_quantile = CalibrationErrorDisplay.from_estimator(
    hgb, X_test, y_test, n_bins=10, strategy="quantile")

# %%
# The result's own reliability diagram
# ------------------------------------
# ``res.plot_reliability()`` draws deciles of the confidence over a strip of the rows per
# estimator bin, and gives the ECE, its interval and the verdict in the title.
ax_result = disp.result_.plot_reliability()

# %%
# Cross-validation with intervals
# -------------------------------
# An interval per test fold and one for the out-of-fold predictions:
cv = cross_validate_calibration(HistGradientBoostingClassifier(random_state=0),
                                X, y, cv=5)
print(cv.summary())
