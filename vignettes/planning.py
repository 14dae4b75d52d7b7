"""Planning study: analytic sample sizes of calib_sample_size against simulated studies.

For three prediction distributions (Beta(2,5); rare events Beta(0.5,10); top-1
confidences near 1, K = 10) and five anticipated miscalibrations (logistic
recalibration: intercept +-0.3, slope 0.7 / 0.85 / 1.2) this script

1. computes the analytic n of :func:`calibtest.calib_sample_size` for three
   targets (power 0.8; expected ECE-scale interval width 0.05 and 0.03);
2. simulates N_SIM studies at n_a x {0.8, 1, 1.25} (more factors when the
   target is not bracketed) with the package's estimator and finds the n at
   which the simulated criterion crosses the target (linear interpolation in
   log n between the two bracketing points);
3. compares analytic and simulated power / width at small n (100, 200, 400),
   with the expected share of single-row bins, to see where the analytic
   answer fails;
4. computes Riley et al.'s (2021) calibration-slope criterion (n such that the
   95% interval for the calibration slope has width <= 0.2) from the inverse
   Fisher information of the logistic recalibration model.

Results go to CSV as they are computed (``planning_check.csv``,
``planning_small_n.csv``, ``planning_riley.csv``); rerunning skips finished
rows.  Run: ``nice -n 10 python vignettes/planning.py``.

Those stages use the paper's asymptotic null (the reference).  The checks under
:func:`calibtest.calib_ci`'s default null (the conditional null for these
one-column targets; each simulated study one ``calib_ci`` analysis) run with
``--default-null``: power 0.8 and width 0.05 / 0.03 targets for three
miscalibrations per distribution (``planning_default_null.csv``), small n
(``planning_default_null_small_n.csv``) and the size for a calibrated model
(``planning_default_null_size.csv``).
"""
from __future__ import annotations

import math
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import expit

from calibtest.core.power import normal_power
from calibtest.api.sample_size import calib_power, calib_sample_size

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20261123
N_SIM = int(os.environ.get("PLANNING_N_SIM", 2000))
M_POP = 20000
ALPHA = 0.05
TARGETS = [("power", 0.8), ("ci_width", 0.05), ("ci_width", 0.03)]
MISCAL = [("intercept +0.3", 0.3, 1.0), ("intercept -0.3", -0.3, 1.0), ("slope 0.7", 0.0, 0.7),
          ("slope 0.85", 0.0, 0.85), ("slope 1.2", 0.0, 1.2)]
SMALL_N = [100, 200, 400]
#: The conditional-null check: studies per point (each one calib_ci call), designs and n.
N_COND = 400
#: The normal law against the shifted gamma: Beta(2,5), calibrated and intercept +0.3.
SIZE_CASES = [(0.0, 200), (0.0, 1000), (0.0, 5000), (0.3, 1000)]
COND_CASES = [("Beta(2,5)", "intercept +0.3", 500), ("Beta(2,5)", "intercept +0.3", 1500),
              ("Beta(0.5,10)", "slope 0.7", 1000), ("top-1 conf, K=10", "slope 0.7", 800)]


def distributions():
    """The three prediction samples (seeded), each of M_POP predictions, and K for top-1."""
    rng = np.random.default_rng(SEED)
    return {"Beta(2,5)": (rng.beta(2, 5, M_POP), None),
            "Beta(0.5,10)": (rng.beta(0.5, 10, M_POP), None),
            "top-1 conf, K=10": (1.0 - 0.9 * rng.beta(1, 12, M_POP), 10)}


