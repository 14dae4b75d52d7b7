"""Write tests/reference/survival_evidence_data.csv, the shared data of the R cross-checks of survival_evidence.

Usage (from the repository root): ``python tests/reference/survival_evidence_data.py``.
Two data sets (column ``set``), each with its horizon in ``horizon``:

* ``weibull`` (n = 600, t = 5): Weibull event times (shape 1.5) from a proportional hazards model whose
  true risk by t is r; the predicted risk is too extreme and too high (cloglog(risk) = 0.2 + 1.3
  cloglog(r)); independent uniform censoring on (0, 15) (about 30% censored before t); continuous
  times, no ties.
* ``ties`` (n = 400, t = 3): exponential event times, times rounded up to multiples of 0.25 and
  risks rounded to 2 decimals, so that event times and risks are tied (Breslow ties, stable groups).

Numbers are written with 17 significant digits, so that R reads the same doubles.
"""
from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(__file__).with_name("survival_evidence_data.csv")


def weibull(rng, n=600, horizon=5.0):
    r = rng.uniform(0.05, 0.7, n)
    h_t = -np.log1p(-r)  # cumulative hazard at the horizon; H(s) = h_t (s / t)^1.5
    t = horizon * (rng.exponential(size=n) / h_t) ** (1 / 1.5)
    c = rng.uniform(0, 15, n)
    cll = 0.2 + 1.3 * np.log(h_t)
    risk = -np.expm1(-np.exp(cll))
    return pd.DataFrame({"set": "weibull", "horizon": horizon, "time": np.minimum(t, c),
                         "event": (t <= c).astype(int), "risk": risk})


def ties(rng, n=400, horizon=3.0):
    r = np.round(rng.uniform(0.1, 0.6, n), 2)
    t = rng.exponential(horizon / -np.log1p(-r))
    c = rng.uniform(0, 8, n)
    time = np.ceil(np.minimum(t, c) * 4) / 4
    return pd.DataFrame({"set": "ties", "horizon": horizon, "time": time, "event": (t <= c).astype(int),
                         "risk": np.clip(np.round(r * 0.9 + 0.03, 2), 0.01, 0.99)})


if __name__ == "__main__":
    rng = np.random.default_rng(20261125)
    data = pd.concat([weibull(rng), ties(rng)], ignore_index=True)
    data.to_csv(OUT, index=False, float_format="%.17g")
    print(f"wrote {OUT} ({len(data)} rows)")
