"""Benchmark of the evidence on a Parquet file against the same rows in memory (issue 27, point 2).

``calibtest.evidence("y ~ p", data=path)`` reads the file in passes (the streamed interval, the
streamed multi-scale test, the per-row sums with the Newton steps of the two logistic fits and the radix
selection of the Hosmer-Lemeshow deciles, the group sums, the per-B bin sums of the bin-sensitivity
table); ``calibtest.evidence("y ~ p", data=df)`` computes the same numbers from the rows in memory.
Binary predictions p ~ Beta(2, 5), outcomes from p^1.1 (mildly miscalibrated), n = 10^6 by default; the
Parquet file has row groups of 250,000 rows and is read in chunks of 250,000 rows.  The wall clock and
the process CPU time of each call are printed (best of ``--repeat`` runs), with the largest difference
between the two evidence tables and whether the conclusions are the same text.

Run: ``python benchmarks/bench_evidence_stream.py [--rows N] [--repeat R]`` (writes
``benchmarks/results/bench_evidence_stream.txt``).
"""
from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import calibtest as ct

OUT = Path(__file__).resolve().parent / "results" / "bench_evidence_stream.txt"


def _best(fn, repeat: int):
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):  # a loop over the few repetitions
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        best_wall, best_cpu = min(best_wall, time.perf_counter() - w), min(best_cpu, time.process_time() - c)
    return out, best_wall, best_cpu


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    g = np.random.default_rng(0)
    p = g.beta(2, 5, args.rows)
    df = pd.DataFrame({"y": (g.random(args.rows) < p ** 1.1).astype(np.int8), "p": p})
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rows.parquet")
        df.to_parquet(path, row_group_size=250_000)
        mem, w_mem, c_mem = _best(lambda: ct.evidence("y ~ p", data=df, rng=1), args.repeat)
        st, w_st, c_st = _best(lambda: ct.evidence("y ~ p", data=path, rng=1, chunksize=250_000), args.repeat)
    diff = max(abs(float(a) - float(b)) / max(abs(float(b)), 1e-300)
               for col in ("statistic", "pvalue", "lower", "upper")
               for a, b in zip(st.table[col], mem.table[col]) if b is not None)
    lines = [f"evidence() at n = {args.rows} (binary, p ~ Beta(2, 5), outcomes from p^1.1), best of {args.repeat}; "
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
             f"  in memory (DataFrame):                    {w_mem:6.2f} s wall, {c_mem:6.2f} s CPU",
             f"  Parquet file, chunks of 250,000 rows:     {w_st:6.2f} s wall, {c_st:6.2f} s CPU "
             f"({w_st / w_mem:.2f}x memory)",
             f"  largest relative difference in the evidence table: {diff:.2e}; same conclusion: "
             f"{st.conclusion == mem.conclusion}; verdict {mem.verdict}"]
    text = "\n".join(lines)
    print(text)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