def riley_slope_n(p, intercept, slope, width=0.2, level=0.95):
    """Riley et al. (2021) criterion: n with 95% CI width of the calibration slope <= ``width``.

    The calibration model logit P(y=1) = a + b logit(p) at the anticipated (a, b);
    per-observation Fisher information I = E[q (1 - q) x x^T], x = (1, logit p),
    q = expit(a + b logit p), the expectation over the prediction sample.
    Var(b_hat) = [I^-1]_22 / n, so n = (2 z / width)^2 [I^-1]_22.
    """
    lp = np.log(p) - np.log1p(-p)
    q = expit(intercept + slope * lp)
    w = q * (1 - q)
    info = np.array([[w.mean(), (w * lp).mean()], [(w * lp).mean(), (w * lp * lp).mean()]])
    v22 = np.linalg.inv(info)[1, 1]
    z = stats.norm.isf((1 - level) / 2)
    return math.ceil((2 * z / width) ** 2 * v22)


def _done(path, keys):
    if not os.path.exists(path):
        return set()
    df = pd.read_csv(path)
    return set(map(tuple, df[keys].astype(str).to_numpy()))


def _append(path, row: dict):
    pd.DataFrame([row]).to_csv(path, mode="a", header=not os.path.exists(path), index=False)


def _crossing(points, target, col):
    """n where the simulated criterion crosses the target: log-linear interpolation between brackets."""
    pts = sorted(points)
    ok = lambda v: v >= target if col == "power" else v <= target
    for (n0, v0), (n1, v1) in zip(pts, pts[1:]):
        if not ok(v0) and ok(v1):
            f = (target - v0) / (v1 - v0) if v1 != v0 else 1.0
            return math.exp(math.log(n0) + f * (math.log(n1) - math.log(n0)))
    return float("nan")


