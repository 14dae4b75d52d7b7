"""Benchmark: the resampling baselines and the paper's n = 1000 simulation study.

Prints
1. the time of one data set's worth of each method at n = 1000 (the paper's
   supplement configuration: settings 1-2 top-1 with B = 50, setting 3
   top-1-to-2 with B = 20; 500 resamples; T-Cal 1000 draws), wall and CPU
   time, median of repeats, at the middle beta of each setting;
2. the CPU time per data set of the study's two runs on a sample of its grid
   (``--grid`` data sets at every beta of every setting: T-Cal stops drawing
   once its decision is known, so its cost depends on beta), and from it the
   wall time of the whole study on 2 idle cores (CPU / 2);
3. with ``--full``: the wall and CPU time of the whole n = 1000 study (3
   settings x 21 betas x 1000 data sets x every interval method, 500
   resamples, 2 worker processes), then of T-Cal with 1000 Monte Carlo draws
   on the 42,000 data sets of settings 1-2, and the sum (target: under 10
   minutes in all on a 2-core machine).  This is the n = 1000 part of
   ``vignettes/simulation_study.py`` and shares its cache
   (``vignettes/results/study_n1000.csv`` and ``study_n1000_tcal.csv``, each
   with a JSON sidecar of the parameters, the wall and the CPU time), or
   writes to ``--results``; ``--rerun`` recomputes them.

Usage::

    python benchmarks/bench_study.py            # per-method timings and the grid sample
    python benchmarks/bench_study.py --full     # + the whole study (about 10 min on 2 idle cores)
    python benchmarks/bench_study.py --full --datasets 20 --results /tmp/study   # a 2% version elsewhere
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path


from calibtest import simulation as sim
from calibtest.simulation import study
from calibtest.simulation.study import _Task, _one_dataset

ROOT = Path(__file__).resolve().parents[1]


def _median_ms(task, repeats):
    walls, cpus = [], []
    for i in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        _one_dataset(task, i)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3


def time_methods(repeats: int = 20) -> float:
    """Per-method cost of one data set; returns the mean CPU ms per data set over the settings."""
    print(f"One data set at n = 1000, 500 resamples: median of {repeats} repeats, ms "
          "(method rows: increment over drawing, binning and T)")
    print(f"{'setting':>8} {'method':>22} {'wall':>8} {'cpu':>8}")
    tcal = "tcal" in study.available_methods()
    per_set, tcal_cpu = [], []
    for s in (1, 2, 3):
        methods = ("adjusted", "bootstrap", "subsampling", "hulc") + (("adjusted_full",) if s < 3 else ()) \
            + (("tcal",) if tcal and s < 3 else ())
        B = study.PAPER_BINS[1000][s]
        beta = float(sim.paper_betas(s)[10])

        def task(ms):
            return _Task(s, study.beta_key(beta), beta, 0, 1, 1000, B, study.PAPER_TARGETS[s], 0.1, ms,
                         500, 1000, 0)

        base_wall, base_cpu = _median_ms(task(()), repeats)
        print(f"{s:>8} {'data, bins, T':>22} {base_wall:8.2f} {base_cpu:8.2f}")
        tot_wall, tot_cpu = base_wall, base_cpu
        for m in methods:
            wall, cpu = _median_ms(task((m,)), repeats)
            print(f"{s:>8} {m:>22} {wall - base_wall:8.2f} {cpu - base_cpu:8.2f}")
            if m == "tcal":
                tcal_cpu.append(cpu - base_cpu)
                continue
            tot_wall += wall - base_wall
            tot_cpu += cpu - base_cpu
        print(f"{s:>8} {'interval methods, all':>22} {tot_wall:8.2f} {tot_cpu:8.2f}")
        per_set.append(tot_cpu)
    mean_cpu = sum(per_set) / 3
    est = 3 * 21 * 1000 * mean_cpu / 1e3 / 2 / 60
    print(f"Interval methods, CPU per data set (mean over settings): {mean_cpu:.1f} ms -> the n = 1000 study "
          f"(63,000 data sets) on 2 idle cores: about {est:.1f} min")
    if tcal_cpu:
        t = sum(tcal_cpu) / len(tcal_cpu)
        print(f"T-Cal (1000 draws), CPU per data set: {t:.1f} ms -> settings 1-2 x 21 betas x 1000 data sets on "
              f"2 idle cores: about {2 * 21 * 1000 * t / 1e3 / 2 / 60:.1f} min more")
    return mean_cpu


#: The two runs of the vignette's n = 1000 study: the interval methods on settings 1-3, then T-Cal
#: (with the adjusted test of full calibration on the same data sets) on settings 1-2.
RUNS = {"interval methods": ((1, 2, 3), ("adjusted", "bootstrap", "subsampling", "hulc", "subsampling_reflected",
                                          "adjusted_full")),
        "T-Cal": ((1, 2), ("adjusted_full", "tcal"))}


def time_grid(per_beta: int) -> dict:
    """CPU per data set of each run of the study, over its whole beta grid: ``per_beta`` data sets
    (numbers 0, 1, ...) at every beta of every setting, each run as the study runs it (data, bins,
    every method of the run); returns the extrapolated minutes of each run on 2 idle cores."""
    print(f"\nThe study's runs on a sample of its grid: {per_beta} data set(s) at each of the 21 betas of each "
          "setting, CPU ms per data set")
    minutes = {}
    for name, (settings, methods) in RUNS.items():
        cpu, count = 0.0, 0
        for s in settings:
            for beta in sim.paper_betas(s):
                beta = float(beta)
                task = _Task(s, study.beta_key(beta), beta, 0, per_beta, 1000, study.PAPER_BINS[1000][s],
                             study.PAPER_TARGETS[s], 0.1, methods, 500, 1000, 0)
                c0 = time.process_time()
                for i in range(per_beta):
                    _one_dataset(task, i)
                cpu += time.process_time() - c0
                count += per_beta
        per_set = cpu / count * 1e3
        minutes[name] = len(settings) * 21 * 1000 * per_set / 1e3 / 2 / 60
        print(f"{name:>17}: {per_set:6.2f} ms per data set -> {len(settings) * 21 * 1000:,} data sets on 2 idle "
              f"cores: about {minutes[name]:.1f} min")
    print(f"{'all':>17}: about {sum(minutes.values()):.1f} min on 2 idle cores")
    return minutes


def full_study(n_datasets: int, n_jobs: int, rerun: bool, results: Path | None = None) -> None:
    """The vignette's n = 1000 study (its cache is shared: ``vignettes/results/study_n1000*.csv``,
    or ``results`` when given)."""
    import sys
    sys.path.insert(0, str(ROOT / "vignettes"))
    import simulation_study as vignette
    if results is not None:
        vignette.RESULTS = results

    methods = ("adjusted", "bootstrap", "subsampling", "hulc", "subsampling_reflected", "adjusted_full")
    print(f"\nWhole n = 1000 study: 3 settings x 21 betas x {n_datasets} data sets, methods {methods}, "
          f"500 resamples, {n_jobs} workers; then T-Cal (1000 Monte Carlo draws) on settings 1-2")
    _, meta = vignette.main_study(1000, n_datasets, n_jobs, rerun)
    scale = 1000 / n_datasets
    parts = [("interval methods", meta["wall_seconds"], meta.get("cpu_seconds"))]
    if "tcal_wall_seconds" in meta:
        parts.append(("T-Cal", meta["tcal_wall_seconds"], meta.get("tcal_cpu_seconds")))
    cpus = [c for _, _, c in parts]
    parts.append(("all", sum(w for _, w, _ in parts), sum(cpus) if None not in cpus else None))
    for name, wall, cpu in parts:
        line = f"{name}: wall {wall:.1f} s = {wall / 60:.2f} min"
        if cpu is not None:
            line += f", CPU {cpu:.1f} s (CPU / 2 = {cpu / 120:.2f} min)"
        if n_datasets != 1000:
            line += f"; x {scale:g} for 1000 data sets: wall {wall * scale / 60:.2f} min" + (
                f", CPU / 2 {cpu * scale / 120:.2f} min" if cpu is not None else "")
        print(line)
    print(f"load average afterwards: {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="also run the whole n = 1000 study")
    parser.add_argument("--datasets", type=int, default=1000, help="data sets per beta in --full")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes in --full")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--grid", type=int, default=3, help="data sets per beta in the grid sample (0: none)")
    parser.add_argument("--rerun", action="store_true", help="recompute even when the vignette cache matches")
    parser.add_argument("--results", type=Path, default=None,
                        help="folder for the --full results instead of the vignette's cache (vignettes/results)")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    time_methods(args.repeats)
    if args.grid:
        time_grid(args.grid)
    if args.full:
        full_study(args.datasets, args.jobs, args.rerun, args.results)


if __name__ == "__main__":
    main()
