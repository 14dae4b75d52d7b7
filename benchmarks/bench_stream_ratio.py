"""The streamed interval against a plain pyarrow read plus the in-memory computation (issue 27: <= 1.25x).

A 10^7-row top-1 Parquet file (``bench_scale.write_parquet``: K = 10, row groups of 10^6) is timed three
ways in one process, interleaved, ``--repeat`` times each (best of, CPU and wall):

* read: a plain ``pyarrow.parquet.ParquetFile(pre_buffer=False).iter_batches`` of both columns into numpy;
* memory: ``calib_ci(y=..., probs=..., n_classes=10)`` on the arrays read;
* stream: ``calib_ci("correct ~ confidence", data=path, n_classes=10)`` (chunks of 10^6; the default null
  gathers the conditional null's sums);
* stream-asymptotic: the same with ``null="asymptotic"`` (no conditional null's sums), for what those sums cost
  per chunk.

Prints stream / (read + memory) for the CPU and the wall times.  Interleaving and best-of keep the ratio
meaningful on a shared machine, where single wall times move by 2-10x with the load.

Run: ``python benchmarks/bench_stream_ratio.py`` (writes ``benchmarks/results/bench_stream_ratio.txt``).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import FORMULA, K, write_parquet  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "bench_stream_ratio.txt"


def main() -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rows = int(args.rows)
    import pyarrow.parquet as pq

    import calibtest as ct
    tmpdir = tempfile.mkdtemp(prefix="calibtest_ratio_")
    path = Path(tmpdir) / "top1.parquet"
    try:
        write_parquet(path, rows)

        def read():
            pf = pq.ParquetFile(path, pre_buffer=False)
            conf, corr = [], []
            for batch in pf.iter_batches(batch_size=1_000_000, columns=["confidence", "correct"]):
                conf.append(batch.column(0).to_numpy())
                corr.append(batch.column(1).to_numpy())
            return np.concatenate(conf), np.concatenate(corr)

        conf, corr = read()
        ct.calib_ci(y=corr[:1000], probs=conf[:1000], n_classes=K)  # imports and first-call costs
        ct.calib_ci(FORMULA, data=str(path), n_classes=K, progress=False)
        steps = {"read": read, "memory": lambda: ct.calib_ci(y=corr, probs=conf, n_classes=K),
                 "stream": lambda: ct.calib_ci(FORMULA, data=str(path), n_classes=K, progress=False),
                 "stream-asymptotic": lambda: ct.calib_ci(FORMULA, data=str(path), n_classes=K, progress=False,
                                                          null="asymptotic")}
        times: dict[str, list] = {name: [] for name in steps}
        load0 = os.getloadavg()[0]
        for _ in range(args.repeat):  # interleaved repeats
            for name, step in steps.items():
                c0, w0 = time.process_time(), time.perf_counter()
                step()
                times[name].append((time.process_time() - c0, time.perf_counter() - w0))
    finally:
        shutil.rmtree(tmpdir)
    best = {name: (min(c for c, _ in v), min(w for _, w in v)) for name, v in times.items()}
    lines = [f"bench_stream_ratio: {rows:,} top-1 rows (K = {K}) from Parquet, best of {args.repeat} interleaved "
             f"runs; {os.cpu_count()} CPUs, load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"]
    for name, (cpu, wall) in best.items():
        lines.append(f"{name:17s} CPU {cpu:6.3f} s   wall {wall:6.3f} s")
    for i, kind in enumerate(("CPU", "wall")):
        ratio = best["stream"][i] / (best["read"][i] + best["memory"][i])
        lines.append(f"stream / (read + memory), {kind}: {ratio:.2f}x ({'within' if ratio <= 1.25 else 'OVER'} 1.25x)")
    chunks = -(-rows // 1_000_000)
    extra = [(best["stream"][i] - best["stream-asymptotic"][i]) / chunks * 1e3 for i in range(2)]
    lines.append(f"the conditional null's sums: {extra[0]:.1f} ms CPU, {extra[1]:.1f} ms wall per chunk of 10^6 rows "
                 f"(stream - stream-asymptotic, {chunks} chunks)")
    text = "\n".join(lines) + "\n"
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)
    print(text)
    return text


if __name__ == "__main__":
    main()
