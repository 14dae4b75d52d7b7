"""Benchmark: the resampling baselines and the paper's n = 1000 simulation study.

Prints
1. the time of one data set's worth of each method at n = 1000 (the paper's
   supplement configuration: settings 1-2 top-1 with B = 50, setting 3
   top-1-to-2 with B = 20; 500 resamples), wall and CPU time, median of repeats;
2. with ``--full``: the wall time of the whole n = 1000 study (3 settings x 21
   betas x 1000 data sets x every method, 500 resamples, 2 worker processes).
   Target: under 20 minutes on a 2-core machine.  The tidy result is saved to
   ``vignettes/results/study_n1000.csv`` (with a JSON sidecar of its
   parameters) so that ``vignettes/simulation_study.py`` can reuse it.

Usage::

    python benchmarks/bench_study.py            # per-method timings (seconds)
    python benchmarks/bench_study.py --full     # + the whole study (~10-20 min)
    python benchmarks/bench_study.py --full --datasets 100   # a 10% version
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from calibtest import simulation as sim
from calibtest import study
from calibtest.study import _Task, _one_dataset

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "vignettes" / "results"


def time_methods(repeats: int = 20) -> None:
    print(f"One data set at n = 1000, 500 resamples (median of {repeats}; wall / CPU in ms):")
    print(f"{'setting':>8} {'method':>12} {'wall':>8} {'cpu':>8}")
    tcal = "tcal" in study.available_methods()
    for s in (1, 2, 3):
        methods = ("adjusted", "bootstrap", "subsampling", "hulc") + (("tcal",) if tcal and s < 3 else ())
        B = study.PAPER_BINS[1000][s]
        beta = float(sim.paper_betas(s)[10])
        total_wall = total_cpu = 0.0
        for m in methods + ("data only",):
            ms = () if m == "data only" else (m,)
            task = _Task(s, study.beta_key(beta), beta, 0, 1, 1000, B, study.PAPER_TARGETS[s], 0.1,
                         ms if ms else ("adjusted",), 500, 1000, 0)
            walls, cpus = [], []
            for i in range(repeats):
                w0, c0 = time.perf_counter(), time.process_time()
                _one_dataset(task, i)
                walls.append(time.perf_counter() - w0)
                cpus.append(time.process_time() - c0)
            wall, cpu = statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3
            label = "adjusted+data" if m == "data only" else m
            if m == "data only":
                continue
            total_wall += wall
            total_cpu += cpu
            print(f"{s:>8} {label:>12} {wall:8.2f} {cpu:8.2f}")
        print(f"{s:>8} {'all':>12} {total_wall:8.2f} {total_cpu:8.2f}")


def full_study(n_datasets: int, n_jobs: int) -> None:
    methods = study.available_methods()
    print(f"\nWhole n = 1000 study: 3 settings x 21 betas x {n_datasets} data sets, methods {methods}, "
          f"500 resamples, {n_jobs} workers")
    t0 = time.perf_counter()
    out = study.run_study(n=1000, n_datasets=n_datasets, alpha=0.1, methods=methods, n_resamples=500,
                          seed=20240601, n_jobs=n_jobs, chunk_size=25)
    wall = time.perf_counter() - t0
    print(f"wall time: {wall:.1f} s = {wall / 60:.2f} min"
          + (f"  (extrapolated to 1000 data sets: {wall * 1000 / n_datasets / 60:.2f} min)"
             if n_datasets != 1000 else ""))
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "study_n1000" if n_datasets == 1000 else f"study_n1000_d{n_datasets}"
    out.to_csv(RESULTS / f"{name}.csv", index=False)
    meta = {"n": 1000, "n_datasets": n_datasets, "alpha": 0.1, "methods": list(methods), "n_resamples": 500,
            "seed": 20240601, "n_bins": study.PAPER_BINS[1000], "wall_seconds": wall, "n_jobs": n_jobs,
            "load_average_after": os.getloadavg()}
    (RESULTS / f"{name}.json").write_text(json.dumps(meta, indent=1))
    print(f"saved {RESULTS / (name + '.csv')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="also run the whole n = 1000 study")
    parser.add_argument("--datasets", type=int, default=1000, help="data sets per beta in --full")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes in --full")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    time_methods(args.repeats)
    if args.full:
        full_study(args.datasets, args.jobs)


if __name__ == "__main__":
    main()
