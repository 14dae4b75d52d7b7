"""Same rows, same verdict: the streamed tests against the in-memory ones (issue 27, point 6).

Run: ``PYTHONPATH=. nice -n 10 python vignettes/scale_same_verdict.py [--reps 40] [--reps-test 20]``
(writes ``vignettes/scale_same_verdict.csv``, one row per data set and source; the tables of
``scale_same_verdict.md`` are printed from it).

Each data set is written once as a DataFrame and once as a Parquet file (row groups of 50,000
rows, read in chunks of 50,000), and for the first ``--reps-dask`` data sets of a cell also as a
Dask frame of 4 partitions. On each source:

* ``calib_ci`` with the default ``null="auto"``: the null used (``res.null``), its p-value
  (``res.null_pvalue``) and the verdict p < alpha;
* ``calib_test`` (the multi-scale test, default scales and draws, ``rng`` = a fixed int per data
  set) for the first ``--reps-test`` data sets of a cell: ``res.pvalue`` and the verdict.

Monte Carlo s.e. of a rejection rate r over N data sets: sqrt(r (1 - r) / N).
"""
from __future__ import annotations

import argparse
import csv
import os
import tempfile
import time

import numpy as np
import pandas as pd

import calibtest as ct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_CSV = os.path.join(HERE, "scale_same_verdict.csv")
ALPHA = 0.05
SEED = 20261125
CHUNK = 50_000

# name -> (n, K or None for binary, draw(g, n) -> (y, p), truth label)
def top1(power):
    def draw(g, n):
        c = g.beta(20.0, 1.0, n)
        return (g.random(n) < c ** power).astype(np.int64), c
    return draw


def binary(a, b):
    def draw(g, n):
        p = np.maximum(g.beta(a, b, n), 1e-12)
        return (g.random(n) < p).astype(np.int64), p
    return draw


DESIGNS = {
    "top-1 c~Beta(20,1), K=1000, calibrated": (200_000, 1000, top1(1.0)),
    "top-1 c~Beta(20,1), K=1000, P(correct)=c^1.05": (200_000, 1000, top1(1.05)),
    "top-1 c~Beta(20,1), K=1000, P(correct)=c^1.10": (200_000, 1000, top1(1.10)),
    "binary balanced p~Beta(2,2), calibrated": (100_000, None, binary(2.0, 2.0)),
    "binary rare p~Beta(0.5,10), calibrated": (100_000, None, binary(0.5, 10.0)),
}


def compare_one(y, p, n_classes, workdir, *, seed, run_test=True, dask_partitions=0, alpha=ALPHA,
                chunksize=CHUNK):
    """Run ``calib_ci`` and ``calib_test`` on the same rows held in memory, in Parquet (and Dask).

    Parameters
    ----------
    y, p : numpy.ndarray
        Labels (0/1: correct, or the binary label) and the confidences / probabilities.
    n_classes : int or None
        K of the top-1 design (``None``: binary data).
    workdir : str
        Directory for the Parquet file.
    seed : int
        ``rng`` of ``calib_test`` (the same on every source).
    run_test : bool
        Also run ``calib_test``.
    dask_partitions : int
        If positive, also run both on a Dask frame of that many partitions.
    alpha : float
        Level of the verdicts.
    chunksize : int
        Rows per Parquet row group and per streamed chunk.

    Returns
    -------
    list of dict
        One row per source: ``source``, ``ci_null``, ``ci_p``, ``ci_reject`` and, with
        ``run_test``, ``test_p`` and ``test_reject`` (NaN otherwise).
    """
    if n_classes is None:
        formula, kw = "y ~ p", {}
        df = pd.DataFrame({"y": y, "p": p})
    else:
        formula, kw = "correct ~ confidence", {"n_classes": n_classes}
        df = pd.DataFrame({"correct": y, "confidence": p})
    path = os.path.join(workdir, f"rows_{seed}.parquet")
    df.to_parquet(path, row_group_size=chunksize, index=False)
    # calib_test reads a file in its own default chunks (no chunksize= argument); its p-value does
    # not depend on the chunking (the label draws are keyed by seed and row position).
    sources = [("memory", df, {}), ("parquet", path, {"chunksize": chunksize, "progress": False})]
    if dask_partitions:
        import dask.dataframe as dd
        sources.append(("dask", dd.from_pandas(df, npartitions=dask_partitions), {}))
    rows = []
    for name, data, extra in sources:
        t0 = time.perf_counter()
        r = ct.calib_ci(formula, data=data, alpha=alpha, **kw, **extra)
        row = {"source": name, "ci_null": r.null, "ci_p": float(r.null_pvalue),
               "ci_reject": bool(r.null_pvalue < alpha), "ci_seconds": time.perf_counter() - t0,
               "test_p": np.nan, "test_reject": np.nan, "test_seconds": np.nan}
        if run_test:
            t0 = time.perf_counter()
            t = ct.calib_test(formula, data=data, alpha=alpha, rng=seed, **kw)
            row.update(test_p=float(t.pvalue), test_reject=bool(t.pvalue < alpha),
                       test_seconds=time.perf_counter() - t0)
        rows.append(row)
    os.remove(path)
    return rows