def main(out_dir=HERE):
    warnings.simplefilter("ignore", UserWarning)
    check_csv = os.path.join(out_dir, "planning_check.csv")
    small_csv = os.path.join(out_dir, "planning_small_n.csv")
    riley_csv = os.path.join(out_dir, "planning_riley.csv")
    dists = distributions()
    done_check = _done(check_csv, ["distribution", "miscalibration", "target", "target_value"])
    done_small = _done(small_csv, ["distribution", "miscalibration", "n"])
    done_riley = _done(riley_csv, ["distribution", "miscalibration"])
    t_start = time.process_time()
    for di, (dname, (p, K)) in enumerate(dists.items()):
        for mi, (mname, a, b) in enumerate(MISCAL):
            common = dict(probs=p, n_classes=K, intercept=a, slope=b, alpha=ALPHA, null="asymptotic")

            def sim(n, tag):
                gen = np.random.default_rng([SEED, di, mi, tag, int(n)])
                r = calib_power(int(n), method="simulation", n_sim=N_SIM, rng=gen, **common)
                return {"power": r.power, "expected_width": r.expected_width, "power_se": r.monte_carlo.power_se,
                        "width_se": r.monte_carlo.width_se}

            def analytic(n):
                r = calib_power(int(n), **common)
                return {"power": r.power, "expected_width": r.expected_width, "n_bins": r.n_bins,
                        "sparse_share": r.sparse_share}

            if (dname, mname) not in done_riley:
                n_riley = riley_slope_n(p, a, b)
                at_riley = calib_power(n_riley, **common)
                _append(riley_csv, {"distribution": dname, "miscalibration": mname,
                                    "ece_continuous": at_riley.inputs.ece_sq_continuous ** 0.5,
                                    "riley_slope_n": n_riley, "power_at_riley_n": at_riley.power,
                                    "width_at_riley_n": at_riley.expected_width})
            for n in SMALL_N:
                if (dname, mname, str(n)) in done_small:
                    continue
                an = analytic(n)
                sm = sim(n, 99)
                _append(small_csv, {"distribution": dname, "miscalibration": mname, "n": n, "n_bins": an["n_bins"],
                                    "sparse_share": an["sparse_share"], "power_analytic": an["power"],
                                    "power_sim": sm["power"], "power_se": sm["power_se"],
                                    "width_analytic": an["expected_width"], "width_sim": sm["expected_width"],
                                    "width_se": sm["width_se"], "n_sim": N_SIM})
            for ti, (tname, tval) in enumerate(TARGETS):
                if (dname, mname, tname, str(tval)) in done_check:
                    continue
                kw = {tname: tval}
                res = calib_sample_size(probs=p, n_classes=K, intercept=a, slope=b, alpha=ALPHA,
                                        null="asymptotic", n_min=50, n_max=10**6, **kw)
                n_a = res.n
                col = "power" if tname == "power" else "expected_width"
                points = {}
                for f in (0.8, 1.0, 1.25):
                    n = max(50, int(round(n_a * f)))
                    points[n] = sim(n, ti)
                for f in (0.6, 1.6, 0.4, 2.5):
                    if not math.isnan(_crossing([(n, r[col]) for n, r in points.items()], tval, col)):
                        break
                    n = max(50, int(round(n_a * f)))
                    points[n] = sim(n, ti)
                n_sim_cross = _crossing([(n, r[col]) for n, r in points.items()], tval, col)
                at = points[max(50, int(round(n_a)))]
                se_col = "power_se" if col == "power" else "width_se"
                _append(check_csv, {"distribution": dname, "miscalibration": mname, "target": tname,
                                    "target_value": tval, "n_analytic": n_a, "n_bins": res.n_bins,
                                    "ece_binned": math.sqrt(res.ece_sq_binned),
                                    "analytic_value_at_n": res.achieved_power if col == "power" else res.expected_width,
                                    "sim_value_at_n": at[col], "sim_se_at_n": at[se_col],
                                    "n_simulated": n_sim_cross,
                                    "ratio": n_a / n_sim_cross if n_sim_cross == n_sim_cross else float("nan"),
                                    "n_sim": N_SIM,
                                    "points": ";".join(f"{n}:{r[col]:.4f}" for n, r in sorted(points.items()))})
                print(f"{dname:18s} {mname:15s} {tname}={tval}: n_a={n_a} n_sim={n_sim_cross:.0f} "
                      f"value@n_a sim={at[col]:.4f}+-{at[se_col]:.4f}  cpu={time.process_time() - t_start:.0f}s",
                      flush=True)
    size_csv = os.path.join(out_dir, "planning_size.csv")
    done_size = _done(size_csv, ["intercept", "n"])
    if "Beta(2,5)" in dists:
        p = dists["Beta(2,5)"][0]
        for si, (a, n) in enumerate(SIZE_CASES):
            if (str(a), str(n)) in done_size:
                continue
            kw = dict(probs=p, intercept=a, alpha=ALPHA, null="asymptotic")
            an = calib_power(n, **kw)
            sm = calib_power(n, method="simulation", n_sim=N_SIM, rng=np.random.default_rng([SEED, 8, si]), **kw)
            _append(size_csv, {"intercept": a, "n": n, "n_bins": an.n_bins, "t_skewness": an.t_skewness,
                               "power_normal": float(normal_power(an.t_mean, an.t_sd**2, an.threshold)),
                               "power_gamma": an.power, "power_sim": sm.power,
                               "power_se": sm.monte_carlo.power_se, "n_sim": N_SIM})
    cond_csv = os.path.join(out_dir, "planning_conditional.csv")
    done_cond = _done(cond_csv, ["distribution", "miscalibration", "n"])
    mis = {m: (a, b) for m, a, b in MISCAL}
    for ci, (dname, mname, n) in enumerate(COND_CASES):
        if (dname, mname, str(n)) in done_cond or dname not in dists or mname not in mis:
            continue
        (p, K), (a, b) = dists[dname], mis[mname]
        kw = dict(probs=p, n_classes=K, intercept=a, slope=b, alpha=ALPHA, null="conditional")
        an = calib_power(n, **kw)
        sm = calib_power(n, method="simulation", n_sim=N_COND, rng=np.random.default_rng([SEED, 7, ci]), **kw)
        _append(cond_csv, {"distribution": dname, "miscalibration": mname, "n": n,
                           "power_analytic": an.power, "power_sim": sm.power, "power_se": sm.monte_carlo.power_se,
                           "n_sim": N_COND})
    return 0


