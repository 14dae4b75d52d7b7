"""
A validation report
===================

:func:`calibtest.report` writes a self-contained HTML file (or a PDF with the ``[pdf]`` extra): an
overview of the models, for each model the estimate, its interval and tests, the evidence table,
the figures and the bin table, the comparison of the models, and the software versions. This
example validates two models on the demo data shipped with calibtest and writes their report;
it is shown at the bottom of the page, and opens on its own as
`calibration_report.html <calibration_report.html>`_.
"""
# %%
# Two models on the same rows
# ---------------------------
# The demo data hold the validation half of a logistic model (``p``); a second model is the same
# one with its logit shrunk by a half, an underconfident version.
import numpy as np

import calibtest as ct

df = ct.load_demo()
logit = np.log(df["p"] / (1 - df["p"]))
shrunk = logit.mean() + 0.5 * (logit - logit.mean())
df["p_shrunk"] = 1 / (1 + np.exp(-shrunk))
res_a = ct.calib_ci("y ~ p", data=df, rng=0)
res_b = ct.calib_ci("y ~ p_shrunk", data=df, rng=0)
cmp = ct.calib_compare(res_a, res_b, names=["original", "shrunk"])
print(cmp.summary())

# %%
# The report's figures are those of :mod:`calibtest.reporting.plotting`; for example the two models'
# reliability diagrams at display bins, overlaid, with the caption the report prints under them:
from calibtest.reporting.plotting import (display_bins_caption,
                                          display_reliability_figure)

fig_models = display_reliability_figure([res_a, res_b], ["original", "shrunk"])
print(display_bins_caption([res_a, res_b]))

# %%
# The report
# ----------
# One call; ``labels`` name the models and ``comparisons`` adds the paired comparison.
path = ct.report([res_a, res_b], "calibration_report.html",
                 labels=["original", "shrunk"], comparisons=[cmp],
                 title="Calibration of two risk models on the demo data", rng=0)
print(path.name, f"{path.stat().st_size / 1e6:.1f} MB")

# %%
# The report's pages
# ------------------
#
# .. raw:: html
#
#    <iframe class="calibtest-report" src="calibration_report.html" title="calibtest report"></iframe>
