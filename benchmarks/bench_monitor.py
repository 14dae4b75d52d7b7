"""Benchmark of ``calibtest.CalibrationMonitor``: update cost per row, memory against stream length, state size.

* Update cost: one ``update(y=, probs=)`` of a calibrated binary batch (p ~ Beta(2, 5)) at 10^3 ... 10^6 rows,
  CPU time (``time.process_time``, little affected by other jobs) per row, best of 3 (after a first look,
  which also computes the RA-CUSUM thresholds: timed apart).
* The first look's thresholds: the first update of a 10^5-row batch against the next three, and of a 50-row
  batch (where the Brook-Evans chain is solved for each chart) with one BLAS thread and with the default
  BLAS threads (``threadpoolctl``).
* Memory: the monitor's state (its JSON) after 10, 100 and 1,000 looks, with the default ``history=1000`` and
  with ``history=10``; and the peak ``tracemalloc`` of one 10^5-row look after 10 and after 1,000 looks
  (the same: no row is kept).
* State file size after 10, 100, 1,000 looks (history 1000 and 10).
* Files: Parquet batches streamed by ``update(path)`` (``--rows`` rows in ``--files`` files): the first file
  (which also computes the RA-CUSUM thresholds) timed apart from the others, rows per CPU second and per wall
  second, and the extrapolated time of the issue's target (10^8 rows in 1,000 files of 10^5 rows), with the
  machine's load average.

Run: ``PYTHONPATH=. python benchmarks/bench_monitor.py [--rows 10000000 --files 100]`` (writes
``benchmarks/results/bench_monitor.txt``).
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

import calibtest as ct

OUT = Path(__file__).with_name("results") / "bench_monitor.txt"


def batch(rng, n):
    p = rng.beta(2, 5, n)
    return (rng.random(n) < p).astype(np.int8), p


def update_cost(lines):
    rng = np.random.default_rng(0)
    mon = ct.CalibrationMonitor()
    y, p = batch(rng, 1000)
    t0 = time.process_time()
    mon.update(y=y, probs=p)
    lines.append(f"first look (1,000 rows, RA-CUSUM thresholds computed): {time.process_time() - t0:.2f} s CPU")
    lines.append("rows per look | CPU s per look (best of 3) | CPU ns per row")
    for n in (10 ** 3, 10 ** 4, 10 ** 5, 10 ** 6):
        y, p = batch(rng, n)
        best = min(_timed(mon, y, p) for _ in range(3))
        lines.append(f"{n:>13,} | {best:.4f} | {best / n * 1e9:.0f}")


def _timed(mon, y, p):
    t0 = time.process_time()
    mon.update(y=y, probs=p)
    return time.process_time() - t0


def first_looks(lines):
    """CPU of a first look (the thresholds are computed from its rows) against the looks after it."""
    from threadpoolctl import threadpool_info, threadpool_limits

    rng = np.random.default_rng(3)
    mon = ct.CalibrationMonitor()
    first = _timed(mon, *batch(rng, 10 ** 5))
    later = [_timed(mon, *batch(rng, 10 ** 5)) for _ in range(3)]
    lines.append(f"first look of 100,000 rows: {first:.2f} s CPU (thresholds computed); the next 3 looks "
                 f"{min(later):.2f}-{max(later):.2f} s CPU")
    default_threads = max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"), default=1)
    for threads in (1, default_threads):
        with threadpool_limits(limits=threads, user_api="blas"):
            mon = ct.CalibrationMonitor()
            cpu = _timed(mon, *batch(rng, 50))
        charts = len(mon.result().ra_thresholds)
        lines.append(f"first look of 50 rows (the chain solved for each of {charts} charts), {threads} BLAS "
                     f"thread(s): {cpu:.2f} s CPU, {cpu / charts:.2f} s per chart")


def memory(lines):
    rng = np.random.default_rng(1)
    lines.append("looks | state JSON bytes (history 1000) | (history 10) | peak tracemalloc of a 10^5-row look")
    mons = {1000: ct.CalibrationMonitor(history=1000), 10: ct.CalibrationMonitor(history=10)}
    done = 0
    for looks in (10, 100, 1000):
        for _ in range(looks - done):
            y, p = batch(rng, 100)
            for m in mons.values():
                m.update(y=y, probs=p)
        done = looks
        y, p = batch(rng, 10 ** 5)
        probe = mons[10].copy()
        tracemalloc.start()
        probe.update(y=y, probs=p)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        sizes = [len(json.dumps(m.to_json(), separators=(",", ":"))) for m in mons.values()]
        lines.append(f"{looks:>5} | {sizes[0]:,} | {sizes[1]:,} | {peak / 2 ** 20:.1f} MiB")


def files(lines, rows, n_files):
    rng = np.random.default_rng(2)
    per = rows // n_files
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(n_files):
            y, p = batch(rng, per)
            path = Path(tmp) / f"batch{i:04d}.parquet"
            pd.DataFrame({"y": y, "p": p}).to_parquet(path)
            paths.append(path)
        mon = ct.CalibrationMonitor("y ~ p")
        t0, c0 = time.perf_counter(), time.process_time()
        mon.update(paths[0])  # the first look also computes the RA-CUSUM thresholds from its rows
        first_wall, first_cpu = time.perf_counter() - t0, time.process_time() - c0
        t0, c0, load0 = time.perf_counter(), time.process_time(), os.getloadavg()[0]
        for path in paths[1:]:
            mon.update(path)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        state = Path(tmp) / "state.json"
        mon.save(state)
        size = state.stat().st_size
    rest = rows - per
    lines.append(f"{rows:,} rows in {n_files} Parquet files of {per:,} rows (binary, y ~ p), one process:")
    lines.append(f"  first file: {first_wall:.1f} s wall, {first_cpu:.1f} s CPU (the RA-CUSUM thresholds "
                 f"computed from its {per:,} rows included)")
    lines.append(f"  the other {n_files - 1} files: {wall:.1f} s wall, {cpu:.1f} s CPU: {rest / cpu:,.0f} rows per "
                 f"CPU second, {rest / wall:,.0f} rows per wall second; state file after {n_files} looks: "
                 f"{size:,} bytes")
    total_cpu = first_cpu + (1e8 - per) / rest * cpu
    lines.append(f"extrapolated to 10^8 rows in 1,000 files of 10^5: {total_cpu:.0f} s of CPU (first file + "
                 f"999 files at the measured CPU rate) on one core (target: < 60 s on 2 cores); at the measured "
                 f"wall-clock rate {per / per * first_wall + (1e8 - per) / rest * wall:.0f} s wall on this shared "
                 f"machine")
    lines.append(f"machine load average (1 min) at the start of the timed files: {load0:.1f}, at the end: "
                 f"{os.getloadavg()[0]:.1f} (2 cores shared with other jobs: wall time > CPU time when they run)")


def main(rows, n_files):
    lines = [f"# bench_monitor: CalibrationMonitor; {os.cpu_count()} CPUs, load average (1 min) at the start "
             f"{os.getloadavg()[0]:.1f}", ""]
    for part in (update_cost, first_looks, memory):
        part(lines)
        lines.append("")
    files(lines, rows, n_files)
    text = "\n".join(lines) + "\n"
    OUT.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=100)
    args = parser.parse_args()
    main(args.rows, args.files)