#: The default-null check: designs (3 distributions x 3 miscalibrations) and targets, analysed
#: as calib_ci analyses them by default (null="auto": the conditional null for these 1-d targets).
DEFAULT_MISCAL = ["intercept +0.3", "slope 0.7", "slope 1.2"]
DEFAULT_TARGETS = [("power", 0.8), ("ci_width", 0.05)]
N_DEFAULT = int(os.environ.get("PLANNING_N_DEFAULT", 2000))
#: Studies per point for the width-0.03 target (larger n, slower studies; the width's s.e. stays small).
N_DEFAULT_W03 = int(os.environ.get("PLANNING_N_DEFAULT_W03", 1000))


def default_null_check(out_dir=HERE, dists=None, miscal=None, targets=None, n_sim=None):
    """Analytic n and power under the default null against per-study ``calib_ci`` simulations.

    For each design and target: the analytic n of :func:`calibtest.calib_sample_size` (``null``
    not given, so the default), then ``n_sim`` simulated studies, each analysed by the package's
    estimator with the default null, at n_a x {0.8, 1, 1.25} (more factors until the target is
    bracketed); the simulated n is the log-linear crossing.  Rows go to
    ``planning_default_null.csv`` as they are finished.
    """
    warnings.simplefilter("ignore", UserWarning)
    path = os.path.join(out_dir, "planning_default_null.csv")
    dists = distributions() if dists is None else dists
    miscal = DEFAULT_MISCAL if miscal is None else miscal
    targets = DEFAULT_TARGETS if targets is None else targets
    n_sim = N_DEFAULT if n_sim is None else n_sim
    mis = {m: (a, b) for m, a, b in MISCAL}
    done = _done(path, ["distribution", "miscalibration", "target", "target_value"])
    t_start = time.process_time()
    for ti, (tname, tval) in enumerate(targets):
        for di, (dname, (p, K)) in enumerate(dists.items()):
            for mname in miscal:
                if (dname, mname, tname, str(tval)) in done:
                    continue
                a, b = mis[mname]
                mi = [m for m, _, _ in MISCAL].index(mname)
                common = dict(probs=p, n_classes=K, intercept=a, slope=b, alpha=ALPHA)
                res = calib_sample_size(n_min=50, n_max=10**6, **common, **{tname: tval})
                n_a = res.n
                col = "power" if tname == "power" else "expected_width"
                se_col = "power_se" if col == "power" else "width_se"
                points = {}

                def sim(n):
                    gen = np.random.default_rng([SEED, 11, di, mi, ti, int(n)])
                    r = calib_power(int(n), method="simulation", n_sim=n_sim, rng=gen, **common)
                    return {"power": r.power, "expected_width": r.expected_width,
                            "power_se": r.monte_carlo.power_se, "width_se": r.monte_carlo.width_se}

                for f in (0.8, 1.0, 1.25, 0.6, 1.6, 0.4, 2.5):
                    if len(points) >= 3 and not math.isnan(
                            _crossing([(n, r[col]) for n, r in points.items()], tval, col)):
                        break
                    n = max(50, int(round(n_a * f)))
                    if n not in points:
                        points[n] = sim(n)
                n_cross = _crossing([(n, r[col]) for n, r in points.items()], tval, col)
                at = points[max(50, int(round(n_a)))]
                an = calib_power(n_a, **common)
                _append(path, {"distribution": dname, "miscalibration": mname, "target": tname,
                               "target_value": tval, "null": res.inputs.null, "n_analytic": n_a,
                               "n_bins": res.n_bins, "t_skewness": an.t_skewness, "sparse_share": an.sparse_share,
                               "analytic_value_at_n": res.achieved_power if col == "power" else res.expected_width,
                               "sim_value_at_n": at[col], "sim_se_at_n": at[se_col], "n_simulated": n_cross,
                               "ratio": n_a / n_cross if n_cross == n_cross else float("nan"), "n_sim": n_sim,
                               "points": ";".join(f"{n}:{r[col]:.4f}" for n, r in sorted(points.items()))})
                print(f"[default null] {dname:18s} {mname:15s} {tname}={tval}: n_a={n_a} n_sim={n_cross:.0f} "
                      f"value@n_a analytic={res.achieved_power if col == 'power' else res.expected_width:.4f} "
                      f"sim={at[col]:.4f}+-{at[se_col]:.4f}  cpu={time.process_time() - t_start:.0f}s", flush=True)
    return path


