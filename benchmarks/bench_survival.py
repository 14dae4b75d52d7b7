"""Speed of the survival interval (issue 25): n = 1,000,000 rows with 30% censoring before the horizon.

Target: ``calib_ci(time=, event=, probs=, horizon=)`` (Kaplan-Meier IPCW, the influence of the estimated
censoring distribution in the standard error, the null variance V_0) in under 2 s.  The binary interval on
the same risks is printed for comparison, and so is the interval with the Cox censoring model (its fit included),
and statsmodels' ``PHReg(ties="breslow")`` fit of that censoring model on the first 10^4 rows (what calibtest's
own Newton fit replaces).

Run: ``python benchmarks/bench_survival.py`` (output in ``benchmarks/results/bench_survival.txt``).  Prints
median wall times of repeated runs and the machine's load average.
"""
from __future__ import annotations

import os
import time

import numpy as np

import calibtest as ct


def median_time(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> None:
    rng = np.random.default_rng(0)
    n, horizon = 1_000_000, 5.0
    x = rng.normal(size=n)
    lam = 0.08 * np.exp(0.6 * x)
    t_event = rng.exponential(1 / lam)
    t_cens = rng.uniform(0, 13.5, n)  # about 30% of the rows censored before the horizon
    event = (t_event <= t_cens).astype(np.int8)
    obs = np.round(np.minimum(t_event, t_cens), 3)  # follow-up recorded to the day (ties, as in practice)
    risk = 1 - np.exp(-lam * horizon)
    y_t = ((event == 1) & (obs <= horizon)).astype(np.int8)
    load0 = os.getloadavg()[0]
    res = ct.calib_ci(time=obs, event=event, probs=risk, horizon=horizon)
    share = res.survival.n_censored / n
    km = median_time(lambda: ct.calib_ci(time=obs, event=event, probs=risk, horizon=horizon))
    binary = median_time(lambda: ct.calib_ci(y=y_t, probs=risk, null="asymptotic"))
    cox = median_time(lambda: ct.calib_ci(time=obs, event=event, probs=risk, horizon=horizon, censoring="cox",
                                          censoring_covariates=x), repeat=3)
    phreg = median_time(lambda: _phreg(obs[:10_000], event[:10_000], x[:10_000]), repeat=3)
    print(f"{os.cpu_count()} CPUs, load average (1 min) {load0:.2f} at the start")
    print(f"censored before t: {100 * share:.1f}% of n = {n:,}; B = {res.n_bins}")
    print(f"calib_ci survival (KM IPCW), n=1e6:  {km * 1e3:8.1f} ms  (target < 2000 ms)")
    print(f"calib_ci binary on the same risks:   {binary * 1e3:8.1f} ms  (asymptotic null)")
    print(f"calib_ci survival (Cox IPCW), n=1e6: {cox * 1e3:8.1f} ms  (Breslow Cox fit included)")
    print(f"statsmodels PHReg of the censoring, n=1e4: {phreg * 1e3:8.1f} ms  (ties='breslow', for comparison)")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f}")


def _phreg(obs, event, x):
    """The Cox model of the censoring (1 - event is the censoring's event) by statsmodels."""
    from statsmodels.duration.hazard_regression import PHReg
    return PHReg(obs, x[:, None], status=1 - event, ties="breslow").fit()


if __name__ == "__main__":
    main()
