"""
Monitoring a deployed model over time
=====================================

After deployment a risk model is checked batch by batch: every day a batch of new patients with
their predicted risks and, later, their outcomes. Testing each day's batch at 0.05 raises false
alarms however good the model is; :class:`calibtest.CalibrationMonitor` raises an alarm with
probability at most α over the whole stream, however often one looks (an e-process and Ville's
inequality), and its change detector keeps no memory of a long calibrated past.

Here 120 days of 400 patients are simulated: calibrated for 60 days, then the model's slope drifts
(its risks become too extreme), as happens when a population changes.
"""
# %%
# The stream: calibrated, then a slope drift from day 60
# ------------------------------------------------------
import numpy as np
import pandas as pd

import calibtest as ct

rng = np.random.default_rng(3)
days, per_day, change = 120, 400, 60


def batch(day):
    p = rng.beta(2, 6, per_day)                       # the model's stated risks
    logit = np.log(p / (1 - p))
    slope = 1.0 if day < change else 0.75  # then the true risks are flatter
    truth = 1 / (1 + np.exp(-slope * logit))
    y = (rng.random(per_day) < truth).astype(int)
    return pd.DataFrame({"y": y, "p": p})


# %%
# One look a day
# --------------
# ``arl=365``: the change detector's in-control average run length is at least a year of looks.
mon = ct.CalibrationMonitor("y ~ p", alpha=0.05, arl=365,
                            model="readmission-v3", rng=1)
for day in range(days):
    mon.update(batch(day), time=day)
res = mon.result()
print(res.summary())

# %%
# The statistics over time against their thresholds
# -------------------------------------------------
# The e-process (the anytime-valid test of calibration) and the change detector, with the alarm and
# the estimated change time marked.
ax_monitor = res.plot()