N_DEFAULT_SMALL = int(os.environ.get("PLANNING_N_DEFAULT_SMALL", 1000))


def default_null_small_n(out_dir=HERE, dists=None, miscal=None, ns=None, n_sim=None):
    """Analytic against simulated power and width under the default null at small n (100, 200, 400).

    ``n_sim`` studies per point, each analysed by ``calib_ci``'s estimator with the default null;
    rows go to ``planning_default_null_small_n.csv``.
    """
    warnings.simplefilter("ignore", UserWarning)
    path = os.path.join(out_dir, "planning_default_null_small_n.csv")
    dists = distributions() if dists is None else dists
    miscal = DEFAULT_MISCAL if miscal is None else miscal
    ns = SMALL_N if ns is None else ns
    n_sim = N_DEFAULT_SMALL if n_sim is None else n_sim
    mis = {m: (a, b) for m, a, b in MISCAL}
    done = _done(path, ["distribution", "miscalibration", "n"])
    for di, (dname, (p, K)) in enumerate(dists.items()):
        for mname in miscal:
            a, b = mis[mname]
            mi = [m for m, _, _ in MISCAL].index(mname)
            common = dict(probs=p, n_classes=K, intercept=a, slope=b, alpha=ALPHA)
            for n in ns:
                if (dname, mname, str(n)) in done:
                    continue
                an = calib_power(n, **common)
                sm = calib_power(n, method="simulation", n_sim=n_sim,
                                 rng=np.random.default_rng([SEED, 12, di, mi, int(n)]), **common)
                _append(path, {"distribution": dname, "miscalibration": mname, "n": n, "null": an.inputs.null,
                               "n_bins": an.n_bins, "sparse_share": an.sparse_share, "reliable": an.reliable,
                               "power_analytic": an.power, "power_sim": sm.power,
                               "power_se": sm.monte_carlo.power_se, "width_analytic": an.expected_width,
                               "width_sim": sm.expected_width, "width_se": sm.monte_carlo.width_se,
                               "n_sim": n_sim})
    return path


#: Size of the default-null test for a calibrated model (Beta(2,5)): analytic against simulated.
DEFAULT_SIZE_N = [200, 1000, 5000]


def default_null_size(out_dir=HERE, p=None, ns=None, n_sim=None):
    """Rejection rate of the default-null test for a calibrated model: analytic against simulated.

    Rows go to ``planning_default_null_size.csv`` (``n_sim`` studies per n).
    """
    warnings.simplefilter("ignore", UserWarning)
    path = os.path.join(out_dir, "planning_default_null_size.csv")
    p = distributions()["Beta(2,5)"][0] if p is None else p
    ns = DEFAULT_SIZE_N if ns is None else ns
    n_sim = N_DEFAULT if n_sim is None else n_sim
    done = _done(path, ["n"])
    for n in ns:
        if (str(n),) in done:
            continue
        an = calib_power(n, probs=p)
        sm = calib_power(n, probs=p, method="simulation", n_sim=n_sim, rng=np.random.default_rng([SEED, 13, int(n)]))
        _append(path, {"n": n, "null": an.inputs.null, "n_bins": an.n_bins, "t_skewness": an.t_skewness,
                       "size_analytic": an.power, "size_sim": sm.power, "size_se": sm.monte_carlo.power_se,
                       "n_sim": n_sim})
    return path


