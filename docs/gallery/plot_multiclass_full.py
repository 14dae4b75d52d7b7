"""
Full calibration of a multiclass model
======================================

Top-1 calibration asks whether the *largest* probability is right as often as it says.
**Full (canonical) calibration** asks more: whether the whole vector of class probabilities is
right, E[Y | p] = p, on the simplex of K classes. Here a Gaussian naive Bayes model and a strongly
regularised logistic regression (``C=0.1``, whose probabilities are pulled towards 1/K) classify the three wine cultivars of
:func:`sklearn.datasets.load_wine` (178 wines, shipped with scikit-learn), with cross-validated
(out-of-fold) predictions so that every wine is predicted by a model that did not see it.
"""
# %%
# Out-of-fold probabilities of two models
# ---------------------------------------
import numpy as np
from sklearn.datasets import load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_predict
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import calibtest as ct

X, y = load_wine(return_X_y=True)
P_nb = cross_val_predict(GaussianNB(), X, y, cv=5, method="predict_proba")
logistic = make_pipeline(StandardScaler(), LogisticRegression(C=0.1))
P_lr = cross_val_predict(logistic, X, y, cv=5, method="predict_proba")
print(P_nb.shape, "share of rows with a probability above 0.99:",
      (P_nb.max(axis=1) > 0.99).mean().round(2))

# %%
# Full calibration: ``k="full"``
# ------------------------------
# ``y`` holds the class index of each row (0..K-1) and ``probs`` the K columns. The binning is on
# the simplex (B^(K-1) cells; ``docs/conventions.md``), and the estimate is of the full
# calibration error.
full_nb = ct.calib_ci(y=y, probs=P_nb, k="full", rng=0)
print(full_nb.summary())

# %%
# The reliability diagram of full calibration has one panel per class: the predicted probability
# of class j against the frequency of class j.
ax_full = full_nb.plot_reliability()

# %%
# The logistic regression, for comparison, with its top-1 calibration beside its full calibration:
full_lr = ct.calib_ci(y=y, probs=P_lr, k="full", rng=0)
top1_lr = ct.calib_ci(y=y, probs=P_lr, k=1, rng=0)
results = {"naive Bayes, full": full_nb, "logistic, full": full_lr,
           "logistic, top-1": top1_lr}
for name, r in results.items():
    interval = r.conf_int(scale="ece")
    print(f"{name:18s} ECE {r.ece:.3f}, 95% CI {interval}: {r.conclusion()[0]}")
