"""
A survival model at a time horizon
==================================

A prognostic model predicts each patient's risk of an event **by 5 years**. Follow-up is censored:
a patient followed for 3 years without an event has an unknown 5-year outcome, so the rows cannot
simply be counted as events and non-events. ``calib_ci(..., horizon=5)`` estimates the calibration
error at the horizon with the censoring accounted for (inverse probability of censoring weights),
and :func:`calibtest.survival_calibration` gives the classical evidence (observed/expected,
calibration slope, a Hosmer-Lemeshow-type test), with the reliability diagram of
:func:`calibtest.reporting.survival_plot.plot_survival_calibration`.

The cohort is simulated (1500 patients, Weibull event times, uniform censoring), so the true
risks are known: the model's predicted risks are those of a model fitted elsewhere whose linear
predictor is too spread out (slope 0.7 would recalibrate it).
"""
# %%
# A cohort, its follow-up and the model's 5-year risks
# ----------------------------------------------------
import numpy as np

import calibtest as ct
from calibtest.reporting.survival_plot import plot_survival_calibration

rng = np.random.default_rng(3)
n, horizon = 1500, 5.0
lp = rng.normal(0.0, 0.8, n)  # the true linear predictor
scale, shape = 12.0, 1.3      # Weibull baseline
event_time = scale * (-np.log(rng.random(n)) / np.exp(lp)) ** (1 / shape)
censor_time = rng.uniform(1.0, 9.0, n)
time = np.minimum(event_time, censor_time)
event = (event_time <= censor_time).astype(int)
true_risk = 1 - np.exp(-(horizon / scale) ** shape * np.exp(lp))
risk = 1 - np.exp(-(horizon / scale) ** shape * np.exp(lp / 0.7))  # too extreme
censored_early = ((time < horizon) & (event == 0)).mean()
print(f"{event.sum()} events, {censored_early:.0%} censored before 5 years")

# %%
# The interval at the horizon
# ---------------------------
res = ct.calib_ci(time=time, event=event, probs=risk, horizon=horizon, rng=0)
print(res.summary())

# %%
# The classical evidence at the horizon
# -------------------------------------
sev = ct.survival_calibration(time, event, risk, horizon)
print(sev.summary())

# %%
# Observed (Kaplan-Meier) risk by 5 years in groups of predicted risk, against the predicted risk:
ax_survival = plot_survival_calibration(sev)

# %%
# The same for the true risks: a calibrated model, for comparison.
sev_true = ct.survival_calibration(time, event, true_risk, horizon)
ax_true = plot_survival_calibration(sev_true)