def default_null_tables(out_dir=HERE) -> str:
    """Markdown tables of the default-null stages (those whose CSV files exist)."""
    out = []
    path = os.path.join(out_dir, "planning_default_null.csv")
    if os.path.exists(path):
        dn = pd.read_csv(path)
        for (tname, tval), part in dn.groupby(["target", "target_value"], sort=False):
            label = "power 0.8" if tname == "power" else f"expected ECE-scale width {tval:g}"
            out.append(f"\n**Default null ({part['null'].iloc[0]}), target {label}** "
                       f"({int(part['n_sim'].iloc[0])} simulated studies per point, each analysed by calib_ci)\n")
            out.append("| distribution | miscalibration | B | skewness of T | single-row share | analytic n "
                       "| simulated n | analytic / simulated | analytic value at n | simulated value at analytic n (s.e.) |")
            out.append("|---|---|---|---|---|---|---|---|---|---|")
            for _, r in part.iterrows():
                out.append(f"| {r['distribution']} | {r['miscalibration']} | {r['n_bins']} | {r['t_skewness']:.3f} | "
                           f"{r['sparse_share']:.3f} | {r['n_analytic']} | {r['n_simulated']:.0f} | {r['ratio']:.3f} | "
                           f"{r['analytic_value_at_n']:.4f} | {r['sim_value_at_n']:.4f} ({r['sim_se_at_n']:.4f}) |")
    path = os.path.join(out_dir, "planning_default_null_small_n.csv")
    if os.path.exists(path):
        sm = pd.read_csv(path)
        d = sm["power_analytic"] - sm["power_sim"]
        out.append(f"\n**Default null ({sm['null'].iloc[0]}) at small n** ({int(sm['n_sim'].iloc[0])} simulated "
                   f"studies per point; analytic minus simulated power: mean {d.mean():+.4f}, "
                   f"s.e. {math.sqrt(np.sum(sm['power_se'] ** 2)) / len(sm):.4f}, over {len(sm)} cells)\n")
        out.append("| distribution | miscalibration | n | B | single-row share | flagged | power analytic "
                   "| power simulated (s.e.) | width analytic | width simulated (s.e.) |")
        out.append("|---|---|---|---|---|---|---|---|---|---|")
        for _, r in sm.iterrows():
            out.append(f"| {r['distribution']} | {r['miscalibration']} | {r['n']} | {r['n_bins']} | "
                       f"{r['sparse_share']:.3f} | {'no' if r['reliable'] else 'yes'} | {r['power_analytic']:.3f} | "
                       f"{r['power_sim']:.3f} ({r['power_se']:.3f}) | {r['width_analytic']:.4f} | "
                       f"{r['width_sim']:.4f} ({r['width_se']:.4f}) |")
    path = os.path.join(out_dir, "planning_default_null_size.csv")
    if os.path.exists(path):
        sz = pd.read_csv(path)
        out.append(f"\n**Default null ({sz['null'].iloc[0]}): size for a calibrated model on Beta(2,5)** "
                   f"({int(sz['n_sim'].iloc[0])} simulated studies)\n")
        out.append("| n | B | skewness of T | size analytic | size simulated (s.e.) |")
        out.append("|---|---|---|---|---|")
        for _, r in sz.iterrows():
            out.append(f"| {int(r['n'])} | {int(r['n_bins'])} | {r['t_skewness']:.3f} | {r['size_analytic']:.3f} | "
                       f"{r['size_sim']:.3f} ({r['size_se']:.3f}) |")
    return "\n".join(out)


