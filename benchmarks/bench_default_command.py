"""Benchmark of the default commands on a Parquet file (issue 36, point 1).

``calibtest ci FILE --formula "y ~ p"`` (the interval and the whole evidence table: the multi-scale test,
Hosmer-Lemeshow, Spiegelhalter, CITL and slope, the bin sensitivity) and ``calibtest test FILE --formula
"y ~ p"`` are run as a user runs them, each in a fresh process, on binary predictions p ~ Beta(2, 5) with
outcomes from p^1.1 (mildly miscalibrated) written to Parquet (row groups of 250,000 rows).  The default
``null="auto"`` of the multi-scale test takes the Gaussian null of the cell sums at n >= 10^6
(:mod:`calibtest.core.gaussian_null`); ``calibtest test --null monte-carlo`` draws every row's label, the
null before this change, for the verdict and the time it costs (at the sizes given by ``--mc-rows``).
Wall clock and the child's CPU time (user + system, from ``resource.getrusage(RUSAGE_CHILDREN)``) are
printed with the load average before and after each run.

The ``ci`` line also gives the evidence table's CITL and slope rows (estimate and interval as printed).
``--file PATH`` times an existing Parquet file of the one size given by ``--rows`` (written by this
script's ``_write``, for instance beforehand under ``nice``) instead of writing one; ``--baseline DIR``
runs each command a second time with ``PYTHONPATH=DIR`` (an export of an earlier commit, e.g. ``git
archive REV | tar -x -C DIR``), the lines marked ``before``, for the times and the output of both on the
same machine at the same load.

Run: ``python benchmarks/bench_default_command.py [--rows 1e6,1e7,3e7] [--mc-rows 1e6,1e7] [--file PATH]
[--baseline DIR]`` (writes ``benchmarks/results/bench_default_command.txt``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(__file__).resolve().parent / "results" / "bench_default_command.txt"
ROOT = Path(__file__).resolve().parent.parent


def _write(path: str, n: int) -> None:
    """n rows in blocks of 10^6 (bounded memory), row groups of 250,000."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    g = np.random.default_rng(0)
    writer = None
    for start in range(0, n, 1_000_000):  # blocks of rows
        m = min(1_000_000, n - start)
        p = g.beta(2, 5, m)
        table = pa.Table.from_pandas(pd.DataFrame({"y": (g.random(m) < p ** 1.1).astype(np.int8), "p": p}),
                                     preserve_index=False)
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table, row_group_size=250_000)
    writer.close()


def _run(args: list, root: Path = ROOT) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, stdout) of ``python -m calibtest.cli ARGS`` with the package at ``root``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=str(root), CI="1")  # no progress bar in the timed runs
    # run in ``root``: ``python -m`` puts the working directory first on sys.path, before PYTHONPATH
    out = subprocess.run([sys.executable, "-m", "calibtest.cli", *args], capture_output=True, text=True, env=env,
                         check=True, cwd=str(root)).stdout
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out


def _result_text(cmd: list, out: str) -> str:
    """The verdict a command printed: the test's null, p-value and decision; for ``ci`` also CITL and slope."""
    if "--json" in cmd:
        res = json.loads(out)
        return f"null={res['null']} p={res['pvalue']:.4g} reject={res['reject']}"
    # "multi-scale test STAT P VERDICT", "CITL 95% CI EST [LO, HI] VERDICT": the words after the row's name
    rows = {ln.split()[0]: " ".join(ln.split()[2 if ln.startswith("multi") else 3:]) for ln in out.splitlines()
            if ln.startswith(("multi-scale test", "CITL", "slope"))}
    null = "gaussian" if "Gaussian null of the cell sums" in out else "monte-carlo"
    return (f"null={null} {rows.get('multi-scale', '')}; CITL {rows.get('CITL', '')}; "
            f"slope {rows.get('slope', '')}")


def _sizes(text: str) -> list[int]:
    return [int(float(v)) for v in text.split(",") if v]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="1e6,1e7,3e7")
    ap.add_argument("--mc-rows", default="1e6,1e7")
    ap.add_argument("--file", default=None, help="an existing Parquet file of the one size --rows gives")
    ap.add_argument("--baseline", default=None, help="also run each command with PYTHONPATH=DIR ('before')")
    args = ap.parse_args(argv)
    mc_rows = set(_sizes(args.mc_rows))
    sizes = _sizes(args.rows)
    if args.file is not None and len(sizes) != 1:
        ap.error("--file needs one size in --rows (the file's rows)")
    roots = [("", ROOT)] + ([(" (before)", Path(args.baseline))] if args.baseline else [])
    lines = [f"calibtest ci / test FILE --formula 'y ~ p' (binary, p ~ Beta(2, 5), y from p^1.1, Parquet); "
             f"{platform.machine()}, {os.cpu_count()} cores; wall and CPU (user + system) of the command's process",
             f"{'command':<44}{'n':>10}{'wall s':>9}{'CPU s':>9}  {'load before/after':<18} result"]
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            path = args.file or os.path.join(tmp, "rows.parquet")
            if args.file is None:
                _write(path, n)
            runs = [("ci FILE", ["ci", path, "--formula", "y ~ p"]),
                    ("test FILE", ["test", path, "--formula", "y ~ p", "--json"])]
            if n in mc_rows:
                runs.append(("test FILE --null monte-carlo",
                             ["test", path, "--formula", "y ~ p", "--json", "--null", "monte-carlo"]))
            for (name, cmd), (mark, root) in ((run, root) for run in runs for root in roots):
                load0 = os.getloadavg()[0]
                wall, cpu, out = _run(cmd, root)
                load1 = os.getloadavg()[0]
                lines.append(f"{name + mark:<44}{n:>10}{wall:>9.2f}{cpu:>9.2f}  {load0:>5.2f} / {load1:<9.2f} "
                             f"{_result_text(cmd, out)}")
                print(lines[-1], flush=True)
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
