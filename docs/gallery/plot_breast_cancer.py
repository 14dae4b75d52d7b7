"""
A binary risk model on real data
================================

A logistic regression predicts malignancy from the Wisconsin breast cancer data
(:func:`sklearn.datasets.load_breast_cancer`, 569 tumours, shipped with scikit-learn, no download).
We fit it on half of the rows and ask, on the other half, how far its predicted risks are from
calibrated: the l2 expected calibration error (ECE) with its confidence interval and test, the
classical evidence (calibration-in-the-large, slope, Hosmer-Lemeshow) and the figures of a report.
"""
# %%
# Fit a model and predict on held-out rows
# ----------------------------------------
# A deliberately weakly regularised model (``C=100``) on standardised features: such a model is
# typically overconfident, its risks pushed towards 0 and 1.
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import calibtest as ct

X, y = load_breast_cancer(return_X_y=True)
y = 1 - y  # scikit-learn codes malignant as 0: make the event (malignant) 1
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.5, random_state=0, stratify=y)
model = make_pipeline(StandardScaler(),
                      LogisticRegression(C=100, max_iter=5000))
model.fit(X_train, y_train)
p = model.predict_proba(X_test)[:, 1]
print(f"{len(y_test)} validation rows, {y_test.sum()} malignant; "
      f"mean predicted risk {p.mean():.3f}")

# %%
# The interval and the test
# -------------------------
# ``calib_ci`` takes the outcomes and the predicted risks (or a formula and a data frame). Its
# ``summary()`` holds the estimate, the interval for the ECE, the test of ECE = 0 and the
# evidence table.
res = ct.calib_ci(y=y_test, probs=p, rng=0)
print(res.summary())

# %%
# ``conclusion()`` returns the verdict, the sentence a report prints and the reasons behind it.
verdict, sentence, reasons = res.conclusion()
print(verdict)
print(sentence)

# %%
# The reliability diagram
# -----------------------
# Observed proportions at display bins (deciles of risk) with Wilson intervals, over a strip of the
# predictions; the title repeats the ECE, its interval and the verdict.
ax_reliability = res.plot_reliability()

# %%
# The figures of a report
# -----------------------
# :mod:`calibtest.reporting.plotting` draws the figures of :func:`calibtest.report`. Each returns a
# :class:`matplotlib.figure.Figure` of its own (not registered with pyplot): ``fig.savefig(...)``
# writes it. The flexible calibration curve (a restricted cubic spline of logit p, with its
# pointwise 95% band, the calibration intercept and slope):
from calibtest.reporting.plotting import (
    bin_sensitivity_figure, display_reliability_figure, flexible_curve_figure,
    prediction_strip_figure)

fig_flexible = flexible_curve_figure(res, ["logistic regression"])

# %%
# The reliability diagram at display bins (here five equal-width bins) and its caption:
fig_display = display_reliability_figure(res, ["logistic regression"], n_bins=5)

# %%
# The predictions of malignant and benign tumours (discrimination, and where each group sits):
fig_strip = prediction_strip_figure(res, ["logistic regression"])

# %%
# How the single-scale test and the interval depend on the number of bins B, from the evidence:
ev = ct.evidence(y=y_test, probs=p, rng=0)
fig_bins = bin_sensitivity_figure(ev, "logistic regression")
print(ev.summary())