def tables(out_dir=HERE) -> str:
    """The markdown tables of ``planning.md``, computed from the CSV files."""
    check = pd.read_csv(os.path.join(out_dir, "planning_check.csv"))
    small = pd.read_csv(os.path.join(out_dir, "planning_small_n.csv"))
    riley = pd.read_csv(os.path.join(out_dir, "planning_riley.csv"))
    out = [default_null_tables(out_dir)]
    for tname, tval in TARGETS:
        part = check[(check["target"] == tname) & (check["target_value"] == tval)]
        label = "power 0.8" if tname == "power" else f"expected ECE-scale width {tval}"
        out.append(f"\n**Target: {label}** ({int(part['n_sim'].iloc[0])} simulated studies per point)\n")
        out.append("| distribution | miscalibration | ECE_B at n | B | analytic n | simulated n | analytic / simulated "
                   "| simulated value at analytic n (s.e.) |")
        out.append("|---|---|---|---|---|---|---|---|")
        for _, r in part.iterrows():
            out.append(f"| {r['distribution']} | {r['miscalibration']} | {r['ece_binned']:.4f} | {r['n_bins']} | "
                       f"{r['n_analytic']} | {r['n_simulated']:.0f} | {r['ratio']:.3f} | "
                       f"{r['sim_value_at_n']:.4f} ({r['sim_se_at_n']:.4f}) |")
    out.append("\n**Small n: analytic against simulated power and width**\n")
    out.append("| distribution | miscalibration | n | B | single-row share | power analytic | power simulated (s.e.) "
               "| width analytic | width simulated |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for _, r in small.iterrows():
        out.append(f"| {r['distribution']} | {r['miscalibration']} | {r['n']} | {r['n_bins']} | "
                   f"{r['sparse_share']:.3f} | {r['power_analytic']:.3f} | {r['power_sim']:.3f} ({r['power_se']:.3f}) | "
                   f"{r['width_analytic']:.4f} | {r['width_sim']:.4f} |")
    size_csv = os.path.join(out_dir, "planning_size.csv")
    if os.path.exists(size_csv):
        size = pd.read_csv(size_csv)
        out.append(f"\n**Normal law against shifted gamma for T (Beta(2,5); {int(size['n_sim'].iloc[0])} "
                   "simulated studies)**\n")
        out.append("| intercept | n | B | skewness of T | power, normal law | power, shifted gamma "
                   "| power simulated (s.e.) |")
        out.append("|---|---|---|---|---|---|---|")
        for _, r in size.iterrows():
            out.append(f"| {r['intercept']:g} | {int(r['n'])} | {int(r['n_bins'])} | {r['t_skewness']:.3f} | "
                       f"{r['power_normal']:.3f} | {r['power_gamma']:.3f} | {r['power_sim']:.3f} "
                       f"({r['power_se']:.3f}) |")
    cond_csv = os.path.join(out_dir, "planning_conditional.csv")
    if os.path.exists(cond_csv):
        cond = pd.read_csv(cond_csv)
        out.append(f"\n**Conditional null: analytic against calib_ci(null='conditional') on "
                   f"{int(cond['n_sim'].iloc[0])} simulated studies**\n")
        out.append("| distribution | miscalibration | n | power analytic | power simulated (s.e.) |")
        out.append("|---|---|---|---|---|")
        for _, r in cond.iterrows():
            out.append(f"| {r['distribution']} | {r['miscalibration']} | {r['n']} | {r['power_analytic']:.3f} | "
                       f"{r['power_sim']:.3f} ({r['power_se']:.3f}) |")
    out.append("\n**Riley et al. (2021) slope criterion against the power-0.8 sample size**\n")
    out.append("| distribution | miscalibration | continuous ECE | Riley slope n (width 0.2) | calib_sample_size n "
               "(power 0.8) | power at Riley's n | expected ECE width at Riley's n |")
    out.append("|---|---|---|---|---|---|---|")
    pw_n = check[check["target"] == "power"].set_index(["distribution", "miscalibration"])["n_analytic"]
    for _, r in riley.iterrows():
        out.append(f"| {r['distribution']} | {r['miscalibration']} | {r['ece_continuous']:.4f} | "
                   f"{r['riley_slope_n']} | {pw_n.get((r['distribution'], r['miscalibration']), float('nan'))} | "
                   f"{r['power_at_riley_n']:.3f} | {r['width_at_riley_n']:.4f} |")
    return "\n".join(out)


if __name__ == "__main__":
    if "--default-null" in sys.argv:  # the checks under calib_ci's default null
        default_null_check()
        default_null_check(targets=[("ci_width", 0.03)], n_sim=N_DEFAULT_W03)
        default_null_small_n()
        default_null_size()
        sys.exit(0)
    if "--tables" in sys.argv:
        print(tables())
        sys.exit(0)
    sys.exit(main())
