"""Make ``docs/_static/monitoring_example.png``, the figure of ``docs/monitoring.md`` (the page's worked example).

Run: ``PYTHONPATH=. python docs/_static/monitoring_figure.py``.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
from scipy.special import expit, logit  # noqa: E402

import calibtest as ct  # noqa: E402


def example_monitor() -> ct.CalibrationMonitor:
    """90 days of 2,000 predictions a day; from day 40 the calibration slope drifts to 0.7 over 10 days."""
    rng = np.random.default_rng(2024)
    mon = ct.CalibrationMonitor(alpha=0.05, arl=365, margin=0.05, model="readmission-v3")
    for day in range(90):
        p = expit(rng.normal(-1.2, 1.0, 2000))
        slope = 1.0 if day < 40 else max(0.7, 1.0 - 0.03 * (day - 39))
        y = (rng.random(2000) < expit(slope * logit(p))).astype(int)
        mon.update(y=y, probs=p, time=day)
    return mon


if __name__ == "__main__":
    mon = example_monitor()
    fig = mon.plot()
    fig.savefig(Path(__file__).with_name("monitoring_example.png"), dpi=110)
    print(mon.summary())
