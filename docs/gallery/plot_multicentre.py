"""
A multicentre validation study
==============================

A risk model is validated in eight hospitals. Patients of one hospital share what the model does
not see, so their outcomes are correlated: an interval that treats the 4000 rows as independent
is too narrow. This example shows the three questions of a multicentre study and calibtest's
answer to each:

* **Is the model calibrated in the population of hospitals?** ``cluster="site"``: the interval and
  the test allow for correlation within hospitals.
* **Is it calibrated in each hospital?** ``by="site"``: one interval per hospital, with a forest
  plot (:func:`calibtest.reporting.forest.plot_forest`).
* **How much do hospitals differ?** ``meta_analysis()``: a random-effects meta-analysis of
  observed/expected, calibration-in-the-large and the slope across hospitals, with a prediction
  interval for a new hospital (:func:`calibtest.reporting.forest.plot_meta_forest`).

The data are simulated: each hospital has its own baseline risk (a random intercept), which the
model ignores.
"""
# %%
# Eight hospitals, a model that ignores their baseline
# ----------------------------------------------------
import numpy as np
import pandas as pd

import calibtest as ct
from calibtest.reporting.forest import plot_forest, plot_meta_forest

rng = np.random.default_rng(11)
sizes = rng.integers(250, 800, size=8)
site = np.repeat([f"hospital {chr(65 + i)}" for i in range(8)], sizes)
shift = dict(zip(np.unique(site), rng.normal(0.0, 0.35, 8)))  # baselines
logit_p = rng.normal(-1.2, 1.0, len(site))
p = 1 / (1 + np.exp(-logit_p))
true = 1 / (1 + np.exp(-(logit_p + np.vectorize(shift.get)(site))))
y = (rng.random(len(site)) < true).astype(int)
df = pd.DataFrame({"y": y, "p": p, "site": site})
by_site = df.groupby("site")
print(by_site.agg(n=("y", "size"), events=("y", "sum"), mean_p=("p", "mean")))

# %%
# The population of hospitals: ``cluster=``
# -----------------------------------------
res = ct.calib_ci("y ~ p", data=df, cluster="site", rng=0)
print(res.summary())

# %%
# Each hospital: ``by=``
# ----------------------
grouped = ct.calib_ci("y ~ p", data=df, by="site", rng=0)
print(grouped.summary())

# %%
# The forest plot of the per-hospital intervals for the ECE, the pooled interval as a diamond:
ax_forest = plot_forest(grouped)

# %%
# ... and of the calibration-in-the-large of each hospital:
ax_citl = plot_forest(grouped, measure="citl")

# %%
# Across hospitals: a random-effects meta-analysis
# ------------------------------------------------
meta = grouped.meta_analysis()
print(meta.summary())

# %%
# Observed/expected events per hospital, the pooled estimate and the prediction interval for a new
# hospital:
ax_meta = plot_meta_forest(meta, "log_oe")
