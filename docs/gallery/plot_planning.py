"""
Planning a validation study
===========================

Before collecting data: how many patients does a validation study need so that the calibration
test detects an anticipated miscalibration with 80% power, or so that the interval for the ECE is
narrow enough? :func:`calibtest.calib_sample_size` and :func:`calibtest.calib_power` take the
distribution of the model's predictions as a sample, here the predictions of the demo data shipped
with calibtest (:func:`calibtest.load_demo`), and the anticipated miscalibration as a
recalibration (intercept and slope on the logit scale).
"""
# %%
# The predictions the study will see
# ----------------------------------
import numpy as np

import calibtest as ct

dev_preds = ct.load_demo()["p"].to_numpy()
print(f"{len(dev_preds)} predictions, mean {dev_preds.mean():.3f}, "
      f"deciles {np.quantile(dev_preds, [0.1, 0.5, 0.9]).round(3)}")

# %%
# Power to detect a slope of 0.8
# ------------------------------
# A calibration slope of 0.8 (predictions too extreme) is a common finding at external
# validation. The sample size for 80% power of the test of ECE = 0 at level 0.05:
ss = ct.calib_sample_size(probs=dev_preds, slope=0.8, power=0.8)
print(ss.summary())

# %%
# The power curve and the chosen n:
fig_power = ss.plot()

# %%
# A power table
# -------------
# ``calib_power`` for a few study sizes, and for a milder miscalibration (slope 0.9):
for slope in (0.8, 0.9):
    print(f"slope {slope}:")
    power = ct.calib_power([500, 1000, 2000, 4000], probs=dev_preds,
                           slope=slope)
    print(power.frame())

# %%
# Precision instead of power
# --------------------------
# The n for an expected width of the interval for the ECE of at most 0.03 when the model is
# miscalibrated by an intercept of 0.3:
precision = ct.calib_sample_size(probs=dev_preds, intercept=0.3, ci_width=0.03)
print(precision.summary())