def run(reps, reps_test, reps_dask):
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for cell, (name, (n, K, draw)) in enumerate(DESIGNS.items()):
            t0 = time.perf_counter()
            for rep in range(reps):
                g = np.random.default_rng([SEED, cell, rep])
                y, p = draw(g, n)
                seed = SEED + 1000 * cell + rep
                for row in compare_one(y, p, K, tmp, seed=seed, run_test=rep < reps_test,
                                       dask_partitions=4 if rep < reps_dask else 0):
                    out.append({"design": name, "n": n, "rep": rep, "seed": seed, **row})
            print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)
    cols = list(out[0])
    with open(OUT_CSV, "w", newline="") as fh:
        w = csv.DictWriter(fh, cols)
        w.writeheader()
        w.writerows(out)
    return pd.DataFrame(out)


def rate(x):
    x = np.asarray(x, dtype=float)
    r = x.mean()
    return f"{r:.3f} ({np.sqrt(r * (1 - r) / len(x)):.3f}) [{int(x.sum())}/{len(x)}]"


def tables(res):
    """Markdown tables of the results (rejection rates with s.e., max |p_memory - p_stream|)."""
    lines = ["| design | n | N | null used (memory / parquet) | reject, memory | reject, Parquet | "
             "verdicts differ | max abs(p_mem - p_parquet) | max abs(p_mem - p_dask) (N) |",
             "|---|---|---|---|---|---|---|---|---|"]
    tl = ["| design | n | N | reject, memory | reject, Parquet | verdicts differ | "
          "max abs(p_mem - p_parquet) | max abs(p_mem - p_dask) (N) | median p, memory |",
          "|---|---|---|---|---|---|---|---|---|"]
    for name, d in res.groupby("design", sort=False):
        m = d[d.source == "memory"].set_index("rep")
        q = d[d.source == "parquet"].set_index("rep")
        k = d[d.source == "dask"].set_index("rep")
        nulls = (f"{'/'.join(sorted(set(m.ci_null)))} / {'/'.join(sorted(set(q.ci_null)))}")
        dk = (f"{np.max(np.abs(m.ci_p[k.index] - k.ci_p)):.1e} ({len(k)})" if len(k) else "-")
        lines.append(f"| {name} | {int(m.n.iloc[0])} | {len(m)} | {nulls} | {rate(m.ci_reject)} | "
                     f"{rate(q.ci_reject)} | {int((m.ci_reject != q.ci_reject).sum())} | "
                     f"{np.max(np.abs(m.ci_p - q.ci_p)):.1e} | {dk} |")
        mt, qt = m.dropna(subset=["test_p"]), q.dropna(subset=["test_p"])
        kt = k.dropna(subset=["test_p"])
        dk = (f"{np.max(np.abs(mt.test_p[kt.index] - kt.test_p)):.1e} ({len(kt)})" if len(kt) else "-")
        tl.append(f"| {name} | {int(m.n.iloc[0])} | {len(mt)} | {rate(mt.test_reject.astype(bool))} | "
                  f"{rate(qt.test_reject.astype(bool))} | "
                  f"{int((mt.test_reject != qt.test_reject).sum())} | "
                  f"{np.max(np.abs(mt.test_p - qt.test_p)):.1e} | {dk} | {np.median(mt.test_p):.3f} |")
    ci_med = res[res.source == "memory"].groupby("design", sort=False).ci_p.median()
    return "\n".join(lines), "\n".join(tl), ci_med


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--reps-test", type=int, default=20)
    ap.add_argument("--reps-dask", type=int, default=4)
    ap.add_argument("--from-csv", action="store_true", help="only print the tables of the CSV")
    a = ap.parse_args()
    t0 = time.perf_counter()
    res = pd.read_csv(OUT_CSV) if a.from_csv else run(a.reps, a.reps_test, a.reps_dask)
    ci, test, med = tables(res)
    print(ci, "\n", test, "\n", med.to_string(), sep="\n")
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
