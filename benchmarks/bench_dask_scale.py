"""The 10^8-row benchmark: ``calib_ci`` and ``calib_test`` on a Parquet file read by a 2-worker Dask cluster.

Writes a binary Parquet file of ``--rows`` rows (default 10^8; ``p`` ~ Beta(2, 5) float64 and a calibrated
label ``y`` ~ Bernoulli(p), int8) in row groups of ``--row-group`` rows, one group at a time (the writer
never holds the data), under a temporary directory in /tmp (``--dir``), and deletes it afterwards unless
``--keep``.  Then it starts a ``distributed.LocalCluster`` of ``--workers`` worker processes with one thread
each, and runs, on ``dd.read_parquet(path, split_row_groups=True)`` (one partition per row group)::

    calib_ci("y ~ p", data=ddf)
    calib_test("y ~ p", data=ddf, rng=1)      # default options: adaptive grid, 999 draws

printing the wall time of each, the CPU seconds each worker used, and the peak resident set size of each
worker during each call: a thread
samples every worker's RSS (``client.run(psutil.Process().memory_info().rss)``) every ``--sample``
seconds.  Target: ``calib_test`` at 10^8 rows under 10 minutes.

Run: ``python benchmarks/bench_dask_scale.py`` (writes ``benchmarks/results/bench_dask_scale.txt``);
``--rows 2e6`` for a quick check (written to the same file only with ``--record``).
"""
from __future__ import annotations

import argparse
import logging
import os
import platform
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "bench_dask_scale.txt"
SEED = 20261125


def write_parquet(path: Path, rows: int, row_group: int) -> float:
    """Write the binary file group by group; returns the seconds taken."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    schema = pa.schema([("p", pa.float64()), ("y", pa.int8())])
    rng = np.random.default_rng(SEED)
    t0 = time.perf_counter()
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, row_group):  # one row group in memory at a time
            m = min(row_group, rows - start)
            p = rng.beta(2.0, 5.0, m)
            y = (rng.random(m) < p).astype(np.int8)
            writer.write_table(pa.table({"p": p, "y": y}, schema=schema), row_group_size=row_group)
    return time.perf_counter() - t0


class RssSampler:
    """Peak RSS of every worker of ``client`` while the ``with`` block runs (sampled every ``every`` s)."""

    def __init__(self, client, every: float):
        self.client, self.every = client, every
        self.peak: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        import psutil
        rss = self.client.run(lambda: psutil.Process().memory_info().rss)
        for worker, value in rss.items():
            self.peak[worker] = max(self.peak.get(worker, 0), int(value))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._sample()
            except Exception:  # a worker busy past the timeout: skip this sample
                pass
            self._stop.wait(self.every)

    def __enter__(self) -> "RssSampler":
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def text(self) -> str:
        return ", ".join(f"{v / 2**20:.0f}" for v in sorted(self.peak.values())) + " MiB"


def worker_cpu(client) -> dict:
    """CPU seconds (user + system) each worker process has used so far."""
    import psutil

    def used() -> float:
        t = psutil.Process().cpu_times()
        return t.user + t.system
    return client.run(used)


def cpu_text(before: dict, after: dict) -> str:
    return ", ".join(f"{after[w] - before[w]:.0f}" for w in sorted(after)) + " CPU s"


def main() -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=1e8)
    ap.add_argument("--row-group", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sample", type=float, default=1.0, help="seconds between RSS samples")
    ap.add_argument("--dir", default="/tmp", help="where the temporary directory of the file goes")
    ap.add_argument("--keep", action="store_true", help="keep the Parquet file")
    ap.add_argument("--record", action="store_true", help="write the results file even for --rows < 1e8")
    args = ap.parse_args()
    rows = int(args.rows)

    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    import calibtest as ct

    lines = [f"bench_dask_scale: {rows:,} binary rows (p ~ Beta(2, 5), calibrated), row groups of "
             f"{args.row_group:,}; calibtest {ct.__version__}, numpy {np.__version__}, "
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
             f"load average {os.getloadavg()[0]:.1f} at the start"]

    def say(text: str) -> None:
        lines.append(text)
        print(text, flush=True)

    print(lines[0], flush=True)
    tmpdir = tempfile.mkdtemp(prefix="calibtest_dask_", dir=args.dir)
    path = Path(tmpdir) / f"binary_{rows}.parquet"
    try:
        seconds = write_parquet(path, rows, args.row_group)
        say(f"write: {seconds:7.1f} s, {path.stat().st_size / 2**30:.2f} GiB")
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
        client = Client(cluster)
        try:
            client.run(lambda: __import__("calibtest.streams.multiscale") and __import__("pyarrow.parquet"))
            ddf = dd.read_parquet(str(path), columns=["p", "y"], split_row_groups=True)
            say(f"cluster: {args.workers} workers x 1 thread, {ddf.npartitions} partitions")
            cpu0 = worker_cpu(client)
            with RssSampler(client, args.sample) as rss:
                t0 = time.perf_counter()
                ci = ct.calib_ci("y ~ p", data=ddf)
                wall = time.perf_counter() - t0
            cpu1 = worker_cpu(client)
            say(f"calib_ci  : {wall:7.1f} s wall, workers {cpu_text(cpu0, cpu1)}; worker peak RSS {rss.text()}; "
                f"n = {ci.n:,}, "
                f"B = {ci.n_bins}, T = {ci.estimate:.4g}, CI [{ci.ci_lower:.3g}, {ci.ci_upper:.3g}]")
            with RssSampler(client, args.sample) as rss:
                t0 = time.perf_counter()
                res = ct.calib_test("y ~ p", data=ddf, rng=1)
                wall = time.perf_counter() - t0
            cpu2 = worker_cpu(client)
            verdict = "under" if wall < 600 else "OVER"
            say(f"calib_test: {wall:7.1f} s wall ({verdict} the 10-minute target), workers {cpu_text(cpu1, cpu2)} "
                f"(on 2 free cores the wall time would be about the larger); worker peak RSS {rss.text()}; "
                f"{res.n_draws} draws, {len(res.n_bins)} scales {list(res.n_bins)}, p = {res.pvalue}")
        finally:
            client.close()
            cluster.close()
    finally:
        if args.keep:
            print(f"kept {path}")
        else:
            shutil.rmtree(tmpdir)
    say(f"load average at the end {os.getloadavg()[0]:.1f} (a shared 2-core machine: other sessions' jobs "
        f"ran alongside, so wall times are upper bounds)")
    if rows >= 10**8 or args.record:
        OUT.parent.mkdir(exist_ok=True)
        OUT.write_text("\n".join(lines) + "\n")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
