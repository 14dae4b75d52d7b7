"""Time of calibtest.checks.survival_calibration at n = 10^6 with about 30% censoring before the horizon.

``python benchmarks/bench_survival_evidence.py [N]`` prints the wall and CPU time of one call (median of 3)
and of its parts: the time order and Kaplan-Meier estimates, the offset Cox model (intercept), the Cox
slope and the flexible curve's Cox fit.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

from calibtest.core.km_cox import breslow_offset_at, cox_breslow, equal_size_groups, kaplan_meier_at, time_order
from calibtest.checks.flexible_calibration import harrell_knots, rcs_basis
from calibtest.checks.survival_calibration import survival_evidence


def timed(fn, repeat=3):
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def main(n: int) -> None:
    rng = np.random.default_rng(0)
    horizon = 5.0
    risk = rng.uniform(0.05, 0.6, n)
    t = rng.exponential(horizon / -np.log1p(-risk))
    c = rng.exponential(12.0, n)
    time_, event = np.minimum(t, c), t <= c
    print(f"n = {n}, censored before t: {np.mean(~event & (time_ < horizon)):.3f}, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    th, dh = np.minimum(time_, horizon), event & (time_ <= horizon)
    cll = np.log(-np.log1p(-risk))
    order = time_order(th)
    x = rcs_basis(cll, harrell_knots(cll, 3))
    parts = {
        "survival_evidence (everything)": lambda: survival_evidence(time_, event, risk, horizon),
        "time order": lambda: time_order(th),
        "Kaplan-Meier, pooled and 10 groups": lambda: (kaplan_meier_at(th, dh, horizon, order=order),
                                                        kaplan_meier_at(th, dh, horizon,
                                                                        equal_size_groups(risk, 10), 10, order)),
        "intercept (offset Cox)": lambda: breslow_offset_at(th, dh, cll, horizon, order),
        "slope (Cox, 1 covariate)": lambda: cox_breslow(th, dh, cll[:, None], horizon, start=[1.0], order=order),
        "flexible curve (Cox, 2 covariates)": lambda: cox_breslow(th, dh, x, horizon, start=[1.0, 0.0],
                                                                  order=order),
    }
    for name, fn in parts.items():
        wall, cpu = timed(fn)
        print(f"  {name:38s} wall {wall:6.2f} s   CPU {cpu:6.2f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10 ** 6)
