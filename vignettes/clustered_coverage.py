"""Clustered rows: coverage of the ECE^2 interval and size of the test, i.i.d. against cluster-robust.

Held-out clustered designs (not used elsewhere in the vignettes): G = 5, 10, 20, 50 sites, each of
n_g rows with log n_g ~ U(log 30, log 2000); logit r ~ N(-1, 1) the model's prediction p = r; a random site
effect u_g on the outcome's logit, drawn from the *bridge distribution* (Wang and Louis 2003) with
phi = 1 / sqrt(1 + 3 tau^2 / pi^2), tau = 0.8 or 0.3 (sd of u_g), so that

    P(Y = 1 | p, site g) = expit(eta(p) / phi + u_g)   gives exactly   P(Y = 1 | p) = expit(eta(p))

over sites: the model is calibrated on average over the population of sites with eta = logit p
("calibrated"), and has the known marginal miscalibration eta = 0.3 + 1.3 logit p ("miscalibrated"),
whose binned ECE^2 at the B each data set used is computed by quadrature.  Per data set:

* the i.i.d. interval and test (``calib_ci`` defaults: adjusted interval, conditional null);
* the clustered interval (T_cl, se = sqrt(V_1 + V_0), t_{G-1} quantiles) with the cluster sign-flip null
  (the default under ``cluster=``) and with the asymptotic null z = T_cl / sqrt(V_0);
* a cluster bootstrap percentile interval (200 resamples of whole sites, T_cl recomputed with copies of a
  site counted as different sites), the alternative the issue names.

Run: ``nice -n 10 python vignettes/clustered_coverage.py [--reps 500]`` (about 8 minutes on one core);
``python vignettes/clustered_coverage.py --tables`` prints the tables of ``clustered_coverage.md`` and writes
them to ``vignettes/clustered_coverage.csv`` (the per-data-set rows go to ``vignettes/output/``, not kept in git).
Data set r of cell c uses ``numpy.random.default_rng([20261125, c, r])``.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import integrate, special, stats

from calibtest.core.clustered import cluster_cells, clustered_inference
from calibtest.inputs.settings import Settings
from calibtest.core.partition import partition_rows
from calibtest.core.targets import prepare_target
from calibtest.ece.build_result import estimate_rows

ALPHA = 0.05
TAUS = (0.8, 0.3)
SITES = (5, 10, 20, 50)
MODELS = {"calibrated": (0.0, 1.0), "miscalibrated": (0.3, 1.3)}
OUT = Path(__file__).with_name("output") / "clustered_coverage.csv"
N_BOOT = 200


def bridge(rng, size, phi):
    """Draws of the logit bridge distribution with parameter phi (inverse CDF, Wang and Louis 2003)."""
    v = rng.uniform(size=size)
    return np.log(np.sin(phi * np.pi * v) / np.sin(phi * np.pi * (1.0 - v))) / phi


def binned_theta(n_bins: int, a: float, b: float) -> float:
    """sum_b P(b) (E[q(p) - p | b])^2 for logit p ~ N(-1, 1), q = expit(a + b logit p)."""
    total = 0.0
    for i in range(n_bins):
        lo, hi = i / n_bins, (i + 1) / n_bins
        lo_l = -np.inf if lo <= 0 else special.logit(lo)
        hi_l = np.inf if hi >= 1 else special.logit(hi)
        mass = stats.norm.cdf(hi_l, -1, 1) - stats.norm.cdf(lo_l, -1, 1)
        if mass < 1e-14:
            continue
        err = integrate.quad(lambda x: (special.expit(a + b * x) - special.expit(x)) * stats.norm.pdf(x, -1, 1),
                             lo_l, hi_l, epsabs=1e-13)[0]
        total += err * err / mass
    return total


def simulate(rng, G, a, b, tau):
    sizes = np.exp(rng.uniform(np.log(30), np.log(2000), size=G)).astype(int)
    codes = np.repeat(np.arange(G), sizes)
    x = rng.normal(-1.0, 1.0, size=codes.size)
    phi = 1.0 / math.sqrt(1.0 + 3.0 * tau ** 2 / math.pi ** 2)
    u = bridge(rng, G, phi)
    y = (rng.uniform(size=codes.size) < special.expit((a + b * x) / phi + u[codes])).astype(float)
    return y, special.expit(x), codes


def bootstrap_interval(cells, n, rng, alpha):
    """Cluster bootstrap percentile interval of T_cl: sites resampled, copies counted as distinct sites."""
    G, m = cells.n_clusters, cells.m
    X = cells.design()
    W = rng.multinomial(G, np.full(G, 1.0 / G), size=N_BOOT).T.astype(float)   # (G, R) multiplicities
    cnt = np.zeros((m, G))
    np.add.at(cnt, (cells.bin, cells.cluster), cells.count)
    sq = np.zeros((m, G))
    np.add.at(sq, (cells.bin, cells.cluster), np.einsum("kj,kj->k", cells.sum_u, cells.sum_u))
    c_b = cnt @ W
    D_b = c_b ** 2 - (cnt ** 2) @ W
    S = X @ W
    num = S ** 2 - sq @ W
    nb = c_b.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(D_b > 0.5, c_b * num / D_b, 0.0).sum(axis=0) / nb
    return np.quantile(t, [alpha / 2, 1 - alpha / 2])


def run(reps: int):
    done = set()
    if OUT.exists():
        old = pd.read_csv(OUT)
        done = set(zip(old["tau"], old["G"], old["model"], old["rep"]))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    header = not OUT.exists()
    with OUT.open("a") as fh:
        if header:
            fh.write("tau,G,model,rep,n,B,theta,T_iid,iid_lo,iid_hi,iid_open,iid_p,T_cl,V1,V0,cl_lo,cl_hi,cl_open,"
                     "cl_p,as_lo,as_hi,as_open,as_p,exact,boot_lo,boot_hi\n")
        cells_list = [(tau, G, mdl) for tau in TAUS for mdl in MODELS for G in SITES]
        for c, (tau, G, model) in enumerate(cells_list):
            a, b = MODELS[model]
            cache = {}
            t0 = time.time()
            for r in range(reps):
                if (tau, G, model, r) in done:
                    continue
                rng = np.random.default_rng([20261125, c, r])
                y, p, codes = simulate(rng, G, a, b, tau)
                target = prepare_target(y, p)
                part = partition_rows(target, "auto")
                if part.n_bins not in cache:
                    cache[part.n_bins] = binned_theta(part.n_bins, a, b)
                iid = estimate_rows(target, part, Settings(alpha=ALPHA, null="auto", rng=rng))
                cells = cluster_cells(part.inverse, target.u, codes, part.m, G)
                cl = clustered_inference(cells, target.n, alpha=ALPHA, null="sign-flip", n_draws=999, rng=rng)
                asy = clustered_inference(cells, target.n, alpha=ALPHA, null="asymptotic")
                blo, bhi = bootstrap_interval(cells, target.n, rng, ALPHA)
                st = cl.statistics
                fh.write(f"{tau},{G},{model},{r},{target.n},{part.n_bins},{float(cache[part.n_bins])!r},"
                         f"{iid.estimate!r},{iid.ci_lower!r},{iid.ci_upper!r},{int(iid.ci_lower_open)},"
                         f"{iid.null_pvalue!r},{st.estimate!r},{st.linear_variance!r},{st.null_variance!r},"
                         f"{cl.interval.lower!r},{cl.interval.upper!r},{int(cl.interval.lower_open)},{cl.pvalue!r},"
                         f"{asy.interval.lower!r},{asy.interval.upper!r},{int(asy.interval.lower_open)},"
                         f"{asy.pvalue!r},{int(cl.exact)},{float(blo)!r},{float(bhi)!r}\n")
                fh.flush()
            print(f"tau={tau} G={G} {model}: {time.time() - t0:.1f}s", file=sys.stderr, flush=True)


def covers(lo, hi, theta, lower_open=None):
    """theta in the interval; an interval open at 0 does not cover theta = 0."""
    inside = (lo <= theta + 1e-15) & (theta <= hi + 1e-15)
    if lower_open is not None:
        inside &= ~((lower_open == 1) & (theta <= 0.0))
    return inside


def tables():
    df = pd.read_csv(OUT)
    rows = []
    for (tau, model, G), g in df.groupby(["tau", "model", "G"], sort=False):
        n = len(g)
        row = {"tau": tau, "model": model, "G": G, "reps": n, "median n": int(g["n"].median()),
               "cover i.i.d.": covers(g.iid_lo, g.iid_hi, g.theta, g.iid_open).mean(),
               "cover clustered": covers(g.cl_lo, g.cl_hi, g.theta, g.cl_open).mean(),
               "cover clust. asy. null": covers(g.as_lo, g.as_hi, g.theta, g.as_open).mean(),
               "cover cluster bootstrap": covers(g.boot_lo, g.boot_hi, g.theta).mean(),
               "MC s.e.": math.sqrt(0.95 * 0.05 / n)}
        if model == "calibrated":
            row.update({"reject i.i.d.": (g.iid_p <= ALPHA).mean(), "reject sign-flip": (g.cl_p <= ALPHA).mean(),
                        "reject asymptotic": (g.as_p <= ALPHA).mean()})
        else:
            row.update({"reject i.i.d.": (g.iid_p <= ALPHA).mean(), "reject sign-flip": (g.cl_p <= ALPHA).mean(),
                        "reject asymptotic": (g.as_p <= ALPHA).mean(),
                        "bias T_iid / theta": g.T_iid.mean() / g.theta.mean() - 1,
                        "bias T_cl / theta": g.T_cl.mean() / g.theta.mean() - 1,
                        "sd T_cl / mean se": g.T_cl.std() / np.sqrt(g.V1 + g.V0).mean(),
                        "sd T_cl / mean sqrt(V1)": g.T_cl.std() / np.sqrt(g.V1).mean()})
        rows.append(row)
    out = pd.DataFrame(rows)
    out.to_csv(Path(__file__).with_name("clustered_coverage.csv"), index=False, float_format="%.4g")
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.precision", 3):
        print(out.to_string(index=False))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--tables", action="store_true")
    args = ap.parse_args()
    tables() if args.tables else run(args.reps)
